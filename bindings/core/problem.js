// Problems: the validated dimensions, options and tensor shapes of one call, and the problem
// description (a BigInt64Array) the C side reads (bindings/c/problem_desc.h).
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import {
  BACKWARD_KEYS, checkLength, FORWARD_KEYS, positiveInteger, PROBLEM_KEYS, readArgs, readLevelStartIndex, readOptions,
  readSpatialShapes, readTensor, widenTensor,
} from './args.js';
import { OPTIONS, optionNumber } from './options.js';
import { VALUE_DTYPES } from './half.js';

// What the kernels write: prepare() touches these up front.
/** The slots of the problem description's header, then 2 * N_l spatial shapes (H, W) and N_l
 *  level starts; bindings/c/problem_desc.h's MSDA_DESC_* are the same (tests/js/desc.test.js). */
export const DESC = Object.freeze({
  batch: 0, numQueries: 1, numHeads: 2, channels: 3, numLevels: 4, numPoints: 5, valueLength: 6,
  valueLayout: 7, locationsLayout: 8, alignCorners: 9, padding: 10, threads: 11, valueDtype: 12, header: 13,
});

/** Writes into desc (DESC.valueDtype: a VALUE_DTYPES number) the dtype value is handed to the kernels in: 'float32', or the half dtype of
 *  bits the kernels widen as they read them (core/half.js, halfRows). */
export function describeValueDtype(desc, dtype) {
  desc[DESC.valueDtype] = BigInt(VALUE_DTYPES.indexOf(dtype));
}

export const OUTPUTS = ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'];

// Which tensors each kind of call needs, in heap order.
export const TENSORS = {
  forward: ['value', 'samplingLocations', 'attentionWeights', 'output'],
  backward: ['gradOutput', 'value', 'samplingLocations', 'attentionWeights', 'gradValue', 'gradSamplingLocations',
    'gradAttentionWeights'],
  both: ['value', 'samplingLocations', 'attentionWeights', 'gradOutput', 'output', 'gradValue',
    'gradSamplingLocations', 'gradAttentionWeights'],
};

export function makeProblem(dims, options) {
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
  const desc = new BigInt64Array(DESC.header + 3 * NL);
  const slots = {
    batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L,
    threads: options.threads ?? 1, valueDtype: 0,
  };
  // Each option's value as its number (core/options.js), in its slot.
  for (const o of OPTIONS) slots[o.desc] = optionNumber(o, options[o.name]);
  for (const [name, v] of Object.entries(slots)) desc[DESC[name]] = BigInt(v);
  [...shapes.flat(), ...starts].forEach((v, i) => { desc[DESC.header + i] = BigInt(v); });
  return {
    batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L,
    spatialShapes: shapes.map((s) => s.slice()), levelStartIndex: starts.slice(), ...options,
    shapes: shapeOf, desc,
  };
}

export function problemFromOptions(fn, given) {
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
// once here, so what was checked is what gets copied). The options: backward (the arguments of a
// backward call: gradOutput too); dataKinds (readTensor's kinds: the reference, reference.js,
// also takes float64 tensors); gpu (readTensor's reader of GPU tensors: the WebGPU backend);
// keepHalf (half-precision inputs come back as HalfBits, core/half.js, for the backend to widen
// in C, bindings/core/backend.js, not widened here).
export function problemFromTensors(fn, given, { backward = false, dataKinds = undefined, gpu = undefined, keepHalf = false } = {}) {
  const args = readArgs(fn, given, backward ? BACKWARD_KEYS : FORWARD_KEYS);
  const options = readOptions(fn, args);
  const shapes = readSpatialShapes(fn, args.spatialShapes);
  const { starts, total: L } = readLevelStartIndex(fn, args.levelStartIndex, shapes);
  const tensors = [];
  const { B, Q, H, C, P } = readShapes(options, L, shapes.length, backward, (name, expected, labels, note) => {
    const t = readTensor(fn, name, args[name], expected, labels, note, dataKinds, gpu);
    tensors.push(t);
    return t.shape;
  });
  const inputs = {};
  for (const t of tensors) {
    checkLength(fn, t, gpu);
    inputs[t.name] = widenTensor(t, keepHalf);
  }
  const problem = makeProblem({ batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, shapes, starts,
    valueLength: L }, options);
  return { problem, inputs };
}

/**
 * The input tensors' shapes against each other and the options (L = the sum of H*W, NL levels),
 * in order: value, samplingLocations, attentionWeights and, withGradOutput, gradOutput. `read(name,
 * expected, labels, note)` reads one tensor, checks its shape against `expected` (null: any size
 * >= 1; checkShape in core/args.js words it) and returns the shape. Returns the problem's sizes.
 * The JS API, the reference, the WebGPU backend and the tfjs op (bindings/tfjs/op.js) all derive
 * the sizes here.
 */
export function readShapes(options, L, NL, withGradOutput, read) {
  const blnc = options.valueLayout === 'BLNC';
  const v = read('value', blnc ? [null, L, null, null] : [null, null, L, null],
    blnc ? ['B', 'L', 'N_h', 'C_h'] : ['B', 'N_h', 'L', 'C_h'], `L = ${L} is the sum of H*W over spatialShapes`);
  const B = v[0], H = blnc ? v[2] : v[1], C = v[3];
  const note = `B and N_h from value, N_l = ${NL} from spatialShapes`;
  let Q, P;
  if (options.samplingLocationsLayout === 'BQHLP2') {
    const s = read('samplingLocations', [B, null, H, NL, null, 2], ['B', 'N_q', 'N_h', 'N_l', 'N_p', 2], note);
    Q = s[1]; P = s[4];
  } else {
    const s = read('samplingLocations', [B, 2, null, H, NL, null], ['B', 2, 'N_q', 'N_h', 'N_l', 'N_p'], note);
    Q = s[2]; P = s[5];
  }
  read('attentionWeights', [B, Q, H, NL, P], ['B', 'N_q', 'N_h', 'N_l', 'N_p'],
    'B, N_q, N_h, N_l and N_p from value and samplingLocations');
  if (withGradOutput) read('gradOutput', [B, Q, H * C], ['B', 'N_q', 'N_h*C_h'], 'the shape of forward\'s output');
  return { B, Q, H, C, P };
}

export const elementsOf = (shape) => shape.reduce((a, b) => a * b, 1);
export const exactElementsOf = (shape) => shape.reduce((a, b) => a * BigInt(b), 1n);
