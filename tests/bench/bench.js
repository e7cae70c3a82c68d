#!/usr/bin/env node
// The benchmark behind `make bench` / `npm run bench`: the CONTRACT.md configs on every backend
// (native addon, wasm SIMD, wasm scalar, and the float64 JS reference on `small`), one thread,
// each time the minimum over repeated runs. Besides the call as a user makes it (the copying API)
// it times the reuse path (msda.prepare: tensors stay in the heap, no copies), runs the
// lower-bound probe tests/bench/probe.c (built by mk/bench.mk with the kernels' flags, per ISA)
// in the same run, and measures the wasm heap a backward call needs.
//
//   node tests/bench/bench.js [--json] [--configs small,decoder,encoder,encoder-shuffled,decoder-2stage,decoder-2stage-sorted] [--quick] [--half]
//
// --json prints one JSON object per line (CONTRACT.md's form plus extra fields) instead of the
// table. --quick runs fewer repeats (a smoke run). --half runs only the half-precision rows (of
// decoder and encoder among the configs). Progress goes to stderr.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import v8 from 'node:v8';

// Kernels and probe are both measured on V8's optimizing tier. The probe runs every pass
// inside one call of main(), and wasm has no on-stack replacement, so with default flags it
// would stay in the baseline compiler (Liftoff) and look up to twice as slow; the modules
// here are compiled before the first call instead of tiering up during the timed runs.
v8.setFlagsFromString('--no-liftoff');

import { init } from '../../bindings/index.js';
import { halfRows, narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { referenceBackward, referenceForward } from '../../bindings/reference.js';
import { CONFIGS, makeCase } from './cases.js';

const ALL_CONFIGS = ['small', 'decoder', 'encoder', 'encoder-shuffled', 'decoder-2stage', 'decoder-2stage-sorted'];
// The configs timed against the same problem in pixel order (tests/bench/cases.js).
const PIXEL_ORDER = Object.fromEntries(ALL_CONFIGS.filter((c) => CONFIGS[c].pixelOrder).map((c) => [c, CONFIGS[c].pixelOrder]));

function usage(message) {
  process.stderr.write(`bench: ${message}\nusage: node tests/bench/bench.js [--json] [--configs ${ALL_CONFIGS.join(',')}] [--quick] [--half]\n`);
  process.exit(2);
}

const argv = process.argv.slice(2);
let json = false;
let quick = false;
let onlyHalf = false;
let configs = ALL_CONFIGS;
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === '--json') json = true;
  else if (argv[i] === '--quick') quick = true;
  else if (argv[i] === '--half') onlyHalf = true;
  else if (argv[i] === '--configs') {
    configs = (argv[++i] ?? '').split(',').filter(Boolean);
    for (const c of configs) if (!ALL_CONFIGS.includes(c)) usage(`unknown config '${c}'`);
    if (configs.length === 0) usage('--configs needs a comma-separated list');
  } else usage(`unknown argument '${argv[i]}'`);
}

const root = (p) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const PROBE_WASM = root('build/bench/limit_probe.js');
const PROBE_NATIVE = root('build/bench/limit_probe');
// The memory floor of each pass's walk (tests/bench/probe_walk.c): the kernel's row reads replayed.
const WALK_WASM = root('build/bench/walk_probe.js');
const WALK_NATIVE = root('build/bench/walk_probe');
for (const p of onlyHalf ? [] : [PROBE_WASM, PROBE_NATIVE, WALK_WASM, WALK_NATIVE]) {
  if (!existsSync(p)) {
    process.stderr.write(`bench: ${p} is missing; run \`make bench\`, which builds it from tests/bench/probe.c\n`);
    process.exit(1);
  }
}

// ---------------------------------------------------------------------------------------------
// Progress on stderr, overwritten in place when stderr is a terminal.

const tty = process.stderr.isTTY;
function progress(text) {
  if (tty) process.stderr.write(`\r\x1b[K${text}`);
  else if (text) process.stderr.write(`${text}\n`);
}

// ---------------------------------------------------------------------------------------------
// Configs (CONTRACT.md): tests/bench/cases.js.

// Repeats per config (min over them); fewer for slow backends.
function repeatsFor(config, backend) {
  const base = { small: 10, decoder: 20, encoder: 10, 'encoder-shuffled': 10, 'decoder-2stage': 20, 'decoder-2stage-sorted': 20 }[config];
  const r = backend === 'reference' ? 2 : backend === 'wasm-scalar' ? Math.ceil(base / 2) : base;
  return quick ? Math.min(r, 2) : r;
}

const now = () => performance.now();

// Times the copying API and the reuse path of one backend, interleaved, min of each.
function timeBackend(msda, kase, backend) {
  const reps = repeatsFor(kase.name, backend);
  const best = { fwd: Infinity, bwd: Infinity, fwdReuse: Infinity, bwdReuse: Infinity };
  const keep = (k, t0) => { best[k] = Math.min(best[k], now() - t0); };
  let prepared = null;
  if (msda) {
    prepared = msda.prepare(kase.problem, { mode: 'both' });
    prepared.value.set(kase.args.value.data);
    prepared.samplingLocations.set(kase.args.samplingLocations.data);
    prepared.attentionWeights.set(kase.args.attentionWeights.data);
    prepared.gradOutput.set(kase.backwardArgs.gradOutput.data);
  }
  try {
    for (let r = 0; r < reps; r++) {
      progress(`bench: ${kase.name} ${backend} ${r + 1}/${reps}`);
      let t0 = now();
      if (msda) msda.forward(kase.args); else referenceForward(kase.args);
      keep('fwd', t0);
      if (prepared) { t0 = now(); prepared.forward(); keep('fwdReuse', t0); }
      t0 = now();
      if (msda) msda.backward(kase.backwardArgs); else referenceBackward(kase.backwardArgs);
      keep('bwd', t0);
      if (prepared) { t0 = now(); prepared.backward(); keep('bwdReuse', t0); }
    }
  } finally {
    if (prepared) prepared.dispose();
  }
  if (!prepared) { best.fwdReuse = null; best.bwdReuse = null; }
  return best;
}

// The wasm heap one backward call needs, against the bytes of its inputs and outputs. The
// library never allocates, so the call's heap is the one block prepare() takes for its tensors;
// the check below confirms the call neither grows memory nor leaves anything allocated.
function backwardHeap(msda, kase) {
  const before = msda.wasm.heapInUse();
  const prepared = msda.prepare(kase.problem, { mode: 'backward' });
  const peak = msda.wasm.heapInUse() - before;
  const memoryBefore = msda.wasm.memory.buffer.byteLength;
  prepared.backward();
  const grew = msda.wasm.memory.buffer.byteLength !== memoryBefore;
  prepared.dispose();
  msda.backward(kase.backwardArgs);
  const leaked = msda.wasm.heapInUse() - before;
  return { peak, grew, leaked };
}

// float16 and bfloat16 inputs through the JS API ({ data: Uint16Array, dtype }) against float32
// inputs holding the same values, interleaved, min of each: what a user with half tensors pays,
// or gains. halfPath says which path the value took (core/half.js's halfRows); the other half
// inputs are always widened up front.
const HALF_CONFIGS = ['decoder', 'encoder'];
const HALF_BACKENDS = ['native', 'wasm'];
const HALF_DTYPES = ['float16', 'bfloat16'];
const HALF_PATHS = {
  rows: 'half rows: the value stays half-precision bits, widened by the kernels as they read each row',
  widened: 'widened up front: msda_widen_half into float32 (native: arrays of the addon; wasm: in place in the heap)',
};
function halfPath(msda, dtype, dims, op) {
  const problem = { numQueries: dims.Q, numLevels: dims.NL, numPoints: dims.P, valueLength: dims.L };
  return halfRows(msda._backend, dtype, problem, op) ? 'rows' : 'widened';
}
function halfArgs(kase, dtype) {
  const half = { ...kase.backwardArgs }, wide = { ...kase.backwardArgs };
  for (const name of ['value', 'samplingLocations', 'attentionWeights', 'gradOutput']) {
    const t = kase.backwardArgs[name];
    const bits = narrowToHalf(t.data, dtype);
    half[name] = { data: bits, shape: t.shape, dtype };
    wide[name] = { data: widenHalf(bits, dtype), shape: t.shape };
  }
  const forward = (a) => { const { gradOutput, ...f } = a; return f; };
  return { half: { fwd: forward(half), bwd: half }, wide: { fwd: forward(wide), bwd: wide } };
}

// The process's CPU time (one thread: the call's own, plus an idle GC), as tests/bench/kernel_bench.c
// takes: on a shared machine a descheduled call is not its cost, and these ratios compare two calls.
const cpuNow = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
function timeHalf(msda, config, args, backend, dtype) {
  const reps = repeatsFor(config, backend);
  const best = { fwd: Infinity, bwd: Infinity, fwd32: Infinity, bwd32: Infinity };
  const keep = (k, f) => { const t0 = cpuNow(); f(); best[k] = Math.min(best[k], cpuNow() - t0); };
  for (let i = 0; i < 2; i++) {   // warm-up
    msda.forward(args.wide.fwd); msda.backward(args.wide.bwd);
    msda.forward(args.half.fwd); msda.backward(args.half.bwd);
  }
  for (let r = 0; r < reps; r++) {
    progress(`bench: ${config} ${backend} ${dtype} inputs ${r + 1}/${reps}`);
    keep('fwd32', () => msda.forward(args.wide.fwd));
    keep('fwd', () => msda.forward(args.half.fwd));
    keep('bwd32', () => msda.backward(args.wide.bwd));
    keep('bwd', () => msda.backward(args.half.bwd));
  }
  return best;
}

function runProbe(kind, samples, walkConfig = null) {
  const arg = walkConfig ?? String(samples);
  const [cmd, args] = kind === 'wasm'
    ? [process.execPath, ['--no-experimental-fetch', '--no-liftoff', walkConfig ? WALK_WASM : PROBE_WASM, arg]]
    : [walkConfig ? WALK_NATIVE : PROBE_NATIVE, [arg]];
  let out;
  try {
    out = execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const why = String(e.stderr ?? e.message).trim().split('\n').slice(-3).join(' | ').slice(0, 300);
    process.stderr.write(`\nbench: the limit probe failed: ${cmd} ${args.join(' ')}: ${why}\n`);
    process.exit(1);
  }
  const r = JSON.parse(out.trim().split('\n').pop());
  return { fwd: r.fwd_ms, bwd: r.bwd_ms };
}

// ---------------------------------------------------------------------------------------------

const backends = [
  ['native', () => init({ backend: 'native' })],
  ['wasm', () => init({ simd: true })],
  ['wasm-scalar', () => init({ simd: false })],
];
const apis = {};
for (const [name, load] of backends) apis[name] = await load();

const results = [];   // { config, backend, fwd, bwd, fwdReuse, bwdReuse, ... }
const probes = {};    // config -> { wasm: {fwd,bwd}, native: {fwd,bwd} }
const floors = {};    // the same, of the memory-floor probe
const heaps = {};
const halves = [];   // { config, backend, dtype, dims, fwd, bwd, fwd32, bwd32 }: half inputs against float32

for (const config of configs) {
  progress(`bench: ${config}: making inputs`);
  const kase = makeCase(config);
  const probe = { wasm: { fwd: Infinity, bwd: Infinity }, native: { fwd: Infinity, bwd: Infinity } };
  const floor = { wasm: { fwd: Infinity, bwd: Infinity }, native: { fwd: Infinity, bwd: Infinity } };
  const probeRound = () => {
    for (const kind of ['wasm', 'native']) {
      progress(`bench: ${config} limit probe (${kind})`);
      const r = runProbe(kind, kase.samples);
      probe[kind].fwd = Math.min(probe[kind].fwd, r.fwd);
      probe[kind].bwd = Math.min(probe[kind].bwd, r.bwd);
      progress(`bench: ${config} memory floor (${kind})`);
      const m = runProbe(kind, 0, config);
      floor[kind].fwd = Math.min(floor[kind].fwd, m.fwd);
      floor[kind].bwd = Math.min(floor[kind].bwd, m.bwd);
    }
  };
  if (!onlyHalf) {
  // Probe rounds before, between and after the backends, so both see the same machine.
  probeRound();
  for (const [name] of backends) {
    // warm-up: caches, page faults of the heap, the JIT of the JS around the calls
    for (let i = 0; i < 2; i++) {
      apis[name].forward(kase.args);
      apis[name].backward(kase.backwardArgs);
    }
    results.push({ config, backend: name, dims: kase.dims, ...timeBackend(apis[name], kase, name) });
    if (name === 'wasm') probeRound();
  }
  }
  if (HALF_CONFIGS.includes(config)) {
    for (const dtype of HALF_DTYPES) {
      const args = halfArgs(kase, dtype);
      for (const name of HALF_BACKENDS) {
        halves.push({ config, backend: name, dtype, dims: kase.dims, ...timeHalf(apis[name], config, args, name, dtype),
          fwdPath: halfPath(apis[name], dtype, kase.dims, 'forward'), bwdPath: halfPath(apis[name], dtype, kase.dims, 'backward') });
      }
    }
  }
  if (onlyHalf) continue;
  if (config === 'small') results.push({ config, backend: 'reference', dims: kase.dims, ...timeBackend(null, kase, 'reference') });
  if (!quick && config === 'encoder') probeRound();
  probes[config] = probe;
  floors[config] = floor;
  progress(`bench: ${config}: wasm heap of a backward call`);
  heaps[config] = { ...backwardHeap(apis.wasm, kase), ioBytes: kase.ioBytes };
}
progress('');

// ---------------------------------------------------------------------------------------------
// Output

const find = (config, backend) => results.find((r) => r.config === config && r.backend === backend);
// The kernel's time: the reuse path, or the copying call when a noisy run made that one faster
// (it does the same kernel call plus copies). The reference has no reuse path.
const kernelTime = (r, pass) => Math.min(r[`${pass}Reuse`] ?? Infinity, r[pass]);
const probeOf = (r) => probes[r.config][r.backend === 'native' ? 'native' : 'wasm'];
const floorOf = (r) => floors[r.config][r.backend === 'native' ? 'native' : 'wasm'];
const round = (x, d = 2) => (x === null ? null : Number(x.toFixed(d)));

function printHalvesJson() {
  for (const r of halves) {
    const { B, L, Q, H: h, C: c, NL, P: p } = r.dims;
    console.log(JSON.stringify({ config: r.config, backend: `${r.backend}-${r.dtype}`, threads: 1, fwd_ms: round(r.fwd), bwd_ms: round(r.bwd),
      B, L, Q, H: h, C: c, NL, P: p, dtype: r.dtype, fwd_path: r.fwdPath, bwd_path: r.bwdPath,
      path: `forward: ${HALF_PATHS[r.fwdPath]}; backward: ${HALF_PATHS[r.bwdPath]}`,
      float32_fwd_ms: round(r.fwd32), float32_bwd_ms: round(r.bwd32),
      fwd_x_float32: round(r.fwd / r.fwd32, 3), bwd_x_float32: round(r.bwd / r.bwd32, 3) }));
  }
}

function printHalvesTable() {
  if (halves.length === 0) return;
  const f = (x, d = 1) => x.toFixed(d);
  console.log('');
  console.log('half precision (float16 and bfloat16 inputs through the JS API against float32 inputs of the same values; the');
  console.log('copying API, interleaved, min over repeats, CPU ms; x float32: half time / float32 time, > 1 is slower). Path of the value:');
  for (const [name, text] of Object.entries(HALF_PATHS)) console.log(`  ${name}: ${text}`);
  const hr = [['config', 'backend', 'dtype', 'fwd path', 'fwd float32', 'fwd half', 'fwd x float32', 'bwd path', 'bwd float32', 'bwd half', 'bwd x float32']];
  for (const r of halves) {
    hr.push([r.config, r.backend === 'wasm' ? 'wasm SIMD' : r.backend, r.dtype, r.fwdPath, f(r.fwd32), f(r.fwd), f(r.fwd / r.fwd32, 2),
      r.bwdPath, f(r.bwd32), f(r.bwd), f(r.bwd / r.bwd32, 2)]);
  }
  const w3 = hr[0].map((_, i) => Math.max(...hr.map((row) => row[i].length)));
  const left = new Set([0, 1, 2, 3, 7]);
  for (const row of hr) console.log(row.map((cell, i) => (left.has(i) ? cell.padEnd(w3[i]) : cell.padStart(w3[i]))).join('  '));
}

if (onlyHalf) {
  if (json) printHalvesJson();
  else printHalvesTable();
} else if (json) {
  for (const r of results) {
    const { B, L, Q, H: h, C: c, NL, P: p } = r.dims;
    const line = { config: r.config, backend: r.backend, threads: 1, fwd_ms: round(r.fwd), bwd_ms: round(r.bwd),
      B, L, Q, H: h, C: c, NL, P: p, fwd_reuse_ms: round(r.fwdReuse), bwd_reuse_ms: round(r.bwdReuse) };
    const scalar = find(r.config, 'wasm-scalar');
    line.fwd_speedup_vs_wasm_scalar = round(kernelTime(scalar, 'fwd') / kernelTime(r, 'fwd'), 3);
    line.bwd_speedup_vs_wasm_scalar = round(kernelTime(scalar, 'bwd') / kernelTime(r, 'bwd'), 3);
    line.fwd_x_probe = round(kernelTime(r, 'fwd') / probeOf(r).fwd, 3);
    line.bwd_x_probe = round(kernelTime(r, 'bwd') / probeOf(r).bwd, 3);
    line.fwd_x_memory_floor = round(kernelTime(r, 'fwd') / floorOf(r).fwd, 3);
    line.bwd_x_memory_floor = round(kernelTime(r, 'bwd') / floorOf(r).bwd, 3);
    const pixel = PIXEL_ORDER[r.config] && find(PIXEL_ORDER[r.config], r.backend);
    if (pixel) {   // the same problem in pixel order = 1
      line.fwd_x_pixel_order = round(kernelTime(r, 'fwd') / kernelTime(pixel, 'fwd'), 3);
      line.bwd_x_pixel_order = round(kernelTime(r, 'bwd') / kernelTime(pixel, 'bwd'), 3);
    }
    if (r.backend === 'wasm') {
      line.bwd_heap_bytes = heaps[r.config].peak;
      line.io_bytes = heaps[r.config].ioBytes;
    }
    console.log(JSON.stringify(line));
  }
  for (const config of configs) {
    for (const kind of ['wasm', 'native']) {
      const { B, L, Q, H: h, C: c, NL, P: p } = find(config, 'wasm').dims;
      console.log(JSON.stringify({ config, backend: `limit-probe-${kind}`, threads: 1,
        fwd_ms: round(probes[config][kind].fwd), bwd_ms: round(probes[config][kind].bwd), B, L, Q, H: h, C: c, NL, P: p }));
      console.log(JSON.stringify({ config, backend: `memory-floor-${kind}`, threads: 1,
        fwd_ms: round(floors[config][kind].fwd), bwd_ms: round(floors[config][kind].bwd), B, L, Q, H: h, C: c, NL, P: p }));
    }
  }
  printHalvesJson();
} else {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  console.log(`ms-deform-attn benchmark: one thread, min over repeats, ms. ${cpu} (${os.cpus().length} CPUs), node ${process.version}`);
  console.log('fwd/bwd: the copying API (msda.forward/backward); reuse: msda.prepare, no copies.');
  console.log('x scalar: speed-up over wasm scalar; x probe: time / the limit probe (wasm SIMD probe for wasm, native probe for native);');
  console.log('x floor: time / the memory floor of its walk (tests/bench/probe_walk.c: the kernel\'s own row reads, in its order, one add a vector);');
  console.log('all on the kernel time (the reuse time, or the copying one where noise made it lower).');
  console.log('');
  const head = ['config', 'backend', 'fwd', 'bwd', 'fwd reuse', 'bwd reuse', 'fwd x scalar', 'bwd x scalar', 'fwd x probe', 'bwd x probe',
    'fwd x floor', 'bwd x floor'];
  const rows = [head];
  const f = (x, d = 1) => (x === null || x === undefined ? '-' : x.toFixed(d));
  for (const r of results) {
    const scalar = find(r.config, 'wasm-scalar');
    const probe = r.backend === 'reference' ? null : probeOf(r);
    rows.push([r.config, r.backend === 'wasm' ? 'wasm SIMD' : r.backend === 'reference' ? 'JS float64 ref' : r.backend,
      f(r.fwd), f(r.bwd), f(r.fwdReuse), f(r.bwdReuse),
      f(kernelTime(scalar, 'fwd') / kernelTime(r, 'fwd'), 2), f(kernelTime(scalar, 'bwd') / kernelTime(r, 'bwd'), 2),
      probe ? f(kernelTime(r, 'fwd') / probe.fwd, 2) : '-', probe ? f(kernelTime(r, 'bwd') / probe.bwd, 2) : '-',
      probe ? f(kernelTime(r, 'fwd') / floorOf(r).fwd, 2) : '-', probe ? f(kernelTime(r, 'bwd') / floorOf(r).bwd, 2) : '-']);
  }
  for (const config of configs) {
    for (const kind of ['wasm', 'native']) {
      const pr = probes[config][kind];
      rows.push([config, `limit probe (${kind === 'wasm' ? 'wasm SIMD' : 'native'})`, f(pr.fwd), f(pr.bwd), '-', '-', '-', '-', '1.00', '1.00', '-', '-']);
      const fl = floors[config][kind];
      rows.push([config, `memory floor (${kind === 'wasm' ? 'wasm SIMD' : 'native'})`, f(fl.fwd), f(fl.bwd), '-', '-', '-', '-', '-', '-', '1.00', '1.00']);
    }
  }
  const widths = head.map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const row of rows) console.log(row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '));

  console.log('');
  for (const config of configs) {
    const h = heaps[config];
    const extra = (h.peak / h.ioBytes - 1) * 100;
    console.log(`${config}: wasm heap of a backward call ${(h.peak / 1e6).toFixed(2)} MB = inputs + outputs ${(h.ioBytes / 1e6).toFixed(2)} MB ${extra >= 0 ? '+' : ''}${extra.toFixed(2)}%` +
      `${h.grew ? ' (memory grew during the call!)' : ''}${h.leaked ? ` (${h.leaked} bytes left allocated!)` : ''}`);
  }

  printHalvesTable();

  const orderRows = [['config', 'against', 'backend', 'fwd x pixel order', 'bwd x pixel order']];
  for (const config of configs) {
    if (!PIXEL_ORDER[config] || !configs.includes(PIXEL_ORDER[config])) continue;
    for (const [name] of backends) {
      const r = find(config, name), pixel = find(PIXEL_ORDER[config], name);
      orderRows.push([config, PIXEL_ORDER[config], name === 'wasm' ? 'wasm SIMD' : name,
        f(kernelTime(r, 'fwd') / kernelTime(pixel, 'fwd'), 2), f(kernelTime(r, 'bwd') / kernelTime(pixel, 'bwd'), 2)]);
    }
  }
  if (orderRows.length > 1) {
    console.log('');
    console.log('query order (kernel time against the same problem in pixel order; target <= 1.15):');
    const w2 = orderRows[0].map((_, i) => Math.max(...orderRows.map((row) => row[i].length)));
    for (const row of orderRows) console.log(row.map((cell, i) => (i < 3 ? cell.padEnd(w2[i]) : cell.padStart(w2[i]))).join('  '));
  }

  if (configs.includes('encoder')) {
    const w = find('encoder', 'wasm'), s = find('encoder', 'wasm-scalar'), n = find('encoder', 'native');
    const pw = probes.encoder.wasm, h = heaps.encoder;
    const check = (ok) => (ok ? 'met' : 'NOT met');
    const k = (r, pass) => kernelTime(r, pass);
    const targets = [
      [`wasm SIMD fwd ${(k(w, 'fwd') / pw.fwd).toFixed(2)} x probe (<= 1.25)`, k(w, 'fwd') <= 1.25 * pw.fwd],
      [`wasm SIMD bwd ${(k(w, 'bwd') / pw.bwd).toFixed(2)} x probe (<= 1.25)`, k(w, 'bwd') <= 1.25 * pw.bwd],
      [`wasm SIMD fwd ${(k(s, 'fwd') / k(w, 'fwd')).toFixed(2)} x faster than wasm scalar (>= 2.5)`, k(s, 'fwd') >= 2.5 * k(w, 'fwd')],
      [`wasm SIMD bwd ${(k(s, 'bwd') / k(w, 'bwd')).toFixed(2)} x faster than wasm scalar (>= 3)`, k(s, 'bwd') >= 3 * k(w, 'bwd')],
      [`native fwd ${(k(w, 'fwd') / k(n, 'fwd')).toFixed(2)} x, bwd ${(k(w, 'bwd') / k(n, 'bwd')).toFixed(2)} x wasm SIMD speed (>= 1)`,
        k(n, 'fwd') <= k(w, 'fwd') && k(n, 'bwd') <= k(w, 'bwd')],
      [`copying API over reuse (wasm SIMD): fwd +${((w.fwd / w.fwdReuse - 1) * 100).toFixed(1)}%, bwd +${((w.bwd / w.bwdReuse - 1) * 100).toFixed(1)}% (<= 10%)`,
        w.fwd <= 1.1 * w.fwdReuse && w.bwd <= 1.1 * w.bwdReuse],
      [`backward heap +${((h.peak / h.ioBytes - 1) * 100).toFixed(2)}% over inputs + outputs (<= 5%)`, h.peak <= 1.05 * h.ioBytes && !h.grew],
    ];
    console.log('');
    console.log('targets (encoder, one thread, this run):');
    for (const [text, ok] of targets) console.log(`  ${check(ok).padEnd(7)}  ${text}`);
  }
}

// The threads column (1 vs 2 threads, native and wasm SIMD, decoder and encoder) in the same
// run, from its own script so it can also be run alone.
if (!onlyHalf && (configs.includes('decoder') || configs.includes('encoder'))) {
  if (!json) console.log('\nthreads (through msda.prepare, minimum over interleaved rounds):');
  execFileSync(process.execPath, [root('tests/bench/threads_bench.js'), '--rounds', quick ? '2' : '6',
    ...(json ? ['--json'] : [])], { stdio: 'inherit' });
}

// The tfjs adapter (ms-deform-attn/tfjs) next to the bare API and to the operator written with
// tfjs ops, on tfjs-backend-cpu and -wasm, from its own script (tests/bench/tfjs_bench.js).
const tfjsConfigs = onlyHalf ? [] : configs.filter((c) => c === 'decoder' || c === 'encoder');
if (tfjsConfigs.length > 0) {
  if (!json) console.log('\ntfjs adapter (ms-deform-attn/tfjs against the bare API and tfjs ops; one thread, min over interleaved rounds, ms):');
  execFileSync(process.execPath, [root('tests/bench/tfjs_bench.js'), '--configs', tfjsConfigs.join(','),
    ...(quick ? ['--rounds', '2'] : []), ...(json ? ['--json'] : [])], { stdio: 'inherit' });
}
