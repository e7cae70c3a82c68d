// The accuracy of float16 models (docs/onnx.md, float16 models): each float16 fixture of
// tests/fixtures/onnx (*-f16.onnx) through ORT alone and through createSession on onnxruntime-node,
// (ORT alone cannot run a plugin node's graph), both against PyTorch's float32 run of the same float16 weights and inputs (expected/ in its .npz):
// the largest difference, in float16 ulps of the largest |output|; and each block's verification,
// how much of its bound ORT's run and ours used (1: at the bound).
//
//   node tests/bench/onnx_half.js

import { readdirSync, readFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import * as ort from 'onnxruntime-node';
import { init } from '../../bindings/index.js';
import { parseNpz } from '../../bindings/cli/npz.js';
import { widenHalf } from '../../bindings/core/half.js';
import { parseNpy } from '../../bindings/npy.js';
import { createSession } from '../../bindings/onnx.js';

const dir = new URL('../fixtures/onnx/', import.meta.url);
const msda = await init();
const ulp = (x) => 2 ** (Math.max(Math.floor(Math.log2(x || 2 ** -14)), -14) - 10);

for (const file of readdirSync(dir).filter((f) => f.endsWith('-f16.onnx')).sort()) {
  const name = file.slice(0, -'.onnx'.length);
  const bytes = readFileSync(new URL(file, dir));
  const members = parseNpz(readFileSync(new URL(`${name}.npz`, dir)), (b) => inflateRawSync(b));
  const read = (key) => parseNpy(members.get(`${key}.npy`).read());
  const session = await createSession(ort, bytes, { executionProviders: ['cpu'], msda });
  const plain = await ort.InferenceSession.create(bytes, { executionProviders: ['cpu'] }).catch(() => null);
  const feeds = Object.fromEntries(session.inputNames.map((n) => { const a = read(n); return [n, new ort.Tensor('float16', a.data, a.shape)]; }));
  const [ours, theirs] = [await session.run(feeds), await plain?.run(feeds)];
  for (const out of session.outputNames) {
    const expected = read(`expected/${out}`).data;
    const top = expected.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
    const miss = (t) => widenHalf(t[out].data, 'float16').reduce((m, x, i) => Math.max(m, Math.abs(x - expected[i])), 0);
    const [o, t] = [miss(ours), theirs ? miss(theirs) : null];
    const alone = t === null ? 'cannot run it' : `${t.toPrecision(3)} (${(t / ulp(top)).toFixed(2)} ulp)`;
    console.log(`${name} ${out}: max |PyTorch's| ${top.toPrecision(4)} (float16 ulp ${ulp(top)}); from PyTorch's: ORT alone ${alone}, createSession ${o.toPrecision(3)} (${(o / ulp(top)).toFixed(2)} ulp)`);
  }
  for (const b of session.report.blocks) {
    const u = b.verification?.used;
    const used = u ? `; bound used: ORT's run ${u.ort.toFixed(3)}, ours ${u.ours.toFixed(3)}` : ' (a plugin node: no ORT run to verify against)';
    console.log(`  block ${b.id} (${b.levels?.map((l) => l.join('×')).join(', ')}): ${b.replaced ? 'replaced' : `left to ORT: ${b.why}`}${used}`);
  }
  await session.release();
  await plain?.release();
}
msda.dispose();
