// Lists whose length is huge or changes between two reads (a sparse Array, a Proxy, the data of an
// integer tensor) as spatialShapes, its pairs, levelStartIndex or a shape: refused with a
// RangeError naming the argument, before their items are copied. Such lists once aborted Node
// (V8's "invalid size" fatal error, growing the copy past what an array can hold) or hung (a
// shape Proxy whose length grew after the first read). The calls run in a child process, so a
// crash or a hang is a failure here and not the end of the suite.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PATIENCE_MS } from '../patience.js';

const entry = fileURLToPath(new URL('../../bindings/node.js', import.meta.url));

const child = `
import { init } from ${JSON.stringify(entry)};
const sparse = (n, items = []) => { const a = items.slice(); a.length = n; return a; };
const base = () => ({
  value: { data: Float32Array.from({ length: 12 }, (_, i) => i / 7), shape: [1, 6, 1, 2] },
  spatialShapes: [[2, 3]],
  samplingLocations: { data: Float32Array.from([0.1, 0.2, 0.7, 0.9]), shape: [1, 2, 1, 1, 1, 2] },
  attentionWeights: { data: Float32Array.from([1, 0.5]), shape: [1, 2, 1, 1, 1] },
});
let lengthReads = 0;
const attacks = {
  'spatialShapes a sparse Array of 2^32-1 levels': (a) => { a.spatialShapes = sparse(2 ** 32 - 1, [[2, 3]]); },
  'a pair of 2^32-1 entries': (a) => { a.spatialShapes = [sparse(2 ** 32 - 1, [2, 3])]; },
  'levelStartIndex a sparse Array of 2^32-1': (a) => { a.levelStartIndex = sparse(2 ** 32 - 1, [0]); },
  'levelStartIndex tensor data of 2^32-1': (a) => { a.levelStartIndex = { data: sparse(2 ** 32 - 1, [0]) }; },
  'spatialShapes tensor data of 2^32-2': (a) => { a.spatialShapes = { data: sparse(2 ** 32 - 2, [2, 3]) }; },
  'spatialShapes tensor shape of 2^32-1': (a) => { a.spatialShapes = { data: [2, 3], shape: sparse(2 ** 32 - 1, [1, 2]) }; },
  'a value.shape whose length grows after the first read': (a) => {
    a.value.shape = new Proxy([1, 6, 1, 2], { get(t, k) { if (k === 'length') return ++lengthReads === 1 ? 4 : 2 ** 31; return t[k]; } });
  },
};
const results = {};
for (const backend of ['wasm', 'wasm-scalar', 'native']) {
  const msda = await init({ backend });
  const plain = Array.from(msda.forward(base()).data);
  for (const [name, f] of Object.entries(attacks)) {
    const a = base();
    f(a);
    lengthReads = 0;
    let r;
    try {
      const out = Array.from(msda.forward(a).data);
      r = { ok: true, same: JSON.stringify(out) === JSON.stringify(plain), lengthReads };
    } catch (e) {
      r = { error: e.constructor.name, message: e.message };
    }
    results[backend + ': ' + name] = r;
    if (name.startsWith('spatialShapes a sparse')) {
      try { msda.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: a.spatialShapes }); results[backend + ': prepare'] = { ok: true }; }
      catch (e) { results[backend + ': prepare'] = { error: e.constructor.name, message: e.message }; }
    }
  }
}
console.log(JSON.stringify(results));
`;

test('huge or changing list lengths: a RangeError naming the argument before the items are copied, no crash, no hang', () => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', child], { encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.error?.code, undefined, r.error?.code === 'ETIMEDOUT' ? 'hung (killed after 60 s)' : String(r.error));
  assert.equal(r.signal, null, `killed by ${r.signal}: ${r.stderr.slice(0, 400)}`);
  assert.equal(r.status, 0, r.stderr.slice(0, 400));
  const results = JSON.parse(r.stdout);
  const expect = {
    'spatialShapes a sparse Array of 2^32-1 levels': /^forward: spatialShapes has 4294967295 levels, expected at most 16777216$/,
    'a pair of 2^32-1 entries': /^forward: spatialShapes\[0\] has 4294967295 entries, expected an \[H, W\] pair$/,
    'levelStartIndex a sparse Array of 2^32-1': /^forward: levelStartIndex has 4294967295 entries, expected 1 \(one per level of spatialShapes\)$/,
    'levelStartIndex tensor data of 2^32-1': /^forward: levelStartIndex has 4294967295 entries, expected 1 \(one per level of spatialShapes\)$/,
    'spatialShapes tensor data of 2^32-2': /^forward: spatialShapes has 4294967294 entries, expected \(N_l, 2\) with N_l at most 16777216$/,
    'spatialShapes tensor shape of 2^32-1': /^forward: spatialShapes\.shape has 4294967295 dimensions, expected \[1, 2\]$/,
  };
  for (const backend of ['wasm', 'wasm-scalar', 'native']) {
    for (const [name, re] of Object.entries(expect)) {
      const got = results[`${backend}: ${name}`];
      assert.equal(got.error, 'RangeError', `${backend}: ${name}: ${JSON.stringify(got)}`);
      assert.match(got.message, re, `${backend}: ${name}`);
    }
    assert.match(results[`${backend}: prepare`].message, /^prepare: spatialShapes has 4294967295 levels, expected at most 16777216$/);
    const grown = results[`${backend}: a value.shape whose length grows after the first read`];
    assert.deepEqual(grown, { ok: true, same: true, lengthReads: 1 }, `${backend}: the shape's length is read once`);
  }
});

// The same lists given to ms-deform-attn/tfjs's op, which reads its options itself: it hung
// (Array.from over 2^32 - 1 holes) or threw V8's unnamed "Invalid array length".
const tfjsChild = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
const { msDeformAttn } = await import(${JSON.stringify(fileURLToPath(new URL('../../bindings/tfjs.js', import.meta.url)))});
await tf.setBackend('cpu');
const sparse = (n, items = []) => { const a = items.slice(); a.length = n; return a; };
const value = tf.zeros([1, 6, 1, 2]), loc = tf.zeros([1, 2, 1, 1, 1, 2]), w = tf.ones([1, 2, 1, 1, 1]);
const cases = {
  levels: { spatialShapes: sparse(2 ** 32 - 1, [[2, 3]]) },
  pair: { spatialShapes: [sparse(2 ** 32 - 1, [2, 3])] },
  data: { spatialShapes: { data: sparse(2 ** 32 - 2, [2, 3]) } },
  starts: { spatialShapes: [[2, 3]], levelStartIndex: sparse(2 ** 32 - 1, [0]) },
};
const results = {};
for (const [name, options] of Object.entries(cases)) {
  try { msDeformAttn(value, loc, w, options); results[name] = { ok: true }; }
  catch (e) { results[name] = { error: e.constructor.name, message: e.message }; }
}
console.log(JSON.stringify(results));
`;

test('ms-deform-attn/tfjs: the same lists are a RangeError naming the option, no hang', () => {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', tfjsChild], { encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.error?.code, undefined, r.error?.code === 'ETIMEDOUT' ? 'hung (killed after 60 s)' : String(r.error));
  assert.equal(r.status, 0, r.stderr.slice(-400));
  const results = JSON.parse(r.stdout.trim().split('\n').pop());
  const expect = {
    levels: /^msDeformAttn: spatialShapes has 4294967295 levels, expected at most 16777216$/,
    pair: /^msDeformAttn: spatialShapes\[0\] has 4294967295 entries, expected an \[H, W\] pair$/,
    data: /^msDeformAttn: spatialShapes has 4294967294 entries, expected \(N_l, 2\) with N_l at most 16777216$/,
    starts: /^msDeformAttn: levelStartIndex has 4294967295 entries, expected 1 \(one per level of spatialShapes\)$/,
  };
  for (const [name, re] of Object.entries(expect)) {
    assert.ok(results[name].error === 'RangeError' || results[name].error === 'TypeError', `${name}: ${JSON.stringify(results[name])}`);
    assert.match(results[name].message, re, name);
  }
});

// Values past 2^53 - 1 are named exactly: a BigInt 2^64 + 2 was reported as 18446744073709552000
// (its rounded neighbour), and [2^26, 2^27], whose H*W is 2^53, as "expected H >= 1 and W >= 1".
test('integers past 2^53 - 1 are named exactly, and a level too large says why', async () => {
  const { init } = await import('../../bindings/node.js');
  const msda = await init();
  const base = {
    value: { data: new Float32Array(12), shape: [1, 6, 1, 2] },
    samplingLocations: { data: new Float32Array(4), shape: [1, 2, 1, 1, 1, 2] },
    attentionWeights: { data: new Float32Array(2), shape: [1, 2, 1, 1, 1] },
  };
  assert.throws(() => msda.forward({ ...base, spatialShapes: [[2n ** 64n + 2n, 3n]] }),
    { name: 'RangeError', message: 'forward: spatialShapes[0][0] is 18446744073709551618, expected an integer within ±(2^53 - 1)' });
  assert.throws(() => msda.forward({ ...base, spatialShapes: [[2, 3]], levelStartIndex: BigInt64Array.from([-(2n ** 63n)]) }),
    { name: 'RangeError', message: 'forward: levelStartIndex[0] is -9223372036854775808, expected an integer within ±(2^53 - 1)' });
  assert.throws(() => msda.prepare({ batch: 1, numQueries: 1, numHeads: 1, channels: 1, numPoints: 1, spatialShapes: [[2 ** 26, 2 ** 27]] }),
    { name: 'RangeError', message: 'prepare: spatialShapes[0] is [67108864, 134217728], expected H*W within 2^53 - 1 (it is 9007199254740992)' });
  // Exact BigInts within range still work.
  assert.equal(msda.forward({ ...base, spatialShapes: [[2n, 3n]], levelStartIndex: [0n] }).data.length, 4);
  msda.dispose();
});

// ms-deform-attn/npy: serializeNpy's shape had every() run over it first (holes skipped: a
// sparse Array of 2^32 - 1 took minutes, one with a hole gave a NaN element count), and it
// was read again for the header; parseNpy of a transferred buffer threw V8's unnamed
// "Cannot perform Construct on a detached ArrayBuffer".
test('ms-deform-attn/npy: shapes read once and bounded; a detached input named', () => {
  const code = `
import { parseNpy, serializeNpy } from ${JSON.stringify(fileURLToPath(new URL('../../bindings/npy.js', import.meta.url)))};
const out = {};
const attempt = (name, f) => { try { out[name] = { ok: f() }; } catch (e) { out[name] = { error: e.constructor.name, message: e.message }; } };
const sparse = []; sparse.length = 2 ** 32 - 1;
attempt('sparse', () => serializeNpy({ data: new Float32Array(0), shape: sparse }).length);
attempt('hole', () => serializeNpy({ data: new Float32Array(3), shape: [3, , ] }).length);
let reads = 0;
const growing = new Proxy([3], { get(t, k) { if (k === 'length') return ++reads === 1 ? 1 : 2 ** 32 - 1; return t[k]; } });
attempt('growing', () => [serializeNpy({ data: new Float32Array([1, 2, 3]), shape: growing }).length, reads]);
const bytes = serializeNpy({ data: new Float32Array([1, 2, 3]), shape: [3] }).slice();
structuredClone(bytes.buffer, { transfer: [bytes.buffer] });
attempt('detached', () => parseNpy(bytes));
console.log(JSON.stringify(out));
`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.error?.code, undefined, r.error?.code === 'ETIMEDOUT' ? 'hung (killed after 30 s)' : String(r.error));
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  const shapeError = { error: 'TypeError', message: 'serializeNpy: shape must be an array of at most 32 integers >= 0' };
  assert.deepEqual(out.sparse, shapeError);
  assert.deepEqual(out.hole, { error: 'TypeError', message: 'serializeNpy: shape must be an array of at most 32 integers >= 0' });
  assert.deepEqual(out.growing, { ok: [140, 1] }, 'the shape\'s length is read once');
  assert.equal(out.detached.error, 'TypeError');
  assert.match(out.detached.message, /^parseNpy: cannot read the input's bytes/);
});
