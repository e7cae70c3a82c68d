// What the page computes after every change, without any DOM: the target feature, forward,
// the loss, backward, and one gradient-descent step. `msda` is an instance from init().
import {
  LEVELS, NUM_HEADS, NUM_POINTS, valueToLayout, valueFromLayout, locationsToLayout,
  locationsFromLayout, valueShape, locationsShape, weightsShape,
} from './scene.js';

const NUM_SLOTS = NUM_HEADS * LEVELS.length * NUM_POINTS;
const now = () => (globalThis.performance ? performance.now() : Date.now());

// The arguments of msda.forward for the given state, in the layouts chosen in `opts`.
// Exposed as-is on the page (window.__msda) so a test can replay the exact call in Node.
export function forwardArgs(data, locations, weights, opts) {
  return {
    value: { data: valueToLayout(data.value, opts.valueLayout, data.length), shape: valueShape(opts.valueLayout, data.length) },
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
export function targetArgs(data, target, opts) {
  const loc = new Float32Array(NUM_SLOTS * 2);
  for (let i = 0; i < NUM_SLOTS; i++) { loc[2 * i] = target[0]; loc[2 * i + 1] = target[1]; }
  const w = new Float32Array(NUM_SLOTS).fill(1 / (LEVELS.length * NUM_POINTS));
  return forwardArgs(data, loc, w, opts);
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

// Adam keeps the step size readable whatever the gradient's scale (location gradients grow
// with a level's width), so points travel at a steady pace. Locations are kept in [0, 1] and
// weights in [MIN_WEIGHT, 1]: a point whose weight reached 0 would get no location gradient
// and stop, while with a small weight Adam still moves it at full pace.
export const MIN_WEIGHT = 0.02;
export const LEARNING_RATE = { locations: 0.01, weights: 0.003 };

export function newOptimizer() {
  return { t: 0, mLoc: new Float64Array(NUM_SLOTS * 2), vLoc: new Float64Array(NUM_SLOTS * 2),
    mW: new Float64Array(NUM_SLOTS), vW: new Float64Array(NUM_SLOTS) };
}

function adam(params, grad, m, v, t, lr, lo) {
  const b1 = 0.9, b2 = 0.999, eps = 1e-12;
  const c1 = 1 - b1 ** t, c2 = 1 - b2 ** t;
  for (let i = 0; i < params.length; i++) {
    const g = grad[i];
    if (!Number.isFinite(g)) continue;
    m[i] = b1 * m[i] + (1 - b1) * g;
    v[i] = b2 * v[i] + (1 - b2) * g * g;
    const step = (lr * (m[i] / c1)) / (Math.sqrt(v[i] / c2) + eps);
    params[i] = Math.min(1, Math.max(lo, params[i] - step));
  }
}

export function descend(state, result, opt) {
  opt.t += 1;
  adam(state.samplingLocations, result.gradSamplingLocations, opt.mLoc, opt.vLoc, opt.t, LEARNING_RATE.locations, 0);
  adam(state.attentionWeights, result.gradAttentionWeights, opt.mW, opt.vW, opt.t, LEARNING_RATE.weights, MIN_WEIGHT);
}
