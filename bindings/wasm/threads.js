// Threads for the wasm backend: dist/msda-simd-threads.wasm on a shared WebAssembly.Memory,
// instantiated once on this thread and once in each worker (worker_threads in Node, Web
// Workers in browsers). No Emscripten glue and no Emscripten pthreads.
//
// A call runs as usual until the library has validated it and built its job (src/pool.c); the
// module then calls env.msda_wasm_run_parallel(job, parts), implemented here: the workers and
// this thread each run some of the parts (msda_wasm_run_part on their own instance), and the
// call returns when all are done. Every part writes its own outputs, so the bits never depend on
// the number of threads. This thread waits with Atomics.wait where it may block (Node, workers)
// and spins on the browser's main thread, where blocking is not allowed.
//
// Workers are started once, by init(), and reused; in Node they are unref'd, so a process that
// used threads exits by itself when its own work is done. The entry (browser.js, node.js) says
// how a worker is started and where the threads module is; nothing here is environment specific.

import {
  DONE, FAILED, FINISHED, IDLE, JOB, MAILBOX_SLOTS, MAILBOXES, NEXT, PARTS, QUIT, RUN, STATE, TAKEN, THREADS,
  WORKER_PARTS,
} from './control.js';
import { sleeper } from './delays.js';
import { compileSource, simdSupported, WasmBackend } from './loader.js';

/** Most threads a wasm backend starts (the native pool's limit too). */
export const MAX_THREADS = 64;

// Must match the module: -sINITIAL_MEMORY=16MB and -sMAXIMUM_MEMORY=4GB in mk/threads.mk.
const INITIAL_PAGES = 256;
const MAXIMUM_PAGES = 65536;
const WORKER_STACK_BYTES = 256 * 1024;
const START_TIMEOUT_MS = 60000;
// A worker that took a call and has not finished it after max(STALL_MS, STALL_FACTOR x the time
// this thread took for its own parts, which are as big) is taken for stopped.
const STALL_MS = 10000;
const STALL_FACTOR = 100;
// The calling thread's waits are at most this long, so it looks at the mailboxes again.
const SLICE_MS = 50;

const CONTROL_BYTES = 4 * (MAILBOXES + MAILBOX_SLOTS * MAX_THREADS);

const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;
// Atomics.wait throws on a browser's main thread; Node's main thread and workers may block.
const canBlock = isNode || (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope);

/** Logical CPUs where the entry does not say (browsers: navigator.hardwareConcurrency). */
function navigatorThreads() {
  return (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 1;
}

/** The thread count for a checked `threads` option ('auto': this machine's CPUs), at most MAX_THREADS. */
export async function resolveThreads(threads, hardwareThreads = navigatorThreads) {
  if (threads === undefined) return 1;
  return Math.min(threads === 'auto' ? await hardwareThreads() : threads, MAX_THREADS);
}

/** Why this runtime cannot run wasm threads, or null when it can. */
export function threadsUnavailableReason({ simd = true, custom = false } = {}) {
  if (typeof SharedArrayBuffer === 'undefined' || (!isNode && globalThis.crossOriginIsolated !== true)) {
    return 'the page is not cross-origin isolated (serve it with Cross-Origin-Opener-Policy: same-origin and '
      + 'Cross-Origin-Embedder-Policy: require-corp)';
  }
  if (!isNode && typeof Worker === 'undefined') return 'this runtime has no Web Workers';
  if (!simd || !simdSupported()) return 'threads need the SIMD module and this runtime has no WebAssembly SIMD';
  if (custom) return 'a module or wasmBinary given to init is used as is, on one thread';
  return null;
}

// Test-only: MSDA_TEST_THREAD_DELAYS (Node) makes threads sleep at chosen steps of the protocol,
// e.g. "wake@2=20/0,publish=1": worker 2 sleeps 20 ms and 0 ms alternately after taking a
// call, the calling thread 1 ms after handing out each mailbox. Steps: publish and join (the
// calling thread, index 0); woke (up, before taking the call: a worker the system schedules
// late), wake (after taking it), read, claimed (before running a part it claimed), ran and idle
// (workers). Without "@index" a delay applies to every thread. "exit" instead of a time stops
// the worker there (process.exit in its thread), as a crash would; "stall=ms" sets the calling
// thread's STALL_MS.
export function testDelays() {
  const spec = isNode ? process.env.MSDA_TEST_THREAD_DELAYS : undefined;
  if (!spec) return [];
  return spec.split(',').map((item) => {
    const limit = /^(stall)=(\d+)$/.exec(item.trim());
    if (limit !== null) return { point: limit[1], worker: 0, ms: [Number(limit[2])] };
    const m = /^(publish|join|woke|wake|read|claimed|ran|idle)(?:@(\d+))?=((?:\d+|exit)(?:\/(?:\d+|exit))*)$/.exec(item.trim());
    if (m === null) throw new Error(`ms-deform-attn: MSDA_TEST_THREAD_DELAYS: cannot parse '${item}', expected step[@thread]=ms[/ms...]`);
    return { point: m[1], worker: m[2] === undefined ? undefined : Number(m[2]), ms: m[3].split('/').map((x) => (x === 'exit' ? x : Number(x))) };
  });
}

const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

function notice(requested, reason) {
  console.info(`ms-deform-attn: using 1 thread instead of ${requested}: ${reason}`);
}

// Starts one worker, listed in pool.workers at once (so terminate() reaches it whatever happens),
// and resolves when it is ready. `create(name)` is the entry's startThreadsWorker: a
// worker_threads Worker (unref'd) in Node, a module Web Worker in browsers.
async function startWorker(init, pool, create) {
  const worker = await create(`ms-deform-attn worker ${init.index}`);
  pool.workers.push(worker);
  pool.byIndex[init.index] = worker;
  const on = (type, fn) => (isNode ? worker.on(type, fn) : worker.addEventListener(type, fn));
  const off = (type, fn) => (isNode ? worker.off(type, fn) : worker.removeEventListener(type, fn));
  // From now on a worker that dies makes later calls run on this thread alone (and an 'error'
  // event always has a listener, so it never becomes an uncaught exception in Node).
  const gone = () => { if (pool.broken === null) pool.broken = `worker ${init.index} stopped`; };
  on('error', gone);
  if (isNode) on('exit', gone);
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`ms-deform-attn: worker ${init.index} was not ready after ${START_TIMEOUT_MS / 1000} s`));
    }, START_TIMEOUT_MS);
    if (isNode) timer.unref();
    const onMessage = (m) => {
      const data = isNode ? m : m.data;
      cleanup();
      if (data && data.ready) resolve();
      else reject(new Error(`ms-deform-attn: worker ${init.index} failed to start: ${data && data.error}`));
    };
    const onError = (e) => {
      cleanup();
      reject(new Error(`ms-deform-attn: worker ${init.index} failed to start: ${e && e.message ? e.message : e}`));
    };
    const cleanup = () => {
      clearTimeout(timer);
      off('message', onMessage);
      off('error', onError);
    };
    on('message', onMessage);
    on('error', onError);
    worker.postMessage(init);
  });
  return worker;
}

/** The pool of one threaded backend: the control block, the workers, the parallel run. */
class Pool {
  constructor(threads, memory) {
    this.threads = threads;
    this.memory = memory;
    this.workers = [];
    this.byIndex = [];
    this.exports = null;
    this.control = null;
    this.broken = null;
    this.failure = null;   // why the last call failed, for its error message
    this.callerParts = 0;  // parts this thread has run (workerParts: the workers')
    this.delays = testDelays();
    this.pause = sleeper(this.delays, 0);
    const limit = (point, ms) => this.delays.find((d) => d.point === point)?.ms[0] ?? ms;
    this.stallMs = limit('stall', STALL_MS);
  }

  // env.msda_wasm_run_parallel: runs parts 0..parts-1; returns nonzero when a part failed. Called
  // from inside the wasm call, so it must return synchronously.
  //
  // The protocol, and why it is correct. Each worker i has a mailbox (STATE, JOB, PARTS) that
  // belongs to exactly one side at a time: to this thread while STATE is IDLE or RUN, to worker i
  // while it is TAKEN. This thread writes JOB and PARTS only into IDLE mailboxes and hands them
  // over with Atomics.store(STATE, RUN). Worker i takes a mailbox with compareExchange(STATE,
  // RUN -> TAKEN) and reads JOB and PARTS only after that succeeded (so it sees the values written
  // before the store of RUN); it hands the mailbox back with Atomics.store(STATE, IDLE) after its
  // last read and write of the call, then bumps DONE and notifies it. Parts are claimed, as the
  // native pool's are: k = Atomics.add(NEXT, 1), and the thread that gets k < parts runs part k,
  // so each part runs once, on whichever thread is running (every part writes its own outputs:
  // the bits do not depend on which). A call:
  //   1. NEXT = FINISHED = 0; for i = 1..busy: write worker i's mailbox, store RUN, notify;
  //   2. claim and run parts until NEXT >= parts, timing them (t0);
  //   3. until every handed-out mailbox is IDLE: look at each; wait on DONE at most SLICE_MS.
  //      A mailbox still RUN has no worker and nothing left to claim: this thread takes it back
  //      with compareExchange(RUN -> IDLE). Exactly one of the two exchanges succeeds, so either
  //      the worker never reads the call, or it took it and is waited for; a worker that takes it
  //      now finds no part left and hands it back.
  // NEXT is reset in step 1 only, before any mailbox of the call is RUN, and a call returns only
  // when each mailbox is IDLE again: no worker claims from a call that has returned, and the next
  // call's step 1 never writes a mailbox a worker is reading. A worker that wakes late (a busy
  // machine) finds its share done by this thread instead of making the call wait for it, so a
  // call on more threads costs at most a wake-up more than one. DONE only wakes this thread up
  // (a late or lost bump costs a slice, not correctness); the mailbox states decide.
  //
  // A worker that stops (crashed, terminated; its exit event cannot be delivered while this thread
  // blocks) must not hang the call, and this thread can tell only from the mailboxes: a mailbox
  // TAKEN for max(stallMs, STALL_FACTOR * t0) (no part is bigger than all of this thread's) is
  // taken for stopped. Its worker is terminated (V8 stops its wasm at the next loop check) and
  // the pool is marked broken so no later call hands it anything; NEXT is then never reset again,
  // so if it was only paused it finds nothing to claim. The call succeeds when every part
  // finished (FINISHED == parts: the stopped worker held none), and otherwise fails with an
  // Error naming the worker (pool.failure): a part it claimed may be half written.
  // After a pool is broken every call runs all its parts here: the same bits. Delays anywhere
  // (tests/js/threads.test.js and tests/js/threads-stopped-worker.test.js inject them, and stop
  // workers at every step) change none of this.
  run(job, parts) {
    const c = this.control;
    this.failure = null;
    if (this.broken !== null) {
      // A worker has gone: run every part here (same bits).
      for (let k = 0; k < parts; k++) this.exports.msda_wasm_run_part(job, k, parts);
      this.callerParts += parts;
      return 0;
    }
    const busy = Math.min(parts, this.threads) - 1;
    Atomics.store(c, FAILED, 0);
    Atomics.store(c, NEXT, 0);
    Atomics.store(c, FINISHED, 0);
    for (let i = 1; i <= busy; i++) {
      const box = MAILBOXES + MAILBOX_SLOTS * i;
      c[box + JOB] = job;
      c[box + PARTS] = parts;
      Atomics.store(c, box + STATE, RUN);
      Atomics.notify(c, box + STATE, 1);
      this.pause('publish');
    }
    let failed = 0;
    const stack = this.exports.stackSave();
    const started = now();
    try {
      for (let k = Atomics.add(c, NEXT, 1); k < parts; k = Atomics.add(c, NEXT, 1)) {
        this.exports.msda_wasm_run_part(job, k, parts);
        Atomics.add(c, FINISHED, 1);
        this.callerParts++;
      }
    } catch {
      this.exports.stackRestore(stack);
      failed = 1;
    }
    const joined = now();
    const stallMs = Math.max(this.stallMs, STALL_FACTOR * (joined - started));
    this.pause('join');
    // Wait even after a failure: the workers read the job from this call's stack.
    const open = new Set();
    for (let i = 1; i <= busy; i++) open.add(i);
    while (open.size > 0) {
      const seen = Atomics.load(c, DONE);
      const waited = now() - joined;
      for (const i of open) {
        const box = MAILBOXES + MAILBOX_SLOTS * i;
        const state = Atomics.load(c, box + STATE);
        if (state === IDLE || (state === RUN && Atomics.compareExchange(c, box + STATE, RUN, IDLE) === RUN)) {
          open.delete(i);
        } else if (state === TAKEN && waited >= stallMs) {
          open.delete(i);
          this.stop(i, `worker ${i} took its part of the call and did not finish it within ${Math.round(stallMs)} ms (it stopped or hangs)`);
        }
      }
      if (open.size > 0 && Atomics.load(c, DONE) === seen) {
        if (canBlock) Atomics.wait(c, DONE, seen, SLICE_MS);
      }
    }
    const trapped = Atomics.load(c, FAILED) !== 0;
    if (trapped && !failed && this.failure === null) this.failure = 'a part trapped in a worker';
    // Every part claimed and finished (a stopped worker that held none costs nothing).
    return failed || trapped || Atomics.load(c, FINISHED) !== parts ? 1 : 0;
  }

  /** Parts run since the pool started, by the workers and by this thread. */
  partsRun() {
    return this.callerParts + this.workerParts();
  }

  // A worker taken for stopped: terminated, and no later call hands it anything.
  stop(index, why) {
    this.failure = why;
    if (this.broken === null) this.broken = `worker ${index} stopped`;
    try {
      Promise.resolve(this.byIndex[index]?.terminate()).catch(() => {});
    } catch {
      // already gone
    }
  }

  /** Parts run by workers (not this thread) since the pool started. */
  workerParts() {
    return this.control === null ? 0 : Atomics.load(this.control, WORKER_PARTS);
  }

  terminate() {
    if (this.control !== null) {
      for (let i = 1; i < this.threads; i++) {
        const box = MAILBOXES + MAILBOX_SLOTS * i;
        Atomics.store(this.control, box + STATE, QUIT);
        Atomics.notify(this.control, box + STATE);
      }
    }
    for (const w of this.workers) w.terminate();
    this.workers = [];
    this.broken = 'terminated';
  }
}

/**
 * The wasm backend on `threads` threads, or, where this runtime cannot (no cross-origin
 * isolation, no SIMD, no workers, a worker fails to start), the plain module on one thread with a
 * one-line console notice. backend.threads says which.
 */
export async function loadThreadedWasm({ threads, simd, wasmBinary, module, loadPlain, threadsModule, startWorker: create }) {
  const reason = threadsUnavailableReason({ simd: simd !== false, custom: wasmBinary !== undefined || module !== undefined });
  if (reason === null) {
    try {
      return await startThreads(threads, threadsModule, create);
    } catch (e) {
      notice(threads, e.message);
      const backend = await loadPlain();
      backend.threads = 1;
      return backend;
    }
  }
  notice(threads, reason);
  const backend = await loadPlain();
  backend.threads = 1;
  return backend;
}

// threadsModule(): the threads module's Response or bytes; create(name): a started worker.
async function startThreads(threads, threadsModule, create) {
  const compiled = await compileSource(await threadsModule());
  const memory = new WebAssembly.Memory({ initial: INITIAL_PAGES, maximum: MAXIMUM_PAGES, shared: true });
  const pool = new Pool(threads, memory);
  const imports = {
    env: {
      memory,
      emscripten_notify_memory_growth() {},
      msda_wasm_run_parallel: (job, parts) => pool.run(job, parts),
    },
  };
  const instance = await WebAssembly.instantiate(compiled, imports);
  const exports = instance.exports;
  exports._initialize();
  pool.exports = exports;
  // Control block and worker stacks live in the heap for the backend's lifetime; the control
  // block never moves, and shared memory growth keeps old views valid.
  const control = exports.malloc(CONTROL_BYTES) >>> 0;
  if (control === 0) throw new Error('ms-deform-attn: no heap for the threads control block');
  pool.control = new Int32Array(memory.buffer, control, CONTROL_BYTES / 4);
  pool.control.fill(0);
  pool.control[THREADS] = threads;
  try {
    const starting = [];
    for (let index = 1; index < threads; index++) {
      const stack = exports.malloc(WORKER_STACK_BYTES) >>> 0;
      if (stack === 0) throw new Error('ms-deform-attn: no heap for a worker stack');
      // The stack grows down from its top, 16-byte aligned.
      const stackTop = Math.floor((stack + WORKER_STACK_BYTES) / 16) * 16;   // not `& ~15`: may be >= 2^31
      starting.push(startWorker({ module: compiled, memory, control, stackTop, index, delays: pool.delays }, pool, create));
    }
    const results = await Promise.allSettled(starting);
    const failure = results.find((r) => r.status === 'rejected');
    if (failure) throw failure.reason;
  } catch (e) {
    pool.terminate();
    throw e;
  }
  // WasmBackend reads exports.memory; this module imports its memory instead of exporting it.
  const backend = new WasmBackend({ exports: { ...exports, memory } });
  backend.threads = threads;
  backend.pool = pool;
  return backend;
}
