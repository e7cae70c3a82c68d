// Threads in Node: the wasm threads module (workers on a shared memory) and the native addon give
// the same bits for 1, 2, 3 and 8 threads on cases whose batch x heads does not divide by the
// thread count; the workers really run parts; memory growth during threaded calls; a process that
// used threads exits by itself; the threads option is checked; the fallback prints one notice;
// the worker protocol holds with delays injected at each of its steps.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { init, initNative } from '../../bindings/index.js';
import { resolveThreads } from '../../bindings/wasm/threads.js';
import { referenceForward } from '../../bindings/reference.js';
import { assertClose, rng, runDelayedChild } from './helpers.js';
import { PATIENCE_MS } from '../patience.js';

const GRADS = ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights'];

// Big enough that the library splits it into 8 parts (it keeps tiny work on one thread).
function makeCase(seed, { B, Q, H, C, P, spatialShapes, ...options }) {
  const r = rng(seed);
  const NL = spatialShapes.length;
  const L = spatialShapes.reduce((s, [h, w]) => s + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  const blnc = (options.valueLayout ?? 'BLNC') === 'BLNC';
  const bq = (options.samplingLocationsLayout ?? 'BQHLP2') === 'BQHLP2';
  const locShape = bq ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P];
  return {
    args: {
      value: { data: fill(B * L * H * C, () => r.uniform(-1, 1)), shape: blnc ? [B, L, H, C] : [B, H, L, C] },
      spatialShapes,
      samplingLocations: { data: fill(B * Q * H * NL * P * 2, () => r.uniform(-0.1, 1.1)), shape: locShape },
      attentionWeights: { data: fill(B * Q * H * NL * P, () => r.uniform(0, 1)), shape: [B, Q, H, NL, P] },
      ...options,
    },
    gradOutput: { data: fill(B * Q * H * C, () => r.uniform(-1, 1)), shape: [B, Q, H * C] },
  };
}

const CASES = [
  // batch x heads = 3, 10, 7; backward units (x levels) = 9, 20, 7
  { B: 1, Q: 2000, H: 3, C: 8, P: 4, spatialShapes: [[30, 40], [15, 20], [7, 9]] },
  { B: 2, Q: 300, H: 5, C: 33, P: 3, spatialShapes: [[17, 23], [5, 1]], valueLayout: 'BNLC',
    samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'border' },
  { B: 1, Q: 5000, H: 7, C: 4, P: 4, spatialShapes: [[64, 48]], samplingLocationsLayout: 'B2QHLP' },
];

function sameBits(got, want, context) {
  assert.equal(got.length, want.length, `${context}: length`);
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) assert.fail(`${context}: element ${i} is ${got[i]}, expected ${want[i]} (threads 1)`);
  }
}

function run(msda, c, threads) {
  const extra = threads === undefined ? {} : { threads };
  const output = msda.forward({ ...c.args, ...extra }).data;
  const grads = msda.backward({ ...c.args, ...extra, gradOutput: c.gradOutput });
  return { output, ...Object.fromEntries(GRADS.map((k) => [k, grads[k].data])) };
}

function assertSameResults(got, want, context) {
  for (const k of ['output', ...GRADS]) sameBits(got[k], want[k], `${context}: ${k}`);
}

test('wasm threads module: imports only the shared memory, the run hook and the growth hook', async () => {
  const module = new WebAssembly.Module(await readFile(new URL('../../dist/msda-simd-threads.wasm', import.meta.url)));
  const imports = WebAssembly.Module.imports(module).map((i) => `${i.module}.${i.name}:${i.kind}`).sort();
  assert.deepEqual(imports, ['env.emscripten_notify_memory_growth:function', 'env.memory:memory',
    'env.msda_wasm_run_parallel:function']);
  const exports = WebAssembly.Module.exports(module).map((e) => e.name);
  for (const name of ['msda_wasm_run_part', 'stackRestore', '_initialize', 'malloc', 'msda_wasm_forward']) {
    assert.ok(exports.includes(name), `exports ${name}`);
  }
  // A non-shared memory is refused: the module really declares a shared one.
  await assert.rejects(WebAssembly.instantiate(module, { env: {
    memory: new WebAssembly.Memory({ initial: 256, maximum: 65536 }),
    emscripten_notify_memory_growth() {}, msda_wasm_run_parallel() { return 1; } } }));
});

test('wasm: threads 1, 2, 3, 8 give the bits of one thread, and the workers run parts', async () => {
  const one = await init({ simd: true });
  const wasm8 = await init({ threads: 8 });
  assert.equal(one.threads, 1);
  assert.equal(wasm8.threads, 8);
  assert.equal(wasm8.backend, 'wasm');
  assert.equal(wasm8.simd, true);
  const pool = wasm8._backend.pool;
  for (const [i, spec] of CASES.entries()) {
    const c = makeCase(100 + i, spec);
    const base = run(one, c);
    // The single-thread answer is a real one.
    const ref = referenceForward(c.args);
    assertClose(base.output, ref.data ?? ref, `case ${i}: threads 1 against the float64 reference`);
    for (const threads of [1, 2, 3, 8]) {
      const before = pool.partsRun();
      const output = wasm8.forward({ ...c.args, threads }).data;
      // Forward has enough units and work for 8 parts here: `threads` parts, each run once (by
      // whichever thread claimed it); one part runs inside the call, not through the pool.
      const ran = pool.partsRun() - before;
      assert.equal(ran, threads > 1 ? threads : 0, `case ${i}, threads ${threads}: the pool ran ${ran} forward parts`);
      const grads = wasm8.backward({ ...c.args, threads, gradOutput: c.gradOutput });
      assertSameResults({ output, ...Object.fromEntries(GRADS.map((k) => [k, grads[k].data])) }, base,
        `case ${i}, wasm threads ${threads}`);
      if (threads > 1) assert.ok(pool.partsRun() - before > ran, `case ${i}: the pool ran backward parts`);
    }
    // init's count is the default for calls that do not pass one.
    const before = pool.partsRun();
    assertSameResults(run(wasm8, c), base, `case ${i}, wasm default threads`);
    assert.ok(pool.partsRun() - before >= 8, `case ${i}: default threads (8) split the call`);
  }
});

// Workers run parts: with the calling thread held after handing out each mailbox, they claim
// before it does (MSDA_TEST_THREAD_DELAYS is read when a pool starts).
async function withDelays(spec, fn) {
  const saved = process.env.MSDA_TEST_THREAD_DELAYS;
  process.env.MSDA_TEST_THREAD_DELAYS = spec;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.MSDA_TEST_THREAD_DELAYS;
    else process.env.MSDA_TEST_THREAD_DELAYS = saved;
  }
}

test('wasm: the workers run parts; each part runs once, the same bits', async () => {
  const one = await init({ simd: true });
  const wasm4 = await withDelays('publish=20', () => init({ threads: 4 }));
  const pool = wasm4._backend.pool;
  const c = makeCase(9, CASES[0]);
  const base = run(one, c);
  const before = { all: pool.partsRun(), workers: pool.workerParts() };
  const output = wasm4.forward(c.args).data;
  assert.equal(pool.partsRun() - before.all, 4, 'forward: 4 parts, each run once');
  assert.ok(pool.workerParts() - before.workers >= 3, `forward: the workers ran ${pool.workerParts() - before.workers} parts`);
  const grads = wasm4.backward({ ...c.args, gradOutput: c.gradOutput });
  assertSameResults({ output, ...Object.fromEntries(GRADS.map((k) => [k, grads[k].data])) }, base, 'pool of 4, workers first');
  wasm4.dispose?.();
});

test('wasm: a worker that wakes late leaves its share to the calling thread, which does not wait for it', async () => {
  // Worker 1 sleeps 400 ms each time it wakes, before it takes the call: the calling thread
  // claims both parts, takes the mailbox back and returns.
  const one = await init({ simd: true });
  const two = await withDelays('woke@1=400', () => init({ threads: 2 }));
  const pool = two._backend.pool;
  const c = makeCase(301, { B: 1, Q: 128, H: 8, C: 32, P: 4, spatialShapes: [[16, 16]] });   // 2 forward parts
  const base = run(one, c);
  const before = { all: pool.partsRun(), workers: pool.workerParts() };
  const t0 = performance.now();
  const output = two.forward(c.args).data;
  const ms = performance.now() - t0;
  assert.equal(pool.partsRun() - before.all, 2, '2 parts, each run once');
  assert.equal(pool.workerParts() - before.workers, 0, 'the sleeping worker ran none');
  assert.ok(ms < 300, `the call took ${ms.toFixed(0)} ms: it waited for the sleeping worker`);
  assert.deepEqual(output, base.output);
});

test('wasm: a pool smaller than the call\'s threads runs several parts per thread, same bits', async () => {
  const one = await init({ simd: true });
  const wasm3 = await init({ threads: 3 });
  assert.equal(wasm3.threads, 3);
  const c = makeCase(7, CASES[0]);
  assertSameResults(run(wasm3, c, 8), run(one, c), 'pool of 3, call with threads 8');
});

test('wasm: the number of parts follows the work: a tiny call stays on this thread, a big one uses the worker, same bits', async () => {
  // src/pool.c: a part has at least 2^16 units of work (a multiply-add; a quarter of a zeroed
  // grad_value element), the same rule as the native pool's (tests/c/test_threads.c).
  const one = await init({ simd: true });
  const two = await init({ threads: 2 });
  const pool = two._backend.pool;
  const sizes = [
    // forward 127 x 8 x 4 x 32 = 130,048 multiply-adds: 1 part; backward 2 x that + 65,536 / 4: 2 parts
    { Q: 127, H: 8, spatialShapes: [[16, 16]], fwd: 0, bwd: 1 },
    { Q: 128, H: 8, spatialShapes: [[16, 16]], fwd: 1, bwd: 1 },   // forward 131,072: 2 parts
    { Q: 4, H: 2, spatialShapes: [[8, 8]], fwd: 0, bwd: 0 },       // tiny
    { Q: 4, H: 2, spatialShapes: [[128, 64]], fwd: 0, bwd: 1 },    // backward: 2,048 + 524,288 / 4
  ];
  for (const [i, { fwd, bwd, ...spec }] of sizes.entries()) {
    const c = makeCase(300 + i, { B: 1, C: 32, P: 4, ...spec });
    const base = run(one, c);
    // 2 parts through the pool, or 1 run inside the call.
    const before = pool.partsRun();
    const output = two.forward(c.args).data;
    const afterForward = pool.partsRun();
    const grads = two.backward({ ...c.args, gradOutput: c.gradOutput });
    const afterBackward = pool.partsRun();
    assert.equal(afterForward - before, 2 * fwd, `${JSON.stringify(spec)}: parts the pool ran in the forward`);
    // The backward's two stages (zero, then walk) each run its 2 parts.
    assert.equal(afterBackward - afterForward, 4 * bwd, `${JSON.stringify(spec)}: parts the pool ran in the backward`);
    assertSameResults({ output, ...Object.fromEntries(GRADS.map((k) => [k, grads[k].data])) }, base,
      `${JSON.stringify(spec)}, 2 threads`);
  }
});

test('wasm: memory growth between and during threaded calls, prepared problems, errors', async () => {
  const one = await init({ simd: true });
  const wasm2 = await init({ threads: 2 });
  const before = wasm2.wasm.memory.buffer.byteLength;
  // value alone is ~24 MB: more than the 16 MB the module starts with.
  const c = makeCase(11, { B: 1, Q: 3000, H: 8, C: 32, P: 2, spatialShapes: [[100, 150], [50, 75]] });
  assertSameResults(run(wasm2, c), run(one, c), 'after growth');
  assert.ok(wasm2.wasm.memory.buffer.byteLength > before, 'the shared memory grew');
  assert.ok(wasm2.wasm.memory.buffer instanceof SharedArrayBuffer, 'the memory is shared');

  const spec = CASES[0];
  const p = wasm2.prepare({ batch: spec.B, numQueries: spec.Q, numHeads: spec.H, channels: spec.C, numPoints: spec.P,
    spatialShapes: spec.spatialShapes });
  try {
    assert.equal(p.problem.threads, 2);
    const small = makeCase(3, spec);
    p.value.set(small.args.value.data);
    p.samplingLocations.set(small.args.samplingLocations.data);
    p.attentionWeights.set(small.args.attentionWeights.data);
    p.gradOutput.set(small.gradOutput.data);
    const out = p.forward().data.slice();
    const grads = p.backward();
    const want = run(one, small);
    sameBits(out, want.output, 'prepared forward');
    for (const k of GRADS) sameBits(grads[k].data, want[k], `prepared ${k}`);
  } finally {
    p.dispose();
  }
  // Errors from C read through the shared memory.
  assert.throws(() => wasm2.forward({ ...makeCase(1, CASES[0]).args, threads: 2 ** 31 }), RangeError);
  const heap = wasm2.wasm.heapInUse();
  assert.throws(() => wasm2.forward({ ...c.args, spatialShapes: [[100, 150], [50, 74]] }), /value/);
  assert.equal(wasm2.wasm.heapInUse(), heap, 'a throwing call leaves the heap as it was');
});

test('wasm: after a worker has gone, calls run on the calling thread with the same bits', async () => {
  const one = await init({ simd: true });
  const wasm4 = await init({ threads: 4 });
  const pool = wasm4._backend.pool;
  const c = makeCase(5, CASES[0]);
  const want = run(one, c);
  assertSameResults(run(wasm4, c), want, 'pool of 4, all workers');
  const worker = pool.workers[1];
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  await worker.terminate();
  await exited;
  assert.match(String(pool.broken), /^worker \d+ stopped$/);
  const before = { all: pool.partsRun(), workers: pool.workerParts() };
  assertSameResults(run(wasm4, c), want, 'pool of 4 after a worker stopped');
  assert.equal(pool.workerParts(), before.workers, 'no worker is asked any more');
  assert.ok(pool.partsRun() > before.all, 'the calling thread ran the parts');
});

test('native addon: threads 1, 2, 3, 8 give the same bits', async () => {
  const native = await initNative();
  const native3 = await initNative({ threads: 3 });
  assert.equal(native.threads, 1);
  assert.equal(native3.threads, 3);
  for (const [i, spec] of CASES.entries()) {
    const c = makeCase(200 + i, spec);
    const base = run(native, c);
    for (const threads of [2, 3, 8]) assertSameResults(run(native, c, threads), base, `case ${i}, native threads ${threads}`);
    assertSameResults(run(native3, c), base, `case ${i}, native init threads 3`);
  }
});

test('init: threads option checked; auto is this machine\'s CPUs', async () => {
  await assert.rejects(init({ threads: 0 }), { name: 'RangeError', message: /init: threads is 0, expected an integer >= 1 or 'auto'/ });
  await assert.rejects(init({ threads: '2' }), { name: 'TypeError', message: /init: threads is the string "2", expected a positive integer or 'auto'/ });
  await assert.rejects(init({ threads: 2.5 }), { name: 'RangeError', message: /init: threads is 2\.5, expected an integer >= 1 or 'auto'/ });
  // Another backend's option is refused, not ignored.
  await assert.rejects(init({ backend: 'webgpu', threads: 4 }), { name: 'TypeError', message: /init: threads is an option of backend: 'wasm', 'wasm-scalar', 'native', 'auto', not 'webgpu'/ });
  for (const [key, v] of [['simd', true], ['wasmPaths', '/x/'], ['addonPath', 'a.node'], ['wasmBinary', new Uint8Array(8)]]) {
    await assert.rejects(init({ backend: 'webgpu', [key]: v }), { name: 'TypeError', message: new RegExp(`init: ${key} is an option of backend: .*, not 'webgpu'`) });
  }
  await assert.rejects(init({ backend: 'native', simd: false }), { name: 'TypeError', message: /init: simd is an option of backend: 'wasm', 'wasm-scalar', 'auto', not 'native'/ });
  await assert.rejects(initNative({ threads: -1 }), RangeError);
  assert.equal((await init({ threads: 'auto' })).threads, Math.min(availableParallelism(), 64));
  assert.equal(await resolveThreads(1000), 64, 'at most 64 threads');
  assert.equal((await init({ threads: 2 }))._backend, (await init({ threads: 2 }))._backend, 'one backend per thread count');
});

test('a module given to init runs on one thread, with one console notice', async () => {
  const bytes = await readFile(new URL('../../dist/msda-simd.wasm', import.meta.url));
  const notices = [];
  const info = console.info;
  console.info = (...a) => notices.push(a.join(' '));
  let msda;
  try {
    msda = await init({ wasmBinary: bytes, threads: 4 });
  } finally {
    console.info = info;
  }
  assert.equal(msda.threads, 1);
  assert.equal(notices.length, 1, notices.join('\n'));
  assert.match(notices[0], /^ms-deform-attn: using 1 thread instead of 4: /);
});

test('a Node process that used threads exits by itself', () => {
  const script = `
    import { init } from ${JSON.stringify(new URL('../../bindings/index.js', import.meta.url).href)};
    const msda = await init({ threads: 2 });
    const L = 64 * 64;
    const out = msda.forward({
      value: { data: new Float32Array(L * 8 * 32).fill(1), shape: [1, L, 8, 32] },
      spatialShapes: [[64, 64]],
      samplingLocations: { data: new Float32Array(4096 * 8 * 4 * 2).fill(0.5), shape: [1, 4096, 8, 1, 4, 2] },
      attentionWeights: { data: new Float32Array(4096 * 8 * 4).fill(0.25), shape: [1, 4096, 8, 1, 4] },
    });
    console.log(msda.threads, msda._backend.pool.workerParts(), out.data[0]);
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.error, undefined, `the child did not exit within 20 s: ${r.error}`);
  assert.equal(r.status, 0, r.stderr);
  const [threads, parts, first] = r.stdout.trim().split(' ').map(Number);
  assert.equal(threads, 2);
  assert.ok(parts >= 1, 'the worker ran a part');
  assert.equal(first, 1);
});

// tests/js/threads-protocol-child.js with MSDA_TEST_THREAD_DELAYS = spec.
const runDelayed = (spec, calls, timeoutMs) =>
  runDelayedChild(new URL('./threads-protocol-child.js', import.meta.url), spec, calls, timeoutMs);

test('wasm threads protocol: delays injected at every step, one worker or all, many calls: no hang, no part run twice, same bits', async () => {
  // "a/b" cycles: a worker sleeps a ms on one call and not on the next, so it can fall a call
  // behind and then catch up at once. wake@2=15/0 and wake@2=10/0/0 hang the protocol this one
  // replaced (a shared generation counter with the job read after it, without synchronisation).
  const specs = [
    '', 'wake@2=15/0', 'wake@2=10/0/0', 'wake=15/0', 'read@2=15/0', 'read=3/0', 'ran@1=10/0', 'ran=3/0',
    'idle@2=10/0', 'idle=3/0', 'publish=3/0', 'join=5/0', 'wake@1=4/0,read@2=3/0/0,ran@2=2/0,idle@1=0/3,publish=1/0/0',
    'woke@2=15/0', 'woke=3/0/0', 'claimed@1=5/0', 'claimed=2/0/0', 'publish=2/0,claimed@2=3/0',
  ];
  const calls = 40;
  const results = [];
  // Two at a time: each child's threads mostly sleep.
  for (let i = 0; i < specs.length; i += 2) {
    results.push(...await Promise.all(specs.slice(i, i + 2).map((spec) => runDelayed(spec, calls, PATIENCE_MS))));
  }
  specs.forEach((spec, i) => {
    const r = results[i];
    const what = `MSDA_TEST_THREAD_DELAYS='${spec}'`;
    assert.ok(!r.hung, `${what}: the calls did not finish within 30 s (hung)`);
    assert.equal(r.crashed, undefined, `${what}: ${r.crashed}`);
    assert.deepEqual(r.failures, [], `${what}: ${r.failures?.join('; ')}`);
    assert.equal(r.calls, calls, what);
    // The child's calls use 2, 3, 1, 3, 2, 2, 3, ... threads: that many parts each, forward and
    // both stages of the backward (zero, walk), each run once (a 1-thread call runs inside the
    // call, not through the pool).
    const pattern = [2, 3, 1, 3, 2, 2, 3];
    let expected = 0;
    for (let c = 0; c < calls; c++) expected += 3 * (pattern[c % pattern.length] > 1 ? pattern[c % pattern.length] : 0);
    assert.equal(r.partsRun, expected, `${what}: parts run`);
    // Held after each mailbox it hands out, the calling thread leaves parts to the workers.
    if (spec.startsWith('publish')) assert.ok(r.workerParts > 0, `${what}: the workers ran no part`);
  });
});

test('MSDA_TEST_THREAD_DELAYS is parsed strictly', async () => {
  const { testDelays } = await import('../../bindings/wasm/threads.js');
  const saved = process.env.MSDA_TEST_THREAD_DELAYS;
  try {
    process.env.MSDA_TEST_THREAD_DELAYS = 'wake@2=15/0,publish=1';
    assert.deepEqual(testDelays(), [{ point: 'wake', worker: 2, ms: [15, 0] }, { point: 'publish', worker: undefined, ms: [1] }]);
    process.env.MSDA_TEST_THREAD_DELAYS = 'sleep=1';
    assert.throws(() => testDelays(), /cannot parse 'sleep=1'/);
  } finally {
    if (saved === undefined) delete process.env.MSDA_TEST_THREAD_DELAYS;
    else process.env.MSDA_TEST_THREAD_DELAYS = saved;
  }
});
