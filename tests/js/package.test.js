// The package as users get it: `npm pack` (file list, sizes, modes, metadata), the README's links
// against the repository and the tarball, the tarball installed into an empty project offline and
// used by name from ESM and CommonJS; and the hand-written typings checked by `tsc --strict`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile, readFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

// Budgets (bytes). The tarball is what `npm install` downloads; the README is shown on the
// registry page and installed with the package, so it must not dominate it.
// The prebuilt addon is most of it: four builds of the kernels (SSE2, AVX2, AVX-512, scalar).
const TARBALL_BUDGET = 600 * 1024;
const UNPACKED_BUDGET = 1536 * 1024;
const README_SHARE = 0.15;

// What the tarball may hold: the code, its types, the wasm modules, the docs and the picture the
// README shows, the license. Nothing from tests, sources or the build tree.
const ALLOWED = /^(package\.json|README\.md|LICENSE|bindings\/((core|wasm|workers)\/)?[^/]+\.(js|d\.ts)|dist\/msda-(simd|scalar|simd-threads)\.wasm|dist\/(threads-worker|msda-worker)\.js|prebuilds\/[a-z0-9]+-[a-z0-9]+\/ms-deform-attn\.node|docs\/[A-Z]+\.md|docs\/demo\.webp)$/;
const REQUIRED = ['package.json', 'README.md', 'LICENSE', 'docs/SEMANTICS.md', 'docs/CONTRACT.md', 'docs/demo.webp',
  'bindings/index.js', 'bindings/wasm/loader.js', 'bindings/index.d.ts', 'bindings/native.js', 'bindings/reference.js',
  'bindings/wasm/threads.js', 'bindings/workers/threads-worker.js', 'dist/msda-simd.wasm', 'dist/msda-scalar.wasm',
  'dist/msda-simd-threads.wasm', 'dist/threads-worker.js', 'dist/msda-worker.js', 'bindings/browser.js', 'bindings/node.js', 'bindings/core/api.js', 'bindings/core/args.js', 'bindings/core/init.js',
  'prebuilds/linux-x64/ms-deform-attn.node'];

let dir;      // temporary directory holding the tarball and the user's project
let packed;   // npm pack --json's record: { filename, size, unpackedSize, files: [{ path, size, mode }] }

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'msda-pack-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, env: npmEnv, maxBuffer: 1 << 24 });
  [packed] = JSON.parse(stdout);   // prepack's build talks on stderr
});
after(() => rm(dir, { recursive: true, force: true }));

test('npm pack: exactly the files users need', () => {
  const paths = packed.files.map((f) => f.path);
  for (const needed of REQUIRED) assert.ok(paths.includes(needed), `the tarball has ${needed}`);
  for (const p of paths) assert.match(p, ALLOWED, `only what users need, not ${p}`);
});

test(`npm pack: tarball <= ${TARBALL_BUDGET} bytes, unpacked <= ${UNPACKED_BUDGET}, README <= ${README_SHARE * 100}% of it`, () => {
  assert.ok(packed.size <= TARBALL_BUDGET, `tarball is ${packed.size} bytes, budget ${TARBALL_BUDGET}`);
  assert.ok(packed.unpackedSize <= UNPACKED_BUDGET, `unpacked ${packed.unpackedSize} bytes, budget ${UNPACKED_BUDGET}`);
  const readme = packed.files.find((f) => f.path === 'README.md').size;
  assert.ok(readme <= README_SHARE * packed.unpackedSize,
    `README.md is ${readme} bytes, ${(100 * readme / packed.unpackedSize).toFixed(1)}% of the ${packed.unpackedSize} unpacked bytes (budget ${README_SHARE * 100}%)`);
});

test('npm pack: file modes are 644, only the bin is executable', () => {
  const bin = Object.values(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).bin);
  for (const f of packed.files) {
    const expected = bin.includes(f.path) ? 0o755 : 0o644;
    assert.equal((f.mode & 0o777).toString(8), expected.toString(8), `mode of ${f.path}`);
  }
});

test('package.json: license file, keywords, sideEffects, engines', async () => {
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  assert.equal(pkg.license, 'MIT');
  const license = await readFile(join(root, 'LICENSE'), 'utf8');
  assert.match(license, /^MIT License\n/);
  assert.match(license, /Permission is hereby granted, free of charge/);
  // The project has no public repository address yet, and an invented one would send users to
  // someone else's; when it gets one, it must be a git URL npm can link.
  if (pkg.repository !== undefined) {
    assert.equal(pkg.repository.type, 'git');
    assert.match(pkg.repository.url ?? '', /^git\+https:\/\/.+\.git$/);
  }
  assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.length >= 3, 'keywords');
  assert.equal(pkg.sideEffects, false);
  for (const hook of ['preinstall', 'install', 'postinstall']) {
    assert.equal(pkg.scripts?.[hook], undefined, `no ${hook} script: nothing is compiled at install time`);
  }
  assert.equal(pkg.dependencies, undefined, 'no dependencies');
  for (const peer of Object.keys(pkg.peerDependencies ?? {})) {
    assert.equal(pkg.peerDependenciesMeta?.[peer]?.optional, true, `peer ${peer} is optional`);
  }
  // require() of an ES module works unflagged from Node 20.19 and 22.12; the range must say so
  // and admit the Node that runs this test (which the install test below uses through require).
  assert.equal(pkg.engines?.node, '^20.19.0 || >=22.12.0');
  const [major, minor] = process.versions.node.split('.').map(Number);
  assert.ok((major === 20 && minor >= 19) || (major === 22 && minor >= 12) || major > 22,
    `engines ${pkg.engines.node} admits this Node ${process.version}`);
});

// ---------------------------------------------------------------------------------------------
// The README's links: on the registry page relative links resolve against the repository, and
// readers of node_modules see the tarball; so every relative link and image must be a file the
// repository tracks, images and docs must also be in the tarball, and every #anchor a heading.

function readmeLinks(md) {
  const text = md.replace(/```[\s\S]*?```/g, '');   // code blocks hold no links
  const links = [];
  for (const m of text.matchAll(/(!?)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    links.push({ image: m[1] === '!', target: m[2] });
  }
  for (const m of text.matchAll(/<(img|a)\s[^>]*?(src|href)="([^"]+)"/g)) links.push({ image: m[1] === 'img', target: m[3] });
  return links;
}

// GitHub's (and npm's) heading anchors: lower case, punctuation dropped, spaces to hyphens.
function anchors(md) {
  const out = new Set();
  for (const m of md.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6}\s+(.+)$/gm)) {
    out.add(m[1].trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-'));
  }
  return out;
}

test('README: every relative link and image is in the repository (images and docs in the tarball too)', async () => {
  const md = await readFile(join(root, 'README.md'), 'utf8');
  const { stdout } = await run('git', ['ls-files', '-z'], { cwd: root, maxBuffer: 1 << 24 });
  const tracked = new Set(stdout.split('\0').filter(Boolean));
  const inTarball = new Set(packed.files.map((f) => f.path));
  const heads = anchors(md);
  const links = readmeLinks(md);
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  assert.ok(links.some((l) => l.image), 'the README shows a picture');
  for (const { image, target } of links) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
      // The registry page resolves relative images only against a repository address, which
      // the package has none of yet: images come from the published tarball itself, through the
      // CDN that serves every npm package's files, at this version.
      if (image) {
        const prefix = `https://cdn.jsdelivr.net/npm/${pkg.name}@${pkg.version}/`;
        assert.ok(target.startsWith(prefix), `image ${target} is served from this version's tarball (${prefix}…)`);
        const file = target.slice(prefix.length);
        assert.ok(tracked.has(file) && inTarball.has(file), `image ${target}: ${file} is tracked and in the tarball`);
      }
      continue;
    }
    const [path, fragment] = target.split('#');
    if (path === '') {
      assert.ok(heads.has(fragment), `README link #${fragment} names a heading (have: ${[...heads].join(', ')})`);
      continue;
    }
    const file = path.replace(/^\.\//, '');
    assert.ok(!file.startsWith('../') && !file.startsWith('/'), `README link ${target} stays inside the repository`);
    assert.ok(tracked.has(file), `README ${image ? 'image' : 'link'} ${target}: ${file} is tracked by git`);
    if (image || file.startsWith('docs/') || file === 'LICENSE') {
      assert.ok(inTarball.has(file), `README ${image ? 'image' : 'link'} ${target}: ${file} is in the tarball`);
    }
  }
  // Documents named in prose must be ones the repository has, under the name it has them.
  const prose = md.replace(/!?\[[^\]]*\]\([^)]*\)/g, '');   // links were checked above
  for (const m of prose.matchAll(/(?<![\w/.-])([A-Z][A-Z_]+\.md)\b/g)) {
    assert.fail(`README names ${m[1]} without its path; link docs/${m[1]}`);
  }
  // Paths in backticks that point into the tree (files, not directories or globs) must exist;
  // none may point outside the repository.
  for (const m of md.matchAll(/`([^`\s]+)`/g)) {
    const p = m[1];
    assert.ok(!p.startsWith('../'), `README points outside the repository: ${p}`);
    if (/^(src|bindings|tests|web|demo|mk|scripts|docs|\.ci)\/[^{}*$…]*\.[a-z]+$/.test(p)) {
      assert.ok(tracked.has(p), `README names ${p}, which the repository does not track`);
    }
  }
});

test('docs/ holds the contract documents the README links', async () => {
  for (const name of ['SEMANTICS.md', 'CONTRACT.md']) {
    const text = await readFile(join(root, 'docs', name), 'utf8');
    assert.match(text, /^# /, `docs/${name} is a markdown document`);
  }
});

// The tarball installed into an empty project, offline, once for the tests below.
let installedProject;
function installed() {
  installedProject ??= (async () => {
    const project = join(dir, 'project');
    await mkdir(project, { recursive: true });
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)], { cwd: project, env: npmEnv });
    return project;
  })();
  return installedProject;
}

// Runs an ES module in the user's project; its last stdout line is JSON.
async function inProject(name, source, nodeArgs = []) {
  const project = await installed();
  await writeFile(join(project, name), source);
  const { stdout } = await run(process.execPath, [...nodeArgs, name], { cwd: project });
  return JSON.parse(stdout.trim().split('\n').pop());
}

const SMALL_CASE = `{
  value: { data: new Float32Array([1, 2, 3, 4]), shape: [1, 4, 1, 1] },
  spatialShapes: [[2, 2]],
  samplingLocations: { data: new Float32Array([0.5, 0.5]), shape: [1, 1, 1, 1, 1, 2] },
  attentionWeights: { data: new Float32Array([2]), shape: [1, 1, 1, 1, 1] },
}`;

test('npm pack + install the tarball into an empty project: ESM import and CommonJS require work', async () => {
  const results = await inProject('use.mjs', `
    import { init } from 'ms-deform-attn';
    import { referenceForward } from 'ms-deform-attn/reference';
    const results = [];
    for (const simd of [true, false]) {
      const msda = await init({ simd });
      const args = ${SMALL_CASE};
      results.push([msda.backend, msda.forward(args).data[0], referenceForward(args).data[0]]);
    }
    console.log(JSON.stringify(results));
  `);
  assert.deepEqual(results, [['wasm', 5, 5], ['wasm-scalar', 5, 5]]);

  // CommonJS: require() of the ES module, as engines promises.
  const project = await installed();
  await writeFile(join(project, 'use.cjs'), `
    const { init } = require('ms-deform-attn');
    init().then((msda) => console.log(msda.backend));
  `);
  const cjs = await run(process.execPath, ['use.cjs'], { cwd: project });
  assert.equal(cjs.stdout.trim(), 'wasm');
  const installedPkg = JSON.parse(await readFile(join(project, 'node_modules/ms-deform-attn/package.json'), 'utf8'));
  assert.equal(installedPkg.name, 'ms-deform-attn');
});

// A random backward-sized case (seeded), run on each backend in the installed package: the
// prebuilt addon must give the wasm module's bits.
const RANDOM_CASE = `
  let seed = 12345;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
  const t = (shape) => ({ data: Float32Array.from({ length: shape.reduce((a, b) => a * b) }, rand), shape });
  const args = { value: t([2, 20, 3, 5]), spatialShapes: [[4, 4], [2, 2]], samplingLocations: t([2, 7, 3, 2, 2, 2]),
    attentionWeights: t([2, 7, 3, 2, 2]), gradOutput: t([2, 7, 15]) };
  const { gradOutput, ...fwd } = args;
  const bits = (m) => { const g = m.backward(args); return [m.forward(fwd), g.gradValue, g.gradSamplingLocations, g.gradAttentionWeights]
    .map((x) => Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength).toString('base64')); };
`;

test('installed package: backend native loads the prebuilt addon (no build step), same bits as wasm; auto picks it', {
  skip: `${process.platform}-${process.arch}` !== 'linux-x64' && 'the package ships a prebuild for linux-x64 only',
}, async () => {
  const project = await installed();
  const pkgDir = join(project, 'node_modules/ms-deform-attn');
  await assert.rejects(readFile(join(pkgDir, 'build/native/msda.node')), { code: 'ENOENT' }, 'no build tree in the package');
  const r = await inProject('native.mjs', `
    import { init } from 'ms-deform-attn';
    import { nativeAddonPath } from 'ms-deform-attn/native';
    ${RANDOM_CASE}
    const native = await init({ backend: 'native' });
    const auto = await init({ backend: 'auto' });
    const wasm = await init();
    console.log(JSON.stringify({ path: nativeAddonPath(), backends: [native.backend, auto.backend, wasm.backend],
      same: JSON.stringify(bits(native)) === JSON.stringify(bits(wasm)), autoIsNative: auto._backend === native._backend }));
  `);
  assert.equal(r.path, join(pkgDir, 'prebuilds/linux-x64/ms-deform-attn.node'));
  assert.deepEqual(r.backends, ['native', 'native', 'wasm']);
  assert.ok(r.same, 'native and wasm give the same bits');
  assert.ok(r.autoIsNative, "backend 'auto' shares the native backend (each init() gives its own instance)");
});

test('installed package on a platform without a prebuild: an Error with .code, and auto falls back to wasm', async () => {
  // process.platform/arch as another machine reports them, before the package is imported.
  const r = await inProject('elsewhere.mjs', `
    Object.defineProperty(process, 'platform', { value: 'darwin' });
    Object.defineProperty(process, 'arch', { value: 'arm64' });
    const { init } = await import('ms-deform-attn');
    ${RANDOM_CASE}
    let error;
    try { await init({ backend: 'native' }); } catch (e) { error = { name: e.name, code: e.code, message: e.message }; }
    const auto = await init({ backend: 'auto' });
    const wasm = await init();
    console.log(JSON.stringify({ error, auto: auto.backend, same: JSON.stringify(bits(auto)) === JSON.stringify(bits(wasm)) }));
  `);
  assert.equal(r.error?.code, 'MSDA_NATIVE_UNAVAILABLE', JSON.stringify(r.error));
  assert.equal(r.error.name, 'Error');
  assert.match(r.error.message, /not available on darwin-arm64/);
  assert.match(r.error.message, /linux-x64/);
  assert.match(r.error.message, /make native/);
  assert.match(r.error.message, /backend: 'auto'/);
  assert.equal(r.auto, 'wasm');
  assert.ok(r.same);
});

test('an addon that does not load (wrong file): an Error with .code and the cause; auto still gives wasm', async () => {
  const r = await inProject('broken.mjs', `
    import { writeFileSync } from 'node:fs';
    import { init } from 'ms-deform-attn';
    writeFileSync('not-an-addon.node', 'hello');
    let error;
    try { await init({ backend: 'native', addonPath: './not-an-addon.node' }); }
    catch (e) { error = { code: e.code, message: e.message, cause: e.cause?.message }; }
    const auto = await init({ backend: 'auto', addonPath: './not-an-addon.node' });
    console.log(JSON.stringify({ error, auto: auto.backend }));
  `);
  assert.equal(r.error?.code, 'MSDA_NATIVE_UNAVAILABLE');
  assert.match(r.error.message, /cannot load the native addon \.\/not-an-addon\.node on /);
  assert.match(r.error.cause, /invalid ELF header|not-an-addon/);
  assert.equal(r.auto, 'wasm');
});

// The prebuild must run on every linux-x64 Node >= 20 and CPU: only N-API from Node (no V8 or
// libuv symbols, which change between versions) and at most the glibc the README states. It holds
// AVX2 and AVX-512 kernels, picked by cpuid at run time, so whether it runs on a CPU without them
// is shown by running it on one: Node under qemu's user-mode emulator with older CPU models.
test('the prebuilt addon: N-API only, glibc <= 2.34', {
  skip: `${process.platform}-${process.arch}` !== 'linux-x64' && 'linux-x64 only',
}, async () => {
  const addon = join(await installed(), 'node_modules/ms-deform-attn/prebuilds/linux-x64/ms-deform-attn.node');
  const { stdout: dyn } = await run('objdump', ['-T', addon], { maxBuffer: 1 << 24 });
  const undefinedSymbols = dyn.split('\n').filter((l) => l.includes('*UND*')).map((l) => l.trim().split(/\s+/).pop());
  const fromNode = undefinedSymbols.filter((name) => !/^(napi_|_ITM_|__gmon_start__|__cxa_finalize)/.test(name))
    .filter((name) => !dyn.split('\n').some((l) => l.endsWith(name) && /\(GLIBC_[0-9.]+\)/.test(l)));
  assert.deepEqual(fromNode, [], 'every undefined symbol is N-API or glibc');
  assert.ok(undefinedSymbols.some((n) => n.startsWith('napi_')), 'the addon uses N-API');
  const glibc = [...dyn.matchAll(/GLIBC_(\d+)\.(\d+)/g)].map((m) => [Number(m[1]), Number(m[2])]);
  for (const [maj, min] of glibc) assert.ok(maj < 2 || (maj === 2 && min <= 34), `needs GLIBC_${maj}.${min}, README says 2.34`);
});

test('the prebuilt addon on CPUs without AVX-512 or AVX (qemu -cpu Haswell, Nehalem): the widest ISA each has, this machine\'s bits', {
  skip: `${process.platform}-${process.arch}` !== 'linux-x64' && 'linux-x64 only',
}, async () => {
  const project = await installed();
  await writeFile(join(project, 'cpu.mjs'), `
    import { init } from 'ms-deform-attn';
    ${RANDOM_CASE}
    const native = await init({ backend: 'native' });
    console.log(JSON.stringify({ isa: native.isa, bits: bits(native) }));
  `);
  const onCpu = async (cpu) => {
    const command = cpu ? ['qemu-x86_64', ['-cpu', cpu, process.execPath, 'cpu.mjs']] : [process.execPath, ['cpu.mjs']];
    const env = { ...process.env };
    delete env.MSDA_ISA;
    const { stdout } = await run(command[0], command[1], { cwd: project, env, maxBuffer: 1 << 24 });
    return JSON.parse(stdout.trim().split('\n').pop());
  };
  const here = await onCpu(null);
  for (const [cpu, isa] of [['Haswell', 'avx2'], ['Nehalem', 'sse2']]) {
    const there = await onCpu(cpu);
    assert.equal(there.isa, isa, `on a ${cpu} CPU the addon runs ${isa}`);
    assert.deepEqual(there.bits, here.bits, `on a ${cpu} CPU (${isa}) the bits are this machine's (${here.isa})`);
  }
});

const tsc = join(root, 'node_modules/typescript/bin/tsc');
async function typecheck(args) {
  try {
    await run(process.execPath, [tsc, ...args], { cwd: root });
  } catch (e) {
    assert.fail(`tsc reported errors:\n${e.stdout}${e.stderr}`);
  }
}

test('index.d.ts covers the public API: tsc --strict accepts the typed usage files (Node types)', async () => {
  await typecheck(['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022',
    '--types', 'node', 'tests/js/types/usage.ts', 'tests/js/types/outputs.ts']);
});

test('outputs go to Blob and crypto.subtle.digest, the reference takes ForwardArgs: tsc --strict with the DOM types', async () => {
  // A browser project: the DOM library and no Node types (a tsconfig, as the command line cannot say "types": []).
  const config = join(dir, 'tsconfig.dom.json');
  await writeFile(config, JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022',
      lib: ['es2023', 'dom'], types: [] },
    files: [join(root, 'tests/js/types/outputs.ts')],
  }));
  await typecheck(['-p', config]);
});

// What the types promise at run time: forward/backward results own a plain ArrayBuffer on every
// backend, threads included (whose wasm memory is a SharedArrayBuffer); the reference's too.
test('results typed Float32Array<ArrayBuffer> own an ArrayBuffer on every backend', async () => {
  const { init } = await import('../../bindings/index.js');
  const { referenceForward, referenceBackward } = await import('../../bindings/reference.js');
  const t = (shape) => ({ data: Float32Array.from({ length: shape.reduce((a, b) => a * b) }, (_, i) => (i % 7) / 7), shape });
  const args = { value: t([1, 20, 2, 3]), spatialShapes: [[4, 4], [2, 2]], samplingLocations: t([1, 5, 2, 2, 2, 2]),
    attentionWeights: t([1, 5, 2, 2, 2]) };
  const backwardArgs = { ...args, gradOutput: t([1, 5, 6]) };
  const owns = (what, a) => assert.equal(Object.prototype.toString.call(a.buffer), '[object ArrayBuffer]', what);
  for (const options of [{}, { simd: false }, { threads: 2 }, { backend: 'native' }]) {
    const msda = await init(options);
    if (options.threads) assert.equal(msda.threads, 2, 'threads run');
    const what = JSON.stringify(options);
    owns(`${what} forward`, msda.forward(args).data);
    for (const [k, g] of Object.entries(msda.backward(backwardArgs))) owns(`${what} ${k}`, g.data);
  }
  owns('reference forward', referenceForward(args).data);
  for (const [k, g] of Object.entries(referenceBackward(backwardArgs))) owns(`reference ${k}`, g.data);
});

// TypeScript before 6 with `"module": "commonjs"` resolves as node10, which ignores "exports":
// a subpath's types are found only through typesVersions (without it, `import ... from
// 'ms-deform-attn/npy'` failed with TS2307 under TypeScript 5.9, checked by hand: TypeScript 7
// here no longer has node10). Each subpath export with types is mapped to the same file.
test('typesVersions maps every subpath export to its types, for TypeScript 5 under node10 resolution', () => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const map = pkg.typesVersions?.['*'] ?? {};
  const subpaths = Object.entries(pkg.exports).filter(([k, v]) => k !== '.' && typeof v === 'object' && v.types);
  assert.ok(subpaths.length >= 4, 'subpath exports with types');
  for (const [key, { types }] of subpaths) {
    assert.deepEqual(map[key.slice(2)], [types], `typesVersions["*"]["${key.slice(2)}"] should be ["${types}"]`);
  }
  assert.deepEqual(Object.keys(map).sort(), subpaths.map(([k]) => k.slice(2)).sort(), 'nothing else mapped');
});
