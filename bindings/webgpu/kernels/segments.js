// The backward's grad_value from the sorted terms (sort.js): each pixel's segment holds its
// terms (a * w_k, grad_output row) in the CPU walk's order (query rank, level, point, corner).
//   gather  one invocation per (pixel, channel) reads its segment front to back, contiguous
//           and independent terms, and sums a * w_k * grad_output in that order.

import { WORKGROUP, program } from './problem.js';
import { halfBinding, halfInputs } from './half.js';

export const GATHER = program('gather', {
  words: ['first_pair'],
  bindings: {
    offsets: 'read array<u32>',
    terms: 'read array<vec2<u32>>',
    gout: halfBinding('gout', 'read array<f32>'),
    gvalue: 'read_write array<f32>',
  },
  uses: [halfInputs({ gout: null })],
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
    acc = acc + rounded(bitcast<f32>(t.x) * gout_at(t.y * C + c));
  }
  gvalue[value_base(b, h) + pix * select(C, H * C, pr.blnc != 0u) + c] = canon(acc);
}
`);
