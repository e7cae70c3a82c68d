// The WebGPU device and init: a lost device, dispose() while calls wait, init's errors, and no
// adapter in Node (the message says why).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SWIFTSHADER_ICD, backends, ownDevice, problem, sameBits } from './helpers.js';
import { init } from '../../bindings/node.js';
import { MsdaWebGPU } from '../../bindings/webgpu/backend.js';
import { noAdapterHint } from '../../bindings/webgpu/node-gpu.js';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

test('a lost device: the pending call and later ones reject with MSDA_WEBGPU_DEVICE_LOST, nothing hangs', async () => {
  const device = await ownDevice();
  const msda = await init({ backend: 'webgpu', device });
  assert.equal(msda.device, device);
  const c = problem(800, { shapes: [[8, 8], [4, 4]], Q: 200, P: 4, H: 2, C: 8 });
  assert.equal(sameBits((await msda.forward(c.args)).data, wasm.forward(c.args).data), 200 * 16);
  const pending = msda.backward({ ...c.args, gradOutput: c.gradOutput });
  device.destroy();
  const lost = (e) => e.code === 'MSDA_WEBGPU_DEVICE_LOST' && /the WebGPU device was lost \(reason: destroyed/.test(e.message);
  await assert.rejects(pending, lost);
  await assert.rejects(msda.forward(c.args), lost);
  msda.dispose();   // the caller's device: not ours to destroy, and nothing left to free
  await assert.rejects(msda.forward(c.args), /forward on a disposed instance/);
});

test('dispose() while calls wait for a compile or for the GPU: they reject saying so, on a caller\'s device and on the instance\'s own, and leave no buffer (nor does a probe still waiting)', async () => {
  const pendingOnDisposed = /^ms-deform-attn: the call was pending on a disposed instance \(dispose\(\) was called\)$/;
  const c = problem(810, { shapes: [[4, 4], [2, 2]], Q: 10, C: 4, P: 2 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const device = await ownDevice();
  const live = new Set();
  device.createBuffer = function (desc) {
    const buf = Object.getPrototypeOf(device).createBuffer.call(this, desc);
    live.add(buf);
    buf.destroy = function () { live.delete(buf); return Object.getPrototypeOf(buf).destroy.call(this); };
    return buf;
  };
  try {
    const own = await init({ backend: 'webgpu', device });
    const waiting = [own.forward(c.args), own.backward(b)];   // both wait for their pipelines
    own.dispose();
    for (const call of waiting) await assert.rejects(call, { message: pendingOnDisposed });
    // compiled, so waiting for the GPU (inputs, outputs and staging made)
    const again = await init({ backend: 'webgpu', device });
    await again.forward(c.args);
    const onGpu = [again.forward(c.args), again.forward(c.args, { outputs: 'gpu' })];
    again.dispose();
    for (const call of onGpu) await assert.rejects(call, { message: pendingOnDisposed });
    // made without awaiting (as for the tfjs op), disposed before its probe answers
    const sync = MsdaWebGPU.onDeviceSync(device);
    sync.dispose();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(sync.numerics, null);
    assert.deepEqual([...live].map((buf) => buf.label), []);
  } finally {
    device.destroy();
  }
  // the instance's own device, destroyed by dispose(): the same error, not a lost device's
  const mine = await init({ backend: 'webgpu' });
  const call = mine.forward(c.args);
  mine.dispose();
  await assert.rejects(call, { message: pendingOnDisposed });
});

test('init: no adapter, bad gpu or device, and backend "auto" never picks the GPU', async () => {
  await assert.rejects(init({ backend: 'webgpu', gpu: { requestAdapter: async () => null } }), (e) => {
    assert.equal(e.code, 'MSDA_WEBGPU_UNAVAILABLE');
    assert.match(e.message, /WebGPU is not available: requestAdapter\(\) returned no adapter/);
    return true;
  });
  await assert.rejects(init({ backend: 'webgpu', gpu: { requestAdapter: async () => { throw new Error('blocked'); } } }),
    { code: 'MSDA_WEBGPU_UNAVAILABLE', message: /requestAdapter\(\) failed: blocked/ });
  await assert.rejects(init({ backend: 'webgpu', gpu: 7 }), { name: 'TypeError', message: /init: gpu is number 7, expected an object with requestAdapter/ });
  await assert.rejects(init({ backend: 'webgpu', device: {} }), { name: 'TypeError', message: /init: device is Object, expected a GPUDevice/ });
  await assert.rejects(init({ backend: 'wasm', device: gpu.device }), { name: 'TypeError', message: /device is an option of backend: 'webgpu', not 'wasm'/ });
  const auto = await init({ backend: 'auto' });
  assert.notEqual(auto.backend, 'webgpu');
  auto.dispose();
});

// Dawn without an adapter, in a child Node whose environment says why: the message names what
// failed (the Vulkan loader's own dlopen error; the driver file VK_ICD_FILENAMES names) and no
// advice that was already followed.
async function noAdapterMessage(env) {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', `
    const { init } = await import(${JSON.stringify(new URL('../../bindings/node.js', import.meta.url).href)});
    init({ backend: 'webgpu' }).then(() => console.log('an adapter'), (e) => console.log(e.code, e.message));
  `], { env: { ...process.env, ...env } });
  return stdout.trim();
}

test('no adapter in Node: the message says whether the Vulkan loader failed to load or found no driver', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'msda-vulkan-'));
  try {
    await writeFile(join(dir, 'libvulkan.so.1'), '');   // found first on LD_LIBRARY_PATH, and not a library
    const noLoader = await noAdapterMessage({ LD_LIBRARY_PATH: dir, VK_ICD_FILENAMES: SWIFTSHADER_ICD });
    assert.match(noLoader, /^MSDA_WEBGPU_UNAVAILABLE .*requestAdapter\(\) returned no adapter \(Dawn could not load the Vulkan loader: .*libvulkan\.so\.1: file too short; install it: libvulkan1/);
    assert.doesNotMatch(noLoader, /VK_ICD_FILENAMES/, 'no advice to set what was set');
    const noDriver = await noAdapterMessage({ VK_ICD_FILENAMES: join(dir, 'missing_icd.json') });
    assert.match(noDriver, /^MSDA_WEBGPU_UNAVAILABLE .*the Vulkan loader found no usable driver in VK_ICD_FILENAMES=.*missing_icd\.json/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  // Elsewhere than Linux Dawn runs on Metal or D3D12: nothing about Vulkan.
  assert.doesNotMatch(noAdapterHint({ platform: 'darwin' }), /Vulkan/);
  assert.match(noAdapterHint({ platform: 'linux', env: {}, dlopen: () => { throw new Error('Module did not self-register'); } }),
    /Dawn found no Vulkan driver: install your GPU's Vulkan driver, or point VK_ICD_FILENAMES at/);
});
