// initWorker: the same calls, asynchronous, in a worker_threads Worker: the bits of the
// synchronous API on every backend, its errors (class, message, code), AbortSignal per call
// (queued calls dropped, a running one discarded), inputs taken when the call is made (copied, or
// moved with { transfer: true }), terminate(), and a Node process that exits by itself.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { init, initNative, initWorker } from '../../bindings/index.js';
import { OPTION_COMBOS, randomCase } from './helpers.js';
import { PATIENCE_MS } from '../patience.js';

const run = promisify(execFile);
const ASYNC_DISPOSE = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose');
const INDEX = new URL('../../bindings/index.js', import.meta.url).href;

// A problem whose backward takes a while (tens of ms), seeded.
function bigCase() {
  let s = 7;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const spatialShapes = [[64, 64], [32, 32]], L = 5120, Q = 5120, H = 8, C = 32, NL = 2, P = 4;
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  const args = {
    value: { data: fill(L * H * C, () => r() * 2 - 1), shape: [1, L, H, C] },
    spatialShapes,
    samplingLocations: { data: fill(Q * H * NL * P * 2, () => r()), shape: [1, Q, H, NL, P, 2] },
    attentionWeights: { data: fill(Q * H * NL * P, () => r()), shape: [1, Q, H, NL, P] },
  };
  return { ...args, gradOutput: { data: fill(Q * H * C, () => r() * 2 - 1), shape: [1, Q, H * C] } };
}

test('initWorker: the bits of the synchronous API on wasm, wasm-scalar, 2 threads and native', async () => {
  for (const options of [{}, { simd: false }, { threads: 2 }, { backend: 'native' }]) {
    const sync = await init(options);
    const w = await initWorker(options);
    try {
      assert.equal(w.backend, sync.backend);
      assert.equal(w.simd, sync.simd);
      assert.equal(w.threads, sync.threads);
      for (const [i, combo] of OPTION_COMBOS.entries()) {
        const { args, gradOutput } = randomCase(100 + i, combo);
        assert.deepEqual(await w.forward(args), sync.forward(args), `${w.backend} forward, seed ${100 + i}`);
        assert.deepEqual(await w.backward({ ...args, gradOutput }), sync.backward({ ...args, gradOutput }),
          `${w.backend} backward, seed ${100 + i}`);
      }
    } finally {
      await w.terminate();
      sync.dispose();
    }
  }
});

test('initWorker: the errors of the synchronous API, rejected, with their class, message and code', async () => {
  const sync = await init();
  const w = await initWorker();
  const { args, gradOutput } = randomCase(3, OPTION_COMBOS[0]);
  const bad = [
    {},
    { ...args, valueLayout: 'NCHW' },
    { ...args, value: { data: new Float64Array(3), shape: [1, 3, 1, 1] } },
    { ...args, samplingLocations: { data: args.samplingLocations.data, shape: [1, 1, 1, 1, 1, 3] } },
    { ...args, threads: 0 },
  ];
  for (const a of bad) {
    let want;
    try { sync.forward(a); } catch (e) { want = e; }
    await assert.rejects(w.forward(a), (e) => e.constructor === want.constructor && e.message === want.message);
  }
  await assert.rejects(w.backward(args), { name: 'TypeError', message: /backward: gradOutput is missing/ });
  await assert.rejects(initWorker({ threadz: 2 }), { name: 'TypeError', message: /unknown option 'threadz'/ });
  await assert.rejects(initWorker({ wasmPaths: 5 }), { name: 'TypeError', message: /initWorker: wasmPaths is number 5/ });
  await assert.rejects(initWorker({ backend: 'native', addonPath: '/nonexistent/msda.node' }), { code: 'MSDA_NATIVE_UNAVAILABLE' });
  for (const [o, message] of [[5, /options is number 5/], [{ signal: {} }, /signal is Object, expected an AbortSignal/],
    [{ transfer: 'yes' }, /transfer is the string "yes", expected true or false/], [{ sigal: 1 }, /unknown option 'sigal'/]]) {
    await assert.rejects(w.forward(args, o), { name: 'TypeError', message });
  }
  assert.deepEqual(await w.backward({ ...args, gradOutput }), sync.backward({ ...args, gradOutput }), 'still serving after errors');
  await w.terminate();
  sync.dispose();
});

test('AbortSignal: rejects with an AbortError at once; a queued call never runs, a running one is discarded', async () => {
  const big = bigCase();
  const sync = await init();
  const want = sync.backward(big);
  const w = await initWorker();
  try {
    // Aborted before the call: nothing is sent.
    const gone = new AbortController();
    gone.abort();
    await assert.rejects(w.forward(big, { signal: gone.signal }), (e) => e instanceof DOMException && e.name === 'AbortError');
    assert.equal(w._ran, 0);

    // Aborted while running: rejects before the worker is done; the next call is served.
    const order = [];
    const running = new AbortController();
    const a = w.backward(big, { signal: running.signal }).catch((e) => { order.push(`a:${e.name}`); });
    running.abort();
    const c = w.backward(big).then((g) => { order.push('c'); return g; });
    await a;
    assert.deepEqual(order, ['a:AbortError'], 'the abort is not held up by the computation');
    assert.deepEqual(await c, want, 'the next call gets its own result, not the discarded one');
    assert.equal(w._ran, 2, 'the aborted call had started and ran to its end in the worker');

    // Aborted while queued behind another: dropped, the worker never runs it.
    const queued = new AbortController();
    const first = w.backward(big);
    const second = w.backward(big, { signal: queued.signal });
    queued.abort();
    await assert.rejects(second, { name: 'AbortError' });
    assert.deepEqual(await first, want);
    assert.deepEqual(await w.backward(big), want);
    assert.equal(w._ran, 4, 'the queued call was never run');
  } finally {
    await w.terminate();
    sync.dispose();
  }
});

test('inputs are taken when the call is made: copied, or moved with { transfer: true }', async () => {
  const sync = await init();
  const w = await initWorker();
  try {
    const { args, gradOutput } = randomCase(11, OPTION_COMBOS[5]);
    const want = sync.backward({ ...args, gradOutput });
    const copy = (t) => ({ data: t.data.slice(), shape: t.shape });
    const fresh = () => ({ ...args, value: copy(args.value), samplingLocations: copy(args.samplingLocations),
      attentionWeights: copy(args.attentionWeights), gradOutput: copy(gradOutput) });

    // Copied: changing the arrays right after the call does not reach it; they stay usable.
    const a = fresh();
    const pending = w.backward(a);
    a.value.data.fill(0);
    assert.deepEqual(await pending, want);
    assert.ok(a.value.data.length > 0, 'not detached');

    // Moved: detached at once, same result; inputs sharing one buffer move it once.
    const b = fresh();
    const moved = w.backward(b, { transfer: true });
    assert.equal(b.value.data.byteLength, 0, 'transferred');
    assert.equal(b.gradOutput.data.byteLength, 0);
    assert.deepEqual(await moved, want);
    const one = new ArrayBuffer((args.value.data.length + gradOutput.data.length) * 4);
    const value = new Float32Array(one, 0, args.value.data.length);
    value.set(args.value.data);
    const grad = new Float32Array(one, value.byteLength, gradOutput.data.length);
    grad.set(gradOutput.data);
    const shared = { ...fresh(), value: { data: value, shape: args.value.shape }, gradOutput: { data: grad, shape: gradOutput.shape } };
    assert.deepEqual(await w.backward(shared, { transfer: true }), want, 'two inputs on one buffer');
    assert.equal(one.byteLength, 0);

    // A prepared problem's view of the wasm heap cannot move: it is copied instead.
    const p = sync.prepare({ batch: args.value.shape[0], numQueries: args.attentionWeights.shape[1],
      numHeads: args.value.shape[2], channels: args.value.shape[3], numPoints: args.attentionWeights.shape[4],
      spatialShapes: args.spatialShapes, ...OPTION_COMBOS[5] });
    p.value.set(args.value.data);
    const heapView = { ...fresh(), value: p.tensor('value') };
    assert.deepEqual(await w.backward(heapView, { transfer: true }), want);
    assert.ok(p.value.length > 0, 'the heap is not detached');
    p.dispose();
  } finally {
    await w.terminate();
    sync.dispose();
  }
});

test('terminate(): pending calls reject, later calls reject with a clear Error; Symbol.asyncDispose terminates', async () => {
  const w = await initWorker();
  const big = bigCase();
  const pending = [w.backward(big), w.backward(big)]
    .map((p) => assert.rejects(p, { message: /pending on a terminated worker \(terminate\(\) was called\)/ }));
  await w.terminate();
  assert.equal(w.terminated, true);
  await Promise.all(pending);
  await assert.rejects(w.forward(big), { name: 'Error', message: 'ms-deform-attn: forward on a terminated worker (terminate() was called)' });
  const v = await initWorker();
  await v[ASYNC_DISPOSE]();
  assert.equal(v.terminated, true);
});

test('Node exits by itself: after terminate(), and with an idle worker left running; never before a pending call ends', async () => {
  const setup = `
    import { initWorker } from ${JSON.stringify(INDEX)};
    const args = {
      value: { data: new Float32Array([1, 2, 3, 4]), shape: [1, 4, 1, 1] },
      spatialShapes: [[2, 2]],
      samplingLocations: { data: new Float32Array([0.5, 0.5]), shape: [1, 1, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array([2]), shape: [1, 1, 1, 1, 1] },
    };
    const w = await initWorker({ threads: 2 });
  `;
  const scripts = {
    terminated: `${setup} console.log((await w.forward(args)).data[0]); await w.terminate();`,
    idle: `${setup} console.log((await w.forward(args)).data[0]);`,
    pending: `${setup} w.forward(args).then((o) => console.log(o.data[0]));`,
  };
  for (const [name, script] of Object.entries(scripts)) {
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: PATIENCE_MS });
    assert.equal(stdout.trim(), '5', `${name}: computed and exited by itself`);
  }
});

test('initNative and init share nothing with a worker: a worker instance does not touch this thread\'s backends', async () => {
  const here = await initNative();
  const w = await initWorker({ backend: 'native' });
  await w.terminate();
  const { args } = randomCase(2, OPTION_COMBOS[0]);
  assert.ok(here.forward(args).data.length > 0, 'this thread\'s native instance still works');
  here.dispose();
});

// A problem prepared in the worker: its tensors stay there, each call sends only the inputs that
// changed (the rest are what the worker's heap holds from the calls before) and gets its results
// transferred back as arrays of its own; the synchronous API's bits, on every option combination.
test('w.prepare(problem): calls send only what changed, results come back as arrays of their own, the bits of the synchronous API', async () => {
  for (const options of [{}, { threads: 2 }, { backend: 'native' }]) {
    const sync = await init(options);
    const w = await initWorker(options);
    try {
      for (const [i, combo] of OPTION_COMBOS.entries()) {
        const { args, gradOutput, dims } = randomCase(300 + i, combo);
        const next = randomCase(300 + i, combo);   // the same sizes
        const problem = { batch: dims.B, numQueries: dims.Q, numHeads: dims.H, channels: dims.C, numPoints: dims.P,
          spatialShapes: args.spatialShapes, ...combo };
        const p = await w.prepare(problem);
        assert.equal(p.mode, 'both');
        assert.deepEqual(p.shapes.value, args.value.shape);
        const first = await p.forward({ value: args.value, samplingLocations: args.samplingLocations.data, attentionWeights: args.attentionWeights });
        assert.deepEqual(first, sync.forward(args), `${w.backend} prepared forward, seed ${300 + i}`);
        assert.ok(first.data.buffer instanceof ArrayBuffer && first.data.byteOffset === 0 && first.data.buffer.byteLength === first.data.byteLength,
          'an array of its own');
        // Only the weights change: value and locations are the worker's from the call before.
        const weights = { data: new Float32Array(next.args.attentionWeights.data), shape: args.attentionWeights.shape };
        const changed = { ...args, attentionWeights: weights };
        assert.deepEqual(await p.forward({ attentionWeights: weights }), sync.forward(changed), `only attentionWeights sent, seed ${300 + i}`);
        assert.equal(weights.data.length, args.attentionWeights.data.length, 'copied by default: the caller keeps its array');
        assert.deepEqual(await p.backward({ gradOutput }), sync.backward({ ...changed, gradOutput }), `backward, gradOutput sent, seed ${300 + i}`);
        // Moved with { transfer: true }: detached here.
        const moved = new Float32Array(next.args.samplingLocations.data);
        const after = { ...changed, samplingLocations: { data: new Float32Array(moved), shape: args.samplingLocations.shape } };
        const grads = await p.backward({ samplingLocations: moved }, { transfer: true });
        assert.equal(moved.length, 0, 'transferred');
        assert.deepEqual(grads, sync.backward({ ...after, gradOutput }), `transferred locations, seed ${300 + i}`);
        await p.dispose();
        assert.equal(p.disposed, true);
        await assert.rejects(p.forward({}), { message: 'ms-deform-attn: forward on a disposed prepared problem' });
      }
    } finally {
      await w.terminate();
      sync.dispose();
    }
  }
});

test('w.prepare(problem): the synchronous prepare\'s errors, a wrong input named, a mode it was not prepared for, terminate()', async () => {
  const sync = await init();
  const w = await initWorker();
  const problem = { batch: 1, numQueries: 2, numHeads: 1, channels: 4, numPoints: 1, spatialShapes: [[2, 2]] };
  try {
    const messageOf = (f) => { try { f(); } catch (e) { return `${e.constructor.name}: ${e.message}`; } return 'no error'; };
    for (const [bad, options] of [[{ ...problem, batch: 0 }, undefined], [problem, { mode: 'sideways' }], [problem, { mod: 'forward' }], [problem, 'forward']]) {
      const here = messageOf(() => sync.prepare(bad, options));
      const there = await w.prepare(bad, options).then(() => 'no error', (e) => `${e.constructor.name}: ${e.message}`);
      assert.equal(there, here);
    }
    const p = await w.prepare(problem, { mode: 'forward' });
    await assert.rejects(p.backward({}), { message: "ms-deform-attn: backward on a problem prepared for 'forward'" });
    await assert.rejects(p.forward({ gradOutput: new Float32Array(8) }), { name: 'TypeError', message: "forward: unknown input 'gradOutput', expected value, samplingLocations, attentionWeights" });
    await assert.rejects(p.forward({ value: new Float32Array(3) }), { name: 'RangeError', message: "forward: value has 3 elements, expected 16 ([1, 4, 1, 4], the prepared problem's)" });
    await assert.rejects(p.forward({ value: { data: new Float32Array(16), shape: [1, 1, 4, 4] } }), { name: 'RangeError', message: "forward: value.shape is [1, 1, 4, 4], expected [1, 4, 1, 4] (the prepared problem's)" });
    await assert.rejects(p.forward({ value: new Float64Array(16) }), { name: 'TypeError', message: /^forward: value is Float64Array, expected a Float32Array of 16 elements/ });
    await assert.rejects(p.forward([]), { name: 'TypeError', message: /^forward: inputs is an Array, expected an object/ });
    const done = await p.forward({ value: new Float32Array(16).fill(1), samplingLocations: new Float32Array(4).fill(0.5), attentionWeights: new Float32Array(2).fill(1) });
    assert.deepEqual(Array.from(done.data), [1, 1, 1, 1, 1, 1, 1, 1]);
    const pending = assert.rejects(p.forward({}), /pending on a terminated worker/);
    await w.terminate();
    await pending;
    await assert.rejects(p.forward({}), /forward on a terminated worker/);
    await p.dispose();   // its memory went with the worker
  } finally {
    await w.terminate();
    sync.dispose();
  }
});
