// The copying forward on one wasm thread, streamed a window of queries at a time.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import { callError } from './errors.js';
import { DESC } from './problem.js';
import { part } from './typed.js';

// The copying forward on wasm streams the per-query tensors through the heap: each batch's value
// goes in whole (any query may sample any pixel), then a window of queries at a time their
// locations and weights go in, are computed, and their output comes out while all three are
// still in cache, instead of a pass over main memory for each. A query's output depends on its
// own samples alone, so the bits are those of one call over all queries.
//
// Windows: with one query per pixel (the encoder: N_q = sum of H_l * W_l), a band of image rows
// on every level at once: band k of `bands` takes rows [ceil(k H_l / bands), ceil((k + 1) H_l /
// bands)) of each level, one contiguous range of queries per level, and bands =
// ceil(N_q / FORWARD_WINDOW) keeps a window near FORWARD_WINDOW queries. Index order would walk
// each level's queries over the image in turn and read the value rows again for each (the
// encoder's copying forward measured 40 % over a prepared call that way). Other problems, and
// bands wider than two windows (levels of few rows): FORWARD_WINDOW queries in index order.
// Within a window the kernel walks its queries by where they sample (src/kernel/walks.h), so
// these windows only decide what is in cache together; queries in another order than pixel
// order (a shuffled encoder) still get the kernel's locality inside each window, not across.
export const FORWARD_WINDOW = 1024;

const bandStart = (k, n, d) => Math.min(n, Math.ceil((k * n) / d));   // products far below 2^53
const windowQueries = (ranges) => ranges.reduce((n, [q0, q1]) => n + q1 - q0, 0);

/** The windows of a streamed forward: each a list of [first, end) query ranges. */
export function forwardWindows(problem) {
  const { numQueries: Q, valueLength: L, spatialShapes, levelStartIndex } = problem;
  const windows = [];
  if (Q !== L) {
    for (let q = 0; q < Q; q += FORWARD_WINDOW) windows.push([[q, Math.min(Q, q + FORWARD_WINDOW)]]);
    return windows;
  }
  const bands = Math.ceil(L / FORWARD_WINDOW);
  for (let k = 0; k < bands; k++) {
    const ranges = [];
    spatialShapes.forEach(([h, w], l) => {
      const y0 = bandStart(k, h, bands), y1 = bandStart(k + 1, h, bands);
      if (y1 > y0) ranges.push([levelStartIndex[l] + y0 * w, levelStartIndex[l] + y1 * w]);
    });
    if (ranges.length > 0) windows.push(ranges);
    // Levels of few rows make wide bands (a 1 x n level is one band): index order then, which
    // keeps the heap to one window.
    if (windowQueries(ranges) > 2 * FORWARD_WINDOW) return forwardWindows({ ...problem, valueLength: -1 });
  }
  return windows;
}

/** The most queries a window holds (a loop: Math.max(...) over 10^5 windows overflows the stack). */
export function largestWindow(windows) {
  let most = 0;
  for (const ranges of windows) most = Math.max(most, windowQueries(ranges));
  return most;
}

export function streamForward(backend, problem, inputs) {
  const { batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L } = problem;
  const windows = forwardWindows(problem);
  const most = largestWindow(windows);
  const perValue = L * H * C, perLocation = H * NL * P, perOutput = H * C;
  // Each window is a problem of its own: batch 1, its queries (as many as its ranges hold).
  const desc = problem.desc.slice();
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
    const locations = inputs.samplingLocations;
    let queries = most;
    for (let b = 0; b < B; b++) {
      store.load('value', part(inputs.value, b * perValue, perValue));
      for (const ranges of windows) {
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
