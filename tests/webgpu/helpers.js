// Shared by the WebGPU suites: the adapter these tests run on, bit counts against wasm SIMD,
// and problems whose non-finite samples hit the rules of SEMANTICS.md on purpose.

import fs from 'node:fs';
import { rng, shapesFor } from '../js/helpers.js';

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
