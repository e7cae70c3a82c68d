// bindings/cli.js (the package's `msda` bin) end to end:
//  - forward and backward on every backend against the native CLI's outputs, all 16 option
//    combinations (bit for bit on the native backend);
//  - every bad argument and bad input: exit 2 and the very same one-line message as the native
//    CLI, and no outputs left behind;
//  - crosscheck: exit 0 on an agreeing case, exit 1 on a tampered output (--expect DIR), exit 2
//    on unusable expectations.
// The JS CLI runs in-process through its exported main() (fast); a few runs spawn the real bin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { main } from '../../bindings/cli.js';
import { parseNpy, serializeNpy } from '../../bindings/npy.js';
import { narrowToHalf, widenHalf } from '../../bindings/core/half.js';
import { assertClose, OPTION_COMBOS, randomCase } from './helpers.js';

const NATIVE_CLI = fileURLToPath(new URL('../../build/native/msda', import.meta.url));
const JS_CLI = fileURLToPath(new URL('../../bindings/cli.js', import.meta.url));
let root;
before(() => { root = mkdtempSync(`${tmpdir()}/msda-cli-js-`); });
after(() => rmSync(root, { recursive: true, force: true }));

async function js(args) {
  let out = '', err = '';
  const status = await main(args, { out: (s) => { out += s; }, err: (s) => { err += s; } });
  return { status, out, err };
}
function native(args) {
  const r = spawnSync(NATIVE_CLI, args, { encoding: 'utf8' });
  return { status: r.status, out: r.stdout, err: r.stderr };
}
function bin(args) {
  const r = spawnSync(process.execPath, [JS_CLI, ...args], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout, err: r.stderr };
}

const OUTPUTS = ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights'];
const flagsOf = (o) => ['--value-layout', o.valueLayout, '--sampling-locations-layout', o.samplingLocationsLayout,
  '--padding-mode', o.paddingMode, ...(o.alignCorners ? ['--align-corners'] : [])];

/** Writes a case directory from helpers.randomCase; int32 shape files when ints32. */
function writeCase(dir, c, ints32 = false) {
  mkdirSync(dir, { recursive: true });
  const w = (name, t) => writeFileSync(`${dir}/${name}.npy`, serializeNpy(t));
  const shapes = c.args.spatialShapes;
  const starts = [];
  let total = 0;
  for (const [h, wd] of shapes) { starts.push(total); total += h * wd; }
  const ints = (xs) => (ints32 ? Int32Array.from(xs) : BigInt64Array.from(xs.map(BigInt)));
  w('value', c.args.value);
  w('spatial_shapes', { data: ints(shapes.flat()), shape: [shapes.length, 2] });
  w('level_start_index', { data: ints(starts), shape: [shapes.length] });
  w('sampling_locations', c.args.samplingLocations);
  w('attention_weights', c.args.attentionWeights);
  w('grad_output', c.gradOutput);
}
const load = (path) => parseNpy(readFileSync(path));

test('--version: both CLIs print the package version and exit 0, before or after the command', async () => {
  const { version } = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8'));
  for (const args of [['--version'], ['forward', '--in', 'x', '--version']]) {
    for (const [name, r] of [['native', native(args)], ['bin', bin(args)], ['in-process', await js(args)]]) {
      assert.equal(r.status, 0, `${name} ${args}: ${r.err}`);
      assert.equal(r.out, `${version}\n`, `${name} ${args}`);
      assert.equal(r.err, '');
    }
  }
});

// A forward whose output alone is 4 GiB: wasm refuses it (RangeError) before allocating.
function writeHugeOutputCase(dir) {
  const C = 65536, Q = 16384;
  mkdirSync(dir, { recursive: true });
  const w = (name, t) => writeFileSync(`${dir}/${name}.npy`, serializeNpy(t));
  w('value', { data: new Float32Array(C), shape: [1, 1, 1, C] });
  w('spatial_shapes', { data: BigInt64Array.from([1n, 1n]), shape: [1, 2] });
  w('level_start_index', { data: BigInt64Array.from([0n]), shape: [1] });
  w('sampling_locations', { data: new Float32Array(2 * Q).fill(0.5), shape: [1, Q, 1, 1, 1, 2] });
  w('attention_weights', { data: new Float32Array(Q).fill(1), shape: [1, Q, 1, 1, 1] });
}

test('a backend is named in an error only when the user named it', async () => {
  const dir = `${root}/huge`;
  writeHugeOutputCase(dir);
  const unnamed = await js(['forward', '--in', dir, '--out', `${root}/huge-out`]);
  assert.equal(unnamed.status, 2, unnamed.err);
  assert.match(unnamed.err, /^msda: forward: this call needs \d+ bytes of WebAssembly memory[^\n]*\n$/);
  assert.doesNotMatch(unnamed.err, /--backend/);
  const named = await js(['forward', '--in', dir, '--out', `${root}/huge-out`, '--backend', 'wasm']);
  assert.equal(named.status, 2, named.err);
  assert.match(named.err, /^msda: --backend wasm: forward: this call needs \d+ bytes/);
  assert.ok(!existsSync(`${root}/huge-out/output.npy`));
});

// The bin of a copy of the package without a native addon for this machine (no prebuilds/, no
// build/): what a plain npm install gives on a platform the package ships no addon for.
let bareCli = null;
function binWithoutNative(args) {
  if (!bareCli) {
    const pkg = `${root}/bare-package`;
    for (const part of ['bindings', 'dist', 'package.json']) cpSync(fileURLToPath(new URL(`../../${part}`, import.meta.url)), `${pkg}/${part}`, { recursive: true });
    bareCli = `${pkg}/bindings/cli.js`;
  }
  const r = spawnSync(process.execPath, [bareCli, ...args], { encoding: 'utf8' });
  return { status: r.status, out: r.stdout, err: r.stderr };
}
const HERE = `${process.platform}-${process.arch}`;

test('crosscheck without native: against the float64 reference, saying so; --backend native where it is missing: exit 2', async () => {
  const dir = `${root}/cross-elsewhere`;
  const c = randomCase(11, OPTION_COMBOS[6]);
  writeCase(dir, c);
  const flags = flagsOf(OPTION_COMBOS[6]);
  const r = binWithoutNative(['crosscheck', '--in', dir, ...flags]);
  assert.equal(r.status, 0, r.err + r.out);
  assert.ok(r.out.startsWith(`crosscheck ${dir}: wasm (SIMD) against the float64 reference (the native addon is not available on ${HERE})\n`), r.out);
  assert.match(r.out, /\+ 1e-4\*max\|ref\|/);
  for (const name of OUTPUTS) assert.match(r.out, new RegExp(`${name} +max abs diff \\S+ +max rel diff \\S+ +ok`));
  assert.equal(r.err, '');
  for (const args of [['crosscheck', '--in', dir, '--backend', 'native'], ['forward', '--in', dir, '--out', `${dir}/o`, '--backend', 'native']]) {
    const n = binWithoutNative([...args, ...flags]);
    assert.equal(n.status, 2, `${args[0]}: exit ${n.status} ${n.err}`);
    assert.match(n.err, /^msda: --backend native: the native addon is not available here; without --backend the CLI runs on WebAssembly with the same results \([^\n]*\)\n$/);
    assert.ok(n.err.includes(HERE), n.err);
  }
  assert.ok(!existsSync(`${dir}/o`));
  // Where native loads, --backend native is checked against the float64 reference, and a wrong
  // kernel would show: an --expect that is off by 1e-3 somewhere is caught against it too.
  const here = await js(['crosscheck', '--in', dir, '--backend', 'native', ...flags]);
  assert.equal(here.status, 0, here.err + here.out);
  assert.match(here.out, /: native against the float64 reference\n/);
});

test('--help prints the usage and exits 0 (bin and in-process)', async () => {
  const r = bin(['--help']);
  assert.equal(r.status, 0);
  assert.match(r.out, /msda crosscheck --in DIR \[--expect DIR\]/);
  assert.match((await js(['forward', '--help'])).out, /--backend wasm\|wasm-scalar\|native/);
});

test('forward and backward on wasm, wasm-scalar and native agree with the native CLI on all 16 option combinations', async () => {
  const backends = ['wasm', 'wasm-scalar', 'native'];
  for (const [k, options] of OPTION_COMBOS.entries()) {
    const c = randomCase(500 + k, options);
    const dir = `${root}/e2e${k}`;
    writeCase(dir, c, k % 2 === 1);
    const flags = flagsOf(options);
    for (const op of ['forward', 'backward']) {
      const n = native([op, '--in', dir, '--out', `${dir}/native`, ...flags]);
      assert.equal(n.status, 0, n.err);
      const backend = backends[k % 3];
      const j = await js([op, '--in', dir, '--out', `${dir}/js/`, '--backend', backend, '--threads', '2', ...flags]);
      assert.equal(j.status, 0, j.err);
      assert.equal(j.err, '');
      for (const name of op === 'forward' ? ['output'] : OUTPUTS.slice(1)) {
        const want = load(`${dir}/native/${name}.npy`), got = load(`${dir}/js/${name}.npy`);
        assert.deepEqual(got.shape, want.shape, `${name} shape`);
        const context = `seed ${c.seed} ${JSON.stringify(options)} ${backend} ${name}`;
        if (backend === 'native') {
          assert.deepEqual(readFileSync(`${dir}/js/${name}.npy`), readFileSync(`${dir}/native/${name}.npy`), `${context}: bytes`);
        } else {
          assertClose(got.data, want.data, context);
        }
      }
    }
    assert.deepEqual(readdirSync(`${dir}/js`).sort(), OUTPUTS.map((n) => `${n}.npy`).sort(), 'no temporaries left');
  }
});

test('--out-dtype float16 | bfloat16: the outputs rounded to nearest even, the same bytes from both CLIs', async () => {
  const options = OPTION_COMBOS[12];
  const c = randomCase(88, options);
  const dir = `${root}/out-dtype`;
  writeCase(dir, c);
  const flags = flagsOf(options);
  for (const op of ['forward', 'backward']) assert.equal(native([op, '--in', dir, '--out', `${dir}/f32`, ...flags]).status, 0);
  for (const dtype of ['float16', 'bfloat16']) {
    for (const op of ['forward', 'backward']) {
      const n = native([op, '--in', dir, '--out', `${dir}/n-${dtype}`, '--out-dtype', dtype, ...flags]);
      assert.equal(n.status, 0, n.err);
      const j = await js([op, '--in', dir, '--out', `${dir}/j-${dtype}`, '--out-dtype', dtype, '--backend', 'native', ...flags]);
      assert.equal(j.status, 0, j.err);
    }
    for (const name of OUTPUTS) {
      const bytes = readFileSync(`${dir}/n-${dtype}/${name}.npy`);
      assert.deepEqual(readFileSync(`${dir}/j-${dtype}/${name}.npy`), bytes, `${dtype} ${name}: both CLIs`);
      const got = parseNpy(bytes), f32 = load(`${dir}/f32/${name}.npy`);
      assert.equal(got.dtype, dtype === 'float16' ? '<f2' : '<f4', `${dtype} ${name}: dtype`);
      assert.deepEqual(got.shape, f32.shape);
      const want = narrowToHalf(f32.data, dtype);
      if (dtype === 'float16') assert.deepEqual(got.data, want, `${name}: the nearest float16`);
      else assert.deepEqual(new Uint32Array(got.data.buffer), new Uint32Array(widenHalf(want, 'bfloat16').buffer), `${name}: the nearest bfloat16`);
    }
  }
});

test('level_start_index.npy may be left out (derived): both CLIs give the same bytes as with it', async () => {
  const options = OPTION_COMBOS[9];
  const c = randomCase(77, options);
  const dir = `${root}/no-starts`;
  writeCase(dir, c);
  const flags = flagsOf(options);
  assert.equal(native(['backward', '--in', dir, '--out', `${dir}/with`, ...flags]).status, 0);
  unlinkSync(`${dir}/level_start_index.npy`);
  const n = native(['backward', '--in', dir, '--out', `${dir}/native`, ...flags]);
  assert.equal(n.status, 0, n.err);
  const j = await js(['backward', '--in', dir, '--out', `${dir}/js`, '--backend', 'native', ...flags]);
  assert.equal(j.status, 0, j.err);
  for (const name of OUTPUTS.slice(1)) {
    assert.deepEqual(readFileSync(`${dir}/native/${name}.npy`), readFileSync(`${dir}/with/${name}.npy`), name);
    assert.deepEqual(readFileSync(`${dir}/js/${name}.npy`), readFileSync(`${dir}/with/${name}.npy`), name);
  }
});

test("'<f2' and 'bfloat16' inputs: both CLIs compute on the float32 values the bits stand for, same bytes", async () => {
  for (const dtype of ['float16', 'bfloat16']) {
    const options = OPTION_COMBOS[6];
    const c = randomCase(900, options);
    const halfDir = `${root}/half-${dtype}`, wideDir = `${root}/wide-${dtype}`;
    writeCase(halfDir, c);
    writeCase(wideDir, c);
    for (const [name, t] of [['value', c.args.value], ['sampling_locations', c.args.samplingLocations],
      ['attention_weights', c.args.attentionWeights], ['grad_output', c.gradOutput]]) {
      const bits = narrowToHalf(t.data, dtype);
      writeFileSync(`${halfDir}/${name}.npy`, serializeNpy({ data: bits, shape: t.shape, dtype: dtype === 'float16' ? '<f2' : 'bfloat16' }));
      writeFileSync(`${wideDir}/${name}.npy`, serializeNpy({ data: widenHalf(bits, dtype), shape: t.shape }));
    }
    const flags = flagsOf(options);
    for (const op of ['forward', 'backward']) {
      assert.equal(native([op, '--in', wideDir, '--out', `${wideDir}/out`, ...flags]).status, 0);
      const n = native([op, '--in', halfDir, '--out', `${halfDir}/native`, ...flags]);
      assert.equal(n.status, 0, n.err);
      const j = await js([op, '--in', halfDir, '--out', `${halfDir}/js`, '--backend', 'native', ...flags]);
      assert.equal(j.status, 0, j.err);
      const w = await js([op, '--in', halfDir, '--out', `${halfDir}/wasm`, ...flags]);
      assert.equal(w.status, 0, w.err);
      // the reader of files too large for one Buffer (forced here: every file, 7 bytes at a time)
      const parts = spawnSync(process.execPath, [JS_CLI, op, '--in', halfDir, '--out', `${halfDir}/parts`, '--backend', 'native', ...flags],
        { encoding: 'utf8', env: { ...process.env, MSDA_TEST_NPY_PARTS: '0,7' } });
      assert.equal(parts.status, 0, parts.stderr);
      for (const name of op === 'forward' ? ['output'] : OUTPUTS.slice(1)) {
        const want = readFileSync(`${wideDir}/out/${name}.npy`);
        assert.deepEqual(readFileSync(`${halfDir}/native/${name}.npy`), want, `${dtype} ${name}: native CLI`);
        assert.deepEqual(readFileSync(`${halfDir}/js/${name}.npy`), want, `${dtype} ${name}: JS CLI on native`);
        assert.deepEqual(readFileSync(`${halfDir}/parts/${name}.npy`), want, `${dtype} ${name}: JS CLI reading in parts`);
        assertClose(load(`${halfDir}/wasm/${name}.npy`).data, parseNpy(want).data, `${dtype} ${name}: JS CLI on wasm`);
      }
    }
  }
});

// Each entry edits a fresh copy of a valid case (or the arguments) and must be refused by both
// CLIs with the same line.
const GOOD = randomCase(42, OPTION_COMBOS[0]);
const edit = (file, from, to) => (dir) => {
  const p = `${dir}/${file}`;
  const b = readFileSync(p);
  const at = b.indexOf(from, 0, 'latin1');
  assert.ok(at >= 0, `${from} in ${file}`);
  b.write(to, at, 'latin1');
  writeFileSync(p, b);
};
const resize = (file, delta) => (dir) => {
  const b = readFileSync(`${dir}/${file}`);
  writeFileSync(`${dir}/${file}`, delta < 0 ? b.subarray(0, b.length + delta) : Buffer.concat([b, Buffer.alloc(delta, 0x41)]));
};
const replace = (file, tensor) => (dir) => writeFileSync(`${dir}/${file}`, serializeNpy(tensor));
// A file with the given header dict and no data (a zero-size array), bypassing serializeNpy's checks.
const rawEmpty = (file, descr, shapeText) => (dir) => {
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shapeText}, }`;
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  const header = `\x93NUMPY\x01\x00${String.fromCharCode((total - 10) & 0xff, (total - 10) >> 8)}${dict.padEnd(total - 11)}\n`;
  writeFileSync(`${dir}/${file}`, Buffer.from(header, 'latin1'));
};
const S = GOOD.args;
const REFUSALS = [
  // arguments
  ['unknown flag', null, ['--bogus'], "unknown option '--bogus'"],
  ['stray argument', null, ['stray'], "unexpected argument 'stray'"],
  ['bad --value-layout', null, ['--value-layout', 'NCHW'], "--value-layout: 'NCHW', expected BLNC or BNLC"],
  ['bad --sampling-locations-layout', null, ['--sampling-locations-layout=BQHL2P'], '--sampling-locations-layout'],
  ['bad --padding-mode', null, ['--padding-mode', 'reflect'], '--padding-mode'],
  ['--threads 0', null, ['--threads', '0'], "--threads: '0'"],
  ['--threads 2x', null, ['--threads=2x'], "--threads: '2x'"],
  ['--threads +3', null, ['--threads', '+3'], "--threads: '+3'"],
  ['--threads 4097', null, ['--threads', '4097'], "--threads: '4097', expected an integer from 1 to 4096"],
  ['--align-corners=1', null, ['--align-corners=1'], '--align-corners takes no value'],
  ['--in twice', null, ['--in', '/tmp'], '--in given more than once'],
  ['--padding-mode without value', null, ['--padding-mode'], '--padding-mode needs a value'],
  ['bad --out-dtype', null, ['--out-dtype', 'float64'], "--out-dtype: 'float64', expected float32, float16 or bfloat16"],
  // option names counted and cut in characters (UTF-8 code points), never bytes or UTF-16 units
  ['a 64-character option name: its first 40 characters', null, [`--${'é'.repeat(62)}`], `unknown option '--${'é'.repeat(38)}...' (see msda --help)`],
  ['an emoji option name of 22 characters: whole', null, [`--${'😀'.repeat(20)}`], `unknown option '--${'😀'.repeat(20)}' (see msda --help)`],
  ['a long emoji option name: 40 whole characters', null, [`--${'😀'.repeat(70)}=1`], `unknown option '--${'😀'.repeat(38)}...' (see msda --help)`],
  // malformed files, one per class
  ['wrong magic', edit('value.npy', 'NUMPY', 'NUMPX'), [], 'value.npy: not a .npy file'],
  ['unsupported version', edit('attention_weights.npy', 'NUMPY\x01', 'NUMPY\x04'), [], 'unsupported .npy format version 4.0'],
  ['big-endian', edit('sampling_locations.npy', "'<f4'", "'>f4'"), [],
    "sampling_locations.npy: dtype '>f4' (big-endian): sampling_locations.npy must be little-endian float32, float16 or bfloat16: save tensor.astype('<f4')"],
  ['big-endian ints', edit('spatial_shapes.npy', "'<i8'", "'>i8'"), [],
    "spatial_shapes.npy: dtype '>i8' (big-endian): spatial_shapes.npy must be little-endian int64 or int32: save tensor.astype('<i8')"],
  ['Fortran order', edit('value.npy', 'False', 'True '), [], 'Fortran-order (column-major) arrays are not supported, expected fortran_order False: save np.ascontiguousarray(tensor)'],
  ['float64 value (the common NumPy slip)', edit('value.npy', "'<f4'", "'<f8'"), [],
    "value.npy: dtype '<f8': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32)"],
  ['2-byte void weights (np.save of ml_dtypes.bfloat16)', edit('attention_weights.npy', "'<f4'", "'<V2'"), [],
    "attention_weights.npy: dtype '<V2': a 2-byte void, which is how np.save writes ml_dtypes' bfloat16, but its bits cannot be told from any other 2-byte record: save bfloat16 as float32, which is exact: tensor.astype(np.float32)"],
  ['<i2 weights (a bit view of half precision: astype would make integers of the bits)', edit('attention_weights.npy', "'<f4'", "'<i2'"), [],
    "attention_weights.npy: dtype '<i2': 2-byte integers, perhaps the bits of a float16 or bfloat16 tensor (a bit view), which astype would turn into integers: save float16 as tensor.view(np.float16), bfloat16 as float32 (tensor.view(ml_dtypes.bfloat16).astype(np.float32), which is exact)"],
  ['uint64 level starts', edit('level_start_index.npy', "'<i8'", "'<u8'"), [],
    "level_start_index.npy: dtype '<u8': level_start_index.npy must be int64 or int32: save tensor.astype(np.int64)"],
  ['every bad file named in one run', (dir) => {
    edit('value.npy', "'<f4'", "'<f8'")(dir);
    unlinkSync(`${dir}/attention_weights.npy`);
    edit('spatial_shapes.npy', 'False', 'True ')(dir);
  }, [], "value.npy: dtype '<f8': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32); also: "],
  ['every bad file named in one run: the others', (dir) => {
    edit('value.npy', "'<f4'", "'<f8'")(dir);
    unlinkSync(`${dir}/attention_weights.npy`);
    edit('spatial_shapes.npy', 'False', 'True ')(dir);
  }, [], 'spatial_shapes.npy: Fortran-order (column-major) arrays are not supported, expected fortran_order False: save np.ascontiguousarray(tensor); also: '],
  ['header not a dict', edit('attention_weights.npy', "{'descr'", "['descr'"), [], "header: expected '{'"],
  ['unknown key', edit('value.npy', "'shape'", "'shapf'"), [], "unexpected key 'shapf'"],
  ['shape not a tuple', (dir) => {
    const n = S.spatialShapes.length;
    const dict = `{'descr': '<i8', 'fortran_order': False, 'shape': (${n}), }`;
    const header = Buffer.from(`\x93NUMPY\x01\x00${String.fromCharCode(118, 0)}${dict.padEnd(117)}\n`, 'latin1');
    writeFileSync(`${dir}/level_start_index.npy`, Buffer.concat([header, Buffer.alloc(8 * n)]));
  }, [], `'shape' (${S.spatialShapes.length}) is not a tuple, expected (${S.spatialShapes.length},)`],
  ['truncated data', resize('value.npy', -4), [], 'value.npy: truncated'],
  ['truncated header', resize('level_start_index.npy', -60), [], 'truncated: the header'],
  ['trailing garbage', resize('sampling_locations.npy', 8), [], '8 bytes of trailing data'],
  ['overflowing shape', replace('value.npy', { data: new Float32Array(0), shape: [0, 4294967296, 4294967296, 4294967296] }), [],
    'value.npy: shape (0, 4294967296, 4294967296, 4294967296), expected every dimension'],
  // dimensions past 2^53 (zero-size arrays): printed exactly, as native prints them
  ['value with a dimension past 2^53', rawEmpty('value.npy', '<f4', '(0, 9007199254740993, 1, 2)'), [],
    'value.npy: shape (0, 9007199254740993, 1, 2), expected every dimension'],
  ['spatial_shapes with a dimension past 2^53', rawEmpty('spatial_shapes.npy', '<i8', '(18014398509481985, 0)'), [],
    'spatial_shapes.npy: shape (18014398509481985, 0), expected (N_l, 2)'],
  ['attention_weights with dimensions past 2^53', rawEmpty('attention_weights.npy', '<f4', '(1, 9223372036854775807, 0, 2, 3)'), [],
    'attention_weights.npy: shape (1, 9223372036854775807, 0, 2, 3), expected'],
  ['sampling_locations with a dimension past 2^53', rawEmpty('sampling_locations.npy', '<f4', '(0, 9007199254740995)'), [],
    'sampling_locations.npy: shape (0, 9007199254740995), expected'],
  // a message past 320 bytes is printed whole (the native CLI once cut it mid-word)
  ['a 32-dimension shape: the message whole', rawEmpty('value.npy', '<f4', `(${Array(32).fill('1000000000').join(', ')})`), [],
    `value.npy: shape (${Array(32).fill('1000000000').join(', ')}) of '<f4' has more elements than fit in 64-bit byte sizes\n`],
  // missing files, wrong dtypes and shapes
  ['missing file', (dir) => unlinkSync(`${dir}/attention_weights.npy`), [], 'attention_weights.npy: cannot open: No such file or directory'],
  ['value as <i8', replace('value.npy', { data: new BigInt64Array(S.value.data.length), shape: S.value.shape }), [],
    "value.npy: dtype '<i8': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32)"],
  ['spatial_shapes as <f4', replace('spatial_shapes.npy', { data: new Float32Array(2 * S.spatialShapes.length), shape: [S.spatialShapes.length, 2] }), [],
    "spatial_shapes.npy: dtype '<f4': spatial_shapes.npy must be int64 or int32: save tensor.astype(np.int64)"],
  ['locations in the other layout', null, ['--sampling-locations-layout', 'B2QHLP'],
    'per --sampling-locations-layout B2QHLP with N_q and N_p from'],
  ['locations in the other layout: the hint', null, ['--sampling-locations-layout', 'B2QHLP'],
    '; --sampling-locations-layout BQHLP2 makes the shapes fit'],
  ['value in the other layout', null, ['--value-layout', 'BNLC'], 'value.npy: shape'],
  ['value in the other layout: the hint', null, ['--value-layout', 'BNLC'], 'per --value-layout BNLC; --value-layout BLNC makes the shapes fit'],
  ['value not 4-d', replace('value.npy', { data: S.value.data, shape: [S.value.data.length] }), [], 'expected 4 dimensions'],
  ['attention_weights of the wrong shape', replace('attention_weights.npy', { data: new Float32Array(3), shape: [3] }), [],
    'attention_weights.npy: shape (3,)'],
  ['level_start_index of the wrong length', replace('level_start_index.npy', { data: new BigInt64Array(9), shape: [9] }), [],
    'level_start_index.npy: shape (9,)'],
  ['level_start_index not the prefix sums', (dir) => {
    const n = S.spatialShapes.length;
    const bad = BigInt64Array.from({ length: n }, (_, i) => BigInt(7 * i + 1));
    writeFileSync(`${dir}/level_start_index.npy`, serializeNpy({ data: bad, shape: [n] }));
  }, [], 'level_start_index.npy: level_start_index[0] is 1, expected 0'],
  ['a level of height 0', replace('spatial_shapes.npy', { data: new BigInt64Array(2 * S.spatialShapes.length), shape: [S.spatialShapes.length, 2] }), [],
    'spatial_shapes.npy: row 0 is (0, 0)'],
  // paths
  ['missing --in directory', null, ['!', '--in', '/nonexistent/msda', '--out', '@-out'], '--in /nonexistent/msda: No such file or directory'],
  ['--in is a file', null, ['!', '--in', '@/value.npy', '--out', '@-out'], 'not a directory'],
  ['--out under a file', null, ['!', '--in', '@', '--out', '@/value.npy/sub'], 'cannot create directory'],
];

test('every bad argument and input: exit 2, the same one line as the native CLI, no outputs', async () => {
  for (const [what, prepare, extra, words] of REFUSALS) {
    for (const op of ['forward', 'backward']) {
      const dir = `${root}/bad`, out = `${root}/bad-out`;
      rmSync(dir, { recursive: true, force: true });
      rmSync(out, { recursive: true, force: true });
      writeCase(dir, GOOD);
      if (prepare) prepare(dir);
      const resolved = extra.map((a) => a.replace('@', dir));
      // '!': the entry gives --in and --out itself ('@' is the case directory)
      const args = resolved[0] === '!' ? [op, ...resolved.slice(1)] : [op, '--in', dir, '--out', out, ...resolved];
      const n = native(args);
      const j = await js(args);
      assert.equal(n.status, 2, `${what} (${op}): native exit ${n.status}: ${n.err}`);
      assert.equal(j.status, 2, `${what} (${op}): js exit ${j.status}: ${j.err}`);
      assert.match(j.err, /^msda: [^\n]*\n$/, `${what}: one line starting msda:`);
      assert.ok(j.err.includes(words), `${what}: "${j.err.trim()}" lacks "${words}"`);
      assert.equal(j.err, n.err, `${what} (${op}): the two CLIs say the same`);
      assert.ok(!existsSync(out) || readdirSync(out).length === 0, `${what}: outputs left in ${out}: ${existsSync(out) && readdirSync(out)}`);
    }
  }
});

// make-case's default case: value (1, 84, 2, 8), levels 8x8,4x4,2x2, locations (1, 16, 2, 3, 7, 2),
// weights (1, 16, 2, 3, 7), grad_output (1, 16, 16). A file that cannot be read or fails its own
// check leaves its dimensions unknown (named in the expected shape), and the shape checks go on.
const zeros = (shape) => ({ data: new Float32Array(shape.reduce((a, b) => a * b, 1)), shape });
const truncate = (file) => (dir) => writeFileSync(`${dir}/${file}`, readFileSync(`${dir}/${file}`).subarray(0, 200));
const B2QHLP = replace('sampling_locations.npy', zeros([1, 2, 16, 2, 3, 7]));
const LOC_3 = replace('sampling_locations.npy', zeros([1, 16, 2, 3, 7, 3]));
const LOC_B2QHLP_TEXT = 'D/sampling_locations.npy: shape (1, 2, 16, 2, 3, 7), expected %s = (B, N_q, N_h, N_l, N_p, 2) per --sampling-locations-layout BQHLP2 with N_q and N_p from D/attention_weights.npy; --sampling-locations-layout B2QHLP makes the shapes fit';
const LOC_3_TEXT = 'D/sampling_locations.npy: shape (1, 16, 2, 3, 7, 3), expected %s = (B, N_q, N_h, N_l, N_p, 2) per --sampling-locations-layout BQHLP2 with N_q and N_p from D/attention_weights.npy';
const WEIGHTS_TEXT = 'D/attention_weights.npy: shape %s, expected %s = (B, N_q, N_h, N_l, N_p) with N_q, N_p >= 1, B and N_h from D/value.npy, N_l from D/spatial_shapes.npy';
const fill = (text, ...args) => args.reduce((t, a) => t.replace('%s', a), text);
const BAD_PAIRS = [
  ['value truncated, locations in the other layout', [truncate('value.npy'), B2QHLP],
    "D/value.npy: truncated: shape (1, 84, 2, 8) of '<f4' needs 5376 data bytes, the file has 72; also: " + fill(LOC_B2QHLP_TEXT, '(B, 16, N_h, 3, 7, 2)')],
  ['value missing, locations in the other layout', [(dir) => unlinkSync(`${dir}/value.npy`), B2QHLP],
    'D/value.npy: cannot open: No such file or directory; also: ' + fill(LOC_B2QHLP_TEXT, '(B, 16, N_h, 3, 7, 2)')],
  ['value int32, locations 5-d', [replace('value.npy', { data: new Int32Array(1344), shape: [1, 84, 2, 8] }), replace('sampling_locations.npy', zeros([1, 16, 2, 3, 7]))],
    "D/value.npy: dtype '<i4': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32); also: D/sampling_locations.npy: shape (1, 16, 2, 3, 7), expected (B, 16, N_h, 3, 7, 2) = (B, N_q, N_h, N_l, N_p, 2) per --sampling-locations-layout BQHLP2 with N_q and N_p from D/attention_weights.npy"],
  ['value missing, grad_output with the wrong N_q', [(dir) => unlinkSync(`${dir}/value.npy`), replace('grad_output.npy', zeros([1, 17, 7]))],
    'D/value.npy: cannot open: No such file or directory; also: D/grad_output.npy: shape (1, 17, 7), expected (B, 16, N_h*C_h) = (B, N_q, N_h*C_h)'],
  ['value L off by one, locations in the other layout (issue 40)', [replace('value.npy', zeros([1, 85, 2, 8])), B2QHLP],
    'D/value.npy: shape (1, 85, 2, 8) has L = 85, expected 84 (the sum of H*W over D/spatial_shapes.npy) (B, L, N_h, C_h) per --value-layout BLNC; also: ' + fill(LOC_B2QHLP_TEXT, '(1, 16, N_h, 3, 7, 2)')],
  ['value in the other layout too', [replace('value.npy', zeros([1, 2, 84, 8])), B2QHLP],
    'D/value.npy: shape (1, 2, 84, 8) has L = 2, expected 84 (the sum of H*W over D/spatial_shapes.npy) (B, L, N_h, C_h) per --value-layout BLNC; --value-layout BNLC makes the shapes fit; also: ' + fill(LOC_B2QHLP_TEXT, '(1, 16, N_h, 3, 7, 2)')],
  ['value 3-d, locations ending in 3', [replace('value.npy', zeros([84, 2, 8])), LOC_3],
    'D/value.npy: shape (84, 2, 8), expected 4 dimensions (B, L, N_h, C_h) per --value-layout BLNC; also: ' + fill(LOC_3_TEXT, '(B, 16, N_h, 3, 7, 2)')],
  ['value L off by one, locations truncated: the unreadable file first', [replace('value.npy', zeros([1, 85, 2, 8])), truncate('sampling_locations.npy')],
    "D/sampling_locations.npy: truncated: shape (1, 16, 2, 3, 7, 2) of '<f4' needs 5376 data bytes, the file has 72; also: D/value.npy: shape (1, 85, 2, 8) has L = 85, expected 84 (the sum of H*W over D/spatial_shapes.npy) (B, L, N_h, C_h) per --value-layout BLNC"],
  ['value and weights disagree on N_h: not held against grad_output', [replace('value.npy', zeros([1, 84, 3, 8])), LOC_3],
    fill(WEIGHTS_TEXT, '(1, 16, 2, 3, 7)', '(1, N_q, 3, 3, N_p)') + '; also: ' + fill(LOC_3_TEXT, '(1, N_q, N_h, 3, N_p, 2)')],
  ['weights 4-d, locations ending in 3', [replace('attention_weights.npy', zeros([1, 16, 2, 3])), LOC_3],
    fill(WEIGHTS_TEXT, '(1, 16, 2, 3)', '(1, N_q, 2, 3, N_p)') + '; also: ' + fill(LOC_3_TEXT, '(1, N_q, 2, 3, N_p, 2)')],
  ['a level of height 0, locations ending in 3', [replace('spatial_shapes.npy', { data: new BigInt64Array([8n, 8n, 0n, 4n, 2n, 2n]), shape: [3, 2] }), LOC_3],
    'D/spatial_shapes.npy: row 1 is (0, 4), expected H >= 1 and W >= 1; also: ' + fill(LOC_3_TEXT, '(1, 16, 2, N_l, 7, 2)')],
  ['level starts and locations', [replace('level_start_index.npy', { data: new BigInt64Array([0n, 5n, 80n]), shape: [3] }), LOC_3],
    fill(LOC_3_TEXT, '(1, 16, 2, 3, 7, 2)') + '; also: D/level_start_index.npy: level_start_index[1] is 5, expected 64 (sum of H*W over levels 0..0)'],
  ['locations and grad_output', [LOC_3, replace('grad_output.npy', zeros([1, 16, 15]))],
    fill(LOC_3_TEXT, '(1, 16, 2, 3, 7, 2)') + '; also: D/grad_output.npy: shape (1, 16, 15), expected (1, 16, 16) = (B, N_q, N_h*C_h)'],
];

test('every bad file named in one run, shape problems too: the same line from both CLIs', async () => {
  const good = `${root}/pairs-good`;
  assert.equal((await js(['make-case', '--out', good])).status, 0);
  for (const [what, edits, text] of BAD_PAIRS) {
    const dir = `${root}/pairs`, out = `${root}/pairs-out`;
    rmSync(dir, { recursive: true, force: true });
    cpSync(good, dir, { recursive: true });
    for (const e of edits) e(dir);
    const args = ['backward', '--in', dir, '--out', out];
    const n = native(args);
    const j = await js(args);
    assert.equal(j.err, `msda: ${text.replaceAll('D/', `${dir}/`)}\n`, what);
    assert.equal(j.status, 2, what);
    assert.deepEqual([n.status, n.err], [j.status, j.err], `${what}: the native CLI says the same`);
    assert.ok(!existsSync(out), `${what}: no outputs`);
  }
});

test('--threads past what a wasm instance runs (65..4096; >1 on wasm-scalar): the same bytes, nothing on stderr', () => {
  const dir = `${root}/threads`;
  writeCase(dir, GOOD);
  const want = bin(['backward', '--in', dir, '--out', `${dir}/one`]);
  assert.equal(want.status, 0, want.err);
  for (const [threads, backend] of [['65', 'wasm'], ['4096', 'wasm'], ['3', 'wasm-scalar']]) {
    const r = bin(['backward', '--in', dir, '--out', `${dir}/many`, '--threads', threads, '--backend', backend]);
    assert.equal(r.status, 0, r.err);
    assert.equal(r.err, '', `--threads ${threads} --backend ${backend}: no second stderr line`);
    for (const name of OUTPUTS.slice(1)) {
      assert.deepEqual(readFileSync(`${dir}/many/${name}.npy`), readFileSync(`${dir}/one/${name}.npy`), `${threads} ${name}`);
    }
  }
});

test('all or nothing: when one output cannot be put in place, none is written (exit 2 before computing, same line as native)', async () => {
  const dir = `${root}/rename`;
  writeCase(dir, GOOD);
  const results = [];
  for (const run of [native, js]) {
    const out = `${dir}/out`;
    rmSync(out, { recursive: true, force: true });
    mkdirSync(`${out}/grad_sampling_locations.npy`, { recursive: true }); // a directory holds the second name
    writeFileSync(`${out}/grad_sampling_locations.npy/keep`, '');
    const r = await run(['backward', '--in', dir, '--out', out]);
    assert.equal(r.status, 2, r.err);
    assert.match(r.err, /^msda: --out .*grad_sampling_locations\.npy is a directory, so the output cannot replace it\n$/);
    assert.deepEqual(readdirSync(out), ['grad_sampling_locations.npy'], 'nothing else left behind');
    results.push(r.err);
  }
  assert.equal(results[1], results[0]);
});

test('missing --in, --out or command, and unknown commands: exit 2 with one line', async () => {
  for (const [args, words] of [
    [['forward', '--out', `${root}/x`], 'missing --in'],
    [['backward', '--in', root], 'missing --out'],
    [[], 'missing command'],
    [['sideways'], "unknown command 'sideways'"],
    [['crosscheck', '--in', root, '--out', root], '--out is not used by crosscheck'],
    [['forward', '--in', root, '--out', root, '--expect', root], '--expect is only for msda crosscheck'],
    [['forward', '--in', root, '--out', root, '--backend', 'gpu'], "--backend: 'gpu', expected wasm, wasm-scalar or native"],
  ]) {
    const r = await js(args);
    assert.equal(r.status, 2, `${args.join(' ')}: exit ${r.status}`);
    assert.match(r.err, /^msda: [^\n]*\n$/);
    assert.ok(r.err.includes(words), `"${r.err.trim()}" lacks "${words}"`);
  }
  const r = bin(['forward', '--in', `${root}/none`, '--out', `${root}/none-out`]);
  assert.equal(r.status, 2, 'the bin exits 2 too');
  assert.match(r.err, /^msda: --in .*none: No such file or directory\n$/);
  assert.ok(!existsSync(`${root}/none-out`));
});

test('crosscheck: exit 0 when wasm and native agree, exit 1 on a tampered expectation, exit 2 on unusable ones', async () => {
  const dir = `${root}/cross`;
  const c = randomCase(7, OPTION_COMBOS[13]);
  writeCase(dir, c);
  const flags = flagsOf(OPTION_COMBOS[13]);
  const agree = bin(['crosscheck', '--in', dir, ...flags]);
  assert.equal(agree.status, 0, agree.err + agree.out);
  for (const name of OUTPUTS) assert.match(agree.out, new RegExp(`${name} +max abs diff \\S+ +max rel diff \\S+ +ok`));
  assert.match(agree.out, /all 4 outputs agree/);
  assert.match((await js(['crosscheck', '--in', dir, '--backend', 'wasm-scalar', ...flags])).out, /: wasm-scalar against native/);

  // "your kernel's" outputs: ours from the native CLI, then one element pushed past tolerance
  const expect = `${dir}/expect`;
  for (const op of ['forward', 'backward']) assert.equal(native([op, '--in', dir, '--out', expect, ...flags]).status, 0);
  const same = bin(['crosscheck', '--in', dir, '--expect', expect, ...flags]);
  assert.equal(same.status, 0, same.err + same.out);
  const tamper = (name, index, delta) => {
    const t = load(`${expect}/${name}.npy`);
    t.data[index] += delta;
    writeFileSync(`${expect}/${name}.npy`, serializeNpy(t));
    return t.data.length;
  };
  const n = tamper('grad_sampling_locations', 3, 1e-3);
  const tampered = bin(['crosscheck', '--in', dir, '--expect', expect, ...flags]);
  assert.equal(tampered.status, 1, tampered.out);
  // element 3 of B2QHLP (B, 2, N_q, N_h, N_l, N_p): its coordinates, not a flat index
  const [, , Q, H, NL, P] = c.args.samplingLocations.shape;
  const co = [3 % P, Math.floor(3 / P) % NL, Math.floor(3 / (P * NL)) % H, Math.floor(3 / (P * NL * H)) % Q];
  assert.match(tampered.out, new RegExp(`grad_sampling_locations +DISAGREE +1 of ${n} elements beyond their bound`));
  assert.match(tampered.out, new RegExp(`grad_sampling_locations\\[b=0, xy=0, q=${co[3]}, h=${co[2]}, l=${co[1]}, p=${co[0]}\\]: yours \\S+, ours \\S+, \\|diff\\| 1\\.00e-3 > bound`));
  assert.match(tampered.out, /grad_value +ok /);
  assert.equal(tampered.err, `msda: crosscheck: grad_sampling_locations (1 of ${n} elements) beyond tolerance\n`);

  // within tolerance passes: restore, then nudge by far less than the bound
  assert.equal(native(['backward', '--in', dir, '--out', expect, ...flags]).status, 0);
  tamper('output', 0, 1e-9);
  const nudged = await js(['crosscheck', '--in', dir, '--expect', expect, ...flags]);
  assert.equal(nudged.status, 0, nudged.out);

  // only the files present are compared; a wrong shape or an empty directory is bad input
  unlinkSync(`${expect}/grad_value.npy`);
  const partial = await js(['crosscheck', '--in', dir, '--expect', expect, ...flags]);
  assert.equal(partial.status, 0, partial.err);
  assert.doesNotMatch(partial.out, /grad_value /);
  writeFileSync(`${expect}/output.npy`, serializeNpy({ data: new Float32Array(2), shape: [2] }));
  const wrong = await js(['crosscheck', '--in', dir, '--expect', expect, ...flags]);
  assert.equal(wrong.status, 2);
  assert.match(wrong.err, /^msda: .*expect\/output\.npy: shape \(2,\), expected \(\d+, \d+, \d+\) \(the shape of output\)\n$/);
  const empty = `${dir}/empty`;
  mkdirSync(empty);
  const none = await js(['crosscheck', '--in', dir, '--expect', empty]);
  assert.equal(none.status, 2);
  assert.match(none.err, /none of output\.npy/);

  // no grad_output.npy: forward only
  const fwdOnly = `${root}/cross-fwd`;
  cpSync(dir, fwdOnly, { recursive: true });
  unlinkSync(`${fwdOnly}/grad_output.npy`);
  const f = await js(['crosscheck', '--in', fwdOnly, ...flags]);
  assert.equal(f.status, 0, f.err);
  assert.match(f.out, /backward skipped/);
  assert.match(f.out, /\ncrosscheck: output agrees\n$/);
});
