// What the WebGPU backend's start costs (docs/webgpu.md, what init costs): in one fresh process,
// `await init({ backend: 'webgpu' })`, then the first forward, then the first backward of a small
// problem, in ms. Pipelines compile when first needed, so each call's time is mostly compiles.
//
//   node tests/bench/webgpu_init.js [ROOT]    (ROOT: a checkout to time, by default this one)
//
// One process per run (nothing is cached across processes); VK_ICD_FILENAMES picks the driver.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';

const root = path.resolve(process.argv[2] ?? new URL('../..', import.meta.url).pathname);
const { init } = await import(pathToFileURL(path.join(root, 'bindings/node.js')).href);
const fill = (n, f) => Float32Array.from({ length: n }, (_, i) => f(i));
const args = {
  value: { data: fill(12 * 2 * 3, Math.sin), shape: [1, 12, 2, 3] }, spatialShapes: [[3, 3], [1, 3]],
  samplingLocations: { data: fill(4 * 2 * 2 * 2 * 2, (i) => (Math.cos(i) + 1) / 2), shape: [1, 4, 2, 2, 2, 2] },
  attentionWeights: { data: fill(4 * 2 * 2 * 2, (i) => Math.cos(3 * i)), shape: [1, 4, 2, 2, 2] },
};
const t0 = performance.now();
const msda = await init({ backend: 'webgpu' });
const t1 = performance.now();
await msda.forward(args);
const t2 = performance.now();
await msda.backward({ ...args, gradOutput: { data: fill(4 * 6, () => 1), shape: [1, 4, 6] } });
const t3 = performance.now();
console.log(JSON.stringify({ root, init: Math.round(t1 - t0), firstForward: Math.round(t2 - t1), firstBackward: Math.round(t3 - t2) }));
msda.dispose();
