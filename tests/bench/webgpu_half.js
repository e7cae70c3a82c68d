// What a half-precision GPU input costs against a float32 one on one device (Node + Dawn),
// interleaved: the same values (float16 or bfloat16 ones, and float32 copies of them) as GPU
// tensors, GPU time of each call from timestamp queries around every pass (the backend's
// profile() hook), per pass and in all, the median of the rounds, and every output's bits
// against wasm SIMD's on the widened values.
//
//   node tests/bench/webgpu_half.js [--cases encoder/8,decoder/8] [--calls forward,backward] [--reps 3]
//
// VK_ICD_FILENAMES picks the driver (SwiftShader: /usr/lib/chromium/vk_swiftshader_icd.json).
//
// Half inputs are bound as their halves and widened where the passes load them (kernels/half.js
// halfInputs; issue 36 item 4): value in kernels/forward.js and backward.js (samples), locations
// and weights in forward.js, walks.js and backward.js, a bfloat16 grad_output in backward.js and
// segments.js. A float16 grad_output (the gather reads each element up to 64 times) and a GPU
// tensor no binding can start at are still widened first by a pass of their own.
//
// Measured (SwiftShader under a shared load, load average 7-14, --cases decoder/8,encoder/8
// --reps 5; every output equal to wasm SIMD's), half / float32 GPU time, float16 then bfloat16:
//                       before (a widening pass an input)   after, two runs (widened where loaded)
//   decoder/8 forward   1.19 1.24  (4 passes)               1.28 0.90 | 0.73 0.77  (1 pass)
//   decoder/8 backward  1.15 1.08  (13 passes)              0.90 1.12 | 1.34 1.11  (10 / 9 passes)
//   encoder/8 forward   1.31 0.97                           1.13 0.97 | 1.73 1.36
//   encoder/8 backward  1.04 1.36                           1.34 1.09 | 1.22 1.47
// The totals move more than the change here (0.73 to 1.73 for the same code). Per pass, in all
// four after rows: samples takes 1.2-1.7x its float32 time with a float16 value (the float16 rule
// is a dozen integer operations a load: work of its own on a CPU), the gather 1.2-1.5x with a
// bfloat16 grad_output.
import { performance } from 'node:perf_hooks';
import { makeCase } from './cases.js';
import { defineCase } from './gpu_model.js';
import { destroyTensors, passProfiler } from './passprof.js';
import { init } from '../../bindings/node.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv.splice(i, 2)[1] : dflt; };
const caseNames = opt('--cases', 'encoder/8,decoder/8').split(',');
const calls = opt('--calls', 'forward,backward').split(',');
const reps = Number(opt('--reps', '3'));

const dawn = await import('webgpu');
Object.assign(globalThis, dawn.globals);
// kept: Dawn frees its instance, and the device with it, when this is collected; timestamps unrounded
const gpu = dawn.create(['disable-dawn-features=timestamp_quantization']);
const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter?.features.has('timestamp-query')) { console.error('webgpu_half: no adapter with timestamp-query (set VK_ICD_FILENAMES?)'); process.exit(1); }
const limits = {};
for (const k of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension']) limits[k] = adapter.limits[k];
const device = await adapter.requestDevice({ requiredFeatures: ['timestamp-query'], requiredLimits: limits });
console.log(`adapter: ${adapter.info.vendor} | ${adapter.info.architecture} | ${adapter.info.description}`);

const msda = await init({ backend: 'webgpu', device });
const cpu = await init({ backend: 'wasm', simd: true });
const profiler = passProfiler(msda, device);
async function profiled(run) {
  const r = await profiler.run(run);
  destroyTensors(r.out);
  return r;
}
const upload = (bits) => {
  const bytes = Math.ceil(bits.byteLength / 4) * 4;
  const buffer = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  const words = new Uint8Array(bytes);
  words.set(new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength));
  device.queue.writeBuffer(buffer, 0, words);
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
  const src = { ...c.args, gradOutput: c.backwardArgs.gradOutput };
  const floats = ['value', 'samplingLocations', 'attentionWeights', 'gradOutput'];
  console.log(`\n${name}: value ${c.args.value.shape}, levels ${JSON.stringify(c.args.spatialShapes)}; ${reps} interleaved rounds`);
  for (const half of ['float16', 'bfloat16']) {
    // the half values, and float32 copies of exactly them: both sides compute the same numbers
    const bits = Object.fromEntries(floats.map((k) => [k, narrowToHalf(src[k].data, half)]));
    const wide = Object.fromEntries(floats.map((k) => [k, { data: widenHalf(bits[k], half), shape: src[k].shape }]));
    const sides = ['float32', half].map((dtype) => {
      const t = { spatialShapes: c.args.spatialShapes };
      for (const k of floats) {
        t[k] = dtype === 'float32'
          ? { buffer: upload(wide[k].data), shape: src[k].shape }
          : { buffer: upload(bits[k]), shape: src[k].shape, dtype };
      }
      const { gradOutput, ...fwd } = t;
      return { dtype, fwd, bwd: t };
    });
    const { gradOutput, ...wideFwd } = wide;
    for (const call of calls) {
      const want = call === 'forward'
        ? { output: cpu.forward({ ...wideFwd, spatialShapes: c.args.spatialShapes }) }
        : cpu.backward({ ...wide, spatialShapes: c.args.spatialShapes });
      for (const side of sides) {
        const got = call === 'forward' ? { output: await msda.forward(side.fwd) } : await msda.backward(side.bwd);
        const d = Object.entries(want).map(([k, v]) => `${k} ${differing(got[k].data, v.data)}`);
        bad += Object.entries(want).reduce((s, [k, v]) => s + differing(got[k].data, v.data), 0);
        console.log(`  ${call} ${side.dtype}: elements differing from wasm SIMD's: ${d.join(', ')}`);
      }
      const run = (side) => profiled(() => (call === 'forward' ? msda.dispatchForward(side.fwd) : msda.dispatchBackward(side.bwd)));
      for (const side of sides) side.samples = [await run(side)].slice(1);   // warm-up
      for (let r = 0; r < reps; r++) for (const side of sides) side.samples.push(await run(side));
      const totals = sides.map((s) => median(s.samples.map((x) => x.sum)));
      for (const [i, side] of sides.entries()) {
        const passes = Object.keys(side.samples[0].per).map((p) => `${p} ${median(side.samples.map((x) => x.per[p] ?? 0)).toFixed(1)}`);
        console.log(`  ${call} ${side.dtype.padEnd(8)} GPU ms ${totals[i].toFixed(1)} in ${side.samples[0].passes} compute passes (wall ${median(side.samples.map((x) => x.wall)).toFixed(1)}): ${passes.join(', ')}`);
      }
      console.log(`  ${call} ${half} / float32: ${(totals[1] / totals[0]).toFixed(3)}`);
    }
  }
}
if (!gpu) throw new Error('unreachable');
process.exit(bad === 0 ? 0 : 1);
