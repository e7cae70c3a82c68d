// dispose(): an instance init() gave out frees what it holds (its prepared problems; the backend's
// heap and threads with the last instance on that backend) and refuses later calls with a clear
// Error; another caller's instance on the same options keeps working. Symbol.dispose does the same.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { init, initNative } from '../../bindings/index.js';
import { randomCase } from './helpers.js';

const DISPOSE = Symbol.dispose ?? Symbol.for('nodejs.dispose');
const OPTIONS = { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'zeros' };
const DIMS = { batch: 1, numQueries: 4, numHeads: 2, channels: 4, numPoints: 2, spatialShapes: [[4, 4], [2, 2]] };

test('dispose: later calls throw a clear Error; another instance on the same backend is untouched', async () => {
  for (const make of [() => init(), () => init({ simd: false }), () => initNative()]) {
    const a = await make();
    const b = await make();
    assert.equal(a._backend, b._backend, 'same options, one backend');
    const { args, gradOutput } = randomCase(3, OPTIONS);
    const want = b.forward(args).data;
    const p = a.prepare(DIMS);
    assert.equal(a.disposed, false);
    a.dispose();
    assert.equal(a.disposed, true);
    assert.equal(p.disposed, true, 'its prepared problems go with it');
    assert.throws(() => a.forward(args), { name: 'Error', message: 'ms-deform-attn: forward on a disposed instance (dispose() was called)' });
    assert.throws(() => a.backward({ ...args, gradOutput }), { message: /backward on a disposed instance/ });
    assert.throws(() => a.prepare(DIMS), { message: /prepare on a disposed instance/ });
    assert.throws(() => p.forward(), { message: /forward on a disposed prepared problem/ });
    a.dispose(); // idempotent
    assert.deepEqual(b.forward(args).data, want, `${b.backend}: the other instance still computes`);
    b[DISPOSE]();
    assert.equal(b.disposed, true, 'Symbol.dispose disposes');
  }
});

test('dispose frees the heap its prepared problems held; Symbol.dispose on Prepared', async () => {
  // Bytes of their own: a backend no other test shares.
  const bytes = new Uint8Array(await readFile(new URL('../../dist/msda-simd.wasm', import.meta.url)));
  const keep = await init({ wasmBinary: bytes });
  const msda = await init({ wasmBinary: bytes });
  keep.prepare(DIMS).dispose(); // emmalloc sets up its first region on the first allocation
  const before = keep.wasm.heapInUse();
  const p = msda.prepare(DIMS);
  msda.prepare(DIMS, { mode: 'forward' });
  assert.ok(keep.wasm.heapInUse() > before, 'prepared problems allocate');
  p[DISPOSE]();
  assert.equal(p.disposed, true);
  msda.dispose();
  assert.equal(keep.wasm.heapInUse(), before, 'nothing of the disposed instance is left allocated');
  keep.dispose();
});

test('threads: the workers stop with the last instance on the backend; a later init starts afresh', async () => {
  const { args, gradOutput } = randomCase(5, OPTIONS);
  const one = await init();
  const want = one.backward({ ...args, gradOutput });
  const a = await init({ threads: 2 });
  const b = await init({ threads: 2 });
  const pool = a._backend.pool;
  assert.ok(pool && pool.workers.length === 1, 'one worker beside this thread');
  a.dispose();
  assert.equal(pool.broken, null, 'still running for b');
  assert.deepEqual(b.backward({ ...args, gradOutput }), want, 'b computes, same bits as 1 thread');
  b.dispose();
  assert.equal(pool.broken, 'terminated', 'the last dispose stops the workers');
  assert.equal(pool.workers.length, 0);
  const c = await init({ threads: 2 });
  assert.notEqual(c._backend.pool, pool, 'a fresh pool');
  assert.deepEqual(c.backward({ ...args, gradOutput }), want);
  c.dispose();
  one.dispose();
});
