// bindings/index.d.ts types the WebGPU backend: tsc --strict accepts tests/webgpu/usage.ts (and
// refuses what its @ts-expect-error lines mark).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

test('tsc --strict accepts the WebGPU usage file', async () => {
  const tsc = path.join(root, 'node_modules/typescript/bin/tsc');
  const args = [tsc, '--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022',
    '--types', 'node', 'tests/webgpu/usage.ts'];
  const result = await new Promise((resolve) => execFile(process.execPath, args, { cwd: root }, (error, stdout, stderr) => resolve({ error, stdout, stderr })));
  assert.equal(result.error, null, `tsc reported errors:\n${result.stdout}${result.stderr}`);
});
