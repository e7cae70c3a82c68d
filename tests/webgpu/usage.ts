// The WebGPU backend's typings as a user writes against them (tsc --strict, tests/webgpu/types.test.js).
import { init, type MsdaWebGPU, type GPUTensor, type GPUBufferLike } from 'ms-deform-attn';

export async function use(buffer: GPUBufferLike, device: object): Promise<number> {
  const gpu: MsdaWebGPU = await init({ backend: 'webgpu' });
  const shared: MsdaWebGPU = await init({ backend: 'webgpu', device });
  const value = { buffer, shape: [1, 16, 1, 4], byteOffset: 256 };
  const samplingLocations = { data: new Float32Array(2), shape: [1, 1, 1, 1, 1, 2] };
  const attentionWeights = { data: new Float32Array(1), shape: [1, 1, 1, 1, 1] };
  const args = { value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights };
  const cpu: Float32Array = (await gpu.forward(args)).data;
  const out: GPUTensor = await gpu.forward(args, { outputs: 'gpu' });
  const grads = await gpu.backward({ ...args, gradOutput: { data: new Float32Array(4), shape: [1, 1, 4] } }, { outputs: 'gpu' });
  grads.gradValue.buffer.destroy();
  const now: GPUTensor = shared.dispatchForward(args);
  // @ts-expect-error: outputs is 'cpu' or 'gpu'
  await gpu.forward(args, { outputs: 'host' });
  // @ts-expect-error: forward returns a Promise
  const notNow: GPUTensor = gpu.forward(args, { outputs: 'gpu' });
  const fused: boolean | undefined = gpu.numerics?.fusedMultiplyAdd;
  const compiled: readonly string[] = gpu.compiled;
  // @ts-expect-error: dispose returns nothing
  const nothing: Promise<void> = gpu.dispose();
  out.buffer.destroy();
  gpu.dispose();
  return cpu.length + now.shape.length + (fused ? 1 : 0) + notNow.shape.length + compiled.length;
}
