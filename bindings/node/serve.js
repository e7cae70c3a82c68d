#!/usr/bin/env node
// A small static server for the interactive page: no dependencies, no network beyond
// 127.0.0.1 unless asked. Serves only the web/, bindings/, dist/ and docs/ folders of the
// repository or of the installed package, with the cross-origin-isolation headers threaded
// wasm needs (SharedArrayBuffer).
//
//   node bindings/node/serve.js          # port from PORT, default 8080; PORT=0 picks a free one
//   msda demo [--port N]         # the same from the installed package (bindings/demo.js)
//
// Importable too: `startServer({ port, host })` resolves to { server, url } (the tests use it).
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SERVED = ['web', 'bindings', 'dist', 'docs'];

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.png': 'image/png',
  '.webp': 'image/webp',
  '.md': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
  '.map': 'application/json; charset=utf-8',
  '.d.ts': 'text/plain; charset=utf-8',
};

const ISOLATION = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
};

// Maps a request path to a file inside one of the served folders, or null. The decoded
// path is normalised and then checked to stay under its folder, so `..`, encoded
// slashes and absolute paths cannot reach anything else.
export function resolveRequest(urlPath) {
  let decoded;
  try {
    decoded = decodeURIComponent(urlPath.split('?')[0].split('#')[0]);
  } catch {
    return null;
  }
  if (decoded.includes('\0') || decoded.includes('\\')) return null;
  const parts = decoded.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p === '..')) return null;
  if (parts.length === 0 || !SERVED.includes(parts[0])) return null;
  const base = path.join(ROOT, parts[0]);
  const file = path.join(ROOT, ...parts);
  if (file !== base && !file.startsWith(base + path.sep)) return null;
  return file;
}

function typeOf(file) {
  if (file.endsWith('.d.ts')) return TYPES['.d.ts'];
  return TYPES[path.extname(file).toLowerCase()] || 'application/octet-stream';
}

function send(res, status, body, headers = {}) {
  res.writeHead(status, { ...ISOLATION, 'Content-Type': 'text/plain; charset=utf-8', ...headers });
  res.end(body);
}

function handle(req, res) {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    send(res, 405, 'method not allowed\n', { Allow: 'GET, HEAD' });
    return;
  }
  const urlPath = req.url || '/';
  if (urlPath === '/' || urlPath === '/web') {
    send(res, 302, 'see /web/\n', { Location: '/web/' });
    return;
  }
  let file = resolveRequest(urlPath);
  if (!file) {
    send(res, 404, 'not found\n');
    return;
  }
  fs.stat(file, (err, st) => {
    if (!err && st.isDirectory()) {
      if (!urlPath.split('?')[0].endsWith('/')) {
        // From the resolved path, never the request's: `//web` must not become the
        // protocol-relative `//web/` (another host).
        const rel = path.relative(ROOT, file).split(path.sep).map(encodeURIComponent).join('/');
        send(res, 302, 'see directory\n', { Location: `/${rel}/` });
        return;
      }
      file = path.join(file, 'index.html');
      fs.stat(file, (err2, st2) => serveFile(req, res, file, err2, st2));
      return;
    }
    serveFile(req, res, file, err, st);
  });
}

function serveFile(req, res, file, err, st) {
  if (err || !st.isFile()) {
    send(res, 404, 'not found\n');
    return;
  }
  res.writeHead(200, { ...ISOLATION, 'Content-Type': typeOf(file), 'Content-Length': st.size });
  if (req.method === 'HEAD') {
    res.end();
    return;
  }
  const stream = fs.createReadStream(file);
  stream.on('error', () => res.destroy());
  stream.pipe(res);
}

// What the page needs that is not there (a clone before `make wasm`); the package has them all.
export function missingFiles() {
  return ['dist/msda-simd.wasm', 'dist/msda-scalar.wasm', 'bindings/index.js'].filter((f) => !fs.existsSync(path.join(ROOT, f)));
}

export function startServer({ port = 8080, host = '127.0.0.1' } = {}) {
  return new Promise((resolve, reject) => {
    const server = http.createServer(handle);
    server.once('error', reject);
    server.listen(port, host, () => {
      const { port: actual } = server.address();
      const shown = host.includes(':') ? `[${host}]` : host;
      resolve({ server, url: `http://${shown}:${actual}/web/` });
    });
  });
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const raw = process.env.PORT ?? '8080';
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`serve: PORT must be an integer 0..65535, got ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  for (const need of missingFiles()) console.warn(`serve: warning: ${need} is missing (run make wasm)`);
  startServer({ port }).then(({ url }) => {
    console.log(`ms-deform-attn demo: open ${url}  (Ctrl-C to stop)`);
  }, (e) => {
    console.error(`serve: cannot listen on 127.0.0.1:${port}: ${e.code || e.message}` +
      (e.code === 'EADDRINUSE' ? ' (set PORT to another port)' : ''));
    process.exit(1);
  });
}
