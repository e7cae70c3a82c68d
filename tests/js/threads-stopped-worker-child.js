// Run by tests/js/threads-stopped-worker.test.js in a child process (MSDA_TEST_THREAD_DELAYS set, so
// a worker stops at a chosen step): `calls` forward and backward calls on a pool of 3, back to
// back without yielding to the event loop (so no worker's exit event is delivered between them),
// each one's outcome printed: same bits as one thread, or the Error's message.
import { init } from '../../bindings/index.js';
import { poolCase } from './helpers.js';

const calls = Number(process.argv[2] ?? 3);
const { args, gradOutput } = poolCase(5);   // 3 parts at 3 threads
const one = await init({ simd: true });
const pool3 = await init({ threads: 3 });
const want = { output: one.forward(args).data,
  ...Object.fromEntries(Object.entries(one.backward({ ...args, gradOutput })).map(([k, t]) => [k, t.data])) };
const same = (a, b) => Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;

const outcomes = [];
for (let i = 0; i < calls; i++) {
  for (const op of ['forward', 'backward']) {
    try {
      const got = op === 'forward' ? { output: pool3.forward(args).data }
        : Object.fromEntries(Object.entries(pool3.backward({ ...args, gradOutput })).map(([k, t]) => [k, t.data]));
      outcomes.push(Object.entries(got).every(([k, v]) => same(v, want[k])) ? 'same' : `${op} ${i}: bits differ`);
    } catch (e) {
      outcomes.push(`${e.constructor.name}: ${e.message}`);
    }
  }
}
console.log(JSON.stringify({ outcomes, broken: pool3._backend.pool.broken }));
