// bindings/node/serve.js: the demo's static server serves web/, bindings/, dist/ and docs/ only, .wasm as
// application/wasm, with the cross-origin-isolation headers threaded wasm needs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer, resolveRequest } from '../../bindings/node/serve.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let server, port;
before(async () => { ({ server } = await startServer({ port: 0 })); port = server.address().port; });
after(() => new Promise((r) => server.close(r)));

// Raw requests: fetch() would normalise `..` away before it reached the server.
function get(rawPath, method = 'GET') {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: rawPath, method }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

test('serves the page, the package and the wasm with the right types and isolation headers', async () => {
  const cases = [
    ['/web/', 'text/html; charset=utf-8'],
    ['/web/app.js', 'text/javascript; charset=utf-8'],
    ['/web/style.css', 'text/css; charset=utf-8'],
    ['/bindings/index.js', 'text/javascript; charset=utf-8'],
    ['/dist/msda-simd.wasm', 'application/wasm'],
    ['/dist/msda-scalar.wasm', 'application/wasm'],
    ['/docs/SEMANTICS.md', 'text/plain; charset=utf-8'],
  ];
  for (const [p, type] of cases) {
    const r = await get(p);
    assert.equal(r.status, 200, p);
    assert.equal(r.headers['content-type'], type, p);
    assert.equal(r.headers['cross-origin-opener-policy'], 'same-origin', p);
    assert.equal(r.headers['cross-origin-embedder-policy'], 'require-corp', p);
    assert.equal(Number(r.headers['content-length']), r.body.length, p);
  }
  const wasm = await get('/dist/msda-simd.wasm');
  assert.deepEqual([...wasm.body.subarray(0, 4)], [0, 97, 115, 109], 'wasm magic');
  const root = await get('/');
  assert.equal(root.status, 302);
  assert.equal(root.headers.location, '/web/');
  assert.equal((await get('/web')).headers.location, '/web/');
  assert.equal((await get('/web/index.html', 'HEAD')).status, 200);
  assert.equal((await get('/web/index.html', 'POST')).status, 405);
});

test('directory redirects stay on this server: //web, ///bindings, //dist?x go to /web/, /bindings/, /dist/', async () => {
  for (const [p, where] of [['//web', '/web/'], ['///bindings', '/bindings/'], ['//dist?x=1', '/dist/'],
    ['/web/./', null]]) {
    const r = await get(p);
    if (where === null) {
      assert.equal(r.status, 200, p);
      continue;
    }
    assert.equal(r.status, 302, p);
    assert.equal(r.headers.location, where, `${p} redirects to ${r.headers.location}`);
    assert.ok(!r.headers.location.startsWith('//'), `${p}: a protocol-relative redirect leaves the server`);
  }
});

test('nothing outside web/, bindings/, dist/ and docs/ is reachable', async () => {
  const refused = [
    '/package.json', '/src/msda.h', '/Makefile', '/.git/config', '/web/../package.json',
    '/web/%2e%2e/package.json', '/web/..%2fpackage.json', '/web/..%2f..%2fetc%2fpasswd', '/%2e%2e/%2e%2e/etc/passwd',
    '/bindings/..%5c..%5cpackage.json', '/web/%00index.html', '/web/%zz', '//etc/passwd', '/dist/../src/msda.h',
    '/web/missing.js', '/webx/index.html', '/docs/../package.json', '/docsx/SEMANTICS.md',
  ];
  for (const p of refused) {
    const r = await get(p);
    assert.equal(r.status, 404, `${p} gave ${r.status}`);
    assert.equal(r.headers['cross-origin-embedder-policy'], 'require-corp');
  }
  assert.equal(resolveRequest('/web/../../etc/passwd'), null);
  assert.equal(resolveRequest('/web/index.html'), path.join(ROOT, 'web', 'index.html'));
});

test('the command prints its URL, takes PORT, and refuses a bad PORT', async () => {
  const bad = spawnSync(process.execPath, [path.join(ROOT, 'bindings', 'node', 'serve.js')], { env: { ...process.env, PORT: 'eighty' }, encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /PORT must be an integer 0\.\.65535, got "eighty"/);
  const child = spawn(process.execPath, [path.join(ROOT, 'bindings', 'node', 'serve.js')], { env: { ...process.env, PORT: '0' } });
  try {
    const line = await new Promise((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d) => { out += d; if (out.includes('\n')) resolve(out); });
      child.on('exit', (c) => reject(new Error(`exited ${c}`)));
    });
    const m = /open (http:\/\/127\.0\.0\.1:(\d+)\/web\/)/.exec(line);
    assert.ok(m, line);
    const r = await fetch(m[1]);
    assert.equal(r.status, 200);
    assert.match(await r.text(), /Multi-scale deformable attention/);
  } finally {
    child.kill();
  }
});
