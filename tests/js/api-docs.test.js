// docs/api.md names every member of the instances init() resolves to, as bindings/index.d.ts
// types them: the Msda class under "An `Msda` has:", the WebGPU instance (MsdaWebGPU) under
// "The instance on WebGPU".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const read = (f) => readFileSync(new URL(`../../${f}`, import.meta.url), 'utf8');
const types = read('bindings/index.d.ts');
const api = read('docs/api.md');

// The members of `export <kind> <name> {` … `}`: each `name:`, `name(` or `[Symbol.x](` at the
// top level of the block (comments left out).
function members(kind, name) {
  const start = types.indexOf(`export ${kind} ${name} {`);
  assert.ok(start >= 0, `bindings/index.d.ts has ${kind} ${name}`);
  const body = types.slice(start, types.indexOf('\n}', start)).replace(/\/\*[\s\S]*?\*\//g, '');
  const names = new Set();
  for (const m of body.matchAll(/^ {2}(?:readonly )?(\[Symbol\.\w+\]|\w+)\??[(:]/gm)) names.add(m[1].replace(/^\[(.*)\]$/, '$1'));
  return [...names];
}

// The docs between a heading or line and the next heading.
function section(from) {
  const start = api.indexOf(from);
  assert.ok(start >= 0, `docs/api.md has ${JSON.stringify(from)}`);
  const end = api.slice(start + from.length).search(/^#{2,3} /m);
  return api.slice(start, end < 0 ? undefined : start + from.length + end);
}

// A member is named when it is a code span of its own: `name`, `name(…)…` or `msda.name…`.
const named = (text, name) => new RegExp(`\`(?:msda(?:\\[|\\.))?${name.replace('.', '\\.')}[\\](\`\\s]`).test(text);

for (const [kind, type, heading] of [['class', 'Msda', 'An `Msda` has:'], ['interface', 'MsdaWebGPU', '### The instance on WebGPU']]) {
  test(`docs/api.md names every member of ${type} (bindings/index.d.ts)`, () => {
    const list = members(kind, type);
    assert.ok(list.includes('forward') && list.includes('dispose'), `read ${type}'s members: ${list}`);
    const text = section(heading);
    const missing = list.filter((m) => !named(text, m));
    assert.deepEqual(missing, [], `${type}'s members not named under ${JSON.stringify(heading)}`);
  });
}

test('the WebGPU members include the GPU calls, and the section links docs/webgpu.md', () => {
  const list = members('interface', 'MsdaWebGPU');
  for (const m of ['device', 'adapterInfo', 'limits', 'numerics', 'dispatchForward', 'dispatchBackward', 'forward', 'backward', 'dispose']) {
    assert.ok(list.includes(m), `MsdaWebGPU has ${m}`);
  }
  const text = section('### The instance on WebGPU');
  assert.match(text, /Promise</, 'forward and backward return Promises there');
  assert.match(text, /\{ outputs: 'gpu' \}/);
  assert.match(text, /\{ buffer, shape/);
  assert.match(text, /\]\(webgpu\.md[#)]/, 'links docs/webgpu.md for the details');
});
