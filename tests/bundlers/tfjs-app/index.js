// The tfjs app bundled by tests/bundlers/bundlers.test.js with the README's esbuild recipe (the
// package's files copied to /msda/): ms-deform-attn/tfjs must load nothing at import; the page
// then gives the op its instance (?how=setMsda: setMsda(await init({ wasmPaths })); ?how=configure:
// configure({ wasmPaths }) and await ready()) and leaves the op's output on window.__app.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { init } from 'ms-deform-attn';
import { configure, msDeformAttn, ready, setMsda } from 'ms-deform-attn/tfjs';

async function run() {
  const how = new URLSearchParams(location.search).get('how');
  const wasmPaths = '/msda/';
  await tf.setBackend('cpu');
  const loadedAtImport = performance.getEntriesByType('resource').map((e) => e.name).filter((n) => n.endsWith('.wasm'));
  if (how === 'setMsda') setMsda(await init({ wasmPaths }));
  else {
    configure({ wasmPaths });
    await ready();
  }
  const value = tf.tensor(Float32Array.from({ length: 12 }, (_, i) => i / 7), [1, 6, 1, 2]);
  const locations = tf.tensor([0.3, 0.6, 0.9, 0.1], [1, 2, 1, 1, 1, 2]);
  const weights = tf.tensor([0.5, 2], [1, 2, 1, 1, 1]);
  const out = msDeformAttn(value, locations, weights, { spatialShapes: [[2, 3]] });
  return { loadedAtImport, output: Array.from(out.dataSync()) };
}

run().catch((e) => ({ error: String((e && e.stack) || e) })).then((r) => { window.__app = r; });
