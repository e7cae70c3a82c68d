// Tensors in and out of the WebGPU backend: GPU tensors in and out, byteOffset aligned or not,
// mixed with CPU ones; CPU tensors read through the intrinsics; bad input with the other
// backends' messages, and GPU tensors checked (another device's buffer named).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, download, problem, sameBits, upload } from './helpers.js';
import { assertClose } from '../js/helpers.js';
import { init } from '../../bindings/node.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

test('GPU tensors in, GPU tensors out ({ outputs: "gpu" }), byteOffset aligned or not, mixed with CPU ones', async () => {
  const d = gpu.device;
  const made = [];
  const onGpu = (t, offset = 0) => {
    const buffer = upload(d, t.data, offset);
    made.push(buffer);
    return { buffer, shape: t.shape, byteOffset: offset };
  };
  // 5 channels, and 8: value and grad_output read as vec4s from a binding at that offset
  for (const C of [5, 8]) for (const offset of [0, 256, 4]) {   // 4: not a binding alignment, copied first
    const c = problem(C === 5 ? 600 : 601, { shapes: [[4, 4], [2, 3]], Q: 10, C, P: 3, H: 2 });
    const want = wasm.forward(c.args);
    const wantB = wasm.backward({ ...c.args, gradOutput: c.gradOutput });
    const args = { ...c.args, value: onGpu(c.args.value, offset), samplingLocations: onGpu(c.args.samplingLocations, offset) };
    const cpuOut = await gpu.forward(args);
    assert.equal(sameBits(cpuOut.data, want.data), want.data.length, `C ${C} offset ${offset}, CPU output`);
    const out = await gpu.forward(args, { outputs: 'gpu' });
    assert.deepEqual(out.shape, want.shape);
    assert.ok((out.buffer.usage & 0x80) && (out.buffer.usage & 0x4), 'the output buffer can be bound and copied');
    assert.equal(sameBits(await download(d, out.buffer, 4 * want.data.length), want.data), want.data.length, `C ${C} offset ${offset}, GPU output`);
    out.buffer.destroy();
    const grads = await gpu.backward({ ...args, attentionWeights: onGpu(c.args.attentionWeights, offset), gradOutput: onGpu(c.gradOutput, offset) }, { outputs: 'gpu' });
    for (const [name, t] of Object.entries(grads)) {
      assert.deepEqual(t.shape, wantB[name].shape);
      const got = await download(d, t.buffer, 4 * wantB[name].data.length);
      assertClose(got, wantB[name].data, `C ${C} offset ${offset}, ${name}`);
      if (name !== 'gradValue') assert.equal(sameBits(got, wantB[name].data), got.length, name);
      t.buffer.destroy();
    }
  }
  for (const b of made) b.destroy();
});

test('a GPU tensor\'s byteOffset is read once: a getter that answers differently later computes what the first answer said', async () => {
  const c = problem(651, { shapes: [[3, 3]], Q: 4 });
  const want = wasm.forward(c.args);
  const buffer = upload(gpu.device, c.args.value.data, 0);
  let reads = 0;
  const value = { buffer, shape: c.args.value.shape };
  Object.defineProperty(value, 'byteOffset', { get() { return reads++ === 0 ? 0 : 260; } });
  try {
    const got = await gpu.forward({ ...c.args, value });
    assert.equal(reads, 1);
    assert.equal(sameBits(got.data, want.data), want.data.length);
  } finally {
    buffer.destroy();
  }
});

test('CPU tensors read through the intrinsics: a view of a SharedArrayBuffer, an array whose buffer property lies', async () => {
  const c = problem(650, { shapes: [[3, 3]], Q: 4 });
  const want = wasm.forward(c.args);
  const shared = new Float32Array(new SharedArrayBuffer(c.args.value.data.byteLength));
  shared.set(c.args.value.data);
  const liar = new Float32Array(c.args.attentionWeights.data);
  Object.defineProperty(liar, 'buffer', { get() { throw new Error('read buffer'); } });
  Object.defineProperty(liar, 'byteLength', { value: 4 });
  const got = await gpu.forward({ ...c.args, value: { data: shared, shape: c.args.value.shape }, attentionWeights: { data: liar, shape: c.args.attentionWeights.shape } });
  assert.equal(sameBits(got.data, want.data), want.data.length);
});

test('bad input: the messages of the other backends, and GPU tensors checked', async () => {
  const c = problem(700, { shapes: [[2, 2]], Q: 2 });
  const bad = [
    { ...c.args, value: undefined },
    { ...c.args, value: { data: new Float64Array(24), shape: [1, 4, 2, 3] } },
    { ...c.args, value: { data: c.args.value.data, shape: [1, 5, 2, 3] } },
    { ...c.args, paddingMode: 'reflect' },
    { ...c.args, alignCorners: 1 },
    { ...c.args, levelStartIndex: [1] },
    { ...c.args, spatialShapes: [[2, 3]] },
    { ...c.args, attentionWeights: { data: new Float32Array(3), shape: [1, 2, 2, 1, 2] } },
    { ...c.args, extra: 1 },
  ];
  for (const args of bad) {
    let want;
    try { wasm.forward(args); } catch (e) { want = e; }
    assert.ok(want, 'wasm refuses it');
    await assert.rejects(gpu.forward(args), (e) => {
      assert.equal(e.constructor, want.constructor);
      // the same message, save the GPU tensor form named among what is expected
      assert.equal(e.message.replace(/ or \{ buffer: GPUBuffer[^}]*\}/, ''), want.message);
      return true;
    });
  }
  const d = gpu.device;
  const noStorage = d.createBuffer({ size: 64, usage: 0x8 | 0x4 });
  const small = d.createBuffer({ size: 16, usage: 0x80 });
  const g = (buffer, extra = {}) => ({ ...c.args, value: { buffer, shape: c.args.value.shape, ...extra } });
  await assert.rejects(gpu.forward(g(noStorage)), { name: 'TypeError', message: /value\.buffer has usage 12, expected one with GPUBufferUsage\.STORAGE/ });
  await assert.rejects(gpu.forward(g(small)), { name: 'RangeError', message: /value needs 96 bytes \(24 float32\) from byteOffset 0, 96 bytes in all, but its GPUBuffer has 16 bytes/ });
  await assert.rejects(gpu.forward(g(small, { byteOffset: 8 })), { message: /value needs 96 bytes \(24 float32\) from byteOffset 8, 104 bytes in all, but its GPUBuffer has 16 bytes/ });
  await assert.rejects(gpu.forward(g(small, { byteOffset: 2 })), { name: 'RangeError', message: /value\.byteOffset is number 2, expected a non-negative multiple of 4/ });
  await assert.rejects(gpu.forward(g({ size: 99 })), { name: 'TypeError', message: /value\.buffer is Object, expected a GPUBuffer/ });
  await assert.rejects(gpu.forward(c.args, { outputs: 'host' }), { name: 'RangeError', message: /outputs is the string "host", expected 'cpu' or 'gpu'/ });
  await assert.rejects(gpu.backward(c.args, { copy: true }), { name: 'TypeError', message: /unknown option 'copy'/ });
  await assert.rejects(gpu.backward(c.args), { name: 'TypeError', message: /backward: gradOutput is missing/ });
  noStorage.destroy();
  small.destroy();
  // what the device cannot take, named by argument before WebGPU's own words: an object with a
  // GPUBuffer's size and usage but none, and a buffer of another GPUDevice (forward and the
  // backward, aligned and not)
  const shaped = { size: 4 * c.args.value.data.length, usage: 0x80 | 0x4 | 0x8 };
  await assert.rejects(gpu.forward(g(shaped)), { name: 'TypeError', message: /^forward: value\.buffer is Object, expected a GPUBuffer/ });
  const other = await init({ backend: 'webgpu' });
  try {
    const foreign = other.device.createBuffer({ size: 256 + shaped.size, usage: shaped.usage });
    await assert.rejects(gpu.forward(g(foreign)), { name: 'TypeError', message: /^forward: value\.buffer belongs to another GPUDevice, expected a buffer of this instance's device/ });
    await assert.rejects(gpu.forward(g(foreign, { byteOffset: 4 })), { message: /^forward: value\.buffer belongs to another GPUDevice/ });
    const grad = { ...c.args, gradOutput: { buffer: foreign, shape: [1, 2, 6] } };   // (B, Q, H * C)
    await assert.rejects(gpu.backward(grad), { message: /^backward: gradOutput\.buffer belongs to another GPUDevice/ });
    // the instance still works
    const want = wasm.forward(c.args);
    assert.equal(sameBits((await gpu.forward(c.args)).data, want.data), want.data.length);
    foreign.destroy();
  } finally {
    other.dispose();
  }
});
