// The CPU backward's walk (src/kernel/walks.h), per batch: queries in index ranges of
// ORDER_CHUNK, each counting-sorted by the cell of its place. cells: each query's cell
// (query_cell), one invocation per (batch, query); order: one invocation per (batch, range)
// runs sample_order's cycles as the CPU does (sequential) and writes each query's rank; sort:
// each pixel's records by (rank of the query in its batch's walk, point).

import { ORDER_CHUNK, ORDER_INDEX, WORKGROUP, program } from './problem.js';

export const CELLS = program('cells', {
  bindings: {
    locs: 'read array<f32>',
    weights: 'read array<f32>',
    order: 'read_write array<u32>',
  }
}, /* wgsl */ `
// x in [0, 1] (not NaN, -0 included) by its bits: comparisons may assume no NaN.
fn in_unit(x: f32) -> bool { let u = bitcast<u32>(x); return u <= 0x3f800000u || u == 0x80000000u; }

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let idx = invocation(gid);
  if (idx >= disp.n) { return; }
  let Q = pr.queries; let H = pr.heads; let NL = pr.num_levels; let P = pr.points;
  let b = idx / Q; let q = idx % Q;
  let bands = i32(pr.bands); let cols = i32(pr.cols);
  var cell = bands * cols;
  for (var l = 0u; l < NL; l = l + 1u) {
    var sx = 0; var sy = 0; var n = 0;
    for (var pt = 0u; pt < min(P, 4u); pt = pt + 1u) {
      let x = locs[loc_index(b, q, 0u, l, pt, 0u)]; let y = locs[loc_index(b, q, 0u, l, pt, 1u)];
      let w = weights[(idx * H * NL + l) * P + pt];
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
  order[idx] = u32(cell);
}
`);

export const ORDER = program('order', {
  bindings: {
    order: 'read_write array<u32>',
    start: 'read_write array<u32>',
    ranks: 'read_write array<u32>',
  }
}, /* wgsl */ `
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let u = invocation(gid);
  if (u >= disp.n) { return; }
  let Q = pr.queries;
  let chunks = (Q + ${ORDER_CHUNK - 1}u) / ${ORDER_CHUNK}u;
  let b = u / chunks; let q0 = (u % chunks) * ${ORDER_CHUNK}u;
  let n = min(Q - q0, ${ORDER_CHUNK}u);
  let cells = pr.bands * pr.cols + 1u;
  let sb = u * (cells + 1u);
  let base = b * Q + q0;
  for (var c = 0u; c <= cells; c = c + 1u) { start[sb + c] = 0u; }
  for (var i = 0u; i < n; i = i + 1u) { let k = sb + order[base + i] + 1u; start[k] = start[k] + 1u; }
  for (var c = 0u; c < cells; c = c + 1u) { start[sb + c + 1u] = start[sb + c + 1u] + start[sb + c]; }
  for (var i = 0u; i < n; i = i + 1u) {
    if ((order[base + i] & ${ORDER_INDEX + 1}u) != 0u) { continue; }   // placed by an earlier cycle
    var query = i; var cell = order[base + i];
    loop {   // slot i is free: the cycle ends when a query's slot is i
      let slot = start[sb + cell];
      start[sb + cell] = slot + 1u;
      if (slot == i) { order[base + slot] = ${ORDER_INDEX + 1}u | query; break; }
      let next = order[base + slot];
      order[base + slot] = ${ORDER_INDEX + 1}u | query;
      query = slot;
      cell = next;
    }
  }
  for (var i = 0u; i < n; i = i + 1u) { ranks[base + (order[base + i] & ${ORDER_INDEX}u)] = q0 + i; }
}
`);

// Heap sort of each pixel's records: unique keys, so the order does not depend on how place()
// filled the segment.
export const SORT = program('sort', {
  bindings: {
    offsets: 'read array<u32>',
    sorted: 'read_write array<u32>',
    ranks: 'read array<u32>',
  }
}, /* wgsl */ `
fn key(slot: u32) -> u32 {
  let Q = pr.queries; let H = pr.heads; let NL = pr.num_levels; let P = pr.points;
  let r = slot / 4u;   // the samples pass's local index
  let bq = r / (P * NL);
  let b = (disp.first + bq / Q) / H;
  return ranks[b * Q + bq % Q] * P + r % P;
}

fn sift(base: u32, start: u32, n: u32) {
  var root = start;
  loop {
    var child = 2u * root + 1u;
    if (child >= n) { break; }
    if (child + 1u < n && key(sorted[base + child + 1u]) > key(sorted[base + child])) { child = child + 1u; }
    if (key(sorted[base + root]) >= key(sorted[base + child])) { break; }
    let t = sorted[base + root]; sorted[base + root] = sorted[base + child]; sorted[base + child] = t;
    root = child;
  }
}

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let dest = invocation(gid);
  if (dest >= disp.n) { return; }
  let base = offsets[dest];
  let n = offsets[dest + 1u] - base;
  if (n < 2u) { return; }
  for (var i = n / 2u; i > 0u; i = i - 1u) { sift(base, i - 1u, n); }
  for (var end = n - 1u; end > 0u; end = end - 1u) {
    let t = sorted[base]; sorted[base] = sorted[base + end]; sorted[base + end] = t;
    sift(base, 0u, end);
  }
}
`);
