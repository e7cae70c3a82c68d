// Submission of the WebGPU backend's calls: one CallEncoder a call, its inputs bound, the passes
// of a forward or a backward in their order, half-precision results rounded, the results read
// back or handed out on the GPU. The passes themselves: kernels/; their order and what each
// computes: docs/webgpu.md.

import { ORDER_CHUNK } from './kernels/problem.js';
import { NARROW } from './kernels/half.js';
import { CallEncoder, COPY_DST, COPY_SRC, MAP_MODE_READ, MAP_READ, STORAGE } from './gpu.js';
import { problemWords, sampleGrid, variantOf } from './plan.js';
import { bindInput, cpuResults, gpuResult, product, snapshotInputs } from './tensors.js';

const OUTPUT_USAGE = STORAGE | COPY_SRC | COPY_DST;

// Encodes and submits one call, synchronously, inside its own error scopes (pushed and popped
// here, so that calls in flight together never pop each other's): the result buffers, a staging
// copy of them when `readBack`, and a Promise of what the scopes caught. Scratch buffers are
// destroyed at once (the submitted work keeps them). The passes run the pipelines of `variant`:
// compiled before (Gpu.compile), or made now where `now` (dispatch*); the results are rounded to `dtype`.
function submitCall(gpu, fn, problem, inputs, plan, readBack, dtype, variant, now) {
  const d = gpu.device;
  const made = [];
  d.pushErrorScope('out-of-memory');
  d.pushErrorScope('validation');
  let call = null, results, staging = null, at = null;
  try {
    call = new CallEncoder(gpu, fn, variant, now);
    const bind = {};
    for (const [name, data] of Object.entries(inputs)) bind[name] = bindInput(call, fn, name, data);
    const half = dtype !== 'float32';
    const out = (name, bytes) => {
      const buf = gpu.buffer(bytes, OUTPUT_USAGE, `msda ${name}`);
      (half ? call.temps : made).push(buf);
      return buf;
    };
    results = fn === 'forward' ? encodeForward(call, problem, plan, bind, out) : encodeBackward(call, problem, plan, bind, out);
    // Half results: each float32 one rounded into a buffer of its own, 2 bytes an element.
    if (half) {
      for (const [name, wide] of Object.entries(results)) {
        const n = product(problem.shapes[name]), words = Math.ceil(n / 2);
        const buf = gpu.buffer(4 * words, OUTPUT_USAGE, `msda ${name} ${dtype}`);
        made.push(buf);
        call.dispatch('narrow', words, { src: { buffer: wide }, dst: { buffer: buf } }, { count: n, is_bfloat16: dtype === 'bfloat16' ? 1 : 0 });
        results[name] = buf;
      }
    }
    if (readBack) {
      const names = Object.keys(results);
      let total = 0;
      at = names.map((name) => { const o = total; total += results[name].size; return o; });
      staging = gpu.buffer(total, MAP_READ | COPY_DST, 'msda readback');
      names.forEach((name, i) => call.encoder.copyBufferToBuffer(results[name], 0, staging, at[i], results[name].size));
    }
    d.queue.submit([call.encoder.finish()]);
  } catch (e) {
    for (const buf of made) buf.destroy();
    staging?.destroy();
    d.popErrorScope().catch(() => {});
    d.popErrorScope().catch(() => {});
    throw e;
  } finally {
    call?.destroyScratch();
  }
  const validation = d.popErrorScope();
  const oom = d.popErrorScope();
  const scopes = Promise.all([validation, oom, ...call.checks]).then(([v, o, ...named]) => {
    const other = named.find((e) => e !== null);
    if (other !== undefined) return other;
    const err = v ?? o;
    return err ? new Error(`${fn}: WebGPU ${o && !v ? 'ran out of memory' : 'refused the call'}: ${err.message}`) : null;
  }, () => null);
  return { results, made, staging, at, scopes };
}

/** A call awaited: its pipelines compiled first where they are not yet, its results read back ('cpu') or on the GPU. */
export async function run(gpu, fn, problem, inputs, plan, { outputs, dtype }) {
  const variant = variantOf(problem);
  const programs = dtype === 'float32' ? plan.programs : [...plan.programs, NARROW];
  if (programs.some((prog) => !gpu.pipelines.has(prog.key(variant)))) {
    snapshotInputs(inputs);
    await gpu.compile(programs, variant);
    if (gpu.closed) throw gpu.closed;
    if (gpu.lost) throw gpu.lostError();
  }
  const call = submitCall(gpu, fn, problem, inputs, plan, outputs === 'cpu', dtype, variant, false);
  const names = Object.keys(call.results);
  let result = {};
  try {
    const err = await gpu.guard(call.scopes);
    if (err) throw err;
    if (outputs === 'gpu') {
      for (const name of names) result[name] = gpuResult(problem, name, call.results[name], dtype);
    } else {
      await gpu.guard(call.staging.mapAsync(MAP_MODE_READ));
      result = cpuResults(problem, names, call.staging.getMappedRange(), call.at, dtype);
      call.staging.unmap();
    }
  } catch (e) {
    result = null;
    throw e;
  } finally {
    call.staging?.destroy();
    if (outputs === 'cpu' || result === null) for (const buf of call.made) buf.destroy();
  }
  return fn === 'forward' ? result.output : result;
}

// The synchronous form (dispatchForward / dispatchBackward): submitted, results on the GPU at
// once; an error the device reports later goes to the console, as WebGPU's own do.
export function dispatchNow(gpu, fn, problem, inputs, plan, dtype) {
  const call = submitCall(gpu, fn, problem, inputs, plan, false, dtype, variantOf(problem), true);
  call.scopes.then((err) => { if (err) console.error(`ms-deform-attn: ${err.message}`); });
  const result = {};
  for (const [name, buffer] of Object.entries(call.results)) result[name] = gpuResult(problem, name, buffer, dtype);
  return fn === 'forward' ? result.output : result;
}

// The `problem` binding, uploaded.
function problemBuffer(call, words) {
  const buf = call.scratch(words.byteLength, STORAGE | COPY_DST, 'msda problem');
  call.gpu.device.queue.writeBuffer(buf, 0, words);
  return buf;
}

function encodeForward(call, problem, plan, bind, out) {
  const md = problemBuffer(call, problemWords(problem));
  const output = out('output', plan.buffers.output);
  call.dispatch('forward', plan.invocations.forward, {
    problem: { buffer: md }, value: bind.value, locs: bind.samplingLocations, weights: bind.attentionWeights, out: { buffer: output },
  });
  return { output };
}

// The order of the CPU backward's walk (kernels/walks.js): each query's cell, then per group of
// ranges a histogram of cells, its prefix sums and each query placed: `walk` (the queries in
// walk order, per batch) and `ranks` (its inverse).
function encodeQueryOrder(call, problem, plan, bind, md, scratch) {
  const { ranges, rangesPerGroup, perRange } = plan;
  const BQ = problem.batch * problem.numQueries, chunks = Math.ceil(problem.numQueries / ORDER_CHUNK);
  const cells = scratch(4 * BQ, 'query cells'), walk = scratch(4 * BQ, 'query walk'), ranks = scratch(4 * BQ, 'query ranks');
  const histBytes = plan.buffers['cell histogram of the query order (scratch)'];
  const hist = scratch(histBytes, 'cell histogram'), starts = scratch(histBytes, 'cell starts');
  call.dispatch('cells', BQ, { problem: { buffer: md }, locs: bind.samplingLocations, weights: bind.attentionWeights, cells: { buffer: cells } });
  const rangeFirst = (r) => Math.floor(r / chunks) * problem.numQueries + (r % chunks) * ORDER_CHUNK;
  for (let r0 = 0; r0 < ranges; r0 += rangesPerGroup) {
    const r1 = Math.min(ranges, r0 + rangesPerGroup), queries = (r1 === ranges ? BQ : rangeFirst(r1)) - rangeFirst(r0);
    call.encoder.clearBuffer(hist);
    call.dispatch('orderCount', queries, { problem: { buffer: md }, cell_of: { buffer: cells }, hist: { buffer: hist } }, { first_range: r0 });
    call.scan(hist, starts, (r1 - r0) * perRange);
    call.dispatch('orderWalk', queries, { problem: { buffer: md }, cell_of: { buffer: cells }, starts: { buffer: starts }, walk: { buffer: walk }, ranks: { buffer: ranks } }, { first_range: r0 });
  }
  return { walk, ranks };
}

// The backward: the query order, then per part of the (batch, head) pairs the samples pass (the
// location and weight gradients, and grad_value's records), the records' segments (scan, place)
// and grad_value summed in the walk's order (rank, gather).
function encodeBackward(call, problem, plan, bind, out) {
  const { samples, pixels, pairs, pairsPerPart, perPair } = plan;
  const locElements = product(problem.shapes.gradSamplingLocations);
  const grid = sampleGrid(problem);
  const md = problemBuffer(call, problemWords(problem, { gradWeightsOffset: locElements, grid }));
  const scratch = (bytes, label, usage = STORAGE | COPY_DST | COPY_SRC) => call.scratch(bytes, usage, `msda ${label}`);
  const grads = scratch(4 * (locElements + samples), 'grads');
  const recs = scratch(32 * perPair * pairsPerPart, 'records');
  const counts = scratch(4 * (pixels + 1), 'counts');
  const offsets = scratch(4 * (pixels + 1), 'offsets');
  const sorted = scratch(16 * perPair * pairsPerPart, 'placed records');
  const terms = scratch(32 * perPair * pairsPerPart, 'ranked terms');
  const gradValue = out('gradValue', plan.buffers.gradValue);
  // Each query's rank in its batch's CPU walk, from the locations and weights where they are.
  const { walk, ranks } = encodeQueryOrder(call, problem, plan, bind, md, scratch);
  for (let first = 0; first < pairs; first += pairsPerPart) {
    const n = Math.min(pairsPerPart, pairs - first);
    const partPixels = n * problem.valueLength;
    call.encoder.clearBuffer(counts);
    call.dispatch('samples', n * perPair, {
      problem: { buffer: md }, value: bind.value, locs: bind.samplingLocations, weights: bind.attentionWeights, gout: bind.gradOutput,
      grads: { buffer: grads }, recs: { buffer: recs }, counts: { buffer: counts },
    }, { first_pair: first });
    call.scan(counts, offsets, partPixels + 1);
    call.encoder.clearBuffer(counts);
    call.dispatch('place', 4 * n * perPair, {
      problem: { buffer: md }, recs: { buffer: recs }, offsets: { buffer: offsets }, cursors: { buffer: counts }, placed: { buffer: sorted }, ranks: { buffer: ranks },
    }, { first_pair: first });
    call.dispatch('rank', 4 * n * perPair, {
      problem: { buffer: md }, offsets: { buffer: offsets }, placed: { buffer: sorted }, recs: { buffer: recs }, walk: { buffer: walk }, terms: { buffer: terms },
    }, { first_pair: first, part_pixels: partPixels });
    call.dispatch('gather', partPixels * problem.channels, {
      problem: { buffer: md }, offsets: { buffer: offsets }, terms: { buffer: terms }, gout: bind.gradOutput, gvalue: { buffer: gradValue },
    }, { first_pair: first });
  }
  const gradSamplingLocations = out('gradSamplingLocations', plan.buffers.gradSamplingLocations);
  const gradAttentionWeights = out('gradAttentionWeights', plan.buffers.gradAttentionWeights);
  call.encoder.copyBufferToBuffer(grads, 0, gradSamplingLocations, 0, 4 * locElements);
  call.encoder.copyBufferToBuffer(grads, 4 * locElements, gradAttentionWeights, 0, 4 * samples);
  return { gradValue, gradSamplingLocations, gradAttentionWeights };
}
