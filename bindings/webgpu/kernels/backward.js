// The backward's passes (src/kernel/backward.h): samples, one invocation per sample, writes its
// location and weight gradients (one writer each, into the results) and a record per in-bounds
// corner (destination pixel, a * w_k); sort.js orders the records by pixel, each pixel's in the
// CPU walk's order (walks.js), and gather (segments.js) sums each pixel's in that order:
// grad_value with one writer per element and a fixed order, no float atomics.

import { GEOMETRY } from './geometry.js';
import { WORKGROUP, program } from './problem.js';

// The `vec4` variant (channels a multiple of 4: plan.js variantOf) reads value and
// grad_output rows as vec4s; the dot products add in the same order either way.
const row = ({ vec4 = false }) => (vec4 ? 'read array<vec4<f32>>' : 'read array<f32>');

export const SAMPLES = program('samples', {
  words: ['first_pair'],
  bindings: {
    value: row,
    locs: 'read array<f32>',
    weights: 'read array<f32>',
    gout: row,
    glocs: 'read_write array<f32>',
    gweights: 'read_write array<f32>',
    recs: 'read_write array<vec2<u32>>', // per (sample, corner): pixel, a * w_k
  },
  uses: [GEOMETRY],
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
  let pt = point(l, locs[lx], locs[ly]);
  let a = weights[s];
  let aw = a * pt.w;
  let go = bqh * C;
  let vlev = i32(value_base(b, h) + pr.level[l].start * pr.level[l].px);
  let CB = C & ~3u;
  var d = vec4<f32>(0.0);
  for (var k = 0u; k < 4u; k = k + 1u) {
    if (((pt.mask >> k) & 1u) == 0u) { continue; }
    let v0 = u32(vlev + pt.off + corner_delta(l, k));
    var acc = vec4<f32>(0.0);
    for (var c = 0u; c < CB; c = c + 4u) {
${vec4 ? `      let gc = gout[(go + c) / 4u];   // go and v0 are multiples of C, so of 4
      let vc = value[(v0 + c) / 4u];` : `      let gc = vec4<f32>(gout[go + c], gout[go + c + 1u], gout[go + c + 2u], gout[go + c + 3u]);
      let vc = vec4<f32>(value[v0 + c], value[v0 + c + 1u], value[v0 + c + 2u], value[v0 + c + 3u]);`}
      acc = acc + gc * vc;
    }
    var dk = (acc.x + acc.y) + (acc.z + acc.w);
${vec4 ? '' : `    for (var c = CB; c < C; c = c + 1u) { dk = dk + gout[go + c] * value[v0 + c]; }
`}    d[k] = dk;
  }
  let w = pt.w; let fx = pt.fx; let fy = pt.fy;
  var ga = ((w.x * d.x + w.y * d.y) + w.z * d.z) + w.w * d.w;
  var gx = (a * ((1.0 - fy) * (d.y - d.x) + fy * (d.w - d.z))) * pt.gsx;
  var gy = (a * ((1.0 - fx) * (d.z - d.x) + fx * (d.w - d.y))) * pt.gsy;
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
