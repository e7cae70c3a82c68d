// The problem description's layout is written once per language: bindings/core/problem.js's DESC
// and bindings/c/problem_desc.h's MSDA_DESC_* enum. This test holds them to one table.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import test from 'node:test';
import { DESC, makeProblem } from '../../bindings/core/problem.js';

const header = await readFile(new URL('../../bindings/c/problem_desc.h', import.meta.url), 'utf8');
const cSlots = Object.fromEntries([...header.matchAll(/MSDA_DESC_([A-Z_]+) = (\d+)/g)].map(([, name, v]) => [name, Number(v)]));
const cName = (jsName) => jsName.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase();

test('problem description: the JS slots are the C slots, name for name', () => {
  assert.deepEqual(Object.keys(cSlots).sort(), Object.keys(DESC).map(cName).sort());
  for (const [name, slot] of Object.entries(DESC)) assert.equal(cSlots[cName(name)], slot, `DESC.${name}`);
});

test('problem description: makeProblem writes each value to its named slot', () => {
  const p = makeProblem({ batch: 2, numQueries: 3, numHeads: 4, channels: 5, numPoints: 6, shapes: [[7, 8], [9, 10]],
    starts: [0, 56], valueLength: 146 }, { valueLayout: 'BNLC', samplingLocationsLayout: 'B2QHLP', alignCorners: true,
    paddingMode: 'border', threads: 3 });
  const at = (name) => Number(p.desc[DESC[name]]);
  assert.deepEqual([at('batch'), at('numQueries'), at('numHeads'), at('channels'), at('numLevels'), at('numPoints'),
    at('valueLength'), at('valueLayout'), at('locationsLayout'), at('alignCorners'), at('padding'), at('threads'),
    at('valueDtype')],
  [2, 3, 4, 5, 2, 6, 146, 1, 1, 1, 1, 3, 0]);
  assert.deepEqual([...p.desc.slice(DESC.header)].map(Number), [7, 8, 9, 10, 0, 56]);
});
