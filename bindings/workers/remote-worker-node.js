// The worker behind initWorker() in Node (node.js starts it).
import { parentPort } from 'node:worker_threads';
import { init } from '../node.js';
import { serve } from '../core/remote.js';

serve({
  post: (message, transfer) => parentPort.postMessage(message, transfer),
  onMessage: (fn) => parentPort.on('message', fn),
}, init);
