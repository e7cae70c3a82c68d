// Each step's own figure in Chromium, against Node's numbers from the package API: step 2's pyramid
// (rings where the points sample, sized by weight, draggable, readings equal to the operator's);
// step 4's one-point gradient (the four corners' pulls sum to backward's −∂loss/∂location); the
// loss curve's labelled, ticked axes; the fold "where the points and weights come from" (the
// page's start is the projection of its query, and the package's MSDeformAttn layer with those
// projections gives the page's output); the maps aligned; nothing left under the pinned bar;
// no overlap of a figure's parts at 1280×800 and 390×844. Screenshots in build/screenshots/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { init } from '../../bindings/index.js';
import { MSDeformAttn } from '../../bindings/tfjs.js';
import { drawPicture, buildPyramid, LEVELS } from '../../web/scene.js';
import { softmaxInto } from '../../web/model.js';
import { project, queryAt, QUERY, PROJECTIONS, REFERENCE, D_MODEL } from '../../web/query.js';
import { launch, openPage, screenshotPath } from './browser.js';

let env, page, problems, msda;
const NH = 3, NL = 3, NP = 4, C = 9;
const slot = (h, l, p) => (h * NL + l) * NP + p;

before(async () => {
  env = await launch();
  ({ page, problems } = await openPage(env.browser, env.url, { width: 1280, height: 800 }, { colorScheme: 'dark' }));
  msda = await init();
  await tf.setBackend('cpu');
});
after(async () => { if (env) await env.close(); });

const state = (p = page) => p.evaluate(() => {
  const m = window.__msda;
  return { loc: Array.from(m.forwardArgs.samplingLocations.data), w: Array.from(m.forwardArgs.attentionWeights.data),
    output: Array.from(m.output), pointSamples: Array.from(m.pointSamples), rings: m.rings, pull: m.pull, curve: m.curve,
    query: m.query, renders: m.renders, steps: m.steps, gradOutput: Array.from(m.gradOutput), target: m.target,
    gradLoc: Array.from(m.grads.gradSamplingLocations.data), head: m.head };
});

// What the operator reads at one point of every head (weight 1 there, 0 elsewhere).
function reading(s, l, p) {
  const data = buildPyramid(drawPicture());
  const w = new Float32Array(NH * NL * NP);
  for (let h = 0; h < NH; h++) w[slot(h, l, p)] = 1;
  return msda.forward({ value: { data: data.value, shape: [1, data.length, NH, C] }, spatialShapes: data.spatialShapes,
    samplingLocations: { data: new Float32Array(s.loc), shape: [1, 1, NH, NL, NP, 2] }, attentionWeights: { data: w, shape: [1, 1, NH, NL, NP] } }).data;
}

// Step 2's caption says what the squares show: the reading's own colour, sized by the weight
// (a square is not the reading times its weight: changing a weight resizes it, its colour stays).
test('step 2: the caption matches the squares: a weight changes its square\'s size, never its colour', async () => {
  await page.click('#reset');
  // The lightest point's square (a square's side follows its weight over the heaviest's, so
  // raising the heaviest would change nothing), raised to be the heaviest.
  const terms = () => page.$$eval('#sum-grid .term', (ts) => ts.map((t) => {
    const c = t.querySelector('.chip'), s = t.querySelector('input');
    return { id: s.id, w: Number(s.value), colour: getComputedStyle(c).backgroundColor, size: c.getBoundingClientRect().width };
  }));
  const light = (await terms()).reduce((a, b) => (b.w < a.w ? b : a));
  await page.$eval(`#${light.id}`, (el) => { el.value = '0.95'; el.dispatchEvent(new Event('change')); });
  await page.waitForFunction(([id, size]) => document.getElementById(id).closest('.term').querySelector('.chip').getBoundingClientRect().width !== size,
    [light.id, light.size]);
  const after = (await terms()).find((t) => t.id === light.id);
  assert.ok(after.w > light.w, `the weight rose: ${light.w} -> ${after.w}`);
  assert.ok(after.size > light.size, `a heavier weight, a larger square: ${light.size} -> ${after.size}`);
  assert.equal(after.colour, light.colour, 'the square keeps the reading\'s colour');
  const caption = await page.textContent('.sum-key');
  assert.doesNotMatch(caption, /square is that point's reading[^;]*times its weight/);
  assert.match(caption.replace(/\s+/g, ' '), /Each square shows that point's reading in its colour .*its size the point's weight/);
  assert.equal(await page.getAttribute('#sum-grid', 'aria-label'), "Each point's reading, sized by its weight");
  await page.click('#reset');
});

test('step 2: the pyramid shows the points where they sample, sized by weight; dragging one moves it and its reading', async () => {
  await page.click('#reset');
  const s = await state();
  const head = s.w.slice(0, 12);
  // Rings sized by weight: the order of radii is the order of weights, and they differ.
  const rings = s.rings.map((r) => ({ ...r, w: head[r.level * NP + r.point] })).sort((a, b) => a.w - b.w);
  for (let k = 1; k < rings.length; k++) assert.ok(rings[k].radius >= rings[k - 1].radius, `ring of weight ${rings[k].w} not smaller`);
  assert.ok(rings.at(-1).radius > rings[0].radius + 5, 'unequal weights show as unequal rings');
  const sizes = await page.$$eval('#sum-grid .chip', (cs) => cs.map((c) => c.getBoundingClientRect().width));
  const order = head.map((w, i) => [w, sizes[i]]).sort((a, b) => a[0] - b[0]);
  for (let k = 1; k < order.length; k++) assert.ok(order[k][1] >= order[k - 1][1], 'squares sized by weight');
  assert.ok(new Set(await page.$$eval('#sum-grid .term .mono', (e) => e.map((x) => x.textContent))).size > 6, 'not twelve equal weights');
  // Drag point 1 of level 1 on the pyramid.
  await page.evaluate(() => document.getElementById('pyramid').scrollIntoView());
  const from = await page.evaluate(() => window.__msda.sumPointOnScreen(1, 0));
  const rect = await page.evaluate(() => window.__msda.rectOf('sum-level-1'));
  await page.mouse.move(from.x, from.y);
  await page.mouse.down();
  await page.mouse.move(rect.x + rect.width * 0.6, rect.y + rect.height * 0.7, { steps: 4 });
  await page.mouse.up();
  const t = await state();
  const i = slot(0, 1, 0);
  assert.ok(Math.abs(t.loc[2 * i] - 0.6) < 0.01 && Math.abs(t.loc[2 * i + 1] - 0.7) < 0.01, `moved to ${t.loc[2 * i]}, ${t.loc[2 * i + 1]}`);
  const want = reading(t, 1, 0);
  const q = 1 * NP + 0;
  assert.deepEqual(t.pointSamples.slice(q * NH * C, (q + 1) * NH * C), Array.from(want), 'its reading is the operator\'s at the new place');
  assert.notDeepEqual(t.output, s.output, 'the output followed');
  // Keys: 3 picks point 3, ArrowDown moves it by 0.01.
  await page.focus('#sum-level-2');
  await page.keyboard.press('3');
  await page.keyboard.press('ArrowDown');
  const k = await state();
  const j = slot(0, 2, 2);
  assert.ok(Math.abs(k.loc[2 * j + 1] - t.loc[2 * j + 1] - 0.01) < 1e-6, 'ArrowDown moved point 3 of level 2');
  assert.equal(k.loc[2 * j], t.loc[2 * j]);
  // The weight slider beside the reading.
  await page.fill('#sw-2-3', '0.4');
  const u = await state();
  assert.ok(Math.abs(u.w[slot(0, 2, 3)] - 0.4) < 1e-6, `the slider set the weight: ${u.w[slot(0, 2, 3)]}`);
  assert.match(await page.textContent('#sum-note'), /sum to 1\.000/);
  assert.doesNotMatch(await page.textContent('#step-2'), /slider below/, 'no pointer at controls out of sight');
  await page.screenshot({ path: screenshotPath('figures-1280x800-step2.png') });
  await page.click('#reset');
});

test('step 4: one point\'s four corner pulls sum to the operator\'s −∂loss/∂location; the figure follows the point', async () => {
  await page.click('#reset');
  const check = (s) => {
    const f = s.pull;
    const i = slot(s.head, f.level, f.point);
    assert.deepEqual(f.backward, [-s.gradLoc[2 * i], -s.gradLoc[2 * i + 1]], 'the white arrow is backward\'s gradient');
    const scale = Math.max(1, ...f.pulls.flatMap((c) => c.pull.map(Math.abs)));
    for (const k of [0, 1]) assert.ok(Math.abs(f.sum[k] - f.backward[k]) < 1e-4 * scale, `sum of pulls ${f.sum} vs backward ${f.backward}`);
    assert.equal(f.pulls.length, 4);
    assert.ok(Math.abs(f.pulls.reduce((a, c) => a + c.share, 0) - 1) < 1e-9, 'the shares sum to 1');
    // Arrows on one linear scale: length / |vector| is the same for the four and the sum.
    const ratios = [...f.pulls.map((c) => c.pull), f.backward].map((v, k) => f.arrowLengths[k] / Math.hypot(...v)).filter(Number.isFinite);
    for (const r of ratios) assert.ok(Math.abs(r - ratios[0]) < 1e-9 * ratios[0], `arrow scales ${ratios}`);
    assert.ok(Math.abs(Math.max(...f.arrowLengths) - 100) < 1e-9, 'the longest is 100 units');
    return f;
  };
  const a = check(await state());
  assert.deepEqual([a.level, a.point], [2, 0]);
  // The numbers shown are these.
  const texts = await page.$$eval('#pull-table .backward', (e) => e.map((x) => x.textContent));
  assert.deepEqual(texts, a.backward.map((v) => (v > 0 ? '+' : '') + (v === 0 ? '0' : v.toFixed(Math.min(6, Math.max(0, 2 - Math.floor(Math.log10(Math.abs(v)))))))));
  await page.selectOption('#pull-point', '0,2');
  const b = check(await state());
  assert.deepEqual([b.level, b.point], [0, 2]);
  await page.focus('#pull-canvas');
  await page.keyboard.press('ArrowRight');
  const c = check(await state());
  assert.ok(Math.abs(c.location[0] - b.location[0] - 0.0025) < 1e-6, `ArrowRight moved the point: ${b.location} -> ${c.location}`);
  assert.notDeepEqual(c.pulls.map((x) => x.pull), b.pulls.map((x) => x.pull), 'the pulls changed');
  // Dragging in the close-up moves the point with the pointer (the view holds still meanwhile).
  await page.evaluate(() => document.getElementById('pull-canvas').scrollIntoView({ block: 'center' }));
  const r = await page.evaluate(() => window.__msda.rectOf('pull-canvas'));
  await page.mouse.move(r.x + r.width / 2, r.y + r.height / 2);
  await page.mouse.down();
  await page.mouse.move(r.x + r.width * 0.75, r.y + r.height / 2, { steps: 3 });
  const midState = await state();
  const mid = midState.pull;
  await page.mouse.up();
  const want = c.view.x0 + 0.75 * c.view.w;
  assert.ok(Math.abs(mid.location[0] - want) < 0.01 * c.view.w, `dragged to ${mid.location[0]}, pointer at ${want}`);
  assert.deepEqual(mid.view, c.view, 'the close-up holds still while dragging');
  check(midState);
  // Descent moves the point; the close-up follows it.
  await page.click('#step');
  const d = check(await state());
  assert.ok(Math.abs(d.view.x0 + d.view.w / 2 - d.location[0]) < 1e-9, 'the close-up is centred on the point again');
  await page.screenshot({ path: screenshotPath('figures-1280x800-step4.png') });
  await page.selectOption('#pull-point', '2,0');
  await page.click('#reset');
});

test('the loss curve has labelled axes with ticks that span the losses', async () => {
  await page.click('#reset');
  await page.evaluate(() => { for (let k = 0; k < 30; k++) document.getElementById('step').click(); });
  const s = await state();
  const history = await page.evaluate(() => window.__msda.loss);
  assert.equal(s.curve.xLabel, 'step');
  assert.match(s.curve.yLabel, /^loss/);
  assert.equal(s.curve.xTicks[0], 0);
  assert.ok(s.curve.xTicks.at(-1) <= 30 && s.curve.xTicks.at(-1) >= 20, `step ticks ${s.curve.xTicks}`);
  assert.ok(s.curve.yTicks.length >= 2, `loss ticks ${s.curve.yTicks}`);
  assert.ok(Math.min(...s.curve.yTicks) >= history * 0.999, 'ticks inside the range');
  await page.evaluate(() => document.getElementById('curve').scrollIntoView({ block: 'center' }));
  await page.screenshot({ path: screenshotPath('figures-1280x800-curve.png') });
  await page.click('#reset');
});

test('where the points and weights come from: the start is the query\'s projection, as the package\'s MSDeformAttn computes it', async () => {
  await page.click('#reset');
  const s = await state();
  const pr = project(QUERY);
  assert.deepEqual(s.loc, Array.from(pr.locations), 'the start locations are reference + offsets / (W, H)');
  assert.deepEqual(s.w, Array.from(softmaxInto(pr.logits, new Float32Array(36))), 'the start weights are the softmax of the logits');
  // The package's layer with these projections (value_proj, output_proj: identity) gives the output.
  const layer = new MSDeformAttn({ d_model: D_MODEL, n_levels: NL, n_heads: NH, n_points: NP, seed: 1 });
  const eye = new Float32Array(D_MODEL * D_MODEL);
  for (let k = 0; k < D_MODEL; k++) eye[k * D_MODEL + k] = 1;
  layer.loadStateDict({ ...PROJECTIONS, 'value_proj.weight': { data: eye, shape: [D_MODEL, D_MODEL] }, 'value_proj.bias': { data: new Float32Array(D_MODEL), shape: [D_MODEL] },
    'output_proj.weight': { data: eye, shape: [D_MODEL, D_MODEL] }, 'output_proj.bias': { data: new Float32Array(D_MODEL), shape: [D_MODEL] } });
  const data = buildPyramid(drawPicture());
  const out = tf.tidy(() => layer.apply(tf.tensor(QUERY, [1, 1, D_MODEL]), tf.tensor(Array(NL).fill(REFERENCE).flat(), [1, 1, NL, 2]),
    tf.tensor(data.value, [1, data.length, D_MODEL]), LEVELS).dataSync());
  layer.dispose();
  for (let k = 0; k < out.length; k++) assert.ok(Math.abs(out[k] - s.output[k]) < 2e-5, `channel ${k}: layer ${out[k]}, page ${s.output[k]}`);
  // Moving the query moves the start, and the page restarts from it.
  await page.evaluate(() => { document.getElementById('from-query').open = true; });
  await page.fill('#query-t', '0.5');
  const t = await state();
  assert.equal(t.query.t, 0.5);
  assert.deepEqual(t.loc, Array.from(project(queryAt(0.5)).locations));
  assert.notDeepEqual(t.loc, s.loc);
  assert.equal(t.steps, 0);
  assert.equal((await page.$$eval('#query-table .mono', (e) => e.length)), 48, '12 rows of offset, location, logit, weight');
  await page.evaluate(() => document.getElementById('from-query').scrollIntoView());
  await page.screenshot({ path: screenshotPath('figures-1280x800-from-query.png') });
  await page.fill('#query-t', '0');
  const back = await state();
  assert.deepEqual(back.loc, s.loc);
  assert.deepEqual(problems, []);
});

// The maps aligned; whatever is scrolled into view stops above the pinned bar; a figure's parts
// do not overlap one another.
async function checkFigures(p, label) {
  const tops = await p.evaluate(() => [0, 1, 2].map((l) => document.getElementById(`level-${l}`).getBoundingClientRect()));
  if (tops[1].top < tops[0].bottom) {   // side by side
    assert.ok(Math.abs(tops[0].top - tops[1].top) <= 1 && Math.abs(tops[2].top - tops[1].top) <= 1, `${label}: maps at ${tops.map((r) => r.top)}`);
  }
  for (const sel of ['.legends', '#heat-ticks', '.curve-box', '#points', '.options']) {
    const v = await p.evaluate((s) => {
      const e = document.querySelector(s);
      e.scrollIntoView({ block: 'end' });
      const r = e.getBoundingClientRect(), bar = document.getElementById('controls').getBoundingClientRect();
      const beside = r.left >= bar.right || r.right <= bar.left;
      return { bottom: r.bottom, bar: bar.top, beside };
    }, sel);
    assert.ok(v.beside || v.bottom <= v.bar + 0.5, `${label}: ${sel} scrolled into view ends at ${v.bottom}, under the bar from ${v.bar}`);
  }
  const overlaps = await p.evaluate(() => {
    const bad = [];
    for (const fig of document.querySelectorAll('.fig-sum, .pyramid, .sum-side, .fig-pull, .pull-side, .fig-query, .query-side, .fig-sample, .sample-side')) {
      const kids = [...fig.children].filter((k) => k.getClientRects().length && getComputedStyle(k).display !== 'none');
      for (let a = 0; a < kids.length; a++) {
        for (let b = a + 1; b < kids.length; b++) {
          const r = kids[a].getBoundingClientRect(), q = kids[b].getBoundingClientRect();
          const ox = Math.min(r.right, q.right) - Math.max(r.left, q.left), oy = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
          if (ox > 1 && oy > 1) bad.push(`${fig.className}: ${kids[a].className || kids[a].tagName} overlaps ${kids[b].className || kids[b].tagName}`);
        }
      }
    }
    return bad;
  });
  assert.deepEqual(overlaps, [], label);
}

// A snippet of the page run as written, its imports pointed at this checkout, with `vars` in scope.
async function runSnippet(id, vars, result) {
  const code = (await page.textContent(`#${id}`))
    .replace(/import \{ ([^}]+) \} from 'ms-deform-attn\/tfjs';/, (_, n) => `const { ${n} } = await import(${JSON.stringify(new URL('../../bindings/tfjs.js', import.meta.url).href)});`)
    .replace(/import \{ ([^}]+) \} from 'ms-deform-attn';/, (_, n) => `const { ${n} } = await import(${JSON.stringify(new URL('../../bindings/index.js', import.meta.url).href)});`);
  assert.doesNotMatch(code, /^import /m);
  const AsyncFunction = (async () => {}).constructor;
  return new AsyncFunction(...Object.keys(vars), `${code}\nreturn ${result};`)(...Object.values(vars));
}

test('the page\'s snippets run as written: the API call gives the page\'s output and gradients, the layer its output', async () => {
  await page.click('#reset');
  const s = await page.evaluate(() => {
    const m = window.__msda;
    const plain = (t) => ({ data: Array.from(t.data), shape: Array.from(t.shape) });
    return { fwd: { value: plain(m.forwardArgs.value), samplingLocations: plain(m.forwardArgs.samplingLocations),
      attentionWeights: plain(m.forwardArgs.attentionWeights), spatialShapes: m.forwardArgs.spatialShapes },
    gradOutput: plain(m.backwardArgs.gradOutput), output: Array.from(m.output), gradW: Array.from(m.grads.gradAttentionWeights.data) };
  });
  const f32 = (t) => ({ data: new Float32Array(t.data), shape: t.shape });
  const got = await runSnippet('use-snippet', { value: f32(s.fwd.value), spatialShapes: s.fwd.spatialShapes,
    samplingLocations: f32(s.fwd.samplingLocations), attentionWeights: f32(s.fwd.attentionWeights), gradOutput: f32(s.gradOutput) },
  '{ output, gradAttentionWeights }');
  assert.deepEqual(Array.from(got.output.data), s.output, 'the snippet\'s forward is the page\'s');
  assert.deepEqual(Array.from(got.gradAttentionWeights.data), s.gradW, 'and its backward');
  const eye = new Float32Array(D_MODEL * D_MODEL);
  for (let k = 0; k < D_MODEL; k++) eye[k * D_MODEL + k] = 1;
  const zeros = { data: new Float32Array(D_MODEL), shape: [D_MODEL] };
  const weights = { ...PROJECTIONS, 'value_proj.weight': { data: eye, shape: [D_MODEL, D_MODEL] }, 'value_proj.bias': zeros,
    'output_proj.weight': { data: eye, shape: [D_MODEL, D_MODEL] }, 'output_proj.bias': zeros };
  const data = buildPyramid(drawPicture());
  const out = await runSnippet('layer-snippet', { weights, query: tf.tensor(QUERY, [1, 1, D_MODEL]),
    referencePoints: tf.tensor(Array(NL).fill(REFERENCE).flat(), [1, 1, NL, 2]), inputFlatten: tf.tensor(data.value, [1, data.length, D_MODEL]) },
  '(() => { const d = out.dataSync(); layer.dispose(); return d; })()');
  for (let k = 0; k < out.length; k++) assert.ok(Math.abs(out[k] - s.output[k]) < 2e-5, `layer snippet, channel ${k}: ${out[k]} vs ${s.output[k]}`);
});

test('1280×800 and 390×844: maps aligned, nothing under the pinned bar, no overlap; the position channel explained in step 1', async () => {
  await page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = true; }));
  await checkFigures(page, '1280×800');
  assert.match(await page.textContent('#position-note'), /“1” is its constant part, 2\.000 at every pixel/);
  const vec = await page.evaluate(() => [document.getElementById('sample-vector').getBoundingClientRect().bottom, document.getElementById('position-note').getBoundingClientRect().top]);
  assert.ok(vec[1] >= vec[0] && vec[1] - vec[0] < 30, 'the note sits right under the channels it explains');
  for (const scheme of ['light', 'dark']) {
    const phone = await openPage(env.browser, env.url, { width: 390, height: 844 }, { isMobile: true, hasTouch: true, colorScheme: scheme, deviceScaleFactor: 2 });
    try {
      await phone.page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = true; }));
      await checkFigures(phone.page, `390×844 ${scheme}`);
      for (const id of ['step-2', 'step-4']) {
        await phone.page.evaluate((x) => document.getElementById(x).scrollIntoView(), id);
        await phone.page.screenshot({ path: screenshotPath(`figures-390x844-${scheme}-${id}.png`) });
      }
      assert.deepEqual(phone.problems, []);
    } finally {
      await phone.context.close();
    }
  }
  await page.evaluate(() => document.querySelectorAll('details').forEach((d) => { d.open = false; }));
});

// The playground at 1280×800: the sticky Step/Play bar covers no row of the weights table and no
// part of "Under the hood" at any scroll position, open or closed; opened, "Under the hood" takes
// the playground's whole width below the bar, with no blank area beside it.
test('1280×800: the Step/Play bar never covers the weights table or Under the hood; the opened panel leaves no blank area', async () => {
  await page.setViewportSize({ width: 1280, height: 800 });
  for (const open of [false, true]) {
    await page.evaluate((o) => { document.getElementById('hood').open = o; }, open);
    const covered = await page.evaluate(async () => {
      const pg = document.getElementById('playground');
      const top = pg.getBoundingClientRect().top + scrollY;
      const hits = [];
      for (let y = top - innerHeight; y < top + pg.offsetHeight; y += 10) {
        window.scrollTo(0, y);
        await new Promise((r) => requestAnimationFrame(r));
        const bar = document.getElementById('controls').getBoundingClientRect();
        for (const el of document.querySelectorAll('#points > *, #points-legend, .bars-key, #hood > *')) {
          const r = el.getBoundingClientRect();
          const overlap = Math.min(r.right, bar.right) > Math.max(r.left, bar.left) && Math.min(r.bottom, bar.bottom) > Math.max(r.top, bar.top);
          if (overlap && r.height > 0) hits.push(`${el.id || el.className || el.tagName} at scroll ${Math.round(y - top)}`);
        }
      }
      return hits;
    });
    assert.deepEqual(covered.slice(0, 5), [], `hood ${open ? 'open' : 'closed'}: the bar covers these`);
  }
  const boxes = await page.evaluate(() => Object.fromEntries(['playground', 'hood', 'controls'].map((id) => {
    const r = document.getElementById(id).getBoundingClientRect();
    return [id, { left: r.left, right: r.right, top: r.top, bottom: r.bottom }];
  })));
  const main = await page.$eval('.pg-main', (e) => e.getBoundingClientRect().bottom);
  const side = await page.$eval('.pg-side', (e) => e.getBoundingClientRect().bottom);
  assert.ok(boxes.hood.top >= boxes.controls.bottom, 'the panel is below the bar');
  assert.ok(boxes.hood.top - Math.max(side, boxes.controls.bottom) < 40, `no blank area above the panel: ${JSON.stringify({ boxes, main, side })}`);
  assert.ok(boxes.hood.right - boxes.hood.left > 0.9 * (boxes.playground.right - boxes.playground.left), 'the panel spans the playground');
  await page.locator('#hood').scrollIntoViewIfNeeded();
  await page.screenshot({ path: screenshotPath('hood-1280x800.png') });
  await page.evaluate(() => { document.getElementById('hood').open = false; });
});
