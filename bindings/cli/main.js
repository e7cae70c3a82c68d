// The JS CLI's commands (bindings/cli.js is its face, the package's `bin`; src/cli/main.c is the
// other half): --help, --version, forward and backward, crosscheck, and, the JS CLI's alone,
// `msda make-case` (make-case.js) and `msda demo`.
import { readFileSync } from 'node:fs';
import { parseArgs } from './args.js';
import { backendApi, compute } from './backends.js';
import { deriveProblem, loadCase } from './cases.js';
import { crosscheck } from './crosscheck.js';
import { CliError } from './messages.js';
import { checkDestinations, OUTPUT_NAMES, prepareOut, writeOutputs } from './outputs.js';
import { USAGE as USAGE_LINES } from './texts.js';

// --help: the table's lines for both CLIs and this one's.
const USAGE = USAGE_LINES.filter(([who]) => who !== 'native').map(([, line]) => `${line}\n`).join('');

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
    if (argv[0] === 'make-case') return await (await import('./make-case.js')).makeCaseCommand(argv.slice(1), io);
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
