// The TypedArray intrinsics: a caller's typed array is read through these, never through its own
// properties (a subclass or a redefined getter could lie), and copied without running its
// constructor or Symbol.species.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import { HalfBits } from './half.js';

const TYPED_ARRAY = Object.getPrototypeOf(Int8Array.prototype);
const intrinsic = (key) => Object.getOwnPropertyDescriptor(TYPED_ARRAY, key).get;
const TYPED_ARRAY_KIND = intrinsic(Symbol.toStringTag);
const TYPED_ARRAY_LENGTH = intrinsic('length');
const TYPED_ARRAY_BUFFER = intrinsic('buffer');
const TYPED_ARRAY_BYTE_OFFSET = intrinsic('byteOffset');
const TYPED_ARRAY_SET = TYPED_ARRAY.set;

/** 'Float32Array', 'Uint8Array', ... for a real typed array (whatever its properties say), else undefined. */
export const typedArrayKind = (x) => TYPED_ARRAY_KIND.call(x);
/** Its real element count (0 once its buffer is detached or shrunk below it). */
export const typedArrayLength = (x) => TYPED_ARRAY_LENGTH.call(x);
export const typedArrayBuffer = (x) => TYPED_ARRAY_BUFFER.call(x);

/** Elements [start, start + length) of a checked Float32Array (or HalfBits), as a view of its
 *  buffer (no method of the caller's array runs: its subarray would consult its constructor). */
export function part(data, start, length) {
  if (data instanceof HalfBits) return new HalfBits(part16(data.bits, start, length), data.dtype);
  if (start === 0 && length === typedArrayLength(data)) return data;
  return new Float32Array(typedArrayBuffer(data), TYPED_ARRAY_BYTE_OFFSET.call(data) + 4 * start, length);
}

const part16 = (bits, start, length) => (start === 0 && length === typedArrayLength(bits) ? bits
  : new Uint16Array(typedArrayBuffer(bits), TYPED_ARRAY_BYTE_OFFSET.call(bits) + 2 * start, length));

// An Array's length (read once) or a typed array's real length; null for anything else. Callers
// bound it before copyItems: a sparse Array or a Proxy can claim 2^32 - 1 items, and copying that
// many aborts Node (V8's fatal "invalid size" error), which no try/catch can stop.
export function listLength(x) {
  if (Array.isArray(x)) return x.length;
  if (typedArrayKind(x) !== undefined) return typedArrayLength(x);
  return null;
}

// A copy of the first n items, each read once.
export function copyItems(x, n) {
  const items = [];
  for (let i = 0; i < n; i++) items.push(x[i]);
  return items;
}

export const typedArrayByteOffset = (x) => TYPED_ARRAY_BYTE_OFFSET.call(x);

/** A fresh Float32Array holding a checked Float32Array's elements. The caller's array is read only
 *  through the intrinsic getters (its slice() would run its constructor and Symbol.species). */
export function copyFloat32(data) {
  const length = typedArrayLength(data);
  const copy = new Float32Array(length);
  TYPED_ARRAY_SET.call(copy, new Float32Array(typedArrayBuffer(data), typedArrayByteOffset(data), length));
  return copy;
}
