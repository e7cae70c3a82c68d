// Zero-config bundling, as users get it: `npm pack`, install the tarball into fresh projects
// (offline, from the cache), build the app in tests/bundlers/app/ with esbuild, webpack 5 and
// Vite exactly as docs/bundlers.md's recipes say, and load each in Chromium with and without
// cross-origin isolation. On the page and in a Web Worker the app computes forward and backward
// on 2 threads where it may (1 with a notice where it may not) and must give Node's bits.
// Also the package served from another origin (a CDN): imported from there unbundled, and an
// esbuild bundle whose wasmPaths point there; threads start all the same (blob: workers).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { PATIENCE_MS } from '../patience.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const APP = path.join(ROOT, 'tests/bundlers/app');
const BIN = path.join(ROOT, 'node_modules/.bin');
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.json': 'application/json' };
const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

// docs/bundlers.md's recipes, run in the app's directory (npx resolves the same binaries).
const RECIPES = {
  esbuild: {
    html: ['public/index.html', '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>esbuild</title><script type="module" src="/index.js"></script>'],
    steps: [
      ['esbuild', ['src/index.js', 'src/worker.js', '--bundle', '--platform=browser', '--format=esm', '--outdir=public', '--log-level=warning']],
      ['cp', ['-r', 'node_modules/ms-deform-attn/dist', 'public/msda']],
    ],
    out: 'public',
    query: `?wasmPaths=${encodeURIComponent('/msda/')}`,
  },
  webpack: {
    html: ['dist/index.html', '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>webpack</title><script src="main.js"></script>'],
    steps: [['webpack', ['--mode', 'production']]],
    out: 'dist',
    query: '',
  },
  vite: {
    html: ['index.html', '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>vite</title><script type="module" src="/src/index.js"></script>'],
    steps: [['vite', ['build', '--logLevel', 'warn']]],
    out: 'dist',
    query: '',
  },
};

let work;        // temporary directory: the tarball, the projects
let browser;
let want;        // Node's digest of the same computation, from the installed package
const built = {}; // bundler -> { dir, output (the builds' own words), files: { name: text } }
const servers = [];

function serve(root, headers) {
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = path.join(root, rel.endsWith('/') ? `${rel}index.html` : rel);
    if (!file.startsWith(root + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`)));
}

// The files of a build, as text (to look for what must not be there).
function readTree(dir) {
  const files = {};
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const full = path.join(entry.parentPath ?? entry.path, entry.name);
    files[path.relative(dir, full)] = fs.readFileSync(full);
  }
  return files;
}

before(async () => {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  work = await mkdtemp(path.join(tmpdir(), 'msda-bundlers-'));
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], { cwd: ROOT, env: npmEnv, maxBuffer: 1 << 24 });
  const tarball = path.join(work, JSON.parse(stdout)[0].filename);
  const base = path.join(work, 'base');
  await mkdir(base);
  await writeFile(path.join(base, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: base, env: npmEnv });
  await cp(path.join(APP, 'src'), path.join(base, 'src'), { recursive: true });
  const env = { ...npmEnv, PATH: `${BIN}:${process.env.PATH}` };
  for (const [name, recipe] of Object.entries(RECIPES)) {
    const dir = path.join(work, name);
    await cp(base, dir, { recursive: true, verbatimSymlinks: true });
    if (name === 'vite') await writeFile(path.join(dir, recipe.html[0]), recipe.html[1]);
    let output = '';
    for (const [cmd, args] of recipe.steps) {
      const r = await run(cmd, args, { cwd: dir, env, maxBuffer: 1 << 24 });
      output += r.stdout + r.stderr;
    }
    if (name !== 'vite') await writeFile(path.join(dir, recipe.html[0]), recipe.html[1]);
    built[name] = { dir, output, files: readTree(path.join(dir, recipe.out)) };
  }
  // Node's bits, through the installed package (its "node" entry).
  const { compute } = await import(pathToFileURL(path.join(base, 'src/compute.js')).href);
  want = await compute();
  assert.equal(want.threads, 2);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  if (work) await rm(work, { recursive: true, force: true });
});

// Opens url, waits for the app's result, and returns it with every page problem seen.
async function openApp(url) {
  const page = await browser.newPage();
  const problems = [];
  const notices = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  page.on('requestfailed', (r) => problems.push(`requestfailed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') problems.push(`console.${m.type()}: ${m.text()} ${m.location().url}`);
    if (m.type() === 'info') notices.push(m.text());
  });
  await page.goto(url);
  await page.waitForFunction(() => window.__app !== undefined, null, { timeout: PATIENCE_MS });
  const result = await page.evaluate(() => window.__app);
  await page.close();
  return { result, problems, notices };
}

function checkRun(r, isolated, where) {
  assert.equal(r.error, undefined, `${where}: ${r.error}`);
  assert.equal(r.isolated, isolated, `${where}: cross-origin isolated`);
  assert.equal(r.backend, 'wasm');
  if (isolated) {
    assert.equal(r.threads, 2, `${where}: 2 threads`);
    assert.equal(r.partsRun, 6, `${where}: the forward in 2 parts, the backward in 2 parts twice (zero, then walk)`);
    assert.ok(r.workerParts >= 1, `${where}: the threads' worker ran ${r.workerParts} parts`);
  } else {
    assert.equal(r.threads, 1, `${where}: 1 thread without isolation`);
  }
  assert.equal(r.digest, want.digest, `${where}: the bits of Node`);
  assert.equal(r.initWorker.threads, isolated ? 2 : 1, `${where}: initWorker's threads`);
  assert.equal(r.initWorker.digest, want.digest, `${where}: initWorker gives the bits of Node`);
  assert.equal(r.initWorker.transferred, true, `${where}: { transfer: true } moved the inputs`);
}

test('the installed package starts its threads worker by the literal pattern bundlers follow', async () => {
  const source = await readFile(path.join(built.esbuild.dir, 'node_modules/ms-deform-attn/bindings/browser.js'), 'utf8');
  assert.ok(source.includes("new Worker(new URL('./workers/threads-worker.js', import.meta.url), { type: 'module' })"));
  const pkg = JSON.parse(await readFile(path.join(built.esbuild.dir, 'node_modules/ms-deform-attn/package.json'), 'utf8'));
  assert.deepEqual(Object.keys(pkg.exports['.']), ['types', 'browser', 'node', 'default']);
  const resolved = createRequire(path.join(built.esbuild.dir, 'x.js')).resolve('ms-deform-attn/dist/msda-simd.wasm');
  assert.equal(resolved, path.join(built.esbuild.dir, 'node_modules/ms-deform-attn/dist/msda-simd.wasm'), 'the .wasm files resolve by name');
});

test("docs/bundlers.md's recipes are the commands this suite runs", async () => {
  const page = await readFile(path.join(ROOT, 'docs/bundlers.md'), 'utf8');
  assert.ok(page.includes('<!-- BUNDLER RECIPES') && page.includes('<!-- END BUNDLER RECIPES -->'), 'docs/bundlers.md marks its recipes');
  const section = page.slice(page.indexOf('<!-- BUNDLER RECIPES'), page.indexOf('<!-- END BUNDLER RECIPES -->'));
  const blocks = [...section.matchAll(/```sh\n([^`]*)```/g)].map((m) => m[1].trim().split('\n'));
  assert.deepEqual(blocks, Object.values(RECIPES).map((r) => r.steps.map(([cmd, args]) => (cmd === 'cp' ? 'cp' : `npx ${cmd}`) + ` ${args.join(' ')}`)));
  assert.match(section, /init\(\{ wasmPaths: '\/msda\/' \}\)/, 'the esbuild recipe says which wasmPaths the app passes');
});

for (const name of Object.keys(RECIPES)) {
  test(`${name}: builds without a warning; the browser bundle has no node:* import and no addon`, () => {
    const { output, files } = built[name];
    // esbuild and Vite print nothing at their warning level; webpack lists what it emitted.
    if (name === 'webpack') assert.doesNotMatch(output, /WARNING|ERROR|warning|error/, `webpack said:\n${output}`);
    else assert.equal(output.replace(/\x1b\[[0-9;]*m/g, '').trim(), '', `${name} said:\n${output}`);
    const names = Object.keys(files);
    for (const wasm of ['msda-simd.wasm', 'msda-scalar.wasm', 'msda-simd-threads.wasm']) {
      const bytes = fs.readFileSync(path.join(ROOT, 'dist', wasm));
      assert.ok(names.some((f) => files[f].equals(bytes)), `${name} emitted ${wasm} (${names.join(', ')})`);
    }
    for (const [file, bytes] of Object.entries(files)) {
      if (!file.endsWith('.js')) continue;
      const text = bytes.toString('latin1');
      assert.doesNotMatch(text, /["'`]node:[a-z_/]+["'`]/, `${file}: no node:* module`);
      assert.doesNotMatch(text, /\.node["'`]|prebuilds|createRequire\(|process\.dlopen/, `${file}: nothing of the native addon`);
    }
  });

  for (const isolated of [true, false]) {
    test(`${name}: the app in Chromium ${isolated ? 'with' : 'without'} cross-origin isolation, page and Web Worker, Node's bits`, async () => {
      const url = await serve(path.join(built[name].dir, RECIPES[name].out), isolated ? ISOLATION : {});
      const { result, problems, notices } = await openApp(`${url}/${RECIPES[name].query}`);
      assert.equal(result.error, undefined, result.error);
      assert.deepEqual(problems, []);
      checkRun(result.main, isolated, `${name} page`);
      checkRun(result.worker, isolated, `${name} worker`);
      const fallback = notices.filter((n) => /using 1 thread instead of 2/.test(n));
      // init and initWorker's own init, on the page and in the app's worker.
      assert.equal(fallback.length, isolated ? 0 : 4, `one notice per init: ${notices.join(' | ')}`);
    });
  }
}

// Starts `npx vite` (the dev server) in dir; resolves to its URL and the process.
async function viteDev(dir) {
  const server = spawn(path.join(BIN, 'vite'), ['--host', '127.0.0.1', '--port', '0'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let said = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`vite did not start:\n${said}`)), PATIENCE_MS);
    const read = (chunk) => {
      said += chunk;
      const m = /Local:\s+(http:\/\/127\.0\.0\.1:\d+\/)/.exec(said.replace(/\x1b\[[0-9;]*m/g, ''));
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    server.stdout.on('data', read);
    server.stderr.on('data', read);
    server.on('exit', (code) => reject(new Error(`vite exited (${code}):\n${said}`)));
  }).catch((e) => { server.kill(); throw e; });
  return { url, server };
}

test('vite dev server with docs/bundlers.md\'s server.headers snippet as vite.config.js: 2 threads on the page and in its worker, Node\'s bits', async () => {
  const docs = await readFile(path.join(ROOT, 'docs/bundlers.md'), 'utf8');
  const snippet = /<!-- VITE DEV HEADERS[^>]*-->\n```js\n([^`]*)```/.exec(docs);
  assert.ok(snippet, 'docs/bundlers.md has the VITE DEV HEADERS block');
  const dir = path.join(work, 'vite-isolated');
  await cp(built.vite.dir, dir, { recursive: true, verbatimSymlinks: true });
  await writeFile(path.join(dir, 'vite.config.js'), snippet[1]);
  const { url, server } = await viteDev(dir);
  try {
    const { result, problems } = await openApp(url);
    assert.equal(result.error, undefined, result.error);
    assert.deepEqual(problems.filter((p) => !/\[vite\]/.test(p)), []);
    checkRun(result.main, true, 'vite dev page, isolated');
    checkRun(result.worker, true, 'vite dev worker, isolated');
  } finally {
    server.kill();
  }
});

test('vite (the dev server, as `npx vite` starts it): the app runs on the page and in its Web Worker with Node\'s bits', async () => {
  const { url, server } = await viteDev(built.vite.dir);
  try {
    const { result, problems } = await openApp(url);
    assert.equal(result.error, undefined, result.error);
    assert.deepEqual(problems.filter((p) => !/\[vite\]/.test(p)), []);
    checkRun(result.main, false, 'vite dev page');
    checkRun(result.worker, false, 'vite dev worker');
  } finally {
    server.kill();
  }
});

test('served from another origin (a CDN): the package imported from there, and an esbuild bundle with wasmPaths there', async () => {
  // The CDN: the installed package with CORS and CORP headers, as jsDelivr and unpkg send them.
  const cdn = await serve(path.join(built.esbuild.dir, 'node_modules/ms-deform-attn'),
    { 'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' });
  const pages = path.join(work, 'cdn-pages');
  await mkdir(pages);
  await writeFile(path.join(pages, 'index.html'), `<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>cdn</title>
<script type="module">
import { init, initWorker } from '${cdn}/bindings/browser.js';
${(await readFile(path.join(APP, 'src/compute.js'), 'utf8')).replace(/^import .*$/m, '')}
compute().then((main) => ({ main, worker: main }), (e) => ({ error: String(e && e.stack || e) }))
  .then((r) => { window.__app = r; });
</script>`);
  const page = await serve(pages, ISOLATION);
  const unbundled = await openApp(`${page}/`);
  assert.equal(unbundled.result.error, undefined, unbundled.result.error);
  assert.deepEqual(unbundled.problems, []);
  checkRun(unbundled.result.main, true, 'imported from the CDN');

  const app = await serve(path.join(built.esbuild.dir, 'public'), ISOLATION);
  const bundled = await openApp(`${app}/?wasmPaths=${encodeURIComponent(`${cdn}/dist/`)}`);
  assert.equal(bundled.result.error, undefined, bundled.result.error);
  assert.deepEqual(bundled.problems, []);
  checkRun(bundled.result.main, true, 'esbuild page, wasmPaths on the CDN');
  checkRun(bundled.result.worker, true, 'esbuild worker, wasmPaths on the CDN');
});

// ms-deform-attn/tfjs bundled by the README's esbuild recipe, the package's files under /msda/
// (its old top-level await fetched ../dist/msda-simd.wasm at import, a 404 there).
test('esbuild: ms-deform-attn/tfjs loads nothing at import; setMsda(await init({ wasmPaths })) or configure + ready() give Node\'s output', async () => {
  const dir = path.join(work, 'tfjs');
  await cp(path.join(work, 'base'), dir, { recursive: true, verbatimSymlinks: true });
  // The user's own tfjs: this repository's copy and what its browser build needs (npm's offline
  // cache may not hold it).
  for (const dep of ['@tensorflow/tfjs-core', '@tensorflow/tfjs-backend-cpu', 'long', 'seedrandom']) {
    await cp(path.join(ROOT, 'node_modules', dep), path.join(dir, 'node_modules', dep), { recursive: true, dereference: true });
  }
  await cp(path.join(ROOT, 'tests/bundlers/tfjs-app/index.js'), path.join(dir, 'src/tfjs.js'));
  const env = { ...npmEnv, PATH: `${BIN}:${process.env.PATH}` };
  const [esbuild, copy] = RECIPES.esbuild.steps;
  const r = await run(esbuild[0], ['src/tfjs.js', ...esbuild[1].filter((a) => a.startsWith('--'))], { cwd: dir, env });
  assert.equal((r.stdout + r.stderr).trim(), '', 'esbuild said nothing');
  await run(copy[0], copy[1], { cwd: dir, env });
  await writeFile(path.join(dir, 'public/index.html'),
    '<!doctype html><meta charset="utf-8"><link rel="icon" href="data:,"><title>tfjs</title><script type="module" src="/tfjs.js"></script>');
  // Node's output of the same op (the repository's own tfjs.js, tfjs-backend-cpu).
  const tf = await import('@tensorflow/tfjs-core');
  await import('@tensorflow/tfjs-backend-cpu');
  const { msDeformAttn } = await import('../../bindings/tfjs.js');
  await tf.setBackend('cpu');
  const out = msDeformAttn(tf.tensor(Float32Array.from({ length: 12 }, (_, i) => i / 7), [1, 6, 1, 2]),
    tf.tensor([0.3, 0.6, 0.9, 0.1], [1, 2, 1, 1, 1, 2]), tf.tensor([0.5, 2], [1, 2, 1, 1, 1]), { spatialShapes: [[2, 3]] });
  const expected = Array.from(out.dataSync());
  const url = await serve(path.join(dir, 'public'), {});
  for (const how of ['setMsda', 'configure']) {
    const { result, problems } = await openApp(`${url}/?how=${how}`);
    assert.equal(result.error, undefined, `${how}: ${result.error}`);
    assert.deepEqual(problems, [], how);
    assert.deepEqual(result.loadedAtImport, [], `${how}: nothing fetched at import`);
    assert.deepEqual(result.output, expected, `${how}: Node's output`);
  }
});
