// The copying forward on one wasm thread streams the per-query tensors through the heap a window
// of queries at a time (core/stream.js streamForward), the windows chosen from where the queries
// sample: its bits are those of one kernel call over all queries (a prepared problem's forward)
// for every layout, partial windows, several batches, queries in pixel order and shuffled,
// inputs at any offset of their buffers and non-finite samples at window edges; the heap holds
// one batch's value and one window; no method of the caller's arrays runs. Results of the
// copying calls are arrays of their own also where the entry has no allocator of its own (browsers).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import {
  BLOCK, FORWARD_WINDOW, forwardWindows, largestWindow, SCATTERED_WINDOW, scatteredWindow, streamForward,
} from '../../bindings/core/stream.js';
import { problemFromTensors } from '../../bindings/core/problem.js';
import { OPTION_COMBOS, rng, shapesFor } from './helpers.js';

const bits = (a) => new Uint32Array(a.buffer, a.byteOffset, a.length);
const count = (shape) => shape.reduce((a, b) => a * b, 1);

// Three windows a batch (the last one partial), two batches.
const DIMS = { B: 2, Q: 2 * FORWARD_WINDOW + 452, H: 3, C: 5, P: 2, spatialShapes: [[20, 30], [7, 9]] };

// Arrays at an offset of a larger buffer (every other one resizable), so a window read from the
// wrong place of the buffer shows.
function placed(values, i) {
  const pad = 3 + i;
  const bytes = 4 * (values.length + 2 * pad);
  const buffer = i % 2 ? new ArrayBuffer(bytes, { maxByteLength: 2 * bytes }) : new ArrayBuffer(bytes);
  const whole = new Float32Array(buffer);
  whole.fill(Number.NaN);
  const data = new Float32Array(buffer, 4 * pad, values.length);
  data.set(values);
  return data;
}

// One query per pixel, samples around it: 3 levels, 1580 queries, 2 bands.
const BANDED = { B: 2, Q: 1580, H: 3, C: 5, P: 2, spatialShapes: [[40, 30], [20, 15], [10, 8]] };
const BANDED_EDGES = [0, 575, 576, 1199, 1200, 1349, 1350, 1499, 1500, 1539, 1540, 1579];

// Query q's pixel: [level, y, x].
function pixelOf(q, spatialShapes) {
  let start = 0;
  for (const [l, [h, w]] of spatialShapes.entries()) {
    if (q < start + h * w) return [l, Math.floor((q - start) / w), (q - start) % w];
    start += h * w;
  }
  throw new Error(`query ${q} past the pyramid`);
}

// An encoder's locations: every point of query q within half a pixel of q's own pixel centre (on
// each level), queries in pixel order or, in batch b, in the order perms[b] (query i is pixel
// perms[b][i]) where that is given.
function encoderLocations(r, dims, options, perms = undefined) {
  const s = shapesFor(dims, options);
  const { B, Q, H, P } = dims;
  const data = new Float32Array(count(s.samplingLocations));
  const HNP = H * s.NL * P;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < Q; i++) {
      const order = perms?.[b];
      const [l0, y0, x0] = pixelOf(order ? order[i] : i, dims.spatialShapes);
      const [h0, w0] = dims.spatialShapes[l0];
      for (let j = 0; j < HNP; j++) {
        const x = (x0 + 0.5 + r.uniform(-0.5, 0.5)) / w0, y = (y0 + 0.5 + r.uniform(-0.5, 0.5)) / h0;
        if (options.samplingLocationsLayout === 'BQHLP2') {
          data[((b * Q + i) * HNP + j) * 2] = x;
          data[((b * Q + i) * HNP + j) * 2 + 1] = y;
        } else {
          data[(2 * b * Q + i) * HNP + j] = x;
          data[((2 * b + 1) * Q + i) * HNP + j] = y;
        }
      }
    }
  }
  return data;
}

function makeCase(seed, options, dims = DIMS,
  edges = [0, FORWARD_WINDOW - 1, FORWARD_WINDOW, 2 * FORWARD_WINDOW - 1, 2 * FORWARD_WINDOW, dims.Q - 1],
  makeLocations = undefined) {
  const r = rng(seed);
  const s = shapesFor(dims, options);
  const { B, Q, H, P } = dims;
  const fill = (shape, lo, hi) => Float32Array.from({ length: count(shape) }, () => r.uniform(lo, hi));
  const value = fill(s.value, -1, 1);
  const locations = makeLocations ? makeLocations(r) : fill(s.samplingLocations, -0.1, 1.1);
  const weights = fill(s.attentionWeights, -0.5, 1);
  // Non-finite samples and weights on both sides of every window edge, in both batches.
  const perQuery = H * s.NL * P;
  const special = [Number.NaN, Infinity, -Infinity, 1e30];
  for (let b = 0; b < B; b++) {
    edges.forEach((q, k) => {
      const at = (b * Q + q) * perQuery + (k % perQuery);
      weights[at] = special[(k + b) % special.length];
      // The x of that sample, in either layout.
      const x = options.samplingLocationsLayout === 'BQHLP2' ? 2 * at : (2 * b * Q + q) * perQuery + (k % perQuery);
      locations[x] = special[(k + b + 1) % special.length];
    });
  }
  return {
    args: {
      value: { data: placed(value, 0), shape: s.value },
      spatialShapes: dims.spatialShapes,
      samplingLocations: { data: placed(locations, 1), shape: s.samplingLocations },
      attentionWeights: { data: placed(weights, 2), shape: s.attentionWeights },
      ...options,
    },
    problem: { batch: B, numQueries: Q, numHeads: H, channels: dims.C, numPoints: P, spatialShapes: dims.spatialShapes, ...options },
  };
}

// One kernel call over all queries: the prepared problem's forward.
function preparedForward(msda, c) {
  const p = msda.prepare(c.problem, { mode: 'forward' });
  try {
    for (const name of ['value', 'samplingLocations', 'attentionWeights']) p[name].set(c.args[name].data);
    return p.forward().data.slice();
  } finally {
    p.dispose();
  }
}

// Records the heap layouts the backend allocates and the kernel calls their stores make.
function watch(msda) {
  const backend = msda._backend;
  const allocate = backend.allocate;
  const seen = { layouts: [], runs: 0 };
  backend.allocate = function (desc, layout) {
    seen.layouts.push(Object.fromEntries(layout.map(({ name, elements }) => [name, elements])));
    const store = allocate.call(this, desc, layout);
    const run = store.run;
    store.run = (op) => {
      seen.runs++;
      return run.call(store, op);
    };
    return store;
  };
  return { seen, restore: () => { backend.allocate = allocate; } };
}

// msda.forward(args) and what it allocated and ran.
function watchedForward(msda, args) {
  const { seen, restore } = watch(msda);
  try {
    return { got: msda.forward(args), seen };
  } finally {
    restore();
  }
}

// The one heap block of a streamed forward: one batch's value and a window of `window` queries.
const streamLayout = (dims, L, NL, window) => [{
  value: L * dims.H * dims.C,
  samplingLocations: window * dims.H * NL * dims.P * 2,
  attentionWeights: window * dims.H * NL * dims.P,
  output: window * dims.H * dims.C,
}];

// The windows streamForward uses for msda.forward(args), batch by batch.
function windowsOf(args) {
  const { problem, inputs } = problemFromTensors('forward', args);
  return Array.from({ length: problem.batch },
    (_, b) => forwardWindows(problem, inputs.samplingLocations, inputs.attentionWeights, b));
}

// Every query of the problem in exactly one window of at most `most` queries.
function assertPartition(windows, Q, most, context) {
  const seen = new Uint8Array(Q);
  for (const ranges of windows) {
    for (const [q0, q1] of ranges) for (let q = q0; q < q1; q++) seen[q]++;
  }
  assert.ok(seen.every((n) => n === 1), `${context}: every query in one window`);
  assert.ok(largestWindow(windows) <= most, `${context}: windows of at most ${most} queries`);
}

test('queries that sample all over the image: windows in index order, the bits of one kernel call, one batch\'s value and one window in the heap', async () => {
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    for (const [i, options] of OPTION_COMBOS.entries()) {
      const c = makeCase(700 + i, options);
      const want = preparedForward(msda, c);
      const context = `simd ${simd}, ${JSON.stringify(options)}`;
      // Locations uniform over the image: every block spans every band. One window a batch.
      assert.deepEqual(windowsOf(c.args), Array(DIMS.B).fill([[[0, DIMS.Q]]]), context);
      const heap = msda.wasm.heapInUse();
      const { got, seen } = watchedForward(msda, c.args);
      assert.deepEqual(got.shape, [DIMS.B, DIMS.Q, DIMS.H * DIMS.C], context);
      assert.deepEqual(bits(got.data), bits(want), `${context}: the bits of one call over all queries`);
      const { L, NL } = shapesFor(DIMS, options);
      assert.deepEqual(seen.layouts, streamLayout(DIMS, L, NL, DIMS.Q), `${context}: one block, one batch's value and one window`);
      assert.equal(seen.runs, DIMS.B, `${context}: a kernel call per window`);
      assert.equal(msda.wasm.heapInUse(), heap, `${context}: the block is freed`);
      // Windows of 1024 (three a batch, the last partial; non-finite samples at their edges).
      const { problem, inputs } = problemFromTensors('forward', c.args);
      const small = watch(msda);
      try {
        const data = streamForward(msda._backend, problem, inputs, { window: FORWARD_WINDOW, scattered: FORWARD_WINDOW });
        assert.deepEqual(bits(data), bits(want), `${context}, windows of ${FORWARD_WINDOW}: the bits of one call`);
      } finally {
        small.restore();
      }
      assert.deepEqual(small.seen.layouts, streamLayout(DIMS, L, NL, FORWARD_WINDOW), `${context}: windows of ${FORWARD_WINDOW}`);
      assert.equal(small.seen.runs, DIMS.B * Math.ceil(DIMS.Q / FORWARD_WINDOW), `${context}: a kernel call per window`);
    }
  }
});

test('one query per pixel: the copying forward\'s windows are bands of the image over every level, from where the queries sample; shuffled, index order; the bits of one kernel call', async () => {
  const perm = Array.from({ length: BANDED.Q }, (_, i) => i);
  const shuffle = rng(4);
  for (let i = perm.length - 1; i > 0; i--) {
    const j = shuffle.int(0, i);
    [perm[i], perm[j]] = [perm[j], perm[i]];
  }
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    for (const [i, options] of OPTION_COMBOS.entries()) {
      for (const order of ['pixel', 'shuffled']) {
        const c = makeCase(900 + i, options, BANDED, BANDED_EDGES,
          (r) => encoderLocations(r, BANDED, options, order === 'pixel' ? undefined : [perm, perm]));
        const context = `simd ${simd}, ${JSON.stringify(options)}, ${order} order`;
        const windows = windowsOf(c.args);
        windows.forEach((w) => assertPartition(w, BANDED.Q, order === 'pixel' ? FORWARD_WINDOW : BANDED.Q, context));
        if (order === 'pixel') {
          for (const w of windows) {
            // 2 windows, each the top or the bottom of the image on every level: blocks of 64
            // queries copied in a few runs, not in index order (which would put level 1 in the
            // second window only).
            assert.equal(w.length, 2, context);
            assert.ok(w.flat().length <= 2 * 8, `${context}: ${w.flat().length / 2} runs`);
            const top = (q) => { const [l, y] = pixelOf(q, BANDED.spatialShapes); return y < BANDED.spatialShapes[l][0] / 2; };
            for (const [k, ranges] of w.entries()) {
              const levels = new Set(), sides = new Set();
              for (const [q0, q1] of ranges) {
                for (let q = q0; q < q1; q++) {
                  levels.add(pixelOf(q, BANDED.spatialShapes)[0]);
                  sides.add(top(q));
                }
              }
              // Levels 0 and 1 in both (level 2's top rows share a block with level 1's bottom).
              assert.ok(levels.has(0) && levels.has(1), `${context}, window ${k}: levels ${[...levels]}`);
              assert.ok(ranges.every(([q0, q1]) => q1 - q0 >= BLOCK || q1 === BANDED.Q || [1200, 1500].includes(q1) || q0 % BLOCK === 0),
                `${context}, window ${k}: runs of whole blocks`);
              // Mostly one side: a block straddling the middle row goes with its mean.
              let same = 0, n = 0;
              for (const [q0, q1] of ranges) for (let q = q0; q < q1; q++) { n++; same += top(q) === (k === 0); }
              assert.ok(same >= 0.85 * n, `${context}, window ${k}: ${same} of ${n} queries on its side of the image`);
            }
          }
        } else {
          assert.deepEqual(windows, Array(BANDED.B).fill([[[0, BANDED.Q]]]), `${context}: one window in index order`);
        }
        const want = preparedForward(msda, c);
        const { got, seen } = watchedForward(msda, c.args);
        assert.deepEqual(bits(got.data), bits(want), `${context}: the bits of one call over all queries`);
        assert.deepEqual(seen.layouts, streamLayout(BANDED, 1580, 3, Math.max(...windows.map(largestWindow))),
          `${context}: one block, one batch's value and the largest window`);
        assert.equal(seen.runs, windows.reduce((n, w) => n + w.length, 0), `${context}: a kernel call per window`);
      }
    }
  }
});

test('windows from where queries sample, batch by batch: one in pixel order, one shuffled; queries with no counted point go last', async () => {
  const options = OPTION_COMBOS[0];
  const shuffled = Array.from({ length: BANDED.Q }, (_, i) => (i * 677) % BANDED.Q);   // 677 is prime to 1580
  const c = makeCase(31, options, BANDED, BANDED_EDGES, (r) => encoderLocations(r, BANDED, options, [null, shuffled]));
  // Queries 0-63 of batch 0 with no counted point (weights 0): one block, walked after every band.
  c.args.attentionWeights.data.fill(0, 0, 64 * BANDED.H * 3 * BANDED.P);
  const windows = windowsOf(c.args);
  assert.ok(windows[0].length >= 3, `batch 0: bands (${windows[0].length} windows)`);
  assert.deepEqual(windows[0].at(-1), [[0, 64]], 'batch 0: the block of dead queries is the last window');
  assertPartition(windows[0], BANDED.Q, FORWARD_WINDOW, 'batch 0');
  assert.deepEqual(windows[1], [[[0, BANDED.Q]]], 'batch 1: one window in index order');
  const msda = await init();
  assert.deepEqual(bits(msda.forward(c.args).data), bits(preparedForward(msda, c)));
});

test('windows of a scattered order: up to 32,768 queries and 64 MiB of their tensors, never under 1,024', () => {
  const dims = (H, C, NL, P) => ({ numHeads: H, channels: C, numLevels: NL, numPoints: P });
  assert.equal(SCATTERED_WINDOW, 32768);
  assert.equal(scatteredWindow(dims(1, 1, 1, 1)), 32768);   // 16 bytes a query
  // the encoder: 4 (128 x 3 + 256) = 2,560 bytes a query, so its 22,223 queries are one window
  assert.equal(scatteredWindow(dims(8, 32, 4, 4)), 26214);
  // 64 heads, 8 levels, 16 points, 64 channels: 114,688 bytes a query, 585 in 64 MiB
  assert.equal(scatteredWindow(dims(64, 64, 8, 16)), FORWARD_WINDOW);
});

test('the largest window of 3 x 10^5 windows, without overflowing the stack (a forward within the wasm limits can have over 10^5)', () => {
  const windows = Array.from({ length: 300000 }, (_, k) => [[k * FORWARD_WINDOW, (k + 1) * FORWARD_WINDOW - (k === 299999 ? 5 : 0)]]);
  assert.equal(largestWindow(windows), FORWARD_WINDOW);
  assert.equal(largestWindow(windows.slice(-1)), FORWARD_WINDOW - 5);
});

test('the copying forward calls no method of the caller\'s arrays (their constructor, subarray) while it copies windows', async () => {
  const msda = await init();
  const c = makeCase(77, OPTION_COMBOS[3]);
  const want = preparedForward(msda, c);
  const touched = [];
  for (const name of ['value', 'samplingLocations', 'attentionWeights']) {
    const data = c.args[name].data;
    for (const key of ['constructor', 'subarray', 'slice', 'buffer', 'byteOffset', 'length']) {
      Object.defineProperty(data, key, { get() { touched.push(`${name}.${key}`); throw new Error(`${name}.${key} read`); } });
    }
  }
  const got = msda.forward(c.args).data;
  assert.deepEqual(touched, []);
  assert.deepEqual(bits(got), bits(want));
});

test('copying results are arrays of their own where the entry gives no allocator (browsers): forward windows and backward', async () => {
  const msda = await init();
  const c = makeCase(99, OPTION_COMBOS[0]);
  const gradOutput = { data: Float32Array.from({ length: DIMS.B * DIMS.Q * DIMS.H * DIMS.C }, (_, i) => Math.sin(i)),
    shape: [DIMS.B, DIMS.Q, DIMS.H * DIMS.C] };
  const call = () => [msda.forward(c.args), ...Object.values(msda.backward({ ...c.args, gradOutput }))].map((r) => r.data);
  const backend = msda._backend;
  assert.equal(typeof backend.outputArray, 'function', 'Node gives its allocator');
  const node = call();
  const outputArray = backend.outputArray;
  delete backend.outputArray;
  try {
    const first = call();
    const second = call();
    first.forEach((data, i) => {
      assert.ok(data instanceof Float32Array && data.buffer instanceof ArrayBuffer, `result ${i}: a Float32Array over an ArrayBuffer`);
      assert.equal(data.byteOffset, 0);
      assert.equal(data.buffer.byteLength, data.byteLength, `result ${i}: its buffer holds it alone`);
      assert.notEqual(data.buffer, msda.wasm.memory.buffer);
      assert.notEqual(data.buffer, second[i].buffer, `result ${i}: a new array per call`);
      assert.deepEqual(bits(data), bits(node[i]), `result ${i}: the bits of Node's`);
      assert.deepEqual(bits(second[i]), bits(node[i]));
    });
  } finally {
    backend.outputArray = outputArray;
  }
});
