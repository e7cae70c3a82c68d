// The explainer page: five small figures from "one point reads one map" to gradient descent,
// each drawn from what the ms-deform-attn wasm package computed (model.js). One module per step
// (step-*.js); they share one context (page-state.js), passed explicitly. This file wires them:
// the module choice, the prepared problems, recompute-and-redraw after every change, the
// controls, and window.__msda for the tests. Under the hood the page can also compute on
// WebGPU, whose calls return Promises: see "WebGPU" below.
import { init } from '../bindings/index.js';
import { LEVELS, HEADS, NUM_HEADS, CHANNELS, drawPicture, buildPyramid } from './scene.js';
import { Session, GpuSession, newOptimizer, softmaxInto, logitsOf, setSoftmaxWeight, MIN_WEIGHT, compareBits, mergeComparisons } from './model.js';
import { request, dropWaiting, serial, settled, againstWasm, probeWebGPU, unavailable, adapterName, renderBackendChoice, renderGpuNote } from './webgpu.js';
import { $, SLOTS, slot, clamp01, createContext } from './page-state.js';
import { levelImage, attachPositionCanvas } from './draw.js';
import { SAMPLE_LEVEL, prepareSample, computeSample, sampleAt, prepareSampleGpu, sampleGpu, drawSample, renderSample } from './step-sample.js';
import { preparePointSamples, computePointSamples, pointSamplesGpu, renderSum, buildPyramid as buildSumPyramid } from './step-sum.js';
import { drawTargetCanvas, renderLoss } from './step-loss.js';
import { buildLevels, buildPoints, drawLevel, renderLegends, renderPoints } from './step-gradients.js';
import { buildPull, renderPull } from './step-pull.js';
import { buildQuery, renderQuery } from './step-query.js';
import { freshState, step, reset, play, stop, drawCurve, renderStuck } from './step-descent.js';
import { formatLoss } from './format.js';

// ---- modules and prepared problems ----------------------------------------------------------

function moduleOptions(ctx) {
  if (ctx.ui.module === 'scalar' || !ctx.simdAvailable) return { simd: false };
  return { simd: 'auto', threads: ctx.ui.threads === 'auto' ? 'auto' : 1 };
}

// One instance per module choice, kept for the page's life (init() gives each call its own).
function instance(ctx, options) {
  const key = JSON.stringify(options);
  if (!ctx.instances.has(key)) ctx.instances.set(key, init(options));
  return ctx.instances.get(key);
}

const GPU_OPTIONS = { backend: 'webgpu' };

// "Under the hood" and "Use it in your code" say what the page computes on: on WebGPU the
// value stays in GPU buffers and the calls return Promises.
let wasmSnippet = null;
function renderWhere(ctx) {
  const code = $('use-snippet').querySelector('code');
  if (wasmSnippet === null) wasmSnippet = code.textContent;
  const gpu = ctx.gpu !== null;
  $('hood-wasm').hidden = gpu;   // WebGPU has no prepare(): the page keeps a GPU tensor instead
  $('hood-gpu').hidden = !gpu;
  code.textContent = !gpu ? wasmSnippet : wasmSnippet
    .replace(/const msda = await init\(\);[^\n]*/, "const msda = await init({ backend: 'webgpu' });   // WGSL on the GPU; calls return Promises")
    .replace('const output = msda.forward(args); ', 'const output = await msda.forward(args);')
    .replace('msda.backward({ ...args, gradOutput });', 'await msda.backward({ ...args, gradOutput });');
}

// (Re)prepares every problem of the page for the current module, backend and options. The wasm
// problems are always there (on WebGPU every frame is checked against them). Returns false when
// a newer call took over while this one waited for a module.
async function prepareAll(ctx) {
  const ticket = ++ctx.rebuilds;
  const msda = await instance(ctx, moduleOptions(ctx));
  let gpu = null;
  if (ctx.ui.backend === 'webgpu') {
    renderBackendChoice(ctx);
    try {
      gpu = await instance(ctx, GPU_OPTIONS);
    } catch (e) {
      ctx.instances.delete(JSON.stringify(GPU_OPTIONS));
      if (ticket === ctx.rebuilds) unavailable(ctx, e.message);
    }
  }
  if (ticket !== ctx.rebuilds) return false;
  ctx.epoch += 1;           // what is still in flight belongs to the problems replaced here
  dropWaiting(ctx);
  ctx.msda = msda;
  ctx.gpu = gpu;
  renderWhere(ctx);
  ctx.timings.forward = []; ctx.timings.backward = [];
  for (const p of [ctx.session, ctx.sample.sampler, ctx.points.sampler, ctx.gpuSession]) if (p) p.dispose();
  ctx.session = new Session(ctx.msda, ctx.data, ctx.ui.opts);
  prepareSample(ctx);
  preparePointSamples(ctx);
  ctx.gpuSession = null;
  ctx.check = { main: null, sample: null };
  if (gpu) {
    const session = new GpuSession(gpu, ctx.data, ctx.ui.opts);
    ctx.gpuSession = session;
    prepareSampleGpu(ctx, session);
    // Step 2's readings take the value in BLNC, whatever the playground's layout.
    ctx.points.gpuValue = ctx.ui.opts.valueLayout === 'BLNC' ? session.value : session.tensor(ctx.data.value, [1, ctx.data.length, NUM_HEADS, CHANNELS]);
  }
  return true;
}

// ---- computing ----------------------------------------------------------------------------

const TIMED_CALLS = 25;

function compute(ctx) {
  ctx.result = ctx.session.evaluate(ctx.state);
  ctx.timings.forward = [...ctx.timings.forward, ctx.result.forwardMs].slice(-TIMED_CALLS);
  ctx.timings.backward = [...ctx.timings.backward, ctx.result.backwardMs].slice(-TIMED_CALLS);
  computePointSamples(ctx);
}

// Computes for the current state, then runs `after`: at once on wasm; on WebGPU when the
// result is in (a Promise that resolves then, or when a newer request replaced this one).
function computeThen(ctx, after) {
  if (!ctx.gpu) {
    compute(ctx);
    after();
    return undefined;
  }
  return request(ctx, ctx.lanes.main, async () => {
    const { gpu, gpuSession, data } = ctx, opts = { ...ctx.ui.opts }, value = ctx.points.gpuValue;
    const r = await gpuSession.evaluate(ctx.state);
    const samples = await pointSamplesGpu(gpu, data, opts, value, r.snapshot.loc);
    return { r, samples };
  }, ({ r, samples }) => {
    ctx.result = r;
    ctx.timings.forward = [...ctx.timings.forward, r.forwardMs].slice(-TIMED_CALLS);
    ctx.timings.backward = [...ctx.timings.backward, r.backwardMs].slice(-TIMED_CALLS);
    ctx.points.samples = samples;
    ctx.check.main = againstWasm(ctx, r, samples);
    after();
  });
}

// A change made by hand: recompute, and start a fresh descent from here.
function changed(ctx) {
  return computeThen(ctx, () => {
    ctx.optimizer = newOptimizer();
    ctx.ui.history = [ctx.result.loss];
    ctx.ui.stuck = null;
    render(ctx);
  });
}

// Step 1's reading at its point, drawn when computed.
function sample(ctx) {
  if (!ctx.gpu) {
    computeSample(ctx);
    renderStepOne(ctx);
    return undefined;
  }
  return request(ctx, ctx.lanes.sample, () => sampleGpu(ctx, ctx.gpu), (res) => {
    ctx.sample.result = res;
    ctx.check.sample = compareBits(res.output, sampleAt(ctx, res.point).output);
    renderStepOne(ctx);
  });
}

function setWeight(ctx, i, w) {
  const { state } = ctx;
  if (ctx.ui.weightMode === 'softmax') {
    setSoftmaxWeight(state.logits, i, w);
    softmaxInto(state.logits, state.attentionWeights);
  } else {
    state.attentionWeights[i] = clamp01(w);
  }
  guarded(ctx, () => changed(ctx));
}

// ---- drawing -----------------------------------------------------------------------------

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };

function renderHood(ctx) {
  const { msda, ui, timings, gpu } = ctx;
  // The median of the last calls: one call of a few microseconds is mostly timer noise.
  $('t-forward').textContent = `${median(timings.forward).toFixed(3)} ms`;
  $('t-backward').textContent = `${median(timings.backward).toFixed(3)} ms`;
  $('module').textContent = gpu ? `WebGPU (${adapterName(gpu.adapterInfo)})` : msda.simd ? 'wasm SIMD' : 'wasm scalar';
  $('module').dataset.backend = ctx.result.backend ?? msda.backend;
  // What the module in use runs with (1 unless threaded); only the SIMD module has threads.
  $('threads').textContent = gpu ? '–' : String(msda.threads ?? 1);
  $('threads-select').disabled = ui.module === 'scalar' || !ctx.simdAvailable || Boolean(gpu);
  $('simd').disabled = Boolean(gpu);
  $('t-caption-wasm').hidden = Boolean(gpu);
  $('t-caption-webgpu').hidden = !gpu;
  if (gpu) renderGpuNote(ctx);
  else renderBackendChoice(ctx);
}

// Draws everything that depends on the playground's state (step 1 has its own point).
function render(ctx) {
  for (let l = 0; l < LEVELS.length; l++) drawLevel(ctx, l);
  renderPoints(ctx);
  renderSum(ctx);
  renderLoss(ctx);
  renderPull(ctx);
  renderQuery(ctx);
  renderLegends(ctx);
  renderStuck(ctx);
  renderHood(ctx);
  $('loss').textContent = formatLoss(ctx.result.loss);
  $('steps').textContent = String(ctx.ui.steps);
  drawCurve(ctx);
  ctx.ui.renders += 1;
  publish(ctx);
}

function renderStepOne(ctx) {
  renderSample(ctx);
  ctx.ui.renders += 1;
  publish(ctx);
}

// ---- errors --------------------------------------------------------------------------------

function guarded(ctx, fn) {
  try {
    fn();
  } catch (e) {
    stop(ctx);
    showError(e);
  }
}

async function guardedAsync(ctx, fn) {
  try {
    await fn();
  } catch (e) {
    stop(ctx);
    showError(e);
  }
}

function showError(e) {
  const box = $('error');
  box.hidden = false;
  box.textContent = `Error: ${e && e.message ? e.message : e}`;
  console.error(e);
}

// What the page computed, for tests and the curious: the exact arguments of the last
// forward/backward (as the copying API takes them) and everything that came back.
function publish(ctx) {
  const { ui, msda, state, levelViews } = ctx;
  const r = ctx.result;
  const sampleResult = ctx.sample.result;
  const pointSamples = ctx.points.samples;
  window.__msda = {
    ready: true,
    renders: ui.renders,
    steps: ui.steps,
    head: ui.head,
    module: ui.module,
    simd: msda.simd,
    threads: msda.threads ?? 1,
    // The backend chosen, the one that computed the numbers shown, and WebGPU's availability.
    backend: ctx.gpu ? ctx.gpu.backend : msda.backend,
    settled: () => settled(ctx),
    computing: () => Object.values(ctx.lanes).some((l) => l.busy),
    computedBy: r.backend ?? msda.backend,
    sampleComputedBy: sampleResult && (sampleResult.backend ?? msda.backend),
    webgpu: { ...ctx.webgpu, numerics: ctx.gpu ? { ...ctx.gpu.numerics } : null,
      check: ctx.gpu ? mergeComparisons([ctx.check.main, ctx.check.sample].filter(Boolean)) : null },
    options: { ...ui.opts },
    weightMode: ui.weightMode,
    learningRate: ui.learningRate,
    target: Array.from(state.target),
    get forwardArgs() { return r.args; },
    get backwardArgs() { return r.gradArgs; },
    targetFeature: r.targetFeature,
    output: r.output,
    loss: r.loss,
    lossText: $('loss').textContent,
    gradOutput: r.gradOutput,
    get grads() { return r.raw; },
    forwardMs: r.forwardMs,
    backwardMs: r.backwardMs,
    stuck: ui.stuck,
    arrows: ctx.drawn.arrows.map((a) => a.map((x) => ({ ...x }))),
    heat: ui.heat,
    sample: sampleResult && { point: sampleResult.point, location: Array.from(sampleResult.loc.subarray(0, 2)),
      corners: sampleResult.corners.map((c) => ({ ...c })), output: sampleResult.output.slice(), level: SAMPLE_LEVEL,
      options: { alignCorners: ui.opts.alignCorners, paddingMode: ui.opts.paddingMode } },
    pointSamples: pointSamples && pointSamples.slice(),
    rings: (ctx.drawn.rings || []).map((x) => ({ ...x })),
    curve: ctx.drawn.curve && JSON.parse(JSON.stringify(ctx.drawn.curve)),
    pull: ctx.pull.last && JSON.parse(JSON.stringify(ctx.pull.last)),
    query: ctx.query.last && JSON.parse(JSON.stringify(ctx.query.last)),
    // Centre of a point on step 2's pyramid (CSS pixels).
    sumPointOnScreen(level, point, head = ui.head) {
      const i = slot(head, level, point);
      const rect = ctx.sumViews[level].canvas.getBoundingClientRect();
      return { x: rect.left + state.samplingLocations[2 * i] * rect.width, y: rect.top + state.samplingLocations[2 * i + 1] * rect.height };
    },
    // Centre of a point on screen (CSS pixels), for driving the page with a mouse.
    pointOnScreen(level, point, head = ui.head) {
      const i = slot(head, level, point);
      const rect = levelViews[level].canvas.getBoundingClientRect();
      return { x: rect.left + state.samplingLocations[2 * i] * rect.width, y: rect.top + state.samplingLocations[2 * i + 1] * rect.height };
    },
    levelRect(level) {
      const rr = levelViews[level].canvas.getBoundingClientRect();
      return { x: rr.left, y: rr.top, width: rr.width, height: rr.height };
    },
    rectOf(id) {
      const rr = $(id).getBoundingClientRect();
      return { x: rr.left, y: rr.top, width: rr.width, height: rr.height };
    },
  };
}

// ---- controls ------------------------------------------------------------------------------

function bindControls(ctx) {
  const { ui } = ctx;
  const head = $('head');
  HEADS.forEach((h, i) => { const o = document.createElement('option'); o.value = String(i); o.textContent = `${i}: ${h.name}`; head.append(o); });
  head.addEventListener('change', () => { ui.head = Number(head.value); guarded(ctx, () => render(ctx)); });
  // Options the prepared problems are built with: prepare again, then recompute.
  const rebuild = () => {
    ctx.rebuilding = guardedAsync(ctx, async () => {
      stop(ctx);
      ctx.stepTicket += 1;
      if (!await prepareAll(ctx)) return;
      sample(ctx);
      changed(ctx);
    });
  };
  const opt = (id, key, parse = (x) => x) => {
    $(id).addEventListener('change', (ev) => {
      ui.opts[key] = parse(ev.target.type === 'checkbox' ? ev.target.checked : ev.target.value);
      rebuild();
    });
  };
  opt('padding', 'paddingMode');
  opt('value-layout', 'valueLayout');
  opt('loc-layout', 'samplingLocationsLayout');
  opt('align-corners', 'alignCorners', Boolean);
  $('simd').addEventListener('change', (ev) => { ui.module = ev.target.value; rebuild(); });
  $('threads-select').addEventListener('change', (ev) => { ui.threads = ev.target.value; rebuild(); });
  $('backend').addEventListener('change', (ev) => { ui.backend = ev.target.value; rebuild(); });
  $('hood').addEventListener('toggle', () => { if ($('hood').open) probeWebGPU(ctx); });
  $('heat').addEventListener('change', (ev) => { ui.heat = ev.target.checked; guarded(ctx, () => render(ctx)); });
  $('lr').addEventListener('change', (ev) => { ui.learningRate = Number(ev.target.value); ctx.optimizer = newOptimizer(); guarded(ctx, () => render(ctx)); });
  for (const radio of document.querySelectorAll('input[name=weight-mode]')) {
    radio.addEventListener('change', () => {
      if (!radio.checked) return;
      stop(ctx);
      ui.weightMode = radio.value;
      const { state } = ctx;
      // Raw → softmax: the logits whose softmax is the current weights, scaled to sum to 1.
      if (ui.weightMode === 'softmax') {
        state.logits = logitsOf(state.attentionWeights);
        softmaxInto(state.logits, state.attentionWeights);
      } else {
        for (let i = 0; i < SLOTS; i++) state.attentionWeights[i] = Math.max(MIN_WEIGHT, state.attentionWeights[i]);
      }
      guarded(ctx, () => changed(ctx));
    });
  }
  $('step').addEventListener('click', () => { stop(ctx); guarded(ctx, () => step(ctx)); });
  $('play').addEventListener('click', () => guarded(ctx, () => play(ctx)));
  $('reset').addEventListener('click', () => guarded(ctx, () => reset(ctx)));
  document.addEventListener('keydown', (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA')) return;
    const k = ev.key.toLowerCase();
    if (k === 's') { stop(ctx); guarded(ctx, () => step(ctx)); } else if (k === 'p') guarded(ctx, () => play(ctx));
    else if (k === 'r') guarded(ctx, () => reset(ctx)); else return;
    ev.preventDefault();
  });
  attachPositionCanvas($('sample-canvas'), () => ctx.sample.point, (p) => {
    ctx.sample.point = p;
    guarded(ctx, () => sample(ctx));
  });
  attachPositionCanvas($('target-canvas'), () => ctx.state.target, (p) => { stop(ctx); ctx.state.target = p; guarded(ctx, () => changed(ctx)); });
  // Whatever the page scrolls into view (focus, find, links) stops above the pinned bar.
  const padBar = () => { document.documentElement.style.scrollPaddingBottom = `${$('controls').offsetHeight + 8}px`; };
  padBar();
  window.addEventListener('resize', () => { padBar(); drawCurve(ctx); });
  // Redraw crisply whenever a canvas's displayed size changes (layout, zoom, rotation).
  if (typeof ResizeObserver === 'function') {
    const ro = new ResizeObserver(() => {
      if (!ctx.result) return;
      guarded(ctx, () => {
        ctx.levelViews.forEach((_, l) => drawLevel(ctx, l)); drawSample(ctx); drawTargetCanvas(ctx); renderLegends(ctx); renderSum(ctx); renderPull(ctx);
      });
    });
    ctx.levelViews.forEach((v) => ro.observe(v.canvas));
    ctx.sumViews.forEach((v) => ro.observe(v.canvas));
    ro.observe($('sample-canvas'));
    ro.observe($('target-canvas'));
    ro.observe($('pull-canvas'));
  }
  // Colours drawn on canvases follow the colour scheme.
  matchMedia('(prefers-color-scheme: light)').addEventListener('change', () => { if (ctx.result) guarded(ctx, () => render(ctx)); });
}

async function main() {
  const ctx = createContext();
  ctx.actions = {
    computeThen: (after) => computeThen(ctx, after),
    serial: (fn) => serial(ctx, fn),
    fail: (e) => { stop(ctx); showError(e); },
    changed: () => changed(ctx),
    render: () => render(ctx),
    stop: () => stop(ctx),
    guarded: (fn) => guarded(ctx, fn),
    setWeight: (i, w) => setWeight(ctx, i, w),
    publish: () => publish(ctx),
    reset: () => reset(ctx),
  };
  const { ui } = ctx;
  // The SIMD module runs on this machine's CPUs when the page is cross-origin isolated (make
  // demo's server sends COOP and COEP), else on 1 thread with one console notice; the threads
  // field under the hood shows which (README "Threads").
  ctx.msda = await instance(ctx, moduleOptions(ctx));
  if (!ctx.msda.simd) {
    // No SIMD in this browser: the scalar module serves both entries.
    ctx.simdAvailable = false;
    const o = $('simd').querySelector('option[value=simd]');
    o.textContent = 'SIMD (unsupported here)';
    o.disabled = true;
    ui.module = 'scalar';
    $('simd').value = 'scalar';
  }
  $('threads-select').options[0].textContent = `auto (${navigator.hardwareConcurrency || 1} CPUs)`;
  ctx.data = buildPyramid(drawPicture());
  ctx.images = LEVELS.map((_, l) => HEADS.map((__, hd) => levelImage(ctx.data, l, hd)));
  ctx.state = freshState(ctx);
  await prepareAll(ctx);
  buildSumPyramid(ctx);
  buildPull(ctx);
  buildQuery(ctx);
  buildLevels(ctx);
  buildPoints(ctx);
  bindControls(ctx);
  computeSample(ctx);
  renderSample(ctx);
  changed(ctx);
}

main().catch(showError);
