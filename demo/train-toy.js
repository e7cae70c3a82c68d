#!/usr/bin/env node
// Toy training: fit one query's sampling locations and attention weights so that the attended
// feature matches the feature at a target location, by gradient descent through the wasm
// backward pass. The same problem as the interactive page (web/), on a picture drawn here.
//
//   npm run demo:train-toy [-- --steps N --scalar]
import { init } from '../bindings/index.js';
import { PICTURE, LEVELS, NUM_HEADS, NUM_POINTS, buildPyramid, initialState } from '../web/scene.js';
import { evaluate, descend, newOptimizer } from '../web/model.js';

function parseArgs(argv) {
  const o = { steps: 150, simd: 'auto' };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--steps') {
      o.steps = Number(argv[++i]);
      if (!Number.isInteger(o.steps) || o.steps < 1) throw new Error(`--steps: expected a positive integer, got ${argv[i]}`);
    } else if (argv[i] === '--scalar') {
      o.simd = false;
    } else {
      throw new Error(`unknown argument ${argv[i]} (expected --steps N, --scalar)`);
    }
  }
  return o;
}

// The page draws its picture on a canvas; Node has none, so paint a similar one by hand:
// a colour gradient, a soft bright spot, a disc and a square.
function paintPicture() {
  const { width: w, height: h } = PICTURE;
  const rgb = new Float32Array(w * h * 3);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const t = (x / w + y / h) / 2;
      let c = [0.11 + 0.84 * t, 0.23 + 0.53 * t, 0.56 - 0.25 * t];
      const sun = Math.exp(-((x - 118) ** 2 + (y - 32) ** 2) / (2 * 14 ** 2));
      c = c.map((v, k) => v + sun * ([1, 0.85, 0.5][k] - v));
      if ((x - 42) ** 2 + (y - 78) ** 2 < 20 ** 2) c = [0.85, 0.27, 0.24];
      if (x >= 74 && x < 104 && y >= 62 && y < 92) c = [0.96, 0.95, 0.9];
      rgb.set(c, 3 * (y * w + x));
    }
  }
  return rgb;
}

function bar(fraction, width = 24) {
  const full = Math.round(fraction * width);
  return '█'.repeat(full) + '░'.repeat(width - full);
}

function meanDistance(state) {
  let s = 0;
  const n = NUM_HEADS * LEVELS.length * NUM_POINTS;
  for (let i = 0; i < n; i++) {
    s += Math.hypot(state.samplingLocations[2 * i] - state.target[0], state.samplingLocations[2 * i + 1] - state.target[1]);
  }
  return s / n;
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const msda = await init({ simd: o.simd });
  const data = buildPyramid(paintPicture());
  const state = initialState();
  const opts = { alignCorners: false, paddingMode: 'zeros', valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2' };
  const optimizer = newOptimizer();
  const levels = LEVELS.map(([h, w]) => `${h}×${w}`).join(', ');
  console.log(`train-toy: 1 query, ${NUM_HEADS} heads, levels ${levels}, ${NUM_POINTS} points per level; ` +
    `backend ${msda.backend} (${msda.simd ? 'SIMD' : 'scalar'})`);
  console.log(`loss = ½‖output − feature(target)‖², target (${state.target.join(', ')}); Adam on locations and weights`);

  let result = evaluate(msda, data, state, opts);
  const first = result.loss;
  const distance0 = meanDistance(state);
  let ms = 0;
  const width = String(o.steps).length;
  for (let step = 1; step <= o.steps; step++) {
    descend(state, result, optimizer);
    result = evaluate(msda, data, state, opts);
    ms += result.forwardMs + result.backwardMs;
    console.log(`step ${String(step).padStart(width)}/${o.steps} ${bar(step / o.steps)} loss ${result.loss.toExponential(4)}`);
  }
  const distance = meanDistance(state);
  console.log(`\nfinal loss ${result.loss.toExponential(4)} after ${o.steps} steps (started at ${first.toExponential(4)}, ` +
    `${(first / result.loss).toFixed(1)}× lower)`);
  console.log(`mean distance of the sampling points to the target: ${distance0.toFixed(3)} → ${distance.toFixed(3)} ` +
    `(normalised image units); forward+backward took ${(ms / o.steps).toFixed(3)} ms per step`);
  if (!(result.loss < first)) {
    console.error('train-toy: the loss did not go down');
    process.exitCode = 1;
  }
}

main().catch((e) => {
  console.error(`train-toy: ${e.message}`);
  process.exitCode = 2;
});
