// grad_value's order on WebGPU: the CPU backward's walk by place (src/kernel/walks.h), its grid
// of cells, queries crowding a few pixels (every element wasm SIMD's bits), and the query order's
// histogram counted a range at a time where it does not fit one buffer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, compare, crowdCase, firstDiff, sameBits } from './helpers.js';
import { sampleGrid } from '../../bindings/webgpu/plan.js';

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
  if (gpu.numerics.fusedMultiplyAdd) t.skip('this device fuses a * b + c: no bit-exact grad_value to expect');
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
  ];
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
  if (gpu.numerics.fusedMultiplyAdd) t.skip('this device fuses a * b + c: no bit-exact grad_value to expect');
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
