// The JS CLI's arguments (src/cli/args.c is the other half): the options of a command line,
// with the native CLI's rules and messages.
import { DEFAULTS } from '../core/args.js';
import { isChoice, OPTIONS } from '../core/options.js';
import { bad, say, T } from './messages.js';

// The problem's options (core/options.js): a word option takes a value, a switch none.
const OPTION_FLAGS = Object.fromEntries(OPTIONS.map((o) => [o.cli, o]));
const CHOICE_FLAGS = OPTIONS.filter(isChoice).map((o) => o.cli);
const SWITCH_FLAGS = OPTIONS.filter((o) => !isChoice(o)).map((o) => o.cli);
const VALUE_FLAGS = ['--in', '--out', ...CHOICE_FLAGS, '--threads',
  '--backend', '--expect', '--dtype', '--rtol', '--atol', '--top', '--out-dtype'];
const CROSSCHECK_FLAGS = ['--expect', '--dtype', '--rtol', '--atol', '--top', '--json'];
const EXPECT_FLAGS = ['--dtype', '--rtol', '--atol', '--top', '--json'];
const CHOICES = {
  ...Object.fromEntries(OPTIONS.filter(isChoice).map((o) => [o.cli, o.values])),
  '--backend': ['wasm', 'wasm-scalar', 'native'],
  '--dtype': ['float32', 'float16', 'bfloat16'],
  '--out-dtype': ['float32', 'float16', 'bfloat16'],
};
const orList = (xs) => (xs.length === 2 ? `${xs[0]} or ${xs[1]}` : `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`);

/** Parses argv (without node and the script); returns null for --help. */
export function parseArgs(argv) {
  if (argv.length === 0) throw bad(T.missingCommand);
  const command = argv[0];
  if (command === '--help' || command === '-h') return null;
  if (command === '--version') return { command: 'version' };
  if (!['forward', 'backward', 'crosscheck'].includes(command)) {
    throw bad(say(T.unknownCommand, command));
  }
  const o = {
    command, in: null, out: null, expect: null, ...DEFAULTS, threads: 1, backend: 'wasm', backendNamed: false,
    dtype: null, rtol: null, atol: null, top: 5, json: false, outDtype: 'float32',
  };
  const seen = new Set();
  for (let i = 1; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') return null;
    if (arg === '--version') return { command: 'version' };
    if (!arg.startsWith('--')) throw bad(say(T.unexpectedArgument, arg));
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(0, eq) : arg;
    const takesValue = VALUE_FLAGS.includes(name);
    if (!takesValue && !SWITCH_FLAGS.includes(name) && name !== '--json') {
      // counted and cut in characters (code points), as the native CLI counts UTF-8
      const chars = [...name];
      throw bad(chars.length >= 64 ? say(T.unknownLongOption, chars.slice(0, 40).join('')) : say(T.unknownOption, name));
    }
    let value = null;
    if (takesValue) {
      if (eq >= 0) value = arg.slice(eq + 1);
      else if (i + 1 < argv.length) value = argv[++i];
      else throw bad(say(T.needsValue, name));
    } else if (eq >= 0) {
      throw bad(say(T.takesNoValue, name, arg.slice(eq + 1)));
    }
    if (command === 'crosscheck' && name === '--out-dtype') throw bad(T.outDtypeInCrosscheck);
    if (command === 'crosscheck' && name === '--out') throw bad(T.outInCrosscheck);
    if (command !== 'crosscheck' && CROSSCHECK_FLAGS.includes(name)) throw bad(say(T.onlyForCrosscheck, name));
    if (name === '--in' || name === '--out' || name === '--expect') {
      if (value === '') throw bad(say(T.emptyPath, name));
      o[name.slice(2)] = value;
    } else if (name in CHOICES) {
      if (!CHOICES[name].includes(value)) throw bad(say(T.badChoice, name, value, orList(CHOICES[name])));
      if (name === '--dtype') o.dtype = value;
      else if (name === '--out-dtype') o.outDtype = value;
      else if (name === '--backend') o.backend = value;
      else o[OPTION_FLAGS[name].name] = value;
    } else if (name === '--rtol' || name === '--atol') {
      // a plain non-negative decimal number (Number() alone would take '', '0x10', 'Infinity')
      if (!/^(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(value) || !Number.isFinite(Number(value))) {
        throw bad(say(T.badTolerance, name, value));
      }
      o[name.slice(2)] = Number(value);
    } else if (name === '--top') {
      if (!/^\d+$/.test(value) || Number(value) > 1000) throw bad(say(T.badTop, value));
      o.top = Number(value);
    } else if (name === '--json') {
      o.json = true;
    } else if (name === '--threads') {
      if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > 4096) {
        throw bad(say(T.badThreads, value));
      }
      o.threads = Number(value);
    } else {   // a switch (--align-corners): its true
      o[OPTION_FLAGS[name].name] = true;
    }
    if (seen.has(name)) throw bad(say(T.givenTwice, name));
    seen.add(name);
  }
  if (o.in === null) throw bad(T.missingIn);
  if (o.out === null && command !== 'crosscheck') throw bad(T.missingOut);
  o.backendNamed = seen.has('--backend');
  if (command === 'crosscheck' && o.expect === null) {
    const given = EXPECT_FLAGS.find((f) => seen.has(f));
    if (given) throw bad(say(T.needsExpect, given));
  }
  if (o.dtype !== null && (o.rtol !== null || o.atol !== null)) {
    throw bad(say(T.twoTolerances, o.rtol !== null ? '--rtol' : '--atol'));
  }
  return o;
}
