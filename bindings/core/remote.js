// initWorker: the same API, asynchronous, on an instance that lives in a worker (worker_threads
// in Node, a module Web Worker in browsers), so a long backward never blocks the caller's thread.
// Both halves live here; the entries (node.js, browser.js) say how the worker is started and the
// worker scripts (remote-worker-node.js, remote-worker.js) wire serve() to their port.
//
// A call is validated and its inputs taken on the caller's thread when it is made (so later
// changes to the caller's arrays do not reach it): copied, or with { transfer: true } moved
// (their ArrayBuffers are transferred and detached). Calls run one at a time, in order. An
// AbortSignal rejects the call at once with a DOMException named AbortError; a call still queued
// is dropped, one already running finishes in the worker and its result is discarded.

import { DISPOSE } from './api.js';
import { fmtShape } from './args.js';
import { elementsOf, problemFromOptions, problemFromTensors, TENSORS } from './problem.js';
import { copyFloat32, copyItems, typedArrayBuffer, typedArrayByteOffset, typedArrayKind, typedArrayLength } from './typed.js';
import { describe } from './errors.js';

export const ASYNC_DISPOSE = Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose');

const ABORTED = typeof AbortSignal === 'undefined' ? null : Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;

const INPUTS = { forward: ['value', 'samplingLocations', 'attentionWeights'],
  backward: ['gradOutput', 'value', 'samplingLocations', 'attentionWeights'] };

// What of a problem prepare() sends to the worker (problemFromOptions' checked values).
const PROBLEM_FIELDS = ['batch', 'numQueries', 'numHeads', 'channels', 'numPoints', 'spatialShapes', 'levelStartIndex',
  'valueLayout', 'samplingLocationsLayout', 'alignCorners', 'paddingMode', 'threads'];

// ---------------------------------------------------------------------------------------------
// Errors cross the thread boundary as plain records and are rebuilt with their class and code.

function errorRecord(e) {
  if (e === null || typeof e !== 'object') return { name: 'Error', message: String(e) };
  return { name: e.name, message: e.message, code: e.code, status: e.status };
}

function rebuildError(r) {
  const wasmError = ['CompileError', 'LinkError', 'RuntimeError'].includes(r.name) && typeof WebAssembly !== 'undefined';
  const E = r.name === 'TypeError' ? TypeError : r.name === 'RangeError' ? RangeError : wasmError ? WebAssembly[r.name] : Error;
  const err = new E(r.message);
  if (r.code !== undefined) err.code = r.code;
  if (r.status !== undefined) err.status = r.status;
  return err;
}

const abortError = (op) => new DOMException(`${op} was aborted`, 'AbortError');

// ---------------------------------------------------------------------------------------------
// The worker's half.

/**
 * Serves one instance on `port` ({ post(message, transfer), onMessage(fn) }): 'init' makes it
 * with `init(options)`, 'call' runs forward or backward, outputs transferred back.
 */
export function serve(port, init) {
  let msda = null;
  let ran = 0;
  const prepared = new Map();   // problems prepared in this worker, by handle
  let nextHandle = 0;
  // One call: its result and the tensors whose buffers go back transferred. A prepared problem's
  // outputs are views of the heap: they are copied here, in the worker, into arrays that move.
  const own = (t) => ({ data: new Float32Array(t.data), shape: t.shape });
  const preparedOf = (m) => {
    const p = prepared.get(m.args.handle);
    if (p === undefined) throw new Error(`ms-deform-attn: ${m.op.slice('prepared.'.length)} on a disposed prepared problem`);
    return p;
  };
  function run(m) {
    if (m.op === 'forward') {
      const out = msda.forward(m.args);
      return [out, [out]];
    }
    if (m.op === 'backward') {
      const grads = msda.backward(m.args);
      return [grads, Object.values(grads)];
    }
    if (m.op === 'prepare') {
      const p = msda.prepare(m.args.problem, { mode: m.args.mode });
      const handle = nextHandle++;
      prepared.set(handle, p);
      return [{ handle, shapes: p.shapes, mode: p.mode }, []];
    }
    if (m.op === 'prepared.forward' || m.op === 'prepared.backward') {
      const p = preparedOf(m);
      // Only what changed was sent; the rest is what the heap holds from earlier calls.
      for (const [name, data] of Object.entries(m.args.inputs)) p[name].set(data);
      if (m.op === 'prepared.forward') {
        const out = own(p.forward());
        return [out, [out]];
      }
      const grads = Object.fromEntries(Object.entries(p.backward()).map(([k, t]) => [k, own(t)]));
      return [grads, Object.values(grads)];
    }
    if (m.op === 'prepared.dispose') {
      prepared.get(m.args.handle)?.dispose();
      prepared.delete(m.args.handle);
      return [null, []];
    }
    throw new Error(`ms-deform-attn: the worker got an unknown call '${m.op}'`);
  }
  port.onMessage(async (m) => {
    if (m.type === 'init') {
      try {
        msda = await init(m.options);
        port.post({ id: m.id, info: { backend: msda.backend, simd: msda.simd, isa: msda.isa, threads: msda.threads } });
      } catch (e) {
        port.post({ id: m.id, error: errorRecord(e) });
      }
      return;
    }
    let result, tensors;
    try {
      [result, tensors] = run(m);
      ran++;
    } catch (e) {
      port.post({ id: m.id, error: errorRecord(e), ran });
      return;
    }
    port.post({ id: m.id, result, ran }, tensors.map((t) => t.data.buffer));
  });
}

// ---------------------------------------------------------------------------------------------
// The caller's half.

// Takes the inputs when the call is made: copies of their elements, or with transfer their
// ArrayBuffers moved out, each once even when inputs share one (where each view sits is read
// before anything moves). Buffers that cannot move (a SharedArrayBuffer, a WebAssembly memory)
// are copied. No caller code runs here: copies are made with the intrinsic constructor (never the
// array's own constructor or Symbol.species), so nothing can terminate the worker, abort the
// signal or keep a handle on what is sent once the call's last check has passed.
function takeAll(arrays, transfer) {
  if (!transfer) return arrays.map(copyFloat32);
  const where = arrays.map((data) => ({ buffer: typedArrayBuffer(data), offset: typedArrayByteOffset(data), length: typedArrayLength(data) }));
  const moved = new Map();
  for (const { buffer } of where) {
    if (moved.has(buffer)) continue;
    let to = null;
    if (!(typeof SharedArrayBuffer !== 'undefined' && buffer instanceof SharedArrayBuffer)) {
      try {
        to = structuredClone(buffer, { transfer: [buffer] });
      } catch {
        to = null;   // not transferable: copied below
      }
    }
    moved.set(buffer, to);
  }
  return arrays.map((data, i) => {
    const { buffer, offset, length } = where[i];
    const to = moved.get(buffer);
    return to === null ? copyFloat32(data) : new Float32Array(to, offset, length);
  });
}

function checkCallOptions(op, options) {
  if (options === undefined) return { signal: undefined, transfer: false };
  if (options === null || typeof options !== 'object') {
    throw new TypeError(`${op}: options is ${describe(options)}, expected { signal?, transfer? }`);
  }
  const { signal, transfer = false, ...rest } = options;
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw new TypeError(`${op}: unknown option '${unknown[0]}', expected signal or transfer`);
  if (signal !== undefined && !(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) {
    throw new TypeError(`${op}: signal is ${describe(signal)}, expected an AbortSignal`);
  }
  // instanceof only looks at the prototype chain: a real AbortSignal is one its own getter accepts.
  if (signal !== undefined) {
    try {
      ABORTED.call(signal);
    } catch {
      throw new TypeError(`${op}: signal is an object that is not an AbortSignal, expected an AbortSignal`);
    }
  }
  if (typeof transfer !== 'boolean') throw new TypeError(`${op}: transfer is ${describe(transfer)}, expected true or false`);
  return { signal, transfer };
}

/** The API initWorker() resolves to: Msda's calls, asynchronous, in a worker. */
export class MsdaWorker {
  constructor(port, info) {
    this._port = port;
    this._queue = [];       // calls not yet sent
    this._running = null;   // the call the worker is running
    this._stopped = null;   // why calls are refused, once terminated or the worker died
    this._ran = 0;          // calls the worker has run (for tests)
    /** 'wasm', 'wasm-scalar' or 'native', as in the worker. */
    this.backend = info.backend;
    this.simd = info.simd;
    this.isa = info.isa;
    this.threads = info.threads;
  }

  /** forward(args) in the worker; resolves to the output tensor. */
  forward(args, options) {
    return this._call('forward', args, options);
  }

  /** backward(args) in the worker; resolves to the gradients. */
  backward(args, options) {
    return this._call('backward', args, options);
  }

  /**
   * prepare(problem, { mode }) in the worker: resolves to a WorkerPrepared, the problem's tensors
   * living in the worker's memory across calls, so that a call sends only the inputs that changed
   * and gets its results transferred back.
   */
  prepare(problemOptions, options = {}) {
    try {
      if (this._stopped !== null) throw new Error(`ms-deform-attn: prepare on a ${this._stopped}`);
      const modes = "{ mode?: 'forward' | 'backward' | 'both' }";
      if (options === null || typeof options !== 'object') throw new TypeError(`prepare: options is ${describe(options)}, expected ${modes}`);
      const { mode = 'both', ...rest } = options;   // each read once
      const unknown = Object.keys(rest);
      if (unknown.length > 0) throw new TypeError(`prepare: unknown option '${unknown[0]}', expected mode`);
      const problem = problemFromOptions('prepare', problemOptions);
      if (!Object.hasOwn(TENSORS, mode)) throw new RangeError(`prepare: mode is ${describe(mode)}, expected 'forward', 'backward' or 'both'`);
      const plain = {};
      for (const key of PROBLEM_FIELDS) if (problem[key] !== undefined) plain[key] = problem[key];
      return this._submit('prepare', { problem: plain, mode }, [], undefined)
        .then((r) => new WorkerPrepared(this, r.handle, r.shapes, r.mode));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  _call(op, args, options) {
    try {
      if (this._stopped !== null) throw new Error(`ms-deform-attn: ${op} on a ${this._stopped}`);
      const { signal, transfer } = checkCallOptions(op, options);
      if (signal !== undefined && signal.aborted) return Promise.reject(abortError(op));
      const { problem, inputs } = problemFromTensors(op, args, { backward: op === 'backward' });
      const message = {
        spatialShapes: problem.spatialShapes, levelStartIndex: problem.levelStartIndex,
        valueLayout: problem.valueLayout, samplingLocationsLayout: problem.samplingLocationsLayout,
        alignCorners: problem.alignCorners, paddingMode: problem.paddingMode,
      };
      if (problem.threads !== undefined) message.threads = problem.threads;
      // Again, now that the arguments' getters have run (they may have terminated the worker
      // or aborted the signal): a call queued on a stopped worker would never settle.
      if (this._stopped !== null) throw new Error(`ms-deform-attn: ${op} on a ${this._stopped}`);
      if (signal !== undefined && signal.aborted) return Promise.reject(abortError(op));
      const taken = takeAll(INPUTS[op].map((name) => inputs[name]), transfer);
      INPUTS[op].forEach((name, i) => { message[name] = { data: taken[i], shape: problem.shapes[name] }; });
      return this._submit(op, message, taken, signal);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // Queues one call; `arrays` are the inputs whose buffers go to the worker transferred.
  _submit(op, args, arrays, signal, name = op) {
    const job = { op, args, signal, onAbort: null, buffers: [...new Set(arrays.map((a) => a.buffer))] };
    return new Promise((resolve, reject) => {
      job.resolve = resolve;
      job.reject = reject;
      if (this._stopped !== null) {
        reject(new Error(`ms-deform-attn: ${name} on a ${this._stopped}`));
        return;
      }
      if (job.signal !== undefined) {
        job.onAbort = () => {
          const queued = this._queue.indexOf(job);
          if (queued >= 0) this._queue.splice(queued, 1);
          else job.discard = true;   // running: its result is dropped when it comes
          this._settle(job, null, abortError(name));
        };
        job.signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this._queue.push(job);
      this._pump();
    });
  }

  _settle(job, value, error) {
    if (job.settled) return;
    job.settled = true;
    if (job.onAbort !== null) job.signal.removeEventListener('abort', job.onAbort);
    if (error !== null) job.reject(error);
    else job.resolve(value);
  }

  _pump() {
    if (this._running !== null || this._stopped !== null) return;
    const job = this._queue.shift();
    if (job === undefined) {
      this._port.unref();    // idle: a Node process may exit
      return;
    }
    this._running = job;
    this._port.ref();
    try {
      this._port.request({ type: 'call', op: job.op, args: job.args }, job.buffers, (reply) => {
        this._running = null;
        if (reply.ran !== undefined) this._ran = reply.ran;
        if (!job.discard) this._settle(job, reply.error ? null : reply.result, reply.error ? rebuildError(reply.error) : null);
        this._pump();
      });
    } catch (e) {
      // Not sent (postMessage threw): this call fails, the next one goes.
      this._running = null;
      this._settle(job, null, new Error(`ms-deform-attn: ${job.op} could not be sent to the worker: ${e?.message ?? e}`, { cause: e }));
      this._pump();
    }
  }

  // Refuses every call from now on, rejecting those still pending.
  _stop(reason) {
    if (this._stopped !== null) return;
    this._stopped = reason;
    const error = new Error(`ms-deform-attn: the call was pending on a ${reason}`);
    if (this._running !== null) this._settle(this._running, null, error);
    for (const job of this._queue.splice(0)) this._settle(job, null, error);
    this._running = null;
  }

  /** Stops the worker (its memory and threads go with it); pending calls reject, later calls throw. */
  terminate() {
    this._stop('terminated worker (terminate() was called)');
    return this._port.terminate();
  }

  /** True after terminate() (or when the worker stopped on its own). */
  get terminated() {
    return this._stopped !== null;
  }

  /** `await using w = await initWorker()` terminates it at the end of the block. */
  [ASYNC_DISPOSE]() {
    return this.terminate();
  }

  /** Synchronous disposal: starts terminate(). */
  [DISPOSE]() {
    this.terminate();
  }
}

/**
 * A problem prepared in the worker (MsdaWorker.prepare): its tensors stay in the worker's memory.
 * forward/backward take the inputs that changed since the last call ({ value?, ... }, each a
 * Float32Array or { data, shape } of the problem's shape), taken as the worker's calls take
 * them (copied, or moved with { transfer: true }); the rest are what earlier calls set. Results
 * come back as arrays of their own, transferred.
 */
export class WorkerPrepared {
  constructor(worker, handle, shapes, mode) {
    this._worker = worker;
    this._handle = handle;
    this._disposed = false;
    /** 'forward', 'backward' or 'both', as prepared. */
    this.mode = mode;
    /** Each allocated tensor's shape, by name. */
    this.shapes = shapes;
  }

  /** Sets the given inputs, runs forward in the worker; resolves to the output tensor. */
  forward(inputs, options) {
    return this._run('forward', inputs, options);
  }

  /** Sets the given inputs (gradOutput among them), runs backward; resolves to the gradients. */
  backward(inputs, options) {
    return this._run('backward', inputs, options);
  }

  _run(op, inputs, options) {
    const w = this._worker;
    try {
      if (w._stopped !== null) throw new Error(`ms-deform-attn: ${op} on a ${w._stopped}`);
      if (this._disposed) throw new Error(`ms-deform-attn: ${op} on a disposed prepared problem`);
      if (this.mode !== 'both' && this.mode !== op) throw new Error(`ms-deform-attn: ${op} on a problem prepared for '${this.mode}'`);
      const { signal, transfer } = checkCallOptions(op, options);
      if (signal !== undefined && signal.aborted) return Promise.reject(abortError(op));
      const given = readChanged(op, inputs, this.shapes);
      // Again, now that the arguments' getters have run.
      if (w._stopped !== null) throw new Error(`ms-deform-attn: ${op} on a ${w._stopped}`);
      if (this._disposed) throw new Error(`ms-deform-attn: ${op} on a disposed prepared problem`);
      if (signal !== undefined && signal.aborted) return Promise.reject(abortError(op));
      const names = Object.keys(given);
      const taken = takeAll(names.map((name) => given[name]), transfer);
      const sent = Object.fromEntries(names.map((name, i) => [name, taken[i]]));
      return w._submit(`prepared.${op}`, { handle: this._handle, inputs: sent }, taken, signal, op);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /** Frees the problem's memory in the worker (after the calls already made); later calls reject. */
  dispose() {
    if (this._disposed) return Promise.resolve();
    this._disposed = true;
    if (this._worker._stopped !== null) return Promise.resolve();   // its memory went with the worker
    return this._worker._submit('prepared.dispose', { handle: this._handle }, [], undefined, 'dispose').then(() => undefined);
  }

  /** True after dispose(). */
  get disposed() {
    return this._disposed;
  }

  /** `await using p = await w.prepare(...)` disposes it at the end of the block. */
  [ASYNC_DISPOSE]() {
    return this.dispose();
  }
}

// The inputs a prepared call sends: only names the call takes, each read once, as a Float32Array
// (or { data, shape }) with the problem's element count (and shape, where one is given).
function readChanged(op, inputs, shapes) {
  if (inputs === undefined) return {};
  const names = INPUTS[op];
  if (inputs === null || typeof inputs !== 'object' || Array.isArray(inputs)) {
    throw new TypeError(`${op}: inputs is ${describe(inputs)}, expected an object of the inputs that changed (${names.join(', ')})`);
  }
  const given = {};
  for (const [name, x] of Object.entries(inputs)) {
    if (!names.includes(name)) throw new TypeError(`${op}: unknown input '${name}', expected ${names.join(', ')}`);
    if (x === undefined) continue;
    const isTensor = x !== null && typeof x === 'object' && typedArrayKind(x) === undefined;
    const data = isTensor ? x.data : x;
    const shape = isTensor ? x.shape : undefined;
    const want = elementsOf(shapes[name]);
    if (typedArrayKind(data) !== 'Float32Array') {
      throw new TypeError(`${op}: ${name} is ${describe(data)}, expected a Float32Array of ${want} elements (${fmtShape(shapes[name])}) or { data, shape }`);
    }
    if (shape !== undefined) {
      const n = Array.isArray(shape) ? shape.length : -1;
      const items = n >= 0 && n <= 16 ? copyItems(shape, n) : null;
      if (items === null || fmtShape(items) !== fmtShape(shapes[name])) {
        throw new RangeError(`${op}: ${name}.shape is ${items === null ? describe(shape) : fmtShape(items)}, expected ${fmtShape(shapes[name])} (the prepared problem's)`);
      }
    }
    const length = typedArrayLength(data);
    if (length !== want) throw new RangeError(`${op}: ${name} has ${length} elements, expected ${want} (${fmtShape(shapes[name])}, the prepared problem's)`);
    given[name] = data;
  }
  return given;
}

/**
 * initWorker over `spawn(urls)`, the entry's way of starting the worker: it returns a port
 * { post(message, transfer), onMessage(fn), onFailure(fn), ref(), unref(), terminate() }.
 * `resolve(options)` turns init's options into what the worker's init takes (wasmPaths resolved
 * against the caller's page, so relative URLs mean what they mean here).
 */
export function createInitWorker(spawn, resolveOptions) {
  return async function initWorker(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError(`initWorker: options is ${describe(options)}, expected an object`);
    }
    // A plain copy (a Proxy cannot be sent to a worker); values no worker can receive are
    // refused here, naming the option, instead of a DataCloneError.
    const plain = { ...options };
    // The WebGPU instance's calls already return Promises and its device cannot live in a worker
    // here: init() is the way (a worker would post a Promise back, and Dawn aborts Node when a
    // worker dies with its GPU call in flight).
    if (plain.backend === 'webgpu') {
      throw new TypeError("initWorker: backend is 'webgpu', which runs in no worker: the WebGPU instance's calls already " +
        "return Promises, use init({ backend: 'webgpu' })");
    }
    for (const key of ['gpu', 'device']) {
      if (plain[key] !== undefined) {
        throw new TypeError(`initWorker: ${key} is ${describe(plain[key])}, a WebGPU option: the WebGPU instance runs in no worker, ` +
          "use init({ backend: 'webgpu', " + key + ' })');
      }
    }
    for (const [key, v] of Object.entries(plain)) {
      if (typeof v === 'function' || typeof v === 'symbol') {
        throw new TypeError(`initWorker: ${key} is ${describe(v)}, which cannot be sent to a worker`);
      }
    }
    const { options: workerOptions, urls } = resolveOptions(plain);
    const raw = await spawn(urls);
    // One reply per request, matched by id, so a reply can never reach the wrong call.
    let next = 0;
    const waiting = new Map();
    let onFailure = null;
    raw.onMessage((m) => {
      const done = waiting.get(m.id);
      waiting.delete(m.id);
      if (done !== undefined) done(m);
    });
    raw.onFailure((why) => {
      if (onFailure !== null) onFailure(why);   // first: refuse the queue, so nothing more is sent
      const pending = [...waiting.values()];
      waiting.clear();
      for (const done of pending) done({ error: { name: 'Error', message: `ms-deform-attn: the worker stopped: ${why}` } });
    });
    const port = {
      request(message, transfer, done) {
        const id = next++;
        waiting.set(id, done);
        try {
          raw.post({ ...message, id }, transfer);
        } catch (e) {
          waiting.delete(id);
          throw e;
        }
      },
      ref: () => raw.ref(),
      unref: () => raw.unref(),
      terminate: () => raw.terminate(),
    };
    raw.ref();
    let reply;
    try {
      reply = await new Promise((resolve) => port.request({ type: 'init', options: workerOptions }, [], resolve));
    } catch (e) {
      // Not sent (a value that cannot be cloned): the worker must not outlive this call.
      await raw.terminate();
      throw e?.name === 'DataCloneError' ? new TypeError(`initWorker: options cannot be sent to a worker: ${e.message}`) : e;
    }
    if (reply.error) {
      await raw.terminate();
      throw rebuildError(reply.error);
    }
    raw.unref();
    const w = new MsdaWorker(port, reply.info);
    onFailure = (why) => w._stop(`worker that stopped (${why})`);
    return w;
  };
}
