// Per-pass GPU time of the WebGPU backend (timestamp queries around every pass, through the
// backend's profile() hook), each pass beside its longest dependent chain and the cost model's
// laptop (iGPU) and discrete (dGPU) estimates (gpu_model.js, keyed by pass name), and every
// output's bits against the CPU's (wasm SIMD) on the same inputs. make bench-webgpu imports the
// pieces (passProfiler, passRows, passTable, bitsAgainstCpu) and profiles its own rounds.
//
//   node tests/bench/passprof.js [--cases encoder/8,decoder/8] [--reps 3] [--json out.json]
//
// MSDA_WEBGPU_PKG: the 'webgpu' package's folder when not node_modules/webgpu (a trimmed copy:
// index.js, package.json, dist/linux-x64/dawn.node); MSDA_DAWN_FLAGS: Dawn create() flags;
// VK_ICD_FILENAMES picks the Vulkan driver. Exits 1 when a bit differs from the CPU's.
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { writeFileSync } from 'node:fs';
import { makeCase } from './cases.js';
import { MACHINES, analyse, defineCase, estimate, passes } from './gpu_model.js';

const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

/**
 * Timestamps around every pass of msda's calls on device: run(fn) calls fn() (a dispatch* call),
 * waits for its work and returns { per: GPU ms per pass name (repeated names summed: scan
 * levels, parts), sum, wall, out, passes } (out: fn's GPU tensors, which the caller destroys;
 * passes: the compute passes timed).
 */
export function passProfiler(msda, device, capacity = 1024) {
  // The pass names, in dispatch order, as the backend's dispatch() sees them while a profile is set.
  const b = msda._backendKept;
  const names = [];
  const dispatch = b.dispatch;
  b.dispatch = function (enc, name, n, ...rest) {
    if (n > 0 && this.profile && this.profile.next + 2 <= this.profile.capacity) names.push(name);
    return dispatch.call(this, enc, name, n, ...rest);
  };
  const querySet = device.createQuerySet({ type: 'timestamp', count: capacity });
  const resolveBuf = device.createBuffer({ size: 8 * capacity, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  async function readStamps(n) {
    const read = device.createBuffer({ size: 8 * Math.max(n, 2), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    if (n > 0) { enc.resolveQuerySet(querySet, 0, n, resolveBuf, 0); enc.copyBufferToBuffer(resolveBuf, 0, read, 0, 8 * n); }
    device.queue.submit([enc.finish()]);
    await read.mapAsync(GPUMapMode.READ);
    const t = Array.from(new BigInt64Array(read.getMappedRange().slice(0, 8 * n)));
    read.unmap(); read.destroy();
    return t;
  }
  return {
    async run(fn) {
      names.length = 0;
      msda.profile(querySet, capacity);
      const t0 = performance.now();
      const out = fn();
      const n = msda.profile(null);
      await device.queue.onSubmittedWorkDone();
      const wall = performance.now() - t0;
      const t = await readStamps(n);
      const per = {};
      let sum = 0;
      for (let i = 0; i + 1 < n; i += 2) {
        const ms = Number(t[i + 1] - t[i]) / 1e6;
        per[names[i / 2]] = (per[names[i / 2]] ?? 0) + ms;
        sum += ms;
      }
      return { per, sum, wall, out, passes: n / 2 };
    },
    dispose() { b.dispatch = dispatch; querySet.destroy(); resolveBuf.destroy(); },
  };
}

/** One call's profiled samples as a table row: median GPU ms per pass and in all, with the model's estimates. */
export function passRows(caseName, kind, samples) {
  const row = { case: caseName, kind, total: median(samples.map((s) => s.sum)), wall: median(samples.map((s) => s.wall)), passes: {} };
  for (const p of Object.keys(samples[0].per)) row.passes[p] = median(samples.map((s) => s.per[p]));
  defineCase(caseName);
  row.model = passes(analyse(caseName), Object.keys(row.passes))
    .map((p) => ({ name: p.name, chain: p.chain, iGPU: estimate(p, MACHINES.iGPU), dGPU: estimate(p, MACHINES.dGPU),
      est: Object.fromEntries(Object.entries(MACHINES).map(([k, m]) => [k, estimate(p, m)])) }));
  return row;
}

/** The per-pass table (markdown lines) of passRows' rows. */
export function passTable(rows) {
  const lines = [
    '| case | call | pass | GPU ms (median) | share | longest dependent chain | model iGPU ms (bound) | model dGPU ms (bound) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  const fmt = (e) => (e ? `${(e.t * 1e3).toFixed(3)} (${e.bound})` : 'not modelled');
  for (const r of rows) {
    for (const [p, ms] of Object.entries(r.passes)) {
      const m = r.model.find((x) => x.name === p);
      lines.push(`| ${r.case} | ${r.kind} | ${p} | ${ms.toFixed(3)} | ${(100 * ms / r.total).toFixed(1)}% | ${m ? Math.round(m.chain) : '-'} | ${fmt(m?.iGPU)} | ${fmt(m?.dGPU)} |`);
    }
    const sum = (k) => r.model.reduce((s, m) => s + m[k].t, 0) * 1e3;
    lines.push(`| ${r.case} | ${r.kind} | **sum of passes** | ${r.total.toFixed(3)} | wall ${r.wall.toFixed(2)} ms | | ${sum('iGPU').toFixed(3)} | ${sum('dGPU').toFixed(3)} |`);
  }
  return lines;
}

const differing = (x, y) => {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length), v = new Uint32Array(y.buffer, y.byteOffset, y.length);
  let d = u.length === v.length ? 0 : Math.max(u.length, v.length);
  for (let i = 0; i < Math.min(u.length, v.length); i++) if (u[i] !== v[i]) d++;
  return d;
};

/** Every output of msda (GPU tensors g in, gpuTensors') against cpu's on case c: [name, differing, elements] per output. */
export async function bitsAgainstCpu(msda, cpu, c, g) {
  const want = { output: cpu.forward(c.args).data };
  for (const [k, v] of Object.entries(cpu.backward(c.backwardArgs))) want[k] = v.data;
  const got = { output: (await msda.forward(g.forward)).data };
  for (const [k, v] of Object.entries(await msda.backward(g.backward))) got[k] = v.data;
  return Object.entries(want).map(([k, v]) => [k, got[k] ? differing(v, got[k]) : v.length, v.length]);
}

/** The case's inputs in GPU buffers: { forward, backward } arguments (the backward's with gradOutput). */
export function gpuTensors(device, c) {
  const upload = (data) => {
    const buffer = device.createBuffer({ size: data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(buffer, 0, data);
    return buffer;
  };
  const forward = { spatialShapes: c.args.spatialShapes };
  for (const k of ['value', 'samplingLocations', 'attentionWeights']) forward[k] = { buffer: upload(c.args[k].data), shape: c.args[k].shape };
  const backward = { ...forward, gradOutput: { buffer: upload(c.backwardArgs.gradOutput.data), shape: c.backwardArgs.gradOutput.shape } };
  return { forward, backward, destroy: () => destroyTensors(backward) };
}

/** A GPUAdapterInfo's fields as a plain object (its own JSON is empty). */
export const adapterFields = (i) => ({ vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description });

/** Destroys the GPU tensors of a dispatch* result (one tensor or an object of them). */
export const destroyTensors = (r) => { for (const t of Object.values(r.buffer ? { r } : r)) t?.buffer?.destroy(); };

let dawnInstance;   // kept: Dawn frees its instance, and the device with it, when this is collected

async function main(argv) {
  const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
  const caseNames = opt('--cases', 'encoder/8,decoder/8').split(',');
  const reps = Number(opt('--reps', '3'));

  const pkg = process.env.MSDA_WEBGPU_PKG ? path.resolve(process.env.MSDA_WEBGPU_PKG, 'index.js') : 'webgpu';
  const dawn = await import(pkg.startsWith('/') ? pathToFileURL(pkg).href : pkg);
  Object.assign(globalThis, dawn.globals);
  // Dawn rounds timestamps to a coarse period unless told not to; per-pass times need them whole.
  dawnInstance = dawn.create((process.env.MSDA_DAWN_FLAGS ?? 'disable-dawn-features=timestamp_quantization').split(' ').filter(Boolean));
  const adapter = await dawnInstance.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) { console.error('passprof: no WebGPU adapter (set VK_ICD_FILENAMES?)'); process.exit(1); }
  const info = adapter.info;
  if (!adapter.features.has('timestamp-query')) { console.error('passprof: no timestamp-query on this adapter: per-pass times need it'); process.exit(1); }
  const limits = {};
  for (const k of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension']) limits[k] = adapter.limits[k];
  const device = await adapter.requestDevice({ requiredFeatures: ['timestamp-query'], requiredLimits: limits });
  console.log(`adapter: ${info.vendor} | ${info.architecture} | ${info.device} | ${info.description}`);

  const { init } = await import('../../bindings/node.js');
  const msda = await init({ backend: 'webgpu', device });
  const cpu = await init({ backend: 'wasm' });
  const profiler = passProfiler(msda, device);

  let bitsDiffer = 0;
  const results = [];
  for (const name of caseNames) {
    defineCase(name);
    const c = makeCase(name);
    const g = gpuTensors(device, c);
    console.log(`\n${name}: value ${c.args.value.shape}, locations ${c.args.samplingLocations.shape}, levels ${JSON.stringify(c.args.spatialShapes)}; ${reps} interleaved rounds`);
    for (const [k, d, n] of await bitsAgainstCpu(msda, cpu, c, g)) {
      bitsDiffer += d;
      console.log(`  bits: ${k}: ${d} of ${n} elements differ from the CPU's`);
    }
    const methods = [
      { kind: 'forward', run: () => msda.dispatchForward(g.forward) },
      { kind: 'backward', run: () => msda.dispatchBackward(g.backward) },
    ];
    const once = async (m) => { const s = await profiler.run(m.run); destroyTensors(s.out); return s; };
    for (const m of methods) { await once(m); m.samples = []; }   // warm-up: pipelines, allocations
    for (let r = 0; r < reps; r++) for (const m of methods) m.samples.push(await once(m));
    for (const m of methods) results.push(passRows(name, m.kind, m.samples));
    g.destroy();
  }
  console.log(`\nnumerics: ${JSON.stringify(msda.numerics)}`);
  for (const line of passTable(results)) console.log(line);
  if (opt('--json')) writeFileSync(opt('--json'), JSON.stringify({ adapter: adapterFields(info), numerics: msda.numerics, bitsDiffer, results }, null, 1));
  profiler.dispose();
  msda.dispose();
  cpu.dispose();
  device.destroy();
  if (bitsDiffer) { console.error(`passprof: ${bitsDiffer} elements differ from the CPU's`); process.exit(1); }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main(process.argv.slice(2));
