// The interactive page in headless Chromium: it loads cleanly, the numbers it shows are the
// Node API's on the same inputs, dragging and keys change the gradients and the loss, Steps
// lower the loss, every toggle re-renders. Screenshots go to build/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { launch, openPage, screenshotPath } from './browser.js';

let env, page, problems, context;

before(async () => {
  env = await launch();
  ({ page, problems, context } = await openPage(env.browser, env.url));
});
after(async () => {
  if (env) await env.close();
});

// Everything the page exposes about its last forward/backward. Float32Arrays cross as base64
// of their bytes (exact, and far faster than arrays of numbers).
async function snapshot() {
  const s = await page.evaluate(() => {
    const m = window.__msda;
    const b64 = (t) => {
      const bytes = new Uint8Array(t.buffer, t.byteOffset, t.byteLength);
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
      return btoa(bin);
    };
    const plain = (t) => ({ b64: b64(t.data), shape: Array.from(t.shape) });
    const args = (a) => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v && v.data ? plain(v) : v]));
    return {
      renders: m.renders, steps: m.steps, head: m.head, simd: m.simd, target: m.target, options: m.options,
      forwardArgs: args(m.forwardArgs), backwardArgs: args(m.backwardArgs),
      targetFeature: b64(m.targetFeature), output: b64(m.output), loss: m.loss,
      lossText: document.getElementById('loss').textContent,
      gradValue: b64(m.grads.gradValue.data),
      gradSamplingLocations: b64(m.grads.gradSamplingLocations.data),
      gradAttentionWeights: b64(m.grads.gradAttentionWeights.data),
      weightGradTexts: [...document.querySelectorAll('#points .g')].map((e) => e.textContent),
      forwardText: document.getElementById('t-forward').textContent,
      backwardText: document.getElementById('t-backward').textContent,
    };
  });
  const unpack = (b) => { const buf = Buffer.from(b, 'base64'); return new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4).slice(); };
  const args = (a) => Object.fromEntries(Object.entries(a).map(([k, v]) => [k, v && v.b64 !== undefined ? { data: unpack(v.b64), shape: v.shape } : v]));
  for (const k of ['targetFeature', 'output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) s[k] = unpack(s[k]);
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

// Recomputes in Node, from the page's own inputs, what the page says it computed and shows.
async function checkAgainstNode(s) {
  const msda = await init({ simd: s.simd });
  const fwd = s.forwardArgs;
  const output = msda.forward(fwd);
  sameBits('output', s.output, output.data);

  // The target feature: every point on the target, weights 1 / (N_l * N_p).
  const nSlots = fwd.attentionWeights.data.length;
  const [nl, np] = [fwd.attentionWeights.shape[3], fwd.attentionWeights.shape[4]];
  const loc = new Float32Array(2 * nSlots);
  if (s.options.samplingLocationsLayout === 'BQHLP2') {
    for (let i = 0; i < nSlots; i++) { loc[2 * i] = s.target[0]; loc[2 * i + 1] = s.target[1]; }
  } else {
    loc.fill(Math.fround(s.target[0]), 0, nSlots); loc.fill(Math.fround(s.target[1]), nSlots);
  }
  const targetFeature = msda.forward({ ...fwd, samplingLocations: { data: loc, shape: fwd.samplingLocations.shape },
    attentionWeights: { data: new Float32Array(nSlots).fill(1 / (nl * np)), shape: fwd.attentionWeights.shape } });
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
  assert.equal(s.lossText, loss.toExponential(6), 'the loss the page displays');
  sameBits('gradOutput', s.backwardArgs.gradOutput.data, gradOutput);

  const grads = msda.backward({ ...fwd, gradOutput: { data: gradOutput, shape: output.shape } });
  sameBits('gradValue', s.gradValue, grads.gradValue.data);
  sameBits('gradSamplingLocations', s.gradSamplingLocations, grads.gradSamplingLocations.data);
  sameBits('gradAttentionWeights', s.gradAttentionWeights, grads.gradAttentionWeights.data);
  // The bars show the selected head's ∂loss/∂weight, level by level.
  const perHead = nl * np;
  const shown = grads.gradAttentionWeights.data.slice(s.head * perHead, (s.head + 1) * perHead);
  assert.deepEqual(s.weightGradTexts, Array.from(shown, (g) => (g === 0 ? '0' : g.toExponential(2))), 'displayed ∂loss/∂weight');
  assert.match(s.forwardText, /^\d+\.\d{3} ms$/);
  assert.match(s.backwardText, /^\d+\.\d{3} ms$/);
}

test('loads without page or console errors, and shows the numbers the Node API computes', async () => {
  assert.deepEqual(problems, []);
  const s = await snapshot();
  assert.ok(s.loss > 0, `initial loss ${s.loss}`);
  await checkAgainstNode(s);
  // The threads field shows the count the module runs with (1, or more when isolated and threaded).
  const threads = await page.locator('#threads').textContent();
  assert.match(threads, /^[1-9]\d*$/);
  assert.equal(threads, String(await page.evaluate(() => window.__msda.threads)));
  await page.screenshot({ path: screenshotPath('page-start-1280x800.png') });
});

test('dragging a point moves it and changes the arrows and the loss', async () => {
  const before = await snapshot();
  const level = 1, point = 0;
  const from = await page.evaluate(([l, p]) => window.__msda.pointOnScreen(l, p), [level, point]);
  const rect = await page.evaluate((l) => window.__msda.levelRect(l), level);
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  await page.mouse.move(rect.x + rect.width * 0.55, rect.y + rect.height * 0.2, { steps: 5 });
  await page.mouse.up();
  const after = await snapshot();
  // Slot (head 0, level 1, point 0) of the (1, 1, N_h, N_l, N_p, 2) locations.
  const i = (0 * 3 + level) * 4 + point;
  const locAfter = after.forwardArgs.samplingLocations.data;
  assert.ok(Math.abs(locAfter[2 * i] - 0.55) < 0.01 && Math.abs(locAfter[2 * i + 1] - 0.2) < 0.01,
    `point moved to (${locAfter[2 * i]}, ${locAfter[2 * i + 1]})`);
  assert.notEqual(after.loss, before.loss, 'loss changed');
  assert.notDeepEqual(Array.from(after.gradSamplingLocations), Array.from(before.gradSamplingLocations), 'arrows changed');
  assert.notEqual(after.lossText, before.lossText, 'the displayed loss changed');
  await checkAgainstNode(after);
  assert.deepEqual(problems, []);
});

test('clicking away from the points moves the target; keys move a point and its weight', async () => {
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
  const i = (0 * 3 + 2) * 4 + 1;
  assert.ok(Math.abs(s.forwardArgs.samplingLocations.data[2 * i] - before.forwardArgs.samplingLocations.data[2 * i] - 0.01) < 1e-6, 'ArrowRight moved point 2 by 0.01');
  assert.ok(Math.abs(s.forwardArgs.attentionWeights.data[i] - before.forwardArgs.attentionWeights.data[i] - 0.02) < 1e-6, '+ raised its weight by 0.02');
  // The wheel over a point and its slider change its weight.
  const at = await page.evaluate(() => window.__msda.pointOnScreen(2, 1));
  await page.mouse.move(at.x, at.y);
  await page.mouse.wheel(0, -100);
  const w = await snapshot();
  assert.ok(Math.abs(w.forwardArgs.attentionWeights.data[i] - s.forwardArgs.attentionWeights.data[i] - 0.02) < 1e-6, 'wheel up raised the weight by 0.02');
  await page.fill('#w-2-1', '0.5');
  const w2 = await snapshot();
  assert.equal(w2.forwardArgs.attentionWeights.data[i], Math.fround(0.5), 'the slider sets the weight');
  assert.notEqual(w2.loss, w.loss);
  await page.focus('#level-2');
  await page.keyboard.press('Shift+ArrowUp');
  const t = await snapshot();
  assert.ok(Math.abs(t.target[1] - (s.target[1] - 0.01)) < 1e-9, 'Shift+ArrowUp moved the target');
  await checkAgainstNode(t);
});

test('Step lowers the loss, Reset returns to the start', async () => {
  await page.click('#reset');
  const start = await snapshot();
  await page.click('#step');
  await page.evaluate(() => { for (let k = 1; k < 40; k++) document.getElementById('step').click(); });
  const s = await snapshot();
  assert.equal(s.steps, 40);
  assert.ok(s.loss < 0.5 * start.loss, `40 steps: loss ${start.loss} -> ${s.loss}`);
  // The points travel towards the target (locations are (x, y) pairs in BQHLP2 here).
  const meanDistance = (snap) => {
    const loc = snap.forwardArgs.samplingLocations.data;
    let d = 0;
    for (let i = 0; i < loc.length; i += 2) d += Math.hypot(loc[i] - snap.target[0], loc[i + 1] - snap.target[1]);
    return d / (loc.length / 2);
  };
  assert.ok(meanDistance(s) < 0.75 * meanDistance(start), `distance to target ${meanDistance(start)} -> ${meanDistance(s)}`);
  await checkAgainstNode(s);
  await page.screenshot({ path: screenshotPath('page-40-steps-1280x800.png') });
  await page.click('#reset');
  const again = await snapshot();
  assert.equal(again.steps, 0);
  assert.equal(again.loss, start.loss, 'Reset returns to the starting loss');
});

test('Play runs descent until paused', async () => {
  await page.click('#reset');
  const start = await snapshot();
  await page.click('#play');
  await page.waitForFunction(() => window.__msda.steps >= 20, null, { timeout: 30000 });
  await page.click('#play');
  const s = await snapshot();
  assert.equal(await page.getAttribute('#play', 'aria-pressed'), 'false');
  assert.ok(s.loss < start.loss, `play: ${start.loss} -> ${s.loss}`);
  const later = await snapshot();
  assert.equal(later.steps, s.steps, 'paused');
});

test('every toggle re-renders with the Node API\'s numbers', async () => {
  await page.click('#reset');
  await page.evaluate(() => { for (let k = 0; k < 5; k++) document.getElementById('step').click(); });
  const changes = [
    ['select', '#padding', 'border'], ['select', '#value-layout', 'BNLC'], ['select', '#loc-layout', 'B2QHLP'],
    ['check', '#align-corners', true], ['select', '#simd', 'scalar'], ['select', '#head', '2'],
    ['check', '#heat', false], ['select', '#head', '1'], ['check', '#heat', true], ['select', '#simd', 'simd'],
    ['check', '#align-corners', false], ['select', '#value-layout', 'BLNC'], ['select', '#loc-layout', 'BQHLP2'],
    ['select', '#padding', 'zeros'], ['select', '#head', '0'],
  ];
  let previous = await snapshot();
  for (const [kind, sel, v] of changes) {
    if (kind === 'select') await page.selectOption(sel, v); else await page.setChecked(sel, v);
    const s = await snapshot();
    assert.ok(s.renders > previous.renders, `${sel} = ${v} re-rendered`);
    await checkAgainstNode(s);
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
  const s = await snapshot();
  assert.equal(s.simd, false);
  // Output and weight gradients do not depend on the layouts; all come out the same bits.
  assert.equal(s.loss, base.loss, 'same loss in every layout and module');
  sameBits('output (BNLC, B2QHLP, scalar vs defaults)', s.output, base.output);
  sameBits('targetFeature (BNLC, B2QHLP, scalar vs defaults)', s.targetFeature, base.targetFeature);
  sameBits('gradAttentionWeights (BNLC, B2QHLP, scalar vs defaults)', s.gradAttentionWeights, base.gradAttentionWeights);
  await page.selectOption('#value-layout', 'BLNC');
  await page.selectOption('#loc-layout', 'BQHLP2');
  await page.selectOption('#simd', 'simd');
});

test('readable at phone width: no horizontal scroll, controls reachable', async () => {
  const phone = await openPage(env.browser, env.url, { width: 390, height: 844 }, { isMobile: true, hasTouch: true });
  try {
    const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    assert.ok(overflow <= 0, `horizontal overflow ${overflow}px at 390px`);
    for (let k = 0; k < 5; k++) await phone.page.tap('#step');
    const s = await phone.page.evaluate(() => window.__msda.steps);
    assert.equal(s, 5);
    await phone.page.screenshot({ path: screenshotPath('page-phone-390.png'), fullPage: true });
    assert.deepEqual(phone.problems, []);
  } finally {
    await phone.context.close();
  }
  await context.close();
});
