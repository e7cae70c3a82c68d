// In headless Chromium: initWorker() whose worker script does
// not load (wasmPaths pointing where dist/msda-worker.js is not served) rejects naming the
// script's URL and wasmPaths, as init() names the .wasm URL it could not fetch.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch } from './browser.js';

let env;
before(async () => { env = await launch(); });
after(async () => { if (env) await env.close(); });

test('initWorker({ wasmPaths }) whose worker script 404s: the Error names the URL and wasmPaths', async () => {
  const page = await env.browser.newPage();
  try {
    await page.goto(new URL('/bindings/index.d.ts', env.url).href);
    const origin = new URL(env.url).origin;
    const message = await page.evaluate(async () => {
      const { initWorker } = await import('/bindings/browser.js');
      try {
        await initWorker({ wasmPaths: '/nowhere/' });
        return 'resolved';
      } catch (e) {
        return e.message;
      }
    });
    assert.equal(message, `ms-deform-attn: the worker stopped: the worker script ${origin}/nowhere/msda-worker.js failed to load or threw `
      + "(initWorker's wasmPaths places dist/msda-worker.js there: is it served at that URL?)");
  } finally {
    await page.close();
  }
});
