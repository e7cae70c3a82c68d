// Run by contraction.test.js in a child process (Dawn prints its shader dumps on stdout): every
// program's pipelines, each variant, compiled with Dawn's dump_shaders, each SPIR-V after a line
// `### <pipeline key>`.
import { create } from 'webgpu';
import { KERNELS } from '../../bindings/webgpu/gpu.js';

const gpu = create(['enable-dawn-features=dump_shaders,disable_symbol_renaming']);
const device = await (await gpu.requestAdapter()).requestDevice();
// and every input bound as float16 halves, or as bfloat16 ones (kernels/half.js halfFlags)
const halves = (kind) => Object.fromEntries(['value', 'locs', 'weights', 'gout'].map((name) => [`${name}${kind}`, true]));
const variants = [{}, { vec4: true }, { narrow: true }, { narrow: true, vec4: true }, { narrow: true, vec4: true, ...halves('F16') }, { narrow: true, ...halves('Bf16') }];
const seen = new Set();
for (const prog of Object.values(KERNELS)) {
  for (const variant of variants) {
    const key = prog.key(variant);
    if (seen.has(key)) continue;
    seen.add(key);
    process.stdout.write(`### ${key}\n`);
    const module = device.createShaderModule({ code: prog.code(variant), label: key });
    device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    await device.queue.onSubmittedWorkDone();
    await new Promise((r) => setTimeout(r, 10));
  }
}
process.stdout.write('### end\n');
device.destroy();
