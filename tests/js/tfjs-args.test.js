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

// A .npy file written the way NumPy writes float64 (np.save of a torch tensor's .numpy()
// without .float()).
function f8Npy(values, shape) {
  const header = `{'descr': '<f8', 'fortran_order': False, 'shape': (${shape.join(', ')},), }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  const text = `${header}${' '.repeat(pad % 64)}\n`;
  const bytes = new Uint8Array(10 + text.length + values.length * 8);
  bytes.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, text.length & 255, text.length >> 8]);
  bytes.set(new TextEncoder().encode(text), 10);
  new Float64Array(bytes.buffer, 10 + text.length).set(values);
  return bytes;
}

test('loadStateDict says what went wrong as torch would: a <f8 file named with the astype hint, a prefix without its dot, every missing and unexpected key', async () => {
  await tf.setBackend('cpu');
  const layer = new MSDeformAttn({ d_model: 4, n_heads: 2, n_levels: 1, n_points: 1, seed: 3 });
  const before = layer.stateDict();
  const P = 'transformer.encoder.layers.0.self_attn';
  const npy = (prefix) => Object.fromEntries(Object.entries(before).map(([k, v]) => [prefix + k, serializeNpy(v)]));
  // A float64 file: the parameter's name, the dtype and how to convert (was a bare NpyError).
  const f8 = { ...npy(''), 'output_proj.bias': f8Npy([1, 2, 3, 4], [4]) };
  assert.throws(() => layer.loadStateDict(f8), (e) => e instanceof TypeError
    && /^loadStateDict: output_proj\.bias: unsupported dtype '<f8', expected .* \(convert it first: x\.astype\(np\.float32\) in NumPy/.test(e.message), 'the <f8 file');
  // Other damage in a file: named too, still an NpyError.
  const cut = { ...npy(''), 'output_proj.bias': serializeNpy(before['output_proj.bias']).slice(0, 20) };
  assert.throws(() => layer.loadStateDict(cut), (e) => e.name === 'NpyError' && /^loadStateDict: output_proj\.bias: /.test(e.message));
  // The prefix without its trailing dot: the dotted guess, and the keys torch would list.
  const dict = npy(`${P}.`);
  assert.throws(() => layer.loadStateDict(dict, { prefix: P }), (e) => e instanceof RangeError
    && e.message.startsWith(`loadStateDict: missing parameter '${P}sampling_offsets.weight' (shape [4, 4]); missing key(s) in state_dict: "${P}sampling_offsets.weight", "${P}sampling_offsets.bias",`)
    && e.message.includes(`; did you mean '${P}.'? `)
    && e.message.includes(`; unexpected key(s) in state_dict: "${P}.sampling_offsets.weight", "${P}.sampling_offsets.bias", `), 'no trailing dot');
  // One missing and two unexpected: all named.
  const { 'value_proj.bias': _, ...rest } = npy('');
  assert.throws(() => layer.loadStateDict({ ...rest, 'value_proj.scale': rest['value_proj.weight'], extra: rest['value_proj.weight'] }),
    /^RangeError: loadStateDict: missing parameter 'value_proj\.bias' \(shape \[4\]\); unexpected key\(s\) in state_dict: "value_proj\.scale", "extra"$/);
  assert.deepEqual(layer.stateDict(), before, 'nothing assigned');
  layer.loadStateDict(dict, { prefix: `${P}.` });
  assert.deepEqual(layer.stateDict(), before);
  layer.dispose();
});

// tfjs-core alone registers no gradient for tf.sum or tf.mul: the natural weight-gradient loss
// fails in tfjs's backward, which leaves its tape (and the op's saved tensors) behind. The next
// op or layer call frees them, and the docs' recipe (docs/tfjs.md "Training") gives the same
// gradients as before the failure.
test('after a tf.variableGrads that fails in tfjs-core, the next call frees what tfjs left and the tf.grads recipe gives the same gradients', async () => {
  await tf.setBackend('cpu');
  const layer = new MSDeformAttn({ d_model: 8, n_heads: 2, n_levels: 1, n_points: 1, seed: 5 });
  const q = tf.randomUniform([1, 3, 8], 0, 1, 'float32', 1), ref = tf.randomUniform([1, 3, 1, 2], 0, 1, 'float32', 2);
  const input = tf.randomUniform([1, 16, 8], 0, 1, 'float32', 3), dy = tf.randomUniform([1, 3, 8], 0, 1, 'float32', 4);
  const weights = layer.trainableWeights;
  const recipe = () => tf.grads((..._) => layer.apply(q, ref, input, [[4, 4]]))(weights, dy);
  const first = recipe();
  const bits = first.map((g) => Array.from(g.dataSync()));
  tf.dispose(first);
  const n = tf.memory().numTensors;
  for (const next of ['recipe', 'forward']) {
    // (in a tidy, which frees the loss tfjs made and never returned; the kept copies it leaves)
    assert.throws(() => tf.tidy(() => tf.variableGrads(() => tf.sum(tf.mul(layer.apply(q, ref, input, [[4, 4]]), dy)))),
      /gradient function not found/);
    assert.ok(tf.memory().numTensors > n, 'tfjs left its tape behind');
    if (next === 'recipe') {
      const again = recipe();
      assert.deepEqual(again.map((g) => Array.from(g.dataSync())), bits, 'the same gradients');
      tf.dispose(again);
    } else {
      tf.dispose(layer.apply(q, ref, input, [[4, 4]]));
    }
    assert.equal(tf.memory().numTensors, n, `${next} after the failure: nothing of the failed call left`);
    assert.equal(tf.engine().state.activeTape, null);
  }
  tf.dispose([q, ref, input, dy]);
  layer.dispose();
});
