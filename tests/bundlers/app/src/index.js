// The app's page: computes on the main thread, then in a Web Worker (the literal pattern every
// bundler follows), and leaves both results on window.__app. ?wasmPaths=... passes init's option.
import { compute } from './compute.js';

const wasmPaths = new URLSearchParams(location.search).get('wasmPaths') ?? undefined;
const options = wasmPaths === undefined ? {} : { wasmPaths };

function inWorker() {
  return new Promise((resolve) => {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
    worker.onmessage = (e) => { resolve(e.data); worker.terminate(); };
    worker.onerror = (e) => resolve({ error: `worker: ${e.message}` });
    worker.postMessage(options);
  });
}

compute(options)
  .then(async (main) => ({ main, worker: await inWorker() }))
  .catch((e) => ({ error: String((e && e.stack) || e) }))
  .then((result) => { window.__app = result; });
