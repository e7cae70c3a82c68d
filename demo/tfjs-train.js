#!/usr/bin/env node
// Trains Deformable DETR's MSDeformAttn layer in TensorFlow.js (ms-deform-attn/tfjs) in Node:
// a student layer, initialised as in PyTorch, learns to reproduce a teacher layer's output on a
// two-level feature map, with Adam, on tfjs-backend-cpu (or --backend wasm).
//
//   npm run demo:tfjs-train [-- --steps N --backend cpu|wasm]
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
import { MSDeformAttn } from '../bindings/tfjs.js';

function parseArgs(argv) {
  const o = { steps: 300, backend: 'cpu' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--steps') {
      o.steps = Number(argv[++i]);
      if (!Number.isInteger(o.steps) || o.steps < 1) throw new Error(`--steps: expected a positive integer, got ${argv[i]}`);
    } else if (argv[i] === '--backend') {
      o.backend = argv[++i];
      if (!['cpu', 'wasm'].includes(o.backend)) throw new Error(`--backend: expected cpu or wasm, got ${o.backend}`);
    } else {
      throw new Error(`unknown argument ${argv[i]} (expected --steps N, --backend cpu|wasm)`);
    }
  }
  return o;
}

// Mean squared error with its own gradient: tfjs-core alone registers no gradients for its
// built-in ops (the @tensorflow/tfjs package does; with it, tf.losses.meanSquaredError works).
const meanSquaredError = tf.customGrad((prediction, target, save) => {
  const diff = tf.sub(prediction, target);
  save([diff]);
  const scale = 2 / diff.size;
  return {
    value: tf.mean(tf.square(diff)),
    gradFunc: (dy, [d]) => [tf.mul(dy, tf.mul(d, scale)), tf.mul(dy, tf.mul(d, -scale))],
  };
});

function progress(step, steps, loss) {
  const width = 30, full = Math.round((step / steps) * width);
  const line = `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${String(step).padStart(String(steps).length)}/${steps}  loss ${loss.toExponential(3)}`;
  if (process.stderr.isTTY) process.stderr.write(`\r${line}${step === steps ? '\n' : ''}`);
  else if (step === steps || step % Math.max(1, Math.round(steps / 10)) === 0) process.stderr.write(`${line}\n`);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  tf.enableProdMode(); // no "running in Node.js" banner, no debug checks
  await tf.setBackend(o.backend);
  await tf.ready();

  const config = { d_model: 32, n_levels: 2, n_heads: 4, n_points: 2 };
  const spatialShapes = [[8, 8], [4, 4]];
  const [batch, numQueries, lengthIn] = [2, 16, 8 * 8 + 4 * 4];
  const teacher = new MSDeformAttn({ ...config, seed: 1 });
  const student = new MSDeformAttn({ ...config, seed: 2 });
  // The teacher attends somewhere other than the initial pattern, with its own weights.
  tf.tidy(() => teacher.loadStateDict({
    'sampling_offsets.weight': tf.randomNormal([32, 32], 0, 0.3, 'float32', 3),
    'attention_weights.weight': tf.randomNormal([16, 32], 0, 0.3, 'float32', 4),
  }, { strict: false }));
  const query = tf.randomNormal([batch, numQueries, 32], 0, 1, 'float32', 5);
  const input = tf.randomNormal([batch, lengthIn, 32], 0, 1, 'float32', 6);
  const reference = tf.randomUniform([batch, numQueries, 2, 2], 0.2, 0.8, 'float32', 7);
  const target = teacher.apply(query, reference, input, spatialShapes);

  console.log(`tfjs-train: MSDeformAttn(d_model ${config.d_model}, ${config.n_levels} levels, ${config.n_heads} heads, ` +
    `${config.n_points} points), ${numQueries} queries x ${batch}, on tfjs-backend-${tf.getBackend()}; ` +
    `Adam on ${student.trainableWeights.length} parameters`);
  const optimizer = tf.train.adam(0.01);
  let first = null, loss = null;
  const t0 = performance.now();
  for (let step = 1; step <= o.steps; step++) {
    const cost = optimizer.minimize(() => meanSquaredError(student.apply(query, reference, input, spatialShapes), target), true);
    loss = cost.dataSync()[0];
    cost.dispose();
    if (first === null) first = loss;
    progress(step, o.steps, loss);
  }
  const ms = (performance.now() - t0) / o.steps;
  console.log(`loss ${first.toExponential(3)} → ${loss.toExponential(3)} after ${o.steps} steps ` +
    `(${(first / loss).toFixed(1)}× lower), ${ms.toFixed(2)} ms per step; ${tf.memory().numTensors} tensors alive`);
  tf.dispose([query, input, reference, target]);
  optimizer.dispose();
  teacher.dispose();
  student.dispose();
  if (!(loss < first)) {
    console.error('tfjs-train: the loss did not go down');
    process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(`tfjs-train: ${process.env.DEBUG ? e.stack : e.message}`);
  process.exitCode = 2;
});
