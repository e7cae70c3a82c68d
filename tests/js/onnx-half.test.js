// ms-deform-attn/onnx on a float16 model (tests/fixtures/onnx/detr-encoder-f16.onnx, Deformable
// DETR's encoder converted to float16) through onnxruntime-node and onnxruntime-web's wasm EP: its
// blocks verified under the float16 bounds of docs/onnx.md and replaced; ORT's float16 tensors
// in and out; a block's result is the op's float32 result rounded once to float16, bit for bit; a
// float16 block that disagrees is left to ORT; float16 plugin nodes (mmdeploy's) chained around.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { inflateRawSync } from 'node:zlib';
import * as ortNode from 'onnxruntime-node';
import * as ortWeb from 'onnxruntime-web';
import { init } from '../../bindings/index.js';
import { parseNpz } from '../../bindings/cli/npz.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { parseNpy } from '../../bindings/npy.js';
import { createSession } from '../../bindings/onnx.js';
import { findGridSampleBlocks } from '../../bindings/onnx/blocks.js';
import { decodeModel, encodeModel, Graph, loadOnnx, subModel, tensorValues } from '../../bindings/onnx/model.js';

ortWeb.env.wasm.numThreads = 1;
const fixture = (name) => new URL(`../fixtures/onnx/${name}`, import.meta.url);
const RUNTIMES = [['onnxruntime-node', ortNode, ['cpu']], ['onnxruntime-web (wasm EP)', ortWeb, ['wasm']]];
const NAME = 'detr-encoder-f16';
const LEVELS = [[8, 10], [4, 5], [2, 3]];

const msda = await init();
await loadOnnx();

const members = parseNpz(readFileSync(fixture(`${NAME}.npz`)), (b) => inflateRawSync(b));
const read = (key) => parseNpy(members.get(`${key}.npy`).read());
const feedsFor = (ort) => ({ src: read('src'), pos: read('pos') });

// One float16 ulp at |x| (normal range; the subnormals' spacing below).
const ulp = (x) => 2 ** (Math.max(Math.floor(Math.log2(Math.abs(x) || 2 ** -14)), -14) - 10);
// The model's outputs (LayerNorm's, of unit scale) a few float16 roundings from ORT's own run: the
// blocks' outputs differ from ORT's by about an ulp (docs/onnx.md), carried through the output
// projection, residual, LayerNorm and FFN, each in float16. The largest difference in ulps of the
// largest |output| (an element near 0 is as far in absolute terms, not relative). Measured: 1; allowed: 4.
const ULPS = 4;
function worstUlps(a, b) {
  let m = 0, top = 0;
  for (let i = 0; i < a.length; i++) {
    m = Math.max(m, Math.abs(a[i] - b[i]));
    top = Math.max(top, Math.abs(b[i]));
  }
  return m / ulp(top);
}

for (const [runtime, ort, executionProviders] of RUNTIMES) {
  test(`${NAME} on ${runtime}: both float16 blocks verified and replaced; float16 outputs within ${ULPS} ulps of ORT's and PyTorch's`, async () => {
    const bytes = readFileSync(fixture(`${NAME}.onnx`));
    const session = await createSession(ort, bytes, { executionProviders, msda });
    const plain = await ort.InferenceSession.create(bytes, { executionProviders });
    try {
      const { blocks, notBlocks } = session.report;
      assert.deepEqual(notBlocks, []);
      assert.equal(blocks.length, 2);
      for (const b of blocks) {
        assert.equal(b.replaced, true, `block ${b.id}: ${b.why}`);
        assert.equal(b.dtype, 'float16');
        assert.deepEqual(b.levels, LEVELS);
        assert.deepEqual([b.batch, b.queries, b.heads, b.channels, b.points], [1, 106, 4, 16, 2]);
        assert.equal(b.verification.worst, null);
      }
      const feeds = Object.fromEntries(Object.entries(feedsFor()).map(([n, a]) => [n, new ort.Tensor('float16', a.data, a.shape)]));
      const ours = (await session.run(feeds)).memory, theirs = (await plain.run(feeds)).memory;
      assert.equal(ours.type, 'float16');
      assert.deepEqual([...ours.dims], [1, 106, 64]);
      const o = widenHalf(ours.data, 'float16'), t = widenHalf(theirs.data, 'float16');
      assert.ok(worstUlps(o, t) <= ULPS, `${worstUlps(o, t)} ulps from ORT's run`);
      assert.ok(worstUlps(o, read('expected/memory').data) <= ULPS, `${worstUlps(o, read('expected/memory').data)} ulps from PyTorch's (float32, of the float16 weights and inputs)`);
    } finally {
      await session.release();
      await plain.release();
    }
  });
}

// A model that is one float16 block (the fixture's first): run() gives the op's float32 result on
// the widened inputs, rounded once to nearest even, bit for bit.
function seededHalves(n, seed, lo, hi) {
  let s = seed;
  const x = Float32Array.from({ length: n }, () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return lo + (hi - lo) * (s / 2 ** 32); });
  return narrowToHalf(x, 'float16');
}

for (const [runtime, ort, executionProviders] of RUNTIMES) {
  test(`a float16 block alone on ${runtime}: its output is the op's float32 result rounded once to float16`, async () => {
    const graph = new Graph(decodeModel(readFileSync(fixture(`${NAME}.onnx`))));
    const [block] = findGridSampleBlocks(graph).blocks;
    const shapes = { [block.value]: [1, 106, 4, 16], [block.samplingLocations]: [1, 106, 4, 3, 2, 2], [block.attentionWeights]: [1, 106, 4, 3, 2] };
    const io = [block.value, block.samplingLocations, block.attentionWeights];
    const model = subModel(graph, [...block.nodes], io.map((name) => ({ name, type: 'float16', shape: shapes[name] })), [{ name: block.output, type: 'float16' }], 'block');
    const session = await createSession(ort, encodeModel(model), { executionProviders, msda });
    try {
      assert.equal(session.report.blocks[0].replaced, true, session.report.blocks[0].why);
      const [value, locations, weights] = [seededHalves(106 * 64, 1, -4, 4), seededHalves(106 * 48, 2, -0.1, 1.1), seededHalves(106 * 24, 3, 0, 1)];
      const out = (await session.run({
        [block.value]: new ort.Tensor('float16', value, shapes[block.value]),
        [block.samplingLocations]: new ort.Tensor('float16', locations, shapes[block.samplingLocations]),
        [block.attentionWeights]: new ort.Tensor('float16', weights, shapes[block.attentionWeights]),
      }))[block.output];
      assert.equal(out.type, 'float16');
      const f32 = await msda.forward({
        value: { data: widenHalf(value, 'float16'), shape: shapes[block.value] }, spatialShapes: LEVELS,
        samplingLocations: { data: widenHalf(locations, 'float16'), shape: shapes[block.samplingLocations] },
        attentionWeights: { data: widenHalf(weights, 'float16'), shape: shapes[block.attentionWeights] },
      });
      assert.deepEqual(out.data, narrowToHalf(f32.data, 'float16'));
    } finally {
      await session.release();
    }
  });
}

// Wide levels (160 and 80 pixels): ORT's float16 grid coordinates err by up to W_l * 2^-12 pixels
// there, which the verification's bound for ORT's graph allows for (docs/onnx.md); our result is
// within an ulp of PyTorch's float32 run on the same float16 inputs.
for (const [runtime, ort, executionProviders] of RUNTIMES) {
  test(`core-wide-f16 on ${runtime}: a float16 block on wide levels verified and replaced, within an ulp of PyTorch's`, async () => {
    const bytes = readFileSync(fixture('core-wide-f16.onnx'));
    const wide = parseNpz(readFileSync(fixture('core-wide-f16.npz')), (b) => inflateRawSync(b));
    const get = (key) => parseNpy(wide.get(`${key}.npy`).read());
    const session = await createSession(ort, bytes, { executionProviders, msda });
    try {
      const [b] = session.report.blocks;
      assert.equal(b.replaced, true, b.why);
      assert.deepEqual([b.dtype, b.levels, b.heads, b.channels, b.queries, b.points], ['float16', [[4, 160], [2, 80]], 2, 8, 24, 2]);
      const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = get(n); return [n, new ort.Tensor('float16', a.data, a.shape)]; }));
      const { output } = await session.run(feeds);
      assert.ok(worstUlps(widenHalf(output.data, 'float16'), get('expected/output').data) <= 1, `${worstUlps(widenHalf(output.data, 'float16'), get('expected/output').data)} ulps`);
    } finally {
      await session.release();
    }
  });
}

// mmdeploy's plugin node in a float16 model (ORT cannot run it): chained around, float16 through.
for (const [runtime, ort, executionProviders] of RUNTIMES) {
  test(`mmdeploy-encoder-f16 on ${runtime}: its float16 plugin nodes on the op, within ${ULPS} ulps of PyTorch's`, async () => {
    const bytes = readFileSync(fixture('mmdeploy-encoder-f16.onnx'));
    const plugin = parseNpz(readFileSync(fixture('mmdeploy-encoder-f16.npz')), (b) => inflateRawSync(b));
    const get = (key) => parseNpy(plugin.get(`${key}.npy`).read());
    const session = await createSession(ort, bytes, { executionProviders, msda });
    try {
      assert.equal(session.report.blocks.length, 2);
      for (const b of session.report.blocks) assert.deepEqual([b.replaced, b.dtype, b.verification], [true, 'float16', null], b.why);
      const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = get(n); return [n, new ort.Tensor('float16', a.data, a.shape)]; }));
      const { memory } = await session.run(feeds);
      assert.equal(memory.type, 'float16');
      const miss = worstUlps(widenHalf(memory.data, 'float16'), get('expected/memory').data);
      assert.ok(miss <= ULPS, `${miss} ulps from PyTorch's`);
    } finally {
      await session.release();
    }
  });
}

test('a float16 block whose ORT run disagrees with the op (levels concatenated out of order) is left to ORT and reported', async () => {
  const model = decodeModel(readFileSync(fixture(`${NAME}.onnx`)));
  model.graph.node.find((n) => n.name === '/layers.0/self_attn/Concat_6').input.reverse();
  const bytes = encodeModel(model);
  const session = await createSession(ortNode, bytes, { executionProviders: ['cpu'], msda });
  const plain = await ortNode.InferenceSession.create(bytes);
  try {
    const [first, second] = session.report.blocks;
    assert.equal(first.replaced, false);
    assert.equal(first.dtype, 'float16');
    assert.match(first.why, /disagree beyond crosscheck's bound/);
    assert.ok(first.verification.worst.excess > 0 && first.verification.worst.boundOrt > first.verification.worst.bound);
    assert.equal(second.replaced, true, second.why);
    const feeds = Object.fromEntries(Object.entries(feedsFor()).map(([n, a]) => [n, new ortNode.Tensor('float16', a.data, a.shape)]));
    const ours = (await session.run(feeds)).memory, theirs = (await plain.run(feeds)).memory;
    assert.ok(worstUlps(widenHalf(ours.data, 'float16'), widenHalf(theirs.data, 'float16')) <= ULPS, 'the modified model is run as ORT runs it');
  } finally {
    await session.release();
    await plain.release();
  }
});

test('float16 constants are read (the 2 and 1 of a block\'s grid): raw bytes and int32_data, as ONNX stores them', () => {
  const bits = [0x4000, 0x3c00, 0x8001, 0x7c00]; // 2, 1, -2^-24, Infinity
  assert.deepEqual(tensorValues({ data_type: 10, raw_data: new Uint8Array(new Uint16Array(bits).buffer), int32_data: [] }), [2, 1, -(2 ** -24), Infinity]);
  assert.deepEqual(tensorValues({ data_type: 10, raw_data: new Uint8Array(0), int32_data: bits }), [2, 1, -(2 ** -24), Infinity]);
});
