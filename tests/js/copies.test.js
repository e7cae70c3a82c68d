// The copying forward on one wasm thread streams the per-query tensors through the heap a window
// of FORWARD_WINDOW queries at a time (core.js streamForward): its bits are those of one kernel
// call over all queries (a prepared problem's forward) for every layout, partial windows, several
// batches, inputs at any offset of their buffers and non-finite samples at window edges; the heap
// holds one batch's value and one window; no method of the caller's arrays runs. Results of the
// copying calls are arrays of their own also where the entry has no allocator of its own (browsers).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init } from '../../bindings/index.js';
import { FORWARD_WINDOW, forwardWindows, largestWindow } from '../../bindings/core/stream.js';
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

// One query per pixel: windows are bands of rows of every level (ceil(1580 / 1024) = 2 bands).
const BANDED = { B: 2, Q: 1580, H: 3, C: 5, P: 2, spatialShapes: [[40, 30], [20, 15], [10, 8]] };
// The window edges of BANDED in query index: every range's first and last query.
const BANDED_EDGES = [0, 599, 600, 1199, 1200, 1349, 1350, 1499, 1500, 1539, 1540, 1579];

function makeCase(seed, options, dims = DIMS,
  edges = [0, FORWARD_WINDOW - 1, FORWARD_WINDOW, 2 * FORWARD_WINDOW - 1, 2 * FORWARD_WINDOW, dims.Q - 1]) {
  const r = rng(seed);
  const s = shapesFor(dims, options);
  const { B, Q, H, P } = dims;
  const fill = (shape, lo, hi) => Float32Array.from({ length: count(shape) }, () => r.uniform(lo, hi));
  const value = fill(s.value, -1, 1);
  const locations = fill(s.samplingLocations, -0.1, 1.1);
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

test('the copying forward streams windows of queries: the bits of one kernel call, one batch\'s value and one window in the heap', async () => {
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    for (const [i, options] of OPTION_COMBOS.entries()) {
      const c = makeCase(700 + i, options);
      const want = preparedForward(msda, c);
      const heap = msda.wasm.heapInUse();
      const { got, seen } = watchedForward(msda, c.args);
      const context = `simd ${simd}, ${JSON.stringify(options)}`;
      assert.deepEqual(got.shape, [DIMS.B, DIMS.Q, DIMS.H * DIMS.C], context);
      assert.deepEqual(bits(got.data), bits(want), `${context}: the bits of one call over all queries`);
      const { L, NL } = shapesFor(DIMS, options);
      assert.deepEqual(seen.layouts, streamLayout(DIMS, L, NL, FORWARD_WINDOW),
        `${context}: one block, one batch's value and one window`);
      assert.equal(seen.runs, DIMS.B * Math.ceil(DIMS.Q / FORWARD_WINDOW), `${context}: a kernel call per window`);
      assert.equal(msda.wasm.heapInUse(), heap, `${context}: the block is freed`);
    }
  }
});

test('one query per pixel: the copying forward\'s windows are bands of rows of every level, with the bits of one kernel call', async () => {
  // band k of 2 takes rows [20k, 20k + 20) of level 0, [10k, 10k + 10) of level 1, [5k, 5k + 5) of level 2
  const problem = { numQueries: 1580, valueLength: 1580, spatialShapes: BANDED.spatialShapes, levelStartIndex: [0, 1200, 1500] };
  assert.deepEqual(forwardWindows(problem), [
    [[0, 600], [1200, 1350], [1500, 1540]],
    [[600, 1200], [1350, 1500], [1540, 1580]],
  ]);
  // uneven bands (3 of 67 rows: rows 0-22, 23-44, 45-66); a level with fewer rows than bands is in some only
  assert.deepEqual(forwardWindows({ numQueries: 2067, valueLength: 2067, spatialShapes: [[67, 30], [1, 57]],
    levelStartIndex: [0, 2010] }), [
    [[0, 690], [2010, 2067]],
    [[690, 1350]],
    [[1350, 2010]],
  ]);
  // a band wider than two windows (a 1 x 5000 level is one band): index order instead
  assert.deepEqual(forwardWindows({ numQueries: 5004, valueLength: 5004, spatialShapes: [[1, 5000], [2, 2]],
    levelStartIndex: [0, 5000] }), [[[0, 1024]], [[1024, 2048]], [[2048, 3072]], [[3072, 4096]], [[4096, 5004]]]);
  for (const simd of [true, false]) {
    const msda = await init({ simd });
    for (const [i, options] of OPTION_COMBOS.entries()) {
      const c = makeCase(900 + i, options, BANDED, BANDED_EDGES);
      const want = preparedForward(msda, c);
      const { got, seen } = watchedForward(msda, c.args);
      const context = `simd ${simd}, ${JSON.stringify(options)}`;
      assert.deepEqual(bits(got.data), bits(want), `${context}: the bits of one call over all queries`);
      assert.deepEqual(seen.layouts, streamLayout(BANDED, 1580, 3, 790),
        `${context}: one block, one batch's value and the largest window`);
      assert.equal(seen.runs, BANDED.B * 2, `${context}: a kernel call per band`);
    }
  }
});

test('the largest window of 3 x 10^5 windows, without overflowing the stack (a forward within the wasm limits can have over 10^5: 120 M queries of one head, level, point and channel take 1.9 GB)', () => {
  const windows = forwardWindows({ numQueries: 300000 * FORWARD_WINDOW - 5, valueLength: 1, spatialShapes: [[1, 1]], levelStartIndex: [0] });
  assert.equal(windows.length, 300000);
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
