// The page on WebGPU (under the hood): whether the browser has it, the order in which its
// asynchronous results are drawn, and how they compare with wasm's. The wasm path uses none of
// this: it computes and draws at once.
import { compareBits, mergeComparisons } from './model.js';
import { pointSamplesOf } from './step-sum.js';
import { $ } from './page-state.js';

// Two lanes of computations (the playground, step 1), one call at a time each. A request made
// while one runs waits, and a newer one replaces it (a drag asks many times a second: only the
// latest state is computed). Results are drawn in the order asked, so no frame replaces a newer
// one; a result from before the last rebuild (ctx.epoch: an option, the module, the backend) is
// dropped. The Promise resolves once the result is drawn (true) or dropped (false).
export function request(ctx, lane, run, apply) {
  return new Promise((resolve) => {
    if (lane.next) lane.next.resolve(false);
    lane.next = { run, apply, resolve };
    if (!lane.busy) pump(ctx, lane);
  });
}

async function pump(ctx, lane) {
  lane.busy = true;
  while (lane.next) {
    const job = lane.next, epoch = ctx.epoch;
    lane.next = null;
    let drawn = false;
    try {
      const r = await job.run();
      if (epoch === ctx.epoch) { job.apply(r); drawn = true; }
    } catch (e) {
      if (epoch === ctx.epoch) ctx.actions.fail(e);
    }
    job.resolve(drawn);
  }
  lane.busy = false;
  for (const f of lane.idle.splice(0)) f();
}

// At a rebuild: requests not started yet are for the problems being replaced.
export function dropWaiting(ctx) {
  for (const lane of Object.values(ctx.lanes)) {
    if (lane.next) lane.next.resolve(false);
    lane.next = null;
  }
}

const idle = (lane) => (lane.busy || lane.next ? new Promise((r) => lane.idle.push(r)) : Promise.resolve());

// fn() now on wasm; on WebGPU after the steps asked before it, once the playground's lane is
// idle (so a step descends from its own state's result). Reset and rebuilds drop waiting steps.
export function serial(ctx, fn) {
  if (!ctx.gpu) return fn();
  const ticket = ctx.stepTicket;
  ctx.stepTail = ctx.stepTail.then(() => idle(ctx.lanes.main))
    .then(() => (ticket === ctx.stepTicket && ctx.gpu ? fn() : undefined))
    .catch((e) => ctx.actions.fail(e));
  return ctx.stepTail;
}

// Resolves once nothing is computing or waiting: no rebuild, request or step (for tests).
export async function settled(ctx) {
  for (;;) {
    const { rebuilding, stepTail } = ctx;
    await rebuilding;
    await stepTail;
    await Promise.all(Object.values(ctx.lanes).map(idle));
    if (rebuilding === ctx.rebuilding && stepTail === ctx.stepTail && Object.values(ctx.lanes).every((l) => !l.busy && !l.next)) return;
  }
}

// How many numbers of a WebGPU frame differ from what wasm computes for the same state.
export function againstWasm(ctx, r, samples) {
  const { loc, w, target } = r.snapshot;
  const c = ctx.session.evaluate({ samplingLocations: loc, attentionWeights: w, target });
  const g = r.raw, h = c.raw;
  return mergeComparisons([compareBits([r.loss], [c.loss]), compareBits(r.targetFeature, c.targetFeature),
    compareBits(r.output, c.output), compareBits(g.gradValue.data, h.gradValue.data),
    compareBits(g.gradSamplingLocations.data, h.gradSamplingLocations.data),
    compareBits(g.gradAttentionWeights.data, h.gradAttentionWeights.data), compareBits(samples, pointSamplesOf(ctx, loc))]);
}

// Asked once, when "Under the hood" is first opened: asking may start a GPU process, and
// Chromium warns on the console when there is no adapter.
export async function probeWebGPU(ctx) {
  if (ctx.webgpu.status !== 'unknown') return;
  ctx.webgpu.status = 'checking';
  renderBackendChoice(ctx);
  let adapter = null, reason = null;
  try {
    if (!navigator.gpu) reason = 'this browser has no navigator.gpu (WebGPU is off, or the page is not on https or http://127.0.0.1)';
    else if (!(adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' }))) reason = 'navigator.gpu.requestAdapter() gave no adapter (no usable GPU or driver)';
  } catch (e) {
    reason = `navigator.gpu.requestAdapter() failed: ${e && e.message}`;
  }
  if (reason) unavailable(ctx, reason);
  else {
    ctx.webgpu.status = 'available';
    ctx.webgpu.adapter = adapterName(adapter.info);
    renderBackendChoice(ctx);
  }
  if (ctx.result) ctx.actions.publish();
}

export function unavailable(ctx, reason) {
  Object.assign(ctx.webgpu, { status: 'unavailable', reason });
  ctx.ui.backend = 'wasm';
  $('backend').value = 'wasm';
  renderBackendChoice(ctx);
}

export const adapterName = (i = {}) => [i.vendor, i.architecture || i.device].filter(Boolean).join(' ') || 'an adapter';

function setNote(text) {
  const note = $('backend-note');
  note.hidden = !text;
  note.textContent = text;
}

// The backend select's WebGPU entry, and the note under it until WebGPU computes.
export function renderBackendChoice(ctx) {
  const { status, reason, adapter } = ctx.webgpu;
  const o = $('backend').querySelector('option[value=webgpu]');
  o.disabled = status !== 'available';
  o.textContent = status === 'unavailable' ? 'WebGPU (not available here)' : status === 'checking' ? 'WebGPU (checking…)' : 'WebGPU';
  o.title = reason || '';
  $('backend').dataset.webgpu = status;
  if (status === 'unavailable') setNote(`WebGPU is not available here: ${reason}.`);
  else if (ctx.ui.backend === 'webgpu') setNote('Starting WebGPU: compiling its kernels…');
  else if (status === 'available') setNote(`WebGPU is available here (${adapter}).`);
  else if (status === 'checking') setNote('Checking for WebGPU…');
}

// On WebGPU: the adapter, what its startup probe saw (msda.numerics), how the last results
// compare with wasm's. A difference is shown, never hidden: the page shows WebGPU's numbers.
export function renderGpuNote(ctx) {
  const { numerics: n } = ctx.gpu;
  const seen = [n?.flushesSubnormals && 'flush subnormals', n?.productsRounded === false && 'fuse a·b+c where the kernels keep products apart'].filter(Boolean);
  const c = mergeComparisons([ctx.check.main, ctx.check.sample].filter(Boolean));
  const num = (x) => x.toLocaleString('en-US');
  let text = `On WebGPU (${adapterName(ctx.gpu.adapterInfo)}); its startup probe saw it ${seen.length ? seen.join(' and ') : 'keep IEEE float32'}. `;
  if (c.differ === 0) text += `All ${num(c.count)} numbers of the last results equal wasm's, bit for bit (compared on every call).`;
  else text += `${num(c.differ)} of the last ${num(c.count)} numbers differ from wasm's (largest difference ${c.maxAbs.toExponential(2)}, relative ${c.maxRel.toExponential(2)}): the page shows WebGPU's (docs/webgpu.md says why).`;
  setNote(text);
  $('backend-note').dataset.differ = String(c.differ);
}
