// ms-deform-attn/tfjs, its arguments: nothing is loaded
// at import (configure() after it decides where the module comes from); the op's options are
// read by the core's argument reader (the JS API's very messages); a tensor whose .shape or
// .dtype was edited is refused on both tfjs backends, never read past its bytes; loadStateDict
// changes nothing when any parameter is bad, names it, and says how to convert it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
import { configure, getMsda, msDeformAttn, MSDeformAttn, ready, setMsda } from '../../bindings/tfjs.js';
import { init } from '../../bindings/index.js';
import { serializeNpy } from '../../bindings/npy.js';

tf.enableProdMode();
const TFJS = new URL('../../bindings/tfjs.js', import.meta.url).href;
const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

test('nothing is loaded at import: configure({ wasmPaths }) given after it is what the first op and ready() use', () => {
  const script = `
    const tf = await import('@tensorflow/tfjs-core'); await import('@tensorflow/tfjs-backend-cpu');
    tf.enableProdMode(); await tf.setBackend('cpu');
    const m = await import(${JSON.stringify(TFJS)});
    const v = tf.ones([1, 4, 1, 1]), l = tf.fill([1, 1, 1, 1, 1, 2], 0.5), w = tf.ones([1, 1, 1, 1, 1]);
    const op = () => m.msDeformAttn(v, l, w, { spatialShapes: [[2, 2]] }).dataSync()[0];
    const out = {};
    m.configure({ wasmPaths: '/nonexistent/' });
    try { op(); out.first = 'ran'; } catch (e) { out.first = e.message; }
    out.ready = await m.ready().then(() => 'ready', (e) => e.message);
    m.configure({ wasmPaths: ${JSON.stringify(DIST)} });
    out.value = op();
    out.backend = m.getMsda().backend;
    m.configure({ wasmPaths: ${JSON.stringify(DIST)}, simd: false });
    out.readied = (await m.ready()).backend;
    console.log(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', cwd: fileURLToPath(new URL('../..', import.meta.url)) });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop());
  assert.match(out.first, /^msDeformAttn: ms-deform-attn\/tfjs has no instance yet: `await ready\(\)` before the first op .*cannot read \/nonexistent\/msda-simd\.wasm/);
  assert.match(out.ready, /cannot read \/nonexistent\/msda-simd\.wasm/);
  assert.equal(out.value, 1);
  assert.equal(out.backend, 'wasm');
  assert.equal(out.readied, 'wasm-scalar');
});

test('setMsda and ready: the op runs on the instance given, ready() resolves to it', async () => {
  const scalar = await init({ simd: false });
  setMsda(scalar);
  assert.equal(await ready(), scalar);
  assert.equal(getMsda(), scalar);
  configure({});
  assert.equal(getMsda(), scalar, 'configure() leaves an instance given by setMsda alone');
  setMsda(await init());
});

test('the op and the JS API give the same error, class and message, for the same bad option', async () => {
  await tf.setBackend('cpu');
  const msda = await init();
  const value = { data: new Float32Array(20 * 2 * 4), shape: [1, 20, 2, 4] };
  const samplingLocations = { data: new Float32Array(3 * 2 * 2 * 2 * 2), shape: [1, 3, 2, 2, 2, 2] };
  const attentionWeights = { data: new Float32Array(3 * 2 * 2 * 2), shape: [1, 3, 2, 2, 2] };
  const spatialShapes = [[4, 4], [2, 2]];
  const bad = [
    { spatialShapes, paddingMode: 'reflect' }, { spatialShapes, valueLayout: 3 }, { spatialShapes, samplingLocationsLayout: 'QHLP' },
    { spatialShapes, alignCorners: 'yes' }, { spatialShapes: [[4, 0], [2, 2]] }, { spatialShapes: [['4', 4], [2, 2]] },
    { spatialShapes: 'x' }, { spatialShapes: [] }, { spatialShapes: [[4, 4, 1]] }, { spatialShapes, levelStartIndex: [0, 15] },
    { spatialShapes, levelStartIndex: [0] }, { spatialShapes, levelStartIndex: 7 }, { spatialShapes: { data: [4, 4, 2], shape: [1, 3] } },
  ];
  const [v, l, w] = [value, samplingLocations, attentionWeights].map((t) => tf.tensor(t.data, t.shape));
  const caught = (f) => { try { f(); } catch (e) { return e; } assert.fail('did not throw'); };
  for (const options of bad) {
    const api = caught(() => msda.forward({ value, samplingLocations, attentionWeights, ...options }));
    const op = caught(() => msDeformAttn(v, l, w, options));
    const what = JSON.stringify(options);
    assert.equal(op.constructor, api.constructor, what);
    assert.equal(op.message.replace(/^msDeformAttn: /, ''), api.message.replace(/^forward: /, ''), what);
  }
  // Unknown option: the same sentence, with the op's word for it.
  assert.throws(() => msDeformAttn(v, l, w, { spatialShapes, padding: 'zeros' }), /^TypeError: msDeformAttn: unknown option 'padding', expected one of spatialShapes, levelStartIndex/);
  tf.dispose([v, l, w]);
  msda.dispose();
});

for (const backend of ['cpu', 'wasm']) {
  test(`tfjs-backend-${backend}: a tensor whose .shape or .dtype was edited is refused, never read past its bytes`, async () => {
    assert.ok(await tf.setBackend(backend));
    const v = tf.ones([1, 4, 1, 2]), l = tf.fill([1, 1, 1, 1, 1, 2], 0.5), w = tf.ones([1, 1, 1, 1, 1]);
    const lied = tf.ones([1, 4, 1, 2]);
    lied.shape[3] = 4;   // claims 16 floats, holds 8
    assert.throws(() => msDeformAttn(lied, l, w, { spatialShapes: [[2, 2]] }),
      /^RangeError: msDeformAttn: value has shape \[1, 4, 1, 4\] \(16 elements\) but holds 8 values \(was its shape edited\?\)/);
    const ints = tf.ones([1, 4, 1, 2], 'int32');
    ints.dtype = 'float32';
    assert.throws(() => msDeformAttn(ints, l, w, { spatialShapes: [[2, 2]] }), /^TypeError: msDeformAttn: value holds (int32|Int32Array) data, expected float32/);
    assert.deepEqual(Array.from(msDeformAttn(v, l, w, { spatialShapes: [[2, 2]] }).dataSync()), [1, 1]);
    tf.dispose([v, l, w, lied, ints]);
  });
}

test('loadStateDict: too few numbers, an int32 or bool tensor, a disposed tensor, an edited shape: nothing assigned, the parameter named, the layer still usable', async () => {
  await tf.setBackend('cpu');
  const layer = new MSDeformAttn({ d_model: 4, n_heads: 2, n_levels: 1, n_points: 1, seed: 3 });
  const before = layer.stateDict();
  const ones = () => Object.fromEntries(Object.entries(before).map(([k, v]) => [k, { data: new Float32Array(v.data.length).fill(1), shape: v.shape }]));
  const disposed = tf.ones([4]);
  disposed.dispose();
  const edited = tf.ones([2]);
  edited.shape[0] = 4;
  const hint = /\(convert it first: x\.astype\(np\.float32\) in NumPy, tf\.cast\(t, 'float32'\) in tfjs\)/;
  // The bad one last, so that a loader assigning as it goes would have changed the others.
  const cases = [
    [{ data: new Float32Array(3), shape: [4] }, RangeError, /^loadStateDict: output_proj\.bias has shape \[4\] \(4 elements\) but 3 numbers$/],
    [tf.ones([4], 'int32'), TypeError, /^loadStateDict: output_proj\.bias is a int32 tf\.Tensor, expected float32/],
    [tf.ones([4], 'bool'), TypeError, /^loadStateDict: output_proj\.bias is a bool tf\.Tensor, expected float32/],
    [disposed, TypeError, /^loadStateDict: output_proj\.bias is a disposed tf\.Tensor, expected a live float32 tensor$/],
    [edited, RangeError, /^loadStateDict: output_proj\.bias has shape \[4\] \(4 elements\) but holds 2 values/],
    [{ data: new Int32Array(4), shape: [4] }, TypeError, /^loadStateDict: output_proj\.bias has Int32Array data, expected float32 \('<f4'\)/],
    [serializeNpy({ data: new Int32Array(4), shape: [4] }), TypeError, /^loadStateDict: output_proj\.bias has (<i4|int32) data, expected float32 \('<f4'\)/],
  ];
  for (const [bad, type, message] of cases) {
    assert.throws(() => layer.loadStateDict({ ...ones(), 'output_proj.bias': bad }), (e) => e instanceof type && message.test(e.message), String(message));
    assert.deepEqual(layer.stateDict(), before, `${message}: nothing assigned`);
  }
  assert.throws(() => layer.loadStateDict({ ...ones(), 'output_proj.bias': tf.ones([4], 'int32') }), hint);
  assert.throws(() => layer.loadStateDict({ ...ones(), 'output_proj.bias': { data: new Int32Array(4), shape: [4] } }), hint);
  // Still usable: reads work and a good dict loads.
  layer.loadStateDict(ones());
  assert.ok(layer.parameters['output_proj.bias'].dataSync().every((x) => x === 1));
  tf.dispose([cases[1][0], cases[2][0], edited]);
  layer.dispose();
});
