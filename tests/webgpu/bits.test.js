// The WebGPU backend in Node (Dawn, the 'webgpu' package, an optional peer; SwiftShader here)
// against wasm SIMD, bit for bit: random problems with every option, awkward sizes, levels wider
// than 1024, the non-finite rules; what the startup probe saw; the same bits on every run; the
// bits counted and printed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SWIFTSHADER_ICD, backends, compare, firstDiff, nonFiniteCase, problem, sameBits, totals } from './helpers.js';
import { OPTION_COMBOS, randomCase, rng } from '../js/helpers.js';
import { PADDING_MODES } from '../../bindings/core/args.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

async function both(label, args, gradOutput, exact = gpu.numerics.productsRounded) {
  compare(label, { output: await gpu.forward(args) }, { output: wasm.forward(args) }, exact);
  const b = { ...args, gradOutput };
  compare(label, await gpu.backward(b), wasm.backward(b), exact);
}

test('the adapter and what the startup probe saw', () => {
  assert.equal(gpu.backend, 'webgpu');
  assert.equal(typeof gpu.device.createBuffer, 'function');
  assert.equal(typeof gpu.numerics.fusedMultiplyAdd, 'boolean');
  assert.equal(typeof gpu.numerics.productsRounded, 'boolean');
  assert.equal(typeof gpu.numerics.flushesSubnormals, 'boolean');
  console.log(`# adapter: ${JSON.stringify(gpu.adapterInfo)}; numerics: ${JSON.stringify(gpu.numerics)}; VK_ICD_FILENAMES=${process.env.VK_ICD_FILENAMES ?? ''}`);
  if (process.env.VK_ICD_FILENAMES === SWIFTSHADER_ICD) {
    // What SwiftShader does (docs/webgpu.md, numerics): no contraction, subnormals flushed.
    assert.deepEqual(gpu.numerics, { fusedMultiplyAdd: false, productsRounded: true, flushesSubnormals: true });
  }
});

test('the probe agrees with the kernels: a subnormal value is kept or flushed as it says', async () => {
  const tiny = 2 ** -130;
  const args = {
    value: { data: new Float32Array([tiny, 1, 1, 1]), shape: [1, 4, 1, 1] }, spatialShapes: [[2, 2]],
    samplingLocations: { data: new Float32Array([0.25, 0.25]), shape: [1, 1, 1, 1, 1, 2] },
    attentionWeights: { data: new Float32Array([1]), shape: [1, 1, 1, 1, 1] },
  };
  assert.equal(wasm.forward(args).data[0], tiny);
  const { data } = await gpu.forward(args);
  assert.equal(data[0], gpu.numerics.flushesSubnormals ? 0 : tiny);
});

test('forward and backward against wasm SIMD: random problems with every option', async () => {
  for (const [i, options] of OPTION_COMBOS.entries()) {
    for (const seed of [100 + i, 200 + i]) {
      const c = randomCase(seed, options);
      await both(`seed ${seed} ${JSON.stringify(options)}`, c.args, c.gradOutput);
    }
  }
});

test('forward and backward against wasm SIMD: awkward sizes, levels wider than 1024, one query per pixel', async () => {
  const cases = [
    ['C 1, one level, one point', { shapes: [[3, 4]], C: 1, P: 1, Q: 5 }],
    ['C 33, 5 points, batch 2', { shapes: [[4, 3], [2, 2]], B: 2, C: 33, P: 5, Q: 6, H: 3 }],
    ['a 1 x 1 and a 1 x n level, BNLC', { shapes: [[1, 1], [1, 9], [5, 1]], valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', C: 5 }],
    // the forward: 258 channels take two workgroups a (batch, query, head); 2 channels, 9
    // points on 3 levels take 9 chunks of taps a workgroup
    ['C 258, 9 points', { shapes: [[4, 5], [2, 3], [2, 2]], C: 258, P: 9, Q: 3, H: 1 }],
    ['C 2, 9 points', { shapes: [[4, 5], [2, 3], [2, 2]], C: 2, P: 9, Q: 7, H: 3 }],
    // 260 channels as vec4s, two workgroups a group (the second one quad wide); 1 channel, 64
    // groups a workgroup, 33 points on 4 levels: one point group a chunk, 36 chunks
    ['C 260, vec4, batch 2', { shapes: [[3, 4], [2, 2]], B: 2, C: 260, P: 3, Q: 3, H: 1, valueLayout: 'BNLC' }],
    ['C 1, 33 points on 4 levels', { shapes: [[4, 5], [2, 3], [2, 2], [1, 1]], C: 1, P: 33, Q: 3, H: 2, samplingLocationsLayout: 'B2QHLP' }],
    // one level wider than 1024 among narrow ones, vec4
    ['one wide level of three, C 8', { shapes: [[3, 3], [2, 1500], [2, 2]], C: 8, Q: 20, P: 3, lo: -0.01, hi: 1.01 }],
  ];
  for (const alignCorners of [false, true]) {
    for (const paddingMode of PADDING_MODES) {
      // sides past 1024: the CPU's double positions, integers here
      cases.push([`wide ${alignCorners} ${paddingMode}`, { shapes: [[2, 1500], [1030, 2]], C: alignCorners ? 4 : 2, Q: 40, P: 4, H: 1, lo: -0.01, hi: 1.01, alignCorners, paddingMode }]);
    }
  }
  // one query per pixel (the CPU walks queries by place: grad_value's summation order)
  cases.push(['encoder-style, one query per pixel', { shapes: [[10, 9], [5, 5], [3, 2]], Q: 121, C: 4, P: 2, H: 2 }]);
  for (const [i, [label, spec]] of cases.entries()) {
    const c = problem(300 + i, spec);
    await both(label, c.args, c.gradOutput);
  }
});

test('levels wider than 1024: coordinates down to 2^-80, where the CPU\'s doubles round, give its bits', async () => {
  const r = rng(320);
  for (const alignCorners of [false, true]) {
    for (const paddingMode of PADDING_MODES) {
      const Q = 96, shapes = [[2, 3000], [1100, 1]];
      const locs = new Float32Array(Q * 2 * 2);
      for (let i = 0; i < locs.length; i++) {
        const e = -20 - r.int(0, 60);
        locs[i] = (r() < 0.5 ? -1 : 1) * (1 + r()) * 2 ** e;
      }
      const c = problem(321, { shapes, Q, P: 1, H: 1, C: 1, alignCorners, paddingMode });
      c.args.samplingLocations.data.set(locs);
      await both(`tiny coordinates ${alignCorners} ${paddingMode}`, c.args, c.gradOutput);
    }
  }
});

test('the non-finite rules: +-Inf weights at pixel centres, NaN and Inf everywhere, one canonical NaN', async () => {
  // 5 channels, and 8: value and grad_output rows read as vec4s
  for (const [C, seed] of [[5, 400], [8, 450]]) for (const [i, options] of OPTION_COMBOS.entries()) {
    const c = nonFiniteCase(seed + i, options, C);
    await both(`non-finite C ${C} ${JSON.stringify(options)}`, c.args, c.gradOutput);
    const out = await gpu.forward(c.args);
    const bits = new Uint32Array(out.data.buffer);
    for (let k = 0; k < bits.length; k++) if (Number.isNaN(out.data[k])) assert.equal(bits[k], 0x7fc00000);
    assert.ok(out.data.some((x) => x === Infinity) && out.data.some(Number.isNaN), 'the case makes both Inf and NaN outputs');
  }
});

test('same bits on every run: a backward whose samples crowd a few pixels', async () => {
  const c = problem(500, { shapes: [[3, 3], [2, 2]], Q: 300, P: 4, H: 2, C: 3, lo: 0.3, hi: 0.7 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const first = await gpu.backward(b);
  for (let run = 0; run < 3; run++) {
    const again = await gpu.backward(b);
    for (const name of Object.keys(first)) {
      assert.equal(sameBits(again[name].data, first[name].data), first[name].data.length, `run ${run} ${name}: ${firstDiff(again[name].data, first[name].data)}`);
    }
  }
  const out = await gpu.forward(c.args);
  assert.equal(sameBits((await gpu.forward(c.args)).data, out.data), out.data.length);
  compare('crowded', first, wasm.backward(b), gpu.numerics.productsRounded);
});

test('bits counted (printed for the record)', () => {
  for (const [name, { same, all }] of Object.entries(totals)) {
    console.log(`# ${name}: ${same} of ${all} elements have wasm SIMD's bits (${((100 * same) / all).toFixed(3)} %)`);
  }
  assert.ok(totals.output.all > 0 && totals.gradValue.all > 0);
});
