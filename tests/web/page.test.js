// The explainer page in headless Chromium: it loads cleanly; every number it shows is the Node
// API's on the page's own inputs; each figure renders and responds (the sampling demo's corners
// and reading follow a dragged point, the weighted sum and the loss follow the weights and the
// target); Step lowers the loss and moves the output towards the target; Step/Play stay on
// screen next to a level at 1280×800 and 390×844; nothing runs off its frame; both colour
// schemes. Screenshots go to build/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { logitGradients } from '../../web/model.js';
import { formatLoss, formatGrad, formatValue } from '../../web/format.js';
import { launch, openPage, screenshotPath } from './browser.js';
import { PATIENCE_MS } from '../patience.js';

let env, page, problems, context;

before(async () => {
  env = await launch();
  ({ page, problems, context } = await openPage(env.browser, env.url, { width: 1280, height: 800 }, { colorScheme: 'dark' }));
});
after(async () => {
  if (env) await env.close();
});

// Everything the page exposes about its last forward/backward. Float32Arrays cross as base64
// of their bytes (exact, and far faster than arrays of numbers).
async function snapshot(p = page) {
  const s = await p.evaluate(() => {
    const m = window.__msda;
    const b64 = (t) => {
      const bytes = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
      return btoa(bin);
    };
    const plain = (t) => ({ b64: b64(t.data), shape: Array.from(t.shape) });
    const args = (a) => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v && v.data ? plain(v) : v]));
    const grads = m.grads;
    const text = (sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent);
    return {
      renders: m.renders, steps: m.steps, head: m.head, simd: m.simd, target: m.target, options: m.options,
      weightMode: m.weightMode, stuck: m.stuck,
      forwardArgs: args(m.forwardArgs), backwardArgs: args(m.backwardArgs),
      targetFeature: b64(m.targetFeature), output: b64(m.output), loss: m.loss,
      lossText: document.getElementById('loss').textContent,
      lossText3: document.getElementById('loss-3').textContent,
      lossCaption3: document.getElementById('loss-3-caption')?.textContent,
      gradValue: b64(grads.gradValue.data),
      gradSamplingLocations: b64(grads.gradSamplingLocations.data),
      gradAttentionWeights: b64(grads.gradAttentionWeights.data),
      weightGradTexts: text('#points .g'),
      weightTexts: text('#points .w'),
      forwardText: document.getElementById('t-forward').textContent,
      backwardText: document.getElementById('t-backward').textContent,
      sample: { ...m.sample, output: b64(m.sample.output) },
      sampleTexts: text('#sample-vector .mono'),
      pointSamples: b64(m.pointSamples),
      lossChannelTexts: text('#loss-channels .mono'),
      sumTexts: text('#sum-grid .term .mono'),
    };
  });
  const unpack = (b) => { const buf = Buffer.from(b, 'base64'); return new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4).slice(); };
  const args = (a) => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v && v.b64 !== undefined ? { data: unpack(v.b64), shape: v.shape } : v]));
  for (const k of ['targetFeature', 'output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights', 'pointSamples']) s[k] = unpack(s[k]);
  s.sample.output = unpack(s.sample.output);
  s.forwardArgs = args(s.forwardArgs);
  s.backwardArgs = args(s.backwardArgs);
  return s;
}

function sameBits(name, got, want) {
  assert.equal(got.length, want.length, `${name}: length`);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${name}[${i}]: page has ${got[i]}, expected ${want[i]}`);
  }
}

const NH = 3, NL = 3, NP = 4, C = 9;
const slot = (h, l, p) => (h * NL + l) * NP + p;

// Recomputes in Node, from the page's own inputs, what the page says it computed and shows.
async function checkAgainstNode(s) {
  const msda = await init({ simd: s.simd });
  const fwd = s.forwardArgs;
  const output = msda.forward(fwd);
  sameBits('output', s.output, output.data);

  // The target feature: every point on the target, weights 1 / (N_l * N_p).
  const nSlots = fwd.attentionWeights.data.length;
  const loc = new Float32Array(2 * nSlots);
  if (s.options.samplingLocationsLayout === 'BQHLP2') {
    for (let i = 0; i < nSlots; i++) { loc[2 * i] = s.target[0]; loc[2 * i + 1] = s.target[1]; }
  } else {
    loc.fill(Math.fround(s.target[0]), 0, nSlots); loc.fill(Math.fround(s.target[1]), nSlots);
  }
  const targetFeature = msda.forward({ ...fwd, samplingLocations: { data: loc, shape: fwd.samplingLocations.shape },
    attentionWeights: { data: new Float32Array(nSlots).fill(1 / (NL * NP)), shape: fwd.attentionWeights.shape } });
  sameBits('targetFeature', s.targetFeature, targetFeature.data);

  let loss = 0;
  const gradOutput = new Float32Array(output.data.length);
  for (let i = 0; i < gradOutput.length; i++) {
    const d = output.data[i] - targetFeature.data[i];
    gradOutput[i] = d;
    loss += d * d;
  }
  loss *= 0.5;
  assert.equal(s.loss, loss, 'loss');
  assert.equal(s.lossText, formatLoss(loss), 'the loss the controls display');
  assert.equal(s.lossText3, formatLoss(loss), 'the loss step 3 displays');
  // step 3's table shows one head's channels: the loss beside it says it sums them all
  assert.equal(s.lossCaption3, 'loss, all heads');
  assert.doesNotMatch(s.lossText, /e/, 'fixed notation');
  sameBits('gradOutput', s.backwardArgs.gradOutput.data, gradOutput);

  const grads = msda.backward({ ...fwd, gradOutput: { data: gradOutput, shape: output.shape } });
  sameBits('gradValue', s.gradValue, grads.gradValue.data);
  sameBits('gradSamplingLocations', s.gradSamplingLocations, grads.gradSamplingLocations.data);
  sameBits('gradAttentionWeights', s.gradAttentionWeights, grads.gradAttentionWeights.data);
  // The bars show the selected head's ∂loss/∂weight (raw) or ∂loss/∂logit (softmax), level by level.
  const gw = grads.gradAttentionWeights.data;
  const shown = s.weightMode === 'softmax' ? logitGradients(fwd.attentionWeights.data, gw) : gw;
  const perHead = NL * NP;
  assert.deepEqual(s.weightGradTexts, Array.from(shown.slice(s.head * perHead, (s.head + 1) * perHead), formatGrad), 'displayed weight gradients');
  assert.ok(s.weightGradTexts.every((t) => !/e/.test(t)), `fixed notation: ${s.weightGradTexts}`);
  assert.deepEqual(s.weightTexts, Array.from(fwd.attentionWeights.data.slice(s.head * perHead, (s.head + 1) * perHead), (w) => w.toFixed(3)));
  // Step 3 lists output and target of the selected head, channel by channel.
  const want3 = [];
  for (let c = 0; c < C; c++) want3.push(formatValue(output.data[s.head * C + c]), formatValue(targetFeature.data[s.head * C + c]));
  assert.deepEqual(s.lossChannelTexts, want3, 'step 3: output and target per channel');
  assert.match(s.forwardText, /^\d+\.\d{3} ms$/);
  assert.match(s.backwardText, /^\d+\.\d{3} ms$/);
}

// Step 2's readings: each point's own sample, through the operator with weight 1 on that point.
async function checkPointSamples(s) {
  const msda = await init({ simd: s.simd });
  const fwd = s.forwardArgs;
  const w = s.forwardArgs.attentionWeights.data;
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NP; p++) {
      const one = new Float32Array(w.length);
      for (let h = 0; h < NH; h++) one[slot(h, l, p)] = 1;
      const out = msda.forward({ ...fwd, attentionWeights: { data: one, shape: fwd.attentionWeights.shape } }).data;
      const q = l * NP + p;
      sameBits(`reading of level ${l} point ${p + 1}`, s.pointSamples.subarray(q * NH * C, (q + 1) * NH * C), out);
    }
  }
  // Their weighted sum is the output (up to float32 rounding of the sum's order).
  for (let h = 0; h < NH; h++) {
    for (let c = 0; c < C; c++) {
      let sum = 0;
      for (let l = 0; l < NL; l++) for (let p = 0; p < NP; p++) sum += w[slot(h, l, p)] * s.pointSamples[((l * NP + p) * NH + h) * C + c];
      assert.ok(Math.abs(sum - s.output[h * C + c]) < 1e-5, `Σ w·reading = output (head ${h}, channel ${c}): ${sum} vs ${s.output[h * C + c]}`);
    }
  }
  assert.deepEqual(s.sumTexts, Array.from(w.slice(s.head * NL * NP, (s.head + 1) * NL * NP), (x) => `×${x.toFixed(3)}`));
}

test('loads without page or console errors, and shows the numbers the Node API computes', async () => {
  assert.deepEqual(problems, []);
  const s = await snapshot();
  assert.ok(s.loss > 0, `initial loss ${s.loss}`);
  assert.equal(s.weightMode, 'softmax', 'weights are softmax-normalised by default, as in Deformable DETR');
  await checkAgainstNode(s);
  await checkPointSamples(s);
  // The threads field shows the count the module runs with (1, or more when isolated and threaded).
  const threads = await page.locator('#threads').textContent();
  assert.match(threads, /^[1-9]\d*$/);
  assert.equal(threads, String(await page.evaluate(() => window.__msda.threads)));
  await page.screenshot({ path: screenshotPath('page-1280x800-top.png') });
});

// The sampling demo's point as the page holds it, and where it sits on screen.
const samplePoint = () => page.evaluate(() => {
  const m = window.__msda;
  const r = m.rectOf('sample-canvas');
  return { x: r.x + m.sample.location[0] * r.width, y: r.y + m.sample.location[1] * r.height, rect: r };
});

async function checkSample(s) {
  const msda = await init({ simd: s.simd });
  const { level, location, options } = s.sample;
  const fwd = s.forwardArgs;
  // The page's value tensor is BLNC in the default layout; cut out the sampled level.
  const shapes = fwd.spatialShapes;
  const start = shapes.slice(0, level).reduce((a, [h, w]) => a + h * w, 0);
  const [H, W] = shapes[level];
  const value = fwd.value.data.slice(start * NH * C, (start + H * W) * NH * C);
  const out = msda.forward({
    value: { data: value, shape: [1, H * W, NH, C] }, spatialShapes: [[H, W]],
    samplingLocations: { data: new Float32Array(Array.from({ length: NH }, () => location).flat()), shape: [1, 1, NH, 1, 1, 2] },
    attentionWeights: { data: new Float32Array(NH).fill(1), shape: [1, 1, NH, 1, 1] }, ...options,
  }).data;
  sameBits('step 1 reading', s.sample.output, out);
  assert.deepEqual(s.sampleTexts, Array.from(out.slice(0, C), formatValue), 'step 1 shows the reading');
  // The lit corners are the pixels the operator read, with its weights: their mix is the reading.
  const corners = s.sample.corners;
  assert.equal(corners.length, 4);
  assert.ok(Math.abs(corners.reduce((a, c) => a + c.weight, 0) - 1) < 1e-9, 'corner weights sum to 1');
  for (let c = 0; c < C; c++) {
    let mix = 0;
    for (const k of corners) if (k.inside) mix += k.weight * value[((k.row * W + k.col) * NH) * C + c];
    assert.ok(Math.abs(mix - out[c]) < 1e-5, `channel ${c}: Σ corner weight × pixel ${mix} vs the operator's ${out[c]}`);
  }
}

test('step 1: dragging the point changes the four lit corners, their weights and the reading', async () => {
  const before = await snapshot();
  await checkSample(before);
  const from = await samplePoint();
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  await page.mouse.move(from.rect.x + from.rect.width * 0.72, from.rect.y + from.rect.height * 0.31, { steps: 4 });
  await page.mouse.up();
  const after = await snapshot();
  assert.ok(Math.abs(after.sample.location[0] - 0.72) < 0.01 && Math.abs(after.sample.location[1] - 0.31) < 0.01, `moved to ${after.sample.location}`);
  const key = (s) => JSON.stringify(s.sample.corners.map((c) => [c.row, c.col]));
  assert.notEqual(key(after), key(before), 'other corner pixels are lit');
  assert.notDeepEqual(after.sample.corners.map((c) => c.weight), before.sample.corners.map((c) => c.weight), 'their weights changed');
  assert.notDeepEqual(Array.from(after.sample.output), Array.from(before.sample.output), 'the reading changed');
  assert.notDeepEqual(after.sampleTexts, before.sampleTexts, 'the displayed reading changed');
  await checkSample(after);
  // Keys: the arrow moves the point by 0.01.
  await page.focus('#sample-canvas');
  await page.keyboard.press('ArrowLeft');
  const k = await snapshot();
  assert.ok(Math.abs(k.sample.location[0] - (after.sample.location[0] - 0.01)) < 1e-6, 'ArrowLeft moved the point');
  await checkSample(k);
  assert.deepEqual(problems, []);
});

test('step 2: the readings times the weights sum to the output; softmax and raw weights', async () => {
  let s = await snapshot();
  const headSum = (snap, h) => Array.from(snap.forwardArgs.attentionWeights.data.slice(h * 12, (h + 1) * 12)).reduce((a, b) => a + b, 0);
  for (let h = 0; h < NH; h++) assert.ok(Math.abs(headSum(s, h) - 1) < 1e-6, `softmax: head ${h}'s weights sum to 1`);
  // With softmax, raising one weight lowers the others in proportion.
  const i = slot(0, 1, 2);
  await page.fill('#w-1-2', '0.5');
  s = await snapshot();
  assert.ok(Math.abs(s.forwardArgs.attentionWeights.data[i] - 0.5) < 1e-6, 'the slider sets the weight');
  assert.ok(Math.abs(headSum(s, 0) - 1) < 1e-6, 'still sums to 1');
  await checkPointSamples(s);
  await checkAgainstNode(s);
  // Raw: the weights are free; a slider changes only its own.
  await page.check('input[name=weight-mode][value=raw]');
  const raw = await snapshot();
  assert.equal(raw.weightMode, 'raw');
  await page.fill('#w-1-2', '0.9');
  const raw2 = await snapshot();
  assert.equal(raw2.forwardArgs.attentionWeights.data[i], Math.fround(0.9));
  for (let k = 0; k < 36; k++) if (k !== i) assert.equal(raw2.forwardArgs.attentionWeights.data[k], raw.forwardArgs.attentionWeights.data[k]);
  assert.ok(headSum(raw2, 0) > 1.3, 'raw weights need not sum to 1');
  assert.notEqual(raw2.loss, raw.loss);
  await checkPointSamples(raw2);
  await checkAgainstNode(raw2);
  await page.check('input[name=weight-mode][value=softmax]');
  await page.click('#reset');
});

test('step 3: clicking the picture moves the target; output, target and loss side by side', async () => {
  const before = await snapshot();
  await page.evaluate(() => document.getElementById('target-canvas').scrollIntoView());
  const r = await page.evaluate(() => window.__msda.rectOf('target-canvas'));
  await page.mouse.click(r.x + r.width * 0.2, r.y + r.height * 0.8);
  const s = await snapshot();
  assert.ok(Math.abs(s.target[0] - 0.2) < 0.01 && Math.abs(s.target[1] - 0.8) < 0.01, `target ${s.target}`);
  assert.notDeepEqual(Array.from(s.targetFeature), Array.from(before.targetFeature), 'the target feature changed');
  assert.notEqual(s.lossText3, before.lossText3);
  const colours = await page.evaluate(() => ['loss-output', 'loss-target'].map((id) => getComputedStyle(document.getElementById(id)).backgroundColor));
  assert.notEqual(colours[0], colours[1], 'output and target swatches differ');
  await checkAgainstNode(s);
  await page.click('#reset');
});

test('playground: dragging a point moves it and changes the arrows and the loss', async () => {
  const before = await snapshot();
  const level = 1, point = 0;
  await page.evaluate(() => document.getElementById('levels').scrollIntoView());
  const from = await page.evaluate(([l, p]) => window.__msda.pointOnScreen(l, p), [level, point]);
  const rect = await page.evaluate((l) => window.__msda.levelRect(l), level);
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  await page.mouse.move(rect.x + rect.width * 0.55, rect.y + rect.height * 0.2, { steps: 5 });
  await page.mouse.up();
  const after = await snapshot();
  const i = slot(0, level, point);
  const locAfter = after.forwardArgs.samplingLocations.data;
  assert.ok(Math.abs(locAfter[2 * i] - 0.55) < 0.01 && Math.abs(locAfter[2 * i + 1] - 0.2) < 0.01,
    `point moved to (${locAfter[2 * i]}, ${locAfter[2 * i + 1]})`);
  assert.notEqual(after.loss, before.loss, 'loss changed');
  assert.notDeepEqual(Array.from(after.gradSamplingLocations), Array.from(before.gradSamplingLocations), 'arrows changed');
  assert.notEqual(after.lossText, before.lossText, 'the displayed loss changed');
  await checkAgainstNode(after);
  assert.deepEqual(problems, []);
});

test('playground: clicking away from the points moves the target; keys, the wheel and sliders', async () => {
  await page.click('#reset');
  const rect = await page.evaluate(() => window.__msda.levelRect(0));
  await page.mouse.click(rect.x + rect.width * 0.8, rect.y + rect.height * 0.75);
  let s = await snapshot();
  assert.ok(Math.abs(s.target[0] - 0.8) < 0.01 && Math.abs(s.target[1] - 0.75) < 0.01, `target ${s.target}`);
  await page.focus('#level-2');
  await page.keyboard.press('2');
  const before = await snapshot();
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('+');
  s = await snapshot();
  const i = slot(0, 2, 1);
  assert.ok(Math.abs(s.forwardArgs.samplingLocations.data[2 * i] - before.forwardArgs.samplingLocations.data[2 * i] - 0.01) < 1e-6, 'ArrowRight moved point 2 by 0.01');
  assert.ok(Math.abs(s.forwardArgs.attentionWeights.data[i] - before.forwardArgs.attentionWeights.data[i] - 0.02) < 1e-6, '+ raised its weight by 0.02');
  const at = await page.evaluate(() => window.__msda.pointOnScreen(2, 1));
  await page.mouse.move(at.x, at.y);
  await page.mouse.wheel(0, -100);
  const w = await snapshot();
  assert.ok(Math.abs(w.forwardArgs.attentionWeights.data[i] - s.forwardArgs.attentionWeights.data[i] - 0.02) < 1e-6, 'wheel up raised the weight by 0.02');
  await page.focus('#level-2');
  await page.keyboard.press('Shift+ArrowUp');
  const t = await snapshot();
  assert.ok(Math.abs(t.target[1] - (s.target[1] - 0.01)) < 1e-9, 'Shift+ArrowUp moved the target');
  await checkAgainstNode(t);
});

// ‖output − target‖ over all heads.
const outputDistance = (s) => Math.hypot(...Array.from(s.output, (o, k) => o - s.targetFeature[k]));
const meanPointDistance = (s) => {
  const loc = s.forwardArgs.samplingLocations.data;
  let d = 0;
  for (let i = 0; i < loc.length; i += 2) d += Math.hypot(loc[i] - s.target[0], loc[i + 1] - s.target[1]);
  return d / (loc.length / 2);
};

for (const mode of ['softmax', 'raw']) {
  test(`Step lowers the loss and moves the output towards the target (${mode} weights); Reset returns to the start`, async () => {
    await page.check(`input[name=weight-mode][value=${mode}]`);
    await page.click('#reset');
    const start = await snapshot();
    await page.click('#step');
    const one = await snapshot();
    assert.ok(one.loss < start.loss, `one step: ${start.loss} -> ${one.loss}`);
    await page.evaluate(() => { for (let k = 1; k < 40; k++) document.getElementById('step').click(); });
    const s = await snapshot();
    assert.equal(s.steps, 40);
    assert.ok(s.loss < 0.5 * start.loss, `40 steps: loss ${start.loss} -> ${s.loss}`);
    assert.ok(outputDistance(s) < 0.75 * outputDistance(start), `‖output − target‖ ${outputDistance(start)} -> ${outputDistance(s)}`);
    assert.ok(meanPointDistance(s) < 0.75 * meanPointDistance(start), `distance to target ${meanPointDistance(start)} -> ${meanPointDistance(s)}`);
    await checkAgainstNode(s);
    await checkPointSamples(s);
    await page.click('#reset');
    const again = await snapshot();
    assert.equal(again.steps, 0);
    assert.equal(again.loss, start.loss, 'Reset returns to the starting loss');
  });
}

test('a point left behind is explained', async () => {
  await page.check('input[name=weight-mode][value=softmax]');
  await page.click('#reset');
  assert.equal(await page.isVisible('#stuck'), false, 'no note at the start');
  await page.evaluate(() => { for (let k = 0; k < 150; k++) document.getElementById('step').click(); });
  const s = await snapshot();
  assert.ok(s.stuck, 'after 150 steps a point of head 0 is still far from the target');
  const i = slot(0, s.stuck.l, s.stuck.p);
  const loc = s.forwardArgs.samplingLocations.data;
  const d = Math.hypot(loc[2 * i] - s.target[0], loc[2 * i + 1] - s.target[1]);
  assert.ok(d > 0.08, `the named point is ${d} from the target`);
  const text = await page.textContent('#stuck');
  assert.match(text, new RegExp(`^Point ${s.stuck.p + 1} on level ${s.stuck.l} stopped ${d.toFixed(2)} from the target`));
  assert.match(text, /local minimum/);
  assert.ok(await page.isVisible('#stuck'));
  await page.evaluate(() => document.getElementById('levels').scrollIntoView());
  await page.screenshot({ path: screenshotPath('page-1280x800-150-steps.png') });
  await page.click('#reset');
  assert.equal(await page.isVisible('#stuck'), false, 'Reset clears the note');
});

// Arrow lengths are one function of |∂loss/∂location| for every level and every step (no
// per-level rescaling): sorted by magnitude, lengths never decrease; near convergence they shrink.
test('arrows keep their magnitude: one fixed scale for every level and step', async () => {
  await page.click('#reset');
  const arrows = () => page.evaluate(() => window.__msda.arrows.flat());
  const start = await arrows();
  await page.evaluate(() => { for (let k = 0; k < 150; k++) document.getElementById('step').click(); });
  const late = await arrows();
  const all = [...start, ...late].sort((a, b) => a.magnitude - b.magnitude);
  for (let k = 1; k < all.length; k++) {
    assert.ok(all[k].length >= all[k - 1].length, `|g| ${all[k - 1].magnitude} -> length ${all[k - 1].length}, |g| ${all[k].magnitude} -> ${all[k].length}`);
  }
  const longest = (a) => Math.max(...a.map((x) => x.length));
  assert.ok(longest(late) < 0.6 * longest(start), `longest arrow ${longest(start)} at the start, ${longest(late)} after 150 steps`);
  assert.ok(late.some((x) => x.length > 0), 'small gradients still draw an arrow');
  await page.click('#reset');
});

// The glow: the pixels a point reads light up against the dimmed rest of the fine level.
test('the |∂loss/∂value| glow is visible on the finest level', async () => {
  await page.click('#reset');
  const measure = () => page.evaluate(() => {
    const canvas = document.getElementById('level-0');
    // Read a copy (a context made for reading), not the page's own canvas.
    const copy = document.createElement('canvas');
    copy.width = canvas.width; copy.height = canvas.height;
    const g = copy.getContext('2d', { willReadFrequently: true });
    g.drawImage(canvas, 0, 0);
    const m = window.__msda;
    const lum = (x0, y0, w, h) => {
      const d = g.getImageData(Math.round(x0), Math.round(y0), Math.round(w), Math.round(h)).data;
      let s = 0;
      for (let i = 0; i < d.length; i += 4) s += 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2];
      return s / (d.length / 4);
    };
    const sx = canvas.width, sy = canvas.height;
    const out = [];
    const loc = m.forwardArgs.samplingLocations.data;
    for (let p = 0; p < 4; p++) {
      const i = p;                      // head 0, level 0
      const [x, y] = [loc[2 * i] * sx, loc[2 * i + 1] * sy];
      const px = sx / 80;               // one map pixel in backing pixels
      // The 2×2 corner block around the point, without the ring.
      out.push(lum(x - 0.9 * px, y - 0.9 * px, 1.8 * px, 1.8 * px));
    }
    return { block: out, corner: lum(sx * 0.02, sy * 0.05, sx * 0.1, sy * 0.1) };
  });
  const on = await measure();
  await page.setChecked('#heat', false);
  const off = await measure();
  await page.setChecked('#heat', true);
  for (let p = 0; p < 4; p++) {
    assert.ok(on.block[p] > on.corner + 60, `point ${p + 1}: glow ${on.block[p]} vs the dimmed map ${on.corner}`);
  }
  assert.ok(on.corner < 0.6 * off.corner, `the rest of the map is dimmed under the glow: ${on.corner} vs ${off.corner}`);
});

test('Play runs descent until paused', async () => {
  await page.click('#reset');
  const start = await snapshot();
  await page.click('#play');
  await page.waitForFunction(() => window.__msda.steps >= 20, null, { timeout: PATIENCE_MS });
  await page.click('#play');
  const s = await snapshot();
  assert.equal(await page.getAttribute('#play', 'aria-pressed'), 'false');
  assert.ok(s.loss < start.loss, `play: ${start.loss} -> ${s.loss}`);
  const later = await snapshot();
  assert.equal(later.steps, s.steps, 'paused');
});

test('every option and every switch under the hood re-renders with the Node API\'s numbers', async () => {
  await page.click('#reset');
  await page.evaluate(() => { for (let k = 0; k < 5; k++) document.getElementById('step').click(); });
  await page.click('#hood > summary');
  const changes = [
    ['select', '#padding', 'border'], ['select', '#value-layout', 'BNLC'], ['select', '#loc-layout', 'B2QHLP'],
    ['check', '#align-corners', true], ['select', '#simd', 'scalar'], ['select', '#head', '2'],
    ['check', '#heat', false], ['select', '#head', '1'], ['check', '#heat', true], ['select', '#simd', 'simd'],
    ['select', '#threads-select', '1'], ['select', '#threads-select', 'auto'],
    ['check', '#align-corners', false], ['select', '#value-layout', 'BLNC'], ['select', '#loc-layout', 'BQHLP2'],
    ['select', '#padding', 'zeros'], ['select', '#head', '0'],
  ];
  let previous = await snapshot();
  for (const [kind, sel, v] of changes) {
    if (kind === 'select') await page.selectOption(sel, v); else await page.setChecked(sel, v);
    await page.waitForFunction((r) => window.__msda.renders > r, previous.renders);
    const s = await snapshot();
    await checkAgainstNode(s);
    if (s.options.valueLayout === 'BLNC') await checkSample(s);
    previous = s;
  }
  assert.equal(previous.options.valueLayout, 'BLNC');
  assert.deepEqual(problems, []);
});

test('the layouts and the module give the same numbers as the defaults', async () => {
  await page.click('#reset');
  const base = await snapshot();
  await page.selectOption('#value-layout', 'BNLC');
  await page.selectOption('#loc-layout', 'B2QHLP');
  await page.selectOption('#simd', 'scalar');
  await page.waitForFunction(() => window.__msda.simd === false && window.__msda.options.samplingLocationsLayout === 'B2QHLP');
  const s = await snapshot();
  assert.equal(s.loss, base.loss, 'same loss in every layout and module');
  sameBits('output (BNLC, B2QHLP, scalar vs defaults)', s.output, base.output);
  sameBits('targetFeature (BNLC, B2QHLP, scalar vs defaults)', s.targetFeature, base.targetFeature);
  sameBits('gradAttentionWeights (BNLC, B2QHLP, scalar vs defaults)', s.gradAttentionWeights, base.gradAttentionWeights);
  for (const [sel, v] of [['#value-layout', 'BLNC'], ['#loc-layout', 'BQHLP2'], ['#simd', 'simd']]) await page.selectOption(sel, v);
  await page.waitForFunction(() => window.__msda.simd === true && window.__msda.options.valueLayout === 'BLNC' && window.__msda.options.samplingLocationsLayout === 'BQHLP2');
});

// Step and Play on screen with a level in view, the level not hidden under them; nothing wider
// than the window; every figure's content inside its frame.
async function checkLayout(p, width, height) {
  for (const l of [0, 2]) {
    await p.evaluate((id) => document.getElementById(id).scrollIntoView({ block: 'start' }), `level-${l}`);
    const v = await p.evaluate((id) => {
      const inView = (el) => { const r = el.getBoundingClientRect(); return r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; };
      const canvas = document.getElementById(id);
      const r = canvas.getBoundingClientRect();
      const cx = r.left + r.width / 2, cy = r.top + Math.min(r.height, innerHeight - r.top) / 3;
      return { step: inView(document.getElementById('step')), play: inView(document.getElementById('play')),
        reset: inView(document.getElementById('reset')), levelOnTop: document.elementFromPoint(cx, cy) === canvas,
        visibleHeight: Math.min(r.bottom, document.getElementById('controls').getBoundingClientRect().top) - Math.max(r.top, 0), height: r.height };
    }, `level-${l}`);
    assert.ok(v.step && v.play && v.reset, `${width}×${height}, level ${l}: Step, Play and Reset in the viewport ${JSON.stringify(v)}`);
    assert.ok(v.levelOnTop && v.visibleHeight >= 0.6 * v.height, `${width}×${height}: level ${l} visible next to them ${JSON.stringify(v)}`);
  }
  const overflow = await p.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `horizontal overflow ${overflow}px at ${width}px`);
  const outside = await p.evaluate(() => {
    const bad = [];
    for (const frame of document.querySelectorAll('.fig, .level, fieldset, .controls, .curve-box, .hood, header, .step')) {
      const f = frame.getBoundingClientRect();
      for (const el of frame.querySelectorAll('*')) {
        if (el.closest('details:not([open])') && el.tagName !== 'SUMMARY' || el.tagName === 'OPTION') continue;
        // A code snippet keeps its lines and scrolls sideways where they are wider (phone.test.js).
        const scrolls = el.matches('pre.snippet') && getComputedStyle(el).overflowX === 'auto';
        if (el.parentElement.closest('pre.snippet')) continue;
        const r = el.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        if (r.left < f.left - 1 || r.right > f.right + 1 || r.top < f.top - 1 || r.bottom > f.bottom + 1) {
          bad.push(`${el.tagName}.${el.className} "${(el.textContent || '').slice(0, 30)}" [${Math.round(r.left)}, ${Math.round(r.right)}] outside ${frame.className || frame.tagName} [${Math.round(f.left)}, ${Math.round(f.right)}]`);
        }
        // Text cut off inside its own box.
        if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible' && el.clientWidth > 0 && el.tagName !== 'SELECT' && !scrolls) {
          bad.push(`${el.tagName}.${el.className} "${(el.textContent || '').slice(0, 30)}" is cut off`);
        }
      }
    }
    return bad;
  });
  assert.deepEqual(outside, [], `${width}×${height}: content outside its frame`);
}

test('1280×800: Step/Play beside a level; nothing outside its frame; mouse and keyboard described', async () => {
  await page.click('#reset');
  await checkLayout(page, 1280, 800);
  assert.ok(await page.isVisible('.mouse-only >> nth=0'));
  assert.equal(await page.isVisible('.touch-only >> nth=0'), false);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: screenshotPath('page-1280x800-dark-full.png'), fullPage: true });
});

test('390×844 phone (touch): Step/Play pinned beside a level, no horizontal scroll, touch described, light scheme', async () => {
  const phone = await openPage(env.browser, env.url, { width: 390, height: 844 }, { isMobile: true, hasTouch: true, colorScheme: 'light' });
  try {
    await checkLayout(phone.page, 390, 844);
    // The formulas too, unfolded.
    await phone.page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = true; }));
    await checkLayout(phone.page, 390, 844);
    await phone.page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = false; }));
    assert.ok(await phone.page.isVisible('.touch-only >> nth=0'), 'touch gestures are described');
    assert.equal(await phone.page.isVisible('.mouse-only >> nth=0'), false, 'no mouse or keyboard help on a phone');
    const bg = await phone.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, 'rgb(246, 247, 251)', 'light colour scheme');
    for (let k = 0; k < 5; k++) await phone.page.tap('#step');
    const s = await snapshot(phone.page);
    assert.equal(s.steps, 5);
    await checkAgainstNode(s);
    // A tap on the sampling demo moves its point.
    const r = await phone.page.evaluate(() => window.__msda.rectOf('sample-canvas'));
    await phone.page.tap('#sample-canvas', { position: { x: r.width * 0.25, y: r.height * 0.25 } });
    const t = await snapshot(phone.page);
    assert.ok(Math.abs(t.sample.location[0] - 0.25) < 0.02 && Math.abs(t.sample.location[1] - 0.25) < 0.02, `tap moved the point to ${t.sample.location}`);
    await phone.page.screenshot({ path: screenshotPath('page-390x844-light-full.png'), fullPage: true });
    await phone.page.evaluate(() => document.getElementById('level-0').scrollIntoView());
    await phone.page.screenshot({ path: screenshotPath('page-390x844-light-playground.png') });
    assert.deepEqual(phone.problems, []);
  } finally {
    await phone.context.close();
  }
});

test('390×844 phone, dark scheme: screenshots', async () => {
  const phone = await openPage(env.browser, env.url, { width: 390, height: 844 }, { isMobile: true, hasTouch: true, colorScheme: 'dark' });
  try {
    const bg = await phone.page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, 'rgb(15, 20, 32)', 'dark colour scheme');
    await phone.page.screenshot({ path: screenshotPath('page-390x844-dark-top.png') });
    await phone.page.evaluate(() => { for (let k = 0; k < 60; k++) document.getElementById('step').click(); });
    await phone.page.evaluate(() => document.getElementById('level-0').scrollIntoView());
    await phone.page.screenshot({ path: screenshotPath('page-390x844-dark-playground.png') });
    assert.deepEqual(phone.problems, []);
  } finally {
    await phone.context.close();
  }
  await context.close();
});
