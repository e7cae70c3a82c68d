// A per-pass work and traffic model of the WebGPU backend on the benchmark's own inputs
// (tests/bench/cases.js), and time estimates for two GPU classes with a max(bandwidth, issue,
// L1-request, dependent chain) model. The GPU check (gpucheck.sh) prints it beside the times.
//
//   node tests/bench/gpu_model.js [--cases encoder,decoder] [--json out.json]
//
// What it counts from the data: every sample's in-bounds corners (zeros padding, align_corners
// false, float32 positions as the narrow-level kernel forms them), the records per destination
// pixel (the backward's segments), heap-sort work per pixel (sift levels, from n log2 n) and its
// worst thread and worst 32-wide warp, and the order pass's serial chain.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFileSync } from 'node:fs';
import { CONFIGS, makeCase } from './cases.js';
import { sortDigits } from '../../bindings/webgpu/plan.js';
import { ORDER_FUSED } from '../../bindings/webgpu/kernels/walks.js';
import { SCAN_FLAT } from '../../bindings/webgpu/kernels/scan.js';

// encoder/N, decoder/N: DETR's levels at 1/N of the side (bench-webgpu's SwiftShader sizes).
export function defineCase(n) {
  const m = /^(encoder|decoder)\/(\d+)$/.exec(n);
  if (m && !CONFIGS[n]) CONFIGS[n] = { ...CONFIGS[m[1]], levels: CONFIGS[m[1]].levels.map(([h, w]) => [Math.ceil(h / m[2]), Math.ceil(w / m[2])]) };
}

// Machine classes (assumptions: docs/benchmark.md, the GPU check).
export const MACHINES = {
  'iGPU': { bw: 100e9, lanes: 1.0e12, l1: 8 * 1.3e9, lat: 1.0e-6, launch: 10e-6, note: '100 GB/s, 2 TFLOPS fp32 (1e12 lane-instr/s), 8 L1 request-ports x 1.3 GHz, 1 us per dependent global access' },
  'dGPU': { bw: 1.0e12, lanes: 15e12, l1: 80 * 1.8e9, lat: 0.5e-6, launch: 5e-6, note: '1 TB/s, 30 TFLOPS (15e12 lane-instr/s), 80 SMs x 1.8 GHz L1 request-ports, 0.5 us per dependent access (0.2 us if L2-resident)' },
};

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
  // segments: per level mean / max; heap sort sift levels ~ n (build) + sum_{e<n} log2(e)
  const siftLevels = (n) => (n < 2 ? 0 : n + n * Math.log2(n) - 1.44 * n);
  let sortWork = 0, sortWarpWork = 0, nmax = 0, sumSq = 0;
  for (let bh = 0; bh < B * H; bh++) {
    for (let i0 = 0; i0 < L; i0 += 32) {
      let wmax = 0;
      for (let i = i0; i < Math.min(L, i0 + 32); i++) {
        const n = counts[bh * L + i];
        const w = siftLevels(n);
        sortWork += w; wmax = Math.max(wmax, w); nmax = Math.max(nmax, n); sumSq += n * n;
      }
      sortWarpWork += 32 * wmax;
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
  return { name, B, Q, H, C, NL, P, L, S, PIX, R, BQH, levels, perLevel, nmax, meanSeg: R / PIX, sortWork, sortWarpWork, sumSq, touched, cells, nChunk, ranges,
    out: 4 * BQH * C, value: 4 * B * L * H * C, valueTouched: 4 * touched * C, hist: ranges * cells * Math.ceil(nChunk / 256) };
}

// Per pass, keyed by the name the backend dispatches it under (what the profiler records): its
// direction, invocations, workgroup size, lane-instructions per invocation (rough counts from the
// kernels), DRAM bytes (unique footprint), L1 request wavefronts (distinct 128-B lines per warp
// instruction, summed) and the longest dependent chain (dependent global accesses of the longest
// invocation). A pass the table lacks is reported as unmodelled; update the table with the passes.
// The backward's prefix sums (gpu.js scan, kernels/scan.js): the order's histogram (none where
// orderWalk sums it: ORDER_FUSED blocks at most), the pixel counts, and the sort's histogram (a
// count per digit value per chunk of records) once a pass; each one `scan` dispatch from the
// block totals its producer counted, their own totals scanned first (scanReduce + scan) where
// they are more than SCAN_FLAT.
const scans = (a) => ((d) => [...(orderFused(a) ? [] : [a.hist]), a.PIX + 1, ...Array(d.passes).fill(4 * a.S / d.chunk * 2 ** d.bits)])(sortDigits(a.PIX));
const orderFused = (a) => Math.ceil(a.hist / 256) <= ORDER_FUSED;
const blocksOf = (v) => Math.ceil(v / 256);
// the pixel counts' and the first digit's in one scanTwo dispatch where both are flat
const paired = (a) => ((v) => blocksOf(v.at(-sortDigits(a.PIX).passes)) <= SCAN_FLAT && blocksOf(a.PIX + 1) <= SCAN_FLAT)(scans(a));
const scanSet = (a, two) => ((v, i) => (two ? (paired(a) ? v.slice(i, i + 2) : []) : (paired(a) ? [...v.slice(0, i), ...v.slice(i + 2)] : v)))(scans(a), scans(a).indexOf(a.PIX + 1));
const wide = (a) => scans(a).map(blocksOf).filter((blocks) => blocks > SCAN_FLAT);
const sum = (xs) => xs.reduce((x, y) => x + y, 0);
// a scan invocation's chain: the earlier blocks' totals (or its one scanned total), its block
const chainOf = (v) => (blocksOf(v) > SCAN_FLAT ? 1 : blocksOf(v) - 1) + 256;
const scanChain = (vs) => Math.max(0, ...vs.map(chainOf));

export const FORMULAS = {
  // 4 units in turn a workgroup (kernels/forward.js TURNS); a unit's chain: locations, its point
  // groups' value loads (a loop, 4 on DETR), the store
  forward: (a) => ({ dir: 'fwd', inv: a.BQH * a.C / 16, wg: 64, work: '4 units of (b,q,h,4 ch): the workgroup forms each sample\'s taps once (workgroup memory), then <=64 corners x one vec4 load',
    instr: 4 * ((4 * a.S / (a.BQH * a.C)) * 110 + 16 * 2 * 4 + (a.R / a.S) * 16 * 10 + 40),
    readB: 12 * a.S + a.valueTouched, writeB: a.out, wave: a.S / 32 * 3 + (a.BQH / 4) * ((a.R / a.S) * 16 * 4), chain: 4 * (2 + a.NL * Math.ceil(a.P / 4)) }),
  orderCount: (a) => ({ dir: 'bwd', inv: a.B * a.Q, wg: 256, work: 'query cell from the first valid level, cell histogram per tile and its block totals (atomics)', instr: 150, readB: 48 * a.B * a.Q, writeB: 4 * a.B * a.Q + 4 * a.hist, wave: a.B * a.Q / 32 * 12 * 4, chain: 3, atomics: 2 * a.B * a.Q }),
  // where fused, the earlier blocks' totals and the block's earlier counts summed (cached loads)
  orderWalk: (a) => ((f) => ({ dir: 'bwd', inv: f ? 0 : a.B * a.Q, wg: 256, work: `stable place of each query by cell${f ? ', its start summed from the histogram' : ''}`, instr: 40 + (f ? 4 * (a.hist / 256 + 256) : 0),
    readB: 4 * a.B * a.Q + 4 * a.hist, writeB: 8 * a.B * a.Q, wave: a.B * a.Q / 32 * 4, chain: 3 + (f ? Math.ceil(a.hist / 256) + 255 : 0) }))(orderFused(a)),
  samples: (a) => ({ dir: 'bwd', inv: a.S, wg: 64, work: '1 sample: point(), 4 corners x C-ch dot(gout,value), 4 records', instr: 110 + 4 * a.C * 5 + 40,
    readB: 12 * a.S + 4 * a.BQH * a.C + a.valueTouched, writeB: 44 * a.S, wave: a.S / 32 * (a.C * 32 * (a.R / a.S) + 4 * a.C * 2), chain: 4 }),
  // every prefix sum of a backward (kernels/scan.js): the order's histogram, the pixel counts, the
  // sort's histogram once a pass; 256 consecutive values an invocation
  scanReduce: (a) => ((v) => ({ dir: 'bwd', inv: v / 256, wg: 64, work: 'a block of 256 block totals summed', instr: 256 * 4, readB: 4 * v, writeB: v / 64, wave: v / 32, chain: v > 0 ? 256 : 0, dispatches: wide(a).length }))(sum(wide(a))),
  scan: (a) => ((vs) => ((v) => ({ dir: 'bwd', inv: v / 256, wg: 64, work: 'the earlier blocks\' totals (<= 1,024), a block of 256 values scanned', instr: 256 * 6 + 1024, readB: 4 * v, writeB: 8 * v, wave: 2 * v / 32,
    chain: scanChain([...vs, ...wide(a)]), chainTotal: sum([...vs, ...wide(a)].map(chainOf)), dispatches: vs.length + wide(a).length }))(sum(vs) + sum(wide(a))))(scanSet(a, false)),
  scanTwo: (a) => ((vs) => ({ dir: 'bwd', inv: sum(vs) / 256, wg: 64, work: 'the pixel counts\' and the first digit\'s scans, one dispatch', instr: 256 * 6 + 1024, readB: 4 * sum(vs), writeB: 8 * sum(vs), wave: 2 * sum(vs) / 32,
    chain: scanChain(vs), dispatches: vs.length ? 1 : 0 }))(scanSet(a, true)),
  // the sort (kernels/sort.js): a chunk of 256 records an invocation, in order; one count pass,
  // passes - 1 scatters, the last pass writing the gather's terms (sortDigits: passes by PIX)
  sortCount: (a) => ((d) => ({ dir: 'bwd', inv: orderFused(a) ? 0 : 4 * a.S / d.chunk, wg: 64, work: `${d.chunk} records in walk order: digit counts in its own column, pixel counts (a run at once), the column's and the counts' block totals`, instr: d.chunk * 34,
    readB: 32 * a.S + 4 * a.B * a.Q, writeB: 4 * (4 * a.S / d.chunk * 2 ** d.bits), wave: 4 * a.S / 32 * 4, chain: 3 * d.chunk + 2, atomics: a.R / 2 + 4 * a.S }))(sortDigits(a.PIX)),
  // in place of orderWalk and sortCount where the order's histogram is summed (the benchmark's
  // problems are one part): a (pair, query) an invocation, orderWalk's loads then its records'
  walkCount: (a) => ((d, per) => ({ dir: 'bwd', inv: orderFused(a) ? a.B * a.H * a.Q : 0, wg: 64, work: `its query's place in the walk (orderWalk's), its ${per} records counted at their places in walk order (atomics a run)`,
    instr: 40 + 4 * (a.hist / 256 + 256) + per * 30, readB: 32 * a.S + 4 * a.B * a.Q + 4 * a.hist, writeB: 4 * a.B * a.Q + 4 * (4 * a.S / d.chunk * 2 ** d.bits),
    wave: 4 * a.S / 32 * 4 + a.B * a.H * a.Q / 32 * 4, chain: 3 + Math.ceil(a.hist / 256) + 255 + 2 * per, atomics: 2 * a.R }))(sortDigits(a.PIX), 4 * a.NL * a.P),
  sortScatter: (a) => ((d, k) => ({ dir: 'bwd', inv: k * 4 * a.S / d.chunk, wg: 64, work: `${d.chunk} records: each to its digit's next place, the next digit and its block totals counted (${k} passes)`, instr: d.chunk * 27,
    readB: k * (8 * a.R + 16 * a.S), writeB: k * (8 * a.R + 16 * a.S), wave: k * a.R / 32 * 36, chain: 3 * d.chunk, atomics: k * a.R / 2, dispatches: k }))(sortDigits(a.PIX), sortDigits(a.PIX).passes - 1),
  sortTerms: (a) => ((d) => ({ dir: 'bwd', inv: 4 * a.S / d.chunk, wg: 64, work: `${d.chunk} records: each to its place as (a*w_k, grad_output row)`, instr: d.chunk * 35,
    readB: 16 * a.R + 16 * a.S + 4 * a.B * a.Q, writeB: 8 * a.R, wave: a.R / 32 * 36, chain: 4 * d.chunk }))(sortDigits(a.PIX)),
  gather: (a) => ({ dir: 'bwd', inv: a.PIX * a.C, wg: 64, work: '(pixel, channel): n terms x gout + 1 FMA', instr: 12 * a.R / a.PIX + 30,
    readB: 32 * a.R + 4 * a.BQH * a.C + 8 * a.PIX, writeB: a.value, wave: 3 * a.R + 2 * a.PIX, chain: 3 * a.nmax + 2 }),
};

export function passes(a, names = Object.keys(FORMULAS)) {
  return names.filter((n) => FORMULAS[n]).map((name) => ({ name, ...FORMULAS[name](a) })).filter((p) => p.inv > 0);
}

export function estimate(p, m) {
  const lanes = p.instrWarp ?? p.instr * p.inv;
  const tBw = (p.readB + p.writeB) / m.bw;
  const tIssue = lanes / m.lanes;
  const tL1 = p.wave ? p.wave / m.l1 : 0;
  const tChain = (p.chainTotal ?? p.chain * (p.dispatches ?? 1)) * m.lat;   // one chain per dispatch, one after the other
  const t = Math.max(tBw, tIssue, tL1, tChain) + (p.inv > 0 ? (p.dispatches ?? 1) * m.launch : 0);
  const bound = [['bandwidth', tBw], ['issue', tIssue], ['L1 requests', tL1], ['serial chain', tChain]].sort((x, y) => y[1] - x[1])[0][0];
  return { t, tBw, tIssue, tL1, tChain, bound };
}

function main(argv) {
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : dflt; };
const caseNames = opt('--cases', 'encoder,decoder').split(',');
const report = [];
for (const name of caseNames) {
  defineCase(name);
  const a = analyse(name);
  const ps = passes(a);
  console.log(`\n## ${name}: B ${a.B}, N_q ${a.Q}, H ${a.H}, C ${a.C}, levels ${JSON.stringify(a.levels)}, P ${a.P}; samples ${a.S}, in-bounds corner records ${a.R} (${(a.R / a.S).toFixed(2)} per sample), value rows touched ${a.touched} of ${a.B * a.L * a.H}`);
  console.log(`records per pixel by level: ${a.perLevel.map((l, i) => `L${i} mean ${l.mean.toFixed(1)} max ${l.max}`).join('; ')}; worst segment ${a.nmax}`);
  console.log(`records per pixel: mean ${a.meanSeg.toFixed(1)}, worst ${a.nmax} (the gather's dependent chain)`);
  console.log('| pass | invocations | wg | work per invocation | DRAM read MB | DRAM write MB | serial chain (dep. accesses) | iGPU ms (bound) | dGPU ms (bound) |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  const tot = {};
  for (const p of ps) {
    const e = Object.fromEntries(Object.entries(MACHINES).map(([k, m]) => [k, estimate(p, m)]));
    for (const k of Object.keys(MACHINES)) tot[`${p.dir} ${k}`] = (tot[`${p.dir} ${k}`] ?? 0) + e[k].t;
    console.log(`| ${p.name} | ${p.inv.toLocaleString('en')} | ${p.wg} | ${p.work} | ${MB(p.readB)} | ${MB(p.writeB)} | ${Math.round(p.chain).toLocaleString('en')} | ${(e.iGPU.t * 1e3).toFixed(3)} (${e.iGPU.bound}) | ${(e.dGPU.t * 1e3).toFixed(3)} (${e.dGPU.bound}) |`);
    report.push({ case: name, ...p, est: e });
  }
  const ideal = (dir) => {
    const value = 4 * a.touched * a.C, locs = 8 * a.S, w = 4 * a.S, out = 4 * a.B * a.Q * a.H * a.C;
    return dir === 'fwd' ? value + locs + w + out : value + locs + w + out /* grad_output */ + 4 * a.B * a.L * a.H * a.C /* grad_value */ + locs + w;
  };
  for (const dir of ['fwd', 'bwd']) {
    const ib = ideal(dir);
    console.log(`${dir}: model total iGPU ${(tot[`${dir} iGPU`] * 1e3).toFixed(2)} ms, dGPU ${(tot[`${dir} dGPU`] * 1e3).toFixed(2)} ms; ideal bytes ${MB(ib)} MB -> ${(ib / MACHINES.iGPU.bw * 1e3).toFixed(2)} ms iGPU, ${(ib / MACHINES.dGPU.bw * 1e3).toFixed(3)} ms dGPU`);
  }
  const sizes = { value: 4 * a.B * a.L * a.H * a.C, locations: 8 * a.S, weights: 4 * a.S, output: 4 * a.B * a.Q * a.H * a.C, taps: 32 * a.S, records: 32 * a.S, sorted: 16 * a.S, grads: 12 * a.S, counts: 4 * (a.PIX + 1), offsets: 4 * (a.PIX + 1), 'order+ranks': 8 * a.B * a.Q, starts: 4 * a.ranges * (a.cells + 1) };
  console.log(`buffers (MB): ${Object.entries(sizes).map(([k, v]) => `${k} ${MB(v)}`).join(', ')}`);
}
if (opt('--json')) writeFileSync(opt('--json'), JSON.stringify({ machines: MACHINES, report }, null, 1));
}
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main(process.argv.slice(2));
