// Hardening of both command lines (build/native/msda and node bindings/cli.js) against the paths
// the other CLI suites cannot reach: a FIFO or a directory where an input file should be (a FIFO
// once hung the native CLI in open()), an --out under procfs (once hung the JS CLI in Node's
// recursive mkdir), an --out through a dangling symlink, and unreadable or unwritable paths,
// which need a user without root's permission bypass: when the tests run as root, the CLIs run
// as nobody (setpriv). Each case: exit 2, one line "msda: ..." naming the file or flag, the same
// line from both CLIs, no signal, no hang, and no output file left behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serializeNpy } from '../../bindings/npy.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const CLIS = {
  native: [join(repo, 'build/native/msda')],
  js: [process.execPath, join(repo, 'bindings/cli.js')],
};
const isRoot = process.getuid?.() === 0;
const haveSetpriv = spawnSync('setpriv', ['--version']).status === 0;
// Runs as an unprivileged user when we are root (so permissions mean something).
const unprivileged = isRoot ? (haveSetpriv ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : null) : [];

const root = mkdtempSync(join(tmpdir(), 'msda-hardening-cli-'));
chmodSync(root, 0o777);

function writeCase(dir) {
  mkdirSync(dir, { recursive: true });
  chmodSync(dir, 0o755);
  const f = (shape) => ({ data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => (i % 7) / 7), shape });
  const files = {
    'value.npy': f([1, 6, 1, 2]),
    'spatial_shapes.npy': { data: BigInt64Array.from([2n, 3n]), shape: [1, 2] },
    'level_start_index.npy': { data: BigInt64Array.from([0n]), shape: [1] },
    'sampling_locations.npy': f([1, 2, 1, 1, 1, 2]),
    'attention_weights.npy': f([1, 2, 1, 1, 1]),
    'grad_output.npy': f([1, 2, 2]),
  };
  for (const [name, t] of Object.entries(files)) writeFileSync(join(dir, name), serializeNpy(t), { mode: 0o644 });
}

let n = 0;
// A fresh case directory (edited by `edit`) and a fresh, not yet existing, output directory.
function scenario(edit) {
  const dir = join(root, `case${n}`), out = join(root, `out${n}`);
  n++;
  writeCase(dir);
  edit?.(dir);
  return { dir, out };
}

function run(cli, args, prefix = []) {
  const [cmd, ...rest] = [...prefix, ...CLIS[cli], ...args];
  return spawnSync(cmd, rest, { encoding: 'utf8', timeout: 20000 });
}

const npyFiles = (dir) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.npy')) : []);

// Both CLIs refuse with exit 2 and the same single line containing every word.
function expectRefusal(what, makeArgs, words, { prefix = [], outDir } = {}) {
  const lines = {};
  for (const cli of Object.keys(CLIS)) {
    const { args, out, dir } = makeArgs();
    const r = run(cli, args, prefix);
    const where = `${what} (${cli} CLI)`;
    assert.equal(r.error?.code, undefined, `${where}: ${r.error?.code === 'ETIMEDOUT' ? 'hung (killed after 20 s)' : r.error}`);
    assert.equal(r.signal, null, `${where}: killed by ${r.signal}`);
    assert.equal(r.status, 2, `${where}: exit ${r.status}, stderr ${JSON.stringify(r.stderr)}`);
    assert.match(r.stderr, /^msda: [^\n]*\n$/, `${where}: one line starting "msda: "`);
    for (const w of words) assert.ok(r.stderr.includes(w), `${where}: ${JSON.stringify(r.stderr)} should name ${w}`);
    assert.deepEqual(npyFiles(outDir ?? out), [], `${where}: no output left`);
    lines[cli] = r.stderr.split(dir ?? '\0').join('<in>').split(out).join('<out>');
  }
  assert.equal(lines.js, lines.native, `${what}: both CLIs print the same line`);
}

test('a FIFO or a directory where an input file should be: refused at once, no hang', () => {
  for (const [op, name] of [['forward', 'value.npy'], ['backward', 'grad_output.npy'], ['forward', 'spatial_shapes.npy']]) {
    expectRefusal(`${op} with a FIFO as ${name}`, () => {
      const { dir, out } = scenario((d) => { rmSync(join(d, name)); spawnSync('mkfifo', [join(d, name)]); });
      return { args: [op, '--in', dir, '--out', out], out, dir };
    }, [name, 'not a regular file']);
  }
  expectRefusal('a directory as attention_weights.npy', () => {
    const { dir, out } = scenario((d) => { rmSync(join(d, 'attention_weights.npy')); mkdirSync(join(d, 'attention_weights.npy')); });
    return { args: ['forward', '--in', dir, '--out', out], out, dir };
  }, ['attention_weights.npy', 'not a regular file']);
});

test('an --out that cannot be created: under procfs, through a dangling symlink, under a file', () => {
  if (existsSync('/proc/self')) {
    expectRefusal('--out under /proc', () => {
      const { dir } = scenario();
      return { args: ['forward', '--in', dir, '--out', `/proc/msda-no-such-dir-${process.pid}/out`], out: join(root, 'none'), dir };
    }, ['--out', 'cannot create directory']);
  }
  expectRefusal('--out through a dangling symlink', () => {
    const { dir, out } = scenario();
    symlinkSync(join(root, `missing-${n}`), out);
    return { args: ['forward', '--in', dir, '--out', join(out, 'sub')], out, dir };
  }, ['--out', 'cannot create directory', 'No such file or directory']);
  expectRefusal('--out under a regular file', () => {
    const { dir } = scenario();
    return { args: ['backward', '--in', dir, '--out', join(dir, 'value.npy', 'sub')], out: join(root, 'none'), dir };
  }, ['--out', 'Not a directory']);
});

test('unreadable and unwritable paths, as a user without permission bypass', { skip: unprivileged === null && 'root without setpriv' }, () => {
  const prefix = unprivileged;
  expectRefusal('unreadable --in directory', () => {
    const { dir, out } = scenario((d) => chmodSync(d, 0o000));
    return { args: ['forward', '--in', dir, '--out', out], out, dir };
  }, ['Permission denied'], { prefix });
  expectRefusal('unreadable value.npy', () => {
    const { dir, out } = scenario((d) => chmodSync(join(d, 'value.npy'), 0o000));
    return { args: ['forward', '--in', dir, '--out', out], out, dir };
  }, ['value.npy', 'Permission denied'], { prefix });
  expectRefusal('read-only --out directory', () => {
    const { dir, out } = scenario();
    mkdirSync(out, { mode: 0o555 });
    chmodSync(out, 0o555);
    return { args: ['backward', '--in', dir, '--out', out], out, dir };
  }, ['--out', 'not writable'], { prefix });
  expectRefusal('--out to be created under a read-only directory', () => {
    const { dir, out } = scenario();
    mkdirSync(out, { mode: 0o555 });
    chmodSync(out, 0o555);
    return { args: ['forward', '--in', dir, '--out', join(out, 'sub')], out, dir };
  }, ['--out', 'Permission denied'], { prefix });
});

test.after(() => {
  // Give root's cleanup back the permissions the scenarios took away.
  for (const entry of readdirSync(root)) {
    const p = join(root, entry);
    try { chmodSync(p, 0o755); } catch { /* dangling symlinks */ }
  }
  rmSync(root, { recursive: true, force: true });
});
