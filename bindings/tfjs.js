// ms-deform-attn/tfjs: multi-scale deformable attention as a differentiable TensorFlow.js op
// (msDeformAttn) and Deformable DETR's MSDeformAttn module on top of it (MSDeformAttn).
//
//   import * as tf from '@tensorflow/tfjs-core';
//   import { msDeformAttn } from 'ms-deform-attn/tfjs';
//   const out = msDeformAttn(value, samplingLocations, attentionWeights, { spatialShapes });
//
// @tensorflow/tfjs-core is the user's own copy (an optional peer dependency). The kernels run
// in this package's wasm module (or any instance given to setMsda), never in tfjs. Each call
// copies its inputs into that module's memory once and its outputs into tensors once, as the
// core API does: inputs are read where tfjs keeps them (tfjs-backend-cpu's own arrays through
// dataSync(), tfjs-backend-wasm's heap through a view); outputs become tensors through
// tf.tensor(data, shape, 'float32'). tfjs-backend-webgl works too, by reading the data back to the
// CPU; on tfjs-backend-webgpu the op runs the WebGPU kernels on tfjs's device, no CPU copy
// (bindings/webgpu/tfjs.js).
//
// Nothing is fetched at import. In Node the first op makes its instance (the wasm module, one
// thread); in browsers call `await ready()` first (after configure({ wasmPaths }) where the .wasm
// files are served elsewhere), or setMsda(await init({ wasmPaths })).

import * as tf from '@tensorflow/tfjs-core';
import { parseNpy } from './npy.js';
// Through the package's own name, so that package.json's conditions pick the browser or the Node
// entry (bundlers never see the Node one).
import { init, initSync, Msda } from 'ms-deform-attn';
import { fmtShape as fmt, positiveInteger, readArgs, readLevelStartIndex, readOptions as readCoreOptions,
  readSpatialShapes } from './core/args.js';
import { typedArrayKind, typedArrayLength } from './core/typed.js';
import { describe } from './core/errors.js';
import { MsdaWebGPU } from './webgpu/backend.js';
import { instanceFor, isTfjsWebGPU, runOnTfjsWebGPU } from './webgpu/tfjs.js';

// The instance the op calls. Nothing is fetched or instantiated at import (a bundle's page has
// not said where the .wasm files are yet): setMsda() gives one, or ready() makes it from init()
// with configure()'s options; in Node the first op makes it synchronously if neither was called.
let msda = null;
let owned = false;          // msda is this module's own (made from configure()'s options)
let initOptions = {};
let making = null;          // ready()'s pending init

function current(fn) {
  if (msda !== null) return msda;
  try {
    adopt(initSync(initOptions), true);
  } catch (e) {
    throw new Error(`${fn}: ms-deform-attn/tfjs has no instance yet: \`await ready()\` before the first op (after ` +
      "configure({ wasmPaths }) where the .wasm files are served elsewhere), or setMsda(await init({ wasmPaths })) " +
      `(${e.message})`, { cause: e });
  }
  return msda;
}

function adopt(instance, own) {
  if (owned && msda !== null && msda !== instance) msda.dispose();
  msda = instance;
  owned = own;
}

// tfjs's backend, or null where none is registered yet (getMsda and ready only look at it).
function tfjsBackend() {
  try {
    return tf.backend();
  } catch {
    return null;
  }
}

/** The ms-deform-attn instance the op calls (in Node made on first use; elsewhere after ready() or
 *  setMsda()); on tfjs-backend-webgpu, the WebGPU instance on tfjs's own device that the op runs. */
export function getMsda() {
  const backend = tfjsBackend();
  return isTfjsWebGPU(backend) ? instanceFor(backend, msda) : current('getMsda');
}

/** Makes the op call another instance from init() (e.g. `{ threads: 'auto' }`, or the native addon). */
export function setMsda(instance) {
  if (!(instance instanceof Msda || instance instanceof MsdaWebGPU)) throw new TypeError(`setMsda: instance is ${describe(instance)}, expected what init() resolves to`);
  making = null;
  adopt(instance, false);
}

/**
 * The init() options of the instance the op makes for itself (e.g. { wasmPaths: '/msda/' } or
 * { threads: 'auto' }); checked by init when it is made. An instance made before is disposed.
 */
export function configure(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`configure: options is ${describe(options)}, expected an object of init() options`);
  }
  initOptions = { ...options };
  making = null;
  if (owned) adopt(null, false);
}

/** Makes the op's instance with init(configure's options) unless it has one; resolves to it. On
 *  tfjs-backend-webgpu the op needs no wasm module: the instance on tfjs's device. */
export function ready() {
  const backend = tfjsBackend();
  if (isTfjsWebGPU(backend)) return Promise.resolve(instanceFor(backend, msda));
  if (msda !== null) return Promise.resolve(msda);
  if (making === null) {
    const attempt = init(initOptions).then((instance) => {
      if (making === attempt) adopt(instance, true);
      else instance.dispose();   // configure() or setMsda() came meanwhile
      making = null;
      return current('ready');
    }, (e) => {
      if (making === attempt) making = null;
      throw e;
    });
    making = attempt;
  }
  return making;
}

const OPTION_KEYS = ['spatialShapes', 'levelStartIndex', 'valueLayout', 'samplingLocationsLayout', 'alignCorners', 'paddingMode'];

// An integer list or (N_l, 2) table given as a tf.Tensor becomes the { data, shape } the core
// API reads (spatial shapes are tiny; reading them back is free).
function plainIntegers(x) {
  return x instanceof tf.Tensor ? { data: x.dataSync(), shape: x.shape } : x;
}

// Options checked once, up front, by the core's argument reader (the same messages as the JS
// API's), before any data is read back.
function readOptions(fn, options) {
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
function asTensor(fn, name, x) {
  if (x instanceof tf.Tensor) {
    if (x.dtype !== 'float32') {
      throw new TypeError(`Argument '${name}' passed to '${fn}' must be float32 tensor, but got ${x.dtype} tensor`);
    }
    return x;
  }
  if (Array.isArray(x) || x instanceof Float32Array) return tf.tensor(x, undefined, 'float32');
  throw new TypeError(`Argument '${name}' passed to '${fn}' must be a Tensor or TensorLike, but got ${describe(x)}`);
}

function checkShape(fn, name, actual, expected, labels, note) {
  const ok = actual.length === expected.length && expected.every((e, i) => e === null ? actual[i] >= 1 : actual[i] === e);
  if (!ok) {
    const want = expected.map((e, i) => (e === null ? labels[i] : e));
    throw new RangeError(`${fn}: ${name} has shape ${fmt(actual)}, expected ${fmt(labels)} = ${fmt(want)} (${note})`);
  }
}

// The three tensors' shapes against each other and the options; returns the problem sizes.
function checkShapes(fn, value, samplingLocations, attentionWeights, o) {
  const NL = o.spatialShapes.length, L = o.valueLength;
  const blnc = o.valueLayout === 'BLNC';
  checkShape(fn, 'value', value.shape, blnc ? [null, L, null, null] : [null, null, L, null],
    blnc ? ['B', 'L', 'N_h', 'C_h'] : ['B', 'N_h', 'L', 'C_h'], `valueLayout '${o.valueLayout}', L = ${L} = sum of H*W over spatialShapes`);
  const [B, H, C] = blnc ? [value.shape[0], value.shape[2], value.shape[3]] : [value.shape[0], value.shape[1], value.shape[3]];
  const s = samplingLocations.shape;
  const note = `B and N_h from value, N_l = ${NL} from spatialShapes`;
  let Q, P;
  if (o.samplingLocationsLayout === 'BQHLP2') {
    checkShape(fn, 'samplingLocations', s, [B, null, H, NL, null, 2], ['B', 'N_q', 'N_h', 'N_l', 'N_p', 2], `${note}, layout 'BQHLP2'`);
    Q = s[1]; P = s[4];
  } else {
    checkShape(fn, 'samplingLocations', s, [B, 2, null, H, NL, null], ['B', 2, 'N_q', 'N_h', 'N_l', 'N_p'], `${note}, layout 'B2QHLP'`);
    Q = s[2]; P = s[5];
  }
  checkShape(fn, 'attentionWeights', attentionWeights.shape, [B, Q, H, NL, P], ['B', 'N_q', 'N_h', 'N_l', 'N_p'],
    'B, N_q, N_h, N_l and N_p from value and samplingLocations');
  return { B, Q, H, C, P };
}

// Moving data. A tensor's values as a Float32Array without a copy where tfjs allows: dataSync()
// (tfjs-backend-cpu hands over its own array), or on tfjs-backend-wasm a view of its heap (its
// dataSync() would copy). The view is read at once, into this package's own wasm memory, before
// tfjs can allocate again. A tensor's .shape and .dtype are plain properties a caller can edit:
// what is read is what tfjs holds (on tfjs-backend-wasm its own record of the tensor's size and
// dtype), checked against the shape the op was given.
function hostData(fn, name, t) {
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

const count = (shape) => Array.from(shape).reduce((a, b) => a * b, 1);

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

const forwardCore = (o, dims, value, samplingLocations, attentionWeights) =>
  run('forward', o, dims, { value, samplingLocations, attentionWeights }, ['output'])[0];

/**
 * Multi-scale deformable attention: (B, N_q, N_h*C_h), differentiable in all three tensors.
 * What is computed: SEMANTICS.md; the options and their defaults are the core API's.
 */
export function msDeformAttn(value, samplingLocations, attentionWeights, options) {
  const fn = 'msDeformAttn';
  const o = readOptions(fn, options);
  if (!isTfjsWebGPU(tf.backend())) current(fn);   // the error for a missing instance, before tfjs runs anything
  return tf.tidy(() => {
    const v = asTensor(fn, 'value', value);
    const l = asTensor(fn, 'samplingLocations', samplingLocations);
    const w = asTensor(fn, 'attentionWeights', attentionWeights);
    const dims = checkShapes(fn, v, l, w, o);
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

function backward(o, dims, dy, value, samplingLocations, attentionWeights) {
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
  const o = readOptions(fn, options);
  if (!isTfjsWebGPU(tf.backend())) current(fn);   // the error for a missing instance, before tfjs runs anything
  return tf.tidy(() => {
    const v = asTensor(fn, 'value', value);
    const l = asTensor(fn, 'samplingLocations', samplingLocations);
    const w = asTensor(fn, 'attentionWeights', attentionWeights);
    const g = asTensor(fn, 'dy', dy);
    const dims = checkShapes(fn, v, l, w, o);
    checkShape(fn, 'dy', g.shape, [dims.B, dims.Q, dims.H * dims.C], ['B', 'N_q', 'N_h*C_h'], 'the shape of the op\'s output');
    return backward(o, dims, g, v, l, w);
  });
}

// ---------------------------------------------------------------------------------------------
// Deformable DETR's MSDeformAttn (models/ops/modules/ms_deform_attn.py), parameters named and
// laid out as PyTorch's state_dict has them: Linear weights are (out, in), y = x W^T + b.

const PARAMETERS = ['sampling_offsets', 'attention_weights', 'value_proj', 'output_proj'];
let layerCount = 0;

// Linear's y = x W^T + b over the last axis of x (2-d: rows of x).
function linear(x2d, weight, bias) {
  return tf.add(tf.matMul(x2d, weight, false, true), bias);
}

// Linear's backward for y = x W^T + b: [dx, dW, db] from dy (rows, out) and x (rows, in).
function linearBackward(dy2d, x2d, weight) {
  return [tf.matMul(dy2d, weight), tf.matMul(dy2d, x2d, true, false), tf.sum(dy2d, 0)];
}

// A parameter given as a tf.Tensor, a { data, shape } tensor or the bytes of a .npy file, checked
// whole (dtype, shape, element count, not disposed) so that loading can no longer fail after it.
const ASTYPE = "(convert it first: x.astype(np.float32) in NumPy, tf.cast(t, 'float32') in tfjs)";

function parameterTensor(fn, name, x, expected) {
  if (x instanceof tf.Tensor) {
    if (x.isDisposed) throw new TypeError(`${fn}: ${name} is a disposed tf.Tensor, expected a live float32 tensor`);
    if (x.dtype !== 'float32') throw new TypeError(`${fn}: ${name} is a ${x.dtype} tf.Tensor, expected float32 ${ASTYPE}`);
    checkParameterShape(fn, name, x.shape, expected);
    hostData(fn, name, x);   // what tfjs holds, against its shape
    return { shape: x.shape, own: false, read: () => x };
  }
  let t = x;
  if (x instanceof Uint8Array || x instanceof ArrayBuffer) t = parseNpy(x);
  if (t === null || typeof t !== 'object' || !Array.isArray(t.shape) || !ArrayBuffer.isView(t.data)) {
    throw new TypeError(`${fn}: ${name} is ${describe(x)}, expected a tf.Tensor, a { data, shape } tensor or the bytes of a .npy file`);
  }
  const data = t.data, shape = Array.from(t.shape);
  if (typedArrayKind(data) !== 'Float32Array') {
    throw new TypeError(`${fn}: ${name} has ${t.dtype ?? typedArrayKind(data) ?? describe(data)} data, expected float32 ('<f4') ${ASTYPE}`);
  }
  checkParameterShape(fn, name, shape, expected);
  if (typedArrayLength(data) !== count(shape)) {
    throw new RangeError(`${fn}: ${name} has shape ${fmt(shape)} (${count(shape)} elements) but ${typedArrayLength(data)} numbers`);
  }
  return { shape, own: true, read: () => tf.tensor(data, expected, 'float32') };
}

function checkParameterShape(fn, name, shape, expected) {
  if (fmt(shape) !== fmt(expected)) throw new RangeError(`${fn}: ${name} has shape ${fmt(shape)}, expected ${fmt(expected)}`);
}

export class MSDeformAttn {
  /**
   * Options as in PyTorch: d_model (256), n_levels (4), n_heads (8), n_points (4). Also seed (for
   * the xavier_uniform draws), name (prefix of the tf.Variables' names), trainable (true).
   */
  constructor(options = {}) {
    const fn = 'MSDeformAttn';
    if (options === null || typeof options !== 'object') throw new TypeError(`${fn}: options is ${describe(options)}, expected an object`);
    const allowed = ['d_model', 'n_levels', 'n_heads', 'n_points', 'seed', 'name', 'trainable'];
    for (const key of Object.keys(options)) {
      if (!allowed.includes(key)) throw new TypeError(`${fn}: unknown option '${key}', expected one of ${allowed.join(', ')}`);
    }
    const { d_model = 256, n_levels = 4, n_heads = 8, n_points = 4, seed, trainable = true } = options;
    this.d_model = positiveInteger(fn, 'd_model', d_model);
    this.n_levels = positiveInteger(fn, 'n_levels', n_levels);
    this.n_heads = positiveInteger(fn, 'n_heads', n_heads);
    this.n_points = positiveInteger(fn, 'n_points', n_points);
    if (d_model % n_heads !== 0) {
      throw new RangeError(`${fn}: d_model must be divisible by n_heads, but got ${d_model} and ${n_heads}`);
    }
    if (seed !== undefined && (typeof seed !== 'number' || !Number.isFinite(seed))) {
      throw new TypeError(`${fn}: seed is ${describe(seed)}, expected a number`);
    }
    this.name = options.name ?? `MSDeformAttn_${++layerCount}`;
    if (typeof this.name !== 'string') throw new TypeError(`${fn}: name is ${describe(this.name)}, expected a string`);
    const H = n_heads, L = n_levels, P = n_points, D = d_model;
    const shapes = {
      'sampling_offsets.weight': [H * L * P * 2, D], 'sampling_offsets.bias': [H * L * P * 2],
      'attention_weights.weight': [H * L * P, D], 'attention_weights.bias': [H * L * P],
      'value_proj.weight': [D, D], 'value_proj.bias': [D],
      'output_proj.weight': [D, D], 'output_proj.bias': [D],
    };
    const initial = tf.tidy(() => {
      const xavier = (shape, s) => {
        const bound = Math.sqrt(6 / (shape[0] + shape[1]));
        return tf.randomUniform(shape, -bound, bound, 'float32', s);
      };
      return {
        'sampling_offsets.weight': tf.zeros(shapes['sampling_offsets.weight']),
        'sampling_offsets.bias': tf.tensor(samplingOffsetsBias(H, L, P), shapes['sampling_offsets.bias'], 'float32'),
        'attention_weights.weight': tf.zeros(shapes['attention_weights.weight']),
        'attention_weights.bias': tf.zeros(shapes['attention_weights.bias']),
        'value_proj.weight': xavier(shapes['value_proj.weight'], seed),
        'value_proj.bias': tf.zeros([D]),
        'output_proj.weight': xavier(shapes['output_proj.weight'], seed === undefined ? undefined : seed + 1),
        'output_proj.bias': tf.zeros([D]),
      };
    });
    /** The parameters by their PyTorch state_dict names ('value_proj.weight', ...). */
    this.parameters = {};
    for (const [key, t] of Object.entries(initial)) {
      this.parameters[key] = tf.variable(t, trainable, `${this.name}.${key}`);
      t.dispose();
    }
    for (const module of PARAMETERS) {
      this[module] = { weight: this.parameters[`${module}.weight`], bias: this.parameters[`${module}.bias`] };
    }
  }

  /** The tf.Variables, in PyTorch's order (for optimizers' varList). */
  get trainableWeights() {
    return Object.values(this.parameters).filter((v) => v.trainable);
  }

  /**
   * Loads parameters by name, as torch's load_state_dict does: `dict` maps names (after
   * `prefix`, e.g. 'transformer.encoder.layers.0.self_attn.') to tf.Tensors, { data, shape }
   * tensors or .npy file bytes. strict (default true): every parameter must be there, and no
   * other name under the prefix.
   */
  loadStateDict(dict, { prefix = '', strict = true } = {}) {
    const fn = 'loadStateDict';
    if (dict === null || typeof dict !== 'object') throw new TypeError(`${fn}: dict is ${describe(dict)}, expected an object of named parameters`);
    const entries = dict instanceof Map ? dict : new Map(Object.entries(dict));
    const found = [];
    for (const [key, variable] of Object.entries(this.parameters)) {
      const name = prefix + key;
      if (!entries.has(name)) {
        if (strict) throw new RangeError(`${fn}: missing parameter '${name}' (shape ${fmt(variable.shape)})`);
        continue;
      }
      const t = parameterTensor(fn, name, entries.get(name), variable.shape);
      found.push([variable, t]);
    }
    if (strict) {
      for (const name of entries.keys()) {
        if (name.startsWith(prefix) && !Object.hasOwn(this.parameters, name.slice(prefix.length))) {
          throw new RangeError(`${fn}: unexpected parameter '${name}', expected only ${Object.keys(this.parameters).map((k) => prefix + k).join(', ')}`);
        }
      }
    }
    // Every check passed: the new values are made first (a failure there changes nothing), then
    // assigned, which cannot fail: a bad dict changes nothing.
    const values = [];
    const made = () => values.filter((v, i) => found[i][1].own);
    try {
      for (const [, t] of found) values.push(t.read());
    } catch (e) {
      tf.dispose(made());
      throw e;
    }
    found.forEach(([variable], i) => variable.assign(values[i]));
    tf.dispose(made());
    return this;
  }

  /** The parameters as { name: { data: Float32Array, shape } }, for saving (e.g. with serializeNpy). */
  stateDict() {
    return Object.fromEntries(Object.entries(this.parameters).map(([k, v]) => [k, { data: v.dataSync().slice(), shape: v.shape.slice() }]));
  }

  /**
   * PyTorch's forward(query, reference_points, input_flatten, input_spatial_shapes,
   * input_level_start_index, input_padding_mask):
   *   query (N, Len_q, d_model); referencePoints (N, Len_q, n_levels, 2) in [0, 1], or
   *   (N, Len_q, n_levels, 4) boxes (cx, cy, w, h); inputFlatten (N, Len_in, d_model);
   *   inputSpatialShapes [[H, W], ...] (or an (n_levels, 2) tensor); inputLevelStartIndex
   *   optional (derived); inputPaddingMask (N, Len_in), true (non-zero) where padded.
   * Returns (N, Len_q, d_model).
   */
  apply(query, referencePoints, inputFlatten, inputSpatialShapes, inputLevelStartIndex, inputPaddingMask) {
    const fn = 'MSDeformAttn';
    const o = readOptions(fn, { spatialShapes: inputSpatialShapes, levelStartIndex: inputLevelStartIndex ?? undefined });
    const { d_model: D, n_heads: H, n_levels: NL, n_points: P } = this;
    const C = D / H, K = H * NL * P;
    return tf.tidy(() => {
      const q = asTensor(fn, 'query', query);
      const ref = asTensor(fn, 'referencePoints', referencePoints);
      const input = asTensor(fn, 'inputFlatten', inputFlatten);
      if (o.spatialShapes.length !== NL) {
        throw new RangeError(`${fn}: inputSpatialShapes has ${o.spatialShapes.length} levels, expected n_levels = ${NL}`);
      }
      checkShape(fn, 'query', q.shape, [null, null, D], ['N', 'Len_q', 'd_model'], `d_model = ${D}`);
      const [N, Lq] = q.shape, Lin = o.valueLength;
      checkShape(fn, 'inputFlatten', input.shape, [N, Lin, D], ['N', 'Len_in', 'd_model'],
        `N from query, Len_in = ${Lin} = sum of H*W over inputSpatialShapes`);
      const last = ref.shape[ref.shape.length - 1];
      if (ref.shape.length !== 4 || ref.shape[0] !== N || ref.shape[1] !== Lq || ref.shape[2] !== NL || (last !== 2 && last !== 4)) {
        throw new RangeError(`${fn}: referencePoints has shape ${fmt(ref.shape)}, expected [N, Len_q, n_levels, 2 or 4] = [${N}, ${Lq}, ${NL}, 2 or 4]`);
      }
      // 1 where padded (PyTorch's masked_fill(input_padding_mask[..., None], 0)), as float32.
      let keep = null;
      if (inputPaddingMask !== undefined && inputPaddingMask !== null) {
        // A tf.Tensor, a nested array, or a { data, shape } tensor (parseNpy of a '|b1' mask).
        const m = inputPaddingMask;
        const mask = m instanceof tf.Tensor ? m : ArrayBuffer.isView(m?.data) && Array.isArray(m?.shape)
          ? tf.tensor(m.data, m.shape, m.data instanceof Uint8Array ? 'bool' : undefined) : tf.tensor(m);
        checkShape(fn, 'inputPaddingMask', mask.shape, [N, Lin], ['N', 'Len_in'], 'N from query, Len_in from inputFlatten');
        keep = tf.reshape(tf.logicalNot(tf.cast(mask, 'bool')), [N * Lin, 1]);
      }
      const pixelsNormalizer = tf.tensor(o.spatialShapes.map(([h, w]) => [w, h]).flat(), [1, 1, 1, NL, 1, 2], 'float32');
      const p = this.parameters;
      // One op with its own backward: tfjs-core registers no gradients for its built-in ops
      // (the @tensorflow/tfjs package does), so the layer trains on tfjs-core alone.
      const op = tf.customGrad((q1, ref1, input1, sow, sob, aww, awb, vpw, vpb, opw, opb, save) => {
        const qRows = tf.reshape(q1, [N * Lq, D]);
        const inRows = tf.reshape(input1, [N * Lin, D]);
        let value = linear(inRows, vpw, vpb);
        if (keep !== null) value = tf.where(tf.broadcastTo(keep, value.shape), value, tf.zerosLike(value));
        const value4 = tf.reshape(value, [N, Lin, H, C]);
        const offsets = tf.reshape(linear(qRows, sow, sob), [N, Lq, H, NL, P, 2]);
        const attention = tf.reshape(tf.softmax(tf.reshape(linear(qRows, aww, awb), [N * Lq * H, NL * P])), [N, Lq, H, NL, P]);
        let locations, boxSize = null;
        if (last === 2) {
          // offsets are in pixels of each level: divided by (W, H).
          locations = tf.add(tf.reshape(ref1, [N, Lq, 1, NL, 1, 2]), tf.div(offsets, pixelsNormalizer));
        } else {
          // offsets are in units of the box: times its (w, h) / n_points / 2.
          const center = tf.reshape(tf.slice(ref1, [0, 0, 0, 0], [N, Lq, NL, 2]), [N, Lq, 1, NL, 1, 2]);
          boxSize = tf.reshape(tf.slice(ref1, [0, 0, 0, 2], [N, Lq, NL, 2]), [N, Lq, 1, NL, 1, 2]);
          locations = tf.add(center, tf.mul(tf.mul(tf.div(offsets, P), boxSize), 0.5));
        }
        const dims = { B: N, Q: Lq, H, C, P };
        const attended = forwardCore(o, dims, value4, locations, attention);
        const output = tf.reshape(linear(tf.reshape(attended, [N * Lq, D]), opw, opb), [N, Lq, D]);
        // What the backward reads, kept by tfjs (only while a gradient is being recorded).
        const kept = { qRows, inRows, value4, offsets, attention, locations, attended, sow, aww, vpw, opw, pixelsNormalizer,
          ...(boxSize ? { boxSize } : {}), ...(keep ? { keep } : {}) };
        const names = Object.keys(kept);
        save(Object.values(kept));
        return {
          value: output,
          gradFunc: (dy, saved) => {
            const k = Object.fromEntries(names.map((name, i) => [name, saved[i]]));
            const [gAttended, gOpw, gOpb] = linearBackward(tf.reshape(dy, [N * Lq, D]), tf.reshape(k.attended, [N * Lq, D]), k.opw);
            const [gradValue, gradLocations, gradWeights] = backward(o, dims, tf.reshape(gAttended, [N, Lq, D]), k.value4,
              k.locations, k.attention);
            // value_proj (through the mask)
            let gValue = tf.reshape(gradValue, [N * Lin, D]);
            if (k.keep) gValue = tf.where(tf.broadcastTo(k.keep, gValue.shape), gValue, tf.zerosLike(gValue));
            const [gInput, gVpw, gVpb] = linearBackward(gValue, k.inRows, k.vpw);
            // attention_weights through the softmax over levels x points
            const a = tf.reshape(k.attention, [N * Lq * H, NL * P]);
            const ga = tf.reshape(gradWeights, [N * Lq * H, NL * P]);
            const gLogits = tf.mul(a, tf.sub(ga, tf.sum(tf.mul(ga, a), 1, true)));
            const [gqA, gAww, gAwb] = linearBackward(tf.reshape(gLogits, [N * Lq, K]), k.qRows, k.aww);
            // sampling_offsets and reference points through the locations
            const gl = gradLocations;
            const gCenter = tf.sum(gl, [2, 4]);
            let gOffsets, gRef;
            if (last === 2) {
              gOffsets = tf.div(gl, k.pixelsNormalizer);
              gRef = gCenter;
            } else {
              gOffsets = tf.mul(tf.div(tf.mul(gl, k.boxSize), P), 0.5);
              const gSize = tf.sum(tf.mul(gl, tf.mul(tf.div(k.offsets, P), 0.5)), [2, 4]);
              gRef = tf.concat([gCenter, gSize], 3);
            }
            const [gqS, gSow, gSob] = linearBackward(tf.reshape(gOffsets, [N * Lq, K * 2]), k.qRows, k.sow);
            return [tf.reshape(tf.add(gqA, gqS), [N, Lq, D]), gRef, tf.reshape(gInput, [N, Lin, D]),
              gSow, gSob, gAww, gAwb, gVpw, gVpb, gOpw, gOpb];
          },
        };
      });
      return op(q, ref, input, p['sampling_offsets.weight'], p['sampling_offsets.bias'], p['attention_weights.weight'],
        p['attention_weights.bias'], p['value_proj.weight'], p['value_proj.bias'], p['output_proj.weight'], p['output_proj.bias']);
    });
  }

  /** Frees the variables. */
  dispose() {
    for (const v of Object.values(this.parameters)) v.dispose();
  }
}

// PyTorch's _reset_parameters: head h's offsets point along the angle 2*pi*h/n_heads, scaled so
// the larger component is 1, times (point + 1); the same for every level. float32 as in torch.
function samplingOffsetsBias(H, L, P) {
  const f = Math.fround;
  const out = new Float32Array(H * L * P * 2);
  const step = f(2 * Math.PI / H);
  for (let h = 0; h < H; h++) {
    const theta = f(f(h) * step);
    const x = f(Math.cos(theta)), y = f(Math.sin(theta));
    const m = Math.max(Math.abs(x), Math.abs(y));
    for (let l = 0; l < L; l++) {
      for (let p = 0; p < P; p++) {
        const at = ((h * L + l) * P + p) * 2;
        out[at] = f(f(x / m) * (p + 1));
        out[at + 1] = f(f(y / m) * (p + 1));
      }
    }
  }
  return out;
}
