// ms-deform-attn/onnx on onnxruntime-web's WebGPU EP (Node, Dawn on SwiftShader): the fixtures'
// blocks verified and replaced, the op run on ORT's own device with what crosses each cut kept in
// GPU buffers (nothing mapped but the model's outputs), outputs within float32 roundings of ORT's
// own run of the unmodified model on the wasm EP and of PyTorch's; a float16 model with a WebGPU
// instance under the wasm EP, to a wasm instance's bits.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { parseNpz } from '../../bindings/cli/npz.js';
import { parseNpy } from '../../bindings/npy.js';
import './helpers.js';

let ort, dawn, createSession;
const fixture = (name) => new URL(`../fixtures/onnx/${name}`, import.meta.url);
// SwiftShader's arithmetic and ORT's WebGPU kernels round otherwise than the CPU's.
const TOL = 1e-4;

before(async () => {
  dawn = await import('webgpu');
  Object.assign(globalThis, dawn.globals);
  if (globalThis.navigator === undefined) globalThis.navigator = {};
  Object.defineProperty(globalThis.navigator, 'gpu', { value: dawn.create([]), configurable: true });
  // Dawn for Node refuses writeBuffer from a SharedArrayBuffer view, which ORT's wasm gives it
  // (browsers take it): hand Dawn a copy, as tests/webgpu/ort.test.js does.
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
  ({ createSession } = await import('../../bindings/onnx.js'));
});

const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);

for (const [name, out, count] of [['detr-encoder', 'memory', 2], ['detr-decoder', 'hs', 1]]) {
  test(`${name} on the WebGPU EP: blocks replaced, the op on ORT's device, GPU buffers across the cuts`, async () => {
    const bytes = readFileSync(fixture(`${name}.onnx`));
    const members = parseNpz(readFileSync(fixture(`${name}.npz`)), (b) => inflateRawSync(b));
    const read = (key) => parseNpy(members.get(`${key}.npy`).read());
    const session = await createSession(ort, bytes, { executionProviders: ['webgpu'] });
    const plain = await ort.InferenceSession.create(bytes, { executionProviders: ['wasm'] });
    try {
      assert.equal(session.report.blocks.length, count);
      for (const b of session.report.blocks) assert.equal(b.replaced, true, b.why);
      const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float32', a.data, a.shape)]; }));
      let mapped = 0;
      const map = dawn.globals.GPUBuffer.prototype.mapAsync;
      dawn.globals.GPUBuffer.prototype.mapAsync = function (...a) { mapped++; return map.apply(this, a); };
      let ours;
      try {
        ours = await session.run(feeds);
      } finally {
        dawn.globals.GPUBuffer.prototype.mapAsync = map;
      }
      assert.equal(mapped, session.outputNames.length, 'only the model\'s outputs read back');
      assert.equal(ours[out].location, 'cpu');
      const theirs = await plain.run(feeds);
      assert.deepEqual([...ours[out].dims], [...theirs[out].dims]);
      assert.ok(maxDiff(ours[out].data, theirs[out].data) <= TOL, `${maxDiff(ours[out].data, theirs[out].data)} from ORT's wasm run`);
      assert.ok(maxDiff(ours[out].data, read(`expected/${out}`).data) <= TOL, 'from PyTorch\'s');
    } finally {
      await session.release();
      await plain.release();
    }
  });
}

test('the WebGPU EP with an instance for the CPU (options.msda: wasm): CPU tensors across the cuts, same outputs', async () => {
  const { init } = await import('../../bindings/node.js');
  const msda = await init();
  const bytes = readFileSync(fixture('detr-decoder.onnx'));
  const members = parseNpz(readFileSync(fixture('detr-decoder.npz')), (b) => inflateRawSync(b));
  const read = (key) => parseNpy(members.get(`${key}.npy`).read());
  const session = await createSession(ort, bytes, { executionProviders: ['webgpu'], msda });
  try {
    assert.equal(session.report.blocks[0].replaced, true, session.report.blocks[0].why);
    const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float32', a.data, a.shape)]; }));
    const { hs } = await session.run(feeds);
    assert.ok(maxDiff(hs.data, read('expected/hs').data) <= TOL, 'from PyTorch\'s');
  } finally {
    await session.release();
    msda.dispose();
  }
});

// A float16 model (ORT's WebGPU EP refuses float16 on SwiftShader, which has no shader-f16: the
// wasm EP here) with a WebGPU instance: the op's float16 results rounded on the GPU, the same bits
// as a wasm instance's rounding on the CPU.
test('a float16 model on the wasm EP with a WebGPU instance: float16 out, the wasm instance\'s bits', async () => {
  const { init } = await import('../../bindings/node.js');
  const gpu = await init({ backend: 'webgpu' }), cpu = await init();
  const bytes = readFileSync(fixture('core-wide-f16.onnx'));
  const members = parseNpz(readFileSync(fixture('core-wide-f16.npz')), (b) => inflateRawSync(b));
  const read = (key) => parseNpy(members.get(`${key}.npy`).read());
  const sessions = [await createSession(ort, bytes, { executionProviders: ['wasm'], msda: gpu }), await createSession(ort, bytes, { executionProviders: ['wasm'], msda: cpu })];
  try {
    for (const s of sessions) assert.equal(s.report.blocks[0].replaced, true, s.report.blocks[0].why);
    const feeds = Object.fromEntries(sessions[0].inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float16', a.data, a.shape)]; }));
    const [ours, wasm] = [await sessions[0].run(feeds), await sessions[1].run(feeds)];
    assert.equal(ours.output.type, 'float16');
    assert.deepEqual(ours.output.data, wasm.output.data);
  } finally {
    for (const s of sessions) await s.release();
    gpu.dispose();
    cpu.dispose();
  }
});
