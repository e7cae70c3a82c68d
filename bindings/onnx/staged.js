// The chain of a graph with plugin nodes (TensorRT's, mmdeploy's), which ORT cannot run, so no
// probe of the whole model is possible: the graph is cut at every block found, plugin nodes and
// GridSample blocks alike (one plan), and each stage's session is made and run in turn on the
// feeds; each block is read from the tensors the stages before it made.
//
// - A plugin node is read by its documented inputs, its levels from the graph's constants or,
//   computed by the graph, from this run's tensors (levels.js). ORT has no run of it to compare
//   with, so a node that cannot be read is an error naming it, not a block left to ORT.
// - A GridSample block is run alone through ORT on this run's inputs (which gives its levels'
//   shapes), then verified as buildChain's are (checkBlock). One that disagrees stays with ORT as
//   a session of its own between the stages, which the plan needs no change for.

import { checkBlock, opOutput } from './chain.js';
import { liveLevels } from './levels.js';
import { encodeModel, subModel } from './model.js';
import { planStages } from './plan.js';
import { forwardArgs } from './verify.js';

const PREFIX = 'ms-deform-attn/onnx';

// A plugin node's problem from its inputs' shapes and its levels, or { why }.
function readPluginProblem(block, levels, v, s, w) {
  if (v.length !== 4) return { why: `value ${block.value} is [${v}], not (N, S, M, D)` };
  const [B, Len, H, C] = v;
  if (s.length !== 6 || s[0] !== B || s[2] !== H || s[3] !== levels.length || s[5] !== 2) {
    return { why: `sampling_locations ${block.samplingLocations} [${s}] are not (N, Lq, M, ${levels.length}, P, 2) of value [${v}]` };
  }
  const [, Q, , NL, P] = s;
  if (w.length !== 5 || w.some((d, k) => d !== s[k])) return { why: `attention_weights ${block.attentionWeights} [${w}] are not (N, Lq, M, L, P) of locations [${s}]` };
  const pixels = levels.reduce((a, [h, x]) => a + h * x, 0);
  if (pixels !== Len) return { why: `the levels [${levels.map((l) => l.join('×'))}] hold ${pixels} pixels and the value ${Len}` };
  return { problem: { B, Len, H, C, Q, NL, P, levels } };
}

async function pluginOp(ort, b, e, live, msda) {
  const node = b.names.plugin;
  const fail = (why) => new Error(`${PREFIX}: createSession: ${node}: ${why}; ONNX Runtime cannot run this node either`);
  let levels = b.levels;
  if (levels === null) {
    const read = await liveLevels(b, live);
    if (read.why) throw fail(read.why);
    levels = read.levels;
  }
  const [v, l, w] = [b.value, b.samplingLocations, b.attentionWeights].map((t) => live.get(t));
  const types = [v, l, w].map((t) => t.type), dtype = types[0];
  const { problem, why } = !['float32', 'float16'].includes(dtype) || types.some((t) => t !== dtype)
    ? { why: `element types ${types.join(', ')}: float32 or float16 nodes (all three alike) only so far` } : readPluginProblem(b, levels, v.dims, l.dims, w.dims);
  if (why) throw fail(why);
  problem.dtype = dtype;
  Object.assign(e, { dtype, valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', batch: problem.B, queries: problem.Q, heads: problem.H,
    channels: problem.C, levels: problem.levels, points: problem.P, replaced: true, why: null, verification: null });
  const shape = b.outputRank === 4 ? [problem.B, problem.Q, problem.H, problem.C] : [problem.B, problem.Q, problem.H * problem.C];
  return { problem, shape, output: await opOutput(ort, msda, forwardArgs(b, problem, v.data, l.data, w.data), dtype, shape) };
}

async function gridOp(ort, options, graph, b, e, live, getMsda, seed) {
  const inputs = b.reads.map((name) => ({ name, type: live.get(name).type }));
  const feeds = Object.fromEntries(b.reads.map((x) => [x, live.get(x)]));
  const alone = (outputs) => ort.InferenceSession.create(encodeModel(subModel(graph, [...b.nodes], inputs, outputs.map((name) => ({ name })), 'block')), options);
  // The block alone on this run's inputs, its levels' tensors as outputs too: their shapes.
  const probe = await alone([b.output, ...b.levelInputs]);
  let out;
  try {
    out = await probe.run(feeds);
  } finally {
    await probe.release();
  }
  const shapes = new Map([...Object.entries(feeds), ...Object.entries(out)].map(([k, t]) => [k, [...t.dims]]));
  const types = new Map([...Object.entries(feeds), ...Object.entries(out)].map(([k, t]) => [k, t.type]));
  const problem = await checkBlock(ort, options, graph, b, e, shapes, types, getMsda, seed);
  if (!problem) return { session: await alone([b.output]), output: out[b.output] };
  const shape = shapes.get(b.output);
  const args = forwardArgs(b, problem, feeds[b.value].data, feeds[b.samplingLocations].data, feeds[b.attentionWeights].data);
  return { problem, shape, output: await opOutput(ort, await getMsda(), args, problem.dtype, shape) };
}

/**
 * Reads, verifies and chains the blocks `found` (plugin nodes and GridSample blocks) on `feeds`,
 * stage by stage; fills `entries`. Resolves to a chain as buildChain's: { stages, ops }, an op
 * either the op's ({ block, problem, shape, before }) or a block left to ORT ({ block, session,
 * before }).
 */
export async function buildStagedChain(ort, options, graph, found, entries, feeds, getMsda) {
  const plan = planStages(graph, found);
  const live = new Map(feeds), stages = [], ops = [];
  try {
    for (let s = 0; s <= plan.stages.length; s++) {
      for (const op of plan.ops) {
        if (op.before !== s) continue;
        const b = op.block, k = found.indexOf(b), e = entries[k];
        const { output, ...made } = b.names.plugin ? await pluginOp(ort, b, e, live, await getMsda())
          : await gridOp(ort, options, graph, b, e, live, getMsda, 0x5eed + k);
        live.set(b.output, output);
        ops.push({ ...op, ...made });
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
    await Promise.all([...stages, ...ops].map((st) => st.session?.release()));
    throw e;
  }
  return { stages, ops };
}
