// Every `.code` an Error of this package may carry is in one table, bindings/core/errors.js:
// STATUS_CODES is src/msda.h's msda_status name for name and number (and msda_status_string's
// words, in C and through each backend), and no other source file spells a code.
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import test from 'node:test';
import { ERROR_CODES, STATUS_CODES } from '../../bindings/core/errors.js';
import { init } from '../../bindings/index.js';

const root = new URL('../../', import.meta.url);
const read = (path) => readFile(new URL(path, root), 'utf8');

test('STATUS_CODES is msda.h\'s msda_status, name for name and number, and status.c names each', async () => {
  const header = await read('src/msda.h');
  const body = header.slice(header.indexOf('typedef enum msda_status'), header.indexOf('} msda_status;'));
  const enumNames = [...body.matchAll(/(MSDA_[A-Z_]+) = (\d+)/g)].map(([, name, n]) => [name, Number(n)]);
  assert.deepEqual(enumNames, STATUS_CODES.map((name, n) => [name, n]));
  const status = await read('src/status.c');
  const named = [...status.matchAll(/case (MSDA_[A-Z_]+): return "(MSDA_[A-Z_]+)";/g)];
  assert.deepEqual(named.map(([, c, s]) => [c, s]), STATUS_CODES.map((name) => [name, name]));
});

test('the wasm module names every status as STATUS_CODES does (msda_status_string, which the addon calls too)', async () => {
  const wasm = await init({ backend: 'wasm' });
  try {
    const backend = wasm._backend;
    const names = STATUS_CODES.map((_, n) => backend.cString(backend.exports.msda_wasm_status_name(n)));
    assert.deepEqual(names, STATUS_CODES);
  } finally {
    wasm.dispose();
  }
});

async function sources(dir, out = []) {
  for (const entry of await readdir(new URL(dir, root), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) await sources(path, out);
    else if (/\.(js|ts)$/.test(entry.name)) out.push(path);
  }
  return out;
}

test('no source but core/errors.js spells a code; every code the typings name is in ERROR_CODES', async () => {
  for (const path of await sources('bindings')) {
    const text = await read(path);
    if (path.endsWith('.d.ts')) {
      for (const [code] of text.matchAll(/MSDA_(?:ERR|NATIVE|WEBGPU)_[A-Z_]+/g)) assert.ok(ERROR_CODES.includes(code), `${path}: ${code}`);
    } else if (path !== 'bindings/core/errors.js') {
      assert.deepEqual([...text.matchAll(/['"`](MSDA_(?:OK|ERR_[A-Z_]+|NATIVE_[A-Z_]+|WEBGPU_[A-Z_]+))['"`]/g)].map((m) => m[1]), [], `${path} spells a code`);
    }
  }
});
