// One worker of a threaded wasm backend (bindings/threads.js), in Node (worker_threads) or a
// browser (module Web Worker). It instantiates the threads module on the shared memory, sets its
// own stack, says it is ready, then loops: wait for a call, run its parts, report, wait again.

const isNode = typeof process !== 'undefined' && process.versions != null && process.versions.node != null;

// Control block slots: the same as bindings/threads.js.
const GENERATION = 0;
const PENDING = 1;
const JOB = 2;
const PARTS = 3;
const THREADS = 4;
const FAILED = 5;
const QUIT = 6;
const WORKER_PARTS = 7;

async function start({ module, memory, control: controlPtr, stackTop, index }, post) {
  let instance;
  try {
    instance = await WebAssembly.instantiate(module, {
      env: {
        memory,
        emscripten_notify_memory_growth() {},
        msda_wasm_run_parallel() { return 1; }, // never reached: parts run one level deep
      },
    });
    // Not _initialize: the main instance ran the constructors; this instance only runs parts.
    instance.exports.stackRestore(stackTop);
  } catch (e) {
    post({ error: e && e.message ? e.message : String(e) });
    return;
  }
  const run = instance.exports.msda_wasm_run_part;
  const c = new Int32Array(memory.buffer, controlPtr, 16);
  let seen = Atomics.load(c, GENERATION);
  post({ ready: true });
  for (;;) {
    Atomics.wait(c, GENERATION, seen);
    const generation = Atomics.load(c, GENERATION);
    if (generation === seen) continue;
    seen = generation;
    if (Atomics.load(c, QUIT)) return;
    const parts = c[PARTS];
    if (index >= parts) continue;
    const threads = c[THREADS];
    const job = c[JOB];
    try {
      for (let k = index; k < parts; k += threads) {
        run(job, k, parts);
        Atomics.add(c, WORKER_PARTS, 1);
      }
    } catch {
      Atomics.store(c, FAILED, 1);
    }
    if (Atomics.sub(c, PENDING, 1) === 1) Atomics.notify(c, PENDING);
  }
}

if (isNode) {
  const { parentPort } = await import(/* webpackIgnore: true */ 'node:worker_threads');
  parentPort.once('message', (init) => start(init, (m) => parentPort.postMessage(m)));
} else {
  self.addEventListener('message', (e) => start(e.data, (m) => self.postMessage(m)), { once: true });
}
