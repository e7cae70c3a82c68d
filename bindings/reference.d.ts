// Types for `ms-deform-attn/reference` (bindings/reference.js): the plain float64 reference of
// SEMANTICS.md. Takes the same arguments as forward/backward, validated by the same code with
// the same messages; tensor data may also be float64 (for finite differences).
import type { ForwardArgs } from './index.js';

export type ReferenceTensorInput =
  | { data: Float32Array | Float64Array; shape: readonly number[]; dtype?: 'float32' | '<f4' }
  | { data: Float32Array | Float64Array; dims: readonly number[]; dtype?: 'float32' | '<f4' }
  | { data: Uint16Array; shape: readonly number[]; dtype: 'float16' | 'bfloat16' | '<f2' };

/** A float64 result: an array of its own. */
export interface ReferenceTensor {
  data: Float64Array<ArrayBuffer>;
  shape: number[];
}

/** forward's arguments (ForwardArgs is one), with float32 or float64 tensors. */
export interface ReferenceArgs extends Omit<ForwardArgs, 'value' | 'samplingLocations' | 'attentionWeights'> {
  value: ReferenceTensorInput;
  samplingLocations: ReferenceTensorInput;
  attentionWeights: ReferenceTensorInput;
}

/** backward's arguments (BackwardArgs is one). */
export interface ReferenceBackwardArgs extends ReferenceArgs {
  gradOutput: ReferenceTensorInput;
}

/** output (B, N_q, N_h·C_h) in float64. Throws TypeError/RangeError exactly where forward does. */
export function referenceForward(args: ReferenceArgs): ReferenceTensor;
/** The three gradients in float64. Throws TypeError/RangeError exactly where backward does. */
export function referenceBackward(args: ReferenceBackwardArgs): {
  gradValue: ReferenceTensor;
  gradSamplingLocations: ReferenceTensor;
  gradAttentionWeights: ReferenceTensor;
};
