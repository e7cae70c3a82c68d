// The worker behind initWorker() in browsers (browser.js starts it by a URL bundlers see).
import { init } from '../browser.js';
import { serve } from '../core/remote.js';

serve({
  post: (message, transfer) => self.postMessage(message, transfer),
  onMessage: (fn) => self.addEventListener('message', (e) => fn(e.data)),
}, init);
