// Half-precision bits (IEEE binary16 and bfloat16) to and from float32, by integer operations on
// the bits, so every runtime and backend gets the same float32 bits (the twin of npy_f16_to_f32
// and friends in src/cli/npy.c). Widening is exact: subnormals are normalised, infinities kept,
// a NaN keeps its sign and payload (not quietened). Narrowing rounds to nearest, ties to even.

/** The value's element types by msda_dtype number (src/msda.h): what the problem description's
 *  valueDtype slot (core/problem.js) and a backend's fastDtype take. */
export const VALUE_DTYPES = Object.freeze(['float32', 'float16', 'bfloat16']);

/** float32 bits of the binary16 value with bits h. */
export function f16ToF32Bits(h) {
  const sign = (h & 0x8000) << 16;
  const exp = (h >> 10) & 0x1f;
  let man = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (man << 13)) >>> 0;
  if (exp === 0) {
    if (man === 0) return sign >>> 0;
    let e = 113; // 2^-14 once the implicit bit (0x400) is reached
    while (!(man & 0x400)) { man <<= 1; e--; }
    return (sign | (e << 23) | ((man & 0x3ff) << 13)) >>> 0;
  }
  return (sign | ((exp + 112) << 23) | (man << 13)) >>> 0;
}

/** float32 bits of the bfloat16 value with bits h (its top half). */
export const bf16ToF32Bits = (h) => (h << 16) >>> 0;

/** binary16 bits nearest to the float32 with bits f (ties to even; overflow to infinity). */
export function f32ToF16Bits(f) {
  const sign = (f >>> 16) & 0x8000;
  const exp = (f >>> 23) & 0xff;
  const man = f & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (man ? 0x200 | (man >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  let m, shift;
  if (e <= 0) {
    if (e < -10) return sign;
    m = man | 0x800000;
    shift = 14 - e;
  } else {
    m = man;
    shift = 13;
  }
  let keep = m >>> shift;
  const rest = m & ((1 << shift) - 1), half = 1 << (shift - 1);
  if (rest > half || (rest === half && (keep & 1))) keep++; // a carry into the exponent is right
  return sign | ((e > 0 ? e << 10 : 0) + keep);
}

/** bfloat16 bits nearest to the float32 with bits f (ties to even; a NaN stays a NaN). */
export function f32ToBf16Bits(f) {
  if ((f & 0x7f800000) === 0x7f800000 && (f & 0x7fffff)) return ((f >>> 16) | 0x40) & 0xffff;
  const rest = f & 0xffff, keep = f >>> 16;
  return (rest > 0x8000 || (rest === 0x8000 && (keep & 1)) ? keep + 1 : keep) & 0xffff;
}

/**
 * A checked half-precision tensor's bits, kept as they are for the backend to widen where they
 * land (msda_widen_half in C: the wasm heap, the addon's buffers); the same bits as widenHalf.
 */
export class HalfBits {
  constructor(bits, dtype) {
    /** Uint16Array of the tensor's bits. */
    this.bits = bits;
    /** 'float16' or 'bfloat16'. */
    this.dtype = dtype;
  }

  get length() {
    return this.bits.length;
  }
}

/**
 * Whether a half-precision value of `dtype` goes to the kernels of `op` ('forward' | 'backward') as
 * its bits, each row widened as it is read (the same bits: widening is exact), rather than widened
 * up front: where the kernels have fast code for it, as the C library says (backend.fastDtype:
 * msda_fast_dtype, from src/kernel/kernels.h's MSDA_FAST_*). Measured
 * (docs/benchmark.md, Half precision): float16's bit rule in wasm SIMD's loads is slower than one
 * pass up front. The native backward converts each value row on every read (4-lane loads, beside
 * grad_value's updates), which costs more than one pass over the value where the samples'
 * corners outnumber its rows (an encoder: 64 per row).
 */
export function halfRows(backend, dtype, problem, op) {
  // At most one sample corner a value row (a decoder's few queries on a big pyramid): converting
  // each corner as it is read, even without fast code, costs less than a pass over every row.
  const fewCorners = problem.numQueries * problem.numLevels * problem.numPoints * 4 <= problem.valueLength;
  if (!backend.fastDtype(VALUE_DTYPES.indexOf(dtype))) return fewCorners;
  if (backend.memory || op === 'forward') return true;
  return fewCorners;
}

/** The dtype `value` (a Float32Array or HalfBits) goes to the kernels in: its half dtype where
 *  halfRows says so, else 'float32' (widened up front). The problem description says it too. */
export function kernelValueDtype(backend, value, problem, op) {
  return value instanceof HalfBits && halfRows(backend, value.dtype, problem, op) ? value.dtype : 'float32';
}

const scratch = new Float32Array(1), scratchBits = new Uint32Array(scratch.buffer);

/** The number element i of `data`: a Float32Array's, or a HalfBits' widened (for the few elements JS reads). */
export function elementAt(data, i) {
  if (!(data instanceof HalfBits)) return data[i];
  const h = data.bits[i];
  scratchBits[0] = data.dtype === 'bfloat16' ? bf16ToF32Bits(h) : f16ToF32Bits(h);
  return scratch[0];
}

/** A fresh Float32Array holding exactly the values of half-precision bits (dtype 'float16' or 'bfloat16'). */
export function widenHalf(bits, dtype) {
  const out = new Float32Array(bits.length);
  const u = new Uint32Array(out.buffer);
  const f = dtype === 'bfloat16' ? bf16ToF32Bits : f16ToF32Bits;
  for (let i = 0; i < bits.length; i++) u[i] = f(bits[i]);
  return out;
}

/** Half-precision bits (Uint16Array) nearest to each float32 of data. */
export function narrowToHalf(data, dtype) {
  const f = Float32Array.from(data);
  const u = new Uint32Array(f.buffer);
  const out = new Uint16Array(f.length);
  const g = dtype === 'bfloat16' ? f32ToBf16Bits : f32ToF16Bits;
  for (let i = 0; i < f.length; i++) out[i] = g(u[i]);
  return out;
}
