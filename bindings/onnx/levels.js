// A plugin node's levels: its spatial_shapes (L, 2) and level_start_index (L), each a constant of
// the graph, computed from constants alone (evaluated once) or computed from the inputs (read from
// each run), and each held to the other.

import { encodeModel, subModel } from './model.js';

/**
 * [[H, W], ...] from spatial_shapes' and level_start_index's numbers (and their dims when known),
 * or { why }: the starts must be the prefix sums of H·W and every size positive.
 */
export function levelsOf(shapes, starts, names, dims = {}) {
  const levels = [];
  for (let l = 0; l < shapes.length / 2; l++) levels.push([shapes[2 * l], shapes[2 * l + 1]]);
  let start = 0;
  const bad = shapes.length % 2 !== 0 || starts.length !== levels.length
    || (dims.shapes && (dims.shapes.length !== 2 || dims.shapes[1] !== 2)) || (dims.starts && dims.starts.length !== 1)
    || levels.some(([h, w], l) => {
      const wrong = starts[l] !== start || !(h > 0) || !(w > 0);
      start += h * w;
      return wrong;
    });
  if (bad) {
    const dimsOf = (d) => (d ? ` of dims [${d}]` : '');
    return { why: `spatial_shapes ${names.shapes} [${shapes}]${dimsOf(dims.shapes)} and level_start_index ${names.starts} [${starts}]${dimsOf(dims.starts)} are not (L, 2) levels and their starts (the prefix sums of H·W)` };
  }
  return { levels };
}

// The numbers of an integer ort.Tensor, or null for another element type.
async function integers(t) {
  if (!t || (t.type !== 'int64' && t.type !== 'int32')) return null;
  const data = t.location === 'gpu-buffer' ? await t.getData() : t.data;
  return Array.from(data, Number);
}

/**
 * The levels of a plugin block whose spatial_shapes or level_start_index the graph computes:
 * read from `live` (tensor name -> ort.Tensor of this run), or { why }.
 */
export async function liveLevels(block, live) {
  const { spatialShapes: s, levelStartIndex: i } = block.levelSources;
  const read = async (src) => (src.values ? { values: src.values, dims: src.dims } : { values: await integers(live.get(src.name)), dims: live.get(src.name)?.dims && [...live.get(src.name).dims] });
  const shapes = await read(s), starts = await read(i);
  const untyped = [[s, shapes], [i, starts]].find(([, r]) => !r.values);
  if (untyped) {
    const [src] = untyped, t = live.get(src.name), role = src === s ? 'spatial_shapes' : 'level_start_index';
    return { why: t ? `${src.name} (its ${role}) is ${t.type} at run time, not int64 or int32` : `${src.name} (its ${role}) was not made by the stages before it` };
  }
  return levelsOf(shapes.values, starts.values, { shapes: s.name, starts: i.name }, { shapes: shapes.dims, starts: starts.dims });
}

/**
 * Evaluates the levels a plugin block reads from nodes computed from constants alone
 * (graph.constNodes: what an exporter writes for a shapes tensor built from constants) by one ORT
 * run of those nodes (on ORT's default CPU EP: a few integers), and makes them the block's
 * constants. { why } when they cannot be read as levels.
 */
export async function foldLevels(ort, options, graph, block) {
  const srcs = Object.values(block.levelSources).filter((s) => !s.values && graph.constNodes.has(graph.producer.get(s.name)));
  if (srcs.length === 0) return {};
  const nodes = new Set(), stack = srcs.map((s) => s.name);
  while (stack.length) {
    const i = graph.producer.get(stack.pop());
    if (i === undefined || nodes.has(i)) continue;
    nodes.add(i);
    stack.push(...graph.nodes[i].input.filter(Boolean));
  }
  const { executionProviders, ...cpu } = options;
  const session = await ort.InferenceSession.create(encodeModel(subModel(graph, [...nodes], [], srcs.map((s) => ({ name: s.name })), 'levels')), cpu);
  let out;
  try {
    out = await session.run({});
  } finally {
    await session.release();
  }
  for (const s of srcs) {
    s.values = await integers(out[s.name]);
    if (!s.values) return { why: `${s.name}, computed from constants, is ${out[s.name].type}, not int64 or int32` };
    s.dims = [...out[s.name].dims];
  }
  block.reads = block.reads.filter((t) => !srcs.some((s) => s.name === t));
  const { spatialShapes: sh, levelStartIndex: st } = block.levelSources;
  if (sh.values && st.values) {
    const read = levelsOf(sh.values, st.values, { shapes: sh.name, starts: st.name }, { shapes: sh.dims, starts: st.dims });
    if (read.why) return read;
    block.levels = read.levels;
  }
  return {};
}
