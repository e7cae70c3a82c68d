// Shared by the browser tests and the screenshot script: serve the repository on a free port
// and drive Debian's Chromium through playwright-core (never a downloaded browser).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { resolveRequest, startServer } from '../../bindings/node/serve.js';
import { PATIENCE_MS } from '../patience.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SCREENSHOTS = path.join(ROOT, 'build', 'screenshots');

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];

// WebGPU on SwiftShader, Chromium's CPU Vulkan (a page on http://127.0.0.1 is a secure context).
export const WEBGPU_ARGS = ['--enable-unsafe-webgpu', '--use-webgpu-adapter=swiftshader'];

export async function launch({ args = [] } = {}) {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  const { server, url } = await startServer({ port: 0 });
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: [...ARGS, ...args], headless: true });
  return {
    url,
    browser,
    async close() {
      await browser.close();
      await new Promise((r) => server.close(r));
    },
  };
}

// Opens the page and collects every page error, console error/warning and failed request, save
// Chromium's own "No available adapters." (it says so when the page asks for a WebGPU adapter
// where there is none, as it does once "Under the hood" is opened).
// extra: newContext's options, and initScript (run before the page's own scripts).
export async function openPage(browser, url, viewport = { width: 1280, height: 800 }, extra = {}) {
  const { initScript, ...options } = extra;
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1, ...options });
  if (initScript) await context.addInitScript(initScript);
  context.setDefaultTimeout(PATIENCE_MS);   // goto, clicks and waits: only a hang fails, not a slow machine
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && m.text() !== NO_ADAPTER) problems.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('requestfailed', (r) => problems.push(`requestfailed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  await page.goto(url);
  await page.waitForFunction(() => window.__msda && window.__msda.ready, null, { timeout: PATIENCE_MS });
  return { page, context, problems };
}

export const NO_ADAPTER = 'No available adapters.';

// How many lines each element matching `selector` is drawn on: the distinct tops of its text's
// line boxes (1 for a cell that does not wrap; a snippet's count of lines of code when none wraps).
export function lineCounts(page, selector) {
  return page.$$eval(selector, (els) => els.map((el) => {
    const tops = new Set();
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) if (r.width > 0) tops.add(Math.round(r.top));
    }
    return tops.size;
  }));
}

export function screenshotPath(name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  return path.join(SCREENSHOTS, name);
}

const TYPES = { '.js': 'text/javascript', '.wasm': 'application/wasm', '.html': 'text/html', '.css': 'text/css' };

// The one static server of the Chromium suites' own pages: `bodies` maps a path to its text,
// `files` a path to a file under ROOT (node_modules' bundles), every other path as `make demo`
// serves it (bindings/node/serve.js). `prefixes` maps a first folder to the headers of every
// answer under it, the rest of the path served as above (the threads suite's /iso/ with the
// cross-origin isolation headers, /plain/ without). Resolves with { server, base }.
export async function servePages({ bodies = {}, files = {}, prefixes = {} } = {}) {
  const server = http.createServer((req, res) => {
    let url = (req.url || '/').split('?')[0];
    const prefix = Object.keys(prefixes).find((p) => url.startsWith(`${p}/`));
    const headers = prefix === undefined ? {} : prefixes[prefix];
    if (prefix !== undefined) url = url.slice(prefix.length);
    if (Object.hasOwn(bodies, url)) {
      res.writeHead(200, { ...headers, 'Content-Type': TYPES[path.extname(url)] });
      res.end(bodies[url]);
      return;
    }
    const file = Object.hasOwn(files, url) ? path.join(ROOT, files[url]) : resolveRequest(url);
    if (file === null || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404, headers);
      res.end();
      return;
    }
    res.writeHead(200, { ...headers, 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}
