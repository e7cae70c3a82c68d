// The copying forward on one wasm thread, streamed a window of queries at a time.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import { callError } from './errors.js';
import { elementAt, HalfBits, kernelValueDtype } from './half.js';
import { DESC, describeValueDtype } from './problem.js';
import { part } from './typed.js';

// The copying forward on wasm streams the per-query tensors through the heap: each batch's value
// goes in whole (any query may sample any pixel), then a window of queries at a time their
// locations and weights go in, are computed, and their output comes out while all three are
// still in cache, instead of a pass over main memory for each. A query's output depends on its
// own samples alone, so the bits are those of one call over all queries, whatever the windows.
//
// Windows come from where the queries sample, as the kernel's walk does (src/kernel/walks.h):
// a query's place is the mean of head 0's points on the first level that has a counted point (at
// most its first four; both coordinates in [0, 1] and weight not 0), and the image is cut into
// `bands` = ceil(N_q / FORWARD_WINDOW) horizontal bands. Copies go by runs of consecutive
// queries, so they are made per block of BLOCK queries: a block's key is the band of its queries'
// mean place.
//   - Where the blocks are ordered (in 3 of 4 blocks the queries' places span at most a quarter
//     of what all places span: one query per pixel in pixel order, proposals sorted by position;
//     shuffled, each block spans nearly all of it), each band's blocks are a window (cut at
//     FORWARD_WINDOW queries where a band has more): rows of every level around the same part
//     of the image, whose value rows stay in cache from one window to the next (index order
//     would sweep the image once per level; the encoder's copying forward measured 40 % over a
//     prepared call that way).
//   - Otherwise (queries in a shuffled order, a two-stage model's proposals in score order), a
//     block holds queries from all over the image, and gathering them one by one costs more than
//     the cache saves (a JS copy per query: 9.7 ms for the encoder, against 1.7 ms for whole
//     copies): windows of up to SCATTERED_WINDOW queries in index order, which the kernel walks by
//     place as it walks a prepared call's (its own sort takes 32,768 queries at a time).
export const FORWARD_WINDOW = 1024;
export const BLOCK = 64;
// Most queries of a scattered window, and most bytes of its per-query tensors (so a problem of
// large heads still streams).
export const SCATTERED_WINDOW = 32768;
const SCATTERED_BYTES = 64 * 1024 * 1024;

const windowQueries = (ranges) => ranges.reduce((n, [q0, q1]) => n + q1 - q0, 0);

/** Queries of a scattered window for this problem: SCATTERED_WINDOW, fewer for large queries. */
export function scatteredWindow(problem) {
  const { numHeads: H, channels: C, numLevels: NL, numPoints: P } = problem;
  const bytes = 4 * (H * NL * P * 3 + H * C);
  return Math.max(FORWARD_WINDOW, Math.min(SCATTERED_WINDOW, Math.floor(SCATTERED_BYTES / bytes)));
}

/**
 * The mean y of the places of each block of BLOCK queries of batch b, and their least and
 * greatest y (NaN where no query of the block has a counted point), read from the caller's
 * arrays once each. Per block, not per query: a forward may have 10^8 queries.
 */
export function blockPlaces(problem, locations, weights, b) {
  // Half-precision bits are widened one element at a time, only the few read here.
  if (locations instanceof HalfBits || weights instanceof HalfBits) {
    return placesOf(problem, (i) => elementAt(locations, i), (i) => elementAt(weights, i), b);
  }
  return placesOf(problem, (i) => locations[i], (i) => weights[i], b);
}

// loc(i), weight(i): element i of the locations and the weights.
function placesOf(problem, loc, weight, b) {
  const { numQueries: Q, numHeads: H, numLevels: NL, numPoints: P } = problem;
  const planar = problem.samplingLocationsLayout === 'B2QHLP';
  const HNP = H * NL * P, points = Math.min(P, 4);
  // [B, Q, H, NL, P, 2]: (x, y) pairs; [B, 2, Q, H, NL, P]: the x plane, then the y plane.
  const yAt = planar ? Q * HNP : 1, step = planar ? 1 : 2;
  const blocks = Math.ceil(Q / BLOCK);
  const mean = new Float64Array(blocks), low = new Float64Array(blocks), high = new Float64Array(blocks);
  for (let k = 0; k < blocks; k++) {
    let sum = 0, count = 0, least = Infinity, most = -Infinity;
    for (let q = k * BLOCK; q < Math.min(Q, (k + 1) * BLOCK); q++) {
      const row = planar ? (2 * b * Q + q) * HNP : (b * Q + q) * HNP * 2, w0 = (b * Q + q) * HNP;
      for (let l = 0; l < NL; l++) {   // head 0's first level with a counted point
        let ys = 0, n = 0;
        for (let p = 0; p < points; p++) {
          const at = row + (l * P + p) * step;
          const px = loc(at), py = loc(at + yAt);
          if (!(px >= 0 && px <= 1 && py >= 0 && py <= 1) || weight(w0 + l * P + p) === 0) continue;
          ys += py;
          n++;
        }
        if (n === 0) continue;
        const y = ys / n;
        sum += y;
        count++;
        least = Math.min(least, y);
        most = Math.max(most, y);
        break;
      }
    }
    mean[k] = count > 0 ? sum / count : Number.NaN;
    low[k] = count > 0 ? least : Number.NaN;
    high[k] = count > 0 ? most : Number.NaN;
  }
  return { mean, low, high };
}

/**
 * The windows of batch b of a streamed forward, each a list of [first, end) query ranges; every
 * query in exactly one. `sizes` (tests): { window, scattered } queries.
 */
export function forwardWindows(problem, locations, weights, b,
  sizes = { window: FORWARD_WINDOW, scattered: scatteredWindow(problem) }) {
  const Q = problem.numQueries;
  const windows = [];
  if (Q <= sizes.window) {
    if (Q > 0) windows.push([[0, Q]]);
    return windows;
  }
  const { mean, low, high } = blockPlaces(problem, locations, weights, b);
  const blocks = mean.length;
  let top = Infinity, bottom = -Infinity;
  for (let k = 0; k < blocks; k++) {
    if (low[k] < top) top = low[k];
    if (high[k] > bottom) bottom = high[k];
  }
  let ordered = 0;
  for (let k = 0; k < blocks; k++) if (!(4 * (high[k] - low[k]) > bottom - top)) ordered++;   // NaN: ordered
  if (4 * ordered < 3 * blocks) {
    for (let q = 0; q < Q; q += sizes.scattered) windows.push([[q, Math.min(Q, q + sizes.scattered)]]);
    return windows;
  }
  // Blocks band by band (a counting sort, in index order within a band), cut into windows.
  const bands = Math.ceil(Q / sizes.window);
  const keys = new Int32Array(blocks);
  for (let k = 0; k < blocks; k++) {
    keys[k] = Number.isNaN(mean[k]) ? bands : Math.min(bands - 1, Math.floor(mean[k] * bands));   // none counted: last
  }
  const start = new Int32Array(bands + 2);
  for (let k = 0; k < blocks; k++) start[keys[k] + 1]++;
  for (let i = 0; i <= bands; i++) start[i + 1] += start[i];
  const walk = new Int32Array(blocks);
  for (let k = 0; k < blocks; k++) walk[start[keys[k]]++] = k;
  let ranges = [], queries = 0, current = -1;
  for (const k of walk) {
    const q0 = k * BLOCK, q1 = Math.min(Q, q0 + BLOCK);
    if (queries > 0 && (keys[k] !== current || queries + q1 - q0 > sizes.window)) {
      windows.push(ranges);
      ranges = [];
      queries = 0;
    }
    current = keys[k];
    const last = ranges[ranges.length - 1];
    if (last !== undefined && last[1] === q0) last[1] = q1;
    else ranges.push([q0, q1]);
    queries += q1 - q0;
  }
  windows.push(ranges);
  return windows;
}

/** The most queries a window holds (a loop: Math.max(...) over 10^5 windows overflows the stack). */
export function largestWindow(windows) {
  let most = 0;
  for (const ranges of windows) most = Math.max(most, windowQueries(ranges));
  return most;
}

export function streamForward(backend, problem, inputs, sizes = undefined) {
  const { batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L } = problem;
  const locations = inputs.samplingLocations;
  const byBatch = [];
  for (let b = 0; b < B; b++) byBatch.push(forwardWindows(problem, locations, inputs.attentionWeights, b, sizes));
  let most = 0;
  for (const windows of byBatch) most = Math.max(most, largestWindow(windows));
  const perValue = L * H * C, perLocation = H * NL * P, perOutput = H * C;
  // Each window is a problem of its own: batch 1, its queries (as many as its ranges hold).
  const valueDtype = kernelValueDtype(backend, inputs.value, problem, 'forward');
  const asIs = valueDtype !== 'float32';
  const desc = problem.desc.slice();
  describeValueDtype(desc, valueDtype);
  desc[DESC.batch] = 1n;
  desc[DESC.numQueries] = BigInt(most);
  const store = backend.allocate(desc, [
    { name: 'value', elements: perValue },
    { name: 'samplingLocations', elements: most * perLocation * 2 },
    { name: 'attentionWeights', elements: most * perLocation },
    { name: 'output', elements: most * perOutput },
  ]);
  try {
    const output = backend.resultArray(B * Q * perOutput);
    const planar = problem.samplingLocationsLayout === 'B2QHLP';
    let queries = most;
    for (let b = 0; b < B; b++) {
      store.load('value', part(inputs.value, b * perValue, perValue), 0, asIs);
      for (const ranges of byBatch[b]) {
        const n = windowQueries(ranges);
        if (n !== queries) {
          desc[DESC.numQueries] = BigInt(queries = n);
          store.describe(desc);
        }
        let at = 0;   // queries of the window placed so far
        for (const [q, end] of ranges) {
          const m = end - q;
          if (planar) {   // [B, 2, Q, ...]: the window's x plane, then its y plane
            store.load('samplingLocations', part(locations, ((2 * b) * Q + q) * perLocation, m * perLocation), at * perLocation);
            store.load('samplingLocations', part(locations, ((2 * b + 1) * Q + q) * perLocation, m * perLocation),
              (n + at) * perLocation);
          } else {
            store.load('samplingLocations', part(locations, (b * Q + q) * 2 * perLocation, m * 2 * perLocation),
              at * 2 * perLocation);
          }
          store.load('attentionWeights', part(inputs.attentionWeights, (b * Q + q) * perLocation, m * perLocation),
            at * perLocation);
          at += m;
        }
        const failure = store.run('forward');
        if (failure !== null) throw callError('forward', failure);
        at = 0;
        for (const [q, end] of ranges) {
          store.takeInto('output', output, (b * Q + q) * perOutput, (end - q) * perOutput, at * perOutput);
          at += end - q;
        }
      }
    }
    return output;
  } finally {
    store.free();
  }
}
