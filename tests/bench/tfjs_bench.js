// The tfjs adapter's cost (ms-deform-attn/tfjs) on the decoder and encoder configs of
// CONTRACT.md, on tfjs-backend-cpu and tfjs-backend-wasm: the op next to the bare API it wraps
// (msda.forward/backward, the copying call as a user makes it, on the same wasm SIMD instance),
// and next to the same operator written with tfjs ops (tests/bench/tfjs_ops_msda.js: a gather of
// the four corners, gradients by autodiff) where that fits in memory and time. One thread,
// minimum over interleaved rounds, ms. Part of `make bench`; alone:
//
//   node tests/bench/tfjs_bench.js [--json] [--configs decoder,encoder] [--rounds N] [--no-tfjs-ops]
//
// Columns: fwd = msDeformAttn(value, locations, weights) (the output tensor made); bwd =
// msDeformAttnBackward(dy, ...) (what tf.grads calls for the op's gradients); grads =
// tf.grads through the op (forward with the tape, then backward: a training step's work) next
// to bare forward + backward.
import v8 from 'node:v8';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import '@tensorflow/tfjs-backend-wasm';
import { msDeformAttn, msDeformAttnBackward, getMsda } from '../../bindings/tfjs.js';
import { msdaWithTfjsOps, registerGradients } from './tfjs_ops_msda.js';
import { DETR_LEVELS as LEVELS, makeCase as benchCase } from './cases.js';

v8.setFlagsFromString('--no-liftoff'); // the kernels on V8's optimizing tier, as in tests/bench/bench.js
tf.enableProdMode();

const argv = process.argv.slice(2);
const json = argv.includes('--json');
const arg = (name, fallback) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : fallback);
const configs = arg('--configs', 'decoder,encoder').split(',');
const roundsArg = arg('--rounds', null);
const withTfjsOps = !argv.includes('--no-tfjs-ops');

// tests/bench/bench.js's inputs (tests/bench/cases.js), in the form this script passes around.
function makeCase(name) {
  const { dims, backwardArgs: { value, samplingLocations, attentionWeights, gradOutput } } = benchCase(name);
  return { dims, value, samplingLocations, attentionWeights, gradOutput };
}

const progress = (text) => { if (process.stderr.isTTY) process.stderr.write(`\r\x1b[K${text}`); };
const now = () => performance.now();
const time = (f) => { const t0 = now(); f(); return now() - t0; };

const msda = getMsda();
const rows = [];
for (const config of configs) {
  const c = makeCase(config);
  const spatialShapes = LEVELS;
  const bare = { value: c.value, samplingLocations: c.samplingLocations, attentionWeights: c.attentionWeights, spatialShapes };
  const bareBackward = { ...bare, gradOutput: c.gradOutput };
  const rounds = Number(roundsArg ?? (config === 'encoder' ? 6 : 20));
  for (const backend of ['cpu', 'wasm']) {
    await tf.setBackend(backend);
    await tf.ready();
    const t = (x) => tf.tensor(x.data, x.shape, 'float32');
    const [v, l, w, dy] = [c.value, c.samplingLocations, c.attentionWeights, c.gradOutput].map(t);
    const options = { spatialShapes };
    const f = (a, b, d) => msDeformAttn(a, b, d, options);
    const calls = {
      bareFwd: () => msda.forward(bare),
      opFwd: () => msDeformAttn(v, l, w, options).dispose(),
      bareBwd: () => msda.backward(bareBackward),
      opBwd: () => tf.dispose(msDeformAttnBackward(dy, v, l, w, options)),
      bareBoth: () => { msda.forward(bare); msda.backward(bareBackward); },
      grads: () => tf.dispose(tf.grads(f)([v, l, w], dy)),
    };
    const best = Object.fromEntries(Object.keys(calls).map((k) => [k, Infinity]));
    for (const call of Object.values(calls)) { call(); call(); } // warm-up
    // Every other round in reverse order: each call follows the others' garbage equally often.
    const order = Object.entries(calls);
    for (let r = 0; r < rounds; r++) {
      progress(`tfjs bench: ${config} tfjs-backend-${backend} ${r + 1}/${rounds}`);
      for (const [k, call] of r % 2 === 0 ? order : order.slice().reverse()) best[k] = Math.min(best[k], time(call));
    }
    const row = { config, backend, dims: c.dims, rounds, ...best, opsFwd: null, opsGrads: null, opsNote: null, opsMaxDiff: null };
    // The tfjs-ops version: the decoder on both backends; the encoder's four gathered corners
    // take 4 x 364 MB forward and more backward, past what tfjs-backend-wasm's heap holds (tried:
    // the forward traps) and minutes per call on tfjs-backend-cpu.
    if (withTfjsOps && config === 'decoder') {
      registerGradients();
      const opsF = (a, b, d) => msdaWithTfjsOps(a, b, d, spatialShapes);
      const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(opsF(v, l, w), f(v, l, w)))).dataSync()[0]);
      row.opsMaxDiff = diff;
      // tens to hundreds of times the op: a couple of rounds tell enough
      const opsRounds = backend === 'cpu' ? 2 : Math.max(2, Math.round(rounds / 5));
      let fwd = Infinity, grads = Infinity;
      for (let r = 0; r < opsRounds; r++) {
        progress(`tfjs bench: ${config} tfjs ops on tfjs-backend-${backend} ${r + 1}/${opsRounds}`);
        fwd = Math.min(fwd, time(() => opsF(v, l, w).dispose()));
        grads = Math.min(grads, time(() => tf.dispose(tf.grads(opsF)([v, l, w], dy))));
      }
      row.opsFwd = fwd;
      row.opsGrads = grads;
    } else if (withTfjsOps) {
      row.opsNote = 'not run: its four gathered corners alone take 4 x 364 MB (more with the tape); on tfjs-backend-wasm ' +
        'its forward stops with "RuntimeError: memory access out of bounds" (out of wasm memory)';
    }
    tf.dispose([v, l, w, dy]);
    rows.push(row);
  }
}
progress('');

const pct = (a, b) => (a / b - 1) * 100;
const round = (x, d = 2) => (x === null ? null : Number(x.toFixed(d)));
if (json) {
  for (const r of rows) {
    const { B, L, Q, H: h, C: ch, NL: nl, P: p } = r.dims;
    console.log(JSON.stringify({ config: r.config, backend: `tfjs-${r.backend}`, threads: 1, fwd_ms: round(r.opFwd), bwd_ms: round(r.opBwd),
      B, L, Q, H: h, C: ch, NL: nl, P: p, bare_fwd_ms: round(r.bareFwd), bare_bwd_ms: round(r.bareBwd),
      fwd_overhead_pct: round(pct(r.opFwd, r.bareFwd), 1), bwd_overhead_pct: round(pct(r.opBwd, r.bareBwd), 1),
      grads_ms: round(r.grads), bare_fwd_bwd_ms: round(r.bareBoth), grads_overhead_pct: round(pct(r.grads, r.bareBoth), 1) }));
    if (r.opsFwd !== null) {
      console.log(JSON.stringify({ config: r.config, backend: `tfjs-ops-${r.backend}`, threads: 1, fwd_ms: round(r.opsFwd),
        bwd_ms: round(r.opsGrads - r.opsFwd), B, L, Q, H: h, C: ch, NL: nl, P: p, grads_ms: round(r.opsGrads),
        fwd_x_op: round(r.opsFwd / r.opFwd, 1), grads_x_op: round(r.opsGrads / r.grads, 1), max_abs_diff: r.opsMaxDiff }));
    }
  }
} else {
  const f = (x, d = 1) => (x === null || x === undefined ? '-' : x.toFixed(d));
  const sign = (x) => `${x >= 0 ? '+' : ''}${x.toFixed(1)}%`;
  const head = ['config', 'tfjs backend', 'bare fwd', 'op fwd', 'over', 'bare bwd', 'op bwd', 'over', 'bare f+b', 'tf.grads', 'over',
    'tfjs-ops fwd', 'tfjs-ops grads', 'x op (fwd / grads)'];
  const table = [head];
  for (const r of rows) {
    table.push([r.config, r.backend, f(r.bareFwd), f(r.opFwd), sign(pct(r.opFwd, r.bareFwd)), f(r.bareBwd), f(r.opBwd),
      sign(pct(r.opBwd, r.bareBwd)), f(r.bareBoth), f(r.grads), sign(pct(r.grads, r.bareBoth)),
      f(r.opsFwd), f(r.opsGrads), r.opsFwd === null ? '-' : `${(r.opsFwd / r.opFwd).toFixed(1)} / ${(r.opsGrads / r.grads).toFixed(1)}`]);
  }
  const widths = head.map((_, i) => Math.max(...table.map((row) => row[i].length)));
  for (const row of table) console.log(row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '));
  const notes = rows.filter((r) => r.opsNote).map((r) => `${r.config} on ${r.backend}`);
  if (notes.length) console.log(`tfjs-ops ${notes.join(', ')}: ${rows.find((r) => r.opsNote).opsNote}`);
  for (const r of rows.filter((x) => x.opsMaxDiff !== null)) {
    console.log(`tfjs-ops ${r.config} on ${r.backend}: output within ${r.opsMaxDiff.toExponential(1)} of the op's (max abs diff)`);
  }
  const enc = rows.filter((r) => r.config === 'encoder');
  if (enc.length) {
    console.log('targets (encoder, this run):');
    for (const r of enc) {
      const worst = Math.max(pct(r.opFwd, r.bareFwd), pct(r.opBwd, r.bareBwd));
      console.log(`  ${worst <= 15 ? 'met    ' : 'NOT met'}  tfjs-backend-${r.backend}: op over the bare API fwd ${sign(pct(r.opFwd, r.bareFwd))}, bwd ${sign(pct(r.opBwd, r.bareBwd))} (<= 15%)`);
    }
  }
}
