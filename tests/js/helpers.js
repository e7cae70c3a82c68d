// Shared by the JS suites: a seeded RNG, random problems that include the awkward shapes, and a
// tolerance check whose failure message names the seed, the tensor and the worst element.

import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { init, initNative } from '../../bindings/index.js';
import { serializeNpy } from '../../bindings/npy.js';
import { OPTIONS } from '../../bindings/core/options.js';

// Every value of every option (core/options.js), the last option's changing fastest.
export const OPTION_COMBOS = OPTIONS.reduce((combos, o) => combos.flatMap((c) => o.values.map((v) => ({ ...c, [o.name]: v }))), [{}]);

/** mulberry32: small, fast and the same everywhere. */
export function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  next.int = (lo, hi) => lo + Math.floor(next() * (hi - lo + 1));
  next.pick = (xs) => xs[Math.floor(next() * xs.length)];
  next.uniform = (lo, hi) => lo + (hi - lo) * next();
  return next;
}

const count = (shape) => shape.reduce((a, b) => a * b, 1);

export function shapesFor(dims, options) {
  const { B, Q, H, C, P, spatialShapes } = dims;
  const NL = spatialShapes.length;
  const L = spatialShapes.reduce((s, [h, w]) => s + h * w, 0);
  return {
    L, NL,
    value: options.valueLayout === 'BLNC' ? [B, L, H, C] : [B, H, L, C],
    samplingLocations: options.samplingLocationsLayout === 'BQHLP2' ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P],
    attentionWeights: [B, Q, H, NL, P],
    output: [B, Q, H * C],
  };
}

/**
 * A random forward+backward argument set for `options`. Channels cycle through the awkward
 * C_h values; levels include 1x1 and one-pixel-thin ones; some samples sit far outside [0, 1]
 * and a few are non-finite.
 */
export function randomCase(seed, options) {
  const r = rng(seed);
  const levels = r.int(1, 3);
  const spatialShapes = [];
  for (let l = 0; l < levels; l++) {
    const kind = r.int(0, 4);
    if (kind === 0) spatialShapes.push([1, 1]);
    else if (kind === 1) spatialShapes.push([1, r.int(2, 7)]);
    else if (kind === 2) spatialShapes.push([r.int(2, 7), 1]);
    else spatialShapes.push([r.int(2, 6), r.int(2, 6)]);
  }
  const dims = {
    B: r.int(1, 2), Q: r.int(1, 4), H: r.int(1, 3), C: r.pick([1, 3, 5, 33, 2, 4, 8]), P: r.int(1, 3), spatialShapes,
  };
  const s = shapesFor(dims, options);
  const fill = (shape, f) => Float32Array.from({ length: count(shape) }, f);
  const location = () => {
    const u = r();
    if (u < 0.7) return r.uniform(-0.2, 1.2);
    if (u < 0.9) return r.uniform(-40, 40);
    if (u < 0.97) return r.pick([1e30, -1e30, 1e6, -3.5]);
    return r.pick([NaN, Infinity, -Infinity]);
  };
  return {
    seed,
    dims,
    args: {
      value: { data: fill(s.value, () => r.uniform(-1, 1)), shape: s.value },
      spatialShapes,
      samplingLocations: { data: fill(s.samplingLocations, location), shape: s.samplingLocations },
      attentionWeights: { data: fill(s.attentionWeights, () => r.uniform(-1, 1)), shape: s.attentionWeights },
      ...options,
    },
    gradOutput: { data: fill(s.output, () => r.uniform(-1, 1)), shape: s.output },
  };
}

/**
 * Throws unless |got - want| <= atol + rtol*|want| + scaleTol*max|want| for every element;
 * the message names the context, the element and both values.
 */
export function assertClose(got, want, context, { atol = 1e-5, rtol = 1e-4, scaleTol = 1e-6 } = {}) {
  if (got.length !== want.length) throw new Error(`${context}: length ${got.length}, expected ${want.length}`);
  let maxAbs = 0;
  for (const w of want) if (Number.isFinite(w)) maxAbs = Math.max(maxAbs, Math.abs(w));
  let worst = -1, worstExcess = 0;
  for (let i = 0; i < want.length; i++) {
    const g = got[i], w = want[i];
    if (Number.isNaN(w) && Number.isNaN(g)) continue;
    if (g === w) continue;
    const excess = Math.abs(g - w) - (atol + rtol * Math.abs(w) + scaleTol * maxAbs);
    if (!(excess <= 0) && (worst < 0 || !(excess <= worstExcess))) { worst = i; worstExcess = excess; }
  }
  if (worst >= 0) {
    throw new Error(`${context}: element ${worst} is ${got[worst]}, expected ${want[worst]} ` +
      `(|diff| ${Math.abs(got[worst] - want[worst])}, tolerance ${atol} + ${rtol}*|ref| + ${scaleTol}*${maxAbs})`);
  }
}

/** The three backends under test, by name. */
export async function backends() {
  return {
    'wasm-simd': await init({ simd: true }),
    'wasm-scalar': await init({ simd: false }),
    native: await initNative(),
  };
}

/**
 * The thread-protocol children's problem (threads-protocol-child.js, threads-stopped-worker-child.js):
 * 1,500 queries on 3 levels, so forward and backward split into one part per thread at 3 threads.
 */
export function poolCase(seed) {
  const r = rng(seed);
  const B = 1, Q = 1500, H = 3, C = 8, P = 4, spatialShapes = [[30, 40], [15, 20], [7, 9]];
  const NL = spatialShapes.length, L = spatialShapes.reduce((s, [h, w]) => s + h * w, 0);
  const fill = (n, lo, hi) => Float32Array.from({ length: n }, () => r.uniform(lo, hi));
  return {
    args: {
      value: { data: fill(B * L * H * C, -1, 1), shape: [B, L, H, C] },
      spatialShapes,
      samplingLocations: { data: fill(B * Q * H * NL * P * 2, -0.1, 1.1), shape: [B, Q, H, NL, P, 2] },
      attentionWeights: { data: fill(B * Q * H * NL * P, 0, 1), shape: [B, Q, H, NL, P] },
    },
    gradOutput: { data: fill(B * Q * H * C, -1, 1), shape: [B, Q, H * C] },
  };
}

/**
 * Runs the child script `url` (`calls` as its argument) with MSDA_TEST_THREAD_DELAYS = spec;
 * resolves with its last line parsed as JSON, { hung: true } when it does not finish within
 * timeoutMs, or { crashed } when it exits otherwise.
 */
export function runDelayedChild(url, spec, calls, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [url.pathname, String(calls)],
      { env: { ...process.env, MSDA_TEST_THREAD_DELAYS: spec }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve({ hung: true });
      else if (code !== 0) resolve({ crashed: `exit ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}` });
      else resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}

/** A tiny .npy case in `dir` (one 2 x 3 level, 2 queries, grad_output too), for the CLI tests. */
export function writeTinyCase(dir) {
  mkdirSync(dir, { recursive: true });
  const w = (name, t) => writeFileSync(`${dir}/${name}.npy`, serializeNpy(t));
  w('value', { data: Float32Array.from({ length: 12 }, (_, i) => i / 7), shape: [1, 6, 1, 2] });
  w('spatial_shapes', { data: BigInt64Array.from([2n, 3n]), shape: [1, 2] });
  w('level_start_index', { data: BigInt64Array.from([0n]), shape: [1] });
  w('sampling_locations', { data: Float32Array.from([0.3, 0.6, 0.9, 0.1]), shape: [1, 2, 1, 1, 1, 2] });
  w('attention_weights', { data: Float32Array.from([0.5, 2]), shape: [1, 2, 1, 1, 1] });
  w('grad_output', { data: Float32Array.from([1, -1, 0.5, 2]), shape: [1, 2, 2] });
}

/**
 * crosscheck --expect's output (text or --json) without what the JS CLI's report adds to the one
 * both CLIs print (bindings/cli/samples.js: sample lines, the only-through-P count, the hint),
 * to compare with the native CLI's.
 */
export function withoutJsAdditions(out) {
  if (out.startsWith('{')) {
    const doc = JSON.parse(out);
    delete doc.hint;
    for (const o of Object.values(doc.outputs ?? {})) {
      delete o.onlyThroughP;
      for (const w of o.worst) delete w.sample;
    }
    return `${JSON.stringify(doc, null, 2)}\n`;
  }
  return out.split('\n').filter((l) => !/^ {6}its sample: |^ {4}\d+ differing elements are within their bound only through P |^ {2}hint: /.test(l)).join('\n');
}
