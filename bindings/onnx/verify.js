// Trust nothing a pattern says: a block is run alone through ORT on seeded inputs of its shapes and
// through our op, and both are held to crosscheck's bound (bindings/cli/bounds.js) of the float64
// reference on a spread of queries (every batch, head and channel of each). A float16 block is held
// to crosscheck's float16 bound (ours) and to that plus what ORT's float16 graph adds (halfBlockBound).

import { boundOf, referenceWithBounds, UNIT_ROUNDOFF } from '../cli/bounds.js';
import { narrowToHalf, widenHalf } from '../core/half.js';
import { subModel, encodeModel } from './model.js';

const SAMPLED_QUERIES = 24;

function seeded(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const size = (shape) => shape.reduce((a, b) => a * b, 1);

/**
 * Reads a block's problem from the probed shapes (shapes: tensor name -> dims), or says why it
 * cannot be our op: { problem: { B, Len, H, C, Q, NL, P, levels } } or { why }.
 */
export function readProblem(block, shapes) {
  const v = shapes.get(block.value), s = shapes.get(block.samplingLocations), w = shapes.get(block.attentionWeights);
  const o = shapes.get(block.output), xs = block.levelInputs.map((t) => shapes.get(t));
  if (!v || !s || !w || !o || xs.some((x) => !x)) return { why: 'the probe run did not give every shape of the block' };
  if (v.length !== 4) return { why: `value ${block.value} is ${v.length}-D, not (B, Len, H, C)` };
  const [B, Len, H, C] = v;
  if (s.length !== 6 || s[0] !== B || s[2] !== H || s[5] !== 2) return { why: `sampling locations ${block.samplingLocations} [${s}] are not (B, Q, H, L, P, 2) of value [${v}]` };
  const [, Q, , NL, P] = s;
  if (size(w) !== B * Q * H * NL * P || w[0] !== B || w[1] !== Q || w[2] !== H) return { why: `attention weights ${block.attentionWeights} [${w}] are not (B, Q, H, L, P) of locations [${s}]` };
  if (size(o) !== B * Q * H * C) return { why: `output ${block.output} [${o}] does not hold B·Q·H·C = ${B * Q * H * C} elements` };
  if (NL !== xs.length) return { why: `${NL} levels in the locations and ${xs.length} GridSample nodes` };
  const levels = [];
  for (const x of xs) {
    if (x.length !== 4 || x[0] !== B * H || x[1] !== C) return { why: `a level's value [${x}] is not (B·H, C, H_l, W_l)` };
    levels.push([x[2], x[3]]);
  }
  if (levels.reduce((a, [h, w2]) => a + h * w2, 0) !== Len) return { why: `the levels [${levels.map((l) => l.join('×'))}] do not add up to the value's ${Len} pixels` };
  return { problem: { B, Len, H, C, Q, NL, P, levels } };
}

/**
 * What ORT's float16 graph of a block may add to crosscheck's float16 bound (docs/onnx.md, float16
 * models): the grid 2 * x - 1 rounded to float16 (each level's pixel position then errs by up to
 * W_l / 2 * (u |g| + tiny), and bilinear sampling moves by at most 2 V per pixel, V the largest
 * |value| on the level for that batch, head and channel), and the NL * P terms summed in float16
 * (gamma_{n+1} M; M is the reference's sum of |contributions|, crosscheck's).
 * Returns bound(k, b, h, c, M) for the picked query k.
 */
function halfBlockBound(problem, value, subLoc, subW, queries, alignCorners) {
  const { B, Len, H, C, NL, P, levels } = problem;
  const u = UNIT_ROUNDOFF.float16, tiny = 2 ** -25, n = NL * P;
  const gamma = ((n + 1) * u) / (1 - (n + 1) * u);
  // V: (B, NL, H, C) largest |value| per level.
  const V = new Float64Array(B * NL * H * C);
  for (let b = 0, pix = 0; b < B; b++, pix = 0) {
    levels.forEach(([hl, wl], l) => {
      for (let end = pix + hl * wl; pix < end; pix++) {
        for (let e = 0; e < H * C; e++) {
          const i = (b * NL + l) * H * C + e;
          V[i] = Math.max(V[i], Math.abs(value[(b * Len + pix) * H * C + e]));
        }
      }
    });
  }
  // Per (b, k, h, l): sum over points of |w| * (pixels moved in x and in y).
  const A = new Float64Array(B * queries * H * NL);
  for (let i = 0; i < A.length; i++) {
    const l = i % NL, [hl, wl] = levels[l];
    const scaleX = (alignCorners ? wl - 1 : wl) / 2, scaleY = (alignCorners ? hl - 1 : hl) / 2;
    for (let p = 0; p < P; p++) {
      const j = i * P + p, gx = 2 * subLoc[2 * j] - 1, gy = 2 * subLoc[2 * j + 1] - 1;
      A[i] += Math.abs(subW[j]) * 2 * (scaleX * (u * Math.abs(gx) + tiny) + scaleY * (u * Math.abs(gy) + tiny));
    }
  }
  return (k, b, h, c, M) => {
    let moved = 0;
    for (let l = 0; l < NL; l++) moved += A[((b * queries + k) * H + h) * NL + l] * V[((b * NL + l) * H + h) * C + c];
    return gamma * M + (1 + gamma) * moved;
  };
}

/** The arguments of msda.forward for a block's problem and float32 data. */
export function forwardArgs(block, problem, value, locations, weights) {
  const { B, Len, H, C, Q, NL, P, levels } = problem;
  return {
    value: { data: value, shape: [B, Len, H, C] },
    spatialShapes: levels,
    samplingLocations: { data: locations, shape: [B, Q, H, NL, P, 2] },
    attentionWeights: { data: weights, shape: [B, Q, H, NL, P] },
    valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2',
    alignCorners: block.alignCorners, paddingMode: block.paddingMode,
  };
}

/** Float32 values of ORT's float16 data (Uint16Array bits, or Float16Array where ORT gives one). */
export const halfValues = (data) => (data instanceof Uint16Array ? widenHalf(data, 'float16') : Float32Array.from(data));

/** Our op on a float16 block: half inputs (the bits), the float32 result rounded once to float16 bits. */
export async function forwardHalf(msda, args, gpu) {
  if (gpu) return msda.forward(args, { outputs: 'gpu', dtype: 'float16' });
  if (msda.backend === 'webgpu') return (await msda.forward(args, { dtype: 'float16' })).data;
  return narrowToHalf((await msda.forward(args)).data, 'float16');
}

/**
 * Runs the block alone through ORT and through msda on seeded inputs (of dtype 'float32' or
 * 'float16'); resolves to { agree, worst: { q, i, ort, ours, reference, bound } | null, checked,
 * used: { ort, ours } } (used: the largest miss over its bound, of each; 1 is the bound).
 */
export async function verifyBlock(ort, sessionOptions, graph, block, problem, shapes, msda, seed, dtype = 'float32') {
  const { B, H, C, Q, NL, P } = problem;
  const half = dtype === 'float16';
  const rand = seeded(seed);
  const make = (name, f) => {
    const x = Float32Array.from({ length: size(shapes.get(name)) }, f);
    const bits = half ? narrowToHalf(x, 'float16') : null;
    return { values: half ? widenHalf(bits, 'float16') : x, data: half ? bits : x };
  };
  const v = make(block.value, () => rand() * 2 - 1);
  // Locations over [-0.1, 1.1]: inside, on and past the edges.
  const l = make(block.samplingLocations, () => rand() * 1.2 - 0.1);
  const w = make(block.attentionWeights, () => rand());
  const [value, locations, weights] = [v.values, l.values, w.values];
  const io = [block.value, block.samplingLocations, block.attentionWeights];
  const model = subModel(graph, [...block.nodes], io.map((name) => ({ name, type: dtype, shape: shapes.get(name) })),
    [{ name: block.output, type: dtype }], 'block');
  const session = await ort.InferenceSession.create(encodeModel(model), sessionOptions);
  let theirs;
  try {
    const out = await session.run({
      [block.value]: new ort.Tensor(dtype, v.data, shapes.get(block.value)),
      [block.samplingLocations]: new ort.Tensor(dtype, l.data, shapes.get(block.samplingLocations)),
      [block.attentionWeights]: new ort.Tensor(dtype, w.data, shapes.get(block.attentionWeights)),
    });
    theirs = half ? halfValues(out[block.output].data) : out[block.output].data;
  } finally {
    await session.release();
  }
  const ours = half
    ? widenHalf(await forwardHalf(msda, halfArgs(forwardArgs(block, problem, v.data, l.data, w.data)), false), 'float16')
    : (await msda.forward(forwardArgs(block, problem, value, locations, weights))).data;
  // The reference on a spread of queries (first and last among them).
  const picked = [...new Set(Array.from({ length: Math.min(Q, SAMPLED_QUERIES) }, (_, k) => Math.round(k * (Q - 1) / Math.max(1, Math.min(Q, SAMPLED_QUERIES) - 1))))];
  const per = H * NL * P;
  const subLoc = new Float32Array(B * picked.length * per * 2), subW = new Float32Array(B * picked.length * per);
  for (let b = 0; b < B; b++) {
    picked.forEach((q, k) => {
      subLoc.set(locations.subarray((b * Q + q) * per * 2, (b * Q + q + 1) * per * 2), (b * picked.length + k) * per * 2);
      subW.set(weights.subarray((b * Q + q) * per, (b * Q + q + 1) * per), (b * picked.length + k) * per);
    });
  }
  const ref = referenceWithBounds(forwardArgs(block, { ...problem, Q: picked.length }, value, subLoc, subW), { backward: false }).output;
  const extra = half ? halfBlockBound(problem, value, subLoc, subW, picked.length, block.alignCorners) : null;
  let worst = null, agree = true;
  const used = { ort: 0, ours: 0 };
  for (let b = 0; b < B; b++) {
    picked.forEach((q, k) => {
      for (let e = 0; e < H * C; e++) {
        const r = (b * picked.length + k) * H * C + e, i = (b * Q + q) * H * C + e;
        const bound = boundOf(ref, r, { dtype });
        const boundOrt = half ? bound + extra(k, b, Math.floor(e / C), e % C, ref.M[r]) : bound;
        const missOrt = Math.abs(theirs[i] - ref.ref[r]), missOurs = Math.abs(ours[i] - ref.ref[r]);
        used.ort = Math.max(used.ort, missOrt / boundOrt);
        used.ours = Math.max(used.ours, missOurs / bound);
        const excess = Math.max(missOrt - boundOrt, missOurs - bound);
        if (!(excess <= 0)) {
          agree = false;
          if (!worst || excess > worst.excess) worst = { b, q, element: e, ort: theirs[i], ours: ours[i], reference: ref.ref[r], bound, ...(half ? { boundOrt } : {}), excess };
        }
      }
    });
  }
  return { agree, worst, checked: B * picked.length * H * C, used };
}

/** forwardArgs' tensors marked float16 (their data: the bits, or ORT's GPU buffers). */
export function halfArgs(args) {
  for (const k of ['value', 'samplingLocations', 'attentionWeights']) args[k] = { ...args[k], dtype: 'float16' };
  return args;
}
