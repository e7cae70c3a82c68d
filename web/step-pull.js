// Step 4's own figure: the gradient of one point, before the playground shows them all. A close-up
// of the point and its four corner pixels; each corner's pull −w·(g·(V_k − s))·∇β_k as an arrow
// and numbers (g = ∂loss/∂output of the head, s = the point's reading from the operator, β_k the
// bilinear shares); their sum beside the operator's −∂loss/∂location from backward.
import { LEVELS, NUM_HEADS, CHANNELS, NUM_POINTS, bilinearCorners } from './scene.js';
import { $, NL, CANVAS_W, CANVAS_H, POINT_COLOURS, slot, clamp01 } from './page-state.js';
import { beginCanvas, arrow, label, arrowMoves } from './draw.js';
import { pointSample } from './step-sum.js';
import { formatGrad, formatValue } from './format.js';

const CORNER_COLOURS = ['#ff9f43', '#c56cf0', '#18dcff', '#7bed9f'];
const ZOOM_COLS = 4;                    // the close-up spans 4 × 3 pixels of the level

export function buildPull(ctx) {
  const sel = $('pull-point');
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NUM_POINTS; p++) {
      const o = document.createElement('option');
      o.value = `${l},${p}`;
      o.textContent = `point ${p + 1} on level ${l} (${LEVELS[l][0]}×${LEVELS[l][1]})`;
      sel.append(o);
    }
  }
  sel.value = `${ctx.pull.level},${ctx.pull.point}`;
  sel.addEventListener('change', () => {
    [ctx.pull.level, ctx.pull.point] = sel.value.split(',').map(Number);
    ctx.actions.guarded(() => { renderPull(ctx); ctx.actions.publish(); });
  });
  const canvas = $('pull-canvas');
  const toPoint = (ev) => {
    const r = canvas.getBoundingClientRect(), v = ctx.pull.view;
    return [clamp01(v.x0 + ((ev.clientX - r.left) / r.width) * v.w), clamp01(v.y0 + ((ev.clientY - r.top) / r.height) * v.h)];
  };
  const i = () => slot(ctx.ui.head, ctx.pull.level, ctx.pull.point);
  const set = ([x, y]) => {
    ctx.state.samplingLocations[2 * i()] = x;
    ctx.state.samplingLocations[2 * i() + 1] = y;
    ctx.actions.guarded(ctx.actions.changed);
  };
  canvas.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0 || !ctx.pull.view) return;
    ctx.actions.stop();
    ctx.pull.dragging = true;
    canvas.setPointerCapture(ev.pointerId);
    set(toPoint(ev));
  });
  canvas.addEventListener('pointermove', (ev) => { if (ctx.pull.dragging) set(toPoint(ev)); });
  const end = () => { ctx.pull.dragging = false; ctx.actions.guarded(() => renderPull(ctx)); };
  canvas.addEventListener('pointerup', end);
  canvas.addEventListener('pointercancel', end);
  canvas.addEventListener('keydown', (ev) => {
    const move = arrowMoves(ev);
    if (!move) return;
    ctx.actions.stop();
    const k = i();
    set([clamp01(ctx.state.samplingLocations[2 * k] + move[0] / 4), clamp01(ctx.state.samplingLocations[2 * k + 1] + move[1] / 4)]);
    ev.preventDefault();
    ev.stopPropagation();
  });
}

// The decomposition, from the page's state and the operator's results.
export function pullOf(ctx) {
  const { ui, state, result, data } = ctx;
  const { level: l, point: p } = ctx.pull;
  const head = ui.head;
  const i = slot(head, l, p);
  const [H, W] = LEVELS[l];
  const x = state.samplingLocations[2 * i], y = state.samplingLocations[2 * i + 1];
  const { u, v, corners } = bilinearCorners(x, y, H, W, ui.opts);
  const a = u - Math.floor(u), b = v - Math.floor(v);
  // d(u, v)/d(x, y); 0 along an axis that border padding clamped.
  const opts = ui.opts;
  const raw = [opts.alignCorners ? x * (W - 1) : x * W - 0.5, opts.alignCorners ? y * (H - 1) : y * H - 0.5];
  const du = opts.paddingMode === 'border' && raw[0] !== u ? 0 : opts.alignCorners ? W - 1 : W;
  const dv = opts.paddingMode === 'border' && raw[1] !== v ? 0 : opts.alignCorners ? H - 1 : H;
  const shares = [[-(1 - b), -(1 - a)], [1 - b, -a], [-b, 1 - a], [b, a]];
  const g = result.gradOutput.subarray(head * CHANNELS, (head + 1) * CHANNELS);
  const s = pointSample(ctx, head, l, p);
  const w = state.attentionWeights[i];
  const start = data.levelStartIndex[l];
  const pulls = corners.map((c, k) => {
    const rr = Math.min(H - 1, Math.max(0, c.row)), cc = Math.min(W - 1, Math.max(0, c.col));
    const readsPixel = c.inside || opts.paddingMode === 'border';
    let agree = 0;
    for (let ch = 0; ch < CHANNELS; ch++) {
      const V = readsPixel ? data.value[((start + rr * W + cc) * NUM_HEADS + head) * CHANNELS + ch] : 0;
      agree += g[ch] * (V - s[ch]);
    }
    const pull = [-w * agree * shares[k][0] * du, -w * agree * shares[k][1] * dv];
    return { row: c.row, col: c.col, inside: c.inside, share: c.weight, agree, pull };
  });
  const sum = [pulls.reduce((t, q) => t + q.pull[0], 0), pulls.reduce((t, q) => t + q.pull[1], 0)];
  const backward = [-result.gradSamplingLocations[2 * i], -result.gradSamplingLocations[2 * i + 1]];
  return { level: l, point: p, head, weight: w, location: [x, y], pulls, sum, backward };
}

export function renderPull(ctx) {
  const f = pullOf(ctx);
  ctx.pull.last = f;
  const [H, W] = LEVELS[f.level];
  // The close-up: ZOOM_COLS × ZOOM_COLS·3/4 pixels around the point; held still while it is
  // dragged here, so the pointer and the point stay together.
  if (!ctx.pull.dragging || !ctx.pull.view) {
    const w = ZOOM_COLS / W, h = (ZOOM_COLS * 0.75) / H;
    ctx.pull.view = { x0: f.location[0] - w / 2, y0: f.location[1] - h / 2, w, h };
  }
  const view = ctx.pull.view;
  f.view = { ...view };
  const canvas = $('pull-canvas');
  const g = beginCanvas(canvas);
  const toX = (x) => ((x - view.x0) / view.w) * CANVAS_W, toY = (y) => ((y - view.y0) / view.h) * CANVAS_H;
  const img = ctx.images[f.level][f.head];
  // Pixel (row, col)'s box in normalised units: centred where the operator reads it.
  const px = (col) => (ctx.ui.opts.alignCorners ? (col - 0.5) / (W - 1) : col / W);
  const py = (row) => (ctx.ui.opts.alignCorners ? (row - 0.5) / (H - 1) : row / H);
  g.drawImage(img, toX(px(0)), toY(py(0)), toX(px(W)) - toX(px(0)), toY(py(H)) - toY(py(0)));
  g.fillStyle = 'rgba(0,0,0,0.3)';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  const cx = toX(f.location[0]), cy = toY(f.location[1]);
  f.pulls.forEach((c, k) => {
    const x0 = toX(px(c.col)), y0 = toY(py(c.row)), pw = toX(px(c.col + 1)) - x0, ph = toY(py(c.row + 1)) - y0;
    if (c.inside) {
      g.save(); g.beginPath(); g.rect(x0, y0, pw, ph); g.clip();
      g.drawImage(img, toX(px(0)), toY(py(0)), toX(px(W)) - toX(px(0)), toY(py(H)) - toY(py(0)));
      g.restore();
    }
    g.lineWidth = 3; g.strokeStyle = CORNER_COLOURS[k]; g.setLineDash(c.inside ? [] : [6, 4]);
    g.strokeRect(x0 + 1.5, y0 + 1.5, pw - 3, ph - 3); g.setLineDash([]);
  });
  // Each corner's pull, then the sum, on one linear scale (the longest 100 units), so the four
  // arrows add up, tip to tail, to the white one.
  const longest = Math.max(...f.pulls.map((c) => Math.hypot(c.pull[0], c.pull[1])), Math.hypot(f.backward[0], f.backward[1]));
  const scale = longest > 0 ? 100 / longest : 0;
  f.arrowLengths = [];
  const draw = (vec, colour) => {
    const len = Math.hypot(vec[0], vec[1]) * scale;
    f.arrowLengths.push(len);
    if (len >= 2) arrow(g, cx, cy, vec[0] * scale, vec[1] * scale, colour);
  };
  f.pulls.forEach((c, k) => draw(c.pull, CORNER_COLOURS[k]));
  draw(f.backward, '#ffffff');
  g.beginPath(); g.arc(cx, cy, 6, 0, 2 * Math.PI);
  g.fillStyle = POINT_COLOURS[f.point]; g.fill(); g.lineWidth = 2; g.strokeStyle = '#000'; g.stroke();
  label(g, `point ${f.point + 1}, level ${f.level}, head ${f.head} · weight ${f.weight.toFixed(3)}`, CANVAS_W / 2, 12);

  const host = $('pull-table');
  host.textContent = '';
  const cell = (text, cls = '') => { const e = document.createElement('span'); e.className = cls; e.textContent = text; host.append(e); return e; };
  for (const t of ['corner', 'share β', 'g·(V − s)', 'pull x', 'pull y']) cell(t, 'hdr');
  f.pulls.forEach((c, k) => {
    const name = cell(`(${c.row}, ${c.col})${c.inside ? '' : ' outside'}`, 'name');
    name.style.setProperty('--c', CORNER_COLOURS[k]);
    cell(formatValue(c.share), 'mono');
    cell(formatGrad(c.agree), 'mono');
    cell(formatGrad(c.pull[0]), 'mono pull');
    cell(formatGrad(c.pull[1]), 'mono pull');
  });
  cell('sum of the four', 'name total');
  cell(formatGrad(f.sum[0]), 'mono total'); cell(formatGrad(f.sum[1]), 'mono total');
  cell('backward: −∂loss/∂loc', 'name total');
  cell(formatGrad(f.backward[0]), 'mono total backward'); cell(formatGrad(f.backward[1]), 'mono total backward');
}
