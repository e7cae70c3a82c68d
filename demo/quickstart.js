#!/usr/bin/env node
// Quickstart: forward and backward on a small case through the wasm package, then a check of
// the gradients against central finite differences of the float64 reference forward.
//
//   npm run demo:quickstart
import { init } from '../bindings/index.js';
import { referenceForward } from '../bindings/reference.js';

// A small seeded generator so every run prints the same numbers.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rand = rng(7);
const tensor = (shape, f) => {
  const n = shape.reduce((a, b) => a * b, 1);
  return { data: Float32Array.from({ length: n }, f), shape };
};
const show = (t, k = 4) => `[${Array.from(t.data.slice(0, k), (x) => x.toFixed(5)).join(', ')}${t.data.length > k ? ', …' : ''}]`;

// Problem: batch 1, 3 queries, 2 heads of 3 channels, two levels (4×6 and 2×3), 2 points each.
const spatialShapes = [[4, 6], [2, 3]];
const L = spatialShapes.reduce((s, [h, w]) => s + h * w, 0);
const [B, Q, H, C, NL, P] = [1, 3, 2, 3, spatialShapes.length, 2];

const msda = await init();
console.log(`ms-deform-attn quickstart — backend: ${msda.backend} (${msda.simd ? 'SIMD128' : 'scalar'} WebAssembly)`);

const value = tensor([B, L, H, C], () => rand() * 2 - 1);
// Locations well inside the levels and off the pixel grid lines, where bilinear
// interpolation is smooth and finite differences are meaningful.
const samplingLocations = tensor([B, Q, H, NL, P, 2], () => 0.15 + 0.7 * rand());
const attentionWeights = tensor([B, Q, H, NL, P], () => rand() / (NL * P));
const args = { value, spatialShapes, samplingLocations, attentionWeights };

const output = msda.forward(args);
console.log('\nforward');
console.log(`  value               ${JSON.stringify(value.shape)}  (B, L, N_h, C_h), L = ${L}`);
console.log(`  sampling_locations  ${JSON.stringify(samplingLocations.shape)}  (B, N_q, N_h, N_l, N_p, 2)`);
console.log(`  attention_weights   ${JSON.stringify(attentionWeights.shape)}  (B, N_q, N_h, N_l, N_p)`);
console.log(`  output              ${JSON.stringify(output.shape)}  (B, N_q, N_h·C_h) = ${show(output)}`);

// Backward of loss = Σ gradOutput · output, for a random gradOutput.
const gradOutput = tensor(output.shape, () => rand() * 2 - 1);
const grads = msda.backward({ ...args, gradOutput });
console.log('\nbackward');
for (const [name, t] of Object.entries(grads)) console.log(`  ${name.padEnd(22)}${JSON.stringify(t.shape).padEnd(20)}${show(t)}`);

// Finite differences: d(loss)/d(x) ≈ (loss(x + h) − loss(x − h)) / 2h in float64.
const loss = (a) => {
  const out = referenceForward(a).data;
  let s = 0;
  for (let i = 0; i < out.length; i++) s += out[i] * gradOutput.data[i];
  return s;
};
const step = 1e-6;
function numeric(name, index) {
  const plus = Float64Array.from(args[name].data), minus = Float64Array.from(args[name].data);
  plus[index] += step;
  minus[index] -= step;
  const at = (d) => ({ ...args, [name]: { data: d, shape: args[name].shape } });
  return (loss(at(plus)) - loss(at(minus))) / (2 * step);
}
const checks = [
  ['samplingLocations', 'gradSamplingLocations', [0, 1, 5, 12, 23]],
  ['attentionWeights', 'gradAttentionWeights', [0, 3, 7, 11]],
  // Most value elements are read by no sample (gradient 0); check the five it touches most.
  ['value', 'gradValue', Array.from(grads.gradValue.data.keys())
    .sort((i, j) => Math.abs(grads.gradValue.data[j]) - Math.abs(grads.gradValue.data[i])).slice(0, 5)],
];
console.log('\nfinite-difference check (central, step 1e-6, float64 reference forward)');
let worst = 0;
for (const [input, grad, indices] of checks) {
  for (const i of indices) {
    const analytic = grads[grad].data[i];
    const fd = numeric(input, i);
    const rel = Math.abs(analytic - fd) / Math.max(1e-3, Math.abs(fd));
    worst = Math.max(worst, rel);
    console.log(`  ${`${grad}[${i}]`.padEnd(26)} analytic ${analytic.toExponential(6).padStart(14)}   finite diff ${fd.toExponential(6).padStart(14)}   rel err ${rel.toExponential(1)}`);
  }
}
// float32 kernel against a float64 derivative: agreement to ~1e-5 relative is what float32 allows.
const ok = worst < 1e-3;
console.log(`\nworst relative error ${worst.toExponential(2)}: ${ok ? 'gradients agree' : 'GRADIENTS DISAGREE'}`);
process.exitCode = ok ? 0 : 1;
