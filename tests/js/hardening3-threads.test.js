// Hardening III (issue 20), wasm threads: a pool worker that stops (crashes, is terminated) never
// leaves the calling thread in Atomics.wait for ever. One that stops before taking its part:
// the calling thread runs that part itself (same bits). One that stops after taking it: the call
// fails with an Error naming the worker, and later calls run on the calling thread (same bits).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

// Resolves with the child's JSON line, or { hung: true } when it does not finish in time.
function runStopped(spec, calls, timeoutMs = 30000) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [new URL('./hardening3-threads-child.js', import.meta.url).pathname, String(calls)],
      { env: { ...process.env, MSDA_TEST_THREAD_DELAYS: spec }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal === 'SIGKILL') resolve({ hung: true });
      else if (code !== 0) resolve({ crashed: `exit ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}` });
      else resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}

const STOPPED = /^Error: forward: threads is 3: a worker thread failed, expected every worker to finish its part: worker 1 took its part of the call and did not finish it within \d+ ms \(it stopped or hangs\) \(MSDA_ERR_THREADS\)$/;

test('a worker that stops after taking its part (wake, read, ran): that call fails naming it, every later call gives the bits of one thread', async () => {
  for (const step of ['wake', 'read', 'ran']) {
    const r = await runStopped(`${step}@1=exit,stall=300,steal=100`, 3);
    assert.ok(!r.hung, `${step}@1=exit: hung`);
    assert.equal(r.crashed, undefined, r.crashed);
    assert.match(r.outcomes[0], STOPPED, `${step}@1=exit`);
    assert.deepEqual(r.outcomes.slice(1), Array(5).fill('same'), `${step}@1=exit`);
    assert.equal(r.broken, 'worker 1 stopped');
  }
});

test('a worker that stops after handing its part back, or between calls: no call fails or hangs, the same bits', async () => {
  // idle: after its last read, before waking the calling thread; the next calls come at once, so
  // its exit event is not delivered in between: its part is taken back and run on this thread.
  const r = await runStopped('idle@1=exit,stall=300,steal=100', 3);
  assert.ok(!r.hung, 'idle@1=exit: hung');
  assert.equal(r.crashed, undefined, r.crashed);
  assert.deepEqual(r.outcomes, Array(6).fill('same'));
  // Stopping on its second call (exit after one 0 ms wake): the first call is whole.
  const second = await runStopped('wake@2=0/exit,stall=300,steal=100', 3);
  assert.ok(!second.hung, 'wake@2=0/exit: hung');
  assert.equal(second.outcomes[0], 'same');
  assert.match(second.outcomes[1], /worker 2 took its part of the call and did not finish it/);
  assert.deepEqual(second.outcomes.slice(2), Array(4).fill('same'));
});
