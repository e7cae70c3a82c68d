// The backward's grad_value from the placed records (backward.js samples, scan, place): each
// pixel's segment holds its records' walk slots (unique, ascending in the CPU walk's order:
// query rank, point) in the order place() left them.
//   rank    one invocation per record: its place in its segment is the count of the segment's
//           walk slots below its own (independent loads, at most the segment's length), where it
//           writes what the gather needs, a * w_k and its grad_output row;
//   gather  one invocation per (pixel, channel) reads its segment front to back, contiguous
//           and independent records, and sums a * w_k * grad_output in that order.

import { WORKGROUP, program } from './problem.js';

export const RANK = program('rank', {
  words: ['first_pair', 'part_pixels'],
  bindings: {
    offsets: 'read array<u32>',
    placed: 'read array<u32>',
    recs: 'read array<vec2<u32>>',
    walk: 'read array<u32>',
    terms: 'read_write array<vec2<u32>>',   // a * w_k bits, grad_output row
  }
}, /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = invocation(gid);
  if (i >= disp.n || i >= offsets[disp.part_pixels]) { return; }
  let Q = pr.queries; let H = pr.heads; let NL = pr.num_levels; let P = pr.points;
  let ws = placed[i];
  let r = ws / 4u;   // the samples pass's local index, with the query's rank for its index
  let bh = disp.first_pair + r / (P * NL * Q); let h = bh % H; let b = bh / H;
  let rank = (r / (P * NL)) % Q;
  let q = walk[b * Q + rank];
  let rec = recs[ws + 4u * P * NL * q - 4u * P * NL * rank];
  let base = offsets[rec.x]; let end = offsets[rec.x + 1u];
  var below = 0u;
  for (var j = base; j < end; j = j + 1u) { below = below + select(0u, 1u, placed[j] < ws); }
  terms[base + below] = vec2<u32>(rec.y, (b * Q + q) * H + h);
}
`);

export const GATHER = program('gather', {
  words: ['first_pair'],
  bindings: {
    offsets: 'read array<u32>',
    terms: 'read array<vec2<u32>>',
    gout: 'read array<f32>',
    gvalue: 'read_write array<f32>',
  }
}, /* wgsl */ `
@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = invocation(gid);
  if (idx >= disp.n) { return; }
  let H = pr.heads; let C = pr.channels; let L = pr.length;
  let c = idx % C; let dest = idx / C;
  let pix = dest % L; let bh = disp.first_pair + dest / L; let h = bh % H; let b = bh / H;
  var acc: f32 = 0.0;
  for (var i = offsets[dest]; i < offsets[dest + 1u]; i = i + 1u) {
    let t = terms[i];
    acc = acc + bitcast<f32>(t.x) * gout[t.y * C + c];
  }
  gvalue[value_base(b, h) + pix * select(C, H * C, pr.blnc != 0u) + c] = canon(acc);
}
`);
