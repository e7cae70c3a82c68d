// The problem's options are declared once per language: bindings/core/options.js (OPTIONS) and
// src/options.h (MSDA_OPTIONS). This test holds the C table, src/msda.h's enums, the problem
// description's slots, the typings, both CLIs' help and the WebGPU problem's words to OPTIONS,
// as tests/js/desc.test.js holds the description's slots. The JS API's lists and defaults
// (core/args.js), the description (core/problem.js), the JS CLI's flags (bindings/cli/args.js) and
// the WGSL words (bindings/webgpu/plan.js) are made from OPTIONS itself.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import test from 'node:test';
import { DEFAULTS, LOCATION_LAYOUTS, PADDING_MODES, readOptions, VALUE_LAYOUTS } from '../../bindings/core/args.js';
import { isChoice, OPTIONS } from '../../bindings/core/options.js';
import { DESC } from '../../bindings/core/problem.js';
import { USAGE } from '../../bindings/cli/texts.js';
import { problemWords } from '../../bindings/webgpu/plan.js';

const read = (path) => readFile(new URL(`../../${path}`, import.meta.url), 'utf8');
const cName = (jsName) => jsName.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();
const strings = (list) => [...list.matchAll(/"([^"]*)"/g)].map((m) => m[1]);
// A switch's values in C (its constants and its words): its numbers.
const cWords = (o) => (isChoice(o) ? o.values : o.values.map((_, i) => String(i)));

test('src/options.h declares the options of OPTIONS, in its order, field, flag, constants and words alike', async () => {
  const header = await read('src/options.h');
  const table = header.slice(header.indexOf('#define MSDA_OPTIONS(X)'), header.indexOf('#define MSDA_OPTION_MAX_VALUES'));
  const entries = [...table.replace(/\\\n/g, ' ').matchAll(/X\((\w+), (\w+), (\w+), "([^"]+)",\s*\(([^)]*)\),\s*\(([^)]*)\)\)/g)]
    .map(([, id, field, type, flag, constants, words]) => ({ id, field, type, flag, constants: strings(constants), words: strings(words) }));
  assert.equal(entries.length, OPTIONS.length, 'one X() per option');
  OPTIONS.forEach((o, i) => {
    const c = entries[i];
    assert.equal(c.id, cName(o.desc), `${o.name}: the C ID is its description slot's name`);
    assert.equal(c.field, o.c, `${o.name}: msda_problem field`);
    assert.equal(c.flag, o.cli, `${o.name}: the CLIs' flag`);
    assert.deepEqual(c.constants, o.cValues ?? cWords(o), `${o.name}: the C constants`);
    assert.deepEqual(c.words, cWords(o), `${o.name}: the words`);
    assert.equal(o.default, o.values[0], `${o.name}: value 0 is the default (msda_problem_init's)`);
  });
});

test('msda.h\'s enums number each option\'s values as OPTIONS orders them', async () => {
  const header = await read('src/msda.h');
  for (const o of OPTIONS) {
    if (o.cValues === null) continue;
    o.cValues.forEach((name, i) => assert.match(header, new RegExp(`\\b${name} = ${i}\\b`), `${o.name}: ${name}`));
    const type = header.match(new RegExp(`(\\w+) ${o.c};`));
    assert.ok(type && header.includes(`typedef enum ${type[1]} {`), `${o.name}: msda_problem.${o.c} is an enum`);
  }
});

test('each option has its problem description slot, in JS and in C', async () => {
  const header = await read('bindings/c/problem_desc.h');
  for (const o of OPTIONS) {
    assert.ok(Number.isInteger(DESC[o.desc]), `DESC.${o.desc}`);
    assert.match(header, new RegExp(`MSDA_DESC_${cName(o.desc)} = ${DESC[o.desc]},`), `${o.name}: MSDA_DESC_${cName(o.desc)}`);
  }
});

test('the JS API\'s lists and defaults, the typings and both CLIs\' help say what OPTIONS says', async () => {
  assert.deepEqual([VALUE_LAYOUTS, LOCATION_LAYOUTS, PADDING_MODES],
    ['valueLayout', 'samplingLocationsLayout', 'paddingMode'].map((n) => OPTIONS.find((o) => o.name === n).values));
  assert.deepEqual(DEFAULTS, Object.fromEntries(OPTIONS.map((o) => [o.name, o.default])));
  const types = await read('bindings/index.d.ts');
  const help = USAGE.map(([, line]) => line).join('\n');
  for (const o of OPTIONS) {
    assert.match(types, new RegExp(`\\n  ${o.name}\\?: ${o.type};`), `Options.${o.name} is ${o.type}`);
    if (isChoice(o)) {
      assert.ok(types.includes(`export type ${o.type} = ${o.values.map((v) => `'${v}'`).join(' | ')};`), `type ${o.type}`);
      // the flag's line, and its default before the next flag
      const at = help.indexOf(`  ${o.cli} ${o.values.join('|')} `);
      assert.ok(at >= 0, `help: ${o.cli} ${o.values.join('|')}`);
      assert.match(help.slice(at).split(/\n {2}--/)[0], new RegExp(`default ${o.default}\\b`), `help: ${o.cli}'s default`);
    } else {
      assert.match(help, new RegExp(`\\n {2}${o.cli} [^\\n]*default off`), `help: the switch ${o.cli}`);
    }
  }
  const texts = await read('src/cli/texts.h');
  for (const o of OPTIONS) assert.ok(texts.includes(`"  ${o.cli} `), `src/cli/texts.h: ${o.cli}`);
});

test('every value reads, lands in its slot and becomes its WGSL word', async () => {
  const wgsl = await read('bindings/webgpu/kernels/problem.js');
  for (const o of OPTIONS) {
    assert.match(wgsl, new RegExp(`\\['${o.wgsl.word}', 'u32'\\]`), `kernels/problem.js: the word ${o.wgsl.word}`);
    o.values.forEach((value, i) => {
      const options = readOptions('test', { [o.name]: value });
      assert.equal(options[o.name], value);
      const problem = {
        batch: 1, numQueries: 1, numHeads: 1, channels: 1, numLevels: 1, numPoints: 1, valueLength: 1,
        spatialShapes: [[1, 1]], levelStartIndex: [0], ...options,
      };
      const words = problemWords(problem);
      const field = [...wgsl.matchAll(/\['(\w+)', '(?:u32|f32)'\]/g)].map((m) => m[1]).indexOf(o.wgsl.word);
      assert.equal(words[field], o.wgsl.words[i], `${o.name} = ${value}: ${o.wgsl.word}`);
    });
  }
});
