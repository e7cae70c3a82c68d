#!/usr/bin/env node
// Where the copying API's time goes on wasm SIMD, one thread, encoder config (CONTRACT.md):
// msda.forward/backward next to the same calls through msda.prepare (no copies), interleaved as
// tests/bench/bench.js does, minimum over rounds; and for the copying calls' best round, the time spent
// copying in (store.load), in the kernel (store.run: every window of a streamed forward), copying
// out (store.take / takeInto) and the rest (allocation, checks), with the copy rates and the minor
// page faults of the call (a result array on pages the allocator has just taken from the system
// faults each 4 KiB page in as the copy first writes it). `make bench` prints the overhead line;
// this shows its parts.
//
//   node tests/bench/copies_bench.js [--rounds N]
import v8 from 'node:v8';
import { makeCase } from './cases.js';

v8.setFlagsFromString('--no-liftoff'); // the kernels on V8's optimizing tier, as in tests/bench/bench.js

const { init } = await import('../../bindings/index.js');

const argv = process.argv.slice(2);
const rounds = argv.includes('--rounds') ? Number(argv[argv.indexOf('--rounds') + 1]) : 10;
if (!(rounds >= 1)) {
  process.stderr.write('usage: node tests/bench/copies_bench.js [--rounds N]\n');
  process.exit(2);
}

// tests/bench/bench.js's encoder inputs (tests/bench/cases.js).
const { args, backwardArgs, problem } = makeCase('encoder');
const value = args.value.data, samplingLocations = args.samplingLocations.data;
const attentionWeights = args.attentionWeights.data, gradOutput = backwardArgs.gradOutput.data;

const msda = await init({ simd: true });
const prepared = msda.prepare(problem);
prepared.value.set(value);
prepared.samplingLocations.set(samplingLocations);
prepared.attentionWeights.set(attentionWeights);
prepared.gradOutput.set(gradOutput);

// Time and bytes per store method, accumulated over one call.
const now = () => performance.now();
const parts = {};
const bytes = {};
const store = Object.getPrototypeOf(prepared._store);
const phase = { load: 'in', run: 'kernel', take: 'out', takeInto: 'out' };
for (const [method, name] of Object.entries(phase)) {
  const original = store[method];
  store[method] = function (...a) {
    const t0 = now();
    try {
      return original.apply(this, a);
    } finally {
      parts[name] = (parts[name] ?? 0) + now() - t0;
      const moved = method === 'load' ? 4 * a[1].length : method === 'take' ? 4 * this.view(a[0]).length
        : method === 'takeInto' ? 4 * a[3] : 0;
      bytes[name] = (bytes[name] ?? 0) + moved;
    }
  };
}
const faults = () => process.resourceUsage().minorPageFault;

const best = {};
const faulting = {};   // rounds in which the call faulted in more than 1,000 pages (4 MB) of new memory
const calls = [
  ['fwd', () => msda.forward(args)], ['fwd reuse', () => prepared.forward()],
  ['bwd', () => msda.backward(backwardArgs)], ['bwd reuse', () => prepared.backward()],
];
for (let r = 0; r < rounds; r++) {
  process.stderr.write(`\rcopies_bench: round ${r + 1}/${rounds}`);
  for (const [name, call] of calls) {
    for (const k of Object.keys(parts)) delete parts[k];
    for (const k of Object.keys(bytes)) delete bytes[k];
    const f0 = faults(), t0 = now();
    call();
    const t = now() - t0, f = faults() - f0;
    if (f > 1000) faulting[name] = (faulting[name] ?? 0) + 1;
    if (!(t >= best[name]?.t)) best[name] = { t, parts: { ...parts }, bytes: { ...bytes }, faults: f };
  }
}
process.stderr.write('\n');
prepared.dispose();

const ms = (x) => x.toFixed(1);
console.log(`copying API vs reuse, encoder, wasm SIMD, one thread, min of ${rounds} interleaved rounds, ms (${process.version})`);
for (const pass of ['fwd', 'bwd']) {
  const c = best[pass], reuse = best[`${pass} reuse`].t;
  const p = c.parts;
  const rest = c.t - (p.in ?? 0) - (p.kernel ?? 0) - (p.out ?? 0);
  const rate = (name) => `${(c.bytes[name] / 1e6).toFixed(1)} MB at ${(c.bytes[name] / p[name] / 1e6).toFixed(1)} GB/s`;
  console.log(`${pass}: ${ms(c.t)} vs reuse ${ms(reuse)}: +${((c.t / reuse - 1) * 100).toFixed(1)}%  |  in ${ms(p.in)} (${rate('in')}), `
    + `kernel ${ms(p.kernel)}, out ${ms(p.out)} (${rate('out')}), rest ${ms(rest)}; ${c.faults} minor page faults `
    + `(rounds with > 1000: ${faulting[pass] ?? 0}/${rounds})`);
}
