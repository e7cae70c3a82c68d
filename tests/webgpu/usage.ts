// The WebGPU backend's typings as a user writes against them (tsc --strict, tests/webgpu/types.test.js).
import { init, type MsdaWebGPU, type GPUTensor, type GPUHalfTensor, type GPUBufferLike } from 'ms-deform-attn';

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
  // half precision: an fp16 model's GPU tensor in, float16 results out
  const half = { ...args, value: { buffer, shape: [1, 16, 1, 4], dtype: 'float16' as const } };
  const h: GPUHalfTensor = await gpu.forward(half, { outputs: 'gpu', dtype: 'float16' });
  const bits: Uint16Array = (await gpu.forward(half, { dtype: 'bfloat16' })).data;
  const kind: 'float16' | 'bfloat16' = (await gpu.backward({ ...half, gradOutput: { buffer, shape: [1, 1, 4], dtype: 'bfloat16' } }, { outputs: 'gpu', dtype: 'float16' })).gradValue.dtype;
  const later: GPUHalfTensor = shared.dispatchBackward({ ...half, gradOutput: { data: new Float32Array(4), shape: [1, 1, 4] } }, { dtype: 'float16' }).gradSamplingLocations;
  // @ts-expect-error: a float32 result is no half tensor
  const notHalf: GPUHalfTensor = await gpu.forward(half, { outputs: 'gpu' });
  // @ts-expect-error: dtype is 'float32', 'float16' or 'bfloat16'
  await gpu.forward(half, { dtype: 'float64' });
  // @ts-expect-error: dispatch* results are on the GPU
  shared.dispatchForward(args, { outputs: 'cpu' });
  // @ts-expect-error: outputs is 'cpu' or 'gpu'
  await gpu.forward(args, { outputs: 'host' });
  // @ts-expect-error: forward returns a Promise
  const notNow: GPUTensor = gpu.forward(args, { outputs: 'gpu' });
  const fused: boolean | undefined = gpu.numerics?.fusedMultiplyAdd;
  const rounded: boolean | undefined = gpu.numerics?.productsRounded;
  const compiled: readonly string[] = gpu.compiled;
  // @ts-expect-error: dispose returns nothing
  const nothing: Promise<void> = gpu.dispose();
  out.buffer.destroy();
  gpu.dispose();
  return cpu.length + now.shape.length + (fused ? 1 : 0) + notNow.shape.length + compiled.length + h.shape.length + bits.length + kind.length + later.shape.length + notHalf.shape.length;
}
