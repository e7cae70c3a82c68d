// The bounded float64 reference of `msda crosscheck --expect` (bindings/cli/crosscheck.js reports):
// someone else's outputs ("yours") against the float64 reference of SEMANTICS.md ("ours"),
// element by element, each with its own error bound computed alongside the reference, named by coordinates.
//
// The bound for one element whose reference is the sum of terms t_k (a * w_corner * v for an
// output channel, and likewise for each gradient) is
//
//     |yours - ours| <= 4*u*M + 2*(n + 4)*2^-24*M + P + (n + 4)*tiny
//
//   u     the unit roundoff of --dtype: 2^-24 float32, 2^-11 float16, 2^-8 bfloat16
//   M     sum |t_k|: the sum of absolute contributions (rounding to the dtype costs at most
//         u*|result| <= u*M, and a few intermediate roundings in the dtype as much again each)
//   n     the number of terms (a float32 accumulation of them errs by at most about n*2^-24*M;
//         twice that leaves room for the roundings inside each term)
//   P     how far the element moves when each pixel position moves by float32 rounding,
//         4*2^-24*(|position| + 1) pixels, in x and in y (evaluated, so that the jump of a
//         location gradient where a position crosses a pixel centre is covered)
//   tiny  half the dtype's smallest subnormal (results that underflow)
//
// This is the error of a kernel that reads tensors stored in the dtype, computes in float32
// or wider, and rounds once or a few times to the dtype: what a correct float16 / bfloat16
// kernel does. Pixel positions computed in half precision err by up to u*W pixels, which on a
// 100-pixel level is as large as the bugs this check exists to find: compute them in float32.
// With --rtol R --atol A the rule is |yours - ours| <= A + R*|ours| instead. NaN agrees with
// NaN, an infinity with the same infinity.

import { pad, pixel } from '../core/geometry.js';

export const UNIT_ROUNDOFF = Object.freeze({ float32: 2 ** -24, float16: 2 ** -11, bfloat16: 2 ** -8 });
const TINY = Object.freeze({ float32: 2 ** -150, float16: 2 ** -25, bfloat16: 2 ** -134 });
const U32 = 2 ** -24;

export const OUTPUT_NAMES = ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights'];

// The problem's dimensions and element offsets from the arguments the CLI derived.
function dims(args) {
  const blnc = args.valueLayout === 'BLNC', bq = args.samplingLocationsLayout === 'BQHLP2';
  const vs = args.value.shape, ws = args.attentionWeights.shape;
  const [B, L, H, C] = [vs[0], vs[blnc ? 1 : 2], vs[blnc ? 2 : 1], vs[3]];
  const [, Q, , NL, P] = ws;
  const starts = [];
  let total = 0;
  for (const [h, w] of args.spatialShapes) { starts.push(total); total += h * w; }
  return {
    B, L, H, C, Q, NL, P, blnc, bq, shapes: args.spatialShapes, starts,
    valueAt: blnc ? (b, pix, h, c) => ((b * L + pix) * H + h) * C + c : (b, pix, h, c) => ((b * H + h) * L + pix) * C + c,
    locAt: bq ? (b, q, h, l, p, xy) => (((((b * Q + q) * H + h) * NL + l) * P + p) * 2 + xy)
      : (b, q, h, l, p, xy) => (((((b * 2 + xy) * Q + q) * H + h) * NL + l) * P + p),
    weightAt: (b, q, h, l, p) => ((((b * Q + q) * H + h) * NL + l) * P + p),
  };
}


/**
 * The float64 reference of the outputs asked for (forward: output; backward: the three
 * gradients) and, per element, M (sum of |contributions|), n (their count) and P (see above).
 * Returns { name: { ref, M, n, P } } with Float64Arrays in each tensor's own layout.
 */
export function referenceWithBounds(args, { forward = true, backward = true } = {}) {
  const d = dims(args);
  const { B, H, C, Q, NL, P, shapes, starts, valueAt, locAt, weightAt } = d;
  const value = args.value.data, loc = args.samplingLocations.data, wts = args.attentionWeights.data;
  const G = backward ? args.gradOutput.data : null;
  const make = (size) => ({ ref: new Float64Array(size), M: new Float64Array(size), n: new Float64Array(size), P: new Float64Array(size) });
  const out = {};
  if (forward) out.output = make(B * Q * H * C);
  if (backward) {
    out.grad_value = make(value.length);
    out.grad_sampling_locations = make(loc.length);
    out.grad_attention_weights = make(wts.length);
  }
  const { alignCorners, paddingMode } = args;
  // The in-bounds corners of a sample at pixel position (px, py) of level l: [pixel, weight]
  // pairs, and the padded axes; null when it contributes nothing.
  const geometry = (l, px, py, sx, sy) => {
    const [Hl, Wl] = shapes[l];
    const ax = pad(px, Wl, paddingMode, sx), ay = ax && pad(py, Hl, paddingMode, sy);
    if (!ax || !ay) return null;
    const { i0: x0, frac: fx } = ax, { i0: y0, frac: fy } = ay;
    const corners = [];
    const add = (i, j, w) => { if (i >= 0 && i < Hl && j >= 0 && j < Wl) corners.push([starts[l] + i * Wl + j, w]); };
    add(y0, x0, (1 - fy) * (1 - fx));
    add(y0, x0 + 1, (1 - fy) * fx);
    add(y0 + 1, x0, fy * (1 - fx));
    add(y0 + 1, x0 + 1, fy * fx);
    return { ax, ay, corners, fx, fy, x0, y0 };
  };
  // S (C channels) of a geometry, into s; |S| terms into abs when given.
  const sample = (b, h, g, s, abs) => {
    s.fill(0);
    if (abs) abs.fill(0);
    if (!g) return;
    for (const [pix, w] of g.corners) {
      for (let c = 0; c < C; c++) {
        const t = w * value[valueAt(b, pix, h, c)];
        s[c] += t;
        if (abs) abs[c] += Math.abs(t);
      }
    }
  };
  // <G, dS/dfx> * su and <G, dS/dfy> * sv of a geometry (SEMANTICS' location gradients over a).
  const locGrads = (b, h, l, g, base) => {
    if (!g) return [0, 0];
    const [Hl, Wl] = shapes[l];
    const { fx, fy, x0, y0 } = g;
    let gx = 0, gy = 0;
    for (let c = 0; c < C; c++) {
      const V = (i, j) => (i < 0 || i >= Hl || j < 0 || j >= Wl ? 0 : value[valueAt(b, starts[l] + i * Wl + j, h, c)]);
      const v00 = V(y0, x0), v01 = V(y0, x0 + 1), v10 = V(y0 + 1, x0), v11 = V(y0 + 1, x0 + 1);
      gx += G[base + c] * ((1 - fy) * (v01 - v00) + fy * (v11 - v10));
      gy += G[base + c] * ((1 - fx) * (v10 - v00) + fx * (v11 - v01));
    }
    return [gx * g.ax.gradScale, gy * g.ay.gradScale];
  };
  const locAbs = (b, h, l, g, base) => {
    if (!g) return [0, 0];
    const [Hl, Wl] = shapes[l];
    const { fx, fy, x0, y0 } = g;
    let mx = 0, my = 0;
    for (let c = 0; c < C; c++) {
      const V = (i, j) => (i < 0 || i >= Hl || j < 0 || j >= Wl ? 0 : Math.abs(value[valueAt(b, starts[l] + i * Wl + j, h, c)]));
      const v00 = V(y0, x0), v01 = V(y0, x0 + 1), v10 = V(y0 + 1, x0), v11 = V(y0 + 1, x0 + 1), ag = Math.abs(G[base + c]);
      mx += ag * ((1 - fy) * (v01 + v00) + fy * (v11 + v10));
      my += ag * ((1 - fx) * (v10 + v00) + fx * (v11 + v01));
    }
    return [mx * Math.abs(g.ax.gradScale), my * Math.abs(g.ay.gradScale)];
  };
  const MOVES = [[-1, -1], [-1, 0], [-1, 1], [0, -1], [0, 1], [1, -1], [1, 0], [1, 1]];
  const S = new Float64Array(C), absS = new Float64Array(C), S2 = new Float64Array(C), moved = new Float64Array(C);
  for (let b = 0; b < B; b++) for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) {
    const base = (b * Q + q) * H * C + h * C;
    for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
      const [Hl, Wl] = shapes[l];
      const wi = weightAt(b, q, h, l, p), lx = locAt(b, q, h, l, p, 0), ly = locAt(b, q, h, l, p, 1);
      const a = wts[wi];
      const X = pixel(loc[lx], Wl, alignCorners), Y = pixel(loc[ly], Hl, alignCorners);
      // float32 rounding of the positions, in pixels: the sample as it is and moved by it
      const ex = 4 * U32 * (Math.abs(X.pos) + 1), ey = 4 * U32 * (Math.abs(Y.pos) + 1);
      const g0 = geometry(l, X.pos, Y.pos, X.scale, Y.scale);
      const gs = Number.isFinite(ex) && Number.isFinite(ey)
        ? MOVES.map(([sx, sy]) => geometry(l, X.pos + sx * ex, Y.pos + sy * ey, X.scale, Y.scale)) : [];
      if (!g0 && gs.every((g) => !g)) continue;
      sample(b, h, g0, S, absS);
      moved.fill(0); // max over moves of |S' - S| per channel
      let movedG = 0; // max over moves of |<G, S' - S>|
      for (const g of gs) {
        sample(b, h, g, S2);
        let dot = 0;
        for (let c = 0; c < C; c++) {
          const dS = S2[c] - S[c];
          moved[c] = Math.max(moved[c], Math.abs(dS));
          if (backward) dot += G[base + c] * dS;
        }
        movedG = Math.max(movedG, Math.abs(dot));
      }
      // A sample that contributes nothing (g0 null) adds only to P: the moved positions may reach in.
      if (forward) {
        const o = out.output;
        for (let c = 0; c < C; c++) {
          if (g0) {
            o.ref[base + c] += a * S[c];
            o.M[base + c] += Math.abs(a) * absS[c];
            o.n[base + c] += 4;
          }
          o.P[base + c] += Math.abs(a) * moved[c];
        }
      }
      if (!backward) continue;
      const gw = out.grad_attention_weights, gl = out.grad_sampling_locations, gv = out.grad_value;
      let gS = 0, mS = 0;
      for (let c = 0; c < C; c++) {
        gS += G[base + c] * S[c];
        mS += Math.abs(G[base + c]) * absS[c];
      }
      if (g0) {
        gw.ref[wi] = gS;
        gw.M[wi] = mS;
      }
      gw.n[wi] = 4 * C;
      gw.P[wi] = movedG;
      const [gx, gy] = locGrads(b, h, l, g0, base);
      let px = 0, py = 0;
      for (const g of gs) {
        const [qx, qy] = locGrads(b, h, l, g, base);
        px = Math.max(px, Math.abs(a * (qx - gx)));
        py = Math.max(py, Math.abs(a * (qy - gy)));
      }
      const [mx, my] = locAbs(b, h, l, g0, base);
      if (g0) {
        gl.ref[lx] = a * gx;
        gl.ref[ly] = a * gy;
        gl.M[lx] = Math.abs(a) * mx;
        gl.M[ly] = Math.abs(a) * my;
      }
      gl.P[lx] = px;
      gl.P[ly] = py;
      gl.n[lx] = gl.n[ly] = 4 * C;
      // grad_value: each corner's a*w*G, and how far its weight moves (a corner may appear or go)
      const weightOf = (g, pix) => {
        if (g) for (const [q2, w2] of g.corners) if (q2 === pix) return w2;
        return 0;
      };
      const pixels = [];
      for (const g of [g0, ...gs]) if (g) for (const [pix] of g.corners) if (!pixels.includes(pix)) pixels.push(pix);
      for (const pix of pixels) {
        const w = weightOf(g0, pix), corner = g0 !== null && g0.corners.some(([q2]) => q2 === pix);
        let dw = 0;
        for (const g of gs) dw = Math.max(dw, Math.abs(weightOf(g, pix) - w));
        for (let c = 0; c < C; c++) {
          const e = valueAt(b, pix, h, c);
          if (corner) {
            const t = a * w * G[base + c];
            gv.ref[e] += t;
            gv.M[e] += Math.abs(t);
            gv.n[e] += 1;
          }
          gv.P[e] += Math.abs(a * G[base + c]) * dw;
        }
      }
    }
  }
  return out;
}

/** The per-element bound of the rule above, for dtype (or null with rtol/atol given). */
export function boundOf(r, i, { dtype = 'float32', rtol = null, atol = null } = {}) {
  if (rtol !== null || atol !== null) return (atol ?? 0) + (rtol ?? 0) * Math.abs(r.ref[i]);
  const u = UNIT_ROUNDOFF[dtype], n = r.n[i] + 4;
  return 4 * u * r.M[i] + 2 * n * U32 * r.M[i] + r.P[i] + n * TINY[dtype];
}

/**
 * Whether element i has no bound to compare a difference with: ours is exactly 0 with nothing
 * contributing (the bound is then the underflow term alone), or the --rtol/--atol bound is 0.
 */
export function noBound(r, i, tol) {
  if (tol.rtol != null || tol.atol != null) return boundOf(r, i, tol) === 0;
  return r.M[i] === 0 && r.P[i] === 0;
}

/** Names of the coordinates of element i of output name, in its own layout. */
export function coordinates(name, i, args) {
  const d = dims(args);
  const { B, L, H, C, Q, NL, P, blnc, bq, shapes, starts } = d;
  const split = (index, sizes) => {
    const out = new Array(sizes.length);
    for (let k = sizes.length - 1; k >= 0; k--) { out[k] = index % sizes[k]; index = Math.floor(index / sizes[k]); }
    return out;
  };
  if (name === 'output') {
    const [b, q, h, c] = split(i, [B, Q, H, C]);
    return { b, q, h, c };
  }
  if (name === 'grad_attention_weights') {
    const [b, q, h, l, p] = split(i, [B, Q, H, NL, P]);
    return { b, q, h, l, p };
  }
  if (name === 'grad_sampling_locations') {
    if (bq) {
      const [b, q, h, l, p, xy] = split(i, [B, Q, H, NL, P, 2]);
      return { b, q, h, l, p, xy };
    }
    const [b, xy, q, h, l, p] = split(i, [B, 2, Q, H, NL, P]);
    return { b, xy, q, h, l, p };
  }
  const parts = blnc ? split(i, [B, L, H, C]) : split(i, [B, H, L, C]);
  const [b, pix, h, c] = blnc ? parts : [parts[0], parts[2], parts[1], parts[3]];
  let l = 0;
  while (l + 1 < starts.length && starts[l + 1] <= pix) l++;
  const y = Math.floor((pix - starts[l]) / shapes[l][1]), x = (pix - starts[l]) % shapes[l][1];
  return blnc ? { b, pix, l, y, x, h, c } : { b, h, pix, l, y, x, c };
}

export const formatCoordinates = (name, co) => `${name}[${Object.entries(co).map(([k, v]) => `${k}=${v}`).join(', ')}]`;

/**
 * Compares yours (Float32Array) with r (from referenceWithBounds) under tol; returns
 * { count, disagree, maxAbsDiff, maxRatio (the largest |diff| / bound over elements with a bound),
 * noBound (the elements that differ where noBound), perLevel (counts of disagreeing elements, or
 * null for output), perHead (likewise, by head), onlyThroughP (the elements within their bound
 * only through its P term: without it they would disagree; the JS CLI's report says so), worst: the disagreeing elements with the largest
 * |diff| (at most top), each { index, coordinates, yours, ours, diff, bound } }.
 */
export function compareWithBounds(name, yours, r, args, tol, top = 5) {
  const d = dims(args);
  const perLevel = name === 'output' ? null : new Array(d.NL).fill(0);
  const perHead = new Array(d.H).fill(0);
  let disagree = 0, maxAbsDiff = 0, maxRatio = 0, unbounded = 0, onlyThroughP = 0;
  const worst = []; // [|diff|, index] of disagreeing elements, at most `top`, largest first
  for (let i = 0; i < r.ref.length; i++) {
    const y = yours[i], o = r.ref[i];
    if (Number.isNaN(y) && Number.isNaN(o)) continue;
    if (y === o) continue;
    const diff = Math.abs(y - o);
    const bound = boundOf(r, i, tol);
    const absDiff = Number.isNaN(diff) ? Infinity : diff;
    maxAbsDiff = Math.max(maxAbsDiff, absDiff);
    if (noBound(r, i, tol)) unbounded++;
    else maxRatio = Math.max(maxRatio, bound > 0 ? absDiff / bound : Infinity);
    if (absDiff <= bound && absDiff > bound - r.P[i] && tol.rtol == null && tol.atol == null) onlyThroughP++;
    if (!(absDiff <= bound)) {
      disagree++;
      const co = coordinates(name, i, args);
      if (perLevel) perLevel[co.l]++;
      perHead[co.h]++;
      if (top > 0 && (worst.length < top || absDiff > worst[worst.length - 1][0])) {
        worst.push([absDiff, i]);
        worst.sort((p, q2) => q2[0] - p[0] || p[1] - q2[1]);
        if (worst.length > top) worst.pop();
      }
    }
  }
  return {
    count: r.ref.length, disagree, maxAbsDiff, maxRatio, noBound: unbounded, perLevel, perHead, onlyThroughP,
    worst: worst.map(([, i]) => ({
      index: i, coordinates: coordinates(name, i, args), yours: yours[i], ours: r.ref[i],
      diff: Math.abs(yours[i] - r.ref[i]), bound: boundOf(r, i, tol),
    })),
  };
}
