// Finding the deformable-attention blocks of a graph: the GridSample decomposition that
// torch.onnx.export writes for the published PyTorch functions (Deformable DETR's
// ms_deform_attn_core_pytorch, mmcv's multi_scale_deformable_attn_pytorch, Hugging Face's
// multi_scale_deformable_attention, RT-DETR's deformable_attention_core_func all write it alike):
//
//   value (B, Len, H, C) ─ Split(axis 1) ─ per level: Reshape ─ Transpose ─ Reshape (B·H, C, H_l, W_l) ─┐
//   locations (B, Q, H, NL, P, 2) ─ Mul 2 ─ Sub 1 ─ per level: Gather(axis 3, l) ─ Transpose ─ Reshape ─ GridSample
//   weights (B, Q, H, NL, P) ─ Transpose ─ Reshape (B·H, 1, Q, NL·P) ─────── Mul ─ ReduceSum ─ Reshape ─ Transpose ─ output (B, Q, H·C)
//              GridSample per level ─ Unsqueeze ─ Concat ─ Reshape ──────────┘
//
// mmcv's function takes spatial_shapes as a tensor: its split sizes are computed at run time, and
// the exporter writes one Slice per level (starts and ends computed, each level from where the one
// before ends) instead of the Split.
//
// What a pattern says is only a guess: verify.js runs each block through ORT before it is trusted.
// A block is the nodes between its three inputs and its output; nothing else may read inside it
// (but nodes computed from constants alone, which every part of a cut graph that reads them gets a
// copy of).

import { levelsOf } from './levels.js';
import { attr } from './model.js';

// Ops that only move elements (the decomposition's plumbing); Shape nodes feed their shapes.
const SAME_ORDER = new Set(['Reshape', 'Flatten', 'Squeeze', 'Unsqueeze', 'Identity']);
const PLUMBING = new Set([...SAME_ORDER, 'Transpose', 'Concat', 'Gather', 'Slice', 'Split']);

const dataConsumers = (graph, name) => graph.consumersOf(name).filter((n) => n.op_type !== 'Shape');

// From a tensor through single-consumer plumbing to the first other op: [that node, path] or null.
function forwardTo(graph, name, ops) {
  let t = name;
  for (let steps = 0; steps < 64; steps++) {
    const next = dataConsumers(graph, t);
    if (next.length !== 1 || graph.outputs.includes(t)) return null;
    const n = next[0];
    if (!PLUMBING.has(n.op_type)) return ops.includes(n.op_type) ? n : null;
    t = n.output[0];
  }
  return null;
}

// Back from a tensor through data inputs (input 0) of ops in `through` while `until` says go on.
function backward(graph, name, through) {
  const path = [];
  let t = name;
  for (let steps = 0; steps < 64; steps++) {
    const p = graph.producerOf(t);
    if (!p || !through.has(p.op_type)) return { tensor: t, path, stop: p };
    path.push(p);
    t = p.input[0];
  }
  return { tensor: t, path, stop: null };
}

const isConst = (graph, name, value) => {
  const v = graph.constant(name);
  return v !== null && v.length === 1 && v[0] === value;
};

// x in `2 * x - 1` (Sub(Mul(x, 2), 1), either Mul operand the constant), or null.
function affineSource(graph, node) {
  if (!node || node.op_type !== 'Sub' || !isConst(graph, node.input[1], 1)) return null;
  const m = graph.producerOf(node.input[0]);
  if (!m || m.op_type !== 'Mul') return null;
  if (isConst(graph, m.input[1], 2)) return m.input[0];
  if (isConst(graph, m.input[0], 2)) return m.input[1];
  return null;
}

// The nodes computing `output` from `inputs` (indices), or the name of a tensor it reads besides them.
function closure(graph, output, inputs) {
  const nodes = new Set(), seen = new Set(inputs);
  const stack = [output];
  while (stack.length) {
    const t = stack.pop();
    if (seen.has(t) || !t) continue;
    seen.add(t);
    if (graph.initializers.has(t)) continue;
    const i = graph.producer.get(t);
    if (i === undefined) return { outside: t };
    nodes.add(i);
    stack.push(...graph.nodes[i].input);
  }
  return { nodes };
}

/**
 * The GridSample decomposition's blocks: [{ id, nodes (indices), names, value, samplingLocations,
 * attentionWeights, output, levels (GridSample nodes' X inputs, in level order), alignCorners,
 * paddingMode }] and `skipped`: [{ where, why }] for GridSample groups that are not a block.
 */
export function findGridSampleBlocks(graph) {
  const groups = new Map(); // Mul node -> GridSample nodes
  const skipped = [];
  for (const n of graph.nodes) {
    if (n.op_type !== 'GridSample') continue;
    const mul = forwardTo(graph, n.output[0], ['Mul']);
    if (!mul) { skipped.push({ where: [n.name], why: 'its output does not reach a Mul through reshapes alone' }); continue; }
    if (!groups.has(mul)) groups.set(mul, []);
    groups.get(mul).push(n);
  }
  const blocks = [];
  for (const [mul, grids] of groups) {
    const where = grids.map((g) => g.name);
    const fail = (why) => skipped.push({ where: [...where, mul.name], why });
    const sum = dataConsumers(graph, mul.output[0]);
    if (sum.length !== 1 || sum[0].op_type !== 'ReduceSum') { fail('the Mul after the GridSample nodes is not summed by one ReduceSum'); continue; }
    // The output: past the ReduceSum through reshapes and transposes to the first other op.
    let output = sum[0].output[0];
    for (;;) {
      const next = dataConsumers(graph, output);
      if (graph.outputs.includes(output) || next.length !== 1 || !(SAME_ORDER.has(next[0].op_type) || next[0].op_type === 'Transpose')) break;
      output = next[0].output[0];
    }
    // The weights: the Mul's other operand, back through reshapes to just before the first Transpose.
    const chain = new Set(grids.flatMap((g) => [g.output[0]]));
    const other = mul.input.find((x) => !reaches(graph, x, chain));
    if (!other) { fail("the Mul's operands both come from the GridSample nodes"); continue; }
    const w = backward(graph, other, SAME_ORDER);
    if (!w.stop || w.stop.op_type !== 'Transpose') { fail('the attention weights are not transposed to (B·H, 1, Q, L·P) as the reference does'); continue; }
    const attentionWeights = w.stop.input[0];
    // The value: each level's X back through plumbing to one Split (its outputs in level order) or,
    // where the split sizes are computed from a spatial_shapes tensor (mmcv's), to one Slice each.
    const levelOf = new Map();
    const levelSlice = new Map();
    let split = null, slices = [], bad = null;
    for (const g of grids) {
      const b = backward(graph, g.input[0], new Set([...SAME_ORDER, 'Transpose']));
      if (b.stop?.op_type === 'Slice' && !split) { slices.push(b.stop); levelSlice.set(g, b.stop); continue; }
      if (!b.stop || b.stop.op_type !== 'Split' || slices.length || (split && b.stop !== split)) { bad = `${g.name}'s input is not one output of the value's Split, nor one Slice of it`; break; }
      split = b.stop;
      levelOf.set(g, split.output.indexOf(b.tensor));
    }
    if (bad) { fail(bad); continue; }
    if (slices.length) {
      const order = sliceOrder(graph, slices);
      if (typeof order === 'string') { fail(order); continue; }
      for (const g of grids) levelOf.set(g, order.indexOf(levelSlice.get(g)));
    } else {
      if (attr(split, 'axis', 0) !== 1) { fail(`the value's Split is along axis ${attr(split, 'axis', 0)}, not 1`); continue; }
      if (split.output.length !== grids.length) { fail(`the value is split in ${split.output.length} levels and ${grids.length} are sampled`); continue; }
    }
    // The locations: each level's grid back to one `2 * x - 1`.
    let affine = null;
    for (const g of grids) {
      const b = backward(graph, g.input[1], new Set([...SAME_ORDER, 'Transpose', 'Gather', 'Slice']));
      if (!b.stop || (affine && b.stop !== affine) || !affineSource(graph, b.stop)) { bad = `${g.name}'s grid is not read from 2 * locations - 1`; break; }
      affine = b.stop;
    }
    if (bad) { fail(bad); continue; }
    const samplingLocations = affineSource(graph, affine);
    const modes = new Set(grids.map((g) => attr(g, 'mode', 'bilinear')));
    const pads = new Set(grids.map((g) => attr(g, 'padding_mode', 'zeros')));
    const aligns = new Set(grids.map((g) => attr(g, 'align_corners', 0)));
    if (modes.size !== 1 || !['bilinear', 'linear'].includes([...modes][0])) { fail(`GridSample mode ${[...modes].join(', ')} (the op samples bilinearly: 'bilinear', or 'linear' from opset 20)`); continue; }
    if (pads.size !== 1 || !['zeros', 'border'].includes([...pads][0])) { fail(`GridSample padding_mode ${[...pads].join(', ')} (zeros or border are the op's)`); continue; }
    if (aligns.size !== 1) { fail('the levels differ in align_corners'); continue; }
    const value = (split ?? slices[0]).input[0];
    const inputs = [value, samplingLocations, attentionWeights];
    const c = closure(graph, output, inputs);
    if (c.outside) { fail(`the block reads ${c.outside} besides its value, locations and weights`); continue; }
    const leak = [...c.nodes].filter((i) => !graph.constNodes.has(i)).flatMap((i) => graph.nodes[i].output).find((t) => t !== output
      && (graph.outputs.includes(t) || (graph.consumers.get(t) ?? []).some((i) => !c.nodes.has(i))));
    if (leak) { fail(`${leak}, inside the block, is read outside it`); continue; }
    const levels = [...grids].sort((a, b) => levelOf.get(a) - levelOf.get(b));
    blocks.push({
      formulation: 'GridSample decomposition (PyTorch reference)',
      nodes: c.nodes,
      at: Math.min(...grids.map((g) => graph.nodes.indexOf(g))),
      names: { gridSample: levels.map((g) => g.name), ...(split ? { split: split.name } : { slices: levels.map((g) => levelSlice.get(g).name) }), mul: mul.name, reduceSum: sum[0].name },
      value, samplingLocations, attentionWeights, output,
      reads: inputs,
      levelInputs: levels.map((g) => g.input[0]),
      alignCorners: [...aligns][0] === 1,
      paddingMode: [...pads][0],
    });
  }
  return { blocks, skipped };
}

// The value's per-level Slices in level order (along axis 1, step 1, the first from 0 and each from
// where the one before ends: the same tensor or equal constants), or why they are not.
function sliceOrder(graph, slices) {
  const one = (name) => { const v = name ? graph.constant(name) : null; return v && v.length === 1 ? v[0] : null; };
  if (new Set(slices).size !== slices.length) return 'two levels are sampled from one Slice of the value';
  if (slices.some((n) => n.input[0] !== slices[0].input[0])) return "the levels' Slices read different tensors";
  for (const n of slices) {
    const axis = one(n.input[3]), step = n.input[4] ? one(n.input[4]) : 1;
    if (axis !== 1 && axis !== -3) return `${n.name} slices the value along axis ${n.input[3] ? axis ?? 'computed at run time' : 0}, not 1`;
    if (step !== 1) return `${n.name} slices the value with step ${step ?? 'computed at run time'}, not 1`;
  }
  const follows = (prevEnd, n) => n.input[1] === prevEnd || (one(prevEnd) !== null && one(n.input[1]) === one(prevEnd));
  const order = [];
  let next = slices.filter((n) => one(n.input[1]) === 0);
  while (next.length === 1) {
    order.push(next[0]);
    const end = next[0].input[2];
    next = slices.filter((n) => !order.includes(n) && follows(end, n));
  }
  if (order.length !== slices.length) return "the value's Slices do not cut it into consecutive levels from 0";
  return order;
}

// Whether tensor `name` is computed from one of `targets`.
function reaches(graph, name, targets) {
  const seen = new Set(), stack = [name];
  while (stack.length) {
    const t = stack.pop();
    if (targets.has(t)) return true;
    if (seen.has(t)) continue;
    seen.add(t);
    const p = graph.producerOf(t);
    if (p) stack.push(...p.input.filter(Boolean));
  }
  return false;
}

// Single nodes of the op in deployment exports, by their documented inputs (value, spatial_shapes,
// level_start_index, sampling_locations, attention_weights): TensorRT's plugin (NVIDIA TAO's
// exports) writes (N, Lq, M, D), mmdeploy's op (N, Lq, M·D); both sample as grid_sample with
// align_corners false and zero padding (Deformable DETR's CUDA kernel).
const PLUGINS = new Map([
  ['MultiscaleDeformableAttnPlugin_TRT', 'TensorRT plugin node (MultiscaleDeformableAttnPlugin_TRT)'],
  ['MMCVMultiScaleDeformableAttention', "mmdeploy's node (MMCVMultiScaleDeformableAttention)"],
]);

// Whether tensor `name` depends on a model input's values (not through its Shape alone).
function readsValues(graph, name) {
  const seen = new Set(), stack = [name];
  while (stack.length) {
    const t = stack.pop();
    if (seen.has(t) || !t) continue;
    seen.add(t);
    if (graph.inputs.includes(t)) return true;
    const p = graph.producerOf(t);
    if (p && p.op_type !== 'Shape' && p.op_type !== 'Size') stack.push(...p.input);
  }
  return false;
}

/**
 * The plugin nodes: blocks (as findGridSampleBlocks's, with `levels` read when constant, else
 * null and read from each run through `levelSources`) and `skipped`.
 */
export function findPluginBlocks(graph) {
  const blocks = [], skipped = [];
  graph.nodes.forEach((n, i) => {
    if (!PLUGINS.has(n.op_type)) return;
    const fail = (why) => skipped.push({ where: [n.name], why, plugin: true });
    if (n.input.length !== 5 || n.output.length < 1) { fail(`${n.op_type} with ${n.input.length} inputs and ${n.output.length} outputs (5 and 1 documented)`); return; }
    const [value, shapesName, startsName, samplingLocations, attentionWeights] = n.input;
    const shapes = graph.constant(shapesName), starts = graph.constant(startsName);
    // Constant levels are read now; computed ones from each run, before the node (levels.js).
    let levels = null;
    if (shapes && starts) {
      const read = levelsOf(shapes, starts, { shapes: shapesName, starts: startsName });
      if (read.why) { fail(read.why); return; }
      levels = read.levels;
    }
    const computed = [shapesName, startsName].filter((t) => graph.constant(t) === null);
    blocks.push({
      formulation: PLUGINS.get(n.op_type),
      nodes: new Set([i]),
      at: i,
      names: { plugin: n.name },
      value, samplingLocations, attentionWeights, output: n.output[0],
      reads: [value, samplingLocations, attentionWeights, ...computed],
      levels,
      levelSources: { spatialShapes: { name: shapesName, values: shapes }, levelStartIndex: { name: startsName, values: starts } },
      levelsFromValues: computed.some((t) => readsValues(graph, t)),
      outputRank: n.op_type === 'MultiscaleDeformableAttnPlugin_TRT' ? 4 : 3,
      alignCorners: false,
      paddingMode: 'zeros',
    });
  });
  return { blocks, skipped };
}
