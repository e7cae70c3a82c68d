// ms-deform-attn/onnx: runs an ONNX model of the Deformable DETR family with ORT for everything but
// its deformable-attention blocks, which run on this package's op.
//
//   import * as ort from 'onnxruntime-web';            // or 'onnxruntime-node': the caller's own
//   import { createSession } from 'ms-deform-attn/onnx';
//   const session = await createSession(ort, modelBytes, { executionProviders: ['wasm'] });
//   const outputs = await session.run(feeds);          // what ORT's session.run would return
//   session.report.blocks;                             // each block found, replaced or why not
//
// How: the blocks are found in the graph (onnx/blocks.js), their shapes read from one ORT run of
// the model on zeros (a probe), each block run alone through ORT and through our op on seeded
// inputs and replaced only when both meet crosscheck's bound (onnx/verify.js); the graph is then
// cut at the replaced blocks into ORT sessions (onnx/plan.js), and run() chains them through the op.

import { decodeModel, encodeModel, Graph, subModel, ELEM } from './onnx/model.js';
import { findGridSampleBlocks } from './onnx/blocks.js';
import { planStages } from './onnx/plan.js';
import { forwardArgs, readProblem, verifyBlock } from './onnx/verify.js';

const PREFIX = 'ms-deform-attn/onnx';

function readOrt(ort) {
  if (!ort || typeof ort !== 'object' && typeof ort !== 'function' || typeof ort.InferenceSession?.create !== 'function' || typeof ort.Tensor !== 'function') {
    throw new TypeError(`${PREFIX}: createSession: ort: expected the onnxruntime-web or onnxruntime-node module (with InferenceSession.create and Tensor), got ${ort === null ? 'null' : typeof ort}`);
  }
  return ort;
}

function readBytes(model) {
  if (model instanceof Uint8Array) return model;
  if (model instanceof ArrayBuffer) return new Uint8Array(model);
  if (ArrayBuffer.isView(model)) return new Uint8Array(model.buffer, model.byteOffset, model.byteLength);
  throw new TypeError(`${PREFIX}: createSession: model: expected the .onnx file's bytes (Uint8Array or ArrayBuffer), got ${model === null ? 'null' : typeof model === 'object' ? model.constructor?.name ?? 'object' : typeof model}`);
}

function readOptions(options) {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') throw new TypeError(`${PREFIX}: createSession: options: expected an object, got ${options === null ? 'null' : typeof options}`);
  const { executionProviders, msda, sessionOptions } = options;
  if (executionProviders !== undefined && !Array.isArray(executionProviders)) {
    throw new TypeError(`${PREFIX}: createSession: options.executionProviders: expected an array (ORT's), got ${typeof executionProviders}`);
  }
  if (msda !== undefined && (msda === null || typeof msda.forward !== 'function')) {
    throw new TypeError(`${PREFIX}: createSession: options.msda: expected an instance from ms-deform-attn's init(), got ${msda === null ? 'null' : typeof msda}`);
  }
  if (sessionOptions !== undefined && (sessionOptions === null || typeof sessionOptions !== 'object')) {
    throw new TypeError(`${PREFIX}: createSession: options.sessionOptions: expected an object (ORT's session options), got ${sessionOptions === null ? 'null' : typeof sessionOptions}`);
  }
  return { executionProviders, msda, sessionOptions };
}

const dimsOf = (v) => (v.type?.tensor_type?.shape?.dim ?? null)?.map((d) => (d.dim_param || d.dim_value == null ? null : Number(d.dim_value.toString())));

// The shapes and element types of `names`, from one run of the model on zeros (static inputs only).
async function probe(ort, options, graph, names) {
  const feeds = {};
  for (const v of graph.model.graph.input) {
    if (graph.initializers.has(v.name)) continue;
    const dims = dimsOf(v), type = ELEM[v.type?.tensor_type?.elem_type];
    if (!dims || dims.some((d) => !(d > 0))) return { why: `the model's input ${v.name} has a dynamic or unknown shape; blocks are read from a run on static shapes` };
    if (!type) return { why: `the model's input ${v.name} has element type ${v.type?.tensor_type?.elem_type}, which the probe does not feed` };
    const n = dims.reduce((a, b) => a * b, 1);
    const data = type === 'int64' ? new BigInt64Array(n) : type === 'bool' ? new Uint8Array(n) : type === 'float16' ? new Uint16Array(n)
      : type === 'int32' ? new Int32Array(n) : type === 'float64' ? new Float64Array(n) : new Float32Array(n);
    feeds[v.name] = new ort.Tensor(type, data, dims);
  }
  const extra = [...new Set(names)].filter((t) => !graph.outputs.includes(t));
  const model = { ...graph.model, graph: { ...graph.model.graph, output: [...graph.model.graph.output, ...extra.map((name) => ({ name }))] } };
  const session = await ort.InferenceSession.create(encodeModel(model), options);
  try {
    const out = await session.run(feeds);
    return { shapes: new Map(Object.entries(out).map(([k, t]) => [k, [...t.dims]])), types: new Map(Object.entries(out).map(([k, t]) => [k, t.type])) };
  } finally {
    await session.release();
  }
}

function entry(block, k) {
  return {
    id: k,
    formulation: block.formulation,
    nodes: block.names,
    tensors: { value: block.value, samplingLocations: block.samplingLocations, attentionWeights: block.attentionWeights, output: block.output },
    alignCorners: block.alignCorners,
    paddingMode: block.paddingMode,
    replaced: false,
    why: null,
  };
}

/**
 * Creates the chained session: see the file's head and docs/onnx.md. Resolves to
 * { run(feeds), inputNames, outputNames, release(), report }.
 */
export async function createSession(ortGiven, modelGiven, optionsGiven) {
  const ort = readOrt(ortGiven);
  const bytes = readBytes(modelGiven);
  const { executionProviders, msda: msdaGiven, sessionOptions } = readOptions(optionsGiven);
  const options = { ...sessionOptions, ...(executionProviders ? { executionProviders } : {}) };
  const graph = new Graph(decodeModel(bytes));
  const { blocks: found, skipped } = findGridSampleBlocks(graph);
  const entries = found.map(entry);
  const report = { blocks: entries, notBlocks: skipped.map(({ where, why }) => ({ nodes: where, replaced: false, why })) };
  let msda = msdaGiven, ownMsda = false;
  const replaced = [];
  let types = new Map();
  if (found.length > 0) {
    const candidate = planStages(graph, found);
    const cuts = candidate.stages.flatMap((s) => [...s.inputs, ...s.outputs]);
    const names = [...cuts, ...found.flatMap((b) => [b.value, b.samplingLocations, b.attentionWeights, b.output, ...b.levelInputs])];
    const probed = await probe(ort, options, graph, names);
    for (let k = 0; k < found.length; k++) {
      const b = found[k], e = entries[k];
      if (probed.why) { e.why = probed.why; continue; }
      const types = [b.value, b.samplingLocations, b.attentionWeights, b.output].map((t) => probed.types.get(t));
      if (types.some((t) => t !== 'float32')) { e.why = `element types ${types.join(', ')}: float32 blocks only so far`; continue; }
      const { problem, why } = readProblem(b, probed.shapes);
      if (why) { e.why = why; continue; }
      Object.assign(e, { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', batch: problem.B, queries: problem.Q, heads: problem.H,
        channels: problem.C, levels: problem.levels, points: problem.P });
      if (!msda) {
        const { init } = await import('ms-deform-attn');
        msda = await init();
        ownMsda = true;
      }
      const check = await verifyBlock(ort, options, graph, b, problem, probed.shapes, msda, 0x5eed + k);
      e.verification = { checked: check.checked, worst: check.worst };
      if (!check.agree) { e.why = `ORT's run of the block and ours disagree beyond crosscheck's bound (${JSON.stringify(check.worst)}): left to ORT`; continue; }
      e.replaced = true;
      replaced.push({ block: b, problem, shape: probed.shapes.get(b.output) });
    }
    if (probed.types) types = probed.types;
  }
  const inputTypes = new Map(graph.model.graph.input.map((v) => [v.name, ELEM[v.type?.tensor_type?.elem_type]]));
  const typeOf = (t) => inputTypes.get(t) ?? types.get(t);
  let stages, ops;
  if (replaced.length === 0) {
    stages = [{ session: await ort.InferenceSession.create(bytes, options), inputs: graph.inputs }];
    ops = [];
  } else {
    const plan = planStages(graph, replaced.map((r) => r.block));
    stages = [];
    try {
      for (const [s, st] of plan.stages.entries()) {
        const real = st.nodes.filter((i) => graph.nodes[i].op_type !== 'Constant');
        if (real.length === 0) { stages.push({ session: null, inputs: [] }); continue; }
        const missing = [...st.inputs, ...st.outputs].find((t) => !typeOf(t));
        if (missing) throw new Error(`${PREFIX}: createSession: the probe gave no type for ${missing}, which crosses a cut`);
        const m = subModel(graph, st.nodes, st.inputs.map((name) => ({ name, type: typeOf(name) })), st.outputs.map((name) => ({ name, type: typeOf(name) })), `stage${s}`);
        stages.push({ session: await ort.InferenceSession.create(encodeModel(m), options), inputs: st.inputs });
      }
    } catch (e) {
      await Promise.all(stages.map((st) => st.session?.release()));
      if (ownMsda) msda.dispose?.();
      throw e;
    }
    ops = plan.ops.map((op) => ({ ...op, ...replaced.find((r) => r.block === op.block) }));
  }
  let released = false;
  const inputNames = [...graph.inputs], outputNames = [...graph.outputs];
  return {
    inputNames,
    outputNames,
    report,
    async run(feeds) {
      if (released) throw new Error(`${PREFIX}: run: the session was released`);
      if (feeds === null || typeof feeds !== 'object') throw new TypeError(`${PREFIX}: run: feeds: expected an object from input name to ort.Tensor, got ${feeds === null ? 'null' : typeof feeds}`);
      const live = new Map();
      for (const name of inputNames) {
        const t = feeds[name];
        if (!t || typeof t !== 'object' || !('dims' in t)) throw new TypeError(`${PREFIX}: run: feeds.${name}: expected an ort.Tensor (the model's inputs are ${inputNames.join(', ')}), got ${t === null ? 'null' : typeof t}`);
        live.set(name, t);
      }
      for (let s = 0; s <= stages.length; s++) {
        for (const op of ops) {
          if (op.before !== s) continue;
          const [v, l, w] = [op.block.value, op.block.samplingLocations, op.block.attentionWeights].map((t) => live.get(t));
          const out = await msda.forward(forwardArgs(op.block, op.problem, v.data, l.data, w.data));
          live.set(op.block.output, new ort.Tensor('float32', out.data, op.shape));
        }
        if (s === stages.length || !stages[s].session) continue;
        const f = {};
        for (const x of stages[s].inputs) f[x] = live.get(x);
        const out = await stages[s].session.run(f);
        for (const [k, t] of Object.entries(out)) live.set(k, t);
      }
      return Object.fromEntries(outputNames.map((n) => [n, live.get(n)]));
    },
    async release() {
      if (released) return;
      released = true;
      await Promise.all(stages.map((st) => st.session?.release()));
      if (ownMsda) msda.dispose?.();
    },
  };
}
