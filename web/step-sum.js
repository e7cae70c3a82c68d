// Step 2, many points, many scales, one weighted sum: what each of the query's 12 points reads
// (through the operator, one point at a time) and how the weights combine them into the output.
import { NUM_HEADS, CHANNELS, NUM_POINTS, HEADS } from './scene.js';
import { MIN_WEIGHT } from './model.js';
import { $, NL, SLOTS, POINT_COLOURS, slot, clamp01 } from './page-state.js';
import { rgbOf, css } from './draw.js';

// What each point reads on its own: query l·N_p + p has weight 1 on point (l, p) of every head
// and 0 elsewhere, so its output is that point's reading.
export function preparePointSamples(ctx) {
  const { msda, data, ui } = ctx;
  const sampler = msda.prepare({ batch: 1, numQueries: NL * NUM_POINTS, numHeads: NUM_HEADS, channels: CHANNELS,
    numPoints: NUM_POINTS, spatialShapes: data.spatialShapes, alignCorners: ui.opts.alignCorners,
    paddingMode: ui.opts.paddingMode }, { mode: 'forward' });
  sampler.value.set(data.value);
  const w1 = new Float32Array(NL * NUM_POINTS * SLOTS);
  for (let q = 0; q < NL * NUM_POINTS; q++) for (let hd = 0; hd < NUM_HEADS; hd++) w1[q * SLOTS + hd * NL * NUM_POINTS + q] = 1;
  sampler.attentionWeights.set(w1);
  ctx.points.sampler = sampler;
}

export function computePointSamples(ctx) {
  const nq = NL * NUM_POINTS;
  const loc = new Float32Array(nq * SLOTS * 2);
  for (let q = 0; q < nq; q++) loc.set(ctx.state.samplingLocations, q * SLOTS * 2);
  ctx.points.sampler.samplingLocations.set(loc);
  ctx.points.samples = ctx.points.sampler.forward().data.slice();    // (1, nq, N_h · C_h)
}

export function pointSample(ctx, head, l, p) {
  const at = ((l * NUM_POINTS + p) * NUM_HEADS + head) * CHANNELS;
  return ctx.points.samples.subarray(at, at + CHANNELS);
}

export function renderSum(ctx) {
  const { ui, state, result } = ctx;
  const grid = $('sum-grid');
  grid.textContent = '';
  const head = ui.head;
  let total = 0;
  for (let l = 0; l < NL; l++) {
    const lvl = document.createElement('span');
    lvl.className = 'lvl';
    lvl.textContent = `level ${l}`;
    grid.append(lvl);
    for (let p = 0; p < NUM_POINTS; p++) {
      const w = state.attentionWeights[slot(head, l, p)];
      total += w;
      const term = document.createElement('span');
      term.className = 'term';
      const chip = document.createElement('span');
      chip.className = 'chip';
      chip.style.background = css(rgbOf(pointSample(ctx, head, l, p), head));
      chip.style.borderColor = POINT_COLOURS[p];
      // Size by weight: a heavier reading counts for more in the sum.
      const size = Math.round(12 + 22 * Math.sqrt(clamp01(w)));
      chip.style.width = chip.style.height = `${size}px`;
      chip.title = `level ${l}, point ${p + 1}: its reading`;
      const t = document.createElement('span');
      t.className = 'mono';
      t.textContent = `×${w.toFixed(3)}`;
      term.append(chip, t);
      grid.append(term);
    }
  }
  $('sum-output').style.background = css(rgbOf(result.output.subarray(head * CHANNELS, (head + 1) * CHANNELS), head));
  $('sum-note').textContent = ui.weightMode === 'softmax'
    ? `Head ${head} (${HEADS[head].name}): the 12 weights sum to ${total.toFixed(3)} (softmax); drag a point or a weight slider below and the others share what is left.`
    : `Head ${head} (${HEADS[head].name}): the 12 weights sum to ${total.toFixed(3)}; raw weights are independent, anywhere in [${MIN_WEIGHT}, 1].`;
}
