// ms-deform-attn/tfjs on tfjs-backend-cpu and tfjs-backend-wasm: the op's output and gradients
// are the core API's bits; the layer matches PyTorch's MSDeformAttn (tests/fixtures/tfjs, made by
// make_fixture.py) and its initialisation; training lowers a loss without leaking tensors or wasm
// heap; errors name the argument; the demo trains; the typings compile under tsc --strict.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
import { msDeformAttn, msDeformAttnBackward, MSDeformAttn, getMsda, setMsda } from '../../bindings/tfjs.js';
import { init } from '../../bindings/index.js';
import { parseNpy } from '../../bindings/npy.js';
import { OPTION_COMBOS, randomCase, assertClose, rng } from './helpers.js';
import { PATIENCE_MS } from '../patience.js';

tf.enableProdMode(); // no "running in Node.js" banner
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURES = path.join(ROOT, 'tests/fixtures/tfjs');
const TF_BACKENDS = ['cpu', 'wasm'];

async function onBackend(name) {
  assert.ok(await tf.setBackend(name), `tfjs backend ${name} starts`);
  await tf.ready();
}

function sameBits(context, got, want) {
  assert.equal(got.length, want.length, `${context}: length`);
  for (let i = 0; i < want.length; i++) {
    if (!Object.is(got[i], want[i])) assert.fail(`${context}[${i}] is ${got[i]}, expected ${want[i]} (bit for bit)`);
  }
}

const toTensor = (t) => tf.tensor(t.data, t.shape, 'float32');
const opOptions = (args) => ({ spatialShapes: args.spatialShapes, valueLayout: args.valueLayout,
  samplingLocationsLayout: args.samplingLocationsLayout, alignCorners: args.alignCorners, paddingMode: args.paddingMode });

// sum(y * g) with its own gradient: tfjs-core registers no gradients for its built-in ops.
const dot = tf.customGrad((y, g, save) => {
  save([g]);
  return { value: tf.sum(tf.mul(y, g)), gradFunc: (dy, [g1]) => [tf.mul(dy, g1), tf.zerosLike(g1)] };
});
// 0.5 * sum((y - t)^2)
const halfSquaredError = tf.customGrad((y, t, save) => {
  const d = tf.sub(y, t);
  save([d]);
  return { value: tf.mul(tf.sum(tf.square(d)), 0.5), gradFunc: (dy, [d1]) => [tf.mul(dy, d1), tf.neg(tf.mul(dy, d1))] };
});

for (const backend of TF_BACKENDS) {
  test(`tfjs-backend-${backend}: output and tf.grads are msda.forward/backward's bits, every layout and mode`, async () => {
    await onBackend(backend);
    const msda = getMsda();
    let seed = 7000;
    for (const options of OPTION_COMBOS) {
      for (let k = 0; k < 2; k++) {
        const kase = randomCase(seed++, options);
        const { args } = kase;
        const want = msda.forward(args);
        const wantGrads = msda.backward({ ...args, gradOutput: kase.gradOutput });
        const before = tf.memory().numTensors;
        tf.tidy(() => {
          const [v, l, w, dy] = [args.value, args.samplingLocations, args.attentionWeights, kase.gradOutput].map(toTensor);
          const out = msDeformAttn(v, l, w, opOptions(args));
          assert.deepEqual(out.shape, want.shape);
          assert.equal(out.dtype, 'float32');
          sameBits(`seed ${kase.seed} output`, out.dataSync(), want.data);
          const f = (a, b, c) => msDeformAttn(a, b, c, opOptions(args));
          const grads = tf.grads(f)([v, l, w], dy);
          const direct = msDeformAttnBackward(dy, v, l, w, opOptions(args));
          ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights'].forEach((name, i) => {
            assert.deepEqual(grads[i].shape, wantGrads[name].shape, `${name} shape`);
            sameBits(`seed ${kase.seed} tf.grads ${name}`, grads[i].dataSync(), wantGrads[name].data);
            sameBits(`seed ${kase.seed} msDeformAttnBackward ${name}`, direct[i].dataSync(), wantGrads[name].data);
          });
        });
        assert.equal(tf.memory().numTensors, before, `seed ${kase.seed}: tf.tidy leaves nothing behind`);
      }
    }
  });

  test(`tfjs-backend-${backend}: the layer gives PyTorch's output and gradients (fixture, float32 tolerance)`, async () => {
    await onBackend(backend);
    for (const name of ['points', 'boxes']) {
      const dir = path.join(FIXTURES, name);
      const config = JSON.parse(await readFile(path.join(dir, 'config.json'), 'utf8'));
      const files = {};
      for (const f of await readdir(dir)) if (f.endsWith('.npy')) files[f.slice(0, -4)] = await readFile(path.join(dir, f));
      const npy = (key) => parseNpy(files[key]);
      const layer = new MSDeformAttn({ d_model: config.d_model, n_levels: config.n_levels, n_heads: config.n_heads,
        n_points: config.n_points });
      // The .npy bytes of each parameter, by its state_dict name, under a checkpoint's prefix.
      const prefix = 'transformer.encoder.layers.0.self_attn.';
      const dict = {};
      for (const key of Object.keys(layer.parameters)) dict[prefix + key] = files[key];
      dict['transformer.level_embed'] = new Uint8Array(8); // another module's: ignored
      layer.loadStateDict(dict, { prefix });
      const shapes = npy('input_spatial_shapes');
      const spatialShapes = { data: shapes.data, shape: shapes.shape };
      const starts = Array.from(npy('input_level_start_index').data, Number);
      const mask = files.input_padding_mask ? tf.tensor(npy('input_padding_mask').data, npy('input_padding_mask').shape, 'int32') : undefined;
      const t = (key) => toTensor(npy(key));
      const [query, ref, input, gradOutput] = ['query', 'reference_points', 'input_flatten', 'grad_output'].map(t);
      const check = (label, got, key) => assertClose(got.dataSync(), npy(key).data, `${backend} ${name} ${label}`,
        { atol: 1e-5, rtol: 1e-4, scaleTol: 1e-5 });
      const out = layer.apply(query, ref, input, spatialShapes, starts, mask);
      check('output', out, 'output');
      const f = (q, r, x) => layer.apply(q, r, x, spatialShapes, starts, mask);
      const [gq, gr, gx] = tf.grads(f)([query, ref, input], gradOutput);
      check('grad query', gq, 'grad_query');
      check('grad reference_points', gr, 'grad_reference_points');
      check('grad input_flatten', gx, 'grad_input_flatten');
      const { grads } = tf.variableGrads(() => dot(layer.apply(query, ref, input, spatialShapes, starts, mask), gradOutput));
      for (const [key, variable] of Object.entries(layer.parameters)) check(`grad ${key}`, grads[variable.name], `grad_${key}`);
      tf.dispose([query, ref, input, gradOutput, out, gq, gr, gx, mask, ...Object.values(grads)]);
      layer.dispose();
    }
  });
}

test('tf.variableGrads and an optimizer through the op: msda.backward\'s bits, and SGD moves each variable by -lr * its gradient', async () => {
  await onBackend('cpu');
  const kase = randomCase(4242, OPTION_COMBOS[5]);
  const { args } = kase;
  const want = getMsda().backward({ ...args, gradOutput: kase.gradOutput });
  const [v, l, w] = [args.value, args.samplingLocations, args.attentionWeights].map((t) => tf.variable(toTensor(t)));
  const g = toTensor(kase.gradOutput);
  const loss = () => dot(msDeformAttn(v, l, w, opOptions(args)), g);
  const { value, grads } = tf.variableGrads(loss);
  [[v, 'gradValue'], [l, 'gradSamplingLocations'], [w, 'gradAttentionWeights']].forEach(([variable, name]) => {
    sameBits(`tf.variableGrads ${name}`, grads[variable.name].dataSync(), want[name].data);
  });
  const before = [v, l, w].map((x) => x.dataSync().slice());
  tf.train.sgd(0.5).minimize(loss);
  [[v, 'gradValue'], [l, 'gradSamplingLocations'], [w, 'gradAttentionWeights']].forEach(([variable, name], i) => {
    const moved = variable.dataSync();
    for (let k = 0; k < moved.length; k++) {
      const expected = Math.fround(before[i][k] - Math.fround(0.5 * want[name].data[k]));
      if (Number.isFinite(expected) && !Object.is(moved[k], expected)) assert.fail(`sgd ${name}[${k}] is ${moved[k]}, expected ${expected}`);
    }
  });
  tf.dispose([v, l, w, g, value, ...Object.values(grads)]);
});

test('the layer initialises as PyTorch does: sampling_offsets.bias, zeros, xavier_uniform bounds, seeded', async () => {
  await onBackend('cpu');
  const layer = new MSDeformAttn();
  assert.deepEqual([layer.d_model, layer.n_levels, layer.n_heads, layer.n_points], [256, 4, 8, 4]);
  const torchBias = parseNpy(await readFile(path.join(FIXTURES, 'init/sampling_offsets.bias.npy'))).data;
  assertClose(layer.parameters['sampling_offsets.bias'].dataSync(), torchBias, 'sampling_offsets.bias', { atol: 1e-6, rtol: 1e-6 });
  for (const key of ['sampling_offsets.weight', 'attention_weights.weight', 'attention_weights.bias', 'value_proj.bias', 'output_proj.bias']) {
    assert.ok(layer.parameters[key].dataSync().every((x) => x === 0), `${key} is zero`);
  }
  assert.deepEqual(layer.parameters['sampling_offsets.weight'].shape, [256, 256]);
  assert.deepEqual(layer.parameters['attention_weights.weight'].shape, [128, 256]);
  for (const key of ['value_proj.weight', 'output_proj.weight']) {
    const w = layer.parameters[key].dataSync();
    const bound = Math.sqrt(6 / 512);
    const max = w.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    assert.ok(max <= bound && max > 0.95 * bound, `${key}: uniform in ±${bound}, max |w| ${max}`);
  }
  // softmax over levels x points of zero logits: every weight 1/16, so the output is the mean.
  const a = new MSDeformAttn({ d_model: 8, n_heads: 2, n_levels: 1, n_points: 2, seed: 3 });
  const b = new MSDeformAttn({ d_model: 8, n_heads: 2, n_levels: 1, n_points: 2, seed: 3 });
  sameBits('seeded value_proj.weight', a.parameters['value_proj.weight'].dataSync(), b.parameters['value_proj.weight'].dataSync());
  assert.notEqual(a.parameters['value_proj.weight'].name, b.parameters['value_proj.weight'].name, 'variables get unique names');
  assert.throws(() => new MSDeformAttn({ d_model: 10, n_heads: 4 }), /d_model must be divisible by n_heads, but got 10 and 4/);
  assert.throws(() => new MSDeformAttn({ dModel: 8 }), TypeError);
  [layer, a, b].forEach((l) => l.dispose());
});

test('loadStateDict: by name, under a prefix, from tensors, { data, shape } or .npy; strict errors change nothing', async () => {
  await onBackend('cpu');
  const layer = new MSDeformAttn({ d_model: 4, n_heads: 2, n_levels: 1, n_points: 1 });
  const state = layer.stateDict();
  const ones = Object.fromEntries(Object.entries(state).map(([k, v]) => [k, { data: new Float32Array(v.data.length).fill(1), shape: v.shape }]));
  const before = layer.stateDict();
  assert.throws(() => layer.loadStateDict({ ...ones, 'value_proj.weight': { data: new Float32Array(4), shape: [2, 2] } }),
    /value_proj.weight has shape \[2, 2\], expected \[4, 4\]/);
  const { 'output_proj.bias': _, ...missing } = ones;
  assert.throws(() => layer.loadStateDict(missing), /missing parameter 'output_proj.bias' \(shape \[4\]\)/);
  assert.throws(() => layer.loadStateDict({ ...ones, 'value_proj.scale': ones['value_proj.bias'] }), /unexpected parameter 'value_proj.scale'/);
  assert.throws(() => layer.loadStateDict({ ...ones, 'value_proj.bias': { data: new Int32Array(4), shape: [4] } }), /float32/);
  assert.deepEqual(layer.stateDict(), before, 'a refused dict changes nothing');
  layer.loadStateDict(missing, { strict: false });
  assert.ok(layer.parameters['value_proj.weight'].dataSync().every((x) => x === 1));
  assert.deepEqual(Array.from(layer.parameters['output_proj.bias'].dataSync()), Array.from(before['output_proj.bias'].data), 'not strict: the missing one stays');
  const asTensors = Object.fromEntries(Object.entries(before).map(([k, v]) => [`m.${k}`, tf.tensor(v.data, v.shape)]));
  layer.loadStateDict(asTensors, { prefix: 'm.' });
  assert.deepEqual(layer.stateDict(), before);
  tf.dispose(Object.values(asTensors));
  layer.dispose();
});

for (const [backend, steps] of [['cpu', 1000], ['wasm', 300]]) test(`tfjs-backend-${backend}: training the layer with an optimizer lowers the loss; tensors, tfjs's bytes and the wasm heap stay flat over ${steps} steps`, async () => {
  await onBackend(backend);
  const r = rng(42);
  const spatialShapes = [[4, 4], [2, 2]];
  const fill = (shape) => tf.tensor(Float32Array.from({ length: shape.reduce((a, b) => a * b) }, () => r.uniform(-1, 1)), shape);
  const teacher = new MSDeformAttn({ d_model: 8, n_heads: 2, n_levels: 2, n_points: 2, seed: 1 });
  const student = new MSDeformAttn({ d_model: 8, n_heads: 2, n_levels: 2, n_points: 2, seed: 2 });
  teacher.loadStateDict(Object.fromEntries(Object.entries(teacher.stateDict()).map(([k, v]) => [k, { data: v.data.map((x) => x + 0.3 * r.uniform(-1, 1)), shape: v.shape }])));
  const query = fill([2, 3, 8]), input = fill([2, 20, 8]);
  const ref = tf.tensor(Float32Array.from({ length: 2 * 3 * 2 * 2 }, () => r.uniform(0.2, 0.8)), [2, 3, 2, 2]);
  const target = teacher.apply(query, ref, input, spatialShapes);
  const optimizer = tf.train.adam(0.01);
  const step = () => optimizer.minimize(() => halfSquaredError(student.apply(query, ref, input, spatialShapes), target), true);
  const loss0 = step();
  const first = loss0.dataSync()[0];
  loss0.dispose();
  const tensors = tf.memory().numTensors, bytes = tf.memory().numBytes;
  const heap = getMsda().wasm.heapInUse();
  let last;
  for (let i = 0; i < steps; i++) {
    const loss = step();
    if (i === steps - 1) last = loss.dataSync()[0];
    loss.dispose();
    if (i % 100 === 99) {
      assert.equal(tf.memory().numTensors, tensors, `tensors after ${i + 1} steps`);
      assert.equal(tf.memory().numBytes, bytes, `tfjs's bytes after ${i + 1} steps`);
    }
  }
  assert.equal(getMsda().wasm.heapInUse(), heap, 'the wasm heap is as before');
  assert.ok(last < (steps >= 1000 ? 0.05 : 0.2) * first, `loss ${first} -> ${last}`);
  // tf.grads on the op inside tf.tidy: only what tidy returns survives.
  const v = fill([1, 20, 2, 4]), l = tf.tensor(Float32Array.from({ length: 2 * 2 * 2 * 2 * 2 }, () => r()), [1, 2, 2, 2, 2, 2]);
  const w = fill([1, 2, 2, 2, 2]);
  const n = tf.memory().numTensors;
  const kept = tf.tidy(() => tf.grads((a, b, c) => msDeformAttn(a, b, c, { spatialShapes }))([v, l, w], fill([1, 2, 8]))[1]);
  assert.equal(tf.memory().numTensors, n + 1);
  kept.dispose();
  optimizer.dispose();
  tf.dispose([query, input, ref, target, v, l, w]);
  teacher.dispose();
  student.dispose();
});

test('bad input: errors name the argument, the expected and the actual value, and leave nothing behind', async () => {
  await onBackend('cpu');
  const v = tf.zeros([1, 20, 2, 4]), l = tf.zeros([1, 3, 2, 2, 2, 2]), w = tf.zeros([1, 3, 2, 2, 2]);
  const spatialShapes = [[4, 4], [2, 2]];
  const [vInt, vLong, lBad, wBad, dyBad] = [tf.zeros([1, 20, 2, 4], 'int32'), tf.zeros([1, 21, 2, 4]), tf.zeros([1, 3, 2, 2, 2, 3]),
    tf.zeros([1, 3, 2, 2, 1]), tf.zeros([1, 3, 7])];
  const n = tf.memory().numTensors;
  const heap = getMsda().wasm.heapInUse();
  const cases = [
    [() => msDeformAttn(vInt, l, w, { spatialShapes }), TypeError, /Argument 'value' passed to 'msDeformAttn' must be float32 tensor, but got int32 tensor/],
    [() => msDeformAttn(v, 'x', w, { spatialShapes }), TypeError, /Argument 'samplingLocations' passed to 'msDeformAttn' must be a Tensor or TensorLike, but got the string "x"/],
    [() => msDeformAttn(vLong, l, w, { spatialShapes }), RangeError, /^msDeformAttn: value\.shape is \[1, 21, 2, 4\], expected \[B, 20, N_h, C_h\] \(L must be 20; L = 20 is the sum of H\*W over spatialShapes\)$/],
    [() => msDeformAttn(v, lBad, w, { spatialShapes }), RangeError, /^msDeformAttn: samplingLocations\.shape is \[1, 3, 2, 2, 2, 3\], expected \[1, N_q, 2, 2, N_p, 2\]/],
    [() => msDeformAttn(v, l, wBad, { spatialShapes }), RangeError, /^msDeformAttn: attentionWeights\.shape is \[1, 3, 2, 2, 1\], expected \[1, 3, 2, 2, 2\] \(N_p must be 2; /],
    [() => msDeformAttn(v, l, w), TypeError, /options is missing/],
    [() => msDeformAttn(v, l, w, {}), TypeError, /spatialShapes is missing/],
    [() => msDeformAttn(v, l, w, { spatialShapes, padding: 'zeros' }), TypeError, /unknown option 'padding'/],
    [() => msDeformAttn(v, l, w, { spatialShapes, paddingMode: 'reflect' }), RangeError, /paddingMode is 'reflect', expected one of 'zeros', 'border'/],
    [() => msDeformAttn(v, l, w, { spatialShapes: [[4, 0], [2, 2]] }), RangeError, /spatialShapes\[0\] is \[4, 0\]/],
    [() => msDeformAttn(v, l, w, { spatialShapes: [['4', 4], [2, 2]] }), TypeError, /spatialShapes\[0\]\[0\] is the string "4", expected an integer/],
    [() => msDeformAttn(v, l, w, { spatialShapes, levelStartIndex: [0, 15] }), RangeError, /levelStartIndex is \[0, 15\], expected \[0, 16\]/],
    [() => msDeformAttnBackward(dyBad, v, l, w, { spatialShapes }), RangeError, /^msDeformAttnBackward: dy\.shape is \[1, 3, 7\], expected \[1, 3, 8\] \(N_h\*C_h must be 8; /],
    [() => setMsda({}), TypeError, /setMsda: instance is Object/],
  ];
  for (const [call, type, message] of cases) {
    assert.throws(call, (e) => e instanceof type && message.test(e.message), `${message}`);
  }
  // The shapes are derived and checked by the core (core/problem.js readShapes): the JS API's words.
  const api = getMsda();
  const plain = (t) => ({ data: t.dataSync(), shape: t.shape });
  for (const [op, args] of [[() => msDeformAttn(vLong, l, w, { spatialShapes }), { value: vLong, samplingLocations: l, attentionWeights: w }],
    [() => msDeformAttn(v, lBad, w, { spatialShapes }), { value: v, samplingLocations: lBad, attentionWeights: w }],
    [() => msDeformAttn(v, l, wBad, { spatialShapes }), { value: v, samplingLocations: l, attentionWeights: wBad }]]) {
    const caught = (f) => { try { f(); } catch (e) { return e; } assert.fail('did not throw'); };
    const a = caught(() => api.forward({ spatialShapes, ...Object.fromEntries(Object.entries(args).map(([k, t]) => [k, plain(t)])) }));
    assert.equal(caught(op).message.replace(/^msDeformAttn: /, ''), a.message.replace(/^forward: /, ''));
  }
  assert.equal(tf.memory().numTensors, n, 'no tensors of the failed calls are left behind');
  assert.equal(getMsda().wasm.heapInUse(), heap);
  // Tensor-valued shapes, { data, shape } tables and TensorLike inputs are accepted.
  const shapesTensor = tf.tensor([[4, 4], [2, 2]], [2, 2], 'int32');
  const a = msDeformAttn(v, l, w, { spatialShapes: shapesTensor, levelStartIndex: tf.tensor([0, 16], [2], 'int32') });
  const b = msDeformAttn(v.arraySync(), l, w, { spatialShapes: { data: [4, 4, 2, 2], shape: [2, 2] } });
  sameBits('TensorLike value', a.dataSync(), b.dataSync());
  tf.dispose([v, l, w, a, b, shapesTensor, vInt, vLong, lBad, wBad, dyBad]);
});

test('the layer\'s apply: shape errors name the tensor and what was expected, and leave nothing behind', async () => {
  await onBackend('cpu');
  const layer = new MSDeformAttn({ d_model: 8, n_heads: 2, n_levels: 2, n_points: 1, seed: 1 });
  const shapes = [[4, 4], [2, 2]];
  const [q, ref, ref3, input, mask] = [tf.zeros([1, 3, 8]), tf.zeros([1, 3, 2, 2]), tf.zeros([1, 3, 2, 3]), tf.zeros([1, 20, 8]),
    tf.zeros([1, 19], 'bool')];
  const n = tf.memory().numTensors;
  for (const [call, message] of [
    [() => layer.apply(tf.zeros([1, 3, 6]), ref, input, shapes), /^MSDeformAttn: query\.shape is \[1, 3, 6\], expected \[N, Len_q, 8\] \(d_model must be 8\)$/],
    [() => layer.apply(q, ref3, input, shapes), /^MSDeformAttn: referencePoints\.shape is \[1, 3, 2, 3\], expected \[1, 3, 2, 2 or 4\] \(\[N, Len_q, n_levels, 2 or 4\]/],
    [() => layer.apply(q, ref, tf.zeros([1, 21, 8]), shapes), /^MSDeformAttn: inputFlatten\.shape is \[1, 21, 8\], expected \[1, 20, 8\] \(Len_in must be 20; /],
    [() => layer.apply(q, ref, input, [[4, 4]]), /inputSpatialShapes has 1 levels, expected n_levels = 2/],
    [() => layer.apply(q, ref, input, shapes, null, mask), /^MSDeformAttn: inputPaddingMask\.shape is \[1, 19\], expected \[1, 20\] \(Len_in must be 20; /],
  ]) {
    assert.throws(call, (e) => e instanceof RangeError && message.test(e.message), String(message));
  }
  assert.equal(tf.memory().numTensors, n + 2, 'only the test\'s own two misshapen zeros remain');
  tf.dispose([q, ref, ref3, input, mask]);
  layer.dispose();
});

test('tfjs-backend-wasm: the op\'s forward on one wasm thread is the copying call (it streams queries), with threads a prepared problem', async () => {
  await onBackend('wasm');
  const kase = randomCase(4321, OPTION_COMBOS[5]);
  const inputs = () => [kase.args.value, kase.args.samplingLocations, kase.args.attentionWeights].map(toTensor);
  const one = getMsda();
  const two = await init({ threads: 2 });
  try {
    for (const [instance, want] of [[one, { forward: 1, prepare: 0 }], [two, { forward: 0, prepare: 1 }]]) {
      const calls = { forward: 0, prepare: 0 };
      for (const name of Object.keys(calls)) {
        instance[name] = function (...a) {
          calls[name]++;
          return Object.getPrototypeOf(this)[name].apply(this, a);
        };
      }
      setMsda(instance);
      try {
        const got = tf.tidy(() => msDeformAttn(...inputs(), opOptions(kase.args)).dataSync());
        assert.deepEqual(calls, want, `threads ${instance.threads}`);
        sameBits(`threads ${instance.threads} output`, got, one.forward(kase.args).data);
      } finally {
        delete instance.forward;
        delete instance.prepare;
      }
    }
  } finally {
    setMsda(one);
    two.dispose();
  }
});

test('setMsda: the op runs on another instance (the scalar module) with that instance\'s bits', async () => {
  await onBackend('cpu');
  const scalar = await init({ simd: false });
  const simdInstance = getMsda();
  const kase = randomCase(99, OPTION_COMBOS[0]);
  const run = () => tf.tidy(() => msDeformAttn(...[kase.args.value, kase.args.samplingLocations, kase.args.attentionWeights].map(toTensor),
    opOptions(kase.args)).dataSync());
  setMsda(scalar);
  try {
    assert.equal(getMsda(), scalar);
    sameBits('scalar module output', run(), scalar.forward(kase.args).data);
  } finally {
    setMsda(simdInstance);
  }
});

test('demo/tfjs-train.js trains the layer in Node with a progress bar; the loss goes down', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'demo/tfjs-train.js'), '--steps', '60'], { cwd: ROOT, encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.status, 0, r.stderr + r.stdout);
  assert.match(r.stderr, /60\/60/, 'the progress bar reaches the end');
  const m = /loss (\S+) → (\S+) after 60 steps/.exec(r.stdout);
  assert.ok(m, r.stdout);
  assert.ok(Number(m[2]) < 0.5 * Number(m[1]), `loss ${m[1]} -> ${m[2]}`);
  assert.equal(spawnSync(process.execPath, [path.join(ROOT, 'demo/tfjs-train.js'), '--steps', 'x'], { cwd: ROOT }).status, 2);
});

test('tfjs.d.ts: tsc --strict accepts the typed usage file and rejects misuse', async () => {
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  const args = ['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022',
    '--types', 'node', 'tests/js/types/tfjs-usage.ts'];
  let output = '';
  try {
    await promisify(execFile)(process.execPath, [tsc, ...args], { cwd: ROOT });
  } catch (e) {
    output = `${e.stdout}${e.stderr}`;
  }
  // tfjs-core 4.22's own typings clash with this TypeScript's lib.dom (its WebGPU types, @types/long
  // left out by --types): users pass --skipLibCheck. Everything outside node_modules must be clean.
  const ours = output.split('\n').filter((line) => line.trim() !== '' && !line.startsWith('node_modules/') && !line.startsWith(' '));
  assert.deepEqual(ours, [], `tsc reported errors:\n${output}`);
  assert.doesNotMatch(output, /bindings\/|tests\/js\/types\//);
});

test('npm pack + install next to the user\'s tfjs-core: ms-deform-attn/tfjs imports by name and uses that one copy', async () => {
  const { mkdtemp, rm, writeFile, mkdir, symlink } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const run = promisify(execFile);
  const env = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
  const dir = await mkdtemp(path.join(tmpdir(), 'msda-tfjs-'));
  try {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: ROOT, env });
    const [{ filename }] = JSON.parse(stdout);
    await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
    // The optional peer is not installed with the package (and nothing is fetched: --offline).
    await run('npm', ['install', '--offline', path.join(dir, filename)], { cwd: dir, env });
    await assert.rejects(readdir(path.join(dir, 'node_modules/@tensorflow')), 'tfjs-core is not installed with the package');
    // The user's own tfjs (this repository's copies, linked in place of an install).
    await mkdir(path.join(dir, 'node_modules/@tensorflow'));
    for (const name of ['tfjs-core', 'tfjs-backend-cpu']) {
      await symlink(path.join(ROOT, 'node_modules/@tensorflow', name), path.join(dir, 'node_modules/@tensorflow', name), 'dir');
    }
    await writeFile(path.join(dir, 'use.mjs'), `
      import * as tf from '@tensorflow/tfjs-core';
      import '@tensorflow/tfjs-backend-cpu';
      import { msDeformAttn, MSDeformAttn } from 'ms-deform-attn/tfjs';
      tf.enableProdMode();
      await tf.setBackend('cpu');
      const out = msDeformAttn(tf.ones([1, 4, 1, 1]), tf.fill([1, 1, 1, 1, 1, 2], 0.5), tf.fill([1, 1, 1, 1, 1], 2), { spatialShapes: [[2, 2]] });
      const layer = new MSDeformAttn({ d_model: 4, n_heads: 2, n_levels: 1, n_points: 1, seed: 1 });
      const y = layer.apply(tf.ones([1, 2, 4]), tf.fill([1, 2, 1, 2], 0.5), tf.ones([1, 4, 4]), [[2, 2]]);
      // Tensors of the user's tfjs: one copy of tfjs-core, the user's.
      console.log(JSON.stringify({ out: Array.from(out.dataSync()), y: y.shape, same: out instanceof tf.Tensor && y instanceof tf.Tensor }));
    `);
    const r = await run(process.execPath, ['use.mjs'], { cwd: dir });
    assert.deepEqual(JSON.parse(r.stdout), { out: [2], y: [1, 2, 4], same: true });
    // docs/tfjs.md's Training recipe, as the package ships it, run as written on .npy inputs.
    const doc = await readFile(path.join(dir, 'node_modules/ms-deform-attn/docs/tfjs.md'), 'utf8');
    const recipe = doc.split('\n## Training\n')[1]?.match(/```js\n([\s\S]*?)```/)?.[1];
    assert.ok(recipe, 'docs/tfjs.md has a Training section with a js block');
    const { serializeNpy } = await import('../../bindings/npy.js');
    await mkdir(path.join(dir, 'inputs'));
    const r2 = rng(40);
    const npy = (shape, lo, hi) => serializeNpy({ data: Float32Array.from({ length: shape.reduce((a, b) => a * b) }, () => r2.uniform(lo, hi)), shape });
    for (const [name, shape, lo, hi] of [['query', [1, 10, 32], -1, 1], ['reference_points', [1, 10, 2, 2], 0.1, 0.9],
      ['input_flatten', [1, 80, 32], -1, 1], ['target', [1, 10, 32], -0.5, 0.5]]) {
      await writeFile(path.join(dir, 'inputs', `${name}.npy`), npy(shape, lo, hi));
    }
    await writeFile(path.join(dir, 'train.mjs'), `${recipe}
console.log(JSON.stringify({ grads: grads.map((g) => g.shape), weights: attn.trainableWeights.map((v) => v.shape) }));`);
    const t = await run(process.execPath, ['train.mjs'], { cwd: dir });
    const lines = t.stdout.trim().split('\n');
    const losses = lines.filter((l) => l.startsWith('step ')).map((l) => Number(l.split('loss ')[1]));
    assert.equal(losses.length, 4, t.stdout);
    assert.ok(losses.every(Number.isFinite) && losses[3] < losses[0], `the loss goes down: ${losses}`);
    const { grads, weights } = JSON.parse(lines.at(-1));
    assert.equal(grads.length, 8, 'a gradient for each of the eight parameters');
    assert.deepEqual(grads, weights, 'each of its parameter\'s shape');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
