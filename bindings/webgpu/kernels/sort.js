// grad_value's terms in the CPU walk's order: a stable LSD radix sort of the part's corner records
// taken in walk order (query rank, level, point, corner), keyed by their destination pixel (the
// part's pixel index, SORT_BITS at most a pass). Stable, so every pixel's records come out in
// walk order whatever their number: O(records) work a pass, crowded or not. No workgroup memory
// and no barrier: one invocation orders a chunk of consecutive records (as many as the digit has
// values, at least 2^MIN_CHUNK_BITS: the histogram no larger than the records, the invocations'
// loops short), one after the other, and a chunk's records of a digit go to consecutive places in
// chunk order:
//   sortCount    per chunk, the records in walk order (recs read through the walk, walks.js): the
//                chunk's count of each digit into hist (digit-major: hist[digit * chunks + chunk]),
//                and each pixel's count (integer atomics, a run of one pixel added at once);
//   scan         (gpu.js) hist's exclusive prefix sums: where each (digit, chunk) starts; the
//                counts' give each pixel's segment (offsets);
//   sortScatter  per chunk, each record to its digit's next place, as (pixel, walk slot), and
//                the next digit counted per destination chunk (atomics: counts do not depend
//                on their order), for the next pass;
//   sortTerms    the last pass: each record to its place, as what gather (segments.js) sums:
//                a * w_k and its grad_output row.
//   walkCount    orderWalk and sortCount in one pass where the order's histogram is summed
//                (walks.js) and one part holds every pair: per (pair, query) its place in the
//                walk, then its records counted where they fall in walk order (atomics).
// The dispatch word `digit`: the digit's shift (bits 0-7) and width (bits 8-15), and bit 16 when
// the pass reads the records themselves (the first) rather than the previous pass's pairs.

import { SCAN_BLOCK, program } from './problem.js';
import { FUSED_START, WALKED } from './walks.js';

export const SORT_BITS = 8;
export const MIN_CHUNK_BITS = 4;

/** The records one invocation orders, for digits of `bits`. */
export const sortChunk = (bits) => 1 << Math.max(MIN_CHUNK_BITS, bits);

// The digit word, and record i of the part in walk order: its slot in recs (the samples pass
// writes them by query index), its query's grad_output row.
const DIGIT = /* wgsl */ `
struct Digit { shift: u32, mask: u32, from_recs: bool, chunk: u32 }
fn digit_word() -> Digit {
  var d: Digit;
  let bits = (disp.digit >> 8u) & 0xffu;
  d.shift = disp.digit & 0xffu;
  d.mask = (1u << bits) - 1u;
  d.from_recs = (disp.digit & 0x10000u) != 0u;
  d.chunk = 1u << max(${MIN_CHUNK_BITS}u, bits);   // sortChunk()
  return d;
}
`;
const SORTING = /* wgsl */ `${DIGIT}
struct Walked { rec: u32, row: u32 }
fn walked(i: u32) -> Walked {
  let Q = pr.queries; let H = pr.heads;
  let per = 4u * pr.num_levels * pr.points;
  let r = i / per;   // the part's (pair, query rank)
  let bh = disp.first_pair + r / Q; let b = bh / H; let h = bh % H;
  let rank = r % Q;
  let q = walk[b * Q + rank];
  var w: Walked;
  w.rec = i + per * q - per * rank;
  w.row = (b * Q + q) * H + h;
  return w;
}
`;

export const SORT_COUNT = program('sortCount', {
  words: ['digit', 'end', 'first_pair'],
  bindings: {
    recs: 'read array<vec2<u32>>',
    walk: 'read array<u32>',
    counts: 'read_write array<atomic<u32>>',   // zero before (the scan of them leaves them so)
    hist: 'read_write array<u32>',
    count_totals: 'read_write array<atomic<u32>>',   // counts' and hist's block totals for their
    hist_totals: 'read_write array<atomic<u32>>',    // scans (SCAN_BLOCK values a block), zero before
  }
}, /* wgsl */ `${SORTING}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = invocation(gid);
  if (c >= disp.n) { return; }
  let chunks = disp.n; let dg = digit_word();
  for (var k = 0u; k <= dg.mask; k = k + 1u) { hist[k * chunks + c] = 0u; }
  var pixel = 0xffffffffu; var run = 0u;
  for (var i = c * dg.chunk; i < min(c * dg.chunk + dg.chunk, disp.end); i = i + 1u) {
    let dest = recs[walked(i).rec].x;
    if (dest == 0xffffffffu) { continue; }
    let at = ((dest >> dg.shift) & dg.mask) * chunks + c;
    hist[at] = hist[at] + 1u;   // this invocation's own column
    if (dest != pixel) {
      if (run != 0u) { atomicAdd(&counts[pixel], run); atomicAdd(&count_totals[pixel / ${SCAN_BLOCK}u], run); }
      pixel = dest; run = 0u;
    }
    run = run + 1u;
  }
  if (run != 0u) { atomicAdd(&counts[pixel], run); atomicAdd(&count_totals[pixel / ${SCAN_BLOCK}u], run); }
  for (var k = 0u; k <= dg.mask; k = k + 1u) {
    let at = k * chunks + c;
    let v = hist[at];
    if (v != 0u) { atomicAdd(&hist_totals[at / ${SCAN_BLOCK}u], v); }
  }
}
`);

export const WALK_COUNT = program('walkCount', {
  words: ['digit', 'order_hist', 'hist_totals'],
  bindings: {
    cell_of: 'read array<u32>',
    order: 'read_write array<u32>',   // the order's totals, then (at order_hist) its histogram
    tot: 'read_write array<atomic<u32>>',   // the counts' totals, then (at hist_totals) hist's
    walk: 'read_write array<u32>',
    recs: 'read array<vec2<u32>>',
    counts: 'read_write array<atomic<u32>>',   // zero before (the scan of them leaves them so)
    hist: 'read_write array<atomic<u32>>',     // zero before (every scan of it leaves it so)
  }
}, /* wgsl */ `${DIGIT}
fn cell_at(gq: u32) -> u32 { return cell_of[gq]; }
${WALKED}
fn order_total(j: u32) -> u32 { return order[j]; }
fn order_count(i: u32) -> u32 { return order[disp.order_hist + i]; }
${FUSED_START}
fn add_hist(at: u32, n: u32) { atomicAdd(&hist[at], n); atomicAdd(&tot[disp.hist_totals + at / ${SCAN_BLOCK}u], n); }
fn add_count(px: u32, n: u32) { atomicAdd(&counts[px], n); atomicAdd(&tot[px / ${SCAN_BLOCK}u], n); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let u = invocation(gid);   // (pair, query)
  if (u >= disp.n) { return; }
  let Q = pr.queries; let per = 4u * pr.num_levels * pr.points;
  let pair = u / Q; let b = pair / pr.heads;
  let w = walked(b * Q + u % Q, 0u);
  let at = fused_start(w.hist) + tile_rank(w);   // b * Q + the query's rank in batch b
  if (pair % pr.heads == 0u) { walk[at] = w.q; }
  let dg = digit_word();
  let chunks = (per * disp.n + dg.chunk - 1u) / dg.chunk;
  let first = (pair * Q + at - b * Q) * per;   // its first record's index in walk order
  var pixel = 0xffffffffu; var run = 0u; var counted = 0xffffffffu; var crun = 0u;
  for (var j = 0u; j < per; j = j + 1u) {
    let dest = recs[u * per + j].x;
    if (dest == 0xffffffffu) { continue; }
    let h = ((dest >> dg.shift) & dg.mask) * chunks + (first + j) / dg.chunk;
    if (h != counted) { if (crun != 0u) { add_hist(counted, crun); } counted = h; crun = 0u; }
    crun = crun + 1u;
    if (dest != pixel) { if (run != 0u) { add_count(pixel, run); } pixel = dest; run = 0u; }
    run = run + 1u;
  }
  if (crun != 0u) { add_hist(counted, crun); }
  if (run != 0u) { add_count(pixel, run); }
}
`);

// The pairs of pass `from_recs` or a later one: for the first, the records in walk order up to
// `end` (dead corners skipped); for a later one, the pairs up to offsets[end] (every live record).
const PAIRS = /* wgsl */ `
fn pairs_end(dg: Digit) -> u32 { return select(offsets[disp.end], disp.end, dg.from_recs); }
fn pair(dg: Digit, i: u32) -> vec2<u32> {
  if (dg.from_recs) { return vec2<u32>(src[walked(i).rec].x, i); }
  return src[i];
}
`;

export const SORT_SCATTER = program('sortScatter', {
  words: ['digit', 'end', 'first_pair'],
  bindings: {
    src: 'read array<vec2<u32>>',   // recs (the first pass), else the previous pass's pairs
    walk: 'read array<u32>',
    offsets: 'read array<u32>',
    starts: 'read_write array<u32>',
    hist: 'read_write array<atomic<u32>>',   // the next digit's counts, zero before
    dst: 'read_write array<vec2<u32>>',   // (pixel, walk slot)
    hist_totals: 'read_write array<atomic<u32>>',   // their block totals, zero before
  }
}, /* wgsl */ `${SORTING}${PAIRS}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = invocation(gid);
  if (c >= disp.n) { return; }
  let chunks = disp.n; let dg = digit_word();
  let next = dg.shift + countOneBits(dg.mask);
  var counted = 0xffffffffu; var run = 0u;
  for (var i = c * dg.chunk; i < min(c * dg.chunk + dg.chunk, pairs_end(dg)); i = i + 1u) {
    let p = pair(dg, i);
    if (p.x == 0xffffffffu) { continue; }
    let at = ((p.x >> dg.shift) & dg.mask) * chunks + c;
    let to = starts[at];
    starts[at] = to + 1u;   // this invocation's own column
    dst[to] = p;
    let h = ((p.x >> next) & dg.mask) * chunks + to / dg.chunk;
    if (h != counted) {
      if (run != 0u) { atomicAdd(&hist[counted], run); atomicAdd(&hist_totals[counted / ${SCAN_BLOCK}u], run); }
      counted = h; run = 0u;
    }
    run = run + 1u;
  }
  if (run != 0u) { atomicAdd(&hist[counted], run); atomicAdd(&hist_totals[counted / ${SCAN_BLOCK}u], run); }
}
`);

export const SORT_TERMS = program('sortTerms', {
  words: ['digit', 'end', 'first_pair', 'totals'],
  bindings: {
    src: 'read array<vec2<u32>>',
    walk: 'read array<u32>',
    offsets: 'read array<u32>',
    starts: 'read_write array<u32>',
    recs: 'read array<vec2<u32>>',
    terms: 'read_write array<vec2<u32>>',   // a * w_k bits, grad_output row
    totals: 'read_write array<u32>',   // every scan's block totals, all read by now: zeroed for the next part or call
  }
}, /* wgsl */ `${SORTING}${PAIRS}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let c = invocation(gid);
  if (c < disp.totals) { for (var j = c; j < disp.totals; j = j + disp.n) { totals[j] = 0u; } }
  if (c >= disp.n) { return; }
  let chunks = disp.n; let dg = digit_word();
  for (var i = c * dg.chunk; i < min(c * dg.chunk + dg.chunk, pairs_end(dg)); i = i + 1u) {
    let p = pair(dg, i);
    if (p.x == 0xffffffffu) { continue; }
    let at = ((p.x >> dg.shift) & dg.mask) * chunks + c;
    let to = starts[at];
    starts[at] = to + 1u;
    let w = walked(p.y);
    terms[to] = vec2<u32>(recs[w.rec].y, w.row);
  }
}
`);
