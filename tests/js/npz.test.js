// .npz archives in place of a case directory (--in) and of --expect's directory, in the JS CLI
// (the native CLI reads directories: it refuses an .npz in one line naming npx msda):
//  - tests/fixtures/npz: written by Python's zipfile the way np.savez (stored) and
//    np.savez_compressed (deflated) write them (make_npz.py), next to the same arrays as a
//    directory: the same output bytes as the native CLI gives for the directory;
//  - archives made here with zlib at every level and strategy (stored, fixed and dynamic
//    blocks), with and without zip64 records: the bytes of the directory;
//  - damaged archives: each refused with one line naming what is wrong.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { constants, deflateRawSync } from 'node:zlib';
import { main } from '../../bindings/cli.js';
import { crc32 } from '../../bindings/cli/npz.js';
import { serializeNpy } from '../../bindings/npy.js';
import { OPTION_COMBOS, randomCase } from './helpers.js';

const NATIVE_CLI = fileURLToPath(new URL('../../build/native/msda', import.meta.url));
const CLI = fileURLToPath(new URL('../../bindings/cli.js', import.meta.url));
const FIXTURES = fileURLToPath(new URL('../fixtures/npz', import.meta.url));
let root;
before(() => { root = mkdtempSync(`${tmpdir()}/msda-npz-`); });
after(() => rmSync(root, { recursive: true, force: true }));

// The JS CLI on args.
async function js(args) {
  let out = '', err = '';
  const status = await main(args, { out: (s) => { out += s; }, err: (s) => { err += s; } });
  return { status, out, err };
}

/** A zip of [name, bytes] members as np.savez writes it (zip64 extra in each local header). */
function zip(entries, { deflate = null, zip64Local = true, zip64End = false, mutate = null } = {}) {
  const parts = [], central = [];
  let offset = 0;
  for (const [name, data] of entries) {
    const body = deflate ? deflateRawSync(data, deflate) : data;
    const crc = crc32(data), n = Buffer.from(name, 'latin1');
    const extra = zip64Local ? Buffer.alloc(20) : Buffer.alloc(0);
    if (zip64Local) {
      extra.writeUInt16LE(1, 0);
      extra.writeUInt16LE(16, 2);
      extra.writeBigUInt64LE(BigInt(data.length), 4);
      extra.writeBigUInt64LE(BigInt(body.length), 12);
    }
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(45, 4);
    local.writeUInt16LE(deflate ? 8 : 0, 8);
    local.writeUInt16LE(0x21, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(zip64Local ? 0xffffffff : body.length, 18);
    local.writeUInt32LE(zip64Local ? 0xffffffff : data.length, 22);
    local.writeUInt16LE(n.length, 26);
    local.writeUInt16LE(extra.length, 28);
    const c = Buffer.alloc(46);
    c.writeUInt32LE(0x02014b50, 0);
    c.writeUInt16LE(45, 4);
    c.writeUInt16LE(45, 6);
    c.writeUInt16LE(deflate ? 8 : 0, 10);
    c.writeUInt16LE(0x21, 14);
    c.writeUInt32LE(crc, 16);
    c.writeUInt32LE(body.length, 20);
    c.writeUInt32LE(data.length, 24);
    c.writeUInt16LE(n.length, 28);
    c.writeUInt32LE(offset, 42);
    central.push(Buffer.concat([c, n]));
    parts.push(local, n, extra, body);
    offset += 30 + n.length + extra.length + body.length;
  }
  const cd = Buffer.concat(central);
  const tail = [];
  if (zip64End) {
    const z = Buffer.alloc(56);
    z.writeUInt32LE(0x06064b50, 0);
    z.writeBigUInt64LE(44n, 4);
    z.writeBigUInt64LE(BigInt(entries.length), 24);
    z.writeBigUInt64LE(BigInt(entries.length), 32);
    z.writeBigUInt64LE(BigInt(cd.length), 40);
    z.writeBigUInt64LE(BigInt(offset), 48);
    const loc = Buffer.alloc(20);
    loc.writeUInt32LE(0x07064b50, 0);
    loc.writeBigUInt64LE(BigInt(offset + cd.length), 8);
    loc.writeUInt32LE(1, 16);
    tail.push(z, loc);
  }
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(zip64End ? 0xffff : entries.length, 8);
  end.writeUInt16LE(zip64End ? 0xffff : entries.length, 10);
  end.writeUInt32LE(zip64End ? 0xffffffff : cd.length, 12);
  end.writeUInt32LE(zip64End ? 0xffffffff : offset, 16);
  const out = Buffer.concat([...parts, cd, ...tail, end]);
  if (mutate) mutate(out, { cdOffset: offset });
  return out;
}

/** A random case as [name, .npy bytes] members (without level_start_index.npy). */
function caseMembers(c) {
  const shapes = c.args.spatialShapes;
  return [
    ['value.npy', serializeNpy(c.args.value)],
    ['spatial_shapes.npy', serializeNpy({ data: BigInt64Array.from(shapes.flat().map(BigInt)), shape: [shapes.length, 2] })],
    ['sampling_locations.npy', serializeNpy(c.args.samplingLocations)],
    ['attention_weights.npy', serializeNpy(c.args.attentionWeights)],
    ['grad_output.npy', serializeNpy(c.gradOutput)],
  ].map(([n, b]) => [n, Buffer.from(b)]);
}

const flagsOf = (o) => ['--value-layout', o.valueLayout, '--sampling-locations-layout', o.samplingLocationsLayout,
  '--padding-mode', o.paddingMode, ...(o.alignCorners ? ['--align-corners'] : [])];
const OUTPUTS = ['grad_value', 'grad_sampling_locations', 'grad_attention_weights'];

test("np.savez and np.savez_compressed archives (Python's zipfile): the directory's output bytes", async () => {
  const want = `${root}/fixture-dir`;
  assert.equal(spawnSync(NATIVE_CLI, ['backward', '--in', `${FIXTURES}/case`, '--out', want]).status, 0);
  assert.equal(spawnSync(NATIVE_CLI, ['forward', '--in', `${FIXTURES}/case`, '--out', want]).status, 0);
  for (const archive of ['case.npz', 'case-compressed.npz']) {
    for (const op of ['forward', 'backward']) {
      const args = [op, '--in', `${FIXTURES}/${archive}`, '--out', `${root}/j-${archive}`];
      const status = await main([...args, '--backend', 'native'], { out: () => {}, err: (s) => { throw new Error(s); } });
      assert.equal(status, 0, `${op} ${archive}`);
    }
    for (const name of ['output', ...OUTPUTS]) {
      assert.deepEqual(readFileSync(`${root}/j-${archive}/${name}.npy`), readFileSync(`${want}/${name}.npy`), `${archive} ${name}`);
    }
  }
});

test('the native CLI reads directories only: an .npz is refused in one line naming npx msda', () => {
  mkdirSync(`${root}/expect-dir`, { recursive: true });
  for (const [args, flag, file] of [
    [['forward', '--in', `${FIXTURES}/case.npz`, '--out', `${root}/refused-out`], '--in', `${FIXTURES}/case.npz`],
    [['crosscheck', '--in', `${FIXTURES}/case`, '--expect', `${FIXTURES}/case-compressed.npz`], '--expect', `${FIXTURES}/case-compressed.npz`],
  ]) {
    const n = spawnSync(NATIVE_CLI, args, { encoding: 'utf8' });
    assert.equal(n.status, 2, n.stderr);
    assert.equal(n.stdout, '');
    assert.equal(n.stderr, `msda: ${flag} ${file}: an .npz archive, which the native CLI does not read (it reads case `
      + 'directories of .npy files): give it to the JS CLI, npx msda (node bindings/cli.js in a clone), or unpack it into a directory\n');
  }
  assert.throws(() => readdirSync(`${root}/refused-out`), { code: 'ENOENT' });
});

test('archives deflated at every zlib level and strategy, and with zip64 end records: the bytes of the directory', async () => {
  const options = OPTION_COMBOS[3];
  const c = randomCase(4321, options);
  // a value with structure, so that zlib uses long matches and dynamic blocks
  const [B, H, C] = [1, 4, 8];
  c.args.spatialShapes = [[16, 16], [8, 8]];
  const L = 320;
  c.args.value = { data: Float32Array.from({ length: B * H * L * C }, (_, i) => (i < 5000 ? Math.round(Math.sin(i / 7) * 64) / 64 : (Math.imul(i, 2654435761) >>> 29) / 8)), shape: [B, L, H, C] };
  const Q = 9, P = 2, NL = 2;
  c.args.samplingLocations = { data: Float32Array.from({ length: B * 2 * Q * H * NL * P }, (_, i) => ((i * 37) % 101) / 100), shape: [B, Q, H, NL, P, 2] };
  c.args.attentionWeights = { data: Float32Array.from({ length: B * Q * H * NL * P }, (_, i) => ((i * 13) % 17) / 17), shape: [B, Q, H, NL, P] };
  c.gradOutput = { data: Float32Array.from({ length: B * Q * H * C }, (_, i) => ((i * 7) % 23) / 23 - 0.5), shape: [B, Q, H * C] };
  const members = caseMembers(c);
  const dir = `${root}/deflate-dir`;
  mkdirSync(dir, { recursive: true });
  for (const [n, b] of members) writeFileSync(`${dir}/${n}`, b);
  const flags = flagsOf(options);
  const ref = spawnSync(NATIVE_CLI, ['backward', '--in', dir, '--out', `${dir}/out`, ...flags], { encoding: 'utf8' });
  assert.equal(ref.status, 0, ref.stderr);
  const variants = [
    ['stored', {}], ['stored, no zip64', { zip64Local: false }], ['stored, zip64 end', { zip64End: true }],
    ...[0, 1, 6, 9].map((level) => [`level ${level}`, { deflate: { level } }]),
    ['fixed', { deflate: { strategy: constants.Z_FIXED } }],
    ['huffman only', { deflate: { strategy: constants.Z_HUFFMAN_ONLY } }],
    ['rle', { deflate: { strategy: constants.Z_RLE } }],
    ['filtered, zip64 end', { deflate: { strategy: constants.Z_FILTERED, level: 9 }, zip64End: true }],
  ];
  for (const [what, z] of variants) {
    const file = `${root}/v-${what.replace(/[^a-z0-9]+/g, '_')}.npz`;
    writeFileSync(file, zip(members, z));
    const out = `${file}-out`;
    const r = await js(['backward', '--in', file, '--out', out, ...flags]);
    assert.equal(r.status, 0, `${what}: ${r.err}`);
    for (const name of OUTPUTS) assert.deepEqual(readFileSync(`${out}/${name}.npy`), readFileSync(`${dir}/out/${name}.npy`), `${what} ${name}`);
    rmSync(out, { recursive: true });
  }
  assert.ok(readdirSync(root).length > 0);
});

test('--expect takes an .npz of your outputs too', async () => {
  const dir = `${root}/expect-case`;
  const out = `${root}/expect-out`;
  assert.equal(spawnSync(NATIVE_CLI, ['backward', '--in', `${FIXTURES}/case`, '--out', out]).status, 0);
  const names = readdirSync(out).filter((n) => n.endsWith('.npy'));
  writeFileSync(`${root}/mine.npz`, zip(names.map((n) => [n, readFileSync(`${out}/${n}`)]), { deflate: { level: 6 } }));
  mkdirSync(dir, { recursive: true });
  const r = await js(['crosscheck', '--in', `${FIXTURES}/case.npz`, '--expect', `${root}/mine.npz`]);
  assert.equal(r.status, 0, r.out + r.err);
  assert.match(r.out, /yours = the files in .*mine\.npz, ours/);
  assert.match(r.out, /crosscheck: all 3 outputs agree/);
  // a member under no output's name would go unchecked: refused, named, with the names it could be
  const typo = names.map((n) => [n === 'grad_value.npy' ? 'grad_values.npy' : n, readFileSync(`${out}/${n}`)]);
  writeFileSync(`${root}/typo.npz`, zip([...typo, ['notes.txt', Buffer.from('x')]]));
  const t = await js(['crosscheck', '--in', `${FIXTURES}/case.npz`, '--expect', `${root}/typo.npz`]);
  assert.equal(t.status, 2, t.out);
  assert.equal(t.err, `msda: --expect ${root}/typo.npz: grad_values.npy and 1 more are not output names `
    + '(output.npy, grad_value.npy, grad_sampling_locations.npy, grad_attention_weights.npy)\n');
  assert.equal(t.out, '');
});

test('damaged or unusual archives: each refused with one line naming what is wrong', async () => {
  const members = caseMembers(randomCase(5, OPTION_COMBOS[0]));
  const good = zip(members);
  const refusals = [
    ['not a zip', Buffer.from('hello, this is not a zip file'), 'not a directory (nor an .npz archive)'],
    ['cut before its end record', good.subarray(0, good.length - 30), 'not a valid .npz: no zip end-of-central-directory record'],
    ['a CRC-32 that does not match', zip(members, { mutate: (b) => { b[30 + 9 + 20 + 100] ^= 1; } }),
      ':value.npy: CRC-32 mismatch: the archive is damaged'],
    ['bzip2 (method 12)', zip(members, { mutate: (b, { cdOffset }) => { b.writeUInt16LE(12, cdOffset + 10); } }),
      'value.npy: zip compression method 12, expected stored (np.savez) or deflated (np.savez_compressed)'],
    ['encrypted', zip(members, { mutate: (b, { cdOffset }) => { b.writeUInt16LE(1, cdOffset + 8); } }), 'value.npy: encrypted'],
    ['value.npy missing', zip(members.slice(1)), ':value.npy: not in the archive'],
    ['a member twice', zip([members[0], ...members]), 'not a valid .npz: value.npy appears twice'],
    ['a member of the wrong dtype', zip([['value.npy', Buffer.from(serializeNpy({ data: new Int32Array(4), shape: [4] }))], ...members.slice(1)]),
      ":value.npy: dtype '<i4': value.npy must be float32, float16 or bfloat16: save tensor.astype(np.float32)"],
    ['damaged deflate data', zip(members, { deflate: { level: 6 }, mutate: (b) => { b.fill(0xff, 30 + 9 + 20, 30 + 9 + 20 + 40); } }),
      ':value.npy: the deflated data is damaged'],
    ['a local header out of place', zip(members, { mutate: (b, { cdOffset }) => { b.writeUInt32LE(7, cdOffset + 42); } }),
      'not a valid .npz: the local header of value.npy is damaged'],
    ['a name with control and non-ASCII bytes, shown escaped', zip([['bad\n\x90\\name.npy', members[0][1]], ...members],
      { mutate: (b, { cdOffset }) => { b.writeUInt32LE(7, cdOffset + 42); } }),
      'not a valid .npz: the local header of bad\\x0a\\x90\\x5cname.npy is damaged'],
    ['a name with a NUL byte', zip([['value.npy\0x', members[0][1]], ...members.slice(1)]),
      'not a valid .npz: the name of central directory entry 0 holds a NUL byte'],
    ['a central directory past the end', zip(members, { mutate: (b) => { b.writeUInt32LE(0x7fffffff, b.length - 6); } }),
      'not a valid .npz: the central directory lies outside the file'],
  ];
  for (const [what, bytes, words] of refusals) {
    const file = `${root}/bad.npz`;
    writeFileSync(file, bytes);
    const r = await js(['forward', '--in', file, '--out', `${root}/bad-out`]);
    assert.equal(r.status, 2, `${what}: ${r.err}`);
    assert.match(r.err, /^msda: [^\n]*\n$/, `${what}: one line`);
    assert.ok(r.err.includes(words), `${what}: "${r.err.trim()}" lacks "${words}"`);
  }
});

test('claims the file cannot back are refused before anything is allocated: 2^60 bytes, 400 GB from 1 KB, 4 GiB', async () => {
  const members = caseMembers(randomCase(6, OPTION_COMBOS[0]));
  const file = `${root}/claim.npz`;
  const cases = [
    // stored, declared 2^60 + 1 through zip64 (past 2^53: printed exactly)
    ['stored 2^60', (b, { cdOffset }) => { b.writeUInt32LE(0xffffffff, cdOffset + 24); }, [1n << 60n | 1n],
      'not a valid .npz: value.npy is stored with'],
  ];
  for (const [what, mutate, sizes, words] of cases) {
    const extra = Buffer.alloc(4 + 8 * sizes.length);
    extra.writeUInt16LE(1, 0);
    extra.writeUInt16LE(8 * sizes.length, 2);
    sizes.forEach((s, i) => extra.writeBigUInt64LE(s, 4 + 8 * i));
    writeFileSync(file, centralExtra(zip(members, { mutate }), 0, extra));
    const r = await js(['forward', '--in', file, '--out', `${root}/claim-out`]);
    assert.equal(r.status, 2, `${what}: ${r.err}`);
    assert.ok(r.err.includes(words) && r.err.includes('1152921504606846977'), `${what}: ${r.err}`);
  }
  // deflated, 400 GB declared for a 1 KB archive (zip64), and 5 GiB for a 5 MiB stream
  for (const [usize, words] of [[400n * 10n ** 9n, 'value.npy: holds 400000000000 bytes, more than the 4294967295 a member may'],
    [3n << 30n, 'not a valid .npz: value.npy says it inflates to 3221225472 bytes, more than its']]) {
    const small = [['value.npy', Buffer.alloc(600, 1)], ...members.slice(1)];
    const extra = Buffer.alloc(12);
    extra.writeUInt16LE(1, 0);
    extra.writeUInt16LE(8, 2);
    extra.writeBigUInt64LE(usize, 4);
    writeFileSync(file, centralExtra(zip(small, { deflate: { level: 9 }, zip64Local: false,
      mutate: (b, { cdOffset }) => { b.writeUInt32LE(0xffffffff, cdOffset + 24); } }), 0, extra));
    const r = await js(['forward', '--in', file, '--out', `${root}/claim-out`]);
    assert.equal(r.status, 2, r.err);
    assert.ok(r.err.includes(words), r.err);
  }
});

/** b with extra appended to central directory entry k's extra area (offsets after it moved). */
function centralExtra(b, k, extra) {
  const eocd = b.length - 22;
  const cdOffset = b.readUInt32LE(eocd + 16), cdSize = b.readUInt32LE(eocd + 12);
  let p = cdOffset;
  for (let j = 0; j < k; j++) p += 46 + b.readUInt16LE(p + 28) + b.readUInt16LE(p + 30) + b.readUInt16LE(p + 32);
  const at = p + 46 + b.readUInt16LE(p + 28) + b.readUInt16LE(p + 30);
  const out = Buffer.concat([b.subarray(0, at), extra, b.subarray(at)]);
  out.writeUInt16LE(b.readUInt16LE(p + 30) + extra.length, p + 30);
  out.writeUInt32LE(cdSize + extra.length, out.length - 22 + 12);
  return out;
}

test('an extra field running past its entry: refused, naming it (no read past the archive)', async () => {
  const members = caseMembers(randomCase(7, OPTION_COMBOS[0]));
  // a zip64 field claiming 200 bytes where 12 remain, at the end of the central directory's last entry
  const extra = Buffer.alloc(12);
  extra.writeUInt16LE(1, 0);
  extra.writeUInt16LE(200, 2);
  const file = `${root}/extra.npz`;
  const b = centralExtra(zip(members, { mutate: (x, { cdOffset }) => { x.writeUInt32LE(0xffffffff, cdOffset + 24); } }), 0, extra);
  writeFileSync(file, b);
  const r = await js(['forward', '--in', file, '--out', `${root}/extra-out`]);
  assert.equal(r.status, 2, r.err);
  assert.equal(r.err, `msda: --in ${file}: not a valid .npz: an extra field of value.npy runs past the end of its entry\n`);
});

test('a deflate stream longer than its declared size: one verdict, and the CLI stops at the declared size', async () => {
  const members = caseMembers(randomCase(8, OPTION_COMBOS[0]));
  // 512 MiB of zeros in about 500 KB: 1 MiB chunks ending in sync flushes, then an empty final block
  const chunk = deflateRawSync(Buffer.alloc(1 << 20), { finishFlush: constants.Z_SYNC_FLUSH });
  const bomb = Buffer.concat([...Array(512).fill(chunk), Buffer.from([3, 0])]);
  const file = `${root}/bomb.npz`;
  const declared = members[0][1].length;
  // value.npy's deflated bytes replaced by the bomb (the directory keeps value.npy's size and CRC)
  const good = zip(members, { deflate: { level: 1 } });
  const cdOffset = good.readUInt32LE(good.length - 22 + 16);
  const csize = good.readUInt32LE(cdOffset + 20), start = 30 + 9 + 20;
  const out = Buffer.concat([good.subarray(0, start), bomb, good.subarray(start + csize)]);
  const shift = bomb.length - csize;
  let p = cdOffset + shift;
  out.writeUInt32LE(bomb.length, p + 20);
  for (let k = 0; k < members.length; k++) {
    if (k > 0) out.writeUInt32LE(out.readUInt32LE(p + 42) + shift, p + 42);
    p += 46 + out.readUInt16LE(p + 28) + out.readUInt16LE(p + 30) + out.readUInt16LE(p + 32);
  }
  out.writeUInt32LE(cdOffset + shift, out.length - 22 + 16);
  writeFileSync(file, out);
  const r = await js(['forward', '--in', file, '--out', `${root}/bomb-out`]);
  assert.equal(r.status, 2, r.err);
  assert.equal(r.err, `msda: ${file}:value.npy: the deflated data is damaged or longer than the ${declared} bytes the archive says\n`);
  // the JS CLI's memory: the declared size, not the stream's 512 MiB
  const child = spawnSync(process.execPath, ['--input-type=module', '-e',
    `import { main } from '${new URL('../../bindings/cli.js', import.meta.url)}';
     await main(['forward', '--in', ${JSON.stringify(file)}, '--out', ${JSON.stringify(`${root}/bomb-out`)}], { out() {}, err() {} });
     console.log(process.resourceUsage().maxRSS);`], { encoding: 'utf8' });
  const rssKiB = Number(child.stdout.trim());
  assert.ok(rssKiB > 0 && rssKiB < 256 * 1024, `JS CLI peak memory ${rssKiB} KiB for a 512 MiB stream declared as ${declared} bytes: ${child.stderr}`);
});

test('many entries: the duplicate-name check is not quadratic (150,000 entries, zip64, under a CPU-time limit)', async () => {
  const members = caseMembers(randomCase(9, OPTION_COMBOS[0]));
  const filler = Array.from({ length: 150000 }, (_, k) => [`m${k}`, Buffer.alloc(0)]);
  const file = `${root}/many.npz`;
  writeFileSync(file, zip([...members, ...filler, ['m7', Buffer.alloc(0)]], { zip64Local: false, zip64End: true }));
  const want = `msda: --in ${file}: not a valid .npz: m7 appears twice\n`;
  // CPU time, not wall time: a loaded machine does not count; a quadratic check took about 60 s
  const n = spawnSync('sh', ['-c', 'ulimit -t 20; exec "$0" "$@"', process.execPath, CLI, 'forward', '--in', file, '--out', `${root}/many-out`], { encoding: 'utf8' });
  assert.equal(n.stderr, want, `signal ${n.signal}`);
});

test('one verdict for each archive: the committed mutated archives and the reader\'s seeds', async () => {
  // tests/fixtures/npz/mutated: one archive per distinct verdict of a differential run of the
  // former native reader against this one; seeds/: zip64, data descriptors, extra fields
  const dirs = ['mutated', 'seeds'].map((d) => `${FIXTURES}/${d}`);
  let n = 0;
  for (const dir of dirs) {
    for (const f of readdirSync(dir)) {
      const r = await js(['forward', '--in', `${dir}/${f}`, '--out', `${root}/mutated-out`]);
      assert.ok(r.status === 0 || (r.status === 2 && /^msda: [^\n]*\n$/.test(r.err)), `${f}: ${r.status} ${r.err}`);
      rmSync(`${root}/mutated-out`, { recursive: true, force: true });
      n++;
    }
  }
  assert.ok(n >= 64, `${n} archives`);
});
