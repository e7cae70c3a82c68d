// Types for `ms-deform-attn/reference` (bindings/reference.js): the plain float64 reference of
// SEMANTICS.md. Takes the same arguments as forward/backward (any numeric array as data).
import type { Options } from './index.js';

export interface ReferenceTensorInput {
  data: ArrayLike<number>;
  shape?: readonly number[];
  dims?: readonly number[];
}
export interface ReferenceTensor {
  data: Float64Array;
  shape: number[];
}
export interface ReferenceArgs extends Options {
  value: ReferenceTensorInput;
  /** [H, W] per level. */
  spatialShapes: readonly (readonly number[])[];
  samplingLocations: ReferenceTensorInput;
  attentionWeights: ReferenceTensorInput;
}
export function referenceForward(args: ReferenceArgs): ReferenceTensor;
export function referenceBackward(args: ReferenceArgs & { gradOutput: ReferenceTensorInput }): {
  gradValue: ReferenceTensor;
  gradSamplingLocations: ReferenceTensor;
  gradAttentionWeights: ReferenceTensor;
};
