// One chain of ORT sessions and op calls for one set of input shapes: the blocks' shapes read from a
// probe run (the model with the blocks' tensors as extra outputs), each block verified, the graph
// cut at the verified ones (plan.js), a session made per stage.

import { encodeModel, subModel, ELEM } from './model.js';
import { planStages } from './plan.js';
import { forwardArgs, readProblem, verifyBlock } from './verify.js';

const PREFIX = 'ms-deform-attn/onnx';

const dimsOf = (v) => (v.type?.tensor_type?.shape?.dim ?? null)?.map((d) => (d.dim_param || d.dim_value == null ? null : Number(d.dim_value.toString())));

/** Zeros of every model input when all their shapes are static, else { why }. */
export function staticFeeds(ort, graph) {
  const feeds = {};
  for (const v of graph.model.graph.input) {
    if (graph.initializers.has(v.name)) continue;
    const dims = dimsOf(v), type = ELEM[v.type?.tensor_type?.elem_type];
    if (!dims || dims.some((d) => !(d > 0))) return { why: `the model's input ${v.name} has a dynamic shape` };
    if (!type) return { why: `the model's input ${v.name} has element type ${v.type?.tensor_type?.elem_type}` };
    const n = dims.reduce((a, b) => a * b, 1);
    const data = type === 'int64' ? new BigInt64Array(n) : type === 'bool' ? new Uint8Array(n) : type === 'float16' ? new Uint16Array(n)
      : type === 'int32' ? new Int32Array(n) : type === 'float64' ? new Float64Array(n) : new Float32Array(n);
    feeds[v.name] = new ort.Tensor(type, data, dims);
  }
  return { feeds };
}

// The shapes and element types of `names` from one run of the model on `feeds`.
async function probe(ort, options, graph, names, feeds) {
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

/**
 * Reads, verifies and chains the blocks `found` for the shapes of `feeds`; fills `entries` (the
 * report's, one per block). Resolves to { stages: [{ session, inputs }], ops: [{ block, problem,
 * shape, before }] }; getMsda() makes the op's instance when first needed.
 */
export async function buildChain(ort, options, graph, found, entries, feeds, getMsda) {
  const candidate = planStages(graph, found);
  const cuts = candidate.stages.flatMap((s) => [...s.inputs, ...s.outputs]);
  const names = [...cuts, ...found.flatMap((b) => [b.value, b.samplingLocations, b.attentionWeights, b.output, ...b.levelInputs])];
  const probed = await probe(ort, options, graph, names, Object.fromEntries(feeds));
  const replaced = [];
  for (let k = 0; k < found.length; k++) {
    const b = found[k], e = entries[k];
    e.replaced = false;
    const types = [b.value, b.samplingLocations, b.attentionWeights, b.output].map((t) => probed.types.get(t));
    if (types.some((t) => t !== 'float32')) { e.why = `element types ${types.join(', ')}: float32 blocks only so far`; continue; }
    const { problem, why } = readProblem(b, probed.shapes);
    if (why) { e.why = why; continue; }
    Object.assign(e, { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', batch: problem.B, queries: problem.Q, heads: problem.H,
      channels: problem.C, levels: problem.levels, points: problem.P });
    const check = await verifyBlock(ort, options, graph, b, problem, probed.shapes, await getMsda(), 0x5eed + k);
    e.verification = { checked: check.checked, worst: check.worst };
    if (!check.agree) { e.why = `ORT's run of the block and ours disagree beyond crosscheck's bound (${JSON.stringify(check.worst)}): left to ORT`; continue; }
    e.replaced = true;
    e.why = null;
    replaced.push({ block: b, problem, shape: probed.shapes.get(b.output) });
  }
  if (replaced.length === 0) return { stages: [{ session: await ort.InferenceSession.create(encodeModel(graph.model), options), inputs: graph.inputs }], ops: [] };
  const inputTypes = new Map(graph.model.graph.input.map((v) => [v.name, ELEM[v.type?.tensor_type?.elem_type]]));
  const typeOf = (t) => inputTypes.get(t) ?? probed.types.get(t);
  const plan = planStages(graph, replaced.map((r) => r.block));
  const stages = [];
  try {
    for (const [s, st] of plan.stages.entries()) {
      if (st.nodes.every((i) => graph.nodes[i].op_type === 'Constant')) { stages.push({ session: null, inputs: [] }); continue; }
      const missing = [...st.inputs, ...st.outputs].find((t) => !typeOf(t));
      if (missing) throw new Error(`${PREFIX}: createSession: the probe gave no type for ${missing}, which crosses a cut`);
      const m = subModel(graph, st.nodes, st.inputs.map((name) => ({ name, type: typeOf(name) })), st.outputs.map((name) => ({ name, type: typeOf(name) })), `stage${s}`);
      stages.push({ session: await ort.InferenceSession.create(encodeModel(m), options), inputs: st.inputs });
    }
  } catch (e) {
    await Promise.all(stages.map((st) => st.session?.release()));
    throw e;
  }
  return { stages, ops: plan.ops.map((op) => ({ ...op, ...replaced.find((r) => r.block === op.block) })) };
}

/** Runs a chain on feeds (a Map of the model's inputs); resolves to the outputs by name. */
export async function runChain(ort, chain, msda, feeds, outputNames) {
  const live = new Map(feeds);
  const { stages, ops } = chain;
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
}

export const releaseChain = (chain) => Promise.all(chain.stages.map((st) => st.session?.release()));
