// ms-deform-attn/tfjs on tfjs-backend-webgl in headless Chromium (WebGL 2 through ANGLE on
// SwiftShader): a page imports tfjs-core's and tfjs-backend-webgl's ESM bundles (through an import
// map, as tests/web/tfjs.test.js does for tfjs-backend-cpu) and bindings/tfjs.js. Every input is
// computed on webgl (a tf.mul, so it lives in a texture, not in a CPU array; value has 1,760
// elements, past the 1,024 where tfjs-backend-webgpu's sync read returned zeros); the op's output
// and tf.grads, read back through another webgl op, equal Node's msda.forward/backward bits on the
// same inputs and are not zeros; the layer trains there. webgl failing to start fails the test:
// the page never falls back to cpu.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { init } from '../../bindings/index.js';
import { CHROMIUM, servePages } from './browser.js';
import { PATIENCE_MS } from '../patience.js';

// No --disable-gpu: WebGL runs on ANGLE's SwiftShader (Vulkan on the CPU).
const ARGS = ['--headless', '--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const TFJS = {
  '/node_modules/@tensorflow/tfjs-core/dist/tf-core.fesm.js': 'node_modules/@tensorflow/tfjs-core/dist/tf-core.fesm.js',
  '/node_modules/@tensorflow/tfjs-backend-webgl/dist/tf-backend-webgl.fesm.js': 'node_modules/@tensorflow/tfjs-backend-webgl/dist/tf-backend-webgl.fesm.js',
};

// The same inputs in the page and in Node: a small LCG, so nothing but this text is shared.
const CASE_SOURCE = `
function makeCase() {
  let s = 2025;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const B = 2, Q = 30, H = 2, C = 8, P = 3, spatialShapes = [[6, 7], [3, 4], [1, 1]], NL = 3;
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

const PAGE = `<!doctype html><meta charset="utf-8"><title>tfjs webgl</title><link rel="icon" href="data:,">
<script type="importmap">
{ "imports": {
  "@tensorflow/tfjs-core": "/node_modules/@tensorflow/tfjs-core/dist/tf-core.fesm.js",
  "@tensorflow/tfjs-backend-webgl": "/node_modules/@tensorflow/tfjs-backend-webgl/dist/tf-backend-webgl.fesm.js",
  "ms-deform-attn": "/bindings/browser.js"
} }
</script>
<script type="module">
${CASE_SOURCE}
const hex = (t) => Array.from(new Uint8Array(t.buffer, t.byteOffset, t.byteLength), (b) => b.toString(16).padStart(2, '0')).join('');
try {
  const tf = await import('@tensorflow/tfjs-core');
  await import('@tensorflow/tfjs-backend-webgl');
  const { msDeformAttn, MSDeformAttn, getMsda, ready } = await import('/bindings/tfjs.js');
  await ready();
  const ok = await tf.setBackend('webgl');
  if (!ok || tf.getBackend() !== 'webgl') throw new Error('tfjs-backend-webgl did not initialise: setBackend gave ' + ok + ', backend ' + tf.getBackend());
  const c = makeCase();
  // Computed on webgl: the values sit in a texture, and the op has to read them back from there.
  const onWebgl = (x) => tf.mul(tf.tensor(x.data, x.shape, 'float32'), 1);
  const [v, l, w, dy] = [c.value, c.samplingLocations, c.attentionWeights, c.gradOutput].map(onWebgl);
  const inTexture = [v, l, w, dy].map((x) => { const d = tf.backend().texData.get(x.dataId); return d.values == null && d.texture != null; });
  const options = { spatialShapes: c.spatialShapes };
  const before = tf.memory().numTensors;
  const results = tf.tidy(() => {
    const out = msDeformAttn(v, l, w, options);
    const grads = tf.grads((a, b, d) => msDeformAttn(a, b, d, options))([v, l, w], dy);
    // Read back through a webgl op: the results work as inputs to webgl's own kernels.
    return [out, ...grads].map((x) => hex(tf.mul(x, 1).dataSync()));
  });
  const leaked = tf.memory().numTensors - before;

  // A few Adam steps of the layer towards a teacher's output, all on webgl.
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
  for (let i = 0; i < 40; i++) {
    const cost = optimizer.minimize(() => mse(student.apply(query, ref, input, shapes), target), true);
    losses.push(cost.dataSync()[0]);
    cost.dispose();
  }
  window.__tfjs = { results, leaked, losses, inTexture, backend: tf.getBackend(), msdaBackend: getMsda().backend,
    float32: tf.env().getBool('WEBGL_RENDER_FLOAT32_ENABLED') };
} catch (e) {
  window.__tfjs = { error: String(e && e.stack || e) };
}
</script>`;

let server, base, browser;

before(async () => {
  ({ server, base } = await servePages({ bodies: { '/page.html': PAGE }, files: TFJS }));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await new Promise((r) => server.close(r));
});

test('Chromium, tfjs-backend-webgl: inputs in textures give Node\'s bits (output and tf.grads, never zeros), no tensor left, the layer trains', async () => {
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  // Chromium's one notice that a sync read (dataSync, the op's too) stalls the GPU is not a problem.
  const stall = /GL Driver Message \(OpenGL, Performance, [^)]*\): GPU stall due to ReadPixels/;
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && !stall.test(m.text())) problems.push(`${m.text()} ${m.location().url}`);
  });
  await page.goto(`${base}/page.html`);
  await page.waitForFunction(() => window.__tfjs !== undefined, null, { timeout: PATIENCE_MS });
  const r = await page.evaluate(() => window.__tfjs);
  await page.close();
  assert.equal(r.error, undefined, r.error);
  assert.deepEqual(problems, []);
  assert.equal(r.backend, 'webgl', 'the page ran on tfjs-backend-webgl, not a fallback');
  assert.equal(r.float32, true, 'SwiftShader renders float32 textures (else tfjs stores halves)');
  assert.deepEqual(r.inTexture, [true, true, true, true], 'the inputs lived in webgl textures, not CPU arrays');
  assert.equal(r.leaked, 0, 'tf.tidy leaves no tensor');

  const msda = await init({ simd: r.msdaBackend === 'wasm' });
  const c = new Function(`${CASE_SOURCE}; return makeCase;`)()();
  assert.ok(c.value.data.length >= 1152, 'value is as large as the case tfjs-backend-webgpu read as zeros');
  const hex = (t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength).toString('hex');
  const { gradOutput, ...args } = c;
  const output = msda.forward(args);
  const g = msda.backward(c);
  const outs = [output.data, g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data];
  ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'].forEach((name, i) => {
    assert.ok(outs[i].some((x) => x !== 0), `${name}: Node's result is not all zeros`);
    assert.ok(/[^0]/.test(r.results[i]), `${name}: the page's result is not all zeros`);
    assert.ok(r.results[i] === hex(outs[i]), `${name}: the page's bits are Node's`);
  });
  assert.equal(r.losses.length, 40);
  assert.ok(r.losses.every(Number.isFinite), `finite losses: ${r.losses}`);
  assert.ok(r.losses[39] < 0.2 * r.losses[0], `the layer trains on webgl: loss ${r.losses[0]} -> ${r.losses[39]}`);
});
