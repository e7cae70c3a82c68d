// The WebGPU programs' dispatch words (kernels/problem.js program() `words`): each program's WGSL
// reads the uniform by the names it declares and no other, and gpu.js dispatch() refuses a word a
// program does not declare or a declared one left out. No GPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FORWARD } from '../../bindings/webgpu/kernels/forward.js';
import { SAMPLES } from '../../bindings/webgpu/kernels/backward.js';
import { SCAN, SCAN_REDUCE } from '../../bindings/webgpu/kernels/scan.js';
import { SORT_COUNT, SORT_SCATTER, SORT_TERMS } from '../../bindings/webgpu/kernels/sort.js';
import { ORDER_COUNT, ORDER_WALK } from '../../bindings/webgpu/kernels/walks.js';
import { GATHER } from '../../bindings/webgpu/kernels/segments.js';
import { NARROW, WIDEN } from '../../bindings/webgpu/kernels/half.js';
import { Gpu } from '../../bindings/webgpu/gpu.js';

const PROGRAMS = [FORWARD, SAMPLES, SCAN_REDUCE, SCAN, ORDER_COUNT, ORDER_WALK, SORT_COUNT, SORT_SCATTER, SORT_TERMS, GATHER, WIDEN, NARROW];
const VARIANTS = [{}, { narrow: true }, { vec4: true }, { narrow: true, vec4: true }];

test('each program reads the dispatch uniform by the words it declares, every one of them', () => {
  for (const prog of PROGRAMS) {
    for (const variant of VARIANTS) {
      const read = new Set([...prog.code(variant).matchAll(/\bdisp\.(\w+)/g)].map((m) => m[1]));
      const own = [...read].filter((w) => w !== 'n' && w !== 'per_row').sort();
      assert.deepEqual(own, [...prog.words].sort(), `${prog.key(variant)} reads ${own.join(', ') || 'no word of its own'}`);
    }
  }
});

test('dispatch() takes a program\'s words by name: an unknown or a missing one is refused before any GPU work', () => {
  const call = { variant: {}, now: false, checks: [], temps: [] };
  const dispatch = (name, words) => Gpu.prototype.dispatch.call({}, call, name, 0, {}, words);
  assert.throws(() => dispatch('sortTerms', { digit: 0, end: 1, first_pair: 0, totals: 0, extra: 1 }), /the WebGPU sortTerms pass has no dispatch word extra/);
  assert.throws(() => dispatch('sortTerms', { digit: 0, first_pair: 0, totals: 0 }), /the WebGPU sortTerms pass lacks its dispatch word end/);
  assert.throws(() => dispatch('forward', { first: 0 }), /the WebGPU forward pass has no dispatch word first/);
  assert.doesNotThrow(() => dispatch('sortTerms', { digit: 0, end: 1, first_pair: 0, totals: 0 }));   // n = 0: nothing to record
});
