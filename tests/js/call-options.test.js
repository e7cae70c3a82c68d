// The option objects of prepare() and of initWorker's calls, attacked as a user mistyping them
// would: a typo'd key, a bare string, null, and an object that only looks like an AbortSignal.
// Each is refused with a TypeError naming the option; before, prepare(problem, 'forward') and
// prepare(problem, { mdoe: 'forward' }) silently prepared 'both', prepare(problem, null) threw
// V8's "Cannot destructure", and a fake AbortSignal got Node's "Value of "this" must be of type
// AbortSignal" (the argument unnamed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { init, initWorker } from '../../bindings/node.js';

const DIMS = { batch: 1, numQueries: 2, numHeads: 1, channels: 2, numPoints: 1, spatialShapes: [[2, 3]] };
const ARGS = () => ({
  value: { data: Float32Array.from({ length: 12 }, (_, i) => i / 7), shape: [1, 6, 1, 2] },
  spatialShapes: [[2, 3]],
  samplingLocations: { data: Float32Array.from([0.1, 0.2, 0.7, 0.9]), shape: [1, 2, 1, 1, 1, 2] },
  attentionWeights: { data: Float32Array.from([1, 0.5]), shape: [1, 2, 1, 1, 1] },
});

test('prepare() options: a typo, a bare string or null is a TypeError naming the option; mode is read once', async () => {
  for (const backend of ['wasm', 'native']) {
    const msda = await init({ backend });
    assert.throws(() => msda.prepare(DIMS, { mdoe: 'forward' }),
      { name: 'TypeError', message: "prepare: unknown option 'mdoe', expected mode" }, backend);
    assert.throws(() => msda.prepare(DIMS, 'forward'),
      { name: 'TypeError', message: 'prepare: options is the string "forward", expected { mode?: \'forward\' | \'backward\' | \'both\' }' }, backend);
    assert.throws(() => msda.prepare(DIMS, null),
      { name: 'TypeError', message: "prepare: options is null, expected { mode?: 'forward' | 'backward' | 'both' }" }, backend);
    let reads = 0;
    const p = msda.prepare(DIMS, { get mode() { reads++; return reads === 1 ? 'forward' : 'backward'; } });
    assert.equal(p.mode, 'forward');
    assert.equal(reads, 1);
    assert.equal(msda.prepare(DIMS).mode, 'both');
    assert.equal(msda.prepare(DIMS, {}).mode, 'both');
    assert.equal(msda.prepare(DIMS, { mode: undefined }).mode, 'both');
    msda.dispose();
  }
});

test('initWorker calls: an object that only inherits from AbortSignal is a TypeError naming signal', async () => {
  const w = await initWorker();
  try {
    await assert.rejects(w.forward(ARGS(), { signal: Object.create(AbortSignal.prototype) }),
      { name: 'TypeError', message: 'forward: signal is an object that is not an AbortSignal, expected an AbortSignal' });
    // A real one still works, and the worker is still usable.
    const out = await w.forward(ARGS(), { signal: new AbortController().signal });
    assert.equal(out.data.length, 4);
  } finally {
    await w.terminate();
  }
});
