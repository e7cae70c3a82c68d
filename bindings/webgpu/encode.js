// Submission of the WebGPU backend's calls: one CallEncoder a call, its inputs bound, the passes
// of a forward or a backward in their order, half-precision results rounded, the results read
// back or handed out on the GPU. The passes themselves: kernels/; their order and what each
// computes: docs/webgpu.md.

import { ORDER_CHUNK } from './kernels/problem.js';
import { NARROW } from './kernels/half.js';
import { CallEncoder, COPY_DST, COPY_SRC, MAP_MODE_READ, STORAGE } from './gpu.js';
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
    // Results handed out on the GPU are the caller's: made per call; the others are kept.
    const bytesOf = new Map();   // a kept buffer may be larger than the result
    const out = (name, bytes, final = !half) => {
      if (readBack || !final) {
        const buf = call.scratch(bytes, OUTPUT_USAGE, `msda ${name}${final ? '' : ' float32'}`);
        bytesOf.set(buf, bytes);
        return buf;
      }
      const buf = gpu.buffer(bytes, OUTPUT_USAGE, `msda ${name}`);
      made.push(buf);
      return buf;
    };
    results = fn === 'forward' ? encodeForward(call, problem, plan, bind, out) : encodeBackward(call, problem, plan, bind, out);
    // Half results: each float32 one rounded into a buffer of its own, 2 bytes an element.
    if (half) {
      for (const [name, wide] of Object.entries(results)) {
        const n = product(problem.shapes[name]), words = Math.ceil(n / 2);
        const buf = out(`${name} ${dtype}`, 4 * words, true);
        call.dispatch('narrow', words, { src: { buffer: wide }, dst: { buffer: buf } }, { count: n, is_bfloat16: dtype === 'bfloat16' ? 1 : 0 });
        results[name] = buf;
      }
    }
    if (readBack) {
      const names = Object.keys(results);
      let total = 0;
      at = names.map((name) => { const o = total; total += Math.ceil(bytesOf.get(results[name]) / 4) * 4; return o; });
      staging = gpu.stage(total);
      names.forEach((name, i) => call.encoder.copyBufferToBuffer(results[name], 0, staging, at[i], Math.ceil(bytesOf.get(results[name]) / 4) * 4));
    }
    d.queue.submit([call.finish()]);
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
  const variant = variantOf(gpu, problem, inputs);
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
    if (call.staging && result !== null) gpu.unstage(call.staging);
    else call.staging?.destroy();
    if (result === null) for (const buf of call.made) buf.destroy();
  }
  return fn === 'forward' ? result.output : result;
}

// The synchronous form (dispatchForward / dispatchBackward): submitted, results on the GPU at
// once; an error the device reports later goes to the console, as WebGPU's own do.
export function dispatchNow(gpu, fn, problem, inputs, plan, dtype) {
  const call = submitCall(gpu, fn, problem, inputs, plan, false, dtype, variantOf(gpu, problem, inputs), true);
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

// The order of the CPU backward's walk (kernels/walks.js): per group of ranges each query's cell
// and a histogram of them, its prefix sums and each query placed: `walk` (the queries in walk
// order, per batch). A histogram of few blocks (plan.totals.orderFused) is kept in the totals
// buffer, and orderWalk sums what comes before each query's count itself: no scan (or walkCount
// does, plan.walkCount).
function encodeQueryOrder(call, problem, plan, bind, md, scratch, totals) {
  const { ranges, rangesPerGroup, perRange } = plan;
  const BQ = problem.batch * problem.numQueries, chunks = Math.ceil(problem.numQueries / ORDER_CHUNK);
  const cells = scratch(4 * BQ, 'query cells'), walk = scratch(4 * BQ, 'query walk');
  const fused = plan.totals.orderFused;
  const histBytes = plan.buffers['cell histogram of the query order (scratch)'];
  const hist = fused ? totals.orderHist : { buffer: scratch(histBytes, 'cell histogram') };
  const starts = fused ? totals.orderHist : { buffer: scratch(histBytes, 'cell starts') };
  const rangeFirst = (r) => Math.floor(r / chunks) * problem.numQueries + (r % chunks) * ORDER_CHUNK;
  for (let r0 = 0; r0 < ranges; r0 += rangesPerGroup) {
    const r1 = Math.min(ranges, r0 + rangesPerGroup), queries = (r1 === ranges ? BQ : rangeFirst(r1)) - rangeFirst(r0);
    // hist is zero here: new, or left so by the last scan of it or by sortTerms
    call.dispatch('orderCount', queries, {
      problem: { buffer: md }, locs: bind.samplingLocations, weights: bind.attentionWeights, cell_of: { buffer: cells }, hist,
      totals: totals.order,
    }, { first_range: r0 });
    // its block totals serve when one group holds every range (sortTerms zeroes them after)
    if (!fused) call.scan(hist.buffer, starts.buffer, (r1 - r0) * perRange, true, rangesPerGroup === ranges ? totals.order : null);
    if (plan.walkCount) break;   // one group
    call.dispatch('orderWalk', queries, {
      problem: { buffer: md }, cell_of: { buffer: cells }, starts, hist, totals: totals.order, walk: { buffer: walk },
    }, { first_range: r0, fused: fused ? 1 : 0 });
  }
  return { walk, cells };
}

// The backward: the query order, then per part of the (batch, head) pairs the samples pass (the
// location and weight gradients, straight into the results, and grad_value's records), the
// records sorted by pixel in walk order (kernels/sort.js: count, then per digit a scan and a
// scatter; the counts' scan gives each pixel's segment) and grad_value summed in that order
// (gather).
function encodeBackward(call, problem, plan, bind, out) {
  const { pixels, pairs, pairsPerPart, perPair, digits, chunks } = plan;   // chunks: the largest part's
  const grid = sampleGrid(problem);
  const md = problemBuffer(call, problemWords(problem, { grid }));
  const scratch = (bytes, label, usage = STORAGE | COPY_DST | COPY_SRC) => call.scratch(bytes, usage, `msda ${label}`);
  const recs = scratch(32 * perPair * pairsPerPart, 'records');
  const counts = scratch(4 * (pixels + 1), 'counts');
  const offsets = scratch(4 * (pixels + 1), 'offsets');
  const sorted = [scratch(32 * perPair * pairsPerPart, 'sorted records'), scratch(32 * perPair * pairsPerPart, 'sorted records 2')];
  const hist = scratch(4 * (chunks * 2 ** digits.bits), 'digit histogram');
  const starts = scratch(4 * (chunks * 2 ** digits.bits), 'digit starts');
  const gradValue = out('gradValue', plan.buffers.gradValue);
  const gradSamplingLocations = out('gradSamplingLocations', plan.buffers.gradSamplingLocations);
  const gradAttentionWeights = out('gradAttentionWeights', plan.buffers.gradAttentionWeights);
  // The prefix sums' block totals, counted by the passes that write what they sum: a section
  // each (plan.totals), zero before a call, zeroed by each part's last sort pass (sortTerms).
  const tot = plan.totals, totalsBuf = scratch(4 * tot.words, 'scan totals');
  const section = ({ at, words }) => ({ buffer: totalsBuf, offset: 4 * at, size: 4 * words });
  const totals = { order: section(tot.order), orderHist: section(tot.orderHist), counts: section(tot.counts), hist: tot.hist.map(section) };
  // Each query's rank in its batch's CPU walk, from the locations and weights where they are.
  const { walk, cells } = encodeQueryOrder(call, problem, plan, bind, md, scratch, totals);
  const b = (buffer) => ({ buffer });
  for (let first = 0; first < pairs; first += pairsPerPart) {
    const n = Math.min(pairsPerPart, pairs - first);
    const partPixels = n * problem.valueLength, records = 4 * n * perPair, partChunks = Math.ceil(records / digits.chunk);
    call.dispatch('samples', n * perPair, {
      problem: b(md), value: bind.value, locs: bind.samplingLocations, weights: bind.attentionWeights, gout: bind.gradOutput,
      glocs: b(gradSamplingLocations), gweights: b(gradAttentionWeights), recs: b(recs),
    }, { first_pair: first });
    const digit = (k) => (k * digits.bits) | (digits.bits << 8) | (k === 0 ? 0x10000 : 0);
    const words = (k) => ({ digit: digit(k), end: k === 0 ? records : partPixels, first_pair: first });
    if (plan.walkCount) {
      // the order's sections, then the other totals: bindings that do not overlap
      const [orderEnd, end] = [tot.counts.at, tot.words].map((w) => 4 * w);
      call.dispatch('walkCount', n * problem.numQueries, {
        problem: b(md), cell_of: b(cells), order: { buffer: totalsBuf, offset: 0, size: orderEnd },
        tot: { buffer: totalsBuf, offset: orderEnd, size: end - orderEnd }, walk: b(walk), recs: b(recs), counts: b(counts), hist: b(hist),
      }, { digit: digit(0), order_hist: tot.orderHist.at, hist_totals: tot.hist[0].at - tot.counts.at });
    } else {
      call.dispatch('sortCount', partChunks, {
        problem: b(md), recs: b(recs), walk: b(walk), counts: b(counts), hist: b(hist), count_totals: totals.counts, hist_totals: totals.hist[0],
      }, words(0));
    }
    // the counts' prefix sums with the first digit's (counts left zero for the next part or call)
    call.scanTwo(counts, offsets, partPixels + 1, totals.counts, hist, starts, partChunks * 2 ** digits.bits, totals.hist[0], true);
    for (let k = 0; k < digits.passes; k++) {
      if (k > 0) call.scan(hist, starts, partChunks * 2 ** digits.bits, true, totals.hist[k]);
      const src = k === 0 ? recs : sorted[(k - 1) % 2], dst = sorted[k % 2];
      const common = { problem: b(md), src: b(src), walk: b(walk), offsets: b(offsets), starts: b(starts) };
      if (k + 1 < digits.passes) call.dispatch('sortScatter', partChunks, { ...common, hist: b(hist), dst: b(dst), hist_totals: totals.hist[k + 1] }, words(k));
      else call.dispatch('sortTerms', partChunks, { ...common, recs: b(recs), terms: b(dst), totals: b(totalsBuf) }, { ...words(k), totals: tot.words });
    }
    call.dispatch('gather', partPixels * problem.channels, {
      problem: b(md), offsets: b(offsets), terms: b(sorted[(digits.passes - 1) % 2]), gout: bind.gradOutput, gvalue: b(gradValue),
    }, { first_pair: first });
  }
  return { gradValue, gradSamplingLocations, gradAttentionWeights };
}
