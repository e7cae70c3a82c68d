// The public API: module imports, init options and memoisation, the prepared (no-copy) path,
// every validation error (its type and the words of its message), and C statuses as Errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { init, initNative, simdSupported } from '../../bindings/index.js';
import { referenceForward } from '../../bindings/reference.js';
import { assertClose, randomCase } from './helpers.js';

const distFile = (name) => new URL(`../../dist/${name}`, import.meta.url);

// A small valid problem: two levels (3x4, 2x2) so L = 16, B = 2, N_h = 2, C_h = 3, N_q = 5, N_p = 2.
function validArgs() {
  const f = (n, k = 0.37) => Float32Array.from({ length: n }, (_, i) => ((i * k) % 1) - 0.25);
  return {
    value: { data: f(2 * 16 * 2 * 3), shape: [2, 16, 2, 3] },
    spatialShapes: [[3, 4], [2, 2]],
    samplingLocations: { data: f(2 * 5 * 2 * 2 * 2 * 2, 0.61).map((x) => x + 0.5), shape: [2, 5, 2, 2, 2, 2] },
    attentionWeights: { data: f(2 * 5 * 2 * 2 * 2, 0.13), shape: [2, 5, 2, 2, 2] },
  };
}
const gradOutput = () => ({ data: new Float32Array(2 * 5 * 6).fill(0.5), shape: [2, 5, 6] });

test('both modules import exactly env.emscripten_notify_memory_growth and export the entry points', async () => {
  for (const file of ['msda-simd.wasm', 'msda-scalar.wasm']) {
    const module = new WebAssembly.Module(await readFile(distFile(file)));
    assert.deepEqual(WebAssembly.Module.imports(module),
      [{ module: 'env', name: 'emscripten_notify_memory_growth', kind: 'function' }], file);
    const exports = WebAssembly.Module.exports(module).map((e) => e.name);
    for (const name of ['memory', '_initialize', 'malloc', 'free', 'msda_wasm_forward', 'msda_wasm_backward']) {
      assert.ok(exports.includes(name), `${file} exports ${name}`);
    }
  }
  // The scalar module really has no SIMD: it validates without the feature's opcodes... and
  // the SIMD one uses them (its bytes contain the 0xfd prefix in code), checked via the glue flag.
  assert.equal((await init({ simd: false })).simd, false);
  assert.equal((await init({ simd: true })).simd, true);
});

test('init: SIMD detection, forcing either module, memoisation, bytes or a compiled module', async () => {
  assert.equal(simdSupported(), true, 'Node 20 supports wasm SIMD');
  const auto = await init();
  assert.equal(auto.simd, true);
  assert.equal(auto.backend, 'wasm');
  // Each init() gives its own instance; the same options share one backend (one wasm heap).
  const again = await init({ simd: 'auto' });
  assert.notEqual(again, auto, 'an instance of its own, which its owner may dispose');
  assert.equal(again._backend, auto._backend, 'the backend is shared per option set');
  assert.equal((await init({ simd: true }))._backend, auto._backend);
  const scalar = await init({ simd: false });
  assert.notEqual(scalar._backend, auto._backend);
  assert.equal(scalar.backend, 'wasm-scalar');
  assert.equal((await init({ backend: 'wasm-scalar' }))._backend, scalar._backend);

  const bytes = await readFile(distFile('msda-scalar.wasm'));
  const fromBytes = await init({ wasmBinary: bytes });
  assert.equal(fromBytes.simd, false, 'reports the module it was given');
  assert.equal((await init({ wasmBinary: bytes }))._backend, fromBytes._backend);
  const compiled = await WebAssembly.compile(await readFile(distFile('msda-simd.wasm')));
  const fromModule = await init({ module: compiled });
  assert.equal(fromModule.simd, true);
  const args = validArgs();
  assertClose(fromBytes.forward(args).data, fromModule.forward(args).data, 'bytes vs module');

  await assert.rejects(init({ simd: 'yes' }), { name: 'TypeError', message: /simd is the string "yes", expected 'auto', true or false/ });
  await assert.rejects(init({ threadz: 2 }), { name: 'TypeError', message: /unknown option 'threadz'/ });
  await assert.rejects(init({ backend: 'gpu' }), { name: 'RangeError', message: /backend is .*gpu.*expected 'wasm', 'wasm-scalar', 'native', 'auto' or 'webgpu'/ });
  await assert.rejects(init({ module: 5 }), { name: 'TypeError', message: /module is number 5, expected a WebAssembly.Module/ });
  await assert.rejects(init({ wasmBinary: 'x.wasm' }), { name: 'TypeError', message: /wasmBinary is .*expected an ArrayBuffer or Uint8Array/ });
  await assert.rejects(init({ backend: 'native', addonPath: '/nonexistent/msda.node' }), { code: 'MSDA_NATIVE_UNAVAILABLE', message: /cannot load the native addon \/nonexistent\/msda.node/ });

  const native = await initNative();
  assert.equal(native.backend, 'native');
  assert.equal((await init({ backend: 'native' }))._backend, native._backend);
  assert.equal(native.wasm, null);
});

test('forward and backward return { data, shape } and accept dims, typed level starts and B2QHLP/BNLC', async () => {
  const msda = await init();
  const args = validArgs();
  const out = msda.forward(args);
  assert.ok(out.data instanceof Float32Array);
  assert.deepEqual(out.shape, [2, 5, 6]);
  assertClose(out.data, referenceForward(args).data, 'forward');
  const withDims = { ...args, value: { data: args.value.data, dims: args.value.shape } };
  assert.deepEqual(msda.forward(withDims).data, out.data);
  for (const levelStartIndex of [[0, 12], new Int32Array([0, 12]), new BigInt64Array([0n, 12n])]) {
    assert.deepEqual(msda.forward({ ...args, levelStartIndex }).data, out.data);
  }
  // spatialShapes as the (N_l, 2) int64 tensor a .npy reader gives.
  assert.deepEqual(msda.forward({ ...args, spatialShapes: { data: new BigInt64Array([3n, 4n, 2n, 2n]), shape: [2, 2] } }).data, out.data);
  const g = msda.backward({ ...args, gradOutput: gradOutput() });
  assert.deepEqual(g.gradValue.shape, [2, 16, 2, 3]);
  assert.deepEqual(g.gradSamplingLocations.shape, [2, 5, 2, 2, 2, 2]);
  assert.deepEqual(g.gradAttentionWeights.shape, [2, 5, 2, 2, 2]);
  // Any thread count gives the same bits (the wasm modules run on one thread, native splits).
  const native = await initNative();
  const nativeOut = native.forward(args).data;
  const nativeGrad = native.backward({ ...args, gradOutput: gradOutput() }).gradValue.data;
  for (const threads of [1, 2, 7]) {
    assert.deepEqual(msda.forward({ ...args, threads }).data, out.data);
    assert.deepEqual(native.forward({ ...args, threads }).data, nativeOut);
    assert.deepEqual(native.backward({ ...args, threads, gradOutput: gradOutput() }).gradValue.data, nativeGrad);
  }
  // Inputs are not modified.
  assert.deepEqual(args.value.data, validArgs().value.data);
});

test('prepare: heap-backed views, forward/backward without copies, same results, dispose', async () => {
  const msda = await init();
  const { args, gradOutput: go } = randomCase(4242, { valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'border' });
  const { B, Q, H, C, P, spatialShapes } = randomCase(4242, {}).dims;
  const before = msda.wasm.heapInUse();
  const p = msda.prepare({ batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, spatialShapes,
    valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'border' });
  assert.equal(p.value.buffer, msda.wasm.memory.buffer, 'views live in the wasm heap');
  assert.deepEqual(p.shapes.value, args.value.shape);
  assert.deepEqual(p.shapes.samplingLocations, args.samplingLocations.shape);
  p.value.set(args.value.data);
  p.samplingLocations.set(args.samplingLocations.data);
  p.attentionWeights.set(args.attentionWeights.data);
  p.gradOutput.set(go.data);
  const out = p.forward();
  assert.equal(out.data, p.output);
  assert.deepEqual(Array.from(out.data), Array.from(msda.forward(args).data));
  const g = p.backward();
  const copied = msda.backward({ ...args, gradOutput: go });
  for (const k of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
    assert.deepEqual(Array.from(g[k].data), Array.from(copied[k].data), k);
  }
  // A second round on changed inputs sees the change.
  p.attentionWeights.fill(0);
  assert.ok(p.forward().data.every((x) => x === 0));
  p.dispose();
  assert.equal(p.disposed, true);
  assert.equal(msda.wasm.heapInUse(), before, 'dispose frees the heap block');
  assert.throws(() => p.forward(), { message: /disposed/ });
  assert.throws(() => p.value, { message: /disposed/ });
  p.dispose(); // idempotent

  const fwdOnly = msda.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[1, 1]] }, { mode: 'forward' });
  assert.throws(() => fwdOnly.backward(), { message: /prepared for 'forward'/ });
  assert.throws(() => fwdOnly.gradValue, { message: /not allocated by a problem prepared for 'forward'/ });
  fwdOnly.dispose();

  const native = await initNative();
  const np = native.prepare({ batch: 1, numQueries: 2, numHeads: 1, channels: 2, numPoints: 1, spatialShapes: [[2, 2]] });
  np.value.set([1, 2, 3, 4, 5, 6, 7, 8]);
  np.samplingLocations.set([0.5, 0.5, 0.25, 0.75]);
  np.attentionWeights.set([1, 2]);
  assert.deepEqual(Array.from(np.forward().data), [4, 5, 2 * 5, 2 * 6]);
  np.dispose();
});

// Each entry: [what, change to the valid arguments, error class, words of the message].
const FORWARD_ERRORS = [
  ['not an object', () => null, TypeError, /forward: expected an object of named arguments, got null/],
  ['unknown argument', (a) => ({ ...a, padding: 'zeros' }), TypeError, /unknown argument 'padding', expected one of .*paddingMode/],
  ['value missing', (a) => ({ ...a, value: undefined }), TypeError, /value is missing, expected \{ data: Float32Array, shape: \[B, L, N_h, C_h\] \}/],
  ['value not a tensor', (a) => ({ ...a, value: new Float32Array(4) }), TypeError, /value is Float32Array, expected \{ data: Float32Array/],
  ['value.data Float64Array', (a) => ({ ...a, value: { data: new Float64Array(192), shape: [2, 16, 2, 3] } }), TypeError, /value.data is Float64Array, expected a Float32Array/],
  ['value.data plain Array', (a) => ({ ...a, value: { data: [1, 2], shape: [2, 16, 2, 3] } }), TypeError, /value.data is an Array, expected a Float32Array/],
  ['value.shape missing', (a) => ({ ...a, value: { data: a.value.data } }), TypeError, /value.shape is missing, expected an array of 4 integers \[B, L, N_h, C_h\]/],
  ['value.shape not integers', (a) => ({ ...a, value: { data: a.value.data, shape: [2, 16, 2, 1.5] } }), TypeError, /value.shape is \[2, 16, 2, 1.5\], expected an array of 4 integers \[B, L, N_h, C_h\]/],
  ['value rank', (a) => ({ ...a, value: { data: a.value.data, shape: [32, 2, 3] } }), RangeError, /value.shape is \[32, 2, 3\], expected \[B, 16, N_h, C_h\] \(4 dimensions/],
  ['value L', (a) => ({ ...a, value: { data: a.value.data, shape: [2, 8, 4, 3] } }), RangeError, /value.shape is \[2, 8, 4, 3\], expected \[B, 16, N_h, C_h\] \(L must be 16; L = 16 is the sum of H\*W over spatialShapes\)/],
  ['value BNLC L', (a) => ({ ...a, valueLayout: 'BNLC' }), RangeError, /value.shape is \[2, 16, 2, 3\], expected \[B, N_h, 16, C_h\]/],
  ['value zero dim', (a) => ({ ...a, value: { data: new Float32Array(0), shape: [0, 16, 2, 3] } }), RangeError, /B is 0, expected >= 1/],
  ['value count', (a) => ({ ...a, value: { data: new Float32Array(10), shape: [2, 16, 2, 3] } }), RangeError, /value.shape is \[2, 16, 2, 3\] \(192 elements\) but value.data has 10 elements/],
  ['spatialShapes type', (a) => ({ ...a, spatialShapes: 'big' }), TypeError, /spatialShapes is the string "big", expected an array of \[H, W\] pairs/],
  ['spatialShapes empty', (a) => ({ ...a, spatialShapes: [] }), RangeError, /spatialShapes is empty/],
  ['spatialShapes triple', (a) => ({ ...a, spatialShapes: [[3, 4, 1], [2, 2]] }), RangeError, /spatialShapes\[0\] has 3 entries, expected an \[H, W\] pair/],
  ['spatialShapes zero', (a) => ({ ...a, spatialShapes: [[3, 4], [0, 2]] }), RangeError, /spatialShapes\[1\] is \[0, 2\], expected H >= 1 and W >= 1/],
  ['spatialShapes fraction', (a) => ({ ...a, spatialShapes: [[3, 4], [2, 0.5]] }), TypeError, /spatialShapes\[1\]\[1\] is number 0.5, expected an integer/],
  ['levelStartIndex value', (a) => ({ ...a, levelStartIndex: [0, 5] }), RangeError, /levelStartIndex is \[0, 5\], expected \[0, 12\] \(prefix sums of H\*W\); entry 1 is 5, expected 12/],
  ['levelStartIndex length', (a) => ({ ...a, levelStartIndex: [0] }), RangeError, /levelStartIndex has 1 entries, expected 2/],
  ['levelStartIndex type', (a) => ({ ...a, levelStartIndex: 7 }), TypeError, /levelStartIndex is number 7, expected an array of integers/],
  ['samplingLocations B', (a) => ({ ...a, samplingLocations: { data: new Float32Array(80), shape: [1, 5, 2, 2, 2, 2] } }), RangeError, /samplingLocations.shape is \[1, 5, 2, 2, 2, 2\], expected \[2, N_q, 2, 2, N_p, 2\] \(B must be 2; B and N_h from value, N_l = 2 from spatialShapes\)/],
  ['samplingLocations N_l', (a) => ({ ...a, samplingLocations: { data: new Float32Array(80), shape: [2, 5, 2, 1, 2, 2] } }), RangeError, /samplingLocations.shape is \[2, 5, 2, 1, 2, 2\], expected \[2, N_q, 2, 2, N_p, 2\] \(N_l must be 2/],
  ['samplingLocations B2QHLP', (a) => ({ ...a, samplingLocationsLayout: 'B2QHLP' }), RangeError, /samplingLocations.shape is \[2, 5, 2, 2, 2, 2\], expected \[2, 2, N_q, 2, 2, N_p\]/],
  ['samplingLocations missing', (a) => ({ ...a, samplingLocations: undefined }), TypeError, /samplingLocations is missing/],
  ['attentionWeights N_p', (a) => ({ ...a, attentionWeights: { data: new Float32Array(120), shape: [2, 5, 2, 2, 3] } }), RangeError, /attentionWeights.shape is \[2, 5, 2, 2, 3\], expected \[2, 5, 2, 2, 2\] \(N_p must be 2/],
  ['attentionWeights data', (a) => ({ ...a, attentionWeights: { data: new Int32Array(80), shape: [2, 5, 2, 2, 2] } }), TypeError, /attentionWeights.data is Int32Array, expected a Float32Array/],
  ['valueLayout value', (a) => ({ ...a, valueLayout: 'NCHW' }), RangeError, /valueLayout is 'NCHW', expected one of 'BLNC', 'BNLC'/],
  ['valueLayout type', (a) => ({ ...a, valueLayout: 0 }), TypeError, /valueLayout is number 0, expected one of 'BLNC', 'BNLC'/],
  ['samplingLocationsLayout value', (a) => ({ ...a, samplingLocationsLayout: 'BQHLP' }), RangeError, /samplingLocationsLayout is 'BQHLP', expected one of 'BQHLP2', 'B2QHLP'/],
  ['alignCorners type', (a) => ({ ...a, alignCorners: 1 }), TypeError, /alignCorners is number 1, expected true or false/],
  ['paddingMode value', (a) => ({ ...a, paddingMode: 'reflection' }), RangeError, /paddingMode is 'reflection', expected one of 'zeros', 'border'/],
  ['threads zero', (a) => ({ ...a, threads: 0 }), RangeError, /threads is 0, expected an integer >= 1/],
  ['spatialShapes flat', (a) => ({ ...a, spatialShapes: [4, 4, 2, 2] }), TypeError, /spatialShapes\[0\] is number 4, expected an \[H, W\] pair \(spatialShapes is an array of \[H, W\] pairs/],
  ['threads fraction', (a) => ({ ...a, threads: 2.5 }), RangeError, /threads is 2.5, expected an integer >= 1/],
  ['threads type', (a) => ({ ...a, threads: '4' }), TypeError, /threads is the string "4", expected a positive integer/],
];

const BACKWARD_ERRORS = [
  ['gradOutput missing', (a) => a, TypeError, /backward: gradOutput is missing, expected \{ data: Float32Array, shape: \[B, N_q, N_h\*C_h\] \}/],
  ['gradOutput shape', (a) => ({ ...a, gradOutput: { data: new Float32Array(60), shape: [2, 5, 6, 1] } }), RangeError, /gradOutput.shape is \[2, 5, 6, 1\], expected \[2, 5, 6\] \(3 dimensions/],
  ['gradOutput width', (a) => ({ ...a, gradOutput: { data: new Float32Array(30), shape: [2, 5, 3] } }), RangeError, /gradOutput.shape is \[2, 5, 3\], expected \[2, 5, 6\] \(N_h\*C_h must be 6/],
  ['gradOutput data', (a) => ({ ...a, gradOutput: { data: new Uint8Array(60), shape: [2, 5, 6] } }), TypeError, /gradOutput.data is Uint8Array, expected a Float32Array/],
];

const PREPARE_ERRORS = [
  ['batch zero', { batch: 0 }, RangeError, /prepare: batch is 0, expected an integer >= 1/],
  ['batch string', { batch: '2' }, TypeError, /prepare: batch is the string "2", expected a positive integer/],
  ['channels missing', { channels: undefined }, TypeError, /prepare: channels is missing, expected a positive integer/],
  ['unknown key', { queries: 3 }, TypeError, /prepare: unknown argument 'queries'/],
  ['paddingMode', { paddingMode: 'edge' }, RangeError, /prepare: paddingMode is 'edge'/],
];

for (const [backendName, options] of [['wasm', {}], ['native', { backend: 'native' }]]) {
  test(`${backendName}: every validation error has its type and names the argument, expected and actual`, async () => {
    const msda = await init(options);
    const heap = msda.wasm && msda.wasm.heapInUse();
    for (const [what, change, type, words] of FORWARD_ERRORS) {
      assert.throws(() => msda.forward(change(validArgs())), (e) => {
        assert.equal(e.constructor, type, `${what}: ${e.message}`);
        assert.match(e.message, words, what);
        return true;
      }, what);
      // backward validates the same arguments the same way (with its own name).
      assert.throws(() => msda.backward({ ...change(validArgs() ?? {}), gradOutput: gradOutput() }), type, what);
    }
    for (const [what, change, type, words] of BACKWARD_ERRORS) {
      assert.throws(() => msda.backward(change(validArgs())), (e) => {
        assert.equal(e.constructor, type, `${what}: ${e.message}`);
        assert.match(e.message, words, what);
        return true;
      }, what);
    }
    const good = { batch: 1, numQueries: 2, numHeads: 1, channels: 2, numPoints: 1, spatialShapes: [[2, 2]] };
    for (const [what, change, type, words] of PREPARE_ERRORS) {
      assert.throws(() => msda.prepare({ ...good, ...change }), (e) => {
        assert.equal(e.constructor, type, `${what}: ${e.message}`);
        assert.match(e.message, words, what);
        return true;
      }, what);
    }
    assert.throws(() => msda.prepare(good, { mode: 'toString' }), RangeError);
    assert.throws(() => msda.prepare(good, { mode: 'sideways' }), { name: 'RangeError', message: /mode is the string "sideways", expected 'forward', 'backward' or 'both'/ });
    if (msda.wasm) assert.equal(msda.wasm.heapInUse(), heap, 'nothing left allocated');
  });
}

test('sizes beyond what a wasm32 heap gives one call are a RangeError stating the bytes, before allocating', async () => {
  const msda = await init();
  const heap = msda.wasm.heapInUse(), bytes = msda.wasm.memory.buffer.byteLength;
  assert.throws(() => msda.prepare({ batch: 1, numQueries: 1, numHeads: 1024, channels: 1024, numPoints: 1, spatialShapes: [[1024, 1]] }),
    { name: 'RangeError', message: /prepare: this call needs \d{10,} bytes of WebAssembly memory, more than the \d{10} bytes a wasm32 heap can give one call \(4 GiB less \d+ bytes of static data, C stack and allocator headers\)/ });
  assert.throws(() => msda.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[2 ** 20, 2 ** 20]] }),
    { name: 'RangeError', message: /needs 8796093022\d{3} bytes/ });
  assert.equal(msda.wasm.heapInUse(), heap);
  assert.equal(msda.wasm.memory.buffer.byteLength, bytes, 'the memory did not grow');
});

// Corrupts the problem description in the heap after JS validation, so the C library itself
// rejects the call: its status must come back as an Error whose code is the status name.
export function corruptBatch(msda) {
  const backend = msda._backend;
  const allocate = backend.allocate;
  backend.allocate = function (desc, layout) {
    const store = allocate.call(this, desc, layout);
    new BigInt64Array(backend.memory.buffer, store.base, 1)[0] = 0n;
    return store;
  };
  return () => { backend.allocate = allocate; };
}

test('a C status that still comes back becomes an Error with .code, and the heap is freed', async () => {
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    msda.forward(validArgs()); // emmalloc sets up its first region on the first allocation
    const heap = msda.wasm.heapInUse();
    const restore = corruptBatch(msda);
    try {
      assert.throws(() => msda.forward(validArgs()), (e) => {
        assert.equal(e.constructor, Error);
        assert.equal(e.code, 'MSDA_ERR_INVALID_SIZE');
        assert.equal(e.status, 2);
        assert.match(e.message, /^forward: batch is 0, expected >= 1 \(MSDA_ERR_INVALID_SIZE\)$/);
        return true;
      });
      assert.throws(() => msda.backward({ ...validArgs(), gradOutput: gradOutput() }), { code: 'MSDA_ERR_INVALID_SIZE', message: /^backward: batch is 0/ });
    } finally {
      restore();
    }
    assert.equal(msda.wasm.heapInUse(), heap);
  }
  // The addon checks its own arguments: the library never sees an array shorter than its tensor.
  const native = await initNative();
  const addon = native._backend.addon;
  const desc = new BigInt64Array([1n, 1n, 1n, 1n, 1n, 1n, 1n, 0n, 0n, 0n, 0n, 1n, 0n, 1n, 1n, 0n]);
  const f = (n) => new Float32Array(n);
  assert.equal(addon.forward(desc, f(1), f(2), f(1), f(1)), null);
  assert.throws(() => addon.forward(desc, f(1), f(1), f(1), f(1)), { name: 'RangeError', message: /samplingLocations has 1 elements, expected 2/ });
  assert.throws(() => addon.forward(desc, new Float64Array(1), f(2), f(1), f(1)), { name: 'TypeError', message: /value must be a Float32Array/ });
  assert.throws(() => addon.forward([1], f(1), f(2), f(1), f(1)), { name: 'TypeError', message: /desc must be a BigInt64Array/ });
  assert.throws(() => addon.forward(desc, f(1)), { name: 'TypeError', message: /forward expects 5 arguments, got 2/ });
  assert.deepEqual(addon.forward(desc.subarray(0, 15), f(1), f(2), f(1), f(1)),
    { status: 3, code: 'MSDA_ERR_SHAPE_MISMATCH', message: 'problem description length does not match num_levels (expected 13 + 3 * num_levels entries)' });
  const bad = desc.slice(); bad[14] = 2n;
  assert.deepEqual(addon.forward(bad, f(1), f(2), f(1), f(1)).code, 'MSDA_ERR_SHAPE_MISMATCH');
  // The description's valueDtype says what value is: half bits read as they are, or a refusal.
  const half = desc.slice(); half[12] = 1n;
  assert.equal(addon.forward(half, new Uint16Array(1), f(2), f(1), f(1)), null);
  assert.throws(() => addon.forward(half, f(1), f(2), f(1), f(1)), { name: 'TypeError', message: /value must be a Uint16Array: the problem description's value_dtype is half-precision/ });
  half[12] = 3n;
  assert.equal(addon.forward(half, new Uint16Array(1), f(2), f(1), f(1)).code, 'MSDA_ERR_INVALID_OPTION');
  const overlapping = f(2);
  assert.equal(addon.forward(desc, overlapping.subarray(0, 1), f(2), f(1), overlapping.subarray(0, 1)).code, 'MSDA_ERR_OVERLAP');
});

test('a prepared problem\'s heap views as inputs to the copying forward/backward, when that call grows the memory', async () => {
  for (const simd of [true, false]) {
    // A fresh instance (memoised per bytes object) whose heap holds little but this problem.
    const msda = await init({ wasmBinary: new Uint8Array(await readFile(distFile(simd ? 'msda-simd.wasm' : 'msda-scalar.wasm'))) });
    // value is 8 MiB: the call's own copy of the inputs cannot fit beside the prepared block.
    const dims = { batch: 1, numQueries: 64, numHeads: 8, channels: 64, numPoints: 4, spatialShapes: [[64, 32], [32, 32], [16, 16], [8, 8]] };
    const p = msda.prepare(dims);
    const r = (seed) => { let s = seed; return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648); };
    for (const [name, seed] of [['value', 1], ['samplingLocations', 2], ['attentionWeights', 3], ['gradOutput', 4]]) {
      const next = r(seed);
      p[name].set(Float32Array.from({ length: p[name].length }, () => next() * 1.2 - 0.1));
    }
    const names = ['value', 'samplingLocations', 'attentionWeights', 'gradOutput'];
    const views = Object.fromEntries(names.map((n) => [n, p.tensor(n)]));
    const plain = Object.fromEntries(names.map((n) => [n, { data: views[n].data.slice(), shape: views[n].shape }]));
    const { gradOutput: unusedG, ...fwdViews } = views;
    assert.equal(fwdViews.value.data.buffer, msda.wasm.memory.buffer, 'inputs are heap views');
    const memory = msda.wasm.memory.buffer.byteLength;
    const out = msda.forward({ ...fwdViews, spatialShapes: dims.spatialShapes });
    assert.ok(msda.wasm.memory.buffer.byteLength > memory, `simd=${simd}: the call grew the memory (else this tests nothing)`);
    const { gradOutput: unusedPg, ...fwdPlain } = plain;
    assert.deepEqual(out.data, msda.forward({ ...fwdPlain, spatialShapes: dims.spatialShapes }).data, `simd=${simd}: forward`);
    assert.deepEqual(out.data, p.forward().data.slice(), `simd=${simd}: same as the prepared forward`);
    // backward: views taken again (the old ones went with the old buffer); a second prepared
    // block takes the free space so this call grows the memory too.
    const grown = msda.wasm.memory.buffer.byteLength;
    const hog = msda.prepare({ ...dims, numQueries: 4096 });
    const viewsNow = Object.fromEntries(names.map((n) => [n, p.tensor(n)]));
    const gb = msda.backward({ ...viewsNow, spatialShapes: dims.spatialShapes });
    assert.ok(msda.wasm.memory.buffer.byteLength > grown, `simd=${simd}: backward grew the memory`);
    const gp = msda.backward({ ...plain, spatialShapes: dims.spatialShapes });
    for (const k of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
      assert.deepEqual(gb[k].data, gp[k].data, `simd=${simd}: ${k}`);
    }
    hog.dispose();
    p.dispose();
  }
});

test('isa says which vector code runs: wasm-simd128, scalar, natively the library\'s choice (MSDA_ISA too); simd agrees', async () => {
  assert.equal((await init({ simd: true })).isa, 'wasm-simd128');
  assert.equal((await init({ simd: false })).isa, 'scalar');
  assert.equal((await init({ threads: 2 })).isa, 'wasm-simd128');
  const native = await initNative();
  const expected = ['x64', 'ia32'].includes(process.arch) ? 'sse2' : 'scalar';
  if (typeof native._backend.addon.isa === 'function') assert.equal(native.isa, native._backend.addon.isa());
  else assert.equal(native.isa, expected);
  assert.equal(native.simd, native.isa !== 'scalar', 'native simd: true when the addon runs vector code');
  for (const m of [await init({ simd: true }), await init({ simd: false }), native]) {
    assert.equal(m.simd, m.isa !== 'scalar', `${m.backend}: simd and isa agree`);
  }
  // Natively the addon reports what the library runs: forced with MSDA_ISA, in a child process.
  const { spawnSync } = await import('node:child_process');
  const script = `import { initNative } from ${JSON.stringify(new URL('../../bindings/node.js', import.meta.url).href)};
    const m = await initNative().catch((e) => ({ isa: e.code, simd: e.message }));
    console.log(JSON.stringify([m.isa, m.simd]));`;
  // one it lacks is refused at init, naming it (tests/js/addon-loader.test.js: 'auto' and the CLIs)
  const refused = ['MSDA_BAD_ISA', `MSDA_ISA is 'no-such-isa', expected one of this CPU's: ${native._backend.addon.isaList()} (or unset)`];
  for (const [forced, want] of [['sse2', ['sse2', true]], ['scalar', ['scalar', false]], ['no-such-isa', refused]]) {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: { ...process.env, MSDA_ISA: forced } });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), want, `MSDA_ISA=${forced}`);
  }
});

test('a call asking for more threads than a wasm instance has says so once (and computes the same bits)', async () => {
  const { readFile } = await import('node:fs/promises');
  const warnings = [];
  const warn = console.warn;
  console.warn = (...a) => warnings.push(a.join(' '));
  try {
    const m = await init({ wasmBinary: new Uint8Array(await readFile(distFile('msda-simd.wasm'))) });
    const args = validArgs();
    const want = m.forward(args).data;
    assert.equal(warnings.length, 0, 'no threads asked: no warning');
    assert.deepEqual(m.forward({ ...args, threads: 2 }).data, want);
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0], 'ms-deform-attn: forward asked for threads: 2, but this instance runs on 1 (init({ threads: 2 }) starts more; results are the same bits either way). Said once.');
    m.backward({ ...args, gradOutput: gradOutput(), threads: 4 });
    m.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[1, 1]], threads: 3 }).dispose();
    assert.equal(warnings.length, 1, 'once per instance');
    // A pool of 2 asked for 2, and native (which starts what a call asks for): no warning.
    const two = await init({ threads: 2 });
    two.forward({ ...args, threads: 2 });
    (await initNative()).forward({ ...args, threads: 3 });
    assert.equal(warnings.length, 1, warnings.join('\n'));
    two.forward({ ...args, threads: 5 });
    assert.equal(warnings.length, 2);
    assert.match(warnings[1], /^ms-deform-attn: forward asked for threads: 5, but this instance runs on 2 /);
  } finally {
    console.warn = warn;
  }
});

test('prepare() touches the outputs up front: the first backward faults in fewer than half of gradValue\'s pages', async () => {
  for (const m of [await init({ simd: true }), await initNative()]) {
    // Warm the code first: V8's optimising compiler (its own page faults) runs during the first calls.
    for (let i = 0; i < 5; i++) m.backward({ ...validArgs(), gradOutput: gradOutput() });
    const p = m.prepare({ batch: 1, numQueries: 300, numHeads: 8, channels: 32, numPoints: 4,
      spatialShapes: [[100, 167], [50, 84], [25, 42], [13, 21]] });
    try {
      p.value.fill(0.5);
      p.samplingLocations.fill(0.5);
      p.attentionWeights.fill(0.1);
      p.gradOutput.fill(1);
      const pages = (p.gradValue.length * 4) / 4096;
      const before = process.resourceUsage().minorPageFault;
      p.backward();
      const faults = process.resourceUsage().minorPageFault - before;
      assert.ok(faults < pages / 2, `${m.backend}: the first backward took ${faults} page faults; gradValue alone spans ${pages} pages`);
    } finally {
      p.dispose();
    }
  }
});
