// The WebGPU backend's pipelines: compiled when a call first needs them, once per variant;
// calls at once sharing a compile; the half passes; a kernel the device cannot compile, awaited
// and in a synchronous call.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertSameBits, backends, compare, download, firstDiff, ownDevice, problem, sameBits } from './helpers.js';
import { init } from '../../bindings/node.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

test('pipelines are compiled when a call first needs them, once per variant: init compiles the probe, a forward none of the backward\'s', async () => {
  const device = await ownDevice();
  const asked = [];
  const compile = device.createComputePipelineAsync;
  device.createComputePipelineAsync = function (desc) { asked.push(desc.label); return compile.call(this, desc); };
  const msda = await init({ backend: 'webgpu', device });
  try {
    assert.deepEqual(msda.compiled, ['probe']);
    const narrow = problem(880, { shapes: [[5, 4], [2, 3]], Q: 12, C: 5, P: 3 });
    const wide = problem(881, { shapes: [[2, 1500], [3, 3]], Q: 12, C: 2, P: 2, H: 1 });
    const vec4 = problem(883, { shapes: [[5, 4], [2, 3]], Q: 12, C: 8, P: 3 });
    // two calls at once share each compile; the first one's inputs are read when it is made
    // (changed while it waits for the compile, they do not change its result)
    const want = wasm.forward(narrow.args);
    const changing = { ...narrow.args, value: { data: narrow.args.value.data.slice(), shape: narrow.args.value.shape } };
    const first = msda.forward(changing);
    changing.value.data.fill(7);
    for (const got of await Promise.all([first, msda.forward(narrow.args)])) {
      assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
    }
    assert.deepEqual(msda.compiled, ['probe', 'forward narrow']);
    // channels a multiple of 4: vector loads
    const wantVec = wasm.forward(vec4.args), gotVec = await msda.forward(vec4.args);
    assert.equal(sameBits(gotVec.data, wantVec.data), wantVec.data.length, firstDiff(gotVec.data, wantVec.data));
    assert.deepEqual(msda.compiled, ['probe', 'forward narrow', 'forward narrow vec4']);
    assert.deepEqual(asked, msda.compiled.map((k) => `msda ${k}`));
    // a level wider than 1024: the pipelines with the wide levels' code, made at once by the
    // synchronous call (createComputePipeline)
    const out = msda.dispatchForward(wide.args);
    const wantWide = wasm.forward(wide.args);
    assert.equal(sameBits(await download(device, out.buffer, 4 * wantWide.data.length), wantWide.data), wantWide.data.length);
    out.buffer.destroy();
    assert.deepEqual(msda.compiled.slice(3), ['forward']);
    assert.equal(asked.length, 3);
    // the backward's, narrow: none of the wide ones; its walk placed by walkCount (one part, the
    // order's histogram summed), so neither orderWalk nor sortCount
    const grads = await msda.backward({ ...narrow.args, gradOutput: narrow.gradOutput });
    compare('narrow backward', grads, wasm.backward({ ...narrow.args, gradOutput: narrow.gradOutput }), msda.numerics.productsRounded);
    assert.deepEqual(msda.compiled.slice(4).sort(), ['gather', 'orderCount', 'samples narrow', 'scan', 'scanReduce', 'scanTwo', 'sortScatter', 'sortTerms', 'walkCount']);
    assert.deepEqual(asked.slice(3), msda.compiled.slice(4).map((k) => `msda ${k}`));
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('calls at once on a fresh instance: each pipeline compiled once, and problems that differ only in vec4 each run their own', async () => {
  const device = await ownDevice();
  const asked = [];
  const compile = device.createComputePipelineAsync;
  device.createComputePipelineAsync = function (desc) { asked.push(desc.label); return compile.call(this, desc); };
  const msda = await init({ backend: 'webgpu', device });
  try {
    // the same problem but for its channels: 'narrow', then 'narrow vec4', two forwards and two backwards each
    const cases = [5, 8].map((C) => problem(885, { shapes: [[5, 4], [2, 3]], Q: 9, C, P: 3 }));
    const calls = cases.flatMap((c) => [0, 1].flatMap(() => {
      const b = { ...c.args, gradOutput: c.gradOutput };
      return [['forward', c.args, msda.forward(c.args)], ['backward', b, msda.backward(b)]];
    }));
    for (const [i, [fn, args, call]] of calls.entries()) {
      const got = await call;
      compare(`call ${i}`, fn === 'forward' ? { output: got } : got, fn === 'forward' ? { output: wasm.forward(args) } : wasm.backward(args), msda.numerics.productsRounded);
    }
    assert.deepEqual(asked, msda.compiled.map((k) => `msda ${k}`), 'each compiled once');
    assert.deepEqual(msda.compiled.filter((k) => /^(forward|samples)/.test(k)).sort(),
      ['forward narrow', 'forward narrow vec4', 'samples narrow', 'samples narrow vec4']);
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('the half passes are compiled by the first call with a half input or half results, which reads CPU halves as they were when it was made', async () => {
  const device = await ownDevice();
  const msda = await init({ backend: 'webgpu', device });
  try {
    const c = problem(883, { shapes: [[4, 3]], Q: 5, C: 3 });
    const want = await gpu.forward(c.args);
    assert.deepEqual(await msda.forward(c.args).then((o) => sameBits(o.data, want.data)), want.data.length);
    assert.ok(!msda.compiled.includes('widen') && !msda.compiled.includes('narrow'));
    const bits = narrowToHalf(c.args.value.data, 'float16');
    const exact = await gpu.forward({ ...c.args, value: { data: widenHalf(bits, 'float16'), shape: c.args.value.shape } });
    // an adapter that is a CPU is told from its info (SwiftShader here, unless VK_ICD_FILENAMES names a GPU's driver)
    assert.equal(msda._b.onCpu, /swiftshader|llvmpipe|lavapipe/i.test(JSON.stringify(msda.adapterInfo)), JSON.stringify(msda.adapterInfo));
    msda._b.onCpu = true;
    const pending = msda.forward({ ...c.args, value: { data: bits, shape: c.args.value.shape, dtype: 'float16' } }, { dtype: 'bfloat16' });
    bits.fill(0x7c00);   // changed while the call's pipelines compile: not seen
    const got = await pending;
    // on a CPU the float16 value is widened first by a pass, then the float32 forward
    assert.deepEqual(msda.compiled.slice(-3).sort(), ['forward narrow', 'narrow', 'widen']);
    assertSameBits(got.data, narrowToHalf(exact.data, 'bfloat16'), 'float16 in, bfloat16 out');
    // on a GPU it reads the value where it lies: a variant of its own, no widening pass
    msda._b.onCpu = false;
    const inPlace = await msda.forward({ ...c.args, value: { data: narrowToHalf(c.args.value.data, 'float16'), shape: c.args.value.shape, dtype: 'float16' } }, { dtype: 'bfloat16' });
    assert.equal(msda.compiled.at(-1), 'forward narrow valueF16');
    assertSameBits(inPlace.data, narrowToHalf(exact.data, 'bfloat16'), 'float16 read in place, bfloat16 out');
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('a kernel the device cannot compile: the first call that needs it rejects naming it, other calls still run, and a later call compiles it again', async () => {
  const device = await ownDevice();
  const create = device.createShaderModule;
  // WGSL that does not parse, then WGSL that does but whose pipeline the device refuses (32 KiB of workgroup memory), then the kernel
  let broken = (code) => `${code}\nfn broken( {`;
  device.createShaderModule = function (desc) {
    return create.call(this, broken && desc.label === 'msda forward narrow' ? { ...desc, code: broken(desc.code) } : desc);
  };
  const msda = await init({ backend: 'webgpu', device });
  try {
    const c = problem(882, { shapes: [[4, 4]], Q: 6 });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(msda.forward(c.args), { message: /^ms-deform-attn: the WebGPU kernel 'msda forward narrow' failed to compile here: \d+:\d+ / });
    }
    assert.deepEqual(msda.compiled, ['probe']);
    const b = { ...c.args, gradOutput: c.gradOutput };
    compare('backward beside a broken forward', await msda.backward(b), wasm.backward(b), msda.numerics.productsRounded);
    broken = (code) => code.replace(/array<Tap, \d+>/, 'array<Tap, 1024>');
    await assert.rejects(msda.forward(c.args), { message: /^ms-deform-attn: the WebGPU kernel 'msda forward narrow' failed to compile here: .*workgroup storage/ });
    assert.deepEqual(msda.compiled.filter((k) => k.startsWith('forward')), []);
    // the failure is not kept: once the driver compiles it, the next forward runs
    broken = null;
    compare('forward compiled again', { output: await msda.forward(c.args) }, { output: wasm.forward(c.args) }, msda.numerics.productsRounded);
    assert.equal(msda.compiled.at(-1), 'forward narrow');
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('a kernel that fails to compile in a synchronous call: the error names it, and the next call compiles it again', async () => {
  const device = await ownDevice();
  const create = device.createShaderModule;
  let breaks = 1;
  device.createShaderModule = function (desc) {
    const broken = desc.label === 'msda forward narrow' && breaks-- > 0;
    return create.call(this, broken ? { ...desc, code: `${desc.code}\nfn broken( {` } : desc);
  };
  const msda = await init({ backend: 'webgpu', device });
  const log = console.error;
  try {
    const c = problem(884, { shapes: [[4, 4]], Q: 6 });
    const logged = new Promise((resolve) => { console.error = resolve; });
    msda.dispatchForward(c.args).buffer.destroy();
    assert.match(await logged, /^ms-deform-attn: the WebGPU kernel 'msda forward narrow' failed to compile here: /);
    assert.deepEqual(msda.compiled, ['probe']);
    const want = wasm.forward(c.args), got = await msda.forward(c.args);
    assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
    assert.deepEqual(msda.compiled, ['probe', 'forward narrow']);
  } finally {
    console.error = log;
    msda.dispose();
    device.destroy();
  }
});

test('shader or pipeline creation that throws (a synchronous call, or a call that compiles first) leaves no error scope on a shared device', async () => {
  const device = await ownDevice();
  const msda = await init({ backend: 'webgpu', device });
  const made = { createShaderModule: device.createShaderModule, createComputePipeline: device.createComputePipeline };
  const scopeLeft = async () => {
    // the caller's own scope, pushed before: its pop must get the caller's own validation error
    device.pushErrorScope('validation');
    device.createBuffer({ size: 4, usage: 0 });   // usage 0: a validation error
    const err = await device.popErrorScope();
    // with nothing of ours left, the stack is empty again
    const extra = await device.popErrorScope().then(() => true, () => false);
    return { caught: err !== null, extra };
  };
  try {
    const c = problem(885, { shapes: [[4, 4]], Q: 6 });
    const b = { ...c.args, gradOutput: c.gradOutput };
    for (const method of ['createShaderModule', 'createComputePipeline']) {
      device[method] = () => { throw new TypeError(`${method} threw`); };
      assert.throws(() => msda.dispatchForward(c.args), { message: `${method} threw` });
      assert.deepEqual(await scopeLeft(), { caught: true, extra: false }, `dispatchForward, ${method}`);
      assert.throws(() => msda.dispatchBackward(b), { message: `${method} threw` });
      assert.deepEqual(await scopeLeft(), { caught: true, extra: false }, `dispatchBackward, ${method}`);
      // an awaited call compiles its modules in prepare() first (its pipelines asynchronously)
      if (method === 'createShaderModule') {
        await assert.rejects(msda.backward(b), { message: `${method} threw` });
        assert.deepEqual(await scopeLeft(), { caught: true, extra: false }, `backward (prepare), ${method}`);
      }
      device[method] = made[method];
    }
    // the instance still works
    const want = wasm.forward(c.args), got = await msda.forward(c.args);
    assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
  } finally {
    Object.assign(device, made);
    msda.dispose();
    device.destroy();
  }
});
