// The constants the WebGPU programs share with the C kernels (bindings/webgpu/kernels/problem.js)
// hold the C headers' values: a change on one side fails here until the other follows. No GPU.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import * as kernels from '../../bindings/webgpu/kernels/problem.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// name in problem.js -> [header, the C text holding the value]
const SHARED = {
  FLOAT_SIDE: ['src/kernel/geometry.h', /#define MSDA_FLOAT_SIDE (\w+)/],
  BACKWARD_STRIP: ['src/kernel/walks.h', /#define MSDA_BACKWARD_STRIP (\w+)/],
  ORDER_CHUNK: ['src/kernel/walks.h', /#define MSDA_ORDER_CHUNK (\w+)/],
  ORDER_CELLS: ['src/kernel/walks.h', /#define MSDA_ORDER_CELLS (\w+)/],
  CANONICAL_NAN: ['src/simd.h', /f_canonical_nan\(void\)\s*\{\s*const uint32_t bits = (\w+?)u;/],
};

for (const [name, [header, pattern]] of Object.entries(SHARED)) {
  test(`WebGPU ${name} is ${header}'s`, () => {
    const m = readFileSync(path.join(root, header), 'utf8').match(pattern);
    assert.ok(m, `${header} defines ${pattern}`);
    assert.equal(typeof kernels[name], 'number', `kernels/problem.js exports ${name}`);
    assert.equal(kernels[name], Number(m[1]), `${name}: WebGPU ${kernels[name]}, ${header} ${m[1]}`);
  });
}
