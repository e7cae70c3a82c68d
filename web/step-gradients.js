// Step 4, gradients, in the playground: the three maps with each point's arrow (−∂loss/∂location),
// ring (weight) and the glow (|∂loss/∂value|), the legends, and the weights with their gradients.
import { LEVELS, NUM_HEADS, NUM_POINTS } from './scene.js';
import { logitGradients } from './model.js';
import { $, NL, CANVAS_W, CANVAS_H, POINT_COLOURS, slot, clamp01 } from './page-state.js';
import {
  beginCanvas, imageRect, crosshair, arrow, arrowLength, ARROW_TICKS, pointRadius, heatColour, heatPosition,
  HEAT_LO, HEAT_HI, HEAT_STOPS, css, toNormalised, arrowMoves,
} from './draw.js';
import { fixed, formatGrad } from './format.js';

export function drawLevel(ctx, l) {
  const { ui, state, result, images, drawn } = ctx;
  const v = ctx.levelViews[l];
  const g = beginCanvas(v.canvas);
  const head = ui.head;
  const r = imageRect(ui.opts, l);
  g.drawImage(images[l][head], r.x, r.y, r.w, r.h);
  if (ui.heat) drawHeat(ctx, l, g, r);
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
function drawHeat(ctx, l, g, r) {
  const [h, w] = LEVELS[l];
  const start = ctx.data.levelStartIndex[l];
  const v = ctx.levelViews[l];
  g.fillStyle = 'rgba(0,0,0,0.6)';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  const img = v.heatCtx.createImageData(w, h);
  let any = false;
  for (let i = 0; i < h * w; i++) {
    const m = ctx.result.heat[(start + i) * NUM_HEADS + ctx.ui.head];
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

export function renderLegends(ctx) {
  const svg = $('arrow-legend');
  const scale = (ctx.levelViews[0].canvas.clientWidth || CANVAS_W) / CANVAS_W;
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
  $('heat-legend-item').hidden = !ctx.ui.heat;
}

// What the bars show: the gradient descent follows. Raw weights: the operator's ∂loss/∂weight.
// Softmax: ∂loss/∂logit, which accounts for the weights summing to 1 (∂loss/∂weight alone would
// ask to raise them all at once whenever the output is too small).
function shownWeightGradients(ctx) {
  const { ui, state, result } = ctx;
  return ui.weightMode === 'softmax' ? logitGradients(state.attentionWeights, result.gradAttentionWeights) : result.gradAttentionWeights;
}

export function renderPoints(ctx) {
  const { ui, state } = ctx;
  const grads = shownWeightGradients(ctx);
  const what = ui.weightMode === 'softmax' ? '∂loss/∂logit' : '∂loss/∂weight';
  $('grad-hdr').textContent = what;
  $('bars-what').textContent = ui.weightMode === 'softmax'
    ? 'With softmax weights the bars show ∂loss/∂logit: raising one weight lowers all the others.'
    : 'Raw weights: the bars show the operator\'s ∂loss/∂weight.';
  let gmax = 0;
  for (let l = 0; l < NL; l++) for (let p = 0; p < NUM_POINTS; p++) gmax = Math.max(gmax, Math.abs(grads[slot(ui.head, l, p)]));
  for (const row of ctx.pointRows) {
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

// ---- building and input ------------------------------------------------------------------

function hitPoint(ctx, l, canvas, ev) {
  const { ui, state } = ctx;
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

function attachLevel(ctx, l) {
  const { canvas } = ctx.levelViews[l];
  const { ui } = ctx;
  const act = ctx.actions;
  let dragging = -1;
  canvas.addEventListener('pointerdown', (ev) => {
    if (ev.button !== 0) return;
    act.stop();
    const p = hitPoint(ctx, l, canvas, ev);
    if (p >= 0) {
      dragging = p;
      ui.selected[l] = p;
      canvas.setPointerCapture(ev.pointerId);
    } else {
      ctx.state.target = toNormalised(canvas, ev);
      act.guarded(act.changed);
    }
  });
  canvas.addEventListener('pointermove', (ev) => {
    if (dragging < 0) return;
    const [x, y] = toNormalised(canvas, ev);
    const i = slot(ui.head, l, dragging);
    ctx.state.samplingLocations[2 * i] = x;
    ctx.state.samplingLocations[2 * i + 1] = y;
    act.guarded(act.changed);
  });
  const end = () => { dragging = -1; };
  canvas.addEventListener('pointerup', end);
  canvas.addEventListener('pointercancel', end);
  canvas.addEventListener('wheel', (ev) => {
    const p = hitPoint(ctx, l, canvas, ev);
    if (p < 0) return;
    ev.preventDefault();
    act.stop();
    ui.selected[l] = p;
    act.setWeight(slot(ui.head, l, p), ctx.state.attentionWeights[slot(ui.head, l, p)] + (ev.deltaY < 0 ? 0.02 : -0.02));
  }, { passive: false });
  canvas.addEventListener('keydown', (ev) => {
    const { state } = ctx;
    const move = arrowMoves(ev);
    if (ev.key >= '1' && ev.key <= String(NUM_POINTS)) {
      ui.selected[l] = Number(ev.key) - 1;
      drawLevel(ctx, l);
    } else if (move) {
      act.stop();
      const [dx, dy] = move;
      if (ev.shiftKey) {
        state.target = [clamp01(state.target[0] + dx), clamp01(state.target[1] + dy)];
      } else {
        const i = slot(ui.head, l, ui.selected[l]);
        state.samplingLocations[2 * i] = clamp01(state.samplingLocations[2 * i] + dx);
        state.samplingLocations[2 * i + 1] = clamp01(state.samplingLocations[2 * i + 1] + dy);
      }
      act.guarded(act.changed);
    } else if (ev.key === '+' || ev.key === '=' || ev.key === '-' || ev.key === '_') {
      act.stop();
      const i = slot(ui.head, l, ui.selected[l]);
      act.setWeight(i, state.attentionWeights[i] + (ev.key === '+' || ev.key === '=' ? 0.02 : -0.02));
    } else {
      return;
    }
    ev.preventDefault();
    ev.stopPropagation();
  });
  canvas.addEventListener('focus', () => drawLevel(ctx, l));
  canvas.addEventListener('blur', () => drawLevel(ctx, l));
}

export function buildLevels(ctx) {
  const host = $('levels');
  host.textContent = '';
  ctx.levelViews = LEVELS.map(([h, w], l) => {
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
  ctx.levelViews.forEach((_, l) => attachLevel(ctx, l));
}

export function buildPoints(ctx) {
  const host = $('points');
  host.textContent = '';
  ctx.pointRows = [];
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
      slider.addEventListener('input', () => { ctx.actions.stop(); ctx.actions.setWeight(slot(ctx.ui.head, l, p), Number(slider.value)); });
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
      ctx.pointRows.push({ l, p, slider, weight, grad, fill, bar });
    }
  }
}
