// Two checkouts' WebGPU backends side by side on one device (Node + Dawn), interleaved: GPU time
// of each call from timestamp queries around every pass (the backend's profile() hook), per pass
// and in all, the median of the rounds, the compute passes a call makes, and every output's bits
// against wasm SIMD's.
//
//   node tests/bench/webgpu_ab.js BEFORE AFTER [--cases encoder/8,decoder/8] [--calls forward,backward] [--reps 3]
//
// BEFORE, AFTER: checkout roots (their bindings/node.js). VK_ICD_FILENAMES picks the driver.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';
import { makeCase } from './cases.js';
import { defineCase } from './gpu_model.js';

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv.splice(i, 2)[1] : dflt; };
const caseNames = opt('--cases', 'encoder/8,decoder/8').split(',');
const calls = opt('--calls', 'forward').split(',');
const reps = Number(opt('--reps', '3'));
if (argv.length !== 2) { console.error('usage: node tests/bench/webgpu_ab.js BEFORE AFTER [--cases ...] [--calls forward,backward] [--reps N]'); process.exit(2); }
const roots = argv.map((r) => path.resolve(r));

const dawn = await import('webgpu');
Object.assign(globalThis, dawn.globals);
// kept: Dawn frees its instance, and the device with it, when this is collected; timestamps whole
const gpu = dawn.create(['disable-dawn-features=timestamp_quantization']);
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter?.features.has('timestamp-query')) { console.error('webgpu_ab: no adapter with timestamp-query (set VK_ICD_FILENAMES?)'); process.exit(1); }
const limits = {};
for (const k of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension']) limits[k] = adapter.limits[k];
const device = await adapter.requestDevice({ requiredFeatures: ['timestamp-query'], requiredLimits: limits });
console.log(`adapter: ${adapter.info.vendor} | ${adapter.info.architecture} | ${adapter.info.description}`);

const sides = [];
for (const root of roots) {
  const { init } = await import(pathToFileURL(path.join(root, 'bindings/node.js')).href);
  const msda = await init({ backend: 'webgpu', device });
  const names = [];   // pass names in dispatch order while profiling
  const b = msda._backendKept, dispatch = b.dispatch;
  b.dispatch = function (enc, name, n, ...rest) {
    if (n > 0 && this.profile && this.profile.next + 2 <= this.profile.capacity) names.push(name);
    return dispatch.call(this, enc, name, n, ...rest);
  };
  sides.push({ root, msda, names });
}
const cpu = await (await import(pathToFileURL(path.join(roots[0], 'bindings/node.js')).href)).init({ backend: 'wasm', simd: true });

const CAP = 1024;
const querySet = device.createQuerySet({ type: 'timestamp', count: CAP });
const resolveBuf = device.createBuffer({ size: 8 * CAP, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
async function profiled(side, run) {
  side.names.length = 0;
  side.msda.profile(querySet, CAP);
  const t0 = performance.now();
  const out = run();
  const n = side.msda.profile(null);
  await device.queue.onSubmittedWorkDone();
  const wall = performance.now() - t0;
  const read = device.createBuffer({ size: 8 * Math.max(n, 2), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  if (n > 0) { enc.resolveQuerySet(querySet, 0, n, resolveBuf, 0); enc.copyBufferToBuffer(resolveBuf, 0, read, 0, 8 * n); }
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const t = new BigInt64Array(read.getMappedRange().slice(0, 8 * n));
  read.unmap(); read.destroy();
  const per = {};
  let sum = 0;
  for (let i = 0; i + 1 < n; i += 2) {
    const ms = Number(t[i + 1] - t[i]) / 1e6;
    per[side.names[i / 2]] = (per[side.names[i / 2]] ?? 0) + ms;
    sum += ms;
  }
  for (const v of Object.values(out.buffer ? { out } : out)) v.buffer.destroy();
  return { per, sum, wall, passes: n / 2 };
}
const upload = (data) => {
  const buffer = device.createBuffer({ size: data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buffer, 0, data);
  return buffer;
};
const median = (xs) => { const s = [...xs].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
const differing = (x, y) => {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length), v = new Uint32Array(y.buffer, y.byteOffset, y.length);
  let d = 0;
  for (let i = 0; i < v.length; i++) if (u[i] !== v[i]) d++;
  return d;
};

let bad = 0;
for (const name of caseNames) {
  defineCase(name);
  const c = makeCase(name);
  const onGpu = { spatialShapes: c.args.spatialShapes };
  for (const k of ['value', 'samplingLocations', 'attentionWeights']) onGpu[k] = { buffer: upload(c.args[k].data), shape: c.args[k].shape };
  const onGpuB = { ...onGpu, gradOutput: { buffer: upload(c.backwardArgs.gradOutput.data), shape: c.backwardArgs.gradOutput.shape } };
  console.log(`\n${name}: value ${c.args.value.shape}, levels ${JSON.stringify(c.args.spatialShapes)}; ${reps} interleaved rounds`);
  for (const call of calls) {
    const want = call === 'forward' ? { output: cpu.forward(c.args) } : cpu.backward(c.backwardArgs);
    for (const side of sides) {
      const got = call === 'forward' ? { output: await side.msda.forward(onGpu) } : await side.msda.backward(onGpuB);
      const d = Object.entries(want).map(([k, v]) => `${k} ${differing(got[k].data, v.data)}`);
      bad += Object.entries(want).reduce((s, [k, v]) => s + differing(got[k].data, v.data), 0);
      console.log(`  ${call} ${side.root}: elements differing from wasm SIMD's: ${d.join(', ')}`);
    }
    const run = (side) => profiled(side, () => (call === 'forward' ? side.msda.dispatchForward(onGpu) : side.msda.dispatchBackward(onGpuB)));
    for (const side of sides) side.samples = [await run(side)].slice(1);   // warm-up
    for (let r = 0; r < reps; r++) for (const side of sides) side.samples.push(await run(side));
    const totals = sides.map((s) => median(s.samples.map((x) => x.sum)));
    for (const [i, side] of sides.entries()) {
      const passes = Object.keys(side.samples[0].per).map((p) => `${p} ${median(side.samples.map((x) => x.per[p])).toFixed(1)}`);
      console.log(`  ${call} ${i === 0 ? 'BEFORE' : 'AFTER '} GPU ms ${totals[i].toFixed(1)} in ${side.samples[0].passes} compute passes (wall ${median(side.samples.map((x) => x.wall)).toFixed(1)}): ${passes.join(', ')}`);
    }
    console.log(`  ${call} AFTER / BEFORE: ${(totals[1] / totals[0]).toFixed(3)}`);
  }
}
if (!gpu) throw new Error('unreachable');
process.exit(bad === 0 ? 0 : 1);
