// One chain of ORT sessions and op calls for one set of input shapes: the blocks' shapes read from a
// probe run (the model with the blocks' tensors as extra outputs), each block verified, the graph
// cut at the verified ones (plan.js), a session made per stage.

import { liveLevels } from './levels.js';
import { encodeModel, subModel, ELEM } from './model.js';
import { planStages } from './plan.js';
import { forwardArgs, forwardHalf, halfArgs, readProblem, verifyBlock } from './verify.js';

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

/**
 * Reads a GridSample block's problem from `shapes` and `types` (tensor name -> dims, element
 * type) and verifies it against ORT; fills its report entry `e`. The problem (with its dtype,
 * 'float32' or 'float16') when it may be replaced, else null (e.why says why).
 */
export async function checkBlock(ort, options, graph, b, e, shapes, types, getMsda, seed) {
  e.replaced = false;
  const elems = [b.value, b.samplingLocations, b.attentionWeights, b.output].map((t) => types.get(t)), dtype = elems[0];
  if (!['float32', 'float16'].includes(dtype) || elems.some((t) => t !== dtype)) { e.why = `element types ${elems.join(', ')}: float32 or float16 blocks (all four alike) only so far`; return null; }
  const { problem, why } = readProblem(b, shapes);
  if (why) { e.why = why; return null; }
  problem.dtype = dtype;
  Object.assign(e, { dtype, valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', batch: problem.B, queries: problem.Q, heads: problem.H,
    channels: problem.C, levels: problem.levels, points: problem.P });
  const check = await verifyBlock(ort, options, graph, b, problem, shapes, await getMsda(), seed, dtype);
  e.verification = { checked: check.checked, worst: check.worst, used: check.used };
  if (!check.agree) { e.why = `ORT's run of the block and ours disagree beyond crosscheck's bound (${JSON.stringify(check.worst)}): left to ORT`; return null; }
  e.replaced = true;
  e.why = null;
  return problem;
}

async function chainOf(ort, options, graph, found, entries, probed, getMsda) {
  const replaced = [];
  for (let k = 0; k < found.length; k++) {
    const b = found[k];
    const problem = await checkBlock(ort, options, graph, b, entries[k], probed.shapes, probed.types, getMsda, 0x5eed + k);
    if (problem) replaced.push({ block: b, problem, shape: probed.shapes.get(b.output) });
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
  return { stages, gpu, ops: plan.ops.map((op) => ({ ...op, ...replaced.find((r) => r.block === op.block) })) };
}

/**
 * The op's output as a CPU ort.Tensor of the block's dtype: a float16 block's inputs go in as
 * their bits and its float32 result is rounded once to float16 (verify.js's forwardHalf).
 */
export async function opOutput(ort, msda, args, dtype, shape) {
  if (dtype === 'float16') return new ort.Tensor('float16', await forwardHalf(msda, halfArgs(args), false), shape);
  return new ort.Tensor('float32', (await msda.forward(args)).data, shape);
}

// What the op is given for an ORT tensor: its GPU buffer on ORT's device, else its CPU data.
const operand = (t, shape) => (t.location === 'gpu-buffer' ? { buffer: t.gpuBuffer, shape } : { data: t.data, shape });

// A plugin node's levels computed by the graph are read again at every run: the chain was made
// for the ones its first run gave.
async function sameLevels(op, live) {
  const { levels, why } = await liveLevels(op.block, live);
  const node = op.block.names.plugin;
  if (why) throw new Error(`${PREFIX}: run: ${node}: ${why}`);
  if (JSON.stringify(levels) !== JSON.stringify(op.problem.levels)) {
    throw new Error(`${PREFIX}: run: ${node}: its spatial_shapes ${op.block.levelSources.spatialShapes.name} are [${levels.map((l) => l.join('×'))}] in this run and were [${op.problem.levels.map((l) => l.join('×'))}] when the chain for these input shapes was made`);
  }
}

/**
 * Runs a chain on feeds (a Map of the model's inputs); resolves to the outputs by name, on the CPU
 * as ORT's session returns them. On a WebGPU instance the op reads and writes GPU buffers, and
 * every GPU tensor made on the way is released before it returns.
 */
export async function runChain(ort, chain, msda, feeds, outputNames) {
  const live = new Map(feeds), made = [];
  const { stages, ops } = chain;
  // GPU tensors only where the stages were made for them (a WebGPU instance under the wasm EP: CPU ones).
  const gpu = chain.gpu === true && msda?.backend === 'webgpu';
  try {
    for (let s = 0; s <= stages.length; s++) {
      for (const op of ops) {
        if (op.before !== s) continue;
        if (op.session) { // a block left to ORT in a chain around plugin nodes: its own session
          const out = await op.session.run(Object.fromEntries(op.block.reads.map((x) => [x, live.get(x)])));
          for (const [k, t] of Object.entries(out)) { made.push(t); live.set(k, t); }
          continue;
        }
        if (op.block.levels === null) await sameLevels(op, live);
        const args = forwardArgs(op.block, op.problem, null, null, null);
        const [v, l, w] = [op.block.value, op.block.samplingLocations, op.block.attentionWeights].map((t) => live.get(t));
        Object.assign(args, { value: operand(v, args.value.shape), samplingLocations: operand(l, args.samplingLocations.shape), attentionWeights: operand(w, args.attentionWeights.shape) });
        const dtype = op.problem.dtype ?? 'float32';
        let t;
        if (gpu) {
          // ORT's buffers in (a float16 block's as float16), the output in the block's dtype (float16: rounded once).
          const out = dtype === 'float16' ? await forwardHalf(msda, halfArgs(args), true) : await msda.forward(args, { outputs: 'gpu' });
          t = ort.Tensor.fromGpuBuffer(out.buffer, { dataType: dtype, dims: op.shape, dispose: () => out.buffer.destroy() });
        } else {
          t = await opOutput(ort, msda, args, dtype, op.shape);
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

export const releaseChain = (chain) => Promise.all([...chain.stages, ...chain.ops].map((st) => st.session?.release()));
