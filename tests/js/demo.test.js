// The Node demos in demo/ run to completion and print what they promise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PATIENCE_MS } from '../patience.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const demo = (name, args = []) => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'demo', name), ...args], { cwd: ROOT, encoding: 'utf8', timeout: PATIENCE_MS });
  return { code: r.status, out: r.stdout, err: r.stderr };
};

test('quickstart: shapes, values and a passing finite-difference check', () => {
  const r = demo('quickstart.js');
  assert.equal(r.code, 0, r.err + r.out);
  assert.match(r.out, /output\s+\[1,3,6\]/);
  for (const g of ['gradValue', 'gradSamplingLocations', 'gradAttentionWeights']) assert.match(r.out, new RegExp(`${g}\\s+\\[`));
  const errs = [...r.out.matchAll(/rel err (\S+)/g)].map((m) => Number(m[1]));
  assert.ok(errs.length >= 12, 'prints one line per checked element');
  assert.ok(Math.max(...errs) < 1e-3, `finite differences agree: ${Math.max(...errs)}`);
  assert.match(r.out, /gradients agree/);
});

test('train-toy: a progress bar and a loss per step, ending lower than it started', () => {
  const r = demo('train-toy.js', ['--steps', '60']);
  assert.equal(r.code, 0, r.err + r.out);
  const losses = [...r.out.matchAll(/^step +\d+\/60 [█░]+ loss (\S+)$/gm)].map((m) => Number(m[1]));
  assert.equal(losses.length, 60, 'one line per step');
  const final = Number(/final loss (\S+) after 60 steps \(started at (\S+),/.exec(r.out)[1]);
  const start = Number(/started at (\S+),/.exec(r.out)[1]);
  assert.equal(final, losses[59]);
  assert.ok(final < 0.1 * start, `loss ${start} -> ${final}`);
  const [, d0, d1] = /to the target: (\S+) → (\S+)/.exec(r.out).map(Number);
  assert.ok(d1 < 0.5 * d0, `the points travel to the target: mean distance ${d0} -> ${d1}`);
  assert.equal(demo('train-toy.js', ['--steps', 'x']).code, 2, 'bad --steps is refused');
});

test('crosscheck: native and wasm command lines agree on a written case; a bfloat16 kernel passes, one element off is caught', () => {
  const native = path.join(ROOT, 'build', 'native', 'msda');
  assert.ok(fs.existsSync(native), 'build/native/msda exists (make native)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'msda-demo-test-'));
  try {
    const r = demo('crosscheck.js', ['--dir', dir, '--padding-mode', 'border', '--value-layout', 'BNLC']);
    assert.equal(r.code, 0, r.err + r.out);
    for (const f of ['value', 'spatial_shapes', 'level_start_index', 'sampling_locations', 'attention_weights', 'grad_output']) {
      assert.ok(fs.existsSync(path.join(dir, 'case', `${f}.npy`)), `case/${f}.npy written`);
    }
    for (const f of ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']) {
      assert.ok(fs.existsSync(path.join(dir, 'native', `${f}.npy`)) && fs.existsSync(path.join(dir, 'wasm', `${f}.npy`)), `${f}.npy from both`);
      assert.match(r.out, new RegExp(`${f}\\.npy .*(bit-identical|within tolerance)`));
    }
    assert.match(r.out, /grad_value\.npy \(2×4×420×8\)/, 'the BNLC option reached both command lines');
    assert.match(r.out, /native and wasm agree/);
    // the kernel-author part: a bfloat16 kernel passes --dtype bfloat16, one element off is named
    assert.match(r.out, /tolerance for bfloat16 \(--dtype\)/);
    assert.match(r.out, /crosscheck: all 4 outputs agree\n {4}\(exit 0\)/);
    assert.match(r.out, / {4}msda: crosscheck: grad_sampling_locations \(1 of 7680 elements\) beyond tolerance\n {4}\(exit 1\)/);
    assert.match(r.out, /grad_sampling_locations\[b=\d, q=\d+, h=\d, l=\d, p=\d, xy=\d\]: yours \S+, ours \S+/);
    assert.match(r.out, /the bfloat16 kernel passes and the broken one is caught/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
