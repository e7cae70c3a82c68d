// A threads worker in Node (bindings/wasm/threads.js; node.js starts it): threads-worker.js's loop
// on a worker_threads port.
import { parentPort } from 'node:worker_threads';
import { start } from './threads-worker.js';

parentPort.once('message', (init) => start(init, (m) => parentPort.postMessage(m)));
