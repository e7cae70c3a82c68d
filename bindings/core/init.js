// init: which backend to load and how, one backend per option set, shared by the instances
// init() gives out and freed when the last of them is disposed (so one caller's dispose() never
// breaks another's instance). How files are read and workers started comes from the entry's
// `platform` (createApi).
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

import { loadWasm, loadWasmSync, simdSupported } from '../wasm/loader.js';
import { loadThreadedWasm, resolveThreads } from '../wasm/threads.js';
import { Msda } from './api.js';
import { BAD_ISA, describe, NATIVE_UNAVAILABLE } from './errors.js';

const INIT_KEYS = ['simd', 'wasmBinary', 'module', 'backend', 'addonPath', 'threads', 'wasmPaths', 'gpu', 'device'];

// The backends each init option applies to.
const WASM = ['wasm', 'wasm-scalar', 'auto'];
const BACKEND_OPTIONS = {
  simd: WASM, wasmBinary: WASM, module: WASM, wasmPaths: WASM,
  addonPath: ['native', 'auto'], threads: ['wasm', 'wasm-scalar', 'native', 'auto'],
  gpu: ['webgpu'], device: ['webgpu'],
};

// The addon's error codes, exported where they were (core/errors.js holds every code).
export { BAD_ISA, NATIVE_UNAVAILABLE };
// MSDA_ISA is the addon's alone: 'native' rejects with BAD_ISA, 'auto' runs on wasm and says why.
let badIsaNoted = false;
function noteBadIsa(e) {
  if (badIsaNoted) return;
  badIsaNoted = true;
  console.warn(`ms-deform-attn: init({ backend: 'auto' }) runs on WebAssembly (the same bits): ${e.message}`);
}

/** Checks init's `threads` option: undefined, 'auto' or a positive integer; throws otherwise. */
export function checkThreadsOption(threads) {
  if (threads === undefined || threads === 'auto') return threads;
  // A number that is not a positive integer (0, 2.5, NaN) is a wrong value, as 0 is: RangeError.
  if (typeof threads !== 'number') {
    throw new TypeError(`init: threads is ${describe(threads)}, expected a positive integer or 'auto'`);
  }
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`init: threads is ${threads}, expected an integer >= 1 or 'auto'`);
  return threads;
}

/** The files wasmPaths may place: the three modules, the threads' worker script and
 *  initWorker's worker (dist/msda-worker.js, remote-worker.js bundled on its own). */
export const PACKAGE_FILES = Object.freeze(['msda-simd.wasm', 'msda-scalar.wasm', 'msda-simd-threads.wasm',
  'threads-worker.js', 'msda-worker.js']);

/**
 * Checks init's wasmPaths and resolves it to a URL per file it covers, on the caller's thread
 * (relative URLs resolve against the page or worker that calls init, as fetch() would):
 *   a string or URL: a prefix, each file's URL is prefix + file name (as onnxruntime-web's);
 *   an object: file name -> URL for some of PACKAGE_FILES; the others stay beside the package.
 */
export function resolveWasmPaths(fn, wasmPaths, resolveUrl) {
  const urls = {};
  if (wasmPaths === undefined) return urls;
  const what = 'a URL prefix (string or URL) or an object from file name to URL';
  if (typeof wasmPaths === 'string' || wasmPaths instanceof URL) {
    for (const file of PACKAGE_FILES) urls[file] = resolveUrl(`${wasmPaths}${file}`, fn);
    return urls;
  }
  if (wasmPaths === null || typeof wasmPaths !== 'object' || Array.isArray(wasmPaths)) {
    throw new TypeError(`${fn}: wasmPaths is ${describe(wasmPaths)}, expected ${what}`);
  }
  for (const [file, url] of Object.entries(wasmPaths)) {
    if (!PACKAGE_FILES.includes(file)) {
      throw new TypeError(`${fn}: wasmPaths has the key '${file}', expected file names among ${PACKAGE_FILES.join(', ')}`);
    }
    if (typeof url !== 'string' && !(url instanceof URL)) {
      throw new TypeError(`${fn}: wasmPaths['${file}'] is ${describe(url)}, expected a URL (string or URL)`);
    }
    urls[file] = resolveUrl(String(url), fn);
  }
  return urls;
}

/** initWorker's options with wasmPaths resolved on the calling thread (the worker then loads
 *  from the same URLs), and those URLs. */
export function remoteOptionsResolver(resolveUrl) {
  return (options) => {
    if (options.wasmPaths === undefined) return { options, urls: {} };
    const urls = resolveWasmPaths('initWorker', options.wasmPaths, resolveUrl);
    return { options: { ...options, wasmPaths: urls }, urls };
  };
}

/**
 * The API over one platform (an entry's way of reading files and starting workers):
 *   { defaultUrl(file), resolveUrl(text, fn), fetchFile(url), hardwareThreads(),
 *     startThreadsWorker(url | undefined, name), loadNative(addonPath) }
 */
export function createApi(platform) {
  const shared = new Map();
  const sharedBySource = new WeakMap();

  // One Msda per call over the memoised backend; the backend is released with the last one.
  function acquire(memo, key, load) {
    let entry = memo.get(key);
    if (entry === undefined) {
      entry = { refs: 0, promise: load() };
      memo.set(key, entry);
      const forget = () => { if (memo.get(key) === entry) memo.delete(key); };
      entry.promise.catch(forget);
      entry.forget = forget;
    }
    const e = entry;
    e.refs++;
    return e.promise.then((backend) => new Msda(backend, () => {
      if (--e.refs === 0) {
        e.forget();
        if (backend.pool) backend.pool.terminate();
        if (backend.free) backend.free();
      }
    }), (err) => {
      e.refs--;
      throw err;
    });
  }

  function loadFile(urls, file) {
    return platform.fetchFile(urls[file] ?? platform.defaultUrl(file));
  }

  /**
   * Loads a backend and returns its API. Each call returns its own instance (dispose() it when
   * done); instances with the same options share one backend.
   *   simd: 'auto' (default) picks the SIMD module when the runtime validates SIMD128;
   *         true/false force the SIMD or scalar module.
   *   wasmBinary / module: the .wasm bytes or a compiled WebAssembly.Module to use instead of
   *         fetching/reading the file next to this package.
   *   wasmPaths: where the .wasm files and the threads' worker are served (resolveWasmPaths).
   *   backend: 'wasm' (default), 'wasm-scalar' (same as simd: false), 'native' (Node addon),
   *         'auto' (native where the addon loads, else wasm) or 'webgpu' (bindings/webgpu/, with
   *         `gpu` (a navigator.gpu-like object) or `device` (a GPUDevice) where given).
   *   threads: a positive integer or 'auto' (this machine's CPUs), default 1: threads every call
   *         uses (bindings/wasm/threads.js). Wasm falls back to 1, with a console notice, where the
   *         runtime cannot (a page that is not cross-origin isolated); msda.threads says which.
   */
  function init(options = {}) {
    if (options === null || typeof options !== 'object') {
      return Promise.reject(new TypeError(`init: options is ${describe(options)}, expected an object`));
    }
    for (const key of Object.keys(options)) {
      if (!INIT_KEYS.includes(key)) {
        return Promise.reject(new TypeError(`init: unknown option '${key}', expected one of ${INIT_KEYS.join(', ')}`));
      }
    }
    const { simd = 'auto', wasmBinary, module, backend = 'wasm', addonPath } = options;
    if (simd !== 'auto' && simd !== true && simd !== false) {
      return Promise.reject(new TypeError(`init: simd is ${describe(simd)}, expected 'auto', true or false`));
    }
    if (!['wasm', 'wasm-scalar', 'native', 'auto', 'webgpu'].includes(backend)) {
      return Promise.reject(new RangeError(`init: backend is ${describe(backend)}, expected 'wasm', 'wasm-scalar', 'native', 'auto' or 'webgpu'`));
    }
    // The GPU only when asked for ('auto' never picks it): the entry's platform loads bindings/webgpu/.
    // Each backend's own options; another's is refused rather than ignored.
    for (const key of ['simd', 'wasmBinary', 'module', 'addonPath', 'threads', 'wasmPaths', 'gpu', 'device']) {
      if (options[key] !== undefined && !BACKEND_OPTIONS[key].includes(backend)) {
        const of = BACKEND_OPTIONS[key].map((b) => `'${b}'`).join(', ');
        return Promise.reject(new TypeError(`init: ${key} is an option of backend: ${of}, not '${backend}'`));
      }
    }
    if (backend === 'webgpu') {
      if (platform.initWebGPU === undefined) return Promise.reject(new Error("init: backend 'webgpu' is not offered by this entry (use the package's Node or browser entry)"));
      return platform.initWebGPU({ gpu: options.gpu, device: options.device });
    }
    let threads, urls;
    try {
      threads = checkThreadsOption(options.threads);
      urls = resolveWasmPaths('init', options.wasmPaths, platform.resolveUrl);
    } catch (e) {
      return Promise.reject(e);
    }
    if (backend === 'native') return initNative({ addonPath, threads });
    if (backend === 'auto') {
      // Native where the addon loads (Node), else wasm: the same bits either way.
      return initNative({ addonPath, threads }).catch((e) => {
        if (e?.code !== NATIVE_UNAVAILABLE && e?.code !== BAD_ISA) throw e;
        if (e.code === BAD_ISA) noteBadIsa(e);
        return init({ ...options, backend: 'wasm', addonPath: undefined });
      });
    }
    if (module !== undefined && !(module instanceof WebAssembly.Module)) {
      return Promise.reject(new TypeError(`init: module is ${describe(module)}, expected a WebAssembly.Module`));
    }
    if (wasmBinary !== undefined && !(wasmBinary instanceof ArrayBuffer || ArrayBuffer.isView(wasmBinary))) {
      return Promise.reject(new TypeError(`init: wasmBinary is ${describe(wasmBinary)}, expected an ArrayBuffer or Uint8Array`));
    }
    const source = module !== undefined ? module : wasmBinary;
    let useSimd = backend === 'wasm-scalar' ? false : simd;
    if (useSimd === 'auto') useSimd = simdSupported();
    if (useSimd === true && source === undefined && !simdSupported()) {
      return Promise.reject(new Error('init: simd is true but this runtime does not support WebAssembly SIMD128'));
    }
    const key = `wasm:${useSimd}:${threads ?? 1}:${PACKAGE_FILES.map((f) => urls[f] ?? '').join('\0')}`;
    const load = () => {
      const file = useSimd ? 'msda-simd.wasm' : 'msda-scalar.wasm';
      const loadPlain = () => loadWasm({ wasmBinary, module, source: () => loadFile(urls, file) });
      return resolveThreads(threads, platform.hardwareThreads)
        .then((n) => (n > 1
          ? loadThreadedWasm({
            threads: n, simd: useSimd, wasmBinary, module, loadPlain,
            threadsModule: () => loadFile(urls, 'msda-simd-threads.wasm'),
            startWorker: (name) => platform.startThreadsWorker(urls['threads-worker.js'], name),
          })
          : loadPlain()))
        .then((backend) => {
          if (platform.outputArray !== undefined) backend.outputArray = platform.outputArray;
          return backend;
        });
    };
    if (source !== undefined) {
      let perSource = sharedBySource.get(source);
      if (perSource === undefined) sharedBySource.set(source, (perSource = new Map()));
      return acquire(perSource, key, load);
    }
    return acquire(shared, key, load);
  }

  /** The native Node addon with the same API (Node only). */
  function initNative({ addonPath, threads } = {}) {
    try {
      checkThreadsOption(threads);
    } catch (e) {
      return Promise.reject(e);
    }
    const key = `native:${addonPath === undefined ? '' : String(addonPath)}\0${threads ?? 1}`;
    return acquire(shared, key, () => Promise.all([platform.loadNative(addonPath), resolveThreads(threads, platform.hardwareThreads)])
      .then(([b, n]) => {
        b.threads = n;
        return b;
      }));
  }

  /**
   * init() on this thread, synchronously, for the wasm backends on one thread: { simd, backend
   * ('wasm' or 'wasm-scalar'), wasmPaths }. Node only (the module is read from disk); elsewhere
   * an Error saying to await init(). Its instance shares nothing with init()'s.
   */
  function initSync(options = {}) {
    if (options === null || typeof options !== 'object') throw new TypeError(`initSync: options is ${describe(options)}, expected an object`);
    const { simd = 'auto', backend = 'wasm', wasmPaths, ...rest } = options;
    const unknown = Object.keys(rest);
    if (unknown.length > 0) {
      throw new TypeError(`initSync: option '${unknown[0]}' needs await init(${INIT_KEYS.includes(unknown[0]) ? '' : ': it is not an init option'}); initSync takes simd, backend and wasmPaths`);
    }
    if (platform.readFileSync === undefined) {
      throw new Error('initSync: the WebAssembly module can only be loaded asynchronously here: use await init()');
    }
    if (simd !== 'auto' && simd !== true && simd !== false) throw new TypeError(`initSync: simd is ${describe(simd)}, expected 'auto', true or false`);
    if (backend !== 'wasm' && backend !== 'wasm-scalar') {
      throw new RangeError(`initSync: backend is ${describe(backend)}, expected 'wasm' or 'wasm-scalar' (the others need await init())`);
    }
    const urls = resolveWasmPaths('initSync', wasmPaths, platform.resolveUrl);
    const useSimd = backend === 'wasm-scalar' ? false : simd === 'auto' ? simdSupported() : simd;
    if (useSimd && !simdSupported()) throw new Error('initSync: simd is true but this runtime does not support WebAssembly SIMD128');
    const file = useSimd ? 'msda-simd.wasm' : 'msda-scalar.wasm';
    const b = loadWasmSync(platform.readFileSync(urls[file] ?? platform.defaultUrl(file)));
    if (platform.outputArray !== undefined) b.outputArray = platform.outputArray;
    return new Msda(b, () => {});
  }

  return { init, initNative, initSync };
}
