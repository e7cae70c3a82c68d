// What the device does with a * b + c and with subnormals (read at run time: nothing folds):
// io[4] a * b + c as written, io[8] the same with the product rounded as the kernels round every
// product an addition takes (problem.js rounded(): an OR with a zero read at run time, io[9]).

import { program } from './problem.js';

export const PROBE = program('probe', {
  problem: false,
  dispatch: false,
  bindings: {
    io: 'read_write array<f32>',
  }
}, /* wgsl */ `
@compute @workgroup_size(1)
fn main() {
  io[4] = io[0] * io[1] + io[2];
  io[5] = io[3] * 1.0;
  io[6] = io[3] + io[3];
  io[7] = io[0] * io[3];
  io[8] = bitcast<f32>(bitcast<u32>(io[0] * io[1]) | bitcast<u32>(io[9])) + io[2];
}
`);
