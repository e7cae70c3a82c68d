// make bench-webgpu: the WebGPU backend against the WebGPU runtimes users have, on one device
// (Node + Dawn; VK_ICD_FILENAMES picks the Vulkan driver: SwiftShader by default, a real GPU's
// where there is one). Inputs already on the GPU. Per problem (encoder, decoder), interleaved:
//   ours       dispatchForward / dispatchBackward
//   ORT torch  onnxruntime-web's WebGPU EP running PyTorch's reference graph as torch.onnx.export
//              writes it (ms_deform_attn_core_pytorch: its reshapes and transposes timed)
//   ORT        onnxruntime-web's WebGPU EP running a GridSample graph (the PyTorch reference's
//              grid_sample formulation: GridSample per level, times the weights, summed over
//              points and levels), inputs pre-arranged per level (its reshapes not timed)
//   tfjs       tfjs-backend-webgpu, the op built from gathers (forward, and tf.grads for the backward)
// Wall time per call (submitted work done), GPU time from timestamp queries where offered (ours:
// every pass; tfjs: tf.time's kernelMs), the first call (shader compiles) reported apart.
import { performance } from 'node:perf_hooks';
import { CONFIGS, makeCase, H, C, P } from './cases.js';
import { graphModel } from '../webgpu/onnx.js';

// Errors as one line (onnxruntime-web's minified source would otherwise fill the screen).
process.on('uncaughtException', (e) => { console.error(`bench-webgpu: ${e?.message ?? e}`); process.exit(1); });
process.on('unhandledRejection', (e) => { console.error(`bench-webgpu: ${e?.message ?? e}`); process.exit(1); });

const dawn = await import('webgpu');
Object.assign(globalThis, dawn.globals);
const gpu = dawn.create([]);
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
console.log(`adapter: ${info.vendor} ${info.architecture} ${info.device} (${info.description}); timestamp-query: ${timestamps ? 'yes' : 'no'}`);
if (emulated) {
  console.log('SwiftShader: a CPU emulation of a GPU. These numbers say nothing about a GPU\'s speed; they show the benchmark runs.');
}

// On SwiftShader the problems are scaled down (levels an eighth of the side, the decoder's 300
// queries as they are) unless MSDA_BENCH_FULL=1; on a GPU, DETR's sizes.
const eighth = (levels) => levels.map(([h, w]) => [Math.ceil(h / 8), Math.ceil(w / 8)]);
const cases = full ? ['encoder', 'decoder'] : ['encoder/8', 'decoder/8'];
if (!full) {
  CONFIGS['encoder/8'] = { ...CONFIGS.encoder, levels: eighth(CONFIGS.encoder.levels) };
  CONFIGS['decoder/8'] = { ...CONFIGS.decoder, levels: eighth(CONFIGS.decoder.levels) };
}
const reps = Number(process.env.MSDA_BENCH_REPS ?? (emulated ? 1 : 20));

const { init } = await import('../../bindings/node.js');
let t0 = performance.now();
const msda = await init({ backend: 'webgpu', device });
console.log(`ours: ${(performance.now() - t0).toFixed(0)} ms to init (the probe's pipeline compiled and run; the others compile at the first call that needs them, in its first-call time); numerics ${JSON.stringify(msda.numerics)}`);
const tf = await import('@tensorflow/tfjs-core');
const { WebGPUBackend } = await import('@tensorflow/tfjs-backend-webgpu');
const tfBackend = new WebGPUBackend(device, info);
tf.removeBackend('webgpu');
tf.registerBackend('webgpu', () => tfBackend);
await tf.setBackend('webgpu');
const ort = await import('onnxruntime-web/webgpu');
ort.env.wasm.numThreads = 1;

const querySet = timestamps ? device.createQuerySet({ type: 'timestamp', count: 64 }) : null;
async function oursGpuMs(run) {
  msda.profile(querySet, 64);
  const out = run();
  const n = msda.profile(null);
  const resolve = device.createBuffer({ size: 8 * 64, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const read = device.createBuffer({ size: 8 * 64, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const enc = device.createCommandEncoder();
  enc.resolveQuerySet(querySet, 0, n, resolve, 0);
  enc.copyBufferToBuffer(resolve, 0, read, 0, 8 * n);
  device.queue.submit([enc.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const t = new BigInt64Array(read.getMappedRange());
  let ns = 0n;
  for (let i = 0; i + 1 < n; i += 2) ns += t[i + 1] - t[i];
  read.unmap();
  read.destroy();
  resolve.destroy();
  return { out, ms: Number(ns) / 1e6 };
}

function upload(data, usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST) {
  const buffer = device.createBuffer({ size: data.byteLength, usage });
  device.queue.writeBuffer(buffer, 0, data);
  return buffer;
}

const destroyAll = (r) => { for (const t of Object.values(r.buffer ? { r } : r)) t.buffer.destroy(); };

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

// ORT on PyTorch's reference as torch.onnx.export writes ms_deform_attn_core_pytorch (Deformable
// DETR): the inputs in the op's own layouts; value split per level, flatten / transpose / reshape
// to (B*H, C, H_l, W_l); grids 2*loc-1, level l gathered, transposed to (B*H, Q, P, 2); GridSample;
// levels stacked and flattened to (B*H, C, Q, L*P); times the weights (B*H, 1, Q, L*P), summed,
// reshaped and transposed to (B, Q, H*C). Node for node, so that its reshapes are timed.
function ortTorchModel(dims) {
  const { B, Q, L, NL } = dims;
  const shapes = CONFIGS[dims.name].levels;
  const BH = B * H;
  const int64s = { split: shapes.map(([hl, wl]) => hl * wl), outShape: [B, H * C, Q], wShape: [BH, 1, Q, NL * P], stackShape: [BH, C, Q, NL * P], sumAxes: [3], stackAxes: [3] };
  const nodes = [
    { op: 'Split', inputs: ['value', 'split'], outputs: shapes.map((_, l) => `vs${l}`), attrs: { axis: 1 } },
    { op: 'Mul', inputs: ['locations', 'two'], outputs: ['loc2'] },
    { op: 'Sub', inputs: ['loc2', 'one'], outputs: ['grids'] },
  ];
  shapes.forEach(([hl, wl], l) => {
    int64s[`vflat${l}`] = [B, hl * wl, H * C];
    int64s[`vshape${l}`] = [BH, C, hl, wl];
    int64s[`level${l}`] = l;
    nodes.push(
      { op: 'Reshape', inputs: [`vs${l}`, `vflat${l}`], outputs: [`vf${l}`] },
      { op: 'Transpose', inputs: [`vf${l}`], outputs: [`vt${l}`], attrs: { perm: [0, 2, 1] } },
      { op: 'Reshape', inputs: [`vt${l}`, `vshape${l}`], outputs: [`v${l}`] },
      { op: 'Gather', inputs: ['grids', `level${l}`], outputs: [`gl${l}`], attrs: { axis: 3 } },
      { op: 'Transpose', inputs: [`gl${l}`], outputs: [`gt${l}`], attrs: { perm: [0, 2, 1, 3, 4] } },
      { op: 'Reshape', inputs: [`gt${l}`, 'gshape'], outputs: [`g${l}`] },
      { op: 'GridSample', inputs: [`v${l}`, `g${l}`], outputs: [`s${l}`], attrs: { mode: 'bilinear', padding_mode: 'zeros', align_corners: 0 } },
      { op: 'Unsqueeze', inputs: [`s${l}`, 'stackAxes'], outputs: [`u${l}`] },
    );
  });
  int64s.gshape = [BH, Q, P, 2];
  nodes.push(
    { op: 'Concat', inputs: shapes.map((_, l) => `u${l}`), outputs: ['stacked'], attrs: { axis: 3 } },
    { op: 'Reshape', inputs: ['stacked', 'stackShape'], outputs: ['sampled'] },
    { op: 'Transpose', inputs: ['weights'], outputs: ['wt'], attrs: { perm: [0, 2, 1, 3, 4] } },
    { op: 'Reshape', inputs: ['wt', 'wShape'], outputs: ['w'] },
    { op: 'Mul', inputs: ['sampled', 'w'], outputs: ['weighted'] },
    { op: 'ReduceSum', inputs: ['weighted', 'sumAxes'], outputs: ['summed'], attrs: { keepdims: 0 } },
    { op: 'Reshape', inputs: ['summed', 'outShape'], outputs: ['heads'] },
    { op: 'Transpose', inputs: ['heads'], outputs: ['out'], attrs: { perm: [0, 2, 1] } },
  );
  return graphModel({
    inputs: [['value', [B, L, H, C]], ['locations', [B, Q, H, NL, P, 2]], ['weights', [B, Q, H, NL, P]]],
    outputs: [['out', [B, Q, H * C]]], nodes, int64s, floats: { two: 2, one: 1 },
  });
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
const fmt = (x) => (Number.isFinite(x) ? x.toFixed(x < 10 ? 2 : 1) : '—');
const rowsOut = [];

for (const name of cases) {
  const c = makeCase(name);
  c.name = name;
  c.dims.name = name;
  const { B, L, Q, NL } = c.dims;
  const gpuArgs = {
    value: { buffer: upload(c.args.value.data), shape: c.args.value.shape }, spatialShapes: c.args.spatialShapes,
    samplingLocations: { buffer: upload(c.args.samplingLocations.data), shape: c.args.samplingLocations.shape },
    attentionWeights: { buffer: upload(c.args.attentionWeights.data), shape: c.args.attentionWeights.shape },
  };
  const gpuBackward = { ...gpuArgs, gradOutput: { buffer: upload(c.backwardArgs.gradOutput.data), shape: c.backwardArgs.gradOutput.shape } };
  const tv = tf.tensor(c.args.value.data, c.args.value.shape), tl = tf.tensor(c.args.samplingLocations.data, c.args.samplingLocations.shape);
  const tw = tf.tensor(c.args.attentionWeights.data, c.args.attentionWeights.shape), tdy = tf.tensor(c.backwardArgs.gradOutput.data, [B, Q, H * C]);
  for (const t of [tv, tl, tw, tdy]) tfBackend.uploadToGPU(t.dataId);
  const session = await ort.InferenceSession.create(ortModel(c.dims), { executionProviders: [{ name: 'webgpu', device }], preferredOutputLocation: 'gpu-buffer' });
  const feeds = ortFeeds(c);
  const torchSession = await ort.InferenceSession.create(ortTorchModel(c.dims), { executionProviders: [{ name: 'webgpu', device }], preferredOutputLocation: 'gpu-buffer' });
  const torchFeeds = {
    value: ort.Tensor.fromGpuBuffer(gpuArgs.value.buffer, { dataType: 'float32', dims: c.args.value.shape }),
    locations: ort.Tensor.fromGpuBuffer(gpuArgs.samplingLocations.buffer, { dataType: 'float32', dims: c.args.samplingLocations.shape }),
    weights: ort.Tensor.fromGpuBuffer(gpuArgs.attentionWeights.buffer, { dataType: 'float32', dims: c.args.attentionWeights.shape }),
  };
  {   // the graph computes the op: its output beside the CPU reference's
    const r = await torchSession.run(torchFeeds);
    const got = await r.out.getData(true), want = (await msda.forward(gpuArgs)).data;
    console.error(`${name}: ORT PyTorch-export graph against ours: max |diff| ${got.reduce((m, x, i) => Math.max(m, Math.abs(x - want[i])), 0).toExponential(2)}`);
  }
  const methods = [
    { name: 'ours forward', gpu: true, run: () => destroyAll({ out: msda.dispatchForward(gpuArgs) }) },
    { name: 'ours backward', gpu: true, run: () => destroyAll(msda.dispatchBackward(gpuBackward)) },
    { name: 'ORT PyTorch-export forward', run: async () => { const r = await torchSession.run(torchFeeds); r.out.dispose(); } },
    { name: 'ORT GridSample forward', run: async () => { const r = await session.run(feeds); r.out.dispose(); } },
    { name: 'tfjs gathers forward', tf: true, run: () => { tf.dispose(tfForward(tv, tl, tw, c.dims)); } },
    { name: 'tfjs gathers backward', tf: true, run: () => { tf.dispose(tfBackward(tv, tl, tw, tdy, c.dims)); } },
  ];
  const timeOnce = async (m) => {
    const start = performance.now();
    await m.run();
    if (m.tf) { tfBackend.endComputePassEncoder(); tfBackend.submitQueue(); }
    await device.queue.onSubmittedWorkDone();
    return performance.now() - start;
  };
  for (const m of methods) {
    m.first = await timeOnce(m);
    process.stderr.write(`${name}: ${m.name} first call ${m.first.toFixed(0)} ms\n`);
    m.wall = [];
    m.gpuMs = [];
  }
  for (let r = 0; r < reps; r++) {
    for (const m of methods) {
      m.wall.push(await timeOnce(m));
      if (m.gpu && timestamps) {
        const { ms } = await oursGpuMs(() => m.run());
        m.gpuMs.push(ms);
      } else if (m.tf && timestamps) {
        const t = await tf.time(() => m.run());
        if (typeof t.kernelMs === 'number') m.gpuMs.push(t.kernelMs);
      }
    }
  }
  const oursF = median(methods[0].wall), oursB = median(methods[1].wall);
  for (const m of methods) {
    const ref = m.name.includes('backward') ? oursB : oursF;
    rowsOut.push([name, m.name, fmt(m.first), fmt(median(m.wall)), fmt(median(m.gpuMs)), (median(m.wall) / ref).toFixed(2)]);
  }
  tf.dispose([tv, tl, tw, tdy]);
  for (const t of Object.values(feeds)) t.gpuBuffer.destroy();
  await session.release();
  await torchSession.release();
  for (const t of Object.values(gpuBackward)) t.buffer?.destroy();
  console.log(`${name}: B ${B}, L ${L}, N_q ${Q}, ${H} heads, ${C} channels, ${NL} levels, ${P} points; ${reps} interleaved rounds`);
}

const header = ['problem', 'method', 'first call ms (compile)', 'wall ms (median)', 'GPU ms (median)', 'wall / ours'];
const widths = header.map((h, i) => Math.max(h.length, ...rowsOut.map((r) => r[i].length)));
const line = (r) => `| ${r.map((x, i) => x.padEnd(widths[i])).join(' | ')} |`;
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const r of rowsOut) console.log(line(r));
console.log('wall: from the call to its submitted work done (queue.onSubmittedWorkDone); GPU: timestamp queries '
  + '(ours: every pass; tfjs: tf.time kernelMs; ORT: not exposed). The ORT graph gets its inputs pre-arranged per level (its layout changes untimed) and leaves (B*H, C, N_q).');
msda.dispose();
device.destroy();
