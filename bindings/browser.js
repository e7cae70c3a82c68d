// The package in browsers and bundlers (package.json's "browser" and "default" conditions): the
// core (bindings/core/init.js) with fetch() for the .wasm files and module Web Workers for threads. Nothing
// this file imports is Node-only or mentions the native addon.
//
//   import { init } from 'ms-deform-attn';
//   const msda = await init();   // { wasmPaths } when the .wasm files are served elsewhere

import { createApi, NATIVE_UNAVAILABLE, remoteOptionsResolver } from './core/init.js';
import { codedError } from './core/errors.js';
import { fetchChecked } from './wasm/loader.js';
import { createInitWorker } from './core/remote.js';

export { DEFAULTS } from './core/args.js';
export { Msda, Prepared } from './core/api.js';
export { simdSupported } from './wasm/loader.js';
export { MsdaWorker, WorkerPrepared } from './core/remote.js';

// One literal `new URL(..., import.meta.url)` per file: webpack and Vite find these, emit the
// files and rewrite the URLs. (esbuild leaves them relative to the bundle: wasmPaths.)
function defaultUrl(file) {
  switch (file) {
    case 'msda-simd.wasm': return new URL('../dist/msda-simd.wasm', import.meta.url);
    case 'msda-scalar.wasm': return new URL('../dist/msda-scalar.wasm', import.meta.url);
    case 'msda-simd-threads.wasm': return new URL('../dist/msda-simd-threads.wasm', import.meta.url);
    default: throw new Error(`ms-deform-attn: no file ${file}`);
  }
}

// Where this module was loaded from, kept out of `new URL(..., import.meta.url)` so bundlers do
// not take the worker script for an asset.
const here = import.meta.url;

function resolveUrl(text, fn) {
  const base = globalThis.document?.baseURI ?? globalThis.location?.href;
  try {
    return new URL(text, base).href;
  } catch {
    throw new TypeError(`${fn}: wasmPaths gives ${JSON.stringify(text)}, which is not a URL`);
  }
}

// A module worker at `url`. A page may not start a worker from another origin (a CDN): there
// the worker is a same-origin blob: module that imports the script (fetched with CORS).
function workerAt(url) {
  if (globalThis.location === undefined || new URL(url).origin === globalThis.location.origin) {
    return new Worker(url, { type: 'module' });
  }
  const blobUrl = URL.createObjectURL(new Blob([`import ${JSON.stringify(url)};\n`], { type: 'text/javascript' }));
  const worker = new Worker(blobUrl, { type: 'module' });
  const revoke = () => URL.revokeObjectURL(blobUrl);
  worker.addEventListener('message', revoke, { once: true });
  worker.addEventListener('error', revoke, { once: true });
  return worker;
}

const isSecurityError = (e) => e !== null && typeof e === 'object' && e.name === 'SecurityError';

// The threads' worker: at wasmPaths' URL when it gives one, else beside this module, started by
// the literal pattern bundlers recognise (they bundle threads-worker.js and rewrite the URL).
function startThreadsWorker(url) {
  if (url !== undefined) return workerAt(url);
  try {
    return new Worker(new URL('./workers/threads-worker.js', import.meta.url), { type: 'module' });
  } catch (e) {
    if (!isSecurityError(e)) throw e;
    return workerAt(new URL('workers/threads-worker.js', here).href);
  }
}

const platform = {
  defaultUrl,
  resolveUrl,
  fetchFile: fetchChecked,
  hardwareThreads: () => (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) || 1,
  startThreadsWorker,
  loadNative() {
    return Promise.reject(codedError("ms-deform-attn: the native backend runs only in Node; in a browser use the WebAssembly backend (init() or init({ backend: 'auto' }), same results)", NATIVE_UNAVAILABLE));
  },
  initWebGPU: async (options) => (await import('./webgpu/backend.js')).initWebGPU(options),
};

export const { init, initNative, initSync } = createApi(platform);

// initWorker: the instance in a module Web Worker, started by the literal pattern bundlers
// follow (they bundle remote-worker.js and what it imports), or from another origin (a CDN)
// through a blob: module; with wasmPaths, dist/msda-worker.js (the same, bundled on its own).
function startRemoteWorker() {
  try {
    return new Worker(new URL('./workers/remote-worker.js', import.meta.url), { type: 'module' });
  } catch (e) {
    if (!isSecurityError(e)) throw e;
    return workerAt(new URL('workers/remote-worker.js', here).href);
  }
}

function spawnRemote(urls) {
  const given = urls['msda-worker.js'];
  const worker = given !== undefined ? workerAt(given) : startRemoteWorker();
  // A script that does not load fires an 'error' event with no message: say which script, and
  // where wasmPaths put it, as init's errors name the .wasm URL.
  const notLoaded = given !== undefined
    ? `the worker script ${given} failed to load or threw (initWorker's wasmPaths places dist/msda-worker.js there: is it served at that URL?)`
    : `the worker script workers/remote-worker.js (beside ${here}, or your bundler's copy of it) failed to load or threw `
      + "(where the package's dist/ files are served elsewhere, pass initWorker({ wasmPaths }) with dist/msda-worker.js there)";
  return {
    post: (message, transfer) => worker.postMessage(message, transfer),
    onMessage: (fn) => worker.addEventListener('message', (e) => fn(e.data)),
    onFailure(fn) {
      worker.addEventListener('error', (e) => fn(e && e.message ? e.message : notLoaded));
      worker.addEventListener('messageerror', () => fn('a message from the worker could not be read'));
    },
    ref() {},
    unref() {},
    terminate() {
      worker.terminate();
      return Promise.resolve();
    },
  };
}

// wasmPaths resolved against this page (or worker), so relative URLs mean the same in the worker, before the worker starts.

/** The same API, asynchronous, in a module Web Worker (remote.js). */
export const initWorker = createInitWorker(spawnRemote, remoteOptionsResolver(resolveUrl));
