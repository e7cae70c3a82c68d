// Step 2, many points, many scales, one weighted sum: what each of the query's 12 points reads
// (through the operator, one point at a time) and how the weights combine them into the output.
import { LEVELS, NUM_HEADS, CHANNELS, NUM_POINTS, HEADS } from './scene.js';
import { MIN_WEIGHT } from './model.js';
import { $, NL, SLOTS, CANVAS_W, CANVAS_H, POINT_COLOURS, slot, clamp01 } from './page-state.js';
import { rgbOf, css, beginCanvas, imageRect, toNormalised, arrowMoves, ringLabels } from './draw.js';

// What each point reads on its own: query l·N_p + p has weight 1 on point (l, p) of every head
// and 0 elsewhere, so its output is that point's reading.
export function preparePointSamples(ctx) {
  const { msda, data, ui } = ctx;
  const sampler = msda.prepare({ batch: 1, numQueries: NL * NUM_POINTS, numHeads: NUM_HEADS, channels: CHANNELS,
    numPoints: NUM_POINTS, spatialShapes: data.spatialShapes, alignCorners: ui.opts.alignCorners,
    paddingMode: ui.opts.paddingMode }, { mode: 'forward' });
  sampler.value.set(data.value);
  sampler.attentionWeights.set(pointSampleWeights());
  ctx.points.sampler = sampler;
}

function pointSampleWeights() {
  const w1 = new Float32Array(NL * NUM_POINTS * SLOTS);
  for (let q = 0; q < NL * NUM_POINTS; q++) for (let hd = 0; hd < NUM_HEADS; hd++) w1[q * SLOTS + hd * NL * NUM_POINTS + q] = 1;
  return w1;
}

function pointSampleLocations(samplingLocations) {
  const nq = NL * NUM_POINTS;
  const loc = new Float32Array(nq * SLOTS * 2);
  for (let q = 0; q < nq; q++) loc.set(samplingLocations, q * SLOTS * 2);
  return loc;
}

// (1, nq, N_h · C_h) for the given locations (the state's unless given).
export function pointSamplesOf(ctx, samplingLocations = ctx.state.samplingLocations) {
  ctx.points.sampler.samplingLocations.set(pointSampleLocations(samplingLocations));
  return ctx.points.sampler.forward().data.slice();
}

export function computePointSamples(ctx) {
  ctx.points.samples = pointSamplesOf(ctx);
}

// WebGPU: the same readings through gpu.forward on the value kept on the GPU (BLNC, a
// GpuSession's tensor), for the locations given: a Promise of pointSamplesOf's result.
export async function pointSamplesGpu(gpu, data, opts, value, samplingLocations) {
  const nq = NL * NUM_POINTS;
  const out = await gpu.forward({
    value, spatialShapes: data.spatialShapes, levelStartIndex: data.levelStartIndex,
    samplingLocations: { data: pointSampleLocations(samplingLocations), shape: [1, nq, NUM_HEADS, NL, NUM_POINTS, 2] },
    attentionWeights: { data: pointSampleWeights(), shape: [1, nq, NUM_HEADS, NL, NUM_POINTS] },
    alignCorners: opts.alignCorners, paddingMode: opts.paddingMode,
  });
  return out.data;
}

export function pointSample(ctx, head, l, p) {
  const at = ((l * NUM_POINTS + p) * NUM_HEADS + head) * CHANNELS;
  return ctx.points.samples.subarray(at, at + CHANNELS);
}

// Ring and square sizes follow the weight relative to the head's largest, so unequal weights show.
const ringRadius = (w, wmax) => 5 + 17 * Math.sqrt(clamp01(w / wmax));
const chipSize = (w, wmax) => Math.round(10 + 24 * Math.sqrt(clamp01(w / wmax)));

function headWeights(ctx) {
  const { ui, state } = ctx;
  const ws = [];
  for (let l = 0; l < NL; l++) for (let p = 0; p < NUM_POINTS; p++) ws.push(state.attentionWeights[slot(ui.head, l, p)]);
  return { ws, wmax: Math.max(...ws) };
}

// The pyramid: each map of the selected head with the query's points on it.
export function buildPyramid(ctx) {
  const host = $('pyramid');
  host.textContent = '';
  ctx.sumViews = LEVELS.map(([h, w], l) => {
    const fig = document.createElement('figure');
    fig.className = 'pyr-level';
    const cap = document.createElement('figcaption');
    cap.innerHTML = `<b>level ${l}</b> · ${h}×${w}`;
    const canvas = document.createElement('canvas');
    canvas.width = CANVAS_W; canvas.height = CANVAS_H;
    canvas.id = `sum-level-${l}`;
    canvas.tabIndex = 0;
    canvas.setAttribute('aria-label', `Level ${l} with the 4 points of the selected head on it; drag a point to move it. Keys 1 to 4 pick a point, arrows move it.`);
    fig.append(cap, canvas);
    host.append(fig);
    attachSumLevel(ctx, l, canvas);
    return { canvas };
  });
}

function attachSumLevel(ctx, l, canvas) {
  let dragging = -1;
  const selected = () => ctx.sumSelected[l];
  const nearest = (ev) => {
    const r = canvas.getBoundingClientRect();
    const cx = ((ev.clientX - r.left) * CANVAS_W) / r.width, cy = ((ev.clientY - r.top) * CANVAS_H) / r.height;
    let best = -1, bestD = Infinity;
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ctx.ui.head, l, p);
      const d = Math.hypot(ctx.state.samplingLocations[2 * i] * CANVAS_W - cx, ctx.state.samplingLocations[2 * i + 1] * CANVAS_H - cy);
      if (d < bestD) { bestD = d; best = p; }
    }
    // 22 CSS pixels of reach (30 for a finger), and never less than a large ring.
    const reach = (ev.pointerType === 'touch' ? 30 : 22) * (CANVAS_W / r.width);
    return bestD <= Math.max(reach, 24) ? best : -1;
  };
  const moveTo = (p, x, y) => {
    const i = slot(ctx.ui.head, l, p);
    ctx.state.samplingLocations[2 * i] = clamp01(x);
    ctx.state.samplingLocations[2 * i + 1] = clamp01(y);
    ctx.actions.guarded(ctx.actions.changed);
  };
  canvas.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0) return;
    const p = nearest(ev);
    if (p < 0) return;
    ctx.actions.stop();
    dragging = p; ctx.sumSelected[l] = p;
    canvas.setPointerCapture(ev.pointerId);
  });
  canvas.addEventListener('pointermove', (ev) => {
    if (dragging < 0) return;
    const [x, y] = toNormalised(canvas, ev);
    moveTo(dragging, x, y);
  });
  const end = () => { dragging = -1; };
  canvas.addEventListener('pointerup', end);
  canvas.addEventListener('pointercancel', end);
  canvas.addEventListener('keydown', (ev) => {
    const move = arrowMoves(ev);
    if (ev.key >= '1' && ev.key <= String(NUM_POINTS)) {
      ctx.sumSelected[l] = Number(ev.key) - 1;
      drawPyramid(ctx);
    } else if (move) {
      ctx.actions.stop();
      const i = slot(ctx.ui.head, l, selected());
      moveTo(selected(), ctx.state.samplingLocations[2 * i] + move[0], ctx.state.samplingLocations[2 * i + 1] + move[1]);
    } else return;
    ev.preventDefault();
    ev.stopPropagation();
  });
  canvas.addEventListener('focus', () => drawPyramid(ctx));
  canvas.addEventListener('blur', () => drawPyramid(ctx));
}

function drawPyramid(ctx) {
  const { ui, state, images } = ctx;
  const { wmax } = headWeights(ctx);
  ctx.drawn.rings = [];
  ctx.sumViews.forEach(({ canvas }, l) => {
    const g = beginCanvas(canvas);
    const r = imageRect(ui.opts, l);
    g.drawImage(images[l][ui.head], r.x, r.y, r.w, r.h);
    const rings = [];
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ui.head, l, p);
      const x = state.samplingLocations[2 * i] * CANVAS_W, y = state.samplingLocations[2 * i + 1] * CANVAS_H;
      const rad = ringRadius(state.attentionWeights[i], wmax);
      ctx.drawn.rings.push({ level: l, point: p, radius: rad, x, y });
      g.beginPath(); g.arc(x, y, rad, 0, 2 * Math.PI);
      g.lineWidth = 6; g.strokeStyle = 'rgba(0,0,0,0.85)'; g.stroke();
      g.lineWidth = 3.5; g.strokeStyle = POINT_COLOURS[p]; g.stroke();
      g.beginPath(); g.arc(x, y, 2.5, 0, 2 * Math.PI); g.fillStyle = POINT_COLOURS[p]; g.fill();
      if (ctx.sumSelected[l] === p && document.activeElement === canvas) {
        g.beginPath(); g.arc(x, y, rad + 6, 0, 2 * Math.PI);
        g.lineWidth = 2.5; g.strokeStyle = '#fff'; g.setLineDash([5, 4]); g.stroke(); g.setLineDash([]);
      }
      // The outer edge of the ring's dark outline.
      rings.push({ x, y, r: rad + 3, text: String(p + 1), colour: POINT_COLOURS[p] });
    }
    ringLabels(g, rings, 20, 2.5).forEach((label, p) => { ctx.drawn.rings[l * NUM_POINTS + p].label = label; });
  });
}

export function renderSum(ctx) {
  const { ui, state, result } = ctx;
  drawPyramid(ctx);
  const grid = $('sum-grid');
  grid.textContent = '';
  const head = ui.head;
  const { ws, wmax } = headWeights(ctx);
  const total = ws.reduce((a, b) => a + b, 0);
  for (let l = 0; l < NL; l++) {
    const lvl = document.createElement('span');
    lvl.className = 'lvl';
    lvl.textContent = `level ${l}`;
    grid.append(lvl);
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(head, l, p);
      const w = state.attentionWeights[i];
      const term = document.createElement('span');
      term.className = 'term';
      const chip = document.createElement('span');
      chip.className = 'chip';
      chip.style.background = css(rgbOf(pointSample(ctx, head, l, p), head));
      chip.style.borderColor = POINT_COLOURS[p];
      // Size by weight: a heavier reading counts for more in the sum.
      const size = chipSize(w, wmax);
      chip.style.width = chip.style.height = `${size}px`;
      chip.title = `level ${l}, point ${p + 1}: its reading`;
      const box = document.createElement('span');
      box.className = 'chip-box';
      box.append(chip);
      const num = document.createElement('span');
      num.className = 'pnum';
      num.style.color = POINT_COLOURS[p];
      num.textContent = String(p + 1);
      const t = document.createElement('span');
      t.className = 'mono';
      t.textContent = `×${w.toFixed(3)}`;
      const slider = document.createElement('input');
      slider.type = 'range'; slider.min = '0'; slider.max = '1'; slider.step = '0.005';
      slider.value = String(w);
      slider.id = `sw-${l}-${p}`;
      slider.setAttribute('aria-label', `Attention weight of level ${l} point ${p + 1}`);
      slider.addEventListener('change', () => { ctx.actions.stop(); ctx.actions.setWeight(i, Number(slider.value)); });
      const col = document.createElement('span');
      col.className = 'term-w';
      col.append(t, slider);
      term.append(num, box, col);
      grid.append(term);
    }
  }
  $('sum-output').style.background = css(rgbOf(result.output.subarray(head * CHANNELS, (head + 1) * CHANNELS), head));
  $('sum-note').textContent = ui.weightMode === 'softmax'
    ? `Head ${head} (${HEADS[head].name}): the 12 weights sum to ${total.toFixed(3)} (softmax): raise one and the others share what is left.`
    : `Head ${head} (${HEADS[head].name}): the 12 weights sum to ${total.toFixed(3)}; raw weights are independent, anywhere in [${MIN_WEIGHT}, 1].`;
}
