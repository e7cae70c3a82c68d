// The GPU check's CPU side (gpucheck.sh): wasm SIMD forward and backward on the bench's inputs,
// one thread and all of this machine's CPUs, min of reps, for the goal "the WebGPU backward >= 5x
// faster than wasm SIMD on the same machine".
//
//   node tests/bench/gpucheck/cpu_times.js CHECKOUT [--cases encoder,decoder] [--reps 5] [--json out.json]
import path from 'node:path';
import os from 'node:os';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';

const argv = process.argv.slice(2);
const root = path.resolve(argv[0] ?? '.');
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const imp = (p) => import(pathToFileURL(path.join(root, p)).href);
const { makeCase } = await imp('tests/bench/cases.js');
const { defineCase } = await imp('tests/bench/gpu_model.js');
const { init } = await imp('bindings/node.js');
const reps = Number(opt('--reps', '5'));
const rows = [];
console.log(`CPU: ${os.cpus().length} x ${os.cpus()[0]?.model}; Node ${process.version}`);
for (const name of opt('--cases', 'encoder,decoder').split(',')) {
  defineCase(name);
  const c = makeCase(name);
  for (const threads of [1, os.cpus().length]) {
    const m = await init({ backend: 'wasm', threads });
    const time = async (fn) => { await fn(); let best = Infinity; for (let r = 0; r < reps; r++) { const t = performance.now(); await fn(); best = Math.min(best, performance.now() - t); } return best; };
    const fwd = await time(() => m.forward(c.args));
    const bwd = await time(() => m.backward(c.backwardArgs));
    const row = { case: name, backend: 'wasm SIMD', threads: m.threads, fwd_ms: fwd, bwd_ms: bwd };
    rows.push(row);
    console.log(`| ${name} | wasm SIMD | ${m.threads} thread(s) | fwd ${fwd.toFixed(1)} ms | bwd ${bwd.toFixed(1)} ms |`);
    m.dispose();
  }
}
if (opt('--json')) writeFileSync(opt('--json'), JSON.stringify({ cpu: os.cpus()[0]?.model, cores: os.cpus().length, rows }, null, 1));
