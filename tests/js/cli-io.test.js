// The msda bin's files and streams: an expected output under --expect that
// cannot be read (a dangling symlink) is refused as the same name under --in is; a reader that
// goes away (`msda crosscheck ... | head -1`) costs no stack trace: the rest of the output is
// dropped and the exit status is the verdict's; a .npy over 4 GiB (past Node's Buffer) is read in
// parts and judged as the native CLI judges it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, ftruncateSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { npyHeader } from '../../bindings/npy.js';
import { writeTinyCase } from './helpers.js';

const CLI = fileURLToPath(new URL('../../bindings/cli.js', import.meta.url));
let root;
before(() => { root = mkdtempSync(`${tmpdir()}/msda-h3-cli-`); });
after(() => rmSync(root, { recursive: true, force: true }));

const bin = (args, env = {}) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, ...env } });
const NATIVE = fileURLToPath(new URL('../../build/native/msda', import.meta.url));

test('crosscheck --expect DIR: a dangling symlink among the expected outputs is refused (exit 2), as under --in', () => {
  const dir = `${root}/case`;
  writeTinyCase(dir);
  const out = `${root}/out`;
  assert.equal(bin(['backward', '--in', dir, '--out', out]).status, 0);
  assert.equal(bin(['forward', '--in', dir, '--out', out]).status, 0);
  assert.equal(bin(['crosscheck', '--in', dir, '--expect', out]).status, 0, 'the outputs agree');
  rmSync(`${out}/grad_value.npy`);
  symlinkSync(`${root}/nowhere.npy`, `${out}/grad_value.npy`);
  const r = bin(['crosscheck', '--in', dir, '--expect', out]);
  assert.equal(r.status, 2, r.stdout);
  assert.equal(r.stderr, `msda: ${out}/grad_value.npy: cannot open: No such file or directory\n`);
  // The same under --in.
  rmSync(`${dir}/grad_output.npy`);
  symlinkSync(`${root}/nowhere.npy`, `${dir}/grad_output.npy`);
  const i = bin(['backward', '--in', dir, '--out', `${root}/out2`]);
  assert.equal(i.status, 2);
  assert.equal(i.stderr, `msda: ${dir}/grad_output.npy: cannot open: No such file or directory\n`);
});

test('crosscheck into a closed pipe: no stack trace, nothing on stderr, the verdict\'s exit status', async () => {
  const dir = `${root}/pipe-case`;
  writeTinyCase(dir);
  for (const [args, status] of [[['crosscheck', '--in', dir], 0], [['--help'], 0]]) {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy();   // the reader is gone before the first line is written
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(err, '', `${args.join(' ')}: stderr`);
    assert.equal(code, status, `${args.join(' ')}: exit status`);
  }
});

test('a .npy over 4 GiB is judged, not refused for memory: a truncated one is exit 2 with the native CLI\'s words (sparse file, not read)', () => {
  const dir = `${root}/huge`;
  writeTinyCase(dir);
  // (1, 268435457, 1, 4) float32 needs 4 GiB + 16 bytes; the file has 4 GiB of data after its header.
  const header = npyHeader('<f4', [1, 268435457, 1, 4]);
  const fd = openSync(`${dir}/value.npy`, 'w');
  writeSync(fd, header);
  ftruncateSync(fd, header.length + 2 ** 32);
  closeSync(fd);
  const r = bin(['forward', '--in', dir, '--out', `${root}/huge-out`]);
  assert.equal(r.stderr, `msda: ${dir}/value.npy: truncated: shape (1, 268435457, 1, 4) of '<f4' needs 4294967312 data bytes, the file has 4294967296\n`);
  assert.equal(r.status, 2);
  // One byte more than the shape needs, past 4 GiB: trailing data, as native says.
  const fd2 = openSync(`${dir}/value.npy`, 'r+');
  ftruncateSync(fd2, header.length + 2 ** 32 + 17);
  closeSync(fd2);
  const t = bin(['forward', '--in', dir, '--out', `${root}/huge-out`]);
  assert.equal(t.stderr, `msda: ${dir}/value.npy: 1 bytes of trailing data after the 4294967312 that shape (1, 268435457, 1, 4) of '<f4' needs\n`);
  assert.equal(t.status, 2);
});

test('reading in parts (MSDA_TEST_NPY_PARTS: every file, 7 bytes at a time) gives the same outputs, and every bad file the same words and status as the native CLI', () => {
  const dir = `${root}/parts`;
  writeTinyCase(dir);
  const parts = { MSDA_TEST_NPY_PARTS: '0,7' };
  for (const command of ['forward', 'backward']) {
    const whole = bin([command, '--in', dir, '--out', `${root}/parts-whole-${command}`]);
    const inParts = bin([command, '--in', dir, '--out', `${root}/parts-parts-${command}`], parts);
    assert.equal(whole.status, 0, whole.stderr);
    assert.equal(inParts.status, 0, inParts.stderr);
    for (const f of readdirSync(`${root}/parts-whole-${command}`)) {
      assert.ok(readFileSync(`${root}/parts-whole-${command}/${f}`).equals(readFileSync(`${root}/parts-parts-${command}/${f}`)), `${command} ${f}`);
    }
  }
  const good = readFileSync(`${dir}/value.npy`);
  const f8 = Buffer.from(good);
  f8.write('<f8', f8.indexOf("'<f4'") + 1, 'latin1');
  const bad = {
    empty: new Uint8Array(0), tiny: good.subarray(0, 5), preamble: good.subarray(0, 9), header: good.subarray(0, 40),
    magic: Buffer.concat([Buffer.from('XNUMPY'), good.subarray(6)]), version: Buffer.concat([good.subarray(0, 6), Buffer.from([4, 0]), good.subarray(8)]),
    data: good.subarray(0, good.length - 3), trailing: Buffer.concat([good, Buffer.from([0, 0, 0, 0])]), dtype: f8,
    bool: Buffer.concat([good.subarray(0, good.indexOf("'<f4'")), Buffer.from("'|b1'"), good.subarray(good.indexOf("'<f4'") + 5)]),
  };
  for (const [name, bytes] of Object.entries(bad)) {
    writeFileSync(`${dir}/value.npy`, bytes);
    const args = ['forward', '--in', dir, '--out', `${root}/parts-bad`];
    const native = spawnSync(NATIVE, args, { encoding: 'utf8' });
    const inParts = bin(args, parts);
    assert.equal(native.status, 2, `${name}: ${native.stderr}`);
    assert.equal(inParts.stderr, native.stderr, name);
    assert.equal(inParts.status, native.status, name);
  }
});
