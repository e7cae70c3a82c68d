// Step 5, descent: Step / Play / Reset, the loss curve, and the note on a point left behind.
import { NUM_POINTS, initialState } from './scene.js';
import { descend, softmaxInto, logitsOf } from './model.js';
import { $, NL, slot } from './page-state.js';
import { cssVar } from './draw.js';
import { formatLoss } from './format.js';

const PLAY_MAX_STEPS = 400;

export function freshState(ctx) {
  const s = initialState();
  s.logits = logitsOf(s.attentionWeights);
  if (ctx.ui.weightMode === 'softmax') softmaxInto(s.logits, s.attentionWeights);
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

export function drawCurve(ctx) {
  const { ui } = ctx;
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

