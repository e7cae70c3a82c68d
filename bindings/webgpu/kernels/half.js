// Half-precision tensors on the GPU, by operations on the bits (the twins of core/half.js and
// src/cli/npy.c, so the bits do not depend on how a device converts halves, nor on whether it
// flushes subnormals):
//   halfInputs  WGSL for the passes that read an input where it lies, float32 or halves:
//               `NAME_at(i)`, element i, and `NAME_at4(i)`, elements i .. i + 3, as float32; a half
//               one's words are bound from its first half (plan.js: else it is widened first),
//               two halves a u32, four a vec2<u32> where float32 would be a vec4 one, and widened
//               in registers;
//   widen       one invocation per element: a float16 or bfloat16 (disp.is_bfloat16 1) half of a u32
//               word to the float32 it is exactly; disp.first_half is the first half's index in the
//               bound words (a tensor that starts mid-word, or past the binding's aligned offset);
//   narrow      one invocation per u32 word of the result: two float32 results rounded to nearest,
//               ties to even, to float16 or bfloat16 (disp.is_bfloat16 1); disp.count is the element count
//               (the last word of an odd count holds one half and zeros).

import { WORKGROUP, program, variantCode } from './problem.js';

// A float16's bits (low 16 bits of h) as the float32 it is exactly, with no branch (SwiftShader
// runs both sides of one): zero and subnormals are a * 2^-24, exact and normal in float32 (no
// flush can touch them); the others move their exponent (and Inf, NaN keep their payload).
const F16_TO_F32 = /* wgsl */ `
fn f16_to_f32(h: u32) -> u32 {
  let a = h & 0x7fffu;
  let wide = (a << 13u) + select(0x38000000u, 0x70000000u, a >= 0x7c00u);
  let small = bitcast<u32>(f32(i32(a)) * 0x1p-24f);   // i32: a signed conversion is one instruction on more CPUs
  return ((h & 0x8000u) << 16u) | select(wide, small, a < 0x400u);
}
`;

// The variant flags that say an input is bound as float16 or as bfloat16 halves (plan.js variantOf).
export const halfFlags = (name) => [`${name}F16`, `${name}Bf16`];
const kindOf = (name, v) => { const [f16, bf16] = halfFlags(name); return v[f16] ? 'f16' : v[bf16] ? 'bf16' : 'f32'; };

/**
 * An input's binding: `decl`, its float32 one (or a function of the variant giving it), or its
 * halves' words where the variant says it is bound as halves: a vec2<u32> of four where
 * `vec4(variant)` (the float32 one then an array<vec4<f32>>), else a u32 of two.
 */
export function halfBinding(name, decl, vec4 = () => false) {
  return (v) => (kindOf(name, v) !== 'f32' ? (vec4(v) ? 'read array<vec2<u32>>' : 'read array<u32>')
    : (typeof decl === 'function' ? decl(v) : decl));
}

/**
 * WGSL reading inputs (each bound by halfBinding, `inputs` mapping its name to the same `vec4`,
 * or null) as float32: `NAME_at(i)` and `NAME_at4(i)` (where vec4, i a multiple of 4).
 */
export function halfInputs(inputs) {
  const names = Object.keys(inputs);
  const vec4 = (name, v) => inputs[name] !== null && inputs[name](v);
  return variantCode(names.flatMap(halfFlags), (v) => {
    const kinds = names.map((name) => kindOf(name, v));
    const code = names.map((name, i) => {
      const kind = kinds[i], vec = vec4(name, v);
      if (kind === 'f32') {
        return vec ? /* wgsl */ `
fn ${name}_at(i: u32) -> f32 { return ${name}[i >> 2u][i & 3u]; }
fn ${name}_at4(i: u32) -> vec4<f32> { return ${name}[i >> 2u]; }
` : /* wgsl */ `
fn ${name}_at(i: u32) -> f32 { return ${name}[i]; }
fn ${name}_at4(i: u32) -> vec4<f32> { return vec4<f32>(${name}[i], ${name}[i + 1u], ${name}[i + 2u], ${name}[i + 3u]); }
`;
      }
      const word = vec ? `${name}[i >> 2u][(i >> 1u) & 1u]` : `${name}[i >> 1u]`;
      // element i's half by constant shifts and a select (a shift by a lane's own count is slow on some CPUs' SIMD)
      const one = kind === 'f16' ? 'f16_to_f32(select(w & 0xffffu, w >> 16u, odd))' : 'select(w << 16u, w & 0xffff0000u, odd)';
      return /* wgsl */ `
fn ${name}_at(i: u32) -> f32 { let w = ${word}; let odd = (i & 1u) != 0u; return bitcast<f32>(${one}); }
fn ${name}_at4(i: u32) -> vec4<f32> {
${vec ? `  let w = ${name}[i >> 2u];
${kind === 'f16' ? `  let h = vec4<u32>(w.x & 0xffffu, w.x >> 16u, w.y & 0xffffu, w.y >> 16u);
  return bitcast<vec4<f32>>(vec4<u32>(f16_to_f32(h.x), f16_to_f32(h.y), f16_to_f32(h.z), f16_to_f32(h.w)));`
    : '  return bitcast<vec4<f32>>(vec4<u32>(w.x << 16u, w.x & 0xffff0000u, w.y << 16u, w.y & 0xffff0000u));'}`
    : `  return vec4<f32>(${name}_at(i), ${name}_at(i + 1u), ${name}_at(i + 2u), ${name}_at(i + 3u));`}
}
`;
    });
    return (kinds.includes('f16') ? F16_TO_F32 : '') + code.join('');
  });
}

export const WIDEN = program('widen', {
  problem: false,
  words: ['first_half', 'is_bfloat16'],
  bindings: {
    src: 'read array<u32>',
    dst: 'read_write array<u32>',   // float32 bits: stored as integers, a NaN keeps its payload
  }
}, /* wgsl */ `${F16_TO_F32}
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
