// The backend contract (bindings/core/backend.js): every implementation (the wasm modules, the
// threads' instance, the Node addon) has each member the contract names, and its limits are what
// the API reports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { BACKEND_MEMBERS, HEAP_BACKEND_MEMBERS, HEAP_STORE_MEMBERS, STORE_MEMBERS } from '../../bindings/core/backend.js';

const METHODS = new Set(['allocate', 'fastDtype', 'heapInUse', 'resultArray', ...STORE_MEMBERS, ...HEAP_STORE_MEMBERS]);

function hasMembers(what, object, names) {
  for (const name of names) {
    assert.ok(name in object, `${what} has ${name}`);
    if (METHODS.has(name)) assert.equal(typeof object[name], 'function', `${what}.${name} is a function`);
  }
}

test('every backend and its store have the members the contract names', async () => {
  for (const options of [{ backend: 'wasm' }, { backend: 'wasm-scalar' }, { threads: 2 }, { backend: 'native' }]) {
    const msda = await init(options);
    const what = JSON.stringify(options);
    const b = msda._backend;
    hasMembers(what, b, BACKEND_MEMBERS);
    assert.equal(typeof b.name, 'string', `${what} name`);
    assert.equal(typeof b.simd, 'boolean', `${what} simd`);
    assert.deepEqual(Object.keys(b.limits).sort(), ['callBytes', 'tensorBytes'], `${what} limits`);
    assert.deepEqual(msda.limits, b.limits, `${what}: the API reports the backend's limits`);
    if (b.memory !== null) hasMembers(what, b, HEAP_BACKEND_MEMBERS);
    const store = b.allocate(new BigInt64Array(15), [{ name: 'value', elements: 4 }]);
    try {
      hasMembers(`${what} store`, store, STORE_MEMBERS);
      if (b.memory !== null) hasMembers(`${what} store`, store, HEAP_STORE_MEMBERS);
    } finally {
      store.free();
    }
    msda.dispose();
  }
});

// Which value dtypes each backend's kernels read as they are comes from C (msda_fast_dtype over
// kernel/kernels.h's MSDA_FAST_*), not from a rule of the bindings: float32 always, bfloat16 in
// wasm SIMD, both half dtypes on the addon's AVX2, nothing outside msda_dtype.
test('fastDtype: what the C library says each backend\'s kernels have fast code for', async () => {
  for (const options of [{ backend: 'wasm' }, { backend: 'wasm-scalar' }, { threads: 2 }, { backend: 'native' }]) {
    const msda = await init(options);
    const b = msda._backend;
    const isa = b.isa;
    const want = [true, isa === 'avx2', isa === 'avx2' || isa === 'wasm-simd128', false];
    assert.deepEqual([0, 1, 2, 3].map((d) => b.fastDtype(d)), want, `${JSON.stringify(options)} (${isa})`);
    msda.dispose();
  }
});
