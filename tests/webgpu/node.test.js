// The WebGPU backend in Node (Dawn, the 'webgpu' package, an optional peer; SwiftShader here): bits
// against wasm SIMD on random problems with every option, the non-finite rules, wide levels and
// the banded walk; determinism; GPU tensors in and out; the same argument errors as the other
// backends; limits; a lost device; init's errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { SWIFTSHADER_ICD, firstDiff, nonFiniteCase, sameBits } from './helpers.js';
import { OPTION_COMBOS, assertClose, randomCase, rng } from '../js/helpers.js';
import { init } from '../../bindings/node.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { MsdaWebGPU } from '../../bindings/webgpu/backend.js';
import { sampleGrid } from '../../bindings/webgpu/plan.js';
import { noAdapterHint } from '../../bindings/webgpu/node-gpu.js';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

let gpu, wasm;
const totals = {};

before(async () => {
  gpu = await init({ backend: 'webgpu' });
  wasm = await init({ backend: 'wasm', simd: true });
});

after(() => {
  gpu?.dispose();
  wasm?.dispose();
});

// Counts equal bits per tensor (into totals) and checks every tensor bit for bit (one writer, the
// CPU's order; grad_value's the CPU walk's, the order pass's ranks) where the device neither fuses
// nor flushes inputs these problems have, and within SEMANTICS.md's tolerance with its NaNs where
// the CPU has them.
function compare(label, got, want, exact) {
  for (const [name, g] of Object.entries(got)) {
    const w = want[name];
    assert.deepEqual(g.shape, w.shape, `${label} ${name}: shape`);
    const same = sameBits(g.data, w.data);
    const t = (totals[name] ??= { same: 0, all: 0 });
    t.same += same;
    t.all += w.data.length;
    if (exact) assert.equal(same, w.data.length, `${label} ${name}: ${firstDiff(g.data, w.data)}`);
    assertClose(g.data, w.data, `${label} ${name}`);
    for (let i = 0; i < w.data.length; i++) {
      if (Number.isNaN(w.data[i]) !== Number.isNaN(g.data[i])) assert.fail(`${label} ${name}[${i}] is ${g.data[i]}, expected ${w.data[i]}`);
    }
  }
}

async function both(label, args, gradOutput, exact = !gpu.numerics.fusedMultiplyAdd) {
  compare(label, { output: await gpu.forward(args) }, { output: wasm.forward(args) }, exact);
  const b = { ...args, gradOutput };
  compare(label, await gpu.backward(b), wasm.backward(b), exact);
}

function problem(seed, { shapes, B = 1, H = 2, C = 3, Q = 8, P = 2, lo = -0.1, hi = 1.1, ...options }) {
  const r = rng(seed);
  const L = shapes.reduce((a, [h, w]) => a + h * w, 0), NL = shapes.length;
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  const blnc = (options.valueLayout ?? 'BLNC') === 'BLNC';
  const qhlp2 = (options.samplingLocationsLayout ?? 'BQHLP2') === 'BQHLP2';
  return {
    args: {
      value: { data: fill(B * L * H * C, () => r.uniform(-1, 1)), shape: blnc ? [B, L, H, C] : [B, H, L, C] },
      spatialShapes: shapes,
      samplingLocations: { data: fill(B * Q * H * NL * P * 2, () => r.uniform(lo, hi)), shape: qhlp2 ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P] },
      attentionWeights: { data: fill(B * Q * H * NL * P, () => r.uniform(-1, 1)), shape: [B, Q, H, NL, P] },
      ...options,
    },
    gradOutput: { data: fill(B * Q * H * C, () => r.uniform(-1, 1)), shape: [B, Q, H * C] },
  };
}

test('the adapter and what the startup probe saw', () => {
  assert.equal(gpu.backend, 'webgpu');
  assert.equal(typeof gpu.device.createBuffer, 'function');
  assert.equal(typeof gpu.numerics.fusedMultiplyAdd, 'boolean');
  assert.equal(typeof gpu.numerics.flushesSubnormals, 'boolean');
  console.log(`# adapter: ${JSON.stringify(gpu.adapterInfo)}; numerics: ${JSON.stringify(gpu.numerics)}; VK_ICD_FILENAMES=${process.env.VK_ICD_FILENAMES ?? ''}`);
  if (process.env.VK_ICD_FILENAMES === SWIFTSHADER_ICD) {
    // What SwiftShader does (docs/webgpu.md, numerics): no contraction, subnormals flushed.
    assert.deepEqual(gpu.numerics, { fusedMultiplyAdd: false, flushesSubnormals: true });
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
    for (const paddingMode of ['zeros', 'border']) {
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
    for (const paddingMode of ['zeros', 'border']) {
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

test("grad_value's order: the grid of cells the CPU walks queries by (src/kernel/walks.h sample_grid)", () => {
  const grid = (spatialShapes) => sampleGrid({ spatialShapes });
  // bands of 8 rows of the tallest level, columns of the widest
  assert.deepEqual(grid([[20, 12], [10, 6], [5, 3]]), { bands: 3, cols: 12 });
  assert.deepEqual(grid([[8, 1], [1, 5]]), { bands: 1, cols: 5 });
  // at most 8191 cells (the last of 8192 for queries with no counted point): fewer columns, then bands
  assert.deepEqual(grid([[100, 9000]]), { bands: 13, cols: 630 });
  assert.deepEqual(grid([[80000, 3]]), { bands: 8191, cols: 1 });
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
  compare('crowded', first, wasm.backward(b), !gpu.numerics.fusedMultiplyAdd);
});

// Queries crowding a few pixels (3+ terms a pixel, so the summation order shows in the bits):
// kind 'encoder' one query per pixel, shuffled, sampling around its own pixel on every level;
// 'decoder' queries around a few centres; 'spread' many queries all over a small image; 'edges'
// every other query's points at 16383.75, 16384, 16384 units of 2^-16 in x: their place (the mean
// of the truncated units, rounded down) just left of the edge 0.25 of a 4-column grid. Some
// points outside [0, 1] and some weights 0 (they do not place their query).
function crowdCase(seed, { kind, shapes, B = 2, H = 2, C = 3, P = 4, Q = 0, zeros = 0.15, ...options }) {
  const r = rng(seed);
  const L = shapes.reduce((a, [h, w]) => a + h * w, 0), NL = shapes.length;
  if (kind === 'encoder') Q = L;
  const qhlp2 = (options.samplingLocationsLayout ?? 'BQHLP2') === 'BQHLP2';
  const blnc = (options.valueLayout ?? 'BLNC') === 'BLNC';
  const loc = new Float32Array(B * Q * H * NL * P * 2);
  const at = (b, q, h, l, p, xy) => (qhlp2 ? ((((b * Q + q) * H + h) * NL + l) * P + p) * 2 + xy
    : ((b * 2 + xy) * Q + q) * H * NL * P + (h * NL + l) * P + p);
  const refs = [];
  shapes.forEach(([h, w]) => { for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) refs.push([(x + 0.5) / w, (y + 0.5) / h]); });
  const centres = Array.from({ length: 4 }, () => [r.uniform(0, 1), r.uniform(0, 1)]);
  for (let b = 0; b < B; b++) {
    const perm = refs.map((_, i) => i);
    for (let i = perm.length - 1; i > 0; i--) { const j = r.int(0, i); [perm[i], perm[j]] = [perm[j], perm[i]]; }
    for (let q = 0; q < Q; q++) {
      let ref, spread;
      if (kind === 'encoder') { ref = refs[perm[q]]; spread = 0.15; }
      else if (kind === 'decoder') { const c = r.pick(centres); ref = [c[0] + r.uniform(-0.05, 0.05), c[1] + r.uniform(-0.05, 0.05)]; spread = 0.1; }
      else if (kind === 'edges') { ref = [0.5, 0.5]; spread = 0.5; }
      else { ref = [r.uniform(0, 1), r.uniform(0, 1)]; spread = 0.6; }
      for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
        loc[at(b, q, h, l, p, 0)] = ref[0] + r.uniform(-spread, spread);
        loc[at(b, q, h, l, p, 1)] = ref[1] + r.uniform(-spread, spread);
        if (kind === 'edges' && q % 2 === 0) loc[at(b, q, h, l, p, 0)] = [16383.75, 16384, 16384][p % 3] / 65536;
      }
    }
  }
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    args: {
      value: { data: fill(B * L * H * C, () => r.uniform(-1, 1)), shape: blnc ? [B, L, H, C] : [B, H, L, C] },
      spatialShapes: shapes,
      samplingLocations: { data: loc, shape: qhlp2 ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P] },
      attentionWeights: { data: fill(B * Q * H * NL * P, () => (r() < zeros ? 0 : r.uniform(-1, 1))), shape: [B, Q, H, NL, P] },
      ...options,
    },
    gradOutput: { data: fill(B * Q * H * C, () => r.uniform(-1, 1)), shape: [B, Q, H * C] },
  };
}

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

// A GPU buffer holding `data` at `offset` bytes.
function upload(device, data, offset = 0, usage = 0x80 | 0x4 | 0x8) {
  const buffer = device.createBuffer({ size: offset + data.byteLength, usage });
  device.queue.writeBuffer(buffer, offset, data);
  return buffer;
}

async function download(device, buffer, bytes) {
  const staging = device.createBuffer({ size: bytes, usage: 0x1 | 0x8 });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buffer, 0, staging, 0, bytes);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(0x1);
  const out = new Float32Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return out;
}

test('GPU tensors in, GPU tensors out ({ outputs: "gpu" }), byteOffset aligned or not, mixed with CPU ones', async () => {
  const d = gpu.device;
  const made = [];
  const onGpu = (t, offset = 0) => {
    const buffer = upload(d, t.data, offset);
    made.push(buffer);
    return { buffer, shape: t.shape, byteOffset: offset };
  };
  // 5 channels, and 8: value and grad_output read as vec4s from a binding at that offset
  for (const C of [5, 8]) for (const offset of [0, 256, 4]) {   // 4: not a binding alignment, copied first
    const c = problem(C === 5 ? 600 : 601, { shapes: [[4, 4], [2, 3]], Q: 10, C, P: 3, H: 2 });
    const want = wasm.forward(c.args);
    const wantB = wasm.backward({ ...c.args, gradOutput: c.gradOutput });
    const args = { ...c.args, value: onGpu(c.args.value, offset), samplingLocations: onGpu(c.args.samplingLocations, offset) };
    const cpuOut = await gpu.forward(args);
    assert.equal(sameBits(cpuOut.data, want.data), want.data.length, `C ${C} offset ${offset}, CPU output`);
    const out = await gpu.forward(args, { outputs: 'gpu' });
    assert.deepEqual(out.shape, want.shape);
    assert.ok((out.buffer.usage & 0x80) && (out.buffer.usage & 0x4), 'the output buffer can be bound and copied');
    assert.equal(sameBits(await download(d, out.buffer, 4 * want.data.length), want.data), want.data.length, `C ${C} offset ${offset}, GPU output`);
    out.buffer.destroy();
    const grads = await gpu.backward({ ...args, attentionWeights: onGpu(c.args.attentionWeights, offset), gradOutput: onGpu(c.gradOutput, offset) }, { outputs: 'gpu' });
    for (const [name, t] of Object.entries(grads)) {
      assert.deepEqual(t.shape, wantB[name].shape);
      const got = await download(d, t.buffer, 4 * wantB[name].data.length);
      assertClose(got, wantB[name].data, `C ${C} offset ${offset}, ${name}`);
      if (name !== 'gradValue') assert.equal(sameBits(got, wantB[name].data), got.length, name);
      t.buffer.destroy();
    }
  }
  for (const b of made) b.destroy();
});

// A GPU buffer holding the half-precision `bits` at `offset` bytes (a multiple of 2), as small as
// WebGPU allows (its last 4-byte word whole), every other half of it 0x7fff (a NaN in both dtypes:
// a half read from the wrong place shows).
function uploadHalf(device, bits, offset = 0) {
  const size = Math.ceil((offset + 2 * bits.length) / 4) * 4;
  const all = new Uint16Array(size / 2).fill(0x7fff);
  all.set(bits, offset / 2);
  const buffer = device.createBuffer({ size, usage: 0x80 | 0x4 | 0x8 });
  device.queue.writeBuffer(buffer, 0, all);
  return buffer;
}

// Every element of `got` has the bits of `want` (typed arrays of the same kind).
function assertSameBits(got, want, label) {
  assert.equal(got.constructor, want.constructor, `${label}: ${got.constructor.name}`);
  const g = new Uint32Array(got.buffer, got.byteOffset, got.byteLength >> 2);
  const w = new Uint32Array(want.buffer, want.byteOffset, want.byteLength >> 2);
  assert.equal(got.length, want.length, `${label}: length`);
  if (got instanceof Uint16Array) {
    const i = want.findIndex((x, k) => got[k] !== x);
    assert.equal(i, -1, `${label}: element ${i} is 0x${got[i]?.toString(16)}, expected 0x${want[i]?.toString(16)}`);
  } else {
    assert.equal(sameBits(got, want), want.length, `${label}: ${firstDiff(got, want)}`);
  }
  assert.ok(g.length === w.length);
}

// Each query of a rows x cols level (powers of 2: exact centres) samples its own pixel's centre
// with weight 1: the forward's output is its value (but where a neighbour's Inf or NaN meets a
// corner weight of 0, or a subnormal is flushed).
function identityCase(rows, cols) {
  const L = rows * cols;
  const centres = new Float32Array(2 * L);
  for (let i = 0; i < L; i++) {
    centres[2 * i] = ((i % cols) + 0.5) / cols;
    centres[2 * i + 1] = (Math.floor(i / cols) + 0.5) / rows;
  }
  return {
    L, centres,
    args: (value) => ({
      value, spatialShapes: [[rows, cols]],
      samplingLocations: { data: centres, shape: [1, L, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array(L).fill(1), shape: [1, L, 1, 1, 1] },
    }),
  };
}

test('float16 and bfloat16 GPU tensors: every one of the 65,536 patterns gives the float32 call\'s bits, and half results are them rounded', async () => {
  const d = gpu.device;
  const id = identityCase(256, 256);
  const all = Uint16Array.from({ length: id.L }, (_, i) => i);
  const mixed = Uint16Array.from({ length: id.L }, (_, i) => (i * 40503) & 0xffff);   // every pattern, in another order
  for (const dtype of ['float16', 'bfloat16']) {
    const made = [];
    const half = (bits, shape) => { const buffer = uploadHalf(d, bits); made.push(buffer); return { buffer, shape, dtype }; };
    const wide = (bits, shape) => ({ data: widenHalf(bits, dtype), shape });
    // the forward: value's patterns as they are (subnormals, +-0, +-Inf, every NaN)
    const shape = [1, id.L, 1, 1];
    const want = await gpu.forward(id.args(wide(all, shape)));
    const got = await gpu.forward(id.args(half(all, shape)));
    assertSameBits(got.data, want.data, `${dtype} forward`);
    const values = widenHalf(all, dtype);
    const kept = values.filter((v, i) => Object.is(got.data[i], v)).length, finite = values.filter(Number.isFinite).length;
    assert.ok(kept > finite - 600, `${dtype}: the output is the value: ${kept} of ${finite}`);
    // the backward: every input half, on the GPU
    const grad = { data: narrowToHalf(id.centres, dtype), shape: [1, id.L, 1, 1, 1, 2] };
    const bargs = (t) => ({
      value: t(all, shape), spatialShapes: [[256, 256]], samplingLocations: t(grad.data, grad.shape),
      attentionWeights: t(mixed, [1, id.L, 1, 1, 1]), gradOutput: t(all.slice().reverse(), [1, id.L, 1]),
    });
    const wantB = await gpu.backward(bargs(wide));
    const gotB = await gpu.backward(bargs(half));
    for (const name of Object.keys(wantB)) assertSameBits(gotB[name].data, wantB[name].data, `${dtype} backward ${name}`);
    // half results: the float32 ones rounded to nearest, ties to even (core/half.js, the CLI's --out-dtype)
    const out = await gpu.forward(id.args(half(all, shape)), { outputs: 'gpu', dtype });
    assert.deepEqual([out.shape, out.dtype, out.buffer.size], [shape.slice(0, 2).concat([1]), dtype, 2 * id.L]);
    assertSameBits(new Uint16Array((await download(d, out.buffer, 2 * id.L)).buffer), narrowToHalf(want.data, dtype), `${dtype} forward, ${dtype} out`);
    out.buffer.destroy();
    const outB = await gpu.backward(bargs(half), { dtype });
    for (const name of Object.keys(wantB)) {
      assert.equal(outB[name].dtype, dtype);
      assert.deepEqual(outB[name].shape, wantB[name].shape);
      assertSameBits(outB[name].data, narrowToHalf(wantB[name].data, dtype), `${dtype} backward ${name}, ${dtype} out`);
    }
    for (const b of made) b.destroy();
  }
});

test('float16 and bfloat16 GPU tensors: random values at every byteOffset, odd element counts, the float32 call\'s bits', async () => {
  const d = gpu.device;
  const c = problem(610, { shapes: [[3, 5], [2, 3]], Q: 7, C: 3, P: 3, H: 1 });   // value 63 elements, output 21: odd
  const cpu = { ...c.args, gradOutput: c.gradOutput };
  const names = ['value', 'samplingLocations', 'attentionWeights', 'gradOutput'];
  for (const dtype of ['float16', 'bfloat16']) {
    const bits = Object.fromEntries(names.map((k) => [k, narrowToHalf(cpu[k].data, dtype)]));
    const wide = { ...cpu };
    for (const k of names) wide[k] = { data: widenHalf(bits[k], dtype), shape: cpu[k].shape };
    const forward = ({ gradOutput, ...rest }) => rest;
    const want = await gpu.forward(forward(wide)), wantB = await gpu.backward(wide);
    for (const offset of [0, 2, 6, 256, 258]) {   // mid-word, and past a binding alignment
      const made = [];
      const args = { ...cpu };
      for (const k of names) {
        const buffer = uploadHalf(d, bits[k], offset);
        made.push(buffer);
        args[k] = { buffer, shape: cpu[k].shape, byteOffset: offset, dtype: dtype === 'float16' && offset === 6 ? '<f2' : dtype };
      }
      const label = `${dtype}, byteOffset ${offset}`;
      assertSameBits((await gpu.forward(forward(args))).data, want.data, `${label} forward`);
      const got = await gpu.backward(args);
      for (const name of Object.keys(wantB)) assertSameBits(got[name].data, wantB[name].data, `${label} ${name}`);
      // half results without awaiting, as a tfjs kernel takes them
      const now = gpu.dispatchForward(forward(args), { dtype });
      assert.equal(now.dtype, dtype);
      const n = want.data.length;
      assertSameBits(new Uint16Array((await download(d, now.buffer, 4 * Math.ceil(n / 2))).buffer, 0, n), narrowToHalf(want.data, dtype), `${label} dispatchForward`);
      now.buffer.destroy();
      const grads = gpu.dispatchBackward(args, { dtype });
      for (const [name, t] of Object.entries(grads)) {
        const n = wantB[name].data.length;
        assertSameBits(new Uint16Array((await download(d, t.buffer, 4 * Math.ceil(n / 2))).buffer, 0, n), narrowToHalf(wantB[name].data, dtype), `${label} dispatchBackward ${name}`);
        t.buffer.destroy();
      }
      for (const b of made) b.destroy();
    }
    // CPU half tensors (their bits uploaded, widened on the GPU): odd counts, a SharedArrayBuffer's view, beside a GPU one
    const shared = new Uint16Array(new SharedArrayBuffer(2 * bits.samplingLocations.length));
    shared.set(bits.samplingLocations);
    const weights = uploadHalf(d, bits.attentionWeights);
    const mixed = {
      ...cpu, value: { data: bits.value, shape: cpu.value.shape, dtype }, samplingLocations: { data: shared, shape: cpu.samplingLocations.shape, dtype },
      attentionWeights: { buffer: weights, shape: cpu.attentionWeights.shape, dtype }, gradOutput: { data: bits.gradOutput, shape: cpu.gradOutput.shape, dtype },
    };
    assertSameBits((await gpu.forward(forward(mixed))).data, want.data, `${dtype} CPU halves, forward`);
    const got = await gpu.backward(mixed);
    for (const name of Object.keys(wantB)) assertSameBits(got[name].data, wantB[name].data, `${dtype} CPU halves, ${name}`);
    weights.destroy();
  }
});

test('half results round to nearest, ties to even: midpoints, their neighbours, overflow and subnormals, as core/half.js', async () => {
  // float32 values the forward returns as they are (identityCase): for float16, each finite
  // magnitude, the midpoint to the next one (65520 past the largest) and the floats beside it;
  // for bfloat16 the same in its bits (a random third of the patterns); both signs.
  const values = [];
  const f16 = (h) => widenHalf(new Uint16Array([h]), 'float16')[0];
  const bits = new Uint32Array(1), float = new Float32Array(bits.buffer);
  const beside = (x) => { float[0] = x; const b = bits[0]; const out = []; for (const k of [-1, 0, 1]) { bits[0] = b + k; out.push(float[0]); } return out; };
  for (let h = 0; h < 0x7c00; h++) {
    const x = f16(h), next = h === 0x7bff ? 65536 : f16(h + 1);
    values.push(x, ...beside((x + next) / 2));
  }
  const r = rng(620);
  for (let h = 0; h < 0x7f80; h++) {
    if (r() > 1 / 3) continue;
    for (const low of [0, 0x7fff, 0x8000, 0x8001]) { bits[0] = (h << 16) | low; values.push(float[0]); }
  }
  values.push(2 ** -25, 2 ** -26, 3 * 2 ** -26, 2 ** -130, 3.4e38);
  const id = identityCase(512, 1024);
  assert.ok(2 * values.length <= id.L);
  const data = new Float32Array(id.L);
  values.forEach((v, i) => { data[2 * i] = v; data[2 * i + 1] = -v; });
  const args = id.args({ data, shape: [1, id.L, 1, 1] });
  const want = await gpu.forward(args);
  assert.ok(want.data.every((x, i) => x === data[i] || (data[i] !== 0 && Math.abs(data[i]) < 2 ** -126)), 'the output is the value (subnormals flushed aside)');
  for (const dtype of ['float16', 'bfloat16']) {
    const wantHalf = narrowToHalf(want.data, dtype);
    assertSameBits((await gpu.forward(args, { dtype })).data, wantHalf, `${dtype}, CPU results`);
    const out = await gpu.forward(args, { outputs: 'gpu', dtype });
    assertSameBits(new Uint16Array((await download(gpu.device, out.buffer, out.buffer.size)).buffer, 0, id.L), wantHalf, `${dtype}, GPU results`);
    out.buffer.destroy();
  }
});

test('float16 and bfloat16 GPU tensors: bad input named, with the bytes needed', async () => {
  const d = gpu.device;
  const c = problem(630, { shapes: [[2, 2]], Q: 3, H: 1, C: 1, P: 1 });   // value 4 elements, weights 3
  const made = [];
  const buf = (size) => { const b = d.createBuffer({ size, usage: 0x80 | 0x4 | 0x8 }); made.push(b); return b; };
  const value = (buffer, extra) => ({ ...c.args, value: { buffer, shape: [1, 4, 1, 1], ...extra } });
  const weights = (buffer, extra) => ({ ...c.args, attentionWeights: { buffer, shape: [1, 3, 1, 1, 1], ...extra } });
  await assert.rejects(gpu.forward(value(buf(64), { dtype: 'float64' })),
    { name: 'TypeError', message: /^forward: value\.dtype is the string "float64", expected 'float32', 'float16' or 'bfloat16' \(or NumPy's '<f4', '<f2'\)$/ });
  await assert.rejects(gpu.forward(value(buf(4), { dtype: 'float16' })),
    { name: 'RangeError', message: /^forward: value needs 8 bytes \(4 float16\) from byteOffset 0, 8 bytes in all, but its GPUBuffer has 4 bytes$/ });
  await assert.rejects(gpu.forward(value(buf(16), { dtype: 'bfloat16', byteOffset: 10 })),
    { name: 'RangeError', message: /^forward: value needs 8 bytes \(4 bfloat16\) from byteOffset 10, 18 bytes in all \(20 read in 4-byte words, as WebGPU binds buffers\), but its GPUBuffer has 16 bytes$/ });
  await assert.rejects(gpu.forward(weights(buf(6), { dtype: 'float16' })),
    { name: 'RangeError', message: /^forward: attentionWeights needs 6 bytes \(3 float16\) from byteOffset 0, 6 bytes in all \(8 read in 4-byte words, as WebGPU binds buffers\), but its GPUBuffer has 6 bytes$/ });
  await assert.rejects(gpu.forward(value(buf(64), { dtype: 'float16', byteOffset: 3 })),
    { name: 'RangeError', message: /^forward: value\.byteOffset is number 3, expected a non-negative multiple of 2 \(the bytes of a float16\)$/ });
  await assert.rejects(gpu.forward(weights(buf(8))),
    { name: 'RangeError', message: /^forward: attentionWeights needs 12 bytes \(3 float32\) from byteOffset 0, 12 bytes in all, but its GPUBuffer has 8 bytes \(a float16 or bfloat16 tensor\? say so with attentionWeights\.dtype\)$/ });
  await assert.rejects(gpu.forward(value(buf(64), { dtype: 'float16', shape: [1, 5, 1, 1] })), { name: 'RangeError', message: /^forward: value\.shape is \[1, 5, 1, 1\]/ });
  await assert.rejects(gpu.forward(c.args, { dtype: 'float64' }),
    { name: 'RangeError', message: /^forward: dtype is the string "float64", expected 'float32', 'float16' or 'bfloat16' \(the results' precision\)$/ });
  assert.throws(() => gpu.dispatchForward(c.args, { outputs: 'cpu' }),
    { name: 'RangeError', message: /^dispatchForward: outputs is the string "cpu", expected 'gpu' \(its results are on the GPU at once\)$/ });
  assert.throws(() => gpu.dispatchBackward({ ...c.args, gradOutput: c.gradOutput }, { dtype: 'float16', copy: 1 }),
    { name: 'TypeError', message: /^dispatchBackward: unknown option 'copy', expected \{ outputs\?: 'gpu', dtype\?: 'float32' \| 'float16' \| 'bfloat16' \}$/ });
  await assert.rejects(gpu.backward({ ...c.args, gradOutput: c.gradOutput }, { dtype: 'half' }), { name: 'RangeError', message: /^backward: dtype is the string "half"/ });
  // a tight buffer of an even count, and a float32 call's own form, still work
  const ok = await gpu.forward(value(uploadHalf(d, narrowToHalf(c.args.value.data, 'float16')), { dtype: 'float16' }), { dtype: 'float32' });
  assertSameBits(ok.data, (await gpu.forward({ ...c.args, value: { data: widenHalf(narrowToHalf(c.args.value.data, 'float16'), 'float16'), shape: [1, 4, 1, 1] } })).data, 'float16 value');
  for (const b of made) b.destroy();
});

test('CPU tensors read through the intrinsics: a view of a SharedArrayBuffer, an array whose buffer property lies', async () => {
  const c = problem(650, { shapes: [[3, 3]], Q: 4 });
  const want = wasm.forward(c.args);
  const shared = new Float32Array(new SharedArrayBuffer(c.args.value.data.byteLength));
  shared.set(c.args.value.data);
  const liar = new Float32Array(c.args.attentionWeights.data);
  Object.defineProperty(liar, 'buffer', { get() { throw new Error('read buffer'); } });
  Object.defineProperty(liar, 'byteLength', { value: 4 });
  const got = await gpu.forward({ ...c.args, value: { data: shared, shape: c.args.value.shape }, attentionWeights: { data: liar, shape: c.args.attentionWeights.shape } });
  assert.equal(sameBits(got.data, want.data), want.data.length);
});

test('bad input: the messages of the other backends, and GPU tensors checked', async () => {
  const c = problem(700, { shapes: [[2, 2]], Q: 2 });
  const bad = [
    { ...c.args, value: undefined },
    { ...c.args, value: { data: new Float64Array(24), shape: [1, 4, 2, 3] } },
    { ...c.args, value: { data: c.args.value.data, shape: [1, 5, 2, 3] } },
    { ...c.args, paddingMode: 'reflect' },
    { ...c.args, alignCorners: 1 },
    { ...c.args, levelStartIndex: [1] },
    { ...c.args, spatialShapes: [[2, 3]] },
    { ...c.args, attentionWeights: { data: new Float32Array(3), shape: [1, 2, 2, 1, 2] } },
    { ...c.args, extra: 1 },
  ];
  for (const args of bad) {
    let want;
    try { wasm.forward(args); } catch (e) { want = e; }
    assert.ok(want, 'wasm refuses it');
    await assert.rejects(gpu.forward(args), (e) => {
      assert.equal(e.constructor, want.constructor);
      // the same message, save the GPU tensor form named among what is expected
      assert.equal(e.message.replace(/ or \{ buffer: GPUBuffer[^}]*\}/, ''), want.message);
      return true;
    });
  }
  const d = gpu.device;
  const noStorage = d.createBuffer({ size: 64, usage: 0x8 | 0x4 });
  const small = d.createBuffer({ size: 16, usage: 0x80 });
  const g = (buffer, extra = {}) => ({ ...c.args, value: { buffer, shape: c.args.value.shape, ...extra } });
  await assert.rejects(gpu.forward(g(noStorage)), { name: 'TypeError', message: /value\.buffer has usage 12, expected one with GPUBufferUsage\.STORAGE/ });
  await assert.rejects(gpu.forward(g(small)), { name: 'RangeError', message: /value needs 96 bytes \(24 float32\) from byteOffset 0, 96 bytes in all, but its GPUBuffer has 16 bytes/ });
  await assert.rejects(gpu.forward(g(small, { byteOffset: 8 })), { message: /value needs 96 bytes \(24 float32\) from byteOffset 8, 104 bytes in all, but its GPUBuffer has 16 bytes/ });
  await assert.rejects(gpu.forward(g(small, { byteOffset: 2 })), { name: 'RangeError', message: /value\.byteOffset is number 2, expected a non-negative multiple of 4/ });
  await assert.rejects(gpu.forward(g({ size: 99 })), { name: 'TypeError', message: /value\.buffer is Object, expected a GPUBuffer/ });
  await assert.rejects(gpu.forward(c.args, { outputs: 'host' }), { name: 'RangeError', message: /outputs is the string "host", expected 'cpu' or 'gpu'/ });
  await assert.rejects(gpu.backward(c.args, { copy: true }), { name: 'TypeError', message: /unknown option 'copy'/ });
  await assert.rejects(gpu.backward(c.args), { name: 'TypeError', message: /backward: gradOutput is missing/ });
  noStorage.destroy();
  small.destroy();
  // what the device cannot take, named by argument before WebGPU's own words: an object with a
  // GPUBuffer's size and usage but none, and a buffer of another GPUDevice (forward and the
  // backward, aligned and not)
  const shaped = { size: 4 * c.args.value.data.length, usage: 0x80 | 0x4 | 0x8 };
  await assert.rejects(gpu.forward(g(shaped)), { name: 'TypeError', message: /^forward: value\.buffer is Object, expected a GPUBuffer/ });
  const other = await init({ backend: 'webgpu' });
  try {
    const foreign = other.device.createBuffer({ size: 256 + shaped.size, usage: shaped.usage });
    await assert.rejects(gpu.forward(g(foreign)), { name: 'TypeError', message: /^forward: value\.buffer belongs to another GPUDevice, expected a buffer of this instance's device/ });
    await assert.rejects(gpu.forward(g(foreign, { byteOffset: 4 })), { message: /^forward: value\.buffer belongs to another GPUDevice/ });
    const grad = { ...c.args, gradOutput: { buffer: foreign, shape: [1, 2, 6] } };   // (B, Q, H * C)
    await assert.rejects(gpu.backward(grad), { message: /^backward: gradOutput\.buffer belongs to another GPUDevice/ });
    // the instance still works
    const want = wasm.forward(c.args);
    assert.equal(sameBits((await gpu.forward(c.args)).data, want.data), want.data.length);
    foreign.destroy();
  } finally {
    other.dispose();
  }
});

test('limits: what one buffer cannot hold is refused with a RangeError naming the bytes, before any GPU work', async () => {
  const bind = gpu.limits.maxStorageBufferBindingSize;
  assert.ok(bind > 0);
  const side = 2 ** 14, C = Math.ceil(bind / 4 / side / side) + 1;   // value just past one binding
  const fake = (bytes) => ({ buffer: { size: bytes, usage: 0x80 }, byteOffset: 0 });
  const args = {
    value: { ...fake(4 * side * side * C), shape: [1, side * side, 1, C] }, spatialShapes: [[side, side]],
    samplingLocations: { data: new Float32Array(2), shape: [1, 1, 1, 1, 1, 2] },
    attentionWeights: { data: new Float32Array(1), shape: [1, 1, 1, 1, 1] },
  };
  await assert.rejects(gpu.forward(args), (e) => {
    assert.equal(e.name, 'RangeError');
    assert.match(e.message, new RegExp(`forward: value \\(input\\) needs ${4 * side * side * C} bytes on the GPU, more than this device binds in one buffer \\(maxStorageBufferBindingSize ${bind}`));
    return true;
  });
  // a backward's scratch: 32 bytes of corner records a sample
  const Q = Math.ceil(bind / 32) + 1;
  const big = {
    value: { data: new Float32Array(4), shape: [1, 4, 1, 1] }, spatialShapes: [[2, 2]],
    samplingLocations: { ...fake(8 * Q), shape: [1, Q, 1, 1, 1, 2] },
    attentionWeights: { ...fake(4 * Q), shape: [1, Q, 1, 1, 1] },
    gradOutput: { ...fake(4 * Q), shape: [1, Q, 1] },
  };
  await assert.rejects(gpu.backward(big), { name: 'RangeError', message: new RegExp(`corner records of one \\(batch, head\\) part \\(scratch\\) needs ${32 * Q} bytes`) });
});

test('the forward makes no scratch: its buffers are its inputs, its output, the problem, the dispatch and the readback', async () => {
  const d = gpu.device;
  const made = [];
  d.createBuffer = function (desc) { made.push(`${desc.label} ${desc.size}`); return Object.getPrototypeOf(d).createBuffer.call(this, desc); };
  try {
    const c = problem(860, { shapes: [[6, 5], [3, 3]], B: 2, H: 3, Q: 30, P: 4, C: 5 });
    const want = wasm.forward(c.args);
    const got = await gpu.forward(c.args);
    assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
    const bytes = (t) => 4 * t.data.length;
    assert.deepEqual(made.map((m) => m.replace(/ \d+$/, '')).sort(), ['msda attentionWeights', 'msda dispatch', 'msda output', 'msda problem', 'msda readback', 'msda samplingLocations', 'msda value']);
    assert.ok(made.includes(`msda output ${bytes(want)}`) && made.includes(`msda value ${bytes(c.args.value)}`));
  } finally {
    delete d.createBuffer;
  }
});

test('a backward whose scratch does not fit one buffer runs in parts of (batch, head) pairs, with the same bits', async () => {
  const c = problem(850, { shapes: [[6, 5], [3, 3]], B: 2, H: 3, Q: 30, P: 4, C: 5 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const whole = await gpu.backward(b);
  const limits = gpu._backendKept.limits;
  const saved = limits.maxStorageBufferBindingSize;
  // 1,440 samples, 240 a (batch, head) pair: room for the location and weight gradients (12 bytes
  // a sample) and for the corner records (32 bytes a sample) of two pairs, three parts in all
  limits.maxStorageBufferBindingSize = 12 * 1440 + 100;
  try {
    const parts = await gpu.backward(b);
    for (const name of Object.keys(whole)) {
      assert.equal(sameBits(parts[name].data, whole[name].data), whole[name].data.length, `${name}: ${firstDiff(parts[name].data, whole[name].data)}`);
    }
  } finally {
    limits.maxStorageBufferBindingSize = saved;
  }
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

// A device of its own from the entry's Dawn instance (one per process: a second one has crashed
// Dawn on SwiftShader).
async function ownDevice() {
  const { nodeGpu } = await import('../../bindings/webgpu/node-gpu.js');
  const adapter = await (await nodeGpu((m) => new Error(m))).requestAdapter();
  return adapter.requestDevice();
}

test('pipelines are compiled when a call first needs them, once per variant: init compiles the probe, a forward none of the backward\'s', async () => {
  const device = await ownDevice();
  const asked = [];
  const compile = device.createComputePipelineAsync;
  device.createComputePipelineAsync = function (desc) { asked.push(desc.label); return compile.call(this, desc); };
  const msda = await init({ backend: 'webgpu', device });
  try {
    assert.deepEqual(msda.compiled, ['probe']);
    const narrow = problem(880, { shapes: [[5, 4], [2, 3]], Q: 12, C: 5, P: 3 });
    const wide = problem(881, { shapes: [[2, 1500], [3, 3]], Q: 12, C: 2, P: 2, H: 1 });
    const vec4 = problem(883, { shapes: [[5, 4], [2, 3]], Q: 12, C: 8, P: 3 });
    // two calls at once share each compile; the first one's inputs are read when it is made
    // (changed while it waits for the compile, they do not change its result)
    const want = wasm.forward(narrow.args);
    const changing = { ...narrow.args, value: { data: narrow.args.value.data.slice(), shape: narrow.args.value.shape } };
    const first = msda.forward(changing);
    changing.value.data.fill(7);
    for (const got of await Promise.all([first, msda.forward(narrow.args)])) {
      assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
    }
    assert.deepEqual(msda.compiled, ['probe', 'forward narrow']);
    // channels a multiple of 4: vector loads
    const wantVec = wasm.forward(vec4.args), gotVec = await msda.forward(vec4.args);
    assert.equal(sameBits(gotVec.data, wantVec.data), wantVec.data.length, firstDiff(gotVec.data, wantVec.data));
    assert.deepEqual(msda.compiled, ['probe', 'forward narrow', 'forward narrow vec4']);
    assert.deepEqual(asked, msda.compiled.map((k) => `msda ${k}`));
    // a level wider than 1024: the pipelines with the wide levels' code, made at once by the
    // synchronous call (createComputePipeline)
    const out = msda.dispatchForward(wide.args);
    const wantWide = wasm.forward(wide.args);
    assert.equal(sameBits(await download(device, out.buffer, 4 * wantWide.data.length), wantWide.data), wantWide.data.length);
    out.buffer.destroy();
    assert.deepEqual(msda.compiled.slice(3), ['forward']);
    assert.equal(asked.length, 3);
    // the backward's, narrow: none of the wide ones
    const grads = await msda.backward({ ...narrow.args, gradOutput: narrow.gradOutput });
    compare('narrow backward', grads, wasm.backward({ ...narrow.args, gradOutput: narrow.gradOutput }), !msda.numerics.fusedMultiplyAdd);
    assert.deepEqual(msda.compiled.slice(4).sort(), ['cells', 'gather', 'orderCount', 'orderPlace', 'place', 'rank', 'samples narrow', 'scan', 'scanAdd']);
    assert.deepEqual(asked.slice(3), msda.compiled.slice(4).map((k) => `msda ${k}`));
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('calls at once on a fresh instance: each pipeline compiled once, and problems that differ only in vec4 each run their own', async () => {
  const device = await ownDevice();
  const asked = [];
  const compile = device.createComputePipelineAsync;
  device.createComputePipelineAsync = function (desc) { asked.push(desc.label); return compile.call(this, desc); };
  const msda = await init({ backend: 'webgpu', device });
  try {
    // the same problem but for its channels: 'narrow', then 'narrow vec4', two forwards and two backwards each
    const cases = [5, 8].map((C) => problem(885, { shapes: [[5, 4], [2, 3]], Q: 9, C, P: 3 }));
    const calls = cases.flatMap((c) => [0, 1].flatMap(() => {
      const b = { ...c.args, gradOutput: c.gradOutput };
      return [['forward', c.args, msda.forward(c.args)], ['backward', b, msda.backward(b)]];
    }));
    for (const [i, [fn, args, call]] of calls.entries()) {
      const got = await call;
      compare(`call ${i}`, fn === 'forward' ? { output: got } : got, fn === 'forward' ? { output: wasm.forward(args) } : wasm.backward(args), !msda.numerics.fusedMultiplyAdd);
    }
    assert.deepEqual(asked, msda.compiled.map((k) => `msda ${k}`), 'each compiled once');
    assert.deepEqual(msda.compiled.filter((k) => /^(forward|samples)/.test(k)).sort(),
      ['forward narrow', 'forward narrow vec4', 'samples narrow', 'samples narrow vec4']);
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('the half passes are compiled by the first call with a half input or half results, which reads CPU halves as they were when it was made', async () => {
  const device = await ownDevice();
  const msda = await init({ backend: 'webgpu', device });
  try {
    const c = problem(883, { shapes: [[4, 3]], Q: 5, C: 3 });
    const want = await gpu.forward(c.args);
    assert.deepEqual(await msda.forward(c.args).then((o) => sameBits(o.data, want.data)), want.data.length);
    assert.ok(!msda.compiled.includes('widen') && !msda.compiled.includes('narrow'));
    const bits = narrowToHalf(c.args.value.data, 'float16');
    const exact = await gpu.forward({ ...c.args, value: { data: widenHalf(bits, 'float16'), shape: c.args.value.shape } });
    const pending = msda.forward({ ...c.args, value: { data: bits, shape: c.args.value.shape, dtype: 'float16' } }, { dtype: 'bfloat16' });
    bits.fill(0x7c00);   // changed while the call's pipelines compile: not seen
    const got = await pending;
    assert.deepEqual(msda.compiled.slice(-2).sort(), ['narrow', 'widen']);
    assertSameBits(got.data, narrowToHalf(exact.data, 'bfloat16'), 'float16 in, bfloat16 out');
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('a kernel the device cannot compile: the first call that needs it rejects naming it, other calls still run, and a later call compiles it again', async () => {
  const device = await ownDevice();
  const create = device.createShaderModule;
  // WGSL that does not parse, then WGSL that does but whose pipeline the device refuses (32 KiB of workgroup memory), then the kernel
  let broken = (code) => `${code}\nfn broken( {`;
  device.createShaderModule = function (desc) {
    return create.call(this, broken && desc.label === 'msda forward narrow' ? { ...desc, code: broken(desc.code) } : desc);
  };
  const msda = await init({ backend: 'webgpu', device });
  try {
    const c = problem(882, { shapes: [[4, 4]], Q: 6 });
    for (let i = 0; i < 2; i++) {
      await assert.rejects(msda.forward(c.args), { message: /^ms-deform-attn: the WebGPU kernel 'msda forward narrow' failed to compile here: \d+:\d+ / });
    }
    assert.deepEqual(msda.compiled, ['probe']);
    const b = { ...c.args, gradOutput: c.gradOutput };
    compare('backward beside a broken forward', await msda.backward(b), wasm.backward(b), !msda.numerics.fusedMultiplyAdd);
    broken = (code) => code.replace(/array<Tap, \d+>/, 'array<Tap, 1024>');
    await assert.rejects(msda.forward(c.args), { message: /^ms-deform-attn: the WebGPU kernel 'msda forward narrow' failed to compile here: .*workgroup storage/ });
    assert.deepEqual(msda.compiled.filter((k) => k.startsWith('forward')), []);
    // the failure is not kept: once the driver compiles it, the next forward runs
    broken = null;
    compare('forward compiled again', { output: await msda.forward(c.args) }, { output: wasm.forward(c.args) }, !msda.numerics.fusedMultiplyAdd);
    assert.equal(msda.compiled.at(-1), 'forward narrow');
  } finally {
    msda.dispose();
    device.destroy();
  }
});

test('a kernel that fails to compile in a synchronous call: the error names it, and the next call compiles it again', async () => {
  const device = await ownDevice();
  const create = device.createShaderModule;
  let breaks = 1;
  device.createShaderModule = function (desc) {
    const broken = desc.label === 'msda forward narrow' && breaks-- > 0;
    return create.call(this, broken ? { ...desc, code: `${desc.code}\nfn broken( {` } : desc);
  };
  const msda = await init({ backend: 'webgpu', device });
  const log = console.error;
  try {
    const c = problem(884, { shapes: [[4, 4]], Q: 6 });
    const logged = new Promise((resolve) => { console.error = resolve; });
    msda.dispatchForward(c.args).buffer.destroy();
    assert.match(await logged, /^ms-deform-attn: the WebGPU kernel 'msda forward narrow' failed to compile here: /);
    assert.deepEqual(msda.compiled, ['probe']);
    const want = wasm.forward(c.args), got = await msda.forward(c.args);
    assert.equal(sameBits(got.data, want.data), want.data.length, firstDiff(got.data, want.data));
    assert.deepEqual(msda.compiled, ['probe', 'forward narrow']);
  } finally {
    console.error = log;
    msda.dispose();
    device.destroy();
  }
});

test('a lost device: the pending call and later ones reject with MSDA_WEBGPU_DEVICE_LOST, nothing hangs', async () => {
  const device = await ownDevice();
  const msda = await init({ backend: 'webgpu', device });
  assert.equal(msda.device, device);
  const c = problem(800, { shapes: [[8, 8], [4, 4]], Q: 200, P: 4, H: 2, C: 8 });
  assert.equal(sameBits((await msda.forward(c.args)).data, wasm.forward(c.args).data), 200 * 16);
  const pending = msda.backward({ ...c.args, gradOutput: c.gradOutput });
  device.destroy();
  const lost = (e) => e.code === 'MSDA_WEBGPU_DEVICE_LOST' && /the WebGPU device was lost \(reason: destroyed/.test(e.message);
  await assert.rejects(pending, lost);
  await assert.rejects(msda.forward(c.args), lost);
  msda.dispose();   // the caller's device: not ours to destroy, and nothing left to free
  await assert.rejects(msda.forward(c.args), /forward on a disposed instance/);
});

test('dispose() while calls wait for a compile or for the GPU: they reject saying so, on a caller\'s device and on the instance\'s own, and leave no buffer (nor does a probe still waiting)', async () => {
  const pendingOnDisposed = /^ms-deform-attn: the call was pending on a disposed instance \(dispose\(\) was called\)$/;
  const c = problem(810, { shapes: [[4, 4], [2, 2]], Q: 10, C: 4, P: 2 });
  const b = { ...c.args, gradOutput: c.gradOutput };
  const device = await ownDevice();
  const live = new Set();
  device.createBuffer = function (desc) {
    const buf = Object.getPrototypeOf(device).createBuffer.call(this, desc);
    live.add(buf);
    buf.destroy = function () { live.delete(buf); return Object.getPrototypeOf(buf).destroy.call(this); };
    return buf;
  };
  try {
    const own = await init({ backend: 'webgpu', device });
    const waiting = [own.forward(c.args), own.backward(b)];   // both wait for their pipelines
    own.dispose();
    for (const call of waiting) await assert.rejects(call, { message: pendingOnDisposed });
    // compiled, so waiting for the GPU (inputs, outputs and staging made)
    const again = await init({ backend: 'webgpu', device });
    await again.forward(c.args);
    const onGpu = [again.forward(c.args), again.forward(c.args, { outputs: 'gpu' })];
    again.dispose();
    for (const call of onGpu) await assert.rejects(call, { message: pendingOnDisposed });
    // made without awaiting (as for the tfjs op), disposed before its probe answers
    const sync = MsdaWebGPU.onDeviceSync(device);
    sync.dispose();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(sync.numerics, null);
    assert.deepEqual([...live].map((buf) => buf.label), []);
  } finally {
    device.destroy();
  }
  // the instance's own device, destroyed by dispose(): the same error, not a lost device's
  const mine = await init({ backend: 'webgpu' });
  const call = mine.forward(c.args);
  mine.dispose();
  await assert.rejects(call, { message: pendingOnDisposed });
});

test('init: no adapter, bad gpu or device, and backend "auto" never picks the GPU', async () => {
  await assert.rejects(init({ backend: 'webgpu', gpu: { requestAdapter: async () => null } }), (e) => {
    assert.equal(e.code, 'MSDA_WEBGPU_UNAVAILABLE');
    assert.match(e.message, /WebGPU is not available: requestAdapter\(\) returned no adapter/);
    return true;
  });
  await assert.rejects(init({ backend: 'webgpu', gpu: { requestAdapter: async () => { throw new Error('blocked'); } } }),
    { code: 'MSDA_WEBGPU_UNAVAILABLE', message: /requestAdapter\(\) failed: blocked/ });
  await assert.rejects(init({ backend: 'webgpu', gpu: 7 }), { name: 'TypeError', message: /init: gpu is number 7, expected an object with requestAdapter/ });
  await assert.rejects(init({ backend: 'webgpu', device: {} }), { name: 'TypeError', message: /init: device is Object, expected a GPUDevice/ });
  await assert.rejects(init({ backend: 'wasm', device: gpu.device }), { name: 'TypeError', message: /device is an option of backend: 'webgpu', not 'wasm'/ });
  const auto = await init({ backend: 'auto' });
  assert.notEqual(auto.backend, 'webgpu');
  auto.dispose();
});

// Dawn without an adapter, in a child Node whose environment says why: the message names what
// failed (the Vulkan loader's own dlopen error; the driver file VK_ICD_FILENAMES names) and no
// advice that was already followed.
async function noAdapterMessage(env) {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', `
    const { init } = await import(${JSON.stringify(new URL('../../bindings/node.js', import.meta.url).href)});
    init({ backend: 'webgpu' }).then(() => console.log('an adapter'), (e) => console.log(e.code, e.message));
  `], { env: { ...process.env, ...env } });
  return stdout.trim();
}

test('no adapter in Node: the message says whether the Vulkan loader failed to load or found no driver', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'msda-vulkan-'));
  try {
    await writeFile(join(dir, 'libvulkan.so.1'), '');   // found first on LD_LIBRARY_PATH, and not a library
    const noLoader = await noAdapterMessage({ LD_LIBRARY_PATH: dir, VK_ICD_FILENAMES: SWIFTSHADER_ICD });
    assert.match(noLoader, /^MSDA_WEBGPU_UNAVAILABLE .*requestAdapter\(\) returned no adapter \(Dawn could not load the Vulkan loader: .*libvulkan\.so\.1: file too short; install it: libvulkan1/);
    assert.doesNotMatch(noLoader, /VK_ICD_FILENAMES/, 'no advice to set what was set');
    const noDriver = await noAdapterMessage({ VK_ICD_FILENAMES: join(dir, 'missing_icd.json') });
    assert.match(noDriver, /^MSDA_WEBGPU_UNAVAILABLE .*the Vulkan loader found no usable driver in VK_ICD_FILENAMES=.*missing_icd\.json/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  // Elsewhere than Linux Dawn runs on Metal or D3D12: nothing about Vulkan.
  assert.doesNotMatch(noAdapterHint({ platform: 'darwin' }), /Vulkan/);
  assert.match(noAdapterHint({ platform: 'linux', env: {}, dlopen: () => { throw new Error('Module did not self-register'); } }),
    /Dawn found no Vulkan driver: install your GPU's Vulkan driver, or point VK_ICD_FILENAMES at/);
});

test('bits counted (printed for the record)', () => {
  for (const [name, { same, all }] of Object.entries(totals)) {
    console.log(`# ${name}: ${same} of ${all} elements have wasm SIMD's bits (${((100 * same) / all).toFixed(3)} %)`);
  }
  assert.ok(totals.output.all > 0 && totals.gradValue.all > 0);
});
