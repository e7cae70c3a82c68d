// The CLIs' texts are written once, in bindings/cli/texts.js: the JS CLI reads the table and
// src/cli/texts.h is made from it (scripts/cli-texts.js). This test holds the committed header to
// the table, and each text to the CLI the table gives it to: a text both CLIs print is used in
// src/cli/ and in bindings/cli/, one CLI's own only in its own, and each --help is the table's
// lines for it (the byte-for-byte comparisons of the two CLIs are cli.test.js's and the others').
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { JS_TEXTS, NATIVE_TEXTS, TEXTS, USAGE } from '../../bindings/cli/texts.js';
import { say } from '../../bindings/cli/messages.js';
import { cName, header } from '../../scripts/cli-texts.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const sources = (dir, ext) => readdirSync(`${root}/${dir}`).filter((f) => f.endsWith(ext) && f !== 'texts.js')
  .map((f) => readFileSync(`${root}/${dir}/${f}`, 'utf8')).join('\n');
const C = sources('src/cli', '.c');
const JS = sources('bindings/cli', '.js');
const usedInC = new Set([...C.matchAll(/\bTEXT_([A-Z0-9_]+)\b/g)].map((m) => `TEXT_${m[1]}`));
const usedInJs = new Set([...JS.matchAll(/\bT\.(\w+)\b/g)].map((m) => m[1]));

test('src/cli/texts.h is what scripts/cli-texts.js makes of the table (make cli-texts)', () => {
  assert.equal(readFileSync(`${root}/src/cli/texts.h`, 'utf8'), header());
});

test('each text is used by the CLIs the table gives it to, and by no other', () => {
  const groups = { TEXTS, JS_TEXTS, NATIVE_TEXTS };
  const keys = Object.values(groups).flatMap((g) => Object.keys(g));
  assert.deepEqual(keys.filter((k, i) => keys.indexOf(k) !== i), [], 'a name in two groups');
  for (const [group, texts] of Object.entries(groups)) {
    for (const key of Object.keys(texts)) {
      const inC = usedInC.has(cName(key)), inJs = usedInJs.has(key);
      assert.deepEqual([inC, inJs], [group !== 'JS_TEXTS', group !== 'NATIVE_TEXTS'], `${group}.${key}: [used in src/cli, in bindings/cli]`);
    }
  }
  for (const name of usedInC) assert.ok(name === 'TEXT_USAGE' || keys.some((k) => cName(k) === name), `${name} is in the table`);
  for (const key of usedInJs) assert.ok(key in TEXTS || key in JS_TEXTS, `T.${key} is in the table`);
});

test('a text is a printf format of the conversions say() fills in as C does', () => {
  const all = { ...TEXTS, ...JS_TEXTS, ...NATIVE_TEXTS };
  for (const [key, text] of Object.entries(all)) {
    for (const m of text.matchAll(/%[^a-z]*[a-z]*/g)) assert.match(m[0], /^%-?\d*(\.\d+)?(s|d|ld|lld|zu)$/, `${key}: ${m[0]}`);
  }
  assert.equal(say('%s|%-6s|%.3s|%lld|%zu|%d', 'a', 'bc', 'defgh', 12n, 7, -24), 'a|bc    |def|12|7|-24');
});

test("each --help is the table's lines for both CLIs and its own, in order", () => {
  for (const who of ['both', 'native', 'js']) assert.ok(USAGE.some(([w]) => w === who), `a line of ${who}`);
  assert.deepEqual(USAGE.filter(([w]) => !['both', 'native', 'js'].includes(w)), []);
  const lines = (cli) => USAGE.filter(([w]) => w === 'both' || w === cli).map(([, l]) => `${l}\n`).join('');
  const native = spawnSync(`${root}/build/native/msda`, ['--help'], { encoding: 'utf8' });
  const js = spawnSync(process.execPath, [`${root}/bindings/cli.js`, '--help'], { encoding: 'utf8' });
  assert.equal(native.stdout, lines('native'));
  assert.equal(js.stdout, lines('js'));
  // the JS CLI alone has --backend and msda demo; the native one says where crosscheck without --expect is
  assert.match(js.stdout, /--backend wasm\|wasm-scalar\|native/);
  assert.match(js.stdout, /msda demo/);
  assert.doesNotMatch(native.stdout, /--backend|msda demo/);
  assert.match(native.stdout, /crosscheck without --expect .* is the JS CLI's/);
});
