// The API init() gives out: Msda (forward, backward, prepare on one backend) and Prepared (a
// problem whose tensors live in the backend across calls).
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import { checkSizes } from './backend.js';
import { describe } from './errors.js';
import { callError } from './errors.js';
import {
  DESC, describeValueDtype, elementsOf, OUTPUTS, problemFromOptions, problemFromTensors, TENSORS,
} from './problem.js';
import { HalfBits, kernelValueDtype } from './half.js';
import { streamForward } from './stream.js';
import { typedArrayBuffer } from './typed.js';

// Node 20 may lack Symbol.dispose; Node's own polyfill uses this registered symbol.
export const DISPOSE = Symbol.dispose ?? Symbol.for('nodejs.dispose');

// ---------------------------------------------------------------------------------------------
// Prepared problems: buffers that live in the backend (the wasm heap) across calls.

// A problem without its own `threads` runs on the backend's.
function defaultThreads(backend, problem) {
  if (problem.threads === undefined) {
    problem.threads = backend.threads ?? 1;
    problem.desc[DESC.threads] = BigInt(problem.threads);
  }
}

/**
 * A problem with its tensors allocated once, for repeated calls without copies: write the
 * inputs into the views (`prepared.value.set(...)`), call forward()/backward(), read the
 * outputs from the views. Views are re-created after the wasm memory grows, so read them from
 * the object each time rather than keeping them. dispose() frees the buffers.
 */
export class Prepared {
  constructor(backend, problem, mode) {
    defaultThreads(backend, problem);
    this.problem = problem;
    this.mode = mode;
    this.backend = backend.name;
    this.shapes = {};
    const layout = TENSORS[mode].map((name) => {
      this.shapes[name] = problem.shapes[name].slice();
      return { name, elements: elementsOf(problem.shapes[name]) };
    });
    this._store = backend.allocate(problem.desc, layout);
  }

  _view(name) {
    if (this._store === null) throw new Error(`ms-deform-attn: ${name} of a disposed prepared problem`);
    if (!(name in this.shapes)) {
      throw new Error(`ms-deform-attn: ${name} is not allocated by a problem prepared for '${this.mode}'`);
    }
    return this._store.view(name);
  }

  get value() { return this._view('value'); }
  get samplingLocations() { return this._view('samplingLocations'); }
  get attentionWeights() { return this._view('attentionWeights'); }
  get gradOutput() { return this._view('gradOutput'); }
  get output() { return this._view('output'); }
  get gradValue() { return this._view('gradValue'); }
  get gradSamplingLocations() { return this._view('gradSamplingLocations'); }
  get gradAttentionWeights() { return this._view('gradAttentionWeights'); }

  /** { data, shape } over the heap view of one tensor. */
  tensor(name) {
    const data = this._view(name);
    return { data, shape: this.shapes[name].slice() };
  }

  // Every call but the copying forward on wasm (streamForward) calls C from here.
  _run(op) {
    if (this._store === null) throw new Error(`ms-deform-attn: ${op} on a disposed prepared problem`);
    if (this.mode !== 'both' && this.mode !== op) {
      throw new Error(`ms-deform-attn: ${op} on a problem prepared for '${this.mode}'`);
    }
    const failure = this._store.run(op);
    if (failure !== null) throw callError(op, failure);
  }

  /** Runs forward on the current inputs; returns the output tensor (a view). */
  forward() {
    this._run('forward');
    return this.tensor('output');
  }

  /** Runs backward on the current inputs and gradOutput; returns the gradient tensors (views). */
  backward() {
    this._run('backward');
    return {
      gradValue: this.tensor('gradValue'),
      gradSamplingLocations: this.tensor('gradSamplingLocations'),
      gradAttentionWeights: this.tensor('gradAttentionWeights'),
    };
  }

  dispose() {
    if (this._store !== null) this._store.free();
    this._store = null;
    if (this._owner !== undefined) this._owner._prepared.delete(this);
  }

  /** `using p = msda.prepare(...)` disposes it at the end of the block. */
  [DISPOSE]() {
    this.dispose();
  }

  get disposed() {
    return this._store === null;
  }
}

/** The API returned by init(): forward, backward and prepare on one backend. */
export class Msda {
  constructor(backend, release) {
    this._backend = backend;
    // Called once by dispose(): gives this instance's share of the backend back (createApi).
    this._release = release;
    // Live prepared problems, freed by dispose().
    this._prepared = new Set();
    /** Threads each call uses unless it passes its own `threads` (init's option; 1 without threads). */
    this.threads = backend.threads ?? 1;
    /** 'wasm' (SIMD module), 'wasm-scalar' or 'native'. */
    this.backend = backend.name;
    /** True when vector code runs: the SIMD128 wasm module, or the addon's SSE2 (or wider) kernels. */
    this.simd = backend.simd;
    /** The vector ISA the kernels run: 'wasm-simd128', 'sse2' (the addon on x86), ... or 'scalar'. */
    this.isa = backend.isa;
    /**
     * Sizes past which calls are a RangeError before anything is allocated: tensorBytes for one
     * tensor; callBytes (wasm) for one call's or one prepared problem's tensors together, with
     * nothing else in the heap (null natively: the machine's memory decides). core/backend.js.
     */
    this.limits = { ...backend.limits };
    /** Wasm backends: the module's memory and the allocator's in-use bytes (for leak checks). */
    this.wasm = backend.memory
      ? { memory: backend.memory, heapInUse: () => backend.heapInUse() }
      : null;
  }

  // A call asking for more threads than a wasm instance has runs on the ones it has (same bits):
  // say so once per backend rather than silently (native starts what a call asks for).
  _noteThreads(fn, problem) {
    const b = this._backend;
    const has = b.threads ?? 1;
    if (!b.memory || problem.threads === undefined || problem.threads <= has || b.threadsNoticed) return;
    b.threadsNoticed = true;
    console.warn(`ms-deform-attn: ${fn} asked for threads: ${problem.threads}, but this instance runs on ${has} `
      + `(init({ threads: ${problem.threads} }) starts more; results are the same bits either way). Said once.`);
  }

  // Inputs that are views of this heap (a prepared problem's tensors) are copied out first:
  // the allocation that follows may grow the memory, which detaches every view of its buffer.
  _detachFromHeap(inputs) {
    const heap = this._backend.memory?.buffer;
    if (heap === undefined) return;
    for (const [name, data] of Object.entries(inputs)) {
      if (data instanceof HalfBits) {
        if (typedArrayBuffer(data.bits) === heap) inputs[name] = new HalfBits(new Uint16Array(data.bits), data.dtype);
      } else if (typedArrayBuffer(data) === heap) {
        inputs[name] = new Float32Array(data);
      }
    }
  }

  // Every call starts here: a disposed instance refuses with a clear Error.
  _live(fn) {
    if (this._backend === null) throw new Error(`ms-deform-attn: ${fn} on a disposed instance (dispose() was called)`);
  }

  /**
   * Frees what this instance holds: its prepared problems, and its share of the backend (the
   * wasm heap and the threads' workers go when the last instance init() gave out is disposed).
   * Later calls throw. Idempotent.
   */
  dispose() {
    if (this._backend === null) return;
    for (const p of [...this._prepared]) p.dispose();
    this._backend = null;
    this.wasm = null;
    const release = this._release;
    this._release = undefined;
    if (release !== undefined) release();
  }

  /** `using msda = await init()` disposes it at the end of the block. */
  [DISPOSE]() {
    this.dispose();
  }

  get disposed() {
    return this._backend === null;
  }

  prepare(problemOptions, options = {}) {
    this._live('prepare');
    const modes = "{ mode?: 'forward' | 'backward' | 'both' }";
    if (options === null || typeof options !== 'object') throw new TypeError(`prepare: options is ${describe(options)}, expected ${modes}`);
    const { mode = 'both', ...rest } = options;   // each read once
    const unknown = Object.keys(rest);
    if (unknown.length > 0) throw new TypeError(`prepare: unknown option '${unknown[0]}', expected mode`);
    const problem = problemFromOptions('prepare', problemOptions);
    this._live('prepare');   // again: a getter among the arguments may have disposed this instance
    if (!Object.hasOwn(TENSORS, mode)) throw new RangeError(`prepare: mode is ${describe(mode)}, expected 'forward', 'backward' or 'both'`);
    checkSizes('prepare', this._backend, problem, mode);
    this._noteThreads('prepare', problem);
    const prepared = new Prepared(this._backend, problem, mode);
    // The first call then finds its memory grown and its pages present (the copying calls skip
    // this: they overwrite their inputs and take fresh outputs anyway).
    prepared._store.prefault(OUTPUTS);
    prepared._owner = this;
    this._prepared.add(prepared);
    return prepared;
  }

  forward(args) {
    this._live('forward');
    const { problem, inputs } = problemFromTensors('forward', args, { keepHalf: true });
    this._live('forward');   // again: a getter among the arguments may have disposed this instance
    checkSizes('forward', this._backend, problem, 'forward');
    this._noteThreads('forward', problem);
    this._detachFromHeap(inputs);
    defaultThreads(this._backend, problem);
    // On one thread: windows (streamForward). Threads split one kernel call among them instead
    // (each window would cost a fork and join).
    const b = this._backend;
    if (b.memory && Math.min(problem.threads, b.threads ?? 1) === 1) {
      return { data: streamForward(b, problem, inputs), shape: problem.shapes.output.slice() };
    }
    const valueDtype = kernelValueDtype(this._backend, inputs.value, problem, 'forward');
    describeValueDtype(problem.desc, valueDtype);
    const p = new Prepared(this._backend, problem, 'forward');
    try {
      for (const [name, data] of Object.entries(inputs)) p._store.load(name, data, 0, valueDtype !== 'float32');
      p._run('forward');
      return { data: p._store.take('output'), shape: p.shapes.output.slice() };
    } finally {
      p.dispose();
    }
  }

  backward(args) {
    this._live('backward');
    const { problem, inputs } = problemFromTensors('backward', args, { backward: true, keepHalf: true });
    this._live('backward');
    checkSizes('backward', this._backend, problem, 'backward');
    this._noteThreads('backward', problem);
    this._detachFromHeap(inputs);
    const valueDtype = kernelValueDtype(this._backend, inputs.value, problem, 'backward');
    describeValueDtype(problem.desc, valueDtype);
    const p = new Prepared(this._backend, problem, 'backward');
    try {
      for (const [name, data] of Object.entries(inputs)) p._store.load(name, data, 0, valueDtype !== 'float32');
      p._run('backward');
      const out = (name) => ({ data: p._store.take(name), shape: p.shapes[name].slice() });
      return {
        gradValue: out('gradValue'),
        gradSamplingLocations: out('gradSamplingLocations'),
        gradAttentionWeights: out('gradAttentionWeights'),
      };
    } finally {
      p.dispose();
    }
  }
}
