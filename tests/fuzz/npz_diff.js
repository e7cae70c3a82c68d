// Differential fuzzing of the two .npz readers (src/cli/npz.c, bindings/cli/npz.js): mutations
// of the seeds in tests/fuzz/corpus/npz (byte flips, 16/32/64-bit fields set to edge values, cuts,
// repeated spans), a batch at a time through build/fuzz/npz_verdicts (one process per batch) and
// through parseNpz with node:zlib; any archive on which their verdicts differ is written to
// build/fuzz/findings/npz-diff/ (add it to tests/fuzz/regressions/npz once fixed) and fails the run.
// With SAVE, also writes the first archive of each distinct verdict there (at most 64): how
// tests/fixtures/npz/mutated/ was made (node tests/fuzz/npz_diff.js 20 1 tests/fixtures/npz/mutated).
// usage: node tests/fuzz/npz_diff.js SECONDS [SEED [SAVE]]
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { parseNpz } from '../../bindings/cli/npz.js';

const seconds = Number(process.argv[2] ?? 5);
let state = Number(process.argv[3] ?? 1) >>> 0 || 1;
const rand = (n) => { state ^= state << 13; state >>>= 0; state ^= state >>> 17; state ^= state << 5; state >>>= 0; return state % n; };
const save = process.argv[4], saved = new Set();
if (save) mkdirSync(save, { recursive: true });
const dirs = ['tests/fuzz/corpus/npz', 'tests/fuzz/regressions/npz'];
const seeds = dirs.flatMap((d) => readdirSync(d).map((f) => readFileSync(`${d}/${f}`)));
const EDGES = [0, 1, 0xff, 0xffff, 0xffffffff, 0x7fffffff, 46, 30, 22, 56, 0x1000];

function mutate(b) {
  const out = Buffer.from(b);
  for (let n = 1 + rand(3); n > 0; n--) {
    const at = rand(out.length);
    switch (rand(5)) {
      case 0: out[at] ^= 1 << rand(8); break;
      case 1: if (at + 2 <= out.length) out.writeUInt16LE(EDGES[rand(EDGES.length)] & 0xffff, at); break;
      case 2: if (at + 4 <= out.length) out.writeUInt32LE(EDGES[rand(EDGES.length)] >>> 0, at); break;
      case 3: if (at + 8 <= out.length) out.writeBigUInt64LE(BigInt.asUintN(64, BigInt(EDGES[rand(EDGES.length)]) << BigInt(rand(40))), at); break;
      default: out[at] = rand(256);
    }
  }
  return out;
}

function jsVerdict(bytes) {
  let members;
  try {
    members = parseNpz(bytes, (b, maxOutputLength) => inflateRawSync(b, { maxOutputLength }));
  } catch (e) {
    return `refused: ${e.message}`;
  }
  return [...members.values()].map((m) => { try { m.read(); return 'ok'; } catch (e) { return e.message; } }).join('; ');
}

mkdirSync('build/fuzz/findings/npz-diff', { recursive: true });
const end = Date.now() + seconds * 1000;
let runs = 0, differ = 0;
while (Date.now() < end && differ === 0) {
  const batch = Array.from({ length: 500 }, () => mutate(seeds[rand(seeds.length)]));
  const input = Buffer.concat(batch.flatMap((b) => { const h = Buffer.alloc(4); h.writeUInt32LE(b.length); return [h, b]; }));
  const r = spawnSync('build/fuzz/npz_verdicts', { input, maxBuffer: 1 << 28, encoding: 'utf8' });
  if (r.status !== 0) { console.log(`npz_diff: npz_verdicts exited ${r.status} ${r.signal ?? ''}\n${r.stderr}`); process.exit(1); }
  const native = r.stdout.split('\n');
  batch.forEach((b, k) => {
    const js = jsVerdict(b);
    if (save && js === native[k] && !saved.has(js) && saved.size < 64) {
      writeFileSync(`${save}/m${String(saved.size).padStart(2, '0')}.npz`, b);
      saved.add(js);
    }
    if (js !== native[k] && differ++ < 5) {
      const file = `build/fuzz/findings/npz-diff/differ-${runs + k}.npz`;
      writeFileSync(file, b);
      console.log(`npz_diff: ${file}\n  native: ${native[k]}\n  js:     ${js}`);
    }
  });
  runs += batch.length;
}
console.log(`npz_diff: ${runs} archives in ${seconds} s, ${differ} with different verdicts`);
process.exit(differ ? 1 : 0);
