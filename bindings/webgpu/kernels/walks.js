// The CPU backward's walk (src/kernel/walks.h) on the GPU, per batch: queries in index ranges of
// ORDER_CHUNK, each stably counting-sorted by the cell of its place (index order within a
// cell), in parallel with no serial chain:
//   orderCount  each query's cell (query_cell), and per tile of ORDER_TILE queries of a range a
//               histogram of cells (integer atomics: a count does not depend on their order),
//               laid out (range, cell, tile);
//   scan        (gpu.js) exclusive prefix sums in that order: where each (cell, tile) starts
//               (from the block totals orderCount counts too); none where the histogram has at
//               most ORDER_FUSED blocks: orderWalk then sums the totals and counts before its own;
//   orderWalk   each query to its start plus its rank in its tile among the queries of its cell
//               (those before it in index order): the walk, walk[b * Q + rank] = q (or
//               sort.js's walkCount, with the sort's first count).
// The ranges are counted a group at a time (disp.first_range its first range) when one histogram of
// all of them would not fit one buffer.

import { ORDER_CHUNK, SCAN_BLOCK, WORKGROUP, program } from './problem.js';
import { halfBinding, halfInputs } from './half.js';

export const ORDER_TILE = 256;
// The most blocks of the order's histogram that orderWalk sums itself (plan.js totals.orderFused)
// rather than a scan before it: a dispatch saved for a few hundred cached loads a query.
export const ORDER_FUSED = 64;

// Query idx's cell (walks.h query_cell): the mean place of its first level with a counted point
// (head 0's points with a non-zero weight inside [0, 1]), or the last cell when none is.
const QUERY_CELL = /* wgsl */ `
// x in [0, 1] (not NaN, -0 included) by its bits: comparisons may assume no NaN.
fn in_unit(x: f32) -> bool { let u = bitcast<u32>(x); return u <= 0x3f800000u || u == 0x80000000u; }

fn query_cell(idx: u32) -> u32 {
  let Q = pr.queries; let H = pr.heads; let NL = pr.num_levels; let P = pr.points;
  let b = idx / Q; let q = idx % Q;
  let bands = i32(pr.bands); let cols = i32(pr.cols);
  var cell = bands * cols;
  for (var l = 0u; l < NL; l = l + 1u) {
    var sx = 0; var sy = 0; var n = 0;
    for (var pt = 0u; pt < min(P, 4u); pt = pt + 1u) {
      let x = locs_at(loc_index(b, q, 0u, l, pt, 0u)); let y = locs_at(loc_index(b, q, 0u, l, pt, 1u));
      let w = weights_at((idx * H * NL + l) * P + pt);
      if (!(in_unit(x) && in_unit(y)) || (bitcast<u32>(w) & 0x7fffffffu) == 0u) { continue; }
      sx = sx + i32(x * 65536.0);   // exact: x in [0, 1]
      sy = sy + i32(y * 65536.0);
      n = n + 1;
    }
    if (n == 0) { continue; }
    if (n > 1) { sx = sx / n; sy = sy / n; }
    let cx = min((sx * cols) >> 16u, cols - 1);
    let cy = min((sy * bands) >> 16u, bands - 1);
    cell = cy * cols + cx;
    break;
  }
  return u32(cell);
}
`;

// The range, tile and cell of query u of the group from range r0, its index gq in (b, q) (its
// cell from the program's cell_at()); tile_rank: its rank among its tile's earlier queries of its cell.
export const WALKED = /* wgsl */ `
struct Walked { gq: u32, q: u32, hist: u32, tile_first: u32, cell: u32, group_first: u32 }
fn walked(u: u32, r0: u32) -> Walked {
  let Q = pr.queries;
  let chunks = (Q + ${ORDER_CHUNK - 1}u) / ${ORDER_CHUNK}u;
  let cells = pr.bands * pr.cols + 1u;
  let tiles = (min(Q, ${ORDER_CHUNK}u) + ${ORDER_TILE - 1}u) / ${ORDER_TILE}u;
  let group_first = (r0 / chunks) * Q + (r0 % chunks) * ${ORDER_CHUNK}u;
  let gq = group_first + u;
  let b = gq / Q; let q = gq % Q;
  let in_range = q % ${ORDER_CHUNK}u;
  let r = b * chunks + q / ${ORDER_CHUNK}u;
  let cell = cell_at(gq);
  var w: Walked;
  w.gq = gq; w.q = q; w.cell = cell; w.group_first = group_first;
  w.hist = ((r - r0) * cells + cell) * tiles + in_range / ${ORDER_TILE}u;
  w.tile_first = gq - in_range % ${ORDER_TILE}u;
  return w;
}
fn tile_rank(w: Walked) -> u32 {
  var rank = 0u;
  for (var j = w.tile_first; j < w.gq; j = j + 1u) { rank = rank + select(0u, 1u, cell_of[j] == w.cell); }
  return rank;
}
`;

// Where fused, hist[at]'s prefix sum: the earlier blocks' totals (at most ORDER_FUSED), then the
// block's earlier counts, as the program's order_total() and order_count() read them.
export const FUSED_START = /* wgsl */ `
fn fused_start(at: u32) -> u32 {
  let block = at / ${SCAN_BLOCK}u;
  var s = 0u;
  for (var j = 0u; j < block; j = j + 1u) { s = s + order_total(j); }
  for (var i = block * ${SCAN_BLOCK}u; i < at; i = i + 1u) { s = s + order_count(i); }
  return s;
}
`;

export const ORDER_COUNT = program('orderCount', {
  words: ['first_range'],
  perGroup: ORDER_TILE,
  bindings: {
    locs: halfBinding('locs', 'read array<f32>'),
    weights: halfBinding('weights', 'read array<f32>'),
    cell_of: 'read_write array<u32>',
    hist: 'read_write array<atomic<u32>>',   // zero before (the scan leaves it so)
    totals: 'read_write array<atomic<u32>>',   // its block totals (SCAN_BLOCK values), zero before
  },
  uses: [halfInputs({ locs: null, weights: null })],
}, /* wgsl */ `${QUERY_CELL}
fn cell_at(gq: u32) -> u32 { return query_cell(gq); }
${WALKED}
@compute @workgroup_size(${ORDER_TILE})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let u = invocation(gid);
  if (u >= disp.n) { return; }
  let w = walked(u, disp.first_range);
  cell_of[w.gq] = w.cell;
  atomicAdd(&hist[w.hist], 1u);
  atomicAdd(&totals[w.hist / ${SCAN_BLOCK}u], 1u);
}
`);

export const ORDER_WALK = program('orderWalk', {
  words: ['first_range', 'fused'],
  perGroup: ORDER_TILE,
  bindings: {
    cell_of: 'read array<u32>',
    starts: 'read array<u32>',   // the histogram's prefix sums (not fused)
    hist: 'read array<u32>',     // the histogram and its block totals (fused)
    totals: 'read array<u32>',
    walk: 'read_write array<u32>',
  }
}, /* wgsl */ `fn cell_at(gq: u32) -> u32 { return cell_of[gq]; }
${WALKED}
fn order_total(j: u32) -> u32 { return totals[j]; }
fn order_count(i: u32) -> u32 { return hist[i]; }
${FUSED_START}
@compute @workgroup_size(${ORDER_TILE})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let u = invocation(gid);
  if (u >= disp.n) { return; }
  let w = walked(u, disp.first_range);
  var start = 0u;
  if (disp.fused == 0u) { start = starts[w.hist]; } else { start = fused_start(w.hist); }
  let at = w.group_first + start + tile_rank(w);   // b * Q + the query's rank in batch b
  walk[at] = w.q;
}
`);
