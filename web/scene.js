// The example data of the page: a picture it draws itself, turned into a feature pyramid.
// Plain arithmetic on arrays, so it runs in Node too and gives the same numbers there.

// The problem the page solves: one query, three heads, three levels, four points per level.
export const PICTURE = { width: 160, height: 120 };
export const LEVELS = [[60, 80], [30, 40], [15, 20]];   // (H, W) per level: halving each time
export const NUM_HEADS = 3;
// C_h per head: four features of the picture, then a sinusoidal positional encoding
// 2·(1, cos πx, sin πx, cos πy, sin πy), as a detector adds to its features. The encoding
// makes "every point on the target" the one way to reach zero loss (the constant channel
// makes the weights sum to 1, and a weighted mean of points on a half circle reaches the
// circle only when they coincide), so descent pulls the points to the target instead of to
// any look-alike pixel. The factor 2 lets position outweigh the picture's sharp edges.
export const PICTURE_CHANNELS = 4;
export const POSITION_CHANNELS = ['1', 'cos πx', 'sin πx', 'cos πy', 'sin πy'];
const POSITION_SCALE = 2;
export const CHANNELS = PICTURE_CHANNELS + POSITION_CHANNELS.length;
export const NUM_POINTS = 4;
export const HEADS = [
  { name: 'colour', channels: ['R', 'G', 'B', 'luma'] },
  { name: 'blurred colour', channels: ['R', 'G', 'B', 'luma'] },
  { name: 'edges', channels: ['∂luma/∂x', '∂luma/∂y', '|∇luma|', 'luma'] },
];

// The example picture, computed rather than drawn on a canvas, so its numbers are the same at
// every devicePixelRatio, window size and browser, and in Node: a colour field, a soft sun, a
// disc, a square, a triangle and the letters MSDA, each pixel the mean of 4×4 samples. Only
// +, −, ×, ÷ and √ (correctly rounded everywhere). Returns RGB floats in [0, 1], row-major,
// 3 per pixel.
const hex = (h) => [1, 3, 5].map((k) => parseInt(h.slice(k, k + 2), 16) / 255);
const SKY = [[0, hex('#1d3b8f')], [0.55, hex('#3aa39a')], [1, hex('#f2c14e')]];
const SUN = { x: 118, y: 32, r0: 2, r1: 34, stops: [[0, [...hex('#fffadc'), 1]], [0.4, [...hex('#ffc85a'), 0.85]], [1, [...hex('#ff783c'), 0]]] };
const DISC = { x: 42, y: 78, r: 20, colour: hex('#d9463e') };
const SQUARE = { x: 74, y: 62, w: 30, h: 30, colour: hex('#f5f1e6') };
const TRIANGLE = { p: [[20, 30], [62, 18], [40, 52]], colour: hex('#3c2a63') };
const INK = hex('#101820');
// Letters as strokes in a 10 × 14 box (y up from the baseline), 13 apart, ending at x = 154 on
// baseline y = 113, stroke 3.2 wide.
const LETTERS = {
  M: [[[0, 0], [0, 14], [5, 6], [10, 14], [10, 0]]],
  S: [[[10, 12], [8, 14], [2, 14], [0, 12], [0, 9], [2, 7], [8, 7], [10, 5], [10, 2], [8, 0], [2, 0], [0, 2]]],
  D: [[[0, 0], [0, 14], [6, 14], [10, 10], [10, 4], [6, 0], [0, 0]]],
  A: [[[0, 0], [5, 14], [10, 0]], [[2, 5], [8, 5]]],
};
const TEXT = { word: 'MSDA', right: 154, baseline: 113, advance: 13, half: 1.6 };
const SEGMENTS = (() => {
  const out = [];
  const x0 = TEXT.right - (TEXT.word.length - 1) * TEXT.advance - 10;
  [...TEXT.word].forEach((ch, k) => {
    for (const line of LETTERS[ch]) {
      for (let i = 1; i < line.length; i++) {
        const [a, b] = [line[i - 1], line[i]];
        out.push([x0 + k * TEXT.advance + a[0], TEXT.baseline - a[1], x0 + k * TEXT.advance + b[0], TEXT.baseline - b[1]]);
      }
    }
  });
  return out;
})();

const TEXT_BOX = [
  Math.min(...SEGMENTS.map((s) => Math.min(s[0], s[2]))) - TEXT.half, Math.min(...SEGMENTS.map((s) => Math.min(s[1], s[3]))) - TEXT.half,
  Math.max(...SEGMENTS.map((s) => Math.max(s[0], s[2]))) + TEXT.half, Math.max(...SEGMENTS.map((s) => Math.max(s[1], s[3]))) + TEXT.half,
];

function ramp(stops, t) {
  if (t <= stops[0][0]) return stops[0][1];
  for (let k = 1; k < stops.length; k++) {
    const [t1, c1] = stops[k];
    if (t <= t1) {
      const [t0, c0] = stops[k - 1];
      const f = (t - t0) / (t1 - t0);
      return c0.map((v, i) => v + f * (c1[i] - v));
    }
  }
  return stops[stops.length - 1][1];
}

function nearSegment(x, y, [ax, ay, bx, by], r) {
  const dx = bx - ax, dy = by - ay;
  const t = Math.min(1, Math.max(0, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy)));
  const ex = x - ax - t * dx, ey = y - ay - t * dy;
  return ex * ex + ey * ey <= r * r;
}

const edge = (x, y, [ax, ay], [bx, by]) => (bx - ax) * (y - ay) - (by - ay) * (x - ax);

// The colour at one point of the picture, in picture pixels (x right, y down).
function colourAt(x, y) {
  const { width: w, height: h } = PICTURE;
  let c = ramp(SKY, (x * w + y * h) / (w * w + h * h));
  const d = Math.sqrt((x - SUN.x) ** 2 + (y - SUN.y) ** 2);
  if (d < SUN.r1) {
    const sun = ramp(SUN.stops, Math.max(0, (d - SUN.r0) / (SUN.r1 - SUN.r0)));
    c = c.map((v, i) => v + sun[3] * (sun[i] - v));
  }
  if ((x - DISC.x) ** 2 + (y - DISC.y) ** 2 <= DISC.r * DISC.r) c = DISC.colour;
  if (x >= SQUARE.x && x < SQUARE.x + SQUARE.w && y >= SQUARE.y && y < SQUARE.y + SQUARE.h) c = SQUARE.colour;
  const [p0, p1, p2] = TRIANGLE.p;
  const e0 = edge(x, y, p0, p1), e1 = edge(x, y, p1, p2), e2 = edge(x, y, p2, p0);
  if ((e0 >= 0 && e1 >= 0 && e2 >= 0) || (e0 <= 0 && e1 <= 0 && e2 <= 0)) c = TRIANGLE.colour;
  if (x >= TEXT_BOX[0] && x <= TEXT_BOX[2] && y >= TEXT_BOX[1] && y <= TEXT_BOX[3] &&
    SEGMENTS.some((s) => nearSegment(x, y, s, TEXT.half))) c = INK;
  return c;
}

export function drawPicture() {
  const { width: w, height: h } = PICTURE;
  const S = 4;
  const rgb = new Float32Array(w * h * 3);
  for (let py = 0; py < h; py++) {
    for (let px = 0; px < w; px++) {
      let r = 0, g = 0, b = 0;
      for (let sy = 0; sy < S; sy++) {
        for (let sx = 0; sx < S; sx++) {
          const c = colourAt(px + (sx + 0.5) / S, py + (sy + 0.5) / S);
          r += c[0]; g += c[1]; b += c[2];
        }
      }
      const at = 3 * (py * w + px);
      rgb[at] = r / (S * S); rgb[at + 1] = g / (S * S); rgb[at + 2] = b / (S * S);
    }
  }
  return rgb;
}

// Area-average downsampling of an interleaved image (channels per pixel) by an integer factor.
function downsample(src, w, h, ch, factor) {
  const ow = Math.floor(w / factor), oh = Math.floor(h / factor);
  const out = new Float32Array(ow * oh * ch);
  const inv = 1 / (factor * factor);
  for (let y = 0; y < oh; y++) {
    for (let x = 0; x < ow; x++) {
      for (let c = 0; c < ch; c++) {
        let s = 0;
        for (let dy = 0; dy < factor; dy++) {
          for (let dx = 0; dx < factor; dx++) s += src[((y * factor + dy) * w + x * factor + dx) * ch + c];
        }
        out[(y * ow + x) * ch + c] = s * inv;
      }
    }
  }
  return out;
}

// Separable Gaussian blur with clamped edges.
function blur(src, w, h, ch, sigma) {
  const r = Math.max(1, Math.ceil(2.5 * sigma));
  const k = [];
  let ks = 0;
  for (let i = -r; i <= r; i++) { const v = Math.exp(-(i * i) / (2 * sigma * sigma)); k.push(v); ks += v; }
  for (let i = 0; i < k.length; i++) k[i] /= ks;
  const tmp = new Float32Array(src.length), out = new Float32Array(src.length);
  const clamp = (v, n) => (v < 0 ? 0 : v >= n ? n - 1 : v);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      for (let c = 0; c < ch; c++) {
        let s = 0;
        for (let i = -r; i <= r; i++) s += k[i + r] * src[(y * w + clamp(x + i, w)) * ch + c];
        tmp[(y * w + x) * ch + c] = s;
      }
    }
  }
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      for (let c = 0; c < ch; c++) {
        let s = 0;
        for (let i = -r; i <= r; i++) s += k[i + r] * tmp[(clamp(y + i, h) * w + x) * ch + c];
        out[(y * w + x) * ch + c] = s;
      }
    }
  }
  return out;
}

const luma = (r, g, b) => 0.299 * r + 0.587 * g + 0.114 * b;

// The per-head picture features of one level (an interleaved RGB image of that level's size):
// returns NUM_HEADS arrays of H*W*PICTURE_CHANNELS.
function levelFeatures(rgb, w, h) {
  const n = w * h;
  const CH = PICTURE_CHANNELS;
  const colour = new Float32Array(n * CH);
  const lum = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const r = rgb[3 * i], g = rgb[3 * i + 1], b = rgb[3 * i + 2];
    lum[i] = luma(r, g, b);
    colour.set([r, g, b, lum[i]], i * CH);
  }
  const blurred = blur(colour, w, h, CH, 1.5);
  const edges = new Float32Array(n * CH);
  const L = (x, y) => lum[Math.min(h - 1, Math.max(0, y)) * w + Math.min(w - 1, Math.max(0, x))];
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      // Sobel, scaled so a hard black/white edge gives about 1.
      const gx = (L(x + 1, y - 1) + 2 * L(x + 1, y) + L(x + 1, y + 1) - L(x - 1, y - 1) - 2 * L(x - 1, y) - L(x - 1, y + 1)) / 8;
      const gy = (L(x - 1, y + 1) + 2 * L(x, y + 1) + L(x + 1, y + 1) - L(x - 1, y - 1) - 2 * L(x, y - 1) - L(x + 1, y - 1)) / 8;
      edges.set([gx, gy, Math.hypot(gx, gy), lum[y * w + x]], (y * w + x) * CH);
    }
  }
  return [colour, blurred, edges];
}

// Builds the value tensor (1, L, N_h, C_h) in BLNC order from the picture.
export function buildPyramid(rgb) {
  const { width: pw, height: ph } = PICTURE;
  const L = LEVELS.reduce((s, [h, w]) => s + h * w, 0);
  const value = new Float32Array(L * NUM_HEADS * CHANNELS);
  const levelStartIndex = [];
  let start = 0;
  for (const [h, w] of LEVELS) {
    levelStartIndex.push(start);
    const img = downsample(rgb, pw, ph, 3, pw / w);
    const feats = levelFeatures(img, w, h);
    for (let i = 0; i < h * w; i++) {
      // Normalised position of the pixel centre, where x = (j + 0.5) / W samples it.
      const x = ((i % w) + 0.5) / w, y = (Math.floor(i / w) + 0.5) / h;
      const position = [1, Math.cos(Math.PI * x), Math.sin(Math.PI * x), Math.cos(Math.PI * y), Math.sin(Math.PI * y)]
        .map((v) => POSITION_SCALE * v);
      for (let head = 0; head < NUM_HEADS; head++) {
        const at = ((start + i) * NUM_HEADS + head) * CHANNELS;
        for (let c = 0; c < PICTURE_CHANNELS; c++) value[at + c] = feats[head][i * PICTURE_CHANNELS + c];
        for (let c = 0; c < POSITION_CHANNELS.length; c++) value[at + PICTURE_CHANNELS + c] = position[c];
      }
    }
    start += h * w;
  }
  return { value, spatialShapes: LEVELS.map((s) => s.slice()), levelStartIndex, length: L };
}

// Starting point of gradient descent: each head's points on a small ring around a reference
// point (as a detector's offsets would be), equal weights, and a target across the picture.
export function initialState() {
  const loc = new Float32Array(NUM_HEADS * LEVELS.length * NUM_POINTS * 2);
  const weights = new Float32Array(NUM_HEADS * LEVELS.length * NUM_POINTS);
  const ref = [0.3, 0.34];
  for (let h = 0; h < NUM_HEADS; h++) {
    for (let l = 0; l < LEVELS.length; l++) {
      for (let p = 0; p < NUM_POINTS; p++) {
        const i = (h * LEVELS.length + l) * NUM_POINTS + p;
        const ang = (2 * Math.PI * (p + 0.5)) / NUM_POINTS + 0.7 * h + 0.35 * l;
        const rad = 0.085 + 0.03 * l;
        loc[2 * i] = ref[0] + rad * Math.cos(ang);
        loc[2 * i + 1] = ref[1] + rad * Math.sin(ang);
        weights[i] = 1 / (LEVELS.length * NUM_POINTS);
      }
    }
  }
  return { samplingLocations: loc, attentionWeights: weights, target: [0.72, 0.64] };
}

// Layout conversions between the page's canonical order (value BLNC, locations BQHLP2, B = N_q = 1)
// and the layout chosen on the page. The API takes either; the page keeps one copy.
export function valueToLayout(blnc, layout, L) {
  if (layout === 'BLNC') return blnc;
  const out = new Float32Array(blnc.length);
  for (let i = 0; i < L; i++) {
    for (let h = 0; h < NUM_HEADS; h++) {
      for (let c = 0; c < CHANNELS; c++) out[(h * L + i) * CHANNELS + c] = blnc[(i * NUM_HEADS + h) * CHANNELS + c];
    }
  }
  return out;
}
export function valueFromLayout(arr, layout, L) {
  if (layout === 'BLNC') return arr;
  const out = new Float32Array(arr.length);
  for (let i = 0; i < L; i++) {
    for (let h = 0; h < NUM_HEADS; h++) {
      for (let c = 0; c < CHANNELS; c++) out[(i * NUM_HEADS + h) * CHANNELS + c] = arr[(h * L + i) * CHANNELS + c];
    }
  }
  return out;
}
export function locationsToLayout(bqhlp2, layout) {
  if (layout === 'BQHLP2') return bqhlp2;
  const n = bqhlp2.length / 2, out = new Float32Array(bqhlp2.length);
  for (let i = 0; i < n; i++) { out[i] = bqhlp2[2 * i]; out[n + i] = bqhlp2[2 * i + 1]; }
  return out;
}
export function locationsFromLayout(arr, layout) {
  if (layout === 'BQHLP2') return arr;
  const n = arr.length / 2, out = new Float32Array(arr.length);
  for (let i = 0; i < n; i++) { out[2 * i] = arr[i]; out[2 * i + 1] = arr[n + i]; }
  return out;
}
export function valueShape(layout, L) {
  return layout === 'BLNC' ? [1, L, NUM_HEADS, CHANNELS] : [1, NUM_HEADS, L, CHANNELS];
}
export function locationsShape(layout) {
  const nl = LEVELS.length;
  return layout === 'BQHLP2' ? [1, 1, NUM_HEADS, nl, NUM_POINTS, 2] : [1, 2, 1, NUM_HEADS, nl, NUM_POINTS];
}
export const weightsShape = () => [1, 1, NUM_HEADS, LEVELS.length, NUM_POINTS];

// Bilinear sampling of one level at normalised (x, y), as SEMANTICS.md defines it: the four
// corner pixels with their weights. A corner outside the level has `inside: false` (zeros
// padding reads 0 there); border padding clamps the coordinate first. For display only: the
// page's numbers come from the operator.
export function bilinearCorners(x, y, h, w, { alignCorners = false, paddingMode = 'zeros' } = {}) {
  let u = alignCorners ? x * (w - 1) : x * w - 0.5;
  let v = alignCorners ? y * (h - 1) : y * h - 0.5;
  if (paddingMode === 'border') {
    u = Math.min(w - 1, Math.max(0, u));
    v = Math.min(h - 1, Math.max(0, v));
  }
  const x0 = Math.floor(u), y0 = Math.floor(v);
  const fx = u - x0, fy = v - y0;
  const corners = [];
  for (const [dy, dx, weight] of [[0, 0, (1 - fx) * (1 - fy)], [0, 1, fx * (1 - fy)], [1, 0, (1 - fx) * fy], [1, 1, fx * fy]]) {
    const col = x0 + dx, row = y0 + dy;
    corners.push({ row, col, weight, inside: col >= 0 && col < w && row >= 0 && row < h });
  }
  return { u, v, corners };
}
