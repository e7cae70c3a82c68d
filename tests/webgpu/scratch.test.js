// What a WebGPU instance keeps between calls (docs/webgpu.md "What an instance keeps"): its
// scratch, uniforms, readback buffers and, for results read back, the results' buffers, grown
// when a larger problem needs more; no buffer made per call after the first, every buffer
// destroyed by dispose(); calls in flight together on the kept buffers still get their own bits.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { backends, firstDiff, problem, sameBits } from './helpers.js';
import { init } from '../../bindings/node.js';

let gpu, wasm;
before(async () => ({ gpu, wasm } = await backends()));
after(() => { gpu?.dispose(); wasm?.dispose(); });

function same(label, got, want) {
  for (const name of Object.keys(want)) {
    const w = want[name].data ?? want.data, g = got[name]?.data ?? got.data;
    assert.equal(sameBits(g, w), w.length, `${label} ${name}: ${firstDiff(g, w)}`);
  }
}

test('100 calls make no buffer after the first of each problem, results on the GPU only theirs, and dispose() destroys every buffer the instance made', async () => {
  const d = gpu.device;
  const live = new Set();
  let made = 0;
  d.createBuffer = function (desc) {
    const buf = Object.getPrototypeOf(d).createBuffer.call(this, desc);
    made++;
    live.add(buf);
    buf.destroy = function () { live.delete(buf); return Object.getPrototypeOf(buf).destroy.call(this); };
    return buf;
  };
  try {
    const msda = await init({ backend: 'webgpu', device: d });
    // a small problem and a larger one (the kept buffers grow once), with every kind of input
    const small = problem(880, { shapes: [[6, 5], [3, 3]], B: 1, H: 2, Q: 12, P: 2, C: 4 });
    const large = problem(881, { shapes: [[9, 7], [4, 4]], B: 2, H: 3, Q: 40, P: 4, C: 5, paddingMode: 'border' });
    const cases = [small, large].map((c) => {
      const b = { ...c.args, gradOutput: c.gradOutput };
      return { f: c.args, b, wantF: wasm.forward(c.args), wantB: wasm.backward(b) };
    });
    for (const c of cases) {
      same('first forward', await msda.forward(c.f), c.wantF);
      same('first backward', await msda.backward(c.b), c.wantB);
    }
    const first = made;
    for (let i = 0; i < 100; i++) {
      const c = cases[i % 2];
      if (i % 10 === 9) {
        // two calls in flight at once on the same kept buffers
        const [f, g] = await Promise.all([msda.backward(cases[0].b), msda.backward(cases[1].b)]);
        same(`call ${i}, in flight with another`, f, cases[0].wantB);
        same(`call ${i}, in flight with another`, g, cases[1].wantB);
        continue;
      }
      same(`forward ${i}`, await msda.forward(c.f), c.wantF);
      same(`backward ${i}`, await msda.backward(c.b), c.wantB);
    }
    assert.equal(made - first, 0, 'buffers made after the first calls');
    // results handed out on the GPU are the caller's: exactly those are made
    const before = made;
    const r = await msda.backward(cases[1].b, { outputs: 'gpu' });
    assert.equal(made - before, 3);
    for (const t of Object.values(r)) t.buffer.destroy();
    msda.dispose();
    assert.deepEqual([...live].map((b) => b.label), []);
  } finally {
    delete d.createBuffer;
  }
});
