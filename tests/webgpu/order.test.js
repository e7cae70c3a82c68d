// grad_value's order on WebGPU: the CPU backward's walk by place (src/kernel/walks.h), its grid
// of cells, queries crowding a few pixels (every element wasm SIMD's bits; the query order's
// histogram summed by orderWalk or scanned before it), the query order's
// histogram counted a range at a time where it does not fit one buffer, and every sample on one
// place (the sort's passes).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, compare, crowdCase, firstDiff, problem, sameBits } from './helpers.js';
import { sampleGrid, sortDigits } from '../../bindings/webgpu/plan.js';
import { SCAN_FLAT } from '../../bindings/webgpu/kernels/scan.js';
import { ORDER_FUSED } from '../../bindings/webgpu/kernels/walks.js';
import { SCAN_BLOCK } from '../../bindings/webgpu/kernels/problem.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

test("grad_value's order: the grid of cells the CPU walks queries by (src/kernel/walks.h sample_grid)", () => {
  const grid = (spatialShapes) => sampleGrid({ spatialShapes });
  // bands of 8 rows of the tallest level, columns of the widest
  assert.deepEqual(grid([[20, 12], [10, 6], [5, 3]]), { bands: 3, cols: 12 });
  assert.deepEqual(grid([[8, 1], [1, 5]]), { bands: 1, cols: 5 });
  // at most 8191 cells (the last of 8192 for queries with no counted point): fewer columns, then bands
  assert.deepEqual(grid([[100, 9000]]), { bands: 13, cols: 630 });
  assert.deepEqual(grid([[80000, 3]]), { bands: 8191, cols: 1 });
});

test("grad_value's order: the CPU walk by place (src/kernel/walks.h), queries crowding a few pixels, every element wasm SIMD's bits", async (t) => {
  if (!gpu.numerics.productsRounded) t.skip('this device fused a * b + c even as the kernels write it: no bit-exact grad_value to expect');
  const cases = [
    ['encoder-like, shuffled', { kind: 'encoder', shapes: [[20, 12], [10, 6], [5, 3]], P: 4 }],
    ['encoder-like, B2QHLP, BNLC', { kind: 'encoder', shapes: [[17, 9], [9, 5]], P: 3, samplingLocationsLayout: 'B2QHLP', valueLayout: 'BNLC' }],
    ['decoder-like', { kind: 'decoder', shapes: [[24, 16], [12, 8], [6, 4]], Q: 300, P: 4 }],
    ['decoder-like, B2QHLP, 6 points', { kind: 'decoder', shapes: [[16, 16], [8, 8]], Q: 200, P: 6, samplingLocationsLayout: 'B2QHLP' }],
    ['spread over a small image, 1 point', { kind: 'spread', shapes: [[20, 5], [4, 2]], Q: 400, P: 1, H: 1, alignCorners: true }],
    ['spread, border padding', { kind: 'spread', shapes: [[9, 7]], Q: 250, P: 2, paddingMode: 'border', C: 5 }],
    ['places on a cell edge (integer mean, truncation)', { kind: 'edges', shapes: [[4, 4]], Q: 120, P: 3, H: 1, B: 1, zeros: 0 }],
    // more than MSDA_ORDER_CHUNK (32768) queries: two index ranges, each sorted on its own
    ['two ranges of queries', { kind: 'spread', shapes: [[16, 16]], B: 1, Q: 33000, P: 1, H: 1, C: 1 }],
    // a histogram of 8,001 cells x 3 tiles: more than ORDER_FUSED blocks, so scanned before
    // orderWalk (from orderCount's block totals) rather than summed by it; the 2 x 2 level crowded
    ['an order histogram of more than ORDER_FUSED blocks', { kind: 'decoder', shapes: [[64, 1000], [2, 2]], B: 1, Q: 600, P: 2, H: 1, C: 1 }],
  ];
  const { bands, cols } = sampleGrid({ spatialShapes: [[64, 1000], [2, 2]] });
  assert.ok((bands * cols + 1) * 3 > ORDER_FUSED * SCAN_BLOCK);
  let crowded = 0;
  for (const [i, [label, spec]] of cases.entries()) {
    const c = crowdCase(900 + i, spec);
    const b = { ...c.args, gradOutput: c.gradOutput };
    const got = await gpu.backward(b), want = wasm.backward(b);
    compare(label, got, want, true);
    const n = want.gradValue.data.length;
    assert.equal(sameBits(got.gradValue.data, want.gradValue.data), n, `${label} gradValue: ${firstDiff(got.gradValue.data, want.gradValue.data)}`);
    crowded += n;
  }
  assert.ok(crowded > 0);
});

test("a backward whose query order's histogram does not fit one buffer counts it a range at a time, with wasm SIMD's bits", async (t) => {
  if (!gpu.numerics.productsRounded) t.skip('this device fused a * b + c even as the kernels write it: no bit-exact grad_value to expect');
  // 2 batches: 2 ranges, each a histogram of 2,049 cells x 2 tiles (16,396 bytes); the 2 x 2
  // level crowded, so grad_value's bits depend on the order
  const c = crowdCase(870, { kind: 'decoder', shapes: [[1, 2048], [2, 2]], B: 2, Q: 257, H: 1, C: 1, P: 1 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const want = wasm.backward(b);
  const limits = gpu._backendKept.limits;
  const saved = limits.maxStorageBufferBindingSize;
  limits.maxStorageBufferBindingSize = 20000;
  try {
    const got = await gpu.backward(b);
    for (const name of Object.keys(want)) {
      assert.equal(sameBits(got[name].data, want[name].data), want[name].data.length, `${name}: ${firstDiff(got[name].data, want[name].data)}`);
    }
  } finally {
    limits.maxStorageBufferBindingSize = saved;
  }
});

// Every sample on one place, or clamped to one corner (border padding, every point far outside):
// segments of thousands of records, each in the CPU walk's order; the sort's passes (kernels/sort.js)
// 1, 2 and 3 deep by the part's pixels (256 or fewer, 2^16 or fewer, more).
test("grad_value's order where every sample crowds one place: wasm SIMD's bits, with the sort 1, 2 and 3 passes deep", async (t) => {
  if (!gpu.numerics.productsRounded) t.skip('this device fused a * b + c even as the kernels write it: no bit-exact grad_value to expect');
  const cases = [
    ['one place, one pass', 1, { shapes: [[8, 8], [4, 4]], Q: 300, H: 1, place: [0.3, 0.7] }],
    ['one place, two passes', 2, { shapes: [[16, 16], [8, 8], [4, 4]], Q: 300, H: 3, place: [0.55, 0.2] }],
    ['border, far outside', 2, { shapes: [[16, 16], [8, 8]], Q: 300, H: 2, place: [7, -5], paddingMode: 'border' }],
    ['border, far outside, align_corners', 2, { shapes: [[12, 20], [6, 10]], Q: 200, H: 2, place: [-9, 4], paddingMode: 'border', alignCorners: true }],
    ['one place, three passes', 3, { shapes: [[300, 240]], Q: 100, H: 1, place: [0.5, 0.25] }],
    // 4.4 M pixels: the counts' prefix sums over more than SCAN_FLAT blocks (their totals scanned first)
    ['one place, 4.4 M pixels', 3, { shapes: [[1100, 2000]], Q: 20, H: 1, C: 1, place: [0.75, 0.5] }],
  ];
  for (const [label, passes, { place, ...spec }] of cases) {
    const pixels = 2 * spec.H * spec.shapes.reduce((a, [h, w]) => a + h * w, 0);   // one part: B 2
    assert.equal(sortDigits(pixels).passes, passes, label);
    if (pixels > 4e6) assert.ok(pixels > SCAN_FLAT * SCAN_BLOCK, label);
    const c = problem(940, { B: 2, C: 4, P: 4, ...spec });
    const locs = c.args.samplingLocations.data;
    for (let i = 0; i < locs.length; i += 2) { locs[i] = place[0]; locs[i + 1] = place[1]; }
    const b = { ...c.args, gradOutput: c.gradOutput };
    const got = await gpu.backward(b), want = wasm.backward(b);
    for (const name of Object.keys(want)) {
      assert.equal(sameBits(got[name].data, want[name].data), want[name].data.length, `${label} ${name}: ${firstDiff(got[name].data, want[name].data)}`);
    }
  }
});

// The DETR decoder's backward (its levels and heads, fewer channels): one part, 18-bit keys (the
// sort 3 passes deep) and an order histogram orderWalk would sum, so walkCount places the walk
// and counts the first digit in one pass: 10 compute passes, not 11, with wasm SIMD's bits.
test("the DETR decoder's backward in 10 compute passes, the walk placed by the sort's first count, with wasm SIMD's bits", async (t) => {
  if (!gpu.numerics.productsRounded) t.skip('this device fused a * b + c even as the kernels write it: no bit-exact grad_value to expect');
  const c = crowdCase(960, { kind: 'decoder', shapes: [[100, 167], [50, 84], [25, 42], [13, 21]], B: 1, Q: 300, H: 8, C: 4, P: 4 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const kept = gpu._backendKept, names = [];
  kept.dispatch = function (call, name, n, ...rest) {
    if (n > 0) names.push(name);
    return Object.getPrototypeOf(this).dispatch.call(this, call, name, n, ...rest);
  };
  let got;
  try {
    got = await gpu.backward(b);
  } finally {
    delete kept.dispatch;
  }
  assert.deepEqual(names, ['orderCount', 'samples', 'walkCount', 'scanTwo', 'sortScatter', 'scan', 'sortScatter', 'scan', 'sortTerms', 'gather']);
  const want = wasm.backward(b);
  for (const name of Object.keys(want)) {
    assert.equal(sameBits(got[name].data, want[name].data), want[name].data.length, `${name}: ${firstDiff(got[name].data, want[name].data)}`);
  }
});
