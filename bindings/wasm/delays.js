// Test-only delays of the threads' protocol (MSDA_TEST_THREAD_DELAYS, parsed by threads.js's
// testDelays): the calling thread (index 0) and each worker sleep, or stop, at the steps chosen
// for their index. Shared by threads.js and ../workers/threads-worker.js.

/** point -> what thread `index` does there: sleep ms (cycling through the list), or 'exit' (stop). */
export function sleeper(delays, index) {
  const at = new Map();
  for (const { point, worker, ms } of delays || []) if (worker === undefined || worker === index) at.set(point, { ms, next: 0 });
  if (at.size === 0) return () => {};
  const cell = new Int32Array(new SharedArrayBuffer(4));
  return (point) => {
    const d = at.get(point);
    if (d === undefined) return;
    const ms = d.ms[d.next++ % d.ms.length];
    if (ms === 'exit') {
      // The thread stops here, as a crashed or terminated worker would.
      if (typeof process !== 'undefined' && typeof process.exit === 'function') process.exit(1);
      globalThis.close?.();
      throw new Error('ms-deform-attn: test thread stopped');
    }
    if (ms > 0) Atomics.wait(cell, 0, 0, ms);
  };
}
