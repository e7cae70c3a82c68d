// The package as users get it: `npm pack` (file list, sizes, modes, metadata), the links of the
// README and docs/ against the repository and the tarball, docs/cli.md's worked example, the
// tarball installed into an empty project offline and used by name from ESM and CommonJS; and
// the hand-written typings checked by `tsc --strict`.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile, readFile, mkdir, readdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

// Budgets (bytes). The tarball is what `npm install` downloads; the README is shown on the
// registry page and installed with the package, so it must not dominate it.
// The prebuilt addon is most of it: four builds of the kernels (SSE2, AVX2, AVX-512, scalar);
// the interactive page (msda demo), the WebGPU backend and the .npz / half-precision readers
// added ~90 kB packed (600 KiB -> 617 kB); half-precision value rows in the kernels (float16 and
// bfloat16 copies of the AVX2 kernels, bfloat16 of wasm SIMD's, the exact and split paths for every
// value kind) ~70 kB (676 kB -> 745 kB). The tfjs training and per-frame worker recipes in docs/
// and the worker's prepared problems took the unpacked size past 1,920 KiB (1,967,672 bytes).
// The WebGPU backward's radix sort and kept scratch, the options' table and make-case took the
// tarball past 768 KiB (789,972 bytes) and the unpacked size past 1,984 KiB (2,040,742 bytes).
// ms-deform-attn/onnx (bindings/onnx*, ONNX's schema as JSON, docs/onnx.md) ~18 kB packed, ~58 kB
// unpacked (808,527 bytes packed with it); its ORT and protobufjs stay optional peers.
// The WGSL products kept apart from FMA contraction (rounded(), the probe's report, docs/webgpu.md's
// bits section) took the unpacked size past 2,080 KiB (2,134,229 bytes).
// The threaded backward's zero stage and docs/threads.md's measurements of where the second
// thread goes took the tarball past 800 KiB (821,770 bytes).
const TARBALL_BUDGET = 832 * 1024;
const UNPACKED_BUDGET = 2112 * 1024;
const README_SHARE = 0.15;

// What the tarball may hold: the code, its types, the wasm modules, the docs and the picture the
// README shows, the interactive page (msda demo), the license. Nothing from tests, sources or the build tree.
const ALLOWED = /^(package\.json|README\.md|LICENSE|bindings\/((core|cli|wasm|workers|webgpu|webgpu\/kernels|node|tfjs|onnx)\/)?[^/]+\.(js|d\.ts)|dist\/msda-(simd|scalar|simd-threads)\.wasm|dist\/(threads-worker|msda-worker)\.js|prebuilds\/[a-z0-9]+-[a-z0-9]+\/ms-deform-attn\.node|docs\/[A-Za-z]+\.md|docs\/demo\.webp|web\/(index\.html|style\.css|[a-z-]+\.js))$/;
const REQUIRED = ['package.json', 'README.md', 'LICENSE', 'docs/SEMANTICS.md', 'docs/CONTRACT.md', 'docs/demo.webp',
  'bindings/index.js', 'bindings/wasm/loader.js', 'bindings/index.d.ts', 'bindings/native.js', 'bindings/node/addon.js', 'bindings/node/serve.js', 'bindings/reference.js',
  'bindings/wasm/threads.js', 'bindings/workers/threads-worker.js', 'dist/msda-simd.wasm', 'dist/msda-scalar.wasm',
  'dist/msda-simd-threads.wasm', 'dist/threads-worker.js', 'dist/msda-worker.js', 'bindings/browser.js', 'bindings/node.js', 'bindings/core/api.js', 'bindings/webgpu/backend.js', 'bindings/webgpu/encode.js', 'bindings/webgpu/plan.js', 'bindings/webgpu/tensors.js', 'bindings/webgpu/gpu.js', 'bindings/webgpu/kernels/problem.js', 'bindings/webgpu/kernels/geometry.js', 'bindings/webgpu/kernels/forward.js', 'bindings/webgpu/kernels/backward.js', 'bindings/webgpu/kernels/walks.js', 'bindings/webgpu/kernels/segments.js', 'bindings/webgpu/kernels/probe.js', 'bindings/webgpu/kernels/half.js', 'bindings/webgpu/node-gpu.js', 'bindings/core/args.js', 'bindings/core/init.js', 'bindings/cli/numbers.js', 'bindings/cli/main.js', 'bindings/cli/texts.js', 'bindings/tfjs.js', 'bindings/tfjs/instance.js', 'bindings/tfjs/op.js', 'bindings/tfjs/layer.js',
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

// The README is the front page: what it is, install, quickstarts, the map of the tree and links;
// everything else lives in docs/.
const README_LINES = 250;
test(`README.md is at most ${README_LINES} lines, and the map of the tree is in its first 100`, async () => {
  const lines = (await readFile(join(root, 'README.md'), 'utf8')).split('\n');
  assert.ok(lines.length - 1 <= README_LINES, `README.md has ${lines.length - 1} lines, at most ${README_LINES}`);
  const map = lines.findIndex((l) => /^## The tree: what runs where$/.test(l));
  assert.ok(map >= 0 && map < 100, `the map's heading is on line ${map + 1}`);
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
// The links of the README, of every page under docs/ and of every other tracked .md: on the registry
// page relative links resolve against the repository, and readers of node_modules see the
// tarball; so every relative link and image must be a file the repository tracks (resolved
// against the linking file's folder), images and docs must also be in the tarball, and every
// #anchor must name a heading of the file it points into.

function markdownLinks(md) {
  const text = md.replace(/```[\s\S]*?```/g, '');   // code blocks hold no links
  const links = [];
  for (const m of text.matchAll(/(!?)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    links.push({ image: m[1] === '!', target: m[2] });
  }
  for (const m of text.matchAll(/<(img|a)\s[^>]*?(src|href)="([^"]+)"/g)) links.push({ image: m[1] === 'img', target: m[3] });
  return links;
}

// GitHub's (and npm's) heading anchors: the heading's text (links and images as their text,
// inline code as its content, HTML tags dropped), lower case, punctuation dropped, each space a
// hyphen; a repeated anchor gets -1, -2, … in order.
function anchors(md) {
  const out = new Set();
  const seen = new Map();
  for (const m of md.replace(/```[\s\S]*?```/g, '').matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const text = m[1].replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/<[^>]+>/g, '');
    const slug = text.trim().toLowerCase().replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '').replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

// Every problem with the relative links of one markdown file (a path relative to the
// repository), given the tracked files, the tarball's files and a reader of tracked files.
function linkProblems(file, md, { tracked, inTarball, read, pkg }) {
  const problems = [];
  const dir = posix.dirname(file);
  for (const { image, target } of markdownLinks(md)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) {
      // The registry page resolves relative images only against a repository address, which
      // the package has none of yet: images come from the published tarball itself, through the
      // CDN that serves every npm package's files, at this version.
      if (image) {
        const prefix = `https://cdn.jsdelivr.net/npm/${pkg.name}@${pkg.version}/`;
        if (!target.startsWith(prefix)) problems.push(`${file}: image ${target} is not served from this version's tarball (${prefix}…)`);
        else {
          const served = target.slice(prefix.length);
          if (!tracked.has(served) || !inTarball.has(served)) problems.push(`${file}: image ${target}: ${served} is not tracked and in the tarball`);
        }
      }
      continue;
    }
    const hash = target.indexOf('#');
    const path = hash < 0 ? target : target.slice(0, hash);
    const fragment = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
    let to = file;
    if (path !== '') {
      if (path.startsWith('/')) { problems.push(`${file}: link ${target} is absolute`); continue; }
      to = posix.normalize(posix.join(dir, decodeURIComponent(path))).replace(/\/$/, '');
      if (to.startsWith('../') || to === '..') { problems.push(`${file}: link ${target} leaves the repository`); continue; }
      if (!tracked.has(to)) { problems.push(`${file}: ${image ? 'image' : 'link'} ${target}: ${to} is not tracked by git`); continue; }
      const shipped = file === 'README.md' || file.startsWith('docs/');
      if (shipped && (image || to.startsWith('docs/') || to === 'LICENSE' || to === 'README.md') && !inTarball.has(to)) {
        problems.push(`${file}: ${image ? 'image' : 'link'} ${target}: ${to} is not in the tarball`);
      }
    }
    if (fragment !== null) {
      if (!to.endsWith('.md')) { problems.push(`${file}: link ${target}: an anchor into ${to}, which is not markdown`); continue; }
      const heads = anchors(to === file ? md : read(to));
      if (!heads.has(fragment)) problems.push(`${file}: link ${target}: no heading of ${to} has the anchor #${fragment} (have: ${[...heads].join(', ')})`);
    }
  }
  return problems;
}

// Every markdown file the repository tracks: the README, the pages under docs/, and the
// folders' own (tests/README.md, bindings/LAYOUT.md, …).
function markdownFiles(tracked) {
  return [...tracked].filter((f) => f.endsWith('.md')).sort();
}

test('README, docs/ and every tracked .md: every relative link, image and #anchor resolves (images and docs in the tarball too)', async () => {
  const { stdout } = await run('git', ['ls-files', '-z'], { cwd: root, maxBuffer: 1 << 24 });
  const tracked = new Set(stdout.split('\0').filter(Boolean));
  const inTarball = new Set(packed.files.map((f) => f.path));
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  const read = (f) => readFileSync(join(root, f), 'utf8');
  const files = markdownFiles(tracked);
  for (const page of ['README.md', 'docs/api.md', 'docs/guarantees.md', 'docs/bundlers.md', 'tests/README.md']) {
    assert.ok(files.includes(page), `${page} is tracked`);
  }
  const readme = read('README.md');
  assert.ok(markdownLinks(readme).some((l) => l.image), 'the README shows a picture');
  // Every page under docs/ ships in the package and is linked from the README.
  const readmeTargets = new Set(markdownLinks(readme).map((l) => l.target.split('#')[0]));
  for (const f of files.filter((f) => f.startsWith('docs/'))) {
    assert.ok(inTarball.has(f), `${f} is in the tarball`);
    assert.ok(readmeTargets.has(f), `the README links ${f}`);
  }
  const problems = [];
  for (const file of files) {
    const md = read(file);
    problems.push(...linkProblems(file, md, { tracked, inTarball, read, pkg }));
    // Documents named in prose must be ones the repository has, under the name it has them
    // (the two contract documents are kept as they were written).
    if (!['docs/CONTRACT.md', 'docs/SEMANTICS.md'].includes(file)) {
      const prose = md.replace(/!?\[[^\]]*\]\([^)]*\)/g, '');   // links were checked above
      for (const m of prose.matchAll(/(?<![\w/.-])([A-Z][A-Z_]+\.md)\b/g)) problems.push(`${file} names ${m[1]} without its path; link it`);
    }
    // Paths in backticks that point into the tree (files, not directories or globs) must exist;
    // none may point outside the repository.
    for (const m of md.matchAll(/`([^`\s]+)`/g)) {
      const p = m[1];
      if (p.startsWith('../')) problems.push(`${file} points outside the repository: ${p}`);
      if (/^(src|bindings|tests|web|demo|mk|scripts|docs|\.ci)\/[^{}*$…<>]*\.[a-z]+$/.test(p) && !tracked.has(p)) {
        problems.push(`${file} names ${p}, which the repository does not track`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

test('the link checker finds a missing file, a missing anchor, a wrong anchor in another page and a link out of the tree', () => {
  const tracked = new Set(['README.md', 'docs/a.md', 'docs/b.md', 'src/x.c']);
  const pages = { 'docs/b.md': '# B page\n\n## Two words: `code`\n\n## Two words: `code`\n' };
  const env = { tracked, inTarball: tracked, read: (f) => pages[f], pkg: { name: 'p', version: '1' } };
  const ok = '# A\n\n[b](b.md) [b2](b.md#two-words-code-1) [top](#a) [readme](../README.md) [x](../src/x.c)\n';
  assert.deepEqual(linkProblems('docs/a.md', ok, env), []);
  const bad = ok + '[c](c.md) [b3](b.md#three) [self](#nowhere) [up](../../x.md) [x](src/x.c)\n';
  const problems = linkProblems('docs/a.md', bad, env);
  assert.equal(problems.length, 5, problems.join('\n'));
  for (const what of ['docs/c.md is not tracked', '#three', '#nowhere', 'leaves the repository', 'docs/src/x.c is not tracked']) {
    assert.ok(problems.some((p) => p.includes(what)), `reported: ${what}\n${problems.join('\n')}`);
  }
});

test('docs/ holds the contract documents the README links', async () => {
  for (const name of ['SEMANTICS.md', 'CONTRACT.md']) {
    const text = await readFile(join(root, 'docs', name), 'utf8');
    assert.match(text, /^# /, `docs/${name} is a markdown document`);
  }
});

// The tarball installed into a fresh `npm init -y` project, offline, once for the tests below.
let installedProject;
function installed() {
  installedProject ??= freshProject('project');
  return installedProject;
}

async function freshProject(name) {
  const project = join(dir, name);
  await mkdir(project, { recursive: true });
  await run('npm', ['init', '-y'], { cwd: project, env: npmEnv });
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)], { cwd: project, env: npmEnv });
  return project;
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

// What `npm install ms-deform-attn` puts in a project: the package alone (tfjs-core and webgpu are
// optional peers, installed only by those who use them), well under a browser app's budget.
const INSTALLED_BUDGET = 8 * 1024 * 1024;

async function treeBytes(path) {
  let total = 0;
  for (const e of await readdir(path, { withFileTypes: true })) {
    const p = join(path, e.name);
    total += e.isDirectory() ? await treeBytes(p) : (await stat(p)).size;
  }
  return total;
}

test(`npm install of the tarball installs that package alone, <= ${INSTALLED_BUDGET} bytes in node_modules`, async () => {
  const modules = join(await installed(), 'node_modules');
  const names = (await readdir(modules)).filter((n) => !['.bin', '.package-lock.json'].includes(n));
  assert.deepEqual(names, ['ms-deform-attn'], 'nothing but the package');
  const bytes = await treeBytes(modules);
  assert.ok(bytes <= INSTALLED_BUDGET, `node_modules holds ${bytes} bytes, budget ${INSTALLED_BUDGET}`);
  const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  assert.equal(pkg.peerDependenciesMeta?.webgpu?.optional, true, 'webgpu is an optional peer');
  assert.ok(pkg.devDependencies?.webgpu, 'and a dev dependency, for the WebGPU tests');
});

// The README's Node quickstart as a user pastes it: into the file its first line names, in a fresh
// `npm init -y` project; it prints what its comments say.
test("the README's Node quickstart runs as pasted and prints what it says", async () => {
  const readme = await readFile(join(root, 'README.md'), 'utf8');
  const code = readme.slice(readme.indexOf('## Quickstart: Node')).match(/```js\n([\s\S]*?)```/)[1];
  const file = code.match(/^\/\/ (\S+\.mjs)\b/)?.[1];
  assert.ok(file, `the snippet's first line names its file (.mjs: a fresh project is CommonJS): ${code.split('\n')[0]}`);
  const project = await installed();
  await writeFile(join(project, file), code);
  const { stdout } = await run(process.execPath, [file], { cwd: project });
  const promised = [...code.matchAll(/console\.log\(.*\/\/ (.+)$/gm)].map((m) => m[1].trim());
  assert.ok(promised.length > 0, 'the snippet prints a result and says what');
  assert.deepEqual(stdout.trim().split('\n'), promised);
});

// docs/cli.md's worked example, as an npm user runs it: its make-case.mjs and its shell lines, in
// the installed project, through `npx msda`; the listing and crosscheck's report as printed there.
test("docs/cli.md's worked example runs as written in the installed package (npx msda)", {
  skip: `${process.platform}-${process.arch}` !== 'linux-x64' && 'the example runs the native backend, shipped for linux-x64 only',
}, async () => {
  const project = await installed();
  const doc = await readFile(join(root, 'docs/cli.md'), 'utf8');
  const example = doc.slice(doc.indexOf('## Worked example'));
  // The first indented block: "$ command" lines, each followed by what it prints.
  const block = example.match(/\n((?: {4}.*\n)+)/)[1];
  const steps = [];
  for (const line of block.split('\n').filter(Boolean).map((l) => l.slice(4))) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2).replace(/\s+#.*$/, '').trim().split(/\s+/), printed: [] });
    else steps.at(-1).printed.push(line);
  }
  assert.deepEqual(steps.map((s) => s.command.slice(0, 2).join(' ')), ['npx msda', 'npx msda', 'npx msda', 'ls out', 'npx msda', 'npx msda']);
  assert.equal(steps[0].command[2], 'make-case', 'the case is made by msda make-case');
  for (const { command: [cmd, ...args], printed } of steps) {
    let stdout;
    if (cmd === 'ls') stdout = (await readdir(join(project, args[0]))).sort().join('  ') + '\n';
    else {
      assert.equal(args[0], 'msda', 'npx runs the package\'s bin');
      ({ stdout } = await run('npx', args, { cwd: project, env: { ...npmEnv, npm_config_offline: 'true' } }));
    }
    assert.deepEqual(stdout.split('\n').filter(Boolean).map((l) => l.trimEnd()), printed.map((l) => l.trimEnd()), `${cmd} ${args.join(' ')}`);
  }
  assert.deepEqual((await readdir(join(project, 'out-wasm'))).sort(), ['grad_attention_weights.npy', 'grad_sampling_locations.npy', 'grad_value.npy']);
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

// ms-deform-attn/onnx imports without its optional peers; createSession says what to install.
test("installed package without protobufjs: ms-deform-attn/onnx imports, createSession says 'npm install protobufjs'", async () => {
  const r = await inProject('onnx.mjs', `
    import { createSession, ONNX_UNAVAILABLE } from 'ms-deform-attn/onnx';
    const ort = { InferenceSession: { create: async () => { throw new Error('never reached'); } }, Tensor: function Tensor() {} };
    let error;
    try { await createSession(ort, new Uint8Array(8)); } catch (e) { error = { code: e.code, message: e.message }; }
    console.log(JSON.stringify({ error, code: ONNX_UNAVAILABLE }));
  `);
  assert.equal(r.error?.code, 'MSDA_ONNX_UNAVAILABLE', JSON.stringify(r.error));
  assert.equal(r.code, 'MSDA_ONNX_UNAVAILABLE');
  assert.match(r.error.message, /the 'protobufjs' package .* did not load .*: npm install protobufjs/);
});

// The prebuild must run on every linux-x64 Node >= 20 and CPU: only N-API from Node (no V8 or
// libuv symbols, which change between versions) and at most the glibc docs/api.md states. It holds
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
  for (const [maj, min] of glibc) assert.ok(maj < 2 || (maj === 2 && min <= 34), `needs GLIBC_${maj}.${min}, docs/api.md says 2.34`);
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

// docs/webgpu.md's Node recipe: without the 'webgpu' package init says to install it; after
// `npm install webgpu` (offline here: of the copy the dev dependency installed) it runs, on
// SwiftShader's Vulkan driver, with wasm's bits on the quickstart's case.
const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
test('Node WebGPU in an installed project: init says `npm install webgpu`, and after it works', {
  skip: !existsSync(SWIFTSHADER_ICD) && `no Vulkan driver here (${SWIFTSHADER_ICD})`,
}, async () => {
  const project = await freshProject('project-webgpu');
  const script = `
    import { init } from 'ms-deform-attn';
    const args = ${SMALL_CASE};
    try {
      const gpu = await init({ backend: 'webgpu' });
      const wasm = await init();
      console.log(JSON.stringify({ backend: gpu.backend, gpu: Array.from((await gpu.forward(args)).data), wasm: Array.from(wasm.forward(args).data) }));
      gpu.dispose();
    } catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }
  `;
  await writeFile(join(project, 'gpu.mjs'), script);
  const env = { ...process.env, VK_ICD_FILENAMES: SWIFTSHADER_ICD };
  const before = JSON.parse((await run(process.execPath, ['gpu.mjs'], { cwd: project, env })).stdout.trim().split('\n').pop());
  assert.equal(before.code, 'MSDA_WEBGPU_UNAVAILABLE', JSON.stringify(before));
  assert.match(before.message, /the 'webgpu' package \(Dawn for Node\) did not load .*: npm install webgpu/);
  const doc = await readFile(join(root, 'docs/webgpu.md'), 'utf8');
  assert.match(doc, /\| Node \| `npm install webgpu`/, 'docs/webgpu.md gives the same command');
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(root, 'node_modules/webgpu')], { cwd: project, env: npmEnv });
  const after = JSON.parse((await run(process.execPath, ['gpu.mjs'], { cwd: project, env })).stdout.trim().split('\n').pop());
  assert.deepEqual(after, { backend: 'webgpu', gpu: after.wasm, wasm: [5] });
});
