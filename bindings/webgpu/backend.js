// The WebGPU backend: init({ backend: 'webgpu' }) gives an instance whose forward and backward
// run the WGSL programs of kernels/ on a GPUDevice (its own, or the caller's) and return
// Promises. Arguments are read and checked by the core (problemFromTensors, the same messages
// as the other backends); tensors may be CPU ({ data, shape }) or GPU ({ buffer, shape,
// byteOffset?, dtype? }) ones, float32 or half precision (results too, with options.dtype).
// What is computed: SEMANTICS.md; how and what differs: docs/webgpu.md.
//
// This file: init, the instance and its calls' options. Below it, each a job: plan.js (the
// variant, the problem's words, every buffer and pass of a call checked against the device),
// encode.js (a call's passes in their order, submitted), tensors.js (tensors in and out),
// gpu.js (the device, its pipelines, guards, probe, dispatch and scan).

import { DISPOSE } from '../core/api.js';
import { problemFromTensors } from '../core/problem.js';
import { codedError, describe, WEBGPU_DEVICE_LOST, WEBGPU_UNAVAILABLE } from '../core/errors.js';
import { CANONICAL_NAN } from './kernels/problem.js';
import { Gpu } from './gpu.js';
import { gpuReader } from './tensors.js';
import { checkPlan, planBackward, planForward, planInputs } from './plan.js';
import { dispatchNow, run } from './encode.js';

export { CANONICAL_NAN, WEBGPU_DEVICE_LOST, WEBGPU_UNAVAILABLE };

function unavailable(message, cause) {
  return codedError(`ms-deform-attn: WebGPU is not available: ${message}`, WEBGPU_UNAVAILABLE, cause || undefined);
}

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
    return new MsdaWebGPU(await Gpu.create(device, false, device.adapterInfo));
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
  const onDevice = await Gpu.create(dev, true, adapter.info);
  // Dawn for Node frees its instance (and with it the device's threads) when `gpu` is collected.
  onDevice.gpu = gpu;
  return new MsdaWebGPU(onDevice);
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

export class MsdaWebGPU {
  constructor(gpu) {
    this._b = gpu;   // null once disposed
    this._backendKept = gpu;
    this.backend = 'webgpu';
    this.device = gpu.device;
    /** The adapter's vendor, architecture, device and description where the runtime says. */
    this.adapterInfo = gpu.info;

    /** The limits this instance plans its calls against. */
    this.limits = gpu.limits;
    this.threads = 1;
  }

  /** { fusedMultiplyAdd, productsRounded, flushesSubnormals }: what the startup probe saw this device do (null until it answers on an instance made without awaiting). */
  get numerics() { return this._backendKept.numerics; }

  get disposed() { return this._b === null; }

  /** The pipelines this instance has compiled or is compiling (not one that failed to), in the
   *  order calls asked for them: each a program's name, then the variant's flags it was made for
   *  ('forward narrow vec4'). */
  get compiled() { return [...this._backendKept.compiled]; }

  /** For benchmarks: timestamps of every pass into querySet (a 'timestamp' GPUQuerySet of
   *  `capacity` entries) from index 0 on, until profile(null); returns how many were written. */
  profile(querySet, capacity = 0) {
    const gpu = this._live('profile');
    const written = gpu.profile ? gpu.profile.next : 0;
    gpu.profile = querySet ? { querySet, capacity, next: 0 } : null;
    return written;
  }

  /** An instance on `device` made without awaiting (its kernels compile in the background): for synchronous callers. */
  static onDeviceSync(device) {
    return new MsdaWebGPU(Gpu.createSync(device, device.adapterInfo));
  }

  /** Frees what this instance holds (calls still pending reject); destroys the device only when init() created it. */
  dispose() {
    const gpu = this._b;
    if (gpu === null) return;
    this._b = null;
    gpu.close(new Error('ms-deform-attn: the call was pending on a disposed instance (dispose() was called)'));
    if (gpu.owned) gpu.device.destroy();
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
    return this._planned(fn, kind, args, (gpu, k, problem, inputs, plan) => dispatchNow(gpu, k, problem, inputs, plan, dtype));
  }

  async _call(fn, args, options) {
    const opts = readCallOptions(fn, options);
    return this._planned(fn, fn, args, (gpu, kind, problem, inputs, plan) => run(gpu, kind, problem, inputs, plan, opts));
  }

  // The call's problem and inputs read (once), its plan made and checked, then `go`.
  _planned(fn, kind, args, go) {
    const gpu = this._live(fn);
    const { problem, inputs } = problemFromTensors(fn, args, { backward: kind === 'backward', gpu: gpuReader, keepHalf: true });
    this._live(fn);
    const plan = kind === 'forward' ? planForward(problem) : planBackward(gpu, problem);
    planInputs(gpu, plan, inputs);
    checkPlan(fn, gpu, plan);
    return go(gpu, kind, problem, inputs, plan);
  }
}
