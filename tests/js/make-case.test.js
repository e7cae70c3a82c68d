// msda make-case (the JS CLI's): seeded cases whose samples reach the edges, in every layout and
// dtype, as a directory or an .npz; and what crosscheck --expect's report says about them (each
// worst location/weight element's sample, the elements within their bound only through P, the
// hint when every output disagrees).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { main } from '../../bindings/cli.js';
import { makeCase, parseMakeCaseArgs } from '../../bindings/cli/make-case.js';
import { boundOf, referenceWithBounds } from '../../bindings/cli/bounds.js';
import { parseNpy, serializeNpy } from '../../bindings/npy.js';
import { pixel } from '../../bindings/core/geometry.js';

let root;
before(() => { root = mkdtempSync(`${tmpdir()}/msda-make-case-`); });
after(() => rmSync(root, { recursive: true, force: true }));

async function js(args) {
  let out = '', err = '';
  const status = await main(args, { out: (s) => { out += s; }, err: (s) => { err += s; } });
  return { status, out, err };
}
const load = (dir, name) => parseNpy(readFileSync(`${dir}/${name}.npy`));

test('the same seed gives the same bytes, another seed others; layouts and dtypes as asked', async () => {
  const a = `${root}/a`, b = `${root}/b`, c = `${root}/c`;
  assert.equal((await js(['make-case', '--out', a, '--seed', '7'])).status, 0);
  assert.equal((await js(['make-case', '--out', b, '--seed', '7'])).status, 0);
  assert.equal((await js(['make-case', '--out', c, '--seed', '8'])).status, 0);
  const names = readdirSync(a).sort();
  assert.deepEqual(names, ['attention_weights.npy', 'grad_output.npy', 'level_start_index.npy', 'sampling_locations.npy', 'spatial_shapes.npy', 'value.npy']);
  for (const n of names) assert.deepEqual(readFileSync(`${b}/${n}`), readFileSync(`${a}/${n}`), n);
  assert.notDeepEqual(readFileSync(`${c}/value.npy`), readFileSync(`${a}/value.npy`));
  const h = `${root}/half`;
  const r = await js(['make-case', '--out', h, '--dtype', 'float16', '--value-layout', 'BNLC', '--sampling-locations-layout', 'B2QHLP', '--queries', '3']);
  assert.equal(r.status, 0, r.err);
  assert.equal(load(h, 'value').dtype, '<f2');
  assert.deepEqual(load(h, 'value').shape, [1, 2, 84, 8]);
  assert.deepEqual(load(h, 'sampling_locations').shape, [1, 2, 3, 2, 3, 7]);
  const bf = `${root}/bf`;
  assert.equal((await js(['make-case', '--out', bf, '--dtype', 'bfloat16'])).status, 0);
  const v = load(bf, 'value');
  assert.equal(v.dtype, '<f4');
  assert.ok(v.data.every((x) => (new Uint32Array(Float32Array.of(x).buffer)[0] & 0xffff) === 0), 'bfloat16 values');
  // an .npz: the same case, which the JS CLI reads in place of the directory
  assert.equal((await js(['make-case', '--out', `${root}/a.npz`, '--seed', '7'])).status, 0);
  for (const [i, dir] of [`${root}/a.npz`, a].entries()) {
    const f = await js(['forward', '--in', dir, '--out', `${root}/f${i}`]);
    assert.equal(f.status, 0, f.err);
  }
  assert.deepEqual(readFileSync(`${root}/f0/output.npy`), readFileSync(`${root}/f1/output.npy`));
});

test('the samples cover the edges: outside, exactly 0 and 1, pixel centres, half a pixel in the padding, crowded', () => {
  for (const alignCorners of [false, true]) {
    const o = parseMakeCaseArgs(['--out', 'x', ...(alignCorners ? ['--align-corners'] : [])]);
    const t = makeCase(o);
    const loc = t.sampling_locations.data, [B, Q, H, NL, P] = t.attention_weights.shape;
    const seen = new Set(), spots = new Map();
    for (let b = 0; b < B; b++) for (let q = 0; q < Q; q++) for (let h = 0; h < H; h++) for (let l = 0; l < NL; l++) for (let p = 0; p < P; p++) {
      const i = ((((b * Q + q) * H + h) * NL + l) * P + p) * 2;
      const [Hl, Wl] = o.levels[l];
      for (const [c, n] of [[loc[i], Wl], [loc[i + 1], Hl]]) {
        const pos = pixel(c, n, alignCorners).pos;
        if (c === 0) seen.add('0');
        if (c === 1) seen.add('1');
        if (pos < -1 || pos >= n) seen.add('outside');
        else if (pos < 0 || pos > n - 1) seen.add('half in the padding');
        else if (Number.isInteger(pos) && pos > 0 && pos < n - 1) seen.add('pixel centre');
      }
      const key = `${l}:${loc[i]}:${loc[i + 1]}`;
      spots.set(key, (spots.get(key) ?? 0) + 1);
    }
    assert.deepEqual([...seen].sort(), ['0', '1', 'half in the padding', 'outside', 'pixel centre'], `align ${alignCorners}`);
    assert.ok(Math.max(...spots.values()) >= Q, 'a spot every query samples');
  }
});

test('make-case refusals: exit 2 naming the flag', async () => {
  for (const [args, words] of [
    [[], 'missing --out DIR'], [['--out', 'x', '--seed', '-1'], "--seed: '-1'"], [['--out', 'x', '--levels', '8x'], "--levels: '8x'"],
    [['--out', 'x', '--heads', '0'], "--heads: '0', expected an integer from 1 to 4096"], [['--out', 'x', '--bogus'], "unknown option '--bogus' for msda make-case"],
    [['--out', 'x', '--dtype', 'float64'], "--dtype: 'float64'"], [['--out', 'x', '--out', 'y'], '--out given more than once'],
  ]) {
    const r = await js(['make-case', ...args]);
    assert.equal(r.status, 2, `${args}: ${r.err}`);
    assert.ok(r.err.startsWith('msda: ') && r.err.includes(words) && r.err.endsWith('\n') && r.err.split('\n').length === 2, `${args}: ${r.err}`);
  }
  assert.match((await js(['make-case', '--help'])).out, /^usage: msda make-case --out DIR/);
});

test("crosscheck's report on a made case: each worst location/weight element's sample, the hint when every output disagrees", async () => {
  const dir = `${root}/report`;
  assert.equal((await js(['make-case', '--out', dir, '--align-corners'])).status, 0);
  // a kernel that forgot align_corners: every output disagrees, and the hint says what to check
  for (const op of ['forward', 'backward']) assert.equal((await js([op, '--in', dir, '--out', `${dir}/mine`, '--backend', 'native'])).status, 0);
  const r = await js(['crosscheck', '--in', dir, '--expect', `${dir}/mine`, '--align-corners', '--top', '2']);
  assert.equal(r.status, 1, r.err);
  assert.match(r.out, /\n {2}hint: every output disagrees, as when an option differs from your kernel's: check --align-corners, --padding-mode/);
  const samples = r.out.split('\n').filter((l) => l.startsWith('      its sample: '));
  assert.equal(samples.length, 4, r.out); // two worst elements each of the location and weight gradients
  for (const l of samples) assert.match(l, /^ {6}its sample: x -?[\d.e-]+, y -?[\d.e-]+ pixels on level \d \(H \d+, W \d+\): (outside|clamped|on an edge|on a pixel|inside|NaN)( in [xy])?$/);
  const j = JSON.parse((await js(['crosscheck', '--in', dir, '--expect', `${dir}/mine`, '--align-corners', '--json'])).out);
  assert.match(j.hint, /--align-corners/);
  const w = j.outputs.grad_sampling_locations.worst[0];
  assert.deepEqual(Object.keys(w.sample), ['level', 'x', 'y', 'height', 'width', 'where']);
  assert.equal(w.sample.level, w.coordinates.l);
  assert.equal(j.outputs.output.worst[0].sample, undefined);
  // agreeing outputs: no hint
  const ok = await js(['crosscheck', '--in', dir, '--expect', `${dir}/mine`]);
  assert.equal(ok.status, 0, ok.out);
  assert.doesNotMatch(ok.out, /hint:|its sample:/);
});

test('elements within their bound only through P are counted', async () => {
  const dir = `${root}/p-case`;
  assert.equal((await js(['make-case', '--out', dir])).status, 0);
  const t = makeCase(parseMakeCaseArgs(['--out', dir]));
  const levels = t.spatial_shapes.shape[0];
  const args = {
    value: t.value, samplingLocations: t.sampling_locations, attentionWeights: t.attention_weights, gradOutput: t.grad_output,
    spatialShapes: Array.from({ length: levels }, (_, l) => [Number(t.spatial_shapes.data[2 * l]), Number(t.spatial_shapes.data[2 * l + 1])]),
    valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2', alignCorners: false, paddingMode: 'border',
  };
  const r = referenceWithBounds(args, { forward: false, backward: true }).grad_sampling_locations;
  // yours: ours moved by the bound less half of P wherever P counts: within the bound through P alone
  const yours = Float32Array.from(r.ref);
  for (let i = 0; i < yours.length; i++) if (r.P[i] > 0) yours[i] = r.ref[i] + (boundOf(r, i, { dtype: 'float32' }) - r.P[i] / 2);
  let want = 0;
  for (let i = 0; i < yours.length; i++) {
    const d = Math.abs(yours[i] - r.ref[i]), b = boundOf(r, i, { dtype: 'float32' });
    if (yours[i] !== r.ref[i] && d <= b && d > b - r.P[i]) want++;
  }
  assert.ok(want > 0);
  const mine = `${root}/mine-p`;
  mkdirSync(mine);
  writeFileSync(`${mine}/grad_sampling_locations.npy`, serializeNpy({ data: yours, shape: t.sampling_locations.shape }));
  const c = await js(['crosscheck', '--in', dir, '--expect', mine, '--padding-mode', 'border']);
  assert.equal(c.status, 0, c.out);
  assert.ok(c.out.includes(`\n    ${want} differing elements are within their bound only through P `), c.out);
});
