// `msda demo` from the packed tarball, as a user with only npm gets it: `npm pack`, installed into
// an empty project offline; the page's files are in the tarball within WEB_BUDGET; `msda demo
// --port 0` (and `npx ms-deform-attn demo`) serves the page and everything it imports from the
// installed package on 127.0.0.1 with the isolation headers, prints its URL, and the page runs
// there in Chromium, cross-origin isolated; Ctrl-C stops it with status 0; bad flags exit 2.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { ROOT, CHROMIUM } from './browser.js';
import { PATIENCE_MS } from '../patience.js';

const run = promisify(execFile);
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
// The page's files (HTML, CSS, its JS modules and bindings/node/serve.js), unpacked (164 kB with the
// WebGPU backend under the hood).
const WEB_BUDGET = 176 * 1024;

let dir, project, packed;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'msda-demo-'));
  // The files as `npm pack` ships them; the prepack build is make's business (dist/ is built).
  const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', dir], { cwd: ROOT, env: npmEnv, maxBuffer: 1 << 24 });
  [packed] = JSON.parse(stdout);
  project = join(dir, 'project');
  await run('mkdir', ['-p', project]);
  await writeFile(join(project, 'package.json'), '{ "name": "user-project", "private": true }\n');
  await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, packed.filename)], { cwd: project, env: npmEnv });
});
after(() => dir && rm(dir, { recursive: true, force: true }));

// Starts the installed bin; resolves once it printed its URL.
function startDemo(args, cmd = join(project, 'node_modules', '.bin', 'msda')) {
  const child = spawn(cmd, args, { cwd: project, env: npmEnv });
  let out = '', err = '';
  const url = new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => { out += d; const m = /open (http:\/\/\S+)/.exec(out); if (m) resolve(m[1]); });
    child.stderr.on('data', (d) => { err += d; });
    child.on('exit', (c) => reject(new Error(`exited ${c}: ${out} ${err}`)));
  });
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal, out, err })));
  return { child, url, exited, output: () => ({ out, err }) };
}

test(`the page ships in the tarball, within ${WEB_BUDGET} bytes`, () => {
  const web = packed.files.filter((f) => f.path.startsWith('web/'));
  const paths = web.map((f) => f.path);
  for (const need of ['web/index.html', 'web/style.css', 'web/app.js', 'web/scene.js', 'web/model.js', 'bindings/node/serve.js', 'bindings/demo.js']) {
    assert.ok(paths.includes(need) || packed.files.some((f) => f.path === need), `the tarball has ${need}`);
  }
  assert.ok(!paths.includes('web/screenshot.png'), 'not the screenshot');
  const size = web.reduce((a, f) => a + f.size, 0);
  assert.ok(size <= WEB_BUDGET, `web/ is ${size} bytes unpacked, budget ${WEB_BUDGET}`);
});

// Every module the page imports, followed from index.html through the served JS.
async function fetchAll(base) {
  const seen = new Map();
  const queue = [new URL('index.html', base).href, new URL('style.css', base).href];
  while (queue.length) {
    const u = queue.shift();
    if (seen.has(u)) continue;
    const r = await fetch(u);
    const body = Buffer.from(await r.arrayBuffer());
    seen.set(u, { status: r.status, type: r.headers.get('content-type'), coop: r.headers.get('cross-origin-opener-policy'),
      coep: r.headers.get('cross-origin-embedder-policy'), size: body.length });
    const text = body.toString('utf8');
    // What the page loads (scripts, styles, modules), not where its links go.
    const refs = u.endsWith('.html') ? [...text.matchAll(/(?:<script[^>]*src|<link[^>]*href)="([^":#]+)"/g)].map((m) => m[1])
      : u.endsWith('.js') ? [...text.matchAll(/(?:import|from)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]) : [];
    for (const ref of refs) queue.push(new URL(ref, u).href);
  }
  return seen;
}

test('msda demo --port 0 serves the installed page and its assets on 127.0.0.1, isolated; Chromium runs it there', async () => {
  const demo = startDemo(['demo', '--port', '0']);
  try {
    const url = await demo.url;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/web\/$/);
    const files = await fetchAll(url);
    const names = [...files.keys()].map((u) => new URL(u).pathname);
    for (const need of ['/web/index.html', '/web/style.css', '/web/app.js', '/web/step-sum.js', '/bindings/index.js']) {
      assert.ok(names.includes(need), `the page loads ${need} (${names.join(' ')})`);
    }
    for (const [u, f] of files) {
      assert.equal(f.status, 200, u);
      assert.equal(f.coop, 'same-origin', u);
      assert.equal(f.coep, 'require-corp', u);
    }
    const wasm = await fetch(new URL('../dist/msda-simd.wasm', url));
    assert.equal(wasm.status, 200);
    assert.equal(wasm.headers.get('content-type'), 'application/wasm');
    // It is the installed copy that is served.
    const served = await (await fetch(new URL('scene.js', url))).text();
    assert.equal(served, (await import('node:fs')).readFileSync(join(realpathSync(join(project, 'node_modules', 'ms-deform-attn')), 'web', 'scene.js'), 'utf8'));

    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--headless', '--no-sandbox', '--disable-gpu'], headless: true });
    try {
      const page = await browser.newPage();
      const problems = [];
      page.on('pageerror', (e) => problems.push(e.message));
      page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(m.text()); });
      await page.goto(url);
      await page.waitForFunction(() => window.__msda && window.__msda.ready, null, { timeout: PATIENCE_MS });
      const s = await page.evaluate(() => ({ isolated: crossOriginIsolated, loss: window.__msda.loss, threads: window.__msda.threads,
        cpus: navigator.hardwareConcurrency }));
      assert.equal(s.isolated, true, 'cross-origin isolated, so the threaded module can run');
      if (s.cpus > 1) assert.ok(s.threads > 1, `threads run: ${s.threads} on ${s.cpus} CPUs`);
      assert.ok(s.loss > 0);
      assert.deepEqual(problems, []);
      // The API docs the page links to are served too.
      // (docs/api.md comes with the README's split into docs/; until then only SEMANTICS.md.)
      const links = await page.$$eval('#use-it a', (as) => as.map((a) => a.getAttribute('href')));
      assert.ok(links.includes('../docs/api.md'), `the page links the API docs: ${links}`);
      for (const link of links) {
        const shipped = packed.files.some((f) => `../${f.path}` === link);
        if (shipped || link !== '../docs/api.md') assert.equal((await fetch(new URL(link, url))).status, 200, `the page's link ${link}`);
      }
    } finally {
      await browser.close();
    }
  } finally {
    demo.child.kill('SIGINT');
  }
  const end = await demo.exited;
  assert.equal(end.code, 0, `Ctrl-C stops it with status 0 (${JSON.stringify(end)})`);
  assert.equal(end.err, '', 'nothing missing from the installed package, no warnings');
});

test('npx ms-deform-attn demo works; bad flags exit 2 naming the flag; a busy port exits 1', async () => {
  const help = await run('npx', ['--offline', 'ms-deform-attn', 'demo', '--help'], { cwd: project, env: npmEnv });
  assert.match(help.stdout, /^usage: msda demo \[--port N\] \[--host H\]/);
  const msda = join(project, 'node_modules', '.bin', 'msda');
  for (const [args, re] of [[['demo', '--port', '70000'], /^msda: --port must be an integer 0\.\.65535, got "70000"\n$/],
    [['demo', '--port'], /^msda: --port needs a value\n$/], [['demo', '--colour'], /^msda: unknown option '--colour' for msda demo/]]) {
    const r = await run(msda, args, { cwd: project }).then(() => ({ code: 0 }), (e) => e);
    assert.equal(r.code, 2, args.join(' '));
    assert.match(r.stderr, re);
  }
  // Another host only when asked, and then said on stderr; --port=N works too.
  const wide = startDemo(['demo', '--host', '0.0.0.0', '--port=0']);
  try {
    const url = await wide.url;
    assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/web\/$/, 'the URL to open here');
    assert.equal((await fetch(url)).status, 200);
    for (const start = Date.now(); Date.now() - start < PATIENCE_MS && !wide.output().err.includes('\n');) await new Promise((r) => setTimeout(r, 20));
    assert.match(wide.output().err, /^msda: serving to the network on 0\.0\.0\.0 \(every interface\)/);
  } finally {
    wide.child.kill('SIGINT');
  }
  assert.equal((await wide.exited).code, 0);
  const first = startDemo(['demo', '--port', '0']);
  try {
    const port = new URL(await first.url).port;
    const r = await run(msda, ['demo', '--port', port], { cwd: project }).then(() => ({ code: 0 }), (e) => e);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`^msda: cannot listen on 127\\.0\\.0\\.1:${port}: EADDRINUSE`));
  } finally {
    first.child.kill('SIGINT');
  }
  assert.equal((await first.exited).code, 0);
});
