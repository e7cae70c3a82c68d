// ms-deform-attn/onnx in Chromium on onnxruntime-web's WebGPU EP (SwiftShader): the decoder
// fixture through createSession in a page, as a browser app imports it (an import map for ORT,
// protobufjs and the package), its block replaced and its output PyTorch's within SwiftShader's
// roundings.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { chromium } from 'playwright-core';
import { CHROMIUM, servePages } from '../web/browser.js';
import { parseNpz } from '../../bindings/cli/npz.js';
import { parseNpy } from '../../bindings/npy.js';
import { PATIENCE_MS } from '../patience.js';

const ARGS = ['--headless', '--no-sandbox', '--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const TOL = 1e-4;
const ORT = 'node_modules/onnxruntime-web/dist';

const imports = {
  'onnxruntime-web/webgpu': '/ort/ort.webgpu.bundle.min.js',
  'protobufjs/light.js': '/protobuf-light.js',
  'ms-deform-attn': '/bindings/browser.js',
};
const PAGE = `<!doctype html><meta charset="utf-8"><title>onnx</title><link rel="icon" href="data:,">
<script type="importmap">${JSON.stringify({ imports })}</script>
<script type="module">
import * as ort from 'onnxruntime-web/webgpu';
import { createSession } from '/bindings/onnx.js';
ort.env.wasm.numThreads = 1;
window.run = async (inputs) => {
  const bytes = new Uint8Array(await (await fetch('/fixtures/detr-decoder.onnx')).arrayBuffer());
  const session = await createSession(ort, bytes, { executionProviders: ['webgpu'] });
  try {
    const feeds = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, new ort.Tensor('float32', Float32Array.from(t.data), t.shape)]));
    const { hs } = await session.run(feeds);
    return { blocks: session.report.blocks.map((b) => ({ replaced: b.replaced, why: b.why })), hs: Array.from(hs.data), dims: hs.dims, location: hs.location };
  } finally {
    await session.release();
  }
};
window.ready = true;
</script>`;
// protobufjs/light ships CommonJS and a UMD bundle; a page takes the bundle's global.
const SHIM = "import '/pb/protobuf.min.js';\nexport default globalThis.protobuf;\n";

let server, browser, origin;

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  ({ server, base: origin } = await servePages({
    // .mjs is served as octet-stream, which a module script refuses: ORT's bundle as a body under .js.
    bodies: { '/page.html': PAGE, '/protobuf-light.js': SHIM, '/ort/ort.webgpu.bundle.min.js': readFileSync(`${ORT}/ort.webgpu.bundle.min.mjs`) },
    files: {
      // the bundle's own glue fetches its .wasm beside it
      '/ort/ort-wasm-simd-threaded.asyncify.wasm': `${ORT}/ort-wasm-simd-threaded.asyncify.wasm`,
      '/ort/ort-wasm-simd-threaded.jsep.wasm': `${ORT}/ort-wasm-simd-threaded.jsep.wasm`,
      '/pb/protobuf.min.js': 'node_modules/protobufjs/dist/light/protobuf.min.js',
      '/fixtures/detr-decoder.onnx': 'tests/fixtures/onnx/detr-decoder.onnx',
    },
  }));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  await browser?.close();
  await new Promise((r) => (server ? server.close(r) : r()));
});

test('Chromium (SwiftShader WebGPU): createSession on onnxruntime-web\'s WebGPU EP, the decoder\'s block replaced, PyTorch\'s output', async () => {
  const members = parseNpz(readFileSync(new URL('../fixtures/onnx/detr-decoder.npz', import.meta.url)), (b) => inflateRawSync(b));
  const read = (key) => parseNpy(members.get(`${key}.npy`).read());
  const inputs = Object.fromEntries(['tgt', 'query_pos', 'memory'].map((n) => { const a = read(n); return [n, { data: Array.from(a.data), shape: a.shape }]; }));
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.goto(`${origin}/page.html`);
  await page.waitForFunction(() => window.ready === true, null, { timeout: PATIENCE_MS });
  const got = await page.evaluate((x) => window.run(x), inputs);
  assert.deepEqual(got.blocks, [{ replaced: true, why: null }]);
  assert.deepEqual(got.dims, [2, 12, 64]);
  assert.equal(got.location, 'cpu');
  const want = read('expected/hs').data;
  const diff = got.hs.reduce((m, v, i) => Math.max(m, Math.abs(v - want[i])), 0);
  assert.ok(diff <= TOL, `${diff} from PyTorch's`);
  assert.deepEqual(errors, []);
  await page.close();
});
