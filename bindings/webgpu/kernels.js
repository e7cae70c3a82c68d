// The WGSL kernels of the WebGPU backend. Each mirrors src/kernel/*.h's operations in its order, so
// that a device doing IEEE float32 without contraction gives the wasm build's bits:
//   forward   one invocation per (batch, query, head, 4 channels): the taps of each group of
//             four points, corner by corner, point by point, summed per channel as the CPU does;
//             samples with an infinite weight added after, a * S (SEMANTICS.md); one NaN.
//   samples   (backward) one invocation per sample: its location and weight gradients (one
//             writer each) and a record per in-bounds corner (destination pixel, a * w_k),
//             counted per destination pixel with integer atomics.
//   scan      exclusive prefix sums of the counts: each pixel's segment of records.
//   place     each record into its pixel's segment (any order), as its slot in walk order, then
//   rank      (segments.js) each record to its place in that order, the CPU's (rank, point), and
//   gather    one invocation per (pixel, channel) sums its segment in that order: grad_value with
//             one writer per element and a fixed order, no float atomics.
//
// meta (a u32 storage buffer, written by backend.js):
//   [0] B [1] Q [2] H [3] C [4] NL [5] P [6] L [7] BLNC? [8] BQHLP2? [9] border? [10] half shift?
//   [11] offset of grad_attention_weights in the samples pass's output [12] bands [13] columns of
//   the backward walk's grid of cells (walks.h sample_grid)
//   then per level l at 16 + 16 l: H, W, start, narrow, scaleX, scaleY, lastX, lastY, sizeX,
//   sizeY (f32 bits), scaleIX, scaleIY, degenerateX, degenerateY, pixel stride, row stride

export const WORKGROUP = 64;
export const SCAN_BLOCK = 256;
export const CANONICAL_NAN = 0x7fc00000;

export const common = /* wgsl */ `
@group(0) @binding(0) var<storage, read> md: array<u32>;
@group(0) @binding(15) var<uniform> disp: vec4<u32>;   // invocations, invocations per grid row, first (batch, head) of a backward part

fn mf(i: u32) -> f32 { return bitcast<f32>(md[i]); }
// Bit tests: WGSL lets a compiler assume no NaN or Inf in comparisons.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
// A private variable, not a constant: WGSL refuses a NaN constant expression.
var<private> nan_bits: u32 = ${CANONICAL_NAN}u;
fn canon(x: f32) -> f32 { return select(x, bitcast<f32>(nan_bits), is_nan(x)); }
fn invocation(gid: vec3<u32>) -> u32 { return gid.x + gid.y * disp.y; }

// ---- 64-bit unsigned integers as (lo, hi), for the exact positions of wide levels ----
fn mul64(a: u32, b: u32) -> vec2<u32> {   // a < 2^24
  let al = a & 0xffffu; let ah = a >> 16u; let bl = b & 0xffffu; let bh = b >> 16u;
  var lo = al * bl; var hi = ah * bh;
  let m1 = ah * bl; let m2 = al * bh;
  var t = lo + (m1 << 16u); if (t < lo) { hi = hi + 1u; } lo = t; hi = hi + (m1 >> 16u);
  t = lo + (m2 << 16u); if (t < lo) { hi = hi + 1u; } lo = t; hi = hi + (m2 >> 16u);
  return vec2<u32>(lo, hi);
}
fn bitlen64(v: vec2<u32>) -> u32 {
  if (v.y != 0u) { return 64u - countLeadingZeros(v.y); }
  return 32u - countLeadingZeros(v.x);
}
fn shr64(v: vec2<u32>, k: u32) -> vec2<u32> {
  if (k == 0u) { return v; }
  if (k >= 32u) { return vec2<u32>(v.y >> (k - 32u), 0u); }
  return vec2<u32>((v.x >> k) | (v.y << (32u - k)), v.y >> k);
}
fn low64(k: u32) -> vec2<u32> {   // 2^k - 1, k <= 63
  if (k >= 32u) { return vec2<u32>(0xffffffffu, (1u << (k - 32u)) - 1u); }
  return vec2<u32>((1u << k) - 1u, 0u);
}
fn pow64(k: u32) -> vec2<u32> {   // 2^k, k <= 63
  if (k >= 32u) { return vec2<u32>(0u, 1u << (k - 32u)); }
  return vec2<u32>(1u << k, 0u);
}
fn and64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a & b; }
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x; return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}
fn ge64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.y > b.y || (a.y == b.y && a.x >= b.x); }
fn eq64(a: vec2<u32>, b: vec2<u32>) -> bool { return a.x == b.x && a.y == b.y; }
fn zero64(a: vec2<u32>) -> bool { return a.x == 0u && a.y == 0u; }

// F / 2^K rounded to float32 (to nearest, ties to even), F < 2^K <= 2^53: the CPU's
// (float)(pos - floor(pos)) of an exact double.
fn frac_f32(F: vec2<u32>, K: u32) -> f32 {
  if (zero64(F)) { return 0.0; }
  let n = bitlen64(F);
  var mant: u32; var e: i32;
  if (n <= 24u) {
    mant = F.x << (24u - n); e = -i32(K) - i32(24u - n);
  } else {
    let sh = n - 24u;
    mant = shr64(F, sh).x;
    let rest = and64(F, low64(sh)); let hv = pow64(sh - 1u);
    if ((ge64(rest, hv) && !eq64(rest, hv)) || (eq64(rest, hv) && (mant & 1u) == 1u)) { mant = mant + 1u; }
    e = i32(sh) - i32(K);
    if (mant == 0x1000000u) { mant = 0x800000u; e = e + 1; }
  }
  return bitcast<f32>((u32(e + 150) << 23u) | (mant & 0x7fffffu));
}

// v / 2^k rounded to nearest, ties to even (v < 2^53).
fn rne64(v: vec2<u32>, k: u32) -> vec2<u32> {
  if (k == 0u) { return v; }
  if (k >= 64u) { return vec2<u32>(0u, 0u); }
  let q = shr64(v, k);
  let rest = and64(v, low64(k)); let hv = pow64(k - 1u);
  if ((ge64(rest, hv) && !eq64(rest, hv)) || (eq64(rest, hv) && (q.x & 1u) == 1u)) { return add64(q, vec2<u32>(1u, 0u)); }
  return q;
}

// A * 2^E rounded to float32 (A < 2^53, E < 0); 0 where that is below float32's normal range.
fn scaled_f32(A: vec2<u32>, E: i32) -> f32 {
  let n = bitlen64(A);
  var mant: u32; var e: i32;
  if (n <= 24u) { mant = A.x << (24u - n); e = E - i32(24u - n); }
  else { mant = rne64(A, n - 24u).x; e = E + i32(n - 24u); if (mant == 0x1000000u) { mant = 0x800000u; e = e + 1; } }
  if (e + 150 < 1) { return 0.0; }
  return bitcast<f32>((u32(e + 150) << 23u) | (mant & 0x7fffffu));
}

struct Ax { ok: bool, i0: i32, frac: f32, gs: f32 }

// src/kernel/geometry.h axis4: float positions (sides up to 1024).
fn axis_narrow(coord: f32, scale: f32, shift: f32, last: f32, size: f32, degen: bool, border: bool) -> Ax {
  var pos: f32 = 0.0;
  if (!degen) { pos = coord * scale - shift; }
  var valid = !is_nan(coord);
  var gs = scale;
  if (border) {
    if (!(pos > 0.0 && pos < last)) { gs = 0.0; pos = select(last, 0.0, pos <= 0.0); }
  } else {
    valid = valid && pos >= -1.0 && pos < size;
  }
  if (!valid) { pos = 0.0; }
  var i = i32(pos);
  if (f32(i) > pos) { i = i - 1; }
  return Ax(valid, i, pos - f32(i), gs);
}

// src/kernel/geometry.h axis1: the CPU forms x * S - shift in double, exactly (a float times an integer
// below 2^29); here the same value as floor + F / 2^K in integers. Coordinates so small that the
// CPU's doubles round (exponent under -53) follow its roundings on their grids.
fn axis_wide(coord: f32, S: u32, size: u32, scale: f32, hs: bool, border: bool, degen: bool) -> Ax {
  var r = Ax(true, 0, 0.0, scale);
  let bits = bitcast<u32>(coord);
  if ((bits & 0x7fffffffu) > 0x7f800000u) { r.ok = false; return r; }
  let last = i32(size) - 1;
  var fl: i32 = 0; var F = vec2<u32>(0u, 0u); var K: u32 = 1u; var large: i32 = 0;
  var tiny = false; var tfrac: f32 = 0.0;
  if (!degen) {
    let neg = (bits >> 31u) != 0u;
    let ex = (bits >> 23u) & 0xffu;
    if (ex == 255u) {
      large = select(1, -1, neg);
    } else {
      var m = bits & 0x7fffffu; var E: i32 = -149;
      if (ex > 0u) { m = m | 0x800000u; E = i32(ex) - 150; }
      if (m != 0u) {
        let M = mul64(m, S);
        let n = i32(bitlen64(M));
        if (n + E > 31) {
          large = select(1, -1, neg);
        } else if (E >= 0) {
          let I = i32(M.x << u32(E)); fl = select(I, -I, neg);
        } else if (E < -53 && M.y < 0x100000u) {
          // |t| < 2^-1 (A = M < 2^52): the CPU's three roundings (x*S - 0.5 to double, pos - floor
          // to double, to float) on their grids, each to nearest, ties to even.
          tiny = true;
          let twoM24 = 1.0 / 16777216.0;
          if (hs) {
            fl = -1;
            if (!neg) {   // pos in [-1/2, -1/4): 1/2 + t on grids 2^-54, 2^-53, 2^-24
              tfrac = f32(0x800000u + rne64(rne64(rne64(M, u32(-54 - E)), 1u), 29u).x) * twoM24;
            } else {      // pos in (-1, -1/2]: 1/2 - |t| on grids 2^-53, 2^-25
              tfrac = 0.5 - f32(rne64(rne64(M, u32(-53 - E)), 28u).x) * (twoM24 * 0.5);
            }
          } else if (!neg) {   // pos = t, exact
            fl = 0; tfrac = scaled_f32(M, E); F = vec2<u32>(1u, 0u);
          } else {             // pos = t < 0: 1 - |t| on grids 2^-53, 2^-24
            fl = -1; tfrac = 1.0 - f32(rne64(rne64(M, u32(-53 - E)), 29u).x) * twoM24;
          }
        } else if (E < -53) {   // sides past 2^28 only: float arithmetic
          tiny = true;
          let p = coord * scale - select(0.0, 0.5, hs);
          let f = floor(p);
          fl = i32(f); tfrac = p - f;
          if (tfrac != 0.0) { F = vec2<u32>(1u, 0u); }
        } else {
          K = u32(-E);
          let I = i32(shr64(M, K).x);
          let Fr = and64(M, low64(K));
          if (!neg) { fl = I; F = Fr; }
          else if (zero64(Fr)) { fl = -I; }
          else { fl = -I - 1; F = sub64(pow64(K), Fr); }
        }
      }
    }
    if (hs && large == 0 && !tiny) {
      let hv = pow64(K - 1u);
      if (ge64(F, hv)) { F = sub64(F, hv); } else { fl = fl - 1; F = add64(F, hv); }
    }
  }
  let positive = large > 0 || (large == 0 && (fl > 0 || (fl == 0 && !zero64(F))));
  if (border) {
    if (!(large == 0 && positive && fl < last)) {
      r.gs = 0.0; fl = select(0, last, positive); F = vec2<u32>(0u, 0u); tiny = false;
    }
  } else if (large != 0 || fl < -1 || fl >= i32(size)) {
    r.ok = false; return r;
  }
  r.i0 = fl;
  r.frac = select(frac_f32(F, K), tfrac, tiny);
  return r;
}

struct Pt { mask: u32, live: bool, x0: i32, y0: i32, off: i32, w: vec4<f32>, fx: f32, fy: f32, gsx: f32, gsy: f32 }

// The corners of one sample (src/kernel/geometry.h group_corners, one lane).
fn point(l: u32, x: f32, y: f32) -> Pt {
  let g = 16u + 16u * l;
  let Hl = md[g]; let Wl = md[g + 1u];
  let border = md[9] != 0u; let hs = md[10] != 0u;
  var ax: Ax; var ay: Ax;
  var pt: Pt;
  if (md[g + 3u] != 0u) {
    let shift = select(0.0, 0.5, hs);
    ax = axis_narrow(x, mf(g + 4u), shift, mf(g + 6u), mf(g + 8u), md[g + 12u] != 0u, border);
    ay = axis_narrow(y, mf(g + 5u), shift, mf(g + 7u), mf(g + 9u), md[g + 13u] != 0u, border);
  } else {
    ax = axis_wide(x, md[g + 10u], Wl, mf(g + 4u), hs, border, md[g + 12u] != 0u);
    ay = axis_wide(y, md[g + 11u], Hl, mf(g + 5u), hs, border, md[g + 13u] != 0u);
    if (!(ax.ok && ay.ok)) { ax.frac = 0.0; ay.frac = 0.0; ax.i0 = 0; ay.i0 = 0; }
  }
  let ok = ax.ok && ay.ok;
  let vx0 = ax.i0 > -1; let vx1 = ax.i0 + 1 < i32(Wl);
  let vy0 = ay.i0 > -1; let vy1 = ay.i0 + 1 < i32(Hl);
  var mask = select(0u, 1u, vx0 && vy0) | select(0u, 2u, vx1 && vy0) | select(0u, 4u, vx0 && vy1) | select(0u, 8u, vx1 && vy1);
  if (!ok) { mask = 0u; }
  pt.mask = mask; pt.live = ok; pt.x0 = ax.i0; pt.y0 = ay.i0;
  pt.off = ay.i0 * i32(md[g + 15u]) + ax.i0 * i32(md[g + 14u]);
  let fx = ax.frac; let fy = ay.frac;
  pt.fx = fx; pt.fy = fy; pt.gsx = ax.gs; pt.gsy = ay.gs;
  pt.w = vec4<f32>((1.0 - fy) * (1.0 - fx), (1.0 - fy) * fx, fy * (1.0 - fx), fy * fx);
  return pt;
}

fn loc_index(b: u32, q: u32, h: u32, l: u32, p: u32, xy: u32) -> u32 {
  let Q = md[1]; let H = md[2]; let NL = md[4]; let P = md[5];
  if (md[8] != 0u) { return ((((b * Q + q) * H + h) * NL + l) * P + p) * 2u + xy; }
  return ((b * 2u + xy) * Q + q) * (H * NL * P) + (h * NL + l) * P + p;
}
// Element index of channel 0 of pixel 0 of (b, h) in value (and grad_value).
fn value_base(b: u32, h: u32) -> u32 {
  let H = md[2]; let C = md[3]; let L = md[6];
  if (md[7] != 0u) { return b * L * H * C + h * C; }
  return (b * H + h) * L * C;
}
fn corner_delta(g: u32, k: u32) -> i32 {
  let px = i32(md[g + 14u]); let row = i32(md[g + 15u]);
  return select(0, px, (k & 1u) != 0u) + select(0, row, (k & 2u) != 0u);
}
`;

export const FORWARD = common + /* wgsl */ `
@group(0) @binding(1) var<storage, read> value: array<f32>;
@group(0) @binding(2) var<storage, read> locs: array<f32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

fn load4(i: u32, c0: u32, C: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  v.x = value[i];
  if (c0 + 1u < C) { v.y = value[i + 1u]; }
  if (c0 + 2u < C) { v.z = value[i + 2u]; }
  if (c0 + 3u < C) { v.w = value[i + 3u]; }
  return v;
}

struct Tap { mask: u32, off: i32, aw: vec4<f32> }

// Point p of (b, q, h, l) as taps: its inside corners and a * w_k; none past the last point, and
// none for an infinite weight (added after, below).
fn tap_point(b: u32, q: u32, h: u32, l: u32, p: u32, wbase: u32) -> Tap {
  if (p >= md[5]) { return Tap(0u, 0, vec4<f32>(0.0)); }
  let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
  let a = weights[wbase + l * md[5] + p];
  return Tap(select(pt.mask, 0u, is_inf(a)), pt.off, a * pt.w);
}

fn tap(acc: vec4<f32>, t: Tap, k: u32, base: i32, c0: u32, C: u32) -> vec4<f32> {
  if (((t.mask >> k) & 1u) == 0u) { return acc; }
  return acc + t.aw[k] * load4(u32(base + t.off), c0, C);
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = invocation(gid);
  if (idx >= disp.x) { return; }
  let Q = md[1]; let H = md[2]; let C = md[3]; let NL = md[4]; let P = md[5];
  let CG = (C + 3u) / 4u;
  let c0 = (idx % CG) * 4u; let bqh = idx / CG;
  let h = bqh % H; let q = (bqh / H) % Q; let b = bqh / (H * Q);
  let vbh = value_base(b, h);
  let wbase = bqh * NL * P;
  var acc = vec4<f32>(0.0);
  for (var l = 0u; l < NL; l = l + 1u) {
    let g = 16u + 16u * l;
    let vlev = i32(vbh + md[g + 2u] * md[g + 14u] + c0);
    for (var p0 = 0u; p0 < P; p0 = p0 + 4u) {
      // four points in registers (no arrays: private arrays indexed at run time spill to memory)
      let t0 = tap_point(b, q, h, l, p0, wbase); let t1 = tap_point(b, q, h, l, p0 + 1u, wbase);
      let t2 = tap_point(b, q, h, l, p0 + 2u, wbase); let t3 = tap_point(b, q, h, l, p0 + 3u, wbase);
      for (var k = 0u; k < 4u; k = k + 1u) {
        let base = vlev + corner_delta(g, k);
        acc = tap(acc, t0, k, base, c0, C); acc = tap(acc, t1, k, base, c0, C);
        acc = tap(acc, t2, k, base, c0, C); acc = tap(acc, t3, k, base, c0, C);
      }
    }
  }
  // Samples with an infinite weight: a * S, S over the inside corners (src/kernel/forward.h forward_infinite).
  for (var l = 0u; l < NL; l = l + 1u) {
    let g = 16u + 16u * l;
    let vlev = i32(vbh + md[g + 2u] * md[g + 14u] + c0);
    for (var p = 0u; p < P; p = p + 1u) {
      let a = weights[wbase + l * P + p];
      if (!is_inf(a)) { continue; }
      let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
      if (pt.mask == 0u) { continue; }
      var s = vec4<f32>(0.0); var seen = false;
      for (var k = 0u; k < 4u; k = k + 1u) {
        if (((pt.mask >> k) & 1u) != 0u) {
          let term = pt.w[k] * load4(u32(vlev + pt.off + corner_delta(g, k)), c0, C);
          if (seen) { s = s + term; } else { s = term; }
          seen = true;
        }
      }
      acc = acc + a * s;
    }
  }
  let o = bqh * C + c0;
  out[o] = canon(acc.x);
  if (c0 + 1u < C) { out[o + 1u] = canon(acc.y); }
  if (c0 + 2u < C) { out[o + 2u] = canon(acc.z); }
  if (c0 + 3u < C) { out[o + 3u] = canon(acc.w); }
}
`;

// The forward in two passes where the scratch fits (backend.js): the taps of every sample once
// (its inside corners as a mask, corner 00's offset and a * w_k), then the sums as FORWARD does
// them from those, in the same order: the same bits, without recomputing a sample's corners
// for every four channels.
export const FORWARD_TAPS = common + /* wgsl */ `
@group(0) @binding(2) var<storage, read> locs: array<f32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read_write> taps: array<vec4<u32>>;   // per sample: mask, offset; then a * w_k

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let s = invocation(gid);
  if (s >= disp.x) { return; }
  let Q = md[1]; let H = md[2]; let NL = md[4]; let P = md[5];
  let p = s % P; let l = (s / P) % NL; let bqh = s / (P * NL);
  let h = bqh % H; let q = (bqh / H) % Q; let b = bqh / (H * Q);
  let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
  let a = weights[s];
  taps[2u * s] = vec4<u32>(select(pt.mask, 0u, is_inf(a)), bitcast<u32>(pt.off), 0u, 0u);
  taps[2u * s + 1u] = bitcast<vec4<u32>>(a * pt.w);
}
`;

export const FORWARD_SUM = common + /* wgsl */ `
@group(0) @binding(1) var<storage, read> value: array<f32>;
@group(0) @binding(2) var<storage, read> locs: array<f32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> taps: array<vec4<u32>>;

fn load4(i: u32, c0: u32, C: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  v.x = value[i];
  if (c0 + 1u < C) { v.y = value[i + 1u]; }
  if (c0 + 2u < C) { v.z = value[i + 2u]; }
  if (c0 + 3u < C) { v.w = value[i + 3u]; }
  return v;
}

struct Tap { mask: u32, off: i32, aw: vec4<f32> }

fn tap_of(s: u32, p: u32) -> Tap {
  if (p >= md[5]) { return Tap(0u, 0, vec4<f32>(0.0)); }
  let t = taps[2u * s];
  return Tap(t.x, bitcast<i32>(t.y), bitcast<vec4<f32>>(taps[2u * s + 1u]));
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = invocation(gid);
  if (idx >= disp.x) { return; }
  let Q = md[1]; let H = md[2]; let C = md[3]; let NL = md[4]; let P = md[5];
  let CG = (C + 3u) / 4u;
  let c0 = (idx % CG) * 4u; let bqh = idx / CG;
  let h = bqh % H; let q = (bqh / H) % Q; let b = bqh / (H * Q);
  let vbh = value_base(b, h);
  let wbase = bqh * NL * P;
  var acc = vec4<f32>(0.0);
  for (var l = 0u; l < NL; l = l + 1u) {
    let g = 16u + 16u * l;
    let vlev = i32(vbh + md[g + 2u] * md[g + 14u] + c0);
    for (var p0 = 0u; p0 < P; p0 = p0 + 4u) {
      let s0 = wbase + l * P + p0;
      let t0 = tap_of(s0, p0); let t1 = tap_of(s0 + 1u, p0 + 1u);
      let t2 = tap_of(s0 + 2u, p0 + 2u); let t3 = tap_of(s0 + 3u, p0 + 3u);
      let px = i32(md[g + 14u]); let row = i32(md[g + 15u]);
      // corner by corner, point by point; written out (a vector indexed at run time is slow)
${[0, 1, 2, 3].map((k) => `      {
        let base = vlev${['', ' + px', ' + row', ' + row + px'][k]};
${[0, 1, 2, 3].map((i) => `        if (((t${i}.mask >> ${k}u) & 1u) != 0u) { acc = acc + t${i}.aw.${'xyzw'[k]} * load4(u32(base + t${i}.off), c0, C); }`).join('\n')}
      }`).join('\n')}
    }
  }
  // Samples with an infinite weight: a * S (src/kernel/forward.h forward_infinite); rare, recomputed.
  for (var l = 0u; l < NL; l = l + 1u) {
    let g = 16u + 16u * l;
    let vlev = i32(vbh + md[g + 2u] * md[g + 14u] + c0);
    for (var p = 0u; p < P; p = p + 1u) {
      let a = weights[wbase + l * P + p];
      if (!is_inf(a)) { continue; }
      let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
      if (pt.mask == 0u) { continue; }
      var s = vec4<f32>(0.0); var seen = false;
      for (var k = 0u; k < 4u; k = k + 1u) {
        if (((pt.mask >> k) & 1u) != 0u) {
          let term = pt.w[k] * load4(u32(vlev + pt.off + corner_delta(g, k)), c0, C);
          if (seen) { s = s + term; } else { s = term; }
          seen = true;
        }
      }
      acc = acc + a * s;
    }
  }
  let o = bqh * C + c0;
  out[o] = canon(acc.x);
  if (c0 + 1u < C) { out[o + 1u] = canon(acc.y); }
  if (c0 + 2u < C) { out[o + 2u] = canon(acc.z); }
  if (c0 + 3u < C) { out[o + 3u] = canon(acc.w); }
}
`;

export const SAMPLES = common + /* wgsl */ `
@group(0) @binding(1) var<storage, read> value: array<f32>;
@group(0) @binding(2) var<storage, read> locs: array<f32>;
@group(0) @binding(3) var<storage, read> weights: array<f32>;
@group(0) @binding(4) var<storage, read> gout: array<f32>;
@group(0) @binding(5) var<storage, read_write> grads: array<f32>;   // grad locations, then grad weights
@group(0) @binding(6) var<storage, read_write> recs: array<vec2<u32>>;   // per (sample, corner): pixel, a * w_k
@group(0) @binding(7) var<storage, read_write> counts: array<atomic<u32>>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  // This dispatch's samples: those of (batch, head) pairs disp.z, disp.z + 1, ..., each pair's
  // queries, levels and points in order (local index r; s is the sample's index in the tensors).
  let r = invocation(gid);
  if (r >= disp.x) { return; }
  let Q = md[1]; let H = md[2]; let C = md[3]; let NL = md[4]; let P = md[5]; let L = md[6];
  let p = r % P; let l = (r / P) % NL; let q = (r / (P * NL)) % Q; let bhl = r / (P * NL * Q);
  let bh = disp.z + bhl; let h = bh % H; let b = bh / H;
  let bqh = (b * Q + q) * H + h;
  let s = (bqh * NL + l) * P + p;
  let g = 16u + 16u * l;
  let lx = loc_index(b, q, h, l, p, 0u); let ly = loc_index(b, q, h, l, p, 1u);
  let pt = point(l, locs[lx], locs[ly]);
  let a = weights[s];
  let aw = a * pt.w;
  let go = bqh * C;
  let vlev = i32(value_base(b, h) + md[g + 2u] * md[g + 14u]);
  let CB = C & ~3u;
  var d = vec4<f32>(0.0);
  for (var k = 0u; k < 4u; k = k + 1u) {
    if (((pt.mask >> k) & 1u) == 0u) { continue; }
    let v0 = u32(vlev + pt.off + corner_delta(g, k));
    var acc = vec4<f32>(0.0);
    for (var c = 0u; c < CB; c = c + 4u) {
      let gc = vec4<f32>(gout[go + c], gout[go + c + 1u], gout[go + c + 2u], gout[go + c + 3u]);
      let vc = vec4<f32>(value[v0 + c], value[v0 + c + 1u], value[v0 + c + 2u], value[v0 + c + 3u]);
      acc = acc + gc * vc;
    }
    var dk = (acc.x + acc.y) + (acc.z + acc.w);
    for (var c = CB; c < C; c = c + 1u) { dk = dk + gout[go + c] * value[v0 + c]; }
    d[k] = dk;
  }
  let w = pt.w; let fx = pt.fx; let fy = pt.fy;
  var ga = ((w.x * d.x + w.y * d.y) + w.z * d.z) + w.w * d.w;
  var gx = (a * ((1.0 - fy) * (d.y - d.x) + fy * (d.w - d.z))) * pt.gsx;
  var gy = (a * ((1.0 - fx) * (d.z - d.x) + fx * (d.w - d.y))) * pt.gsy;
  if (!pt.live) { ga = 0.0; gx = 0.0; gy = 0.0; }
  grads[lx] = canon(gx);
  grads[ly] = canon(gy);
  grads[md[11] + s] = canon(ga);
  let Wl = md[g + 1u];
  let pix0 = bhl * L + md[g + 2u];
  for (var k = 0u; k < 4u; k = k + 1u) {
    var rec = vec2<u32>(0xffffffffu, 0u);
    if (((pt.mask >> k) & 1u) != 0u) {
      let dest = pix0 + u32(pt.y0 + i32(k >> 1u)) * Wl + u32(pt.x0 + i32(k & 1u));
      rec = vec2<u32>(dest, bitcast<u32>(aw[k]));
      atomicAdd(&counts[dest], 1u);
    }
    recs[r * 4u + k] = rec;
  }
}
`;

// Exclusive prefix sums of blocks of SCAN_BLOCK values; each block's total to sums.
export const SCAN = /* wgsl */ `
@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<storage, read_write> sums: array<u32>;
@group(0) @binding(15) var<uniform> disp: vec4<u32>;   // values, workgroups per grid row
var<workgroup> tmp: array<u32, ${SCAN_BLOCK}>;

@compute @workgroup_size(${SCAN_BLOCK})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let block = wid.x + wid.y * disp.y;
  let i = block * ${SCAN_BLOCK}u + li;
  var v = 0u;
  if (i < disp.x) { v = src[i]; }
  tmp[li] = v;
  workgroupBarrier();
  for (var off = 1u; off < ${SCAN_BLOCK}u; off = off * 2u) {
    var add = 0u;
    if (li >= off) { add = tmp[li - off]; }
    workgroupBarrier();
    tmp[li] = tmp[li] + add;
    workgroupBarrier();
  }
  if (i < disp.x) { dst[i] = tmp[li] - v; }
  if (li == ${SCAN_BLOCK - 1}u) { sums[block] = tmp[li]; }
}
`;

export const SCAN_ADD = /* wgsl */ `
@group(0) @binding(0) var<storage, read> sums: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(15) var<uniform> disp: vec4<u32>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x + gid.y * disp.y;
  if (i >= disp.x) { return; }
  dst[i] = dst[i] + sums[i / ${SCAN_BLOCK}u];
}
`;

// Each record into its pixel's segment, at any free place (integer atomics), as its walk slot:
// its slot with the query's index replaced by the query's rank in the CPU walk (orderPlace), so
// that walk slots ascend in the order the CPU sums a pixel's terms (rank, point).
export const PLACE = common + /* wgsl */ `
@group(0) @binding(1) var<storage, read> recs: array<vec2<u32>>;
@group(0) @binding(2) var<storage, read> offsets: array<u32>;
@group(0) @binding(3) var<storage, read_write> cursors: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> placed: array<u32>;
@group(0) @binding(5) var<storage, read> ranks: array<u32>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let slot = invocation(gid);
  if (slot >= disp.x) { return; }
  let dest = recs[slot].x;
  if (dest == 0xffffffffu) { return; }
  let Q = md[1]; let H = md[2]; let NL = md[4]; let P = md[5];
  let r = slot / 4u;   // the samples pass's local index
  let q = (r / (P * NL)) % Q; let b = (disp.z + r / (P * NL * Q)) / H;
  let rank = ranks[b * Q + q];
  placed[offsets[dest] + atomicAdd(&cursors[dest], 1u)] = slot + 4u * P * NL * rank - 4u * P * NL * q;
}
`;

// What the device does with a * b + c and with subnormals (read at run time: nothing folds).
export const PROBE = /* wgsl */ `
@group(0) @binding(0) var<storage, read_write> io: array<f32>;
@compute @workgroup_size(1)
fn main() {
  io[4] = io[0] * io[1] + io[2];
  io[5] = io[3] * 1.0;
  io[6] = io[3] + io[3];
  io[7] = io[0] * io[3];
}
`;
