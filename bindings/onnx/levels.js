// A plugin node's levels: its spatial_shapes (L, 2) and level_start_index (L), each a constant of
// the graph or a tensor the graph computes (read from a run), and each held to the other.

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
  const read = async (src) => (src.values ? { values: src.values } : { values: await integers(live.get(src.name)), dims: live.get(src.name)?.dims && [...live.get(src.name).dims] });
  const shapes = await read(s), starts = await read(i);
  const untyped = [[s, shapes], [i, starts]].find(([, r]) => !r.values);
  if (untyped) return { why: `${untyped[0].name} (its ${untyped[0] === s ? 'spatial_shapes' : 'level_start_index'}) is ${live.get(untyped[0].name)?.type ?? 'not made'} at run time, not int64 or int32` };
  return levelsOf(shapes.values, starts.values, { shapes: s.name, starts: i.name }, { shapes: shapes.dims, starts: starts.dims });
}
