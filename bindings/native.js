// The native backend: the Node addon build/native/msda.node (built by `make native`) behind the
// same store interface as the wasm heap (loader.js), so init({ backend: 'native' }) gives the
// same API. Node only. Inputs are passed to C without copying; outputs are fresh Float32Arrays.

import { constants } from 'node:buffer';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

export { initNative } from './index.js';

const defaultAddon = () => fileURLToPath(new URL('../build/native/msda.node', import.meta.url));

/** Loads the addon (from addonPath, or build/native/msda.node beside this package). */
export function loadNative(addonPath) {
  const path = addonPath === undefined ? defaultAddon() : String(addonPath);
  let addon;
  try {
    addon = createRequire(import.meta.url)(path);
  } catch (e) {
    const err = new Error(`ms-deform-attn: cannot load the native addon ${path} (build it with \`make native\`): ${e.message}`);
    err.cause = e;
    throw err;
  }
  return new NativeBackend(addon);
}

class NativeBackend {
  constructor(addon) {
    this.addon = addon;
    this.name = 'native';
    this.simd = false;
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
