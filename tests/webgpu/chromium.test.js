// The WebGPU backend in Debian's Chromium (SwiftShader WebGPU: --enable-unsafe-webgpu
// --use-webgpu-adapter=swiftshader, an http://127.0.0.1 page, navigator.gpu): init, forward and
// backward with CPU and GPU tensors, on problems made in the page and in Node from one seed;
// every result has Node's wasm SIMD bits (grad_value within tolerance, its bits counted); a
// destroyed device rejects with MSDA_WEBGPU_DEVICE_LOST.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { CHROMIUM, servePages } from '../web/browser.js';
import { sameBits } from './helpers.js';
import { assertClose } from '../js/helpers.js';
import { init } from '../../bindings/node.js';
import { PATIENCE_MS } from '../patience.js';

const ARGS = ['--headless', '--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];

// The same problems in the page and in Node: this text is evaluated in both.
const CASE_SOURCE = `
function makeCase(seed, options) {
  let s = seed;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const B = 2, Q = 12, H = 2, C = 5, P = 3, spatialShapes = [[5, 6], [2, 3], [1, 1]], NL = 3;
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  const blnc = options.valueLayout === 'BLNC', qhlp2 = options.samplingLocationsLayout === 'BQHLP2';
  const locs = fill(B * Q * H * NL * P * 2, () => r() * 1.4 - 0.2);
  locs[3] = NaN; locs[8] = Infinity; locs[13] = -1e30;
  const weights = fill(B * Q * H * NL * P, () => r() * 2 - 1);
  weights[5] = Infinity;
  return {
    value: { data: fill(B * L * H * C, () => r() * 2 - 1), shape: blnc ? [B, L, H, C] : [B, H, L, C] },
    spatialShapes,
    samplingLocations: { data: locs, shape: qhlp2 ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P] },
    attentionWeights: { data: weights, shape: [B, Q, H, NL, P] },
    gradOutput: { data: fill(B * Q * H * C, () => r() * 2 - 1), shape: [B, Q, H * C] },
    ...options,
  };
}`;
const OPTIONS = [
  { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'zeros' },
  { valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'border' },
];

const PAGE = `<!doctype html><meta charset="utf-8"><title>webgpu</title><link rel="icon" href="data:,">
<script type="module">
import { init } from '/bindings/browser.js';
${CASE_SOURCE}
const plain = (r) => Object.fromEntries(Object.entries(r).map(([k, t]) => [k, Array.from(t.data)]));
async function readBuffer(device, buffer, bytes) {
  const staging = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buffer, 0, staging, 0, bytes);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const out = Array.from(new Float32Array(staging.getMappedRange().slice(0)));
  staging.destroy();
  return out;
}
window.run = async (options) => {
  const msda = await init({ backend: 'webgpu' });
  const c = makeCase(7, options);
  const { gradOutput, ...args } = c;
  const forward = plain({ output: await msda.forward(args) });
  const backward = plain(await msda.backward(c));
  // GPU tensors in and out
  const d = msda.device;
  const up = (t) => {
    const buffer = d.createBuffer({ size: t.data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC });
    d.queue.writeBuffer(buffer, 0, t.data);
    return { buffer, shape: t.shape };
  };
  const out = await msda.forward({ ...args, value: up(c.value), attentionWeights: up(c.attentionWeights) }, { outputs: 'gpu' });
  const gpuOutput = await readBuffer(d, out.buffer, 4 * forward.output.length);
  const info = { backend: msda.backend, adapter: msda.adapterInfo, numerics: msda.numerics };
  const pending = msda.backward(c);
  d.destroy();
  let lost = null;
  try { await pending; } catch (e) { lost = { code: e.code, message: e.message }; }
  let later = null;
  try { await msda.forward(args); } catch (e) { later = e.code; }
  return { forward, backward, gpuOutput, info, lost, later };
};
window.ready = true;
</script>`;

let server, browser, origin, wasm;

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  ({ server, base: origin } = await servePages({ bodies: { '/page.html': PAGE } }));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  wasm = await init({ backend: 'wasm', simd: true });
});

after(async () => {
  await browser?.close();
  await new Promise((r) => (server ? server.close(r) : r()));
  wasm?.dispose();
});

test('Chromium (SwiftShader WebGPU): forward and backward with wasm SIMD\'s bits, GPU tensors, a destroyed device', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${origin}/page.html`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: PATIENCE_MS });
  const makeCase = new Function(`${CASE_SOURCE}; return makeCase;`)();
  for (const options of OPTIONS) {
    const got = await page.evaluate((o) => window.run(o), options);
    assert.equal(got.info.backend, 'webgpu');
    console.log(`# Chromium adapter ${JSON.stringify(got.info.adapter)}, numerics ${JSON.stringify(got.info.numerics)}`);
    const c = makeCase(7, options);
    const { gradOutput, ...args } = c;
    const want = { output: wasm.forward(args).data, ...Object.fromEntries(Object.entries(wasm.backward(c)).map(([k, t]) => [k, t.data])) };
    const exact = got.info.numerics.productsRounded;
    const all = { ...got.forward, ...got.backward };
    for (const [name, values] of Object.entries(all)) {
      const g = Float32Array.from(values);
      const same = sameBits(g, want[name]);
      console.log(`# ${JSON.stringify(options)} ${name}: ${same} of ${g.length} with wasm SIMD's bits`);
      if (exact && name !== 'gradValue') assert.equal(same, g.length, `${name} bits`);
      assertClose(g, want[name], name);
    }
    assert.equal(sameBits(Float32Array.from(got.gpuOutput), want.output), want.output.length, 'GPU tensors in and out');
    assert.equal(got.lost?.code, 'MSDA_WEBGPU_DEVICE_LOST', JSON.stringify(got.lost));
    assert.equal(got.later, 'MSDA_WEBGPU_DEVICE_LOST');
  }
  assert.deepEqual(errors, []);
  await page.close();
});
