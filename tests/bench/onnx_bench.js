// make bench-onnx: each encoder-sized ONNX fixture (tests/fixtures/onnx/*-bench.onnx: two
// Deformable DETR encoder layers, 22,223 queries, with their projections and FFN) through ORT alone
// and through ms-deform-attn/onnx's createSession, same inputs, interleaved rounds, one thread, on
// onnxruntime-node (CPU EP) and onnxruntime-web (wasm EP). Also each replaced block alone: ORT's run
// of its subgraph against the op on the same inputs (the projections and FFN are ORT's either way).
// Minimum over rounds, ms; ratios are ORT's time over ours.
//
//   node tests/bench/onnx_bench.js [--rounds N] [--runtime node|web|webgpu] [--fixture NAME] [--json]

import { readFileSync, readdirSync } from 'node:fs';
import { init, initNative } from '../../bindings/index.js';
import { createSession } from '../../bindings/onnx.js';
import { decodeModel, encodeModel, Graph, loadOnnx, subModel } from '../../bindings/onnx/model.js';

await loadOnnx();
import { forwardArgs } from '../../bindings/onnx/verify.js';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const rounds = Number(opt('--rounds', 3));
const only = opt('--runtime', null);
const json = argv.includes('--json');
const dir = new URL('../fixtures/onnx/', import.meta.url);
// --fixture NAME: another fixture of the folder (e.g. detr-encoder: the small one, for slow devices).
const fixtures = opt('--fixture', null) ? [`${opt('--fixture')}.onnx`] : readdirSync(dir).filter((f) => f.endsWith('-bench.onnx'));
const say = (line) => { if (!json) console.log(line); };

function seeded(seed) {
  let s = seed >>> 0;
  return () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
}

async function runtimes() {
  const out = [];
  if (!only || only === 'node') {
    const ort = await import('onnxruntime-node');
    let msda;
    try { msda = await initNative(); } catch { msda = await init(); }
    out.push({ name: 'onnxruntime-node (CPU EP)', ort, options: { executionProviders: ['cpu'], sessionOptions: { intraOpNumThreads: 1, interOpNumThreads: 1 } }, msda });
  }
  if (only === 'webgpu') {   // Dawn for Node (the 'webgpu' package) on VK_ICD_FILENAMES's driver: make bench-onnx-webgpu
    const dawn = await import('webgpu');
    Object.assign(globalThis, dawn.globals);
    if (globalThis.navigator === undefined) globalThis.navigator = {};
    Object.defineProperty(globalThis.navigator, 'gpu', { value: dawn.create([]), configurable: true });
    const write = dawn.globals.GPUQueue.prototype.writeBuffer;   // Dawn refuses SharedArrayBuffer views (tests/webgpu/ort.test.js)
    dawn.globals.GPUQueue.prototype.writeBuffer = function (buffer, offset, data, dataOffset = 0, size = undefined) {
      if (ArrayBuffer.isView(data) && data.buffer instanceof SharedArrayBuffer) {
        const bpe = data.BYTES_PER_ELEMENT ?? 1;
        return write.call(this, buffer, offset, new Uint8Array(data.buffer, data.byteOffset + dataOffset * bpe, (size ?? data.length - dataOffset) * bpe).slice());
      }
      return write.call(this, buffer, offset, data, dataOffset, size);
    };
    const ort = await import('onnxruntime-web/webgpu');
    ort.env.wasm.numThreads = 1;
    // The op's instance is createSession's own, on ORT's device; the blocks alone run on another.
    out.push({ name: 'onnxruntime-web (WebGPU EP)', ort, options: { executionProviders: ['webgpu'] }, msda: undefined, webgpu: true });
  }
  if (!only || only === 'web') {
    const ort = await import('onnxruntime-web');
    ort.env.wasm.numThreads = 1;
    out.push({ name: 'onnxruntime-web (wasm EP)', ort, options: { executionProviders: ['wasm'] }, msda: await init() });
  }
  return out;
}

const time = async (f) => { const t = performance.now(); await f(); return performance.now() - t; };

for (const file of fixtures) {
  const bytes = readFileSync(new URL(file, dir));
  const graph = new Graph(decodeModel(bytes));
  for (const rt of await runtimes()) {
    const { ort, msda } = rt;
    const sessionOptions = { ...rt.options.sessionOptions, executionProviders: rt.options.executionProviders };
    const plain = await ort.InferenceSession.create(bytes, sessionOptions);
    let t0 = performance.now();
    const chained = await createSession(ort, bytes, { ...rt.options, ...(msda ? { msda } : {}) });
    const createMs = performance.now() - t0;
    const opMsda = msda ?? await init({ backend: 'webgpu', device: await ort.env.webgpu.device });
    const rand = seeded(7);
    const feeds = {};
    for (const v of graph.model.graph.input) {
      const dims = v.type.tensor_type.shape.dim.map((d) => Number(d.dim_value));
      feeds[v.name] = new ort.Tensor('float32', Float32Array.from({ length: dims.reduce((a, b) => a * b, 1) }, () => rand() * 2 - 1), dims);
    }
    say(`${file} on ${rt.name} (msda: ${opMsda.backend}, 1 thread): createSession ${createMs.toFixed(0)} ms; blocks replaced ${chained.report.blocks.filter((b) => b.replaced).length} of ${chained.report.blocks.length}`);
    // The blocks alone, on the inputs they get in this run (a run of the model that also returns them).
    const replaced = chained.report.blocks.filter((x) => x.replaced);
    const wanted = replaced.flatMap((b) => [b.tensors.value, b.tensors.samplingLocations, b.tensors.attentionWeights]);
    const tap = await ort.InferenceSession.create(encodeModel({ ...graph.model, graph: { ...graph.model.graph, output: [...graph.model.graph.output, ...wanted.map((name) => ({ name }))] } }), sessionOptions);
    const tapped = await tap.run(feeds);
    await tap.release();
    const blocks = [];
    for (const b of replaced) {
      const { value, samplingLocations, attentionWeights, output } = b.tensors;
      const found = { value, samplingLocations, attentionWeights, output, alignCorners: b.alignCorners, paddingMode: b.paddingMode };
      const problem = { B: b.batch, Len: b.levels.reduce((a, [h, w]) => a + h * w, 0), H: b.heads, C: b.channels, Q: b.queries, NL: b.levels.length, P: b.points, levels: b.levels };
      const inputs = [value, samplingLocations, attentionWeights].map((n) => tapped[n]);
      // The block's nodes: what computes its output from its three inputs.
      const nodes = [], seen = new Set([value, samplingLocations, attentionWeights]), stack = [output];
      while (stack.length) {
        const t = stack.pop();
        if (!t || seen.has(t) || graph.initializers.has(t)) continue;
        seen.add(t);
        const i = graph.producer.get(t);
        nodes.push(i);
        stack.push(...graph.nodes[i].input);
      }
      const m = subModel(graph, nodes, inputs.map((t, k) => ({ name: [value, samplingLocations, attentionWeights][k], type: 'float32', shape: [...t.dims] })), [{ name: output, type: 'float32' }], 'block');
      const session = await ort.InferenceSession.create(encodeModel(m), sessionOptions);
      const blockFeeds = Object.fromEntries([value, samplingLocations, attentionWeights].map((n, k) => [n, inputs[k]]));
      blocks.push({ id: b.id, session, feeds: blockFeeds, args: forwardArgs(found, problem, ...inputs.map((t) => t.data)), ort: Infinity, ours: Infinity });
    }
    let ortMs = Infinity, oursMs = Infinity, diff = 0;
    for (let r = 0; r < rounds; r++) {
      let a, c;
      ortMs = Math.min(ortMs, await time(async () => { a = await plain.run(feeds); }));
      oursMs = Math.min(oursMs, await time(async () => { c = await chained.run(feeds); }));
      for (const n of chained.outputNames) for (let i = 0; i < a[n].data.length; i++) diff = Math.max(diff, Math.abs(a[n].data[i] - c[n].data[i]));
      for (const b of blocks) {
        b.ort = Math.min(b.ort, await time(() => b.session.run(b.feeds)));
        b.ours = Math.min(b.ours, await time(() => opMsda.forward(b.args)));
      }
    }
    const blockOrt = blocks.reduce((s, b) => s + b.ort, 0), blockOurs = blocks.reduce((s, b) => s + b.ours, 0);
    say(`  end to end   ORT alone ${ortMs.toFixed(0)} ms   createSession ${oursMs.toFixed(0)} ms   ${(ortMs / oursMs).toFixed(2)}x   (outputs differ by at most ${diff.toExponential(2)})`);
    say(`  the blocks   ORT ${blockOrt.toFixed(0)} ms   ours ${blockOurs.toFixed(0)} ms   ${(blockOrt / blockOurs).toFixed(2)}x   (${blocks.length} blocks, min of ${rounds} rounds each)`);
    if (json) console.log(JSON.stringify({ model: file, runtime: rt.name, msda: opMsda.backend, threads: 1, rounds, create_ms: createMs, ort_ms: ortMs, ours_ms: oursMs, blocks_ort_ms: blockOrt, blocks_ours_ms: blockOurs, max_diff: diff }));
    for (const b of blocks) await b.session.release();
    await chained.release();
    await plain.release();
    if (!msda) opMsda.dispose();
  }
}
