// The threads' control block: Int32 slots in the shared wasm memory, read and written with
// Atomics by the calling thread (threads.js) and every worker (../workers/threads-worker.js).
// The protocol and why it is correct: the comment above Pool#run in threads.js.

export const DONE = 0;         // bumped by a worker each time it hands a mailbox back (a futex word only)
export const FAILED = 1;       // set when a part threw (a trap)
export const WORKER_PARTS = 2; // parts the workers have run, for tests and diagnostics
export const THREADS = 3;      // threads of the pool (this thread + workers)
export const NEXT = 4;         // the next part of the current call to claim (Atomics.add)
export const FINISHED = 5;     // parts of the current call finished, by any thread
// Then one mailbox per worker (index 1..threads-1): its state and the call handed to it.
export const MAILBOXES = 16;
export const MAILBOX_SLOTS = 4;
export const STATE = 0, JOB = 1, PARTS = 2;
// IDLE: the calling thread's. RUN: handed out, not yet taken. TAKEN: the worker's, running it.
export const IDLE = 0, RUN = 1, QUIT = 2, TAKEN = 3;
