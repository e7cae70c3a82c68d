// Run by tests/js/threads.test.js in a child process with MSDA_TEST_THREAD_DELAYS set: many
// forward and backward calls on a pool of 3 threads, alternating 1, 2 and 3 threads per call (so
// workers are sometimes idle while others run), each checked against one thread's bits, and the
// parts the pool ran counted call by call. Prints one JSON line; a protocol that hangs is
// caught by the parent's timeout.
import { init } from '../../bindings/index.js';
import { poolCase } from './helpers.js';

const calls = Number(process.argv[2] ?? 40);
const { args, gradOutput } = poolCase(3);

const one = await init({ simd: true });
const pool3 = await init({ threads: 3 });
const pool = pool3._backend.pool;
const want = { output: one.forward(args).data, ...one.backward({ ...args, gradOutput }) };
const same = (a, b) => Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength),
  Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;

const failures = [];
const pattern = [2, 3, 1, 3, 2, 2, 3];
for (let i = 0; i < calls; i++) {
  const threads = pattern[i % pattern.length];
  const before = pool.partsRun();
  const output = pool3.forward({ ...args, threads }).data;
  const afterForward = pool.partsRun();
  const grads = pool3.backward({ ...args, threads, gradOutput });
  const afterBackward = pool.partsRun();
  // Forward and backward each split into `threads` parts here, each run once by whoever claimed
  // it; one part runs inside the call, not through the pool. The backward runs its parts twice:
  // grad_value zeroed in contiguous ranges, then the walk (src/pool.c, msda__run).
  const parts = threads > 1 ? threads : 0;
  if (afterForward - before !== parts) failures.push(`call ${i} (threads ${threads}): the pool ran ${afterForward - before} forward parts, expected ${parts}`);
  if (afterBackward - afterForward !== 2 * parts) failures.push(`call ${i} (threads ${threads}): the pool ran ${afterBackward - afterForward} backward parts, expected ${2 * parts} (2 stages)`);
  if (!same(output, want.output)) failures.push(`call ${i} (threads ${threads}): output differs from one thread's`);
  for (const k of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) {
    if (!same(grads[k].data, want[k].data)) failures.push(`call ${i} (threads ${threads}): ${k} differs from one thread's`);
  }
}
console.log(JSON.stringify({ calls, partsRun: pool.partsRun(), workerParts: pool.workerParts(), failures: failures.slice(0, 5) }));
