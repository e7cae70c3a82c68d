// Threads speed-up: the decoder and encoder configs of CONTRACT.md on 1 and 2 threads, native
// addon and wasm SIMD, through msda.prepare (tensors stay in the heap, so only the kernels and
// the threads are timed). Minimum over interleaved rounds, ms. Not a test; `make bench` owns the
// benchmark table, this is the threads column's measurement on its own:
//
//   node tests/bench/threads_bench.js [--rounds N] [--json]
//
// Beside each 2-thread speed-up, its ceiling: what the machine gives a second process at that
// moment. Two forked 1-thread processes (this script with --child) run the same calls, once one
// alone and once both at once, in every round; the ceiling is 2 x alone / the slower of the two at
// once (2.00 where both cores are free), and "of ceiling" the speed-up over it.
//
// On a machine shared with other jobs, 2-thread times need both cores free: run it when the
// machine is otherwise idle (or raise this session's priority), else the speed-up is understated.
import { fork } from 'node:child_process';
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

function prepared(msda, c) {
  const p = msda.prepare(c.problem);
  p.value.set(c.value);
  p.samplingLocations.set(c.loc);
  p.attentionWeights.set(c.weights);
  p.gradOutput.set(c.gradOutput);
  return p;
}

// A child: one 1-thread instance of argv[1]'s backend on argv[2]'s case; times a forward and a
// backward for each message.
if (argv[0] === '--child') {
  const c = makeCase(argv[2]);
  const msda = await init(argv[1] === 'native' ? { backend: 'native' } : { simd: true });
  const p = prepared(msda, c);
  process.on('message', () => {
    let t = performance.now();
    p.forward();
    const fwd = performance.now() - t;
    t = performance.now();
    p.backward();
    process.send({ fwd, bwd: performance.now() - t });
  });
  process.on('disconnect', () => process.exit(0));
  process.send('ready');
} else {

const me = new URL(import.meta.url).pathname;
function child(backend, config) {
  const proc = fork(me, ['--child', backend, config], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let waiting = null;
  const ready = new Promise((resolve, reject) => {
    proc.once('error', reject);
    proc.once('exit', (code) => reject(new Error(`threads_bench: a ${backend} child exited (${code})`)));
    proc.once('message', resolve);
  });
  proc.on('message', (m) => { if (m !== 'ready' && waiting) { const w = waiting; waiting = null; w(m); } });
  return { proc, ready, call: () => new Promise((resolve) => { waiting = resolve; proc.send('go'); }) };
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
  const runs = apis.map(([backend, threads, msda]) => ({ backend, threads: msda.threads, p: prepared(msda, c), fwd: Infinity, bwd: Infinity }));
  const ceilings = {};
  for (const backend of ['native', 'wasm']) {
    const pair = [child(backend, config), child(backend, config)];
    await Promise.all(pair.map((k) => k.ready));
    ceilings[backend] = { pair, alone: { fwd: Infinity, bwd: Infinity }, both: { fwd: Infinity, bwd: Infinity } };
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
    for (const k of Object.values(ceilings)) {
      const alone = await k.pair[0].call();
      const both = await Promise.all(k.pair.map((x) => x.call()));
      for (const pass of ['fwd', 'bwd']) {
        k.alone[pass] = Math.min(k.alone[pass], alone[pass]);
        k.both[pass] = Math.min(k.both[pass], Math.max(both[0][pass], both[1][pass]));
      }
    }
  }
  for (const k of Object.values(ceilings)) for (const x of k.pair) x.proc.disconnect();
  for (const run of runs) {
    run.p.dispose();
    const one = runs.find((o) => o.backend === run.backend && o.threads === 1);
    const k = ceilings[run.backend];
    const ceiling = run.threads === 2 && k ? { fwd_ceiling: +(2 * k.alone.fwd / k.both.fwd).toFixed(2),
      bwd_ceiling: +(2 * k.alone.bwd / k.both.bwd).toFixed(2) } : {};
    results.push({ config, backend: run.backend, threads: run.threads, fwd_ms: +run.fwd.toFixed(2),
      bwd_ms: +run.bwd.toFixed(2), fwd_speedup: +(one.fwd / run.fwd).toFixed(2),
      bwd_speedup: +(one.bwd / run.bwd).toFixed(2), ...ceiling, ...c.dims });
  }
}
if (json) {
  for (const r of results) console.log(JSON.stringify(r));
} else {
  console.log('| config | backend | threads | fwd ms | bwd ms | fwd speed-up | bwd speed-up | fwd ceiling (of it) | bwd ceiling (of it) |');
  console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|');
  const of = (speedup, ceiling) => (ceiling === undefined ? '' : `${ceiling.toFixed(2)} × (${(speedup / ceiling).toFixed(2)})`);
  for (const r of results) {
    console.log(`| ${r.config} | ${r.backend === 'wasm' ? 'wasm SIMD' : r.backend} | ${r.threads} | ${r.fwd_ms.toFixed(2)} | ${r.bwd_ms.toFixed(2)} | ${r.fwd_speedup.toFixed(2)} × | ${r.bwd_speedup.toFixed(2)} × | ${of(r.fwd_speedup, r.fwd_ceiling)} | ${of(r.bwd_speedup, r.bwd_ceiling)} |`);
  }
  console.log('ceiling: what two 1-thread processes got at the same moment (2 x one alone / the slower of two at once); (of it): the speed-up over it');
}
}
