// ms-deform-attn/tfjs's op: msDeformAttn and msDeformAttnBackward, a differentiable tfjs op over
// the instance bindings/tfjs/instance.js holds. Its options are read by the core's argument
// reader and its tensors' shapes by the core's readShapes (core/problem.js): the JS API's words.

import * as tf from '@tensorflow/tfjs-core';
import { checkShape, fmtShape as fmt, readArgs, readLevelStartIndex, readOptions as readCoreOptions, readSpatialShapes } from '../core/args.js';
import { readShapes } from '../core/problem.js';
import { typedArrayKind, typedArrayLength } from '../core/typed.js';
import { describe } from '../core/errors.js';
import { isTfjsWebGPU, runOnTfjsWebGPU } from '../webgpu/tfjs.js';
import { current, given } from './instance.js';

const OPTION_KEYS = ['spatialShapes', 'levelStartIndex', 'valueLayout', 'samplingLocationsLayout', 'alignCorners', 'paddingMode'];

// An integer list or (N_l, 2) table given as a tf.Tensor becomes the { data, shape } the core
// API reads (spatial shapes are tiny; reading them back is free).
function plainIntegers(x) {
  return x instanceof tf.Tensor ? { data: x.dataSync(), shape: x.shape } : x;
}

// Options checked once, up front, by the core's argument reader (the same messages as the JS
// API's), before any data is read back.
export function readOptions(fn, options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${fn}: options is ${describe(options)}, expected an object with at least spatialShapes`);
  }
  const plain = readArgs(fn, options, OPTION_KEYS, 'option');
  const o = readCoreOptions(fn, plain);
  delete o.threads;
  o.spatialShapes = readSpatialShapes(fn, plainIntegers(plain.spatialShapes));
  const { starts, total } = readLevelStartIndex(fn, plainIntegers(plain.levelStartIndex), o.spatialShapes);
  o.levelStartIndex = starts;
  o.valueLength = total;
  return o;
}

// A float32 tf.Tensor, or a nested array / Float32Array made into one (inside the caller's tidy).
export function asTensor(fn, name, x) {
  if (x instanceof tf.Tensor) {
    if (x.dtype !== 'float32') {
      throw new TypeError(`Argument '${name}' passed to '${fn}' must be float32 tensor, but got ${x.dtype} tensor`);
    }
    return x;
  }
  if (Array.isArray(x) || x instanceof Float32Array) return tf.tensor(x, undefined, 'float32');
  throw new TypeError(`Argument '${name}' passed to '${fn}' must be a Tensor or TensorLike, but got ${describe(x)}`);
}

// The three (with dy four) tensors' shapes against each other and the options, through the
// core's readShapes: the JS API's sizes and messages. Returns the problem's sizes.
function checkShapes(fn, o, tensors) {
  return readShapes(o, o.valueLength, o.spatialShapes.length, tensors.gradOutput !== undefined, (name, expected, labels, note) => {
    const shape = tensors[name].shape;
    checkShape(fn, name === 'gradOutput' ? 'dy' : name, shape, expected, labels, note);
    return shape;
  });
}

// Moving data. A tensor's values as a Float32Array without a copy where tfjs allows: dataSync()
// (tfjs-backend-cpu hands over its own array), or on tfjs-backend-wasm a view of its heap (its
// dataSync() would copy). The view is read at once, into this package's own wasm memory, before
// tfjs can allocate again. A tensor's .shape and .dtype are plain properties a caller can edit:
// what is read is what tfjs holds (on tfjs-backend-wasm its own record of the tensor's size and
// dtype), checked against the shape the op was given.
export function hostData(fn, name, t) {
  const b = tf.backend();
  let data;
  if (onTfjsWasm(b) && b.dataIdMap.has(t.dataId)) {
    const held = b.dataIdMap.get(t.dataId);
    checkHeld(fn, name, t, held.dtype, count(held.shape));
    data = b.typedArrayFromHeap({ dataId: t.dataId, dtype: 'float32', shape: [count(held.shape)] });
  } else {
    data = t.dataSync();
    checkHeld(fn, name, t, typedArrayKind(data) === 'Float32Array' ? 'float32' : typedArrayKind(data) ?? describe(data), typedArrayLength(data));
  }
  return data;
}

// tfjs-backend-webgpu's own record of each input (its dtype and shape), checked before its GPU
// buffer is read: the bits of an int32 tensor whose .dtype says float32 would be read as floats.
function checkHeldOnGPU(fn, b, inputs) {
  for (const [name, t] of Object.entries(inputs)) {
    const held = b.tensorMap?.get(t.dataId);
    if (held !== undefined) checkHeld(fn, name, t, held.dtype, count(held.shape));
  }
}

// What tfjs holds (its dtype and element count) against the tensor's own .dtype and .shape.
function checkHeld(fn, name, t, dtype, length) {
  if (dtype !== 'float32') throw new TypeError(`${fn}: ${name} holds ${dtype} data, expected float32`);
  const claimed = count(t.shape);
  if (length !== claimed) {
    throw new RangeError(`${fn}: ${name} has shape ${fmt(t.shape)} (${claimed} elements) but holds ${length} values (was its shape edited?)`);
  }
}

export const count = (shape) => Array.from(shape).reduce((a, b) => a * b, 1);

// tfjs-backend-wasm copies a new tensor's values into its heap when it is made; other backends
// keep the array they are given (so it must be ours to give).
function onTfjsWasm(b = tf.backend()) {
  return tf.getBackend() === 'wasm' && typeof b.typedArrayFromHeap === 'function' && typeof b.dataIdMap?.has === 'function';
}

// One call of the core API: the inputs copied into its memory once, each output made into a
// tensor with one copy. tfjs-backend-wasm copies a new tensor's values into its own heap, so
// there the outputs go from a prepared problem's heap views straight into tfjs; elsewhere the
// core API's own calls hand over arrays of ours for tf.tensor to keep (prepare would also
// pre-touch the output pages, work the copying calls skip). The forward on one wasm thread is
// the copying call everywhere: it streams the queries through cache (bindings/core/stream.js streamForward),
// which gains more than the copy of its result into tfjs-backend-wasm's heap costs.
function run(mode, o, dims, inputs, outputs) {
  const options = { spatialShapes: o.spatialShapes, levelStartIndex: o.levelStartIndex, valueLayout: o.valueLayout,
    samplingLocationsLayout: o.samplingLocationsLayout, alignCorners: o.alignCorners, paddingMode: o.paddingMode };
  const fn = mode === 'forward' ? 'msDeformAttn' : 'msDeformAttnBackward';
  // tfjs-backend-webgpu: on its device, GPU buffers in and out (bindings/webgpu/tfjs.js); it needs
  // no wasm instance, so none is made for it.
  const msda = given();
  if (msda?.backend === 'webgpu' || isTfjsWebGPU(tf.backend())) {
    if (isTfjsWebGPU(tf.backend())) checkHeldOnGPU(fn, tf.backend(), inputs);
    return runOnTfjsWebGPU(tf, msda, mode, options, inputs, outputs);
  }
  const instance = current(fn);
  const streams = mode === 'forward' && instance.backend !== 'native' && instance.threads === 1;
  if (!onTfjsWasm() || streams) {
    const args = { ...options };
    for (const [name, t] of Object.entries(inputs)) args[name] = { data: hostData(fn, name, t), shape: t.shape };
    const result = mode === 'forward' ? { output: instance.forward(args) } : instance.backward(args);
    return outputs.map((name) => tf.tensor(result[name].data, result[name].shape, 'float32'));
  }
  const p = instance.prepare({ batch: dims.B, numQueries: dims.Q, numHeads: dims.H, channels: dims.C, numPoints: dims.P,
    ...options }, { mode });
  try {
    for (const [name, t] of Object.entries(inputs)) p[name].set(hostData(fn, name, t));
    if (mode === 'forward') p.forward(); else p.backward();
    return outputs.map((name) => tf.tensor(p[name], p.shapes[name], 'float32'));
  } finally {
    p.dispose();
  }
}

export const forwardCore = (o, dims, value, samplingLocations, attentionWeights) =>
  run('forward', o, dims, { value, samplingLocations, attentionWeights }, ['output'])[0];

// tfjs's gradients() that throws in its backward (on tfjs-core alone, a loss such as
// tf.sum(tf.mul(y, dy)) whose ops have no registered gradient) leaves its tape behind, holding a
// kept copy of every tensor the forward saved for the backward, ours included: the next
// tf.grads starts a new tape and those copies are never freed. A gradients() that finishes frees
// them itself, so a tape that is no longer tfjs's current one and still holds live saved tensors
// was abandoned: the op frees them (what gradients() would have done) when it runs next, and
// drops a leftover current tape when no gradient is being taken.
let recorded = null;   // the tape the op last ran under

const freeSaved = (tape) => {
  for (const node of tape) for (const t of node.saved ?? []) if (!t.isDisposed) t.dispose();
};

export function dropStaleTape() {
  const state = tf.engine().state;
  const tape = Array.isArray(state.activeTape) ? state.activeTape : null;
  if (recorded !== null && recorded !== tape) {
    freeSaved(recorded);
    recorded = null;
  }
  // No gradient being recorded (depth 0) and not inside gradients()' own backward: a leftover.
  if (tape !== null && state.gradientDepth === 0 && !state.scopeStack.some((scope) => scope.name === 'backward')) {
    freeSaved(tape);
    state.activeTape = null;
  } else if (tape !== null && state.gradientDepth > 0) {
    recorded = tape;
  }
}

/**
 * Multi-scale deformable attention: (B, N_q, N_h*C_h), differentiable in all three tensors.
 * What is computed: SEMANTICS.md; the options and their defaults are the core API's.
 */
export function msDeformAttn(value, samplingLocations, attentionWeights, options) {
  const fn = 'msDeformAttn';
  dropStaleTape();
  const o = readOptions(fn, options);
  if (!isTfjsWebGPU(tf.backend())) current(fn);   // the error for a missing instance, before tfjs runs anything
  return tf.tidy(() => {
    const v = asTensor(fn, 'value', value);
    const l = asTensor(fn, 'samplingLocations', samplingLocations);
    const w = asTensor(fn, 'attentionWeights', attentionWeights);
    const dims = checkShapes(fn, o, { value: v, samplingLocations: l, attentionWeights: w });
    const op = tf.customGrad((v1, l1, w1, save) => {
      save([v1, l1, w1]);
      return {
        value: forwardCore(o, dims, v1, l1, w1),
        gradFunc: (dy, saved) => backward(o, dims, dy, saved[0], saved[1], saved[2]),
      };
    });
    return op(v, l, w);
  });
}

export function backward(o, dims, dy, value, samplingLocations, attentionWeights) {
  // dy may be another dtype only if a user's gradient says so; the kernel wants float32.
  const gradOutput = dy.dtype === 'float32' ? dy : tf.cast(dy, 'float32');
  try {
    return run('backward', o, dims, { gradOutput, value, samplingLocations, attentionWeights },
      ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']);
  } finally {
    if (gradOutput !== dy) gradOutput.dispose();
  }
}

/**
 * The vector-Jacobian product on its own: the gradients of sum(dy * msDeformAttn(...)) with
 * respect to value, samplingLocations and attentionWeights (what tf.grads computes through the op).
 */
export function msDeformAttnBackward(dy, value, samplingLocations, attentionWeights, options) {
  const fn = 'msDeformAttnBackward';
  dropStaleTape();
  const o = readOptions(fn, options);
  if (!isTfjsWebGPU(tf.backend())) current(fn);   // the error for a missing instance, before tfjs runs anything
  return tf.tidy(() => {
    const v = asTensor(fn, 'value', value);
    const l = asTensor(fn, 'samplingLocations', samplingLocations);
    const w = asTensor(fn, 'attentionWeights', attentionWeights);
    const g = asTensor(fn, 'dy', dy);
    const dims = checkShapes(fn, o, { value: v, samplingLocations: l, attentionWeights: w, gradOutput: g });
    return backward(o, dims, g, v, l, w);
  });
}

