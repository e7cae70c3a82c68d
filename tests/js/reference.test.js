// The float64 reference validates its arguments with the API's own code: every argument the
// kernels refuse, it refuses with the same error class and message (named referenceForward /
// referenceBackward instead of forward / backward); every form the kernels accept (tensor
// spatialShapes, typed level starts, dims, both layouts) it computes from, to the kernels' values.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { referenceForward, referenceBackward } from '../../bindings/reference.js';
import { assertClose } from './helpers.js';

const f32 = (shape, seed = 1) => {
  let s = seed;
  const data = Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 4294967296;
  });
  return { data, shape };
};

// B = 2, two levels (4x4, 2x3: L = 22), N_h = 2, C_h = 3, N_q = 5, N_p = 2.
const base = () => ({
  value: f32([2, 22, 2, 3], 1),
  spatialShapes: [[4, 4], [2, 3]],
  samplingLocations: f32([2, 5, 2, 2, 2, 2], 2),
  attentionWeights: f32([2, 5, 2, 2, 2], 3),
});
const withGrad = () => ({ ...base(), gradOutput: f32([2, 5, 6], 4) });

// Each entry: what is wrong, and the arguments (forward's; backward's get gradOutput added).
const BAD = [
  ['not an object', () => null],
  ['an array', () => [base()]],
  ['unknown argument', () => ({ ...base(), bogus: 1 })],
  ['value missing', () => { const a = base(); delete a.value; return a; }],
  ['value a bare array', () => ({ ...base(), value: [1, 2, 3] })],
  ['value.data a plain array', () => ({ ...base(), value: { data: Array.from(base().value.data), shape: [2, 22, 2, 3] } })],
  ['value.data an Int32Array', () => ({ ...base(), value: { data: new Int32Array(264), shape: [2, 22, 2, 3] } })],
  ['value too short for its shape', () => ({ ...base(), value: { data: new Float32Array(263), shape: [2, 22, 2, 3] } })],
  ['value too long for its shape', () => ({ ...base(), value: { data: new Float32Array(265), shape: [2, 22, 2, 3] } })],
  ['value with the wrong L', () => ({ ...base(), value: f32([2, 21, 2, 3]) })],
  ['value with 3 dimensions', () => ({ ...base(), value: f32([2, 22, 6]) })],
  ['value shape with a string', () => ({ ...base(), value: { data: new Float32Array(264), shape: [2, '22', 2, 3] } })],
  ['value shape with a zero', () => ({ ...base(), value: { data: new Float32Array(0), shape: [0, 22, 2, 3] } })],
  ['spatialShapes missing', () => { const a = base(); delete a.spatialShapes; return a; }],
  ['spatialShapes empty', () => ({ ...base(), spatialShapes: [] })],
  ['spatialShapes a number', () => ({ ...base(), spatialShapes: 16 })],
  ['a level of 0 rows', () => ({ ...base(), spatialShapes: [[0, 4], [2, 3]] })],
  ['a level of 3 entries', () => ({ ...base(), spatialShapes: [[4, 4, 1], [2, 3]] })],
  ['a fractional level size', () => ({ ...base(), spatialShapes: [[4, 4], [2, 2.5]] })],
  ['spatialShapes tensor of odd length', () => ({ ...base(), spatialShapes: { data: new Int32Array([4, 4, 2]), shape: [3] } })],
  ['spatialShapes tensor for the wrong L', () => ({ ...base(), spatialShapes: { data: new BigInt64Array([4n, 4n, 2n, 2n]), shape: [2, 2] } })],
  ['levelStartIndex wrong', () => ({ ...base(), levelStartIndex: [0, 15] })],
  ['levelStartIndex one entry short', () => ({ ...base(), levelStartIndex: [0] })],
  ['levelStartIndex not integers', () => ({ ...base(), levelStartIndex: [0, '16'] })],
  ['samplingLocations for 3 levels', () => ({ ...base(), samplingLocations: f32([2, 5, 2, 3, 2, 2]) })],
  ['samplingLocations without the xy axis', () => ({ ...base(), samplingLocations: f32([2, 5, 2, 2, 2, 1]) })],
  ['samplingLocations of another batch', () => ({ ...base(), samplingLocations: f32([1, 5, 2, 2, 2, 2]) })],
  ['attentionWeights for another N_q', () => ({ ...base(), attentionWeights: f32([2, 4, 2, 2, 2]) })],
  ['attentionWeights missing', () => { const a = base(); delete a.attentionWeights; return a; }],
  ['valueLayout unknown', () => ({ ...base(), valueLayout: 'NCHW' })],
  ['valueLayout BNLC with a BLNC tensor', () => ({ ...base(), valueLayout: 'BNLC' })],
  ['samplingLocationsLayout B2QHLP with a BQHLP2 tensor', () => ({ ...base(), samplingLocationsLayout: 'B2QHLP' })],
  ['samplingLocationsLayout a number', () => ({ ...base(), samplingLocationsLayout: 2 })],
  ['alignCorners a string', () => ({ ...base(), alignCorners: 'yes' })],
  ['paddingMode reflect', () => ({ ...base(), paddingMode: 'reflect' })],
  ['threads 0', () => ({ ...base(), threads: 0 })],
];

// The kernels' error for these arguments, then the reference's: same class, same message.
function sameRefusal(what, kernel, reference, kernelName, referenceName) {
  let expected;
  try {
    kernel();
  } catch (e) {
    expected = e;
  }
  assert.ok(expected, `${what}: the kernels refuse it`);
  assert.throws(reference, (e) => {
    assert.equal(e.constructor, expected.constructor, `${what}: ${e.constructor.name} (${e.message}), expected ${expected.constructor.name}`);
    // The one difference: the reference also takes float64 data, and says so.
    const message = expected.message.replace(`${kernelName}:`, `${referenceName}:`)
      .replace(/expected a Float32Array$/, 'expected a Float32Array or Float64Array');
    assert.equal(e.message, message, what);
    return true;
  }, `${what}: the reference refuses it`);
}

test('the reference refuses exactly what forward and backward refuse, with the same messages', async () => {
  const msda = await init();
  for (const [what, make] of BAD) {
    sameRefusal(`forward, ${what}`, () => msda.forward(make()), () => referenceForward(make()), 'forward', 'referenceForward');
    const backwardArgs = () => {
      const a = make();
      return a !== null && typeof a === 'object' && !Array.isArray(a) ? { ...a, gradOutput: withGrad().gradOutput } : a;
    };
    sameRefusal(`backward, ${what}`, () => msda.backward(backwardArgs()), () => referenceBackward(backwardArgs()), 'backward', 'referenceBackward');
  }
  for (const [what, gradOutput] of [['gradOutput missing', undefined], ['gradOutput of the wrong size', f32([2, 5, 5])],
    ['gradOutput float16-like Uint16Array', { data: new Uint16Array(60), shape: [2, 5, 6] }]]) {
    const args = () => {
      const a = { ...base(), gradOutput };
      if (gradOutput === undefined) delete a.gradOutput;
      return a;
    };
    sameRefusal(what, () => msda.backward(args()), () => referenceBackward(args()), 'backward', 'referenceBackward');
  }
});

test('the reference computes from every form the kernels accept, to the kernels\' values', async () => {
  const msda = await init();
  const plain = referenceForward(base());
  const plainGrads = referenceBackward(withGrad());
  assertClose(msda.forward(base()).data, plain.data, 'forward vs reference');
  const forms = [
    ['spatialShapes as an (N_l, 2) BigInt64Array tensor', { spatialShapes: { data: new BigInt64Array([4n, 4n, 2n, 3n]), shape: [2, 2] } }],
    ['spatialShapes as an Int32Array tensor without shape', { spatialShapes: { data: new Int32Array([4, 4, 2, 3]) } }],
    ['spatialShapes as Int32Array pairs', { spatialShapes: [new Int32Array([4, 4]), new Int32Array([2, 3])] }],
    ['levelStartIndex as numbers', { levelStartIndex: [0, 16] }],
    ['levelStartIndex as a BigInt64Array', { levelStartIndex: new BigInt64Array([0n, 16n]) }],
    ['dims instead of shape', { value: { data: base().value.data, dims: [2, 22, 2, 3] } }],
  ];
  for (const [what, change] of forms) {
    const args = { ...base(), ...change };
    assert.deepEqual(referenceForward(args).data, plain.data, what);
    assert.deepEqual(referenceForward(args).data, referenceForward(base()).data, what);
    const g = referenceBackward({ ...withGrad(), ...change });
    for (const k of Object.keys(plainGrads)) assert.deepEqual(g[k].data, plainGrads[k].data, `${what}: ${k}`);
    assertClose(msda.forward(args).data, referenceForward(args).data, `${what}: kernels vs reference`);
  }
  // Float64 tensors (for finite differences) are the reference's own extension; integral float32
  // values give the same result either way.
  const as64 = (t) => ({ data: Float64Array.from(t.data), shape: t.shape });
  const b = base();
  const r64 = referenceForward({ ...b, value: as64(b.value), samplingLocations: as64(b.samplingLocations), attentionWeights: as64(b.attentionWeights) });
  assert.deepEqual(r64.data, plain.data);
  assert.throws(() => referenceForward({ ...b, value: { data: new Float64Array(263), shape: [2, 22, 2, 3] } }),
    { name: 'RangeError', message: 'referenceForward: value.shape is [2, 22, 2, 3] (264 elements) but value.data has 263 elements' });
  assert.throws(() => referenceForward({ ...b, value: { data: new Int32Array(264), shape: [2, 22, 2, 3] } }),
    { name: 'TypeError', message: /^referenceForward: value\.data is Int32Array, expected a Float32Array or Float64Array$/ });
});
