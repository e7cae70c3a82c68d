// Step 5, descent: Step / Play / Reset, the loss curve, and the note on a point left behind.
import { NUM_POINTS } from './scene.js';
import { descend, softmaxInto, MIN_WEIGHT } from './model.js';
import { project, queryAt } from './query.js';
import { $, NL, slot } from './page-state.js';
import { cssVar } from './draw.js';
import { fixed, formatLoss } from './format.js';

const PLAY_MAX_STEPS = 400;

// The start: the locations and weights the query's projections give (query.js), as the
// module computes them; the target across the picture.
export function freshState(ctx) {
  const q = project(queryAt(ctx.query.t));
  const s = { samplingLocations: q.locations, attentionWeights: new Float32Array(q.weights.length), logits: q.logits, target: [0.72, 0.64] };
  if (ctx.ui.weightMode === 'softmax') softmaxInto(s.logits, s.attentionWeights);
  else for (let i = 0; i < s.attentionWeights.length; i++) s.attentionWeights[i] = Math.max(MIN_WEIGHT, q.weights[i]);
  return s;
}

export function step(ctx) {
  const { ui } = ctx;
  descend(ctx.state, ctx.result, ctx.optimizer, { weights: ui.weightMode, learningRate: ui.learningRate });
  ui.steps += 1;
  ctx.actions.compute();
  ui.history.push(ctx.result.loss);
  ui.stuck = findStuck(ctx);
  ctx.actions.render();
}

export function reset(ctx) {
  stop(ctx);
  ctx.state = freshState(ctx);
  ctx.ui.steps = 0;
  ctx.actions.changed();
}

export function play(ctx) {
  const { ui } = ctx;
  if (ui.playing) { stop(ctx); return; }
  ui.playing = true;
  $('play').textContent = 'Pause';
  $('play').setAttribute('aria-pressed', 'true');
  let count = 0;
  const tick = () => {
    if (!ui.playing) return;
    ctx.actions.guarded(() => step(ctx));
    count += 1;
    if (count >= PLAY_MAX_STEPS || ctx.result.loss < 1e-9) { stop(ctx); return; }
    ctx.play.frame = requestAnimationFrame(tick);
  };
  ctx.play.frame = requestAnimationFrame(tick);
}

export function stop(ctx) {
  ctx.ui.playing = false;
  cancelAnimationFrame(ctx.play.frame);
  $('play').textContent = 'Play';
  $('play').setAttribute('aria-pressed', 'false');
}

// Ticks of a log axis from lo to hi (log10 values): the decades inside, or 1-2-5 steps when the
// range is under two decades; at least the two ends.
function logTicks(lo, hi) {
  const out = [];
  const mult = hi - lo < 2 ? [1, 2, 5] : [1];
  for (let e = Math.floor(lo); e <= Math.ceil(hi); e++) {
    for (const m of mult) {
      const v = m * 10 ** e, t = Math.log10(v);
      if (t >= lo - 1e-9 && t <= hi + 1e-9) out.push(v);
    }
  }
  return out.length >= 2 ? out : [10 ** lo, 10 ** hi];
}

function stepTicks(n) {
  const raw = n / 5, mag = 10 ** Math.floor(Math.log10(Math.max(1, raw)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || mag;
  const out = [];
  for (let k = 0; k <= n; k += step) out.push(k);
  return out;
}

// The loss per step on a log axis, with ticks and labels on both axes.
export function drawCurve(ctx) {
  const { ui } = ctx;
  const c = $('curve');
  const dpr = Math.min(2, window.devicePixelRatio || 1);
  const H = 130;
  const cw = Math.max(100, Math.round(c.clientWidth * dpr)), ch = Math.round(H * dpr);
  if (c.width !== cw || c.height !== ch) { c.width = cw; c.height = ch; }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  const W = cw / dpr;
  g.clearRect(0, 0, W, H);
  g.fillStyle = cssVar('--field'); g.fillRect(0, 0, W, H);
  const hist = ui.history.filter((x) => x > 0 && Number.isFinite(x));
  const caption = $('curve-caption');
  const n = Math.max(1, ui.history.length - 1);
  const lo = hist.length ? Math.log10(Math.min(...hist)) : -1, hi = hist.length ? Math.log10(Math.max(...hist)) : 1;
  const span = Math.max(hi - lo, 1e-6);
  const yl = hi - lo < 1e-6 ? lo - 0.5 : lo, yh = hi - lo < 1e-6 ? hi + 0.5 : hi;
  const L = 52, R = 10, T = 16, B = 30;
  const X = (k) => L + ((W - L - R) * k) / n;
  const Y = (v) => T + (H - T - B) * (1 - (Math.log10(Math.max(v, 1e-30)) - yl) / Math.max(yh - yl, span));
  const ink = cssVar('--dim');
  g.strokeStyle = ink; g.fillStyle = ink; g.lineWidth = 1; g.font = '11px system-ui, sans-serif';
  g.beginPath(); g.moveTo(L, T - 4); g.lineTo(L, H - B); g.lineTo(W - R, H - B); g.stroke();
  const yTicks = logTicks(yl, yh), xTicks = stepTicks(n);
  g.textAlign = 'right'; g.textBaseline = 'middle';
  for (const v of yTicks) {
    const y = Y(v);
    g.beginPath(); g.moveTo(L - 4, y); g.lineTo(L, y); g.stroke();
    g.fillText(fixed(v, 2, 8), L - 6, y);
  }
  g.textAlign = 'center'; g.textBaseline = 'top';
  for (const k of xTicks) {
    const x = X(k);
    g.beginPath(); g.moveTo(x, H - B); g.lineTo(x, H - B + 4); g.stroke();
    g.fillText(String(k), x, H - B + 6);
  }
  g.textAlign = 'left'; g.textBaseline = 'top'; g.fillText('loss (log scale)', 4, 2);
  g.textAlign = 'right'; g.textBaseline = 'bottom'; g.fillText('step', W - R, H - 1);
  ctx.drawn.curve = { yTicks, xTicks, yLabel: 'loss (log scale)', xLabel: 'step' };
  if (hist.length < 2) {
    caption.textContent = 'loss per step: press Step or Play';
    return;
  }
  g.strokeStyle = cssVar('--accent'); g.lineWidth = 2; g.beginPath();
  ui.history.forEach((x, k) => {
    if (k === 0) g.moveTo(X(k), Y(x)); else g.lineTo(X(k), Y(x));
  });
  g.stroke();
  caption.textContent = `loss per step: ${formatLoss(ui.history[0])} → ${formatLoss(ui.history[ui.history.length - 1])} in ${ui.history.length - 1} steps`;
}

// Why a point can stop short of the target: called after descent has levelled off.
// A point is stuck when it is far from the target and either the loss has levelled off or
// its weight has withered.
function findStuck(ctx) {
  const { ui, state } = ctx;
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

export function renderStuck(ctx) {
  const box = $('stuck');
  const s = ctx.ui.stuck;
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

