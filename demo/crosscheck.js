#!/usr/bin/env node
// Crosscheck: write a case as NumPy .npy files, run the native command line and the wasm
// command line on it, and print how closely their outputs agree. Then the workflow for
// checking your own kernel against ours (docs/cli.md, For kernel authors): a "bfloat16 kernel"
// (our outputs on bfloat16 inputs, rounded to bfloat16, as such a kernel stores them) passes
// `msda crosscheck --expect DIR --dtype bfloat16`, and the same dumps with one element off fail,
// the report naming it by its coordinates.
//
//   npm run demo:crosscheck [-- --dir DIR] [-- any msda option: --align-corners,
//                            --padding-mode border, --value-layout BNLC, ...]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serializeNpy, parseNpy } from '../bindings/npy.js';
import { narrowToHalf, widenHalf } from '../bindings/core/half.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NATIVE = path.join(ROOT, 'build', 'native', 'msda');
const WASM_CLI = path.join(ROOT, 'bindings', 'cli.js');
const TOL = { abs: 1e-5, rel: 1e-4 };   // |a − b| ≤ abs + rel·|b|, as msda crosscheck uses

function parseArgs(argv) {
  const o = { dir: null, flags: [] };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--dir') o.dir = argv[++i];
    else o.flags.push(argv[i]);
  }
  const opt = (name, fallback) => { const i = o.flags.indexOf(name); return i >= 0 ? o.flags[i + 1] : fallback; };
  o.valueLayout = opt('--value-layout', 'BLNC');
  o.locationsLayout = opt('--sampling-locations-layout', 'BQHLP2');
  return o;
}

function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A small detector-like case: 2 images, three levels, 40 queries, 4 heads of 8 channels.
function writeCase(dir, o) {
  const rand = rng(2024);
  const shapes = [[16, 20], [8, 10], [4, 5]];
  const [B, Q, H, C, P, NL] = [2, 40, 4, 8, 4, shapes.length];
  const L = shapes.reduce((s, [h, w]) => s + h * w, 0);
  const starts = shapes.map((_, l) => shapes.slice(0, l).reduce((s, [h, w]) => s + h * w, 0));
  const f32 = (shape, f) => ({ data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, f), shape });
  const i64 = (rows, shape) => ({ data: BigInt64Array.from(rows.flat(), BigInt), shape });
  const files = {
    'value.npy': f32(o.valueLayout === 'BLNC' ? [B, L, H, C] : [B, H, L, C], () => rand() * 2 - 1),
    'spatial_shapes.npy': i64(shapes, [NL, 2]),
    'level_start_index.npy': i64(starts, [NL]),
    // Around the image, a little outside it too, so the padding mode matters.
    'sampling_locations.npy': f32(o.locationsLayout === 'BQHLP2' ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P], () => rand() * 1.1 - 0.05),
    'attention_weights.npy': f32([B, Q, H, NL, P], () => rand() / (NL * P)),
    'grad_output.npy': f32([B, Q, H * C], () => rand() * 2 - 1),
  };
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, t] of Object.entries(files)) fs.writeFileSync(path.join(dir, name), serializeNpy(t));
  return { B, Q, H, C, P, shapes, L };
}

function run(label, cmd, args) {
  const t0 = process.hrtime.bigint();
  try {
    execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = String(e.stderr || e.message).trim();
    throw new Error(`${label} failed (exit ${e.status}): ${err}`);
  }
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const toBfloat16 = (data) => widenHalf(narrowToHalf(data, 'bfloat16'), 'bfloat16');

// The case once more with its float inputs rounded to bfloat16 (what a bfloat16 kernel reads;
// saved as float32, which holds them exactly), our outputs on it rounded to bfloat16 as the
// kernel's dumps, and a copy of those dumps with one element of grad_sampling_locations off.
function bfloat16Kernel(dir, caseDir, flags) {
  const bfCase = path.join(dir, 'case-bf16');
  fs.mkdirSync(bfCase, { recursive: true });
  for (const f of fs.readdirSync(caseDir)) {
    const a = parseNpy(fs.readFileSync(path.join(caseDir, f)));
    const t = a.dtype === '<f4' ? { data: toBfloat16(a.data), shape: a.shape } : { data: a.data, shape: a.shape };
    fs.writeFileSync(path.join(bfCase, f), serializeNpy(t));
  }
  const ours = path.join(dir, 'ours-bf16');
  for (const op of ['forward', 'backward']) run(`native ${op}`, NATIVE, [op, '--in', bfCase, '--out', ours, ...flags]);
  const good = path.join(dir, 'kernel-bf16'), bad = path.join(dir, 'kernel-bf16-one-off');
  for (const d of [good, bad]) fs.mkdirSync(d, { recursive: true });
  for (const f of fs.readdirSync(ours)) {
    const a = parseNpy(fs.readFileSync(path.join(ours, f)));
    const t = { data: toBfloat16(a.data), shape: a.shape };
    fs.writeFileSync(path.join(good, f), serializeNpy(t));
    if (f === 'grad_sampling_locations.npy') t.data[17] += 0.25 + Math.abs(t.data[17]);
    fs.writeFileSync(path.join(bad, f), serializeNpy(t));
  }
  return { bfCase, good, bad };
}

// Runs a crosscheck through the native CLI; returns its exit status and prints its report.
function crosscheck(args) {
  let out = '', status = 0;
  try {
    out = execFileSync(NATIVE, ['crosscheck', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    out = `${e.stdout}${e.stderr}`;
    status = e.status;
  }
  for (const line of out.trimEnd().split('\n')) console.log(`    ${line}`);
  console.log(`    (exit ${status})`);
  return status;
}

function compare(a, b) {
  let maxAbs = 0, maxRel = 0, bad = 0;
  for (let i = 0; i < b.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    maxAbs = Math.max(maxAbs, d);
    if (b[i] !== 0) maxRel = Math.max(maxRel, d / Math.abs(b[i]));
    if (!(d <= TOL.abs + TOL.rel * Math.abs(b[i]))) bad += 1;
  }
  let identical = a.length === b.length;
  for (let i = 0; identical && i < b.length; i++) identical = Object.is(a[i], b[i]);
  return { maxAbs, maxRel, bad, identical };
}

function main() {
  const o = parseArgs(process.argv.slice(2));
  if (!fs.existsSync(NATIVE)) throw new Error(`${path.relative(ROOT, NATIVE)} is missing: run \`make native\` first`);
  const dir = o.dir ? path.resolve(o.dir) : fs.mkdtempSync(path.join(os.tmpdir(), 'msda-crosscheck-'));
  const caseDir = path.join(dir, 'case');
  const c = writeCase(caseDir, o);
  console.log(`crosscheck: case written to ${caseDir}`);
  console.log(`  B=${c.B} N_q=${c.Q} N_h=${c.H} C_h=${c.C} N_p=${c.P} levels ${c.shapes.map(([h, w]) => `${h}×${w}`).join(' ')} (L=${c.L})` +
    `${o.flags.length ? `, options ${o.flags.join(' ')}` : ''}`);
  for (const f of fs.readdirSync(caseDir).sort()) {
    const a = parseNpy(fs.readFileSync(path.join(caseDir, f)));
    console.log(`    ${f.padEnd(26)} ${a.dtype} (${a.shape.join(', ')})`);
  }

  const backends = [
    ['native', NATIVE, []],
    ['wasm', process.execPath, [WASM_CLI]],
  ];
  const times = {};
  for (const [name, cmd, pre] of backends) {
    times[name] = 0;
    for (const op of ['forward', 'backward']) {
      const out = path.join(dir, name);
      const args = [...pre, op, '--in', caseDir, '--out', out, ...o.flags];
      if (name === 'wasm') args.push('--backend', 'wasm');
      times[name] += run(`${name} ${op}`, cmd, args);
    }
    console.log(`  ran ${name.padEnd(6)} ${name === 'native' ? path.relative(ROOT, NATIVE) : 'node bindings/cli.js --backend wasm'} forward + backward (${times[name].toFixed(0)} ms incl. process start)`);
  }

  console.log(`\n  ${'output'.padEnd(44)}${'max |native − wasm|'.padStart(20)}${'max relative'.padStart(14)}  agreement`);
  let allOk = true;
  for (const f of ['output.npy', 'grad_value.npy', 'grad_sampling_locations.npy', 'grad_attention_weights.npy']) {
    const nat = parseNpy(fs.readFileSync(path.join(dir, 'native', f)));
    const was = parseNpy(fs.readFileSync(path.join(dir, 'wasm', f)));
    if (nat.shape.join() !== was.shape.join()) throw new Error(`${f}: native shape (${nat.shape}) differs from wasm (${was.shape})`);
    const r = compare(was.data, nat.data);
    const ok = r.bad === 0;
    allOk &&= ok;
    const verdict = r.identical ? 'bit-identical' : ok ? 'within tolerance' : `${r.bad} elements beyond tolerance`;
    console.log(`  ${`${f} (${nat.shape.join('×')})`.padEnd(44)}${r.maxAbs.toExponential(2).padStart(20)}${r.maxRel.toExponential(2).padStart(14)}  ${verdict}`);
  }
  console.log(`\n${allOk ? 'native and wasm agree' : 'native and wasm DISAGREE'} (tolerance |a − b| ≤ ${TOL.abs} + ${TOL.rel}·|b|)`);

  // Your kernel: dump its inputs as a case and its outputs as .npy, then crosscheck --expect.
  const k = bfloat16Kernel(dir, caseDir, o.flags);
  const flagArgs = o.flags;
  console.log(`\nA bfloat16 kernel's dumps (ours on bfloat16 inputs, rounded to bfloat16):`);
  const pass = crosscheck(['--in', k.bfCase, '--expect', k.good, '--dtype', 'bfloat16', '--top', '1', ...flagArgs]);
  console.log('The same dumps with one element of grad_sampling_locations off:');
  const fail = crosscheck(['--in', k.bfCase, '--expect', k.bad, '--dtype', 'bfloat16', '--top', '1', ...flagArgs]);
  const kernelOk = pass === 0 && fail === 1;
  console.log(`\n${kernelOk ? 'the bfloat16 kernel passes and the broken one is caught' : 'UNEXPECTED crosscheck results'}`);
  console.log('To check your own kernel: dump its inputs as a case and its outputs as .npy, then run\n' +
    '  npx msda crosscheck --in CASE_DIR --expect YOUR_OUTPUT_DIR --dtype float32|float16|bfloat16' +
    (o.dir ? `\n(the cases and all outputs are kept in ${dir})` : '\n(add --dir DIR to keep the cases and all outputs)'));
  if (!o.dir) fs.rmSync(dir, { recursive: true, force: true });
  process.exitCode = allOk && kernelOk ? 0 : 1;
}

try {
  main();
} catch (e) {
  console.error(`crosscheck: ${e.message}`);
  process.exitCode = 2;
}
