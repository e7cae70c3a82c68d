// The addon loader: a truncated addon (an interrupted install) is
// refused before dlopen could map past its end (SIGBUS), init({ backend: 'auto' }) and
// `msda crosscheck` fall back, backend 'native' says why; addonPath naming something that is not
// this package's addon of this version (a script, a package name, another version) is refused
// without running it, and a relative addonPath means the working directory's.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { init } from '../../bindings/node.js';
import { writeTinyCase } from './helpers.js';
import { PATIENCE_MS } from '../patience.js';

const repo = (p) => fileURLToPath(new URL(`../../${p}`, import.meta.url));
const ADDON = repo('build/native/msda.node');
const NODE_ENTRY = new URL('../../bindings/node.js', import.meta.url).href;
const { version: VERSION } = JSON.parse(readFileSync(repo('package.json'), 'utf8'));
const SIZES = [1000, 4096, 65536, 200000];

let root;
before(() => { root = mkdtempSync(`${tmpdir()}/msda-h3-addon-`); });
after(() => rmSync(root, { recursive: true, force: true }));

// Runs `body` (an async function's text, `init` in scope) in a fresh Node: a SIGBUS there is a
// failed assertion here, not the end of the test run.
function child(body, cwd = root) {
  const script = `const { init } = await import(${JSON.stringify(NODE_ENTRY)});\n${body}`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd, encoding: 'utf8', timeout: PATIENCE_MS });
  return { status: r.status, signal: r.signal, out: r.stdout, err: r.stderr };
}

test('an addonPath cut to 1,000-200,000 bytes: auto gives wasm, native a clear error naming the file and the truncation', () => {
  const full = readFileSync(ADDON);
  const paths = SIZES.filter((n) => n < full.length).map((n) => {
    const p = `${root}/cut-${n}.node`;
    writeFileSync(p, full.subarray(0, n));
    return p;
  });
  const r = child(`
    for (const addonPath of ${JSON.stringify(paths)}) {
      const auto = await init({ backend: 'auto', addonPath });
      const native = await init({ backend: 'native', addonPath }).then(() => null, (e) => e);
      console.log(JSON.stringify({ backend: auto.backend, code: native?.code, message: native?.message }));
      auto.dispose();
    }`);
  assert.equal(r.signal, null, `killed by ${r.signal}: ${r.err}`);
  assert.equal(r.status, 0, r.err);
  const lines = r.out.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, paths.length);
  lines.forEach((l, i) => {
    assert.equal(l.backend, 'wasm', paths[i]);
    assert.equal(l.code, 'MSDA_NATIVE_UNAVAILABLE', paths[i]);
    assert.ok(l.message.startsWith(`ms-deform-attn: cannot load the native addon ${paths[i]} on ${process.platform}-${process.arch}: it is truncated: ${SIZES[i]} bytes`), l.message);
  });
});

// A write of a crosscheck case and a package copy whose prebuilt addon is cut short.
function packageWithCutPrebuild(n) {
  const pkg = `${root}/package-${n}`;
  for (const part of ['bindings', 'dist', 'package.json']) cpSync(repo(part), `${pkg}/${part}`, { recursive: true });
  const target = `${process.platform}-${process.arch}`;
  mkdirSync(`${pkg}/prebuilds/${target}`, { recursive: true });
  writeFileSync(`${pkg}/prebuilds/${target}/ms-deform-attn.node`, readFileSync(ADDON).subarray(0, n));
  return pkg;
}

test('a truncated prebuilt addon: init({ backend: \'auto\' }) and `msda crosscheck` fall back to wasm / the float64 reference', () => {
  const dir = `${root}/case`;
  writeTinyCase(dir);
  for (const n of [1000, 200000]) {
    const pkg = packageWithCutPrebuild(n);
    const entry = new URL(`file://${pkg}/bindings/node.js`).href;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e',
      `const { init } = await import(${JSON.stringify(entry)}); const m = await init({ backend: 'auto' }); console.log(m.backend);`],
    { encoding: 'utf8', timeout: PATIENCE_MS });
    assert.equal(r.signal, null, `${n} bytes: init killed by ${r.signal}`);
    assert.equal(r.stdout.trim(), 'wasm', `${n} bytes: ${r.stderr}`);
    const c = spawnSync(process.execPath, [`${pkg}/bindings/cli.js`, 'crosscheck', '--in', dir], { encoding: 'utf8', timeout: PATIENCE_MS });
    assert.equal(c.signal, null, `${n} bytes: crosscheck killed by ${c.signal}`);
    assert.equal(c.status, 0, `${n} bytes: ${c.stderr}`);
    assert.match(c.stdout, /^crosscheck \S+: wasm \(SIMD\) against the float64 reference \(the native addon is not available on /, c.stdout);
  }
});

test('addonPath naming a script or a package name: not run, auto gives wasm, native refuses it as not the addon', async () => {
  const script = `${root}/not-an-addon.js`;
  writeFileSync(script, 'globalThis.msdaNotAnAddonRan = true; module.exports = {};\n');
  for (const addonPath of [script, 'esbuild']) {
    const auto = await init({ backend: 'auto', addonPath });
    assert.equal(auto.backend, 'wasm', addonPath);
    auto.dispose();
    await assert.rejects(init({ backend: 'native', addonPath }), (e) => {
      assert.equal(e.code, 'MSDA_NATIVE_UNAVAILABLE', e.message);
      assert.match(e.message, /^ms-deform-attn: cannot load the native addon \S+ on [\w-]+: (it is not an ELF shared object|cannot open \S+esbuild \(ENOENT\))/, e.message);
      return true;
    }, addonPath);
  }
  assert.equal(globalThis.msdaNotAnAddonRan, undefined, 'the script ran');
});

test('an addon of another version is refused naming both versions; auto falls back', async () => {
  const bytes = Buffer.from(readFileSync(ADDON));
  const needle = Buffer.from(`${VERSION}\0`);
  const at = bytes.indexOf(needle);
  assert.ok(at >= 0 && bytes.indexOf(needle, at + 1) < 0, 'the version string is in the addon once');
  const other = VERSION.replace(/\d$/, (d) => String((Number(d) + 1) % 10));
  bytes.write(other, at, 'latin1');
  const path = `${root}/other-version.node`;
  writeFileSync(path, bytes);
  const r = child(`
    const auto = await init({ backend: 'auto', addonPath: ${JSON.stringify(path)} });
    const e = await init({ backend: 'native', addonPath: ${JSON.stringify(path)} }).then(() => null, (x) => x);
    console.log(JSON.stringify({ backend: auto.backend, code: e?.code, message: e?.message }));`);
  assert.equal(r.status, 0, r.err);
  const got = JSON.parse(r.out);
  assert.equal(got.backend, 'wasm');
  assert.equal(got.code, 'MSDA_NATIVE_UNAVAILABLE');
  assert.match(got.message, new RegExp(`it is the addon of version ${other.replaceAll('.', '\\.')}, expected ${VERSION.replaceAll('.', '\\.')}`));
});

test('a relative addonPath is resolved against the working directory', async () => {
  const m = await init({ backend: 'native', addonPath: relative(process.cwd(), ADDON) });
  assert.equal(m.backend, 'native');
  m.dispose();
  const r = child(`const m = await init({ backend: 'native', addonPath: 'msda.node' }); console.log(m.backend);`, repo('build/native'));
  assert.equal(r.out.trim(), 'native', r.err);
});

test("MSDA_ISA naming no instruction set of this CPU: 'auto' runs on wasm saying why, 'native' rejects naming it, both CLIs exit 2 naming it", () => {
  const dir = `${root}/isa-case`;
  writeTinyCase(dir);
  const lacked = process.arch === 'arm64' ? 'avx2' : 'neon';
  for (const isa of ['AVX2', lacked]) {
    const env = { ...process.env, MSDA_ISA: isa };
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', `const { init } = await import(${JSON.stringify(NODE_ENTRY)});
      const m = await init({ backend: 'auto' });
      console.log(m.backend);
      await init({ backend: 'auto' });
      await init({ backend: 'native' }).then(() => console.log('native resolved'), (e) => console.log(e.code, e.message));`],
    { env, encoding: 'utf8', timeout: PATIENCE_MS });
    const [backend, rejection] = r.stdout.trim().split('\n');
    assert.equal(backend, 'wasm', `${isa}: ${r.stderr}`);
    assert.match(rejection, new RegExp(`^MSDA_BAD_ISA MSDA_ISA is '${isa}', expected one of this CPU's: scalar .* \\(or unset\\)$`));
    // 'auto' says why, once
    assert.match(r.stderr, new RegExp(`^ms-deform-attn: init\\(\\{ backend: 'auto' \\}\\) runs on WebAssembly \\(the same bits\\): MSDA_ISA is '${isa}'[^\\n]*\\n$`));
    const line = rejection.slice('MSDA_BAD_ISA '.length);
    const runs = [
      [repo('build/native/msda'), 'forward', '--in', dir, '--out', `${root}/isa-out`],
      [process.execPath, repo('bindings/cli.js'), 'forward', '--in', dir, '--out', `${root}/isa-out`, '--backend', 'native'],
      [process.execPath, repo('bindings/cli.js'), 'crosscheck', '--in', dir, '--backend', 'wasm'],
    ];
    for (const [cmd, ...args] of runs) {
      const c = spawnSync(cmd, args, { env, encoding: 'utf8', timeout: PATIENCE_MS });
      assert.equal(c.status, 2, `${isa} ${args.slice(0, 3)}: ${c.stderr}`);
      assert.equal(c.stderr, `msda: ${line}\n`, `${isa} ${args.slice(0, 3)}`);
    }
    // the wasm backends do not read it
    const w = spawnSync(process.execPath, [repo('bindings/cli.js'), 'forward', '--in', dir, '--out', `${root}/isa-out`], { env, encoding: 'utf8' });
    assert.equal(w.status, 0, w.stderr);
  }
});
