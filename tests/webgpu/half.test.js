// float16 and bfloat16 on the WebGPU backend: every pattern in, random values at every
// byteOffset and odd counts (the float32 call's bits), half results rounded to nearest, ties to
// even, as core/half.js; bad half input named, with the bytes needed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertSameBits, backends, download, identityCase, problem, uploadHalf } from './helpers.js';
import { rng } from '../js/helpers.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

// A float16 value is read where it lies on a GPU and widened first by a pass on an adapter that
// is a CPU (tensors.js halfInPlace), as SwiftShader here is: both ways, each giving the same bits.
const READS = [['float16 value read in place', false], ['float16 value widened first (a CPU adapter)', true]];
const reading = (onCpu) => { gpu._b.onCpu = onCpu; };

for (const [how, onCpu] of READS)
test(`float16 and bfloat16 GPU tensors (${how}): every one of the 65,536 patterns gives the float32 call's bits, and half results are them rounded`, async () => {
  reading(onCpu);
  const d = gpu.device;
  const id = identityCase(256, 256);
  const all = Uint16Array.from({ length: id.L }, (_, i) => i);
  const mixed = Uint16Array.from({ length: id.L }, (_, i) => (i * 40503) & 0xffff);   // every pattern, in another order
  for (const dtype of ['float16', 'bfloat16']) {
    const made = [];
    const half = (bits, shape) => { const buffer = uploadHalf(d, bits); made.push(buffer); return { buffer, shape, dtype }; };
    const wide = (bits, shape) => ({ data: widenHalf(bits, dtype), shape });
    // the forward: value's patterns as they are (subnormals, +-0, +-Inf, every NaN)
    const shape = [1, id.L, 1, 1];
    const want = await gpu.forward(id.args(wide(all, shape)));
    const got = await gpu.forward(id.args(half(all, shape)));
    assertSameBits(got.data, want.data, `${dtype} forward`);
    const values = widenHalf(all, dtype);
    const kept = values.filter((v, i) => Object.is(got.data[i], v)).length, finite = values.filter(Number.isFinite).length;
    assert.ok(kept > finite - 600, `${dtype}: the output is the value: ${kept} of ${finite}`);
    // the backward: every input half, on the GPU
    const grad = { data: narrowToHalf(id.centres, dtype), shape: [1, id.L, 1, 1, 1, 2] };
    const bargs = (t) => ({
      value: t(all, shape), spatialShapes: [[256, 256]], samplingLocations: t(grad.data, grad.shape),
      attentionWeights: t(mixed, [1, id.L, 1, 1, 1]), gradOutput: t(all.slice().reverse(), [1, id.L, 1]),
    });
    const wantB = await gpu.backward(bargs(wide));
    const gotB = await gpu.backward(bargs(half));
    for (const name of Object.keys(wantB)) assertSameBits(gotB[name].data, wantB[name].data, `${dtype} backward ${name}`);
    // half results: the float32 ones rounded to nearest, ties to even (core/half.js, the CLI's --out-dtype)
    const out = await gpu.forward(id.args(half(all, shape)), { outputs: 'gpu', dtype });
    assert.deepEqual([out.shape, out.dtype, out.buffer.size], [shape.slice(0, 2).concat([1]), dtype, 2 * id.L]);
    assertSameBits(new Uint16Array((await download(d, out.buffer, 2 * id.L)).buffer), narrowToHalf(want.data, dtype), `${dtype} forward, ${dtype} out`);
    out.buffer.destroy();
    const outB = await gpu.backward(bargs(half), { dtype });
    for (const name of Object.keys(wantB)) {
      assert.equal(outB[name].dtype, dtype);
      assert.deepEqual(outB[name].shape, wantB[name].shape);
      assertSameBits(outB[name].data, narrowToHalf(wantB[name].data, dtype), `${dtype} backward ${name}, ${dtype} out`);
    }
    for (const b of made) b.destroy();
  }
});

// value 63 elements, output 21: odd; and channels a multiple of 4 (value read four at a time)
for (const [how, onCpu] of READS)
for (const [label, c, offsets] of [['odd element counts', problem(610, { shapes: [[3, 5], [2, 3]], Q: 7, C: 3, P: 3, H: 1 }), [0, 2, 6, 256, 258]],
  ['four channels', problem(611, { shapes: [[3, 5], [2, 3]], Q: 7, C: 4, P: 3, H: 2 }), [2, 6, 256]]]) {
  test(`float16 and bfloat16 GPU tensors (${how}): random values at every byteOffset, ${label}, the float32 call's bits`, async () => {
    reading(onCpu);
    const d = gpu.device;
    const cpu = { ...c.args, gradOutput: c.gradOutput };
    const names = ['value', 'samplingLocations', 'attentionWeights', 'gradOutput'];
    for (const dtype of ['float16', 'bfloat16']) {
      const bits = Object.fromEntries(names.map((k) => [k, narrowToHalf(cpu[k].data, dtype)]));
      const wide = { ...cpu };
      for (const k of names) wide[k] = { data: widenHalf(bits[k], dtype), shape: cpu[k].shape };
      const forward = ({ gradOutput, ...rest }) => rest;
      const want = await gpu.forward(forward(wide)), wantB = await gpu.backward(wide);
      for (const offset of offsets) {   // mid-word, and past a binding alignment
        const made = [];
        const args = { ...cpu };
        for (const k of names) {
          const buffer = uploadHalf(d, bits[k], offset);
          made.push(buffer);
          args[k] = { buffer, shape: cpu[k].shape, byteOffset: offset, dtype: dtype === 'float16' && offset === 6 ? '<f2' : dtype };
        }
        const label = `${dtype}, byteOffset ${offset}`;
        assertSameBits((await gpu.forward(forward(args))).data, want.data, `${label} forward`);
        const got = await gpu.backward(args);
        for (const name of Object.keys(wantB)) assertSameBits(got[name].data, wantB[name].data, `${label} ${name}`);
        // half results without awaiting, as a tfjs kernel takes them
        const now = gpu.dispatchForward(forward(args), { dtype });
        assert.equal(now.dtype, dtype);
        const n = want.data.length;
        assertSameBits(new Uint16Array((await download(d, now.buffer, 4 * Math.ceil(n / 2))).buffer, 0, n), narrowToHalf(want.data, dtype), `${label} dispatchForward`);
        now.buffer.destroy();
        const grads = gpu.dispatchBackward(args, { dtype });
        for (const [name, t] of Object.entries(grads)) {
          const n = wantB[name].data.length;
          assertSameBits(new Uint16Array((await download(d, t.buffer, 4 * Math.ceil(n / 2))).buffer, 0, n), narrowToHalf(wantB[name].data, dtype), `${label} dispatchBackward ${name}`);
          t.buffer.destroy();
        }
        for (const b of made) b.destroy();
      }
      // CPU half tensors (their bits uploaded, widened on the GPU): odd counts, a SharedArrayBuffer's view, beside a GPU one
      const shared = new Uint16Array(new SharedArrayBuffer(2 * bits.samplingLocations.length));
      shared.set(bits.samplingLocations);
      const weights = uploadHalf(d, bits.attentionWeights);
      const mixed = {
        ...cpu, value: { data: bits.value, shape: cpu.value.shape, dtype }, samplingLocations: { data: shared, shape: cpu.samplingLocations.shape, dtype },
        attentionWeights: { buffer: weights, shape: cpu.attentionWeights.shape, dtype }, gradOutput: { data: bits.gradOutput, shape: cpu.gradOutput.shape, dtype },
      };
      assertSameBits((await gpu.forward(forward(mixed))).data, want.data, `${dtype} CPU halves, forward`);
      const got = await gpu.backward(mixed);
      for (const name of Object.keys(wantB)) assertSameBits(got[name].data, wantB[name].data, `${dtype} CPU halves, ${name}`);
      weights.destroy();
    }
  });
}

test('half results round to nearest, ties to even: midpoints, their neighbours, overflow and subnormals, as core/half.js', async () => {
  // float32 values the forward returns as they are (identityCase): for float16, each finite
  // magnitude, the midpoint to the next one (65520 past the largest) and the floats beside it;
  // for bfloat16 the same in its bits (a random third of the patterns); both signs.
  const values = [];
  const f16 = (h) => widenHalf(new Uint16Array([h]), 'float16')[0];
  const bits = new Uint32Array(1), float = new Float32Array(bits.buffer);
  const beside = (x) => { float[0] = x; const b = bits[0]; const out = []; for (const k of [-1, 0, 1]) { bits[0] = b + k; out.push(float[0]); } return out; };
  for (let h = 0; h < 0x7c00; h++) {
    const x = f16(h), next = h === 0x7bff ? 65536 : f16(h + 1);
    values.push(x, ...beside((x + next) / 2));
  }
  const r = rng(620);
  for (let h = 0; h < 0x7f80; h++) {
    if (r() > 1 / 3) continue;
    for (const low of [0, 0x7fff, 0x8000, 0x8001]) { bits[0] = (h << 16) | low; values.push(float[0]); }
  }
  values.push(2 ** -25, 2 ** -26, 3 * 2 ** -26, 2 ** -130, 3.4e38);
  const id = identityCase(512, 1024);
  assert.ok(2 * values.length <= id.L);
  const data = new Float32Array(id.L);
  values.forEach((v, i) => { data[2 * i] = v; data[2 * i + 1] = -v; });
  const args = id.args({ data, shape: [1, id.L, 1, 1] });
  const want = await gpu.forward(args);
  assert.ok(want.data.every((x, i) => x === data[i] || (data[i] !== 0 && Math.abs(data[i]) < 2 ** -126)), 'the output is the value (subnormals flushed aside)');
  for (const dtype of ['float16', 'bfloat16']) {
    const wantHalf = narrowToHalf(want.data, dtype);
    assertSameBits((await gpu.forward(args, { dtype })).data, wantHalf, `${dtype}, CPU results`);
    const out = await gpu.forward(args, { outputs: 'gpu', dtype });
    assertSameBits(new Uint16Array((await download(gpu.device, out.buffer, out.buffer.size)).buffer, 0, id.L), wantHalf, `${dtype}, GPU results`);
    out.buffer.destroy();
  }
});

test('float16 and bfloat16 GPU tensors: bad input named, with the bytes needed', async () => {
  const d = gpu.device;
  const c = problem(630, { shapes: [[2, 2]], Q: 3, H: 1, C: 1, P: 1 });   // value 4 elements, weights 3
  const made = [];
  const buf = (size) => { const b = d.createBuffer({ size, usage: 0x80 | 0x4 | 0x8 }); made.push(b); return b; };
  const value = (buffer, extra) => ({ ...c.args, value: { buffer, shape: [1, 4, 1, 1], ...extra } });
  const weights = (buffer, extra) => ({ ...c.args, attentionWeights: { buffer, shape: [1, 3, 1, 1, 1], ...extra } });
  await assert.rejects(gpu.forward(value(buf(64), { dtype: 'float64' })),
    { name: 'TypeError', message: /^forward: value\.dtype is the string "float64", expected 'float32', 'float16' or 'bfloat16' \(or NumPy's '<f4', '<f2'\)$/ });
  await assert.rejects(gpu.forward(value(buf(4), { dtype: 'float16' })),
    { name: 'RangeError', message: /^forward: value needs 8 bytes \(4 float16\) from byteOffset 0, 8 bytes in all, but its GPUBuffer has 4 bytes$/ });
  await assert.rejects(gpu.forward(value(buf(16), { dtype: 'bfloat16', byteOffset: 10 })),
    { name: 'RangeError', message: /^forward: value needs 8 bytes \(4 bfloat16\) from byteOffset 10, 18 bytes in all \(20 read in 4-byte words, as WebGPU binds buffers\), but its GPUBuffer has 16 bytes$/ });
  await assert.rejects(gpu.forward(weights(buf(6), { dtype: 'float16' })),
    { name: 'RangeError', message: /^forward: attentionWeights needs 6 bytes \(3 float16\) from byteOffset 0, 6 bytes in all \(8 read in 4-byte words, as WebGPU binds buffers\), but its GPUBuffer has 6 bytes$/ });
  await assert.rejects(gpu.forward(value(buf(64), { dtype: 'float16', byteOffset: 3 })),
    { name: 'RangeError', message: /^forward: value\.byteOffset is number 3, expected a non-negative multiple of 2 \(the bytes of a float16\)$/ });
  await assert.rejects(gpu.forward(weights(buf(8))),
    { name: 'RangeError', message: /^forward: attentionWeights needs 12 bytes \(3 float32\) from byteOffset 0, 12 bytes in all, but its GPUBuffer has 8 bytes \(a float16 or bfloat16 tensor\? say so with attentionWeights\.dtype\)$/ });
  await assert.rejects(gpu.forward(value(buf(64), { dtype: 'float16', shape: [1, 5, 1, 1] })), { name: 'RangeError', message: /^forward: value\.shape is \[1, 5, 1, 1\]/ });
  await assert.rejects(gpu.forward(c.args, { dtype: 'float64' }),
    { name: 'RangeError', message: /^forward: dtype is the string "float64", expected 'float32', 'float16' or 'bfloat16' \(the results' precision\)$/ });
  assert.throws(() => gpu.dispatchForward(c.args, { outputs: 'cpu' }),
    { name: 'RangeError', message: /^dispatchForward: outputs is the string "cpu", expected 'gpu' \(its results are on the GPU at once\)$/ });
  assert.throws(() => gpu.dispatchBackward({ ...c.args, gradOutput: c.gradOutput }, { dtype: 'float16', copy: 1 }),
    { name: 'TypeError', message: /^dispatchBackward: unknown option 'copy', expected \{ outputs\?: 'gpu', dtype\?: 'float32' \| 'float16' \| 'bfloat16' \}$/ });
  await assert.rejects(gpu.backward({ ...c.args, gradOutput: c.gradOutput }, { dtype: 'half' }), { name: 'RangeError', message: /^backward: dtype is the string "half"/ });
  // a tight buffer of an even count, and a float32 call's own form, still work
  const ok = await gpu.forward(value(uploadHalf(d, narrowToHalf(c.args.value.data, 'float16')), { dtype: 'float16' }), { dtype: 'float32' });
  assertSameBits(ok.data, (await gpu.forward({ ...c.args, value: { data: widenHalf(narrowToHalf(c.args.value.data, 'float16'), 'float16'), shape: [1, 4, 1, 1] } })).data, 'float16 value');
  for (const b of made) b.destroy();
});
