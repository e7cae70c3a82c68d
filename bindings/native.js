// The native backend: the Node addon behind the same store interface as the wasm heap
// (loader.js), so init({ backend: 'native' }) gives the same API. Node only. Inputs are passed
// to C without copying; outputs are fresh Float32Arrays.
//
// Where the addon comes from: the package ships it prebuilt (prebuildify's layout,
// prebuilds/<platform>-<arch>/ms-deform-attn.node, N-API so one binary serves every Node);
// a checkout of the repository also has build/native/msda.node from `make native`.

import { constants } from 'node:buffer';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NATIVE_UNAVAILABLE } from './core/init.js';

export { initNative } from './node.js';
/** The `.code` of the Error thrown when the native addon cannot be used here. */
export { NATIVE_UNAVAILABLE };

// Paths are joined at run time (not `new URL('…', import.meta.url)`) so bundlers do not try to
// pull a .node file into a bundle.
const packageRoot = () => join(dirname(fileURLToPath(import.meta.url)), '..');

function unavailable(message, cause) {
  const err = new Error(`ms-deform-attn: ${message}`, cause === undefined ? undefined : { cause });
  err.code = NATIVE_UNAVAILABLE;
  return err;
}

/** Where the addon for this platform would be: the prebuild, else a `make native` build. */
export function nativeAddonPath() {
  const target = `${process.platform}-${process.arch}`;
  const prebuilt = join(packageRoot(), 'prebuilds', target, 'ms-deform-attn.node');
  if (existsSync(prebuilt)) return prebuilt;
  const built = join(packageRoot(), 'build', 'native', 'msda.node');
  if (existsSync(built)) return built;
  throw unavailable(`the native backend is not available on ${target}: this package ships a prebuilt addon for ` +
    "linux-x64 (glibc >= 2.34) only. Use the WebAssembly backend (init() or init({ backend: 'auto' }), same results), " +
    'or build the addon from a checkout of the repository with `make native` and pass ' +
    "init({ backend: 'native', addonPath: '<checkout>/build/native/msda.node' }).");
}

/** Loads the addon (from addonPath, or the one for this platform); failures carry .code. */
export function loadNative(addonPath) {
  const path = addonPath === undefined ? nativeAddonPath() : String(addonPath);
  let addon;
  try {
    addon = createRequire(import.meta.url)(path);
  } catch (e) {
    throw unavailable(`cannot load the native addon ${path} on ${process.platform}-${process.arch} (${e.message}). ` +
      "Use the WebAssembly backend (init() or init({ backend: 'auto' }), same results), or build the addon for this " +
      'machine from a checkout of the repository with `make native`.', e);
  }
  return new NativeBackend(addon);
}

class NativeBackend {
  constructor(addon) {
    this.addon = addon;
    this.name = 'native';
    // The vector ISA the kernels run, as the library's dispatch chose it (msda_isa: the widest
    // this CPU has, or MSDA_ISA's; null when MSDA_ISA names one it lacks). An addon from before
    // the dispatch ran SSE2 on x86 (every x86-64 has it) and the scalar code elsewhere.
    this.isa = typeof addon.isa === 'function' ? addon.isa()
      : process.arch === 'x64' || process.arch === 'ia32' ? 'sse2' : 'scalar';
    this.simd = this.isa !== null && this.isa !== 'scalar';
    this.memory = null;
    // Elements of the longest typed array this Node makes (V8's limit; 2^32 on Node 20).
    this.maxElements = constants.MAX_LENGTH;
  }

  allocate(desc, layout) {
    return new NativeStore(this.addon, desc, layout);
  }
}

class NativeStore {
  constructor(addon, desc, layout) {
    this.addon = addon;
    this.desc = desc;
    this.elements = new Map(layout.map(({ name, elements }) => [name, elements]));
    this.arrays = new Map();
  }

  view(name) {
    let a = this.arrays.get(name);
    if (a === undefined) {
      a = new Float32Array(this.elements.get(name));
      this.arrays.set(name, a);
    }
    return a;
  }

  /** The outputs allocated and their pages touched now (prepare), not in the first call. */
  prefault(outputs) {
    for (const name of outputs) if (this.elements.has(name)) this.view(name).fill(0);
  }

  // Inputs are only read by C, so the caller's array is used in place.
  load(name, data) {
    this.arrays.set(name, data);
  }

  take(name) {
    return this.view(name);
  }

  run(op) {
    const a = (n) => this.view(n);
    return op === 'forward'
      ? this.addon.forward(this.desc, a('value'), a('samplingLocations'), a('attentionWeights'), a('output'))
      : this.addon.backward(this.desc, a('gradOutput'), a('value'), a('samplingLocations'), a('attentionWeights'),
        a('gradValue'), a('gradSamplingLocations'), a('gradAttentionWeights'));
  }

  free() {
    this.arrays.clear();
  }
}
