// The package as users get it: `npm pack`, install the tarball into an empty project offline,
// import it by name and run it; and the hand-written typings checked by `tsc --strict`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const npmEnv = { ...process.env, npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };

test('npm pack + install the tarball into an empty project + import works', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'msda-pack-'));
  try {
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], { cwd: root, env: npmEnv });
    const [{ filename, files }] = JSON.parse(stdout);
    const paths = files.map((f) => f.path);
    for (const needed of ['package.json', 'README.md', 'bindings/index.js', 'bindings/loader.js', 'bindings/index.d.ts',
      'bindings/native.js', 'bindings/reference.js', 'dist/msda-simd.wasm', 'dist/msda-scalar.wasm',
      'bindings/threads.js', 'bindings/threads-worker.js', 'dist/msda-simd-threads.wasm']) {
      assert.ok(paths.includes(needed), `the tarball has ${needed}`);
    }
    for (const p of paths) {
      assert.match(p, /^(package\.json|README\.md|LICENSE|bindings\/[^/]+\.(js|d\.ts)|dist\/msda-(simd|scalar|simd-threads)\.wasm)$/, `only what users need, not ${p}`);
    }

    const project = join(dir, 'project');
    await run('mkdir', ['-p', project]);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'user-project', private: true, type: 'module' }));
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, filename)], { cwd: project, env: npmEnv });
    const script = `
      import { init } from 'ms-deform-attn';
      import { referenceForward } from 'ms-deform-attn/reference';
      const results = [];
      for (const simd of [true, false]) {
        const msda = await init({ simd });
        const args = {
          value: { data: new Float32Array([1, 2, 3, 4]), shape: [1, 4, 1, 1] },
          spatialShapes: [[2, 2]],
          samplingLocations: { data: new Float32Array([0.5, 0.5]), shape: [1, 1, 1, 1, 1, 2] },
          attentionWeights: { data: new Float32Array([2]), shape: [1, 1, 1, 1, 1] },
        };
        results.push([msda.backend, msda.forward(args).data[0], referenceForward(args).data[0]]);
      }
      console.log(JSON.stringify(results));
    `;
    await writeFile(join(project, 'use.mjs'), script);
    const out = await run(process.execPath, ['use.mjs'], { cwd: project });
    assert.deepEqual(JSON.parse(out.stdout), [['wasm', 5, 5], ['wasm-scalar', 5, 5]]);
    const installed = JSON.parse(await readFile(join(project, 'node_modules/ms-deform-attn/package.json'), 'utf8'));
    assert.equal(installed.name, 'ms-deform-attn');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('index.d.ts covers the public API: tsc --strict accepts the typed usage file', async () => {
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  const args = ['--strict', '--noEmit', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022',
    '--types', 'node', 'tests/js/types/usage.ts'];
  try {
    await run(process.execPath, [tsc, ...args], { cwd: root });
  } catch (e) {
    assert.fail(`tsc reported errors:\n${e.stdout}${e.stderr}`);
  }
});
