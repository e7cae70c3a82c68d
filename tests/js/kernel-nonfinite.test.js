// The kernels' answers where float arithmetic used to decide them, on
// every backend: NaN bits are the one canonical NaN (0x7fc00000) in every output and identical
// on native, wasm SIMD and wasm scalar; an infinite attention weight at a pixel centre gives
// a * S (+-Inf), as SEMANTICS and PyTorch do; a level wider than 2^24 pixels gives the exact
// answer at its last pixel, never a read past the level.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backends, OPTION_COMBOS, randomCase, rng } from './helpers.js';

const OUTPUTS = ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'];
const bits = (a) => new Uint32Array(a.buffer, a.byteOffset, a.length);
const name = (o) => `${o.valueLayout}/${o.samplingLocationsLayout}/align=${o.alignCorners}/${o.paddingMode}`;
const nanWithBits = (b) => new Float32Array(new Uint32Array([b]).buffer)[0];
const NAN_BITS = [0x7fc00000, 0xffc00000, 0x7fc01234, 0xffc56789, 0x7f800001];

function run(m, args, gradOutput) {
  return { output: m.forward(args), ...m.backward({ ...args, gradOutput }) };
}

// Writes the NaN pattern into a Float32Array without going through a JS number (which may
// canonicalise it).
function plant(array, index, pattern) {
  bits(array)[index] = pattern;
}

test('NaN in every output is 0x7fc00000, bit-identical on native, wasm SIMD and wasm scalar', async () => {
  const all = await backends();
  let nans = 0;
  for (let seed = 1; seed <= 48; seed++) {
    const o = OPTION_COMBOS[seed % OPTION_COMBOS.length];
    const { args, gradOutput } = randomCase(1000 + seed, o);
    const r = rng(seed);
    const tensors = [args.value.data, args.attentionWeights.data, gradOutput.data];
    for (const t of tensors) {
      for (let k = 0; k < 3; k++) {
        plant(t, r.int(0, t.length - 1), r.pick(NAN_BITS));
        t[r.int(0, t.length - 1)] = r.pick([Infinity, -Infinity]);
      }
    }
    const results = Object.fromEntries(Object.entries(all).map(([k, m]) => [k, run(m, args, gradOutput)]));
    for (const t of OUTPUTS) {
      const want = bits(results['wasm-simd'][t].data);
      for (const k of Object.keys(all)) {
        const got = bits(results[k][t].data);
        for (let i = 0; i < got.length; i++) {
          const v = results[k][t].data[i];
          if (Number.isNaN(v)) {
            nans++;
            if (got[i] !== 0x7fc00000) assert.fail(`seed ${seed} ${name(o)} ${k} ${t}[${i}]: NaN with bits 0x${got[i].toString(16)}, expected 0x7fc00000`);
          }
          if (got[i] !== want[i]) assert.fail(`seed ${seed} ${name(o)} ${t}[${i}]: ${k} 0x${got[i].toString(16)} vs wasm-simd 0x${want[i].toString(16)}`);
        }
      }
    }
  }
  assert.ok(nans > 100, `the sweep produces NaNs (${nans})`);
  assert.ok(Number.isNaN(nanWithBits(0x7fc00000)));
});

test('an infinite attention weight at a pixel centre gives +-Inf (a * S), on every backend', async () => {
  const all = await backends();
  // One 4x4 level, C = 2, one sample at the centre of pixel (1, 2) with values 3 and -2:
  // a * S = +Inf * 3 and +Inf * -2; a second query with -Inf; a third with weight Inf on a
  // sample a quarter pixel off the centre between values of both signs.
  for (const o of OPTION_COMBOS.filter((c) => !c.alignCorners)) {
    const H = 4, W = 4, C = 2, Q = 3;
    const value = new Float32Array(H * W * C).fill(1);
    value.set([3, -2], (1 * W + 2) * C);
    value.set([-5, 7], (1 * W + 3) * C);
    const loc = new Float32Array(Q * 2);
    const xs = [2.5 / W, 2.5 / W, 2.75 / W], y = 1.5 / H;
    const layout = o.samplingLocationsLayout === 'BQHLP2';
    for (let q = 0; q < Q; q++) {
      loc[layout ? q * 2 : q] = xs[q];
      loc[layout ? q * 2 + 1 : Q + q] = y;
    }
    const args = {
      value: { data: value, shape: o.valueLayout === 'BLNC' ? [1, H * W, 1, C] : [1, 1, H * W, C] },
      samplingLocations: { data: loc, shape: layout ? [1, Q, 1, 1, 1, 2] : [1, 2, Q, 1, 1, 1] },
      attentionWeights: { data: new Float32Array([Infinity, -Infinity, Infinity]), shape: [1, Q, 1, 1, 1] },
      spatialShapes: [[H, W]],
      ...o,
    };
    for (const [k, m] of Object.entries(all)) {
      const out = Array.from(m.forward(args).data);
      // third query: S = (0.75 * 3 + 0.25 * -5, 0.75 * -2 + 0.25 * 7) = (1, 0.25)
      assert.deepEqual(out, [Infinity, -Infinity, -Infinity, Infinity, Infinity, Infinity],
        `${name(o)} ${k}: output`);
    }
  }
});

test('a 1 x (2^24 + 5) level: the last pixel is sampled exactly, nothing past it is read (wasm SIMD, wasm scalar, native)', async () => {
  const all = await backends();
  const W = 2 ** 24 + 5;
  const value = new Float32Array(W).fill(1);
  value[W - 1] = 7;
  // zeros padding, no align_corners: x = 1 is u = W - 0.5, half of pixel W - 1 (7) and half
  // outside (0): 3.5. float32 rounded u to W and read pixel W; border clamps to pixel W - 1: 7.
  for (const paddingMode of ['zeros', 'border']) {
    const args = {
      value: { data: value, shape: [1, W, 1, 1] },
      samplingLocations: { data: new Float32Array([1, 0.5]), shape: [1, 1, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array([1]), shape: [1, 1, 1, 1, 1] },
      spatialShapes: [[1, W]],
      valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode,
    };
    for (const [k, m] of Object.entries(all)) {
      assert.deepEqual(Array.from(m.forward(args).data), [paddingMode === 'zeros' ? 3.5 : 7], `${paddingMode} ${k}`);
      const g = m.backward({ ...args, gradOutput: { data: new Float32Array([1]), shape: [1, 1, 1] } });
      const gv = g.gradValue.data;
      assert.equal(gv[W - 1], paddingMode === 'zeros' ? 0.5 : 1, `${paddingMode} ${k}: grad_value of the last pixel`);
      assert.equal(gv[W - 2], 0, `${paddingMode} ${k}: grad_value of the pixel before`);
    }
  }
});
