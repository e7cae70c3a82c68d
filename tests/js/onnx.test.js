// ms-deform-attn/onnx (bindings/onnx.js): every fixture of tests/fixtures/onnx (Deformable DETR's,
// Hugging Face's, mmcv's and RT-DETR's formulations, opsets 16 to 20) through createSession
// on onnxruntime-node and on onnxruntime-web's wasm EP, against ORT's own run of the unmodified
// model and PyTorch's outputs; a block whose ORT run disagrees with the op is left to ORT; bad
// arguments are named.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { inflateRawSync } from 'node:zlib';
import * as ortNode from 'onnxruntime-node';
import * as ortWeb from 'onnxruntime-web';
import { init } from '../../bindings/index.js';
import { parseNpz } from '../../bindings/cli/npz.js';
import { parseNpy } from '../../bindings/npy.js';
import { createSession } from '../../bindings/onnx.js';
import { decodeModel, encodeModel, Graph, loadOnnx, subModel } from '../../bindings/onnx/model.js';

ortWeb.env.wasm.numThreads = 1;
const fixture = (name) => new URL(`../fixtures/onnx/${name}`, import.meta.url);
// name: [blocks, batch, queries]
const ENCODER = [2, 1, 106], DECODER = [1, 2, 12], LAYER = [1, 1, 106];
const FIXTURES = {
  'detr-encoder': ENCODER, 'detr-decoder': DECODER, 'detr-decoder-dynamic': DECODER, 'hf-encoder': ENCODER, 'mmcv-encoder': ENCODER, 'rtdetr-decoder': DECODER,
  // opsets 18-20: one encoder layer written at 16, converted by hand (make_fixtures.py's to_opset)
  'detr-layer-opset18': LAYER, 'detr-layer-opset19': LAYER, 'detr-layer-opset20': LAYER,
};
const RUNTIMES = [['onnxruntime-node', ortNode, ['cpu']], ['onnxruntime-web (wasm EP)', ortWeb, ['wasm']]];
// The blocks are held to crosscheck's bound when verified; through the layers after them (output
// projection, residual, LayerNorm, FFN) the models' outputs, of unit scale, differ from ORT's by
// float32 roundings.
const MODEL_TOL = 1e-5;

const msda = await init();
await loadOnnx();

function inputsOf(name) {
  const members = parseNpz(readFileSync(fixture(`${name.replace(/-opset\d+$/, '')}.npz`)), (b) => inflateRawSync(b));
  return (key) => parseNpy(members.get(`${key}.npy`).read());
}

function maxDiff(a, b) {
  assert.equal(a.length, b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

for (const [runtime, ort, executionProviders] of RUNTIMES) {
  for (const [name, [count, batch, queries]] of Object.entries(FIXTURES)) {
    test(`${name} on ${runtime}: every block found, verified and replaced; outputs are ORT's and PyTorch's`, async () => {
      const bytes = readFileSync(fixture(`${name}.onnx`));
      const opset = Number(/-opset(\d+)$/.exec(name)?.[1] ?? (name.startsWith('hf-') ? 17 : 16));
      assert.deepEqual(decodeModel(bytes).opset_import.map((o) => [o.domain, Number(o.version)]), [['', opset]]);
      const session = await createSession(ort, bytes, { executionProviders, msda });
      const plain = await ort.InferenceSession.create(bytes, { executionProviders });
      try {
        const { blocks, notBlocks } = session.report;
        assert.equal(blocks.length, count, 'blocks found');
        assert.deepEqual(notBlocks, []);
        const read = inputsOf(name);
        const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float32', a.data, a.shape)]; }));
        if (name.endsWith('-dynamic')) {
          for (const b of blocks) assert.match(b.why, /not read yet: the model's input tgt has a dynamic shape/);
          await session.run(feeds);
        }
        for (const b of blocks) {
          assert.equal(b.replaced, true, `block ${b.id}: ${b.why}`);
          assert.deepEqual(b.levels, [[8, 10], [4, 5], [2, 3]]);
          assert.equal(b.heads, 4);
          assert.equal(b.channels, 16);
          assert.equal(b.points, 2);
          assert.equal(b.queries, queries);
          assert.equal(b.batch, batch);
          assert.equal(b.verification.worst, null);
          assert.equal(b.nodes.gridSample.length, 3);
          // mmcv's spatial_shapes tensor: the value cut by one Slice per level, not a Split.
          if (name.startsWith('mmcv')) assert.deepEqual(b.nodes.slices, ['', '_1', '_2'].map((k) => `/attn.${b.id}/Slice${k}`));
          else assert.equal(typeof b.nodes.split, 'string');
        }
        assert.deepEqual(session.inputNames, plain.inputNames);
        assert.deepEqual(session.outputNames, plain.outputNames);
        const ours = await session.run(feeds), theirs = await plain.run(feeds);
        for (const out of session.outputNames) {
          assert.deepEqual([...ours[out].dims], [...theirs[out].dims]);
          assert.ok(maxDiff(ours[out].data, theirs[out].data) <= MODEL_TOL, `${out}: ${maxDiff(ours[out].data, theirs[out].data)} from ORT's run`);
          assert.ok(maxDiff(ours[out].data, read(`expected/${out}`).data) <= MODEL_TOL, `${out}: from PyTorch's`);
        }
        if (name.endsWith('-dynamic')) {
          // Other shapes: batch 1, 5 queries (the first ones of the fixture's), read and chained anew.
          const cut = (n) => { const t = feeds[n], [, q, d] = t.dims, qn = n === 'memory' ? q : 5; return new ort.Tensor('float32', t.data.slice(0, qn * d), [1, qn, d]); };
          const small = Object.fromEntries(session.inputNames.map((n) => [n, cut(n)]));
          const a = await session.run(small), b = await plain.run(small);
          assert.deepEqual([...a.hs.dims], [1, 5, 64]);
          assert.ok(maxDiff(a.hs.data, b.hs.data) <= MODEL_TOL, 'batch 1, 5 queries');
          assert.equal(blocks[0].queries, 5, 'the report says what the last shapes were read as');
          assert.equal(blocks[0].replaced, true);
        }
      } finally {
        await session.release();
        await plain.release();
      }
    });
  }
}

test("the opset 18-20 fixtures are written in their opset's forms, which the runs above read", () => {
  for (const opset of [18, 19, 20]) {
    const { graph } = decodeModel(readFileSync(fixture(`detr-layer-opset${opset}.onnx`)));
    const means = graph.node.filter((n) => n.op_type === 'ReduceMean'), grids = graph.node.filter((n) => n.op_type === 'GridSample');
    assert.equal(means.length, 4, "LayerNorm's ReduceMean nodes (written at opset 16)");
    for (const n of means) assert.ok(n.input.length === 2 && !n.attribute.some((a) => a.name === 'axes'), `${n.name}: axes as an input (opset 18)`);
    for (const n of grids) assert.equal(Buffer.from(n.attribute.find((a) => a.name === 'mode').s).toString(), opset >= 20 ? 'linear' : 'bilinear');
  }
});

// Deployment exports with the op as one node (TensorRT's plugin as NVIDIA TAO writes it, mmdeploy's
// op): ORT cannot run them at all; createSession chains around them, to PyTorch's outputs.
const PLUGIN_FIXTURES = { 'trt-encoder': ['MultiscaleDeformableAttnPlugin_TRT', 4], 'mmdeploy-encoder': ['MMCVMultiScaleDeformableAttention', 3] };
for (const [runtime, ort, executionProviders] of RUNTIMES) {
  for (const [name, [op]] of Object.entries(PLUGIN_FIXTURES)) {
    test(`${name} on ${runtime}: its ${op} nodes run on the op, the rest on ORT, to PyTorch's outputs`, async () => {
      const bytes = readFileSync(fixture(`${name}.onnx`));
      await assert.rejects(ort.InferenceSession.create(bytes, { executionProviders }), /MultiscaleDeformableAttnPlugin_TRT|MMCVMultiScaleDeformableAttention|mmdeploy/, 'ORT alone cannot run it');
      const session = await createSession(ort, bytes, { executionProviders, msda });
      try {
        const { blocks, notBlocks } = session.report;
        assert.deepEqual(notBlocks, []);
        assert.equal(blocks.length, 2);
        for (const [k, b] of blocks.entries()) {
          assert.equal(b.replaced, true, b.why);
          assert.equal(b.nodes.plugin, `/layers.${k}/self_attn/${op}`);
          assert.match(b.formulation, new RegExp(op));
          assert.deepEqual([b.batch, b.queries, b.heads, b.channels, b.points], [1, 106, 4, 16, 2]);
          assert.deepEqual(b.levels, [[8, 10], [4, 5], [2, 3]]);
          assert.equal(b.verification, null, 'no ORT run to compare with');
        }
        const read = inputsOf(name);
        const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float32', a.data, a.shape)]; }));
        const ours = await session.run(feeds);
        assert.deepEqual([...ours.memory.dims], [1, 106, 64]);
        assert.ok(maxDiff(ours.memory.data, read('expected/memory').data) <= MODEL_TOL, `${maxDiff(ours.memory.data, read('expected/memory').data)} from PyTorch's`);
      } finally {
        await session.release();
      }
    });
  }
}

// A graph with both kinds (Deformable DETR's layer, a TensorRT plugin node's, Deformable DETR's):
// one plan cuts it at all three, each GridSample block verified on the tensors of the stages before it.
for (const [runtime, ort, executionProviders] of RUNTIMES) {
  test(`mixed-encoder on ${runtime}: its GridSample blocks and its plugin node all run on the op, to PyTorch's outputs`, async () => {
    let calls = 0;
    const counted = { backend: msda.backend, forward: (...a) => { calls++; return msda.forward(...a); } };
    const session = await createSession(ort, readFileSync(fixture('mixed-encoder.onnx')), { executionProviders, msda: counted });
    try {
      const { blocks, notBlocks } = session.report;
      assert.deepEqual(notBlocks, []);
      assert.deepEqual(blocks.map((b) => b.nodes.plugin ?? b.nodes.reduceSum),
        ['/layers.0/self_attn/ReduceSum', '/layers.1/self_attn/MultiscaleDeformableAttnPlugin_TRT', '/layers.2/self_attn/ReduceSum'], 'in the graph\'s order');
      for (const b of blocks) {
        assert.equal(b.replaced, true, `block ${b.id}: ${b.why}`);
        assert.deepEqual([b.batch, b.queries, b.heads, b.channels, b.points], [1, 106, 4, 16, 2]);
        assert.deepEqual(b.levels, [[8, 10], [4, 5], [2, 3]]);
      }
      assert.equal(blocks[1].verification, null, 'no ORT run of the plugin node');
      assert.equal(blocks[1].levelsFrom, 'constants');
      for (const b of [blocks[0], blocks[2]]) assert.deepEqual([b.verification.worst, b.verification.checked], [null, 24 * 64]);
      const read = inputsOf('mixed-encoder');
      const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float32', a.data, a.shape)]; }));
      calls = 0;
      const ours = await session.run(feeds);
      assert.equal(calls, 3, 'each run calls the op once per block');
      assert.deepEqual([...ours.memory.dims], [1, 106, 64]);
      assert.ok(maxDiff(ours.memory.data, read('expected/memory').data) <= MODEL_TOL, `${maxDiff(ours.memory.data, read('expected/memory').data)} from PyTorch's`);
    } finally {
      await session.release();
    }
  });
}

test('mixed-encoder with its first block made to disagree: that block stays with ORT, as a session of its own between the stages', async () => {
  const model = decodeModel(readFileSync(fixture('mixed-encoder.onnx')));
  model.graph.node.find((n) => n.name === '/layers.0/self_attn/Concat_6').input.reverse();
  // What the plugin node reads as its value, made by the first layer: an output too, to hold to ORT's run of the nodes before it.
  const plugin = model.graph.node.findIndex((n) => n.op_type === 'MultiscaleDeformableAttnPlugin_TRT');
  const value = model.graph.node[plugin].input[0];
  model.graph.output.push({ name: value });
  let calls = 0;
  const counted = { backend: msda.backend, forward: (...a) => { calls++; return msda.forward(...a); } };
  const session = await createSession(ortNode, encodeModel(model), { executionProviders: ['cpu'], msda: counted });
  const graph = new Graph(model);
  const prefix = subModel(graph, graph.nodes.map((_, i) => i).filter((i) => i < plugin), ['src', 'pos'].map((name) => ({ name, type: 'float32', shape: [1, 106, 64] })), [{ name: value, type: 'float32' }], 'prefix');
  const plain = await ortNode.InferenceSession.create(encodeModel(prefix));
  try {
    const [first, second, third] = session.report.blocks;
    assert.equal(first.replaced, false);
    assert.match(first.why, /disagree beyond crosscheck's bound/);
    assert.deepEqual([second.replaced, third.replaced], [true, true], `${second.why} ${third.why}`);
    const read = inputsOf('mixed-encoder');
    const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ortNode.Tensor('float32', a.data, a.shape)]; }));
    calls = 0;
    const ours = await session.run(feeds), theirs = await plain.run(feeds);
    assert.equal(calls, 2, 'the op runs the two other blocks');
    assert.ok(maxDiff(ours[value].data, theirs[value].data) <= MODEL_TOL, 'the first layer is run as ORT runs it');
    assert.ok(maxDiff(ours.memory.data, read('expected/memory').data) > 1e-3, 'and it is not the unmodified model');
  } finally {
    await session.release();
    await plain.release();
  }
});

// Plugin nodes whose spatial_shapes and level_start_index the graph computes (from the feature
// maps' Shape, or given as an input): read from each run, held to each other and to the value.
const feedsOf = (session, name, ort) => {
  const read = inputsOf(name);
  return [read, Object.fromEntries(session.inputNames.filter((n) => n !== 'spatial_shapes').map((n) => { const a = read(n); return [n, new ort.Tensor('float32', a.data, a.shape)]; }))];
};
for (const [runtime, ort, executionProviders] of RUNTIMES) {
  test(`trt-encoder-shapes on ${runtime}: spatial_shapes computed from the feature maps' shapes are read at run time`, async () => {
    const session = await createSession(ort, readFileSync(fixture('trt-encoder-shapes.onnx')), { executionProviders, msda });
    try {
      const { blocks } = session.report;
      assert.equal(blocks.length, 2);
      for (const b of blocks) assert.match(b.why, /not read yet: the model's input feat0 has a dynamic shape/);
      const [read, feeds] = feedsOf(session, 'trt-encoder-shapes', ort);
      const ours = await session.run(feeds);
      for (const b of blocks) {
        assert.equal(b.replaced, true, b.why);
        assert.equal(b.levelsFrom, 'run time');
        assert.deepEqual(b.levels, [[8, 10], [4, 5], [2, 3]]);
      }
      assert.ok(maxDiff(ours.memory.data, read('expected/memory').data) <= MODEL_TOL, `${maxDiff(ours.memory.data, read('expected/memory').data)} from PyTorch's`);
      const again = await session.run(feeds);
      assert.deepEqual(again.memory.data, ours.memory.data, 'the second run, levels read again');
    } finally {
      await session.release();
    }
  });
}

test('spatial_shapes computed from constants alone (a Cast of one): evaluated once at createSession, read as constants', async () => {
  const model = decodeModel(readFileSync(fixture('trt-encoder.onnx')));
  const plugins = model.graph.node.filter((n) => n.op_type === 'MultiscaleDeformableAttnPlugin_TRT');
  const at = model.graph.node.findIndex((n) => n.output[0] === plugins[0].input[1]) + 1; // after its Constant: in topological order
  model.graph.node.splice(at, 0, { op_type: 'Cast', name: 'shapes_cast', input: [plugins[0].input[1]], output: ['shapes_cast'], attribute: [{ name: 'to', type: 2, i: 7 }] });
  for (const n of plugins) n.input[1] = 'shapes_cast';
  const session = await createSession(ortNode, encodeModel(model), { executionProviders: ['cpu'], msda });
  try {
    for (const b of session.report.blocks) {
      assert.equal(b.replaced, true, b.why);
      assert.equal(b.levelsFrom, 'constants');
      assert.deepEqual(b.levels, [[8, 10], [4, 5], [2, 3]]);
    }
    const [read, feeds] = feedsOf(session, 'trt-encoder', ortNode);
    const ours = await session.run(feeds);
    assert.ok(maxDiff(ours.memory.data, read('expected/memory').data) <= MODEL_TOL, `${maxDiff(ours.memory.data, read('expected/memory').data)} from PyTorch's`);
  } finally {
    await session.release();
  }
});

test('computed levels that do not fit: an error naming the node (at the build, and at a later run)', async () => {
  // level_start_index where spatial_shapes goes: (L, 2) starts.
  const model = decodeModel(readFileSync(fixture('trt-encoder-shapes.onnx')));
  const node = model.graph.node.find((n) => n.op_type === 'MultiscaleDeformableAttnPlugin_TRT');
  const starts = node.input[2];
  node.input[2] = node.input[1];
  let session = await createSession(ortNode, encodeModel(model), { msda });
  const [, feeds] = feedsOf(session, 'trt-encoder-shapes', ortNode);
  await assert.rejects(session.run(feeds), { message: new RegExp(`createSession: ${node.name}: spatial_shapes /Concat_4_output_0 \\[8,10,4,5,2,3\\] of dims \\[3,2\\] and level_start_index /Concat_4_output_0 \\[8,10,4,5,2,3\\] of dims \\[3,2\\] are not \\(L, 2\\) levels`) });
  await session.release();
  node.input[2] = starts;
  // spatial_shapes an input of the model (its values, so read at the first run, not from zeros).
  const trt = decodeModel(readFileSync(fixture('trt-encoder.onnx')));
  for (const n of trt.graph.node) if (n.op_type === 'MultiscaleDeformableAttnPlugin_TRT') n.input[1] = 'spatial_shapes';
  trt.graph.input.push({ name: 'spatial_shapes', type: { tensor_type: { elem_type: 7, shape: { dim: [{ dim_value: 3 }, { dim_value: 2 }] } } } });
  session = await createSession(ortNode, encodeModel(trt), { msda });
  try {
    const [read, base] = feedsOf(session, 'trt-encoder', ortNode);
    for (const b of session.report.blocks) assert.match(b.why, /not read yet: .*MultiscaleDeformableAttnPlugin_TRT's spatial_shapes or level_start_index is computed from the model's inputs' values/);
    const shapes = (s) => ({ ...base, spatial_shapes: new ortNode.Tensor('int64', BigInt64Array.from(s.flat(), BigInt), [3, 2]) });
    const ours = await session.run(shapes([[8, 10], [4, 5], [2, 3]]));
    assert.ok(maxDiff(ours.memory.data, read('expected/memory').data) <= MODEL_TOL, 'read from the input');
    // The same pixel counts per level, other shapes: the chain was made for the first ones.
    await assert.rejects(session.run(shapes([[10, 8], [5, 4], [3, 2]])), { message: /run: \/layers\.0\/self_attn\/MultiscaleDeformableAttnPlugin_TRT: its spatial_shapes spatial_shapes are \[10×8,5×4,3×2\] in this run and were \[8×10,4×5,2×3\]/ });
  } finally {
    await session.release();
  }
  // A fresh session whose first run's levels hold more pixels than the value.
  session = await createSession(ortNode, encodeModel(trt), { msda });
  try {
    const [, base] = feedsOf(session, 'trt-encoder', ortNode);
    const feeds = { ...base, spatial_shapes: new ortNode.Tensor('int64', BigInt64Array.from([8n, 10n, 4n, 5n, 2n, 4n]), [3, 2]) };
    await assert.rejects(session.run(feeds), { message: /createSession: \/layers\.0\/self_attn\/MultiscaleDeformableAttnPlugin_TRT: the levels \[8×10,4×5,2×4\] hold 108 pixels and the value 106/ });
  } finally {
    await session.release();
  }
});

test('a plugin node that cannot be read (level_start_index not its levels\' starts): an error naming the node, nothing made', async () => {
  const model = decodeModel(readFileSync(fixture('trt-encoder.onnx')));
  const node = model.graph.node.find((n) => n.op_type === 'MultiscaleDeformableAttnPlugin_TRT');
  const starts = model.graph.initializer.find((t) => t.name === node.input[2]) ?? model.graph.node.find((n) => n.output[0] === node.input[2]);
  assert.ok(starts, 'level_start_index is a constant');
  const other = node.input[2];
  node.input[2] = node.input[1]; // spatial_shapes where level_start_index goes
  await assert.rejects(createSession(ortNode, encodeModel(model), { msda }),
    { message: new RegExp(`createSession: ${node.name}: spatial_shapes .* and level_start_index .* are not \\(L, 2\\) levels and their starts \\(the prefix sums of H·W\\); ONNX Runtime cannot run these nodes either`) });
  node.input[2] = other;
  node.input[0] = node.input[3]; // the locations as the value
  await assert.rejects(createSession(ortNode, encodeModel(model), { msda }), { message: new RegExp(`${node.name}: value .* is \\[1,106,4,3,2,2\\], not \\(N, S, M, D\\)`) });
});

test('a block whose ORT run disagrees with the op (levels concatenated out of order) is left to ORT and reported', async () => {
  const model = decodeModel(readFileSync(fixture('detr-encoder.onnx')));
  const concat = model.graph.node.find((n) => n.name === '/layers.0/self_attn/Concat_6');
  concat.input.reverse();
  const bytes = encodeModel(model);
  const session = await createSession(ortNode, bytes, { executionProviders: ['cpu'], msda });
  const plain = await ortNode.InferenceSession.create(bytes);
  try {
    const [first, second] = session.report.blocks;
    assert.equal(first.replaced, false);
    assert.match(first.why, /disagree beyond crosscheck's bound/);
    assert.ok(first.verification.worst.excess > 0);
    assert.equal(second.replaced, true, second.why);
    const read = inputsOf('detr-encoder');
    const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ortNode.Tensor('float32', a.data, a.shape)]; }));
    const ours = await session.run(feeds), theirs = await plain.run(feeds);
    assert.ok(maxDiff(ours.memory.data, theirs.memory.data) <= MODEL_TOL, 'the modified model is run as ORT runs it');
  } finally {
    await session.release();
    await plain.release();
  }
});

test("mmcv's form with a level's Slice not shown to start where the one before ends is left to ORT and reported", async () => {
  const model = decodeModel(readFileSync(fixture('mmcv-encoder.onnx')));
  const at = model.graph.node.findIndex((n) => n.name === '/attn.0/Slice_1');
  const slice = model.graph.node[at], start = slice.input[1];
  // The same start through an Identity: the same model, but the chain of starts is no longer evident.
  model.graph.node.splice(at, 0, { name: 'copy', op_type: 'Identity', input: [start], output: ['start_copy'], attribute: [] });
  slice.input[1] = 'start_copy';
  const bytes = encodeModel(model);
  const session = await createSession(ortNode, bytes, { executionProviders: ['cpu'], msda });
  const plain = await ortNode.InferenceSession.create(bytes);
  try {
    assert.equal(session.report.blocks.length, 1);
    assert.equal(session.report.blocks[0].replaced, true);
    assert.deepEqual(session.report.blocks[0].nodes.slices, ['/attn.1/Slice', '/attn.1/Slice_1', '/attn.1/Slice_2']);
    assert.equal(session.report.notBlocks.length, 1);
    assert.match(session.report.notBlocks[0].why, /the value's Slices do not cut it into consecutive levels from 0/);
    assert.ok(session.report.notBlocks[0].nodes.includes('/attn.0/GridSample'));
    const read = inputsOf('mmcv-encoder');
    const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ortNode.Tensor('float32', a.data, a.shape)]; }));
    const ours = await session.run(feeds), theirs = await plain.run(feeds);
    assert.ok(maxDiff(ours.memory.data, theirs.memory.data) <= MODEL_TOL);
  } finally {
    await session.release();
    await plain.release();
  }
});

test("mmcv's form with spatial_shapes given at run time (a model input) is no block: reported, the model ORT's", async () => {
  const model = decodeModel(readFileSync(fixture('mmcv-encoder.onnx')));
  model.graph.initializer.splice(model.graph.initializer.findIndex((t) => t.name === 'spatial_shapes'), 1);
  model.graph.input.push({ name: 'spatial_shapes', type: { tensor_type: { elem_type: 7, shape: { dim: [{ dim_value: 3 }, { dim_value: 2 }] } } } });
  const session = await createSession(ortNode, encodeModel(model), { executionProviders: ['cpu'], msda });
  try {
    assert.deepEqual(session.report.blocks, []);
    assert.equal(session.report.notBlocks.length, 2);
    for (const e of session.report.notBlocks) assert.match(e.why, /the block reads spatial_shapes besides its value, locations and weights/);
  } finally {
    await session.release();
  }
});

test('bad arguments: a clear error naming the argument, nothing half-made', async () => {
  const bytes = readFileSync(fixture('detr-decoder.onnx'));
  await assert.rejects(createSession(null, bytes), { name: 'TypeError', message: /createSession: ort: expected the onnxruntime-web or onnxruntime-node module.*got null/ });
  await assert.rejects(createSession(ortNode, 'model.onnx'), { name: 'TypeError', message: /createSession: model: expected the \.onnx file's bytes.*got string/ });
  await assert.rejects(createSession(ortNode, new Uint8Array([1, 2, 3, 4, 5])), { name: 'TypeError', message: /model: not an ONNX ModelProto/ });
  await assert.rejects(createSession(ortNode, new Uint8Array(0)), { name: 'TypeError', message: /model: an ONNX ModelProto without a graph/ });
  await assert.rejects(createSession(ortNode, bytes, { executionProviders: 'cpu' }), { name: 'TypeError', message: /options\.executionProviders: expected an array.*got string/ });
  await assert.rejects(createSession(ortNode, bytes, { msda: {} }), { name: 'TypeError', message: /options\.msda: expected an instance/ });
  await assert.rejects(createSession(ortNode, bytes, { sessionOptions: { preferredOutputLocation: 'gpu-buffer' } }),
    { name: 'TypeError', message: /options\.sessionOptions\.preferredOutputLocation: the chain sets it .*got "gpu-buffer"/ });
  const session = await createSession(ortNode, bytes, { msda });
  await assert.rejects(session.run({}), { name: 'TypeError', message: /run: feeds\.tgt: expected an ort\.Tensor \(the model's inputs are tgt, query_pos, memory\), got undefined/ });
  await assert.rejects(session.run(null), { name: 'TypeError', message: /run: feeds: expected an object/ });
  await session.release();
  await assert.rejects(session.run({}), { message: /run: the session was released/ });
});
