// One worker of a threaded wasm backend (bindings/wasm/threads.js), in Node (worker_threads) or a
// browser (module Web Worker). It instantiates the threads module on the shared memory, sets its
// own stack, says it is ready, then loops: wait until the calling thread hands it a call through
// its mailbox, take it, claim and run parts until none is left, hand the mailbox back, wake the
// calling thread. The protocol and why it is correct:
// the comment above Pool#run in bindings/wasm/threads.js.

import {
  DONE, FAILED, FINISHED, IDLE, JOB, MAILBOX_SLOTS, MAILBOXES, NEXT, PARTS, QUIT, RUN, STATE, TAKEN, WORKER_PARTS,
} from '../wasm/control.js';
import { sleeper } from '../wasm/delays.js';

// Test-only delays (threads.js, testDelays).
async function start({ module, memory, control: controlPtr, stackTop, index, delays }, post) {
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
  const c = new Int32Array(memory.buffer, controlPtr, MAILBOXES + MAILBOX_SLOTS * (index + 1));
  const box = MAILBOXES + MAILBOX_SLOTS * index;
  const pause = sleeper(delays, index);
  post({ ready: true });
  for (;;) {
    Atomics.wait(c, box + STATE, IDLE);
    const state = Atomics.load(c, box + STATE);
    if (state === QUIT) return;
    pause('woke');
    // Taken by compare-and-swap: the calling thread may take back a call no worker took.
    if (state !== RUN || Atomics.compareExchange(c, box + STATE, RUN, TAKEN) !== RUN) continue;
    pause('wake');
    // The mailbox is this worker's until it stores IDLE: nobody writes it meanwhile.
    const job = c[box + JOB];
    const parts = c[box + PARTS];
    pause('read');
    try {
      // Claimed one at a time, as the calling thread does: a part is run by whoever claims it.
      for (let k = Atomics.add(c, NEXT, 1); k < parts; k = Atomics.add(c, NEXT, 1)) {
        pause('claimed');
        run(job, k, parts);
        Atomics.add(c, FINISHED, 1);
        Atomics.add(c, WORKER_PARTS, 1);
      }
    } catch {
      // A trap skips the C epilogues: put this instance's stack pointer back.
      instance.exports.stackRestore(stackTop);
      Atomics.store(c, FAILED, 1);
    }
    pause('ran');
    Atomics.store(c, box + STATE, IDLE);
    pause('idle');
    Atomics.add(c, DONE, 1);
    Atomics.notify(c, DONE);
  }
}

// In a browser this file is the worker (browser.js starts it by a URL bundlers see); in Node,
// threads-worker-node.js imports start() and wires it to worker_threads. dist/threads-worker.js is
// this file bundled with what it imports, so it also works copied on its own (wasmPaths).
if (typeof WorkerGlobalScope !== 'undefined' && globalThis instanceof WorkerGlobalScope) {
  self.addEventListener('message', (e) => start(e.data, (m) => self.postMessage(m)), { once: true });
}

export { start };
