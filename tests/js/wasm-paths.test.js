// init's wasmPaths in Node: a path or file: URL prefix, or a per-file map, decides which file is
// loaded (a map entry for the SIMD module pointing at the scalar one loads the scalar one); bad
// values are TypeErrors naming the option; a file that is not there is named in the error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { init } from '../../bindings/index.js';
import { OPTION_COMBOS, randomCase } from './helpers.js';

const DIST = fileURLToPath(new URL('../../dist/', import.meta.url));

test('wasmPaths: a path prefix, a file: URL prefix and a per-file map choose the files', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'msda-wasmpaths-'));
  try {
    // The files moved elsewhere: only wasmPaths can find them there.
    await cp(DIST, path.join(dir, 'assets'), { recursive: true });
    const { args, gradOutput } = randomCase(21, OPTION_COMBOS[3]);
    const plain = await init();
    const want = plain.backward({ ...args, gradOutput });
    for (const wasmPaths of [`${path.join(dir, 'assets')}/`, `${pathToFileURL(path.join(dir, 'assets')).href}/`,
      new URL(`${pathToFileURL(path.join(dir, 'assets')).href}/`)]) {
      for (const threads of [1, 2]) {
        const msda = await init({ wasmPaths, threads });
        assert.equal(msda.threads, threads);
        assert.notEqual(msda._backend, plain._backend, 'files from elsewhere: a backend of their own');
        assert.deepEqual(msda.backward({ ...args, gradOutput }), want, `${wasmPaths}, ${threads} thread(s)`);
        msda.dispose();
      }
    }
    const swapped = await init({ wasmPaths: { 'msda-simd.wasm': path.join(dir, 'assets/msda-scalar.wasm') } });
    assert.equal(swapped.simd, false, 'the map decides which file is loaded');
    swapped.dispose();

    await assert.rejects(init({ wasmPaths: `${path.join(dir, 'nowhere')}/` }),
      { message: new RegExp(`cannot read ${path.join(dir, 'nowhere', 'msda-simd.wasm').replace(/[/.]/g, '\\$&')}.*wasmPaths`) });
    plain.dispose();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('wasmPaths: wrong kinds and unknown file names are TypeErrors naming the option', async () => {
  await assert.rejects(init({ wasmPaths: 5 }), { name: 'TypeError', message: /init: wasmPaths is number 5, expected a URL prefix/ });
  await assert.rejects(init({ wasmPaths: ['a/'] }), { name: 'TypeError', message: /init: wasmPaths is an Array/ });
  await assert.rejects(init({ wasmPaths: { 'msda.wasm': '/x' } }),
    { name: 'TypeError', message: /init: wasmPaths has the key 'msda.wasm', expected file names among msda-simd.wasm, msda-scalar.wasm/ });
  await assert.rejects(init({ wasmPaths: { 'msda-simd.wasm': 7 } }),
    { name: 'TypeError', message: /init: wasmPaths\['msda-simd.wasm'\] is number 7, expected a URL/ });
});
