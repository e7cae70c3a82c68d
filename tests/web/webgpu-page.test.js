// The page on WebGPU (under the hood), in Chromium on SwiftShader: choosing it computes the
// page's forward and backward through init({ backend: 'webgpu' }) and shows the same loss and
// readings as wasm, to the last digit and bit; Step, Play and bursts of changes keep working
// (the last frame drawn is the last state's); a difference from wasm is said on the page.
// Without WebGPU (no flags, or no navigator.gpu) the choice is disabled with its reason.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { compareBits, mergeComparisons, forwardArgs, targetArgs } from '../../web/model.js';
import { buildPyramid, drawPicture } from '../../web/scene.js';
import { launch, openPage, screenshotPath, lineCounts, WEBGPU_ARGS } from './browser.js';
import { PATIENCE_MS } from '../patience.js';

// What the page shows and computed: its texts, and its numbers as bits (base64 of the bytes).
async function snapshot(page) {
  return page.evaluate(() => {
    const m = window.__msda;
    const b64 = (t) => {
      const bytes = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
      return btoa(bin);
    };
    const text = (sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent);
    const g = m.grads;
    return {
      backend: m.backend, computedBy: m.computedBy, sampleComputedBy: m.sampleComputedBy, steps: m.steps,
      moduleBackend: document.getElementById('module').dataset.backend,
      texts: {
        loss: text('#loss'), loss3: text('#loss-3'), weights: text('#points .w'), weightGrads: text('#points .g'),
        sample: text('#sample-vector .mono'), corners: text('#sample-corners .mono'), channels: text('#loss-channels .mono'),
        sum: text('#sum-grid .term .mono'), curve: text('#curve-caption'),
      },
      bits: {
        loss: b64(new Float64Array([m.loss])), output: b64(m.output), targetFeature: b64(m.targetFeature),
        gradValue: b64(g.gradValue.data), gradSamplingLocations: b64(g.gradSamplingLocations.data),
        gradAttentionWeights: b64(g.gradAttentionWeights.data), pointSamples: b64(m.pointSamples), sample: b64(m.sample.output),
      },
    };
  });
}

function sameNumbers(got, want, what, skip = []) {
  const texts = (s) => Object.fromEntries(Object.entries(s.texts).filter(([k]) => !skip.includes(k)));
  assert.deepEqual(texts(got), texts(want), `${what}: the texts on screen`);
  for (const k of Object.keys(want.bits)) assert.equal(got.bits[k], want.bits[k], `${what}: ${k}, bit for bit`);
}

const settle = (page) => page.evaluate(() => window.__msda.settled());

async function openHood(page) {
  await page.click('#hood > summary');
  await page.waitForFunction(() => ['available', 'unavailable'].includes(document.getElementById('backend').dataset.webgpu));
  return page.evaluate(() => {
    const o = document.querySelector('#backend option[value=webgpu]');
    const note = document.getElementById('backend-note');
    return { status: document.getElementById('backend').dataset.webgpu, disabled: o.disabled, label: o.textContent, title: o.title,
      note: note.hidden ? '' : note.textContent };
  });
}

async function chooseWebGPU(page) {
  await page.selectOption('#backend', 'webgpu');
  await page.waitForFunction(() => window.__msda.computedBy === 'webgpu' && window.__msda.sampleComputedBy === 'webgpu', null, { timeout: PATIENCE_MS });
  await settle(page);
}

async function chooseWasm(page) {
  await page.selectOption('#backend', 'wasm');
  await page.waitForFunction(() => window.__msda.computedBy === 'wasm');
  await settle(page);
}

const onGpu = (s) => s.backend === 'webgpu' && s.computedBy === 'webgpu' && s.sampleComputedBy === 'webgpu' && s.moduleBackend === 'webgpu';

test('compareBits counts differing bits (NaN equals NaN, -0 differs from 0) and the largest differences', () => {
  const a = new Float32Array([1, NaN, 0, 2, 3]);
  const b = new Float32Array([1, NaN, -0, 2.5, 3]);
  assert.deepEqual(compareBits(a, a), { count: 5, differ: 0, maxAbs: 0, maxRel: 0 });
  assert.deepEqual(compareBits(a, b), { count: 5, differ: 2, maxAbs: 0.5, maxRel: 0.2 });
  assert.equal(compareBits([1, 2], [1]).differ, 1, 'a missing element differs');
  assert.deepEqual(compareBits([2, 0], [2.5, -0]), { count: 2, differ: 2, maxAbs: 0.5, maxRel: 0.2 }, '0 against -0 last');
  assert.deepEqual(compareBits([1, NaN], [1, 3]), { count: 2, differ: 1, maxAbs: Infinity, maxRel: Infinity });
  assert.deepEqual(mergeComparisons([compareBits(a, b), compareBits([4], [5])]), { count: 6, differ: 3, maxAbs: 1, maxRel: 0.2 });
});

let env, page, problems;

before(async () => {
  env = await launch({ args: WEBGPU_ARGS });
  // The last bit of the first number of every GPU readback flipped while window.__flip is set.
  const initScript = () => {
    if (typeof GPUBuffer === 'undefined') return;
    const map = GPUBuffer.prototype.getMappedRange;
    GPUBuffer.prototype.getMappedRange = function (...a) {
      const r = map.apply(this, a);
      if (window.__flip && r.byteLength >= 4) new Uint32Array(r, 0, 1)[0] ^= 1;
      return r;
    };
  };
  ({ page, problems } = await openPage(env.browser, env.url, { width: 1280, height: 800 }, { colorScheme: 'dark', initScript }));
});
after(async () => {
  if (env) await env.close();
});

test('WebGPU shows wasm\'s loss and readings to the last digit, Step and Play work on it', async () => {
  const wasm0 = await snapshot(page);
  assert.equal(wasm0.computedBy, 'wasm');
  await page.click('#step');
  await page.waitForFunction(() => window.__msda.steps === 1);
  const wasm1 = await snapshot(page);
  assert.notEqual(wasm1.texts.loss[0], wasm0.texts.loss[0], 'a step changes the loss');
  await page.click('#reset');

  const hood = await openHood(page);
  assert.equal(hood.status, 'available');
  assert.equal(hood.disabled, false, 'offered where navigator.gpu gives an adapter');
  assert.match(hood.note, /WebGPU is available here \(google swiftshader\)/);
  // The hood's visible text (its hidden sentence says what the other backend does).
  const where = () => page.evaluate(() => ({ hood: document.querySelector('#hood > p').innerText,
    code: document.querySelector('#use-snippet code').textContent }));
  const onWasm = await where();
  assert.match(onWasm.hood, /^The page prepares the problem once \(msda\.prepare\(\)\): .* stay in the WebAssembly heap/);
  assert.match(onWasm.code, /const msda = await init\(\);/);
  await chooseWebGPU(page);
  // Under the hood and the snippet say what the page now runs on
  const onWebGPU = await where();
  // WebGPU has no prepare(): the hood says what the page does there instead.
  assert.match(onWebGPU.hood, /^On WebGPU the page uploads the 680 kB value tensor once, into a GPU buffer/);
  assert.doesNotMatch(onWebGPU.hood, /prepare/);
  assert.match(onWebGPU.code, /const msda = await init\(\{ backend: 'webgpu' \}\);/);
  assert.match(onWebGPU.code, /const output = await msda\.forward\(args\);/);
  assert.match(onWebGPU.code, /await msda\.backward\(\{ \.\.\.args, gradOutput \}\);/);
  // At phone width its lines stay lines too (phone.test.js holds the wasm text).
  await page.setViewportSize({ width: 390, height: 844 });
  assert.deepEqual(await lineCounts(page, '#use-snippet'), [onWebGPU.code.split('\n').length], 'the WebGPU snippet at 390 px: no line wraps');
  await page.setViewportSize({ width: 1280, height: 800 });
  const gpu0 = await snapshot(page);
  assert.ok(onGpu(gpu0), `computed on WebGPU: ${JSON.stringify([gpu0.backend, gpu0.computedBy, gpu0.sampleComputedBy, gpu0.moduleBackend])}`);
  sameNumbers(gpu0, wasm0, 'WebGPU at the start vs wasm');
  const hud = await page.evaluate(() => ({ module: document.getElementById('module').textContent, threads: document.getElementById('threads').textContent,
    simd: document.getElementById('simd').disabled, note: document.getElementById('backend-note').textContent,
    differ: document.getElementById('backend-note').dataset.differ, caption: !document.getElementById('t-caption-webgpu').hidden, check: window.__msda.webgpu.check }));
  assert.equal(hud.module, 'WebGPU (google swiftshader)');
  assert.equal(hud.threads, '–');
  assert.ok(hud.simd && hud.caption, 'the wasm module switch is off, the WebGPU timing caption on');
  assert.equal(hud.differ, '0');
  assert.ok(hud.check.count > 170000 && hud.check.differ === 0, JSON.stringify(hud.check));
  assert.match(hud.note, /flush subnormals\. All 170,\d{3} numbers of the last results equal wasm's, bit for bit/);

  await page.click('#step');
  await page.waitForFunction(() => window.__msda.steps === 1);
  await settle(page);
  const gpu1 = await snapshot(page);
  assert.ok(onGpu(gpu1));
  sameNumbers(gpu1, wasm1, 'WebGPU after one Step vs wasm');

  await page.click('#play');
  await page.waitForFunction(() => window.__msda.steps >= 4, null, { timeout: PATIENCE_MS });
  await page.click('#play');
  await settle(page);
  const played = await page.evaluate(() => ({ steps: window.__msda.steps, label: document.getElementById('play').textContent }));
  await page.waitForTimeout(300);
  assert.equal(await page.evaluate(() => window.__msda.steps), played.steps, 'paused');
  assert.equal(played.label, 'Play');
  assert.deepEqual(problems, []);
});

test('bursts of changes on WebGPU: every Step is taken, the last frame is the last state\'s', async () => {
  const before = await page.evaluate(() => window.__msda.steps);
  // Three Steps, target moves and step 1 drags, all without waiting for a result.
  await page.evaluate(() => { for (let k = 0; k < 3; k++) document.getElementById('step').click(); });
  const rect = (id) => page.evaluate((i) => { document.getElementById(i).scrollIntoView({ block: 'center' }); return window.__msda.rectOf(i); }, id);
  const target = await rect('target-canvas');
  for (const [fx, fy] of [[0.2, 0.3], [0.5, 0.5], [0.31, 0.77]]) await page.mouse.click(target.x + fx * target.width, target.y + fy * target.height);
  const sample = await rect('sample-canvas');
  await page.mouse.move(sample.x + 0.5 * sample.width, sample.y + 0.5 * sample.height);
  await page.mouse.down();
  for (let k = 1; k <= 8; k++) await page.mouse.move(sample.x + (0.5 - 0.04 * k) * sample.width, sample.y + (0.5 + 0.03 * k) * sample.height);
  await page.mouse.up();
  await settle(page);
  const gpu = await snapshot(page);
  assert.ok(onGpu(gpu));
  const state = await page.evaluate(() => ({ steps: window.__msda.steps, target: window.__msda.target, point: window.__msda.sample.point }));
  assert.equal(state.steps, before + 3, 'each Step taken once');
  assert.ok(Math.abs(state.target[0] - 0.31) < 0.02 && Math.abs(state.target[1] - 0.77) < 0.02, `the last target: ${state.target}`);
  assert.ok(Math.abs(state.point[0] - 0.18) < 0.02 && Math.abs(state.point[1] - 0.74) < 0.02, `the last point: ${state.point}`);
  // wasm for the same state, recomputed from scratch by the backend switch: the same frame.
  await chooseWasm(page);
  const wasm = await snapshot(page);
  assert.equal(wasm.computedBy, 'wasm');
  // (The switch starts a fresh descent, so the curve's caption restarts.)
  sameNumbers(gpu, wasm, 'WebGPU\'s last frame vs wasm on the same state', ['curve']);
  await chooseWebGPU(page);

  // Back to wasm while Steps are in flight on WebGPU: nothing from WebGPU is drawn after it.
  const inFlight = await page.evaluate(async () => {
    for (let k = 0; k < 3; k++) document.getElementById('step').click();
    while (!window.__msda.computing()) await new Promise((r) => setTimeout(r, 1));
    const sel = document.getElementById('backend');
    sel.value = 'wasm';
    sel.dispatchEvent(new Event('change'));
    return window.__msda.computing();
  });
  assert.ok(inFlight, 'a WebGPU computation was in flight at the switch');
  await settle(page);
  await page.waitForTimeout(500);
  const after = await page.evaluate(() => {
    const m = window.__msda;
    return { backend: m.backend, computedBy: m.computedBy, sampleComputedBy: m.sampleComputedBy, renders: m.renders,
      loc: Array.from(m.forwardArgs.samplingLocations.data), w: Array.from(m.forwardArgs.attentionWeights.data), options: m.options, output: Array.from(m.output) };
  });
  assert.deepEqual([after.backend, after.computedBy, after.sampleComputedBy], ['wasm', 'wasm', 'wasm']);
  const wasmNode = await init();
  const replay = wasmNode.forward(forwardArgs(buildPyramid(drawPicture()), new Float32Array(after.loc), new Float32Array(after.w), after.options));
  assert.deepEqual(after.output, Array.from(replay.data), 'the frame shown is wasm\'s for the state shown');
  assert.equal(await page.evaluate(() => window.__msda.renders), after.renders, 'nothing drawn since');
  await chooseWebGPU(page);
  assert.deepEqual(problems, []);
});

// Which elements of the page's `got` differ from `want`, as [index, got bits XOR want bits].
function flips(got, want) {
  const g = new Uint32Array(new Float32Array(got).buffer), w = new Uint32Array(new Float32Array(want).buffer);
  assert.equal(g.length, w.length);
  const out = [];
  for (let i = 0; i < g.length; i++) if (g[i] !== w[i]) out.push([i, (g[i] ^ w[i]) >>> 0]);
  return out;
}

test('a difference from wasm is said on the page, with WebGPU\'s numbers shown', async () => {
  await page.evaluate(() => { window.__flip = true; });
  await page.click('#step');
  await settle(page);
  const flipped = await page.evaluate(() => {
    const m = window.__msda, a = m.forwardArgs, g = m.grads;
    return { note: document.getElementById('backend-note').textContent, differ: Number(document.getElementById('backend-note').dataset.differ),
      check: m.webgpu.check, computedBy: m.computedBy, target: m.target, options: m.options,
      loc: Array.from(a.samplingLocations.data), w: Array.from(a.attentionWeights.data), gradOutput: Array.from(m.gradOutput),
      output: Array.from(m.output), targetFeature: Array.from(m.targetFeature),
      grads: [g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data].map((x) => Array.from(x)) };
  });
  await page.evaluate(() => { window.__flip = false; });
  assert.ok(flipped.differ >= 1 && flipped.check.differ === flipped.differ, JSON.stringify({ ...flipped, grads: 0 }));
  // What the page shows is what came back from the GPU: wasm's numbers (replayed in Node on the
  // page's inputs) with the first element of each readback one bit off.
  assert.equal(flipped.computedBy, 'webgpu');
  const wasm = await init();
  const data = buildPyramid(drawPicture());
  const args = forwardArgs(data, new Float32Array(flipped.loc), new Float32Array(flipped.w), flipped.options);
  assert.deepEqual(flips(flipped.output, wasm.forward(args).data), [[0, 1]], 'output');
  assert.deepEqual(flips(flipped.targetFeature, wasm.forward(targetArgs(data, flipped.target, flipped.options)).data), [[0, 1]], 'target feature');
  const grads = wasm.backward({ ...args, gradOutput: { data: new Float32Array(flipped.gradOutput), shape: [1, 1, 27] } });
  const gradFlips = ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights'].map((k, i) => flips(flipped.grads[i], grads[k].data));
  assert.deepEqual(gradFlips.flat(), [[0, 1]], `one readback of the backward: ${JSON.stringify(gradFlips)}`);
  assert.match(flipped.note, /\d+ of the last 170,\d{3} numbers differ from wasm's \(largest difference .*\): the page shows WebGPU's/);
  await page.click('#step');
  await settle(page);
  assert.equal(await page.evaluate(() => document.getElementById('backend-note').dataset.differ), '0', 'agreeing again');
  await page.locator('#hood').scrollIntoViewIfNeeded();
  await page.screenshot({ path: screenshotPath('webgpu-hood.png') });
  await page.evaluate(() => document.getElementById('level-0').scrollIntoView({ block: 'start' }));
  await page.screenshot({ path: screenshotPath('webgpu-playground.png') });
  assert.deepEqual(problems, []);
});

test('without WebGPU the choice is disabled with its reason, and the page works on wasm', async () => {
  const plain = await launch();
  try {
    for (const [what, initScript, reason] of [
      ['no adapter (Chromium without the WebGPU flags)', undefined, /requestAdapter\(\) gave no adapter/],
      ['no navigator.gpu', () => { delete Navigator.prototype.gpu; }, /this browser has no navigator\.gpu/],
    ]) {
      const { page: p, problems: probs, context } = await openPage(plain.browser, plain.url, { width: 1280, height: 800 }, { initScript });
      const hood = await openHood(p);
      assert.equal(hood.status, 'unavailable', what);
      assert.equal(hood.disabled, true, `${what}: disabled`);
      assert.equal(hood.label, 'WebGPU (not available here)');
      assert.match(hood.title, reason, what);
      assert.match(hood.note, reason, what);
      await p.click('#step');
      await p.waitForFunction(() => window.__msda.steps === 1);
      const s = await snapshot(p);
      assert.equal(s.computedBy, 'wasm');
      assert.equal(s.backend, 'wasm');
      assert.deepEqual(probs, [], what);
      await context.close();
    }
  } finally {
    await plain.close();
  }
});
