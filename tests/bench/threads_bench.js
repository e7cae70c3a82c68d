// Threads speed-up: the decoder and encoder configs of CONTRACT.md on 1 and 2 threads, native
// addon and wasm SIMD, through msda.prepare (tensors stay in the heap, so only the kernels and
// the threads are timed). Minimum over interleaved rounds, ms. Not a test; `make bench` owns the
// benchmark table, this is the threads column's measurement on its own:
//
//   node tests/bench/threads_bench.js [--rounds N] [--json]
//
// On a machine shared with other jobs, 2-thread times need both cores free: run it when the
// machine is otherwise idle (or raise this session's priority), else the speed-up is understated.
// So each round also runs the same calls in two 1-thread child processes, first one alone, then
// both at the same moment: `fwd ceiling` / `bwd ceiling` is 2 × its time alone over the slower
// of the two at once, what a second core gives a second process in the same minutes, and `of
// ceiling` the 2-thread speed-up over it (docs/threads.md).
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { init } from '../../bindings/index.js';

const argv = process.argv.slice(2);
const rounds = argv.includes('--rounds') ? Number(argv[argv.indexOf('--rounds') + 1]) : 10;
const json = argv.includes('--json');

// Every query samples within a few pixels of its own reference point, as in a trained model.
function makeCase(config) {
  const spatialShapes = [[100, 167], [50, 84], [25, 42], [13, 21]];
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const B = 1, Q = config === 'decoder' ? 300 : L, H = 8, C = 32, NL = 4, P = 4;
  let s = 1;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  const loc = new Float32Array(B * Q * H * NL * P * 2);
  for (let q = 0; q < Q; q++) {
    const x = r(), y = r();
    for (let k = 0; k < H * NL * P; k++) {
      loc[(q * H * NL * P + k) * 2] = x + (r() - 0.5) * 0.05;
      loc[(q * H * NL * P + k) * 2 + 1] = y + (r() - 0.5) * 0.05;
    }
  }
  return {
    problem: { batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, spatialShapes },
    dims: { B, L, Q, H, C, NL, P },
    value: fill(B * L * H * C, () => r() * 2 - 1), loc, weights: fill(B * Q * H * NL * P, r),
    gradOutput: fill(B * Q * H * C, () => r() * 2 - 1),
  };
}

// A child: `--child <backend> <config>` prepares the config on one thread, then runs a forward
// and a backward for each message, replying their times.
if (argv[0] === '--child') {
  const msda = await init(argv[1] === 'native' ? { backend: 'native' } : { simd: true });
  const c = makeCase(argv[2]);
  const p = msda.prepare(c.problem);
  p.value.set(c.value);
  p.samplingLocations.set(c.loc);
  p.attentionWeights.set(c.weights);
  p.gradOutput.set(c.gradOutput);
  process.on('message', () => {
    let t = performance.now();
    p.forward();
    const fwd = performance.now() - t;
    t = performance.now();
    p.backward();
    process.send({ fwd, bwd: performance.now() - t });
  });
  process.on('disconnect', () => process.exit(0));   // the parent has gone
  process.send('ready');
  await new Promise(() => {});
}

function child(backend, config) {
  const ch = fork(fileURLToPath(import.meta.url), ['--child', backend, config], { stdio: 'inherit' });
  const replies = [];
  let wake = null;
  ch.on('message', (m) => { replies.push(m); if (wake) wake(); });
  const next = async () => {
    while (!replies.length) await new Promise((r) => { wake = r; });
    return replies.shift();
  };
  return { ch, next, run: async () => { ch.send('run'); return next(); } };
}

const apis = [
  ['native', 1, await init({ backend: 'native' })],
  ['native', 2, await init({ backend: 'native', threads: 2 })],
  ['wasm', 1, await init({ simd: true })],
  ['wasm', 2, await init({ threads: 2 })],
];
const results = [];
for (const config of ['decoder', 'encoder']) {
  const c = makeCase(config);
  const runs = apis.map(([backend, threads, msda]) => {
    const p = msda.prepare(c.problem);
    p.value.set(c.value);
    p.samplingLocations.set(c.loc);
    p.attentionWeights.set(c.weights);
    p.gradOutput.set(c.gradOutput);
    return { backend, threads: msda.threads, p, fwd: Infinity, bwd: Infinity };
  });
  // Two 1-thread processes a backend: one alone, then both at once, in every round.
  const pairs = {};
  for (const backend of ['native', 'wasm']) {
    const kids = [child(backend, config), child(backend, config)];
    for (const k of kids) await k.next();
    pairs[backend] = { kids, solo: { fwd: Infinity, bwd: Infinity }, both: { fwd: Infinity, bwd: Infinity } };
  }
  // Interleaved, so 1 and 2 threads see the same machine; decoder calls are short, so more of them.
  for (let i = 0; i < (config === 'decoder' ? rounds * 5 : rounds); i++) {
    for (const run of runs) {
      let t = performance.now();
      run.p.forward();
      run.fwd = Math.min(run.fwd, performance.now() - t);
      t = performance.now();
      run.p.backward();
      run.bwd = Math.min(run.bwd, performance.now() - t);
    }
    for (const pr of Object.values(pairs)) {
      const solo = await pr.kids[0].run();
      const [a, b] = await Promise.all(pr.kids.map((k) => k.run()));
      for (const pass of ['fwd', 'bwd']) {
        pr.solo[pass] = Math.min(pr.solo[pass], solo[pass]);
        pr.both[pass] = Math.min(pr.both[pass], Math.max(a[pass], b[pass]));
      }
    }
  }
  for (const pr of Object.values(pairs)) for (const k of pr.kids) k.ch.kill();
  for (const run of runs) {
    run.p.dispose();
    const one = runs.find((o) => o.backend === run.backend && o.threads === 1);
    const pr = pairs[run.backend];
    const ceiling = (pass) => +(2 * pr.solo[pass] / pr.both[pass]).toFixed(2);
    results.push({ config, backend: run.backend, threads: run.threads, fwd_ms: +run.fwd.toFixed(2),
      bwd_ms: +run.bwd.toFixed(2), fwd_speedup: +(one.fwd / run.fwd).toFixed(2),
      bwd_speedup: +(one.bwd / run.bwd).toFixed(2), fwd_ceiling: ceiling('fwd'), bwd_ceiling: ceiling('bwd'),
      ...c.dims });
  }
}
if (json) {
  for (const r of results) console.log(JSON.stringify(r));
} else {
  console.log('| config | backend | threads | fwd ms | bwd ms | fwd speed-up | bwd speed-up | fwd ceiling | bwd ceiling | fwd / bwd of ceiling |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    const of = r.threads > 1 ? `${(r.fwd_speedup / r.fwd_ceiling).toFixed(2)} / ${(r.bwd_speedup / r.bwd_ceiling).toFixed(2)}` : '';
    console.log(`| ${r.config} | ${r.backend === 'wasm' ? 'wasm SIMD' : r.backend} | ${r.threads} | ${r.fwd_ms.toFixed(2)} | ${r.bwd_ms.toFixed(2)} | ${r.fwd_speedup.toFixed(2)} × | ${r.bwd_speedup.toFixed(2)} × | ${r.fwd_ceiling.toFixed(2)} × | ${r.bwd_ceiling.toFixed(2)} × | ${of} |`);
  }
}
