// Drawing helpers every step uses: colours of features and gradients, canvases sized to the
// screen, the maps' geometry, arrows, labels, the channel bars, and pointer/keyboard input.
import { LEVELS, NUM_HEADS, CHANNELS, HEADS } from './scene.js';
import { CANVAS_W, CANVAS_H, clamp01 } from './page-state.js';
import { formatValue } from './format.js';

// Arrows: length grows with log |gradient|, one scale for every map and every moment, so a
// small gradient draws a short arrow (honest) that is still visible.
const ARROW_UNIT = 15, ARROW_FLOOR = 1e-3, ARROW_MAX = 80;
export const arrowLength = (g) => Math.min(ARROW_MAX, ARROW_UNIT * Math.log10(1 + g / ARROW_FLOOR));
export const ARROW_TICKS = [0.001, 0.01, 0.1, 1, 10];
// Glow: |∂loss/∂value| on a fixed log scale from HEAT_LO to HEAT_HI.
export const HEAT_LO = 1e-4, HEAT_HI = 1;
// Bright at both ends, so even the smallest gradients stand out on the darkened map.
export const HEAT_STOPS = [[0, [70, 110, 255]], [0.35, [190, 70, 230]], [0.65, [255, 110, 50]], [0.85, [255, 200, 40]], [1, [255, 255, 190]]];

// The first three channels of a head as a colour (edges: signed gradients around mid-grey).
export function rgbOf(vec, head) {
  let rgb = [vec[0], vec[1], vec[2]];
  if (HEADS[head].name === 'edges') rgb = [0.5 + 2 * rgb[0], 0.5 + 2 * rgb[1], 2.5 * rgb[2]];
  return rgb.map((v) => Math.max(0, Math.min(255, Math.round(255 * v))));
}
export const css = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;
export const cssVar = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

export function heatColour(t) {
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
export const heatPosition = (m) => (Math.log10(m) - Math.log10(HEAT_LO)) / (Math.log10(HEAT_HI) - Math.log10(HEAT_LO));

// One map of one head as a canvas of its own pixels (drawn scaled, without smoothing).
export function levelImage(data, level, head) {
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

// Where the operator puts pixel centres: x·W − 0.5, or x·(W − 1) with align_corners. The image
// is drawn so its pixel centres sit exactly where the samples read them.
export function imageRect(opts, level) {
  const [h, w] = LEVELS[level];
  if (!opts.alignCorners) return { x: 0, y: 0, w: CANVAS_W, h: CANVAS_H };
  const sx = w > 1 ? CANVAS_W / (w - 1) : CANVAS_W, sy = h > 1 ? CANVAS_H / (h - 1) : CANVAS_H;
  return { x: -0.5 * sx, y: -0.5 * sy, w: w * sx, h: h * sy };
}
// Logical position of pixel (row, col)'s top-left corner and its size.
export function pixelBox(opts, level, row, col) {
  const [h, w] = LEVELS[level];
  const r = imageRect(opts, level);
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

export function beginCanvas(canvas) {
  const g = canvas.getContext('2d');
  const s = fitBackingStore(canvas);
  g.setTransform(s, 0, 0, s, 0, 0);
  g.fillStyle = '#000';
  g.fillRect(0, 0, CANVAS_W, CANVAS_H);
  g.imageSmoothingEnabled = false;
  return g;
}

export function crosshair(g, x, y, r = 11) {
  for (const [w, c] of [[5, 'rgba(0,0,0,0.8)'], [2.5, '#fff']]) {
    g.lineWidth = w; g.strokeStyle = c;
    g.beginPath(); g.arc(x, y, r, 0, 2 * Math.PI);
    g.moveTo(x - r - 6, y); g.lineTo(x + r + 6, y); g.moveTo(x, y - r - 6); g.lineTo(x, y + r + 6);
    g.stroke();
  }
}

export function arrow(g, x, y, dx, dy, colour) {
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
export function label(g, text, x, y, colour = '#fff') {
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

// Numbers beside rings ({ x, y, r, text, colour }), each where it covers no ring and no other
// number: the first free spot of a few around its ring, upper right first, else the least covered
// one. Points of a head often sit close together, so a fixed offset would pile the numbers up.
// Returns each number's box (logical units) as drawn.
export function ringLabels(g, rings, size, halo) {
  g.font = `bold ${size}px sans-serif`; g.textAlign = 'center'; g.textBaseline = 'middle';
  const boxes = [];
  const overlap = (a, b) => Math.max(0, Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x)) * Math.max(0, Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y));
  // The part of a box inside a ring's disc, roughly: the box against the disc's bounding square
  // when the disc reaches the box at all.
  const onRing = (b, c) => {
    const dx = Math.max(b.x - c.x, 0, c.x - b.x - b.w), dy = Math.max(b.y - c.y, 0, c.y - b.y - b.h);
    return Math.hypot(dx, dy) < c.r ? Math.max(1, overlap(b, { x: c.x - c.r, y: c.y - c.r, w: 2 * c.r, h: 2 * c.r })) : 0;
  };
  for (const ring of rings) {
    const m = g.measureText(ring.text);
    const w = m.width + 2 * halo, up = m.actualBoundingBoxAscent + halo, down = m.actualBoundingBoxDescent + halo;
    let best = null;
    for (const extra of [3, 12, 24]) {
      for (const a of LABEL_ANGLES) {
        // Far enough along a that the whole box clears the ring by `extra`.
        const d = ring.r + extra + Math.abs(Math.cos(a)) * w / 2 + Math.abs(Math.sin(a)) * (up + down) / 2;
        const lx = ring.x + d * Math.cos(a), ly = ring.y + d * Math.sin(a);
        const box = { x: lx - w / 2, y: ly - up, w, h: up + down };
        if (box.x < 0 || box.y < 0 || box.x + box.w > CANVAS_W || box.y + box.h > CANVAS_H) continue;
        const cost = boxes.reduce((s, b) => s + 100 * overlap(box, b), 0) + rings.reduce((s, c) => s + onRing(box, c), 0);
        if (!best || cost < best.cost) best = { cost, lx, ly, box };
        if (cost === 0) break;
      }
      if (best && best.cost === 0) break;
    }
    g.lineWidth = 2 * halo; g.strokeStyle = '#000'; g.strokeText(ring.text, best.lx, best.ly);
    g.fillStyle = ring.colour; g.fillText(ring.text, best.lx, best.ly);
    boxes.push(best.box);
  }
  return boxes;
}
// Upper right, right, up, upper left, lower right, left, down, lower left.
const LABEL_ANGLES = [-45, 0, -90, -135, 45, 180, 90, 135].map((d) => (d * Math.PI) / 180);

// Rings stay wider than a point's 2×2 corner pixels on the fine map, so its glow shows inside.
export const pointRadius = (w) => 8 + 10 * Math.sqrt(clamp01(w));

// One channel as name, number and a bar around zero (and optionally a mark, e.g. the target).
export function channelRow(name, v, scale, mark) {
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

// ---- input ---------------------------------------------------------------------------------

export function toNormalised(canvas, ev) {
  const r = canvas.getBoundingClientRect();
  return [clamp01((ev.clientX - r.left) / r.width), clamp01((ev.clientY - r.top) / r.height)];
}

export const arrowMoves = (ev) => {
  const d = ev.altKey ? 0.002 : 0.01;
  return { ArrowLeft: [-d, 0], ArrowRight: [d, 0], ArrowUp: [0, -d], ArrowDown: [0, d] }[ev.key];
};

// A canvas where a press (and drag) sets a normalised position, and arrow keys nudge it.
export function attachPositionCanvas(canvas, get, set) {
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
