// Step 2's fold: where the points and weights come from. The query vector, its two projections
// (query.js) to offsets (+ the reference point) and to logits (softmax), for the selected head;
// a slider moves the query and the page restarts from what it gives.
import { NUM_POINTS } from './scene.js';
import { $, NL, CANVAS_W, CANVAS_H, POINT_COLOURS, slot } from './page-state.js';
import { beginCanvas, imageRect, crosshair } from './draw.js';
import { project, queryAt, REFERENCE } from './query.js';
import { formatValue } from './format.js';

export function buildQuery(ctx) {
  const slider = $('query-t');
  slider.value = String(ctx.query.t);
  slider.addEventListener('input', () => {
    ctx.query.t = Number(slider.value);
    ctx.actions.guarded(ctx.actions.reset);
  });
}

export function renderQuery(ctx) {
  const { ui, images } = ctx;
  const q = queryAt(ctx.query.t);
  const pr = project(q);
  ctx.query.last = { t: ctx.query.t, query: Array.from(q), ...Object.fromEntries(Object.entries(pr).map(([k, v]) => [k, Array.from(v)])) };
  $('query-t-value').textContent = ctx.query.t.toFixed(2);
  const strip = $('query-strip');
  strip.textContent = '';
  for (const v of q) {
    const c = document.createElement('span');
    const t = Math.max(-1, Math.min(1, v / 1.5));
    c.style.background = t >= 0 ? `rgba(255, 180, 60, ${0.15 + 0.85 * t})` : `rgba(90, 160, 255, ${0.15 - 0.85 * t})`;
    c.title = v.toFixed(3);
    strip.append(c);
  }
  const canvas = $('query-canvas');
  const g = beginCanvas(canvas);
  const r = imageRect(ui.opts, 0);
  g.drawImage(images[0][ui.head], r.x, r.y, r.w, r.h);
  g.fillStyle = 'rgba(0,0,0,0.35)'; g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  const rx = REFERENCE[0] * CANVAS_W, ry = REFERENCE[1] * CANVAS_H;
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ui.head, l, p);
      const x = pr.locations[2 * i] * CANVAS_W, y = pr.locations[2 * i + 1] * CANVAS_H;
      g.beginPath(); g.moveTo(rx, ry); g.lineTo(x, y);
      g.lineWidth = 1.5; g.strokeStyle = POINT_COLOURS[p]; g.setLineDash(l === 0 ? [] : l === 1 ? [5, 3] : [2, 3]); g.stroke();
      g.setLineDash([]);
      g.beginPath(); g.arc(x, y, 2 + 14 * Math.sqrt(pr.weights[i]), 0, 2 * Math.PI);
      g.lineWidth = 2; g.stroke();
    }
  }
  crosshair(g, rx, ry, 6);
  const host = $('query-table');
  host.textContent = '';
  const cell = (t, cls = 'mono') => { const e = document.createElement('span'); e.className = cls; e.textContent = t; host.append(e); };
  for (const t of [`head ${ui.head}`, 'offset (px)', 'location', 'logit', 'weight']) cell(t, 'hdr');
  for (let l = 0; l < NL; l++) {
    for (let p = 0; p < NUM_POINTS; p++) {
      const i = slot(ui.head, l, p);
      cell(`level ${l} point ${p + 1}`, 'name');
      cell(`${pr.offsets[2 * i].toFixed(2)}, ${pr.offsets[2 * i + 1].toFixed(2)}`);
      cell(`${formatValue(pr.locations[2 * i])}, ${formatValue(pr.locations[2 * i + 1])}`);
      cell(pr.logits[i].toFixed(3));
      cell(formatValue(pr.weights[i]));
    }
  }
}
