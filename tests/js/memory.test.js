// No leaks: 10,000 forward+backward calls and 1,000 throwing calls leave the wasm memory and the
// allocator's in-use bytes where they started. Growth: a problem larger than the initial heap
// works, and views handed out before the growth are re-created.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init, initNative } from '../../bindings/index.js';
import { assertClose, randomCase } from './helpers.js';

test('10,000 forward+backward calls and 1,000 throwing calls leak nothing', async () => {
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    const { args, gradOutput } = randomCase(9, { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'zeros' });
    msda.backward({ ...args, gradOutput }); // emmalloc sets up its first region on the first allocation
    const memory = msda.wasm.memory.buffer.byteLength;
    const inUse = msda.wasm.heapInUse();
    const calls = 10000;
    for (let i = 0; i < calls; i++) {
      msda.forward(args);
      msda.backward({ ...args, gradOutput });
    }
    assert.equal(msda.wasm.memory.buffer.byteLength, memory, 'memory size unchanged');
    assert.equal(msda.wasm.heapInUse(), inUse, 'allocator in-use bytes unchanged');

    // Throwing calls: half fail validation (before allocating), half fail in C (after allocating).
    const backend = msda._backend;
    const allocate = backend.allocate;
    let failInC = false;
    backend.allocate = function (desc, layout) {
      const store = allocate.call(this, desc, layout);
      if (failInC) new BigInt64Array(backend.memory.buffer, store.base, 1)[0] = 0n;
      return store;
    };
    try {
      for (let i = 0; i < 1000; i++) {
        failInC = i % 2 === 1;
        const bad = failInC ? args : { ...args, paddingMode: 'reflect' };
        assert.throws(() => (i % 4 < 2 ? msda.forward(bad) : msda.backward({ ...bad, gradOutput })),
          failInC ? { code: 'MSDA_ERR_INVALID_SIZE' } : RangeError);
      }
      failInC = true;
      for (let i = 0; i < 10; i++) {
        const p = msda.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[2, 2]] });
        try { assert.throws(() => p.forward(), { code: 'MSDA_ERR_INVALID_SIZE' }); } finally { p.dispose(); }
      }
    } finally {
      backend.allocate = allocate;
    }
    assert.equal(msda.wasm.memory.buffer.byteLength, memory, 'memory size unchanged after throws');
    assert.equal(msda.wasm.heapInUse(), inUse, 'allocator in-use bytes unchanged after throws');
  }
});

test('a problem larger than the initial heap grows the memory, and views are re-created', async () => {
  // A fresh instance so the memory starts at its initial size.
  const { readFile } = await import('node:fs/promises');
  const msda = await init({ wasmBinary: new Uint8Array(await readFile(new URL('../../dist/msda-simd.wasm', import.meta.url))) });
  const initial = msda.wasm.memory.buffer.byteLength;
  const small = msda.prepare({ batch: 1, numQueries: 2, numHeads: 1, channels: 2, numPoints: 1, spatialShapes: [[2, 2]] });
  small.value.set([1, 2, 3, 4, 5, 6, 7, 8]);
  const oldView = small.value;

  // value alone is 1 x 160 x 160 x 4 x 64 floats = 26 MB, more than the initial heap.
  const spatialShapes = [[160, 160], [3, 1]];
  const L = 160 * 160 + 3;
  const dims = { batch: 1, numQueries: 3, numHeads: 4, channels: 64, numPoints: 2, spatialShapes };
  assert.ok(L * 4 * 64 * 4 > initial, 'the problem is larger than the initial heap');
  const big = msda.prepare(dims);
  assert.ok(msda.wasm.memory.buffer.byteLength > initial, 'memory grew');
  assert.equal(oldView.byteLength, 0, 'the old view was detached by the growth');
  assert.equal(small.value.buffer, msda.wasm.memory.buffer, 'a fresh view over the grown memory');
  assert.deepEqual(Array.from(small.value), [1, 2, 3, 4, 5, 6, 7, 8], 'contents kept');

  // The big problem gives the native answer, through the views and through the copying API.
  let seed = 7;
  const rand = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
  for (const name of ['value', 'samplingLocations', 'attentionWeights', 'gradOutput']) {
    const view = big[name];
    for (let i = 0; i < view.length; i++) view[i] = rand();
  }
  const native = await initNative();
  const args = {
    value: big.tensor('value'), samplingLocations: big.tensor('samplingLocations'),
    attentionWeights: big.tensor('attentionWeights'), spatialShapes,
  };
  const copy = (t) => ({ data: t.data.slice(), shape: t.shape });
  const nativeArgs = { ...args, value: copy(args.value), samplingLocations: copy(args.samplingLocations), attentionWeights: copy(args.attentionWeights) };
  const want = native.forward(nativeArgs).data;
  assertClose(big.forward().data, want, 'prepared big forward vs native');
  const wantGrad = native.backward({ ...nativeArgs, gradOutput: copy(big.tensor('gradOutput')) });
  const got = big.backward();
  for (const k of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
    assertClose(got[k].data, wantGrad[k].data, `prepared big ${k} vs native`);
  }
  big.dispose();
  small.dispose();
  assertClose(msda.forward(nativeArgs).data, want, 'copying big forward vs native');
});

test('copying results are arrays of their own: an exact ArrayBuffer each (not the heap, not a pool), every element written', async () => {
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    const { args, gradOutput } = randomCase(31, { valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'border' });
    const results = [msda.forward(args), ...Object.values(msda.backward({ ...args, gradOutput }))];
    for (let round = 0; round < 3; round++) {
      // Results of earlier calls stay as they were while later ones are made.
      const again = [msda.forward(args), ...Object.values(msda.backward({ ...args, gradOutput }))];
      results.forEach((r, i) => {
        const { data } = again[i];
        assert.ok(data instanceof Float32Array && data.buffer instanceof ArrayBuffer, `simd ${simd}: result ${i} owns an ArrayBuffer`);
        assert.equal(data.byteOffset, 0);
        assert.equal(data.buffer.byteLength, data.byteLength, `simd ${simd}: result ${i}: its buffer holds it alone`);
        assert.notEqual(data.buffer, msda.wasm.memory.buffer);
        assert.notEqual(data.buffer, r.data.buffer, 'a new array per call');
        assert.deepEqual(new Uint32Array(data.buffer), new Uint32Array(r.data.buffer), `simd ${simd}: result ${i}, round ${round}`);
      });
    }
  }
});
