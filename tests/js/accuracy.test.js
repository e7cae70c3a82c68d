// Wasm SIMD, wasm scalar and the native addon against the float64 reference of SEMANTICS.md,
// and wasm against native, on seeded random cases over all 16 option combinations.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { referenceBackward, referenceForward } from '../../bindings/reference.js';
import { assertClose, backends, OPTION_COMBOS, randomCase } from './helpers.js';

const CASES_PER_COMBO = 13; // 16 x 13 = 208 cases

test('every backend matches the float64 reference, and wasm matches native, on 208 random cases', async () => {
  const all = await backends();
  assert.equal(all['wasm-simd'].simd, true);
  assert.equal(all['wasm-scalar'].simd, false);
  let cases = 0;
  const channels = new Set();
  const levelKinds = new Set();
  for (const [ci, options] of OPTION_COMBOS.entries()) {
    for (let k = 0; k < CASES_PER_COMBO; k++) {
      const seed = 1000 * ci + k + 1;
      const { args, gradOutput, dims } = randomCase(seed, options);
      channels.add(dims.C);
      for (const [h, w] of dims.spatialShapes) levelKinds.add(h === 1 && w === 1 ? '1x1' : h === 1 || w === 1 ? 'thin' : 'box');
      const where = `seed ${seed} ${JSON.stringify(options)} dims ${JSON.stringify(dims)}`;
      const refOut = referenceForward(args);
      const refGrad = referenceBackward({ ...args, gradOutput });
      const results = {};
      for (const [name, msda] of Object.entries(all)) {
        const out = msda.forward(args);
        assert.deepEqual(out.shape, refOut.shape);
        assertClose(out.data, refOut.data, `${name} output, ${where}`);
        const g = msda.backward({ ...args, gradOutput });
        for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
          assert.deepEqual(g[key].shape, refGrad[key].shape, `${name} ${key} shape`);
          assertClose(g[key].data, refGrad[key].data, `${name} ${key}, ${where}`);
        }
        results[name] = { out, g };
      }
      // The same tolerance between wasm and native, every case.
      for (const name of ['wasm-simd', 'wasm-scalar']) {
        assertClose(results[name].out.data, results.native.out.data, `${name} vs native output, ${where}`);
        for (const key of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
          assertClose(results[name].g[key].data, results.native.g[key].data, `${name} vs native ${key}, ${where}`);
        }
      }
      cases++;
    }
  }
  assert.ok(cases >= 200);
  for (const c of [1, 3, 5, 33]) assert.ok(channels.has(c), `C_h = ${c} covered`);
  for (const kind of ['1x1', 'thin', 'box']) assert.ok(levelKinds.has(kind), `${kind} levels covered`);
});
