// The backward's passes (src/kernel/backward.h): samples, one invocation per sample, writes its
// location and weight gradients (one writer each, into the results) and a record per in-bounds
// corner (destination pixel, a * w_k); sort.js orders the records by pixel, each pixel's in the
// CPU walk's order (walks.js), and gather (segments.js) sums each pixel's in that order:
// grad_value with one writer per element and a fixed order, no float atomics.

import { GEOMETRY } from './geometry.js';
import { WORKGROUP, program } from './problem.js';
import { halfBinding, halfInputs } from './half.js';

// The `vec4` variant (channels a multiple of 4: plan.js variantOf) reads value and
// grad_output rows as vec4s; the dot products add in the same order either way. Half inputs are
// read as they lie and widened in registers (half.js halfInputs).
const row = ({ vec4 = false }) => (vec4 ? 'read array<vec4<f32>>' : 'read array<f32>');

export const SAMPLES = program('samples', {
  words: ['first_pair'],
  bindings: {
    value: halfBinding('value', row, (v) => v.vec4),
    locs: halfBinding('locs', 'read array<f32>'),
    weights: halfBinding('weights', 'read array<f32>'),
    gout: halfBinding('gout', row, (v) => v.vec4),
    glocs: 'read_write array<f32>',
    gweights: 'read_write array<f32>',
    recs: 'read_write array<vec2<u32>>', // per (sample, corner): pixel, a * w_k
  },
  uses: [GEOMETRY, halfInputs({ value: (v) => v.vec4, locs: null, weights: null, gout: (v) => v.vec4 })],
  variants: ['vec4'],
}, ({ vec4 = false }) => /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  // This dispatch's samples: those of (batch, head) pairs disp.first_pair, disp.first_pair + 1, ..., each pair's
  // queries, levels and points in order (local index r; s is the sample's index in the tensors).
  let r = invocation(gid);
  if (r >= disp.n) { return; }
  let Q = pr.queries; let H = pr.heads; let C = pr.channels; let NL = pr.num_levels; let P = pr.points; let L = pr.length;
  let p = r % P; let l = (r / P) % NL; let q = (r / (P * NL)) % Q; let bhl = r / (P * NL * Q);
  let bh = disp.first_pair + bhl; let h = bh % H; let b = bh / H;
  let bqh = (b * Q + q) * H + h;
  let s = (bqh * NL + l) * P + p;
  let lx = loc_index(b, q, h, l, p, 0u); let ly = loc_index(b, q, h, l, p, 1u);
  let pt = point(l, locs_at(lx), locs_at(ly));
  let a = weights_at(s);
  let aw = a * pt.w;
  let go = bqh * C;
  let vlev = i32(value_base(b, h) + pr.level[l].start * pr.level[l].px);
  // Each inside corner's dot product of value and grad_output rows, channel by channel: one
  // grad_output load for all four corners; each corner's sum in channel order, as the CPU's.
  let live0 = ((pt.mask >> 0u) & 1u) != 0u; let v0 = u32(vlev + pt.off + corner_delta(l, 0u));
  let live1 = ((pt.mask >> 1u) & 1u) != 0u; let v1 = u32(vlev + pt.off + corner_delta(l, 1u));
  let live2 = ((pt.mask >> 2u) & 1u) != 0u; let v2 = u32(vlev + pt.off + corner_delta(l, 2u));
  let live3 = ((pt.mask >> 3u) & 1u) != 0u; let v3 = u32(vlev + pt.off + corner_delta(l, 3u));
  let CB = C & ~3u;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  for (var c = 0u; c < CB; c = c + 4u) {
    let gc = gout_at4(go + c);   // where vec4, go and the corners' rows are multiples of C, so of 4
    if (live0) { acc0 = acc0 + rounded4(gc * value_at4(v0 + c)); }
    if (live1) { acc1 = acc1 + rounded4(gc * value_at4(v1 + c)); }
    if (live2) { acc2 = acc2 + rounded4(gc * value_at4(v2 + c)); }
    if (live3) { acc3 = acc3 + rounded4(gc * value_at4(v3 + c)); }
  }
  var d = vec4<f32>((acc0.x + acc0.y) + (acc0.z + acc0.w), (acc1.x + acc1.y) + (acc1.z + acc1.w), (acc2.x + acc2.y) + (acc2.z + acc2.w), (acc3.x + acc3.y) + (acc3.z + acc3.w));
${vec4 ? '' : `  for (var c = CB; c < C; c = c + 1u) {
    let g = gout_at(go + c);
    if (live0) { d.x = d.x + rounded(g * value_at(v0 + c)); }
    if (live1) { d.y = d.y + rounded(g * value_at(v1 + c)); }
    if (live2) { d.z = d.z + rounded(g * value_at(v2 + c)); }
    if (live3) { d.w = d.w + rounded(g * value_at(v3 + c)); }
  }
`}  let w = pt.w; let fx = pt.fx; let fy = pt.fy;
  var ga = ((rounded(w.x * d.x) + rounded(w.y * d.y)) + rounded(w.z * d.z)) + rounded(w.w * d.w);
  var gx = (a * (rounded((1.0 - fy) * (d.y - d.x)) + rounded(fy * (d.w - d.z)))) * pt.gsx;
  var gy = (a * (rounded((1.0 - fx) * (d.z - d.x)) + rounded(fx * (d.w - d.y)))) * pt.gsy;
  if (!pt.live) { ga = 0.0; gx = 0.0; gy = 0.0; }
  glocs[lx] = canon(gx);
  glocs[ly] = canon(gy);
  gweights[s] = canon(ga);
  let Wl = pr.level[l].w;
  let pix0 = bhl * L + pr.level[l].start;
  for (var k = 0u; k < 4u; k = k + 1u) {
    var rec = vec2<u32>(0xffffffffu, 0u);
    if (((pt.mask >> k) & 1u) != 0u) {
      let dest = pix0 + u32(pt.y0 + i32(k >> 1u)) * Wl + u32(pt.x0 + i32(k & 1u));
      rec = vec2<u32>(dest, bitcast<u32>(aw[k]));
    }
    recs[r * 4u + k] = rec;
  }
}
`);
