// The page on a phone (390×844, touch, DPR 2) in Chromium: the code snippets keep their lines
// (a wrapped `//` comment reads as code; they scroll sideways instead), no table header or number
// cell wraps, and step 2's ring numbers cover neither one another nor any ring, whichever head,
// weights or state. Screenshots in build/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, openPage, screenshotPath, lineCounts } from './browser.js';

let env, page, problems;

before(async () => {
  env = await launch();
  ({ page, problems } = await openPage(env.browser, env.url, { width: 390, height: 844 }, { isMobile: true, hasTouch: true, deviceScaleFactor: 2 }));
  await page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = true; }));
});
after(async () => { if (env) await env.close(); });

test('390×844: every line of the code snippets stays one line, and the snippets scroll sideways instead', async () => {
  for (const id of ['use-snippet', 'layer-snippet']) {
    const [got] = await lineCounts(page, `#${id}`);
    const want = (await page.textContent(`#${id}`)).split('\n').length;
    assert.equal(got, want, `#${id}: ${want} lines of code drawn on ${got} lines`);
    const box = await page.evaluate((s) => { const e = document.querySelector(s); return { scroll: e.scrollWidth, client: e.clientWidth }; }, `#${id}`);
    assert.ok(box.scroll > box.client, `#${id} is wider than a phone, so it scrolls: ${JSON.stringify(box)}`);
  }
  await page.evaluate(() => document.getElementById('use-it').scrollIntoView());
  await page.screenshot({ path: screenshotPath('phone-390x844-use-it.png') });
});

test('390×844: no header or number of the page\'s tables wraps', async () => {
  const tables = ['#pull-table', '#points', '#loss-channels', '#query-table'];
  for (const t of tables) {
    for (const cells of [`${t} .hdr`, `${t} .mono`, `${t} .w`, `${t} .g`]) {
      const counts = await lineCounts(page, cells);
      const texts = await page.$$eval(cells, (e) => e.map((x) => x.textContent));
      const wrapped = texts.filter((t, k) => t.trim() !== '' && counts[k] !== 1);
      assert.deepEqual(wrapped, [], `${cells}: cells on more than one line`);
    }
  }
  assert.ok((await lineCounts(page, '#pull-table .hdr')).length === 5, 'the close-up\'s five headers were measured');
  await page.evaluate(() => document.getElementById('pull-table').scrollIntoView({ block: 'center' }));
  await page.screenshot({ path: screenshotPath('phone-390x844-step4-table.png') });
});

// Step 2's rings and their numbers as drawn (logical canvas units): a number's box meets no other
// number's box and no ring (its dark outline included, 3 units past the radius), inside the map.
async function ringClashes(label) {
  const rings = await page.evaluate(() => window.__msda.rings);
  assert.equal(rings.length, 12);
  const bad = [];
  const meets = (a, b) => Math.min(a.x + a.w, b.x + b.w) > Math.max(a.x, b.x) && Math.min(a.y + a.h, b.y + b.h) > Math.max(a.y, b.y);
  for (const r of rings) {
    const b = r.label;
    if (b.x < 0 || b.y < 0 || b.x + b.w > 320 || b.y + b.h > 240) bad.push(`${label}: level ${r.level} number ${r.point + 1} leaves the map`);
    for (const q of rings) {
      if (q.level !== r.level) continue;
      if (q.point > r.point && meets(b, q.label)) bad.push(`${label}: level ${r.level}, numbers ${r.point + 1} and ${q.point + 1} overlap`);
      const dx = Math.max(b.x - q.x, 0, q.x - b.x - b.w), dy = Math.max(b.y - q.y, 0, q.y - b.y - b.h);
      if (Math.hypot(dx, dy) < q.radius + 3) bad.push(`${label}: level ${r.level}, number ${r.point + 1} covers ring ${q.point + 1}`);
    }
  }
  return bad;
}

test('390×844: step 2\'s ring numbers cover neither one another nor a ring, for every head, raw weights and after 150 steps', async () => {
  await page.click('#reset');
  const bad = [];
  for (const head of ['0', '1', '2']) {
    await page.selectOption('#head', head);
    bad.push(...await ringClashes(`head ${head}`));
  }
  await page.selectOption('#head', '0');
  await page.evaluate(() => document.getElementById('pyramid').scrollIntoView());
  await page.screenshot({ path: screenshotPath('phone-390x844-step2.png') });
  await page.check('input[name=weight-mode][value=raw]');
  bad.push(...await ringClashes('raw weights'));
  await page.check('input[name=weight-mode][value=softmax]');
  // Descent gathers the points at the target, where their rings pile up.
  await page.evaluate(() => { for (let k = 0; k < 150; k++) document.getElementById('step').click(); });
  bad.push(...await ringClashes('150 steps'));
  await page.evaluate(() => document.getElementById('pyramid').scrollIntoView());
  await page.screenshot({ path: screenshotPath('phone-390x844-step2-150-steps.png') });
  assert.deepEqual(bad, []);
  await page.click('#reset');
  assert.deepEqual(problems, []);
});
