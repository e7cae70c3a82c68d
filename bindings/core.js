// ms-deform-attn: multi-scale deformable attention, forward and backward, in WebAssembly (SIMD
// or scalar) or the native Node addon, behind one API. What is computed: SEMANTICS.md.
//
// The shared core, imported by both entries (browser.js, node.js) and by nothing environment
// specific: it validates arguments and names errors, turns them into a problem description, and
// moves tensors in and out through a backend store (loader.js for wasm, native.js for the addon).
// How files are read and workers started comes from the entry's `platform` (createApi).
// Every call goes through a store's run(), the one place that calls C: from Prepared#_run, or
// from streamForward (the copying forward on wasm, a window at a time).

import { describe, loadWasm, simdSupported, WASM_MAX_BYTES, wasmBytesNeeded } from './loader.js';
import { checkThreadsOption, loadThreadedWasm, resolveThreads } from './threads.js';

export { simdSupported };

// Node 20 may lack Symbol.dispose; Node's own polyfill uses this registered symbol.
export const DISPOSE = Symbol.dispose ?? Symbol.for('nodejs.dispose');

const VALUE_LAYOUTS = ['BLNC', 'BNLC'];
const LOCATION_LAYOUTS = ['BQHLP2', 'B2QHLP'];
const PADDING_MODES = ['zeros', 'border'];

/** Defaults of the reference API. */
export const DEFAULTS = Object.freeze({
  valueLayout: 'BLNC',
  samplingLocationsLayout: 'BQHLP2',
  alignCorners: false,
  paddingMode: 'zeros',
});

// threads: how many threads the native library (or a threads-enabled wasm module) may use;
// results are bit-for-bit the same for any count. The single-threaded modules run on one.
const OPTION_KEYS = [...Object.keys(DEFAULTS), 'threads'];
const PROBLEM_KEYS = ['batch', 'numQueries', 'numHeads', 'channels', 'numPoints', 'spatialShapes', 'levelStartIndex',
  ...OPTION_KEYS];
const FORWARD_KEYS = ['value', 'spatialShapes', 'levelStartIndex', 'samplingLocations', 'attentionWeights',
  ...OPTION_KEYS];
const BACKWARD_KEYS = ['gradOutput', ...FORWARD_KEYS];

// What the kernels write: prepare() touches these up front.
const OUTPUTS = ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'];

// Which tensors each kind of call needs, in heap order.
const TENSORS = {
  forward: ['value', 'samplingLocations', 'attentionWeights', 'output'],
  backward: ['gradOutput', 'value', 'samplingLocations', 'attentionWeights', 'gradValue', 'gradSamplingLocations',
    'gradAttentionWeights'],
  both: ['value', 'samplingLocations', 'attentionWeights', 'gradOutput', 'output', 'gradValue',
    'gradSamplingLocations', 'gradAttentionWeights'],
};

// ---------------------------------------------------------------------------------------------
// Reading arguments. Caller code (getters, Proxies, a resizable buffer shrunk by a getter on a
// later argument) runs only while arguments are read: each is read once, into plain values or
// copies, and everything is checked on those. Tensor data stays the caller's typed array; its
// kind and length come from the TypedArray intrinsics (not from properties a caller can
// redefine), and its length is taken only after every argument has been read.

const TYPED_ARRAY = Object.getPrototypeOf(Int8Array.prototype);
const intrinsic = (key) => Object.getOwnPropertyDescriptor(TYPED_ARRAY, key).get;
const TYPED_ARRAY_KIND = intrinsic(Symbol.toStringTag);
const TYPED_ARRAY_LENGTH = intrinsic('length');
const TYPED_ARRAY_BUFFER = intrinsic('buffer');
const TYPED_ARRAY_BYTE_OFFSET = intrinsic('byteOffset');

/** 'Float32Array', 'Uint8Array', ... for a real typed array (whatever its properties say), else undefined. */
const typedArrayKind = (x) => TYPED_ARRAY_KIND.call(x);
/** Its real element count (0 once its buffer is detached or shrunk below it). */
const typedArrayLength = (x) => TYPED_ARRAY_LENGTH.call(x);
const typedArrayBuffer = (x) => TYPED_ARRAY_BUFFER.call(x);

/** Elements [start, start + length) of a checked Float32Array, as a view of its buffer (no method
 *  of the caller's array runs: its subarray would consult its constructor). */
function part(data, start, length) {
  if (start === 0 && length === typedArrayLength(data)) return data;
  return new Float32Array(typedArrayBuffer(data), TYPED_ARRAY_BYTE_OFFSET.call(data) + 4 * start, length);
}

// An Array's length (read once) or a typed array's real length; null for anything else. Callers
// bound it before copyItems: a sparse Array or a Proxy can claim 2^32 - 1 items, and copying that
// many aborts Node (V8's fatal "invalid size" error), which no try/catch can stop.
function listLength(x) {
  if (Array.isArray(x)) return x.length;
  if (typedArrayKind(x) !== undefined) return typedArrayLength(x);
  return null;
}

// A copy of the first n items, each read once.
function copyItems(x, n) {
  const items = [];
  for (let i = 0; i < n; i++) items.push(x[i]);
  return items;
}

/** The most levels spatialShapes may have: far past any model, and every list built from them stays small. */
const MAX_LEVELS = 2 ** 24;

// Validation helpers: TypeError for the wrong kind of thing, RangeError for wrong sizes/values.

const fmtShape = (s) => `[${Array.from(s).join(', ')}]`;

// The named arguments, each read once (a getter or Proxy trap runs once per argument).
function readArgs(fn, args, allowed) {
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw new TypeError(`${fn}: expected an object of named arguments, got ${describe(args)}`);
  }
  for (const key of Object.keys(args)) {
    if (!allowed.includes(key)) {
      throw new TypeError(`${fn}: unknown argument '${key}', expected one of ${allowed.join(', ')}`);
    }
  }
  const plain = {};
  for (const key of allowed) plain[key] = args[key];
  return plain;
}

function positiveInteger(fn, name, x) {
  if (typeof x !== 'number' || !Number.isInteger(x)) {
    throw new TypeError(`${fn}: ${name} is ${describe(x)}, expected a positive integer`);
  }
  if (x < 1 || !Number.isSafeInteger(x)) throw new RangeError(`${fn}: ${name} is ${x}, expected an integer >= 1`);
  return x;
}

function readOptions(fn, args) {
  const o = { ...DEFAULTS };
  for (const [key, allowed] of [['valueLayout', VALUE_LAYOUTS], ['samplingLocationsLayout', LOCATION_LAYOUTS],
    ['paddingMode', PADDING_MODES]]) {
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
  if (args.alignCorners !== undefined) {
    if (typeof args.alignCorners !== 'boolean') {
      throw new TypeError(`${fn}: alignCorners is ${describe(args.alignCorners)}, expected true or false`);
    }
    o.alignCorners = args.alignCorners;
  }
  // undefined: the backend's own count, init's `threads` (see Prepared).
  o.threads = args.threads === undefined ? undefined : positiveInteger(fn, 'threads', args.threads);
  if (o.threads > 2 ** 31 - 1) throw new RangeError(`${fn}: threads is ${o.threads}, expected at most ${2 ** 31 - 1}`);
  return o;
}

const isTensorObject = (x) => x !== null && typeof x === 'object' && !Array.isArray(x) && typedArrayKind(x) === undefined
  && !(x instanceof DataView) && 'data' in x;

// A { data, shape } tensor of integers, read once: { items, shape } (shape null when not given).
// `tooMany(n)`: the RangeError for data of n entries, thrown before they are copied (or null).
function readIntegerTensor(fn, name, x, want, tooMany) {
  const data = x.data;
  const shapeValue = x.shape;
  const n = listLength(data);
  if (n !== null && tooMany(n)) throw tooMany(n);
  const dims = shapeValue === undefined ? null : listLength(shapeValue);
  if (dims > 16) throw new RangeError(`${fn}: ${name}.shape has ${dims} dimensions, expected ${fmtShape(want(n))}`);
  return { data, items: n === null ? null : copyItems(data, n), shape: dims === null ? null : copyItems(shapeValue, dims), shapeValue };
}

// Integer items (numbers or BigInts, read once already) checked and turned into numbers.
function integers(fn, name, items) {
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
function integerTensor(fn, name, x, want, what, tooMany) {
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
function integerList(fn, name, x, what, tooMany) {
  if (isTensorObject(x)) return integerTensor(fn, name, x, (n) => [n], what, tooMany);
  const n = x instanceof DataView ? null : listLength(x);
  if (n === null) throw new TypeError(`${fn}: ${name} is ${describe(x)}, expected ${what}`);
  if (tooMany(n)) throw tooMany(n);
  return integers(fn, name, copyItems(x, n));
}

function readSpatialShapes(fn, x) {
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

function readLevelStartIndex(fn, x, shapes) {
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

// A { data: Float32Array, shape } tensor whose shape must match `expected` (numbers, or null
// for a dimension still to be learnt). Returns a copy of the shape and the data array; the
// data's length is checked by checkLength once every argument has been read. `kinds`: the data
// types accepted (the float64 reference also takes Float64Array).
// `gpu`: a backend's reader of GPU tensors ({ buffer, shape, byteOffset? }, bindings/webgpu/),
// called with a tensor that has no data; it returns what it read, checked later by checkLength.
function readTensor(fn, name, t, expected, labels, note, kinds = ['Float32Array'], gpu = undefined) {
  const want = `{ data: Float32Array, shape: ${fmtShape(labels)} }${gpu ? ` or { buffer: GPUBuffer, shape: ${fmtShape(labels)}, byteOffset? }` : ''}`;
  if (t === null || typeof t !== 'object' || Array.isArray(t) || typedArrayKind(t) !== undefined || t instanceof DataView) {
    throw new TypeError(`${fn}: ${name} is ${t === undefined ? 'missing' : describe(t)}, expected ${want}`);
  }
  let data = t.data;
  const onGpu = gpu !== undefined && data === undefined;
  if (onGpu) data = gpu.read(fn, name, t);
  const shapeValue = t.shape;
  const given = shapeValue !== undefined ? shapeValue : t.dims;
  if (!onGpu && !kinds.includes(typedArrayKind(data))) {
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
  return { name, shape, data };
}

// After every argument has been read (no caller code runs from here to the copy): the data's
// real length against its shape.
function checkLength(fn, { name, shape, data }, gpu = undefined) {
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
// Problems: the validated dimensions, options and tensor shapes of one call.

function makeProblem(dims, options) {
  const { batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, shapes, starts, valueLength: L } = dims;
  const NL = shapes.length;
  const value = options.valueLayout === 'BLNC' ? [B, L, H, C] : [B, H, L, C];
  const locations = options.samplingLocationsLayout === 'BQHLP2' ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P];
  const weights = [B, Q, H, NL, P];
  const output = [B, Q, H * C];
  const shapeOf = {
    value, samplingLocations: locations, attentionWeights: weights, output, gradOutput: output,
    gradValue: value, gradSamplingLocations: locations, gradAttentionWeights: weights,
  };
  const desc = new BigInt64Array(12 + 3 * NL);
  [B, Q, H, C, NL, P, L,
    VALUE_LAYOUTS.indexOf(options.valueLayout), LOCATION_LAYOUTS.indexOf(options.samplingLocationsLayout),
    options.alignCorners ? 1 : 0, PADDING_MODES.indexOf(options.paddingMode), options.threads ?? 1,
    ...shapes.flat(), ...starts].forEach((v, i) => { desc[i] = BigInt(v); });
  return {
    batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L,
    spatialShapes: shapes.map((s) => s.slice()), levelStartIndex: starts.slice(), ...options,
    shapes: shapeOf, desc,
  };
}

function problemFromOptions(fn, given) {
  const args = readArgs(fn, given, PROBLEM_KEYS);
  const dims = {};
  for (const key of ['batch', 'numQueries', 'numHeads', 'channels', 'numPoints']) {
    dims[key] = positiveInteger(fn, key, args[key]);
  }
  const options = readOptions(fn, args);
  dims.shapes = readSpatialShapes(fn, args.spatialShapes);
  const { starts, total } = readLevelStartIndex(fn, args.levelStartIndex, dims.shapes);
  dims.starts = starts;
  dims.valueLength = total;
  return makeProblem(dims, options);
}

// Validates forward/backward arguments; returns the problem and the input tensors' data (read
// once here, so what was checked is what gets copied). The reference (reference.js) validates
// with this too, passing dataKinds to also take float64 tensors.
export function problemFromTensors(fn, given, withGradOutput, dataKinds = undefined, gpu = undefined) {
  const args = readArgs(fn, given, withGradOutput ? BACKWARD_KEYS : FORWARD_KEYS);
  const options = readOptions(fn, args);
  const shapes = readSpatialShapes(fn, args.spatialShapes);
  const { starts, total: L } = readLevelStartIndex(fn, args.levelStartIndex, shapes);
  const NL = shapes.length;
  const blnc = options.valueLayout === 'BLNC';
  const lNote = `L = ${L} is the sum of H*W over spatialShapes`;
  const tensors = [];
  const value = readTensor(fn, 'value', args.value, blnc ? [null, L, null, null] : [null, null, L, null],
    blnc ? ['B', 'L', 'N_h', 'C_h'] : ['B', 'N_h', 'L', 'C_h'], lNote, dataKinds, gpu);
  tensors.push(value);
  const v = value.shape;
  const B = v[0], H = blnc ? v[2] : v[1], C = v[3];
  const note = `B and N_h from value, N_l = ${NL} from spatialShapes`;
  let Q, P;
  if (options.samplingLocationsLayout === 'BQHLP2') {
    const t = readTensor(fn, 'samplingLocations', args.samplingLocations, [B, null, H, NL, null, 2],
      ['B', 'N_q', 'N_h', 'N_l', 'N_p', 2], note, dataKinds, gpu);
    Q = t.shape[1]; P = t.shape[4]; tensors.push(t);
  } else {
    const t = readTensor(fn, 'samplingLocations', args.samplingLocations, [B, 2, null, H, NL, null],
      ['B', 2, 'N_q', 'N_h', 'N_l', 'N_p'], note, dataKinds, gpu);
    Q = t.shape[2]; P = t.shape[5]; tensors.push(t);
  }
  tensors.push(readTensor(fn, 'attentionWeights', args.attentionWeights, [B, Q, H, NL, P], ['B', 'N_q', 'N_h', 'N_l', 'N_p'],
    'B, N_q, N_h, N_l and N_p from value and samplingLocations', dataKinds, gpu));
  if (withGradOutput) {
    tensors.push(readTensor(fn, 'gradOutput', args.gradOutput, [B, Q, H * C], ['B', 'N_q', 'N_h*C_h'],
      'the shape of forward\'s output', dataKinds, gpu));
  }
  const inputs = {};
  for (const t of tensors) {
    checkLength(fn, t, gpu);
    inputs[t.name] = t.data;
  }
  const problem = makeProblem({ batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, shapes, starts,
    valueLength: L }, options);
  return { problem, inputs };
}

const elementsOf = (shape) => shape.reduce((a, b) => a * b, 1);
const exactElementsOf = (shape) => shape.reduce((a, b) => a * BigInt(b), 1n);

// wasmBytesNeeded, exact (BigInt) where doubles would round (past 2^53 bytes): each tensor's
// elements split into whole 2^20-element blocks (already aligned) and a rest that
// wasmBytesNeeded pads as it pads any tensor.
function exactWasmBytes(descCount, layout) {
  const BLOCK = 2n ** 20n;
  const none = wasmBytesNeeded(descCount, []);
  let bytes = BigInt(none);
  for (const { elements } of layout) {
    const rest = elements % BLOCK;
    bytes += 4n * (elements - rest) + BigInt(wasmBytesNeeded(descCount, [{ elements: Number(rest) }]) - none);
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Prepared problems: buffers that live in the backend (the wasm heap) across calls.

// A problem without its own `threads` runs on the backend's.
function defaultThreads(backend, problem) {
  if (problem.threads === undefined) {
    problem.threads = backend.threads ?? 1;
    problem.desc[11] = BigInt(problem.threads);
  }
}

// The Error for a C status that came back: { status, code, message } from a store's run().
function callError(op, failure) {
  const err = new Error(`${op}: ${failure.message} (${failure.code})`);
  err.code = failure.code;
  err.status = failure.status;
  return err;
}

// The copying forward on wasm streams the per-query tensors through the heap: each batch's value
// goes in whole (any query may sample any pixel), then a window of queries at a time their
// locations and weights go in, are computed, and their output comes out while all three are
// still in cache, instead of a pass over main memory for each. A query's output depends on its
// own samples alone, so the bits are those of one call over all queries.
//
// Windows: with one query per pixel (the encoder: N_q = sum of H_l * W_l), a band of image rows
// on every level at once, as the kernel's own walk over the whole problem (src/kernel.c, the
// banded walk): band k of `bands` takes rows [ceil(k H_l / bands), ceil((k + 1) H_l / bands)) of
// each level, one contiguous range of queries per level, and bands = ceil(N_q / FORWARD_WINDOW)
// keeps a window near FORWARD_WINDOW queries. Index order would walk each level's queries over
// the image in turn and read the value rows again for each (the encoder's copying forward
// measured 40 % over a prepared call that way). Other problems, and bands wider than two windows
// (levels of few rows): FORWARD_WINDOW queries in index order, the kernel's walking block
// (MSDA_BLOCK), whose order whole windows keep.
export const FORWARD_WINDOW = 1024;

const bandStart = (k, n, d) => Math.min(n, Math.ceil((k * n) / d));   // products far below 2^53
const windowQueries = (ranges) => ranges.reduce((n, [q0, q1]) => n + q1 - q0, 0);

/** The windows of a streamed forward: each a list of [first, end) query ranges. */
export function forwardWindows(problem) {
  const { numQueries: Q, valueLength: L, spatialShapes, levelStartIndex } = problem;
  const windows = [];
  if (Q !== L) {
    for (let q = 0; q < Q; q += FORWARD_WINDOW) windows.push([[q, Math.min(Q, q + FORWARD_WINDOW)]]);
    return windows;
  }
  const bands = Math.ceil(L / FORWARD_WINDOW);
  for (let k = 0; k < bands; k++) {
    const ranges = [];
    spatialShapes.forEach(([h, w], l) => {
      const y0 = bandStart(k, h, bands), y1 = bandStart(k + 1, h, bands);
      if (y1 > y0) ranges.push([levelStartIndex[l] + y0 * w, levelStartIndex[l] + y1 * w]);
    });
    if (ranges.length > 0) windows.push(ranges);
    // Levels of few rows make wide bands (a 1 x n level is one band): index order then, which
    // keeps the heap to one window.
    if (windowQueries(ranges) > 2 * FORWARD_WINDOW) return forwardWindows({ ...problem, valueLength: -1 });
  }
  return windows;
}

/** The most queries a window holds (a loop: Math.max(...) over 10^5 windows overflows the stack). */
export function largestWindow(windows) {
  let most = 0;
  for (const ranges of windows) most = Math.max(most, windowQueries(ranges));
  return most;
}

function streamForward(backend, problem, inputs) {
  const { batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L } = problem;
  const windows = forwardWindows(problem);
  const most = largestWindow(windows);
  const perValue = L * H * C, perLocation = H * NL * P, perOutput = H * C;
  // Each window is a problem of its own: batch 1, its queries (as many as its ranges hold).
  const desc = problem.desc.slice();
  desc[0] = 1n;
  desc[1] = BigInt(most);
  const store = backend.allocate(desc, [
    { name: 'value', elements: perValue },
    { name: 'samplingLocations', elements: most * perLocation * 2 },
    { name: 'attentionWeights', elements: most * perLocation },
    { name: 'output', elements: most * perOutput },
  ]);
  try {
    const output = backend.resultArray(B * Q * perOutput);
    const planar = problem.samplingLocationsLayout === 'B2QHLP';
    const locations = inputs.samplingLocations;
    let queries = most;
    for (let b = 0; b < B; b++) {
      store.load('value', part(inputs.value, b * perValue, perValue));
      for (const ranges of windows) {
        const n = windowQueries(ranges);
        if (n !== queries) {
          desc[1] = BigInt(queries = n);
          store.describe(desc);
        }
        let at = 0;   // queries of the window placed so far
        for (const [q, end] of ranges) {
          const m = end - q;
          if (planar) {   // [B, 2, Q, ...]: the window's x plane, then its y plane
            store.load('samplingLocations', part(locations, ((2 * b) * Q + q) * perLocation, m * perLocation), at * perLocation);
            store.load('samplingLocations', part(locations, ((2 * b + 1) * Q + q) * perLocation, m * perLocation),
              (n + at) * perLocation);
          } else {
            store.load('samplingLocations', part(locations, (b * Q + q) * 2 * perLocation, m * 2 * perLocation),
              at * 2 * perLocation);
          }
          store.load('attentionWeights', part(inputs.attentionWeights, (b * Q + q) * perLocation, m * perLocation),
            at * perLocation);
          at += m;
        }
        const failure = store.run('forward');
        if (failure !== null) throw callError('forward', failure);
        at = 0;
        for (const [q, end] of ranges) {
          store.takeInto('output', output, (b * Q + q) * perOutput, (end - q) * perOutput, at * perOutput);
          at += end - q;
        }
      }
    }
    return output;
  } finally {
    store.free();
  }
}

/**
 * A problem with its tensors allocated once, for repeated calls without copies: write the
 * inputs into the views (`prepared.value.set(...)`), call forward()/backward(), read the
 * outputs from the views. Views are re-created after the wasm memory grows, so read them from
 * the object each time rather than keeping them. dispose() frees the buffers.
 */
export class Prepared {
  constructor(backend, problem, mode) {
    defaultThreads(backend, problem);
    this.problem = problem;
    this.mode = mode;
    this.backend = backend.name;
    this.shapes = {};
    const layout = TENSORS[mode].map((name) => {
      this.shapes[name] = problem.shapes[name].slice();
      return { name, elements: elementsOf(problem.shapes[name]) };
    });
    this._store = backend.allocate(problem.desc, layout);
  }

  _view(name) {
    if (this._store === null) throw new Error(`ms-deform-attn: ${name} of a disposed prepared problem`);
    if (!(name in this.shapes)) {
      throw new Error(`ms-deform-attn: ${name} is not allocated by a problem prepared for '${this.mode}'`);
    }
    return this._store.view(name);
  }

  get value() { return this._view('value'); }
  get samplingLocations() { return this._view('samplingLocations'); }
  get attentionWeights() { return this._view('attentionWeights'); }
  get gradOutput() { return this._view('gradOutput'); }
  get output() { return this._view('output'); }
  get gradValue() { return this._view('gradValue'); }
  get gradSamplingLocations() { return this._view('gradSamplingLocations'); }
  get gradAttentionWeights() { return this._view('gradAttentionWeights'); }

  /** { data, shape } over the heap view of one tensor. */
  tensor(name) {
    const data = this._view(name);
    return { data, shape: this.shapes[name].slice() };
  }

  // Every call but the copying forward on wasm (streamForward) calls C from here.
  _run(op) {
    if (this._store === null) throw new Error(`ms-deform-attn: ${op} on a disposed prepared problem`);
    if (this.mode !== 'both' && this.mode !== op) {
      throw new Error(`ms-deform-attn: ${op} on a problem prepared for '${this.mode}'`);
    }
    const failure = this._store.run(op);
    if (failure !== null) throw callError(op, failure);
  }

  /** Runs forward on the current inputs; returns the output tensor (a view). */
  forward() {
    this._run('forward');
    return this.tensor('output');
  }

  /** Runs backward on the current inputs and gradOutput; returns the gradient tensors (views). */
  backward() {
    this._run('backward');
    return {
      gradValue: this.tensor('gradValue'),
      gradSamplingLocations: this.tensor('gradSamplingLocations'),
      gradAttentionWeights: this.tensor('gradAttentionWeights'),
    };
  }

  dispose() {
    if (this._store !== null) this._store.free();
    this._store = null;
    if (this._owner !== undefined) this._owner._prepared.delete(this);
  }

  /** `using p = msda.prepare(...)` disposes it at the end of the block. */
  [DISPOSE]() {
    this.dispose();
  }

  get disposed() {
    return this._store === null;
  }
}

/** The API returned by init(): forward, backward and prepare on one backend. */
export class Msda {
  constructor(backend, release) {
    this._backend = backend;
    // Called once by dispose(): gives this instance's share of the backend back (createApi).
    this._release = release;
    // Live prepared problems, freed by dispose().
    this._prepared = new Set();
    /** Threads each call uses unless it passes its own `threads` (init's option; 1 without threads). */
    this.threads = backend.threads ?? 1;
    /** 'wasm' (SIMD module), 'wasm-scalar' or 'native'. */
    this.backend = backend.name;
    /** True when vector code runs: the SIMD128 wasm module, or the addon's SSE2 (or wider) kernels. */
    this.simd = backend.simd;
    /** The vector ISA the kernels run: 'wasm-simd128', 'sse2' (the addon on x86), ... or 'scalar'. */
    this.isa = backend.isa;
    /**
     * Sizes past which calls are a RangeError before anything is allocated: tensorBytes for one
     * tensor; callBytes (wasm) for one call's or one prepared problem's tensors together, with
     * nothing else in the heap (null natively: the machine's memory decides).
     */
    this.limits = backend.memory
      ? { tensorBytes: 4 * backend.maxTensorElements, callBytes: backend.maxCallBytes }
      : { tensorBytes: backend.maxElements === undefined ? null : 4 * backend.maxElements, callBytes: null };
    /** Wasm backends: the module's memory and the allocator's in-use bytes (for leak checks). */
    this.wasm = backend.memory
      ? { memory: backend.memory, heapInUse: () => backend.heapInUse() }
      : null;
  }

  /**
   * Checked before anything is allocated. Wasm: the bytes the call's heap block needs against
   * what a wasm32 heap can give one call, then each tensor against PTRDIFF_MAX bytes (the C
   * library's limit on wasm32). Native: each tensor against the longest Float32Array the
   * runtime makes.
   */
  _checkSize(fn, problem, mode) {
    const b = this._backend;
    const tensors = TENSORS[mode].map((name) => ({ name, elements: exactElementsOf(problem.shapes[name]) }));
    if (b.memory) {
      const bytes = exactWasmBytes(problem.desc.length, tensors);
      if (bytes > BigInt(b.maxCallBytes)) {
        throw new RangeError(`${fn}: this call needs ${bytes} bytes of WebAssembly memory, more than the ${b.maxCallBytes} bytes a wasm32 heap can give one call (4 GiB less ${WASM_MAX_BYTES - b.maxCallBytes} bytes of static data, C stack and allocator headers)`);
      }
      for (const { name, elements } of tensors) {
        if (elements > BigInt(b.maxTensorElements)) {
          throw new RangeError(`${fn}: ${name} needs ${4n * elements} bytes (${elements} elements), more than the ${4 * b.maxTensorElements} bytes (${b.maxTensorElements} elements) one tensor can span in wasm32`);
        }
      }
      return;
    }
    const { maxElements } = b;
    if (maxElements !== undefined) {
      for (const { name, elements } of tensors) {
        if (elements > BigInt(maxElements)) {
          throw new RangeError(`${fn}: ${name} needs ${4n * elements} bytes (${elements} elements), more than a Float32Array can hold here (${maxElements} elements)`);
        }
      }
    }
  }

  // A call asking for more threads than a wasm instance has runs on the ones it has (same bits):
  // say so once per backend rather than silently (native starts what a call asks for).
  _noteThreads(fn, problem) {
    const b = this._backend;
    const has = b.threads ?? 1;
    if (!b.memory || problem.threads === undefined || problem.threads <= has || b.threadsNoticed) return;
    b.threadsNoticed = true;
    console.warn(`ms-deform-attn: ${fn} asked for threads: ${problem.threads}, but this instance runs on ${has} `
      + `(init({ threads: ${problem.threads} }) starts more; results are the same bits either way). Said once.`);
  }

  // Inputs that are views of this heap (a prepared problem's tensors) are copied out first:
  // the allocation that follows may grow the memory, which detaches every view of its buffer.
  _detachFromHeap(inputs) {
    const heap = this._backend.memory?.buffer;
    if (heap === undefined) return;
    for (const [name, data] of Object.entries(inputs)) {
      if (typedArrayBuffer(data) === heap) inputs[name] = new Float32Array(data);
    }
  }

  // Every call starts here: a disposed instance refuses with a clear Error.
  _live(fn) {
    if (this._backend === null) throw new Error(`ms-deform-attn: ${fn} on a disposed instance (dispose() was called)`);
  }

  /**
   * Frees what this instance holds: its prepared problems, and its share of the backend (the
   * wasm heap and the threads' workers go when the last instance init() gave out is disposed).
   * Later calls throw. Idempotent.
   */
  dispose() {
    if (this._backend === null) return;
    for (const p of [...this._prepared]) p.dispose();
    this._backend = null;
    this.wasm = null;
    const release = this._release;
    this._release = undefined;
    if (release !== undefined) release();
  }

  /** `using msda = await init()` disposes it at the end of the block. */
  [DISPOSE]() {
    this.dispose();
  }

  get disposed() {
    return this._backend === null;
  }

  prepare(problemOptions, options = {}) {
    this._live('prepare');
    const modes = "{ mode?: 'forward' | 'backward' | 'both' }";
    if (options === null || typeof options !== 'object') throw new TypeError(`prepare: options is ${describe(options)}, expected ${modes}`);
    const { mode = 'both', ...rest } = options;   // each read once
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new TypeError(`prepare: unknown option '${unknown[0]}', expected mode`);
    const problem = problemFromOptions('prepare', problemOptions);
    this._live('prepare');   // again: a getter among the arguments may have disposed this instance
    if (!Object.hasOwn(TENSORS, mode)) throw new RangeError(`prepare: mode is ${describe(mode)}, expected 'forward', 'backward' or 'both'`);
    this._checkSize('prepare', problem, mode);
    this._noteThreads('prepare', problem);
    const prepared = new Prepared(this._backend, problem, mode);
    // The first call then finds its memory grown and its pages present (the copying calls skip
    // this: they overwrite their inputs and take fresh outputs anyway).
    prepared._store.prefault(OUTPUTS);
    prepared._owner = this;
    this._prepared.add(prepared);
    return prepared;
  }

  forward(args) {
    this._live('forward');
    const { problem, inputs } = problemFromTensors('forward', args, false);
    this._live('forward');   // again: a getter among the arguments may have disposed this instance
    this._checkSize('forward', problem, 'forward');
    this._noteThreads('forward', problem);
    this._detachFromHeap(inputs);
    defaultThreads(this._backend, problem);
    // On one thread: windows (streamForward). Threads split one kernel call among them instead
    // (each window would cost a fork and join).
    const b = this._backend;
    if (b.memory && Math.min(problem.threads, b.threads ?? 1) === 1) {
      return { data: streamForward(b, problem, inputs), shape: problem.shapes.output.slice() };
    }
    const p = new Prepared(this._backend, problem, 'forward');
    try {
      for (const [name, data] of Object.entries(inputs)) p._store.load(name, data);
      p._run('forward');
      return { data: p._store.take('output'), shape: p.shapes.output.slice() };
    } finally {
      p.dispose();
    }
  }

  backward(args) {
    this._live('backward');
    const { problem, inputs } = problemFromTensors('backward', args, true);
    this._live('backward');
    this._checkSize('backward', problem, 'backward');
    this._noteThreads('backward', problem);
    this._detachFromHeap(inputs);
    const p = new Prepared(this._backend, problem, 'backward');
    try {
      for (const [name, data] of Object.entries(inputs)) p._store.load(name, data);
      p._run('backward');
      const out = (name) => ({ data: p._store.take(name), shape: p.shapes[name].slice() });
      return {
        gradValue: out('gradValue'),
        gradSamplingLocations: out('gradSamplingLocations'),
        gradAttentionWeights: out('gradAttentionWeights'),
      };
    } finally {
      p.dispose();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// init: one backend per option set, shared by the instances init() gives out and freed when the
// last of them is disposed (so one caller's dispose() never breaks another's instance).

const INIT_KEYS = ['simd', 'wasmBinary', 'module', 'backend', 'addonPath', 'threads', 'wasmPaths', 'gpu', 'device'];

/** The `.code` of the Error thrown when the native addon cannot be used here (native.js). */
export const NATIVE_UNAVAILABLE = 'MSDA_NATIVE_UNAVAILABLE';

/** The files wasmPaths may place: the three modules, the threads' worker script and
 *  initWorker's worker (dist/msda-worker.js, remote-worker.js bundled on its own). */
export const PACKAGE_FILES = Object.freeze(['msda-simd.wasm', 'msda-scalar.wasm', 'msda-simd-threads.wasm',
  'threads-worker.js', 'msda-worker.js']);

/**
 * Checks init's wasmPaths and resolves it to a URL per file it covers, on the caller's thread
 * (relative URLs resolve against the page or worker that calls init, as fetch() would):
 *   a string or URL: a prefix, each file's URL is prefix + file name (as onnxruntime-web's);
 *   an object: file name -> URL for some of PACKAGE_FILES; the others stay beside the package.
 */
export function resolveWasmPaths(fn, wasmPaths, resolveUrl) {
  const urls = {};
  if (wasmPaths === undefined) return urls;
  const what = 'a URL prefix (string or URL) or an object from file name to URL';
  if (typeof wasmPaths === 'string' || wasmPaths instanceof URL) {
    for (const file of PACKAGE_FILES) urls[file] = resolveUrl(`${wasmPaths}${file}`, fn);
    return urls;
  }
  if (wasmPaths === null || typeof wasmPaths !== 'object' || Array.isArray(wasmPaths)) {
    throw new TypeError(`${fn}: wasmPaths is ${describe(wasmPaths)}, expected ${what}`);
  }
  for (const [file, url] of Object.entries(wasmPaths)) {
    if (!PACKAGE_FILES.includes(file)) {
      throw new TypeError(`${fn}: wasmPaths has the key '${file}', expected file names among ${PACKAGE_FILES.join(', ')}`);
    }
    if (typeof url !== 'string' && !(url instanceof URL)) {
      throw new TypeError(`${fn}: wasmPaths['${file}'] is ${describe(url)}, expected a URL (string or URL)`);
    }
    urls[file] = resolveUrl(String(url), fn);
  }
  return urls;
}

/**
 * The API over one platform (an entry's way of reading files and starting workers):
 *   { defaultUrl(file), resolveUrl(text, fn), fetchFile(url), hardwareThreads(),
 *     startThreadsWorker(url | undefined, name), loadNative(addonPath) }
 */
export function createApi(platform) {
  const shared = new Map();
  const sharedBySource = new WeakMap();

  // One Msda per call over the memoised backend; the backend is released with the last one.
  function acquire(memo, key, load) {
    let entry = memo.get(key);
    if (entry === undefined) {
      entry = { refs: 0, promise: load() };
      memo.set(key, entry);
      const forget = () => { if (memo.get(key) === entry) memo.delete(key); };
      entry.promise.catch(forget);
      entry.forget = forget;
    }
    const e = entry;
    e.refs++;
    return e.promise.then((backend) => new Msda(backend, () => {
      if (--e.refs === 0) {
        e.forget();
        if (backend.pool) backend.pool.terminate();
      }
    }), (err) => {
      e.refs--;
      throw err;
    });
  }

  function loadFile(urls, file) {
    return platform.fetchFile(urls[file] ?? platform.defaultUrl(file));
  }

  /**
   * Loads a backend and returns its API. Each call returns its own instance (dispose() it when
   * done); instances with the same options share one backend.
   *   simd: 'auto' (default) picks the SIMD module when the runtime validates SIMD128;
   *         true/false force the SIMD or scalar module.
   *   wasmBinary / module: the .wasm bytes or a compiled WebAssembly.Module to use instead of
   *         fetching/reading the file next to this package.
   *   wasmPaths: where the .wasm files and the threads' worker are served (resolveWasmPaths).
   *   backend: 'wasm' (default), 'wasm-scalar' (same as simd: false), 'native' (Node addon) or
   *         'auto' (native where the addon loads, else wasm).
   *   threads: a positive integer or 'auto' (this machine's CPUs), default 1: threads every call
   *         uses (bindings/threads.js). Wasm falls back to 1, with a console notice, where the
   *         runtime cannot (a page that is not cross-origin isolated); msda.threads says which.
   */
  function init(options = {}) {
    if (options === null || typeof options !== 'object') {
      return Promise.reject(new TypeError(`init: options is ${describe(options)}, expected an object`));
    }
    for (const key of Object.keys(options)) {
      if (!INIT_KEYS.includes(key)) {
        return Promise.reject(new TypeError(`init: unknown option '${key}', expected one of ${INIT_KEYS.join(', ')}`));
      }
    }
    const { simd = 'auto', wasmBinary, module, backend = 'wasm', addonPath } = options;
    if (simd !== 'auto' && simd !== true && simd !== false) {
      return Promise.reject(new TypeError(`init: simd is ${describe(simd)}, expected 'auto', true or false`));
    }
    if (!['wasm', 'wasm-scalar', 'native', 'auto', 'webgpu'].includes(backend)) {
      return Promise.reject(new RangeError(`init: backend is ${describe(backend)}, expected 'wasm', 'wasm-scalar', 'native', 'auto' or 'webgpu'`));
    }
    // The GPU only when asked for ('auto' never picks it): bindings/webgpu/, loaded on demand.
    if (backend === 'webgpu') {
      return import('./webgpu/backend.js').then((m) => m.initWebGPU({ gpu: options.gpu, device: options.device }));
    }
    if (options.gpu !== undefined || options.device !== undefined) {
      return Promise.reject(new TypeError(`init: ${options.gpu !== undefined ? 'gpu' : 'device'} is an option of backend: 'webgpu', not '${backend}'`));
    }
    let threads, urls;
    try {
      threads = checkThreadsOption(options.threads);
      urls = resolveWasmPaths('init', options.wasmPaths, platform.resolveUrl);
    } catch (e) {
      return Promise.reject(e);
    }
    if (backend === 'native') return initNative({ addonPath, threads });
    if (backend === 'auto') {
      // Native where the addon loads (Node), else wasm: the same bits either way.
      return initNative({ addonPath, threads }).catch((e) => {
        if (e?.code !== NATIVE_UNAVAILABLE) throw e;
        return init({ ...options, backend: 'wasm', addonPath: undefined });
      });
    }
    if (module !== undefined && !(module instanceof WebAssembly.Module)) {
      return Promise.reject(new TypeError(`init: module is ${describe(module)}, expected a WebAssembly.Module`));
    }
    if (wasmBinary !== undefined && !(wasmBinary instanceof ArrayBuffer || ArrayBuffer.isView(wasmBinary))) {
      return Promise.reject(new TypeError(`init: wasmBinary is ${describe(wasmBinary)}, expected an ArrayBuffer or Uint8Array`));
    }
    const source = module !== undefined ? module : wasmBinary;
    let useSimd = backend === 'wasm-scalar' ? false : simd;
    if (useSimd === 'auto') useSimd = simdSupported();
    if (useSimd === true && source === undefined && !simdSupported()) {
      return Promise.reject(new Error('init: simd is true but this runtime does not support WebAssembly SIMD128'));
    }
    const key = `wasm:${useSimd}:${threads ?? 1}:${PACKAGE_FILES.map((f) => urls[f] ?? '').join('\0')}`;
    const load = () => {
      const file = useSimd ? 'msda-simd.wasm' : 'msda-scalar.wasm';
      const loadPlain = () => loadWasm({ wasmBinary, module, source: () => loadFile(urls, file) });
      return resolveThreads(threads, platform.hardwareThreads)
        .then((n) => (n > 1
          ? loadThreadedWasm({
            threads: n, simd: useSimd, wasmBinary, module, loadPlain,
            threadsModule: () => loadFile(urls, 'msda-simd-threads.wasm'),
            startWorker: (name) => platform.startThreadsWorker(urls['threads-worker.js'], name),
          })
          : loadPlain()))
        .then((backend) => {
          if (platform.outputArray !== undefined) backend.outputArray = platform.outputArray;
          return backend;
        });
    };
    if (source !== undefined) {
      let perSource = sharedBySource.get(source);
      if (perSource === undefined) sharedBySource.set(source, (perSource = new Map()));
      return acquire(perSource, key, load);
    }
    return acquire(shared, key, load);
  }

  /** The native Node addon with the same API (Node only). */
  function initNative({ addonPath, threads } = {}) {
    try {
      checkThreadsOption(threads);
    } catch (e) {
      return Promise.reject(e);
    }
    const key = `native:${addonPath === undefined ? '' : String(addonPath)}\0${threads ?? 1}`;
    return acquire(shared, key, () => Promise.all([platform.loadNative(addonPath), resolveThreads(threads, platform.hardwareThreads)])
      .then(([b, n]) => {
        b.threads = n;
        return b;
      }));
  }

  return { init, initNative };
}
