// The interactive page: draws the pyramid and the selected head's sampling points, reacts to
// drags, the wheel, clicks and keys, and after every change runs forward + backward through
// the ms-deform-attn wasm package (model.js) and draws what came back.
import { init } from '../bindings/index.js';
import {
  LEVELS, NUM_HEADS, CHANNELS, NUM_POINTS, HEADS, drawPicture, buildPyramid, initialState,
} from './scene.js';
import { evaluate, descend, newOptimizer } from './model.js';

const NL = LEVELS.length;
const POINT_COLOURS = ['#ff5a8a', '#ffd23f', '#5ef2a0', '#59c3ff'];
// Level canvases are drawn in logical units of CANVAS_W × CANVAS_H (4:3 like the levels, about
// CSS pixels on a laptop); the backing store follows the displayed size and devicePixelRatio.
const CANVAS_W = 320, CANVAS_H = 240;
const ARROW_MAX = 52;                   // logical length of the longest arrow on a level
const PLAY_MAX_STEPS = 400;

const $ = (id) => document.getElementById(id);
const slot = (h, l, p) => (h * NL + l) * NUM_POINTS + p;

const ui = {
  opts: { alignCorners: false, paddingMode: 'zeros', valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2' },
  module: 'simd',
  head: 0,
  heat: true,
  selected: [0, 0, 0],          // the keyboard-selected point on each level
  playing: false,
  steps: 0,
  history: [],
  renders: 0,
};
let modules = {};
let data, state, optimizer, result;
let levelViews = [];            // per level: { canvas, ctx, images: per head, caption }
let pointRows = [];

function fmt(x, digits = 4) {
  if (!Number.isFinite(x)) return String(x);
  if (x === 0) return '0';
  const a = Math.abs(x);
  return a >= 1e-3 && a < 1e4 ? x.toFixed(Math.max(0, digits + 1 - Math.ceil(Math.log10(a + 1e-300)))) : x.toExponential(digits - 1);
}
// The loss as the page prints it; the browser test formats Node's loss the same way.
const formatLoss = (x) => x.toExponential(6);
const formatGrad = (x) => (x === 0 ? '0' : x.toExponential(2));

// ---- images of each level (selected head's first three channels as RGB) -----------------

function headImage(level, head) {
  const [h, w] = LEVELS[level];
  const start = data.levelStartIndex[level];
  const c = document.createElement('canvas');
  c.width = w; c.height = h;
  const g = c.getContext('2d');
  const img = g.createImageData(w, h);
  for (let i = 0; i < h * w; i++) {
    const base = ((start + i) * NUM_HEADS + head) * CHANNELS;
    let rgb = [data.value[base], data.value[base + 1], data.value[base + 2]];
    if (HEADS[head].name === 'edges') rgb = [0.5 + 2 * rgb[0], 0.5 + 2 * rgb[1], 2.5 * rgb[2]];
    for (let k = 0; k < 3; k++) img.data[4 * i + k] = Math.max(0, Math.min(255, Math.round(255 * rgb[k])));
    img.data[4 * i + 3] = 255;
  }
  g.putImageData(img, 0, 0);
  return c;
}

// Where the operator puts pixel centres: x·W − 0.5, or x·(W − 1) with align_corners. The image
// is drawn so its pixel centres sit exactly where the samples read them.
function imageRect(level) {
  const [h, w] = LEVELS[level];
  if (!ui.opts.alignCorners) return { x: 0, y: 0, w: CANVAS_W, h: CANVAS_H };
  const sx = w > 1 ? CANVAS_W / (w - 1) : CANVAS_W, sy = h > 1 ? CANVAS_H / (h - 1) : CANVAS_H;
  return { x: -0.5 * sx, y: -0.5 * sy, w: w * sx, h: h * sy };
}

// ---- drawing ------------------------------------------------------------------------------

function drawLevel(l) {
  const v = levelViews[l];
  const g = v.ctx;
  const head = ui.head;
  const scale = fitBackingStore(v.canvas);
  g.save();
  g.setTransform(scale, 0, 0, scale, 0, 0);
  g.fillStyle = '#000';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  g.imageSmoothingEnabled = false;
  const r = imageRect(l);
  g.drawImage(v.images[head], r.x, r.y, r.w, r.h);
  if (ui.heat) drawHeat(l, r);
  // Target.
  const [tx, ty] = [state.target[0] * CANVAS_W, state.target[1] * CANVAS_H];
  g.lineWidth = 5; g.strokeStyle = 'rgba(0,0,0,0.8)';
  crosshair(g, tx, ty);
  g.lineWidth = 2.5; g.strokeStyle = '#fff';
  crosshair(g, tx, ty);
  // Points and descent arrows.
  let gmax = 0;
  for (let p = 0; p < NUM_POINTS; p++) {
    const i = slot(head, l, p);
    gmax = Math.max(gmax, Math.hypot(result.gradSamplingLocations[2 * i], result.gradSamplingLocations[2 * i + 1]));
  }
  for (let p = 0; p < NUM_POINTS; p++) {
    const i = slot(head, l, p);
    const x = state.samplingLocations[2 * i] * CANVAS_W, y = state.samplingLocations[2 * i + 1] * CANVAS_H;
    const gx = -result.gradSamplingLocations[2 * i], gy = -result.gradSamplingLocations[2 * i + 1];
    const len = gmax > 0 ? (ARROW_MAX * Math.hypot(gx, gy)) / gmax : 0;
    if (len > 2) arrow(g, x, y, (gx / Math.hypot(gx, gy)) * len, (gy / Math.hypot(gx, gy)) * len, POINT_COLOURS[p]);
  }
  for (let p = 0; p < NUM_POINTS; p++) {
    const i = slot(head, l, p);
    const x = state.samplingLocations[2 * i] * CANVAS_W, y = state.samplingLocations[2 * i + 1] * CANVAS_H;
    // A ring (radius by weight) keeps the heat map under the point visible; a dot marks the
    // exact sampling location; the number sits outside.
    const rad = pointRadius(state.attentionWeights[i]);
    g.beginPath(); g.arc(x, y, rad, 0, 2 * Math.PI);
    g.lineWidth = 6; g.strokeStyle = 'rgba(0,0,0,0.85)'; g.stroke();
    g.lineWidth = 3; g.strokeStyle = POINT_COLOURS[p]; g.stroke();
    g.beginPath(); g.arc(x, y, 2.5, 0, 2 * Math.PI);
    g.fillStyle = POINT_COLOURS[p]; g.fill();
    g.lineWidth = 1; g.strokeStyle = '#000'; g.stroke();
    if (ui.selected[l] === p && document.activeElement === v.canvas) {
      g.beginPath(); g.arc(x, y, rad + 6, 0, 2 * Math.PI);
      g.lineWidth = 2.5; g.strokeStyle = '#fff'; g.setLineDash([5, 4]); g.stroke(); g.setLineDash([]);
    }
    const lx = x - (rad + 6) * 0.72, ly = y - (rad + 6) * 0.72;
    g.font = 'bold 12px sans-serif'; g.textAlign = 'center'; g.textBaseline = 'middle';
    g.lineWidth = 4; g.strokeStyle = '#000'; g.strokeText(String(p + 1), lx, ly);
    g.fillStyle = POINT_COLOURS[p]; g.fillText(String(p + 1), lx, ly);
  }
  g.restore();
  v.gradMax.textContent = gmax > 0 ? `max |∂loss/∂loc| ${fmt(gmax, 2)}` : 'no location gradient';
}

// Sizes the backing store to the canvas's displayed pixels; returns logical → backing scale.
function fitBackingStore(canvas) {
  const dpr = Math.min(3, window.devicePixelRatio || 1);
  const css = canvas.clientWidth || CANVAS_W;
  const scale = (css * dpr) / CANVAS_W;
  const w = Math.max(1, Math.round(CANVAS_W * scale)), h = Math.max(1, Math.round(CANVAS_H * scale));
  if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
  return w / CANVAS_W;
}

const pointRadius = (w) => 5 + 11 * Math.sqrt(Math.max(0, Math.min(1, w)));

function crosshair(g, x, y) {
  g.beginPath(); g.arc(x, y, 11, 0, 2 * Math.PI);
  g.moveTo(x - 17, y); g.lineTo(x + 17, y); g.moveTo(x, y - 17); g.lineTo(x, y + 17);
  g.stroke();
}

function arrow(g, x, y, dx, dy, colour) {
  const len = Math.hypot(dx, dy), ux = dx / len, uy = dy / len;
  const head = Math.min(12, 0.5 * len + 4);
  const ex = x + dx, ey = y + dy;
  for (const [w, c] of [[6, 'rgba(0,0,0,0.85)'], [3, colour]]) {
    g.lineWidth = w; g.strokeStyle = c; g.fillStyle = c; g.lineCap = 'round';
    g.beginPath(); g.moveTo(x, y); g.lineTo(ex - ux * head * 0.6, ey - uy * head * 0.6); g.stroke();
    g.beginPath();
    g.moveTo(ex + ux * (w - 3), ey + uy * (w - 3));
    g.lineTo(ex - ux * head - uy * head * 0.55 - ux * (w - 3), ey - uy * head + ux * head * 0.55 - uy * (w - 3));
    g.lineTo(ex - ux * head + uy * head * 0.55 - ux * (w - 3), ey - uy * head - ux * head * 0.55 - uy * (w - 3));
    g.closePath(); g.fill();
  }
}

// |∂loss/∂value| of the selected head, summed over its channels, as a glow normalised per level.
function drawHeat(l, r) {
  const [h, w] = LEVELS[l];
  const start = data.levelStartIndex[l];
  const mags = new Float32Array(h * w);
  let max = 0;
  for (let i = 0; i < h * w; i++) {
    const base = ((start + i) * NUM_HEADS + ui.head) * CHANNELS;
    let s = 0;
    for (let c = 0; c < CHANNELS; c++) s += Math.abs(result.gradValue[base + c]);
    mags[i] = s;
    if (s > max) max = s;
  }
  const v = levelViews[l];
  v.ctx.fillStyle = 'rgba(0,0,0,0.45)';
  v.ctx.fillRect(0, 0, CANVAS_W, CANVAS_H);
  if (max === 0) return;
  const img = v.heatCtx.createImageData(w, h);
  for (let i = 0; i < h * w; i++) {
    const t = Math.sqrt(mags[i] / max);
    img.data[4 * i] = 255;
    img.data[4 * i + 1] = Math.round(120 + 135 * t);
    img.data[4 * i + 2] = Math.round(40 + 180 * t * t);
    img.data[4 * i + 3] = Math.round(235 * t);
  }
  v.heatCtx.putImageData(img, 0, 0);
  // A soft halo so the few touched pixels of a fine level stay visible at small sizes.
  v.ctx.save();
  v.ctx.shadowColor = 'rgba(255, 190, 60, 0.9)';
  v.ctx.shadowBlur = 10;
  v.ctx.drawImage(v.heat, r.x, r.y, r.w, r.h);
  v.ctx.restore();
}

function drawCurve() {
  const c = $('curve');
  const dpr = Math.min(2, window.devicePixelRatio || 1);
  const cw = Math.max(100, Math.round(c.clientWidth * dpr)), ch = Math.round(120 * dpr);
  if (c.width !== cw || c.height !== ch) { c.width = cw; c.height = ch; }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  const W = cw / dpr, H = ch / dpr;
  g.clearRect(0, 0, W, H);
  g.fillStyle = '#101626'; g.fillRect(0, 0, W, H);
  g.fillStyle = '#9aa6bd'; g.font = '11px sans-serif'; g.textBaseline = 'top';
  const hist = ui.history.filter((x) => x > 0 && Number.isFinite(x));
  if (hist.length < 2) {
    g.fillText('loss curve (log scale): press Step or Play', 8, 8);
    return;
  }
  const lo = Math.log10(Math.min(...hist)), hi = Math.log10(Math.max(...hist));
  const span = Math.max(hi - lo, 1e-6);
  const padL = 8, padR = 8, padT = 18, padB = 8;
  g.strokeStyle = '#ffd23f'; g.lineWidth = 2; g.beginPath();
  ui.history.forEach((x, k) => {
    const px = padL + ((W - padL - padR) * k) / (ui.history.length - 1);
    const py = padT + (H - padT - padB) * (1 - (Math.log10(Math.max(x, 1e-30)) - lo) / span);
    if (k === 0) g.moveTo(px, py); else g.lineTo(px, py);
  });
  g.stroke();
  g.fillText(`loss per step, log scale: ${fmt(10 ** hi, 3)} → ${fmt(ui.history[ui.history.length - 1], 3)} (min ${fmt(10 ** lo, 3)}) over ${ui.history.length - 1} steps`, 8, 3);
}

function renderPoints() {
  let gmax = 0;
  for (let l = 0; l < NL; l++) for (let p = 0; p < NUM_POINTS; p++) gmax = Math.max(gmax, Math.abs(result.gradAttentionWeights[slot(ui.head, l, p)]));
  for (const row of pointRows) {
    const i = slot(ui.head, row.l, row.p);
    const w = state.attentionWeights[i];
    const gw = result.gradAttentionWeights[i];
    if (document.activeElement !== row.slider) row.slider.value = String(w);
    row.slider.setAttribute('aria-valuetext', w.toFixed(3));
    row.weight.textContent = w.toFixed(3);
    row.grad.textContent = formatGrad(gw);
    row.grad.dataset.value = String(gw);
    const frac = gmax > 0 ? Math.abs(gw) / gmax : 0;
    row.fill.style.width = `${50 * frac}%`;
    row.fill.style.left = gw >= 0 ? '50%' : `${50 - 50 * frac}%`;
    row.fill.style.background = gw >= 0 ? '#e5484d' : '#30a46c';
  }
}

function render() {
  for (let l = 0; l < NL; l++) drawLevel(l);
  renderPoints();
  $('loss').textContent = formatLoss(result.loss);
  $('t-forward').textContent = `${result.forwardMs.toFixed(3)} ms`;
  $('t-backward').textContent = `${result.backwardMs.toFixed(3)} ms`;
  $('module').textContent = modules[ui.module].simd ? 'wasm SIMD' : 'wasm scalar';
  // The spot for the thread count: what the module in use runs with (1 unless threaded).
  $('threads').textContent = String(modules[ui.module].threads ?? 1);
  $('steps').textContent = String(ui.steps);
  drawCurve();
  ui.renders += 1;
  publish();
}

// ---- computing ----------------------------------------------------------------------------

function compute() {
  result = evaluate(modules[ui.module], data, state, ui.opts);
}

// A change made by hand: recompute, and start a fresh descent from here.
function changed() {
  compute();
  optimizer = newOptimizer();
  ui.history = [result.loss];
  render();
}

function step() {
  descend(state, result, optimizer);
  ui.steps += 1;
  compute();
  ui.history.push(result.loss);
  render();
}

function reset() {
  stop();
  state = initialState();
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

function showError(e) {
  const box = $('error');
  box.hidden = false;
  box.textContent = `Error: ${e && e.message ? e.message : e}`;
  console.error(e);
}

// What the page computed, for tests and the curious: the exact arguments of the last
// forward/backward calls and everything that came back.
function publish() {
  window.__msda = {
    ready: true,
    renders: ui.renders,
    steps: ui.steps,
    head: ui.head,
    module: ui.module,
    simd: modules[ui.module].simd,
    threads: modules[ui.module].threads ?? 1,
    options: { ...ui.opts },
    target: Array.from(state.target),
    forwardArgs: result.args,
    backwardArgs: result.gradArgs,
    targetFeature: result.targetFeature,
    output: result.output,
    loss: result.loss,
    lossText: $('loss').textContent,
    gradOutput: result.gradOutput,
    grads: result.raw,
    forwardMs: result.forwardMs,
    backwardMs: result.backwardMs,
    // Centre of a point on screen (CSS pixels), for driving the page with a mouse.
    pointOnScreen(level, point, head = ui.head) {
      const i = slot(head, level, point);
      const rect = levelViews[level].canvas.getBoundingClientRect();
      return { x: rect.left + state.samplingLocations[2 * i] * rect.width, y: rect.top + state.samplingLocations[2 * i + 1] * rect.height };
    },
    levelRect(level) {
      const r = levelViews[level].canvas.getBoundingClientRect();
      return { x: r.left, y: r.top, width: r.width, height: r.height };
    },
  };
}

// ---- interaction --------------------------------------------------------------------------

function toNormalised(canvas, ev) {
  const r = canvas.getBoundingClientRect();
  return [Math.min(1, Math.max(0, (ev.clientX - r.left) / r.width)), Math.min(1, Math.max(0, (ev.clientY - r.top) / r.height))];
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
  const reach = Math.max(pointRadius(state.attentionWeights[slot(ui.head, l, best)]) + 6, 22 * sx);
  return bestD <= reach ? best : -1;
}

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
    const d = ev.altKey ? 0.002 : 0.01;
    const moves = { ArrowLeft: [-d, 0], ArrowRight: [d, 0], ArrowUp: [0, -d], ArrowDown: [0, d] };
    if (ev.key >= '1' && ev.key <= String(NUM_POINTS)) {
      ui.selected[l] = Number(ev.key) - 1;
      drawLevel(l);
    } else if (moves[ev.key]) {
      stop();
      const [dx, dy] = moves[ev.key];
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

const clamp01 = (x) => Math.min(1, Math.max(0, x));

function setWeight(i, w) {
  state.attentionWeights[i] = clamp01(w);
  guarded(changed);
}

function buildLevels() {
  const host = $('levels');
  host.textContent = '';
  levelViews = LEVELS.map(([h, w], l) => {
    const fig = document.createElement('figure');
    fig.className = 'level';
    const cap = document.createElement('figcaption');
    const title = document.createElement('span');
    title.innerHTML = `<b>level ${l}</b> · ${h}×${w}`;
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
    return { canvas, ctx: canvas.getContext('2d'), heat, heatCtx: heat.getContext('2d'), gradMax,
      images: HEADS.map((_, head) => headImage(l, head)) };
  });
  levelViews.forEach((_, l) => attachLevel(l));
}

function buildPoints() {
  const host = $('points');
  host.textContent = '';
  pointRows = [];
  for (const t of ['point', 'weight', '', '∂loss/∂weight']) {
    const s = document.createElement('span'); s.className = 'hdr'; s.textContent = t; host.append(s);
  }
  for (let l = 0; l < NL; l++) {
    const lvl = document.createElement('div');
    lvl.className = 'lvl';
    lvl.textContent = `level ${l} (${LEVELS[l][0]}×${LEVELS[l][1]})`;
    host.append(lvl);
    for (let p = 0; p < NUM_POINTS; p++) {
      const name = document.createElement('span');
      name.className = 'name';
      name.innerHTML = `<span class="sw" style="--c:${POINT_COLOURS[p]}"></span>${p + 1}`;
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
      const grad = document.createElement('span'); grad.className = 'g';
      grad.id = `gw-${l}-${p}`;
      bar.append(zero, fill, grad);
      bar.setAttribute('aria-labelledby', grad.id);
      host.append(name, slider, weight, bar);
      pointRows.push({ l, p, slider, weight, grad, fill });
    }
  }
}

function bindControls() {
  const head = $('head');
  HEADS.forEach((h, i) => { const o = document.createElement('option'); o.value = String(i); o.textContent = `${i}: ${h.name}`; head.append(o); });
  head.addEventListener('change', () => { ui.head = Number(head.value); guarded(render); });
  const opt = (id, key, parse = (x) => x) => {
    $(id).addEventListener('change', (ev) => {
      ui.opts[key] = parse(ev.target.type === 'checkbox' ? ev.target.checked : ev.target.value);
      stop();
      guarded(changed);
    });
  };
  opt('padding', 'paddingMode');
  opt('value-layout', 'valueLayout');
  opt('loc-layout', 'samplingLocationsLayout');
  opt('align-corners', 'alignCorners', Boolean);
  $('simd').addEventListener('change', (ev) => { ui.module = ev.target.value; stop(); guarded(changed); });
  $('heat').addEventListener('change', (ev) => { ui.heat = ev.target.checked; guarded(render); });
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
  window.addEventListener('resize', () => drawCurve());
  // Redraw crisply whenever a level's displayed size changes (layout, zoom, rotation).
  if (typeof ResizeObserver === 'function') {
    const ro = new ResizeObserver(() => { if (result) guarded(() => levelViews.forEach((_, l) => drawLevel(l))); });
    levelViews.forEach((v) => ro.observe(v.canvas));
  }
}

async function main() {
  // This machine's CPUs when the page is cross-origin isolated (make demo's server sends COOP and
  // COEP), else 1 with one console notice; the threads field shows which (README "Threads").
  const simd = await init({ simd: 'auto', threads: 'auto' });
  modules = { simd, scalar: await init({ simd: false }) };
  if (!simd.simd) {
    // No SIMD in this browser: the scalar module serves both entries.
    const o = $('simd').querySelector('option[value=simd]');
    o.textContent = 'SIMD (unsupported here)';
    o.disabled = true;
    ui.module = 'scalar';
    $('simd').value = 'scalar';
  }
  data = buildPyramid(drawPicture());
  state = initialState();
  buildLevels();
  buildPoints();
  bindControls();
  changed();
}

main().catch(showError);
