// docs/webgpu.md's ONNX Runtime Web recipe, run (Node, Dawn on SwiftShader): a session whose output
// stays on the GPU ('gpu-buffer') -> our forward on ORT's own GPUDevice -> ort.Tensor.fromGpuBuffer
// into the next session, nothing mapped or copied through the CPU in between; the bits are wasm
// SIMD's. The models are written by the test itself (onnx.js).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { sameBits } from './helpers.js';
import { elementwiseModel } from './onnx.js';
import { rng } from '../js/helpers.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';

let ort, init, dawn, instance;

before(async () => {
  dawn = await import('webgpu');
  Object.assign(globalThis, dawn.globals);
  instance = dawn.create([]);
  if (globalThis.navigator === undefined) globalThis.navigator = {};
  Object.defineProperty(globalThis.navigator, 'gpu', { value: instance, configurable: true });
  // Dawn for Node refuses writeBuffer from a SharedArrayBuffer view, which ORT's threaded wasm
  // gives it (browsers take it): hand Dawn a copy. Only ORT's uploads of its inputs go through here.
  const write = dawn.globals.GPUQueue.prototype.writeBuffer;
  dawn.globals.GPUQueue.prototype.writeBuffer = function (buffer, offset, data, dataOffset = 0, size = undefined) {
    if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
      const bpe = data.BYTES_PER_ELEMENT ?? 1;
      const n = size ?? (data.length - dataOffset);
      return write.call(this, buffer, offset, new Uint8Array(data.buffer, data.byteOffset + dataOffset * bpe, n * bpe).slice());
    }
    return write.call(this, buffer, offset, data, dataOffset, size);
  };
  ort = await import('onnxruntime-web/webgpu');
  ort.env.wasm.numThreads = 1;
  ({ init } = await import('../../bindings/node.js'));
});

after(() => assert.ok(instance));

test('ORT session (gpu-buffer output) -> msda.forward on ORT\'s device -> fromGpuBuffer into the next session, no CPU copy', async () => {
  const r = rng(900);
  const B = 1, Q = 20, H = 2, C = 4, P = 2, spatialShapes = [[6, 6], [3, 3]], NL = 2, L = 45;
  const value = Float32Array.from({ length: B * L * H * C }, () => r.uniform(-1, 1));
  const locations = Float32Array.from({ length: B * Q * H * NL * P * 2 }, () => r.uniform(-0.1, 1.1));
  const weights = Float32Array.from({ length: B * Q * H * NL * P }, () => r.uniform(0, 1));
  const valueShape = [B, L, H, C], outShape = [B, Q, H * C];

  // 1. a model's value projection stand-in: value = x + x, kept on the GPU
  const first = await ort.InferenceSession.create(elementwiseModel('Add', valueShape),
    { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer' });
  const { y } = await first.run({ x: new ort.Tensor('float32', value.map((v) => v / 2), valueShape) });
  assert.equal(y.location, 'gpu-buffer');

  // 2. our kernel on ORT's device, reading ORT's buffer and leaving its output on the GPU
  const device = await ort.env.webgpu.device;
  const msda = await init({ backend: 'webgpu', device });
  let mapped = 0, bigWrites = 0;
  const map = dawn.globals.GPUBuffer.prototype.mapAsync;
  const write = dawn.globals.GPUQueue.prototype.writeBuffer;
  dawn.globals.GPUBuffer.prototype.mapAsync = function (...a) { mapped++; return map.apply(this, a); };
  dawn.globals.GPUQueue.prototype.writeBuffer = function (buffer, offset, data, ...rest) {
    if ((data.byteLength ?? 0) >= value.byteLength) bigWrites++;
    return write.call(this, buffer, offset, data, ...rest);
  };
  // ORT's tensor itself as value: a hint, not ORT's "data is not on CPU" from its getter
  await assert.rejects(msda.forward({
    value: y, spatialShapes,
    samplingLocations: { data: locations, shape: [B, Q, H, NL, P, 2] },
    attentionWeights: { data: weights, shape: [B, Q, H, NL, P] },
  }), { name: 'TypeError', message: /^forward: value is an onnxruntime-web GPU tensor, .*pass \{ buffer: value\.gpuBuffer, shape: value\.dims \}$/ });
  let out;
  try {
    out = await msda.forward({
      value: { buffer: y.gpuBuffer, shape: valueShape }, spatialShapes,
      samplingLocations: { data: locations, shape: [B, Q, H, NL, P, 2] },
      attentionWeights: { data: weights, shape: [B, Q, H, NL, P] },
    }, { outputs: 'gpu' });
  } finally {
    dawn.globals.GPUBuffer.prototype.mapAsync = map;
    dawn.globals.GPUQueue.prototype.writeBuffer = write;
  }
  y.dispose();   // ORT's buffer: ours to release once our work is submitted
  assert.equal(mapped, 0, 'nothing mapped for reading');
  assert.equal(bigWrites, 0, 'value never uploaded from the CPU');

  // 3. into the next session straight from our buffer: z = output + output
  const second = await ort.InferenceSession.create(elementwiseModel('Add', outShape), { executionProviders: ['webgpu'] });
  const { y: z } = await second.run({ x: ort.Tensor.fromGpuBuffer(out.buffer, { dataType: 'float32', dims: out.shape }) });
  const got = await z.getData();
  out.buffer.destroy();   // ours (outputs: 'gpu'): destroyed once ORT's run is done with it

  const wasm = await init({ backend: 'wasm', simd: true });
  const want = wasm.forward({
    value: { data: value, shape: valueShape }, spatialShapes,
    samplingLocations: { data: locations, shape: [B, Q, H, NL, P, 2] },
    attentionWeights: { data: weights, shape: [B, Q, H, NL, P] },
  }).data.map((v) => v + v);
  assert.equal(sameBits(got, want), want.length, 'output + output has wasm SIMD\'s bits');
  wasm.dispose();
  msda.dispose();
  await first.release();
  await second.release();
});

// An fp16 model's GPU tensor in as it is (dtype 'float16'), float16 results out into the next
// fp16 session: the bits are the float32 call's on the widened values, rounded to nearest even.
// (Identity: SwiftShader offers no shader-f16, which ORT's fp16 arithmetic needs.)
test('fp16 ORT session (gpu-buffer output) -> msda.forward with float16 in and out -> fromGpuBuffer into an fp16 session', async () => {
  const r = rng(910);
  const B = 1, Q = 15, H = 1, C = 3, P = 2, spatialShapes = [[4, 5], [1, 1]], NL = 2, L = 21;
  const valueShape = [B, L, H, C], outShape = [B, Q, H * C];   // 63 and 45 elements: odd
  const bits = narrowToHalf(Float32Array.from({ length: B * L * H * C }, () => r.uniform(-1, 1)), 'float16');
  const samplingLocations = { data: Float32Array.from({ length: B * Q * H * NL * P * 2 }, () => r.uniform(-0.1, 1.1)), shape: [B, Q, H, NL, P, 2] };
  const attentionWeights = { data: Float32Array.from({ length: B * Q * H * NL * P }, () => r.uniform(0, 1)), shape: [B, Q, H, NL, P] };
  const first = await ort.InferenceSession.create(elementwiseModel('Identity', valueShape, { inputs: 1, elemType: 10 }),
    { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer' });
  const { y } = await first.run({ x: new ort.Tensor('float16', bits, valueShape) });
  assert.deepEqual([y.location, y.type], ['gpu-buffer', 'float16']);
  const msda = await init({ backend: 'webgpu', device: await ort.env.webgpu.device });
  await assert.rejects(msda.forward({ value: y, spatialShapes, samplingLocations, attentionWeights }),
    { name: 'TypeError', message: /pass \{ buffer: value\.gpuBuffer, shape: value\.dims, dtype: 'float16' \}$/ });
  const out = await msda.forward({ value: { buffer: y.gpuBuffer, shape: y.dims, dtype: 'float16' }, spatialShapes, samplingLocations, attentionWeights },
    { outputs: 'gpu', dtype: 'float16' });
  y.dispose();
  assert.equal(out.dtype, 'float16');
  const second = await ort.InferenceSession.create(elementwiseModel('Identity', outShape, { inputs: 1, elemType: 10 }), { executionProviders: ['webgpu'] });
  const { y: z } = await second.run({ x: ort.Tensor.fromGpuBuffer(out.buffer, { dataType: 'float16', dims: out.shape }) });
  const got = await z.getData();
  out.buffer.destroy();
  const wasm = await init({ backend: 'wasm', simd: true });
  const want = narrowToHalf(wasm.forward({ value: { data: widenHalf(bits, 'float16'), shape: valueShape }, spatialShapes, samplingLocations, attentionWeights }).data, 'float16');
  assert.equal(got.constructor, Uint16Array);
  assert.deepEqual(Array.from(got), Array.from(want), 'float16 results: wasm SIMD\'s float32 bits rounded');
  wasm.dispose();
  msda.dispose();
  await first.release();
  await second.release();
});
