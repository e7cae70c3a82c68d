// Compiled by `tsc --strict --noEmit` in tests/js/tfjs.test.js: ms-deform-attn/tfjs as a user
// writes it, through the package's own name. Lines under an expect-error directive must stay
// errors, so the typings cannot silently loosen.
import * as tf from '@tensorflow/tfjs-core';
import { msDeformAttn, msDeformAttnBackward, MSDeformAttn, getMsda, setMsda } from 'ms-deform-attn/tfjs';
import type { ParameterName } from 'ms-deform-attn/tfjs';
import { init } from 'ms-deform-attn';

export async function usage(): Promise<number> {
  const value = tf.zeros([1, 20, 2, 4]);
  const locations = tf.zeros([1, 3, 2, 2, 2, 2]);
  const weights = tf.zeros([1, 3, 2, 2, 2]);
  const out: tf.Tensor = msDeformAttn(value, locations, weights, {
    spatialShapes: [[4, 4], [2, 2]], levelStartIndex: [0, 16], valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2',
    alignCorners: false, paddingMode: 'zeros',
  });
  const grads: tf.Tensor[] = tf.grads((v: tf.Tensor, l: tf.Tensor, w: tf.Tensor) =>
    msDeformAttn(v, l, w, { spatialShapes: tf.tensor2d([[4, 4], [2, 2]], [2, 2], 'int32') }))([value, locations, weights], out);
  const [gv, gl, gw] = msDeformAttnBackward(out, value, locations, weights, { spatialShapes: [[4, 4], [2, 2]] });
  // @ts-expect-error: spatialShapes is required
  msDeformAttn(value, locations, weights, {});
  // @ts-expect-error: no such padding mode
  msDeformAttn(value, locations, weights, { spatialShapes: [[4, 4]], paddingMode: 'reflect' });

  const layer = new MSDeformAttn({ d_model: 8, n_levels: 2, n_heads: 2, n_points: 2, seed: 1 });
  // @ts-expect-error: PyTorch's names, not camelCase
  new MSDeformAttn({ dModel: 8 });
  const name: ParameterName = 'value_proj.weight';
  const w: tf.Variable = layer.parameters[name];
  const bytes = new Uint8Array(0);
  layer.loadStateDict({ 'm.value_proj.weight': bytes, 'm.value_proj.bias': tf.zeros([8]) }, { prefix: 'm.', strict: false });
  const y: tf.Tensor = layer.apply(tf.zeros([1, 3, 8]), tf.zeros([1, 3, 2, 4]), tf.zeros([1, 20, 8]), [[4, 4], [2, 2]], null,
    tf.zeros([1, 20], 'bool'));
  const state = layer.stateDict();
  const data: Float32Array = state['output_proj.bias'].data;
  const optimizer = tf.train.adam(0.01);
  optimizer.minimize(() => tf.sum(layer.apply(tf.zeros([1, 3, 8]), tf.zeros([1, 3, 2, 2]), tf.zeros([1, 20, 8]), [[4, 4], [2, 2]])) as tf.Scalar,
    false, layer.trainableWeights);
  setMsda(await init({ threads: 2 }));
  const threads: number = getMsda().threads;
  layer.dispose();
  return grads.length + gv.size + gl.size + gw.size + w.size + y.size + data.length + threads;
}
