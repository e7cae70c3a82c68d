// A per-frame app in Chromium: how long each call of the decoder (300 queries on DETR's pyramid,
// tests/bench/cases.js) blocks the page's main thread, for each way of calling, against computing
// the same forward on the page (msda.forward). Each frame gives the call fresh locations and
// weights (a copy of the case's, as a model would make new ones); the value stays the same.
//
//   idle          a frame with no call (the fresh arrays made, nothing sent): subtracted from the rest
//   main          msda.forward(args) on the page
//   copy          await w.forward(args): every input structured-cloned to the worker
//   transfer      await w.forward(fresh, { transfer: true }): a fresh copy of the value each frame
//   prepared      await p.forward({ samplingLocations, attentionWeights }) (p = await w.prepare(...))
//   prepared+tr   the same with { transfer: true }
//
// The page's main-thread time is Chromium's own (CDP Performance.getMetrics' TaskDuration, the
// renderer main thread's tasks) over a round's frames, less idle's; rounds interleave the ways,
// and the table gives each round's ratio to `main` in that round. Not a test (docs/threads.md, "Per frame"):
//
//   node tests/bench/worker_frames.js [--rounds N] [--frames N] [--json]
import { chromium } from 'playwright-core';
import { CHROMIUM, servePages } from '../web/browser.js';
import { PATIENCE_MS } from '../patience.js';

const argv = process.argv.slice(2);
const option = (name, fallback) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : fallback);
const rounds = option('--rounds', 4), frames = option('--frames', 30);
const json = argv.includes('--json');
const WAYS = ['idle', 'main', 'copy', 'transfer', 'prepared', 'prepared+tr'];

const PAGE = `<!doctype html><meta charset="utf-8"><title>worker frames</title><script type="module">
import { init, initWorker } from '/bindings/browser.js';
import { makeCase } from '/cases.js';
const { args, problem } = makeCase('decoder');
const c = { value: args.value.data, samplingLocations: args.samplingLocations.data, attentionWeights: args.attentionWeights.data };
const msda = await init();
const w = await initWorker();
const p = await w.prepare(problem, { mode: 'forward' });
await p.forward({ value: c.value, samplingLocations: c.samplingLocations, attentionWeights: c.attentionWeights });
const fresh = () => ({ ...args, samplingLocations: { data: c.samplingLocations.slice(), shape: args.samplingLocations.shape },
  attentionWeights: { data: c.attentionWeights.slice(), shape: args.attentionWeights.shape } });
const reference = msda.forward(args);
const frameOf = {
  idle: async () => { fresh(); return reference; },
  main: async () => msda.forward(fresh()),
  copy: () => w.forward(fresh()),
  transfer: () => w.forward({ ...fresh(), value: { data: c.value.slice(), shape: args.value.shape } }, { transfer: true }),
  prepared: () => p.forward({ samplingLocations: c.samplingLocations.slice(), attentionWeights: c.attentionWeights.slice() }),
  'prepared+tr': () => p.forward({ samplingLocations: c.samplingLocations.slice(), attentionWeights: c.attentionWeights.slice() },
    { transfer: true }),
};
// One way's frames, one after the other as an app's animation frames; wall ms per frame.
window.runFrames = async (way, n) => {
  const t0 = performance.now();
  let out;
  for (let i = 0; i < n; i++) {
    out = await frameOf[way]();
    await new Promise((r) => requestAnimationFrame(r));
  }
  const ms = (performance.now() - t0) / n;
  const same = out.data.length === reference.data.length && out.data.every((x, i) => Object.is(x, reference.data[i]));
  return { ms, same };
};
window.__ready = true;
</script>`;

const { server, base } = await servePages({ bodies: { '/frames.html': PAGE }, files: { '/cases.js': 'tests/bench/cases.js' } });
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'] });
try {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(`${base}/frames.html`);
  await page.waitForFunction(() => window.__ready === true || null, null, { timeout: PATIENCE_MS }).catch((e) => {
    throw new Error(`the page did not start: ${problems.join('; ') || e.message}`);
  });
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Performance.enable');
  const taskSeconds = async () => (await cdp.send('Performance.getMetrics')).metrics.find((m) => m.name === 'TaskDuration').value;
  const rows = [];
  for (let round = 0; round < rounds; round++) {
    const row = {};
    for (const way of WAYS) {
      const before = await taskSeconds();
      const { ms, same } = await page.evaluate(([w, n]) => window.runFrames(w, n), [way, frames]);
      const busy = ((await taskSeconds()) - before) * 1000 / frames;
      if (!same) throw new Error(`${way}: the output differs from msda.forward's`);
      row[way] = { busy, ms };
    }
    rows.push(row);
  }
  if (json) {
    console.log(JSON.stringify({ frames, rounds, rows }));
  } else {
    console.log(`decoder (300 queries, DETR's pyramid), ${frames} frames a way a round, ${rounds} rounds interleaved, Chromium`);
    console.log("the call's main-thread ms per frame: the page's task time less idle's (a frame with no call), and its");
    console.log('ratio to main in that round | the page\'s task ms per frame | wall ms per frame');
    for (const way of WAYS) {
      const call = (r, x) => r[x].busy - r.idle.busy;
      const cells = rows.map((r) => `${call(r, way).toFixed(2)} (${(call(r, way) / call(r, 'main')).toFixed(3)}×)`);
      const tasks = rows.map((r) => r[way].busy.toFixed(2));
      const walls = rows.map((r) => r[way].ms.toFixed(1));
      const ratios = rows.map((r) => call(r, way) / call(r, 'main')).sort((a, b) => a - b);
      const median = (ratios[(ratios.length - 1) >> 1] + ratios[ratios.length >> 1]) / 2;
      console.log(`${way.padEnd(12)} median ${median.toFixed(3)}×: ${cells.join('  ')} | ${tasks.join(' ')} | ${walls.join(' ')}`);
    }
  }
} finally {
  await browser.close();
  await new Promise((r) => server.close(r));
}
