// The forward (src/kernel/forward.h): one invocation per (batch, query, head, 4 channels) sums the
// taps of each group of four points, corner by corner, point by point, per channel as the CPU
// does; samples with an infinite weight are added after, a * S (SEMANTICS.md); one NaN. Where
// the scratch fits (backend.js), forwardTaps first writes every sample's taps once (its inside
// corners as a mask, corner 00's offset and a * w_k) and forwardSum sums those in the same order:
// the same bits, without recomputing a sample's corners for every four channels.

import { GEOMETRY } from './geometry.js';
import { WORKGROUP, program } from './problem.js';

const INPUTS = { value: 'read array<f32>', locs: 'read array<f32>', weights: 'read array<f32>', out: 'read_write array<f32>' };

// What both forms share: value loads, taps, the infinite weights' terms, the output's store.
const SUMS = /* wgsl */ `
fn load4(i: u32, c0: u32, C: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  v.x = value[i];
  if (c0 + 1u < C) { v.y = value[i + 1u]; }
  if (c0 + 2u < C) { v.z = value[i + 2u]; }
  if (c0 + 3u < C) { v.w = value[i + 3u]; }
  return v;
}

struct Tap { mask: u32, off: i32, aw: vec4<f32>, inf: u32 }   // inf: 1 for an infinite weight

// Samples with an infinite weight: a * S, S over the inside corners (src/kernel/forward.h
// forward_infinite); rare, recomputed, and only where a tap said there is one.
fn add_infinite(acc0: vec4<f32>, b: u32, q: u32, h: u32, vbh: u32, wbase: u32, c0: u32) -> vec4<f32> {
  let NL = pr.num_levels; let P = pr.points; let C = pr.channels;
  var acc = acc0;
  for (var l = 0u; l < NL; l = l + 1u) {
    let vlev = i32(vbh + pr.level[l].start * pr.level[l].px + c0);
    for (var p = 0u; p < P; p = p + 1u) {
      let a = weights[wbase + l * P + p];
      if (!is_inf(a)) { continue; }
      let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
      if (pt.mask == 0u) { continue; }
      var s = vec4<f32>(0.0); var seen = false;
      for (var k = 0u; k < 4u; k = k + 1u) {
        if (((pt.mask >> k) & 1u) != 0u) {
          let term = pt.w[k] * load4(u32(vlev + pt.off + corner_delta(l, k)), c0, C);
          if (seen) { s = s + term; } else { s = term; }
          seen = true;
        }
      }
      acc = acc + a * s;
    }
  }
  return acc;
}

fn store(o: u32, c0: u32, acc: vec4<f32>) {
  let C = pr.channels;
  out[o] = canon(acc.x);
  if (c0 + 1u < C) { out[o + 1u] = canon(acc.y); }
  if (c0 + 2u < C) { out[o + 2u] = canon(acc.z); }
  if (c0 + 3u < C) { out[o + 3u] = canon(acc.w); }
}
`;

// The invocation's (b, q, h, c0) and where its value rows and weights start.
const HEAD = /* wgsl */ `
  let idx = invocation(gid);
  if (idx >= disp.n) { return; }
  let Q = pr.queries; let H = pr.heads; let C = pr.channels; let NL = pr.num_levels; let P = pr.points;
  let CG = (C + 3u) / 4u;
  let c0 = (idx % CG) * 4u; let bqh = idx / CG;
  let h = bqh % H; let q = (bqh / H) % Q; let b = bqh / (H * Q);
  let vbh = value_base(b, h);
  let wbase = bqh * NL * P;
  var acc = vec4<f32>(0.0);
  var inf = 0u;`;

// One pass: each invocation forms the taps of its samples itself.
export const FORWARD = program('forward', { bindings: INPUTS, uses: [GEOMETRY, SUMS] }, /* wgsl */ `
// Point p of (b, q, h, l) as taps: its inside corners and a * w_k; none past the last point, and
// none for an infinite weight (added after).
fn tap_point(b: u32, q: u32, h: u32, l: u32, p: u32, wbase: u32) -> Tap {
  if (p >= pr.points) { return Tap(0u, 0, vec4<f32>(0.0), 0u); }
  let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
  let a = weights[wbase + l * pr.points + p];
  return Tap(select(pt.mask, 0u, is_inf(a)), pt.off, a * pt.w, select(0u, 1u, is_inf(a)));
}

fn tap(acc: vec4<f32>, t: Tap, k: u32, base: i32, c0: u32, C: u32) -> vec4<f32> {
  if (((t.mask >> k) & 1u) == 0u) { return acc; }
  return acc + t.aw[k] * load4(u32(base + t.off), c0, C);
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {${HEAD}
  for (var l = 0u; l < NL; l = l + 1u) {
    let vlev = i32(vbh + pr.level[l].start * pr.level[l].px + c0);
    for (var p0 = 0u; p0 < P; p0 = p0 + 4u) {
      // four points in registers (no arrays: private arrays indexed at run time spill to memory)
      let t0 = tap_point(b, q, h, l, p0, wbase); let t1 = tap_point(b, q, h, l, p0 + 1u, wbase);
      let t2 = tap_point(b, q, h, l, p0 + 2u, wbase); let t3 = tap_point(b, q, h, l, p0 + 3u, wbase);
      inf = inf | t0.inf | t1.inf | t2.inf | t3.inf;
      for (var k = 0u; k < 4u; k = k + 1u) {
        let base = vlev + corner_delta(l, k);
        acc = tap(acc, t0, k, base, c0, C); acc = tap(acc, t1, k, base, c0, C);
        acc = tap(acc, t2, k, base, c0, C); acc = tap(acc, t3, k, base, c0, C);
      }
    }
  }
  if (inf != 0u) { acc = add_infinite(acc, b, q, h, vbh, wbase, c0); }
  store(bqh * C + c0, c0, acc);
}
`);

export const FORWARD_TAPS = program('forwardTaps', {
  bindings: { locs: 'read array<f32>', weights: 'read array<f32>', taps: 'read_write array<vec4<u32>>' },   // per sample: mask, offset, infinite weight; then a * w_k
  uses: [GEOMETRY],
}, /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let s = invocation(gid);
  if (s >= disp.n) { return; }
  let Q = pr.queries; let H = pr.heads; let NL = pr.num_levels; let P = pr.points;
  let p = s % P; let l = (s / P) % NL; let bqh = s / (P * NL);
  let h = bqh % H; let q = (bqh / H) % Q; let b = bqh / (H * Q);
  let pt = point(l, locs[loc_index(b, q, h, l, p, 0u)], locs[loc_index(b, q, h, l, p, 1u)]);
  let a = weights[s];
  taps[2u * s] = vec4<u32>(select(pt.mask, 0u, is_inf(a)), bitcast<u32>(pt.off), select(0u, 1u, is_inf(a)), 0u);
  taps[2u * s + 1u] = bitcast<vec4<u32>>(a * pt.w);
}
`);

export const FORWARD_SUM = program('forwardSum', { bindings: { ...INPUTS, taps: 'read array<vec4<u32>>' }, uses: [GEOMETRY, SUMS] }, /* wgsl */ `
fn tap_of(s: u32, p: u32) -> Tap {
  if (p >= pr.points) { return Tap(0u, 0, vec4<f32>(0.0), 0u); }
  let t = taps[2u * s];
  return Tap(t.x, bitcast<i32>(t.y), bitcast<vec4<f32>>(taps[2u * s + 1u]), t.z);
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {${HEAD}
  for (var l = 0u; l < NL; l = l + 1u) {
    let vlev = i32(vbh + pr.level[l].start * pr.level[l].px + c0);
    for (var p0 = 0u; p0 < P; p0 = p0 + 4u) {
      let s0 = wbase + l * P + p0;
      let t0 = tap_of(s0, p0); let t1 = tap_of(s0 + 1u, p0 + 1u);
      let t2 = tap_of(s0 + 2u, p0 + 2u); let t3 = tap_of(s0 + 3u, p0 + 3u);
      inf = inf | t0.inf | t1.inf | t2.inf | t3.inf;
      let px = i32(pr.level[l].px); let row = i32(pr.level[l].row);
      // corner by corner, point by point; written out (a vector indexed at run time is slow)
${[0, 1, 2, 3].map((k) => `      {
        let base = vlev${['', ' + px', ' + row', ' + row + px'][k]};
${[0, 1, 2, 3].map((i) => `        if (((t${i}.mask >> ${k}u) & 1u) != 0u) { acc = acc + t${i}.aw.${'xyzw'[k]} * load4(u32(base + t${i}.off), c0, C); }`).join('\n')}
      }`).join('\n')}
    }
  }
  if (inf != 0u) { acc = add_infinite(acc, b, q, h, vbh, wbase, c0); }
  store(bqh * C + c0, c0, acc);
}
`);
