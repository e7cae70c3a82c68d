// The native kernels on every ISA this CPU has (MSDA_ISA forces each), each against the limit
// probe built for the same ISA, and wasm SIMD against the wasm probe: the encoder config, one
// thread, through the C API (build/bench/kernel_bench, wall clock), ISAs interleaved over two
// rounds and the minimum kept. Prints a table, or JSON lines with --json:
//   {"config":"encoder","backend":"native-avx2","threads":1,"fwd_ms":..,"bwd_ms":..,"fwd_x_probe":..,...}
//   {"config":"encoder","backend":"limit-probe-native-avx2","threads":1,"fwd_ms":..,"bwd_ms":..,...}
// Run by `make bench` after tests/bench/bench.js (which builds everything this needs).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = (p) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const json = process.argv.includes('--json');
const files = {
  kb: root('build/bench/kernel_bench'), kbWasm: root('build/bench/kernel_bench_simd.js'),
  probe: root('build/bench/limit_probe'), probeWasm: root('build/bench/limit_probe.js'),
};
for (const f of Object.values(files)) {
  if (!existsSync(f)) {
    process.stderr.write(`bench/isa: ${f} is missing; run \`make bench\`\n`);
    process.exit(1);
  }
}
const node = [process.execPath, '--no-experimental-fetch', '--no-liftoff'];
const last = (out) => JSON.parse(out.trim().split('\n').pop());
const run = (cmd, args, env) => last(execFileSync(cmd, args, {
  encoding: 'utf8', env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'],
}));

const isas = listIsas();
function listIsas() {
  // the library's own list, through the probe binary's ISA choice: ask each in turn
  const all = ['scalar', 'sse2', 'avx2', 'avx512', 'neon'];
  return all.filter((isa) => {
    try {
      return run(files.probe, ['16'], { MSDA_ISA: isa }).isa === isa;
    } catch {
      return false;
    }
  }).filter((isa) => isa !== 'scalar');
}

const kbArgs = ['--config', 'encoder', '--repeats', '3', '--wall'];
const best = {};
const keep = (key, r) => {
  const b = best[key] ?? { fwd: Infinity, bwd: Infinity };
  best[key] = { fwd: Math.min(b.fwd, r.fwd_ms), bwd: Math.min(b.bwd, r.bwd_ms) };
};
for (let round = 0; round < 2; round++) {
  for (const isa of isas) {
    if (!json) process.stderr.write(`\rbench/isa: round ${round + 1}, ${isa}        `);
    keep(`native-${isa}`, run(files.kb, kbArgs, { MSDA_ISA: isa }));
    keep(`limit-probe-native-${isa}`, run(files.probe, [], { MSDA_ISA: isa }));
  }
  if (!json) process.stderr.write(`\rbench/isa: round ${round + 1}, wasm SIMD        `);
  keep('wasm', run(node[0], [...node.slice(1), files.kbWasm, ...kbArgs]));
  keep('limit-probe-wasm', run(node[0], [...node.slice(1), files.probeWasm]));
}
if (!json) process.stderr.write('\r' + ' '.repeat(40) + '\r');

const dims = { B: 1, L: 22223, Q: 22223, H: 8, C: 32, NL: 4, P: 4 };
const round2 = (x) => Math.round(x * 100) / 100;
const rows = [];
for (const name of [...isas.map((i) => `native-${i}`), 'wasm']) {
  const probe = best[name === 'wasm' ? 'limit-probe-wasm' : `limit-probe-${name}`];
  const k = best[name];
  rows.push({ name, k, probe });
}
if (json) {
  for (const { name, k, probe } of rows) {
    console.log(JSON.stringify({ config: 'encoder', backend: name, threads: 1, fwd_ms: round2(k.fwd), bwd_ms: round2(k.bwd),
      fwd_x_probe: round2(k.fwd / probe.fwd), bwd_x_probe: round2(k.bwd / probe.bwd), ...dims }));
    console.log(JSON.stringify({ config: 'encoder', backend: `limit-probe-${name === 'wasm' ? 'wasm' : name}`, threads: 1,
      fwd_ms: round2(probe.fwd), bwd_ms: round2(probe.bwd), ...dims }));
  }
} else {
  const sse2 = best['native-sse2'];
  console.log('\nencoder, one thread, C API (kernel_bench --wall), each ISA against the probe built for it; ms, min of 2 rounds');
  const head = ['backend', 'fwd', 'bwd', 'probe fwd', 'probe bwd', 'fwd x probe', 'bwd x probe', 'fwd speed-up over sse2', 'bwd speed-up over sse2'];
  const table = rows.map(({ name, k, probe }) => [name, k.fwd.toFixed(1), k.bwd.toFixed(1), probe.fwd.toFixed(1), probe.bwd.toFixed(1),
    (k.fwd / probe.fwd).toFixed(2), (k.bwd / probe.bwd).toFixed(2),
    sse2 ? (sse2.fwd / k.fwd).toFixed(2) : '-', sse2 ? (sse2.bwd / k.bwd).toFixed(2) : '-']);
  console.log(`| ${head.join(' | ')} |\n|${head.map((_, i) => (i ? '---:' : '---')).join('|')}|`);
  for (const r of table) console.log(`| ${r.join(' | ')} |`);
  const avx2 = best['native-avx2'], probe2 = best['limit-probe-native-avx2'];
  if (avx2 && sse2) {
    const targets = [
      [`native AVX2 fwd ${(avx2.fwd / probe2.fwd).toFixed(2)} x its probe (<= 1.4)`, avx2.fwd <= 1.4 * probe2.fwd],
      [`native AVX2 bwd ${(avx2.bwd / probe2.bwd).toFixed(2)} x its probe (<= 1.4)`, avx2.bwd <= 1.4 * probe2.bwd],
      [`native AVX2 fwd ${(sse2.fwd / avx2.fwd).toFixed(2)} x faster than SSE2 (>= 2)`, sse2.fwd >= 2 * avx2.fwd],
      [`native AVX2 bwd ${(sse2.bwd / avx2.bwd).toFixed(2)} x faster than SSE2 (>= 1.5)`, sse2.bwd >= 1.5 * avx2.bwd],
    ];
    console.log('\nISA targets:');
    for (const [what, ok] of targets) console.log(`  ${ok ? 'met    ' : 'NOT met'}  ${what}`);
  }
}
