// ms-deform-attn/tfjs's instance: the ms-deform-attn instance the op calls, made on first use
// (Node), by ready() or given by setMsda(); on tfjs-backend-webgpu, the WebGPU instance on tfjs's
// own device. bindings/tfjs.js is the entry; the op is bindings/tfjs/op.js.

import * as tf from '@tensorflow/tfjs-core';
// Through the package's own name, so that package.json's conditions pick the browser or the Node
// entry (bundlers never see the Node one).
import { init, initSync, Msda } from 'ms-deform-attn';
import { describe } from '../core/errors.js';
import { MsdaWebGPU } from '../webgpu/backend.js';
import { instanceFor, isTfjsWebGPU } from '../webgpu/tfjs.js';

// The instance the op calls. Nothing is fetched or instantiated at import (a bundle's page has
// not said where the .wasm files are yet): setMsda() gives one, or ready() makes it from init()
// with configure()'s options; in Node the first op makes it synchronously if neither was called.
let msda = null;
let owned = false;          // msda is this module's own (made from configure()'s options)
let initOptions = {};
let making = null;          // ready()'s pending init

/** The instance the op calls on a CPU backend, made now (Node) if none was given or made. */
export function current(fn) {
  if (msda !== null) return msda;
  try {
    adopt(initSync(initOptions), true);
  } catch (e) {
    throw new Error(`${fn}: ms-deform-attn/tfjs has no instance yet: \`await ready()\` before the first op (after ` +
      "configure({ wasmPaths }) where the .wasm files are served elsewhere), or setMsda(await init({ wasmPaths })) " +
      `(${e.message})`, { cause: e });
  }
  return msda;
}

function adopt(instance, own) {
  if (owned && msda !== null && msda !== instance) msda.dispose();
  msda = instance;
  owned = own;
}

// tfjs's backend, or null where none is registered yet (getMsda and ready only look at it).
function tfjsBackend() {
  try {
    return tf.backend();
  } catch {
    return null;
  }
}

/** The ms-deform-attn instance the op calls (in Node made on first use; elsewhere after ready() or
 *  setMsda()); on tfjs-backend-webgpu, the WebGPU instance on tfjs's own device that the op runs. */
export function getMsda() {
  const backend = tfjsBackend();
  return isTfjsWebGPU(backend) ? instanceFor(backend, msda) : current('getMsda');
}

/** Makes the op call another instance from init() (e.g. `{ threads: 'auto' }`, or the native addon). */
export function setMsda(instance) {
  if (!(instance instanceof Msda || instance instanceof MsdaWebGPU)) throw new TypeError(`setMsda: instance is ${describe(instance)}, expected what init() resolves to`);
  making = null;
  adopt(instance, false);
}

/**
 * The init() options of the instance the op makes for itself (e.g. { wasmPaths: '/msda/' } or
 * { threads: 'auto' }); checked by init when it is made. An instance made before is disposed.
 */
export function configure(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`configure: options is ${describe(options)}, expected an object of init() options`);
  }
  initOptions = { ...options };
  making = null;
  if (owned) adopt(null, false);
}

/** Makes the op's instance with init(configure's options) unless it has one; resolves to it. On
 *  tfjs-backend-webgpu the op needs no wasm module: the instance on tfjs's device. */
export function ready() {
  const backend = tfjsBackend();
  if (isTfjsWebGPU(backend)) return Promise.resolve(instanceFor(backend, msda));
  if (msda !== null) return Promise.resolve(msda);
  if (making === null) {
    const attempt = init(initOptions).then((instance) => {
      if (making === attempt) adopt(instance, true);
      else instance.dispose();   // configure() or setMsda() came meanwhile
      making = null;
      return current('ready');
    }, (e) => {
      if (making === attempt) making = null;
      throw e;
    });
    making = attempt;
  }
  return making;
}

/** The instance given to setMsda or made here, or null (the op on tfjs-backend-webgpu needs none). */
export const given = () => msda;
