// A per-pass cost model of the WebGPU backend on the benchmark's own inputs (tests/bench/cases.js):
// per pass the resources it uses, each over its machine's rate, the largest bounding it, plus a
// launch gap per dispatch and Dawn's zero-fill of the buffers the pass binds first. The GPU check
// (gpucheck.sh) and make bench-webgpu print it beside the measured times.
//
//   node tests/bench/gpu_model.js [--cases encoder,decoder] [--json out.json]
//
// Resources a pass, counted from the kernels and from the data (every sample's in-bounds corners,
// as the narrow-level kernel forms them, and the records per destination pixel):
//  - DRAM bytes, each buffer's unique footprint;
//  - L2 bytes, every L1 miss (an upper bound: no reuse across warps): the forward's and samples'
//    value rows (4C bytes a live corner) and the gather's grad_output row a term;
//  - L1 requests, 32-byte sectors (vec4 loads where C % 4 = 0, as the `vec4` pipelines read);
//  - warp instructions (a warp runs its longest lane: the gather's per-warp loop counted from the
//    data, not from the mean segment);
//  - integer atomics;
//  - a tail: the longest warp's loop, its iterations x the latency of what each waits on, over
//    the pipelining its loads allow (independent loads: PIPELINE deep; a loop whose next access
//    depends on the last store, as the sort's own column: 1), not every access at DRAM latency;
//  - lazy clears: a buffer made per call is zero-filled by Dawn where first bound (toggle
//    lazy_clear_resource_on_first_use), inside that pass's timestamps; scratch is kept between
//    calls (no clear after the first), the results handed out on the GPU (dispatch*, what the
//    profilers time) are made per call: the forward's output, the backward's three gradients;
//  - dispatches: each a launch gap, its passes one after another (a full barrier each).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileSync } from 'node:fs';
import { CONFIGS, makeCase, rng } from './cases.js';
import { sortDigits } from '../../bindings/webgpu/plan.js';
import { ORDER_FUSED } from '../../bindings/webgpu/kernels/walks.js';
import { SCAN_FLAT } from '../../bindings/webgpu/kernels/scan.js';
import { forwardWorkgroups } from '../../bindings/webgpu/kernels/forward.js';

// encoder/N, decoder/N: DETR's levels at 1/N of the side (bench-webgpu's SwiftShader sizes).
export function defineCase(n) {
  const m = /^(encoder|decoder)\/(\d+)$/.exec(n);
  if (m && !CONFIGS[n]) CONFIGS[n] = { ...CONFIGS[m[1]], levels: CONFIGS[m[1]].levels.map(([h, w]) => [Math.ceil(h / m[2]), Math.ceil(w / m[2])]) };
}

// Machine classes: datasheet-class rates, stated so they can be argued with (docs/benchmark.md).
// issue: warp instructions a second (SMs x 4 schedulers x clock); l1: 32-byte sectors a second;
// atom: integer atomics a second at L2; gap: a dependent dispatch's launch and drain; latL1 /
// latL2: one access's latency. The CUDA formula below with the RTX 2060's rates reproduces the
// one public timing of the original kernel (calibrate()): that is what the rates are checked on.
export const MACHINES = {
  iGPU: { bw: 100e9, l2: 400e9, issue: 1e12 / 32, l1: 8 * 4 * 1.3e9, atom: 4e9, gap: 15e-6, latL1: 50e-9, latL2: 300e-9,
    note: 'laptop class: 100 GB/s DRAM, ~400 GB/s L2/LLC, 2 TFLOPS fp32, 8 L1s x 4 sectors x 1.3 GHz, 4e9 atomics/s, 15 us a dependent dispatch' },
  dGPU: { bw: 1.0e12, l2: 3.0e12, issue: 80 * 4 * 1.8e9, l1: 80 * 4 * 1.8e9, atom: 40e9, gap: 6e-6, latL1: 30e-9, latL2: 200e-9,
    note: '1 TB/s class: 80 SMs x 4 schedulers x 1.8 GHz (18 TFLOPS fp32), 3 TB/s L2, 4 sectors/clock/SM, 40e9 atomics/s, 6 us a dependent dispatch' },
  H200: { bw: 4.3e12, l2: 8e12, issue: 132 * 4 * 1.98e9, l1: 132 * 4 * 1.98e9, atom: 100e9, gap: 5e-6, latL1: 20e-9, latL2: 250e-9,
    note: 'H200: 4.3 TB/s (a device-to-device copy), 132 SMs x 4 x 1.98 GHz, 60 MB L2' },
};
// RTX 2060 (calibrate()): 336 GB/s, 30 SMs x 4 x 1.68 GHz.
const RTX2060 = { bw: 336e9, l2: 1.0e12, issue: 30 * 4 * 1.68e9, l1: 30 * 4 * 1.68e9, atom: 15e9, gap: 6e-6, latL1: 30e-9, latL2: 250e-9 };

// Warp instructions a loop iteration after a driver's compiler, from the SPIR-V Dawn hands it
// (Tint adds a bounds clamp to every access and a 64-bit iteration counter to every loop): the
// gather's (2 loads, the multiply and add, the counter) ~26 SPIR-V ops, ~15 instructions; a sort
// pass's record (a load, the digit, its column's read-modify-write, the store, a run's atomics) ~30.
const GATHER_ITER = 15, SORT_ITER = 30;
const PIPELINE = 4;   // independent loads a loop keeps in flight (unrolled or not: a lead)

const ORDER_CHUNK = 32768, ORDER_CELLS = 8192, STRIP = 8;
const f = Math.fround;
const MB = (x) => (x / 1e6).toFixed(1);

export function analyse(name) {
  const c = makeCase(name);
  const levels = CONFIGS[name].levels;
  const [B, Q, H, NL, P] = c.args.attentionWeights.shape;
  const C = c.backwardArgs.gradOutput.shape[2] / H;
  const L = c.args.value.shape[1];
  const S = B * Q * H * NL * P;
  const PIX = B * H * L;
  const starts = []; { let s = 0; for (const [h, w] of levels) { starts.push(s); s += h * w; } }
  const locs = c.args.samplingLocations.data;
  const counts = new Uint32Array(PIX);
  let R = 0;
  const perLevel = levels.map(() => ({ recs: 0 }));
  const rowsTouched = new Uint8Array(B * L * H);
  for (let b = 0; b < B; b++) for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) {
    const [Hl, Wl] = levels[l];
    for (let p = 0; p < P; p++) {
      const s = ((((b * Q + q) * H + h) * NL + l) * P + p);
      const x = locs[2 * s], y = locs[2 * s + 1];
      const px = f(f(x * Wl) - 0.5), py = f(f(y * Hl) - 0.5);
      if (!(px >= -1 && px < Wl && py >= -1 && py < Hl)) continue;
      const x0 = Math.floor(px), y0 = Math.floor(py);
      for (let k = 0; k < 4; k++) {
        const xi = x0 + (k & 1), yi = y0 + (k >> 1);
        if (xi < 0 || xi >= Wl || yi < 0 || yi >= Hl) continue;
        const pix = starts[l] + yi * Wl + xi;
        counts[(b * H + h) * L + pix]++;
        rowsTouched[(b * L + pix) * H + h] = 1;
        R++; perLevel[l].recs++;
      }
    }
  }
  // segments: the longest (the gather's tail), sum n^2 (sum n^2 / R: the segment an average
  // record is in), and the gather's warps: invocation (pixel, channel), so a warp of 32 lanes
  // spans 32 / C pixels where C < 32 and runs the longest one's loop
  let nmax = 0, sumSq = 0, gatherWarpIters = 0;
  for (let i = 0; i < PIX; i++) { const n = counts[i]; nmax = Math.max(nmax, n); sumSq += n * n; }
  if (C >= 32) gatherWarpIters = R * Math.ceil(C / 32);
  else {
    for (let w = 0; w < PIX * C; w += 32) {
      let mx = 0;
      for (let p = Math.floor(w / C); p <= Math.floor(Math.min(PIX * C - 1, w + 31) / C); p++) mx = Math.max(mx, counts[p]);
      gatherWarpIters += mx;
    }
  }
  levels.forEach(([h, w], l) => {
    let mx = 0;
    for (let bh = 0; bh < B * H; bh++) for (let i = 0; i < h * w; i++) mx = Math.max(mx, counts[bh * L + starts[l] + i]);
    perLevel[l].pixels = B * H * h * w; perLevel[l].mean = perLevel[l].recs / perLevel[l].pixels; perLevel[l].max = mx;
  });
  const touched = rowsTouched.reduce((a, v) => a + v, 0);
  // order pass: bands/cols as bindings/webgpu/plan.js sampleGrid
  let rows = 1, cols = 1; for (const [h, w] of levels) { rows = Math.max(rows, h); cols = Math.max(cols, w); }
  const bands = Math.min(Math.ceil(rows / STRIP), ORDER_CELLS - 1); cols = Math.min(cols, Math.floor((ORDER_CELLS - 1) / bands));
  const cells = bands * cols + 1;
  const nChunk = Math.min(Q, ORDER_CHUNK), ranges = B * Math.ceil(Q / ORDER_CHUNK);
  const BQH = B * Q * H;
  return { name, B, Q, H, C, NL, P, L, S, PIX, R, BQH, levels, perLevel, nmax, meanSeg: R / PIX, weightedSeg: R ? sumSq / R : 0, sumSq, gatherWarpIters, touched, cells, nChunk, ranges,
    out: 4 * BQH * C, value: 4 * B * L * H * C, valueTouched: 4 * touched * C, hist: ranges * cells * Math.ceil(nChunk / 256), fwdWgs: forwardWorkgroups(BQH, C) };
}

// Per pass, keyed by the name the backend dispatches it under (what the profilers record): its
// direction, dispatches, invocations, workgroup size, the resources above (dram, l2, sectors,
// warps, atomics, clear: bytes; tail: iterations of the longest warp, tailLat: 'L1' or 'L2', tailDep:
// its loop waits on its last store), DRAM read / write for the table, and chain (the longest run
// of global accesses an invocation makes, as docs/webgpu.md counts them). A pass the table lacks
// prints as "not modelled"; update the table with the passes.
// The backward's prefix sums (gpu.js scan, kernels/scan.js): the order's histogram (none where
// orderWalk or walkCount sums it: ORDER_FUSED blocks at most), the pixel counts, and the sort's
// histogram (a count per digit value per chunk of records) once a pass; each one `scan` dispatch
// from the block totals its producer counted, their own totals scanned first (scanReduce + scan)
// where they are more than SCAN_FLAT blocks.
const orderFused = (a) => Math.ceil(a.hist / 256) <= ORDER_FUSED;
const digitsOf = (a) => sortDigits(a.PIX);
const sortHist = (a) => ((d) => 4 * a.S / d.chunk * 2 ** d.bits)(digitsOf(a));
const scans = (a) => [...(orderFused(a) ? [] : [a.hist]), a.PIX + 1, ...Array(digitsOf(a).passes).fill(sortHist(a))];
const blocksOf = (v) => Math.ceil(v / 256);
// the pixel counts' and the first digit's in one scanTwo dispatch where both are flat
const paired = (a) => blocksOf(sortHist(a)) <= SCAN_FLAT && blocksOf(a.PIX + 1) <= SCAN_FLAT;
const scanSet = (a, two) => ((v, i) => (two ? (paired(a) ? v.slice(i, i + 2) : []) : (paired(a) ? [...v.slice(0, i), ...v.slice(i + 2)] : v)))(scans(a), scans(a).indexOf(a.PIX + 1));
const wide = (a) => scans(a).map(blocksOf).filter((blocks) => blocks > SCAN_FLAT);
const sum = (xs) => xs.reduce((x, y) => x + y, 0);
// a scan invocation's loop: the earlier blocks' totals (or its one scanned total), its block
const chainOf = (v) => (blocksOf(v) > SCAN_FLAT ? 1 : blocksOf(v) - 1) + 256;
const scanChain = (vs) => Math.max(0, ...vs.map(chainOf));
const scanPass = (vs, dispatches, work) => ((v) => ({ dir: 'bwd', dispatches, inv: v / 256, wg: 64, work,
  readB: 4 * v, writeB: 4 * v, dram: 8 * v, l2: 8 * v, sectors: v / 4, warps: v / 32 * 8 + v / 256 / 32 * 1024 * 4, atomics: 0, clear: 0,
  tail: scanChain(vs), tailLat: 'L1', chain: scanChain(vs) }))(sum(vs));

export const FORMULAS = {
  // 4 units a workgroup (kernels/forward.js): a unit forms its samples' taps into workgroup memory,
  // then sums its channels over the taps, one vec4 value load a tap and channel quad
  forward: (a) => ((q4, units) => ({ dir: 'fwd', dispatches: 1, inv: 64 * a.fwdWgs, wg: 64, work: '4 units of (b,q,h, 4-channel quads): taps formed once into workgroup memory, then <= 64 corners x one vec4 load',
    readB: 12 * a.S + a.valueTouched, writeB: a.out, dram: 12 * a.S + a.valueTouched + a.out, l2: 12 * a.S + 4 * a.C * a.R + a.out,
    sectors: a.R * a.C / 8 + 12 * a.S / 32 + a.out / 32, warps: units * 2 * (2 * 130 + a.NL * Math.ceil(a.P / 4) * 16 * 12 + 40), atomics: 0,
    clear: a.out, tail: 4 * (1 + a.NL), tailLat: 'L2', chain: 4 * (2 + a.NL * Math.ceil(a.P / 4)) }))(a.C / 4, Math.ceil(a.BQH / Math.floor(64 / Math.min(Math.ceil(a.C / 4), 64)))),
  orderCount: (a) => ({ dir: 'bwd', dispatches: 1, inv: a.B * a.Q, wg: 256, work: 'the query\'s cell (its first level with a counted point), the cell histogram per tile and its block totals (atomics)',
    readB: 48 * a.B * a.Q, writeB: 4 * a.B * a.Q + 4 * a.hist, dram: 52 * a.B * a.Q + 4 * a.hist, l2: 48 * a.B * a.Q + 8 * a.B * a.Q, sectors: a.B * a.Q * 2,
    warps: a.B * a.Q / 32 * 150, atomics: 2 * a.B * a.Q, clear: 0, tail: 2, tailLat: 'L2', chain: 3 }),
  // the tile's earlier cells (<= 255) and, where fused, the histogram before its count: cached, independent
  orderWalk: (a) => ((fz) => ({ dir: 'bwd', dispatches: 1, inv: fz ? 0 : a.B * a.Q, wg: 256, work: `stable place of each query by cell${fz ? ', its start summed from the histogram' : ''}`,
    readB: 4 * a.B * a.Q + 4 * a.hist, writeB: 4 * a.B * a.Q, dram: 8 * a.B * a.Q + 4 * a.hist, l2: 8 * a.B * a.Q + 4 * a.hist, sectors: a.B * a.Q / 32 * (128 + (fz ? blocksOf(a.hist) + 128 : 0)),
    warps: a.B * a.Q / 32 * (40 + 6 * (128 + (fz ? blocksOf(a.hist) + 128 : 0))), atomics: 0, clear: 0,
    tail: 255 + (fz ? blocksOf(a.hist) + 255 : 0), tailLat: 'L1', chain: 3 + (fz ? blocksOf(a.hist) + 255 : 0) }))(orderFused(a)),
  // vec4 loads of value and grad_output rows: each lane its own row, 4C bytes a live corner
  samples: (a) => ({ dir: 'bwd', dispatches: 1, inv: a.S, wg: 64, work: '1 sample: point(), 4 corners x C-channel dot (vec4 loads), 3 gradients, 4 records',
    readB: 12 * a.S + 4 * a.BQH * a.C + a.valueTouched, writeB: 44 * a.S, dram: 12 * a.S + 4 * a.BQH * a.C + a.valueTouched + 44 * a.S,
    l2: 12 * a.S + 4 * a.C * a.R + 4 * a.C * a.S + 44 * a.S, sectors: a.R * a.C / 8 + a.S * a.C / 8 + 12 * a.S / 32 + a.S * 32 * 4 / 32,
    warps: a.S / 32 * (130 + 4 * (a.C / 4 * 13 + 5) + 40 + 48), atomics: 0, clear: 12 * a.S, tail: 4, tailLat: 'L2', chain: 4 }),
  scanReduce: (a) => ((v) => ({ ...scanPass([], wide(a).length, 'a block of 256 block totals summed'), inv: v / 256, tail: v > 0 ? 256 : 0, chain: v > 0 ? 256 : 0 }))(sum(wide(a))),
  scan: (a) => scanPass([...scanSet(a, false), ...wide(a)], scanSet(a, false).length + wide(a).length, 'the earlier blocks\' totals (<= 1,024), a block of 256 values scanned'),
  scanTwo: (a) => scanPass(scanSet(a, true), scanSet(a, true).length ? 1 : 0, 'the pixel counts\' and the first digit\'s scans, one dispatch'),
  // the sort (kernels/sort.js): a chunk of records an invocation, in order (its own column of the
  // histogram: each record's read-modify-write waits on the last); one count pass, passes - 1
  // scatters, the last pass writing the gather's terms
  sortCount: (a) => ((d) => ({ dir: 'bwd', dispatches: 1, inv: orderFused(a) ? 0 : 4 * a.S / d.chunk, wg: 64, work: `${d.chunk} records in walk order: digit counts in its own column, pixel counts (a run at once), block totals`,
    readB: 32 * a.S + 4 * a.B * a.Q, writeB: 4 * sortHist(a), dram: 32 * a.S + 4 * a.B * a.Q + 4 * sortHist(a) + 4 * a.PIX, l2: 32 * a.S + 8 * sortHist(a), sectors: 4 * a.S + 2 * sortHist(a) / 8,
    warps: 4 * a.S / 32 * SORT_ITER, atomics: a.R / 2 + sortHist(a) / 4, clear: 0, tail: d.chunk, tailLat: 'L1', tailDep: true, chain: 3 * d.chunk + 2 }))(digitsOf(a)),
  // in place of orderWalk and sortCount where the order's histogram is summed (the benchmark's
  // problems are one part): a (pair, query) an invocation, orderWalk's loads then its records'
  walkCount: (a) => ((d, per) => ({ dir: 'bwd', dispatches: 1, inv: orderFused(a) ? a.B * a.H * a.Q : 0, wg: 64, work: `its query's place in the walk (orderWalk's), its ${per} records counted at their places in walk order (atomics a run)`,
    readB: 32 * a.S + 4 * a.B * a.Q + 4 * a.hist, writeB: 4 * a.B * a.Q + 4 * sortHist(a), dram: 32 * a.S + 8 * a.B * a.Q + 4 * a.hist + 4 * sortHist(a) + 4 * a.PIX,
    l2: 32 * a.S + 4 * a.hist + 8 * a.R, sectors: 4 * a.S + a.B * a.H * a.Q / 32 * (blocksOf(a.hist) + 256), warps: a.B * a.H * a.Q / 32 * (40 + 6 * (blocksOf(a.hist) + 256) + per * 12),
    atomics: 2 * a.R, clear: 0, tail: blocksOf(a.hist) + 255 + per, tailLat: 'L1', chain: 3 + blocksOf(a.hist) + 255 + 2 * per }))(digitsOf(a), 4 * a.NL * a.P),
  sortScatter: (a) => ((d, k) => ({ dir: 'bwd', dispatches: k, inv: k * 4 * a.S / d.chunk, wg: 64, work: `${d.chunk} records: each to its digit's next place, the next digit and its block totals counted (${k} passes)`,
    readB: k * (8 * a.R + 4 * sortHist(a)), writeB: k * (8 * a.R + 4 * sortHist(a)), dram: k * (16 * a.R + 8 * sortHist(a)), l2: k * (8 * a.R + 32 * a.R + 8 * sortHist(a)),
    sectors: k * (a.R / 4 + 2 * a.R), warps: k * 4 * a.S / 32 * SORT_ITER, atomics: k * a.R, clear: 0, tail: d.chunk, tailLat: 'L1', tailDep: true, chain: 3 * d.chunk }))(digitsOf(a), digitsOf(a).passes - 1),
  sortTerms: (a) => ((d) => ({ dir: 'bwd', dispatches: 1, inv: 4 * a.S / d.chunk, wg: 64, work: `${d.chunk} records: each to its place as (a*w_k, grad_output row)`,
    readB: 16 * a.R + 16 * a.S + 4 * a.B * a.Q, writeB: 8 * a.R, dram: 24 * a.R + 16 * a.S + 4 * a.B * a.Q, l2: 8 * a.R + 32 * a.R + 32 * a.R + 8 * a.R,
    sectors: a.R / 4 + 4 * a.R, warps: 4 * a.S / 32 * (SORT_ITER + 10), atomics: 0, clear: 0, tail: d.chunk, tailLat: 'L1', tailDep: true, chain: 4 * d.chunk }))(digitsOf(a)),
  // (pixel, channel) an invocation: its segment's terms (broadcast to the pixel's channel lanes)
  // and a grad_output row a term from L2, loads independent; the warps' loops from the data
  gather: (a) => ({ dir: 'bwd', dispatches: 1, inv: a.PIX * a.C, wg: 64, work: '(pixel, channel): n terms x grad_output, summed in order',
    readB: 8 * a.R + 4 * a.BQH * a.C + 4 * a.PIX, writeB: a.value, dram: 8 * a.R + 4 * a.BQH * a.C + 4 * a.PIX + a.value, l2: 8 * a.R + 4 * a.C * a.R + a.value,
    sectors: a.R * (1 + a.C / 8), warps: a.gatherWarpIters * GATHER_ITER + a.PIX * a.C / 32 * 20, atomics: 0, clear: a.value, tail: a.nmax, tailLat: 'L2', chain: 3 + 2 * a.nmax }),
};

export function passes(a, names = Object.keys(FORMULAS)) {
  return names.filter((n) => FORMULAS[n]).map((name) => ({ name, ...FORMULAS[name](a) })).filter((p) => p.inv > 0);
}

/** A pass's time on machine m: the largest resource's, its dispatches' gaps, its lazy clears (bytes at DRAM rate). */
export function estimate(p, m) {
  const lat = p.tailLat === 'L1' ? m.latL1 : m.latL2;
  const terms = {
    DRAM: p.dram / m.bw, L2: p.l2 / m.l2, 'L1 requests': p.sectors / m.l1, issue: p.warps / m.issue, atomics: p.atomics / m.atom,
    tail: (p.tail ?? 0) * lat / (p.tailDep ? 1 : PIPELINE),
  };
  const [bound, core] = Object.entries(terms).sort((x, y) => y[1] - x[1])[0];
  const gaps = (p.inv > 0 ? p.dispatches ?? 1 : 0) * m.gap, clear = (p.clear ?? 0) / m.bw;
  return { t: core + gaps + clear, core, bound, gaps, clear, terms };
}

// The original Deformable DETR CUDA kernel (ms_deform_attn_cuda.cuh) in the same terms, for the
// GPU check's comparison: forward a thread per (b,q,h,c) (a warp: one (b,q,h)'s 32 channels; ~60
// warp instructions a sample, the coordinates formed once per channel lane); backward at C = 32
// blocks of 32 threads, per sample the bilinear backward, a float atomicAdd per live corner and
// channel into grad_value (zeroed first), and the three gradients reduced over the lanes by one
// thread (~350 warp instructions a sample).
export function cudaPasses(a) {
  const { S, R, BQH, C } = a, out = 4 * BQH * C, gvalue = a.value;
  return [
    { name: 'CUDA forward', dir: 'fwd', dispatches: 1, inv: BQH * C, dram: 12 * S + a.valueTouched + out, l2: 12 * S + 4 * C * R + out, sectors: S * 3 + R * C / 8, warps: S * 60, atomics: 0, clear: 0, tail: 16, tailLat: 'L2' },
    { name: 'CUDA backward', dir: 'bwd', dispatches: 2, inv: BQH * C, dram: 24 * S + a.valueTouched + out + 3 * gvalue, l2: 12 * S + 8 * C * R + gvalue,
      sectors: S * 3 + R * C / 4, warps: S * 350, atomics: R * C / 8, clear: 0, tail: 16, tailLat: 'L2' },
  ];
}

// The check of the rates: rziga/msda-triton's README measures the original kernel on an RTX 2060
// (B 4, Q 10,000, H 8, C 32, levels 64², 32², 16², 8², P 4, locations uniform in [0, 1)): forward
// 5.37 ms, forward + backward 28.04 ms. Uniform locations over a 22 MB value miss its 3 MB L2, so
// there every corner row and every grad_value atomic goes through DRAM.
export function calibrate() {
  const B = 4, Q = 10000, H = 8, C = 32, P = 4, lv = [64, 32, 16, 8], rand = rng(7);
  let S = 0, R = 0;
  for (let i = 0; i < B * Q * H; i++) for (const n of lv) for (let p = 0; p < P; p++) {
    S++;
    const px = f(f(rand() * n) - 0.5), py = f(f(rand() * n) - 0.5);
    if (!(px > -1 && py > -1 && px < n && py < n)) continue;
    const x0 = Math.floor(px), y0 = Math.floor(py);
    for (let k = 0; k < 4; k++) { const x = x0 + (k & 1), y = y0 + (k >> 1); if (x >= 0 && y >= 0 && x < n && y < n) R++; }
  }
  const out = 4 * B * Q * H * C;
  const fwd = { dispatches: 1, inv: 1, dram: 12 * S + 4 * C * R + out, l2: 12 * S + 4 * C * R + out, sectors: S * 3 + R * 4, warps: S * 60, atomics: 0, tail: 16, tailLat: 'L2' };
  const bwd = { dispatches: 2, inv: 1, dram: 24 * S + 4 * C * R + out + 8 * C * R, l2: 12 * S + 12 * C * R, sectors: S * 3 + R * 8, warps: S * 350, atomics: R * 4, tail: 16, tailLat: 'L2' };
  return { S, R, model: { fwd: estimate(fwd, RTX2060).t, bwd: estimate(bwd, RTX2060).t }, measured: { fwd: 5.37e-3, bwd: 28.04e-3 - 5.37e-3 } };
}

function main(argv) {
  const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
  const caseNames = opt('--cases', 'encoder,decoder').split(',');
  const report = [];
  const ms = (t) => (t * 1e3).toFixed(3);
  const kinds = Object.keys(MACHINES);
  for (const [k, m] of Object.entries(MACHINES)) console.log(`${k}: ${m.note}`);
  for (const name of caseNames) {
    defineCase(name);
    const a = analyse(name);
    const ps = passes(a);
    console.log(`\n## ${name}: B ${a.B}, N_q ${a.Q}, H ${a.H}, C ${a.C}, levels ${JSON.stringify(a.levels)}, P ${a.P}; samples ${a.S}, in-bounds corner records ${a.R} (${(a.R / a.S).toFixed(2)} per sample), value rows touched ${a.touched} of ${a.B * a.L * a.H}`);
    console.log(`records per pixel by level: ${a.perLevel.map((l, i) => `L${i} mean ${l.mean.toFixed(1)} max ${l.max}`).join('; ')}`);
    console.log(`segments: mean ${a.meanSeg.toFixed(1)} a pixel, ${a.weightedSeg.toFixed(0)} a record (sum n^2 / R: the segment an average record is summed in), worst ${a.nmax} (the gather's tail); the gather's warps run ${(a.gatherWarpIters / 1e6).toFixed(2)} M loop iterations`);
    console.log(`| pass | dispatches | invocations | work per invocation | DRAM read / write MB | L2 MB | longest chain | lazy clear MB | ${kinds.map((k) => `${k} ms (bound)`).join(' | ')} |`);
    console.log(`|---|---|---|---|---|---|---|---|${kinds.map(() => '---').join('|')}|`);
    const tot = {};
    for (const p of ps) {
      const e = Object.fromEntries(kinds.map((k) => [k, estimate(p, MACHINES[k])]));
      for (const k of kinds) {
        for (const [what, v] of [['', e[k].t], [' clear', e[k].clear], [' gaps', e[k].gaps]]) tot[`${p.dir} ${k}${what}`] = (tot[`${p.dir} ${k}${what}`] ?? 0) + v;
      }
      tot[`${p.dir} dispatches`] = (tot[`${p.dir} dispatches`] ?? 0) + p.dispatches;
      console.log(`| ${p.name} | ${p.dispatches} | ${Math.round(p.inv).toLocaleString('en')} | ${p.work} | ${MB(p.readB)} / ${MB(p.writeB)} | ${MB(p.l2)} | ${Math.round(p.chain).toLocaleString('en')} | ${MB(p.clear)} | ${kinds.map((k) => `${ms(e[k].t)} (${e[k].bound})`).join(' | ')} |`);
      report.push({ case: name, ...p, est: e });
    }
    const floor = (dir) => {
      const value = a.valueTouched, locs = 8 * a.S, w = 4 * a.S, out = a.out;
      return dir === 'fwd' ? value + locs + w + out : value + locs + w + out /* grad_output */ + a.value /* grad_value */ + locs + w;
    };
    const cuda = Object.fromEntries(cudaPasses(a).map((p) => [p.dir, p]));
    for (const dir of ['fwd', 'bwd']) {
      console.log(`${dir}: ${tot[`${dir} dispatches`]} dispatches; ${kinds.map((k) => `${k} ${ms(tot[`${dir} ${k}`])} ms (launch gaps ${ms(tot[`${dir} ${k} gaps`])}, lazy clears of the results made per call ${ms(tot[`${dir} ${k} clear`])})`).join('; ')}`);
      console.log(`  DRAM floor ${MB(floor(dir))} MB: ${kinds.map((k) => `${k} ${ms(floor(dir) / MACHINES[k].bw)} ms`).join(', ')}; the original CUDA kernel, modelled alike: ${kinds.map((k) => `${k} ${ms(estimate(cuda[dir], MACHINES[k]).t)} ms`).join(', ')}`);
    }
  }
  const c = calibrate();
  console.log(`\ncheck of the rates: the CUDA formula on rziga/msda-triton's RTX 2060 benchmark (S ${c.S.toLocaleString('en')}, R ${c.R.toLocaleString('en')}): forward ${ms(c.model.fwd)} ms modelled, ${ms(c.measured.fwd)} measured; backward ${ms(c.model.bwd)} modelled, ${ms(c.measured.bwd)} measured`);
  if (opt('--json')) writeFileSync(opt('--json'), JSON.stringify({ machines: MACHINES, calibration: c, report }, null, 1));
}
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
