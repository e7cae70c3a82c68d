// The wasm32 limits (docs/guarantees.md, "Limits of size"): one tensor spans at most PTRDIFF_MAX bytes, one
// call's heap block at most 4 GiB less the static data and C stack below the heap; past either
// the call is a RangeError naming the bytes before anything is allocated. Up to them calls
// compute (a 2 GiB tensor addressed to its last pixel, a backward needing 4 GiB less 5 MB);
// an allocation that does not fit is a RangeError, never a block the memory does not hold;
// a freed block's space serves a larger request; any number of trapping calls leave the C
// stack and the heap where they were. Fresh instances, so each test knows its heap; the
// memory they reserve is mostly never touched (a few GiB at most).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { init } from '../../bindings/index.js';
import { DESC } from '../../bindings/core/problem.js';

const wasmFile = (simd) => new URL(`../../dist/${simd ? 'msda-simd' : 'msda-scalar'}.wasm`, import.meta.url);
// A fresh instance whose allocator has made its first region (its in-use count then settles).
async function fresh(simd = true) {
  const m = await init({ wasmBinary: new Uint8Array(await readFile(wasmFile(simd))) });
  m.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[1, 1]] }).dispose();
  return m;
}

// Bytes a call's heap block takes (loader.js): 64 spare bytes, the description, each tensor
// on a 64-byte line. Computed here independently.
const align = (n) => Math.ceil(n / 64) * 64;
const TENSORS = {
  forward: ['value', 'samplingLocations', 'attentionWeights', 'output'],
  backward: ['gradOutput', 'value', 'samplingLocations', 'attentionWeights', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'],
  both: ['value', 'samplingLocations', 'attentionWeights', 'gradOutput', 'output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'],
};
function blockBytes(dims, mode) {
  const { batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, spatialShapes } = dims;
  const NL = spatialShapes.length, L = spatialShapes.reduce((s, [h, w]) => s + h * w, 0);
  const elements = { value: B * L * H * C, samplingLocations: B * Q * H * NL * P * 2, attentionWeights: B * Q * H * NL * P,
    output: B * Q * H * C };
  Object.assign(elements, { gradOutput: elements.output, gradValue: elements.value,
    gradSamplingLocations: elements.samplingLocations, gradAttentionWeights: elements.attentionWeights });
  return 64 + align(8 * (DESC.header + 3 * NL)) + TENSORS[mode].reduce((s, t) => s + align(4 * elements[t]), 0);
}

// The largest numQueries whose block is at most `bytes`.
function queriesFor(dims, mode, bytes) {
  let lo = 1, hi = 2 ** 31;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (blockBytes({ ...dims, numQueries: mid }, mode) <= bytes) lo = mid; else hi = mid;
  }
  return lo;
}

test('the limits are stated: one tensor 2147483644 bytes; one call 4 GiB less the static data and stack', async () => {
  for (const simd of [true, false]) {
    const m = await fresh(simd);
    const b = m._backend;
    assert.equal(b.maxTensorElements, 536870911, 'floor(PTRDIFF_MAX / 4)');
    const heapBase = b.exports.msda_wasm_heap_base();
    assert.equal(b.maxCallBytes, 2 ** 32 - heapBase - 4096);
    assert.ok(heapBase > 1 << 20 && heapBase < 16 << 20, `static data and stack: ${heapBase} bytes`);
    assert.deepEqual(m.limits, { tensorBytes: 2147483644, callBytes: b.maxCallBytes });
    m.dispose();
  }
});

test('one tensor past PTRDIFF_MAX bytes is a RangeError naming it, before allocating; the largest one computes to its last pixel', async () => {
  const m = await fresh();
  const heap = m.wasm.heapInUse(), memory = m.wasm.memory.buffer.byteLength;
  // 536870911 = 256999 x 2089 pixels, one head, one channel: value is 2147483644 bytes.
  const dims = { batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[256999, 2089]],
    alignCorners: true };
  const over = { ...dims, spatialShapes: [[256999, 2089], [1, 1]] };
  assert.throws(() => m.prepare(over, { mode: 'forward' }), {
    name: 'RangeError',
    message: 'prepare: value needs 2147483648 bytes (536870912 elements), more than the 2147483644 bytes (536870911 elements) one tensor can span in wasm32',
  });
  // With gradValue too, the call is past the whole heap first.
  for (const mode of ['backward', 'both']) {
    assert.throws(() => m.prepare(over, { mode }), { name: 'RangeError', message: /^prepare: this call needs \d+ bytes of WebAssembly memory/ }, mode);
  }
  assert.equal(m.wasm.heapInUse(), heap, 'nothing allocated');
  assert.equal(m.wasm.memory.buffer.byteLength, memory, 'the memory did not grow');

  const p = m.prepare(dims, { mode: 'forward' });
  try {
    const value = p.value;
    assert.equal(value.length, 536870911);
    value[value.length - 1] = 7;   // the last pixel: y = H - 1, x = W - 1
    p.samplingLocations.set([1, 1]);
    p.attentionWeights.set([0.5]);
    assert.equal(p.forward().data[0], 3.5);
  } finally {
    p.dispose();
  }
  assert.equal(m.wasm.heapInUse(), heap);
  m.dispose();
});

test('a problem needing 4 GiB less 5 MB computes; 64 bytes more is a RangeError before allocating', async () => {
  const m = await fresh();
  const max = m._backend.maxCallBytes;
  // Prepared for both passes: value and gradValue ~2 GiB each (130911 x 4096 pixels), then
  // queries up to the limit. A forward touches neither gradValue nor most of value.
  const base = { batch: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[130911, 4096]], alignCorners: true };
  const Q = queriesFor(base, 'both', max);
  const fits = { ...base, numQueries: Q };
  const past = { ...base, numQueries: queriesFor(base, 'both', max + 64) + 1 };
  assert.ok(blockBytes(fits, 'both') > max - 4096, 'within 4 KiB of the limit');
  assert.ok(blockBytes(past, 'both') > max && blockBytes(past, 'both') <= max + 4096);

  const heap = m.wasm.heapInUse(), memory = m.wasm.memory.buffer.byteLength;
  assert.throws(() => m.prepare(past), {
    name: 'RangeError',
    message: `prepare: this call needs ${blockBytes(past, 'both')} bytes of WebAssembly memory, more than the ${max} bytes a wasm32 heap can give one call (4 GiB less ${2 ** 32 - max} bytes of static data, C stack and allocator headers)`,
  });
  assert.equal(m.wasm.heapInUse(), heap, 'nothing allocated');
  assert.equal(m.wasm.memory.buffer.byteLength, memory, 'the memory did not grow');

  const p = m.prepare(fits);
  try {
    assert.ok(p._store.block + blockBytes(fits, 'both') <= m.wasm.memory.buffer.byteLength, 'the memory holds the block');
    const L = 130911 * 4096;
    p.value[L - 1] = 7;
    p.samplingLocations.set([1, 1]);   // query 0 samples the last pixel, the others the first
    p.attentionWeights.fill(0.5);
    const gradAttentionWeights = p.gradAttentionWeights;
    gradAttentionWeights[gradAttentionWeights.length - 1] = 9;   // the block's last tensor, untouched by forward
    const out = p.forward().data;
    assert.equal(out[0], 3.5);
    assert.equal(out[Q - 1], 0);
    assert.equal(p.gradAttentionWeights[Q - 1], 9);
  } finally {
    p.dispose();
  }
  m.dispose();
});

test('an allocation that does not fit is a RangeError, not a block past the memory; freed space serves a larger request', async () => {
  for (const simd of [true, false]) {
    const m = await fresh(simd);
    const GiB = 2 ** 30;
    const dims = (bytes) => {
      const base = { batch: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[1, 1]] };
      return { ...base, numQueries: queriesFor(base, 'forward', bytes) };
    };
    const a = m.prepare(dims(1 * GiB), { mode: 'forward' });
    // A small call allocates and frees above a: a small free block high in the heap, which
    // emmalloc's fit test (`start + size > end`, wrapping past 2^32) took for 3.2 GiB.
    m.forward({ value: { data: new Float32Array([1]), shape: [1, 1, 1, 1] }, spatialShapes: [[1, 1]],
      samplingLocations: { data: new Float32Array([0.5, 0.5]), shape: [1, 1, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array([1]), shape: [1, 1, 1, 1, 1] } });
    const heap = m.wasm.heapInUse();
    const big = dims(3.2 * GiB);
    assert.throws(() => m.prepare(big, { mode: 'forward' }), {
      name: 'RangeError',
      message: new RegExp(`^ms-deform-attn: could not allocate ${blockBytes(big, 'forward')} bytes of WebAssembly memory: ${heap} bytes are in use \\(prepared problems not yet disposed\\) and a wasm32 heap gives at most ${m._backend.maxCallBytes} bytes in all$`),
    }, `simd ${simd}`);
    assert.equal(m.wasm.heapInUse(), heap, `simd ${simd}: nothing allocated`);
    a.dispose();
    // The 1 GiB freed at the top of the heap joins the new space: 3.2 GiB fits now.
    const b = m.prepare(big, { mode: 'forward' });
    const view = b.output;
    view[view.length - 1] = 1;
    assert.ok(b._store.block + blockBytes(big, 'forward') <= m.wasm.memory.buffer.byteLength);
    b.dispose();
    // And after 3.2 GiB is freed, the largest call fits again.
    const c = m.prepare(dims(m._backend.maxCallBytes), { mode: 'forward' });
    c.dispose();
    m.dispose();
  }
});

test('4,000 trapping calls leave the C stack and the heap where they were; the module keeps working', async () => {
  for (const simd of [true, false]) {
    const m = await fresh(simd);
    const b = m._backend;
    const dims = { batch: 1, numQueries: 2, numHeads: 1, channels: 3, numPoints: 1, spatialShapes: [[2, 2]] };
    const args = {
      value: { data: Float32Array.from({ length: 12 }, (_, i) => i), shape: [1, 4, 1, 3] }, spatialShapes: [[2, 2]],
      samplingLocations: { data: new Float32Array([0.3, 0.6, 0.9, 0.1]), shape: [1, 2, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array([0.5, 2]), shape: [1, 2, 1, 1, 1] },
    };
    const want = m.forward(args).data;
    const stack = b.exports.stackSave(), heap = m.wasm.heapInUse();
    // value's pointer moved past the end of the memory: the kernel's first read traps.
    const allocate = b.allocate;
    b.allocate = function (desc, layout) {
      const store = allocate.call(this, desc, layout);
      const run = store.run;
      store.run = (op) => {
        store.ptr.set('value', 2 ** 31);
        return run.call(store, op);
      };
      return store;
    };
    try {
      for (let i = 0; i < 4000; i++) {
        assert.throws(() => (i % 2 ? m.forward(args) : m.backward({ ...args, gradOutput: { data: new Float32Array(6), shape: [1, 2, 3] } })),
          { name: 'RuntimeError', message: /memory access out of bounds/ });
        if (i % 500 === 0) assert.equal(b.exports.stackSave(), stack, `simd ${simd}: stack pointer after ${i + 1} traps`);
      }
      const p = m.prepare(dims);
      assert.throws(() => p.forward(), { name: 'RuntimeError' });
      p.dispose();
    } finally {
      b.allocate = allocate;
    }
    assert.equal(b.exports.stackSave(), stack, `simd ${simd}: stack pointer`);
    assert.equal(m.wasm.heapInUse(), heap, `simd ${simd}: heap`);
    assert.deepEqual(m.forward(args).data, want, `simd ${simd}: same result after the traps`);
    m.dispose();
  }
});

test('threads: 1,000 calls whose parts trap on this thread and in the workers fail cleanly; the pool keeps working', async () => {
  const one = await init({ simd: true });
  const m = await init({ threads: 2 });
  const b = m._backend;
  assert.equal(m.threads, 2);
  // Big enough for two parts: the worker runs one.
  const Q = 4000, H = 4, C = 8, shapes = [[32, 32]], L = 1024;
  const args = {
    value: { data: Float32Array.from({ length: L * H * C }, (_, i) => Math.sin(i)), shape: [1, L, H, C] }, spatialShapes: shapes,
    samplingLocations: { data: Float32Array.from({ length: Q * H * 4 * 2 }, (_, i) => (i * 0.37) % 1), shape: [1, Q, H, 1, 4, 2] },
    attentionWeights: { data: new Float32Array(Q * H * 4).fill(0.25), shape: [1, Q, H, 1, 4] },
  };
  const want = one.forward(args).data;
  const parts = b.pool.partsRun();
  assert.deepEqual(m.forward(args).data, want);
  assert.equal(b.pool.partsRun() - parts, 2, 'the call ran in two parts');
  const stack = b.exports.stackSave(), heap = m.wasm.heapInUse();
  const allocate = b.allocate;
  b.allocate = function (desc, layout) {
    const store = allocate.call(this, desc, layout);
    const run = store.run;
    store.run = (op) => {
      store.ptr.set('value', 2 ** 31 + 2 ** 30);
      return run.call(store, op);
    };
    return store;
  };
  try {
    for (let i = 0; i < 1000; i++) {
      assert.throws(() => m.forward(args), { code: 'MSDA_ERR_THREADS' });
    }
  } finally {
    b.allocate = allocate;
  }
  assert.equal(b.exports.stackSave(), stack, 'stack pointer');
  assert.equal(m.wasm.heapInUse(), heap, 'heap');
  assert.equal(b.pool.broken, null, 'no worker has gone');
  for (let i = 0; i < 20; i++) assert.deepEqual(m.forward(args).data, want, `call ${i} after the traps`);
});
