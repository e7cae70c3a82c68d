// What the page computes after every change, without any DOM: the target feature, forward,
// the loss, backward, and one gradient-descent step. `msda` is an instance from init().
import {
  LEVELS, NUM_HEADS, NUM_POINTS, CHANNELS, valueToLayout, valueFromLayout, locationsToLayout,
  locationsFromLayout, valueShape, locationsShape, weightsShape,
} from './scene.js';

const NUM_SLOTS = NUM_HEADS * LEVELS.length * NUM_POINTS;
const now = () => (globalThis.performance ? performance.now() : Date.now());

// The arguments of msda.forward for the given state, in the layouts chosen in `opts`.
// Exposed as-is on the page (window.__msda) so a test can replay the exact call in Node.
// `value`: the value tensor when the caller has it already (a GPU tensor on WebGPU).
export function forwardArgs(data, locations, weights, opts,
  value = { data: valueToLayout(data.value, opts.valueLayout, data.length), shape: valueShape(opts.valueLayout, data.length) }) {
  return {
    value,
    spatialShapes: data.spatialShapes,
    levelStartIndex: data.levelStartIndex,
    samplingLocations: { data: locationsToLayout(locations, opts.samplingLocationsLayout), shape: locationsShape(opts.samplingLocationsLayout) },
    attentionWeights: { data: weights, shape: weightsShape() },
    valueLayout: opts.valueLayout,
    samplingLocationsLayout: opts.samplingLocationsLayout,
    alignCorners: opts.alignCorners,
    paddingMode: opts.paddingMode,
  };
}

// The feature at the target: the same operator with every point on the target and equal
// weights summing to 1 per head, i.e. the mean over levels of each level sampled there.
export function targetArgs(data, target, opts, value) {
  const loc = new Float32Array(NUM_SLOTS * 2);
  for (let i = 0; i < NUM_SLOTS; i++) { loc[2 * i] = target[0]; loc[2 * i + 1] = target[1]; }
  const w = new Float32Array(NUM_SLOTS).fill(1 / (LEVELS.length * NUM_POINTS));
  return forwardArgs(data, loc, w, opts, value);
}

// loss = ½ Σ_c (output_c − target_c)², summed in float64 over the float32 outputs;
// its gradient with respect to the output is (output − target), passed to backward in float32.
export function lossAndGrad(output, targetFeature) {
  const grad = new Float32Array(output.length);
  let loss = 0;
  for (let i = 0; i < output.length; i++) {
    const d = output[i] - targetFeature[i];
    grad[i] = d;
    loss += d * d;
  }
  return { loss: 0.5 * loss, gradOutput: grad };
}

export function evaluate(msda, data, state, opts) {
  const target = msda.forward(targetArgs(data, state.target, opts));
  const args = forwardArgs(data, state.samplingLocations, state.attentionWeights, opts);
  const t0 = now();
  const output = msda.forward(args);
  const t1 = now();
  const { loss, gradOutput } = lossAndGrad(output.data, target.data);
  const gradArgs = { ...args, gradOutput: { data: gradOutput, shape: output.shape } };
  const t2 = now();
  const grads = msda.backward(gradArgs);
  const t3 = now();
  return {
    args,
    gradArgs,
    targetFeature: target.data,
    output: output.data,
    loss,
    gradOutput,
    // Gradients back in the page's canonical order (value BLNC, locations BQHLP2).
    gradValue: valueFromLayout(grads.gradValue.data, opts.valueLayout, data.length),
    gradSamplingLocations: locationsFromLayout(grads.gradSamplingLocations.data, opts.samplingLocationsLayout),
    gradAttentionWeights: grads.gradAttentionWeights.data,
    raw: grads,
    forwardMs: t1 - t0,
    backwardMs: t3 - t2,
  };
}

// The same computation through prepare(), as the README recommends for repeated calls: the
// tensors stay in the wasm heap, each call writes only the locations, the weights and
// gradOutput, and the timings are the kernels' (no copies of the 680 kB value or gradient).
// Same bits as evaluate(). Rebuild it when the module, a layout or an option changes.
export class Session {
  constructor(msda, data, opts) {
    this.data = data;
    this.opts = { ...opts };
    const problem = {
      batch: 1, numQueries: 1, numHeads: NUM_HEADS, channels: CHANNELS, numPoints: NUM_POINTS,
      spatialShapes: data.spatialShapes, valueLayout: opts.valueLayout,
      samplingLocationsLayout: opts.samplingLocationsLayout, alignCorners: opts.alignCorners,
      paddingMode: opts.paddingMode,
    };
    this.main = msda.prepare(problem);
    this.target = msda.prepare(problem, { mode: 'forward' });
    const value = valueToLayout(data.value, opts.valueLayout, data.length);
    this.main.value.set(value);
    this.target.value.set(value);
  }

  evaluate(state) {
    const { data, opts, main, target } = this;
    const t = targetArgs(data, state.target, opts);
    target.samplingLocations.set(t.samplingLocations.data);
    target.attentionWeights.set(t.attentionWeights.data);
    const targetFeature = target.forward().data.slice();
    main.samplingLocations.set(locationsToLayout(state.samplingLocations, opts.samplingLocationsLayout));
    main.attentionWeights.set(state.attentionWeights);
    const t0 = now();
    main.forward();
    const t1 = now();
    const output = main.output.slice();
    const { loss, gradOutput } = lossAndGrad(output, targetFeature);
    main.gradOutput.set(gradOutput);
    const t2 = now();
    main.backward();
    const t3 = now();
    const gradLoc = main.gradSamplingLocations.slice();
    const gradW = main.gradAttentionWeights.slice();
    const gradValueView = main.gradValue;
    const shapes = main.shapes;
    const copy = (name) => ({ data: main[name].slice(), shape: shapes[name].slice() });
    let argsMemo = null;
    const result = {
      targetFeature, output, loss, gradOutput,
      gradSamplingLocations: locationsFromLayout(gradLoc, opts.samplingLocationsLayout),
      gradAttentionWeights: gradW,
      heat: heatOf(gradValueView, opts.valueLayout, data.length),
      forwardMs: t1 - t0,
      backwardMs: t3 - t2,
    };
    const snapshot = { loc: state.samplingLocations.slice(), w: state.attentionWeights.slice() };
    // What the copying API would be called with, and the gradients as backward returned them
    // (the heap views in the chosen layouts, copied when asked: valid until the next call).
    Object.defineProperties(result, {
      args: { get: () => (argsMemo ??= forwardArgs(data, snapshot.loc, snapshot.w, opts)) },
      gradArgs: { get: () => ({ ...result.args, gradOutput: { data: gradOutput, shape: shapes.output.slice() } }) },
      raw: { get: () => ({ gradValue: copy('gradValue'), gradSamplingLocations: { data: gradLoc.slice(), shape: shapes.gradSamplingLocations.slice() },
        gradAttentionWeights: { data: gradW.slice(), shape: shapes.gradAttentionWeights.slice() } }) },
    });
    return result;
  }

  dispose() {
    this.main.dispose();
    this.target.dispose();
  }
}

// The same computation on the WebGPU backend (an init({ backend: 'webgpu' }) instance), whose
// calls return Promises. As prepare() keeps the value in the wasm heap, the value is uploaded
// once and stays on the GPU (a GPU tensor); each call uploads the locations, the weights and
// gradOutput and reads its results back. evaluate() works on a copy of the state taken when it
// is called, so a later change cannot reach a call in flight. Same fields as Session.evaluate().
export class GpuSession {
  constructor(gpu, data, opts) {
    this.gpu = gpu;
    this.data = data;
    this.opts = { ...opts };
    this.buffers = [];
    this.value = this.tensor(valueToLayout(data.value, opts.valueLayout, data.length), valueShape(opts.valueLayout, data.length));
  }

  // A float32 GPU tensor holding `array`, destroyed by dispose().
  tensor(array, shape) {
    const device = this.gpu.device;
    const buffer = device.createBuffer({ size: array.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST, label: 'page value' });
    device.queue.writeBuffer(buffer, 0, array);
    this.buffers.push(buffer);
    return { buffer, shape: shape.slice() };
  }

  async evaluate(state) {
    const { gpu, data, opts, value } = this;
    const snapshot = { loc: state.samplingLocations.slice(), w: state.attentionWeights.slice(), target: state.target.slice() };
    const target = await gpu.forward(targetArgs(data, snapshot.target, opts, value));
    this.alive();
    const args = forwardArgs(data, snapshot.loc, snapshot.w, opts, value);
    const t0 = now();
    const output = await gpu.forward(args);
    const t1 = now();
    this.alive();
    const { loss, gradOutput } = lossAndGrad(output.data, target.data);
    const t2 = now();
    const grads = await gpu.backward({ ...args, gradOutput: { data: gradOutput, shape: output.shape } });
    const t3 = now();
    this.alive();
    let argsMemo = null;
    const result = {
      backend: 'webgpu',
      snapshot,
      targetFeature: target.data, output: output.data, loss, gradOutput,
      gradSamplingLocations: locationsFromLayout(grads.gradSamplingLocations.data, opts.samplingLocationsLayout),
      gradAttentionWeights: grads.gradAttentionWeights.data,
      heat: heatOf(grads.gradValue.data, opts.valueLayout, data.length),
      raw: grads,
      forwardMs: t1 - t0,
      backwardMs: t3 - t2,
    };
    // What the copying API would be called with (CPU tensors, as on wasm).
    Object.defineProperties(result, {
      args: { get: () => (argsMemo ??= forwardArgs(data, snapshot.loc, snapshot.w, opts)) },
      gradArgs: { get: () => ({ ...result.args, gradOutput: { data: gradOutput, shape: output.shape.slice() } }) },
    });
    return result;
  }

  // An evaluate() still running when the page moved on (dispose) stops at its next step.
  alive() {
    if (this.buffers === null) throw new Error('superseded: the page rebuilt its problems during this call');
  }

  dispose() {
    for (const b of this.buffers ?? []) b.destroy();
    this.buffers = null;
  }
}

// How far `got` is from `want`, element by element: how many differ in their bits (NaN equals
// NaN), and the largest absolute and relative difference among them (Infinity where one is not
// finite; 0 for 0 against -0).
export function compareBits(got, want) {
  const n = Math.max(got.length, want.length);
  let differ = Math.abs(got.length - want.length), maxAbs = 0, maxRel = 0;
  for (let i = 0; i < Math.min(got.length, want.length); i++) {
    const a = got[i], b = want[i];
    if (Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b))) continue;
    differ += 1;
    const d = Number.isFinite(a) && Number.isFinite(b) ? Math.abs(a - b) : Infinity;
    maxAbs = Math.max(maxAbs, d);
    maxRel = Math.max(maxRel, d === 0 || d === Infinity ? d : d / Math.max(Math.abs(a), Math.abs(b)));
  }
  return { count: n, differ, maxAbs, maxRel };
}

// Several compareBits() in one (the numbers of one frame).
export function mergeComparisons(list) {
  return list.reduce((m, c) => ({ count: m.count + c.count, differ: m.differ + c.differ,
    maxAbs: Math.max(m.maxAbs, c.maxAbs), maxRel: Math.max(m.maxRel, c.maxRel) }), { count: 0, differ: 0, maxAbs: 0, maxRel: 0 });
}

// |∂loss/∂value| summed over each head's channels, per pixel and head (BLNC order: (L, N_h)).
export function heatOf(gradValue, layout, L) {
  const out = new Float32Array(L * NUM_HEADS);
  for (let i = 0; i < L; i++) {
    for (let h = 0; h < NUM_HEADS; h++) {
      const base = layout === 'BLNC' ? (i * NUM_HEADS + h) * CHANNELS : (h * L + i) * CHANNELS;
      let s = 0;
      for (let c = 0; c < CHANNELS; c++) s += Math.abs(gradValue[base + c]);
      out[i * NUM_HEADS + h] = s;
    }
  }
  return out;
}

// Adam keeps the step size readable whatever the gradient's scale (location gradients grow
// with a level's width), so points travel at a steady pace. Locations are kept in [0, 1].
// Raw weights are kept in [MIN_WEIGHT, 1]: a point whose weight reached 0 would get no location
// gradient and stop, while with a small weight Adam still moves it at full pace. Softmax
// weights (Deformable DETR: softmax over a head's levels and points) are never 0; descent
// moves their logits.
export const MIN_WEIGHT = 0.02;
export const LEARNING_RATE = { locations: 0.01, weights: 0.003 };
// Step sizes relative to the locations' learning rate.
const RAW_WEIGHT_RATE = LEARNING_RATE.weights / LEARNING_RATE.locations;
const LOGIT_RATE = 5;
const SLOTS_PER_HEAD = LEVELS.length * NUM_POINTS;

export function newOptimizer() {
  return { t: 0, mLoc: new Float64Array(NUM_SLOTS * 2), vLoc: new Float64Array(NUM_SLOTS * 2),
    mW: new Float64Array(NUM_SLOTS), vW: new Float64Array(NUM_SLOTS) };
}

function adam(params, grad, m, v, t, lr, lo, hi) {
  const b1 = 0.9, b2 = 0.999, eps = 1e-12;
  const c1 = 1 - b1 ** t, c2 = 1 - b2 ** t;
  for (let i = 0; i < params.length; i++) {
    const g = grad[i];
    if (!Number.isFinite(g)) continue;
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    const step = (lr * (m[i] / c1)) / (Math.sqrt(v[i] / c2) + eps);
    params[i] = Math.min(hi, Math.max(lo, params[i] - step));
  }
}

// Each head's weights = softmax of its N_l·N_p logits (written into the float32 weights).
export function softmaxInto(logits, weights) {
  for (let h = 0; h < NUM_HEADS; h++) {
    const at = h * SLOTS_PER_HEAD;
    let max = -Infinity;
    for (let k = 0; k < SLOTS_PER_HEAD; k++) max = Math.max(max, logits[at + k]);
    let sum = 0;
    for (let k = 0; k < SLOTS_PER_HEAD; k++) sum += Math.exp(logits[at + k] - max);
    for (let k = 0; k < SLOTS_PER_HEAD; k++) weights[at + k] = Math.exp(logits[at + k] - max) / sum;
  }
  return weights;
}

// Logits whose softmax is the given weights (each head's weights are scaled to sum to 1).
export function logitsOf(weights) {
  const logits = new Float64Array(weights.length);
  for (let h = 0; h < NUM_HEADS; h++) {
    const at = h * SLOTS_PER_HEAD;
    let sum = 0;
    for (let k = 0; k < SLOTS_PER_HEAD; k++) sum += Math.max(1e-6, weights[at + k]);
    for (let k = 0; k < SLOTS_PER_HEAD; k++) logits[at + k] = Math.log(Math.max(1e-6, weights[at + k]) / sum);
  }
  return logits;
}

// Sets slot i's softmax weight to w (others keep their ratios): its logit becomes
// log(w / (1 − w) · Σ_{j≠i} exp(z_j)).
export function setSoftmaxWeight(logits, i, w) {
  const at = Math.floor(i / SLOTS_PER_HEAD) * SLOTS_PER_HEAD;
  const c = Math.min(0.999, Math.max(0.001, w));
  let max = -Infinity;
  for (let k = 0; k < SLOTS_PER_HEAD; k++) if (at + k !== i) max = Math.max(max, logits[at + k]);
  let rest = 0;
  for (let k = 0; k < SLOTS_PER_HEAD; k++) if (at + k !== i) rest += Math.exp(logits[at + k] - max);
  logits[i] = max + Math.log(rest) + Math.log(c / (1 - c));
}

// ∂loss/∂logit from ∂loss/∂weight through the softmax: w_i (g_i − Σ_j w_j g_j) within a head.
export function logitGradients(weights, gradWeights) {
  const out = new Float64Array(weights.length);
  for (let h = 0; h < NUM_HEADS; h++) {
    const at = h * SLOTS_PER_HEAD;
    let mean = 0;
    for (let k = 0; k < SLOTS_PER_HEAD; k++) mean += weights[at + k] * gradWeights[at + k];
    for (let k = 0; k < SLOTS_PER_HEAD; k++) out[at + k] = weights[at + k] * (gradWeights[at + k] - mean);
  }
  return out;
}

// One Adam step on every location and weight. settings.weights: 'raw' (the weights are the
// parameters) or 'softmax' (state.logits are, and the weights are their softmax);
// settings.learningRate: the locations' rate (the weights' follows it).
export function descend(state, result, opt, settings = {}) {
  const lr = settings.learningRate ?? LEARNING_RATE.locations;
  opt.t += 1;
  adam(state.samplingLocations, result.gradSamplingLocations, opt.mLoc, opt.vLoc, opt.t, lr, 0, 1);
  if (settings.weights === 'softmax') {
    const g = logitGradients(state.attentionWeights, result.gradAttentionWeights);
    adam(state.logits, g, opt.mW, opt.vW, opt.t, LOGIT_RATE * lr, -60, 60);
    softmaxInto(state.logits, state.attentionWeights);
  } else {
    const wlr = settings.learningRate === undefined ? LEARNING_RATE.weights : RAW_WEIGHT_RATE * lr;
    adam(state.attentionWeights, result.gradAttentionWeights, opt.mW, opt.vW, opt.t, wlr, MIN_WEIGHT, 1);
  }
}
