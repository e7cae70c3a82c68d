// ms-deform-attn/tfjs on tfjs-backend-webgpu (Node, Dawn on SwiftShader): the op and its
// gradients run our kernels on tfjs's GPUDevice with nothing read back to the CPU, on a value
// computed on the GPU (the case: a tf.mul of more than 1,024 elements, which read back
// synchronously gave zeros), with wasm SIMD's bits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { sameBits } from './helpers.js';
import { assertClose, rng } from '../js/helpers.js';

let tf, webgpu, wasm, msdaTfjs, device, instance, backend;

before(async () => {
  const dawn = await import('webgpu');
  // tfjs-backend-webgpu reads the WebGPU globals (GPUBufferUsage, ...) a browser has.
  Object.assign(globalThis, dawn.globals);
  instance = dawn.create([]);
  // ... and checks navigator.gpu (Node 20 has no navigator).
  if (globalThis.navigator === undefined) globalThis.navigator = {};
  Object.defineProperty(globalThis.navigator, 'gpu', { value: instance, configurable: true });
  const adapter = await instance.requestAdapter();
  device = await adapter.requestDevice();
  tf = await import('@tensorflow/tfjs-core');
  const { WebGPUBackend } = await import('@tensorflow/tfjs-backend-webgpu');
  backend = new WebGPUBackend(device, adapter.info);
  // under its own name, where its kernels are registered; on Dawn's device of this test
  tf.removeBackend('webgpu');
  tf.registerBackend('webgpu', () => backend);
  await tf.setBackend('webgpu');
  msdaTfjs = await import('../../bindings/tfjs.js');
  const { init } = await import('../../bindings/node.js');
  wasm = await init({ backend: 'wasm', simd: true });
  webgpu = await init({ backend: 'webgpu', device });
});

after(() => {
  wasm?.dispose();
  webgpu?.dispose();
  device?.destroy();
  assert.ok(instance);
});

function inputs(seed) {
  const r = rng(seed);
  const B = 1, Q = 24, H = 2, C = 8, P = 3, spatialShapes = [[8, 9], [4, 5]], NL = 2;
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    dims: { B, Q, H, C, P, NL, L }, spatialShapes,
    value: fill(B * L * H * C, () => r.uniform(-1, 1)),   // 1,472 elements
    locations: fill(B * Q * H * NL * P * 2, () => r.uniform(-0.1, 1.1)),
    weights: fill(B * Q * H * NL * P, () => r.uniform(0, 1)),
    dy: fill(B * Q * H * C, () => r.uniform(-1, 1)),
  };
}

// Counts the backend's reads to the CPU while fn runs (the op must make none).
function readsDuring(fn) {
  let reads = 0;
  const saved = { read: backend.read, readSync: backend.readSync };
  backend.read = function (...a) { reads++; return saved.read.apply(this, a); };
  backend.readSync = function (...a) { reads++; return saved.readSync.apply(this, a); };
  try {
    return { result: fn(), reads: () => reads };
  } finally {
    Object.assign(backend, saved);
  }
}

test('msDeformAttn and tf.grads on tfjs-backend-webgpu: no readback, the wasm bits, on a value made on the GPU', async () => {
  for (const instanceGiven of [false, true]) {
    if (instanceGiven) msdaTfjs.setMsda(webgpu);
    const c = inputs(instanceGiven ? 2 : 1);
    const { B, Q, H, C, P, NL, L } = c.dims;
    const half = tf.tensor(c.value.map((x) => x / 2), [B, L, H, C]);
    const two = tf.scalar(2);
    const opts = { spatialShapes: c.spatialShapes };
    const loc = tf.tensor(c.locations, [B, Q, H, NL, P, 2]);
    const w = tf.tensor(c.weights, [B, Q, H, NL, P]);
    const dy = tf.tensor(c.dy, [B, Q, H * C]);
    const { result, reads } = readsDuring(() => {
      const value = tf.mul(half, two);   // computed on the GPU
      const out = msdaTfjs.msDeformAttn(value, loc, w, opts);
      const grads = tf.grads((v, l, a) => msdaTfjs.msDeformAttn(v, l, a, opts))([value, loc, w], dy);
      value.dispose();
      return { out, grads };
    });
    assert.equal(reads(), 0, 'nothing read back to the CPU');
    const args = {
      value: { data: c.value, shape: [B, L, H, C] }, spatialShapes: c.spatialShapes,
      samplingLocations: { data: c.locations, shape: [B, Q, H, NL, P, 2] }, attentionWeights: { data: c.weights, shape: [B, Q, H, NL, P] },
    };
    const want = wasm.forward(args);
    const got = await result.out.data();
    assert.ok(got.some((x) => x !== 0), 'not zeros');
    assert.equal(sameBits(got, want.data), want.data.length, 'forward bits');
    const wb = wasm.backward({ ...args, gradOutput: { data: c.dy, shape: [B, Q, H * C] } });
    const [gv, gl, gw] = await Promise.all(result.grads.map((t) => t.data()));
    assertClose(gv, wb.gradValue.data, 'gradValue');
    // the instance made on tfjs's device compiles each pipeline at its first call (createComputePipeline): the same bits
    if (webgpu.numerics.productsRounded) assert.equal(sameBits(gv, wb.gradValue.data), gv.length, 'gradValue bits');
    assert.equal(sameBits(gl, wb.gradSamplingLocations.data), gl.length, 'gradSamplingLocations bits');
    assert.equal(sameBits(gw, wb.gradAttentionWeights.data), gw.length, 'gradAttentionWeights bits');
    console.log(`# instance ${instanceGiven ? 'given to setMsda' : 'made on tfjs\'s device'}: gradValue ${sameBits(gv, wb.gradValue.data)} of ${gv.length} with wasm's bits`);
    tf.dispose([half, two, loc, w, dy, result.out, ...result.grads]);
  }
});

test('a webgpu instance with tfjs on another backend: a clear error, not a Promise where a tensor belongs', async () => {
  msdaTfjs.setMsda(webgpu);
  await tf.setBackend('cpu').catch(() => null);
  if (tf.getBackend() !== 'cpu') {
    await import('@tensorflow/tfjs-backend-cpu');
    await tf.setBackend('cpu');
  }
  const c = inputs(3);
  const { B, Q, H, C, P, NL, L } = c.dims;
  assert.throws(() => msdaTfjs.msDeformAttn(tf.tensor(c.value, [B, L, H, C]), tf.tensor(c.locations, [B, Q, H, NL, P, 2]),
    tf.tensor(c.weights, [B, Q, H, NL, P]), { spatialShapes: c.spatialShapes }), { message: "msDeformAttn: the instance given to setMsda runs on WebGPU, for tfjs-backend-webgpu; tfjs runs on 'cpu' here: setMsda(await init()) for the CPU kernels" });
  msdaTfjs.setMsda(wasm);
  await tf.setBackend('webgpu');
});

test('on tfjs-backend-webgpu, getMsda() and ready() give the instance the op runs, and ready() loads no wasm', async () => {
  await tf.setBackend('webgpu');
  msdaTfjs.setMsda(wasm);
  const used = msdaTfjs.getMsda();
  assert.equal(used.backend, 'webgpu', 'not the wasm instance given to setMsda: the op does not use it here');
  assert.equal(used.device, tf.backend().device, "on tfjs's own device");
  assert.equal(await msdaTfjs.ready(), used);
  msdaTfjs.setMsda(webgpu);
  assert.equal(msdaTfjs.getMsda(), webgpu.device === tf.backend().device ? webgpu : used);
});

// As on tfjs-backend-cpu and -wasm (tests/js/tfjs-args.test.js), with their messages: the op reads
// tfjs's own record of each tensor, not its editable .dtype and .shape (an int32 tensor claiming
// float32 had its bits read as floats, silently; an edited shape named dispatchForward).
test('tfjs-backend-webgpu: a tensor whose .shape or .dtype was edited is refused with the cpu and wasm messages', async () => {
  await tf.setBackend('webgpu');
  msdaTfjs.setMsda(wasm);
  const v = tf.ones([1, 4, 1, 2]), l = tf.fill([1, 1, 1, 1, 1, 2], 0.5), w = tf.ones([1, 1, 1, 1, 1]);
  const lied = tf.ones([1, 4, 1, 2]);
  lied.shape[3] = 4;   // claims 16 floats, holds 8
  assert.throws(() => msdaTfjs.msDeformAttn(lied, l, w, { spatialShapes: [[2, 2]] }),
    /^RangeError: msDeformAttn: value has shape \[1, 4, 1, 4\] \(16 elements\) but holds 8 values \(was its shape edited\?\)/);
  for (const dtype of ['int32', 'bool']) {
    const edited = tf.ones([1, 4, 1, 2], dtype);
    edited.dtype = 'float32';
    assert.throws(() => msdaTfjs.msDeformAttn(edited, l, w, { spatialShapes: [[2, 2]] }),
      new RegExp(`^TypeError: msDeformAttn: value holds ${dtype} data, expected float32`));
    const dy = tf.ones([1, 1, 2], dtype);
    dy.dtype = 'float32';
    assert.throws(() => msdaTfjs.msDeformAttnBackward(dy, v, l, w, { spatialShapes: [[2, 2]] }),
      new RegExp(`^TypeError: msDeformAttnBackward: gradOutput holds ${dtype} data, expected float32`));
    tf.dispose([edited, dy]);
  }
  assert.deepEqual(Array.from(await msdaTfjs.msDeformAttn(v, l, w, { spatialShapes: [[2, 2]] }).data()), [1, 1]);
  tf.dispose([v, l, w, lied]);
});
