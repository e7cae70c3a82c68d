// The explainer page: five small figures from "one point reads one map" to gradient descent,
// each drawn from what the ms-deform-attn wasm package computed (model.js); the playground
// (steps 4 and 5) runs forward + backward through a prepared problem after every change.
import { init } from '../bindings/index.js';
import {
  LEVELS, NUM_HEADS, CHANNELS, NUM_POINTS, HEADS, POSITION_CHANNELS, drawPicture, buildPyramid,
  initialState, bilinearCorners,
} from './scene.js';
import {
  Session, descend, newOptimizer, softmaxInto, logitsOf, setSoftmaxWeight, logitGradients, MIN_WEIGHT,
} from './model.js';
import { fixed, formatLoss, formatGrad, formatValue } from './format.js';

const NL = LEVELS.length;
const SLOTS = NUM_HEADS * NL * NUM_POINTS;
const POINT_COLOURS = ['#ff5a8a', '#ffd23f', '#5ef2a0', '#59c3ff'];
// Canvases are drawn in logical units of CANVAS_W × CANVAS_H (4:3 like the maps); the backing
// store follows the displayed size and devicePixelRatio.
const CANVAS_W = 320, CANVAS_H = 240;
const PLAY_MAX_STEPS = 400;
const SAMPLE_LEVEL = 2;                 // step 1 samples the coarsest map: its pixels are big
// Arrows: length grows with log |gradient|, one scale for every map and every moment, so a
// small gradient draws a short arrow (honest) that is still visible.
const ARROW_UNIT = 15, ARROW_FLOOR = 1e-3, ARROW_MAX = 80;
const arrowLength = (g) => Math.min(ARROW_MAX, ARROW_UNIT * Math.log10(1 + g / ARROW_FLOOR));
const ARROW_TICKS = [0.001, 0.01, 0.1, 1, 10];
// Glow: |∂loss/∂value| on a fixed log scale from HEAT_LO to HEAT_HI.
const HEAT_LO = 1e-4, HEAT_HI = 1;
// Bright at both ends, so even the smallest gradients stand out on the darkened map.
const HEAT_STOPS = [[0, [70, 110, 255]], [0.35, [190, 70, 230]], [0.65, [255, 110, 50]], [0.85, [255, 200, 40]], [1, [255, 255, 190]]];
const CHANNEL_NAMES = (head) => [...HEADS[head].channels, ...POSITION_CHANNELS];

const $ = (id) => document.getElementById(id);
const slot = (h, l, p) => (h * NL + l) * NUM_POINTS + p;
const clamp01 = (x) => Math.min(1, Math.max(0, x));

const ui = {
  opts: { alignCorners: false, paddingMode: 'zeros', valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2' },
  module: 'simd',
  threads: 'auto',
  head: 0,
  heat: true,
  weightMode: 'softmax',
  learningRate: 0.01,
  selected: [0, 0, 0],          // the keyboard-selected point on each level
  playing: false,
  steps: 0,
  history: [],
  renders: 0,
  stuck: null,
};
let simdAvailable = true;
let msda;                       // the module in use
let data, state, optimizer, result, session;
let sampler = null, samplePoint = [0.43, 0.6], sampleResult = null;
let pointSampler = null, pointSamples = null;
let levelViews = [];
let pointRows = [];
// What the last drawing showed, for the tests: each level's arrows (gradient magnitude and
// length in canvas units).
const drawn = { arrows: LEVELS.map(() => []) };

// ---- modules and prepared problems ----------------------------------------------------------

function moduleOptions() {
  if (ui.module === 'scalar' || !simdAvailable) return { simd: false };
  return { simd: 'auto', threads: ui.threads === 'auto' ? 'auto' : 1 };
}

// One instance per module choice, kept for the page's life (init() gives each call its own).
const instances = new Map();
function instance(options) {
  const key = JSON.stringify(options);
  if (!instances.has(key)) instances.set(key, init(options));
  return instances.get(key);
}

// (Re)prepares every problem of the page for the current module and options.
async function prepareAll() {
  msda = await instance(moduleOptions());
  timings.forward = []; timings.backward = [];
  for (const p of [session, sampler, pointSampler]) if (p) p.dispose();
  session = new Session(msda, data, ui.opts);
  // Step 1: one query, every head's point at the same place, weight 1, on the coarse map only.
  sampler = msda.prepare({ batch: 1, numQueries: 1, numHeads: NUM_HEADS, channels: CHANNELS, numPoints: 1,
    spatialShapes: [LEVELS[SAMPLE_LEVEL]], alignCorners: ui.opts.alignCorners, paddingMode: ui.opts.paddingMode }, { mode: 'forward' });
  const [h, w] = LEVELS[SAMPLE_LEVEL];
  const start = data.levelStartIndex[SAMPLE_LEVEL] * NUM_HEADS * CHANNELS;
  sampler.value.set(data.value.subarray(start, start + h * w * NUM_HEADS * CHANNELS));
  sampler.attentionWeights.fill(1);
  // Step 2: what each point reads on its own: query l·N_p + p has weight 1 on point (l, p) of
  // every head and 0 elsewhere, so its output is that point's reading.
  pointSampler = msda.prepare({ batch: 1, numQueries: NL * NUM_POINTS, numHeads: NUM_HEADS, channels: CHANNELS,
    numPoints: NUM_POINTS, spatialShapes: data.spatialShapes, alignCorners: ui.opts.alignCorners,
    paddingMode: ui.opts.paddingMode }, { mode: 'forward' });
  pointSampler.value.set(data.value);
  const w1 = new Float32Array(NL * NUM_POINTS * SLOTS);
  for (let q = 0; q < NL * NUM_POINTS; q++) for (let hd = 0; hd < NUM_HEADS; hd++) w1[q * SLOTS + hd * NL * NUM_POINTS + q] = 1;
  pointSampler.attentionWeights.set(w1);
}

function computeSample() {
  const loc = new Float32Array(NUM_HEADS * 2);
  for (let hd = 0; hd < NUM_HEADS; hd++) { loc[2 * hd] = samplePoint[0]; loc[2 * hd + 1] = samplePoint[1]; }
  sampler.samplingLocations.set(loc);
  const out = sampler.forward().data.slice();
  const [h, w] = LEVELS[SAMPLE_LEVEL];
  sampleResult = { output: out, point: samplePoint.slice(), loc, ...bilinearCorners(loc[0], loc[1], h, w, ui.opts) };
}

function computePointSamples() {
  const nq = NL * NUM_POINTS;
  const loc = new Float32Array(nq * SLOTS * 2);
  for (let q = 0; q < nq; q++) loc.set(state.samplingLocations, q * SLOTS * 2);
  pointSampler.samplingLocations.set(loc);
  pointSamples = pointSampler.forward().data.slice();    // (1, nq, N_h · C_h)
}

const pointSample = (head, l, p) => {
  const at = ((l * NUM_POINTS + p) * NUM_HEADS + head) * CHANNELS;
  return pointSamples.subarray(at, at + CHANNELS);
};

// ---- colours --------------------------------------------------------------------------------

// The first three channels of a head as a colour (edges: signed gradients around mid-grey).
function rgbOf(vec, head) {
  let rgb = [vec[0], vec[1], vec[2]];
  if (HEADS[head].name === 'edges') rgb = [0.5 + 2 * rgb[0], 0.5 + 2 * rgb[1], 2.5 * rgb[2]];
  return rgb.map((v) => Math.max(0, Math.min(255, Math.round(255 * v))));
}
const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;
const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

function heatColour(t) {
  for (let k = 1; k < HEAT_STOPS.length; k++) {
    const [t1, c1] = HEAT_STOPS[k];
    if (t <= t1) {
      const [t0, c0] = HEAT_STOPS[k - 1];
      const f = (t - t0) / (t1 - t0);
      return c0.map((v, i) => Math.round(v + f * (c1[i] - v)));
    }
  }
  return HEAT_STOPS[HEAT_STOPS.length - 1][1];
}
const heatPosition = (m) => (Math.log10(m) - Math.log10(HEAT_LO)) / (Math.log10(HEAT_HI) - Math.log10(HEAT_LO));

function levelImage(level, head) {
  const [h, w] = LEVELS[level];
  const start = data.levelStartIndex[level];
  const c = document.createElement('canvas');
  c.width = w; c.height = h;
  const g = c.getContext('2d');
  const img = g.createImageData(w, h);
  for (let i = 0; i < h * w; i++) {
    const base = ((start + i) * NUM_HEADS + head) * CHANNELS;
    const rgb = rgbOf(data.value.subarray(base, base + 3), head);
    for (let k = 0; k < 3; k++) img.data[4 * i + k] = rgb[k];
    img.data[4 * i + 3] = 255;
  }
  g.putImageData(img, 0, 0);
  return c;
}
let images = [];                // images[level][head]

// Where the operator puts pixel centres: x·W − 0.5, or x·(W − 1) with align_corners. The image
// is drawn so its pixel centres sit exactly where the samples read them.
function imageRect(level) {
  const [h, w] = LEVELS[level];
  if (!ui.opts.alignCorners) return { x: 0, y: 0, w: CANVAS_W, h: CANVAS_H };
  const sx = w > 1 ? CANVAS_W / (w - 1) : CANVAS_W, sy = h > 1 ? CANVAS_H / (h - 1) : CANVAS_H;
  return { x: -0.5 * sx, y: -0.5 * sy, w: w * sx, h: h * sy };
}
// Logical position of pixel (row, col)'s top-left corner and its size.
function pixelBox(level, row, col) {
  const [h, w] = LEVELS[level];
  const r = imageRect(level);
  return { x: r.x + (col * r.w) / w, y: r.y + (row * r.h) / h, w: r.w / w, h: r.h / h };
}

// Sizes the backing store to the canvas's displayed pixels; returns logical → backing scale.
function fitBackingStore(canvas) {
  const dpr = Math.min(3, window.devicePixelRatio || 1);
  const cssW = canvas.clientWidth || CANVAS_W;
  const scale = (cssW * dpr) / CANVAS_W;
  const w = Math.max(1, Math.round(CANVAS_W * scale)), h = Math.max(1, Math.round(CANVAS_H * scale));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  return w / CANVAS_W;
}

function beginCanvas(canvas) {
  const g = canvas.getContext('2d');
  const s = fitBackingStore(canvas);
  g.setTransform(s, 0, 0, s, 0, 0);
  g.fillStyle = '#000';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  g.imageSmoothingEnabled = false;
  return g;
}

// ---- drawing helpers ------------------------------------------------------------------------

function crosshair(g, x, y, r = 11) {
  for (const [w, c] of [[5, 'rgba(0,0,0,0.8)'], [2.5, '#fff']]) {
    g.lineWidth = w; g.strokeStyle = c;
    g.beginPath(); g.arc(x, y, r, 0, 2 * Math.PI);
    g.moveTo(x - r - 6, y); g.lineTo(x + r + 6, y); g.moveTo(x, y - r - 6); g.lineTo(x, y + r + 6);
    g.stroke();
  }
}

function arrow(g, x, y, dx, dy, colour) {
  const len = Math.hypot(dx, dy), ux = dx / len, uy = dy / len;
  const head = Math.min(11, 0.45 * len + 3);
  const ex = x + dx, ey = y + dy;
  for (const [w, c] of [[6, 'rgba(0,0,0,0.85)'], [3, colour]]) {
    g.lineWidth = w; g.strokeStyle = c; g.fillStyle = c; g.lineCap = 'round';
    g.beginPath(); g.moveTo(x, y); g.lineTo(ex - ux * head * 0.6, ey - uy * head * 0.6); g.stroke();
    const o = w - 3;
    g.beginPath();
    g.moveTo(ex + ux * o, ey + uy * o);
    g.lineTo(ex - ux * head - uy * head * 0.55 - ux * o, ey - uy * head + ux * head * 0.55 - uy * o);
    g.lineTo(ex - ux * head + uy * head * 0.55 - ux * o, ey - uy * head - ux * head * 0.55 - uy * o);
    g.closePath(); g.fill();
  }
}

// A label on a dark pill, kept inside the canvas.
function label(g, text, x, y, colour = '#fff') {
  g.font = 'bold 12px system-ui, sans-serif';
  const w = g.measureText(text).width + 8, h = 17;
  const lx = Math.min(CANVAS_W - w - 2, Math.max(2, x - w / 2)), ly = Math.min(CANVAS_H - h - 2, Math.max(2, y - h / 2));
  g.fillStyle = 'rgba(0,0,0,0.78)';
  g.beginPath();
  if (g.roundRect) g.roundRect(lx, ly, w, h, 4); else g.rect(lx, ly, w, h);   // older browsers
  g.fill();
  g.fillStyle = colour; g.textAlign = 'left'; g.textBaseline = 'middle';
  g.fillText(text, lx + 4, ly + h / 2 + 0.5);
}

// Rings stay wider than a point's 2×2 corner pixels on the fine map, so its glow shows inside.
const pointRadius = (w) => 8 + 10 * Math.sqrt(clamp01(w));

// ---- step 1: one point reads one map --------------------------------------------------------

function drawSample() {
  const canvas = $('sample-canvas');
  const g = beginCanvas(canvas);
  const r = imageRect(SAMPLE_LEVEL);
  g.drawImage(images[SAMPLE_LEVEL][0], r.x, r.y, r.w, r.h);
  g.fillStyle = 'rgba(0,0,0,0.35)';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  const [x, y] = [sampleResult.loc[0] * CANVAS_W, sampleResult.loc[1] * CANVAS_H];
  const cornersInside = sampleResult.corners.filter((c) => c.inside);
  // The four corner pixels at full brightness, outlined, lit by their weight.
  for (const c of cornersInside) {
    const b = pixelBox(SAMPLE_LEVEL, c.row, c.col);
    g.save();
    g.beginPath(); g.rect(b.x, b.y, b.w, b.h); g.clip();
    g.drawImage(images[SAMPLE_LEVEL][0], r.x, r.y, r.w, r.h);
    g.restore();
    g.lineWidth = 1 + 4 * c.weight; g.strokeStyle = '#fff';
    g.strokeRect(b.x, b.y, b.w, b.h);
    g.beginPath(); g.moveTo(x, y); g.lineTo(b.x + b.w / 2, b.y + b.h / 2);
    g.lineWidth = 1.5; g.setLineDash([3, 3]); g.stroke(); g.setLineDash([]);
  }
  for (const [k, c] of sampleResult.corners.entries()) {
    const b = pixelBox(SAMPLE_LEVEL, c.row, c.col);
    const dx = k % 2 === 0 ? -1 : 1, dy = k < 2 ? -1 : 1;
    label(g, c.weight.toFixed(2), b.x + b.w / 2 + dx * (b.w / 2 + 18), b.y + b.h / 2 + dy * (b.h / 2 + 8),
      c.inside ? '#fff' : '#9aa6bd');
  }
  g.beginPath(); g.arc(x, y, 6, 0, 2 * Math.PI);
  g.fillStyle = POINT_COLOURS[1]; g.fill();
  g.lineWidth = 2; g.strokeStyle = '#000'; g.stroke();
}

function renderSampleSide() {
  const names = CHANNEL_NAMES(0);
  const out = sampleResult.output.subarray(0, CHANNELS);
  const w = LEVELS[SAMPLE_LEVEL][1];
  const start = data.levelStartIndex[SAMPLE_LEVEL];
  const corners = $('sample-corners');
  corners.textContent = '';
  for (const c of sampleResult.corners) {
    const div = document.createElement('div');
    div.className = `corner${c.inside ? '' : ' outside'}`;
    const chip = document.createElement('span');
    chip.className = 'chip';
    if (c.inside) {
      const base = ((start + c.row * w + c.col) * NUM_HEADS) * CHANNELS;
      chip.style.background = css(rgbOf(data.value.subarray(base, base + 3), 0));
    } else {
      chip.style.background = 'transparent';
      chip.style.borderStyle = 'dashed';
    }
    const txt = document.createElement('span');
    txt.innerHTML = `<span class="mono">${c.weight.toFixed(3)}</span> ${c.inside ? `<span class="dim">row ${c.row}, col ${c.col}</span>` : '<span class="dim">outside: reads 0</span>'}`;
    div.append(chip, txt);
    corners.append(div);
  }
  corners.dataset.corners = JSON.stringify(sampleResult.corners.map((c) => [c.row, c.col, c.weight]));
  const vec = $('sample-vector');
  vec.textContent = '';
  const sw = document.createElement('span'); sw.className = 'name'; sw.textContent = 'colour';
  const chip = document.createElement('span'); chip.className = 'chip'; chip.style.background = css(rgbOf(out, 0));
  const blank = document.createElement('span');
  vec.append(sw, chip, blank);
  out.forEach((v, c) => vec.append(...channelRow(names[c], v, c < 4 ? 1 : 2)));
  vec.dataset.values = JSON.stringify(Array.from(out));
}

function channelRow(name, v, scale, mark) {
  const n = document.createElement('span'); n.className = 'name'; n.textContent = name;
  const num = document.createElement('span'); num.className = 'mono'; num.textContent = formatValue(v);
  const bar = document.createElement('span'); bar.className = 'vbar';
  bar.append(barFill(v, scale, 'fill'));
  const zero = document.createElement('span'); zero.className = 'zero'; bar.append(zero);
  if (mark !== undefined) bar.append(barFill(mark, scale, 'mark'));
  return [n, num, bar];
}

function barFill(v, scale, cls) {
  const el = document.createElement('span');
  el.className = cls;
  const f = Math.max(-1, Math.min(1, v / scale));
  if (cls === 'mark') el.style.left = `${50 + 50 * f}%`;
  else { el.style.left = `${f >= 0 ? 50 : 50 + 50 * f}%`; el.style.width = `${50 * Math.abs(f)}%`; }
  return el;
}

// ---- step 2: the weighted sum ---------------------------------------------------------------

function renderSum() {
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
      chip.style.background = css(rgbOf(pointSample(head, l, p), head));
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

// ---- step 3: the loss ----------------------------------------------------------------------

function drawTargetCanvas() {
  const canvas = $('target-canvas');
  const g = beginCanvas(canvas);
  const r = imageRect(0);
  g.drawImage(images[0][ui.head], r.x, r.y, r.w, r.h);
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ui.head, l, p);
      g.beginPath();
      g.arc(state.samplingLocations[2 * i] * CANVAS_W, state.samplingLocations[2 * i + 1] * CANVAS_H, 3.5, 0, 2 * Math.PI);
      g.fillStyle = POINT_COLOURS[p]; g.fill();
      g.lineWidth = 1; g.strokeStyle = '#000'; g.stroke();
    }
  }
  crosshair(g, state.target[0] * CANVAS_W, state.target[1] * CANVAS_H);
}

function renderLoss() {
  const head = ui.head;
  const out = result.output.subarray(head * CHANNELS, (head + 1) * CHANNELS);
  const tgt = result.targetFeature.subarray(head * CHANNELS, (head + 1) * CHANNELS);
  $('loss-output').style.background = css(rgbOf(out, head));
  $('loss-target').style.background = css(rgbOf(tgt, head));
  $('loss-3').textContent = formatLoss(result.loss);
  const host = $('loss-channels');
  host.textContent = '';
  for (const t of [`head ${head}`, 'output', 'bar: output, | target', 'target']) {
    const s = document.createElement('span'); s.className = 'hdr'; s.textContent = t; host.append(s);
  }
  const names = CHANNEL_NAMES(head);
  for (let c = 0; c < CHANNELS; c++) {
    const [n, num, bar] = channelRow(names[c], out[c], c < 4 ? 1 : 2, tgt[c]);
    const tnum = document.createElement('span'); tnum.className = 'mono'; tnum.textContent = formatValue(tgt[c]);
    host.append(n, num, bar, tnum);
  }
  drawTargetCanvas();
}

// ---- steps 4 and 5: the playground ----------------------------------------------------------

function drawLevel(l) {
  const v = levelViews[l];
  const g = beginCanvas(v.canvas);
  const head = ui.head;
  const r = imageRect(l);
  g.drawImage(images[l][head], r.x, r.y, r.w, r.h);
  if (ui.heat) drawHeat(l, g, r);
  crosshair(g, state.target[0] * CANVAS_W, state.target[1] * CANVAS_H);
  let gmax = 0;
  for (let p = 0; p < NUM_POINTS; p++) {
    const i = slot(head, l, p);
    const gx = -result.gradSamplingLocations[2 * i], gy = -result.gradSamplingLocations[2 * i + 1];
    const mag = Math.hypot(gx, gy);
    gmax = Math.max(gmax, mag);
    const len = arrowLength(mag);
    drawn.arrows[l][p] = { magnitude: mag, length: len >= 2 ? len : 0 };
    // From the ring's edge, so the whole length shows even when the arrow is short.
    const rad = pointRadius(state.attentionWeights[i]) + 1.5;
    const x = state.samplingLocations[2 * i] * CANVAS_W, y = state.samplingLocations[2 * i + 1] * CANVAS_H;
    if (len >= 2) arrow(g, x + (gx / mag) * rad, y + (gy / mag) * rad, (gx / mag) * len, (gy / mag) * len, POINT_COLOURS[p]);
  }
  for (let p = 0; p < NUM_POINTS; p++) {
    const i = slot(head, l, p);
    const x = state.samplingLocations[2 * i] * CANVAS_W, y = state.samplingLocations[2 * i + 1] * CANVAS_H;
    // A ring (radius by weight) keeps the glow under the point visible; a dot marks the exact
    // sampling location; the number sits outside.
    const rad = pointRadius(state.attentionWeights[i]);
    g.beginPath(); g.arc(x, y, rad, 0, 2 * Math.PI);
    g.lineWidth = 5; g.strokeStyle = 'rgba(0,0,0,0.85)'; g.stroke();
    g.lineWidth = 2.5; g.strokeStyle = POINT_COLOURS[p]; g.stroke();
    g.beginPath(); g.arc(x, y, 1.8, 0, 2 * Math.PI);
    g.fillStyle = POINT_COLOURS[p]; g.fill();
    g.lineWidth = 0.8; g.strokeStyle = '#000'; g.stroke();
    if (ui.selected[l] === p && document.activeElement === v.canvas) {
      g.beginPath(); g.arc(x, y, rad + 6, 0, 2 * Math.PI);
      g.lineWidth = 2.5; g.strokeStyle = '#fff'; g.setLineDash([5, 4]); g.stroke(); g.setLineDash([]);
    }
    const lx = Math.min(CANVAS_W - 8, Math.max(8, x - (rad + 6) * 0.72)), ly = Math.min(CANVAS_H - 8, Math.max(8, y - (rad + 6) * 0.72));
    g.font = 'bold 12px sans-serif'; g.textAlign = 'center'; g.textBaseline = 'middle';
    g.lineWidth = 4; g.strokeStyle = '#000'; g.strokeText(String(p + 1), lx, ly);
    g.fillStyle = POINT_COLOURS[p]; g.fillText(String(p + 1), lx, ly);
  }
  v.gradMax.textContent = `largest |∂loss/∂loc| ${fixed(gmax, 2)}`;
}

// |∂loss/∂value| of the selected head on the fixed log colour scale, over a darkened map.
function drawHeat(l, g, r) {
  const [h, w] = LEVELS[l];
  const start = data.levelStartIndex[l];
  const v = levelViews[l];
  g.fillStyle = 'rgba(0,0,0,0.6)';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  const img = v.heatCtx.createImageData(w, h);
  let any = false;
  for (let i = 0; i < h * w; i++) {
    const m = result.heat[(start + i) * NUM_HEADS + ui.head];
    if (!(m > 0)) continue;
    const t = Math.max(0, Math.min(1, heatPosition(m)));
    const c = heatColour(t);
    img.data[4 * i] = c[0]; img.data[4 * i + 1] = c[1]; img.data[4 * i + 2] = c[2];
    img.data[4 * i + 3] = m < HEAT_LO ? 140 : 255;
    any = true;
  }
  if (!any) return;
  v.heatCtx.putImageData(img, 0, 0);
  // A halo so the few touched pixels of the fine map stay visible at small sizes.
  g.save();
  g.shadowColor = 'rgba(255, 220, 120, 1)';
  g.shadowBlur = 6;
  g.drawImage(v.heat, r.x, r.y, r.w, r.h);
  g.drawImage(v.heat, r.x, r.y, r.w, r.h);
  g.restore();
  g.drawImage(v.heat, r.x, r.y, r.w, r.h);
}

function renderLegends() {
  const svg = $('arrow-legend');
  const scale = (levelViews[0].canvas.clientWidth || CANVAS_W) / CANVAS_W;
  const W = Math.max(200, Math.min(360, svg.clientWidth || 300));
  svg.setAttribute('viewBox', `0 0 ${W} 34`);
  const slotW = W / ARROW_TICKS.length;
  let s = '';
  ARROW_TICKS.forEach((g, k) => {
    const len = arrowLength(g) * scale;
    const x0 = k * slotW + 4;
    const y = 10;
    const head = Math.min(7, 0.45 * len + 2);
    s += `<line x1="${x0}" y1="${y}" x2="${x0 + len - head * 0.6}" y2="${y}" stroke="currentColor" stroke-width="2.5" stroke-linecap="round"/>`;
    s += `<polygon points="${x0 + len},${y} ${x0 + len - head},${y - head * 0.55} ${x0 + len - head},${y + head * 0.55}" fill="currentColor"/>`;
    s += `<text x="${x0}" y="30">${fixed(g, 1, 3)}</text>`;
  });
  svg.innerHTML = s;
  const stops = HEAT_STOPS.map(([t, c]) => `${css(c)} ${Math.round(100 * t)}%`).join(', ');
  $('heat-bar').style.background = `linear-gradient(to right, ${stops})`;
  const ticks = $('heat-ticks');
  if (!ticks.childElementCount) {
    for (let e = Math.log10(HEAT_LO); e <= Math.log10(HEAT_HI); e++) {
      const t = document.createElement('span');
      t.style.left = `${100 * heatPosition(10 ** e)}%`;
      t.textContent = fixed(10 ** e, 1, 4);
      ticks.append(t);
    }
  }
  $('heat-legend-item').hidden = !ui.heat;
}

function drawCurve() {
  const c = $('curve');
  const dpr = Math.min(2, window.devicePixelRatio || 1);
  const H = 90;
  const cw = Math.max(100, Math.round(c.clientWidth * dpr)), ch = Math.round(H * dpr);
  if (c.width !== cw || c.height !== ch) { c.width = cw; c.height = ch; }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  const W = cw / dpr;
  g.clearRect(0, 0, W, H);
  g.fillStyle = cssVar('--field'); g.fillRect(0, 0, W, H);
  const hist = ui.history.filter((x) => x > 0 && Number.isFinite(x));
  const caption = $('curve-caption');
  if (hist.length < 2) {
    caption.textContent = 'loss per step (log scale): press Step or Play';
    return;
  }
  const lo = Math.log10(Math.min(...hist)), hi = Math.log10(Math.max(...hist));
  const span = Math.max(hi - lo, 1e-6);
  const pad = 6;
  g.strokeStyle = cssVar('--accent'); g.lineWidth = 2; g.beginPath();
  ui.history.forEach((x, k) => {
    const px = pad + ((W - 2 * pad) * k) / (ui.history.length - 1);
    const py = pad + (H - 2 * pad) * (1 - (Math.log10(Math.max(x, 1e-30)) - lo) / span);
    if (k === 0) g.moveTo(px, py); else g.lineTo(px, py);
  });
  g.stroke();
  caption.textContent = `loss per step (log scale): ${formatLoss(ui.history[0])} → ${formatLoss(ui.history[ui.history.length - 1])} in ${ui.history.length - 1} steps`;
}

// What the bars show: the gradient descent follows. Raw weights: the operator's ∂loss/∂weight.
// Softmax: ∂loss/∂logit, which accounts for the weights summing to 1 (∂loss/∂weight alone would
// ask to raise them all at once whenever the output is too small).
function shownWeightGradients() {
  return ui.weightMode === 'softmax' ? logitGradients(state.attentionWeights, result.gradAttentionWeights) : result.gradAttentionWeights;
}

function renderPoints() {
  const grads = shownWeightGradients();
  const what = ui.weightMode === 'softmax' ? '∂loss/∂logit' : '∂loss/∂weight';
  $('grad-hdr').textContent = what;
  $('bars-what').textContent = ui.weightMode === 'softmax'
    ? 'With softmax weights the bars show ∂loss/∂logit: raising one weight lowers all the others.'
    : 'Raw weights: the bars show the operator\'s ∂loss/∂weight.';
  let gmax = 0;
  for (let l = 0; l < NL; l++) for (let p = 0; p < NUM_POINTS; p++) gmax = Math.max(gmax, Math.abs(grads[slot(ui.head, l, p)]));
  for (const row of pointRows) {
    const i = slot(ui.head, row.l, row.p);
    const w = state.attentionWeights[i];
    const gw = grads[i];
    if (document.activeElement !== row.slider) row.slider.value = String(w);
    row.slider.setAttribute('aria-valuetext', w.toFixed(3));
    row.weight.textContent = w.toFixed(3);
    row.grad.textContent = formatGrad(gw);
    row.grad.dataset.value = String(gw);
    const frac = gmax > 0 ? Math.abs(gw) / gmax : 0;
    row.fill.style.width = `${50 * frac}%`;
    row.fill.style.left = gw >= 0 ? '50%' : `${50 - 50 * frac}%`;
    row.fill.style.background = gw >= 0 ? 'var(--down)' : 'var(--up)';
    row.bar.setAttribute('aria-label', `${what} ${formatGrad(gw)}`);
  }
}

// Why a point can stop short of the target: called after descent has levelled off.
// A point is stuck when it is far from the target and either the loss has levelled off or
// its weight has withered.
function findStuck() {
  if (ui.steps < 40 || ui.history.length < 21) return null;
  const h = ui.history;
  const recent = h[h.length - 21], now = h[h.length - 1];
  const levelled = recent > 0 && (recent - now) / recent < 0.05;
  const small = 0.5 / (NL * NUM_POINTS);
  let worst = null;
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ui.head, l, p);
      const d = Math.hypot(state.samplingLocations[2 * i] - state.target[0], state.samplingLocations[2 * i + 1] - state.target[1]);
      const w = state.attentionWeights[i];
      if (d > 0.08 && (levelled || w < small) && (!worst || d > worst.d)) worst = { l, p, d, w };
    }
  }
  return worst;
}

function renderStuck() {
  const box = $('stuck');
  const s = ui.stuck;
  box.hidden = !s;
  if (!s) return;
  const average = 1 / (NL * NUM_POINTS);
  const where = `Point ${s.p + 1} on level ${s.l} stopped ${s.d.toFixed(2)} from the target ⊕`;
  box.textContent = s.w < 0.5 * average
    ? `${where}, its weight turned down to ${s.w.toFixed(3)}. Descent found it cheaper to silence this point than to ` +
      'move it: once the others match the target, its gradient is tiny (it scales with its weight and with what is ' +
      'left of the loss), and it only sees the 4 pixels around the point, not the target further away. That is a ' +
      'local minimum: every small change from here makes the loss worse or no better. Drag the point nearer ⊕ and ' +
      'descent takes over.'
    : `${where} while the loss levelled off. The gradient only sees the 4 pixels around a point, so the point ` +
      'settled where its reading helps the output and every small move makes it worse: a local minimum. Gradient ' +
      'descent only ever looks downhill from where it stands. Drag the point nearer ⊕ and descent takes over.';
}

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

function renderHood() {
  // The median of the last calls: one call of a few microseconds is mostly timer noise.
  $('t-forward').textContent = `${median(timings.forward).toFixed(3)} ms`;
  $('t-backward').textContent = `${median(timings.backward).toFixed(3)} ms`;
  $('module').textContent = msda.simd ? 'wasm SIMD' : 'wasm scalar';
  // What the module in use runs with (1 unless threaded); only the SIMD module has threads.
  $('threads').textContent = String(msda.threads ?? 1);
  $('threads-select').disabled = ui.module === 'scalar' || !simdAvailable;
}

// Draws everything that depends on the playground's state (step 1 has its own point).
function render() {
  for (let l = 0; l < NL; l++) drawLevel(l);
  renderPoints();
  renderSum();
  renderLoss();
  renderLegends();
  renderStuck();
  renderHood();
  $('loss').textContent = formatLoss(result.loss);
  $('steps').textContent = String(ui.steps);
  drawCurve();
  ui.renders += 1;
  publish();
}

function renderSample() {
  drawSample();
  renderSampleSide();
  ui.renders += 1;
  publish();
}

// ---- computing ----------------------------------------------------------------------------

const TIMED_CALLS = 25;
const timings = { forward: [], backward: [] };

function compute() {
  result = session.evaluate(state);
  timings.forward = [...timings.forward, result.forwardMs].slice(-TIMED_CALLS);
  timings.backward = [...timings.backward, result.backwardMs].slice(-TIMED_CALLS);
  computePointSamples();
}

// A change made by hand: recompute, and start a fresh descent from here.
function changed() {
  compute();
  optimizer = newOptimizer();
  ui.history = [result.loss];
  ui.stuck = null;
  render();
}

function step() {
  descend(state, result, optimizer, { weights: ui.weightMode, learningRate: ui.learningRate });
  ui.steps += 1;
  compute();
  ui.history.push(result.loss);
  ui.stuck = findStuck();
  render();
}

function freshState() {
  const s = initialState();
  s.logits = logitsOf(s.attentionWeights);
  if (ui.weightMode === 'softmax') softmaxInto(s.logits, s.attentionWeights);
  return s;
}

function reset() {
  stop();
  state = freshState();
  ui.steps = 0;
  changed();
}

let frame = 0;
function play() {
  if (ui.playing) { stop(); return; }
  ui.playing = true;
  $('play').textContent = 'Pause';
  $('play').setAttribute('aria-pressed', 'true');
  let count = 0;
  const tick = () => {
    if (!ui.playing) return;
    guarded(step);
    count += 1;
    if (count >= PLAY_MAX_STEPS || result.loss < 1e-9) { stop(); return; }
    frame = requestAnimationFrame(tick);
  };
  frame = requestAnimationFrame(tick);
}

function stop() {
  ui.playing = false;
  cancelAnimationFrame(frame);
  $('play').textContent = 'Play';
  $('play').setAttribute('aria-pressed', 'false');
}

function guarded(fn) {
  try {
    fn();
  } catch (e) {
    stop();
    showError(e);
  }
}

async function guardedAsync(fn) {
  try {
    await fn();
  } catch (e) {
    stop();
    showError(e);
  }
}

function showError(e) {
  const box = $('error');
  box.hidden = false;
  box.textContent = `Error: ${e && e.message ? e.message : e}`;
  console.error(e);
}

function setWeight(i, w) {
  if (ui.weightMode === 'softmax') {
    setSoftmaxWeight(state.logits, i, w);
    softmaxInto(state.logits, state.attentionWeights);
  } else {
    state.attentionWeights[i] = clamp01(w);
  }
  guarded(changed);
}

// What the page computed, for tests and the curious: the exact arguments of the last
// forward/backward (as the copying API takes them) and everything that came back.
function publish() {
  const r = result;
  window.__msda = {
    ready: true,
    renders: ui.renders,
    steps: ui.steps,
    head: ui.head,
    module: ui.module,
    simd: msda.simd,
    threads: msda.threads ?? 1,
    options: { ...ui.opts },
    weightMode: ui.weightMode,
    learningRate: ui.learningRate,
    target: Array.from(state.target),
    get forwardArgs() { return r.args; },
    get backwardArgs() { return r.gradArgs; },
    targetFeature: r.targetFeature,
    output: r.output,
    loss: r.loss,
    lossText: $('loss').textContent,
    gradOutput: r.gradOutput,
    get grads() { return r.raw; },
    forwardMs: r.forwardMs,
    backwardMs: r.backwardMs,
    stuck: ui.stuck,
    arrows: drawn.arrows.map((a) => a.map((x) => ({ ...x }))),
    heat: ui.heat,
    sample: sampleResult && { point: sampleResult.point, location: Array.from(sampleResult.loc.subarray(0, 2)),
      corners: sampleResult.corners.map((c) => ({ ...c })), output: sampleResult.output.slice(), level: SAMPLE_LEVEL,
      options: { alignCorners: ui.opts.alignCorners, paddingMode: ui.opts.paddingMode } },
    pointSamples: pointSamples && pointSamples.slice(),
    // Centre of a point on screen (CSS pixels), for driving the page with a mouse.
    pointOnScreen(level, point, head = ui.head) {
      const i = slot(head, level, point);
      const rect = levelViews[level].canvas.getBoundingClientRect();
      return { x: rect.left + state.samplingLocations[2 * i] * rect.width, y: rect.top + state.samplingLocations[2 * i + 1] * rect.height };
    },
    levelRect(level) {
      const rr = levelViews[level].canvas.getBoundingClientRect();
      return { x: rr.left, y: rr.top, width: rr.width, height: rr.height };
    },
    rectOf(id) {
      const rr = $(id).getBoundingClientRect();
      return { x: rr.left, y: rr.top, width: rr.width, height: rr.height };
    },
  };
}

// ---- interaction --------------------------------------------------------------------------

function toNormalised(canvas, ev) {
  const r = canvas.getBoundingClientRect();
  return [clamp01((ev.clientX - r.left) / r.width), clamp01((ev.clientY - r.top) / r.height)];
}

function hitPoint(l, canvas, ev) {
  const r = canvas.getBoundingClientRect();
  const sx = CANVAS_W / r.width, sy = CANVAS_H / r.height;
  const cx = (ev.clientX - r.left) * sx, cy = (ev.clientY - r.top) * sy;
  let best = -1, bestD = Infinity;
  for (let p = 0; p < NUM_POINTS; p++) {
    const i = slot(ui.head, l, p);
    const d = Math.hypot(state.samplingLocations[2 * i] * CANVAS_W - cx, state.samplingLocations[2 * i + 1] * CANVAS_H - cy);
    if (d < bestD) { bestD = d; best = p; }
  }
  // Generous on touch screens, where the canvas is small and fingers are not.
  const reach = Math.max(pointRadius(state.attentionWeights[slot(ui.head, l, best)]) + 6, (ev.pointerType === 'touch' ? 26 : 16) * sx);
  return bestD <= reach ? best : -1;
}

const arrowMoves = (ev) => {
  const d = ev.altKey ? 0.002 : 0.01;
  return { ArrowLeft: [-d, 0], ArrowRight: [d, 0], ArrowUp: [0, -d], ArrowDown: [0, d] }[ev.key];
};

function attachLevel(l) {
  const { canvas } = levelViews[l];
  let dragging = -1;
  canvas.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0) return;
    stop();
    const p = hitPoint(l, canvas, ev);
    if (p >= 0) {
      dragging = p;
      ui.selected[l] = p;
      canvas.setPointerCapture(ev.pointerId);
    } else {
      state.target = toNormalised(canvas, ev);
      guarded(changed);
    }
  });
  canvas.addEventListener('pointermove', (ev) => {
    if (dragging < 0) return;
    const [x, y] = toNormalised(canvas, ev);
    const i = slot(ui.head, l, dragging);
    state.samplingLocations[2 * i] = x;
    state.samplingLocations[2 * i + 1] = y;
    guarded(changed);
  });
  const end = () => { dragging = -1; };
  canvas.addEventListener('pointerup', end);
  canvas.addEventListener('pointercancel', end);
  canvas.addEventListener('wheel', (ev) => {
    const p = hitPoint(l, canvas, ev);
    if (p < 0) return;
    ev.preventDefault();
    stop();
    ui.selected[l] = p;
    setWeight(slot(ui.head, l, p), state.attentionWeights[slot(ui.head, l, p)] + (ev.deltaY < 0 ? 0.02 : -0.02));
  }, { passive: false });
  canvas.addEventListener('keydown', (ev) => {
    const move = arrowMoves(ev);
    if (ev.key >= '1' && ev.key <= String(NUM_POINTS)) {
      ui.selected[l] = Number(ev.key) - 1;
      drawLevel(l);
    } else if (move) {
      stop();
      const [dx, dy] = move;
      if (ev.shiftKey) {
        state.target = [clamp01(state.target[0] + dx), clamp01(state.target[1] + dy)];
      } else {
        const i = slot(ui.head, l, ui.selected[l]);
        state.samplingLocations[2 * i] = clamp01(state.samplingLocations[2 * i] + dx);
        state.samplingLocations[2 * i + 1] = clamp01(state.samplingLocations[2 * i + 1] + dy);
      }
      guarded(changed);
    } else if (ev.key === '+' || ev.key === '=' || ev.key === '-' || ev.key === '_') {
      stop();
      const i = slot(ui.head, l, ui.selected[l]);
      setWeight(i, state.attentionWeights[i] + (ev.key === '+' || ev.key === '=' ? 0.02 : -0.02));
    } else {
      return;
    }
    ev.preventDefault();
    ev.stopPropagation();
  });
  canvas.addEventListener('focus', () => drawLevel(l));
  canvas.addEventListener('blur', () => drawLevel(l));
}

// A canvas where a press (and drag) sets a normalised position, and arrow keys nudge it.
function attachPositionCanvas(canvas, get, set) {
  let down = false;
  canvas.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0) return;
    down = true;
    canvas.setPointerCapture(ev.pointerId);
    set(toNormalised(canvas, ev));
  });
  canvas.addEventListener('pointermove', (ev) => { if (down) set(toNormalised(canvas, ev)); });
  canvas.addEventListener('pointerup', () => { down = false; });
  canvas.addEventListener('pointercancel', () => { down = false; });
  canvas.addEventListener('keydown', (ev) => {
    const move = arrowMoves(ev);
    if (!move) return;
    const [x, y] = get();
    set([clamp01(x + move[0]), clamp01(y + move[1])]);
    ev.preventDefault();
    ev.stopPropagation();
  });
}

function buildLevels() {
  const host = $('levels');
  host.textContent = '';
  levelViews = LEVELS.map(([h, w], l) => {
    const fig = document.createElement('figure');
    fig.className = 'level';
    const cap = document.createElement('figcaption');
    const title = document.createElement('span');
    title.innerHTML = `<b>level ${l}</b> · ${h}×${w} ${['fine', 'medium', 'coarse'][l] || ''}`;
    const gradMax = document.createElement('span');
    cap.append(title, gradMax);
    const canvas = document.createElement('canvas');
    canvas.width = CANVAS_W; canvas.height = CANVAS_H;
    canvas.tabIndex = 0;
    canvas.id = `level-${l}`;
    canvas.setAttribute('aria-label', `Level ${l}, ${h} by ${w} pixels, with the sampling points of the selected head. ` +
      'Keys 1 to 4 pick a point, arrows move it, plus and minus change its weight, shift and arrows move the target.');
    fig.append(cap, canvas);
    host.append(fig);
    const heat = document.createElement('canvas');
    heat.width = w; heat.height = h;
    return { canvas, heat, heatCtx: heat.getContext('2d'), gradMax };
  });
  levelViews.forEach((_, l) => attachLevel(l));
}

function buildPoints() {
  const host = $('points');
  host.textContent = '';
  pointRows = [];
  for (const t of ['point', 'weight', '', 'gradient', '']) {
    const s = document.createElement('span'); s.className = 'hdr'; s.textContent = t; host.append(s);
  }
  host.children[3].id = 'grad-hdr';
  for (let l = 0; l < NL; l++) {
    const lvl = document.createElement('div');
    lvl.className = 'lvl';
    lvl.textContent = `level ${l} (${LEVELS[l][0]}×${LEVELS[l][1]})`;
    host.append(lvl);
    for (let p = 0; p < NUM_POINTS; p++) {
      const name = document.createElement('span');
      name.className = 'name';
      name.innerHTML = `<span class="sw" style="--c:${POINT_COLOURS[p]}"></span> ${p + 1}`;
      const slider = document.createElement('input');
      slider.type = 'range'; slider.min = '0'; slider.max = '1'; slider.step = '0.005';
      slider.id = `w-${l}-${p}`;
      slider.setAttribute('aria-label', `Attention weight of level ${l} point ${p + 1}`);
      slider.addEventListener('input', () => { stop(); setWeight(slot(ui.head, l, p), Number(slider.value)); });
      const weight = document.createElement('output');
      weight.className = 'w';
      weight.htmlFor = slider.id;
      const bar = document.createElement('div');
      bar.className = 'bar';
      bar.setAttribute('role', 'img');
      const zero = document.createElement('span'); zero.className = 'zero';
      const fill = document.createElement('span'); fill.className = 'fill';
      bar.append(zero, fill);
      const grad = document.createElement('span'); grad.className = 'g';
      grad.id = `gw-${l}-${p}`;
      host.append(name, slider, weight, bar, grad);
      pointRows.push({ l, p, slider, weight, grad, fill, bar });
    }
  }
}

function bindControls() {
  const head = $('head');
  HEADS.forEach((h, i) => { const o = document.createElement('option'); o.value = String(i); o.textContent = `${i}: ${h.name}`; head.append(o); });
  head.addEventListener('change', () => { ui.head = Number(head.value); guarded(render); });
  // Options the prepared problems are built with: prepare again, then recompute.
  const rebuild = () => guardedAsync(async () => { stop(); await prepareAll(); computeSample(); renderSample(); changed(); });
  const opt = (id, key, parse = (x) => x) => {
    $(id).addEventListener('change', (ev) => {
      ui.opts[key] = parse(ev.target.type === 'checkbox' ? ev.target.checked : ev.target.value);
      rebuild();
    });
  };
  opt('padding', 'paddingMode');
  opt('value-layout', 'valueLayout');
  opt('loc-layout', 'samplingLocationsLayout');
  opt('align-corners', 'alignCorners', Boolean);
  $('simd').addEventListener('change', (ev) => { ui.module = ev.target.value; rebuild(); });
  $('threads-select').addEventListener('change', (ev) => { ui.threads = ev.target.value; rebuild(); });
  $('heat').addEventListener('change', (ev) => { ui.heat = ev.target.checked; guarded(render); });
  $('lr').addEventListener('change', (ev) => { ui.learningRate = Number(ev.target.value); optimizer = newOptimizer(); guarded(render); });
  for (const radio of document.querySelectorAll('input[name=weight-mode]')) {
    radio.addEventListener('change', () => {
      if (!radio.checked) return;
      stop();
      ui.weightMode = radio.value;
      // Raw → softmax: the logits whose softmax is the current weights, scaled to sum to 1.
      if (ui.weightMode === 'softmax') {
        state.logits = logitsOf(state.attentionWeights);
        softmaxInto(state.logits, state.attentionWeights);
      } else {
        for (let i = 0; i < SLOTS; i++) state.attentionWeights[i] = Math.max(MIN_WEIGHT, state.attentionWeights[i]);
      }
      guarded(changed);
    });
  }
  $('step').addEventListener('click', () => { stop(); guarded(step); });
  $('play').addEventListener('click', () => guarded(play));
  $('reset').addEventListener('click', () => guarded(reset));
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA')) return;
    const k = ev.key.toLowerCase();
    if (k === 's') { stop(); guarded(step); } else if (k === 'p') guarded(play); else if (k === 'r') guarded(reset); else return;
    ev.preventDefault();
  });
  attachPositionCanvas($('sample-canvas'), () => samplePoint, (p) => { samplePoint = p; guarded(() => { computeSample(); renderSample(); }); });
  attachPositionCanvas($('target-canvas'), () => state.target, (p) => { stop(); state.target = p; guarded(changed); });
  window.addEventListener('resize', () => drawCurve());
  // Redraw crisply whenever a canvas's displayed size changes (layout, zoom, rotation).
  if (typeof ResizeObserver === 'function') {
    const ro = new ResizeObserver(() => {
      if (!result) return;
      guarded(() => { levelViews.forEach((_, l) => drawLevel(l)); drawSample(); drawTargetCanvas(); renderLegends(); });
    });
    levelViews.forEach((v) => ro.observe(v.canvas));
    ro.observe($('sample-canvas'));
    ro.observe($('target-canvas'));
  }
  // Colours drawn on canvases follow the colour scheme.
  matchMedia('(prefers-color-scheme: light)').addEventListener('change', () => { if (result) guarded(render); });
}

async function main() {
  // The SIMD module runs on this machine's CPUs when the page is cross-origin isolated (make
  // demo's server sends COOP and COEP), else on 1 thread with one console notice; the threads
  // field under the hood shows which (README "Threads").
  msda = await instance(moduleOptions());
  if (!msda.simd) {
    // No SIMD in this browser: the scalar module serves both entries.
    simdAvailable = false;
    const o = $('simd').querySelector('option[value=simd]');
    o.textContent = 'SIMD (unsupported here)';
    o.disabled = true;
    ui.module = 'scalar';
    $('simd').value = 'scalar';
  }
  $('threads-select').options[0].textContent = `auto (${navigator.hardwareConcurrency || 1} CPUs)`;
  data = buildPyramid(drawPicture());
  images = LEVELS.map((_, l) => HEADS.map((__, head) => levelImage(l, head)));
  state = freshState();
  await prepareAll();
  buildLevels();
  buildPoints();
  bindControls();
  computeSample();
  drawSample();
  renderSampleSide();
  changed();
}

main().catch(showError);
