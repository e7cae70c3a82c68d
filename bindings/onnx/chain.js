// One chain of ORT sessions and op calls for one set of input shapes: the blocks' shapes read from a
// probe run (the model with the blocks' tensors as extra outputs), each block verified, the graph
// cut at the verified ones (plan.js), a session made per stage.

import { encodeModel, subModel, ELEM } from './model.js';
import { planStages } from './plan.js';
import { forwardArgs, readProblem, verifyBlock } from './verify.js';

const PREFIX = 'ms-deform-attn/onnx';

const dimsOf = (v) => (v.type?.tensor_type?.shape?.dim ?? null)?.map((d) => (d.dim_param || d.dim_value == null ? null : Number(d.dim_value.toString())));

// Under the WebGPU EP what a stage hands on stays on ORT's device; the model's outputs come back
// on the CPU, as ORT's own session gives them.
const onWebgpu = (options) => (options.executionProviders ?? []).some((ep) => (typeof ep === 'string' ? ep : ep?.name) === 'webgpu');
function stageOptions(options, graph, outputs, gpu) {
  if (!gpu) return options;
  return { ...options, preferredOutputLocation: Object.fromEntries(outputs.map((o) => [o, graph.outputs.includes(o) ? 'cpu' : 'gpu-buffer'])) };
}

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

// The shapes and element types of `names` from one run of the model on `feeds`, and its session,
// which the caller releases once the chain's own are made: ORT's WebGPU EP destroys its device
// when its last session goes, and the op runs on that device.
async function probe(ort, options, graph, names, feeds) {
  const extra = [...new Set(names)].filter((t) => !graph.outputs.includes(t));
  const model = { ...graph.model, graph: { ...graph.model.graph, output: [...graph.model.graph.output, ...extra.map((name) => ({ name }))] } };
  const session = await ort.InferenceSession.create(encodeModel(model), options);
  try {
    const out = await session.run(feeds);
    return { session, shapes: new Map(Object.entries(out).map(([k, t]) => [k, [...t.dims]])), types: new Map(Object.entries(out).map(([k, t]) => [k, t.type])) };
  } catch (e) {
    await session.release();
    throw e;
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
  try {
    return await chainOf(ort, options, graph, found, entries, probed, getMsda);
  } finally {
    await probed.session.release();
  }
}

async function chainOf(ort, options, graph, found, entries, probed, getMsda) {
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
  // GPU buffers across the cuts when the op runs on ORT's device (an instance given for the CPU: CPU tensors).
  const gpu = onWebgpu(options) && (await getMsda()).backend === 'webgpu';
  const stages = [];
  try {
    for (const [s, st] of plan.stages.entries()) {
      if (st.nodes.every((i) => graph.constNodes.has(i))) { stages.push({ session: null, inputs: [] }); continue; }
      const missing = [...st.inputs, ...st.outputs].find((t) => !typeOf(t));
      if (missing) throw new Error(`${PREFIX}: createSession: the probe gave no type for ${missing}, which crosses a cut`);
      const m = subModel(graph, st.nodes, st.inputs.map((name) => ({ name, type: typeOf(name) })), st.outputs.map((name) => ({ name, type: typeOf(name) })), `stage${s}`);
      stages.push({ session: await ort.InferenceSession.create(encodeModel(m), stageOptions(options, graph, st.outputs, gpu)), inputs: st.inputs });
    }
  } catch (e) {
    await Promise.all(stages.map((st) => st.session?.release()));
    throw e;
  }
  return { stages, ops: plan.ops.map((op) => ({ ...op, ...replaced.find((r) => r.block === op.block) })) };
}

// What the op is given for an ORT tensor: its GPU buffer on ORT's device, else its CPU data.
const operand = (t, shape) => (t.location === 'gpu-buffer' ? { buffer: t.gpuBuffer, shape } : { data: t.data, shape });

/**
 * Runs a chain on feeds (a Map of the model's inputs); resolves to the outputs by name, on the CPU
 * as ORT's session returns them. On a WebGPU instance the op reads and writes GPU buffers, and
 * every GPU tensor made on the way is released before it returns.
 */
export async function runChain(ort, chain, msda, feeds, outputNames) {
  const live = new Map(feeds), made = [];
  const { stages, ops } = chain;
  const gpu = msda?.backend === 'webgpu';
  try {
    for (let s = 0; s <= stages.length; s++) {
      for (const op of ops) {
        if (op.before !== s) continue;
        const args = forwardArgs(op.block, op.problem, null, null, null);
        const [v, l, w] = [op.block.value, op.block.samplingLocations, op.block.attentionWeights].map((t) => live.get(t));
        Object.assign(args, { value: operand(v, args.value.shape), samplingLocations: operand(l, args.samplingLocations.shape), attentionWeights: operand(w, args.attentionWeights.shape) });
        let t;
        if (gpu) {
          const out = await msda.forward(args, { outputs: 'gpu' });
          t = ort.Tensor.fromGpuBuffer(out.buffer, { dataType: 'float32', dims: op.shape, dispose: () => out.buffer.destroy() });
        } else {
          t = new ort.Tensor('float32', (await msda.forward(args)).data, op.shape);
        }
        made.push(t);
        live.set(op.block.output, t);
      }
      if (s === stages.length || !stages[s].session) continue;
      const f = {};
      for (const x of stages[s].inputs) f[x] = live.get(x);
      const out = await stages[s].session.run(f);
      for (const [k, t] of Object.entries(out)) { made.push(t); live.set(k, t); }
    }
    const result = {};
    for (const n of outputNames) {
      const t = live.get(n);
      result[n] = t.location === 'gpu-buffer' ? new ort.Tensor(t.type, await t.getData(), t.dims) : t;
    }
    return result;
  } finally {
    for (const t of made) if (t.location === 'gpu-buffer') t.dispose();
  }
}

export const releaseChain = (chain) => Promise.all(chain.stages.map((st) => st.session?.release()));

// A plugin node's problem from its inputs' shapes and its constant levels, or { why }.
function readPluginProblem(block, v, s, w) {
  if (v.length !== 4) return { why: `value ${block.value} is [${v}], not (N, S, M, D)` };
  const [B, Len, H, C] = v;
  if (s.length !== 6 || s[0] !== B || s[2] !== H || s[3] !== block.levels.length || s[5] !== 2) {
    return { why: `sampling_locations ${block.samplingLocations} [${s}] are not (N, Lq, M, ${block.levels.length}, P, 2) of value [${v}]` };
  }
  const [, Q, , NL, P] = s;
  if (w.length !== 5 || w.some((d, k) => d !== s[k])) return { why: `attention_weights ${block.attentionWeights} [${w}] are not (N, Lq, M, L, P) of locations [${s}]` };
  const pixels = block.levels.reduce((a, [h, x]) => a + h * x, 0);
  if (pixels !== Len) return { why: `the levels [${block.levels.map((l) => l.join('×'))}] hold ${pixels} pixels and the value ${Len}` };
  return { problem: { B, Len, H, C, Q, NL, P, levels: block.levels } };
}

/**
 * The chain for a graph with plugin nodes, which ORT cannot run: each stage's session is made
 * and run in turn on `feeds` (the stages before a node make its inputs, so its shapes are read
 * there), the op run on each node. The nodes are read by their documented inputs; ORT has no run of
 * them to compare with, so a node that cannot be read is an error, not a block left to ORT.
 */
export async function buildPluginChain(ort, options, graph, found, entries, feeds, getMsda) {
  const plan = planStages(graph, found);
  const live = new Map(feeds), stages = [], ops = [];
  try {
    for (let s = 0; s <= plan.stages.length; s++) {
      for (const op of plan.ops) {
        if (op.before !== s) continue;
        const b = op.block, e = entries[found.indexOf(b)];
        const [v, l, w] = [b.value, b.samplingLocations, b.attentionWeights].map((t) => live.get(t));
        const types = [v, l, w].map((t) => t.type);
        const { problem, why } = types.some((t) => t !== 'float32')
          ? { why: `element types ${types.join(', ')}: float32 nodes only so far` } : readPluginProblem(b, v.dims, l.dims, w.dims);
        if (why) throw new Error(`${PREFIX}: createSession: ${b.names.plugin}: ${why}; ONNX Runtime cannot run this node either`);
        Object.assign(e, { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', batch: problem.B, queries: problem.Q, heads: problem.H,
          channels: problem.C, levels: problem.levels, points: problem.P, replaced: true, why: null,
          verification: null });
        const shape = b.outputRank === 4 ? [problem.B, problem.Q, problem.H, problem.C] : [problem.B, problem.Q, problem.H * problem.C];
        const out = await (await getMsda()).forward(forwardArgs(b, problem, v.data, l.data, w.data));
        live.set(b.output, new ort.Tensor('float32', out.data, shape));
        ops.push({ ...op, problem, shape });
      }
      if (s === plan.stages.length) break;
      const st = plan.stages[s];
      if (st.nodes.every((i) => graph.constNodes.has(i))) { stages.push({ session: null, inputs: [] }); continue; }
      const m = subModel(graph, st.nodes, st.inputs.map((name) => ({ name, type: live.get(name).type })), st.outputs.map((name) => ({ name })), `stage${s}`);
      const session = await ort.InferenceSession.create(encodeModel(m), options);
      stages.push({ session, inputs: st.inputs });
      const out = await session.run(Object.fromEntries(st.inputs.map((x) => [x, live.get(x)])));
      for (const [k, t] of Object.entries(out)) live.set(k, t);
    }
  } catch (e) {
    await Promise.all(stages.map((st) => st.session?.release()));
    throw e;
  }
  return { stages, ops };
}
