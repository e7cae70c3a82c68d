#!/usr/bin/env node
// Takes the README's picture of the page with headless Chromium: 1280×800, dark scheme, the
// playground after 150 gradient-descent steps from the start, under step 5's words. Writes web/screenshot.png and
// docs/demo.webp (the picture the README shows and the package ships), encoded by Chromium.
//   node tests/web/screenshot.js [OUT.png [OUT.webp]]
import fs from 'node:fs';
import path from 'node:path';
import { launch, openPage, ROOT } from './browser.js';

const png = path.resolve(process.argv[2] || path.join(ROOT, 'web', 'screenshot.png'));
const webp = path.resolve(process.argv[3] || path.join(ROOT, 'docs', 'demo.webp'));
const env = await launch();
try {
  const { page, problems } = await openPage(env.browser, env.url, { width: 1280, height: 800 }, { colorScheme: 'dark' });
  await page.evaluate(async () => {
    for (let k = 0; k < 150; k++) document.getElementById('step').click();
    // From step 5's heading: the words, then the playground (Step/Play pinned at the bottom).
    const y = document.getElementById('h5-descent').getBoundingClientRect().top + window.scrollY;
    window.scrollTo(0, y - 12);
  });
  const shot = await page.screenshot({ path: png });
  if (problems.length) throw new Error(problems.join('\n'));
  const encoded = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = `data:image/png;base64,${b64}`;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    c.getContext('2d').drawImage(img, 0, 0);
    return c.toDataURL('image/webp', 0.6).split(',')[1];
  }, shot.toString('base64'));
  fs.writeFileSync(webp, Buffer.from(encoded, 'base64'));
  const rel = (f) => path.relative(process.cwd(), f);
  console.log(`wrote ${rel(png)} and ${rel(webp)} (${fs.statSync(webp).size} bytes; loss ${await page.textContent('#loss')})`);
} finally {
  await env.close();
}
