// Multi-scale deformable attention written with TensorFlow.js ops, for the benchmark: what a
// tfjs user writes without this package. Bilinear sampling as a gather of the four corners of
// every sample from the flattened value, weighted and summed; gradients by tfjs's autodiff.
// Zeros padding, align_corners false, value BLNC, locations BQHLP2 (the bench configs).
//
// tfjs-core alone registers no gradients for its built-in kernels (the @tensorflow/tfjs package
// does); registerGradients() registers the few this implementation's tape needs, written as
// tfjs's own gradient configs are.
import * as tf from '@tensorflow/tfjs-core';

const reduceTo = (dy, shape) => {
  const axes = tf.broadcast_util.getReductionAxes(shape, dy.shape);
  return tf.reshape(axes.length > 0 ? tf.sum(dy, axes) : dy, shape);
};

let registered = false;
export function registerGradients() {
  if (registered) return;
  registered = true;
  const binary = (kernelName, f) => tf.registerGradient({
    kernelName, inputsToSave: ['a', 'b'],
    gradFunc: (dy, [a, b]) => {
      const [da, db] = f(dy, a, b);
      return { a: () => reduceTo(da, a.shape), b: () => reduceTo(db, b.shape) };
    },
  });
  binary('Add', (dy) => [dy, dy]);
  binary('Sub', (dy) => [dy, tf.neg(dy)]);
  binary('Multiply', (dy, a, b) => [tf.mul(dy, b), tf.mul(dy, a)]);
  tf.registerGradient({ kernelName: 'Reshape', inputsToSave: ['x'], gradFunc: (dy, [x]) => ({ x: () => tf.reshape(dy, x.shape) }) });
  tf.registerGradient({
    kernelName: 'Transpose',
    gradFunc: (dy, saved, attrs) => {
      const inverse = new Array(attrs.perm.length);
      attrs.perm.forEach((p, i) => { inverse[p] = i; });
      return { x: () => tf.transpose(dy, inverse) };
    },
  });
  tf.registerGradient({
    kernelName: 'Sum', inputsToSave: ['x'],
    gradFunc: (dy, [x], attrs) => {
      const axes = tf.util.parseAxisParam(attrs.axis, x.shape);
      const kept = x.shape.map((d, i) => (axes.includes(i) ? 1 : d));
      return { x: () => tf.mul(tf.reshape(dy, kept), tf.onesLike(x)) };
    },
  });
  // axis 0, 1-d indices: the rows' gradients summed into the rows they came from. tfjs's own
  // GatherV2 gradient is unsortedSegmentSum, which tfjs-backend-cpu runs as one masked sum per
  // row (rows x samples work: hours here); scatterND sums duplicates in one pass.
  tf.registerGradient({
    kernelName: 'GatherV2', inputsToSave: ['x', 'indices'],
    gradFunc: (dy, [x, indices]) => ({
      x: () => tf.scatterND(tf.reshape(indices, [indices.size, 1]), dy, x.shape),
      indices: () => tf.zerosLike(indices),
    }),
  });
}

/**
 * value (B, L, H, C), locations (B, Q, H, NL, P, 2), weights (B, Q, H, NL, P) tf.Tensors
 * -> (B, Q, H*C). The integer corners and the in-bounds masks are piecewise constant (zero
 * derivative), so they are built from the locations' data off the tape.
 */
export function msdaWithTfjsOps(value, locations, weights, spatialShapes) {
  const [B, L, H, C] = value.shape;
  const [, Q, , NL, P] = weights.shape;
  const n = B * Q * H * NL * P;
  const starts = [];
  let acc = 0;
  for (const [h, w] of spatialShapes) { starts.push(acc); acc += h * w; }
  const loc = locations.dataSync();
  const idx = Array.from({ length: 4 }, () => new Int32Array(n));
  const mask = Array.from({ length: 4 }, () => new Float32Array(n));
  const x0s = new Float32Array(n), y0s = new Float32Array(n), scaleX = new Float32Array(2 * n), scaleY = new Float32Array(2 * n);
  for (let i = 0; i < n; i++) {
    const l = Math.floor(i / P) % NL, hd = Math.floor(i / (P * NL)) % H, b = Math.floor(i / (P * NL * H * Q));
    const [hl, wl] = spatialShapes[l];
    const u = loc[2 * i] * wl - 0.5, v = loc[2 * i + 1] * hl - 0.5;
    const x0 = Number.isFinite(u) ? Math.floor(u) : -2, y0 = Number.isFinite(v) ? Math.floor(v) : -2;
    x0s[i] = x0; y0s[i] = y0; scaleX[2 * i] = wl; scaleY[2 * i + 1] = hl;
    const base = (b * H + hd) * L + starts[l];
    [[0, 0], [0, 1], [1, 0], [1, 1]].forEach(([dy, dx], k) => {
      const yi = y0 + dy, xi = x0 + dx;
      const inside = yi >= 0 && yi < hl && xi >= 0 && xi < wl;
      idx[k][i] = inside ? base + yi * wl + xi : 0;
      mask[k][i] = inside ? 1 : 0;
    });
  }
  return tf.tidy(() => {
    // (B, L, H, C) -> (B*H*L, C): row (b*H + h)*L + pixel
    const rows = tf.reshape(tf.transpose(value, [0, 2, 1, 3]), [B * H * L, C]);
    const xy = tf.reshape(locations, [n, 2]);
    // x * W and y * H as products with (W, 0) and (0, H) rows, summed (no Slice gradient needed)
    const u = tf.sub(tf.sum(tf.mul(xy, tf.tensor2d(scaleX, [n, 2])), 1), 0.5);
    const v = tf.sub(tf.sum(tf.mul(xy, tf.tensor2d(scaleY, [n, 2])), 1), 0.5);
    const fx = tf.sub(u, tf.tensor1d(x0s)), fy = tf.sub(v, tf.tensor1d(y0s));
    const gx = tf.sub(1, fx), gy = tf.sub(1, fy);
    const cornerWeights = [tf.mul(gy, gx), tf.mul(gy, fx), tf.mul(fy, gx), tf.mul(fy, fx)];
    const a = tf.reshape(weights, [n]);
    let sampled = null;
    for (let k = 0; k < 4; k++) {
      const wk = tf.reshape(tf.mul(tf.mul(cornerWeights[k], tf.tensor1d(mask[k])), a), [n, 1]);
      const term = tf.mul(tf.gather(rows, tf.tensor1d(idx[k], 'int32')), wk);
      sampled = sampled === null ? term : tf.add(sampled, term);
    }
    // (B, Q, H, NL*P, C) summed over levels and points -> (B, Q, H*C)
    return tf.reshape(tf.sum(tf.reshape(sampled, [B, Q, H, NL * P, C]), 3), [B, Q, H * C]);
  });
}
