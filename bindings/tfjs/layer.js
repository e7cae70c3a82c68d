// ms-deform-attn/tfjs's layer: Deformable DETR's MSDeformAttn module (its parameters, PyTorch's
// state_dict names, load and save, forward and its own backward) over the op (bindings/tfjs/op.js).

import * as tf from '@tensorflow/tfjs-core';
import { NpyError, parseNpy } from '../npy.js';
import { checkShape, fmtShape as fmt, positiveInteger } from '../core/args.js';
import { typedArrayKind, typedArrayLength } from '../core/typed.js';
import { describe } from '../core/errors.js';
import { asTensor, backward, count, dropStaleTape, forwardCore, hostData, readOptions } from './op.js';

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
  if (x instanceof Uint8Array || x instanceof ArrayBuffer) {
    try {
      t = parseNpy(x);
    } catch (e) {
      if (!(e instanceof NpyError)) throw e;
      // The file's own fault, named: which parameter, and for a dtype how to convert it.
      const dtype = e.descr !== undefined;
      const err = dtype ? new TypeError(`${fn}: ${name}: ${e.message} ${ASTYPE}`, { cause: e })
        : new NpyError(`${fn}: ${name}: ${e.message}`);
      if (!dtype) err.cause = e;
      throw err;
    }
  }
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

// strict: every parameter under the prefix and nothing else there, as torch's load_state_dict
// says it (the missing and the unexpected keys, all of them), with the likely mistake named: a
// prefix without its trailing dot ('…self_attn' for '…self_attn.').
function checkNames(fn, parameters, entries, prefix) {
  const keys = Object.keys(parameters);
  const missing = keys.filter((k) => !entries.has(prefix + k));
  const unexpected = [...entries.keys()].filter((name) => typeof name === 'string' && name.startsWith(prefix)
    && !Object.hasOwn(parameters, name.slice(prefix.length)));
  if (missing.length === 0 && unexpected.length === 0) return;
  const list = (names) => (names.length <= 20 ? names : [...names.slice(0, 20), `… ${names.length - 20} more`])
    .map((n) => (n.startsWith('…') ? n : `"${n}"`)).join(', ');
  const parts = [];
  if (missing.length > 0) {
    const first = missing[0];
    parts.push(`missing parameter '${prefix + first}' (shape ${fmt(parameters[first].shape)})` +
      (missing.length > 1 ? `; missing key(s) in state_dict: ${list(missing.map((k) => prefix + k))}` : ''));
    const dotted = prefix !== '' && !prefix.endsWith('.') && keys.some((k) => entries.has(`${prefix}.${k}`));
    if (dotted) parts.push(`did you mean '${prefix}.'? (the prefix is joined to the names as given)`);
  }
  if (unexpected.length > 0) {
    if (missing.length === 0 && unexpected.length === 1) {
      parts.push(`unexpected parameter '${unexpected[0]}', expected only ${keys.map((k) => prefix + k).join(', ')}`);
    } else {
      parts.push(`unexpected key(s) in state_dict: ${list(unexpected)}`);
    }
  }
  throw new RangeError(`${fn}: ${parts.join('; ')}`);
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
    if (typeof prefix !== 'string') throw new TypeError(`${fn}: prefix is ${describe(prefix)}, expected a string`);
    if (strict) checkNames(fn, this.parameters, entries, prefix);
    const found = [];
    for (const [key, variable] of Object.entries(this.parameters)) {
      const name = prefix + key;
      if (!entries.has(name)) continue;
      const t = parameterTensor(fn, name, entries.get(name), variable.shape);
      found.push([variable, t]);
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
    dropStaleTape();
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
      checkShape(fn, 'query', q.shape, [null, null, D], ['N', 'Len_q', 'd_model'], '');
      const [N, Lq] = q.shape, Lin = o.valueLength;
      checkShape(fn, 'inputFlatten', input.shape, [N, Lin, D], ['N', 'Len_in', 'd_model'],
        `N from query, Len_in = ${Lin} = sum of H*W over inputSpatialShapes`);
      const last = ref.shape[ref.shape.length - 1];
      if (ref.shape.length !== 4 || ref.shape[0] !== N || ref.shape[1] !== Lq || ref.shape[2] !== NL || (last !== 2 && last !== 4)) {
        throw new RangeError(`${fn}: referencePoints.shape is ${fmt(ref.shape)}, expected [${N}, ${Lq}, ${NL}, 2 or 4] ([N, Len_q, n_levels, 2 or 4]; N and Len_q from query)`);
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
