// Trust nothing a pattern says: a block is run alone through ORT on seeded inputs of its shapes and
// through our op, and both are held to crosscheck's bound (bindings/cli/bounds.js) of the float64
// reference on a spread of queries (every batch, head and channel of each).

import { boundOf, referenceWithBounds } from '../cli/bounds.js';
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

/**
 * Runs the block alone through ORT and through msda on seeded inputs; resolves to
 * { agree, worst: { q, i, ort, ours, reference, bound } | null, checked }.
 */
export async function verifyBlock(ort, sessionOptions, graph, block, problem, shapes, msda, seed) {
  const { B, H, C, Q, NL, P } = problem;
  const rand = seeded(seed);
  const value = Float32Array.from({ length: size(shapes.get(block.value)) }, () => rand() * 2 - 1);
  // Locations over [-0.1, 1.1]: inside, on and past the edges.
  const locations = Float32Array.from({ length: size(shapes.get(block.samplingLocations)) }, () => rand() * 1.2 - 0.1);
  const weights = Float32Array.from({ length: size(shapes.get(block.attentionWeights)) }, () => rand());
  const io = [block.value, block.samplingLocations, block.attentionWeights];
  const model = subModel(graph, [...block.nodes], io.map((name) => ({ name, type: 'float32', shape: shapes.get(name) })),
    [{ name: block.output, type: 'float32' }], 'block');
  const session = await ort.InferenceSession.create(encodeModel(model), sessionOptions);
  let theirs;
  try {
    const out = await session.run({
      [block.value]: new ort.Tensor('float32', value, shapes.get(block.value)),
      [block.samplingLocations]: new ort.Tensor('float32', locations, shapes.get(block.samplingLocations)),
      [block.attentionWeights]: new ort.Tensor('float32', weights, shapes.get(block.attentionWeights)),
    });
    theirs = out[block.output].data;
  } finally {
    await session.release();
  }
  const ours = (await msda.forward(forwardArgs(block, problem, value, locations, weights))).data;
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
  let worst = null, agree = true;
  for (let b = 0; b < B; b++) {
    picked.forEach((q, k) => {
      for (let e = 0; e < H * C; e++) {
        const r = (b * picked.length + k) * H * C + e, i = (b * Q + q) * H * C + e;
        const bound = boundOf(ref, r);
        const miss = Math.max(Math.abs(theirs[i] - ref.ref[r]), Math.abs(ours[i] - ref.ref[r]));
        if (!(miss <= bound)) {
          agree = false;
          if (!worst || miss - bound > worst.excess) worst = { b, q, element: e, ort: theirs[i], ours: ours[i], reference: ref.ref[r], bound, excess: miss - bound };
        }
      }
    });
  }
  return { agree, worst, checked: B * picked.length * H * C };
}
