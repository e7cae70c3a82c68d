// make bench-webgpu, crowding: the WebGPU backward where samples crowd one place, against the
// same problem with its samples spread. 2,000 queries (batch 1) on a 64x64 ... 8x8 pyramid, 8
// heads, 32 channels, 4 points (docs/webgpu.md "The backward's passes"):
//   spread    locations uniform over the image
//   one place every sample of every query at the same place, (0.3, 0.7), on every level
//   border    padding 'border', every point far outside (x 7, y -5): all clamped to one corner
// Interleaved rounds, inputs on the GPU, results left there (dispatchBackward, then the queue
// drained): wall time per call; each crowded problem's median over the spread one's is the
// target's ratio (<= 2.5). Every output's bits against wasm SIMD's once, first.
//
//   node tests/bench/webgpu_crowd.js [--queries 2000] [--reps 5] [--json out.json]
import { performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { rng } from './cases.js';
import { init } from '../../bindings/node.js';

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
const Q = Number(opt('--queries', 2000)), reps = Number(opt('--reps', 5)), jsonOut = opt('--json', null);
const LEVELS = [[64, 64], [32, 32], [16, 16], [8, 8]], H = 8, C = 32, P = 4, NL = LEVELS.length;
const L = LEVELS.reduce((a, [h, w]) => a + h * w, 0);

function makeProblem(kind) {
  const rand = rng(0xc20d);
  const uniform = (lo, hi) => lo + (hi - lo) * rand();
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  const locs = new Float32Array(Q * H * NL * P * 2);
  for (let i = 0; i < locs.length; i += 2) {
    if (kind === 'spread') { locs[i] = uniform(0, 1); locs[i + 1] = uniform(0, 1); }
    else if (kind === 'one place') { locs[i] = 0.3; locs[i + 1] = 0.7; }
    else { locs[i] = 7; locs[i + 1] = -5; }
  }
  return {
    value: { data: fill(L * H * C, () => uniform(-1, 1)), shape: [1, L, H, C] },
    spatialShapes: LEVELS,
    samplingLocations: { data: locs, shape: [1, Q, H, NL, P, 2] },
    attentionWeights: { data: fill(Q * H * NL * P, () => uniform(0, 1) / (NL * P)), shape: [1, Q, H, NL, P] },
    gradOutput: { data: fill(Q * H * C, () => uniform(-1, 1)), shape: [1, Q, H * C] },
    ...(kind === 'border' ? { paddingMode: 'border' } : {}),
  };
}

const gpu = await init({ backend: 'webgpu' });
const wasm = await init({ backend: 'wasm', simd: true });
const d = gpu.device;
const upload = (t) => {
  const buffer = d.createBuffer({ size: t.data.byteLength, usage: 0x80 | 0x8 });
  d.queue.writeBuffer(buffer, 0, t.data);
  return { buffer, shape: t.shape };
};
const KINDS = ['spread', 'one place', 'border'];
const cases = KINDS.map((kind) => {
  const cpu = makeProblem(kind);
  const g = { ...cpu };
  for (const name of ['value', 'samplingLocations', 'attentionWeights', 'gradOutput']) g[name] = upload(cpu[name]);
  return { kind, cpu, g };
});

process.stderr.write(`webgpu_crowd: ${gpu.adapterInfo?.architecture || gpu.adapterInfo?.vendor || 'adapter'}, ${Q} queries, ${reps} rounds\n`);
const bits = {};
for (const c of cases) {
  const got = await gpu.backward(c.cpu), want = wasm.backward(c.cpu);
  let differ = 0, all = 0;
  for (const name of Object.keys(want)) {
    const a = new Uint32Array(got[name].data.buffer), b = new Uint32Array(want[name].data.buffer);
    for (let i = 0; i < b.length; i++) if (a[i] !== b[i]) differ++;
    all += b.length;
  }
  bits[c.kind] = { differ, all };
  const t0 = performance.now();
  wasm.backward(c.cpu);
  c.wasmMs = performance.now() - t0;
}

const times = Object.fromEntries(KINDS.map((k) => [k, []]));
for (let r = 0; r < reps; r++) {
  for (const c of cases) {
    const t0 = performance.now();
    const out = gpu.dispatchBackward(c.g);
    await d.queue.onSubmittedWorkDone();
    times[c.kind].push(performance.now() - t0);
    for (const t of Object.values(out)) t.buffer.destroy();
  }
}
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
const spread = median(times.spread);
const rows = cases.map((c) => ({
  problem: c.kind, ms: median(times[c.kind]), ratio: median(times[c.kind]) / spread, wasmMs: c.wasmMs, differing: bits[c.kind].differ, elements: bits[c.kind].all,
}));
console.log(`WebGPU backward, ${Q} queries, 64x64..8x8, ${H} heads, ${C} channels, ${P} points (median of ${reps}, wall)`);
console.log('| problem | ms | / spread (target <= 2.5 crowded) | wasm SIMD ms (1 call) | outputs differing from wasm SIMD |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.problem} | ${r.ms.toFixed(1)} | ${r.ratio.toFixed(2)} | ${r.wasmMs.toFixed(1)} | ${r.differing} of ${r.elements} |`);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify({ queries: Q, reps, rows, times }, null, 1));
for (const c of cases) for (const name of ['value', 'samplingLocations', 'attentionWeights', 'gradOutput']) c.g[name].buffer.destroy();
gpu.dispose();
wasm.dispose();
