// The WebGPU backend against one wasm SIMD thread on the same machine (Node + Dawn; VK_ICD_FILENAMES
// picks the Vulkan driver, SwiftShader by default here): the copying calls a user makes, CPU
// tensors in and out (`await webgpu.forward(args)` against `wasm.forward(args)`), interleaved, the
// ratio of each round, and the bits compared. For docs/webgpu.md's sentence on SwiftShader's speed.
//
//   VK_ICD_FILENAMES=/usr/lib/chromium/vk_swiftshader_icd.json node tests/bench/webgpu_vs_wasm.js [--cases decoder,decoder/8] [--rounds N]
import { performance } from 'node:perf_hooks';
import { init } from '../../bindings/node.js';
import { makeCase } from './cases.js';
import { defineCase } from './gpu_model.js';

const argv = process.argv.slice(2);
const opt = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const cases = opt('--cases', 'decoder,decoder/8').split(',');
const rounds = Number(opt('--rounds', '5'));

const wasm = await init({ backend: 'wasm', simd: true });
const webgpu = await init({ backend: 'webgpu' });
console.log(`adapter: ${JSON.stringify(webgpu.adapterInfo ?? {})}; wasm SIMD on 1 thread`);

const same = (a, b) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));

for (const name of cases) {
  defineCase(name);
  const c = makeCase(name);
  const timed = async (f) => { const t0 = performance.now(); const r = await f(); return [performance.now() - t0, r]; };
  // First calls (shader compiles, the heap's growth) apart.
  await webgpu.forward(c.args);
  await webgpu.backward(c.backwardArgs);
  wasm.forward(c.args);
  wasm.backward(c.backwardArgs);
  const rows = { forward: [], backward: [] };
  for (let r = 0; r < rounds; r++) {
    for (const call of ['forward', 'backward']) {
      const args = call === 'forward' ? c.args : c.backwardArgs;
      const [cpu, a] = await timed(() => wasm[call](args));
      const [gpu, b] = await timed(() => webgpu[call](args));
      if (r === 0) {
        const bits = call === 'forward' ? same(a.data, b.data) : Object.keys(a).every((k) => same(a[k].data, b[k].data));
        if (!bits && !webgpu.numerics?.fusedMultiplyAdd) console.log(`${name} ${call}: the bits differ from wasm's`);
      }
      rows[call].push({ cpu, gpu });
    }
  }
  for (const call of ['forward', 'backward']) {
    const ratios = rows[call].map((x) => x.gpu / x.cpu);
    const sorted = [...ratios].sort((x, y) => x - y);
    console.log(`${name} ${call}: WebGPU / wasm 1 thread ${sorted[0].toFixed(1)}–${sorted.at(-1).toFixed(1)}× (median ${sorted[(sorted.length - 1) >> 1].toFixed(1)}×) `
      + `over ${rounds} interleaved rounds; ms: ${rows[call].map((x) => `${x.gpu.toFixed(0)}/${x.cpu.toFixed(1)}`).join(' ')}`);
  }
}
webgpu.dispose();
wasm.dispose();
