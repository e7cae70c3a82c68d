// `msda crosscheck --expect` on dumps made once by PyTorch (tests/fixtures/crosscheck/make_fixture.py:
// ms_deform_attn_core_pytorch's grid_sample composition and autograd, run as a bfloat16 and a
// float16 kernel run: inputs rounded to the dtype, float32 arithmetic, outputs rounded).
// Both CLIs, which must print the same: the half dumps pass their own dtype's bound and fail
// float32's (they are not float32-accurate), and the buggy dumps fail, naming the tensors they break.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseNpy } from '../../bindings/npy.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { withoutJsAdditions } from './helpers.js';

const JS_CLI = fileURLToPath(new URL('../../bindings/cli.js', import.meta.url));
const NATIVE_CLI = fileURLToPath(new URL('../../build/native/msda', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/crosscheck', import.meta.url));
const OUTPUTS = ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights'];

/** Runs crosscheck through the bin and the native CLI; both must agree; returns the JSON report. */
function crosscheck(set, input, expect, dtype) {
  const config = JSON.parse(readFileSync(`${FIXTURE}/${set}/config.json`, 'utf8'));
  const args = ['crosscheck', '--in', `${FIXTURE}/${set}/${input}`, '--expect', `${FIXTURE}/${set}/${expect}`,
    '--dtype', dtype, '--json', '--value-layout', config.value_layout,
    '--sampling-locations-layout', config.sampling_locations_layout, '--padding-mode', config.padding_mode,
    ...(config.align_corners ? ['--align-corners'] : [])];
  const j = spawnSync(process.execPath, [JS_CLI, ...args], { encoding: 'utf8' });
  const n = spawnSync(NATIVE_CLI, args, { encoding: 'utf8' });
  const what = `${set}/${expect} --dtype ${dtype}`;
  assert.equal(n.stdout, withoutJsAdditions(j.stdout), `native and JS CLIs print the same, the JS report's additions aside (${what})`);
  assert.equal(n.stderr, j.stderr, `native and JS CLIs say the same on stderr (${what})`);
  assert.equal(n.status, j.status, `native and JS CLIs exit alike (${what})`);
  const doc = JSON.parse(j.stdout);
  assert.equal(doc.tolerance.dtype, dtype, what);
  assert.deepEqual(Object.keys(doc.outputs), OUTPUTS, what);
  return { status: j.status, err: j.stderr, doc, what };
}

const failing = (doc) => Object.entries(doc.outputs).filter(([, o]) => o.disagree > 0).map(([n]) => n);

const SETS = ['default', 'corners-border'];
const HALVES = [['bf16', 'bfloat16', '<f4'], ['f16', 'float16', '<f2']];

test('the fixture holds what a half kernel reads and writes: values of the dtype, saved as <f4 (bfloat16) or <f2', () => {
  for (const set of SETS) {
    for (const [tag, dtype, descr] of HALVES) {
      for (const [dir, names] of [[`in_${tag}`, ['value', 'sampling_locations', 'attention_weights', 'grad_output']], [`expect_${tag}`, OUTPUTS]]) {
        for (const name of names) {
          const t = parseNpy(readFileSync(`${FIXTURE}/${set}/${dir}/${name}.npy`));
          assert.equal(t.dtype, descr, `${set}/${dir}/${name}.npy is ${descr}`);
          const wide = descr === '<f2' ? widenHalf(t.data, dtype) : t.data;
          assert.deepEqual(widenHalf(narrowToHalf(wide, dtype), dtype), Float32Array.from(wide), `${set}/${dir}/${name}.npy holds ${dtype} values`);
        }
      }
    }
  }
});

test('PyTorch-made bfloat16 and float16 dumps pass their dtype, both CLIs, every output well inside its bound', () => {
  for (const set of SETS) {
    for (const [tag, dtype] of HALVES) {
      const { status, doc, what, err } = crosscheck(set, `in_${tag}`, `expect_${tag}`, dtype);
      assert.equal(status, 0, `${what}: ${err}`);
      assert.equal(doc.agree, true, what);
      for (const [n, o] of Object.entries(doc.outputs)) {
        assert.equal(o.disagree, 0, `${what} ${n}`);
        assert.ok(o.maxRatioToBound < 0.5, `${what} ${n}: ratio ${o.maxRatioToBound}`);
      }
    }
  }
});

test('the same half dumps fail --dtype float32 in every output: they are not float32-accurate', () => {
  for (const set of SETS) {
    for (const [tag] of HALVES) {
      const { status, doc, what, err } = crosscheck(set, `in_${tag}`, `expect_${tag}`, 'float32');
      assert.equal(status, 1, what);
      assert.deepEqual(failing(doc), OUTPUTS, what);
      assert.match(err, /^msda: crosscheck: output \(\d+ of 80 elements\), grad_value \(\d+ of 480 elements\), /, what);
    }
  }
});

test('buggy bfloat16 dumps fail --dtype bfloat16, naming the tensors the bug breaks and only those', () => {
  // grid_sample with align_corners=True on an align_corners=False case: everything is off
  const shifted = crosscheck('default', 'in_bf16', 'expect_bf16_align_corners', 'bfloat16');
  assert.equal(shifted.status, 1, shifted.what);
  assert.deepEqual(failing(shifted.doc), OUTPUTS, shifted.what);
  assert.match(shifted.err, /^msda: crosscheck: output \(\d+ of 80 elements\), grad_value /);
  // the location gradient scaled by W_l, H_l instead of W_l - 1, H_l - 1: that gradient alone, on both levels
  const scaled = crosscheck('corners-border', 'in_bf16', 'expect_bf16_grad_scale_W', 'bfloat16');
  assert.equal(scaled.status, 1, scaled.what);
  assert.deepEqual(failing(scaled.doc), ['grad_sampling_locations'], scaled.what);
  const o = scaled.doc.outputs.grad_sampling_locations;
  assert.ok(o.perLevel[0] > 0 && o.perLevel[1] > 0, `${o.perLevel}`);
  assert.match(scaled.err, /^msda: crosscheck: grad_sampling_locations \(\d+ of 160 elements\) beyond tolerance\n$/);
});
