// Wasm threads in headless Chromium: a cross-origin isolated page gets 2 threads (workers on a
// shared memory) with the bits of 1 thread and of Node; a page without isolation falls back to 1
// thread with one console notice and still computes; the demo page shows which. The pages are
// served by servePages (tests/web/browser.js) with the isolation headers under /iso/ and none
// under /plain/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { init } from '../../bindings/index.js';
import { CHROMIUM, servePages } from './browser.js';
import { PATIENCE_MS } from '../patience.js';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

// The same inputs in the page and in Node: a small LCG, so nothing but this text is shared.
const CASE_SOURCE = `
function makeCase() {
  let s = 12345;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const B = 1, Q = 2000, H = 3, C = 8, P = 4, spatialShapes = [[30, 40], [15, 20], [7, 9]], NL = 3;
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    args: {
      value: { data: fill(B * L * H * C, () => r() * 2 - 1), shape: [B, L, H, C] },
      spatialShapes,
      samplingLocations: { data: fill(B * Q * H * NL * P * 2, () => r() * 1.2 - 0.1), shape: [B, Q, H, NL, P, 2] },
      attentionWeights: { data: fill(B * Q * H * NL * P, () => r()), shape: [B, Q, H, NL, P] },
    },
    gradOutput: { data: fill(B * Q * H * C, () => r() * 2 - 1), shape: [B, Q, H * C] },
  };
}`;

const PAGE = `<!doctype html><meta charset="utf-8"><title>threads</title><link rel="icon" href="data:,">
<script type="module">
const notices = [];
const info = console.info;
console.info = (...a) => { notices.push(a.join(' ')); info.apply(console, a); };
${CASE_SOURCE}
const hex = (t) => Array.from(new Uint8Array(t.buffer, t.byteOffset, t.byteLength), (b) => b.toString(16).padStart(2, '0')).join('');
try {
  const { init } = await import('./bindings/index.js');
  const one = await init({ threads: 1 });
  const two = await init({ threads: 2 });
  const c = makeCase();
  const run = (m) => {
    const output = m.forward(c.args).data;
    const g = m.backward({ ...c.args, gradOutput: c.gradOutput });
    return [output, g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data].map(hex);
  };
  const a = run(one), b = run(two);
  const pool = two._backend.pool;
  const partsRun = pool ? pool.partsRun() : 0;
  // Parts are claimed: the spinning main thread may claim both before the worker wakes, so a
  // worker's part is waited for over a few more calls.
  for (let i = 0; pool && pool.workerParts() === 0 && i < 200; i++) two.forward(c.args);
  window.__threads = {
    isolated: globalThis.crossOriginIsolated === true,
    threads: two.threads,
    partsRun,
    workerParts: pool ? pool.workerParts() : 0,
    same: a.every((x, i) => x === b[i]),
    results: b,
    notices,
  };
} catch (e) {
  window.__threads = { error: String(e && e.stack || e) };
}
</script>`;

let server, base, browser;

before(async () => {
  ({ server, base } = await servePages({ bodies: { '/page.html': PAGE }, prefixes: { '/iso': ISOLATION, '/plain': {} } }));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await new Promise((r) => server.close(r));
});

async function open(mode) {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.text()} ${m.location().url}`); });
  await page.goto(`${base}/${mode}/page.html`);
  await page.waitForFunction(() => window.__threads !== undefined, null, { timeout: PATIENCE_MS });
  const result = await page.evaluate(() => window.__threads);
  await page.close();
  assert.equal(result.error, undefined, result.error);
  assert.deepEqual(problems, []);
  return result;
}

// What Node's wasm computes on the same inputs (threads 1).
async function nodeResults() {
  const makeCase = new Function(`${CASE_SOURCE}; return makeCase;`)();
  const c = makeCase();
  const msda = await init({ simd: true });
  const g = msda.backward({ ...c.args, gradOutput: c.gradOutput });
  const hex = (t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('hex');
  return [msda.forward(c.args).data, g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data].map(hex);
}

test('cross-origin isolated page: 2 threads, workers run parts, the bits of 1 thread and of Node', async () => {
  const r = await open('iso');
  assert.equal(r.isolated, true, 'the page is cross-origin isolated');
  assert.equal(r.threads, 2);
  assert.equal(r.partsRun, 6, 'the forward in 2 parts, the backward in 2 parts twice (zero, then walk)');
  assert.ok(r.workerParts >= 1, `the worker ran ${r.workerParts} parts`);
  assert.equal(r.same, true, 'threads 2 gives the bits of threads 1');
  assert.deepEqual(r.notices, []);
  const want = await nodeResults();
  ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'].forEach((name, i) => {
    assert.ok(r.results[i] === want[i], `${name}: the page's threads-2 bits equal Node's`);
  });
});

test('page without cross-origin isolation: 1 thread, one console notice, still computes', async () => {
  const r = await open('plain');
  assert.equal(r.isolated, false);
  assert.equal(r.threads, 1);
  assert.equal(r.workerParts, 0);
  assert.equal(r.partsRun, 0);
  assert.equal(r.same, true);
  assert.equal(r.notices.length, 1, r.notices.join('\n'));
  assert.match(r.notices[0], /^ms-deform-attn: using 1 thread instead of 2: the page is not cross-origin isolated/);
  const want = await nodeResults();
  assert.deepEqual(r.results, want);
});

// The page asks for threads: 'auto' (this machine's CPUs, 2 here).
test('the demo page shows its thread count: the CPUs when isolated, 1 (with the notice) when not', async () => {
  for (const mode of ['iso', 'plain']) {
    const page = await browser.newPage();
    const infos = [];
    const problems = [];
    page.on('console', (m) => {
      if (m.type() === 'info') infos.push(m.text());
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.text()} ${m.location().url}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    await page.goto(`${base}/${mode}/web/index.html`);
    await page.waitForFunction(() => window.__msda && window.__msda.ready, null, { timeout: PATIENCE_MS });
    const want = mode === 'plain' ? '1' : String(await page.evaluate(() => Math.min(navigator.hardwareConcurrency || 1, 64)));
    assert.equal(await page.locator('#threads').textContent(), want, `${mode}: the threads field`);
    assert.equal(String(await page.evaluate(() => window.__msda.threads)), want);
    assert.equal(infos.filter((t) => t.startsWith('ms-deform-attn: using 1 thread')).length, mode === 'plain' ? 1 : 0,
      infos.join('\n'));
    assert.deepEqual(problems.filter((p) => !p.includes('favicon')), []);
    await page.close();
  }
});
