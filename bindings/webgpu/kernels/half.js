// Half-precision tensors on the GPU, by integer operations on the bits (the twins of core/half.js
// and src/cli/npy.c, so the bits do not depend on how a device converts floats, nor on whether it
// flushes subnormals):
//   widen   one invocation per element: a float16 or bfloat16 (disp.is_bfloat16 1) half of a u32 word
//           to the float32 it is exactly; disp.first_half is the first half's index in the bound words
//           (a tensor may start mid-word, or past the binding's aligned offset);
//   narrow  one invocation per u32 word of the result: two float32 results rounded to nearest,
//           ties to even, to float16 or bfloat16 (disp.is_bfloat16 1); disp.count is the element count
//           (the last word of an odd count holds one half and zeros).

import { WORKGROUP, program } from './problem.js';

export const WIDEN = program('widen', {
  problem: false,
  words: ['first_half', 'is_bfloat16'],
  bindings: {
    src: 'read array<u32>',
    dst: 'read_write array<u32>',   // float32 bits: stored as integers, a NaN keeps its payload
  }
}, /* wgsl */ `
fn f16_to_f32(h: u32) -> u32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let m = h & 0x3ffu;
  if (e == 0x1fu) { return sign | 0x7f800000u | (m << 13u); }
  if (e == 0u) {
    if (m == 0u) { return sign; }
    let s = countLeadingZeros(m) - 21u;   // the shift that brings the top bit to 0x400
    return sign | ((113u - s) << 23u) | (((m << s) & 0x3ffu) << 13u);
  }
  return sign | ((e + 112u) << 23u) | (m << 13u);
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = invocation(gid);
  if (i >= disp.n) { return; }
  let k = disp.first_half + i;
  let h = (src[k >> 1u] >> ((k & 1u) * 16u)) & 0xffffu;
  if (disp.is_bfloat16 != 0u) { dst[i] = h << 16u; } else { dst[i] = f16_to_f32(h); }
}
`);

export const NARROW = program('narrow', {
  problem: false,
  words: ['count', 'is_bfloat16'],
  bindings: {
    src: 'read array<u32>',   // float32 bits
    dst: 'read_write array<u32>',
  }
}, /* wgsl */ `
fn f32_to_f16(f: u32) -> u32 {
  let sign = (f >> 16u) & 0x8000u;
  let exp = (f >> 23u) & 0xffu;
  let man = f & 0x7fffffu;
  if (exp == 0xffu) {
    if (man == 0u) { return sign | 0x7c00u; }
    return sign | 0x7e00u | (man >> 13u);   // a NaN stays one: quiet, the payload's top bits kept
  }
  let e = i32(exp) - 112;   // binary16's biased exponent
  if (e >= 31) { return sign | 0x7c00u; }
  var m = man;
  var shift = 13u;
  if (e <= 0) {   // subnormal (or zero) in binary16: the implicit bit joins the shifted mantissa
    if (e < -10) { return sign; }
    m = man | 0x800000u;
    shift = u32(14 - e);
  }
  let keep = m >> shift;
  let rest = m & ((1u << shift) - 1u);
  let half = 1u << (shift - 1u);
  let up = rest > half || (rest == half && (keep & 1u) != 0u);
  // a carry out of the mantissa moves into the exponent: right, up to infinity
  return sign | (select(0u, u32(e) << 10u, e > 0) + keep + select(0u, 1u, up));
}

fn f32_to_bf16(f: u32) -> u32 {
  if ((f & 0x7f800000u) == 0x7f800000u && (f & 0x7fffffu) != 0u) { return ((f >> 16u) | 0x40u) & 0xffffu; }
  let rest = f & 0xffffu;
  let keep = f >> 16u;
  let up = rest > 0x8000u || (rest == 0x8000u && (keep & 1u) != 0u);
  return (keep + select(0u, 1u, up)) & 0xffffu;
}

fn narrow(f: u32) -> u32 {
  if (disp.is_bfloat16 != 0u) { return f32_to_bf16(f); }
  return f32_to_f16(f);
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = invocation(gid);
  if (i >= disp.n) { return; }
  var word = narrow(src[2u * i]);
  if (2u * i + 1u < disp.count) { word = word | (narrow(src[2u * i + 1u]) << 16u); }
  dst[i] = word;
}
`);
