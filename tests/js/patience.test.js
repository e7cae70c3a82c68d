// No suite fails because the machine is slow: every wall-clock limit in the suites is the one
// patience (tests/patience.js, HANG_SECONDS in the C tests), never a number of seconds written
// where it is used, and the fuzzers' replay of committed inputs is bounded by CPU time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { PATIENCE_MS } from '../patience.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

// A limit written as a number where it is used: `timeout: 20000`, `setTimeout(resolve, 5000, ...)`
// racing a call, `alarm(20)`, a libFuzzer replay's `-timeout=10`.
const LIMITS = [
  [/\btimeout: *\d/g, 'a timeout written as a number'],
  [/\bsettles\([^)]*ms = \d/g, 'a settle limit written as a number'],
  [/setTimeout\(resolve, *\d{3,}/g, 'a race against a fixed delay'],
  [/\balarm\( *[1-9]/g, 'an alarm written as a number'],
];

export function limitProblems(file, text) {
  const problems = [];
  for (const [re, what] of LIMITS) for (const m of text.matchAll(re)) problems.push(`${file}: ${what}: ${m[0]}`);
  return problems;
}

test('every wall-clock limit in the suites is the one patience, long enough for a loaded machine', () => {
  assert.ok(PATIENCE_MS >= 600_000, `PATIENCE_MS is ${PATIENCE_MS}`);
  const files = execFileSync('git', ['ls-files', '-z', 'tests'], { cwd: root, encoding: 'utf8' }).split('\0')
    .filter((f) => /\.(js|c)$/.test(f) && !f.startsWith('tests/fixtures/') && f !== 'tests/js/patience.test.js');
  const problems = files.flatMap((f) => limitProblems(f, readFileSync(`${root}/${f}`, 'utf8')));
  assert.deepEqual(problems, []);
  assert.match(readFileSync(`${root}/tests/c/test_threads.c`, 'utf8'), /#define HANG_SECONDS 600\b/);
});

test("the fuzzers' replay of committed inputs has no per-input wall-clock limit, only a CPU-time one", () => {
  const run = readFileSync(`${root}/tests/fuzz/run.sh`, 'utf8');
  const replay = run.split('\n').find((l) => l.includes('-runs=0'));
  assert.ok(replay, 'run.sh replays with -runs=0');
  assert.match(replay, /ulimit -t \d+/);
  assert.match(replay, /-timeout=0\b/);
  assert.match(replay, /-artifact_prefix=/);
});

test('the limit check finds each kind of fixed limit', () => {
  assert.equal(limitProblems('x.js', "spawnSync(c, a, { timeout: 20000 }); spawnSync(c, a, { timeout: PATIENCE_MS })").length, 1);
  assert.equal(limitProblems('x.js', "function settles(p, what, ms = 10000) {}").length, 1);
  assert.equal(limitProblems('x.js', "setTimeout(resolve, 5000, 'pending')").length, 1);
  assert.equal(limitProblems('x.c', 'alarm(20); alarm(0); alarm(HANG_SECONDS);').length, 1);
});
