#!/usr/bin/env node
// Takes the README's screenshot of the page (web/screenshot.png) with headless Chromium:
// 1280×800, dark scheme, the playground after 150 gradient-descent steps from the start.
//   node tests/web/screenshot.js [OUT.png]
import path from 'node:path';
import { launch, openPage, ROOT } from './browser.js';

const out = path.resolve(process.argv[2] || path.join(ROOT, 'web', 'screenshot.png'));
const env = await launch();
try {
  const { page, problems } = await openPage(env.browser, env.url, { width: 1280, height: 800 }, { colorScheme: 'dark' });
  await page.evaluate(async () => {
    for (let k = 0; k < 150; k++) document.getElementById('step').click();
    const y = document.getElementById('playground').getBoundingClientRect().top + window.scrollY;
    window.scrollTo(0, y);
  });
  await page.screenshot({ path: out });
  if (problems.length) throw new Error(problems.join('\n'));
  console.log(`wrote ${path.relative(process.cwd(), out)} (loss ${await page.textContent('#loss')})`);
} finally {
  await env.close();
}
