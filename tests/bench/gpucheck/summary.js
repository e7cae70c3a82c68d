// The GPU check's decisive table (gpucheck.sh): ours on WebGPU (GPU time from unrounded
// timestamps, and wall) beside the original CUDA kernel's design and PyTorch's reference on the
// same GPU, and wasm SIMD on the same machine's CPU, with the goals' ratios; then each backward
// pass beside the cost model (gpu_model.js). What
// did not run (no nvcc, no CUDA device for PyTorch) prints as "absent".
//
//   node tests/bench/gpucheck/summary.js OUTDIR   (reads passprof.json, cuda.json, torch.json, cpu.json)
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MACHINES, analyse, cudaPasses, defineCase, estimate } from '../gpu_model.js';

const ABSENT = 'absent';
const f = (x, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : ABSENT);
const ratio = (x, y, d = 2) => (Number.isFinite(x) && Number.isFinite(y) && y > 0 ? (x / y).toFixed(d) : ABSENT);

/** The decisive table's lines from the run's files in `dir`. */
export function summary(dir) {
  const load = (name) => {
    const p = path.join(dir, name);
    try { return existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')) : null; } catch { return null; }
  };
  const ours = load('passprof.json'), cuda = load('cuda.json'), torch = load('torch.json'), cpu = load('cpu.json');
  const row = (src, c, kind) => src?.results?.find((r) => r.case === c && r.kind === kind);
  const lines = [];
  lines.push(`adapter: ${ours ? Object.values(ours.adapter).filter(Boolean).join(' | ') : ABSENT}; numerics ${JSON.stringify(ours?.numerics ?? null)}; output elements differing from the CPU's: ${ours?.bitsDiffer ?? ABSENT}`);
  lines.push(`CUDA anchor: ${cuda?.device ?? `${ABSENT} (no nvcc or no CUDA device)`}; PyTorch: ${torch?.device && torch.device !== 'cpu' ? `${torch.device} (torch ${torch.torch})` : `${ABSENT} (no CUDA device for PyTorch)`}; CPU: ${cpu?.cpu ?? ABSENT} (${cpu?.cores ?? '?'} cores)`);
  lines.push('');
  lines.push('| case | ours fwd GPU / wall ms | ours bwd GPU / wall ms | CUDA fwd / bwd ms | ours / CUDA fwd, bwd (goal <= 2) | PyTorch ref fwd / fwd+bwd ms | wasm SIMD bwd 1 thread / all ms | wasm 1 thread / ours bwd wall (goal >= 5) | model H200 class, ours / CUDA bwd ms |');
  lines.push('|---|---|---|---|---|---|---|---|---|');
  const names = [...new Set((ours?.results ?? []).map((r) => r.case))];
  for (const c of names) {
    const of = row(ours, c, 'forward'), ob = row(ours, c, 'backward');
    const k = cuda?.cases?.find((r) => r.case === c);
    const t = torch?.device && torch.device !== 'cpu' ? torch.rows?.find((r) => r.case === c) : null;
    const w1 = cpu?.rows?.find((r) => r.case === c && r.threads === 1);
    const wn = cpu?.rows?.filter((r) => r.case === c).sort((a, b) => b.threads - a.threads)[0];
    defineCase(c);
    const a = analyse(c);
    const modelOurs = (ob?.model ?? []).reduce((s, m) => s + (m.est?.H200?.t ?? 0), 0);
    const modelCuda = estimate(cudaPasses(a).find((p) => p.dir === 'bwd'), MACHINES.H200).t;
    lines.push(`| ${c} | ${f(of?.total)} / ${f(of?.wall)} | ${f(ob?.total)} / ${f(ob?.wall)} | ${f(k?.fwd_ms)} / ${f(k?.bwd_ms)} | ${ratio(of?.total, k?.fwd_ms)}, ${ratio(ob?.total, k?.bwd_ms)} | ${f(t?.fwd_ms)} / ${f(t?.fwd_bwd_ms)} | ${f(w1?.bwd_ms, 1)} / ${f(wn?.bwd_ms, 1)} | ${ratio(w1?.bwd_ms, ob?.wall)} | ${f(modelOurs * 1e3)} / ${f(modelCuda * 1e3)} |`);
  }
  for (const r of ours?.results ?? []) {
    if (r.kind !== 'backward') continue;
    lines.push('');
    lines.push(`${r.case} backward per pass, GPU ms, beside the model (dGPU / H200 class, ms):`);
    for (const [p, ms] of Object.entries(r.passes)) {
      const m = r.model.find((x) => x.name === p);
      lines.push(`  ${p.padEnd(12)} ${f(ms).padStart(9)}   model ${m ? `${f(m.dGPU.t * 1e3)} / ${f(m.est?.H200?.t * 1e3)}` : 'not modelled'}`);
    }
  }
  return lines;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const line of summary(path.resolve(process.argv[2] ?? '.'))) console.log(line);
}
