// The inputs every benchmark here uses: the configs of docs/CONTRACT.md (value BLNC, locations
// BQHLP2, zeros padding, align_corners false), from one seeded generator, so that tests/bench/bench.js,
// tests/bench/tfjs_bench.js and tests/bench/copies_bench.js time the same data.
export const DETR_LEVELS = [[100, 167], [50, 84], [25, 42], [13, 21]];
// encoder-shuffled is the encoder with its queries in a seeded random order; decoder-2stage a
// two-stage model's decoder: 900 queries at the level-0 pixels of its top-k proposals, in score
// (random) order, and decoder-2stage-sorted the same queries in pixel order. `pixelOrder` names
// the config each is timed against (the same problem in pixel order).
export const CONFIGS = {
  small: { B: 2, levels: [[32, 32], [16, 16], [8, 8], [4, 4]], Q: 'L', near: false },
  decoder: { B: 1, levels: DETR_LEVELS, Q: 300, near: true },
  encoder: { B: 1, levels: DETR_LEVELS, Q: 'L', near: true },
  'encoder-shuffled': { B: 1, levels: DETR_LEVELS, Q: 'L', near: true, shuffled: true, pixelOrder: 'encoder' },
  'decoder-2stage': { B: 1, levels: DETR_LEVELS, Q: 900, near: true, proposals: 'score', pixelOrder: 'decoder-2stage-sorted' },
  'decoder-2stage-sorted': { B: 1, levels: DETR_LEVELS, Q: 900, near: true, proposals: 'sorted' },
};
export const H = 8, C = 32, P = 4;

// mulberry32: small, seedable, the same inputs every run.
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Random inputs. With `near`, every query has a reference point (the encoder: its own pixel
// centre; the decoder: a random point) and its samples sit a few pixels (±4) around it, as in a
// trained model; otherwise locations are uniform over the image.
export function makeCase(name) {
  const cfg = CONFIGS[name];
  const NL = cfg.levels.length;
  const starts = [];
  let L = 0;
  for (const [h, w] of cfg.levels) { starts.push(L); L += h * w; }
  const Q = cfg.Q === 'L' ? L : cfg.Q;
  const B = cfg.B;
  // the shuffled encoder draws the encoder's inputs, then its permutation; both two-stage
  // decoders draw the same proposals
  const seedName = cfg.shuffled ? 'encoder' : cfg.proposals ? 'decoder-2stage' : name;
  const rand = rng(0x5eed + seedName.length);
  const uniform = (lo, hi) => lo + (hi - lo) * rand();
  const value = new Float32Array(B * L * H * C).map(() => uniform(-1, 1));
  const gradOutput = new Float32Array(B * Q * H * C).map(() => uniform(-1, 1));
  const attentionWeights = new Float32Array(B * Q * H * NL * P).map(() => uniform(0, 1) / (NL * P));
  const samplingLocations = new Float32Array(B * Q * H * NL * P * 2);
  let proposals = null;   // two-stage: each query's level-0 pixel
  if (cfg.proposals) {
    const [, w0] = cfg.levels[0];
    proposals = Array.from({ length: Q }, () => Math.floor(rand() * cfg.levels[0][0] * w0));
    if (cfg.proposals === 'sorted') proposals.sort((a, b) => a - b);
  }
  for (let b = 0; b < B; b++) {
    for (let q = 0; q < Q; q++) {
      let rx = uniform(0, 1), ry = uniform(0, 1);
      if (proposals) {
        const [h0, w0] = cfg.levels[0];
        rx = ((proposals[q] % w0) + 0.5) / w0;
        ry = (Math.floor(proposals[q] / w0) + 0.5) / h0;
      } else if (cfg.near && Q === L) {
        let l = 0;
        while (l + 1 < NL && q >= starts[l + 1]) l++;
        const [h, w] = cfg.levels[l], pix = q - starts[l];
        rx = ((pix % w) + 0.5) / w;
        ry = (Math.floor(pix / w) + 0.5) / h;
      }
      for (let i = 0; i < H * NL * P; i++) {
        const [h, w] = cfg.levels[Math.floor(i / P) % NL];
        const at = ((b * Q + q) * H * NL * P + i) * 2;
        samplingLocations[at] = cfg.near ? rx + uniform(-4, 4) / w : uniform(0, 1);
        samplingLocations[at + 1] = cfg.near ? ry + uniform(-4, 4) / h : uniform(0, 1);
      }
    }
  }
  if (cfg.shuffled) {   // query i is the encoder's query perm[i] (Fisher-Yates)
    const perm = Array.from({ length: Q }, (_, i) => i);
    for (let i = Q - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [perm[i], perm[j]] = [perm[j], perm[i]];
    }
    const permute = (x, row) => {
      const out = new Float32Array(x.length);
      for (let b = 0; b < B; b++)
        for (let i = 0; i < Q; i++) out.set(x.subarray((b * Q + perm[i]) * row, (b * Q + perm[i] + 1) * row), (b * Q + i) * row);
      x.set(out);
    };
    permute(samplingLocations, H * NL * P * 2);
    permute(attentionWeights, H * NL * P);
    permute(gradOutput, H * C);
  }
  const spatialShapes = cfg.levels;
  const args = {
    value: { data: value, shape: [B, L, H, C] },
    spatialShapes,
    samplingLocations: { data: samplingLocations, shape: [B, Q, H, NL, P, 2] },
    attentionWeights: { data: attentionWeights, shape: [B, Q, H, NL, P] },
  };
  const dims = { B, L, Q, H, C, NL, P };
  const problem = { batch: B, numQueries: Q, numHeads: H, channels: C, numPoints: P, spatialShapes };
  const ioBytes = 4 * (2 * value.length + 2 * samplingLocations.length + 2 * attentionWeights.length + gradOutput.length);
  return { name, args, backwardArgs: { ...args, gradOutput: { data: gradOutput, shape: [B, Q, H * C] } }, dims, problem,
    samples: B * Q * H * NL * P, ioBytes };
}
