// Types for the `ms-deform-attn` package (bindings/browser.js and bindings/node.js). What is computed: SEMANTICS.md.

/**
 * A C-contiguous float32 tensor. `dims` is accepted in place of `shape` on input. Results of
 * forward/backward are arrays of their own (`Float32Array<ArrayBuffer>`: Blob and
 * crypto.subtle take them); a Prepared problem's are views of the backend's memory, which is a
 * SharedArrayBuffer when threads run.
 */
export interface Tensor<Buffer extends ArrayBufferLike = ArrayBuffer> {
  data: Float32Array<Buffer>;
  shape: number[];
}
/**
 * A tensor argument. Half precision is accepted too and widened exactly to float32 (the same bits
 * on every backend): a Uint16Array of the bits with dtype 'float16' or 'bfloat16' (and at run time
 * Float16Array data, where the runtime has it, which these typings do not name).
 */
export type TensorInput =
  | { data: Float32Array; shape: readonly number[]; dtype?: 'float32' | '<f4' }
  | { data: Float32Array; dims: readonly number[]; dtype?: 'float32' | '<f4' }
  | { data: Uint16Array; shape: readonly number[]; dtype: 'float16' | 'bfloat16' | '<f2' };

/** Integer lists: plain arrays, any integer typed array (BigInt64Array too), or a { data } tensor. */
export type IntegerList = readonly (number | bigint)[] | Int32Array | Uint32Array | BigInt64Array | BigUint64Array | Float64Array;

/** [H, W] per level, or the (N_l, 2) tensor a .npy reader gives. */
export type SpatialShapes = readonly (readonly [number, number] | readonly number[] | IntegerList)[] | { data: IntegerList; shape?: readonly number[] };

export type ValueLayout = 'BLNC' | 'BNLC';
export type SamplingLocationsLayout = 'BQHLP2' | 'B2QHLP';
export type PaddingMode = 'zeros' | 'border';

/** Options mirroring the reference API; the defaults are in DEFAULTS. */
export interface Options {
  /** 'BLNC' (default): value is (B, L, N_h, C_h); 'BNLC': (B, N_h, L, C_h). */
  valueLayout?: ValueLayout;
  /** 'BQHLP2' (default): (B, N_q, N_h, N_l, N_p, 2); 'B2QHLP': (B, 2, N_q, N_h, N_l, N_p). x then y. */
  samplingLocationsLayout?: SamplingLocationsLayout;
  /** Default false: u = x·W − 0.5; true: u = x·(W − 1). */
  alignCorners?: boolean;
  /** 'zeros' (default): corners outside read 0; 'border': coordinates clamp to the edge. */
  paddingMode?: PaddingMode;
  /** Threads this call uses (default: init's `threads`, msda.threads); the same bits for any count. */
  threads?: number;
}

export interface ForwardArgs extends Options {
  value: TensorInput;
  /** [H, W] for each level. */
  spatialShapes: SpatialShapes;
  /** Prefix sums of H·W; derived when omitted, checked when given. */
  levelStartIndex?: IntegerList | { data: IntegerList; shape?: readonly number[] };
  samplingLocations: TensorInput;
  /** (B, N_q, N_h, N_l, N_p) */
  attentionWeights: TensorInput;
}

export interface BackwardArgs extends ForwardArgs {
  /** (B, N_q, N_h·C_h), the gradient of the loss with respect to forward's output. */
  gradOutput: TensorInput;
}

export interface Gradients<Buffer extends ArrayBufferLike = ArrayBuffer> {
  gradValue: Tensor<Buffer>;
  gradSamplingLocations: Tensor<Buffer>;
  gradAttentionWeights: Tensor<Buffer>;
}

/** The sizes of a problem, for prepare(). */
export interface ProblemOptions extends Options {
  batch: number;
  numQueries: number;
  numHeads: number;
  /** C_h, channels per head. */
  channels: number;
  numPoints: number;
  spatialShapes: SpatialShapes;
  levelStartIndex?: IntegerList | { data: IntegerList; shape?: readonly number[] };
}

export type TensorName = 'value' | 'samplingLocations' | 'attentionWeights' | 'gradOutput' | 'output' | 'gradValue'
  | 'gradSamplingLocations' | 'gradAttentionWeights';

export interface PrepareOptions {
  /** Which tensors to allocate: 'forward', 'backward' or 'both' (default). */
  mode?: 'forward' | 'backward' | 'both';
}

/** The validated problem a Prepared was made for. */
export interface Problem extends Required<Options> {
  batch: number;
  numQueries: number;
  numHeads: number;
  channels: number;
  numLevels: number;
  numPoints: number;
  valueLength: number;
  spatialShapes: [number, number][];
  levelStartIndex: number[];
  shapes: Record<TensorName, number[]>;
}

/**
 * A problem with buffers that live in the backend (the wasm heap) across calls. Write inputs
 * into the views, call forward()/backward(), read outputs from the views. Read the views from
 * the object each time: they are re-created after the wasm memory grows.
 */
export class Prepared {
  readonly problem: Problem;
  readonly mode: 'forward' | 'backward' | 'both';
  readonly backend: BackendName;
  /** The shape of each allocated tensor. */
  readonly shapes: Partial<Record<TensorName, number[]>>;
  readonly value: Float32Array;
  readonly samplingLocations: Float32Array;
  readonly attentionWeights: Float32Array;
  readonly gradOutput: Float32Array;
  readonly output: Float32Array;
  readonly gradValue: Float32Array;
  readonly gradSamplingLocations: Float32Array;
  readonly gradAttentionWeights: Float32Array;
  readonly disposed: boolean;
  /** { data, shape } over one tensor's view. */
  tensor(name: TensorName): Tensor<ArrayBufferLike>;
  /** Runs forward on the current inputs; returns output (a view, valid until memory grows). */
  forward(): Tensor<ArrayBufferLike>;
  /** Runs backward on the current inputs and gradOutput; returns the gradients (views). */
  backward(): Gradients<ArrayBufferLike>;
  /** Frees the buffers; the object cannot be used afterwards. */
  dispose(): void;
  /** `using p = msda.prepare(...)`: dispose() at the end of the block. */
  [Symbol.dispose](): void;
}

export type BackendName = 'wasm' | 'wasm-scalar' | 'native';

/** 'wasm-simd128' (SIMD module), 'scalar' (the scalar module), or what the addon's kernels run:
 *  'avx512', 'avx2', 'sse2' on x86-64, 'neon' on arm64. */
export type Isa = 'wasm-simd128' | 'scalar' | 'sse2' | 'avx2' | 'avx512' | 'neon' | (string & {});

/** The API init() resolves to. */
export class Msda {
  /** 'wasm' (the SIMD module), 'wasm-scalar' or 'native'. */
  readonly backend: BackendName;
  /** True when vector code runs: the SIMD128 module, or the addon's SSE2 (or wider) kernels. */
  readonly simd: boolean;
  /** The vector ISA the kernels run; natively the library's choice (the widest this CPU has, or
   *  the one the environment variable MSDA_ISA names; one this CPU lacks is refused at init with
   *  code 'MSDA_BAD_ISA', and 'auto' then runs on wasm). */
  readonly isa: Isa | null;
  /** Threads each call uses unless it passes `threads`: init's option, or 1 where the runtime
   *  cannot run wasm threads (a page that is not cross-origin isolated). */
  readonly threads: number;
  /** Sizes past which a call is a RangeError before anything is allocated: one tensor's bytes
   *  (wasm: 2147483644, PTRDIFF_MAX on wasm32; native: the longest Float32Array), and, wasm only,
   *  one call's or prepared problem's tensors together with nothing else in the heap (4 GiB less
   *  the static data and C stack). Prepared problems not yet disposed take from the same heap. */
  readonly limits: { readonly tensorBytes: number | null; readonly callBytes: number | null };
  /** Wasm backends: the module's memory and the allocator's bytes in use; null for native. */
  readonly wasm: { memory: WebAssembly.Memory; heapInUse(): number } | null;
  /** output (B, N_q, N_h·C_h). Throws TypeError/RangeError on bad input, Error with .code on a C status. */
  forward(args: ForwardArgs): Tensor;
  /** The gradients of sum(gradOutput · output), each in its input's shape and layout. */
  backward(args: BackwardArgs): Gradients;
  /** Allocates a problem's tensors once, for repeated calls without copies. */
  prepare(problem: ProblemOptions, options?: PrepareOptions): Prepared;
  /** Frees what this instance holds (its prepared problems; the wasm heap and threads once no
   *  other instance from init() shares them); later calls throw an Error. Idempotent. */
  dispose(): void;
  /** `using msda = await init()`: dispose() at the end of the block. */
  [Symbol.dispose](): void;
  /** True after dispose(). */
  readonly disposed: boolean;
}

/** The package's files that wasmPaths may place. */
export type PackageFile = 'msda-simd.wasm' | 'msda-scalar.wasm' | 'msda-simd-threads.wasm' | 'threads-worker.js'
  | 'msda-worker.js';

export interface InitOptions {
  /** 'auto' (default): the SIMD module where the runtime supports SIMD128; true/false force it. */
  simd?: 'auto' | boolean;
  /** The .wasm bytes to instantiate instead of reading or fetching dist/msda-*.wasm. */
  wasmBinary?: ArrayBuffer | ArrayBufferView;
  /** A compiled module to instantiate instead. */
  module?: WebAssembly.Module;
  /** 'wasm' (default), 'wasm-scalar' (same as simd: false), 'native' (the Node addon) or 'auto'
   *  (native where Node loads the addon, else wasm; same results). 'webgpu': WebGPUInitOptions. */
  backend?: BackendName | 'auto';
  /** native/auto: the path of the addon (default: this package's prebuilds/<platform>-<arch>/,
   *  else build/native/msda.node from `make native`). */
  addonPath?: string;
  /** Threads every call uses, default 1; 'auto': this machine's CPUs (at most 64). Wasm needs
   *  SharedArrayBuffer (browsers: a cross-origin isolated page) and falls back to 1 with a notice. */
  threads?: number | 'auto';
  /** Where the package's files are served, for bundlers that do not copy them (esbuild) and CDNs:
   *  a URL prefix (each file at prefix + file name, e.g. '/assets/msda/'), or an object from file
   *  name to URL. Relative URLs resolve against the page (or worker) calling init. Covers the
   *  threads module and the threads' worker script too (in browsers; Node runs its own worker). */
  wasmPaths?: string | URL | Partial<Record<PackageFile, string | URL>>;
}

/** An Error carrying the C library's status. */
export interface MsdaError extends Error {
  /** The C status name, e.g. 'MSDA_ERR_SHAPE_MISMATCH'. */
  code: string;
  /** The numeric C status. */
  status: number;
}

// ---- the WebGPU backend (docs/webgpu.md). GPU objects are typed by the members read here, so
// that neither @webgpu/types nor a DOM library is needed; the runtime's own objects fit.

/** A GPUBuffer, usage including GPUBufferUsage.STORAGE. */
export interface GPUBufferLike { readonly size: number; readonly usage: number; destroy(): void }
/** Half precision, 2 bytes an element: IEEE binary16, or bfloat16 (float32's upper half). */
export type HalfDtype = 'float16' | 'bfloat16';
/**
 * A tensor on the GPU: its buffer on the instance's device, from byteOffset (a multiple of 4 for
 * float32, of 2 for a half dtype). Half-precision elements are widened exactly on the GPU (an
 * fp16 ONNX model's output: { buffer: t.gpuBuffer, shape: t.dims, dtype: 'float16' }).
 */
export interface GPUTensorInput { buffer: GPUBufferLike; shape: readonly number[]; byteOffset?: number; dtype?: 'float32' | '<f4' | HalfDtype | '<f2' }
/** A result on the GPU, the caller's to destroy. */
export interface GPUTensor { buffer: GPUBufferLike; shape: number[] }
/** A half-precision result on the GPU (options dtype): 2 bytes an element, the buffer's last 4-byte word whole. */
export interface GPUHalfTensor extends GPUTensor { dtype: HalfDtype }
/** A half-precision result read back (options dtype, outputs 'cpu'): the bits, as a half input takes them. */
export interface HalfTensor { data: Uint16Array<ArrayBuffer>; shape: number[]; dtype: HalfDtype }
type OnGpu<T> = { [K in keyof T]: T[K] extends TensorInput ? TensorInput | GPUTensorInput : T[K] };
export type WebGPUForwardArgs = OnGpu<ForwardArgs>;
export type WebGPUBackwardArgs = OnGpu<BackwardArgs>;
export interface GPUGradients { gradValue: GPUTensor; gradSamplingLocations: GPUTensor; gradAttentionWeights: GPUTensor }
export interface GPUHalfGradients { gradValue: GPUHalfTensor; gradSamplingLocations: GPUHalfTensor; gradAttentionWeights: GPUHalfTensor }
export interface HalfGradients { gradValue: HalfTensor; gradSamplingLocations: HalfTensor; gradAttentionWeights: HalfTensor }

export interface WebGPUInitOptions {
  backend: 'webgpu';
  /** A navigator.gpu-like object (default navigator.gpu; in Node the 'webgpu' package, an optional peer: npm install webgpu). */
  gpu?: { requestAdapter(options?: object): Promise<unknown> };
  /** A GPUDevice to run on (e.g. await ort.env.webgpu.device, tf.backend().device); never destroyed here. */
  device?: object;
}

/** The instance init({ backend: 'webgpu' }) resolves to. Without an adapter init rejects with an
 *  Error whose code is 'MSDA_WEBGPU_UNAVAILABLE'; a lost device rejects calls with 'MSDA_WEBGPU_DEVICE_LOST'.
 *  (A type only: the class is loaded on demand by init.) */
export interface MsdaWebGPU {
  readonly backend: 'webgpu';
  /** The GPUDevice every call runs on. */
  readonly device: any;
  readonly adapterInfo: { vendor: string; architecture: string; device: string; description: string } | null;
  /** What the startup probe saw: a*b+c fused as written, a*b+c as the kernels write it with the product rounded first (the CPU's bits), subnormal inputs flushed (null until known on an instance made without awaiting). */
  readonly numerics: { fusedMultiplyAdd: boolean; productsRounded: boolean; flushesSubnormals: boolean } | null;
  readonly limits: Record<string, number>;
  /** The pipelines compiled so far (or compiling; not one that failed to), in the order calls first needed them: a program's name and its variant's flags, e.g. 'forward narrow vec4'. */
  readonly compiled: string[];
  readonly threads: 1;
  /** options.dtype: the results rounded to a half precision (nearest, ties to even) on the GPU. */
  forward(args: WebGPUForwardArgs, options?: { outputs?: 'cpu'; dtype?: 'float32' }): Promise<Tensor>;
  forward(args: WebGPUForwardArgs, options: { outputs: 'gpu'; dtype?: 'float32' }): Promise<GPUTensor>;
  forward(args: WebGPUForwardArgs, options: { outputs?: 'cpu'; dtype: HalfDtype }): Promise<HalfTensor>;
  forward(args: WebGPUForwardArgs, options: { outputs: 'gpu'; dtype: HalfDtype }): Promise<GPUHalfTensor>;
  backward(args: WebGPUBackwardArgs, options?: { outputs?: 'cpu'; dtype?: 'float32' }): Promise<Gradients>;
  backward(args: WebGPUBackwardArgs, options: { outputs: 'gpu'; dtype?: 'float32' }): Promise<GPUGradients>;
  backward(args: WebGPUBackwardArgs, options: { outputs?: 'cpu'; dtype: HalfDtype }): Promise<HalfGradients>;
  backward(args: WebGPUBackwardArgs, options: { outputs: 'gpu'; dtype: HalfDtype }): Promise<GPUHalfGradients>;
  /** Encoded and submitted now, the result on the GPU at once (for code that cannot await). */
  dispatchForward(args: WebGPUForwardArgs, options?: { outputs?: 'gpu'; dtype?: 'float32' }): GPUTensor;
  dispatchForward(args: WebGPUForwardArgs, options: { outputs?: 'gpu'; dtype: HalfDtype }): GPUHalfTensor;
  dispatchBackward(args: WebGPUBackwardArgs, options?: { outputs?: 'gpu'; dtype?: 'float32' }): GPUGradients;
  dispatchBackward(args: WebGPUBackwardArgs, options: { outputs?: 'gpu'; dtype: HalfDtype }): GPUHalfGradients;
  /** Frees what the instance holds (calls still pending reject); destroys the device only if init made it. Idempotent. */
  dispose(): void;
  readonly disposed: boolean;
}

/** Loads a backend and returns an instance of its own (dispose() it when done); instances with
 *  the same options share one backend. */
export function init(options: WebGPUInitOptions): Promise<MsdaWebGPU>;
export function init(options?: InitOptions): Promise<Msda>;
/** The native Node addon with the same API (Node only). Where no addon loads (no prebuild for
 *  this platform), rejects with an Error whose code is 'MSDA_NATIVE_UNAVAILABLE'; where the
 *  environment variable MSDA_ISA names no instruction set of this CPU, with code 'MSDA_BAD_ISA'
 *  (init({ backend: 'auto' }) then runs on wasm, warning why). */
export function initNative(options?: { addonPath?: string; threads?: number | 'auto' }): Promise<Msda>;
/** init() on this thread, synchronously: the wasm module on one thread, read from disk (Node
 *  only; in browsers it throws, use init()). Its instance shares nothing with init()'s. */
export function initSync(options?: Pick<InitOptions, 'simd' | 'wasmPaths'> & { backend?: 'wasm' | 'wasm-scalar' }): Msda;
/** True when this runtime can run the SIMD128 module. */
export function simdSupported(): boolean;
/** The reference API's defaults. */
export const DEFAULTS: Readonly<Required<Omit<Options, 'threads'>>>;

/** The second argument of an MsdaWorker call. */
export interface CallOptions {
  /** Aborting rejects the call at once with a DOMException named 'AbortError'; a call still
   *  queued never runs, one already running finishes in the worker and its result is dropped. */
  signal?: AbortSignal;
  /** true: the inputs' ArrayBuffers are transferred to the worker instead of copied (they are
   *  detached here when the call is made: every tensor on those buffers becomes empty). Buffers
   *  that cannot be transferred (SharedArrayBuffer, WebAssembly memory) are copied. Default false. */
  transfer?: boolean;
}

/**
 * The API initWorker() resolves to: Msda's calls, asynchronous, on an instance in a worker
 * (worker_threads in Node, a module Web Worker in browsers). Inputs are taken when a call is
 * made; calls run one at a time, in order; results are arrays of their own.
 */
export class MsdaWorker {
  readonly backend: BackendName;
  readonly simd: boolean;
  readonly isa: Isa | null;
  readonly threads: number;
  /** True after terminate() (or if the worker stopped on its own). */
  readonly terminated: boolean;
  forward(args: ForwardArgs, options?: CallOptions): Promise<Tensor<ArrayBuffer>>;
  backward(args: BackwardArgs, options?: CallOptions): Promise<Gradients<ArrayBuffer>>;
  /** A problem prepared in the worker: its tensors stay there, so that each call sends only the
   *  inputs that changed and gets its results transferred back (a per-frame app's call). The
   *  synchronous prepare's errors, as rejections. */
  prepare(problem: ProblemOptions, options?: PrepareOptions): Promise<WorkerPrepared>;
  /** Stops the worker, freeing its memory and threads; pending calls reject, later calls reject
   *  with an Error. In Node the process then exits by itself (an idle worker never holds it). */
  terminate(): Promise<void>;
  /** `await using w = await initWorker()`: terminate() at the end of the block. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** An input of a WorkerPrepared call: the problem's element count, as a Float32Array or a tensor of its shape. */
export type PreparedInput = Float32Array | { data: Float32Array; shape?: readonly number[] };

/**
 * A problem prepared in the worker (MsdaWorker.prepare). Each call takes the inputs that changed
 * since the last one (the others are what earlier calls set; set every input once first), copied
 * or with { transfer: true } moved, and resolves to arrays of its own.
 */
export class WorkerPrepared {
  readonly mode: 'forward' | 'backward' | 'both';
  readonly shapes: Record<string, number[]>;
  readonly disposed: boolean;
  forward(inputs?: { value?: PreparedInput; samplingLocations?: PreparedInput; attentionWeights?: PreparedInput },
    options?: CallOptions): Promise<Tensor<ArrayBuffer>>;
  backward(inputs?: { gradOutput?: PreparedInput; value?: PreparedInput; samplingLocations?: PreparedInput; attentionWeights?: PreparedInput },
    options?: CallOptions): Promise<Gradients<ArrayBuffer>>;
  /** Frees the problem's memory in the worker once the calls already made have run; later calls reject. */
  dispose(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** init's options; the instance lives in a worker and its calls return Promises. The CPU
 *  backends only: backend 'webgpu', gpu and device reject with a TypeError naming the option
 *  (the WebGPU instance's calls already return Promises: use init({ backend: 'webgpu' })). */
export function initWorker(options?: InitOptions & { backend?: BackendName | 'auto'; gpu?: never; device?: never }): Promise<MsdaWorker>;

declare global {
  interface SymbolConstructor {
    readonly asyncDispose: unique symbol;
    /** Explicit resource management (Node 20 has it through @types/node, TypeScript's lib esnext.disposable). */
    readonly dispose: unique symbol;
  }
}
