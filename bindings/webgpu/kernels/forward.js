// The forward (src/kernel/forward.h) in one pass, with no scratch in global memory. A workgroup
// takes units of G (batch, query, head) groups, `span` invocations each summing four channels
// (G * span <= WORKGROUP; channels past 4 * WORKGROUP take R units a group), TURNS in turn. A chunk at
// a time of each group's groups of four points, the workgroup first forms every sample's taps
// once into workgroup memory (its inside corners as a mask, corner 00's offset, a * w_k); then
// each invocation sums them for its four channels as the CPU does: level, group of four points,
// corner, point. Samples with an infinite weight have no taps (they are flagged): a * S is added
// after, only where a tap flagged one (SEMANTICS.md); one NaN. The `vec4` variant (channels a
// multiple of 4) reads and writes four channels with one vector access. Half inputs are read as
// they lie and widened in registers (half.js halfInputs: value_at4, locs_at, weights_at).

import { GEOMETRY } from './geometry.js';
import { WORKGROUP, program } from './problem.js';
import { halfBinding, halfInputs } from './half.js';

// Tap slots of workgroup memory (32 bytes each), for a chunk of every group's samples.
const SLOTS = 256;

// Units (G groups, or a group's channels past 4 * WORKGROUP) a workgroup takes in turn: fewer,
// longer workgroups (SwiftShader starts a coroutine per 4 invocations of a shader with barriers:
// 0.70x the time at 4 here), still thousands of them on DETR's encoder for a GPU.
const TURNS = 4;

/** The forward's workgroups for `groups` (batch, query, head) groups of C channels (as main() below takes them). */
export function forwardWorkgroups(groups, C) {
  const quads = Math.ceil(C / 4);
  const G = Math.floor(WORKGROUP / Math.min(quads, WORKGROUP)), R = Math.ceil(quads / WORKGROUP);
  return Math.ceil(R * Math.ceil(groups / G) / TURNS);
}

const rows = (v) => (v.vec4 ? 'array<vec4<f32>>' : 'array<f32>');

// Four channels at element i (c0 of C): one vector load, or up to four scalar ones.
const LOAD4 = (v) => (v.vec4 ? /* wgsl */ `
fn load4(i: u32, c0: u32, C: u32) -> vec4<f32> { return value_at4(i); }
fn store4(o: u32, c0: u32, C: u32, x: vec4<f32>) { out[o / 4u] = x; }
` : /* wgsl */ `
fn load4(i: u32, c0: u32, C: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  v.x = value_at(i);
  if (c0 + 1u < C) { v.y = value_at(i + 1u); }
  if (c0 + 2u < C) { v.z = value_at(i + 2u); }
  if (c0 + 3u < C) { v.w = value_at(i + 3u); }
  return v;
}
fn store4(o: u32, c0: u32, C: u32, x: vec4<f32>) {
  out[o] = x.x;
  if (c0 + 1u < C) { out[o + 1u] = x.y; }
  if (c0 + 2u < C) { out[o + 2u] = x.z; }
  if (c0 + 3u < C) { out[o + 3u] = x.w; }
}
`);

export const FORWARD = program('forward', {
  bindings: {
    value: halfBinding('value', (v) => `read ${rows(v)}`, (v) => v.vec4),
    locs: halfBinding('locs', 'read array<f32>'),
    weights: halfBinding('weights', 'read array<f32>'),
    out: (v) => `read_write ${rows(v)}`,
  },
  uses: [GEOMETRY, halfInputs({ value: (v) => v.vec4, locs: null, weights: null })],
  variants: ['vec4'],
}, (v) => /* wgsl */ `${LOAD4(v)}
struct Tap { aw: vec4<f32>, mask: u32, off: i32, inf: u32 }   // inf: 1 for an infinite weight (no taps)

var<workgroup> taps: array<Tap, ${SLOTS}>;

// Point p of (b, q, h, l) as taps: its inside corners and a * w_k; none past the last point.
fn tap_point(b: u32, q: u32, h: u32, l: u32, p: u32, wbase: u32) -> Tap {
  if (p >= pr.points) { return Tap(vec4<f32>(0.0), 0u, 0, 0u); }
  let pt = point(l, locs_at(loc_index(b, q, h, l, p, 0u)), locs_at(loc_index(b, q, h, l, p, 1u)));
  let a = weights_at(wbase + l * pr.points + p);
  return Tap(a * pt.w, select(pt.mask, 0u, is_inf(a)), pt.off, select(0u, 1u, is_inf(a)));
}

// Samples with an infinite weight: a * S, S over the inside corners (src/kernel/forward.h
// forward_infinite); rare, recomputed, and only where a tap said there is one.
fn add_infinite(acc0: vec4<f32>, b: u32, q: u32, h: u32, vbh: u32, wbase: u32, c0: u32) -> vec4<f32> {
  let NL = pr.num_levels; let P = pr.points; let C = pr.channels;
  var acc = acc0;
  for (var l = 0u; l < NL; l = l + 1u) {
    let vlev = i32(vbh + pr.level[l].start * pr.level[l].px + c0);
    for (var p = 0u; p < P; p = p + 1u) {
      let a = weights_at(wbase + l * P + p);
      if (!is_inf(a)) { continue; }
      let pt = point(l, locs_at(loc_index(b, q, h, l, p, 0u)), locs_at(loc_index(b, q, h, l, p, 1u)));
      if (pt.mask == 0u) { continue; }
      var s = vec4<f32>(0.0); var seen = false;
      for (var k = 0u; k < 4u; k = k + 1u) {
        if (((pt.mask >> k) & 1u) != 0u) {
          let term = rounded4(pt.w[k] * load4(u32(vlev + pt.off + corner_delta(l, k)), c0, C));
          if (seen) { s = s + term; } else { s = term; }
          seen = true;
        }
      }
      acc = acc + rounded4(a * s);
    }
  }
  return acc;
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let wg = wid.x + wid.y * nwg.x;   // uniform: every invocation of the workgroup returns or none
  if (wg * ${WORKGROUP}u >= disp.n) { return; }
  let Q = pr.queries; let H = pr.heads; let C = pr.channels; let NL = pr.num_levels; let P = pr.points;
  let BQH = pr.batch * Q * H;
  // the workgroup's shape (forwardShape); a chunk: as many groups of four points as fill the slots
  let quads = (C + 3u) / 4u; let span = min(quads, ${WORKGROUP}u); let G = ${WORKGROUP}u / span;
  let R = (quads + ${WORKGROUP - 1}u) / ${WORKGROUP}u; let chunk = ${SLOTS}u / (4u * G);
  let groups = (P + 3u) / 4u; let NG = NL * groups;   // groups of four points of one (b, q, h)
  let units = R * ((BQH + G - 1u) / G);
  for (var unit = wg * ${TURNS}u; unit < min(units, wg * ${TURNS}u + ${TURNS}u); unit = unit + 1u) {
    let g0 = (unit / R) * G;
    // this invocation's group and four channels
    let g = li / span; let bqh = g0 + g;
    let c0 = ((unit % R) * ${WORKGROUP}u + li % span) * 4u;
    let live = g < G && bqh < BQH && c0 < C;
    let h = bqh % H; let q = (bqh / H) % Q; let b = bqh / (H * Q);
    let vbh = value_base(b, h);
    var acc = vec4<f32>(0.0);
    var inf = 0u;
    for (var first = 0u; first < NG; first = first + chunk) {
      let n = min(chunk, NG - first);   // groups of four points in this chunk
      workgroupBarrier();   // the last chunk's sums are done with its taps
      for (var s = li; s < G * n * 4u; s = s + ${WORKGROUP}u) {
        let tg = g0 + s / (n * 4u); let pg = first + (s / 4u) % n;
        var t = Tap(vec4<f32>(0.0), 0u, 0, 0u);
        if (tg < BQH) {
          let th = tg % H; let tq = (tg / H) % Q; let tb = tg / (H * Q);
          t = tap_point(tb, tq, th, pg / groups, (pg % groups) * 4u + s % 4u, tg * NL * P);
        }
        taps[s] = t;
      }
      workgroupBarrier();
      if (live) {
        for (var pg = first; pg < first + n; pg = pg + 1u) {
          let l = pg / groups;
          let at = (g * n + pg - first) * 4u;
          let t0 = taps[at]; let t1 = taps[at + 1u]; let t2 = taps[at + 2u]; let t3 = taps[at + 3u];
          inf = inf | t0.inf | t1.inf | t2.inf | t3.inf;
          let vlev = i32(vbh + pr.level[l].start * pr.level[l].px + c0);
          let px = i32(pr.level[l].px); let row = i32(pr.level[l].row);
          // corner by corner, point by point; written out (a vector indexed at run time is slow)
${[0, 1, 2, 3].map((k) => `          {
            let base = vlev${['', ' + px', ' + row', ' + row + px'][k]};
${[0, 1, 2, 3].map((i) => `            if (((t${i}.mask >> ${k}u) & 1u) != 0u) { acc = acc + rounded4(t${i}.aw.${'xyzw'[k]} * load4(u32(base + t${i}.off), c0, C)); }`).join('\n')}
          }`).join('\n')}
        }
      }
    }
    if (live) {
      if (inf != 0u) { acc = add_infinite(acc, b, q, h, vbh, bqh * NL * P, c0); }
      store4(bqh * C + c0, c0, C, vec4<f32>(canon(acc.x), canon(acc.y), canon(acc.z), canon(acc.w)));
    }
  }
}
`);
