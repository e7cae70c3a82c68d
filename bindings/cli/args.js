// The JS CLI's arguments (src/cli/args.c is the other half): the options of a command line,
// with the native CLI's rules and messages.
import { bad } from './messages.js';

const VALUE_FLAGS = ['--in', '--out', '--value-layout', '--sampling-locations-layout', '--padding-mode', '--threads',
  '--backend', '--expect', '--dtype', '--rtol', '--atol', '--top', '--out-dtype'];
const CROSSCHECK_FLAGS = ['--expect', '--dtype', '--rtol', '--atol', '--top', '--json'];
const EXPECT_FLAGS = ['--dtype', '--rtol', '--atol', '--top', '--json'];
const CHOICES = {
  '--value-layout': ['BLNC', 'BNLC'],
  '--sampling-locations-layout': ['BQHLP2', 'B2QHLP'],
  '--padding-mode': ['zeros', 'border'],
  '--backend': ['wasm', 'wasm-scalar', 'native'],
  '--dtype': ['float32', 'float16', 'bfloat16'],
  '--out-dtype': ['float32', 'float16', 'bfloat16'],
};
const orList = (xs) => (xs.length === 2 ? `${xs[0]} or ${xs[1]}` : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`);

/** Parses argv (without node and the script); returns null for --help. */
export function parseArgs(argv) {
  if (argv.length === 0) throw bad('missing command, expected forward, backward or crosscheck (see msda --help)');
  const command = argv[0];
  if (command === '--help' || command === '-h') return null;
  if (command === '--version') return { command: 'version' };
  if (!['forward', 'backward', 'crosscheck'].includes(command)) {
    throw bad(`unknown command '${command}', expected forward, backward or crosscheck (see msda --help)`);
  }
  const o = {
    command, in: null, out: null, expect: null, valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2',
    alignCorners: false, paddingMode: 'zeros', threads: 1, backend: 'wasm', backendNamed: false,
    dtype: null, rtol: null, atol: null, top: 5, json: false, outDtype: 'float32',
  };
  const seen = new Set();
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') return null;
    if (arg === '--version') return { command: 'version' };
    if (!arg.startsWith('--')) throw bad(`unexpected argument '${arg}' (see msda --help)`);
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(0, eq) : arg;
    const takesValue = VALUE_FLAGS.includes(name);
    if (!takesValue && name !== '--align-corners' && name !== '--json') {
      throw bad(`unknown option '${name.length >= 64 ? `${name.slice(0, 40)}...` : name}' (see msda --help)`);
    }
    let value = null;
    if (takesValue) {
      if (eq >= 0) value = arg.slice(eq + 1);
      else if (i + 1 < argv.length) value = argv[++i];
      else throw bad(`${name} needs a value (see msda --help)`);
    } else if (eq >= 0) {
      throw bad(`${name} takes no value, got '${arg.slice(eq + 1)}'`);
    }
    if (command === 'crosscheck' && name === '--out-dtype') throw bad('--out-dtype is not used by crosscheck (it writes nothing)');
    if (command === 'crosscheck' && name === '--out') {
      throw bad('--out is not used by crosscheck (it writes nothing); --expect DIR compares with outputs in DIR');
    }
    if (command !== 'crosscheck' && CROSSCHECK_FLAGS.includes(name)) throw bad(`${name} is only for msda crosscheck`);
    if (name === '--in' || name === '--out' || name === '--expect') {
      if (value === '') throw bad(`${name}: empty path, expected a directory`);
      o[name.slice(2)] = value;
    } else if (name in CHOICES) {
      if (!CHOICES[name].includes(value)) throw bad(`${name}: '${value}', expected ${orList(CHOICES[name])}`);
      const key = { '--value-layout': 'valueLayout', '--sampling-locations-layout': 'samplingLocationsLayout',
        '--padding-mode': 'paddingMode', '--backend': 'backend' }[name];
      if (name === '--dtype') o.dtype = value;
      else if (name === '--out-dtype') o.outDtype = value;
      else o[key] = value;
    } else if (name === '--rtol' || name === '--atol') {
      // a plain non-negative decimal number (Number() alone would take '', '0x10', 'Infinity')
      if (!/^(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value) || !Number.isFinite(Number(value))) {
        throw bad(`${name}: '${value}', expected a number >= 0 such as 1e-3`);
      }
      o[name.slice(2)] = Number(value);
    } else if (name === '--top') {
      if (!/^\d+$/.test(value) || Number(value) > 1000) throw bad(`--top: '${value}', expected an integer from 0 to 1000`);
      o.top = Number(value);
    } else if (name === '--json') {
      if (eq >= 0) throw bad(`--json takes no value, got '${arg.slice(eq + 1)}'`);
      o.json = true;
    } else if (name === '--threads') {
      if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 4096) {
        throw bad(`--threads: '${value}', expected an integer from 1 to 4096`);
      }
      o.threads = Number(value);
    } else {
      o.alignCorners = true;
    }
    if (seen.has(name)) throw bad(`${name} given more than once`);
    seen.add(name);
  }
  if (o.in === null) throw bad('missing --in DIR (see msda --help)');
  if (o.out === null && command !== 'crosscheck') throw bad('missing --out DIR (see msda --help)');
  o.backendNamed = seen.has('--backend');
  if (command === 'crosscheck' && o.expect === null) {
    const given = EXPECT_FLAGS.find((f) => seen.has(f));
    if (given) throw bad(`${given} needs --expect DIR (it sets how your outputs are compared with ours)`);
  }
  if (o.dtype !== null && (o.rtol !== null || o.atol !== null)) {
    throw bad(`--dtype and ${o.rtol !== null ? '--rtol' : '--atol'} both set the tolerance: give one of them`);
  }
  return o;
}
