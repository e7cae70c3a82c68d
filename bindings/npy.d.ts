// Types for `ms-deform-attn/npy` (bindings/npy.js): a strict .npy parser and serializer.

export declare const NPY_MAX_DIMS: 32;

/** A malformed or unsupported .npy file; the message says what is wrong. */
export declare class NpyError extends Error {
  name: 'NpyError';
  /** The header's 'descr' when the file was refused for its dtype (e.g. '<f8'), else undefined. */
  descr?: string;
}

export type NpyDtype = '<f4' | '<i4' | '<i8' | '<f2' | 'bfloat16';
/** Uint16Array: the bits of '<f2' or 'bfloat16' elements. */
export type NpyData = Float32Array | Int32Array | BigInt64Array | Uint16Array;

export interface NpyArray {
  /** Format version major number: 1, 2 or 3. */
  version: 1 | 2 | 3;
  /** Also '|b1' (NumPy's bool, e.g. a PyTorch padding mask), read but not written. */
  dtype: NpyDtype | '|b1';
  shape: number[];
  /**
   * A fresh typed array: Float32Array for '<f4', Int32Array for '<i4', BigInt64Array for '<i8',
   * Uint16Array of the bits for '<f2' and 'bfloat16' (widenHalf below makes them float32
   * exactly), Uint8Array of 0 and 1 for '|b1'.
   */
  data: NpyData | Uint8Array;
  count: number;
}

/** parseNpy(bytes, { bigint: true }): every dimension an exact BigInt. */
export interface NpyArrayBigShape extends Omit<NpyArray, 'shape'> {
  shape: bigint[];
}

/**
 * Parses a whole .npy file (versions 1.0-3.0, '<f4' | '<f2' | 'bfloat16' | '<i4' | '<i8', C order). Throws NpyError,
 * also for a (zero-size) array with a dimension past Number.MAX_SAFE_INTEGER unless bigint is set.
 */
export declare function parseNpy(bytes: Uint8Array | ArrayBuffer | ArrayBufferView, options?: { bigint?: false; bool?: boolean }): NpyArray;
/** The same, with every dimension an exact BigInt. */
export declare function parseNpy(bytes: Uint8Array | ArrayBuffer | ArrayBufferView, options: { bigint: true; bool?: boolean }): NpyArrayBigShape;
/** parseNpy's checks from a file's first bytes (its preamble and header) and its size, without its
 *  data (for files over 4 GiB, which no Uint8Array holds): where the data starts and what it is. */
export declare function parseNpyHeader(head: Uint8Array, fileSize: number, options?: { bigint?: boolean; bool?: boolean }):
  { version: 1 | 2 | 3; dtype: NpyDtype | '|b1'; shape: number[] | bigint[]; count: number; dataOffset: number };

/**
 * A version 1.0 .npy file with NumPy's 64-byte-aligned header; the dtype follows data
 * (Float16Array: '<f2'); a Uint16Array holds half-precision bits and needs dtype.
 */
export declare function serializeNpy(tensor: { data: NpyData; shape: number[]; dtype?: '<f2' | 'float16' | 'bfloat16' }): Uint8Array;

/** "()", "(3,)", "(2, 3)": a shape the way NumPy prints it. */
export declare function formatShape(shape: ArrayLike<number | bigint>): string;

/** The version 1.0 header NumPy writes for dtype and shape (data then starts at a multiple of 64). */
export declare function npyHeader(dtype: NpyDtype, shape: number[]): Uint8Array;

/** The little-endian data bytes of a .npy file for data (a view of data on little-endian hosts). */
export declare function npyDataBytes(data: NpyData, dtype?: '<f2' | 'float16' | 'bfloat16'): Uint8Array;

/** A fresh Float32Array with exactly the values of half-precision bits ('float16' or 'bfloat16'). */
export declare function widenHalf(bits: Uint16Array, dtype: 'float16' | 'bfloat16'): Float32Array;
