// The JS API with half-precision tensors: { data: Uint16Array, dtype: 'float16' | 'bfloat16' }
// (and Float16Array where the runtime has it) are widened exactly, so every backend, the float64
// reference and initWorker give the same bits as for the float32 values the bits stand for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init, initWorker } from '../../bindings/index.js';
import { referenceBackward } from '../../bindings/reference.js';
import { HalfBits, halfRows, narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { OPTION_COMBOS, randomCase } from './helpers.js';

const FLOATS = ['value', 'samplingLocations', 'attentionWeights', 'gradOutput'];
const bitsOf = (t) => new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);

/** c's float arguments as half-precision tensors (some of them, per `which`) and as their float32 values. */
function halfAndWide(c, dtype, which = FLOATS) {
  const half = { ...c.args, gradOutput: c.gradOutput }, wide = { ...c.args, gradOutput: c.gradOutput };
  for (const name of which) {
    const t = half[name];
    const bits = narrowToHalf(t.data, dtype);
    half[name] = { data: bits, shape: t.shape, dtype };
    wide[name] = { data: widenHalf(bits, dtype), shape: t.shape };
  }
  return { half, wide };
}

test('half-precision tensors give the bits of their float32 values on wasm, wasm-scalar and native', async () => {
  for (const backend of ['wasm', 'wasm-scalar', 'native']) {
    const msda = await init({ backend });
    for (const [k, options] of OPTION_COMBOS.entries()) {
      const dtype = k % 2 ? 'bfloat16' : 'float16';
      const c = randomCase(600 + k, options);
      const { half, wide } = halfAndWide(c, dtype, k % 3 ? FLOATS : ['value', 'gradOutput']);
      const before = half.value.data.slice();
      const { gradOutput: g1, ...fHalf } = half;
      const { gradOutput: g2, ...fWide } = wide;
      assert.deepEqual(bitsOf(msda.forward(fHalf)), bitsOf(msda.forward(fWide)), `${backend} ${dtype} forward`);
      const a = msda.backward(half), b = msda.backward(wide);
      for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
        assert.deepEqual(bitsOf(a[key]), bitsOf(b[key]), `${backend} ${dtype} ${key}`);
      }
      assert.deepEqual(half.value.data, before, "the caller's bits are not touched");
    }
    msda.dispose();
  }
});

// A half value goes to the kernels as its bits where halfRows says so (bfloat16 on wasm SIMD and the
// addon's AVX2, float16 on the addon's AVX2; the native backward only with fewer sampled corners
// than value rows; every other backend and dtype too with fewer corners than rows, read by the
// kernels' generic path):
// every path, each with the float32 call's bits, on problems of both kinds (a decoder's few queries
// over a large level, an encoder's query per pixel) and two batches (a streamed forward loads each
// batch's value in turn).
test('half rows (the kernels widening value as they read it) give the float32 call\'s bits on every backend', async () => {
  const paths = new Set();
  for (const options of [{ backend: 'wasm' }, { backend: 'wasm-scalar' }, { backend: 'native' }, { threads: 2 }]) {
    const msda = await init(options);
    for (const [k, [Q, shapes]] of [[3, [[9, 11], [3, 4]]], [150, [[10, 12], [5, 6]]]].entries()) {   // rows < corners, rows > corners
      const L = shapes.reduce((n, [h, w]) => n + h * w, 0);
      const B = 2, H = 2, C = 35, NL = shapes.length, P = 2;
      const r = (n, lo, hi, seed) => Float32Array.from({ length: n }, (_, i) => lo + (hi - lo) * ((Math.sin(seed + i * 12.9898) * 43758.5453) % 1 + 1) % 1);
      const args = {
        value: { data: r(B * L * H * C, -1, 1, k), shape: [B, L, H, C] },
        spatialShapes: shapes,
        samplingLocations: { data: r(B * Q * H * NL * P * 2, -0.1, 1.1, k + 1), shape: [B, Q, H, NL, P, 2] },
        attentionWeights: { data: r(B * Q * H * NL * P, 0, 1, k + 2), shape: [B, Q, H, NL, P] },
      };
      args.value.data[5] = NaN;
      args.value.data[17] = -Infinity;
      const problem = { numQueries: Q, numLevels: NL, numPoints: P, valueLength: L };
      for (const dtype of ['float16', 'bfloat16']) {
        const { half, wide } = halfAndWide({ args, gradOutput: { data: r(B * Q * H * C, -1, 1, k + 3), shape: [B, Q, H * C] } }, dtype, ['value']);
        const { gradOutput: g1, ...fHalf } = half;
        const { gradOutput: g2, ...fWide } = wide;
        const where = `${msda.backend}${options.threads ? ' threads' : ''} ${dtype} Q=${Q}`;
        assert.deepEqual(bitsOf(msda.forward(fHalf)), bitsOf(msda.forward(fWide)), `${where} forward`);
        const a = msda.backward(half), b = msda.backward(wide);
        for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
          assert.deepEqual(bitsOf(a[key]), bitsOf(b[key]), `${where} ${key}`);
        }
        for (const op of ['forward', 'backward']) paths.add(`${msda.backend} ${dtype} ${op} ${halfRows(msda._backend, dtype, problem, op) ? 'rows' : 'widened'}`);
      }
    }
    msda.dispose();
  }
  // every branch of halfRows was taken (the addon's on an x86 CPU with F16C)
  for (const want of ['wasm bfloat16 forward rows', 'wasm bfloat16 backward rows', 'wasm float16 forward widened',
    'wasm-scalar bfloat16 forward widened', 'wasm-scalar float16 backward widened',
    'wasm float16 forward rows', 'wasm-scalar float16 backward rows', 'wasm-scalar bfloat16 forward rows']) {
    assert.ok(paths.has(want), `${want} ran (${[...paths].join(', ')})`);
  }
  const native = await init({ backend: 'native' });
  if (native.isa === 'avx2') {
    for (const want of ['native float16 forward rows', 'native float16 backward rows', 'native float16 backward widened',
      'native bfloat16 backward rows', 'native bfloat16 backward widened']) {
      assert.ok(paths.has(want), `${want} ran (${[...paths].join(', ')})`);
    }
  }
  native.dispose();
});

// The C widening (msda_widen_half) where the bits land: every one of the 65,536 patterns of both
// formats, in the wasm heap of both builds and of a threads instance, gives half.js's bits, also at
// an offset, as a streamed window loads them (the addon's, in C: tests/c/test_npy.c).
test('every half-precision pattern is widened in the wasm heap to the bits half.js gives', async () => {
  const all = Uint16Array.from({ length: 65536 }, (_, i) => i);
  for (const options of [{ backend: 'wasm' }, { backend: 'wasm-scalar' }, { threads: 2 }]) {
    const msda = await init(options);
    for (const dtype of ['float16', 'bfloat16']) {
      const want = new Uint32Array(widenHalf(all, dtype).buffer);
      for (const at of [0, 3]) {
        const store = msda._backend.allocate(new BigInt64Array(15), [{ name: 'value', elements: all.length + at }]);
        try {
          store.load('value', new HalfBits(all, dtype), at);
          const view = store.view('value');
          assert.deepEqual(new Uint32Array(view.buffer, view.byteOffset + 4 * at, all.length), want,
            `${JSON.stringify(options)} ${dtype} at ${at}`);
        } finally {
          store.free();
        }
      }
    }
    msda.dispose();
  }
});

// Each input says its own format: float16 and bfloat16 inputs side by side in one call.
// The addon widens half inputs into one scratch array its backend keeps from call to call: a
// smaller call after a bigger one (the scratch longer than it needs, holding the bigger call's
// values) and a bigger one after it still give the float32 call's bits; dispose lets it go.
test('native: half inputs widened into the reused scratch give the float32 call\'s bits, bigger then smaller; dispose frees it', async () => {
  const msda = await init({ backend: 'native' });
  const backend = msda._backend;
  let longest = 0;
  for (const [k, seed] of [674, 665, 664].entries()) {   // inputs of 2460, 47 and 912 elements
    const c = randomCase(seed, OPTION_COMBOS[k]);
    const { half, wide } = halfAndWide(c, k % 2 ? 'bfloat16' : 'float16');
    const { gradOutput: g1, ...fHalf } = half;
    const { gradOutput: g2, ...fWide } = wide;
    assert.deepEqual(bitsOf(msda.forward(fHalf)), bitsOf(msda.forward(fWide)), `call ${k} forward`);
    const a = msda.backward(half), b = msda.backward(wide);
    for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
      assert.deepEqual(bitsOf(a[key]), bitsOf(b[key]), `call ${k} ${key}`);
    }
    if (k === 0) longest = backend.scratch.length;
    assert.equal(backend.scratch.length, longest, `call ${k}: the first call's scratch is kept`);
  }
  assert.ok(longest > 0);
  msda.dispose();
  assert.equal(backend.scratch.length, 0, 'dispose frees the scratch');
});

test('float16 and bfloat16 inputs mixed in one call give the float32 call\'s bits on every backend', async () => {
  const c = randomCase(640, OPTION_COMBOS[0]);
  const dtypes = { value: 'bfloat16', samplingLocations: 'float16', attentionWeights: 'bfloat16', gradOutput: 'float16' };
  const half = { ...c.args, gradOutput: c.gradOutput }, wide = { ...c.args, gradOutput: c.gradOutput };
  for (const [name, dtype] of Object.entries(dtypes)) {
    const bits = narrowToHalf(half[name].data, dtype);
    half[name] = { data: bits, shape: half[name].shape, dtype };
    wide[name] = { data: widenHalf(bits, dtype), shape: wide[name].shape };
  }
  for (const options of [{ backend: 'wasm' }, { backend: 'wasm-scalar' }, { backend: 'native' }, { threads: 2 }]) {
    const msda = await init(options);
    const { gradOutput: g1, ...fHalf } = half;
    const { gradOutput: g2, ...fWide } = wide;
    assert.deepEqual(bitsOf(msda.forward(fHalf)), bitsOf(msda.forward(fWide)), `${JSON.stringify(options)} forward`);
    const a = msda.backward(half), b = msda.backward(wide);
    for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
      assert.deepEqual(bitsOf(a[key]), bitsOf(b[key]), `${JSON.stringify(options)} ${key}`);
    }
    msda.dispose();
  }
});

test('the float64 reference and initWorker take half-precision tensors too', async () => {
  const c = randomCase(31, OPTION_COMBOS[5]);
  const { half, wide } = halfAndWide(c, 'float16');
  const r1 = referenceBackward(half), r2 = referenceBackward(wide);
  assert.deepEqual(r1.gradSamplingLocations.data, r2.gradSamplingLocations.data);
  const worker = await initWorker({ backend: 'wasm' });
  try {
    const msda = await init({ backend: 'wasm' });
    const w = await worker.backward(half);
    assert.deepEqual(bitsOf(w.gradValue), bitsOf(msda.backward(wide).gradValue));
  } finally {
    worker.terminate();
  }
});

test('Float16Array data is float16 (where the runtime has Float16Array)', { skip: typeof Float16Array !== 'function' && 'no Float16Array in this runtime' }, async () => {
  const msda = await init();
  const c = randomCase(8, OPTION_COMBOS[0]);
  const { half, wide } = halfAndWide(c, 'float16');
  // eslint-disable-next-line no-undef
  const f16 = { ...half, value: { data: new Float16Array(half.value.data.buffer), shape: half.value.shape } };
  assert.deepEqual(bitsOf(msda.backward(f16).gradValue), bitsOf(msda.backward(wide).gradValue));
});

test('half-precision arguments that do not fit: a TypeError naming the tensor and what it needs', async () => {
  const msda = await init();
  const c = randomCase(9, OPTION_COMBOS[0]);
  const t = c.args.value;
  const bits = narrowToHalf(t.data, 'float16');
  const cases = [
    [{ data: bits, shape: t.shape }, "forward: value.data is Uint16Array, expected a Float32Array (a Uint16Array of half-precision bits needs dtype: 'float16' or 'bfloat16')"],
    [{ data: t.data, shape: t.shape, dtype: 'float16' }, "forward: value.data is Float32Array, expected a Uint16Array of float16 bits or a Float16Array (dtype 'float16')"],
    [{ data: t.data, shape: t.shape, dtype: 'bfloat16' }, "forward: value.data is Float32Array, expected a Uint16Array of bfloat16 bits (dtype 'bfloat16')"],
    [{ data: bits, shape: t.shape, dtype: 'int16' }, 'forward: value.dtype is the string "int16", expected \'float32\', \'float16\' or \'bfloat16\' (or NumPy\'s \'<f4\', \'<f2\')'],
    [{ data: bits, shape: t.shape, dtype: 'float32' }, 'forward: value.data is Uint16Array, expected a Float32Array'],
  ];
  for (const [value, message] of cases) {
    assert.throws(() => msda.forward({ ...c.args, value }), (e) => e instanceof TypeError && e.message === message, message);
  }
  // the shape is checked against the bits' count like any tensor's
  assert.throws(() => msda.forward({ ...c.args, value: { data: bits.subarray(1), shape: t.shape, dtype: 'float16' } }), RangeError);
  assert.doesNotThrow(() => msda.forward({ ...c.args, value: { data: t.data, shape: t.shape, dtype: 'float32' } }));
});

// parseNpy names dtypes as NumPy does ('<f4', '<f2'): its tensors go straight into forward and
// backward, with the bits of the same values given as Float32Arrays.
test('tensors from parseNpy (dtype <f4 and <f2) go straight into forward and backward', async () => {
  const { parseNpy, serializeNpy } = await import('../../bindings/npy.js');
  const msda = await init();
  const c = randomCase(700, OPTION_COMBOS[0]);
  const { half, wide } = halfAndWide(c, 'float16', ['value', 'gradOutput']);
  const viaNpy = { ...half };
  for (const key of FLOATS) viaNpy[key] = parseNpy(serializeNpy(half[key]));
  assert.equal(viaNpy.value.dtype, '<f2');
  assert.equal(viaNpy.samplingLocations.dtype, '<f4');
  const { gradOutput: g1, ...fNpy } = viaNpy;
  const { gradOutput: g2, ...fWide } = wide;
  assert.deepEqual(bitsOf(msda.forward(fNpy)), bitsOf(msda.forward(fWide)));
  const a = msda.backward(viaNpy), b = msda.backward(wide);
  for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) assert.deepEqual(bitsOf(a[key]), bitsOf(b[key]), key);
  assert.throws(() => msda.forward({ ...fNpy, value: { ...viaNpy.value, dtype: '<f8' } }),
    { name: 'TypeError', message: /value\.dtype is the string "<f8", expected 'float32', 'float16' or 'bfloat16' \(or NumPy's '<f4', '<f2'\)/ });
  msda.dispose();
});
