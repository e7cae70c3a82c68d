// Every repository path that a build file, a script or a page names, or a source file's comment
// names, is a file or folder the repository tracks: a move that leaves a
// comment or a make rule pointing at the old place fails here. Documents are named with their
// path (TOOLCHAIN.md alone names nothing a reader can open). A file named bare (`core.js`, no
// folder) in a source file's comment or a build file is one that some folder of the tree holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const TOP = ['src', 'bindings', 'tests', 'web', 'demo', 'mk', 'scripts', 'docs', '.ci'];
// A path into the tree: a top folder, then names; not a glob, a template or a placeholder.
const PATH = new RegExp(String.raw`(?<![\w./@-])((?:${TOP.map((t) => t.replace('.', '\\.')).join('|')})/[\w.+/-]*[\w/])`, 'g');
const TEXT = /\.(c|h|js|mjs|cjs|ts|mk|sh|md|json|html|css|py)$|(^|\/)(Makefile|run|\.gitignore)$/;
// Source files are read for their comments only: their strings may name a test's own made-up tree.
const CODE = /\.(c|h|js|mjs|cjs|ts|css)$/;
const comments = (text) => [...text.matchAll(/\/\*[\s\S]*?\*\/|(?<![:'"`\\])\/\/[^\n]*/g)].map((m) => m[0]).join('\n');
// Files whose text is data, not a description of this tree, and this checker's own test strings.
const SKIP = /^(package-lock\.json|tests\/fixtures\/.*\.json|tests\/fuzz\/corpus\/|tests\/fuzz\/regressions\/|tests\/js\/repo-paths\.test\.js$)/;
// Where bare names are checked: source files' comments and the build files. Documents name the
// reader's own files too (vite.config.js, a script of theirs).
const BARE_IN = /\.(c|h|js|mjs|cjs|ts|css|mk|sh|py)$|(^|\/)(Makefile|run)$/;
// A file's bare name: not a path's last part, not a pattern (kernel_<isa>.c, *.js), not a member.
const BARE = /(?<![\w./@$<{*%\\-])([A-Za-z_][\w-]*(?:\.[\w-]+)*\.(?:c|h|js|mjs|cjs|ts|mk|sh|py))\b(?![\w/(-])/g;
// Named bare but not in this tree: system and Node headers, Emscripten's and zlib's sources, the
// script of docs/cli.md's worked example (the reader's), and products whose names end like a file's.
const ELSEWHERE = new Set(['cpuid.h', 'node_api.h', 'emmalloc.c', 'puff.c', 'make-case.mjs', 'Node.js', 'TensorFlow.js']);

function pathProblems(file, text, has) {
  const problems = [];
  for (const m of text.matchAll(PATH)) {
    const rest = text.slice(m.index + m[0].length, m.index + m[0].length + 2);
    // a pattern, not a file: src/kernel_<isa>.c, mk/*.mk, tests/${name}, tests/c/test_%.c, reference.{h,c}
    if (/^\.?[*$<{…%]/.test(rest)) continue;
    let p = m[1].replace(/[.]+$/, '');               // a sentence's full stop
    if (p.endsWith('/')) p = p.slice(0, -1);
    if (/\/[A-Z]+(\.|\/|$)/.test(p)) continue;         // a placeholder: tests/js/NAME.test.js
    if (!has(p)) problems.push(`${file} names ${p}, which the repository does not have`);
  }
  if (!file.startsWith('docs/') || !['docs/CONTRACT.md', 'docs/SEMANTICS.md'].includes(file)) {
    for (const m of text.matchAll(/(?<![\w/.-])(TOOLCHAIN|STYLE|WEBGPU|DEVELOPERS)\.md\b/g)) {
      problems.push(`${file} names ${m[1]}.md, which is not in the repository`);
    }
  }
  return problems;
}

function bareProblems(file, text, names) {
  const problems = [];
  for (const m of text.matchAll(BARE)) {
    if (!names.has(m[1]) && !ELSEWHERE.has(m[1])) problems.push(`${file} names ${m[1]}, which no folder of the repository holds`);
  }
  return problems;
}

function trackedTree() {
  const files = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8', maxBuffer: 1 << 26 }).split('\0').filter(Boolean);
  const dirs = new Set();
  for (const f of files) for (let i = f.indexOf('/'); i !== -1; i = f.indexOf('/', i + 1)) dirs.add(f.slice(0, i));
  const set = new Set(files);
  // A path may also be named from a folder of its own (an app's src/index.js in tests/bundlers/app/).
  const within = (p) => files.some((f) => f.endsWith(`/${p}`)) || [...dirs].some((d) => d.endsWith(`/${p}`));
  return { files, has: (p) => set.has(p) || dirs.has(p) || within(p), names: new Set(files.map((f) => f.slice(f.lastIndexOf('/') + 1))) };
}

test('every repository path named in a source, build file, script or page exists, and every file named bare in a comment or build file', () => {
  const { files, has, names } = trackedTree();
  const problems = [];
  for (const f of files) {
    if (!TEXT.test(f) || SKIP.test(f)) continue;
    const text = readFileSync(`${root}/${f}`, 'utf8');
    const read = CODE.test(f) ? comments(text) : text;
    problems.push(...pathProblems(f, read, has));
    if (BARE_IN.test(f)) problems.push(...bareProblems(f, read, names));
  }
  assert.deepEqual(problems, []);
});

test('source files are read for their comments, both kinds', () => {
  assert.equal(comments("const a = 'src/x.c'; // src/y.c\n/* src/z.c\n */ 'http://h/p'"), '// src/y.c\n/* src/z.c\n */');
});

test('the path check finds a moved file, a moved folder and a document named without its path', () => {
  const has = (p) => ['src/entry.c', 'src', 'bindings/node', 'bindings/node/serve.js'].includes(p);
  assert.deepEqual(pathProblems('x.c', '/* see src/entry.c and bindings/node/serve.js, or mk/*.mk, src/kernel_<isa>.c, src/x.{h,c}, tests/js/NAME.test.js */', has), []);
  assert.deepEqual(pathProblems('x.c', '/* (src/msda.c) */', has), ['x.c names src/msda.c, which the repository does not have']);
  assert.deepEqual(pathProblems('x.mk', '# web/serve.js.', has), ['x.mk names web/serve.js, which the repository does not have']);
  assert.deepEqual(pathProblems('x.mk', '# bindings/wasm/', has), ['x.mk names bindings/wasm, which the repository does not have']);
  assert.deepEqual(pathProblems('x.mk', '# see TOOLCHAIN.md', has), ['x.mk names TOOLCHAIN.md, which is not in the repository']);
  // not a path into this tree: a URL, another repository's, a scoped package
  assert.deepEqual(pathProblems('x.js', "'https://x.org/src/a.c' '../other/src/a.c' '@webgpu/types' 'node_modules/webgpu/index.js'", has), []);
});

test('the bare-name check finds a file no folder holds, and passes paths, patterns and members', () => {
  const names = new Set(['init.js', 'test_cli.c', 'stream.js']);
  assert.deepEqual(bareProblems('x.js', '// the core (core.js streamForward), init.js; test_cli.js checks it', names),
    ['x.js names core.js, which no folder of the repository holds', 'x.js names test_cli.js, which no folder of the repository holds']);
  // a path (the path check's), a pattern, a member, a header or product from elsewhere, a name the tree has
  assert.deepEqual(bareProblems('x.c', '/* bindings/core/gone.js, kernel_<isa>.c, *.js, msda.forward.js(), <cpuid.h>, Node.js, `stream.js` */', names), []);
});

// Each page of docs/ (but the contract's copies) opens with one navigation line naming every page,
// so a reader can reach any page from any other, the ONNX and WebGPU pages included.
test('docs/: every page\'s navigation line (its third line) links every page, in the same order', async () => {
  const { readdirSync } = await import('node:fs');
  const pages = readdirSync(`${root}/docs`).filter((f) => f.endsWith('.md') && !['CONTRACT.md', 'SEMANTICS.md'].includes(f)).sort();
  const lines = pages.map((p) => readFileSync(`${root}/docs/${p}`, 'utf8').split('\n')[2] ?? '');
  for (const [i, page] of pages.entries()) {
    const line = lines[i];
    assert.ok(line.startsWith('[ms-deform-attn](../README.md) · docs:'), `docs/${page}: line 3 is not the navigation line: ${line.slice(0, 80)}`);
    const linked = [...line.matchAll(/\]\(([a-z-]+\.md)\)/g)].map((m) => m[1]).sort();
    assert.deepEqual(linked, pages, `docs/${page}: its navigation line links ${linked.join(', ')}`);
    assert.equal(line, lines[0], `docs/${page}: its navigation line differs from docs/${pages[0]}'s`);
  }
});
