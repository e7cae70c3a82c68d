// The WebGPU backend: init({ backend: 'webgpu' }) gives an instance whose forward and backward
// run the WGSL programs of kernels/ on a GPUDevice (its own, or the caller's) and return
// Promises. Arguments are read and checked by the core (problemFromTensors, the same messages
// as the other backends); tensors may be CPU ({ data, shape }) or GPU ({ buffer, shape,
// byteOffset?, dtype? }) ones, float32 or half precision (results too, with options.dtype).
// What is computed: SEMANTICS.md; how and what differs: docs/webgpu.md.

import { DISPOSE } from '../core/api.js';
import { problemFromTensors } from '../core/problem.js';
import { typedArrayBuffer, typedArrayByteOffset, typedArrayLength } from '../core/typed.js';
import { describe } from '../core/errors.js';
import { readDtype } from '../core/args.js';
import { HalfBits } from '../core/half.js';
import { BACKWARD_STRIP, CANONICAL_NAN, FLOAT_SIDE, ORDER_CELLS, ORDER_CHUNK, SCAN_BLOCK, WORKGROUP, encodeProblem } from './kernels/problem.js';
import { FORWARD, forwardWorkgroups } from './kernels/forward.js';
import { PLACE, SAMPLES, SCAN, SCAN_ADD } from './kernels/backward.js';
import { CELLS, ORDER_COUNT, ORDER_PLACE, ORDER_TILE } from './kernels/walks.js';
import { GATHER, RANK } from './kernels/segments.js';
import { PROBE } from './kernels/probe.js';
import { NARROW, WIDEN } from './kernels/half.js';

/** The `.code` of the Error init rejects with when no WebGPU adapter or device can be had. */
export const WEBGPU_UNAVAILABLE = 'MSDA_WEBGPU_UNAVAILABLE';
/** The `.code` of the Error calls reject with once the device is lost (or destroyed). */
export const WEBGPU_DEVICE_LOST = 'MSDA_WEBGPU_DEVICE_LOST';

// GPUBufferUsage / GPUMapMode values (the spec's; Node has no such globals unless a caller sets them).
const MAP_READ = 0x1, COPY_SRC = 0x4, COPY_DST = 0x8, UNIFORM = 0x40, STORAGE = 0x80;
const MAP_MODE_READ = 0x1;
const COMPUTE = 0x4;   // GPUShaderStage.COMPUTE
const OUTPUT_USAGE = STORAGE | COPY_SRC | COPY_DST;

const KERNELS = Object.fromEntries([FORWARD, SAMPLES, SCAN, SCAN_ADD, CELLS, ORDER_COUNT, ORDER_PLACE, PLACE, RANK, GATHER, WIDEN, NARROW, PROBE].map((k) => [k.label, k]));
// The programs each call may dispatch: compiled (once per variant) before its first call runs
// (with WIDEN where an input is half precision, NARROW where the results are).
const BACKWARD_PROGRAMS = [CELLS, ORDER_COUNT, SCAN, SCAN_ADD, ORDER_PLACE, SAMPLES, PLACE, RANK, GATHER];

const INT32_MAX = 2 ** 31 - 1;
const MAX_GRID = 65535;

function unavailable(message, cause) {
  const err = new Error(`ms-deform-attn: WebGPU is not available: ${message}`, cause ? { cause } : undefined);
  err.code = WEBGPU_UNAVAILABLE;
  return err;
}

// ---------------------------------------------------------------------------------------------
// The problem's constants for the programs (kernels/problem.js, binding `problem`).

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

// The pipelines' variant a problem allows (kernels/problem.js program()): `narrow` when every
// level is narrow, so that the wide levels' integer code is left out; `vec4` when the channels
// are a multiple of 4, so that value and grad_output rows are read as vec4s.
export function variantOf(problem) {
  const px = pixelStride(problem);
  return { narrow: problem.spatialShapes.every(([h, w]) => narrowLevel(h, w, px)), vec4: problem.channels % 4 === 0 };
}

function metaOf(problem, { gradWeightsOffset = 0, grid = { bands: 0, cols: 0 } } = {}) {
  const { numHeads: H, channels: C } = problem;
  const blnc = problem.valueLayout === 'BLNC';
  const ac = problem.alignCorners;
  const px = pixelStride(problem);
  return encodeProblem({
    batch: problem.batch, queries: problem.numQueries, heads: H, channels: C, num_levels: problem.numLevels,
    points: problem.numPoints, length: problem.valueLength, blnc: blnc ? 1 : 0,
    bqhlp2: problem.samplingLocationsLayout === 'BQHLP2' ? 1 : 0, border: problem.paddingMode === 'border' ? 1 : 0,
    half_shift: ac ? 0 : 1, grad_weights_at: gradWeightsOffset, bands: grid.bands, cols: grid.cols,
  }, problem.spatialShapes.map(([h, w], l) => {
    const sx = ac ? w - 1 : w, sy = ac ? h - 1 : h;
    return {
      h, w, start: problem.levelStartIndex[l], narrow: narrowLevel(h, w, px) ? 1 : 0,
      scale_x: sx, scale_y: sy, last_x: w - 1, last_y: h - 1, size_x: w, size_y: h, iscale_x: sx, iscale_y: sy,
      degen_x: ac && w === 1 ? 1 : 0, degen_y: ac && h === 1 ? 1 : 0, px, row: w * px,
    };
  }));
}

// ---------------------------------------------------------------------------------------------
// GPU tensors: { buffer: GPUBuffer, shape, byteOffset?, dtype? }, read once by the core's reader.
// float16 and bfloat16 ones (2 bytes an element) are widened on the GPU (kernels/half.js).

class GpuTensor {
  constructor(buffer, byteOffset, size, usage, dtype) {
    this.buffer = buffer;
    this.byteOffset = byteOffset;
    this.size = size;
    this.usage = usage;
    this.dtype = dtype;
    this.elementBytes = dtype === 'float32' ? 4 : 2;
  }
}

const ceil4 = (n) => Math.ceil(n / 4) * 4;

const gpuReader = {
  read(fn, name, t) {
    const buffer = t.buffer;
    const byteOffset = t.byteOffset === undefined ? 0 : t.byteOffset;
    const dtype = readDtype(fn, name, t.dtype) ?? 'float32';
    if (buffer === null || typeof buffer !== 'object' || typeof buffer.size !== 'number' || typeof buffer.usage !== 'number') {
      throw new TypeError(`${fn}: ${name}.buffer is ${describe(buffer)}, expected a GPUBuffer (or give ${name}.data, a Float32Array)`);
    }
    const tensor = new GpuTensor(buffer, byteOffset, buffer.size, buffer.usage, dtype);
    const step = tensor.elementBytes;
    if (typeof byteOffset !== 'number' || !Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset % step !== 0) {
      throw new RangeError(`${fn}: ${name}.byteOffset is ${describe(byteOffset)}, expected a non-negative multiple of ${step}${step === 2 ? ` (the bytes of a ${dtype})` : ''}`);
    }
    if ((tensor.usage & STORAGE) === 0) {
      throw new TypeError(`${fn}: ${name}.buffer has usage ${tensor.usage}, expected one with GPUBufferUsage.STORAGE (0x80)`);
    }
    return tensor;
  },
  owns: (data) => data instanceof GpuTensor,
  check(fn, name, t, count) {
    const bytes = t.elementBytes * count, end = t.byteOffset + bytes;
    // Halves are read in the 4-byte words WebGPU binds: the last one whole.
    const need = t.elementBytes === 4 ? end : ceil4(end);
    if (need > t.size) {
      const words = need > end ? ` (${need} read in 4-byte words, as WebGPU binds buffers)` : '';
      const hint = t.elementBytes === 4 && t.byteOffset + 2 * count <= t.size ? ` (a float16 or bfloat16 tensor? say so with ${name}.dtype)` : '';
      throw new RangeError(`${fn}: ${name} needs ${bytes} bytes (${count} ${t.dtype}) from byteOffset ${t.byteOffset}, ${end} bytes in all${words}, but its GPUBuffer has ${t.size} bytes${hint}`);
    }
    t.count = count;
    t.bytes = bytes;
  },
};

// ---------------------------------------------------------------------------------------------
// Adapters and devices.

async function requestDevice(adapter) {
  const want = ['maxStorageBufferBindingSize', 'maxBufferSize', 'maxStorageBuffersPerShaderStage', 'maxComputeWorkgroupsPerDimension'];
  const requiredLimits = {};
  for (const key of want) if (typeof adapter.limits[key] === 'number') requiredLimits[key] = adapter.limits[key];
  return adapter.requestDevice({ requiredLimits, label: 'ms-deform-attn' });
}

/**
 * init({ backend: 'webgpu', gpu?, device? }): an instance on the caller's device, or on one of
 * its own from `gpu`, navigator.gpu, or `defaultGpu()` (the entry's: Dawn in Node, node-gpu.js);
 * `noAdapterHint()` says why there is no adapter (the entry's; the browser's hint otherwise).
 */
export async function initWebGPU({ gpu, device, defaultGpu, noAdapterHint } = {}) {
  if (device !== undefined) {
    if (device === null || typeof device !== 'object' || typeof device.createComputePipeline !== 'function' || device.queue === undefined) {
      throw new TypeError(`init: device is ${describe(device)}, expected a GPUDevice`);
    }
    const b = await WebGPUBackend.create(device, false, device.adapterInfo);
    return new MsdaWebGPU(b);
  }
  const given = gpu !== undefined;
  let entryGpu = false;   // the entry's own (Dawn in Node): only then is its hint about that GPU stack
  if (gpu === undefined) {
    gpu = typeof navigator !== 'undefined' && navigator.gpu ? navigator.gpu : undefined;
    if (gpu === undefined) {
      if (defaultGpu !== undefined) { gpu = await defaultGpu(unavailable); entryGpu = true; }
      else throw unavailable('navigator.gpu is missing (WebGPU needs a browser with it enabled and a secure context: https or http://127.0.0.1)');
    }
  } else if (gpu === null || typeof gpu !== 'object' || typeof gpu.requestAdapter !== 'function') {
    throw new TypeError(`init: gpu is ${describe(gpu)}, expected an object with requestAdapter() (navigator.gpu, or the webgpu package's create())`);
  }
  let adapter;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    throw unavailable(`requestAdapter() failed: ${e.message}`, e);
  }
  if (!adapter) {
    const hint = entryGpu && noAdapterHint !== undefined ? noAdapterHint()
      : given ? ' (from the gpu object given to init)'
        : ' (the browser offers no WebGPU adapter here: check chrome://gpu, or its --enable-unsafe-webgpu flag)';
    throw unavailable(`requestAdapter() returned no adapter${hint}`);
  }
  let dev;
  try {
    dev = await requestDevice(adapter);
  } catch (e) {
    throw unavailable(`requestDevice() failed: ${e.message}`, e);
  }
  const b = await WebGPUBackend.create(dev, true, adapter.info);
  // Dawn for Node frees its instance (and with it the device's threads) when `gpu` is collected.
  b.gpu = gpu;
  return new MsdaWebGPU(b);
}

// A program's bind group entries from its bindings by name: each one given, no other.
function bindings(prog, resources) {
  const given = Object.keys(resources);
  const unknown = given.find((name) => !prog.bindings.includes(name));
  const missing = prog.bindings.find((name) => !given.includes(name));
  if (unknown !== undefined || missing !== undefined) {
    throw new Error(`ms-deform-attn: the WebGPU ${prog.label} pass ${unknown !== undefined ? `has no binding ${unknown}` : `lacks its binding ${missing}`}`);
  }
  return prog.bindings.map((name, binding) => ({ binding, resource: resources[name] }));
}

// ---------------------------------------------------------------------------------------------
// The backend: a device, its pipelines, and the passes of a forward and a backward.

class WebGPUBackend {
  static async create(device, owned, info) {
    const b = new WebGPUBackend(device, owned, info);
    await b._start();
    return b;
  }

  // Without awaiting (for synchronous callers such as a tfjs kernel): each pipeline made with
  // createComputePipeline by the first call that needs it (a compile error surfaces in that
  // call's error scope), the probe's answer filled in when it comes.
  static createSync(device, info) {
    const b = new WebGPUBackend(device, false, info);
    b.numerics = null;
    b.probe().then((n) => { b.numerics = n; }, () => {});
    return b;
  }

  constructor(device, owned, info) {
    this.device = device;
    this.owned = owned;
    this.info = info ? { vendor: info.vendor ?? '', architecture: info.architecture ?? '', device: info.device ?? '', description: info.description ?? '' } : null;
    this.lost = null;
    this.closed = null;   // dispose()'s Error, which calls still pending reject with
    this.pending = new Set();
    // Pipelines by key (program() key: label and variant flags), those compiling, and the keys in
    // the order they were asked for (the instance's `compiled`).
    this.pipelines = new Map();
    this.compiling = new Map();
    this.compiled = [];
    const lim = device.limits;
    this.limits = {
      maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
      maxBufferSize: lim.maxBufferSize,
      maxComputeWorkgroupsPerDimension: lim.maxComputeWorkgroupsPerDimension,
      minStorageBufferOffsetAlignment: lim.minStorageBufferOffsetAlignment,
      maxStorageBuffersPerShaderStage: lim.maxStorageBuffersPerShaderStage,
    };
    this.lostPromise = device.lost.then((info) => {
      this.lost = info ?? { reason: 'unknown', message: '' };
      const err = this.lostError();
      for (const reject of this.pending) reject(err);
      this.pending.clear();
    });
  }

  // Calls still pending reject with `err` (dispose()), as do later waits.
  close(err) {
    this.closed = err;
    for (const reject of this.pending) reject(err);
    this.pending.clear();
  }

  lostError() {
    const { reason, message } = this.lost;
    const err = new Error(`ms-deform-attn: the WebGPU device was lost (reason: ${reason}${message ? `, ${message}` : ''}); init() again for a new one`);
    err.code = WEBGPU_DEVICE_LOST;
    return err;
  }

  async _start() {
    await this.prepare([PROBE], {});
    this.numerics = await this.probe();
  }

  // The pipelines of `programs` for `variant`, each compiled once (createComputePipelineAsync; a
  // compile in flight is shared): resolves when all are ready, rejects naming a kernel that fails
  // to compile, or when the device is lost.
  prepare(programs, variant) {
    const d = this.device;
    const wait = [];
    d.pushErrorScope('validation');   // popped at once: it holds only these modules' creation
    for (const prog of programs) {
      const key = prog.key(variant);
      if (this.pipelines.has(key)) continue;
      if (!this.compiling.has(key)) {
        const label = `msda ${key}`;
        const module = d.createShaderModule({ code: prog.code(variant), label });
        this.compiled.push(key);
        this.compiling.set(key, (async () => {
          const info = module.getCompilationInfo ? await module.getCompilationInfo() : { messages: [] };
          const errors = info.messages.filter((m) => m.type === 'error');
          const failed = (detail, cause) => new Error(`ms-deform-attn: the WebGPU kernel '${label}' failed to compile here: ${detail}`, cause ? { cause } : undefined);
          if (errors.length > 0) throw failed(errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; '));
          // the WGSL is valid, the pipeline may still not be (a device limit: GPUPipelineError)
          const pipeline = await d.createComputePipelineAsync({ label, layout: 'auto', compute: { module, entryPoint: 'main' } })
            .catch((e) => { throw failed(e.message, e); });
          if (!this.pipelines.has(key)) this.pipelines.set(key, pipeline);
        })().then(() => this.compiling.delete(key), (e) => {
          this.compiling.delete(key);
          if (!this.pipelines.has(key)) this.forget(key);
          throw e;
        }));
      }
      wait.push(this.compiling.get(key));
    }
    const scope = d.popErrorScope();
    return this.guard(Promise.all(wait).then(async () => {
      const err = await scope;
      if (err) throw new Error(`ms-deform-attn: WebGPU kernels failed to compile: ${err.message}`);
    }, (e) => { scope.catch(() => {}); throw e; }));
  }

  // The pipeline of `prog` for `variant`: one prepare() made or, where `now` (the synchronous
  // calls), one made here with createComputePipeline, in an error scope of its own: one that
  // fails to compile is dropped (a later call compiles it again) and its error, naming the
  // kernel, goes into `checks` (the call's, as submitCall reports them).
  pipeline(prog, variant, now, checks = []) {
    const key = prog.key(variant);
    let p = this.pipelines.get(key);
    if (p !== undefined) return p;
    if (!now) throw new Error(`ms-deform-attn: the WebGPU pipeline '${key}' was dispatched before it was compiled`);
    const d = this.device, label = `msda ${key}`;
    d.pushErrorScope('validation');
    p = d.createComputePipeline({ label, layout: 'auto', compute: { module: d.createShaderModule({ code: prog.code(variant), label }), entryPoint: 'main' } });
    const made = p;
    checks.push(d.popErrorScope().then((err) => {
      if (err === null) return null;
      if (this.pipelines.get(key) === made) {
        this.pipelines.delete(key);
        if (!this.compiling.has(key)) this.forget(key);
      }
      return new Error(`the WebGPU kernel '${label}' failed to compile here: ${err.message}`);
    }, () => null));
    this.pipelines.set(key, p);
    if (!this.compiled.includes(key)) this.compiled.push(key);
    return p;
  }

  // `key` off the list of pipelines made or being made.
  forget(key) {
    const at = this.compiled.indexOf(key);
    if (at >= 0) this.compiled.splice(at, 1);
  }

  // A Promise that also rejects when the device is lost (nothing waits forever on a dead device)
  // or the instance disposed.
  guard(promise) {
    if (this.closed || this.lost) {
      promise.catch(() => {});
      return Promise.reject(this.closed ?? this.lostError());
    }
    return new Promise((resolve, reject) => {
      this.pending.add(reject);
      promise.then((v) => { this.pending.delete(reject); resolve(v); },
        async (e) => {
          this.pending.delete(reject);
          // A mapAsync aborted by a lost device may reject before device.lost resolves.
          if (!this.lost) await Promise.race([this.lostPromise, new Promise((r) => setTimeout(r, 100))]);
          reject(this.lost ? this.lostError() : e);
        });
    });
  }

  // fusedMultiplyAdd: a * b + c came back fused; flushesSubnormals: a subnormal input read as 0.
  async probe() {
    const io = new Float32Array([1 + 2 ** -12, 1 + 2 ** -12, -(1 + 2 ** -11), 2 ** -130, 0, 0, 0, 0]);
    const buf = this.buffer(io.byteLength, STORAGE | COPY_SRC | COPY_DST, 'msda probe');
    this.device.queue.writeBuffer(buf, 0, io);
    const enc = this.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    const probe = this.pipeline(PROBE, {}, true);
    pass.setPipeline(probe);
    pass.setBindGroup(0, this.device.createBindGroup({ layout: probe.getBindGroupLayout(0), entries: bindings(PROBE, { io: { buffer: buf } }) }));
    pass.dispatchWorkgroups(1);
    pass.end();
    const staging = this.buffer(io.byteLength, MAP_READ | COPY_DST, 'msda probe readback');
    enc.copyBufferToBuffer(buf, 0, staging, 0, io.byteLength);
    this.device.queue.submit([enc.finish()]);
    let out;
    try {
      await this.guard(staging.mapAsync(MAP_MODE_READ));
      out = new Float32Array(staging.getMappedRange().slice(0));
    } finally {   // also when disposed or lost before it answers
      staging.destroy();
      buf.destroy();
    }
    return {
      fusedMultiplyAdd: out[4] !== 0,
      flushesSubnormals: out[5] === 0 || out[6] === 0,
    };
  }

  buffer(size, usage, label) {
    return this.device.createBuffer({ size: Math.max(4, Math.ceil(size / 4) * 4), usage, label });
  }

  uniform(n, perRow, first = 0, extra = 0) {
    const u = this.buffer(16, UNIFORM | COPY_DST, 'msda dispatch');
    this.device.queue.writeBuffer(u, 0, new Uint32Array([n, perRow, first, extra]));
    return u;
  }

  // The workgroup grid for `groups` workgroups: up to the per-dimension limit in x, the rest in y.
  grid(groups) {
    const max = Math.min(this.limits.maxComputeWorkgroupsPerDimension ?? MAX_GRID, MAX_GRID);
    const x = Math.max(1, Math.min(groups, max));
    const y = Math.ceil(groups / x);
    if (y > max) throw new RangeError(`ms-deform-attn: ${groups} workgroups exceed this device's grid (${max} x ${max})`);
    return [x, y];
  }

  // One compute pass of `name` over n invocations (n values for the scan), bindings by name;
  // first and extra: the uniform's first and extra. The pipeline is the variant's of the call
  // being encoded (submitCall).
  dispatch(encoder, name, n, entries, temps, perGroup = WORKGROUP, first = 0, extra = 0) {
    if (n === 0) return;
    const groups = Math.ceil(n / perGroup);
    const [x, y] = this.grid(groups);
    const { variant, now, checks } = this.encoding;
    const p = this.pipeline(KERNELS[name], variant, now, checks);
    const u = this.uniform(n, name === 'scan' ? x : x * perGroup, first, extra);
    temps.push(u);
    const bg = this.device.createBindGroup({
      layout: p.getBindGroupLayout(0),
      entries: bindings(KERNELS[name], { ...entries, dispatch: { buffer: u } }),
    });
    // Benchmarks' GPU time: timestamps around every pass while a profile is set (bench-webgpu).
    const prof = this.profile;
    const timestampWrites = prof && prof.next + 2 <= prof.capacity
      ? { querySet: prof.querySet, beginningOfPassWriteIndex: prof.next++, endOfPassWriteIndex: prof.next++ } : undefined;
    const pass = encoder.beginComputePass(timestampWrites ? { label: `msda ${name}`, timestampWrites } : { label: `msda ${name}` });
    pass.setPipeline(p);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(x, y);
    pass.end();
  }

  // Exclusive prefix sums of src[0 .. n) into dst (both u32 buffers), in blocks, recursively.
  scan(encoder, src, dst, n, temps) {
    const blocks = Math.ceil(n / SCAN_BLOCK);
    const sums = this.buffer(4 * blocks, STORAGE | COPY_DST, 'msda scan sums');
    temps.push(sums);
    this.dispatch(encoder, 'scan', n, { src: { buffer: src }, dst: { buffer: dst }, sums: { buffer: sums } }, temps, SCAN_BLOCK);
    if (blocks === 1) return;
    const scanned = this.buffer(4 * blocks, STORAGE | COPY_DST, 'msda scan offsets');
    temps.push(scanned);
    this.scan(encoder, sums, scanned, blocks, temps);
    this.dispatch(encoder, 'scanAdd', n, { sums: { buffer: scanned }, dst: { buffer: dst } }, temps);
  }
}

// ---------------------------------------------------------------------------------------------
// The instance init() gives out.

const DTYPES = "'float32' | 'float16' | 'bfloat16'";

// { outputs, dtype } of a call; dispatch* results are on the GPU, always.
function readCallOptions(fn, options, dispatch = false) {
  const expected = `{ outputs?: ${dispatch ? "'gpu'" : "'cpu' | 'gpu'"}, dtype?: ${DTYPES} }`;
  if (options === undefined) return { outputs: dispatch ? 'gpu' : 'cpu', dtype: 'float32' };
  if (options === null || typeof options !== 'object') throw new TypeError(`${fn}: options is ${describe(options)}, expected ${expected}`);
  const { outputs = dispatch ? 'gpu' : 'cpu', dtype = 'float32', ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new TypeError(`${fn}: unknown option '${unknown[0]}', expected ${expected}`);
  if (outputs !== 'gpu' && (dispatch || outputs !== 'cpu')) {
    throw new RangeError(`${fn}: outputs is ${describe(outputs)}, expected ${dispatch ? "'gpu' (its results are on the GPU at once)" : "'cpu' or 'gpu'"}`);
  }
  if (dtype !== 'float32' && dtype !== 'float16' && dtype !== 'bfloat16') {
    throw new RangeError(`${fn}: dtype is ${describe(dtype)}, expected 'float32', 'float16' or 'bfloat16' (the results' precision)`);
  }
  return { outputs, dtype };
}

const product = (shape) => shape.reduce((a, b) => a * b, 1);

export class MsdaWebGPU {
  constructor(backend) {
    this._b = backend;
    this._backendKept = backend;
    this.backend = 'webgpu';
    this.device = backend.device;
    /** The adapter's vendor, architecture, device and description where the runtime says. */
    this.adapterInfo = backend.info;

    /** The limits this instance plans its calls against. */
    this.limits = backend.limits;
    this.threads = 1;
  }

  /** { fusedMultiplyAdd, flushesSubnormals }: what the startup probe saw this device do (null until it answers on an instance made without awaiting). */
  get numerics() { return this._backendKept.numerics; }

  get disposed() { return this._b === null; }

  /** The pipelines this instance has compiled or is compiling (not one that failed to), in the
   *  order calls asked for them: each a program's name, then the variant's flags it was made for
   *  ('forward narrow vec4'). */
  get compiled() { return [...this._backendKept.compiled]; }

  /** For benchmarks: timestamps of every pass into querySet (a 'timestamp' GPUQuerySet of
   *  `capacity` entries) from index 0 on, until profile(null); returns how many were written. */
  profile(querySet, capacity = 0) {
    const b = this._live('profile');
    const written = b.profile ? b.profile.next : 0;
    b.profile = querySet ? { querySet, capacity, next: 0 } : null;
    return written;
  }

  /** An instance on `device` made without awaiting (its kernels compile in the background): for synchronous callers. */
  static onDeviceSync(device) {
    return new MsdaWebGPU(WebGPUBackend.createSync(device, device.adapterInfo));
  }

  /** Frees what this instance holds (calls still pending reject); destroys the device only when init() created it. */
  dispose() {
    const b = this._b;
    if (b === null) return;
    this._b = null;
    b.close(new Error('ms-deform-attn: the call was pending on a disposed instance (dispose() was called)'));
    if (b.owned) b.device.destroy();
  }

  [DISPOSE]() { this.dispose(); }

  _live(fn) {
    if (this._b === null) throw new Error(`ms-deform-attn: ${fn} on a disposed instance (dispose() was called)`);
    if (this._b.lost) throw this._b.lostError();
    return this._b;
  }

  forward(args, options) {
    return this._call('forward', args, options);
  }

  backward(args, options) {
    return this._call('backward', args, options);
  }

  /**
   * The forward without waiting: encoded and submitted now, the output a GPU tensor
   * { buffer, shape } (the caller's to destroy) usable at once by later GPU work on this device
   * (the queue keeps the order). For code that must not await, e.g. a tfjs kernel.
   */
  dispatchForward(args, options) {
    return this._dispatch('dispatchForward', 'forward', args, options);
  }

  /** The backward without waiting, as dispatchForward: { gradValue, gradSamplingLocations, gradAttentionWeights } on the GPU. */
  dispatchBackward(args, options) {
    return this._dispatch('dispatchBackward', 'backward', args, options);
  }

  _dispatch(fn, kind, args, options) {
    const { dtype } = readCallOptions(fn, options, true);
    return this._prepare(fn, kind, args, (b, k, problem, inputs, plan) => dispatchNow(b, k, problem, inputs, plan, dtype));
  }

  async _call(fn, args, options) {
    const opts = readCallOptions(fn, options);
    return this._prepare(fn, fn, args, (b, kind, problem, inputs, plan) => run(b, kind, problem, inputs, plan, opts));
  }

  _prepare(fn, kind, args, go) {
    const b = this._live(fn);
    const { problem, inputs } = problemFromTensors(fn, args, kind === 'backward', undefined, gpuReader, true);
    this._live(fn);
    const plan = kind === 'forward' ? planForward(problem) : planBackward(b, problem);
    for (const [name, data] of Object.entries(inputs)) {
      const gpuHalf = data instanceof GpuTensor && data.elementBytes === 2;
      if (gpuHalf || data instanceof HalfBits) {
        const n = gpuHalf ? data.count : data.length;
        if (!plan.programs.includes(WIDEN)) plan.programs = [...plan.programs, WIDEN];
        plan.buffers[`${name} (input)`] = 2 * n;
        plan.buffers[`${name} widened to float32 (scratch)`] = 4 * n;
        plan.invocations[`${name}'s widening`] = n;
      } else {
        plan.buffers[`${name} (input)`] = data instanceof GpuTensor ? data.bytes : 4 * typedArrayLength(data);
      }
    }
    checkPlan(fn, b, plan);
    return go(b, kind, problem, inputs, plan);
  }
}

// ---------------------------------------------------------------------------------------------
// Plans: every buffer a call makes, its bytes checked against the device's limits first.

function planForward(problem) {
  const s = problem.shapes;
  const groups = problem.batch * problem.numQueries * problem.numHeads;
  return {
    fn: 'forward', programs: [FORWARD],
    buffers: { output: 4 * product(s.output) }, invocations: { forward: WORKGROUP * forwardWorkgroups(groups, problem.channels) },
  };
}

// The backward's scratch (corner records, placed and ranked, per-pixel counts) is made for a
// part of the (batch, head) pairs at a time when all of them would not fit one buffer: the
// parts run one after the other in one submission, and each grad_value element still gets its
// terms from one invocation, in the same order (the bits do not depend on the parts).
function planBackward(b, problem) {
  const s = problem.shapes;
  const samples = product(s.attentionWeights);
  const pairs = problem.batch * problem.numHeads;
  const perPair = samples / pairs, L = problem.valueLength;
  const limit = Math.min(b.limits.maxStorageBufferBindingSize, b.limits.maxBufferSize);
  const pairsPerPart = Math.max(1, Math.min(pairs, Math.floor(limit / (32 * perPair)), Math.floor((limit - 4) / (4 * L))));
  const pixels = pairsPerPart * L;
  const BQ = problem.batch * problem.numQueries, grid = sampleGrid(problem);
  const ranges = problem.batch * Math.ceil(problem.numQueries / ORDER_CHUNK);
  // The order's histogram, (range, cell, tile), for as many ranges as fit one buffer at a time.
  const perRange = (grid.bands * grid.cols + 1) * Math.ceil(Math.min(problem.numQueries, ORDER_CHUNK) / ORDER_TILE);
  const rangesPerGroup = Math.max(1, Math.min(ranges, Math.floor(limit / (4 * (perRange + 1)))));
  return {
    fn: 'backward',
    programs: BACKWARD_PROGRAMS,
    samples,
    pairs,
    pairsPerPart,
    perPair,
    pixels,
    buffers: {
      gradValue: 4 * product(s.gradValue),
      gradSamplingLocations: 4 * product(s.gradSamplingLocations),
      gradAttentionWeights: 4 * samples,
      'location and weight gradients (scratch)': 4 * (product(s.gradSamplingLocations) + samples),
      'corner records of one (batch, head) part (scratch)': 32 * perPair * pairsPerPart,
      'placed records of one part (scratch)': 16 * perPair * pairsPerPart,
      'ranked terms of one part (scratch)': 32 * perPair * pairsPerPart,
      'pixel counts of one part (scratch)': 4 * (pixels + 1),
      'query cells, walk and ranks (scratch)': 4 * BQ,
      'cell histogram of the query order (scratch)': 4 * (rangesPerGroup * perRange + 1),
    },
    ranges,
    rangesPerGroup,
    perRange,
    invocations: { cells: BQ, samples: perPair * pairsPerPart, place: 4 * perPair * pairsPerPart, gather: pixels * problem.channels },
  };
}

function checkPlan(fn, b, plan) {
  const { maxStorageBufferBindingSize: bind, maxBufferSize: most } = b.limits;
  for (const [name, bytes] of Object.entries(plan.buffers)) {
    const limit = Math.min(bind, most);
    if (bytes > limit) {
      throw new RangeError(`${fn}: ${name} needs ${bytes} bytes on the GPU, more than this device binds in one buffer (maxStorageBufferBindingSize ${bind}, maxBufferSize ${most} bytes)`);
    }
  }
  const max = Math.min(b.limits.maxComputeWorkgroupsPerDimension ?? MAX_GRID, MAX_GRID);
  for (const [name, n] of Object.entries(plan.invocations)) {
    if (n >= 2 ** 32 || Math.ceil(n / WORKGROUP) > max * max) {
      throw new RangeError(`${fn}: the ${name} pass needs ${n} invocations, more than one dispatch can index (32-bit indices, ${max} x ${max} workgroups)`);
    }
  }
  if (plan.fn === 'backward' && (plan.pixels + 1 >= 2 ** 32 || plan.perPair * plan.pairsPerPart * 4 >= 2 ** 32)) {
    throw new RangeError(`${fn}: a part of ${plan.pairsPerPart} (batch, head) pairs has ${plan.pixels} pixels and ${4 * plan.perPair * plan.pairsPerPart} corner records, past the 32-bit indices of the backward's gather`);
  }
}

// A GPU tensor's buffer bound alone first, in its own error scope, so that what WebGPU says of a
// buffer that is not this device's names the argument: an object that is no GPUBuffer throws
// here; a buffer of another GPUDevice fails validation (the Promise of that error, or null).
function checkOwnBuffer(b, fn, name, data) {
  const d = b.device;
  b.ownLayout ??= d.createBindGroupLayout({ label: 'msda own buffer', entries: [{ binding: 0, visibility: COMPUTE, buffer: { type: 'read-only-storage' } }] });
  d.pushErrorScope('validation');
  try {
    d.createBindGroup({ layout: b.ownLayout, entries: [{ binding: 0, resource: { buffer: data.buffer, offset: 0, size: 4 } }] });
  } catch (e) {
    d.popErrorScope().catch(() => {});
    throw new TypeError(`${fn}: ${name}.buffer is ${describe(data.buffer)}, expected a GPUBuffer (WebGPU: ${e.message})`);
  }
  return d.popErrorScope().then((err) => (err
    ? new TypeError(`${fn}: ${name}.buffer belongs to another GPUDevice, expected a buffer of this instance's device (instance.device); copy it over or init({ backend: 'webgpu', device }) on its device`)
    : null), () => null);
}

// Half-precision bits (from `src`, the words of a binding, the first at half `first`) widened
// into a float32 scratch buffer: the binding the passes read.
function widen(b, encoder, name, src, first, count, dtype, temps) {
  const wide = b.buffer(4 * count, STORAGE, `msda ${name} widened`);
  temps.push(wide);
  b.dispatch(encoder, 'widen', count, { src, dst: { buffer: wide } }, temps, WORKGROUP, first, dtype === 'bfloat16' ? 1 : 0);
  return { buffer: wide, size: 4 * count };
}

// An input as a binding: a GPU tensor in place (or copied when its offset is not aligned for a
// binding; halves widened from the aligned words around them), a CPU one uploaded (halves as
// their bits, widened on the GPU).
function bindInput(b, fn, name, data, temps, encoder, checks) {
  if (data instanceof GpuTensor) {
    checks.push(checkOwnBuffer(b, fn, name, data));
    const align = b.limits.minStorageBufferOffsetAlignment ?? 256;
    if (data.elementBytes === 2) {
      const at = data.byteOffset - data.byteOffset % align;
      const src = { buffer: data.buffer, offset: at, size: ceil4(data.byteOffset + data.bytes) - at };
      return widen(b, encoder, name, src, (data.byteOffset - at) / 2, data.count, data.dtype, temps);
    }
    if (data.byteOffset % align === 0) return { buffer: data.buffer, offset: data.byteOffset, size: data.bytes };
    if ((data.usage & COPY_SRC) === 0) {
      throw new RangeError(`${fn}: ${name}.byteOffset ${data.byteOffset} is not a multiple of this device's minStorageBufferOffsetAlignment (${align}), and its buffer lacks GPUBufferUsage.COPY_SRC to copy it from`);
    }
    const copy = b.buffer(data.bytes, STORAGE | COPY_DST, `msda ${name}`);
    temps.push(copy);
    encoder.copyBufferToBuffer(data.buffer, data.byteOffset, copy, 0, data.bytes);
    return { buffer: copy, size: data.bytes };
  }
  if (data instanceof HalfBits) {
    // whole words: an odd count's last half padded (a copy, as for a SharedArrayBuffer's view)
    const n = data.length, bytes = ceil4(2 * n);
    const buf = b.buffer(bytes, STORAGE | COPY_DST, `msda ${name}`);
    temps.push(buf);
    const backing = typedArrayBuffer(data.bits);
    if (bytes !== 2 * n || (typeof SharedArrayBuffer !== 'undefined' && backing instanceof SharedArrayBuffer)) {
      const words = new Uint16Array(bytes / 2);
      words.set(data.bits);
      b.device.queue.writeBuffer(buf, 0, words);
    } else {
      b.device.queue.writeBuffer(buf, 0, backing, typedArrayByteOffset(data.bits), bytes);
    }
    return widen(b, encoder, name, { buffer: buf }, 0, n, data.dtype, temps);
  }
  // The intrinsics, not the array's own (redefinable) properties; a SharedArrayBuffer's view is
  // copied first (Dawn for Node refuses to write from one).
  const bytes = 4 * typedArrayLength(data);
  const buf = b.buffer(bytes, STORAGE | COPY_DST, `msda ${name}`);
  temps.push(buf);
  const backing = typedArrayBuffer(data);
  if (typeof SharedArrayBuffer !== 'undefined' && backing instanceof SharedArrayBuffer) {
    b.device.queue.writeBuffer(buf, 0, new Float32Array(data));
  } else {
    b.device.queue.writeBuffer(buf, 0, backing, typedArrayByteOffset(data), bytes);
  }
  return { buffer: buf, size: bytes };
}

// Encodes and submits one call, synchronously, inside its own error scopes (pushed and popped
// here, so that calls in flight together never pop each other's): the result buffers, a staging
// copy of them when `readBack`, and a Promise of what the scopes caught. Scratch buffers are
// destroyed at once (the submitted work keeps them). The passes run the pipelines of `variant`:
// prepared before, or made now where `now` (dispatch*); the results are rounded to `dtype`.
function submitCall(b, fn, problem, inputs, plan, readBack, dtype, variant, now) {
  const d = b.device;
  // what the scopes cannot name (a foreign buffer, a kernel that failed to compile): Promises of an Error or null
  const checks = [];
  b.encoding = { variant, now, checks };
  const temps = [];
  const made = [];
  d.pushErrorScope('out-of-memory');
  d.pushErrorScope('validation');
  let results, staging = null, at = null;
  try {
    const encoder = d.createCommandEncoder({ label: `msda ${fn}` });
    const bind = {};
    for (const [name, data] of Object.entries(inputs)) bind[name] = bindInput(b, fn, name, data, temps, encoder, checks);
    const half = dtype !== 'float32';
    const out = (name, bytes) => {
      const buf = b.buffer(bytes, OUTPUT_USAGE, `msda ${name}`);
      (half ? temps : made).push(buf);
      return buf;
    };
    if (fn === 'forward') {
      const md = metaBuffer(b, metaOf(problem), temps);
      const output = out('output', plan.buffers.output);
      b.dispatch(encoder, 'forward', plan.invocations.forward, {
        problem: { buffer: md }, value: bind.value, locs: bind.samplingLocations, weights: bind.attentionWeights, out: { buffer: output },
      }, temps);
      results = { output };
    } else {
      results = encodeBackward(b, encoder, problem, plan, bind, out, temps);
    }
    // Half results: each float32 one rounded into a buffer of its own, 2 bytes an element.
    if (half) {
      for (const [name, wide] of Object.entries(results)) {
        const n = product(problem.shapes[name]), words = Math.ceil(n / 2);
        const buf = b.buffer(4 * words, OUTPUT_USAGE, `msda ${name} ${dtype}`);
        made.push(buf);
        b.dispatch(encoder, 'narrow', words, { src: { buffer: wide }, dst: { buffer: buf } }, temps, WORKGROUP, n, dtype === 'bfloat16' ? 1 : 0);
        results[name] = buf;
      }
    }
    if (readBack) {
      const names = Object.keys(results);
      let total = 0;
      at = names.map((name) => { const o = total; total += results[name].size; return o; });
      staging = b.buffer(total, MAP_READ | COPY_DST, 'msda readback');
      names.forEach((name, i) => encoder.copyBufferToBuffer(results[name], 0, staging, at[i], results[name].size));
    }
    d.queue.submit([encoder.finish()]);
  } catch (e) {
    for (const buf of made) buf.destroy();
    staging?.destroy();
    d.popErrorScope().catch(() => {});
    d.popErrorScope().catch(() => {});
    throw e;
  } finally {
    b.encoding = null;
    for (const t of temps) t.destroy();
  }
  const validation = d.popErrorScope();
  const oom = d.popErrorScope();
  const scopes = Promise.all([validation, oom, ...checks]).then(([v, o, ...named]) => {
    const other = named.find((e) => e !== null);
    if (other !== undefined) return other;
    const err = v ?? o;
    return err ? new Error(`${fn}: WebGPU ${o && !v ? 'ran out of memory' : 'refused the call'}: ${err.message}`) : null;
  }, () => null);
  return { results, made, staging, at, scopes };
}

// A result on the GPU: { buffer, shape }, with its dtype when half.
function gpuResult(problem, name, buffer, dtype) {
  const t = { buffer, shape: problem.shapes[name].slice() };
  if (dtype !== 'float32') t.dtype = dtype;
  return t;
}

async function run(b, fn, problem, inputs, plan, { outputs, dtype }) {
  const variant = variantOf(problem);
  const programs = dtype === 'float32' ? plan.programs : [...plan.programs, NARROW];
  if (programs.some((prog) => !b.pipelines.has(prog.key(variant)))) {
    // CPU inputs as they are now, not after the compile
    for (const [name, data] of Object.entries(inputs)) {
      if (data instanceof GpuTensor) continue;
      if (data instanceof HalfBits) {
        const bits = new Uint16Array(data.length);
        bits.set(data.bits);
        inputs[name] = new HalfBits(bits, data.dtype);
        continue;
      }
      inputs[name] = new Float32Array(typedArrayLength(data));
      inputs[name].set(data);
    }
    await b.prepare(programs, variant);
    if (b.closed) throw b.closed;
    if (b.lost) throw b.lostError();
  }
  const call = submitCall(b, fn, problem, inputs, plan, outputs === 'cpu', dtype, variant, false);
  const names = Object.keys(call.results);
  let result = {};
  try {
    const err = await b.guard(call.scopes);
    if (err) throw err;
    if (outputs === 'gpu') {
      for (const name of names) result[name] = gpuResult(problem, name, call.results[name], dtype);
    } else {
      await b.guard(call.staging.mapAsync(MAP_MODE_READ));
      const all = call.staging.getMappedRange();
      names.forEach((name, i) => {
        const shape = problem.shapes[name].slice(), n = product(shape);
        // a half result's buffer ends in a whole word: its elements alone
        result[name] = dtype === 'float32'
          ? { data: new Float32Array(all.slice(call.at[i], call.at[i] + 4 * n)), shape }
          : { data: new Uint16Array(all.slice(call.at[i], call.at[i] + 2 * n)), shape, dtype };
      });
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
function dispatchNow(b, fn, problem, inputs, plan, dtype) {
  const call = submitCall(b, fn, problem, inputs, plan, false, dtype, variantOf(problem), true);
  call.scopes.then((err) => { if (err) console.error(`ms-deform-attn: ${err.message}`); });
  const result = {};
  for (const [name, buffer] of Object.entries(call.results)) result[name] = gpuResult(problem, name, buffer, dtype);
  return fn === 'forward' ? result.output : result;
}

function metaBuffer(b, md, temps) {
  const buf = b.buffer(md.byteLength, STORAGE | COPY_DST, 'msda problem');
  temps.push(buf);
  b.device.queue.writeBuffer(buf, 0, md);
  return buf;
}

function encodeBackward(b, encoder, problem, plan, bind, out, temps) {
  const { samples, pixels, pairs, pairsPerPart, perPair } = plan;
  const locElements = product(problem.shapes.gradSamplingLocations);
  const grid = sampleGrid(problem);
  const md = metaBuffer(b, metaOf(problem, { gradWeightsOffset: locElements, grid }), temps);
  const scratch = (bytes, label, usage = STORAGE | COPY_DST | COPY_SRC) => {
    const buf = b.buffer(bytes, usage, `msda ${label}`);
    temps.push(buf);
    return buf;
  };
  const grads = scratch(4 * (locElements + samples), 'grads');
  const recs = scratch(32 * perPair * pairsPerPart, 'records');
  const counts = scratch(4 * (pixels + 1), 'counts');
  const offsets = scratch(4 * (pixels + 1), 'offsets');
  const sorted = scratch(16 * perPair * pairsPerPart, 'placed records');
  const terms = scratch(32 * perPair * pairsPerPart, 'ranked terms');
  const gradValue = out('gradValue', plan.buffers.gradValue);
  // Each query's rank in its batch's CPU walk, from the locations and weights where they are.
  const { ranges, rangesPerGroup, perRange } = plan;
  const BQ = problem.batch * problem.numQueries, chunks = Math.ceil(problem.numQueries / ORDER_CHUNK);
  const cells = scratch(4 * BQ, 'query cells'), walk = scratch(4 * BQ, 'query walk'), ranks = scratch(4 * BQ, 'query ranks');
  const histBytes = plan.buffers['cell histogram of the query order (scratch)'];
  const hist = scratch(histBytes, 'cell histogram'), starts = scratch(histBytes, 'cell starts');
  b.dispatch(encoder, 'cells', BQ, { problem: { buffer: md }, locs: bind.samplingLocations, weights: bind.attentionWeights, cells: { buffer: cells } }, temps);
  const rangeFirst = (r) => Math.floor(r / chunks) * problem.numQueries + (r % chunks) * ORDER_CHUNK;
  for (let r0 = 0; r0 < ranges; r0 += rangesPerGroup) {
    const r1 = Math.min(ranges, r0 + rangesPerGroup), queries = (r1 === ranges ? BQ : rangeFirst(r1)) - rangeFirst(r0);
    encoder.clearBuffer(hist);
    b.dispatch(encoder, 'orderCount', queries, { problem: { buffer: md }, cell_of: { buffer: cells }, hist: { buffer: hist } }, temps, ORDER_TILE, r0);
    b.scan(encoder, hist, starts, (r1 - r0) * perRange, temps);
    b.dispatch(encoder, 'orderPlace', queries, { problem: { buffer: md }, cell_of: { buffer: cells }, starts: { buffer: starts }, walk: { buffer: walk }, ranks: { buffer: ranks } }, temps, ORDER_TILE, r0);
  }
  for (let first = 0; first < pairs; first += pairsPerPart) {
    const n = Math.min(pairsPerPart, pairs - first);
    const partPixels = n * problem.valueLength;
    encoder.clearBuffer(counts);
    b.dispatch(encoder, 'samples', n * perPair, {
      problem: { buffer: md }, value: bind.value, locs: bind.samplingLocations, weights: bind.attentionWeights, gout: bind.gradOutput,
      grads: { buffer: grads }, recs: { buffer: recs }, counts: { buffer: counts },
    }, temps, WORKGROUP, first);
    b.scan(encoder, counts, offsets, partPixels + 1, temps);
    encoder.clearBuffer(counts);
    b.dispatch(encoder, 'place', 4 * n * perPair, {
      problem: { buffer: md }, recs: { buffer: recs }, offsets: { buffer: offsets }, cursors: { buffer: counts }, placed: { buffer: sorted }, ranks: { buffer: ranks },
    }, temps, WORKGROUP, first);
    b.dispatch(encoder, 'rank', 4 * n * perPair, {
      problem: { buffer: md }, offsets: { buffer: offsets }, placed: { buffer: sorted }, recs: { buffer: recs }, walk: { buffer: walk }, terms: { buffer: terms },
    }, temps, WORKGROUP, first, partPixels);
    b.dispatch(encoder, 'gather', partPixels * problem.channels, {
      problem: { buffer: md }, offsets: { buffer: offsets }, terms: { buffer: terms }, gout: bind.gradOutput, gvalue: { buffer: gradValue },
    }, temps, WORKGROUP, first);
  }
  const gradSamplingLocations = out('gradSamplingLocations', plan.buffers.gradSamplingLocations);
  const gradAttentionWeights = out('gradAttentionWeights', plan.buffers.gradAttentionWeights);
  encoder.copyBufferToBuffer(grads, 0, gradSamplingLocations, 0, 4 * locElements);
  encoder.copyBufferToBuffer(grads, 4 * locElements, gradAttentionWeights, 0, 4 * samples);
  return { gradValue, gradSamplingLocations, gradAttentionWeights };
}

export { CANONICAL_NAN };
