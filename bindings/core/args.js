// Reading arguments: every public call's named arguments, options, spatial shapes, level starts
// and tensors are read and checked here, once, with errors that name the argument, the expected
// and the actual value. The JS API, the float64 reference, initWorker and the tfjs adapter all
// validate through these functions.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import { describe } from './errors.js';
import { HalfBits, widenHalf } from './half.js';
import { isChoice, option, OPTIONS } from './options.js';
import { copyItems, listLength, typedArrayBuffer, typedArrayByteOffset, typedArrayKind, typedArrayLength } from './typed.js';

// The options' values and defaults: core/options.js's table.
export const VALUE_LAYOUTS = option('valueLayout').values;
export const LOCATION_LAYOUTS = option('samplingLocationsLayout').values;
export const PADDING_MODES = option('paddingMode').values;

/** Defaults of the reference API. */
export const DEFAULTS = Object.freeze(Object.fromEntries(OPTIONS.map((o) => [o.name, o.default])));

// threads: how many threads the native library (or a threads-enabled wasm module) may use;
// results are bit-for-bit the same for any count. The single-threaded modules run on one.
export const OPTION_KEYS = [...Object.keys(DEFAULTS), 'threads'];
export const PROBLEM_KEYS = ['batch', 'numQueries', 'numHeads', 'channels', 'numPoints', 'spatialShapes', 'levelStartIndex',
  ...OPTION_KEYS];
export const FORWARD_KEYS = ['value', 'spatialShapes', 'levelStartIndex', 'samplingLocations', 'attentionWeights',
  ...OPTION_KEYS];
export const BACKWARD_KEYS = ['gradOutput', ...FORWARD_KEYS];

// ---------------------------------------------------------------------------------------------
// Reading arguments. Caller code (getters, Proxies, a resizable buffer shrunk by a getter on a
// later argument) runs only while arguments are read: each is read once, into plain values or
// copies, and everything is checked on those. Tensor data stays the caller's typed array; its
// kind and length come from the TypedArray intrinsics (not from properties a caller can
// redefine), and its length is taken only after every argument has been read.

/** The most levels spatialShapes may have: far past any model, and every list built from them stays small. */
export const MAX_LEVELS = 2 ** 24;

// Validation helpers: TypeError for the wrong kind of thing, RangeError for wrong sizes/values.

export const fmtShape = (s) => `[${Array.from(s).join(', ')}]`;

// The named arguments (or, for the tfjs op, options: `what`), each read once (a getter or Proxy
// trap runs once per argument).
export function readArgs(fn, args, allowed, what = 'argument') {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw new TypeError(`${fn}: expected an object of named ${what}s, got ${describe(args)}`);
  }
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) {
      throw new TypeError(`${fn}: unknown ${what} '${key}', expected one of ${allowed.join(', ')}`);
    }
  }
  const plain = {};
  for (const key of allowed) plain[key] = args[key];
  return plain;
}

export function positiveInteger(fn, name, x) {
  if (typeof x !== 'number') throw new TypeError(`${fn}: ${name} is ${describe(x)}, expected a positive integer`);
  if (x < 1 || !Number.isSafeInteger(x)) throw new RangeError(`${fn}: ${name} is ${x}, expected an integer >= 1`);
  return x;
}

export function readOptions(fn, args) {
  const o = { ...DEFAULTS };
  // The word options first, then the switches (the order their errors are reported in).
  for (const { name: key, values: allowed } of OPTIONS.filter(isChoice)) {
    const v = args[key];
    if (v === undefined) continue;
    if (typeof v !== 'string') {
      throw new TypeError(`${fn}: ${key} is ${describe(v)}, expected one of ${allowed.map((a) => `'${a}'`).join(', ')}`);
    }
    if (!allowed.includes(v)) {
      throw new RangeError(`${fn}: ${key} is '${v}', expected one of ${allowed.map((a) => `'${a}'`).join(', ')}`);
    }
    o[key] = v;
  }
  for (const { name: key } of OPTIONS.filter((x) => !isChoice(x))) {
    const v = args[key];
    if (v === undefined) continue;
    if (typeof v !== 'boolean') throw new TypeError(`${fn}: ${key} is ${describe(v)}, expected true or false`);
    o[key] = v;
  }
  // undefined: the backend's own count, init's `threads` (see Prepared).
  o.threads = args.threads === undefined ? undefined : positiveInteger(fn, 'threads', args.threads);
  if (o.threads > 2 ** 31 - 1) throw new RangeError(`${fn}: threads is ${o.threads}, expected at most ${2 ** 31 - 1}`);
  return o;
}

export const isTensorObject = (x) => x !== null && typeof x === 'object' && !Array.isArray(x) && typedArrayKind(x) === undefined
  && !(x instanceof DataView) && 'data' in x;

// A { data, shape } tensor of integers, read once: { items, shape } (shape null when not given).
// `tooMany(n)`: the RangeError for data of n entries, thrown before they are copied (or null).
export function readIntegerTensor(fn, name, x, want, tooMany) {
  const data = x.data;
  const shapeValue = x.shape;
  const n = listLength(data);
  if (n !== null && tooMany(n)) throw tooMany(n);
  const dims = shapeValue === undefined ? null : listLength(shapeValue);
  if (dims > 16) throw new RangeError(`${fn}: ${name}.shape has ${dims} dimensions, expected ${fmtShape(want(n))}`);
  return { data, items: n === null ? null : copyItems(data, n), shape: dims === null ? null : copyItems(shapeValue, dims), shapeValue };
}

// Integer items (numbers or BigInts, read once already) checked and turned into numbers.
export function integers(fn, name, items) {
  return items.map((v, i) => {
    const n = typeof v === 'bigint' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n)) {
      throw new TypeError(`${fn}: ${name}[${i}] is ${describe(v)}, expected an integer`);
    }
    // A BigInt no number holds would be checked (and named) as its rounded neighbour.
    if (typeof v === 'bigint' && !Number.isSafeInteger(n)) {
      throw new RangeError(`${fn}: ${name}[${i}] is ${v}, expected an integer within ±(2^53 - 1)`);
    }
    return n;
  });
}

// A tensor-given integer list: its data an Array or typed array, its shape (when given) `want`.
export function integerTensor(fn, name, x, want, what, tooMany) {
  const t = readIntegerTensor(fn, name, x, want, tooMany);
  if (t.items === null || t.data instanceof DataView) throw new TypeError(`${fn}: ${name}.data is ${describe(t.data)}, expected ${what}`);
  if (t.shapeValue !== undefined) {
    if (t.shape === null || !t.shape.every((d) => typeof d === 'number' && Number.isInteger(d))) {
      throw new TypeError(`${fn}: ${name}.shape is ${t.shape === null ? describe(t.shapeValue) : fmtShape(t.shape)}, expected ${fmtShape(want(t.items.length))}`);
    }
    const expected = want(t.items.length);
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (t.shape.length !== expected.length || t.shape.some((d, i) => d !== expected[i]) || count !== t.items.length) {
      throw new RangeError(`${fn}: ${name}.shape is ${fmtShape(t.shape)} but ${name}.data has ${t.items.length} entries, expected shape ${fmtShape(expected)}`);
    }
  }
  return integers(fn, name, t.items);
}

// An integer list given as an Array, any typed array (BigInt64Array included) or a { data, shape } tensor.
export function integerList(fn, name, x, what, tooMany) {
  if (isTensorObject(x)) return integerTensor(fn, name, x, (n) => [n], what, tooMany);
  const n = x instanceof DataView ? null : listLength(x);
  if (n === null) throw new TypeError(`${fn}: ${name} is ${describe(x)}, expected ${what}`);
  if (tooMany(n)) throw tooMany(n);
  return integers(fn, name, copyItems(x, n));
}

export function readSpatialShapes(fn, x) {
  const what = 'an array of [H, W] pairs';
  let pairs;
  const count = Array.isArray(x) ? x.length : null;
  if (count > MAX_LEVELS) throw new RangeError(`${fn}: spatialShapes has ${count} levels, expected at most ${MAX_LEVELS}`);
  const levels = count === null ? null : copyItems(x, count);
  if (levels !== null && levels.every((p) => Array.isArray(p) || (typedArrayKind(p) !== undefined && !(p instanceof DataView)))) {
    pairs = levels.map((p, l) => {
      const n = listLength(p);
      if (n > 2) throw new RangeError(`${fn}: spatialShapes[${l}] has ${n} entries, expected an [H, W] pair`);
      const pair = integers(fn, `spatialShapes[${l}]`, copyItems(p, n));
      if (pair.length !== 2) {
        throw new RangeError(`${fn}: spatialShapes[${l}] has ${pair.length} entries, expected an [H, W] pair`);
      }
      return pair;
    });
  } else if (isTensorObject(x)) {
    // The (N_l, 2) tensor a .npy reader gives.
    const flat = integerTensor(fn, 'spatialShapes', x, (n) => [Math.floor(n / 2), 2], what, (n) => n > 2 * MAX_LEVELS
      && new RangeError(`${fn}: spatialShapes has ${n} entries, expected (N_l, 2) with N_l at most ${MAX_LEVELS}`));
    if (flat.length % 2 !== 0) {
      throw new RangeError(`${fn}: spatialShapes has ${flat.length} entries, expected (N_l, 2)`);
    }
    pairs = [];
    for (let i = 0; i < flat.length; i += 2) pairs.push([flat[i], flat[i + 1]]);
  } else {
    // An array with an element that is not a pair (a flat [4, 4, 2, 2]): name the first such one.
    const bad = levels === null ? -1 : levels.findIndex((p) => !Array.isArray(p) && (typedArrayKind(p) === undefined || p instanceof DataView));
    if (bad >= 0) throw new TypeError(`${fn}: spatialShapes[${bad}] is ${describe(levels[bad])}, expected an [H, W] pair (spatialShapes is ${what}, e.g. [[4, 4], [2, 2]])`);
    throw new TypeError(`${fn}: spatialShapes is ${describe(x)}, expected ${what}`);
  }
  if (pairs.length === 0) throw new RangeError(`${fn}: spatialShapes is empty, expected at least one [H, W] level`);
  pairs.forEach(([h, w], l) => {
    if (!(h >= 1 && w >= 1)) throw new RangeError(`${fn}: spatialShapes[${l}] is [${h}, ${w}], expected H >= 1 and W >= 1`);
    if (!Number.isSafeInteger(h * w)) {
      throw new RangeError(`${fn}: spatialShapes[${l}] is [${h}, ${w}], expected H*W within 2^53 - 1 (it is ${BigInt(h) * BigInt(w)})`);
    }
  });
  return pairs;
}

export function readLevelStartIndex(fn, x, shapes) {
  const expected = [];
  let total = 0;
  for (const [h, w] of shapes) {
    expected.push(total);
    total += h * w;
  }
  if (x === undefined) return { starts: expected, total };
  const wrongCount = (n) => n !== shapes.length
    && new RangeError(`${fn}: levelStartIndex has ${n} entries, expected ${shapes.length} (one per level of spatialShapes)`);
  const starts = integerList(fn, 'levelStartIndex', x, 'an array of integers', (n) => n > shapes.length && wrongCount(n));
  if (wrongCount(starts.length)) throw wrongCount(starts.length);
  starts.forEach((s, l) => {
    if (s !== expected[l]) {
      throw new RangeError(`${fn}: levelStartIndex is ${fmtShape(starts)}, expected ${fmtShape(expected)} (prefix sums of H*W); entry ${l} is ${s}, expected ${expected[l]}`);
    }
  });
  return { starts, total };
}

// NumPy's names of the same dtypes, as parseNpy (ms-deform-attn/npy) gives them, so that a
// parsed .npy goes straight in.
const NUMPY_DTYPES = { '<f4': 'float32', '<f2': 'float16' };

/** A tensor's dtype as given (a name, NumPy's too, or undefined) as 'float32', 'float16', 'bfloat16' or undefined. */
export function readDtype(fn, name, dtypeGiven) {
  const dtype = Object.hasOwn(NUMPY_DTYPES, dtypeGiven) ? NUMPY_DTYPES[dtypeGiven] : dtypeGiven;
  if (dtype !== undefined && !['float32', 'float16', 'bfloat16'].includes(dtype)) {
    throw new TypeError(`${fn}: ${name}.dtype is ${describe(dtype)}, expected 'float32', 'float16' or 'bfloat16' (or NumPy's '<f4', '<f2')`);
  }
  return dtype;
}

// The dtype of a half-precision tensor: Float16Array data (where the runtime has it) is float16;
// a Uint16Array holds the bits of dtype 'float16' or 'bfloat16'. undefined for other data.
function halfOf(fn, name, data, dtypeGiven) {
  const kind = typedArrayKind(data);
  const dtype = readDtype(fn, name, dtypeGiven);
  if (kind === 'Float16Array' && (dtype === undefined || dtype === 'float16')) return 'float16';
  if (kind === 'Uint16Array' && (dtype === 'float16' || dtype === 'bfloat16')) return dtype;
  if (kind === 'Uint16Array' && dtype === undefined) {
    throw new TypeError(`${fn}: ${name}.data is Uint16Array, expected a Float32Array (a Uint16Array of half-precision bits needs dtype: 'float16' or 'bfloat16')`);
  }
  if (dtype === 'float16' || dtype === 'bfloat16') {
    throw new TypeError(`${fn}: ${name}.data is ${kind ?? describe(data)}, expected a Uint16Array of ${dtype} bits${dtype === 'float16' ? ' or a Float16Array' : ''} (dtype '${dtype}')`);
  }
  return undefined;
}

// A { data: Float32Array, shape } tensor whose shape must match `expected` (numbers, or null
// for a dimension still to be learnt). Returns a copy of the shape and the data array; the
// data's length is checked by checkLength once every argument has been read. `kinds`: the data
// types accepted (the float64 reference also takes Float64Array). Half-precision data
// (Float16Array, or a Uint16Array with dtype 'float16' / 'bfloat16') is accepted too and
// widened exactly to float32 by widenTensor.
// `gpu`: a backend's reader of GPU tensors ({ buffer, shape, byteOffset?, dtype? }, bindings/webgpu/),
// called for a tensor without data (it reads the dtype); what it returns is checked by checkLength.
export function readTensor(fn, name, t, expected, labels, note, kinds = ['Float32Array'], gpu = undefined) {
  const want = `{ data: Float32Array, shape: ${fmtShape(labels)} }${gpu ? ` or { buffer: GPUBuffer, shape: ${fmtShape(labels)}, byteOffset?, dtype? }` : ''}`;
  if (t === null || typeof t !== 'object' || Array.isArray(t) || typedArrayKind(t) !== undefined || t instanceof DataView) {
    throw new TypeError(`${fn}: ${name} is ${t === undefined ? 'missing' : describe(t)}, expected ${want}`);
  }
  // An onnxruntime-web Tensor on the GPU throws from its data getter; say what to pass instead.
  if (gpu !== undefined && t.location === 'gpu-buffer') {
    const half = t.type === 'float16' ? ", dtype: 'float16'" : '';
    throw new TypeError(`${fn}: ${name} is an onnxruntime-web GPU tensor, expected ${want}: pass { buffer: ${name}.gpuBuffer, shape: ${name}.dims${half} }`);
  }
  let data = t.data;
  const onGpu = gpu !== undefined && data === undefined;
  if (onGpu) data = gpu.read(fn, name, t);
  const shapeValue = t.shape;
  const given = shapeValue !== undefined ? shapeValue : t.dims;
  // A GPU tensor's dtype was read with its buffer (gpu.read).
  const half = onGpu ? undefined : halfOf(fn, name, data, t.dtype);
  if (!onGpu && half === undefined && !kinds.includes(typedArrayKind(data))) {
    const kind = typedArrayKind(data);
    throw new TypeError(`${fn}: ${name}.data is ${kind ?? describe(data)}, expected a ${kinds.join(' or ')}`);
  }
  // At most 16 entries are read: a shape longer than that is wrong whatever it holds.
  const length = Array.isArray(given) ? given.length : 0;
  const shape = Array.isArray(given) ? (length > 16 ? null : copyItems(given, length)) : null;
  if (Array.isArray(given) && shape === null) {
    throw new RangeError(`${fn}: ${name}.shape has ${length} dimensions, expected ${labels.length} ${fmtShape(labels)}`);
  }
  if (shape === null || !shape.every((d) => typeof d === 'number' && Number.isInteger(d))) {
    const actual = shape !== null ? `[${shape.map((d) => (typeof d === 'string' ? JSON.stringify(d) : String(d))).join(', ')}]` : describe(given);
    throw new TypeError(`${fn}: ${name}.shape is ${actual}, expected an array of ${labels.length} integers ${fmtShape(labels)}`);
  }
  checkShape(fn, name, shape, expected, labels, note);
  return { name, shape, data, half };
}

/** A tensor's shape (integers, read already) against the expected one (null: any size >= 1;
 *  labels name each axis): a RangeError in the one wording every tensor argument gets. */
export function checkShape(fn, name, shape, expected, labels, note) {
  const expectText = fmtShape(expected.map((e, i) => (e === null ? labels[i] : e)));
  if (shape.length !== expected.length) {
    throw new RangeError(`${fn}: ${name}.shape is ${fmtShape(shape)}, expected ${expectText} (${labels.length} dimensions ${fmtShape(labels)}${note ? `; ${note}` : ''})`);
  }
  shape.forEach((d, i) => {
    if (d < 1) throw new RangeError(`${fn}: ${name}.shape is ${fmtShape(shape)}, expected ${expectText}; ${labels[i]} is ${d}, expected >= 1`);
    if (expected[i] !== null && d !== expected[i]) {
      throw new RangeError(`${fn}: ${name}.shape is ${fmtShape(shape)}, expected ${expectText} (${labels[i]} must be ${expected[i]}${note ? `; ${note}` : ''})`);
    }
  });
}

// A checked tensor's data as the kernels take it: half-precision bits widened exactly (by
// integer operations, so every backend gets the same float32 bits), else the data itself.
// keepHalf: the bits as a HalfBits instead, for a backend that widens them in C where they land.
export function widenTensor({ data, half }, keepHalf = false) {
  if (half === undefined) return data;
  const bits = new Uint16Array(typedArrayBuffer(data), typedArrayByteOffset(data), typedArrayLength(data));
  return keepHalf ? new HalfBits(bits, half) : widenHalf(bits, half);
}

// After every argument has been read (no caller code runs from here to the copy): the data's
// real length against its shape.
export function checkLength(fn, { name, shape, data }, gpu = undefined) {
  const count = shape.reduce((a, b) => a * b, 1);
  if (gpu !== undefined && gpu.owns(data)) {
    gpu.check(fn, name, data, count);
    return;
  }
  const length = typedArrayLength(data);
  if (count !== length) {
    throw new RangeError(`${fn}: ${name}.shape is ${fmtShape(shape)} (${count} elements) but ${name}.data has ${length} elements`);
  }
}

// ---------------------------------------------------------------------------------------------
