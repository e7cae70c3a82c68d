// The option objects of prepare() and of initWorker's calls, attacked as a user mistyping them
// would: a typo'd key, a bare string, null, and an object that only looks like an AbortSignal.
// Each is refused with a TypeError naming the option; before, prepare(problem, 'forward') and
// prepare(problem, { mdoe: 'forward' }) silently prepared 'both', prepare(problem, null) threw
// V8's "Cannot destructure", and a fake AbortSignal got Node's "Value of "this" must be of type
// AbortSignal" (the argument unnamed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { init, initWorker } from '../../bindings/node.js';
import { PATIENCE_MS } from '../patience.js';

const DIMS = { batch: 1, numQueries: 2, numHeads: 1, channels: 2, numPoints: 1, spatialShapes: [[2, 3]] };
const ARGS = () => ({
  value: { data: Float32Array.from({ length: 12 }, (_, i) => i / 7), shape: [1, 6, 1, 2] },
  spatialShapes: [[2, 3]],
  samplingLocations: { data: Float32Array.from([0.1, 0.2, 0.7, 0.9]), shape: [1, 2, 1, 1, 1, 2] },
  attentionWeights: { data: Float32Array.from([1, 0.5]), shape: [1, 2, 1, 1, 1] },
});

test('prepare() options: a typo, a bare string or null is a TypeError naming the option; mode is read once', async () => {
  for (const backend of ['wasm', 'native']) {
    const msda = await init({ backend });
    assert.throws(() => msda.prepare(DIMS, { mdoe: 'forward' }),
      { name: 'TypeError', message: "prepare: unknown option 'mdoe', expected mode" }, backend);
    assert.throws(() => msda.prepare(DIMS, 'forward'),
      { name: 'TypeError', message: 'prepare: options is the string "forward", expected { mode?: \'forward\' | \'backward\' | \'both\' }' }, backend);
    assert.throws(() => msda.prepare(DIMS, null),
      { name: 'TypeError', message: "prepare: options is null, expected { mode?: 'forward' | 'backward' | 'both' }" }, backend);
    let reads = 0;
    const p = msda.prepare(DIMS, { get mode() { reads++; return reads === 1 ? 'forward' : 'backward'; } });
    assert.equal(p.mode, 'forward');
    assert.equal(reads, 1);
    assert.equal(msda.prepare(DIMS).mode, 'both');
    assert.equal(msda.prepare(DIMS, {}).mode, 'both');
    assert.equal(msda.prepare(DIMS, { mode: undefined }).mode, 'both');
    msda.dispose();
  }
});

test('initWorker calls: an object that only inherits from AbortSignal is a TypeError naming signal', async () => {
  const w = await initWorker();
  try {
    await assert.rejects(w.forward(ARGS(), { signal: Object.create(AbortSignal.prototype) }),
      { name: 'TypeError', message: 'forward: signal is an object that is not an AbortSignal, expected an AbortSignal' });
    // A real one still works, and the worker is still usable.
    const out = await w.forward(ARGS(), { signal: new AbortController().signal });
    assert.equal(out.data.length, 4);
  } finally {
    await w.terminate();
  }
});

test('initWorker options: a Proxy works as in init(); a value no worker can receive is init()\'s error; errors keep their class', async () => {
  const w = await initWorker(new Proxy({ backend: 'wasm' }, {}));
  assert.equal(w.backend, 'wasm');
  await w.terminate();
  // Values no worker can receive: a TypeError naming the option (was a DataCloneError, "() => 1
  // could not be cloned"), and no worker left behind (the child below must exit by itself).
  await assert.rejects(initWorker({ simd: () => 1 }), { name: 'TypeError', message: /^initWorker: simd is .*, which cannot be sent to a worker$/ });
  await assert.rejects(initWorker({ backend: Symbol('native') }), { name: 'TypeError', message: /^initWorker: backend is .*, which cannot be sent to a worker$/ });
  await assert.rejects(initWorker({ wasmBinary: new Proxy(new Uint8Array(8), {}) }), { name: 'TypeError', message: /^initWorker: options cannot be sent to a worker: / });
  // WebGPU's options: the instance's calls already return Promises and it lives in no worker (a
  // worker posting its Promise back died with its GPU call in flight, and Dawn aborted Node).
  await assert.rejects(initWorker({ backend: 'webgpu' }), { name: 'TypeError', message: /^initWorker: backend is 'webgpu', which runs in no worker: .*use init\(\{ backend: 'webgpu' \}\)$/ });
  await assert.rejects(initWorker({ device: { queue: {} } }), { name: 'TypeError', message: /^initWorker: device is Object, a WebGPU option: .*use init\(\{ backend: 'webgpu', device \}\)$/ });
  await assert.rejects(initWorker({ backend: 'wasm', gpu: { requestAdapter: async () => null } }), { name: 'TypeError', message: /^initWorker: gpu is Object, a WebGPU option/ });
  // A module that does not compile: WebAssembly.CompileError, in the worker as here.
  const garbage = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1]);
  const here = await init({ wasmBinary: garbage }).catch((e) => e);
  assert.ok(here instanceof WebAssembly.CompileError, String(here));
  const there = await initWorker({ wasmBinary: garbage }).catch((e) => e);
  assert.ok(there instanceof WebAssembly.CompileError, `${there?.constructor?.name}: ${there?.message}`);
  assert.equal(there.message, here.message);
});

test('an initWorker that fails before its worker answers leaves no worker behind: Node exits by itself', () => {
  const entry = fileURLToPath(new URL('../../bindings/node.js', import.meta.url));
  const code = `import { initWorker } from ${JSON.stringify(entry)};
await initWorker({ wasmBinary: new Proxy(new Uint8Array(8), {}) }).catch((e) => console.log(e.name));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.error?.code, undefined, 'still running after 20 s: a worker kept Node alive');
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'TypeError');
});

test('a getter among the arguments that disposes the instance: the call throws the disposed-instance Error', async () => {
  for (const [backend, threads] of [['wasm', 1], ['wasm', 2], ['wasm-scalar', 1], ['native', 1]]) {
    const disposing = (msda, t) => ({ get data() { msda.dispose(); return t.data; }, shape: t.shape });
    let msda = await init({ backend, threads });
    const a = ARGS();
    a.attentionWeights = disposing(msda, a.attentionWeights);
    assert.throws(() => msda.forward(a), { name: 'Error', message: 'ms-deform-attn: forward on a disposed instance (dispose() was called)' }, `${backend} ${threads}`);
    msda = await init({ backend, threads });
    const b = { ...ARGS(), gradOutput: { data: new Float32Array(4).fill(1), shape: [1, 2, 2] } };
    b.gradOutput = disposing(msda, b.gradOutput);
    assert.throws(() => msda.backward(b), { name: 'Error', message: 'ms-deform-attn: backward on a disposed instance (dispose() was called)' }, `${backend} ${threads}`);
    msda = await init({ backend, threads });
    const m = msda;
    assert.throws(() => m.prepare({ ...DIMS, get spatialShapes() { m.dispose(); return [[2, 3]]; } }),
      { name: 'Error', message: 'ms-deform-attn: prepare on a disposed instance (dispose() was called)' }, `${backend} ${threads}`);
    // Another instance on the same backend still computes.
    const other = await init({ backend, threads });
    assert.equal(other.forward(ARGS()).data.length, 4);
    other.dispose();
  }
});

test('initWorker: a getter among the arguments that terminates the worker or aborts the signal settles the call', async () => {
  const w = await initWorker();
  const a = ARGS();
  const t = a.attentionWeights;
  a.attentionWeights = { get data() { w.terminate(); return t.data; }, shape: t.shape };
  // Before: queued on the stopped worker, the promise never settled.
  const settled = await Promise.race([
    w.forward(a).then(() => 'resolved', (e) => e),
    new Promise((resolve) => { setTimeout(resolve, PATIENCE_MS, 'still pending').unref(); }),
  ]);
  assert.ok(settled instanceof Error, String(settled));
  assert.equal(settled.message, 'ms-deform-attn: forward on a terminated worker (terminate() was called)');

  const w2 = await initWorker();
  try {
    const c = new AbortController();
    const b = ARGS();
    const v = b.value;
    b.value = { get data() { c.abort(); return v.data; }, shape: v.shape };
    await assert.rejects(w2.forward(b, { signal: c.signal }), { name: 'AbortError' });
    assert.equal((await w2.forward(ARGS())).data.length, 4);
  } finally {
    await w2.terminate();
  }
});
