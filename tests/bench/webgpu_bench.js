// make bench-webgpu: the WebGPU backend against the WebGPU runtimes users have, on one device
// (Node + Dawn; VK_ICD_FILENAMES picks the Vulkan driver: SwiftShader by default, a real GPU's
// where there is one). Inputs already on the GPU. Per problem (encoder, decoder), interleaved:
//   ours       dispatchForward / dispatchBackward
//   ORT torch  onnxruntime-web's WebGPU EP running PyTorch's reference, ms_deform_attn_core_pytorch,
//              as torch.onnx.export wrote it (tests/bench/torch/: its reshapes and transposes timed)
//   ORT        onnxruntime-web's WebGPU EP running a GridSample graph (the PyTorch reference's
//              grid_sample formulation: GridSample per level, times the weights, summed over
//              points and levels), inputs pre-arranged per level (its reshapes not timed)
//   tfjs       tfjs-backend-webgpu, the op built from gathers (forward and backward), on request:
//              minutes a call on SwiftShader
// Wall time per call (submitted work done), GPU time from timestamp queries where offered (ours:
// every pass; tfjs: tf.time's kernelMs), the first call (shader compiles) reported apart. Then
// the ratios the targets are set on, and our per-pass GPU times from the same rounds, each pass
// beside its longest dependent chain and the cost model's laptop and discrete-GPU estimates
// (passprof.js, gpu_model.js). Progress goes to stderr, results to stdout.
//
//   node tests/bench/webgpu_bench.js [--cases encoder/8,decoder/8] [--reps N] [--with-tfjs] [--json out.json]
//
// Defaults: on SwiftShader the cases encoder/8 and decoder/8 (levels an eighth of DETR's side)
// and 8 rounds, on a GPU encoder and decoder and 20 rounds. Env: MSDA_BENCH_REPS (rounds),
// MSDA_BENCH_FULL=1 (DETR's sizes on SwiftShader too), MSDA_BENCH_TFJS=1 (as --with-tfjs).
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { CONFIGS, makeCase, H, C, P } from './cases.js';
import { defineCase } from './gpu_model.js';
import { adapterFields, bitsAgainstCpu, destroyTensors, gpuTensors, passProfiler, passRows, passTable } from './passprof.js';
import { elementwiseModel, graphModel } from '../webgpu/onnx.js';

const argv = process.argv.slice(2);
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
const withTfjs = argv.includes('--with-tfjs') || process.env.MSDA_BENCH_TFJS === '1';
const began = performance.now();
const progress = (s) => process.stderr.write(`bench-webgpu [${((performance.now() - began) / 1e3).toFixed(0)} s]: ${s}\n`);

// Errors as one line (onnxruntime-web's minified source would otherwise fill the screen).
process.on('uncaughtException', (e) => { console.error(`bench-webgpu: ${e?.message ?? e}`); process.exit(1); });
process.on('unhandledRejection', (e) => { console.error(`bench-webgpu: ${e?.message ?? e}`); process.exit(1); });

const dawn = await import('webgpu');
Object.assign(globalThis, dawn.globals);
// Dawn rounds timestamps to a coarse period unless told not to (an empty pass then reads 0 ns on
// SwiftShader, about 0.5-5 us without it): per-pass times need them whole.
const DAWN_FLAGS = ['disable-dawn-features=timestamp_quantization'];
const gpu = dawn.create(DAWN_FLAGS);
if (globalThis.navigator === undefined) globalThis.navigator = {};
Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true });
// Dawn for Node refuses writeBuffer from SharedArrayBuffer views (ORT's threaded wasm): a copy.
const write = dawn.globals.GPUQueue.prototype.writeBuffer;
dawn.globals.GPUQueue.prototype.writeBuffer = function (buffer, offset, data, dataOffset = 0, size = undefined) {
  if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
    const bpe = data.BYTES_PER_ELEMENT ?? 1;
    const n = size ?? (data.length - dataOffset);
    return write.call(this, buffer, offset, new Uint8Array(data.buffer, data.byteOffset + dataOffset * bpe, n * bpe).slice());
  }
  return write.call(this, buffer, offset, data, dataOffset, size);
};

const adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
if (!adapter) {
  console.error('bench-webgpu: no WebGPU adapter (Dawn found no Vulkan driver; set VK_ICD_FILENAMES)');
  process.exit(1);
}
const info = adapter.info;
const timestamps = adapter.features.has('timestamp-query');
const limits = {};
for (const k of ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension']) limits[k] = adapter.limits[k];
const device = await adapter.requestDevice({ requiredFeatures: timestamps ? ['timestamp-query'] : [], requiredLimits: limits });
const emulated = info.architecture === 'swiftshader' || /swiftshader/i.test(`${info.device} ${info.description}`);
const full = process.env.MSDA_BENCH_FULL === '1' || !emulated;
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(', ');
console.log(`machine: ${os.cpus().length} × ${os.cpus()[0]?.model}, Node ${process.version}; load average ${load()} (1, 5, 15 min)`);
console.log(`adapter: ${info.vendor} ${info.architecture} ${info.device} (${info.description}); timestamp-query: ${timestamps ? 'yes' : 'no'}; Dawn flags: ${DAWN_FLAGS.join(' ')}`);
if (emulated) {
  console.log('SwiftShader: a CPU emulation of a GPU. These numbers say nothing about a GPU\'s speed; they show the benchmark runs.'
    + ' Judge the GPU code by its dependent chains and traffic: the cost model\'s columns below.');
}

// encoder/N, decoder/N: DETR's levels at 1/N of the side (gpu_model.js's defineCase).
const cases = opt('--cases', full ? 'encoder,decoder' : 'encoder/8,decoder/8').split(',');
for (const name of cases) {
  defineCase(name);
  if (!CONFIGS[name]) { console.error(`bench-webgpu: unknown case '${name}', expected one of ${Object.keys(CONFIGS).join(', ')} or encoder/N, decoder/N`); process.exit(1); }
}
const reps = Number(opt('--reps', process.env.MSDA_BENCH_REPS ?? (emulated ? 8 : 20)));
if (!(Number.isInteger(reps) && reps >= 1)) { console.error(`bench-webgpu: --reps must be a whole number >= 1, got ${reps}`); process.exit(1); }

const { init } = await import('../../bindings/node.js');
progress('init (ours)');
let t0 = performance.now();
const msda = await init({ backend: 'webgpu', device });
console.log(`ours: ${(performance.now() - t0).toFixed(0)} ms to init (the probe's pipeline compiled and run; the others compile at the first call that needs them, in its first-call time); numerics ${JSON.stringify(msda.numerics)}`);
const cpu = await init({ backend: 'wasm' });
const profiler = timestamps ? passProfiler(msda, device) : null;
let tf = null, tfBackend = null;
if (withTfjs) {
  tf = await import('@tensorflow/tfjs-core');
  const { WebGPUBackend } = await import('@tensorflow/tfjs-backend-webgpu');
  tfBackend = new WebGPUBackend(device, info);
  tf.removeBackend('webgpu');
  tf.registerBackend('webgpu', () => tfBackend);
  await tf.setBackend('webgpu');
}
const ort = await import('onnxruntime-web/webgpu');
ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';   // not its note that shape ops run on the CPU
// V8 compiles onnxruntime-web's wasm in background threads after its first session (a minute of
// CPU on this 2-core machine), which would land in whichever call is timed next: load and run a
// one-node session first, then wait until the process idles (under 10 % of a core for a second).
{
  progress('onnxruntime-web: loading (V8 compiles its wasm: a minute or two here)');
  t0 = performance.now();
  const warm = await ort.InferenceSession.create(elementwiseModel('Add', [4]), { executionProviders: [{ name: 'webgpu', device }] });
  await warm.run({ x: new ort.Tensor('float32', new Float32Array(4), [4]) });
  await warm.release();
  const loaded = performance.now() - t0;
  const IDLE_SAMPLE_MS = 1000;   // how often the process's CPU use is sampled (not a limit)
  for (let last = process.cpuUsage(), busy = true; busy;) {
    await new Promise((resolve) => setTimeout(resolve, IDLE_SAMPLE_MS));
    const used = process.cpuUsage(last);
    last = process.cpuUsage();
    busy = used.user + used.system > 1e5;
  }
  console.log(`onnxruntime-web: ${loaded.toFixed(0)} ms to load and run a one-node session (V8 compiling its wasm), then ${(performance.now() - t0 - loaded).toFixed(0)} ms until the process idled`);
}

function upload(data) {
  const buffer = device.createBuffer({ size: data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buffer, 0, data);
  return buffer;
}

// tfjs: the op from gathers (value BLNC, locations BQHLP2, zeros padding, align_corners false).
function tfForward(value, locs, weights, dims) {
  const { B, L, Q } = dims;
  const shapes = CONFIGS[dims.name].levels;
  return tf.tidy(() => {
    const rows = tf.reshape(tf.transpose(value, [0, 2, 1, 3]), [B * H * L, C]);
    const base = tf.tensor(Array.from({ length: B * H }, (_, i) => i * L), [B, 1, H, 1], 'int32');
    let out = null;
    let start = 0;
    shapes.forEach(([hl, wl], l) => {
      const loc = tf.reshape(tf.slice(locs, [0, 0, 0, l, 0, 0], [B, Q, H, 1, P, 2]), [B, Q, H, P, 2]);
      const a = tf.reshape(tf.slice(weights, [0, 0, 0, l, 0], [B, Q, H, 1, P]), [B, Q, H, P]);
      const u = tf.sub(tf.mul(tf.reshape(tf.slice(loc, [0, 0, 0, 0, 0], [B, Q, H, P, 1]), [B, Q, H, P]), wl), 0.5);
      const v = tf.sub(tf.mul(tf.reshape(tf.slice(loc, [0, 0, 0, 0, 1], [B, Q, H, P, 1]), [B, Q, H, P]), hl), 0.5);
      const x0 = tf.floor(u), y0 = tf.floor(v);
      const fx = tf.sub(u, x0), fy = tf.sub(v, y0);
      for (const [dx, dy] of [[0, 0], [1, 0], [0, 1], [1, 1]]) {
        const xi = tf.add(x0, dx), yi = tf.add(y0, dy);
        const inside = tf.logicalAnd(tf.logicalAnd(tf.greaterEqual(xi, 0), tf.less(xi, wl)), tf.logicalAnd(tf.greaterEqual(yi, 0), tf.less(yi, hl)));
        const wx = dx ? fx : tf.sub(1, fx), wy = dy ? fy : tf.sub(1, fy);
        const w = tf.mul(tf.mul(tf.mul(a, wx), wy), tf.cast(inside, 'float32'));
        const pix = tf.add(tf.mul(tf.clipByValue(yi, 0, hl - 1), wl), tf.clipByValue(xi, 0, wl - 1));
        const idx = tf.add(tf.cast(tf.add(pix, start), 'int32'), base);
        const g = tf.reshape(tf.gather(rows, tf.reshape(idx, [-1])), [B, Q, H, P, C]);
        const term = tf.sum(tf.mul(g, tf.expandDims(w, 4)), 3);
        out = out === null ? term : tf.add(out, term);
      }
      start += hl * wl;
    });
    return tf.reshape(out, [B, Q, H * C]);
  });
}

// The backward from gathers too (tfjs-core's Node build registers no gradients for tf.grads):
// the gathered corners give the weight and location gradients, and grad_value is a
// tf.unsortedSegmentSum (a scatter) of a * w_k * G over the corner rows.
function tfBackward(value, locs, weights, dy, dims) {
  const { B, L, Q } = dims;
  const shapes = CONFIGS[dims.name].levels;
  return tf.tidy(() => {
    const rows = tf.reshape(tf.transpose(value, [0, 2, 1, 3]), [B * H * L, C]);
    const base = tf.tensor(Array.from({ length: B * H }, (_, i) => i * L), [B, 1, H, 1], 'int32');
    const G = tf.expandDims(tf.reshape(dy, [B, Q, H, C]), 3);   // [B, Q, H, 1, C]
    const ids = [], terms = [], gw = [], gl = [];
    let start = 0;
    shapes.forEach(([hl, wl], l) => {
      const loc = tf.reshape(tf.slice(locs, [0, 0, 0, l, 0, 0], [B, Q, H, 1, P, 2]), [B, Q, H, P, 2]);
      const a = tf.reshape(tf.slice(weights, [0, 0, 0, l, 0], [B, Q, H, 1, P]), [B, Q, H, P]);
      const u = tf.sub(tf.mul(tf.reshape(tf.slice(loc, [0, 0, 0, 0, 0], [B, Q, H, P, 1]), [B, Q, H, P]), wl), 0.5);
      const v = tf.sub(tf.mul(tf.reshape(tf.slice(loc, [0, 0, 0, 0, 1], [B, Q, H, P, 1]), [B, Q, H, P]), hl), 0.5);
      const x0 = tf.floor(u), y0 = tf.floor(v);
      const fx = tf.sub(u, x0), fy = tf.sub(v, y0);
      const d = [], wk = [];
      for (const [dx, dy2] of [[0, 0], [1, 0], [0, 1], [1, 1]]) {
        const xi = tf.add(x0, dx), yi = tf.add(y0, dy2);
        const inside = tf.cast(tf.logicalAnd(tf.logicalAnd(tf.greaterEqual(xi, 0), tf.less(xi, wl)), tf.logicalAnd(tf.greaterEqual(yi, 0), tf.less(yi, hl))), 'float32');
        const w = tf.mul(tf.mul(dx ? fx : tf.sub(1, fx), dy2 ? fy : tf.sub(1, fy)), inside);
        const pix = tf.add(tf.mul(tf.clipByValue(yi, 0, hl - 1), wl), tf.clipByValue(xi, 0, wl - 1));
        const idx = tf.reshape(tf.add(tf.cast(tf.add(pix, start), 'int32'), base), [-1]);
        const g = tf.reshape(tf.gather(rows, idx), [B, Q, H, P, C]);
        d.push(tf.mul(tf.sum(tf.mul(g, G), 4), inside));
        wk.push(w);
        ids.push(idx);
        terms.push(tf.reshape(tf.mul(G, tf.expandDims(tf.mul(a, w), 4)), [-1, C]));
      }
      gw.push(tf.addN(d.map((dk, k) => tf.mul(dk, wk[k]))));
      const gx = tf.mul(tf.mul(a, tf.add(tf.mul(tf.sub(1, fy), tf.sub(d[1], d[0])), tf.mul(fy, tf.sub(d[3], d[2])))), wl);
      const gy = tf.mul(tf.mul(a, tf.add(tf.mul(tf.sub(1, fx), tf.sub(d[2], d[0])), tf.mul(fx, tf.sub(d[3], d[1])))), hl);
      gl.push(tf.stack([gx, gy], 4));
      start += hl * wl;
    });
    const gv = tf.unsortedSegmentSum(tf.concat(terms, 0), tf.concat(ids, 0), B * H * L);
    return [tf.transpose(tf.reshape(gv, [B, H, L, C]), [0, 2, 1, 3]), tf.stack(gl, 3), tf.stack(gw, 3)];
  });
}

// ORT: GridSample per level on (B*H, C, H_l, W_l) with grids (B*H, Q, P, 2), weights (B*H, 1, Q, P).
function ortModel(dims) {
  const { B, Q } = dims;
  const shapes = CONFIGS[dims.name].levels;
  const BH = B * H;
  const inputs = [], nodes = [], sums = [];
  shapes.forEach(([hl, wl], l) => {
    inputs.push([`v${l}`, [BH, C, hl, wl]], [`g${l}`, [BH, Q, P, 2]], [`w${l}`, [BH, 1, Q, P]]);
    nodes.push({ op: 'GridSample', inputs: [`v${l}`, `g${l}`], outputs: [`s${l}`], attrs: { mode: 'bilinear', padding_mode: 'zeros', align_corners: 0 } });
    nodes.push({ op: 'Mul', inputs: [`s${l}`, `w${l}`], outputs: [`m${l}`] });
    nodes.push({ op: 'ReduceSum', inputs: [`m${l}`, 'axes'], outputs: [`r${l}`], attrs: { keepdims: 0 } });
    sums.push(`r${l}`);
  });
  nodes.push({ op: 'Sum', inputs: sums, outputs: ['out'] });
  return graphModel({ inputs, outputs: [['out', [BH, C, Q]]], nodes, int64s: { axes: [3] } });
}

// PyTorch's reference as torch.onnx.export writes it, exported once per case by
// tests/bench/torch/export.py (the file says what is in it); null where the case has none.
function torchExport(name) {
  const file = new URL(`./torch/ms_deform_attn_core_pytorch.${name.replace('/', '-')}.onnx`, import.meta.url);
  return existsSync(file) ? new Uint8Array(readFileSync(file)) : null;
}

function ortFeeds(c) {
  const { B, L, Q, NL } = c.dims;
  const shapes = CONFIGS[c.name].levels;
  const value = c.args.value.data, locs = c.args.samplingLocations.data, weights = c.args.attentionWeights.data;
  const feeds = {};
  let start = 0;
  shapes.forEach(([hl, wl], l) => {
    const v = new Float32Array(B * H * C * hl * wl), g = new Float32Array(B * H * Q * P * 2), w = new Float32Array(B * H * Q * P);
    for (let b = 0; b < B; b++) for (let h = 0; h < H; h++) {
      for (let c2 = 0; c2 < C; c2++) for (let p = 0; p < hl * wl; p++) v[((b * H + h) * C + c2) * hl * wl + p] = value[((b * L + start + p) * H + h) * C + c2];
      for (let q = 0; q < Q; q++) for (let p = 0; p < P; p++) {
        const li = ((((b * Q + q) * H + h) * NL + l) * P + p);
        const gi = (((b * H + h) * Q + q) * P + p) * 2;
        g[gi] = 2 * locs[2 * li] - 1;
        g[gi + 1] = 2 * locs[2 * li + 1] - 1;
        w[((b * H + h) * Q + q) * P + p] = weights[li];
      }
    }
    feeds[`v${l}`] = ort.Tensor.fromGpuBuffer(upload(v), { dataType: 'float32', dims: [B * H, C, hl, wl] });
    feeds[`g${l}`] = ort.Tensor.fromGpuBuffer(upload(g), { dataType: 'float32', dims: [B * H, Q, P, 2] });
    feeds[`w${l}`] = ort.Tensor.fromGpuBuffer(upload(w), { dataType: 'float32', dims: [B * H, 1, Q, P] });
    start += hl * wl;
  });
  return feeds;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length ? s[Math.floor(s.length / 2)] : NaN; };
const min = (xs) => (xs.length ? Math.min(...xs) : NaN);
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(x < 10 ? 2 : 1) : '—');
const rowsOut = [], ratios = [], passRowsOut = [], report = [];

for (const name of cases) {
  const c = makeCase(name);
  c.name = name;
  c.dims.name = name;
  const { B, L, Q, NL } = c.dims;
  console.log(`\n${name}: B ${B}, L ${L}, N_q ${Q}, ${H} heads, ${C} channels, ${NL} levels ${JSON.stringify(CONFIGS[name].levels)}, ${P} points; ${reps} interleaved rounds`);
  const g = gpuTensors(device, c);
  progress(`${name}: ORT sessions`);
  const session = await ort.InferenceSession.create(ortModel(c.dims), { executionProviders: [{ name: 'webgpu', device }], preferredOutputLocation: 'gpu-buffer' });
  const feeds = ortFeeds(c);
  const exported = torchExport(name);
  if (!exported) console.log(`  ORT PyTorch-export: no export for ${name} (/usr/bin/python3 tests/bench/torch/export.py ${name} writes it)`);
  const torchSession = exported && await ort.InferenceSession.create(exported, { executionProviders: [{ name: 'webgpu', device }], preferredOutputLocation: 'gpu-buffer' });
  const torchFeeds = {
    value: ort.Tensor.fromGpuBuffer(g.forward.value.buffer, { dataType: 'float32', dims: c.args.value.shape }),
    locations: ort.Tensor.fromGpuBuffer(g.forward.samplingLocations.buffer, { dataType: 'float32', dims: c.args.samplingLocations.shape }),
    weights: ort.Tensor.fromGpuBuffer(g.forward.attentionWeights.buffer, { dataType: 'float32', dims: c.args.attentionWeights.shape }),
  };
  let tfIn = null;
  if (withTfjs) {
    tfIn = [tf.tensor(c.args.value.data, c.args.value.shape), tf.tensor(c.args.samplingLocations.data, c.args.samplingLocations.shape),
      tf.tensor(c.args.attentionWeights.data, c.args.attentionWeights.shape), tf.tensor(c.backwardArgs.gradOutput.data, [B, Q, H * C])];
    for (const t of tfIn) tfBackend.uploadToGPU(t.dataId);
  }
  const methods = [
    { name: 'ours forward', kind: 'forward', ours: true, run: () => msda.dispatchForward(g.forward) },
    { name: 'ours backward', kind: 'backward', ours: true, run: () => msda.dispatchBackward(g.backward) },
    { name: 'ORT GridSample forward', kind: 'forward', run: async () => { const r = await session.run(feeds); r.out.dispose(); } },
  ];
  if (torchSession) methods.splice(2, 0, { name: 'ORT PyTorch-export forward', kind: 'forward', run: async () => { const r = await torchSession.run(torchFeeds); r.out.dispose(); } });
  if (withTfjs) {
    const [tv, tl, tw, tdy] = tfIn;
    methods.push(
      { name: 'tfjs gathers forward', kind: 'forward', tf: true, run: () => { tf.dispose(tfForward(tv, tl, tw, c.dims)); } },
      { name: 'tfjs gathers backward', kind: 'backward', tf: true, run: () => { tf.dispose(tfBackward(tv, tl, tw, tdy, c.dims)); } },
    );
  }
  const timeOnce = async (m) => {
    const start = performance.now();
    const out = await m.run();
    if (m.ours) destroyTensors(m.kind === 'forward' ? { out } : out);
    if (m.tf) { tfBackend.endComputePassEncoder(); tfBackend.submitQueue(); }
    await device.queue.onSubmittedWorkDone();
    return performance.now() - start;
  };
  for (const m of methods) {
    progress(`${name}: ${m.name}: first call (shader compiles)${m.tf && emulated ? ': minutes on SwiftShader' : ''}`);
    m.first = await timeOnce(m);
    m.wall = [];
    m.gpuMs = [];
    m.passes = [];
  }
  for (const [k, d, n] of await bitsAgainstCpu(msda, cpu, c, g)) console.log(`  bits: ${k}: ${d} of ${n} elements differ from the CPU's (wasm SIMD)`);
  if (torchSession) {   // the graph computes the op: its output beside ours
    const r = await torchSession.run(torchFeeds);
    const got = await r.out.getData(true), want = (await msda.forward(g.forward)).data;
    console.log(`  ORT PyTorch-export graph against ours: max |diff| ${got.reduce((mx, x, i) => Math.max(mx, Math.abs(x - want[i])), 0).toExponential(2)}`);
  }
  for (let r = 0; r < reps; r++) {
    progress(`${name}: round ${r + 1} of ${reps}`);
    for (const m of methods) {
      m.wall.push(await timeOnce(m));
      if (m.ours && profiler) {
        const s = await profiler.run(m.run);
        destroyTensors(m.kind === 'forward' ? { out: s.out } : s.out);
        m.passes.push(s);
        m.gpuMs.push(s.sum);
      } else if (m.tf && timestamps) {
        const t = await tf.time(() => m.run());
        if (typeof t.kernelMs === 'number') m.gpuMs.push(t.kernelMs);
      }
    }
  }
  const by = Object.fromEntries(methods.map((m) => [m.name, m]));
  const oursF = by['ours forward'], oursB = by['ours backward'];
  for (const m of methods) {
    const ref = m.kind === 'backward' ? oursB : oursF;
    rowsOut.push([name, m.name, fmt(m.first), fmt(median(m.wall)), fmt(median(m.gpuMs)), (median(m.wall) / median(ref.wall)).toFixed(2),
      fmt(min(m.wall)), (min(m.wall) / min(ref.wall)).toFixed(2)]);
    report.push({ case: name, method: m.name, first_ms: m.first, wall_ms: m.wall, gpu_ms: m.gpuMs });
    if (m.ours && m.passes.length) passRowsOut.push(passRows(name, m.kind, m.passes));
  }
  const ratio = (what, x, y, target, missing) => {
    const v = x && y ? min(x.wall) / min(y.wall) : NaN;
    ratios.push({ case: name, what, value: v, target, met: target === undefined || !Number.isFinite(v) ? undefined : v <= target, missing: Number.isFinite(v) ? undefined : missing });
  };
  const noTfjs = 'not run (--with-tfjs)';
  ratio('ours forward / ORT PyTorch-export forward', oursF, by['ORT PyTorch-export forward'], 0.35, 'no export');
  ratio('ours forward / ORT GridSample forward (inputs pre-arranged)', oursF, by['ORT GridSample forward']);
  ratio('ours forward / tfjs gathers forward', oursF, by['tfjs gathers forward'], undefined, noTfjs);
  ratio('ours backward / ours forward', oursB, oursF, 3);
  ratio('ours backward / tfjs gathers backward', oursB, by['tfjs gathers backward'], undefined, noTfjs);
  if (profiler) {
    const v = median(oursB.gpuMs) / median(oursF.gpuMs);
    ratios.push({ case: name, what: 'ours backward / ours forward, GPU time (sum of passes, median)', value: v });
  }
  if (withTfjs) tf.dispose(tfIn);
  for (const t of Object.values(feeds)) t.gpuBuffer.destroy();
  await session.release();
  await torchSession?.release();
  g.destroy();
}

const table = (header, rows) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r) => `| ${r.map((x, i) => x.padEnd(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
};
console.log('');
console.log(table(['problem', 'method', 'first call ms (compile)', 'wall ms (median)', 'GPU ms (median)', 'wall / ours', 'wall ms (min)', 'min / ours'], rowsOut));
console.log('wall: from the call to its submitted work done (queue.onSubmittedWorkDone); GPU: timestamp queries '
  + '(ours: every pass; tfjs: tf.time kernelMs; ORT: not exposed). The ORT graph gets its inputs pre-arranged per level (its layout changes untimed) and leaves (B*H, C, N_q).');
console.log(`\nRatios, min wall of ${reps} interleaved rounds (targets: SwiftShader, DETR at 1/8 of the side):`);
console.log(table(['problem', 'ratio', 'value', 'target', ''], ratios.map((r) => [r.case, r.what,
  Number.isFinite(r.value) ? r.value.toFixed(2) : r.missing ?? '—',
  r.target === undefined ? '' : `≤ ${r.target}`, r.met === undefined ? '' : r.met ? 'met' : 'not met'])));
if (passRowsOut.length) {
  console.log(`\nOur passes, GPU time from timestamp queries in the rounds above (median), beside each pass's longest dependent chain`
    + ' and the cost model\'s estimate (tests/bench/gpu_model.js: each pass\'s largest resource of DRAM, L2, L1, issue, atomics and its longest loop,'
    + ' plus its launch gaps and lazy clears; iGPU: 100 GB/s, 15 µs a dispatch; dGPU: 1 TB/s, 6 µs):');
  for (const line of passTable(passRowsOut)) console.log(line);
}
if (opt('--json')) writeFileSync(opt('--json'), JSON.stringify({ adapter: adapterFields(info), emulated, reps, numerics: msda.numerics, methods: report, ratios, passes: passRowsOut }, null, 1));
console.log(`\nload average at the end: ${load()}`);
progress('done');
profiler?.dispose();
msda.dispose();
cpu.dispose();
device.destroy();
