// Both command lines (build/native/msda and node bindings/cli.js) against the paths
// the other CLI suites cannot reach: a FIFO or a directory where an input file should be (a FIFO
// once hung the native CLI in open()), an --out under procfs (once hung the JS CLI in Node's
// recursive mkdir), an --out through a dangling symlink, and unreadable or unwritable paths,
// which need a user without root's permission bypass: when the tests run as root, the CLIs run
// as nobody (setpriv). Each case: exit 2, one line "msda: ..." naming the file or flag, the same
// line from both CLIs, no signal, no hang, and no output file left behind.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serializeNpy } from '../../bindings/npy.js';
import { PATIENCE_MS } from '../patience.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const CLIS = {
  native: [join(repo, 'build/native/msda')],
  js: [process.execPath, join(repo, 'bindings/cli.js')],
};
const isRoot = process.getuid?.() === 0;
const haveSetpriv = spawnSync('setpriv', ['--version']).status === 0;
// Runs as an unprivileged user when we are root (so permissions mean something).
const unprivileged = isRoot ? (haveSetpriv ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : null) : [];

const root = mkdtempSync(join(tmpdir(), 'msda-cli-paths-'));
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
  return spawnSync(cmd, rest, { encoding: 'utf8', timeout: PATIENCE_MS });
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

test('an --out too long for the private directory\'s name: exit 2 before computing, the same line from both', () => {
  // root + /L/ddd.../ddd... of exactly `bytes` bytes (components of at most 200).
  const longPath = (bytes) => {
    let p = join(root, 'L');
    while (p.length < bytes) p += `/${'d'.repeat(Math.min(200, bytes - p.length - 1))}`;
    return p;
  };
  // '/.msda-XXXXXX' takes 13 bytes: 4083 + 13 = 4096 does not fit PATH_MAX, NUL included.
  expectRefusal('--out of 4083 bytes', () => {
    const { dir } = scenario();
    const out = longPath(4083);
    return { args: ['forward', '--in', dir, '--out', out], out, dir };
  }, ['--out', 'path too long']);
  expectRefusal('--out of 4083 bytes and a slash', () => {
    const { dir } = scenario();
    const out = `${longPath(4083)}/`;
    return { args: ['forward', '--in', dir, '--out', out], out: out.slice(0, -1), dir };
  }, ['--out', 'path too long']);
  assert.ok(!existsSync(longPath(4083)), 'the too-long --out was not created');
});

// An input checked and then read by path can be swapped in between: the JS CLI once stat()ed
// value.npy, and a FIFO put there before its readFileSync() hung it. A preloaded module swaps
// the file for a FIFO right after the CLI's first look at it (a stat of the path, or the open);
// both CLIs read what they opened, so both refuse the FIFO at once. And a file whose size says
// 0 but which has content (procfs): both read the size they saw, and say the same.
test('an input swapped for a FIFO between its check and its read, and a procfs input: refused at once, the same line', () => {
  const shim = join(root, 'swap-fifo.mjs');
  writeFileSync(shim, `import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
let swapped = false;
const swap = (p) => {
  if (swapped || !String(p).endsWith('value.npy')) return;
  swapped = true;
  fs.unlinkSync(p);
  execFileSync('mkfifo', [p]);
};
const { statSync, openSync } = fs;
fs.statSync = (p, ...rest) => { const st = statSync(p, ...rest); swap(p); return st; };
fs.openSync = (p, ...rest) => { swap(p); return openSync(p, ...rest); };
syncBuiltinESMExports();
`);
  const { dir, out } = scenario();
  const r = spawnSync(process.execPath, ['--import', shim, ...CLIS.js.slice(1), 'forward', '--in', dir, '--out', out],
    { encoding: 'utf8', timeout: PATIENCE_MS });
  assert.equal(r.error?.code, undefined, r.error?.code === 'ETIMEDOUT' ? 'hung on the FIFO (killed after 20 s)' : String(r.error));
  assert.equal(r.status, 2, r.stderr);
  assert.equal(r.stderr, `msda: ${join(dir, 'value.npy')}: not a regular file\n`);
  if (existsSync('/proc/self/environ')) {
    expectRefusal('value.npy from procfs', () => {
      const { dir: d, out: o } = scenario((c) => { rmSync(join(c, 'value.npy')); symlinkSync('/proc/self/environ', join(c, 'value.npy')); });
      return { args: ['forward', '--in', d, '--out', o], out: o, dir: d };
    }, ['value.npy']);
  }
});

test('a newline in a path the message names: still one line, the same from both (a space for the newline)', () => {
  const dir = join(root, 'in\ndir');
  writeCase(dir);
  rmSync(join(dir, 'value.npy'));
  const file = join(root, 'a\nfile');
  writeFileSync(file, '');
  const { dir: good } = scenario();
  for (const [args, line] of [
    [['forward', '--in', dir, '--out', join(root, 'nl-out')], `msda: ${dir.replace('\n', ' ')}/value.npy: cannot open: No such file or directory\n`],
    [['forward', '--in', good, '--out', file], `msda: --out ${file.replace('\n', ' ')}: not a directory\n`],
  ]) {
    for (const cli of Object.keys(CLIS)) {
      const r = run(cli, args);
      assert.equal(r.status, 2, `${cli}: ${r.stderr}`);
      assert.equal(r.stderr, line, `${cli} CLI`);
    }
  }
});

// ---- outputs: no write through a planted symlink, older outputs kept, no temporaries left ----

const listing = (dir) => readdirSync(dir).sort();
const hidden = (dir) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.startsWith('.')) : []);

test('symlinks planted in --out (at the old predictable temporary names and at the destination) are never written through', () => {
  for (const cli of Object.keys(CLIS)) {
    const { dir, out } = scenario();
    mkdirSync(out);
    const victim = join(root, `victim-${n}`), victim2 = join(root, `victim2-${n}`);
    writeFileSync(victim, 'precious');
    writeFileSync(victim2, 'precious too');
    symlinkSync(victim2, join(out, 'output.npy'));
    // The shell plants links named after its own PID, which the CLI keeps across exec; the
    // CLIs once wrote `.output.npy.tmp<PID>` through them.
    const cmd = [...CLIS[cli], 'forward', '--in', dir, '--out', out].map((a) => `'${a}'`).join(' ');
    const r = spawnSync('sh', ['-c', `for n in output.npy grad_value.npy; do ln -s '${victim}' '${out}'/.$n.tmp$$; `
      + `ln -s '${victim}' '${out}'/.$n.tmp-$$; done; exec ${cmd}`], { encoding: 'utf8', timeout: PATIENCE_MS });
    assert.equal(r.status, 0, `${cli}: ${r.stderr}`);
    assert.equal(readFileSync(victim, 'utf8'), 'precious', `${cli} CLI wrote through a planted temporary-name symlink`);
    assert.equal(readFileSync(victim2, 'utf8'), 'precious too', `${cli} CLI wrote through the destination symlink`);
    assert.ok(lstatSync(join(out, 'output.npy')).isFile(), `${cli}: output.npy replaced the link, a regular file`);
    const planted = listing(out).filter((f) => f.startsWith('.'));
    assert.equal(planted.length, 4, `${cli}: only the 4 planted links are hidden entries: ${planted}`);
    for (const f of planted) assert.ok(lstatSync(join(out, f)).isSymbolicLink(), `${cli}: ${f} is still the planted link`);
  }
});

test('a destination that cannot be replaced (a directory): exit 2 before computing, older outputs unchanged, nothing left', () => {
  const lines = {};
  for (const [op, names] of [['backward', ['grad_value.npy', 'grad_sampling_locations.npy', 'grad_attention_weights.npy']],
    ['forward', ['output.npy']]]) {
    for (const cli of Object.keys(CLIS)) {
      const { dir, out } = scenario();
      assert.equal(run(cli, [op, '--in', dir, '--out', out]).status, 0);
      const blocked = names[names.length - 1];
      rmSync(join(out, blocked));
      mkdirSync(join(out, blocked));
      writeFileSync(join(out, blocked, 'keep'), 'x');
      const before = Object.fromEntries(names.slice(0, -1).map((f) => [f, readFileSync(join(out, f))]));
      // New inputs, so new results would differ from the older ones.
      writeFileSync(join(dir, 'value.npy'), serializeNpy({ data: new Float32Array(12).fill(3), shape: [1, 6, 1, 2] }));
      const r = run(cli, [op, '--in', dir, '--out', out]);
      assert.equal(r.status, 2, `${op} ${cli}: exit ${r.status} ${r.stderr}`);
      assert.match(r.stderr, /^msda: [^\n]*\n$/);
      assert.ok(r.stderr.includes(`${blocked} is a directory`), r.stderr);
      for (const [f, bytes] of Object.entries(before)) {
        assert.deepEqual(readFileSync(join(out, f)), bytes, `${op} ${cli}: older ${f} changed or was deleted`);
      }
      assert.deepEqual(listing(out), [...names].sort(), `${op} ${cli}: nothing added or removed`);
      assert.deepEqual(listing(join(out, blocked)), ['keep']);
      lines[`${op} ${cli}`] = r.stderr.split(out).join('<out>');
    }
    assert.equal(lines[`${op} js`], lines[`${op} native`], 'both CLIs print the same line');
  }
});

// A forward whose output.npy is 128 MiB, so the writing takes long enough to be interrupted.
function bigCase() {
  const dir = join(root, `big${n++}`);
  mkdirSync(dir);
  const Q = 32768, C = 1024;
  const f = (shape, v) => ({ data: new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(v), shape });
  const files = {
    'value.npy': f([1, 1, 1, C], 0.5),
    'spatial_shapes.npy': { data: BigInt64Array.from([1n, 1n]), shape: [1, 2] },
    'level_start_index.npy': { data: BigInt64Array.from([0n]), shape: [1] },
    'sampling_locations.npy': f([1, Q, 1, 1, 1, 2], 0.5),
    'attention_weights.npy': f([1, Q, 1, 1, 1], 1),
  };
  for (const [name, t] of Object.entries(files)) writeFileSync(join(dir, name), serializeNpy(t));
  return dir;
}

// Starts the CLI and sends signal as soon as a hidden entry (its temporaries) appears in out.
function interrupt(cli, args, out, signal) {
  return new Promise((resolve, reject) => {
    const [cmd, ...rest] = [...CLIS[cli], ...args];
    const child = spawn(cmd, rest, { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '', sent = false, exited = false;
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('exit', (code, sig) => { exited = true; resolve({ code, signal: sig, sent, stderr }); });
    const poll = () => {
      if (exited) return;
      if (!sent && hidden(out).length) {
        sent = true;
        child.kill(signal);
      }
      if (!sent) setImmediate(poll);
    };
    poll();
  });
}

test('SIGINT, SIGTERM, SIGHUP or SIGQUIT while the outputs are written: the temporaries are removed, older outputs unchanged', async () => {
  const dir = bigCase();
  for (const cli of Object.keys(CLIS)) {
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) {
      const out = join(root, `sig-${cli}-${signal}`);
      mkdirSync(out);
      writeFileSync(join(out, 'output.npy'), 'older');
      let r;
      for (let attempt = 0; attempt < 5 && !r?.sent; attempt++) {
        r = await interrupt(cli, ['forward', '--in', dir, '--out', out], out, signal);
        if (!r.sent) writeFileSync(join(out, 'output.npy'), 'older'); // finished first: try again
      }
      assert.ok(r.sent, `${cli}: never caught writing in 5 runs`);
      assert.equal(r.signal, signal, `${cli}: ends as killed by ${signal} (exit ${r.code}, ${r.stderr})`);
      assert.deepEqual(hidden(out), [], `${cli} ${signal}: temporaries left behind`);
      assert.deepEqual(listing(out), ['output.npy']);
      assert.equal(readFileSync(join(out, 'output.npy'), 'utf8'), 'older', `${cli} ${signal}: older output changed`);
    }
  }
});

// A signal that arrives while the outputs are renamed into place: all outputs appear (the renames
// are one step), and then the CLI ends as killed by it, as the user asked. The JS CLI once
// dropped the listeners before Node dispatched the signal, so it was lost and the run exited 0.
// The signal is sent from inside the first rename: a preloaded module (JS) or an LD_PRELOAD shim
// (native) wraps rename.
test('a signal during the renames: all outputs appear, then the CLI ends as killed by it', () => {
  const shimDir = join(root, 'shim');
  mkdirSync(shimDir);
  const jsShim = join(shimDir, 'rename-signal.mjs');
  writeFileSync(jsShim, `import fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
const rename = fs.renameSync;
let sent = false;
fs.renameSync = (a, b) => {
  if (!sent) { sent = true; process.kill(process.pid, process.env.MSDA_TEST_SIGNAL); }
  return rename(a, b);
};
syncBuiltinESMExports();
`);
  const cShim = join(shimDir, 'rename-signal.c'), so = join(shimDir, 'rename-signal.so');
  writeFileSync(cShim, `#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
int rename(const char *a, const char *b)
{
    static int sent;
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    const char *s = getenv("MSDA_TEST_SIGNAL");
    if (!sent) {
        sent = 1;
        raise(!strcmp(s, "SIGINT") ? SIGINT : !strcmp(s, "SIGHUP") ? SIGHUP : !strcmp(s, "SIGQUIT") ? SIGQUIT : SIGTERM);
    }
    return real(a, b);
}
`);
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', so, cShim, '-ldl'], { encoding: 'utf8' });
  assert.equal(cc.status, 0, cc.stderr);
  const { dir } = scenario();
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT']) {
    for (const cli of Object.keys(CLIS)) {
      const out = join(root, `rename-${cli}-${signal}`);
      const [cmd, ...rest] = cli === 'js' ? [process.execPath, '--import', jsShim, ...CLIS.js.slice(1)] : CLIS.native;
      const env = { ...process.env, MSDA_TEST_SIGNAL: signal, ...(cli === 'native' ? { LD_PRELOAD: so } : {}) };
      const r = spawnSync(cmd, [...rest, 'backward', '--in', dir, '--out', out], { encoding: 'utf8', env, timeout: PATIENCE_MS });
      assert.equal(r.signal, signal, `${cli} ${signal}: ends as killed by it (exit ${r.status}, ${r.stderr})`);
      assert.deepEqual(listing(out), ['grad_attention_weights.npy', 'grad_sampling_locations.npy', 'grad_value.npy'],
        `${cli} ${signal}: all outputs, nothing else`);
    }
  }
});

// docs/cli.md, "Outputs": another program that puts a directory at an output name between the
// last check and the renames makes a rename fail; the run exits 1 naming what it already
// replaced, and leaves no private directory. The directory is made from inside the first
// rename (a preloaded module for JS, an LD_PRELOAD shim for native).
test('--out changed during the renames: exit 1 naming the outputs already replaced, the same line from both', () => {
  const shimDir = join(root, 'shim-race');
  mkdirSync(shimDir);
  const jsShim = join(shimDir, 'rename-race.mjs');
  writeFileSync(jsShim, `import fs from 'node:fs';
import path from 'node:path';
import { syncBuiltinESMExports } from 'node:module';
const rename = fs.renameSync;
let done = false;
fs.renameSync = (a, b) => {
  rename(a, b);
  if (!done) { done = true; fs.mkdirSync(path.join(path.dirname(b), 'grad_sampling_locations.npy')); }
};
syncBuiltinESMExports();
`);
  const cShim = join(shimDir, 'rename-race.c'), so = join(shimDir, 'rename-race.so');
  writeFileSync(cShim, `#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
int rename(const char *a, const char *b)
{
    static int done;
    int (*real)(const char *, const char *) = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    int rc = real(a, b);
    if (!done) {
        char dir[8192];
        done = 1;
        snprintf(dir, sizeof dir, "%s", b);
        char *slash = strrchr(dir, '/');
        if (slash) { strcpy(slash + 1, "grad_sampling_locations.npy"); mkdir(dir, 0777); }
    }
    return rc;
}
`);
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', so, cShim, '-ldl'], { encoding: 'utf8' });
  assert.equal(cc.status, 0, cc.stderr);
  const { dir } = scenario();
  const lines = {};
  for (const cli of Object.keys(CLIS)) {
    const out = join(root, `race-${cli}`);
    const [cmd, ...rest] = cli === 'js' ? [process.execPath, '--import', jsShim, ...CLIS.js.slice(1)] : CLIS.native;
    const env = { ...process.env, ...(cli === 'native' ? { LD_PRELOAD: so } : {}) };
    const r = spawnSync(cmd, [...rest, 'backward', '--in', dir, '--out', out], { encoding: 'utf8', env, timeout: PATIENCE_MS });
    assert.equal(r.status, 1, `${cli}: exit ${r.status} ${r.stderr}`);
    assert.match(r.stderr, /^msda: [^\n]*\n$/, `${cli}: one line`);
    assert.deepEqual(hidden(out), [], `${cli}: private directory left behind`);
    assert.deepEqual(listing(out), ['grad_sampling_locations.npy', 'grad_value.npy'], `${cli}: the replaced output and the directory`);
    lines[cli] = r.stderr.split(out).join('<out>');
  }
  assert.equal(lines.native, 'msda: <out>/grad_sampling_locations.npy: cannot rename into place: Is a directory (--out changed during the run; this run already replaced grad_value.npy)\n');
  assert.equal(lines.js, lines.native, 'both CLIs print the same line');
});

// A small tmpfs of our own (root only): no inode left for an output file, no block left for its
// data, a read-only file system. Exit 1 (2 for read-only: refused before computing), the same
// line from both CLIs, the older outputs byte for byte, no private directory left.
const mounts = [];
function tmpfs(options) {
  const dir = join(root, `tmpfs${n++}`);
  mkdirSync(dir);
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { encoding: 'utf8' });
  if (r.status !== 0) return null;
  mounts.push(dir);
  return dir;
}
const canMount = isRoot && (() => {
  const d = tmpfs('size=64k');
  return d !== null;
})();

test('a full or read-only file system under --out: both CLIs say the same, older outputs kept', { skip: !canMount && 'mounting a tmpfs needs root' }, () => {
  const { dir } = scenario();
  const cases = [
    // [what, mount options, op, expected exit, words, older outputs first]
    ['no inode for the first output', 'size=1m,nr_inodes=2', 'forward', 1, ['output.npy: cannot create: No space left on device'], false],
    ['no inode for the second output', 'size=1m,nr_inodes=3', 'backward', 1, ['grad_sampling_locations.npy: cannot create: No space left on device'], false],
    ['no block for the data', 'size=4k', 'backward', 1, ['write error: No space left on device'], false],
    ['a full disk holding older outputs', 'size=12k', 'backward', 1, ['write error: No space left on device'], true],
    ['read-only', 'ro,size=64k', 'forward', 2, ['--out', 'not writable: Read-only file system'], false],
  ];
  for (const [what, options, op, code, words, older] of cases) {
    const lines = {};
    for (const cli of Object.keys(CLIS)) {
      const out = tmpfs(options);
      assert.ok(out, `mount -o ${options}`);
      let before = {};
      if (older) {
        const names = ['grad_value.npy', 'grad_sampling_locations.npy', 'grad_attention_weights.npy'];
        for (const f of names) writeFileSync(join(out, f), `older ${f}`);
        before = Object.fromEntries(names.map((f) => [f, readFileSync(join(out, f))]));
        // Fill what is left so that the new outputs cannot be written in full.
        spawnSync('dd', ['if=/dev/zero', `of=${join(out, 'filler')}`, 'bs=1024', 'count=9'], { encoding: 'utf8' });
      }
      const r = run(cli, [op, '--in', dir, '--out', out]);
      const where = `${what} (${cli} CLI)`;
      assert.equal(r.signal, null, `${where}: killed by ${r.signal}`);
      assert.equal(r.status, code, `${where}: exit ${r.status}, stderr ${JSON.stringify(r.stderr)}`);
      assert.match(r.stderr, /^msda: [^\n]*\n$/, `${where}: one line starting "msda: "`);
      for (const w of words) assert.ok(r.stderr.includes(w), `${where}: ${JSON.stringify(r.stderr)} should say ${w}`);
      assert.deepEqual(hidden(out), [], `${where}: private directory left behind`);
      for (const [f, bytes] of Object.entries(before)) assert.deepEqual(readFileSync(join(out, f)), bytes, `${where}: older ${f} changed`);
      if (!older) assert.deepEqual(npyFiles(out), [], `${where}: no output`);
      lines[cli] = r.stderr.split(out).join('<out>');
    }
    assert.equal(lines.js, lines.native, `${what}: both CLIs print the same line`);
  }
});

test.after(() => {
  for (const m of mounts) spawnSync('umount', [m]);
  // Give root's cleanup back the permissions the scenarios took away.
  for (const entry of readdirSync(root)) {
    const p = join(root, entry);
    try { chmodSync(p, 0o755); } catch { /* dangling symlinks */ }
  }
  rmSync(root, { recursive: true, force: true });
});
