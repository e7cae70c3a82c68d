// A plain float64 reference of SEMANTICS.md, for tests, the benchmark and the web page.
// Slow on purpose: one loop per formula, no tricks. Takes the same arguments as the API's
// forward/backward, checked by the API's own validation (core/args.js: the same errors and messages,
// named referenceForward/referenceBackward), with float32 or float64 tensors; returns Float64Array
// tensors.

import { pad, pixel } from './core/geometry.js';
import { problemFromTensors } from './core/problem.js';

const DATA_KINDS = ['Float32Array', 'Float64Array'];

// The validated problem, its tensors' data as read once by the validation, and element offsets.
function validate(fn, args, withGradOutput) {
  const { problem, inputs } = problemFromTensors(fn, args, { backward: withGradOutput, dataKinds: DATA_KINDS });
  const { batch: B, numQueries: Q, numHeads: H, channels: C, numLevels: NL, numPoints: P, valueLength: L } = problem;
  const o = problem;
  const shapes = problem.spatialShapes, starts = problem.levelStartIndex;
  const blnc = o.valueLayout === 'BLNC';
  const bq = o.samplingLocationsLayout === 'BQHLP2';
  // Element offsets, written out from the layout names.
  const valueAt = blnc
    ? (b, pix, h, c) => ((b * L + pix) * H + h) * C + c
    : (b, pix, h, c) => ((b * H + h) * L + pix) * C + c;
  const locAt = bq
    ? (b, q, h, l, p, xy) => (((((b * Q + q) * H + h) * NL + l) * P + p) * 2 + xy)
    : (b, q, h, l, p, xy) => (((((b * 2 + xy) * Q + q) * H + h) * NL + l) * P + p);
  const weightAt = (b, q, h, l, p) => ((((b * Q + q) * H + h) * NL + l) * P + p);
  const d = { o, shapes, starts, L, B, H, C, Q, P, NL, valueAt, locAt, weightAt,
    vs: problem.shapes.value, ls: problem.shapes.samplingLocations };
  return { d, inputs };
}

// One axis of SEMANTICS' forward: null when the sample contributes nothing along it.
function axis(coord, size, alignCorners, paddingMode) {
  const { pos, scale } = pixel(coord, size, alignCorners);
  return pad(pos, size, paddingMode, scale);
}

// Visits every (b, q, h, l, p) sample with its corner weights and the value reader.
function eachSample(d, data, visit) {
  const { o, shapes, starts, B, Q, H, NL, P, C, valueAt, locAt, weightAt } = d;
  const V = (b, h, l, i, j, c) => {
    const [Hl, Wl] = shapes[l];
    if (i < 0 || i >= Hl || j < 0 || j >= Wl) return 0;
    return data.value[valueAt(b, starts[l] + i * Wl + j, h, c)];
  };
  for (let b = 0; b < B; b++) for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) {
    for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
      const [Hl, Wl] = shapes[l];
      const x = data.loc[locAt(b, q, h, l, p, 0)], y = data.loc[locAt(b, q, h, l, p, 1)];
      const a = data.weights[weightAt(b, q, h, l, p)];
      const ax = axis(x, Wl, o.alignCorners, o.paddingMode);
      const ay = ax && axis(y, Hl, o.alignCorners, o.paddingMode);
      if (!ax || !ay) continue;
      const fx = ax.frac, fy = ay.frac, x0 = ax.i0, y0 = ay.i0;
      const corners = [
        [y0, x0, (1 - fy) * (1 - fx)], [y0, x0 + 1, (1 - fy) * fx],
        [y0 + 1, x0, fy * (1 - fx)], [y0 + 1, x0 + 1, fy * fx],
      ];
      const S = new Float64Array(C), dSdfx = new Float64Array(C), dSdfy = new Float64Array(C);
      for (let c = 0; c < C; c++) {
        const v00 = V(b, h, l, y0, x0, c), v01 = V(b, h, l, y0, x0 + 1, c);
        const v10 = V(b, h, l, y0 + 1, x0, c), v11 = V(b, h, l, y0 + 1, x0 + 1, c);
        S[c] = corners[0][2] * v00 + corners[1][2] * v01 + corners[2][2] * v10 + corners[3][2] * v11;
        dSdfx[c] = (1 - fy) * (v01 - v00) + fy * (v11 - v10);
        dSdfy[c] = (1 - fx) * (v10 - v00) + fx * (v11 - v01);
      }
      visit({ b, q, h, l, p, a, S, dSdfx, dSdfy, corners, ax, ay });
    }
  }
}

const toF64 = (data) => Float64Array.from(data);

/** output (B, N_q, N_h*C_h) in float64. */
export function referenceForward(args) {
  const { d, inputs } = validate('referenceForward', args, false);
  const { B, Q, H, C } = d;
  const out = new Float64Array(B * Q * H * C);
  const data = { value: toF64(inputs.value), loc: toF64(inputs.samplingLocations), weights: toF64(inputs.attentionWeights) };
  eachSample(d, data, ({ b, q, h, a, S }) => {
    const base = (b * Q + q) * H * C + h * C;
    for (let c = 0; c < C; c++) out[base + c] += a * S[c];
  });
  return { data: out, shape: [B, Q, H * C] };
}

/** gradValue, gradSamplingLocations, gradAttentionWeights in float64. */
export function referenceBackward(args) {
  const { d, inputs } = validate('referenceBackward', args, true);
  const { B, Q, H, C, shapes, starts, valueAt, locAt, weightAt } = d;
  const data = { value: toF64(inputs.value), loc: toF64(inputs.samplingLocations), weights: toF64(inputs.attentionWeights) };
  const G = toF64(inputs.gradOutput);
  const gv = new Float64Array(data.value.length);
  const gl = new Float64Array(data.loc.length);
  const gw = new Float64Array(data.weights.length);
  eachSample(d, data, ({ b, q, h, l, p, a, S, dSdfx, dSdfy, corners, ax, ay }) => {
    const base = (b * Q + q) * H * C + h * C;
    const [Hl, Wl] = shapes[l];
    let gS = 0, gx = 0, gy = 0;
    for (let c = 0; c < C; c++) {
      gS += G[base + c] * S[c];
      gx += G[base + c] * dSdfx[c];
      gy += G[base + c] * dSdfy[c];
    }
    gw[weightAt(b, q, h, l, p)] = gS;
    gl[locAt(b, q, h, l, p, 0)] = a * gx * ax.gradScale;
    gl[locAt(b, q, h, l, p, 1)] = a * gy * ay.gradScale;
    for (const [i, j, w] of corners) {
      if (i < 0 || i >= Hl || j < 0 || j >= Wl) continue;
      const pix = starts[l] + i * Wl + j;
      for (let c = 0; c < C; c++) gv[valueAt(b, pix, h, c)] += a * w * G[base + c];
    }
  });
  return {
    gradValue: { data: gv, shape: d.vs.slice() },
    gradSamplingLocations: { data: gl, shape: d.ls.slice() },
    gradAttentionWeights: { data: gw, shape: [B, Q, H, d.NL, d.P] },
  };
}
