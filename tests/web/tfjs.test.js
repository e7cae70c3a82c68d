// ms-deform-attn/tfjs in headless Chromium: a page imports tfjs-core's ESM bundle and
// tfjs-backend-cpu from node_modules (through an import map, as a user's page or bundler would
// resolve '@tensorflow/tfjs-core' and the package's own browser entry) and bindings/tfjs.js; the op's output and tf.grads equal
// Node's msda.forward/backward bits on the same inputs, and the layer trains (the loss falls).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { init } from '../../bindings/index.js';
import { CHROMIUM, servePages } from './browser.js';
import { PATIENCE_MS } from '../patience.js';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
const TFJS = {
  '/node_modules/@tensorflow/tfjs-core/dist/tf-core.fesm.js': 'node_modules/@tensorflow/tfjs-core/dist/tf-core.fesm.js',
  '/node_modules/@tensorflow/tfjs-backend-cpu/dist/tf-backend-cpu.fesm.js': 'node_modules/@tensorflow/tfjs-backend-cpu/dist/tf-backend-cpu.fesm.js',
};
// tfjs-backend-cpu's bundle imports seedrandom (a CommonJS package) for tf.multinomial only.
const SEEDRANDOM_STUB = 'export function alea() { throw new Error("seedrandom is not served to this test page"); }\n';

// The same inputs in the page and in Node: a small LCG, so nothing but this text is shared.
const CASE_SOURCE = `
function makeCase() {
  let s = 2024;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const B = 2, Q = 30, H = 2, C = 5, P = 3, spatialShapes = [[6, 7], [3, 4], [1, 1]], NL = 3;
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    value: { data: fill(B * L * H * C, () => r() * 2 - 1), shape: [B, L, H, C] },
    spatialShapes,
    samplingLocations: { data: fill(B * Q * H * NL * P * 2, () => r() * 1.2 - 0.1), shape: [B, Q, H, NL, P, 2] },
    attentionWeights: { data: fill(B * Q * H * NL * P, () => r()), shape: [B, Q, H, NL, P] },
    gradOutput: { data: fill(B * Q * H * C, () => r() * 2 - 1), shape: [B, Q, H * C] },
  };
}`;

const PAGE = `<!doctype html><meta charset="utf-8"><title>tfjs</title><link rel="icon" href="data:,">
<script type="importmap">
{ "imports": {
  "@tensorflow/tfjs-core": "/node_modules/@tensorflow/tfjs-core/dist/tf-core.fesm.js",
  "@tensorflow/tfjs-backend-cpu": "/node_modules/@tensorflow/tfjs-backend-cpu/dist/tf-backend-cpu.fesm.js",
  "seedrandom": "/seedrandom.js",
  "ms-deform-attn": "/bindings/browser.js"
} }
</script>
<script type="module">
${CASE_SOURCE}
const hex = (t) => Array.from(new Uint8Array(t.buffer, t.byteOffset, t.byteLength), (b) => b.toString(16).padStart(2, '0')).join('');
try {
  const tf = await import('@tensorflow/tfjs-core');
  await import('@tensorflow/tfjs-backend-cpu');
  const { msDeformAttn, MSDeformAttn, getMsda, ready } = await import('/bindings/tfjs.js');
  await ready();   // nothing is loaded at import
  await tf.setBackend('cpu');
  const c = makeCase();
  const t = (x) => tf.tensor(x.data, x.shape, 'float32');
  const [v, l, w, dy] = [c.value, c.samplingLocations, c.attentionWeights, c.gradOutput].map(t);
  const options = { spatialShapes: c.spatialShapes };
  const before = tf.memory().numTensors;
  const results = tf.tidy(() => {
    const out = msDeformAttn(v, l, w, options);
    const grads = tf.grads((a, b, d) => msDeformAttn(a, b, d, options))([v, l, w], dy);
    return [out, ...grads].map((x) => hex(x.dataSync()));
  });
  const leaked = tf.memory().numTensors - before;

  // A few Adam steps of the layer towards a teacher's output.
  const mse = tf.customGrad((y, target, save) => {
    const d = tf.sub(y, target);
    save([d]);
    return { value: tf.mean(tf.square(d)), gradFunc: (g, [d1]) => [tf.mul(g, tf.mul(d1, 2 / d1.size)), tf.zerosLike(d1)] };
  });
  const teacher = new MSDeformAttn({ d_model: 8, n_levels: 2, n_heads: 2, n_points: 2, seed: 1 });
  const student = new MSDeformAttn({ d_model: 8, n_levels: 2, n_heads: 2, n_points: 2, seed: 2 });
  const shapes = [[4, 4], [2, 2]];
  const query = tf.randomNormal([1, 6, 8], 0, 1, 'float32', 3), input = tf.randomNormal([1, 20, 8], 0, 1, 'float32', 4);
  const ref = tf.randomUniform([1, 6, 2, 2], 0.2, 0.8, 'float32', 5);
  const target = teacher.apply(query, ref, input, shapes);
  const optimizer = tf.train.adam(0.02);
  const losses = [];
  for (let i = 0; i < 60; i++) {
    const cost = optimizer.minimize(() => mse(student.apply(query, ref, input, shapes), target), true);
    losses.push(cost.dataSync()[0]);
    cost.dispose();
  }
  window.__tfjs = { results, leaked, losses, backend: tf.getBackend(), msdaBackend: getMsda().backend };
} catch (e) {
  window.__tfjs = { error: String(e && e.stack || e) };
}
</script>`;

let server, base, browser;

before(async () => {
  ({ server, base } = await servePages({ bodies: { '/page.html': PAGE, '/seedrandom.js': SEEDRANDOM_STUB }, files: TFJS }));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await new Promise((r) => server.close(r));
});

test('Chromium: the tfjs op gives Node\'s bits (output and tf.grads), leaves no tensor, and the layer trains', async () => {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.text()} ${m.location().url}`); });
  await page.goto(`${base}/page.html`);
  await page.waitForFunction(() => window.__tfjs !== undefined, null, { timeout: PATIENCE_MS });
  const r = await page.evaluate(() => window.__tfjs);
  await page.close();
  assert.equal(r.error, undefined, r.error);
  assert.deepEqual(problems, []);
  assert.equal(r.backend, 'cpu');
  assert.equal(r.leaked, 0, 'tf.tidy leaves no tensor');

  const msda = await init({ simd: r.msdaBackend === 'wasm' });
  const c = new Function(`${CASE_SOURCE}; return makeCase;`)()();
  const hex = (t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('hex');
  const { gradOutput, ...args } = c;
  const output = msda.forward(args);
  const g = msda.backward(c);
  const want = [output.data, g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data].map(hex);
  ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'].forEach((name, i) => {
    assert.ok(r.results[i] === want[i], `${name}: the page's bits are Node's`);
  });
  assert.ok(r.losses[59] < 0.2 * r.losses[0], `the layer trains in the page: loss ${r.losses[0]} -> ${r.losses[59]}`);
});
