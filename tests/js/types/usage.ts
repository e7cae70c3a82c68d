// Compiled by `tsc --strict --noEmit` in tests/js/package.test.js: the whole public API as a user
// writes it, through the package's own name (its `exports` and `types`). Lines under an expect-error
// directive must stay errors, so the typings cannot silently loosen.
import { init, initNative, initWorker, MsdaWorker, WorkerPrepared, simdSupported, DEFAULTS, Msda, Prepared, Tensor, Gradients, MsdaError } from 'ms-deform-attn';
import { initNative as initNative2, nativeAddonPath, NATIVE_UNAVAILABLE } from 'ms-deform-attn/native';
import { referenceForward, referenceBackward } from 'ms-deform-attn/reference';
import { createSession, ONNX_UNAVAILABLE, type ChainedSession, type BlockReport } from 'ms-deform-attn/onnx';

export async function usage(): Promise<number> {
  const msda: Msda = await init({ simd: 'auto' });
  const scalar = await init({ simd: false, backend: 'wasm-scalar' });
  const native = await initNative();
  const native2 = await initNative2({ addonPath: '/x/msda.node' });
  const either: Msda = await init({ backend: 'auto', addonPath: nativeAddonPath() });
  const unavailable: 'MSDA_NATIVE_UNAVAILABLE' = NATIVE_UNAVAILABLE;
  const fromBytes = await init({ wasmBinary: new Uint8Array(8) });
  const supported: boolean = simdSupported();
  const layout: 'BLNC' | 'BNLC' = DEFAULTS.valueLayout;

  const value = { data: new Float32Array(16), shape: [1, 16, 1, 1] };
  const samplingLocations = { data: new Float32Array(2), dims: [1, 1, 1, 1, 1, 2] };
  const attentionWeights = { data: new Float32Array(1), shape: [1, 1, 1, 1, 1] };
  const out: Tensor = msda.forward({
    value, spatialShapes: [[4, 4]], levelStartIndex: [0], samplingLocations, attentionWeights,
    valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'zeros',
  });
  const grads: Gradients = scalar.backward({
    value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights,
    gradOutput: { data: out.data, shape: out.shape },
  });
  const gv: Float32Array = grads.gradValue.data;
  // half-precision tensors: the bits with their dtype
  const halfOut: Tensor = msda.forward({
    value: { data: new Uint16Array(16), shape: [1, 16, 1, 1], dtype: 'float16' }, spatialShapes: [[4, 4]],
    samplingLocations: { data: new Uint16Array(2), shape: [1, 1, 1, 1, 1, 2], dtype: 'bfloat16' }, attentionWeights,
  });
  // @ts-expect-error a Uint16Array needs its dtype
  msda.forward({ value: { data: new Uint16Array(16), shape: [1, 16, 1, 1] }, spatialShapes: [[4, 4]], samplingLocations, attentionWeights });

  const p: Prepared = native.prepare({
    batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[4, 4]], paddingMode: 'border',
  }, { mode: 'both' });
  p.value.set(value.data);
  const o: Float32Array = p.forward().data;
  const g: Float32Array = p.backward().gradSamplingLocations.data;
  const shape: number[] | undefined = p.shapes.value;
  p.dispose();

  try {
    msda.forward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights });
  } catch (e) {
    const code: string = (e as MsdaError).code;
    void code;
  }
  const heap: number = msda.wasm ? msda.wasm.heapInUse() : 0;
  const limit: number | null = msda.limits.callBytes ?? msda.limits.tensorBytes;
  const ref: Float64Array = referenceForward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights }).data;
  const refGrad: Float64Array = referenceBackward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights,
    gradOutput: out }).gradValue.data;

  // @ts-expect-error: not a layout
  msda.forward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights, valueLayout: 'NCHW' });
  // @ts-expect-error: gradOutput is required by backward
  msda.backward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights });
  // @ts-expect-error: data must be a Float32Array
  msda.forward({ value: { data: new Float64Array(16), shape: [1, 16, 1, 1] }, spatialShapes: [[4, 4]], samplingLocations, attentionWeights });
  // @ts-expect-error: simd takes 'auto' or a boolean
  await init({ simd: 'yes' });
  // @ts-expect-error: views are read-only properties
  p.value = new Float32Array(1);

  const served = await init({ wasmPaths: '/assets/msda/' });
  const mapped = await init({ wasmPaths: { 'msda-simd.wasm': new URL('https://cdn.example/x.wasm'), 'threads-worker.js': '/w.js' } });
  // @ts-expect-error: not one of the package's files
  await init({ wasmPaths: { 'msda.wasm': '/x.wasm' } });
  served.dispose();
  mapped[Symbol.dispose]();
  p[Symbol.dispose]();
  const gone: boolean = served.disposed;

  const w: MsdaWorker = await initWorker({ threads: 2, wasmPaths: '/msda/' });
  const controller = new AbortController();
  const wout: Float32Array<ArrayBuffer> = (await w.forward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights },
    { signal: controller.signal, transfer: true })).data;
  const wgrad: Float32Array<ArrayBuffer> = (await w.backward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights,
    gradOutput: out })).gradValue.data;
  const wp: WorkerPrepared = await w.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[4, 4]] });
  const wpOut: Float32Array<ArrayBuffer> = (await wp.forward({ attentionWeights: new Float32Array(1) }, { transfer: true })).data;
  const wpGrad: Float32Array<ArrayBuffer> = (await wp.backward({ gradOutput: { data: new Float32Array(1), shape: [1, 1, 1] } })).gradValue.data;
  // @ts-expect-error: not an input of forward
  await wp.forward({ gradOutput: new Float32Array(1) });
  await wp.dispose();
  // @ts-expect-error: transfer is a boolean
  await w.forward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights }, { transfer: 'yes' });
  // @ts-expect-error: the WebGPU instance runs in no worker (its calls already return Promises): init()
  await initWorker({ backend: 'webgpu' });
  // @ts-expect-error: a GPUDevice is init()'s option, not initWorker()'s
  await initWorker({ device: {} });
  // @ts-expect-error: worker calls return Promises
  const notNow: Tensor = w.forward({ value, spatialShapes: [[4, 4]], samplingLocations, attentionWeights });
  await w.terminate();
  await w[Symbol.asyncDispose]();
  const ended: boolean = w.terminated;

  return out.data.length + gv.length + o.length + g.length + (shape?.length ?? 0) + heap + (limit ?? 0) + ref.length + refGrad.length
    + (supported ? 1 : 0) + (gone ? 1 : 0) + (ended ? 1 : 0) + wout.length + wgrad.length + notNow.data.length + layout.length + (native2.simd ? 1 : 0) + (fromBytes.simd ? 1 : 0);
}

// ms-deform-attn/onnx: the caller's ORT module (shaped like onnxruntime-web's) and the report.
export async function onnxUsage(ort: { InferenceSession: { create(m: Uint8Array, o?: object): Promise<unknown> }; Tensor: new (t: string, d: Float32Array, dims: readonly number[]) => unknown }): Promise<number> {
  const session: ChainedSession = await createSession(ort, new Uint8Array(8), { executionProviders: ['wasm'], msda: await init() });
  const out = await session.run({ src: new ort.Tensor('float32', new Float32Array(4), [1, 4]) });
  const first: BlockReport | undefined = session.report.blocks[0];
  const dtype: 'float32' | 'float16' | undefined = first?.dtype;
  const boundOrt: number | undefined = first?.verification?.worst?.boundOrt;
  const slices = first && 'slices' in first.nodes ? first.nodes.slices.length : 0; // mmcv's form: a Slice per level
  const code: 'MSDA_ONNX_UNAVAILABLE' = ONNX_UNAVAILABLE;
  // @ts-expect-error: the model is bytes, not a path
  await createSession(ort, 'model.onnx');
  await session.release();
  const levelsFrom: 'constants' | 'run time' | undefined = first?.levelsFrom;
  // @ts-expect-error: levels are read from constants or at run time, nothing else
  const wrong: 'probe' | undefined = first?.levelsFrom;
  return Object.keys(out).length + (first?.replaced ? 1 : 0) + slices + code.length + session.inputNames.length + (levelsFrom?.length ?? 0) + (wrong ? 1 : 0)
    + (dtype?.length ?? 0) + (boundOrt ?? 0);
}
