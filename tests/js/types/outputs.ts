// Compiled by `tsc --strict --noEmit` in tests/js/package.test.js, once with Node's types and
// once with the DOM's: what users do with results. Outputs the package allocates are typed
// Float32Array<ArrayBuffer> (Float64Array<ArrayBuffer> for the reference), which Blob and
// crypto.subtle.digest take; the reference takes the API's own ForwardArgs / BackwardArgs.
import { init } from 'ms-deform-attn';
import type { ForwardArgs, BackwardArgs, Tensor, Gradients } from 'ms-deform-attn';
import { referenceForward, referenceBackward } from 'ms-deform-attn/reference';
import type { ReferenceArgs, ReferenceBackwardArgs, ReferenceTensor } from 'ms-deform-attn/reference';

export async function outputs(forwardArgs: ForwardArgs, backwardArgs: BackwardArgs): Promise<number> {
  const msda = await init();
  const out: Tensor = msda.forward(forwardArgs);
  const owned: Float32Array<ArrayBuffer> = out.data;
  const grads: Gradients = msda.backward(backwardArgs);
  const blob = new Blob([out.data, grads.gradValue.data, grads.gradSamplingLocations.data, grads.gradAttentionWeights.data]);
  const digest: ArrayBuffer = await crypto.subtle.digest('SHA-256', out.data);
  await crypto.subtle.digest('SHA-256', grads.gradValue.data);

  // The reference takes exactly what forward/backward take.
  const asReference: ReferenceArgs = forwardArgs;
  const asReferenceBackward: ReferenceBackwardArgs = backwardArgs;
  const ref: ReferenceTensor = referenceForward(forwardArgs);
  const refGrads = referenceBackward(backwardArgs);
  const ref64: Float64Array<ArrayBuffer> = ref.data;
  new Blob([ref.data, refGrads.gradValue.data, refGrads.gradSamplingLocations.data, refGrads.gradAttentionWeights.data]);
  await crypto.subtle.digest('SHA-256', refGrads.gradAttentionWeights.data);
  // ... and float64 data, for finite differences.
  referenceForward({ ...forwardArgs, value: { data: new Float64Array(16), shape: [1, 16, 1, 1] } });

  // A prepared problem's views live in the wasm memory, shared when threads run: not owned.
  const p = msda.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[4, 4]] });
  // @ts-expect-error: a view may be over a SharedArrayBuffer, which Blob does not take
  new Blob([p.forward().data]);
  // @ts-expect-error: the reference wants tensors, not bare arrays
  referenceForward({ ...forwardArgs, value: [1, 2, 3] });
  // @ts-expect-error: spatialShapes is required by the reference too
  referenceForward({ value: forwardArgs.value, samplingLocations: forwardArgs.samplingLocations, attentionWeights: forwardArgs.attentionWeights });
  p.dispose();
  return owned.length + blob.size + digest.byteLength + (asReference.alignCorners ? 1 : 0) + ref64.length
    + (asReferenceBackward.gradOutput ? 1 : 0);
}
