// The package in Node (package.json's "node" condition): the core (bindings/core/init.js) with the .wasm files
// read from disk, worker_threads for threads, and the native addon (native.js).
//
//   import { init } from 'ms-deform-attn';
//   const msda = await init();   // { backend: 'native' } for the addon

import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { createApi, remoteOptionsResolver } from './core/init.js';
import { fetchChecked } from './wasm/loader.js';
import { createInitWorker } from './core/remote.js';

export { DEFAULTS } from './core/args.js';
export { Msda, Prepared } from './core/api.js';
export { simdSupported } from './wasm/loader.js';
export { MsdaWorker, WorkerPrepared } from './core/remote.js';

function defaultUrl(file) {
  return new URL(`../dist/${file}`, import.meta.url);
}

// wasmPaths in Node: URLs (file:, http:, https:) or file paths (relative to the working directory).
function resolveUrl(text) {
  if (/^[a-z][a-z0-9+.-]+:/i.test(text)) return new URL(text).href;
  return pathToFileURL(path.resolve(text)).href;
}

async function fetchFile(url) {
  const u = new URL(url);
  if (u.protocol !== 'file:') return fetchChecked(u);
  try {
    return await readFile(u);
  } catch (e) {
    throw new Error(`ms-deform-attn: cannot read ${fileURLToPath(u)}: ${e.message} (init's wasmPaths says where the package's files are)`, { cause: e });
  }
}

// Node workers inherit the process's flags, but refuse those of an inline script
// (`node --input-type=module -e ...`): keep the rest.
function inlineScriptFree(args) {
  const kept = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (['-e', '--eval', '-p', '--print', '--input-type'].includes(a)) i++;
    else if (!a.startsWith('--input-type=') && !a.startsWith('--eval=') && !a.startsWith('--print=')) kept.push(a);
  }
  return kept;
}

// Worker also refuses V8 and per-process flags (--max-old-space-size, --expose-gc, --stack-size,
// --title, ...) with ERR_WORKER_INVALID_EXEC_ARGV, thrown by its constructor before any thread
// starts. Those flags hold for the whole process, the worker's isolate included, so nothing is
// lost by dropping them: the flags it names are dropped and the worker started again (or, if it
// still refuses, with none). The accepted list is remembered for the next workers.
let acceptedExecArgv = null;

function newWorker(url) {
  const tries = acceptedExecArgv !== null ? [acceptedExecArgv] : [inlineScriptFree(process.execArgv)];
  for (let attempt = 0; ; attempt++) {
    const execArgv = tries[attempt];
    try {
      const worker = new Worker(url, { execArgv });
      acceptedExecArgv = execArgv;
      return worker;
    } catch (e) {
      if (e?.code !== 'ERR_WORKER_INVALID_EXEC_ARGV' || execArgv.length === 0) throw e;
      const named = new Set(String(e.message).replace(/^[^:]*:\s*/, '').split(/,\s*/));
      const rest = execArgv.filter((a) => !named.has(a));
      tries.push(rest.length < execArgv.length && attempt === 0 ? rest : []);
    }
  }
}

// Unref'd: a process that used threads exits by itself when its own work is done. wasmPaths'
// worker URL is for browsers; Node runs the package's own.
function startThreadsWorker() {
  const worker = newWorker(new URL('./workers/threads-worker-node.js', import.meta.url));
  worker.unref();
  return worker;
}

// Results of the copying calls: memory without the zero fill (allocUnsafeSlow: never pooled,
// so each array owns its ArrayBuffer), every element of which the copy out of the heap writes.
function outputArray(length) {
  const bytes = Buffer.allocUnsafeSlow(4 * length);
  return new Float32Array(bytes.buffer, bytes.byteOffset, length);
}

// initSync's: file: URLs only (http(s) needs fetch, which is asynchronous).
function readFileSyncAt(url) {
  const u = new URL(url);
  if (u.protocol !== 'file:') throw new Error(`initSync: ${u.href} is not a file: URL; a module served over ${u.protocol.slice(0, -1)} needs await init()`);
  try {
    return readFileSync(u);
  } catch (e) {
    throw new Error(`ms-deform-attn: cannot read ${fileURLToPath(u)}: ${e.message} (init's wasmPaths says where the package's files are)`, { cause: e });
  }
}

const platform = {
  outputArray,
  defaultUrl,
  resolveUrl,
  fetchFile,
  readFileSync: readFileSyncAt,
  hardwareThreads: () => (typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length || 1),
  startThreadsWorker,
  loadNative: async (addonPath) => (await import('./node/addon.js')).loadNative(addonPath),
  initWebGPU: async (options) => {
    const [{ initWebGPU }, { nodeGpu, noAdapterHint }] = await Promise.all([import('./webgpu/backend.js'), import('./webgpu/node-gpu.js')]);
    return initWebGPU({ ...options, defaultGpu: nodeGpu, noAdapterHint });
  },
};

export const { init, initNative, initSync } = createApi(platform);

// initWorker: the instance in a worker_threads Worker, ref'd only while a call is pending (so
// an idle one never keeps the process alive) and gone with terminate().
function spawnRemote() {
  const worker = newWorker(new URL('./workers/remote-worker-node.js', import.meta.url));
  return {
    post: (message, transfer) => worker.postMessage(message, transfer),
    onMessage: (fn) => worker.on('message', fn),
    onFailure(fn) {
      worker.on('error', (e) => fn(e && e.message ? e.message : String(e)));
      worker.on('exit', (code) => fn(`exit code ${code}`));
    },
    ref: () => worker.ref(),
    unref: () => worker.unref(),
    terminate: async () => { await worker.terminate(); },
  };
}

// wasmPaths resolved against this process's working directory, before the worker starts.

/** The same API, asynchronous, in a worker_threads Worker (remote.js). */
export const initWorker = createInitWorker(spawnRemote, remoteOptionsResolver(resolveUrl));
