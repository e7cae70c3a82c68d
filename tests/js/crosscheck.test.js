// `msda crosscheck --expect` for kernel authors (docs/cli.md, For kernel authors): per-element bounds
// for float32, float16 and bfloat16 kernels, and a report that says where.
//  - dumps of a correct kernel emulated in each dtype (inputs stored in the dtype, float32
//    arithmetic, results rounded to the dtype) pass, saved as <f4, <f2 or 'bfloat16';
//  - dumps with each known bug fail, naming the tensor: a half-pixel shift, W instead of W - 1
//    under align_corners, a dropped level, one wrong element (named by its coordinates);
//  - the report: yours / ours named, coordinates, per-level counts, --top, --json, --rtol/--atol;
//  - bad crosscheck arguments: exit 2 with one line.
// Every crosscheck run here is made by both CLIs, whose output must be identical.
// The cases are made here from fixed seeds (no PyTorch on the build machines): the "kernels" are
// this package's native backend on modified inputs, rounded as a half-precision kernel rounds.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { main } from '../../bindings/cli.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { serializeNpy } from '../../bindings/npy.js';
import { init } from '../../bindings/index.js';
import { rng, shapesFor, withoutJsAdditions } from './helpers.js';

const JS_CLI = fileURLToPath(new URL('../../bindings/cli.js', import.meta.url));
let root, msda;
before(async () => {
  root = mkdtempSync(`${tmpdir()}/msda-crosscheck-`);
  msda = await init({ backend: 'native' });
});
after(() => rmSync(root, { recursive: true, force: true }));

const NATIVE_CLI = fileURLToPath(new URL('../../build/native/msda', import.meta.url));

// Every run goes through both CLIs, which must agree character for character: the JS one
// in-process, the native one (src/cli/crosscheck.c) as a child.
async function js(args) {
  let out = '', err = '';
  const status = await main(args, { out: (s) => { out += s; }, err: (s) => { err += s; } });
  const n = spawnSync(NATIVE_CLI, args, { encoding: 'utf8' });
  assert.equal(n.stdout, withoutJsAdditions(out), `native and JS CLIs print the same, the JS report's additions aside (${args.join(' ')})`);
  assert.equal(n.stderr, err, `native and JS CLIs say the same on stderr (${args.join(' ')})`);
  assert.equal(n.status, status, `native and JS CLIs exit alike (${args.join(' ')})`);
  return { status, out, err };
}

const round = (data, dtype) => (dtype === 'float32' ? Float32Array.from(data) : widenHalf(narrowToHalf(data, dtype), dtype));

/** A small case whose float inputs are values of dtype (what a kernel of that dtype reads). */
function makeCase(seed, options, dtype) {
  const r = rng(seed);
  const dims = { B: 1, Q: 5, H: 2, C: 4, P: 2, spatialShapes: [[4, 5], [3, 3], [2, 4]] };
  const s = shapesFor(dims, options);
  const fill = (shape, f) => round(Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, f), dtype);
  return {
    value: { data: fill(s.value, () => r.uniform(-1, 1)), shape: s.value },
    spatialShapes: dims.spatialShapes,
    samplingLocations: { data: fill(s.samplingLocations, () => r.uniform(-0.05, 1.05)), shape: s.samplingLocations },
    attentionWeights: { data: fill(s.attentionWeights, () => r.uniform(0, 1)), shape: s.attentionWeights },
    gradOutput: { data: fill(s.output, () => r.uniform(-1, 1)), shape: s.output },
    ...options,
  };
}

const DESCR = { float32: '<f4', float16: '<f2', bfloat16: 'bfloat16' };

function writeTensor(path, data, shape, descr) {
  const t = descr === '<f4' ? { data: Float32Array.from(data), shape }
    : { data: narrowToHalf(data, descr === '<f2' ? 'float16' : 'bfloat16'), shape, dtype: descr };
  writeFileSync(path, serializeNpy(t));
}

/** Writes the case (inputs in descr) into dir, without level_start_index.npy when lean. */
function writeCase(dir, c, descr = '<f4') {
  mkdirSync(dir, { recursive: true });
  const starts = [];
  let total = 0;
  for (const [h, w] of c.spatialShapes) { starts.push(total); total += h * w; }
  writeFileSync(`${dir}/spatial_shapes.npy`, serializeNpy({ data: BigInt64Array.from(c.spatialShapes.flat().map(BigInt)), shape: [c.spatialShapes.length, 2] }));
  writeFileSync(`${dir}/level_start_index.npy`, serializeNpy({ data: BigInt64Array.from(starts.map(BigInt)), shape: [starts.length] }));
  writeTensor(`${dir}/value.npy`, c.value.data, c.value.shape, descr);
  writeTensor(`${dir}/sampling_locations.npy`, c.samplingLocations.data, c.samplingLocations.shape, descr);
  writeTensor(`${dir}/attention_weights.npy`, c.attentionWeights.data, c.attentionWeights.shape, descr);
  writeTensor(`${dir}/grad_output.npy`, c.gradOutput.data, c.gradOutput.shape, descr);
}

/** The outputs of a float32 kernel on c (this package's, optionally with a bug), as Float32Arrays. */
function kernel(c, bug = null) {
  const args = { ...c, samplingLocations: { ...c.samplingLocations, data: Float32Array.from(c.samplingLocations.data) },
    attentionWeights: { ...c.attentionWeights, data: Float32Array.from(c.attentionWeights.data) } };
  const bq = c.samplingLocationsLayout === 'BQHLP2';
  const [B, Q, H, NL, P] = c.attentionWeights.shape;
  const locAt = (b, q, h, l, p, xy) => (bq ? (((((b * Q + q) * H + h) * NL + l) * P + p) * 2 + xy)
    : (((((b * 2 + xy) * Q + q) * H + h) * NL + l) * P + p));
  const each = (f) => {
    for (let b = 0; b < B; b++) for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) {
      for (let p = 0; p < P; p++) f(b, q, h, l, p);
    }
  };
  if (bug === 'half-pixel') {
    // pixel positions x*W instead of x*W - 0.5: the same as sampling half a pixel further on
    each((b, q, h, l, p) => {
      const [Hl, Wl] = c.spatialShapes[l];
      args.samplingLocations.data[locAt(b, q, h, l, p, 0)] += 0.5 / Wl;
      args.samplingLocations.data[locAt(b, q, h, l, p, 1)] += 0.5 / Hl;
    });
  }
  if (bug === 'dropped-level') each((b, q, h, l, p) => { if (l === NL - 1) args.attentionWeights.data[(((b * Q + q) * H + h) * NL + l) * P + p] = 0; });
  const { gradOutput, ...forwardArgs } = args;
  const output = msda.forward(forwardArgs).data;
  const g = msda.backward(args);
  const out = { output, grad_value: g.gradValue.data, grad_sampling_locations: g.gradSamplingLocations.data,
    grad_attention_weights: g.gradAttentionWeights.data };
  if (bug === 'W-not-W-1') {
    // the location gradient scaled by W_l (H_l) instead of W_l - 1 (H_l - 1) under align_corners
    each((b, q, h, l, p) => {
      const [Hl, Wl] = c.spatialShapes[l];
      out.grad_sampling_locations[locAt(b, q, h, l, p, 0)] *= Wl / (Wl - 1);
      out.grad_sampling_locations[locAt(b, q, h, l, p, 1)] *= Hl / (Hl - 1);
    });
  }
  if (bug === 'dropped-level') {
    each((b, q, h, l, p) => {
      if (l !== NL - 1) return;
      out.grad_attention_weights[(((b * Q + q) * H + h) * NL + l) * P + p] = 0;
      out.grad_sampling_locations[locAt(b, q, h, l, p, 0)] = 0;
      out.grad_sampling_locations[locAt(b, q, h, l, p, 1)] = 0;
    });
  }
  return out;
}

/** Writes outputs (rounded to dtype, saved as descr) into dir. */
function writeDumps(dir, c, outs, dtype, descr) {
  mkdirSync(dir, { recursive: true });
  const [B, Q, H] = c.attentionWeights.shape;
  const shapes = { output: [B, Q, H * c.value.shape[3]], grad_value: c.value.shape,
    grad_sampling_locations: c.samplingLocations.shape, grad_attention_weights: c.attentionWeights.shape };
  for (const [name, data] of Object.entries(outs)) writeTensor(`${dir}/${name}.npy`, round(data, dtype), shapes[name], descr);
}

const flagsOf = (o) => ['--value-layout', o.valueLayout, '--sampling-locations-layout', o.samplingLocationsLayout,
  '--padding-mode', o.paddingMode, ...(o.alignCorners ? ['--align-corners'] : [])];

const OPTIONS = [
  { valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'zeros' },
  { valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'border' },
  { valueLayout: 'BLNC', samplingLocationsLayout: 'B2QHLP', alignCorners: true, paddingMode: 'zeros' },
  { valueLayout: 'BNLC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'border' },
];

test('correct kernels emulated in float32, float16 and bfloat16 pass, saved as <f4, <f2 or bfloat16; the margin is below 1', async () => {
  for (const dtype of ['float32', 'float16', 'bfloat16']) {
    for (const [k, options] of OPTIONS.entries()) {
      const c = makeCase(100 + k, options, dtype);
      const dir = `${root}/ok-${dtype}-${k}`;
      writeCase(dir, c, k % 2 ? '<f4' : DESCR[dtype]);
      const outs = kernel(c);
      for (const descr of new Set(['<f4', DESCR[dtype]])) {
        writeDumps(`${dir}/yours${descr}`, c, outs, dtype, descr);
        // <f2 and bfloat16 dumps say their dtype; float32 ones need --dtype
        const dtypeFlag = descr === '<f4' ? ['--dtype', dtype] : [];
        const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours${descr}`, ...dtypeFlag, '--json', ...flagsOf(options)]);
        assert.equal(r.status, 0, `${dtype} ${descr} ${JSON.stringify(options)}: ${r.err}\n${r.out}`);
        const doc = JSON.parse(r.out);
        assert.equal(doc.tolerance.dtype, dtype);
        assert.equal(doc.agree, true);
        assert.deepEqual(Object.keys(doc.outputs), ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']);
        for (const o of Object.values(doc.outputs)) {
          assert.equal(o.disagree, 0);
          assert.ok(o.maxRatioToBound < 1, `${dtype}: ratio ${o.maxRatioToBound}`);
        }
      }
    }
  }
});

test('a correct float16 kernel fails the float32 bound (the dtype matters), and passes with --dtype float16', async () => {
  const c = makeCase(7, OPTIONS[0], 'float16');
  const dir = `${root}/f16-strict`;
  writeCase(dir, c, '<f2');
  writeDumps(`${dir}/yours`, c, kernel(c), 'float16', '<f4');
  const strict = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
  assert.equal(strict.status, 1, strict.out);
  assert.match(strict.out, /tolerance for float32 \(the default\)/);
  assert.equal((await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--dtype', 'float16'])).status, 0);
});

test('a half-precision dump saved as <f4 and checked without --dtype gets a note naming the dtype its values fit', async () => {
  for (const dtype of ['float16', 'bfloat16']) {
    const c = makeCase(8, OPTIONS[0], dtype);
    const dir = `${root}/hint-${dtype}`;
    writeCase(dir, c);
    writeDumps(`${dir}/yours`, c, kernel(c), dtype, '<f4');
    const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
    assert.equal(r.status, 1, r.out);
    for (const n of ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']) {
      assert.ok(r.out.includes(`  note: every value in ${dir}/yours/${n}.npy is a ${dtype} value: if your kernel stores ${dtype}, give --dtype ${dtype}\n`), r.out);
    }
    // not with --dtype given, nor for a float32 dump (whose values no half dtype holds)
    assert.doesNotMatch((await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--dtype', 'float32'])).out, /every value/);
    writeDumps(`${dir}/f32`, c, kernel(c, 'half-pixel'), 'float32', '<f4');
    assert.doesNotMatch((await js(['crosscheck', '--in', dir, '--expect', `${dir}/f32`])).out, /every value/);
  }
});

test('per-head counts: a head offset by a wrong stride shows in the heads it breaks', async () => {
  const c = makeCase(9, OPTIONS[0], 'float32');
  const dir = `${root}/heads`;
  writeCase(dir, c);
  const outs = kernel(c);
  const [B, Q, H] = c.attentionWeights.shape, C = c.value.shape[3];
  // head 1's channels read from head 0 (a head stride of 0): head 0 right, head 1 wrong
  const output = Float32Array.from(outs.output);
  for (let b = 0; b < B; b++) for (let q = 0; q < Q; q++) for (let ch = 0; ch < C; ch++) {
    output[((b * Q + q) * H + 1) * C + ch] = output[((b * Q + q) * H) * C + ch];
  }
  writeDumps(`${dir}/yours`, c, { output }, 'float32', '<f4');
  const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
  assert.equal(r.status, 1, r.out);
  const bad = /output +DISAGREE +(\d+) of \d+ elements beyond their bound \(per head: h=0: 0, h=1: (\d+)\);/.exec(r.out);
  assert.ok(bad && bad[1] === bad[2] && Number(bad[1]) > 0, r.out);
  const doc = JSON.parse((await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--json'])).out);
  assert.deepEqual(doc.outputs.output.perHead, [0, Number(bad[1])]);
  assert.equal(doc.outputs.output.perLevel, null);
});

test('an element with no bound (ours exactly 0, nothing contributing) gets no ratio to it; one output agrees in the singular', async () => {
  const c = makeCase(10, OPTIONS[0], 'float32');
  const dir = `${root}/nobound`;
  writeCase(dir, c);
  const { referenceWithBounds } = await import('../../bindings/cli/bounds.js');
  const outs = kernel(c);
  writeDumps(`${dir}/yours`, c, { grad_value: outs.grad_value }, 'float32', '<f4');
  const agree = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
  assert.equal(agree.status, 0, agree.out);
  assert.match(agree.out, /\ncrosscheck: grad_value agrees\n$/);
  // a pixel no sample reaches: its gradient is exactly 0 with a bound of underflow alone
  const ref = referenceWithBounds(c, { forward: false }).grad_value;
  const i = ref.M.findIndex((m, k) => m === 0 && ref.P[k] === 0);
  assert.ok(i >= 0, 'the case has an unreached pixel');
  const gv = Float32Array.from(outs.grad_value);
  gv[i] = 0.01;
  writeDumps(`${dir}/yours`, c, { grad_value: gv }, 'float32', '<f4');
  const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
  assert.equal(r.status, 1, r.out);
  const line = r.out.split('\n').find((l) => l.startsWith('  grad_value '));
  assert.match(line, /DISAGREE  1 of \d+ elements .*; max \|yours - ours\| 1\.00e-2, (max \|yours - ours\| \/ bound \S+e-\d+, )?1 with no bound to compare \(ours exactly 0\)$/);
  assert.equal(JSON.parse((await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--json'])).out).outputs.grad_value.noBound, 1);
});

const BUGS = [
  // [bug, options index, tensors that must disagree]
  ['half-pixel', 0, ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']],
  ['half-pixel', 3, ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']],
  ['W-not-W-1', 1, ['grad_sampling_locations']],
  ['W-not-W-1', 2, ['grad_sampling_locations']],
  ['dropped-level', 0, ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']],
  ['dropped-level', 1, ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']],
];

test('each known bug fails in every dtype, naming the tensors it breaks and only those', async () => {
  for (const dtype of ['float32', 'float16', 'bfloat16']) {
    for (const [bug, k, broken] of BUGS) {
      const options = OPTIONS[k];
      const c = makeCase(200 + k, options, dtype);
      const dir = `${root}/bug-${bug}-${dtype}-${k}`;
      writeCase(dir, c, DESCR[dtype]);
      writeDumps(`${dir}/yours`, c, kernel(c, bug), dtype, DESCR[dtype]);
      const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--json', ...flagsOf(options)]);
      const context = `${bug} ${dtype} ${JSON.stringify(options)}`;
      assert.equal(r.status, 1, `${context}: ${r.out}`);
      const doc = JSON.parse(r.out);
      assert.equal(doc.agree, false);
      const failing = Object.entries(doc.outputs).filter(([, o]) => o.disagree > 0).map(([n]) => n);
      assert.deepEqual(failing, broken, context);
      assert.match(r.err, new RegExp(`^msda: crosscheck: ${broken[0]} \\(\\d+ of \\d+ elements\\)`));
      if (bug === 'dropped-level') {
        // only the dropped level's weights and locations disagree
        for (const n of ['grad_sampling_locations', 'grad_attention_weights']) {
          const levels = doc.outputs[n].perLevel;
          assert.equal(levels[0] + levels[1], 0, `${context} ${n}: ${levels}`);
          assert.ok(levels[2] > 0, `${context} ${n}: ${levels}`);
        }
      }
    }
  }
});

test('one wrong element is found and named by its coordinates, yours and ours named plainly', async () => {
  const options = OPTIONS[1]; // B2QHLP: coordinates in the tensor's own layout
  const c = makeCase(300, options, 'bfloat16');
  const dir = `${root}/one-wrong`;
  writeCase(dir, c, '<f4');
  const outs = kernel(c);
  // grad_sampling_locations (B, 2, N_q, N_h, N_l, N_p) = (1, 2, 5, 2, 3, 2) at [b=0, xy=1, q=3, h=0, l=2, p=1]
  const index = ((((0 * 2 + 1) * 5 + 3) * 2 + 0) * 3 + 2) * 2 + 1;
  const g = outs.grad_sampling_locations;
  const ours = g[index];
  g[index] = ours + 0.5 + Math.abs(ours);
  writeDumps(`${dir}/yours`, c, outs, 'bfloat16', '<f4');
  const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--dtype', 'bfloat16', ...flagsOf(options)]);
  assert.equal(r.status, 1, r.out);
  assert.match(r.out, /yours = the files in .*\/yours, ours = the float64 reference \(docs\/SEMANTICS\.md\)/);
  assert.match(r.out, /tolerance for bfloat16 \(--dtype\): .*u = 2\^-8, per element/);
  assert.match(r.out, /grad_sampling_locations +DISAGREE +1 of 120 elements beyond their bound \(per level: l=0: 0, l=1: 0, l=2: 1; per head: h=0: 1, h=1: 0\)/);
  const line = r.out.split('\n').find((l) => l.includes('grad_sampling_locations[b=0, xy=1, q=3, h=0, l=2, p=1]: yours '));
  assert.ok(line, r.out);
  const [, yours, oursPrinted] = line.match(/yours (\S+), ours (\S+),/);
  const wantYours = widenHalf(narrowToHalf([g[index]], 'bfloat16'), 'bfloat16')[0];
  assert.ok(Math.abs(Number(yours) - wantYours) <= 1e-5 * Math.abs(wantYours), `${yours} vs ${wantYours}`);
  assert.ok(Math.abs(Number(oursPrinted) - ours) <= 2e-2 * Math.abs(ours) + 1e-6, `${oursPrinted} vs ${ours}`);
  for (const n of ['output', 'grad_value', 'grad_attention_weights']) assert.match(r.out, new RegExp(`  ${n} +ok `));
  assert.equal(r.err, 'msda: crosscheck: grad_sampling_locations (1 of 120 elements) beyond tolerance\n');
  // the same through the bin, with --json: one document, the element's coordinates
  const b = spawnSync(process.execPath, [JS_CLI, 'crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--dtype', 'bfloat16',
    '--json', ...flagsOf(options)], { encoding: 'utf8' });
  assert.equal(b.status, 1);
  const doc = JSON.parse(b.stdout);
  const o = doc.outputs.grad_sampling_locations;
  assert.equal(o.disagree, 1);
  assert.deepEqual(o.perLevel, [0, 0, 1]);
  assert.deepEqual(o.worst.map((w) => w.coordinates), [{ b: 0, xy: 1, q: 3, h: 0, l: 2, p: 1 }]);
  assert.equal(o.worst[0].index, index);
  assert.ok(o.worst[0].diff > o.worst[0].bound);
  assert.equal(doc.tolerance.unitRoundoff, 2 ** -8);
});

test('--top K lists the K disagreeing elements with the largest |yours - ours|, largest first; --rtol/--atol replace the bound', async () => {
  const options = OPTIONS[0];
  const c = makeCase(400, options, 'float16');
  const dir = `${root}/top`;
  writeCase(dir, c, '<f2');
  writeDumps(`${dir}/yours`, c, kernel(c, 'half-pixel'), 'float16', '<f2');
  const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--top', '3', '--json']);
  const doc = JSON.parse(r.out);
  assert.equal(doc.tolerance.from, 'the dtype of the files');
  for (const o of Object.values(doc.outputs)) {
    assert.equal(o.worst.length, Math.min(3, o.disagree));
    const diffs = o.worst.map((w) => w.diff);
    assert.deepEqual(diffs, [...diffs].sort((x, y) => y - x));
    assert.ok(o.worst.every((w) => w.diff > w.bound));
    if (o.worst.length) assert.equal(diffs[0], o.maxAbsDiff, 'the first listed is the largest difference');
  }
  const none = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--top', '0']);
  assert.equal(none.status, 1);
  assert.ok(!none.out.includes('    output['), 'no elements listed with --top 0');
  const text = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--top', '2']);
  assert.equal(text.out.split('\n').filter((l) => l.startsWith('    output[')).length, 2);
  assert.match(text.out, /    output\[b=0, q=\d, h=\d, c=\d\]: yours \S+, ours \S+, \|diff\| \S+ > bound \S+/);
  // a loose --rtol/--atol lets the bug through; a tight one fails even a correct kernel
  const loose = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--rtol', '10', '--atol', '10']);
  assert.equal(loose.status, 0, loose.out);
  assert.match(loose.out, /tolerance \(--rtol\/--atol\): \|yours - ours\| <= 10 \+ 10\*\|ours\|/);
  writeDumps(`${dir}/good`, c, kernel(c), 'float16', '<f2');
  assert.equal((await js(['crosscheck', '--in', dir, '--expect', `${dir}/good`])).status, 0);
  const tight = await js(['crosscheck', '--in', dir, '--expect', `${dir}/good`, '--atol', '1e-9']);
  assert.equal(tight.status, 1, tight.out);
});

test('--expect DIR: a file that is no output name is refused, naming it and the names it could be', async () => {
  const c = makeCase(12, OPTIONS[0], 'float32');
  const dir = `${root}/typo`;
  writeCase(dir, c);
  const outs = kernel(c);
  writeDumps(`${dir}/yours`, c, { output: outs.output, grad_value: outs.grad_value }, 'float32', '<f4');
  renameSync(`${dir}/yours/grad_value.npy`, `${dir}/yours/grad_values.npy`);
  const names = '(output.npy, grad_value.npy, grad_sampling_locations.npy, grad_attention_weights.npy)';
  const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
  assert.equal(r.status, 2, r.out);
  assert.equal(r.out, '');
  assert.equal(r.err, `msda: --expect ${dir}/yours: grad_values.npy is not an output name ${names}\n`);
  // the first in byte order, and how many more; a name with a newline stays on the one line
  writeFileSync(`${dir}/yours/a\nb`, '');
  const two = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`]);
  assert.equal(two.err, `msda: --expect ${dir}/yours: a\\x0ab and 1 more are not output names ${names}\n`);
});

test('bad crosscheck arguments: exit 2 with one line naming the flag', async () => {
  const dir = `${root}/args`;
  writeCase(dir, makeCase(1, OPTIONS[0], 'float32'));
  const cases = [
    [['--dtype', 'float64', '--expect', dir], "--dtype: 'float64', expected float32, float16 or bfloat16"],
    [['--dtype', 'float16'], '--dtype needs --expect DIR'],
    [['--json'], '--json needs --expect DIR'],
    [['--expect', dir, '--rtol', 'abc'], "--rtol: 'abc', expected a number >= 0 such as 1e-3"],
    [['--expect', dir, '--atol', '-1'], "--atol: '-1', expected a number >= 0"],
    [['--expect', dir, '--rtol', '1e-3', '--dtype', 'bfloat16'], '--dtype and --rtol both set the tolerance'],
    [['--expect', dir, '--top', 'x'], "--top: 'x', expected an integer from 0 to 1000"],
    [['--expect', dir, '--json=1'], '--json takes no value'],
    [['--expect', dir, '--out-dtype', 'float16'], '--out-dtype is not used by crosscheck (it writes nothing)'],
  ];
  for (const [args, words] of cases) {
    const r = await js(['crosscheck', '--in', dir, ...args]);
    assert.equal(r.status, 2, `${args}: ${r.out}`);
    assert.ok(r.err.startsWith('msda: ') && r.err.includes(words) && r.err.indexOf('\n') === r.err.length - 1, `${args}: ${r.err}`);
  }
  // --backend with --expect (the README's older form) still runs, and says it is not used
  writeDumps(`${dir}/yours`, makeCase(1, OPTIONS[0], 'float32'), kernel(makeCase(1, OPTIONS[0], 'float32')), 'float32', '<f4');
  const named = await js(['crosscheck', '--in', dir, '--expect', `${dir}/yours`, '--backend', 'native']);
  assert.equal(named.status, 0, named.out + named.err);
  assert.match(named.out, /  note: --backend native is not used with --expect: ours is the float64 reference\n/);
  const fwd = await js(['forward', '--in', dir, '--out', `${dir}/o`, '--dtype', 'float16']);
  assert.equal(fwd.status, 2);
  assert.equal(fwd.err, 'msda: --dtype is only for msda crosscheck\n');
});

test("this package's own float32 kernels pass --dtype float32 on awkward cases (far, non-finite, edge positions)", async () => {
  const { randomCase, OPTION_COMBOS } = await import('./helpers.js');
  const wasm = await init({ backend: 'wasm' });
  for (const [k, options] of OPTION_COMBOS.entries()) {
    for (const seed of [k, 100 + k, 185]) {
      const rc = randomCase(seed, options);
      const c = { ...rc.args, gradOutput: rc.gradOutput };
      const dir = `${root}/own-${k}-${seed}`;
      writeCase(dir, c);
      for (const [name, api] of [['native', msda], ['wasm', wasm]]) {
        const { gradOutput, ...fwd } = c;
        const g = api.backward(c);
        writeDumps(`${dir}/${name}`, c, { output: api.forward(fwd).data, grad_value: g.gradValue.data,
          grad_sampling_locations: g.gradSamplingLocations.data, grad_attention_weights: g.gradAttentionWeights.data }, 'float32', '<f4');
        const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/${name}`, ...flagsOf(options)]);
        assert.equal(r.status, 0, `${name} seed ${seed} ${JSON.stringify(options)}: ${r.out}`);
      }
    }
  }
});
