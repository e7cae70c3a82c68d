// The loader in a real browser (Debian's Chromium via playwright-core): bindings/index.js imported
// by a page, both modules instantiated by streaming compilation, and by the arrayBuffer fallback
// when the server sends .wasm with the wrong MIME type; results equal Node's bit for bit, and the
// copying calls' results (a forward over several query windows, a backward) are arrays of their own.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { init } from '../../bindings/index.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const TYPES = { '.js': 'text/javascript', '.html': 'text/html', '.wasm': 'application/wasm' };

// Serves the repository; with wrongWasmType, .wasm goes out as application/octet-stream.
function serve(wrongWasmType) {
  const server = createServer(async (req, res) => {
    const path = normalize(join(ROOT, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
    if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>loader</title>');
      return;
    }
    if (!path.startsWith(ROOT)) { res.writeHead(403); res.end(); return; }
    try {
      const body = await readFile(path);
      const type = extname(path) === '.wasm' && wrongWasmType ? 'application/octet-stream' : TYPES[extname(path)];
      res.writeHead(200, { 'content-type': type || 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404);
      res.end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

const PROBLEM = {
  value: Array.from({ length: 2 * 5 * 3 * 2 }, (_, i) => Math.sin(i)),
  valueShape: [2, 5, 3, 2],
  spatialShapes: [[2, 2], [1, 1]],
  locations: Array.from({ length: 2 * 4 * 3 * 2 * 2 * 2 }, (_, i) => (Math.cos(i * 1.7) + 1) * 0.6 - 0.1),
  locationShape: [2, 4, 3, 2, 2, 2],
  weights: Array.from({ length: 2 * 4 * 3 * 2 * 2 }, (_, i) => Math.sin(i * 0.3)),
  weightShape: [2, 4, 3, 2, 2],
};

// One batch of 1100 queries: the copying forward's windows (FORWARD_WINDOW) are 1024 and 76.
const WINDOWED = {
  value: Array.from({ length: 5 * 2 * 3 }, (_, i) => Math.cos(i)),
  valueShape: [1, 5, 2, 3],
  spatialShapes: [[2, 2], [1, 1]],
  locations: Array.from({ length: 1100 * 2 * 2 * 2 }, (_, i) => (Math.sin(i * 0.77) + 1) * 0.6 - 0.1),
  locationShape: [1, 1100, 2, 2, 1, 2],
  weights: Array.from({ length: 1100 * 2 * 2 }, (_, i) => Math.cos(i * 0.31)),
  weightShape: [1, 1100, 2, 2, 1],
  gradOutput: Array.from({ length: 1100 * 2 * 3 }, (_, i) => Math.sin(i * 0.13)),
  gradOutputShape: [1, 1100, 6],
};

// The copying results of WINDOWED on `msda`: each result's values and whether it is an array of
// its own (a Float32Array alone in an ArrayBuffer that is not the heap). Runs in Node and in the page.
function windowedResults(msda, w) {
  const args = {
    value: { data: new Float32Array(w.value), shape: w.valueShape },
    spatialShapes: w.spatialShapes,
    samplingLocations: { data: new Float32Array(w.locations), shape: w.locationShape },
    attentionWeights: { data: new Float32Array(w.weights), shape: w.weightShape },
  };
  const grads = msda.backward({ ...args, gradOutput: { data: new Float32Array(w.gradOutput), shape: w.gradOutputShape } });
  const results = [msda.forward(args), grads.gradValue, grads.gradSamplingLocations, grads.gradAttentionWeights];
  return results.map(({ data }) => ({
    own: data instanceof Float32Array && data.buffer instanceof ArrayBuffer && data.byteOffset === 0
      && data.buffer.byteLength === data.byteLength && data.buffer !== msda.wasm.memory.buffer,
    values: Array.from(data),
  }));
}

function inPage([problem, windowed, resultsSource]) {
  return (async () => {
    const windowedResults = new Function(`return (${resultsSource})`)();
    const { init, simdSupported } = await import('/bindings/index.js');
    const args = {
      value: { data: new Float32Array(problem.value), shape: problem.valueShape },
      spatialShapes: problem.spatialShapes,
      samplingLocations: { data: new Float32Array(problem.locations), shape: problem.locationShape },
      attentionWeights: { data: new Float32Array(problem.weights), shape: problem.weightShape },
    };
    const results = {};
    for (const simd of [true, false]) {
      const msda = await init({ simd });
      results[simd ? 'simd' : 'scalar'] = { simd: msda.simd, output: Array.from(msda.forward(args).data),
        windowed: windowedResults(msda, windowed) };
    }
    results.auto = (await init()).simd;
    results.detected = simdSupported();
    return results;
  })();
}

test('the loader works in Chromium, streaming and with the arrayBuffer fallback', { skip: !existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}` }, async () => {
  const args = {
    value: { data: new Float32Array(PROBLEM.value), shape: PROBLEM.valueShape },
    spatialShapes: PROBLEM.spatialShapes,
    samplingLocations: { data: new Float32Array(PROBLEM.locations), shape: PROBLEM.locationShape },
    attentionWeights: { data: new Float32Array(PROBLEM.weights), shape: PROBLEM.weightShape },
  };
  const want = {
    simd: Array.from((await init({ simd: true })).forward(args).data),
    scalar: Array.from((await init({ simd: false })).forward(args).data),
    windowed: windowedResults(await init(), WINDOWED),
  };
  assert.ok(want.windowed.every((r) => r.own), 'Node: results of their own');
  const browser = await chromium.launch({
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run'],
  });
  try {
    for (const wrongWasmType of [false, true]) {
      const server = await serve(wrongWasmType);
      try {
        const page = await browser.newPage();
        const errors = [];
        page.on('pageerror', (e) => errors.push(e.message));
        await page.goto(`http://127.0.0.1:${server.address().port}/`);
        const got = await page.evaluate(inPage, [PROBLEM, WINDOWED, windowedResults.toString()]);
        await page.close();
        assert.deepEqual(errors, []);
        assert.equal(got.detected, true);
        assert.equal(got.auto, true);
        assert.equal(got.simd.simd, true);
        assert.equal(got.scalar.simd, false);
        assert.deepEqual(got.simd.output, want.simd, `SIMD module in the browser (wrong MIME: ${wrongWasmType})`);
        assert.deepEqual(got.scalar.output, want.scalar, `scalar module in the browser (wrong MIME: ${wrongWasmType})`);
        assert.deepEqual(got.simd.windowed, want.windowed, 'forward over two windows and backward in the browser: arrays of their own, Node\'s values');
      } finally {
        await new Promise((r) => server.close(r));
      }
    }
  } finally {
    await browser.close();
  }
});
