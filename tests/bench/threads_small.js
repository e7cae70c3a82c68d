// Small problems on 1 and 2 threads: where does a second thread start to pay? Problems of growing
// size (one 32 x 32 level, 8 heads, 32 channels, 4 points: 1,024 multiply-adds a query) through
// msda.prepare, native addon and wasm SIMD, 1 and 2 threads interleaved, minimum over rounds, µs.
// Prints the part count the library chose for 2 threads (native: parts the pool ran) and the
// 2-thread time as a ratio of 1 thread's. Not a test (docs/threads.md, "Small problems"):
//
//   node tests/bench/threads_small.js [--rounds N] [--json]
import { init } from '../../bindings/index.js';

const argv = process.argv.slice(2);
const rounds = argv.includes('--rounds') ? Number(argv[argv.indexOf('--rounds') + 1]) : 200;
const json = argv.includes('--json');

function makeCase(Q) {
  const spatialShapes = [[32, 32]];
  const B = 1, L = 1024, H = 8, C = 32, NL = 1, P = 4;
  let s = 7;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    problem: { batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, spatialShapes },
    value: fill(B * L * H * C, () => r() * 2 - 1), loc: fill(B * Q * H * NL * P * 2, r),
    weights: fill(B * Q * H * NL * P, r), gradOutput: fill(B * Q * H * C, () => r() * 2 - 1),
    macs: B * Q * H * NL * P * C,
  };
}

const apis = [
  ['native', await init({ backend: 'native' }), await init({ backend: 'native', threads: 2 })],
  ['wasm', await init({ simd: true }), await init({ threads: 2 })],
];
const rows = [];
for (const Q of [16, 64, 128, 256, 512, 1024, 2048, 4096]) {
  const c = makeCase(Q);
  for (const [backend, one, two] of apis) {
    const runs = [one, two].map((msda) => {
      const p = msda.prepare(c.problem);
      p.value.set(c.value);
      p.samplingLocations.set(c.loc);
      p.attentionWeights.set(c.weights);
      p.gradOutput.set(c.gradOutput);
      return { msda, p, fwd: Infinity, bwd: Infinity };
    });
    const pool = two._backend?.pool;
    const before = pool ? pool.workerParts() : 0;
    const n = Math.max(5, Math.round(rounds * 256 / Math.max(Q, 256)));
    for (let i = 0; i < n; i++) {
      for (const run of runs) {
        let t = performance.now();
        run.p.forward();
        run.fwd = Math.min(run.fwd, performance.now() - t);
        t = performance.now();
        run.p.backward();
        run.bwd = Math.min(run.bwd, performance.now() - t);
      }
    }
    const workerParts = pool ? pool.workerParts() - before : null;
    for (const run of runs) run.p.dispose();
    rows.push({ backend, queries: Q, macs: c.macs, fwd1_us: +(runs[0].fwd * 1e3).toFixed(1),
      fwd2_us: +(runs[1].fwd * 1e3).toFixed(1), bwd1_us: +(runs[0].bwd * 1e3).toFixed(1),
      bwd2_us: +(runs[1].bwd * 1e3).toFixed(1), fwd_2_over_1: +(runs[0].fwd / runs[1].fwd).toFixed(2),
      bwd_2_over_1: +(runs[0].bwd / runs[1].bwd).toFixed(2), worker_parts: workerParts, calls: 2 * n });
  }
}
if (json) {
  for (const r of rows) console.log(JSON.stringify(r));
} else {
  console.log('| backend | queries | multiply-adds | fwd 1 / 2 threads µs | speed-up | bwd 1 / 2 threads µs | speed-up | wasm parts run by the worker / calls |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(`| ${r.backend} | ${r.queries} | ${r.macs} | ${r.fwd1_us} / ${r.fwd2_us} | ${r.fwd_2_over_1.toFixed(2)} × | ${r.bwd1_us} / ${r.bwd2_us} | ${r.bwd_2_over_1.toFixed(2)} × | ${r.worker_parts === null ? '–' : `${r.worker_parts} / ${r.calls}`} |`);
  }
}
