// wasm threads: a pool worker that stops (crashes, is terminated) never
// leaves the calling thread in Atomics.wait for ever. Parts are claimed one at a time, so one
// that stops holding no part (before or after its claims) costs nothing: the calling thread runs
// what is left, the call gives the bits of one thread. One that stops holding a part it claimed:
// the call fails with an Error naming the worker. Later calls run on the calling thread (same bits).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDelayedChild } from './helpers.js';
import { PATIENCE_MS } from '../patience.js';

// tests/js/threads-stopped-worker-child.js with MSDA_TEST_THREAD_DELAYS = spec.
const runStopped = (spec, calls, timeoutMs = PATIENCE_MS) =>
  runDelayedChild(new URL('./threads-stopped-worker-child.js', import.meta.url), spec, calls, timeoutMs);

const STOPPED = /^Error: forward: threads is 3: a worker thread failed, expected every worker to finish its part: worker 1 took its part of the call and did not finish it within \d+ ms \(it stopped or hangs\) \(MSDA_ERR_THREADS\)$/;

// stall=1000: a healthy worker on a loaded machine can be off its core for a few hundred ms, and
// one taken for stopped would fail a call that should be whole.
test('a worker that stops holding a part it claimed: that call fails naming it, every later call gives the bits of one thread', async () => {
  // The calling thread sleeps 100 ms after handing out each mailbox, so worker 1 claims a part
  // before it does, and stops there.
  const r = await runStopped('claimed@1=exit,publish=100/0/0/0/0/0,stall=1000', 3);
  assert.ok(!r.hung, 'claimed@1=exit: hung');
  assert.equal(r.crashed, undefined, r.crashed);
  assert.match(r.outcomes[0], STOPPED, 'claimed@1=exit');
  assert.deepEqual(r.outcomes.slice(1), Array(5).fill('same'), 'claimed@1=exit');
  assert.equal(r.broken, 'worker 1 stopped');
});

test('a worker that stops holding no part (after taking the call, or after its parts, or between calls): no call fails or hangs, the same bits', async () => {
  // wake, read: after taking the call, before any claim; ran, idle: after its last part. The next
  // calls come at once, so its exit event is not delivered in between.
  for (const step of ['wake', 'read', 'ran', 'idle']) {
    const r = await runStopped(`${step}@1=exit,stall=1000`, 3);
    assert.ok(!r.hung, `${step}@1=exit: hung`);
    assert.equal(r.crashed, undefined, r.crashed);
    assert.deepEqual(r.outcomes, Array(6).fill('same'), `${step}@1=exit`);
    if (step !== 'idle') assert.equal(r.broken, 'worker 1 stopped', `${step}@1=exit`);
  }
  // Stopping on its second call (exit after one 0 ms wake): every call is whole.
  const second = await runStopped('wake@2=0/exit,stall=1000', 3);
  assert.ok(!second.hung, 'wake@2=0/exit: hung');
  assert.deepEqual(second.outcomes, Array(6).fill('same'), 'wake@2=0/exit');
  assert.equal(second.broken, 'worker 2 stopped');
});
