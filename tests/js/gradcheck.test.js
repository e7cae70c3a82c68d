// Gradients of the wasm modules against central finite differences of the float64 reference
// forward, with samples kept away from grid lines (where bilinear interpolation has kinks).
import { test } from 'node:test';
import { init } from '../../bindings/index.js';
import { referenceForward } from '../../bindings/reference.js';
import { assertClose, OPTION_COMBOS, rng, shapesFor } from './helpers.js';

const STEP = 1e-6;

// A normalised coordinate whose pixel position is i + f with f in [0.05, 0.95] (>= 1e-3 pixel
// from grid lines even after float32 rounding), sometimes clamped or outside the level.
function offGridCoordinate(r, size, alignCorners) {
  const i = r.int(-1, size - 1);
  const u = i + r.uniform(0.05, 0.95);
  if (alignCorners) return size === 1 ? r.uniform(-0.5, 1.5) : u / (size - 1);
  return (u + 0.5) / size;
}

function makeCase(seed, options) {
  const r = rng(seed);
  const dims = { B: 2, Q: 2, H: 2, C: r.pick([1, 3, 5]), P: 2, spatialShapes: [[3, 4], [2, 2], [1, 3]] };
  const s = shapesFor(dims, options);
  const loc = new Float32Array(s.samplingLocations.reduce((a, b) => a * b, 1));
  const blocked = options.samplingLocationsLayout === 'B2QHLP';
  const per = dims.H * s.NL * dims.P;
  const pointsPerBatch = dims.Q * per;
  // Walk (b, q, h, l, p) and write x and y wherever the layout puts them.
  for (let b = 0; b < dims.B; b++) for (let n = 0; n < pointsPerBatch; n++) {
    const l = Math.floor(n / dims.P) % s.NL;
    const [Hl, Wl] = dims.spatialShapes[l];
    const x = offGridCoordinate(r, Wl, options.alignCorners), y = offGridCoordinate(r, Hl, options.alignCorners);
    if (blocked) {
      loc[b * 2 * pointsPerBatch + n] = x;
      loc[b * 2 * pointsPerBatch + pointsPerBatch + n] = y;
    } else {
      loc[(b * pointsPerBatch + n) * 2] = x;
      loc[(b * pointsPerBatch + n) * 2 + 1] = y;
    }
  }
  const fill = (shape) => Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => r.uniform(-1, 1));
  return {
    args: {
      value: { data: fill(s.value), shape: s.value },
      spatialShapes: dims.spatialShapes,
      samplingLocations: { data: loc, shape: s.samplingLocations },
      attentionWeights: { data: fill(s.attentionWeights), shape: s.attentionWeights },
      ...options,
    },
    gradOutput: { data: fill(s.output), shape: s.output },
  };
}

// d/dx of sum(gradOutput * forward) for every element of one input, in float64.
function finiteDifferences(args, gradOutput, name) {
  const base = Float64Array.from(args[name].data);
  const grad = new Float64Array(base.length);
  const loss = (data) => {
    const out = referenceForward({ ...args, [name]: { data, shape: args[name].shape } }).data;
    let sum = 0;
    for (let i = 0; i < out.length; i++) sum += out[i] * gradOutput.data[i];
    return sum;
  };
  for (let i = 0; i < base.length; i++) {
    const plus = base.slice(); plus[i] += STEP;
    const minus = base.slice(); minus[i] -= STEP;
    grad[i] = (loss(plus) - loss(minus)) / (2 * STEP);
  }
  return grad;
}

for (const simd of [true, false]) {
  test(`wasm ${simd ? 'SIMD' : 'scalar'} gradients match central finite differences, all 16 option combinations`, async () => {
    const msda = await init({ simd });
    for (const [ci, options] of OPTION_COMBOS.entries()) {
      const seed = 77 + ci;
      const { args, gradOutput } = makeCase(seed, options);
      const g = msda.backward({ ...args, gradOutput });
      const where = `seed ${seed} ${JSON.stringify(options)}`;
      for (const [input, grad] of [['value', 'gradValue'], ['samplingLocations', 'gradSamplingLocations'],
        ['attentionWeights', 'gradAttentionWeights']]) {
        assertClose(g[grad].data, finiteDifferences(args, gradOutput, input), `${grad} vs finite differences, ${where}`,
          { atol: 2e-5, rtol: 1e-4, scaleTol: 0 });
      }
    }
  });
}
