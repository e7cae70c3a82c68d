// The app's Web Worker: the same computation off the page's thread.
import { compute } from './compute.js';

self.onmessage = (e) => {
  compute(e.data)
    .catch((err) => ({ error: String((err && err.stack) || err) }))
    .then((result) => self.postMessage(result));
};
