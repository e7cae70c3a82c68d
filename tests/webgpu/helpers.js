// Shared by the WebGPU suites: the adapter these tests run on, the instances the Node suites
// compare, bit counts against wasm SIMD, their problems (random, crowded, non-finite on purpose,
// identity) and GPU buffers up and down.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { assertClose, rng, shapesFor } from '../js/helpers.js';
import { init } from '../../bindings/node.js';

// Dawn on SwiftShader (the Vulkan driver Debian's Chromium ships) unless the caller points the
// Vulkan loader elsewhere, e.g. at a real GPU's driver. Read when Dawn starts (the first init).
export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
if (process.env.VK_ICD_FILENAMES === undefined && fs.existsSync(SWIFTSHADER_ICD)) {
  process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
}

/** Elements with the same bits (NaN only equals NaN's own bits: canonical on both sides). */
export function sameBits(got, want) {
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  let same = 0;
  for (let i = 0; i < b.length; i++) if (a[i] === b[i]) same++;
  return same;
}

/** The first element whose bits differ, as text, or '' when none. */
export function firstDiff(got, want) {
  const a = new Uint32Array(got.buffer, got.byteOffset, got.length);
  const b = new Uint32Array(want.buffer, want.byteOffset, want.length);
  for (let i = 0; i < b.length; i++) {
    if (a[i] !== b[i]) return `element ${i}: ${got[i]} (0x${a[i].toString(16)}), expected ${want[i]} (0x${b[i].toString(16)})`;
  }
  return '';
}

const count = (shape) => shape.reduce((a, b) => a * b, 1);

/**
 * A problem whose samples hit each non-finite rule: +Inf and -Inf weights at pixel centres (a
 * corner weight of exactly 0) and between them, NaN weights, NaN / +-Inf / +-1e30 coordinates,
 * NaN and Inf in value and in grad_output, coordinates exactly on the edges.
 */
export function nonFiniteCase(seed, options, C = 5) {
  const r = rng(seed);
  const spatialShapes = [[4, 5], [2, 3], [1, 1]];
  const dims = { B: 1, Q: 8, H: 2, C, P: 4, spatialShapes };
  const s = shapesFor(dims, options);
  const fill = (shape, f) => Float32Array.from({ length: count(shape) }, f);
  const value = fill(s.value, () => r.uniform(-1, 1));
  value[3] = NaN;
  value[17] = Infinity;
  value[40] = -Infinity;
  const weights = fill(s.attentionWeights, () => r.uniform(-1, 1));
  const locs = fill(s.samplingLocations, () => r.uniform(-0.2, 1.2));
  const grad = fill(s.output, () => r.uniform(-1, 1));
  grad[7] = Infinity;
  grad[23] = NaN;
  const { NL, samplingLocations: ls } = s;
  const { H, P, Q } = dims;
  const locIndex = (q, h, l, p, xy) => (options.samplingLocationsLayout === 'BQHLP2'
    ? ((((q * H + h) * NL + l) * P + p) * 2 + xy)
    : (xy * Q + q) * H * NL * P + (h * NL + l) * P + p);
  const weightIndex = (q, h, l, p) => ((q * H + h) * NL + l) * P + p;
  const specials = [NaN, Infinity, -Infinity, 1e30, -1e30, 0, 1, -0];
  let k = 0;
  for (let q = 0; q < Q; q++) {
    for (let h = 0; h < H; h++) {
      for (let l = 0; l < NL; l++) {
        const [hl, wl] = spatialShapes[l];
        for (let p = 0; p < P; p++) {
          const u = r();
          if (u < 0.25) {   // a pixel centre (or its align_corners grid point), often with an infinite weight
            const i = r.int(0, hl - 1), j = r.int(0, wl - 1);
            locs[locIndex(q, h, l, p, 0)] = options.alignCorners ? (wl > 1 ? j / (wl - 1) : 0) : (j + 0.5) / wl;
            locs[locIndex(q, h, l, p, 1)] = options.alignCorners ? (hl > 1 ? i / (hl - 1) : 0) : (i + 0.5) / hl;
            if (r() < 0.6) weights[weightIndex(q, h, l, p)] = r.pick([Infinity, -Infinity]);
          } else if (u < 0.45) {
            locs[locIndex(q, h, l, p, r.int(0, 1))] = specials[k++ % specials.length];
          } else if (u < 0.55) {
            weights[weightIndex(q, h, l, p)] = r.pick([NaN, Infinity, -Infinity]);
          }
        }
      }
    }
  }
  return {
    args: {
      value: { data: value, shape: s.value },
      spatialShapes,
      samplingLocations: { data: locs, shape: ls },
      attentionWeights: { data: weights, shape: s.attentionWeights },
      ...options,
    },
    gradOutput: { data: grad, shape: s.output },
  };
}

/** The instances a Node suite compares: WebGPU (Dawn for Node) and wasm SIMD. */
export async function backends() {
  return { gpu: await init({ backend: 'webgpu' }), wasm: await init({ backend: 'wasm', simd: true }) };
}

/** Equal bits per tensor name, { same, all }, of every compare() in this test file. */
export const totals = {};

// Counts equal bits per tensor (into `totals`, this file's) and checks every tensor bit for bit (one writer, the
// CPU's order; grad_value's the CPU walk's, the order pass's ranks) where the device neither fuses
// nor flushes inputs these problems have, and within SEMANTICS.md's tolerance with its NaNs where
// the CPU has them.
export function compare(label, got, want, exact) {
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

/** A problem of `spec` (shapes and sizes, the range of the locations, options) from a seed. */
export function problem(seed, { shapes, B = 1, H = 2, C = 3, Q = 8, P = 2, lo = -0.1, hi = 1.1, ...options }) {
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

// Queries crowding a few pixels (3+ terms a pixel, so the summation order shows in the bits):
// kind 'encoder' one query per pixel, shuffled, sampling around its own pixel on every level;
// 'decoder' queries around a few centres; 'spread' many queries all over a small image; 'edges'
// every other query's points at 16383.75, 16384, 16384 units of 2^-16 in x: their place (the mean
// of the truncated units, rounded down) just left of the edge 0.25 of a 4-column grid. Some
// points outside [0, 1] and some weights 0 (they do not place their query).
export function crowdCase(seed, { kind, shapes, B = 2, H = 2, C = 3, P = 4, Q = 0, zeros = 0.15, ...options }) {
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

// A GPU buffer holding `data` at `offset` bytes.
export function upload(device, data, offset = 0, usage = 0x80 | 0x4 | 0x8) {
  const buffer = device.createBuffer({ size: offset + data.byteLength, usage });
  device.queue.writeBuffer(buffer, offset, data);
  return buffer;
}

export async function download(device, buffer, bytes) {
  const staging = device.createBuffer({ size: bytes, usage: 0x1 | 0x8 });
  const enc = device.createCommandEncoder();
  enc.copyBufferToBuffer(buffer, 0, staging, 0, bytes);
  device.queue.submit([enc.finish()]);
  await staging.mapAsync(0x1);
  const out = new Float32Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return out;
}

// A GPU buffer holding the half-precision `bits` at `offset` bytes (a multiple of 2), as small as
// WebGPU allows (its last 4-byte word whole), every other half of it 0x7fff (a NaN in both dtypes:
// a half read from the wrong place shows).
export function uploadHalf(device, bits, offset = 0) {
  const size = Math.ceil((offset + 2 * bits.length) / 4) * 4;
  const all = new Uint16Array(size / 2).fill(0x7fff);
  all.set(bits, offset / 2);
  const buffer = device.createBuffer({ size, usage: 0x80 | 0x4 | 0x8 });
  device.queue.writeBuffer(buffer, 0, all);
  return buffer;
}

// Every element of `got` has the bits of `want` (typed arrays of the same kind).
export function assertSameBits(got, want, label) {
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
export function identityCase(rows, cols) {
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

// A device of its own from the entry's Dawn instance (one per process: a second one has crashed
// Dawn on SwiftShader).
export async function ownDevice() {
  const { nodeGpu } = await import('../../bindings/webgpu/node-gpu.js');
  const adapter = await (await nodeGpu((m) => new Error(m))).requestAdapter();
  return adapter.requestDevice();
}
