// Plans of the WebGPU backend's calls: the pipelines' variant a problem allows, the problem's
// words for the programs (kernels/problem.js, binding `problem`), and every buffer and pass a
// call makes, checked against the device's limits before anything is made.

import { OPTIONS, optionNumber } from '../core/options.js';
import { typedArrayLength } from '../core/typed.js';
import { HalfBits } from '../core/half.js';
import { BACKWARD_STRIP, FLOAT_SIDE, ORDER_CELLS, ORDER_CHUNK, SCAN_BLOCK, WORKGROUP, encodeProblem } from './kernels/problem.js';
import { FORWARD, forwardWorkgroups } from './kernels/forward.js';
import { SAMPLES } from './kernels/backward.js';
import { SCAN, SCAN_REDUCE, SCAN_TWO } from './kernels/scan.js';
import { SORT_BITS, SORT_COUNT, SORT_SCATTER, SORT_TERMS, WALK_COUNT, sortChunk } from './kernels/sort.js';
import { ORDER_COUNT, ORDER_FUSED, ORDER_WALK, ORDER_TILE } from './kernels/walks.js';
import { GATHER } from './kernels/segments.js';
import { WIDEN, halfFlags } from './kernels/half.js';
import { gridSide } from './gpu.js';
import { GpuTensor, halfInPlace, product } from './tensors.js';

// The programs a backward may dispatch: compiled (once per variant) before its first call runs
// (with WIDEN where a half input cannot be bound as its halves, NARROW where the results are half).
const BACKWARD_PROGRAMS = [ORDER_COUNT, SCAN_REDUCE, SCAN, SCAN_TWO, ORDER_WALK, SAMPLES, SORT_COUNT, SORT_SCATTER, SORT_TERMS, GATHER];
const FUSED_WALK_PROGRAMS = [ORDER_COUNT, SCAN_REDUCE, SCAN, SCAN_TWO, SAMPLES, WALK_COUNT, SORT_SCATTER, SORT_TERMS, GATHER];

const INT32_MAX = 2 ** 31 - 1;
const TOTALS_ALIGN = 64;   // words: 256 bytes, the most minStorageBufferOffsetAlignment may be

// The grid of cells the CPU backward walks queries by (src/kernel/walks.h sample_grid): the
// order passes (kernels/walks.js) sort each batch's queries by it on the GPU.
export function sampleGrid(problem) {
  let rows = 1, cols = 1;
  for (const [h, w] of problem.spatialShapes) {
    rows = Math.max(rows, h);
    cols = Math.max(cols, w);
  }
  const bands = Math.min(Math.ceil(rows / BACKWARD_STRIP), ORDER_CELLS - 1);
  return { bands, cols: Math.min(cols, Math.floor((ORDER_CELLS - 1) / bands)) };
}

// A level whose positions are formed in float (geometry.h axis4) and whose element offsets fit i32.
function narrowLevel(h, w, px) {
  return h <= FLOAT_SIDE && w <= FLOAT_SIDE && (w + 1) * (h + 1) <= Math.floor(INT32_MAX / px);
}

const pixelStride = (problem) => (problem.valueLayout === 'BLNC' ? problem.numHeads * problem.channels : problem.channels);

// Each input by the name the passes bind it (kernels/half.js halfInputs).
const BOUND_AS = { value: 'value', samplingLocations: 'locs', attentionWeights: 'weights', gradOutput: 'gout' };

// The pipelines' variant a call allows (kernels/problem.js program()): `narrow` when every
// level is narrow, so that the wide levels' integer code is left out; `vec4` when the channels
// are a multiple of 4, so that value and grad_output rows are read as vec4s; each input bound
// as halves (tensors.js halfInPlace) flagged float16 or bfloat16 (kernels/half.js halfFlags).
export function variantOf(gpu, problem, inputs = {}) {
  const px = pixelStride(problem);
  const variant = { narrow: problem.spatialShapes.every(([h, w]) => narrowLevel(h, w, px)), vec4: problem.channels % 4 === 0 };
  for (const [name, data] of Object.entries(inputs)) {
    const [f16, bf16] = halfFlags(BOUND_AS[name]);
    if (halfInPlace(gpu, name, data)) variant[data.dtype === 'float16' ? f16 : bf16] = true;
  }
  return variant;
}

/** The words of the `problem` binding (kernels/problem.js encodeProblem): the backward's with its walk's grid. */
export function problemWords(problem, { grid = { bands: 0, cols: 0 } } = {}) {
  const { numHeads: H, channels: C } = problem;
  const ac = problem.alignCorners;
  const px = pixelStride(problem);
  return encodeProblem({
    batch: problem.batch, queries: problem.numQueries, heads: H, channels: C, num_levels: problem.numLevels,
    points: problem.numPoints, length: problem.valueLength,
    // each option's word (core/options.js): blnc, bqhlp2, half_shift, padding
    ...Object.fromEntries(OPTIONS.map((o) => [o.wgsl.word, o.wgsl.words[optionNumber(o, problem[o.name])]])),
    bands: grid.bands, cols: grid.cols, zero: 0,
  }, problem.spatialShapes.map(([h, w], l) => {
    const sx = ac ? w - 1 : w, sy = ac ? h - 1 : h;
    return {
      h, w, start: problem.levelStartIndex[l], narrow: narrowLevel(h, w, px) ? 1 : 0,
      scale_x: sx, scale_y: sy, last_x: w - 1, last_y: h - 1, size_x: w, size_y: h, iscale_x: sx, iscale_y: sy,
      degen_x: ac && w === 1 ? 1 : 0, degen_y: ac && h === 1 ? 1 : 0, px, row: w * px,
    };
  }));
}

export function planForward(problem) {
  const s = problem.shapes;
  const groups = problem.batch * problem.numQueries * problem.numHeads;
  return {
    fn: 'forward', programs: [FORWARD],
    buffers: { output: 4 * product(s.output) }, invocations: { forward: WORKGROUP * forwardWorkgroups(groups, problem.channels) },
  };
}

// The sort's digits (kernels/sort.js) for keys below `pixels`: as few passes of at most
// SORT_BITS as cover the key's bits, the bits shared out evenly; the records an invocation orders.
export function sortDigits(pixels) {
  const all = pixels <= 1 ? 0 : 32 - Math.clz32(pixels - 1);
  const passes = Math.max(1, Math.ceil(all / SORT_BITS)), bits = Math.ceil(all / passes);
  return { passes, bits, chunk: sortChunk(bits) };
}

// The backward's scratch (corner records, their sort, per-pixel counts) is made for a
// part of the (batch, head) pairs at a time when all of them would not fit one buffer: the
// parts run one after the other in one submission, and each grad_value element still gets its
// terms from one invocation, in the same order (the bits do not depend on the parts).
export function planBackward(gpu, problem) {
  const s = problem.shapes;
  const samples = product(s.attentionWeights);
  const pairs = problem.batch * problem.numHeads;
  const perPair = samples / pairs, L = problem.valueLength;
  const limit = Math.min(gpu.limits.maxStorageBufferBindingSize, gpu.limits.maxBufferSize);
  const pairsPerPart = Math.max(1, Math.min(pairs, Math.floor(limit / (32 * perPair)), Math.floor((limit - 4) / (4 * L))));
  const pixels = pairsPerPart * L;
  const digits = sortDigits(pixels), chunks = Math.ceil(4 * perPair * pairsPerPart / digits.chunk);
  const BQ = problem.batch * problem.numQueries, grid = sampleGrid(problem);
  const ranges = problem.batch * Math.ceil(problem.numQueries / ORDER_CHUNK);
  // The order's histogram, (range, cell, tile), for as many ranges as fit one buffer at a time.
  const perRange = (grid.bands * grid.cols + 1) * Math.ceil(Math.min(problem.numQueries, ORDER_CHUNK) / ORDER_TILE);
  const rangesPerGroup = Math.max(1, Math.min(ranges, Math.floor(limit / (4 * (perRange + 1)))));
  // The prefix sums' block totals (gpu.js scan `totals`), a section each at a bindable offset:
  // the order's histogram, the pixel counts, the sort's histogram of each pass; and the order's
  // histogram itself where orderWalk sums it (orderFused: one group, ORDER_FUSED blocks at most).
  let words = 0;
  const section = (n) => {
    const s = { at: words, words: Math.max(1, n) };
    words += Math.ceil(s.words / TOTALS_ALIGN) * TOTALS_ALIGN;
    return s;
  };
  const blocks = (values) => Math.ceil(values / SCAN_BLOCK);
  const orderFused = rangesPerGroup === ranges && blocks(ranges * perRange) <= ORDER_FUSED;
  const totals = {
    orderFused, order: section(blocks(rangesPerGroup * perRange)), orderHist: section(orderFused ? ranges * perRange : 0),
    counts: section(blocks(pixels + 1)), hist: Array.from({ length: digits.passes }, () => section(blocks(chunks * 2 ** digits.bits))),
  };
  totals.words = words;
  // orderWalk and sortCount as one pass (sort.js walkCount)
  const walkCount = orderFused && pairsPerPart === pairs;
  return {
    fn: 'backward',
    programs: walkCount ? FUSED_WALK_PROGRAMS : BACKWARD_PROGRAMS,
    walkCount,
    samples,
    pairs,
    pairsPerPart,
    perPair,
    pixels,
    digits,
    chunks,
    totals,
    buffers: {
      gradValue: 4 * product(s.gradValue),
      gradSamplingLocations: 4 * product(s.gradSamplingLocations),
      gradAttentionWeights: 4 * samples,
      'corner records of one (batch, head) part (scratch)': 32 * perPair * pairsPerPart,
      'sorted records of one part (scratch, two)': 32 * perPair * pairsPerPart,
      'digit histogram of one part (scratch)': 4 * (chunks * 2 ** digits.bits),
      'pixel counts of one part (scratch)': 4 * (pixels + 1),
      'query cells and walk (scratch)': 4 * BQ,
      'cell histogram of the query order (scratch)': 4 * (rangesPerGroup * perRange + 1),
      'prefix sums\' block totals (scratch)': 4 * words,
    },
    ranges,
    rangesPerGroup,
    perRange,
    invocations: { cells: BQ, samples: perPair * pairsPerPart, sort: chunks, gather: pixels * problem.channels },
  };
}

/** What the inputs add to a plan: their buffers, and the widening pass of each half-precision one not bound as its halves. */
export function planInputs(gpu, plan, inputs) {
  for (const [name, data] of Object.entries(inputs)) {
    const gpuHalf = data instanceof GpuTensor && data.elementBytes === 2;
    if (gpuHalf || data instanceof HalfBits) {
      const n = gpuHalf ? data.count : data.length;
      plan.buffers[`${name} (input)`] = 2 * n;
      if (halfInPlace(gpu, name, data)) continue;
      if (!plan.programs.includes(WIDEN)) plan.programs = [...plan.programs, WIDEN];
      plan.buffers[`${name} widened to float32 (scratch)`] = 4 * n;
      plan.invocations[`${name}'s widening`] = n;
    } else {
      plan.buffers[`${name} (input)`] = data instanceof GpuTensor ? data.bytes : 4 * typedArrayLength(data);
    }
  }
}

/** Refuses a plan whose buffers or passes exceed what the device can bind or index, naming the first. */
export function checkPlan(fn, gpu, plan) {
  const { maxStorageBufferBindingSize: bind, maxBufferSize: most } = gpu.limits;
  for (const [name, bytes] of Object.entries(plan.buffers)) {
    const limit = Math.min(bind, most);
    if (bytes > limit) {
      throw new RangeError(`${fn}: ${name} needs ${bytes} bytes on the GPU, more than this device binds in one buffer (maxStorageBufferBindingSize ${bind}, maxBufferSize ${most} bytes)`);
    }
  }
  const max = gridSide(gpu.limits);
  for (const [name, n] of Object.entries(plan.invocations)) {
    if (n >= 2 ** 32 || Math.ceil(n / WORKGROUP) > max * max) {
      throw new RangeError(`${fn}: the ${name} pass needs ${n} invocations, more than one dispatch can index (32-bit indices, ${max} x ${max} workgroups)`);
    }
  }
  if (plan.fn === 'backward' && (plan.pixels + 1 >= 2 ** 32 || plan.perPair * plan.pairsPerPart * 4 >= 2 ** 32)) {
    throw new RangeError(`${fn}: a part of ${plan.pairsPerPart} (batch, head) pairs has ${plan.pixels} pixels and ${4 * plan.perPair * plan.pairsPerPart} corner records, past the 32-bit indices of the backward's gather`);
  }
}
