// The WebGPU backend's limits: what one buffer cannot hold refused before any GPU work, the
// forward's buffers (no scratch), a backward in parts of (batch, head) pairs with the same bits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, firstDiff, problem, sameBits } from './helpers.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

test('limits: what one buffer cannot hold is refused with a RangeError naming the bytes, before any GPU work', async () => {
  const bind = gpu.limits.maxStorageBufferBindingSize;
  assert.ok(bind > 0);
  const side = 2 ** 14, C = Math.ceil(bind / 4 / side / side) + 1;   // value just past one binding
  const fake = (bytes) => ({ buffer: { size: bytes, usage: 0x80 }, byteOffset: 0 });
  const args = {
    value: { ...fake(4 * side * side * C), shape: [1, side * side, 1, C] }, spatialShapes: [[side, side]],
    samplingLocations: { data: new Float32Array(2), shape: [1, 1, 1, 1, 1, 2] },
    attentionWeights: { data: new Float32Array(1), shape: [1, 1, 1, 1, 1] },
  };
  await assert.rejects(gpu.forward(args), (e) => {
    assert.equal(e.name, 'RangeError');
    assert.match(e.message, new RegExp(`forward: value \\(input\\) needs ${4 * side * side * C} bytes on the GPU, more than this device binds in one buffer \\(maxStorageBufferBindingSize ${bind}`));
    return true;
  });
  // a backward's scratch: 32 bytes of corner records a sample
  const Q = Math.ceil(bind / 32) + 1;
  const big = {
    value: { data: new Float32Array(4), shape: [1, 4, 1, 1] }, spatialShapes: [[2, 2]],
    samplingLocations: { ...fake(8 * Q), shape: [1, Q, 1, 1, 1, 2] },
    attentionWeights: { ...fake(4 * Q), shape: [1, Q, 1, 1, 1] },
    gradOutput: { ...fake(4 * Q), shape: [1, Q, 1] },
  };
  await assert.rejects(gpu.backward(big), { name: 'RangeError', message: new RegExp(`corner records of one \\(batch, head\\) part \\(scratch\\) needs ${32 * Q} bytes`) });
});

test('the forward makes no scratch: its buffers are its inputs, its output, the problem, the dispatch and the readback', async () => {
  const d = gpu.device;
  const made = [];
  d.createBuffer = function (desc) { made.push(`${desc.label} ${desc.size}`); return Object.getPrototypeOf(d).createBuffer.call(this, desc); };
  try {
    const c = problem(860, { shapes: [[6, 5], [3, 3]], B: 2, H: 3, Q: 30, P: 4, C: 5 });
    const want = wasm.forward(c.args);
    const got = await gpu.forward(c.args);
    assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
    const bytes = (t) => 4 * t.data.length;
    assert.deepEqual(made.map((m) => m.replace(/ \d+$/, '')).sort(), ['msda attentionWeights', 'msda dispatch', 'msda output', 'msda problem', 'msda readback', 'msda samplingLocations', 'msda value']);
    assert.ok(made.includes(`msda output ${bytes(want)}`) && made.includes(`msda value ${bytes(c.args.value)}`));
  } finally {
    delete d.createBuffer;
  }
});

test('a backward whose scratch does not fit one buffer runs in parts of (batch, head) pairs, with the same bits', async () => {
  const c = problem(850, { shapes: [[6, 5], [3, 3]], B: 2, H: 3, Q: 30, P: 4, C: 5 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const whole = await gpu.backward(b);
  const limits = gpu._backendKept.limits;
  const saved = limits.maxStorageBufferBindingSize;
  // 1,440 samples, 240 a (batch, head) pair: room for the location gradients (8 bytes a sample,
  // the largest result) and for the corner records (32 bytes a sample) of two pairs, three parts
  // in all
  limits.maxStorageBufferBindingSize = 12 * 1440 + 100;
  try {
    const parts = await gpu.backward(b);
    for (const name of Object.keys(whole)) {
      assert.equal(sameBits(parts[name].data, whole[name].data), whole[name].data.length, `${name}: ${firstDiff(parts[name].data, whole[name].data)}`);
    }
  } finally {
    limits.maxStorageBufferBindingSize = saved;
  }
});
