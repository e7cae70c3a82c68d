// What every bundled app computes, on the page and in its Web Worker (and in Node, for the bits
// to compare): forward and backward of a seeded problem on 2 threads where the runtime allows,
// with init() and again with initWorker() (the same calls in a worker of the package's own).
import { init, initWorker } from 'ms-deform-attn';

function makeCase() {
  let s = 12345;
  const r = () => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s / 4294967296; };
  const B = 1, Q = 2000, H = 3, C = 8, P = 4, spatialShapes = [[30, 40], [15, 20], [7, 9]], NL = 3;
  const L = spatialShapes.reduce((a, [h, w]) => a + h * w, 0);
  const fill = (n, f) => Float32Array.from({ length: n }, f);
  return {
    args: {
      value: { data: fill(B * L * H * C, () => r() * 2 - 1), shape: [B, L, H, C] },
      spatialShapes,
      samplingLocations: { data: fill(B * Q * H * NL * P * 2, () => r() * 1.2 - 0.1), shape: [B, Q, H, NL, P, 2] },
      attentionWeights: { data: fill(B * Q * H * NL * P, () => r()), shape: [B, Q, H, NL, P] },
    },
    gradOutput: { data: fill(B * Q * H * C, () => r() * 2 - 1), shape: [B, Q, H * C] },
  };
}

async function sha256(tensors) {
  const parts = tensors.map((t) => new Uint8Array(t.buffer, t.byteOffset, t.byteLength));
  const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { all.set(p, at); at += p.length; }
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', all));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

export async function compute(options = {}) {
  const msda = await init({ threads: 2, ...options });
  const c = makeCase();
  const output = msda.forward(c.args).data;
  const g = msda.backward({ ...c.args, gradOutput: c.gradOutput });
  const pool = msda._backend.pool;
  const partsRun = pool ? pool.partsRun() : 0;
  // Parts are claimed: the calling thread may claim both before the worker wakes, so a worker's
  // part is waited for over a few more calls.
  for (let i = 0; pool && pool.workerParts() === 0 && i < 200; i++) msda.forward(c.args);
  const result = {
    isolated: globalThis.crossOriginIsolated === true,
    backend: msda.backend,
    threads: msda.threads,
    partsRun,
    workerParts: pool ? pool.workerParts() : 0,
    digest: await sha256([output, g.gradValue.data, g.gradSamplingLocations.data, g.gradAttentionWeights.data]),
  };
  msda.dispose();
  const w = await initWorker({ threads: 2, ...options });
  const wOutput = (await w.forward(c.args)).data;
  const wg = await w.backward({ ...c.args, gradOutput: c.gradOutput }, { transfer: true });
  result.initWorker = {
    threads: w.threads,
    digest: await sha256([wOutput, wg.gradValue.data, wg.gradSamplingLocations.data, wg.gradAttentionWeights.data]),
    transferred: c.args.value.data.byteLength === 0,
  };
  await w.terminate();
  return result;
}
