// Where a sample falls (src/kernel/geometry.h): its position on each axis, exactly as the CPU
// forms it (float arithmetic for narrow levels, integers standing in for the CPU's doubles for
// wide ones), and its inside corners and bilinear weights. The `narrow` variant (every level at
// most FLOAT_SIDE wide: plan.js variantOf) leaves the wide levels' integer code out.

import { variantCode } from './problem.js';

const WIDE = /* wgsl */ `
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

// src/kernel/geometry.h axis1: the CPU forms x * S - shift in double, exactly (a float times an integer
// below 2^29); here the same value as floor + F / 2^K in integers. Coordinates so small that the
// CPU's doubles round (exponent under -53) follow its roundings on their grids.
fn axis_wide(coord: f32, S: u32, size: u32, scale: f32, hs: bool, padding: u32, degen: bool) -> Ax {
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
              tfrac = rounded(f32(0x800000u + rne64(rne64(rne64(M, u32(-54 - E)), 1u), 29u).x) * twoM24);
            } else {      // pos in (-1, -1/2]: 1/2 - |t| on grids 2^-53, 2^-25
              tfrac = 0.5 - rounded(f32(rne64(rne64(M, u32(-53 - E)), 28u).x) * (twoM24 * 0.5));
            }
          } else if (!neg) {   // pos = t, exact
            fl = 0; tfrac = scaled_f32(M, E); F = vec2<u32>(1u, 0u);
          } else {             // pos = t < 0: 1 - |t| on grids 2^-53, 2^-24
            fl = -1; tfrac = 1.0 - rounded(f32(rne64(rne64(M, u32(-53 - E)), 29u).x) * twoM24);
          }
        } else if (E < -53) {   // sides past 2^28 only: float arithmetic
          tiny = true;
          let p = rounded(coord * scale) - select(0.0, 0.5, hs);
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
  if (padding == PADDING_BORDER) {
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
`;

const NARROW = /* wgsl */ `
struct Ax { ok: bool, i0: i32, frac: f32, gs: f32 }

// src/kernel/geometry.h axis4: float positions (sides up to 1024); padding: the problem's mode
// (PADDING_*, kernels/problem.js).
fn axis_narrow(coord: f32, scale: f32, shift: f32, last: f32, size: f32, degen: bool, padding: u32) -> Ax {
  var pos: f32 = 0.0;
  if (!degen) { pos = rounded(coord * scale) - shift; }
  var valid = !is_nan(coord);
  var gs = scale;
  if (padding == PADDING_BORDER) {
    if (!(pos > 0.0 && pos < last)) { gs = 0.0; pos = select(last, 0.0, pos <= 0.0); }
  } else {
    valid = valid && pos >= -1.0 && pos < size;
  }
  if (!valid) { pos = 0.0; }
  var i = i32(pos);
  if (f32(i) > pos) { i = i - 1; }
  return Ax(valid, i, pos - f32(i), gs);
}
`;

const NARROW_AXES = /* wgsl */ `
    let shift = select(0.0, 0.5, hs);
    ax = axis_narrow(x, (*lv).scale_x, shift, (*lv).last_x, (*lv).size_x, (*lv).degen_x != 0u, padding);
    ay = axis_narrow(y, (*lv).scale_y, shift, (*lv).last_y, (*lv).size_y, (*lv).degen_y != 0u, padding);`;

// The corners of one sample (src/kernel/geometry.h group_corners, one lane).
const point = (narrow) => /* wgsl */ `
struct Pt { mask: u32, live: bool, x0: i32, y0: i32, off: i32, w: vec4<f32>, fx: f32, fy: f32, gsx: f32, gsy: f32 }

fn point(l: u32, x: f32, y: f32) -> Pt {
  let lv = &pr.level[l];   // a pointer: a copy would load every field
  let padding = pr.padding; let hs = pr.half_shift != 0u;
  var ax: Ax; var ay: Ax;
  var pt: Pt;
${narrow ? `${NARROW_AXES}
` : `  if ((*lv).narrow != 0u) {
${NARROW_AXES}
  } else {
    ax = axis_wide(x, (*lv).iscale_x, (*lv).w, (*lv).scale_x, hs, padding, (*lv).degen_x != 0u);
    ay = axis_wide(y, (*lv).iscale_y, (*lv).h, (*lv).scale_y, hs, padding, (*lv).degen_y != 0u);
    if (!(ax.ok && ay.ok)) { ax.frac = 0.0; ay.frac = 0.0; ax.i0 = 0; ay.i0 = 0; }
  }
`}  let ok = ax.ok && ay.ok;
  let vx0 = ax.i0 > -1; let vx1 = ax.i0 + 1 < i32((*lv).w);
  let vy0 = ay.i0 > -1; let vy1 = ay.i0 + 1 < i32((*lv).h);
  var mask = select(0u, 1u, vx0 && vy0) | select(0u, 2u, vx1 && vy0) | select(0u, 4u, vx0 && vy1) | select(0u, 8u, vx1 && vy1);
  if (!ok) { mask = 0u; }
  pt.mask = mask; pt.live = ok; pt.x0 = ax.i0; pt.y0 = ay.i0;
  pt.off = ay.i0 * i32((*lv).row) + ax.i0 * i32((*lv).px);
  let fx = ax.frac; let fy = ay.frac;
  pt.fx = fx; pt.fy = fy; pt.gsx = ax.gs; pt.gsy = ay.gs;
  pt.w = vec4<f32>((1.0 - fy) * (1.0 - fx), (1.0 - fy) * fx, fy * (1.0 - fx), fy * fx);
  return pt;
}
`;

export const GEOMETRY = variantCode(['narrow'], ({ narrow = false }) => `${narrow ? '' : WIDE}${NARROW}${point(narrow)}`);
