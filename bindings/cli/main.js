// The JS CLI's commands (bindings/cli.js is its face, the package's `bin`; src/cli/main.c is the
// other half): --help, --version, forward and backward, crosscheck, and `msda demo`.
import { readFileSync } from 'node:fs';
import { parseArgs } from './args.js';
import { backendApi, compute } from './backends.js';
import { deriveProblem, loadCase } from './cases.js';
import { crosscheck } from './crosscheck.js';
import { CliError } from './messages.js';
import { checkDestinations, OUTPUT_NAMES, prepareOut, writeOutputs } from './outputs.js';

const USAGE = `usage: msda forward    --in DIR --out DIR [options]
       msda backward   --in DIR --out DIR [options]
       msda crosscheck --in DIR [--expect DIR] [options]
       msda demo       [--port N] [--host H]   serves the interactive page (msda demo --help)

Multi-scale deformable attention on a case directory of NumPy .npy files (or an .npz of them,
from np.savez or np.savez_compressed, in place of DIR).

  --in DIR        reads value.npy (<f4), spatial_shapes.npy (<i8|<i4, (N_l, 2)),
                  level_start_index.npy (<i8|<i4, (N_l,); optional, derived), sampling_locations.npy (<f4),
                  attention_weights.npy (<f4, (B, N_q, N_h, N_l, N_p)) and, for backward,
                  grad_output.npy (<f4, (B, N_q, N_h*C_h)); float inputs may also be <f2
                  (float16) or 'bfloat16', widened exactly to float32
  --out DIR       writes output.npy (forward) or grad_value.npy, grad_sampling_locations.npy,
                  grad_attention_weights.npy (backward); created if missing
  --value-layout BLNC|BNLC                   value is (B, L, N_h, C_h) or (B, N_h, L, C_h); default BLNC
  --sampling-locations-layout BQHLP2|B2QHLP  (B, N_q, N_h, N_l, N_p, 2) or (B, 2, N_q, N_h, N_l, N_p);
                                             default BQHLP2
  --align-corners                            pixel centres at the ends of [0, 1]; default off
  --padding-mode zeros|border                default zeros
  --threads N                                default 1; results do not depend on it
  --out-dtype float32|float16|bfloat16       the outputs rounded to float16 ('<f2' files) or to
                                             bfloat16 (float32 files holding them); default float32
  --backend wasm|wasm-scalar|native          default wasm (the SIMD module where the runtime has SIMD)
  -h, --help                                 this text
  --version                                  the package version

crosscheck runs forward, and backward when DIR has grad_output.npy, on --backend (default wasm)
and on native where the native addon loads, else on the float64 reference (always for
--backend native), says which, and prints the largest absolute and relative difference per
output: elements agree when |got - ref| <= 1e-5 + 1e-4*|ref| (ref: native); against the
float64 reference, + 1e-4*max|ref| (float32 rounding of pixel positions, docs/guarantees.md "Semantics").

crosscheck --expect DIR compares your kernel's dumps in DIR (output.npy, grad_value.npy,
grad_sampling_locations.npy, grad_attention_weights.npy, whichever are there; <f4, <f2 or
'bfloat16') with the float64 reference, each element against its own bound:
  --dtype float32|float16|bfloat16   the precision your kernel stores tensors in (default: the
                                     files' own when all are <f2 or all 'bfloat16', else float32);
                                     |yours - ours| <= 4*u*M + 2*(n+4)*2^-24*M + P, u the dtype's
                                     unit roundoff, M the sum of |contributions| to the element,
                                     n their count, P its change when pixel positions move by
                                     float32 rounding (docs/cli.md, For kernel authors)
  --rtol R --atol A                  instead: |yours - ours| <= A + R*|ours|
  --top K                            list the K elements of each output that disagree most
                                     (largest |yours - ours|; default 5)
  --json                             one JSON document on stdout instead of the text

Exit status: 0 done (crosscheck: everything agrees), 2 bad arguments or input (one line on
stderr naming the file or flag), 1 any other failure (crosscheck: a disagreement).
`;

const VERSION = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')).version;

// A reader that went away (`msda crosscheck ... | head -1`): the rest of the output is dropped,
// the command still finishes and exits with its own status, and nothing is said about it.
let stdoutGone = false;
/** The reader of stdout went away (EPIPE): drop the rest of the output. */
export const dropStdout = () => { stdoutGone = true; };
const STDIO = { out: (s) => { if (!stdoutGone) process.stdout.write(s); }, err: (s) => process.stderr.write(s) };

/**
 * Runs the command line on argv (without node and the script); returns the exit status.
 * io.out / io.err receive stdout and stderr text (default: the process's).
 */
export async function main(argv, io = STDIO) {
  try {
    if (argv[0] === 'demo') return await (await import('../demo.js')).demo(argv.slice(1), io);
    const o = parseArgs(argv);
    if (o === null) {
      io.out(USAGE);
      return 0;
    }
    if (o.command === 'version') {
      io.out(`${VERSION}\n`);
      return 0;
    }
    if (o.command === 'crosscheck') {
      await crosscheck(o, (line) => io.out(`${line}\n`));
      return 0;
    }
    const files = loadCase(o.in, o.command === 'backward');
    const args = deriveProblem(o, files);
    const msda = await backendApi(o.backend, o.threads, o.backendNamed);
    prepareOut(o.out);
    checkDestinations(o.out, OUTPUT_NAMES[o.command], 2);
    await writeOutputs(o.out, compute(msda, o.command, args, o.backendNamed), o.outDtype);
    return 0;
  } catch (e) {
    const code = e instanceof CliError ? e.exitCode : 1;
    io.err(`msda: ${String(e && e.message ? e.message : e).replace(/\n/g, ' ')}\n`);
    return code;
  }
}
