// initWorker: no caller code runs after a call's last check (inputs
// copied with the intrinsic constructor, never the array's constructor or Symbol.species), a
// call that cannot be sent rejects and leaves the queue working, and workers start whatever V8
// flags the process was given.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { init, initWorker, MsdaWorker } from '../../bindings/node.js';
import { OPTION_COMBOS, randomCase } from './helpers.js';
import { PATIENCE_MS } from '../patience.js';

const run = promisify(execFile);
const NODE_ENTRY = new URL('../../bindings/node.js', import.meta.url).href;

// Settles within `ms`, or fails naming what hung.
function settles(promise, what, ms = PATIENCE_MS) {
  let timer;
  const hang = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: still pending after ${ms} ms`)), ms); });
  return Promise.race([promise, hang]).finally(() => clearTimeout(timer));
}

// The case's value data as a Float32Array subclass whose constructor / Symbol.species run `hook`.
function hostile(data, hook) {
  class Evil extends Float32Array {
    static get [Symbol.species]() { return hook('species'); }
  }
  const evil = new Evil(data.length);
  evil.set(data);
  Object.defineProperty(evil, 'constructor', { get() { return hook('constructor'); } });
  return evil;
}

test('initWorker: an input whose constructor / Symbol.species is hostile is copied without running it; the call and the next give the right bits', async () => {
  const sync = await init();
  const { args } = randomCase(11, OPTION_COMBOS[0]);
  const want = sync.forward(args);
  const w = await initWorker();
  try {
    const kept = [];
    const hooks = {
      // A SharedArrayBuffer-backed result: postMessage would refuse it as a transfer.
      sab: () => class extends Float32Array { constructor(n) { super(new SharedArrayBuffer(4 * (typeof n === 'number' ? n : n.length))); } },
      // A result the caller keeps and changes later.
      keep: () => class extends Float32Array { constructor(n) { super(n); kept.push(this); } },
      // Terminating the worker, aborting the signal.
      terminate: () => { w.terminate(); return Float32Array; },
      abort: () => { controller.abort(); return Float32Array; },
    };
    let controller;
    for (const [name, hook] of Object.entries(hooks)) {
      controller = new AbortController();
      const calls = [];
      const value = hostile(args.value.data, (what) => { calls.push(what); return hook(); });
      const call = w.forward({ ...args, value: { data: value, shape: args.value.shape } }, { signal: controller.signal });
      for (const k of kept) k.fill(7);   // changes after the call was made never reach it
      const got = await settles(call, `forward with a ${name} hook`);
      assert.deepEqual(calls, [], `${name}: the array's constructor / species ran`);
      assert.deepEqual(got, want, `${name}: the bits of the synchronous API`);
      assert.deepEqual(await settles(w.forward(args), `the call after the ${name} hook`), want);
    }
  } finally {
    await w.terminate();
    sync.dispose();
  }
});

test('MsdaWorker: a call whose postMessage throws rejects with that reason; the queue stays usable', async () => {
  const sent = [];
  let failNext = true;
  const port = {
    request(message, transfer, done) {
      if (failNext) { failNext = false; throw new DOMException('Found invalid object in transferList', 'DataCloneError'); }
      sent.push(message.op);
      queueMicrotask(() => done({ result: { data: new Float32Array(1), shape: [1] }, ran: sent.length }));
    },
    ref() {}, unref() {}, terminate: async () => {},
  };
  const w = new MsdaWorker(port, { backend: 'wasm', simd: true, isa: 'simd128', threads: 1 });
  const { args } = randomCase(12, OPTION_COMBOS[0]);
  const first = w.forward(args);
  const second = w.forward(args);
  await assert.rejects(settles(first, 'the unsent call'), /forward could not be sent to the worker: Found invalid object in transferList/);
  assert.deepEqual((await settles(second, 'the call after it')).shape, [1]);
  assert.deepEqual(sent, ['forward']);
});

test('initWorker and init({ threads: 2 }) work under node --max-old-space-size, --expose-gc, --no-liftoff, --stack-size', async () => {
  const script = `
    const { init, initWorker } = await import(${JSON.stringify(NODE_ENTRY)});
    const w = await initWorker();
    const m = await init({ threads: 2 });
    const args = { value: { data: new Float32Array(4).fill(1), shape: [1, 4, 1, 1] }, spatialShapes: [[2, 2]],
      samplingLocations: { data: new Float32Array(2).fill(0.5), shape: [1, 1, 1, 1, 1, 2] },
      attentionWeights: { data: new Float32Array(1).fill(1), shape: [1, 1, 1, 1, 1] } };
    const a = (await w.forward(args)).data[0], b = m.forward(args).data[0];
    console.log(JSON.stringify({ threads: m.threads, a, b }));
    await w.terminate();
    m.dispose();`;
  for (const flags of [['--max-old-space-size=4096'], ['--expose-gc'], ['--no-liftoff'], ['--stack-size=2000'],
    ['--max-old-space-size=4096', '--expose-gc', '--no-liftoff', '--stack-size=2000']]) {
    const { stdout, stderr } = await run(process.execPath, [...flags, '--input-type=module', '-e', script], { timeout: PATIENCE_MS });
    assert.doesNotMatch(stderr, /using 1 thread|ERR_WORKER/, `${flags.join(' ')}: ${stderr}`);
    assert.deepEqual(JSON.parse(stdout.trim().split('\n').pop()), { threads: 2, a: 1, b: 1 }, `${flags.join(' ')}`);
  }
});
