// ms-deform-attn/tfjs in headless Chromium on tfjs-backend-cpu (the page: tfjs-page.js): the op's
// output and tf.grads equal Node's msda.forward/backward bits on the same inputs, and the layer
// trains (the loss falls).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { CHROMIUM, servePages } from './browser.js';
import { RESULTS, nodeResults, runPage, tfjsPage } from './tfjs-page.js';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--no-first-run'];
const PAGE = tfjsPage({ backend: 'cpu', seed: 2024, C: 5, steps: 60 });

let server, base, browser;

before(async () => {
  ({ server, base } = await servePages(PAGE));
  if (!fs.existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (make setup installs Debian's chromium)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await new Promise((r) => server.close(r));
});

test('Chromium: the tfjs op gives Node\'s bits (output and tf.grads), leaves no tensor, and the layer trains', async () => {
  const { r, problems } = await runPage(browser, base);
  assert.equal(r.error, undefined, r.error);
  assert.deepEqual(problems, []);
  assert.equal(r.backend, 'cpu');
  assert.equal(r.leaked, 0, 'tf.tidy leaves no tensor');

  const want = await nodeResults(PAGE.caseSource, r.msdaBackend);
  RESULTS.forEach((name, i) => {
    assert.ok(r.results[i] === want.hex[i], `${name}: the page's bits are Node's`);
  });
  assert.ok(r.losses[59] < 0.2 * r.losses[0], `the layer trains in the page: loss ${r.losses[0]} -> ${r.losses[59]}`);
});
