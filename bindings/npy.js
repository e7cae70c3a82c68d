// NumPy .npy files in JavaScript: a strict parser and a small serializer, the twin of
// src/cli/npy.c (same refusals, same messages). Works in Node and browsers (bytes in, bytes out).
//
//   import { parseNpy, serializeNpy } from 'ms-deform-attn/npy';
//   const { dtype, shape, data } = parseNpy(bytes);   // data: Float32Array | Int32Array | BigInt64Array
//                                                      // | Uint16Array (the bits of '<f2', 'bfloat16')
//   const bytes = serializeNpy({ data, shape });       // version 1.0, NumPy's 64-byte-aligned header
//
// Accepted: versions 1.0, 2.0, 3.0; dtypes '<f4', '<f2', 'bfloat16' (str(ml_dtypes.bfloat16), in a
// hand-written header: np.save writes it as '<V2', which is refused), '<i4', '<i8'; C order; any shape whose byte
// size fits in 64 bits. Refused with an NpyError: wrong magic, another version, big-endian or
// '|' on a multi-byte type, Fortran order, another dtype, a header that is not a well-formed
// Python dict literal with exactly 'descr', 'fortran_order' and 'shape', a size that overflows,
// a truncated file, or bytes after the data.

export { widenHalf } from './core/half.js';

export const NPY_MAX_DIMS = 32;

const DTYPES = {
  '<f4': { size: 4, Array: Float32Array },
  '<i4': { size: 4, Array: Int32Array },
  '<i8': { size: 8, Array: BigInt64Array },
  '<f2': { size: 2, Array: Uint16Array },
  bfloat16: { size: 2, Array: Uint16Array },
};
const EXPECTED = "'<f4', '<f2', 'bfloat16', '<i4' or '<i8'";
const MAGIC = [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]; // \x93NUMPY
const INT64_MAX = (1n << 63n) - 1n;
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A malformed or unsupported .npy file; the message says what is wrong. */
export class NpyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'NpyError';
  }
}

const fail = (message, props) => { throw Object.assign(new NpyError(message), props); };

/** "()", "(3,)", "(2, 3)": the way NumPy prints a shape. */
export function formatShape(shape) {
  const dims = Array.from(shape, (d) => String(d));
  return dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
}

// ---- the header: a Python dict literal ------------------------------------------------------

class Cursor {
  constructor(bytes) {
    this.s = bytes;
    this.pos = 0;
  }

  peek() {
    const s = this.s;
    while (this.pos < s.length && (s[this.pos] === 0x20 || s[this.pos] === 0x09 || s[this.pos] === 0x0a || s[this.pos] === 0x0d)) {
      this.pos++;
    }
    return this.pos < s.length ? s[this.pos] : -1;
  }

  found() {
    const ch = this.peek();
    if (ch < 0) return 'the end of the header';
    if (ch >= 0x20 && ch < 0x7f) return `'${String.fromCharCode(ch)}' at byte ${this.pos}`;
    return `byte 0x${ch.toString(16).padStart(2, '0')} at byte ${this.pos}`;
  }

  expect(ch, context) {
    if (this.peek() !== ch.charCodeAt(0)) fail(`header: expected '${ch}' ${context}, found ${this.found()}`);
    this.pos++;
  }

  string(what, maxLength = 31) {
    const q = this.peek();
    if (q !== 0x27 && q !== 0x22) fail(`header: expected a quoted string for ${what}, found ${this.found()}`);
    const start = ++this.pos;
    let out = '';
    while (this.pos < this.s.length && this.s[this.pos] !== q) {
      const ch = this.s[this.pos];
      if (ch === 0x5c || ch < 0x20 || ch >= 0x7f) {
        fail(`header: unsupported character 0x${ch.toString(16).padStart(2, '0')} in the string for ${what} at byte ${this.pos}`);
      }
      if (out.length >= maxLength) fail(`header: the string for ${what} starting at byte ${start} is too long`);
      out += String.fromCharCode(ch);
      this.pos++;
    }
    if (this.pos >= this.s.length) fail(`header: unterminated string for ${what} starting at byte ${start - 1}`);
    this.pos++;
    return out;
  }

  bool() {
    this.peek();
    const rest = String.fromCharCode(...this.s.subarray(this.pos, this.pos + 6));
    let value = null;
    let n = 0;
    if (rest.startsWith('True')) { value = true; n = 4; } else if (rest.startsWith('False')) { value = false; n = 5; }
    if (value === null || /[A-Za-z0-9_]/.test(rest.charAt(n))) {
      fail(`header: expected True or False for 'fortran_order', found ${this.found()}`);
    }
    this.pos += n;
    return value;
  }

  dim() {
    const ch = this.peek();
    if (ch === 0x2d) fail(`header: negative dimension in 'shape' at byte ${this.pos}, expected integers >= 0`);
    if (ch < 0x30 || ch > 0x39) fail(`header: expected an integer in 'shape', found ${this.found()}`);
    const start = this.pos;
    let v = 0n;
    while (this.pos < this.s.length && this.s[this.pos] >= 0x30 && this.s[this.pos] <= 0x39) {
      v = v * 10n + BigInt(this.s[this.pos] - 0x30);
      if (v > INT64_MAX) fail(`header: dimension starting at byte ${start} in 'shape' exceeds ${INT64_MAX}`);
      this.pos++;
    }
    if (this.pos - start > 1 && this.s[start] === 0x30) fail(`header: dimension with a leading zero at byte ${start} in 'shape'`);
    if (this.s[this.pos] === 0x4c || this.s[this.pos] === 0x6c) this.pos++; // Python 2's 3L
    return v;
  }

  shape() {
    this.expect('(', "to open the tuple of 'shape'");
    const dims = [];
    if (this.peek() === 0x29) { this.pos++; return dims; }
    for (;;) {
      if (dims.length === NPY_MAX_DIMS) fail(`header: 'shape' has more than ${NPY_MAX_DIMS} dimensions`);
      dims.push(this.dim());
      const ch = this.peek();
      if (ch === 0x29) {
        if (dims.length === 1) fail(`header: 'shape' (${dims[0]}) is not a tuple, expected (${dims[0]},)`);
        this.pos++;
        return dims;
      }
      if (ch !== 0x2c) fail(`header: expected ',' or ')' in 'shape', found ${this.found()}`);
      this.pos++;
      if (this.peek() === 0x29) { this.pos++; return dims; }
    }
  }
}

function checkDtype(descr, bool = true) {
  if (descr === BOOL && bool) return descr;
  if (descr in DTYPES) return descr;
  let what = 'unsupported dtype';
  if (descr[0] === '>') what = 'big-endian dtype';
  else if (descr[0] === '|' && ['f4', 'i4', 'i8', 'f2'].includes(descr.slice(1))) what = "dtype without byte order ('|' is for 1-byte types)";
  else if (descr === '<V2' || descr === '|V2') {
    what = "2-byte void dtype (np.save writes ml_dtypes' bfloat16 so; its bits cannot be told from any other 2-byte record)";
  }
  return fail(`${what} '${descr}', expected ${EXPECTED}`, { descr });
}

function parseHeader(bytes, bool) {
  const c = new Cursor(bytes);
  const seen = {};
  let descr, fortran, dims;
  c.expect('{', 'at the start of the header dict');
  while (c.peek() !== 0x7d) {
    const key = c.string('a key');
    c.expect(':', 'after a key');
    if (key === 'descr') {
      const q = c.peek();
      if (q !== 0x27 && q !== 0x22) {
        fail(`header: 'descr' is not a string (found ${c.found()}); structured dtypes are not supported, expected ${EXPECTED}`);
      }
      descr = c.string("'descr'");
    } else if (key === 'fortran_order') {
      fortran = c.bool();
    } else if (key === 'shape') {
      dims = c.shape();
    } else {
      fail(`header: unexpected key '${key}', expected only 'descr', 'fortran_order' and 'shape'`);
    }
    if (seen[key]) fail(`header: key '${key}' appears twice`);
    seen[key] = true;
    const ch = c.peek();
    if (ch === 0x2c) c.pos++;
    else if (ch !== 0x7d) fail(`header: expected ',' or '}' after the value of '${key}', found ${c.found()}`);
  }
  c.pos++;
  if (c.peek() !== -1) fail(`header: unexpected ${c.found()} after the closing '}'`);
  for (const key of ['descr', 'fortran_order', 'shape']) if (!seen[key]) fail(`header: missing key '${key}'`);
  const dtype = checkDtype(descr, bool);
  if (fortran) fail('Fortran-order (column-major) arrays are not supported, expected fortran_order False: save np.ascontiguousarray(tensor)');
  return { dtype, dims };
}

// The preamble and header of a file of `len` bytes whose first bytes are `bytes` (all of them, or
// at least the preamble and the header), with every check parseNpy makes on them and on the
// file's size; the data is not looked at.
function readHeader(bytes, len, bool) {
  if (len === 0) fail('empty file, expected a .npy file');
  for (let i = 0; i < Math.min(len, 6); i++) {
    if (bytes[i] !== MAGIC[i]) fail('not a .npy file: it does not start with the magic string \\x93NUMPY');
  }
  if (len < 8) fail(`truncated: ${len} bytes, too short for the .npy magic and version`);
  const major = bytes[6], minor = bytes[7];
  if (![1, 2, 3].includes(major) || minor !== 0) fail(`unsupported .npy format version ${major}.${minor}, expected 1.0, 2.0 or 3.0`);
  const prefix = major === 1 ? 10 : 12;
  if (len < prefix) fail(`truncated: ${len} bytes, too short for the version ${major}.0 preamble of ${prefix} bytes`);
  let headerLen = bytes[8] | (bytes[9] << 8);
  if (major !== 1) headerLen += (bytes[10] << 16) + bytes[11] * 2 ** 24;
  if (headerLen > len - prefix) fail(`truncated: the header is ${headerLen} bytes but only ${len - prefix} follow the preamble`);
  if (bytes.length < prefix + headerLen) throw new RangeError('parseNpyHeader: head must hold the whole preamble and header');
  const { dtype, dims } = parseHeader(bytes.subarray(prefix, prefix + headerLen), bool);

  const shapeText = formatShape(dims);
  let count = 1n;
  for (const d of dims) count *= d;
  const { size, Array: TypedArray } = DTYPES[dtype] ?? BOOL_TYPE;
  const dataBytes = count * BigInt(size);
  if (dataBytes > INT64_MAX) fail(`shape ${shapeText} of '${dtype}' has more elements than fit in 64-bit byte sizes`);
  const offset = prefix + headerLen, have = BigInt(len - offset);
  if (have < dataBytes) fail(`truncated: shape ${shapeText} of '${dtype}' needs ${dataBytes} data bytes, the file has ${have}`);
  if (have > dataBytes) fail(`${have - dataBytes} bytes of trailing data after the ${dataBytes} that shape ${shapeText} of '${dtype}' needs`);

  return { major, dtype, dims, shapeText, count, offset, size, TypedArray };
}

function checkSafeShape(dims, shapeText) {
  const unsafe = dims.find((d) => d > BigInt(Number.MAX_SAFE_INTEGER));
  if (unsafe !== undefined) {
    fail(`shape ${shapeText} has dimension ${unsafe}, past 2^53 - 1, which a JavaScript number cannot hold exactly (parseNpy(bytes, { bigint: true }) gives BigInt dimensions)`);
  }
}

/**
 * parseNpy's checks from a file's first bytes (`head`: its preamble and header, or more) and its
 * size, without its data, for files too large to hold in one Uint8Array (over 4 GiB): returns
 * { version, dtype, shape, count, dataOffset } (shape as parseNpy gives it). Throws NpyError.
 */
export function parseNpyHeader(head, fileSize, { bigint = false, bool = true } = {}) {
  const { major, dtype, dims, shapeText, count, offset } = readHeader(head, fileSize, bool);
  if (!bigint) checkSafeShape(dims, shapeText);
  return { version: major, dtype, shape: bigint ? dims : dims.map(Number), count: Number(count), dataOffset: offset };
}

// ---- the file layout --------------------------------------------------------------------------

/**
 * Parses a whole .npy file. Returns { version, dtype, shape, data, count }: shape an array of
 * numbers (of BigInts with { bigint: true }), data a fresh typed array (Float32Array for '<f4',
 * Int32Array for '<i4', BigInt64Array for '<i8', Uint16Array of the bits for '<f2' and 'bfloat16': widenHalf makes them
 * float32 exactly, Uint8Array for '|b1'). A zero-size array can have a dimension past
 * Number.MAX_SAFE_INTEGER, which no number holds exactly: without { bigint: true } such a file
 * is refused rather than given a rounded shape. { bool: false } refuses '|b1' as the native CLI's
 * parser does (before any size check). Throws NpyError.
 */
export function parseNpy(input, { bigint = false, bool = true } = {}) {
  let bytes;
  // A plain Uint8Array view (a Node Buffer's slice() would not copy).
  if (!(input instanceof ArrayBuffer) && !ArrayBuffer.isView(input)) {
    throw new TypeError(`parseNpy: expected a Uint8Array or ArrayBuffer, got ${input === null ? 'null' : typeof input}`);
  }
  try {
    bytes = input instanceof ArrayBuffer ? new Uint8Array(input) : new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  } catch (e) {
    // A detached (transferred) buffer, or a view whose offsets lie.
    throw new TypeError(`parseNpy: cannot read the input's bytes (${e.message})`);
  }
  const len = bytes.length;
  const { major, dtype, dims, shapeText, count, offset, size, TypedArray } = readHeader(bytes, len, bool);
  const n = Number(count);
  let data;
  if (dtype === BOOL) {
    data = boolData(bytes.subarray(offset, offset + n), shapeText);
  } else if (LITTLE_ENDIAN_HOST) {
    data = new TypedArray(bytes.slice(offset, offset + n * size).buffer); // slice: a fresh, aligned copy
  } else {
    const view = new DataView(bytes.buffer, bytes.byteOffset + offset, n * size);
    data = new TypedArray(n);
    for (let i = 0; i < n; i++) {
      data[i] = dtype === '<f4' ? view.getFloat32(4 * i, true) : dtype === '<i4' ? view.getInt32(4 * i, true)
        : size === 2 ? view.getUint16(2 * i, true) : view.getBigInt64(8 * i, true);
    }
  }
  if (!bigint) checkSafeShape(dims, shapeText);
  return { version: major, dtype, shape: bigint ? dims : dims.map(Number), data, count: n };
}

// '|b1' (NumPy's bool, as PyTorch's padding masks are saved): one byte per element, 0 or 1,
// read into a Uint8Array. Any other byte is refused: NumPy itself never writes one.
const BOOL = '|b1';
const BOOL_TYPE = { size: 1, Array: Uint8Array };

function boolData(bytes, shapeText) {
  const bad = bytes.findIndex((b) => b > 1);
  if (bad >= 0) fail(`'|b1' data of shape ${shapeText}: element ${bad} is the byte ${bytes[bad]}, expected 0 (False) or 1 (True)`);
  return bytes.slice();
}


const HALF_DTYPES = { '<f2': '<f2', float16: '<f2', bfloat16: 'bfloat16' };
// The dtype of a tensor to write: from data's type, or for Uint16Array (half-precision bits) from
// the tensor's dtype ('<f2' | 'float16' | 'bfloat16'). Float16Array is '<f2'.
function dtypeOf(data, dtype) {
  if (typeof Float16Array === 'function' && data instanceof Float16Array) return '<f2';
  if (data instanceof Uint16Array) return Object.hasOwn(HALF_DTYPES, dtype) ? HALF_DTYPES[dtype] : null;
  return data instanceof Float32Array ? '<f4' : data instanceof Int32Array ? '<i4' : data instanceof BigInt64Array ? '<i8' : null;
}
const DATA_TYPES = "a Float32Array, Int32Array, BigInt64Array, Float16Array, or Uint16Array with dtype '<f2' or 'bfloat16'";

/**
 * The header NumPy writes for version 1.0: magic, version, length and the dict, padded with
 * spaces and a newline so the data starts at a multiple of 64 bytes.
 */
// A copy of the shape, its length read once and bounded before any entry is read (a sparse
// Array or a Proxy can claim 2^32 - 1 entries; every() skipped holes and took minutes on them).
function shapeCopy(shape) {
  const n = Array.isArray(shape) ? shape.length : -1;
  const dims = n >= 0 && n <= NPY_MAX_DIMS ? Array.from({ length: n }, (_, i) => shape[i]) : null;
  if (dims === null || !dims.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new TypeError(`serializeNpy: shape must be an array of at most ${NPY_MAX_DIMS} integers >= 0`);
  }
  return dims;
}

export function npyHeader(dtype, shapeGiven) {
  if (!Object.hasOwn(DTYPES, dtype)) throw new TypeError(`npyHeader: dtype must be ${EXPECTED}, got ${String(dtype)}`);
  const shape = shapeCopy(shapeGiven);
  const dict = `{'descr': '${dtype}', 'fortran_order': False, 'shape': ${formatShape(shape)}, }`;
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  const out = new Uint8Array(total);
  out.set(MAGIC, 0);
  out[6] = 1;
  out[7] = 0;
  out[8] = (total - 10) & 0xff;
  out[9] = (total - 10) >> 8;
  for (let i = 0; i < dict.length; i++) out[10 + i] = dict.charCodeAt(i);
  out.fill(0x20, 10 + dict.length, total - 1);
  out[total - 1] = 0x0a;
  return out;
}

/**
 * The data section of a .npy file for a Float32Array, Int32Array, BigInt64Array, Float16Array
 * or Uint16Array (half-precision bits, with dtype): its little-endian bytes (a view of data
 * itself on little-endian hosts, no copy).
 */
export function npyDataBytes(data, dtypeGiven) {
  const dtype = dtypeOf(data, dtypeGiven);
  if (dtype === null) throw new TypeError(`serializeNpy: data must be ${DATA_TYPES}`);
  const size = DTYPES[dtype].size;
  if (LITTLE_ENDIAN_HOST) return new Uint8Array(data.buffer, data.byteOffset, data.length * size); // NaN payloads too
  const out = new Uint8Array(data.length * size);
  const view = new DataView(out.buffer);
  for (let i = 0; i < data.length; i++) {
    if (dtype === '<f4') view.setFloat32(4 * i, data[i], true);
    else if (dtype === '<i4') view.setInt32(4 * i, data[i], true);
    else if (size === 2) view.setUint16(2 * i, new Uint16Array(data.buffer, data.byteOffset, data.length)[i], true);
    else view.setBigInt64(8 * i, data[i], true);
  }
  return out;
}

/**
 * Serializes { data, shape } as a version 1.0 .npy file with NumPy's header (padded with spaces
 * and a newline so the data starts at a multiple of 64). The dtype follows data: Float32Array
 * → '<f4', Int32Array → '<i4', BigInt64Array → '<i8', Float16Array → '<f2'; a Uint16Array holds
 * half-precision bits and needs dtype: '<f2' (or 'float16') or 'bfloat16'.
 */
export function serializeNpy({ data, shape, dtype: dtypeGiven }) {
  const dtype = dtypeOf(data, dtypeGiven);
  if (dtype === null) throw new TypeError(`serializeNpy: data must be ${DATA_TYPES}`);
  const dims = shapeCopy(shape);
  const header = npyHeader(dtype, dims);
  const count = dims.reduce((a, b) => a * b, 1);
  if (count !== data.length) {
    throw new RangeError(`serializeNpy: shape ${formatShape(dims)} has ${count} elements, data has ${data.length}`);
  }
  const body = npyDataBytes(data, dtypeGiven);
  const out = new Uint8Array(header.length + body.length);
  out.set(header, 0);
  out.set(body, header.length);
  return out;
}
