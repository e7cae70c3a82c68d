// The shell scripts under `set -o pipefail`: no pipe ends in a reader that may stop before the
// writer is done (`grep -q`, `head`). The writer then dies of SIGPIPE, pipefail makes the whole
// pipe fail, and a check that found what it looked for reads as "missing" some of the time
// (scripts/setup.sh re-ran apt in 3 of 3 `make setup` runs that way).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const EARLY_EXIT = /\|\s*(grep\s+(-\w*[qlm]\w*\b|--quiet|--silent|--files-with-matches|--max-count)|head\b)/;

test('no pipe into grep -q or head in a script under pipefail', () => {
  const scripts = execFileSync('git', ['ls-files', '-z', '*.sh'], { cwd: root, encoding: 'utf8' }).split('\0').filter(Boolean);
  assert.ok(scripts.includes('scripts/setup.sh'), 'the scripts are found');
  const problems = [];
  for (const file of scripts) {
    const text = readFileSync(`${root}/${file}`, 'utf8');
    if (!/^\s*set\s+-\w*o\s+pipefail|^\s*set\s+-o\s+pipefail/m.test(text)) continue;
    text.split('\n').forEach((line, i) => {
      const code = line.replace(/(^|\s)#.*$/, '');
      if (EARLY_EXIT.test(code)) problems.push(`${file}:${i + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(problems, [], 'under pipefail a reader that exits early fails the pipe (SIGPIPE): read the output whole first');
});
