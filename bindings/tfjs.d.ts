// Types for `ms-deform-attn/tfjs` (bindings/tfjs.js): the differentiable TensorFlow.js op and
// Deformable DETR's MSDeformAttn layer. What is computed: SEMANTICS.md.
import type { Tensor, TensorLike, Variable } from '@tensorflow/tfjs-core';
import type { InitOptions, IntegerList, Msda, PaddingMode, SamplingLocationsLayout, ValueLayout } from './index.js';

/** [H, W] per level, or an (N_l, 2) integer tensor. */
export type SpatialShapesInput = readonly (readonly [number, number] | readonly number[])[] | Tensor | { data: IntegerList; shape?: readonly number[] };

export interface MsDeformAttnOptions {
  /** [H, W] for each level. */
  spatialShapes: SpatialShapesInput;
  /** Prefix sums of H·W; derived when omitted, checked when given. */
  levelStartIndex?: IntegerList | Tensor;
  /** 'BLNC' (default): value is (B, L, N_h, C_h); 'BNLC': (B, N_h, L, C_h). */
  valueLayout?: ValueLayout;
  /** 'BQHLP2' (default): (B, N_q, N_h, N_l, N_p, 2); 'B2QHLP': (B, 2, N_q, N_h, N_l, N_p). x then y, in [0, 1]. */
  samplingLocationsLayout?: SamplingLocationsLayout;
  /** Default false. */
  alignCorners?: boolean;
  /** 'zeros' (default) or 'border'. */
  paddingMode?: PaddingMode;
}

/**
 * Multi-scale deformable attention as a tfjs op: (B, N_q, N_h·C_h), float32, with gradients for
 * value, samplingLocations and attentionWeights (tf.grads, tf.variableGrads, optimizers).
 * Throws TypeError for a non-float32 or non-tensor argument, RangeError for mismatched shapes.
 */
export function msDeformAttn(value: Tensor | TensorLike, samplingLocations: Tensor | TensorLike,
  attentionWeights: Tensor | TensorLike, options: MsDeformAttnOptions): Tensor;

/** The op's vector-Jacobian product: [gradValue, gradSamplingLocations, gradAttentionWeights] for dy (B, N_q, N_h·C_h). */
export function msDeformAttnBackward(dy: Tensor | TensorLike, value: Tensor | TensorLike, samplingLocations: Tensor | TensorLike,
  attentionWeights: Tensor | TensorLike, options: MsDeformAttnOptions): [Tensor, Tensor, Tensor];

/** The ms-deform-attn instance the op calls. Nothing is loaded at import: in Node the first op
 *  (or this) makes it, the wasm module on one thread; in browsers `await ready()` or setMsda() first. */
export function getMsda(): Msda;
/** Makes the op call another instance from init() or initNative(). */
export function setMsda(instance: Msda): void;
/** The init() options of the instance the op makes for itself (e.g. { wasmPaths: '/msda/' }). */
export function configure(options: InitOptions): void;
/** Makes the op's instance with init(configure's options) unless it has one; resolves to it. */
export function ready(): Promise<Msda>;

export type ParameterName = 'sampling_offsets.weight' | 'sampling_offsets.bias' | 'attention_weights.weight'
  | 'attention_weights.bias' | 'value_proj.weight' | 'value_proj.bias' | 'output_proj.weight' | 'output_proj.bias';

/** A parameter to load: a tensor, a { data, shape } tensor, or the bytes of a .npy file ('<f4'). */
export type ParameterInput = Tensor | { data: Float32Array; shape: readonly number[] } | Uint8Array | ArrayBuffer;

export interface MSDeformAttnOptions {
  /** Default 256; a multiple of n_heads. */
  d_model?: number;
  /** Default 4. */
  n_levels?: number;
  /** Default 8. */
  n_heads?: number;
  /** Default 4. */
  n_points?: number;
  /** Seed of the xavier_uniform draws of value_proj and output_proj (seed + 1). */
  seed?: number;
  /** Prefix of the tf.Variables' names (default MSDeformAttn_<n>); unique per layer. */
  name?: string;
  /** Default true. */
  trainable?: boolean;
}

interface Linear {
  /** (out, in), as PyTorch's nn.Linear. */
  weight: Variable;
  bias: Variable;
}

/** Deformable DETR's MSDeformAttn, with PyTorch's parameter names, shapes and initialisation. */
export class MSDeformAttn {
  constructor(options?: MSDeformAttnOptions);
  readonly d_model: number;
  readonly n_levels: number;
  readonly n_heads: number;
  readonly n_points: number;
  readonly name: string;
  /** By state_dict name. */
  readonly parameters: Record<ParameterName, Variable>;
  readonly sampling_offsets: Linear;
  readonly attention_weights: Linear;
  readonly value_proj: Linear;
  readonly output_proj: Linear;
  /** The trainable variables (an optimizer's varList). */
  readonly trainableWeights: Variable[];
  /**
   * Loads parameters by name as torch's load_state_dict does (keys are `prefix` + name).
   * strict (default true): every parameter present and no other key under the prefix.
   * Checks everything before assigning anything.
   */
  loadStateDict(dict: Record<string, ParameterInput> | Map<string, ParameterInput>, options?: { prefix?: string; strict?: boolean }): this;
  /** Copies of the parameters, by name. */
  stateDict(): Record<ParameterName, { data: Float32Array; shape: number[] }>;
  /**
   * PyTorch's forward: query (N, Len_q, d_model); referencePoints (N, Len_q, n_levels, 2) points
   * or (..., 4) boxes (cx, cy, w, h) in [0, 1]; inputFlatten (N, Len_in, d_model); the levels'
   * [H, W]; level starts (optional); inputPaddingMask (N, Len_in), true where padded.
   * Returns (N, Len_q, d_model), differentiable in the tensors and the parameters.
   */
  apply(query: Tensor | TensorLike, referencePoints: Tensor | TensorLike, inputFlatten: Tensor | TensorLike,
    inputSpatialShapes: SpatialShapesInput, inputLevelStartIndex?: IntegerList | Tensor | null,
    inputPaddingMask?: Tensor | TensorLike | { data: Uint8Array | Float32Array | Int32Array; shape: readonly number[] } | null): Tensor;
  /** Frees the variables. */
  dispose(): void;
}
