// Hardening III (issue 20, items 7 and 8), the msda bin: an expected output under --expect that
// cannot be read (a dangling symlink) is refused as the same name under --in is, and a reader that
// goes away (`msda crosscheck ... | head -1`) costs no stack trace: the rest of the output is
// dropped and the exit status is the verdict's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { serializeNpy } from '../../bindings/npy.js';

const CLI = fileURLToPath(new URL('../../bindings/cli.js', import.meta.url));
let root;
before(() => { root = mkdtempSync(`${tmpdir()}/msda-h3-cli-`); });
after(() => rmSync(root, { recursive: true, force: true }));

function writeCase(dir) {
  mkdirSync(dir, { recursive: true });
  const w = (name, t) => writeFileSync(`${dir}/${name}.npy`, serializeNpy(t));
  w('value', { data: Float32Array.from({ length: 12 }, (_, i) => i / 7), shape: [1, 6, 1, 2] });
  w('spatial_shapes', { data: BigInt64Array.from([2n, 3n]), shape: [1, 2] });
  w('level_start_index', { data: BigInt64Array.from([0n]), shape: [1] });
  w('sampling_locations', { data: Float32Array.from([0.3, 0.6, 0.9, 0.1]), shape: [1, 2, 1, 1, 1, 2] });
  w('attention_weights', { data: Float32Array.from([0.5, 2]), shape: [1, 2, 1, 1, 1] });
  w('grad_output', { data: Float32Array.from([1, -1, 0.5, 2]), shape: [1, 2, 2] });
}

const bin = (args) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

test('crosscheck --expect DIR: a dangling symlink among the expected outputs is refused (exit 2), as under --in', () => {
  const dir = `${root}/case`;
  writeCase(dir);
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
  writeCase(dir);
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
