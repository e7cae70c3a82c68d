// ms-deform-attn/tfjs on tfjs-backend-webgl in headless Chromium (WebGL 2 through ANGLE on
// SwiftShader; the page: tfjs-page.js, as tests/web/tfjs.test.js has it for tfjs-backend-cpu).
// Every input is computed on webgl (a tf.mul, so it lives in a texture, not in a CPU array; value
// has 1,760 elements, past the 1,024 where tfjs-backend-webgpu's sync read returned zeros); the
// op's output and tf.grads, read back through another webgl op, equal Node's msda.forward/backward
// bits on the same inputs and are not zeros; the layer trains there. webgl failing to start fails
// the test: the page never falls back to cpu.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { CHROMIUM, servePages } from './browser.js';
import { RESULTS, nodeResults, runPage, tfjsPage } from './tfjs-page.js';

// No --disable-gpu: WebGL runs on ANGLE's SwiftShader (Vulkan on the CPU).
const ARGS = ['--headless', '--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const PAGE = tfjsPage({ backend: 'webgl', seed: 2025, C: 8, steps: 40 });

let server, base, browser;

before(async () => {
  ({ server, base } = await servePages(PAGE));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await new Promise((r) => server.close(r));
});

test('Chromium, tfjs-backend-webgl: inputs in textures give Node\'s bits (output and tf.grads, never zeros), no tensor left, the layer trains', async () => {
  // Chromium's one notice that a sync read (dataSync, the op's too) stalls the GPU is not a problem.
  const { r, problems } = await runPage(browser, base, /GL Driver Message \(OpenGL, Performance, [^)]*\): GPU stall due to ReadPixels/);
  assert.equal(r.error, undefined, r.error);
  assert.deepEqual(problems, []);
  assert.equal(r.backend, 'webgl', 'the page ran on tfjs-backend-webgl, not a fallback');
  assert.equal(r.float32, true, 'SwiftShader renders float32 textures (else tfjs stores halves)');
  assert.deepEqual(r.inTexture, [true, true, true, true], 'the inputs lived in webgl textures, not CPU arrays');
  assert.equal(r.leaked, 0, 'tf.tidy leaves no tensor');

  const want = await nodeResults(PAGE.caseSource, r.msdaBackend);
  assert.ok(want.c.value.data.length >= 1152, 'value is as large as the case tfjs-backend-webgpu read as zeros');
  RESULTS.forEach((name, i) => {
    assert.ok(want.data[i].some((x) => x !== 0), `${name}: Node's result is not all zeros`);
    assert.ok(/[^0]/.test(r.results[i]), `${name}: the page's result is not all zeros`);
    assert.ok(r.results[i] === want.hex[i], `${name}: the page's bits are Node's`);
  });
  assert.equal(r.losses.length, 40);
  assert.ok(r.losses.every(Number.isFinite), `finite losses: ${r.losses}`);
  assert.ok(r.losses[39] < 0.2 * r.losses[0], `the layer trains on webgl: loss ${r.losses[0]} -> ${r.losses[39]}`);
});
