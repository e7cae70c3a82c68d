// Where the sampling locations and attention weights come from, as in Deformable DETR's
// MSDeformAttn (and the package's layer, ms-deform-attn/tfjs): from the query vector q,
//   offsets   = q · W_offᵀ + b_off          (N_h·N_l·N_p·2, in pixels of each level)
//   locations = reference + offsets / (W_l, H_l)
//   weights   = softmax over each head's N_l·N_p of (q · W_attnᵀ + b_attn)
// The page's query has d_model = N_h·C_h = 27 numbers; its projections are fixed here, as if
// trained: b_off puts each head's points on a ring around the reference point, W_off and W_attn
// are small deterministic pseudo-random matrices. Plain arithmetic: runs in Node too.
import { LEVELS, NUM_HEADS, NUM_POINTS, CHANNELS } from './scene.js';

const NL = LEVELS.length;
export const D_MODEL = NUM_HEADS * CHANNELS;
export const NUM_OFFSETS = NUM_HEADS * NL * NUM_POINTS * 2;
export const NUM_WEIGHTS = NUM_HEADS * NL * NUM_POINTS;
export const REFERENCE = [0.3, 0.34];

// Park–Miller: exact in doubles (products < 2^47), the same numbers everywhere.
function uniform(n, seed, scale) {
  const out = new Float32Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 48271) % 2147483647;
    out[i] = scale * (2 * (s / 2147483647) - 1);
  }
  return out;
}

function ringOffsets() {
  const b = new Float32Array(NUM_OFFSETS);
  for (let h = 0; h < NUM_HEADS; h++) {
    for (let l = 0; l < NL; l++) {
      const [H, W] = LEVELS[l];
      for (let p = 0; p < NUM_POINTS; p++) {
        const i = (h * NL + l) * NUM_POINTS + p;
        const ang = (2 * Math.PI * (p + 0.5)) / NUM_POINTS + 0.7 * h + 0.35 * l;
        const rad = 0.085 + 0.03 * l;
        b[2 * i] = rad * Math.cos(ang) * W;
        b[2 * i + 1] = rad * Math.sin(ang) * H;
      }
    }
  }
  return b;
}

// PyTorch's state_dict layout: Linear weights are (out, in).
export const PROJECTIONS = {
  'sampling_offsets.weight': { data: uniform(NUM_OFFSETS * D_MODEL, 7, 0.25), shape: [NUM_OFFSETS, D_MODEL] },
  'sampling_offsets.bias': { data: ringOffsets(), shape: [NUM_OFFSETS] },
  'attention_weights.weight': { data: uniform(NUM_WEIGHTS * D_MODEL, 11, 0.3), shape: [NUM_WEIGHTS, D_MODEL] },
  'attention_weights.bias': { data: new Float32Array(NUM_WEIGHTS), shape: [NUM_WEIGHTS] },
};

// The page's query, and the direction its slider moves it along: q(t) = q0 + t·dq.
export const QUERY = uniform(D_MODEL, 3, 1);
export const QUERY_DIRECTION = uniform(D_MODEL, 5, 1);
export function queryAt(t) {
  const q = new Float32Array(D_MODEL);
  for (let k = 0; k < D_MODEL; k++) q[k] = QUERY[k] + t * QUERY_DIRECTION[k];
  return q;
}

function linear(q, { data: w }, { data: b }) {
  const out = new Float64Array(b.length);
  for (let o = 0; o < b.length; o++) {
    let s = b[o];
    for (let k = 0; k < D_MODEL; k++) s += q[k] * w[o * D_MODEL + k];
    out[o] = s;
  }
  return out;
}

// Offsets (pixels), locations (normalised, clamped to the picture), logits and softmax weights.
export function project(q, reference = REFERENCE) {
  const P = PROJECTIONS;
  const offsets = linear(q, P['sampling_offsets.weight'], P['sampling_offsets.bias']);
  const logits = linear(q, P['attention_weights.weight'], P['attention_weights.bias']);
  const locations = new Float32Array(NUM_OFFSETS);
  for (let h = 0; h < NUM_HEADS; h++) {
    for (let l = 0; l < NL; l++) {
      const [H, W] = LEVELS[l];
      for (let p = 0; p < NUM_POINTS; p++) {
        const i = (h * NL + l) * NUM_POINTS + p;
        locations[2 * i] = Math.min(1, Math.max(0, reference[0] + offsets[2 * i] / W));
        locations[2 * i + 1] = Math.min(1, Math.max(0, reference[1] + offsets[2 * i + 1] / H));
      }
    }
  }
  const weights = new Float32Array(NUM_WEIGHTS);
  const per = NL * NUM_POINTS;
  for (let h = 0; h < NUM_HEADS; h++) {
    let max = -Infinity, sum = 0;
    for (let k = 0; k < per; k++) max = Math.max(max, logits[h * per + k]);
    for (let k = 0; k < per; k++) sum += Math.exp(logits[h * per + k] - max);
    for (let k = 0; k < per; k++) weights[h * per + k] = Math.exp(logits[h * per + k] - max) / sum;
  }
  return { offsets, locations, logits, weights };
}
