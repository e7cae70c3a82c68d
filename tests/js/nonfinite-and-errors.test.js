// The non-finite rules of SEMANTICS.md hold identically on native, wasm
// SIMD and wasm scalar in every option combination; IEEE propagation of NaN/Inf in the data is
// the same everywhere; sizes past the 4 GiB wasm heap are refused with the bytes before
// anything is allocated; and after any kind of error every backend keeps working and the wasm
// heap holds exactly what it held before.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { referenceBackward, referenceForward } from '../../bindings/reference.js';
import { assertClose, backends, OPTION_COMBOS, rng } from './helpers.js';

const ABOVE_ONE = Math.fround(1 + 2 ** -23);   // the float just above 1
const BELOW_ZERO = Math.fround(-1e-7);         // just below 0
const COORDS = [NaN, Infinity, -Infinity, 1e30, -1e30, ABOVE_ONE, BELOW_ZERO, 0.37, 0.81, 1, 0];
const huge = (v) => !Number.isFinite(v) || Math.abs(v) >= 1e30;   // NaN too; NaN is tested first

const SHAPES = [[3, 4], [1, 1], [1, 3], [2, 5]];   // a 1x1 level and a one-row level (align_corners W/H = 1)
const B = 1, H = 2, C = 5, P = 3, Q = COORDS.length;
const NL = SHAPES.length, L = SHAPES.reduce((s, [h, w]) => s + h * w, 0);

function locIndex(o, q, h, l, p, xy) {
  return o.samplingLocationsLayout === 'BQHLP2'
    ? ((((q * H + h) * NL + l) * P + p) * 2 + xy)
    : ((((xy * Q + q) * H + h) * NL + l) * P + p);
}
const weightIndex = (q, h, l, p) => (((q * H + h) * NL + l) * P + p);

// Every special coordinate on x and on y, paired with every other one across the samples.
function specialCase(o) {
  const r = rng(7);
  const value = Float32Array.from({ length: B * L * H * C }, () => r.uniform(-1, 1));
  const loc = new Float32Array(B * Q * H * NL * P * 2);
  for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
    loc[locIndex(o, q, h, l, p, 0)] = COORDS[(q + p) % Q];
    loc[locIndex(o, q, h, l, p, 1)] = COORDS[(3 * q + h + l + 2 * p + 1) % Q];
  }
  const weights = Float32Array.from({ length: B * Q * H * NL * P }, () => r.uniform(0.1, 1) * (r() < 0.5 ? -1 : 1));
  const gradOutput = Float32Array.from({ length: B * Q * H * C }, () => r.uniform(-1, 1));
  return {
    value: { data: value, shape: o.valueLayout === 'BLNC' ? [B, L, H, C] : [B, H, L, C] },
    samplingLocations: { data: loc, shape: o.samplingLocationsLayout === 'BQHLP2' ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P] },
    attentionWeights: { data: weights, shape: [B, Q, H, NL, P] },
    gradOutput: { data: gradOutput, shape: [B, Q, H * C] },
    spatialShapes: SHAPES,
    ...o,
  };
}

// forward's arguments: backward's without gradOutput (the reference, like forward, refuses it).
const forwardArgs = ({ gradOutput, ...fwd }) => fwd;
const run = (m, args) => {
  const { gradOutput, ...fwd } = args;
  return { output: m.forward(fwd), ...m.backward(args) };
};
const OUTPUTS = ['output', 'gradValue', 'gradSamplingLocations', 'gradAttentionWeights'];
const bits = (a) => new Uint32Array(a.buffer, a.byteOffset, a.length);
const name = (o) => `${o.valueLayout}/${o.samplingLocationsLayout}/align=${o.alignCorners}/${o.paddingMode}`;

function assertSameBits(got, want, context) {
  const g = bits(got), w = bits(want);
  assert.equal(g.length, w.length, `${context}: length`);
  for (let i = 0; i < g.length; i++) {
    if (g[i] !== w[i]) assert.fail(`${context}: element ${i} is ${got[i]}, expected ${want[i]} (bits differ)`);
  }
}

const withLocations = (args, f) => {
  const data = args.samplingLocations.data.slice();
  const weights = args.attentionWeights.data.slice();
  f(data, weights);
  return { ...args, samplingLocations: { ...args.samplingLocations, data },
    attentionWeights: { ...args.attentionWeights, data: weights } };
};

test('NaN, +-Inf, +-1e30 and coordinates just outside [0, 1]: the SEMANTICS rules, bit-identical on native, wasm SIMD and wasm scalar', async () => {
  const all = await backends();
  for (const o of OPTION_COMBOS) {
    const args = specialCase(o);
    const results = Object.fromEntries(Object.entries(all).map(([k, m]) => [k, run(m, args)]));

    // Identical bits everywhere, and every output finite (values and weights are finite).
    for (const k of ['wasm-scalar', 'native']) {
      for (const t of OUTPUTS) assertSameBits(results[k][t].data, results['wasm-simd'][t].data, `${name(o)} ${t}: ${k} vs wasm-simd`);
    }
    const got = results['wasm-simd'];
    for (const t of OUTPUTS) assert.ok(got[t].data.every(Number.isFinite), `${name(o)} ${t}: every element finite`);

    // The float64 reference defines the same rules.
    assertClose(got.output.data, referenceForward(forwardArgs(args)).data, `${name(o)} output vs reference`);
    const ref = referenceBackward(args);
    for (const t of OUTPUTS.slice(1)) assertClose(got[t].data, ref[t].data, `${name(o)} ${t} vs reference`);

    // Per sample: a NaN coordinate, or (zeros) a huge one on a non-degenerate axis, contributes
    // nothing and gets exactly 0 gradients; under border a huge coordinate clamps, and the
    // location gradient along that axis is exactly 0.
    const loc = args.samplingLocations.data;
    const gl = got.gradSamplingLocations.data, ga = got.gradAttentionWeights.data;
    let dead = 0, clamped = 0;
    for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
      const [Hl, Wl] = SHAPES[l];
      const ix = locIndex(o, q, h, l, p, 0), iy = locIndex(o, q, h, l, p, 1), iw = weightIndex(q, h, l, p);
      const x = loc[ix], y = loc[iy];
      const degX = o.alignCorners && Wl === 1, degY = o.alignCorners && Hl === 1;
      const isDead = Number.isNaN(x) || Number.isNaN(y) ||
        (o.paddingMode === 'zeros' && ((huge(x) && !degX) || (huge(y) && !degY)));
      const where = `${name(o)} sample q=${q} h=${h} l=${l} p=${p} (x=${x}, y=${y})`;
      if (isDead) {
        dead++;
        assert.ok(gl[ix] === 0 && gl[iy] === 0 && ga[iw] === 0, `${where}: contributes nothing, gradients must be 0, got ${gl[ix]}, ${gl[iy]}, ${ga[iw]}`);
      } else if (o.paddingMode === 'border') {
        if (huge(x)) { clamped++; assert.ok(gl[ix] === 0, `${where}: x clamped, its gradient must be 0, got ${gl[ix]}`); }
        if (huge(y)) { clamped++; assert.ok(gl[iy] === 0, `${where}: y clamped, its gradient must be 0, got ${gl[iy]}`); }
      }
    }
    assert.ok(dead > 0 && (o.paddingMode === 'zeros' || clamped > 0), `${name(o)}: the case exercises the rules`);

    // Metamorphic: a huge coordinate behaves exactly like a finite one far outside on its side.
    const far = withLocations(args, (d) => {
      for (let i = 0; i < d.length; i++) if (huge(d[i]) && !Number.isNaN(d[i])) d[i] = d[i] > 0 ? 5 : -5;
    });
    // A NaN coordinate behaves like a sample with weight 0 (in bounds), for output and gradValue.
    const nanFree = withLocations(args, (d, w) => {
      for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
        const ix = locIndex(o, q, h, l, p, 0), iy = locIndex(o, q, h, l, p, 1);
        if (Number.isNaN(d[ix]) || Number.isNaN(d[iy])) { d[ix] = 0.5; d[iy] = 0.5; w[weightIndex(q, h, l, p)] = 0; }
      }
    });
    for (const [k, m] of Object.entries(all)) {
      const r1 = run(m, far);
      for (const t of OUTPUTS) assertSameBits(r1[t].data, results[k][t].data, `${name(o)} ${k} ${t}: huge coordinates vs +-5`);
      const r2 = run(m, nanFree);
      for (const t of ['output', 'gradValue']) {
        r2[t].data.forEach((v, i) => {
          if (v !== results[k][t].data[i]) assert.fail(`${name(o)} ${k} ${t}[${i}]: NaN sample vs weight-0 sample: ${results[k][t].data[i]} vs ${v}`);
        });
      }
    }
  }
});

const kind = (v) => (Number.isNaN(v) ? 'NaN' : v === Infinity ? '+Inf' : v === -Infinity ? '-Inf' : 'finite');
// The kernels form a location gradient as a difference of corner dot products, <G, V01> - <G, V00>,
// where the reference sums G * (V01 - V00): with an infinite G the first gives Inf - Inf = NaN
// where the second gives +-Inf. Both are IEEE propagation of the same non-finite input, so
// against the reference only finiteness must agree; across backends the exact class must.
const finiteness = (v) => (Number.isFinite(v) ? 'finite' : 'non-finite');

test('NaN and Inf in value, attention weights and gradOutput propagate by IEEE rules, the same on every backend; far samples ignore them', async () => {
  const all = await backends();
  for (const o of OPTION_COMBOS) {
    const r = rng(11);
    const args = specialCase(o);
    const loc = args.samplingLocations.data;
    for (let i = 0; i < loc.length; i++) loc[i] = r.uniform(-0.1, 1.1);
    const value = args.value.data, w = args.attentionWeights.data, g = args.gradOutput.data;
    value[3] = NaN; value[17] = Infinity; value[40] = -Infinity;
    w[5] = Infinity; w[9] = NaN; g[2] = NaN; g[13] = -Infinity;
    // a far-outside sample (zeros: contributes nothing) with a NaN weight
    loc[locIndex(o, 0, 1, 0, 0, 0)] = 40; w[weightIndex(0, 1, 0, 0)] = NaN;

    const results = Object.fromEntries(Object.entries(all).map(([k, m]) => [k, run(m, args)]));
    const ref = { output: referenceForward(forwardArgs(args)), ...referenceBackward(args) };
    for (const t of OUTPUTS) {
      const want = Array.from(ref[t].data, finiteness);
      assert.ok(want.includes('non-finite'), `${name(o)} ${t}: the case produces non-finite results`);
      const simdKinds = Array.from(results['wasm-simd'][t].data, kind);
      for (const [k, res] of Object.entries(results)) {
        res[t].data.forEach((v, i) => {
          if (finiteness(v) !== want[i]) assert.fail(`${name(o)} ${k} ${t}[${i}] is ${v}, the reference gives ${ref[t].data[i]}`);
          if (kind(v) !== simdKinds[i]) assert.fail(`${name(o)} ${k} ${t}[${i}] is ${v}, wasm-simd gives ${results['wasm-simd'][t].data[i]}`);
        });
        const finite = (a) => Float64Array.from(a, (v, i) => (want[i] === 'finite' ? v : 0));
        assertClose(finite(res[t].data), finite(ref[t].data), `${name(o)} ${k} ${t} (finite elements) vs reference`);
      }
    }
    if (o.paddingMode === 'zeros') {
      // The NaN weight on the far sample reaches nothing: query 0, head 1 output stays finite
      // unless another of its samples reads the NaN/Inf data.
      const clean = withLocations(args, (d, ww) => { ww[weightIndex(0, 1, 0, 0)] = 0.5; });
      for (const [k, m] of Object.entries(all)) {
        const { gradOutput: unused, ...cleanForward } = clean;
        assertSameBits(m.forward(cleanForward).data, results[k].output.data,
          `${name(o)} ${k}: a far sample's NaN weight changes nothing`);
      }
    }
  }
});

test('sizes past the 4 GiB wasm heap: RangeError with the bytes needed, before allocating; small inputs, huge output', async () => {
  const all = await backends();
  for (const k of ['wasm-simd', 'wasm-scalar']) {
    const m = all[k];
    const { gradOutput: unused, ...warmup } = specialCase(OPTION_COMBOS[0]);
    m.forward(warmup);   // the allocator's first region exists
    const heap = m.wasm.heapInUse(), memory = m.wasm.memory.buffer.byteLength;
    // 200,000 input floats, but output is 60,000 x 20,000 floats = 4.8e9 bytes.
    const Cbig = 20000, Qbig = 60000;
    const args = {
      value: { data: new Float32Array(Cbig), shape: [1, 1, 1, Cbig] }, spatialShapes: [[1, 1]],
      samplingLocations: { data: new Float32Array(2 * Qbig), shape: [1, Qbig, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array(Qbig), shape: [1, Qbig, 1, 1, 1] },
    };
    const tensorBytes = 4 * (Cbig + 2 * Qbig + Qbig + Cbig * Qbig);
    assert.throws(() => m.forward(args), (e) => {
      assert.ok(e instanceof RangeError, `${k}: ${e}`);
      const stated = Number(/needs (\d+) bytes/.exec(e.message)?.[1]);
      assert.ok(stated >= tensorBytes && stated < tensorBytes + 4096, `${k}: states ${stated} bytes, the tensors alone are ${tensorBytes}: ${e.message}`);
      assert.match(e.message, /^forward: this call needs \d+ bytes of WebAssembly memory, more than the \d{10} bytes a wasm32 heap can give one call/);
      return true;
    });
    for (const mode of ['forward', 'backward', 'both']) {
      assert.throws(() => m.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[65536, 16385]] }, { mode }),
        { name: 'RangeError', message: /^prepare: this call needs \d+ bytes of WebAssembly memory/ });
    }
    assert.equal(m.wasm.heapInUse(), heap, `${k}: nothing allocated`);
    assert.equal(m.wasm.memory.buffer.byteLength, memory, `${k}: the memory did not grow`);
  }
  // The native backend has no 4 GiB heap; sizes that cannot exist are still refused, not a crash.
  const native = all.native;
  for (const dims of [
    { batch: 2 ** 40, numQueries: 2 ** 40, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[1, 1]] },
    { batch: 1, numQueries: 2 ** 40, numHeads: 2 ** 20, channels: 2 ** 20, numPoints: 1, spatialShapes: [[1, 1]] },
  ]) {
    assert.throws(() => {
      const p = native.prepare(dims);
      try { p.forward(); } finally { p.dispose(); }
    }, RangeError);
  }
});

test('after every kind of error each backend keeps working: same bits, and the wasm heap is where it was', async () => {
  const all = await backends();
  const o = OPTION_COMBOS[5];
  const args = specialCase(o);
  const { gradOutput, ...fwd } = args;
  const small = { batch: 1, numQueries: 2, numHeads: 1, channels: 3, numPoints: 1, spatialShapes: [[2, 2]] };
  const throwingData = { ...fwd, value: { shape: args.value.shape, get data() { throw new Error('data getter failed'); } } };
  for (const [k, m] of Object.entries(all)) {
    const before = run(m, args);
    const heap = m.wasm?.heapInUse(), memory = m.wasm?.memory.buffer.byteLength;
    const failures = [
      ['no arguments', () => m.forward(null), TypeError],
      ['plain array data', () => m.forward({ ...fwd, value: { data: Array.from(args.value.data), shape: args.value.shape } }), TypeError],
      ['unknown argument', () => m.forward({ ...fwd, bogus: 1 }), TypeError],
      ['missing gradOutput', () => m.backward(fwd), TypeError],
      ['wrong shape', () => m.backward({ ...args, gradOutput: { data: gradOutput.data.subarray(1), shape: [1, Q, H * C - 1] } }), RangeError],
      ['bad option', () => m.backward({ ...args, paddingMode: 'reflect' }), RangeError],
      ['bad level start', () => m.forward({ ...fwd, levelStartIndex: [0, 12, 13, 17] }), RangeError],
      ['throwing getter', () => m.forward(throwingData), /data getter failed/],
      ['disposed', () => { const p = m.prepare(small); p.dispose(); p.forward(); }, /disposed/],
      ['wrong mode', () => { const p = m.prepare(small, { mode: 'forward' }); try { p.backward(); } finally { p.dispose(); } }, /prepared for 'forward'/],
    ];
    if (m.wasm) {
      failures.push(['past 4 GiB', () => m.prepare({ ...small, spatialShapes: [[65536, 65536]] }), RangeError]);
    }
    for (let round = 0; round < 50; round++) {
      for (const [what, call, expected] of failures) assert.throws(call, expected, `${k}: ${what}`);
    }
    const after = run(m, args);
    for (const t of OUTPUTS) assertSameBits(after[t].data, before[t].data, `${k} ${t} after ${50 * failures.length} failed calls`);
    if (m.wasm) {
      assert.equal(m.wasm.heapInUse(), heap, `${k}: allocator in-use bytes unchanged`);
      assert.equal(m.wasm.memory.buffer.byteLength, memory, `${k}: memory size unchanged`);
    }
  }
});

// Sizes past 2^53 bytes: the count is computed exactly (BigInt) and printed as an integer.
const exactBytes = (shapes) => shapes.reduce((s, shape) => s + 4n * shape.reduce((a, d) => a * BigInt(d), 1n), 0n);

test('sizes far past 4 GiB: the wasm RangeError states the exact byte count as an integer, before allocating', async () => {
  const all = await backends();
  const B = 2 ** 40, Qh = 2 ** 40 + 1;   // 2^80 + 2^40 elements per tensor: no double holds 4x that exactly
  const dims = { batch: B, numQueries: Qh, numHeads: 1, channels: 3, numPoints: 1, spatialShapes: [[1, 1]] };
  const shapes = {
    forward: [[B, 1, 1, 3], [B, Qh, 1, 1, 1, 2], [B, Qh, 1, 1, 1], [B, Qh, 3]],
    backward: [[B, Qh, 3], [B, 1, 1, 3], [B, Qh, 1, 1, 1, 2], [B, Qh, 1, 1, 1], [B, 1, 1, 3], [B, Qh, 1, 1, 1, 2], [B, Qh, 1, 1, 1]],
  };
  shapes.both = [...shapes.backward, [B, Qh, 3]];
  for (const k of ['wasm-simd', 'wasm-scalar']) {
    const m = all[k];
    const heap = m.wasm.heapInUse(), memory = m.wasm.memory.buffer.byteLength;
    for (const mode of ['forward', 'backward', 'both']) {
      assert.throws(() => m.prepare(dims, { mode }), (e) => {
        assert.ok(e instanceof RangeError, `${k} ${mode}: ${e}`);
        assert.match(e.message, /^prepare: this call needs \d+ bytes of WebAssembly memory, more than the \d{10} bytes a wasm32 heap can give one call/, `${k} ${mode}`);
        const stated = BigInt(/needs (\d+) bytes/.exec(e.message)[1]);
        const tensors = exactBytes(shapes[mode]);
        assert.ok(stated >= tensors && stated < tensors + 4096n, `${k} ${mode}: states ${stated} bytes, the tensors alone are exactly ${tensors}`);
        return true;
      });
    }
    assert.equal(m.wasm.heapInUse(), heap, `${k}: nothing allocated`);
    assert.equal(m.wasm.memory.buffer.byteLength, memory, `${k}: the memory did not grow`);
  }
});

test('native: sizes no Float32Array can hold are a RangeError naming the tensor and its bytes, up front', async () => {
  const { constants } = await import('node:buffer');
  const native = (await backends()).native;
  const max = BigInt(constants.MAX_LENGTH);
  // prepare: 2^80 + 2^40 elements in samplingLocations' half (x2) and the others.
  const B = 2 ** 40, Qh = 2 ** 40 + 1;
  for (const mode of ['forward', 'backward', 'both']) {
    assert.throws(() => native.prepare({ batch: B, numQueries: Qh, numHeads: 1, channels: 3, numPoints: 1, spatialShapes: [[1, 1]] }, { mode }), (e) => {
      assert.ok(e instanceof RangeError, `${mode}: ${e}`);
      const m = /^prepare: (\w+) needs (\d+) bytes \((\d+) elements\), more than a Float32Array can hold here \((\d+) elements\)$/.exec(e.message);
      assert.ok(m, `${mode}: ${e.message}`);
      const shapes = { gradOutput: [B, Qh, 3], value: [B, 1, 1, 3], samplingLocations: [B, Qh, 1, 1, 1, 2] };
      const elements = shapes[m[1]].reduce((a, d) => a * BigInt(d), 1n);
      assert.equal(BigInt(m[3]), elements, `${mode}: ${m[1]}'s exact elements`);
      assert.equal(BigInt(m[2]), 4n * elements, `${mode}: ${m[1]}'s exact bytes`);
      assert.equal(BigInt(m[4]), max);
      return true;
    });
  }
  // forward: 4 MiB of value and 8192 queries give an output of 2^33 elements.
  const Cbig = 2 ** 20, Qbig = 2 ** 13;
  const args = {
    value: { data: new Float32Array(Cbig), shape: [1, 1, 1, Cbig] }, spatialShapes: [[1, 1]],
    samplingLocations: { data: new Float32Array(2 * Qbig), shape: [1, Qbig, 1, 1, 1, 2] },
    attentionWeights: { data: new Float32Array(Qbig), shape: [1, Qbig, 1, 1, 1] },
  };
  assert.throws(() => native.forward(args),
    { name: 'RangeError', message: `forward: output needs ${2 ** 35} bytes (${2 ** 33} elements), more than a Float32Array can hold here (${max} elements)` });
  // The boundary: one element past the limit is refused; the limit itself passes this check
  // (a native prepare allocates nothing until a tensor is first used).
  const one = { batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1 };
  assert.throws(() => native.prepare({ ...one, spatialShapes: [[Number(max) + 1, 1]] }, { mode: 'forward' }),
    { name: 'RangeError', message: /^prepare: value needs/ });
  native.prepare({ ...one, spatialShapes: [[Number(max), 1]] }, { mode: 'forward' }).dispose();
});

// Hostile arguments: every argument is read once, before any check, and a
// tensor's kind and length are its real ones. Each case below computed from stale heap data on
// the wasm backends (or was accepted and converted) before.
function hostileBase() {
  const r = rng(21);
  const Bh = 1, Qh = 3, Hh = 2, Ch = 4, Ph = 2, shapes = [[3, 4], [2, 2]];
  const Lh = 16, NLh = 2;
  const f = (n) => Float32Array.from({ length: n }, () => r.uniform(0, 1));
  return {
    value: { data: f(Bh * Lh * Hh * Ch), shape: [Bh, Lh, Hh, Ch] },
    spatialShapes: shapes,
    samplingLocations: { data: f(Bh * Qh * Hh * NLh * Ph * 2), shape: [Bh, Qh, Hh, NLh, Ph, 2] },
    attentionWeights: { data: f(Bh * Qh * Hh * NLh * Ph), shape: [Bh, Qh, Hh, NLh, Ph] },
    gradOutput: { data: f(Bh * Qh * Hh * Ch), shape: [Bh, Qh, Hh * Ch] },
  };
}

// A value.shape whose C_h answers 4 on its first `honest` reads and 8 after.
function lyingShape(honest) {
  let reads = 0;
  return new Proxy([1, 16, 2, 4], {
    get(target, key, receiver) {
      if (key === '3') return ++reads <= honest ? 4 : 8;
      return Reflect.get(target, key, receiver);
    },
  });
}

test('hostile inputs: a shape Proxy that changes its answer is read once; every backend computes what was validated', async () => {
  const all = await backends();
  const base = hostileBase();
  const { gradOutput, ...fwd } = base;
  for (const [k, m] of Object.entries(all)) {
    const want = m.forward(fwd).data;
    const wantGrad = m.backward(base).gradValue.data;
    for (let honest = 1; honest <= 6; honest++) {
      const heap = m.wasm?.heapInUse();
      const got = m.forward({ ...fwd, value: { data: base.value.data, shape: lyingShape(honest) } });
      assert.deepEqual(got.shape, [1, 3, 8], `${k}: forward with C_h read ${honest} time(s) honestly`);
      assertSameBits(got.data, want, `${k}: forward, C_h honest for ${honest} read(s)`);
      const grads = m.backward({ ...base, value: { data: base.value.data, shape: lyingShape(honest) } });
      assertSameBits(grads.gradValue.data, wantGrad, `${k}: backward gradValue, C_h honest for ${honest} read(s)`);
      if (m.wasm) assert.equal(m.wasm.heapInUse(), heap, `${k}: heap`);
    }
  }
});

test('hostile inputs: an own lying length, a buffer shrunk by a later getter, a spoofed toStringTag are refused on every backend', async () => {
  const all = await backends();
  const base = hostileBase();
  const { gradOutput, ...fwd } = base;
  const n = base.value.data.length;
  for (const [k, m] of Object.entries(all)) {
    const heap = m.wasm?.heapInUse(), memory = m.wasm?.memory.buffer.byteLength;
    // A Float32Array half as long as its shape says, with an own `length` claiming the full count.
    const short = base.value.data.slice(0, n / 2);
    Object.defineProperty(short, 'length', { value: n });
    assert.throws(() => m.forward({ ...fwd, value: { data: short, shape: base.value.shape } }),
      { name: 'RangeError', message: `forward: value.shape is [1, 16, 2, 4] (${n} elements) but value.data has ${n / 2} elements` }, k);

    // value's resizable buffer is shrunk by the getter of a later argument, after value was read.
    for (const op of ['forward', 'backward']) {
      const buffer = new ArrayBuffer(4 * n, { maxByteLength: 4 * n });
      const tracking = new Float32Array(buffer);
      tracking.set(base.value.data);
      const args = {
        ...(op === 'forward' ? fwd : base),
        value: { data: tracking, shape: base.value.shape },
        attentionWeights: { shape: base.attentionWeights.shape, get data() { buffer.resize(4); return base.attentionWeights.data; } },
      };
      assert.throws(() => m[op](args),
        { name: 'RangeError', message: `${op}: value.shape is [1, 16, 2, 4] (${n} elements) but value.data has 1 elements` }, `${k} ${op}`);
      // A fixed-length view of a buffer shrunk below it has no elements left.
      const buffer2 = new ArrayBuffer(4 * n, { maxByteLength: 4 * n });
      const fixed = new Float32Array(buffer2, 0, n);
      const args2 = { ...args, value: { data: fixed, shape: base.value.shape },
        attentionWeights: { shape: base.attentionWeights.shape, get data() { buffer2.resize(8); return base.attentionWeights.data; } } };
      assert.throws(() => m[op](args2), { name: 'RangeError', message: new RegExp(`^${op}: value.shape .* but value.data has 0 elements$`) }, `${k} ${op} fixed view`);
    }

    // Other typed arrays dressed up as Float32Array.
    for (const Kind of [Uint8Array, Float64Array, Int32Array]) {
      const spoof = new Kind(n);
      Object.defineProperty(spoof, Symbol.toStringTag, { value: 'Float32Array' });
      assert.throws(() => m.forward({ ...fwd, value: { data: spoof, shape: base.value.shape } }),
        { name: 'TypeError', message: `forward: value.data is ${Kind.name}, expected a Float32Array` }, `${k} ${Kind.name}`);
      assert.throws(() => m.backward({ ...base, gradOutput: { data: new Kind(base.gradOutput.data.length), shape: base.gradOutput.shape } }),
        { name: 'TypeError', message: `backward: gradOutput.data is ${Kind.name}, expected a Float32Array` }, `${k} ${Kind.name}`);
    }
    // A Float32Array whose own toStringTag lies the other way is still a Float32Array.
    const honest = base.value.data.slice();
    Object.defineProperty(honest, Symbol.toStringTag, { value: 'Uint8Array' });
    assertSameBits(m.forward({ ...fwd, value: { data: honest, shape: base.value.shape } }).data, m.forward(fwd).data, `${k}: relabelled Float32Array`);

    // Each argument is read once: a getter that answers differently on a second read is harmless.
    let reads = 0;
    const once = { ...fwd, get spatialShapes() { reads++; return reads === 1 ? fwd.spatialShapes : [[1, 1]]; } };
    assertSameBits(m.forward(once).data, m.forward(fwd).data, `${k}: spatialShapes getter`);
    assert.equal(reads, 1, `${k}: spatialShapes read once`);
    if (m.wasm) {
      assert.equal(m.wasm.heapInUse(), heap, `${k}: nothing left allocated`);
      assert.equal(m.wasm.memory.buffer.byteLength, memory, `${k}: memory unchanged`);
    }
  }
});

test('spatialShapes and levelStartIndex given as tensors: their shape is checked', async () => {
  const all = await backends();
  const base = hostileBase();
  const { gradOutput, ...fwd } = base;
  for (const [k, m] of Object.entries(all)) {
    const want = m.forward(fwd).data;
    const data = new BigInt64Array([3n, 4n, 2n, 2n]);
    assertSameBits(m.forward({ ...fwd, spatialShapes: { data, shape: [2, 2] } }).data, want, `${k}: (N_l, 2) tensor`);
    assertSameBits(m.forward({ ...fwd, spatialShapes: { data } }).data, want, `${k}: tensor without a shape`);
    for (const shape of [[1, 4], [4], [2, 2, 1], [4, 1]]) {
      assert.throws(() => m.forward({ ...fwd, spatialShapes: { data, shape } }),
        { name: 'RangeError', message: `forward: spatialShapes.shape is [${shape.join(', ')}] but spatialShapes.data has 4 entries, expected shape [2, 2]` },
        `${k}: spatialShapes shape ${shape}`);
    }
    assert.throws(() => m.forward({ ...fwd, spatialShapes: { data, shape: [2, 2.5] } }), { name: 'TypeError', message: /^forward: spatialShapes.shape is \[2, 2.5\]/ });
    assert.throws(() => m.forward({ ...fwd, spatialShapes: { data, shape: '2x2' } }), { name: 'TypeError', message: /^forward: spatialShapes.shape is the string "2x2"/ });
    assert.throws(() => m.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: { data, shape: [1, 4] } }),
      { name: 'RangeError', message: /^prepare: spatialShapes.shape is \[1, 4\]/ });
    const starts = new BigInt64Array([0n, 12n]);
    assertSameBits(m.forward({ ...fwd, levelStartIndex: { data: starts, shape: [2] } }).data, want, `${k}: levelStartIndex tensor`);
    assert.throws(() => m.forward({ ...fwd, levelStartIndex: { data: starts, shape: [1, 2] } }),
      { name: 'RangeError', message: 'forward: levelStartIndex.shape is [1, 2] but levelStartIndex.data has 2 entries, expected shape [2]' });
  }
});
