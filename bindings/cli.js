#!/usr/bin/env node
// msda: the package's command line (the `bin` of ms-deform-attn), the twin of build/native/msda.
//
//   msda forward|backward --in DIR --out DIR [options] [--backend wasm|wasm-scalar|native]
//   msda crosscheck --in DIR [--expect DIR] [options]
//   msda demo [--port N] [--host H]          (the interactive page: bindings/demo.js)
//
// Same arguments, files, messages and exit codes as the native CLI (CONTRACT.md): 0 done; 2 bad
// arguments or input, with one line on stderr starting "msda:" naming the file or flag; 1 any
// other failure (for crosscheck: a disagreement beyond tolerance). Outputs are written into a
// private directory inside --out and renamed into place only once all of them are complete.

import {
  accessSync, closeSync, constants, existsSync, fstatSync, lstatSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync,
  realpathSync, renameSync, rmSync, statSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { inflateRawSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import { BOUND_RULE, compareWithBounds, coordinates, formatCoordinates, OUTPUT_NAMES as CHECKED_OUTPUTS, referenceWithBounds, UNIT_ROUNDOFF } from './core/crosscheck.js';
import { narrowToHalf, widenHalf } from './core/half.js';
import { looksLikeZip, NpzError, parseNpz, shown } from './core/npz.js';
import { fmt, jsonNumber, pair } from './cli/numbers.js';
import { formatShape, npyHeader, NpyError, parseNpy, parseNpyHeader, npyDataBytes } from './npy.js';

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

export const TOLERANCE = Object.freeze({ abs: 1e-5, rel: 1e-4, scale: 0 });
// Float32 kernels against the float64 reference: plus 1e-4 of the tensor's largest magnitude,
// the bound docs/guarantees.md "Semantics" states for location gradients on large levels.
export const REFERENCE_TOLERANCE = Object.freeze({ abs: 1e-5, rel: 1e-4, scale: 1e-4 });

const VERSION = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version;

class CliError extends Error {
  constructor(code, message) {
    super(message);
    this.exitCode = code;
  }
}
const bad = (message) => new CliError(2, message);

// The C library's strerror texts, so both CLIs print the same words.
const ERRNO_TEXT = {
  ENOENT: 'No such file or directory', EACCES: 'Permission denied', ENOTDIR: 'Not a directory',
  EISDIR: 'Is a directory', EROFS: 'Read-only file system', ENOSPC: 'No space left on device',
  EPERM: 'Operation not permitted', ELOOP: 'Too many levels of symbolic links', ENAMETOOLONG: 'File name too long',
  EEXIST: 'File exists',
};
const why = (e) => ERRNO_TEXT[e.code] || e.message;

// Like the C join: no normalisation, so messages name the path as the user wrote it.
const joinPath = (dir, name) => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);

// ---- arguments ---------------------------------------------------------------------------------

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

// ---- the case directory ------------------------------------------------------------------------

// What to do about a file of the wrong dtype, in NumPy's words (the native CLI prints the same).
function dtypeHint(path, descr, want, name = path.slice(path.lastIndexOf('/') + 1)) {
  if (want === 'float' && (descr === '<V2' || descr === '|V2')) {
    return `${path}: dtype '${descr}': a 2-byte void, which is how np.save writes ml_dtypes' bfloat16, but its bits cannot be told from any other 2-byte record: save bfloat16 as float32, which is exact: tensor.astype(np.float32)`;
  }
  if (want === 'float' && (descr === '<i2' || descr === '<u2')) {
    return `${path}: dtype '${descr}': 2-byte integers, perhaps the bits of a float16 or bfloat16 tensor (a bit view), which astype would turn into integers: save float16 as tensor.view(np.float16), bfloat16 as float32 (tensor.view(ml_dtypes.bfloat16).astype(np.float32), which is exact)`;
  }
  const bigEndian = descr.startsWith('>');
  const what = want === 'float' ? 'float32, float16 or bfloat16' : 'int64 or int32';
  const fix = want === 'float' ? (bigEndian ? "'<f4'" : 'np.float32') : (bigEndian ? "'<i8'" : 'np.int64');
  return `${path}: dtype '${descr}'${bigEndian ? ' (big-endian)' : ''}: ${name} must be ${bigEndian ? 'little-endian ' : ''}${what}: save tensor.astype(${fix})`;
}

// As the native CLI reads: open without waiting (a FIFO), check what was opened (so nothing
// swapped in after a check is read), and read the size it had then.
function readFileAsNative(path, large) {
  let fd;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw bad(`${path}: cannot open: ${why(e)}`);
  }
  try {
    let st;
    try {
      st = fstatSync(fd);
    } catch (e) {
      throw bad(`${path}: cannot stat: ${why(e)}`);
    }
    if (!st.isFile()) throw bad(`${path}: not a regular file`);
    if (large !== undefined && st.size > PARTS.limit) return large(fd, st.size);
    let bytes;
    try {
      bytes = Buffer.allocUnsafe(st.size);
    } catch {
      throw new CliError(1, `${path}: out of memory reading ${st.size} bytes`);
    }
    let got = 0;
    try {
      while (got < st.size) {
        const n = readSync(fd, bytes, got, Math.min(st.size - got, 1 << 30), null);
        if (n === 0) break; // shrank while reading: parse what is there
        got += n;
      }
    } catch (e) {
      throw new CliError(1, `${path}: read error: ${why(e)}`);
    }
    return bytes.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

// A Node Buffer (a Uint8Array) holds at most 4 GiB: a larger file is read in parts, its preamble
// and header first (parseNpyHeader: parseNpy's checks, against the file's size), then its data
// straight into its typed array, so the same files get the same verdicts as from the native CLI.
// MSDA_TEST_NPY_PARTS=limit,part (tests): files over `limit` bytes, read `part` bytes at a time.
const PARTS = (() => {
  const m = /^(\d+),(\d+)$/.exec(process.env.MSDA_TEST_NPY_PARTS ?? '');
  return m ? { limit: Number(m[1]), part: Math.max(1, Number(m[2])) } : { limit: 2 ** 31, part: 2 ** 30 };
})();

const FLOAT_DTYPES = ['<f4', '<f2', 'bfloat16'];
const wrongDtype = (a, want) => (want === 'float') !== FLOAT_DTYPES.includes(a.dtype);

function readNpyInParts(path, fd, size, want) {
  const readAt = (buf, at) => {
    let got = 0;
    try {
      while (got < buf.length) {
        const n = readSync(fd, buf, got, Math.min(buf.length - got, PARTS.part), at + got);
        if (n === 0) break; // shrank while reading: judge what is there
        got += n;
      }
    } catch (e) {
      throw new CliError(1, `${path}: read error: ${why(e)}`);
    }
    return got;
  };
  const pre = new Uint8Array(Math.min(size, 12));
  let got = readAt(pre, 0);
  let head = pre.subarray(0, got);
  let judged = got < pre.length ? got : size;   // shrank while reading: judge what is there
  if (judged === size && got === 12) {
    const prefix = pre[6] === 1 ? 10 : 12;
    const headerLen = pre[8] + pre[9] * 256 + (prefix === 12 ? pre[10] * 65536 + pre[11] * 2 ** 24 : 0);
    if (prefix + headerLen <= size) {
      let full;
      try {
        full = new Uint8Array(prefix + headerLen);
      } catch {
        throw new CliError(1, `${path}: out of memory reading ${size} bytes`);
      }
      got = readAt(full, 0);
      head = full.subarray(0, got);
      if (got < full.length) judged = got;
    }
  }
  const a = parseNpyHeader(head, judged, { bigint: true, bool: false });
  if (wrongDtype(a, want)) throw bad(dtypeHint(path, a.dtype, want));   // before reading gigabytes
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new CliError(1, `${path}: a file this large is read on little-endian machines only`);
  let data;
  try {
    data = new ({ '<f4': Float32Array, '<f2': Uint16Array, bfloat16: Uint16Array, '<i4': Int32Array, '<i8': BigInt64Array })[a.dtype](a.count);
  } catch {
    throw new CliError(1, `${path}: out of memory reading ${size} bytes`);
  }
  const bytes = data.byteLength;
  for (let done = 0; done < bytes;) {
    const part = new Uint8Array(data.buffer, done, Math.min(bytes - done, 2 ** 30));
    const n = readAt(part, a.dataOffset + done);
    done += n;
    if (n < part.length) parseNpyHeader(head, a.dataOffset + done, { bigint: true, bool: false });   // shrank: its verdict (truncated)
  }
  return { version: a.version, dtype: a.dtype, shape: a.shape, data, count: a.count };
}

function readNpyFile(path, want) {
  return npyFromBytes(path, () => readFileAsNative(path, (fd, size) => readNpyInParts(path, fd, size, want)), want);
}

// bytes: the file's bytes, or a function reading them (or, for a file too large for one buffer,
// the array itself: readNpyInParts). name: the file's own name, for the dtype hint (a member's
// inside an .npz).
function npyFromBytes(path, bytes, want, name = undefined) {
  let a;
  try {
    const read = typeof bytes === 'function' ? bytes() : bytes;
    a = read instanceof Uint8Array ? parseNpy(read, { bigint: true, bool: false }) : read;
  } catch (e) {
    if (e instanceof NpyError && e.descr !== undefined) throw bad(dtypeHint(path, e.descr, want, name));
    if (e instanceof NpyError) throw bad(`${path}: ${e.message}`);
    throw e;
  }
  if (wrongDtype(a, want)) throw bad(dtypeHint(path, a.dtype, want, name));
  if (a.dtype === '<f2' || a.dtype === 'bfloat16') a.data = widenHalf(a.data, a.dtype === '<f2' ? 'float16' : 'bfloat16');
  // Exact dimensions for messages; numbers for the checks (a dimension past 2^53 rounds to a
  // number >= 2^53, which still differs from every size a file can hold).
  a.exactShape = a.shape;
  a.shape = a.shape.map(Number);
  a.path = path;
  return a;
}

const INPUTS = [
  ['value', 'value.npy', 'float'],
  ['spatialShapes', 'spatial_shapes.npy', 'int'],
  ['levelStartIndex', 'level_start_index.npy', 'int'],
  ['samplingLocations', 'sampling_locations.npy', 'float'],
  ['attentionWeights', 'attention_weights.npy', 'float'],
  ['gradOutput', 'grad_output.npy', 'float'],
];

function exists(path) {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

function isMissing(path) {
  try {
    lstatSync(path);
    return false;
  } catch (e) {
    return e.code === 'ENOENT';
  }
}

/**
 * A directory of .npy files or an .npz archive of them (named by flag in messages): has(name)
 * and read(name, want), each member named `ARCHIVE:name` in messages.
 */
function openSource(flag, dir) {
  let st;
  try {
    st = statSync(dir);
  } catch (e) {
    throw bad(`${flag} ${dir}: ${why(e)}`);
  }
  if (st.isDirectory()) {
    // has: the name is in the directory (lstat), so a dangling symlink is read, and refused, not skipped.
    // names: the entries as bytes (latin1), in byte order, as the native CLI lists them.
    const names = () => {
      try {
        return readdirSync(dir, { encoding: 'latin1' }).sort();
      } catch (e) {
        throw bad(`${flag} ${dir}: cannot list it: ${why(e)}`);
      }
    };
    return { has: (name) => !isMissing(joinPath(dir, name)), missing: (name) => isMissing(joinPath(dir, name)),
      read: (name, want) => readNpyFile(joinPath(dir, name), want), path: (name) => joinPath(dir, name), names };
  }
  const bytes = st.isFile() ? readFileAsNative(dir) : null;
  if (bytes === null || !looksLikeZip(bytes)) throw bad(`${flag} ${dir}: not a directory (nor an .npz archive)`);
  let members;
  try {
    members = parseNpz(bytes, (b, maxOutputLength) => inflateRawSync(b, { maxOutputLength }));
  } catch (e) {
    if (e instanceof NpzError) throw bad(`${flag} ${dir}: ${e.message}`);
    throw e;
  }
  const path = (name) => `${dir}:${name}`;
  return {
    has: (name) => members.has(name),
    missing: (name) => !members.has(name),
    names: () => [...members.keys()],
    path,
    read(name, want) {
      const m = members.get(name);
      if (m === undefined) throw bad(`${path(name)}: not in the archive`);
      let data;
      try {
        data = m.read();
      } catch (e) {
        if (e instanceof NpzError) throw bad(`${path(name)}: ${e.message}`);
        throw e;
      }
      return npyFromBytes(path(name), data, want, name);
    },
  };
}

/** Reads the case's files (grad_output.npy when withGrad) from a directory or an .npz; checks --in first. */
export function loadCase(dir, withGrad) {
  const source = openSource('--in', dir);
  const files = {};
  // Every file is read, and every bad one named: "first problem; also: second; also: third".
  const problems = [];
  let code = 0;
  for (const [key, name, want] of INPUTS) {
    if (key === 'gradOutput' && !withGrad) continue;
    if (key === 'levelStartIndex' && source.missing(name)) continue; // derived
    try {
      files[key] = source.read(name, want);
    } catch (e) {
      if (!(e instanceof CliError)) throw e;
      problems.push(e.message);
      code ||= e.exitCode;
    }
  }
  if (problems.length) throw new CliError(code, problems.join('; also: '));
  return files;
}

const sameShape = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * Derives B, L, N_q, N_h, C_h, N_l, N_p from the files and checks each against the others, with
 * the native CLI's messages. Returns the arguments of forward()/backward().
 */
export function deriveProblem(o, f) {
  const blnc = o.valueLayout === 'BLNC';
  const bqhlp2 = o.samplingLocationsLayout === 'BQHLP2';
  const valueDims = blnc ? '(B, L, N_h, C_h) per --value-layout BLNC' : '(B, N_h, L, C_h) per --value-layout BNLC';
  const { value, spatialShapes: shapes, levelStartIndex: starts, samplingLocations: loc, attentionWeights: weights } = f;
  const vs = value.shape;
  if (vs.length !== 4) throw bad(`${value.path}: shape ${formatShape(value.exactShape)}, expected 4 dimensions ${valueDims}`);
  if (vs.some((d) => d < 1)) throw bad(`${value.path}: shape ${formatShape(value.exactShape)}, expected every dimension of ${valueDims} >= 1`);
  const [B, L, H, C] = [vs[0], vs[blnc ? 1 : 2], vs[blnc ? 2 : 1], vs[3]];

  if (shapes.shape.length !== 2 || shapes.shape[1] !== 2 || shapes.shape[0] < 1) {
    throw bad(`${shapes.path}: shape ${formatShape(shapes.exactShape)}, expected (N_l, 2) with N_l >= 1`);
  }
  const NL = shapes.shape[0];
  const big = Array.from(shapes.data, BigInt);
  const INT64_MAX = (1n << 63n) - 1n;
  let total = 0n;
  const pairs = [];
  const expectedStarts = [];
  for (let l = 0; l < NL; l++) {
    const h = big[2 * l], w = big[2 * l + 1];
    if (h < 1n || w < 1n) throw bad(`${shapes.path}: row ${l} is (${h}, ${w}), expected H >= 1 and W >= 1`);
    expectedStarts.push(total);
    total += h * w;
    if (h * w > INT64_MAX || total > INT64_MAX) {
      throw bad(`${shapes.path}: the sum of H*W over levels 0..${l} overflows 64 bits`);
    }
    pairs.push([Number(h), Number(w)]);
  }
  if (BigInt(L) !== total) {
    const otherFits = BigInt(vs[blnc ? 2 : 1]) === total;
    throw bad(`${value.path}: shape ${formatShape(value.exactShape)} has L = ${L}, expected ${total} (the sum of H*W over ${shapes.path}) ${valueDims}${
      otherFits ? `; --value-layout ${blnc ? 'BNLC' : 'BLNC'} makes the shapes fit` : ''}`);
  }
  if (starts && !sameShape(starts.shape, [NL])) {
    throw bad(`${starts.path}: shape ${formatShape(starts.exactShape)}, expected ${formatShape([NL])} = (N_l,) with N_l from ${shapes.path}`);
  }
  const ws = weights.shape;
  if (ws.length !== 5 || ws[0] !== B || ws[2] !== H || ws[3] !== NL || ws[1] < 1 || ws[4] < 1) {
    throw bad(`${weights.path}: shape ${formatShape(weights.exactShape)}, expected (${B}, N_q, ${H}, ${NL}, N_p) = (B, N_q, N_h, N_l, N_p) with N_q, N_p >= 1, B and N_h from ${value.path}, N_l from ${shapes.path}`);
  }
  const Q = ws[1], P = ws[4];
  const locShape = bqhlp2 ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P];
  const otherShape = bqhlp2 ? [B, 2, Q, H, NL, P] : [B, Q, H, NL, P, 2];
  if (!sameShape(loc.shape, locShape)) {
    throw bad(`${loc.path}: shape ${formatShape(loc.exactShape)}, expected ${formatShape(locShape)} = ${bqhlp2
      ? '(B, N_q, N_h, N_l, N_p, 2) per --sampling-locations-layout BQHLP2'
      : '(B, 2, N_q, N_h, N_l, N_p) per --sampling-locations-layout B2QHLP'} with N_q and N_p from ${weights.path}${
      sameShape(loc.shape, otherShape) ? `; --sampling-locations-layout ${bqhlp2 ? 'B2QHLP' : 'BQHLP2'} makes the shapes fit` : ''}`);
  }
  if (f.gradOutput) {
    const goShape = [B, Q, H * C];
    if (!sameShape(f.gradOutput.shape, goShape)) {
      throw bad(`${f.gradOutput.path}: shape ${formatShape(f.gradOutput.exactShape)}, expected ${formatShape(goShape)} = (B, N_q, N_h*C_h)`);
    }
  }
  // The library's level-start rule and message, with the file name.
  const startValues = starts ? Array.from(starts.data, BigInt) : expectedStarts;
  for (let l = 0; l < NL; l++) {
    if (startValues[l] !== expectedStarts[l]) {
      throw bad(l === 0
        ? `${starts.path}: level_start_index[0] is ${startValues[0]}, expected 0`
        : `${starts.path}: level_start_index[${l}] is ${startValues[l]}, expected ${expectedStarts[l]} (sum of H*W over levels 0..${l - 1})`);
    }
  }
  const tensor = (a) => ({ data: a.data, shape: a.shape });
  const args = {
    value: tensor(value), spatialShapes: pairs, levelStartIndex: expectedStarts.map(Number),
    samplingLocations: tensor(loc), attentionWeights: tensor(weights),
    valueLayout: o.valueLayout, samplingLocationsLayout: o.samplingLocationsLayout,
    alignCorners: o.alignCorners, paddingMode: o.paddingMode, threads: o.threads,
  };
  if (f.gradOutput) args.gradOutput = tensor(f.gradOutput);
  return args;
}

// ---- running and writing -------------------------------------------------------------------------

// --threads N > 1 on the wasm backend loads the threaded module (docs/threads.md); native and
// the scalar module take threads per call.
// A backend is named in a message only when the user named it (named: --backend was given).
async function backendApi(backend, threads = 1, named = true) {
  const { init } = await import('./index.js');
  try {
    return await init(backend === 'wasm' && threads > 1 ? { backend, threads } : { backend });
  } catch (e) {
    if (backend === 'native' && named) {
      throw bad(`--backend native: the native addon is not available here; without --backend the CLI runs on WebAssembly with the same results (${e.message})`);
    }
    throw new CliError(1, named ? `--backend ${backend}: ${e.message}` : e.message);
  }
}

// Runs forward or backward; the API's own argument errors (sizes past what wasm holds) are bad input.
function compute(msda, op, args, named = true) {
  try {
    if (op === 'forward') {
      const { gradOutput, ...forwardArgs } = args;
      return { output: msda.forward(forwardArgs) };
    }
    const g = msda.backward(args);
    return {
      grad_value: g.gradValue, grad_sampling_locations: g.gradSamplingLocations,
      grad_attention_weights: g.gradAttentionWeights,
    };
  } catch (e) {
    if (e instanceof RangeError || e instanceof TypeError) throw bad(named ? `--backend ${msda.backend}: ${e.message}` : e.message);
    throw new CliError(1, named ? `${op} failed on ${msda.backend}: ${e.message}` : `${op} failed: ${e.message}`);
  }
}

// mkdir -p one level at a time: Node's recursive mkdir spins forever when a parent exists but
// answers ENOENT for any child (procfs: `--out /proc/x` hung the CLI at 100% CPU).
function mkdirs(dir) {
  const missing = [];
  for (let d = dir; !existsSync(d) && dirname(d) !== d; d = dirname(d)) missing.push(d);
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
  }
}

// The native CLI's limit on the private directory's path (PATH_MAX, NUL included), checked by
// both before computing so that both say the same.
const STAGING_PATH_MAX = 4096;

function prepareOut(dir) {
  if (Buffer.byteLength(joinPath(dir, '.msda-XXXXXX')) >= STAGING_PATH_MAX) throw bad(`--out ${dir}: path too long`);
  try {
    mkdirs(dir);
  } catch (e) {
    if (e.code !== 'EEXIST') throw bad(`--out ${dir}: cannot create directory ${e.path || dir}: ${why(e)}`);
  }
  let st;
  try {
    st = statSync(dir);
  } catch (e) {
    throw bad(`--out ${dir}: ${why(e)}`);
  }
  if (!st.isDirectory()) throw bad(`--out ${dir}: not a directory`);
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (e) {
    throw bad(`--out ${dir}: not writable: ${why(e)}`);
  }
}

const OUTPUT_NAMES = {
  forward: ['output'],
  backward: ['grad_value', 'grad_sampling_locations', 'grad_attention_weights'],
};

// A destination must be absent or something rename() replaces (a file, or a symlink: the link
// itself, never its target); a directory cannot be. Checked before computing (exit 2) and again
// before the first rename (exit 1: --out changed meanwhile).
function checkDestinations(dir, names, code) {
  for (const n of names) {
    const p = joinPath(dir, `${n}.npy`);
    let st = null;
    try {
      st = lstatSync(p);
    } catch { /* absent, or not ours to judge: rename says */ }
    if (st?.isDirectory()) throw new CliError(code, `--out ${dir}: ${p} is a directory, so the output cannot replace it`);
  }
}

const CLEANUP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];
const WRITE_CHUNK = 1 << 24;
const EXCLUSIVE = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Writes { name: tensor } as name.npy into a fresh private directory inside dir (mkdtemp: random
 * name, mode 0700), each file created exclusively and without following symlinks, so nothing
 * planted in dir can redirect a write. Once all are complete and every destination is still
 * replaceable, renames them into place, all in one synchronous step. A failure or a signal
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT) during the writing removes the private directory and
 * leaves every older output as it was.
 */
async function writeOutputs(dir, outputs, outDtype = 'float32') {
  const names = Object.keys(outputs);
  const final = names.map((n) => joinPath(dir, `${n}.npy`));
  let staging = null;
  const removeStaging = () => {
    try {
      if (staging !== null) rmSync(staging, { recursive: true, force: true, maxRetries: 3 });
    } catch { /* a file created meanwhile: retried; past that, nothing better to do */ }
  };
  const onSignal = (signal) => {
    removeStaging();
    for (const s of CLEANUP_SIGNALS) process.removeListener(s, onSignal);
    process.kill(process.pid, signal); // the default action now: exit as killed by it
  };
  // Listening before the directory exists: a signal is then handled (after this synchronous
  // code) with the directory known.
  for (const s of CLEANUP_SIGNALS) process.on(s, onSignal);
  try {
    try {
      staging = mkdtempSync(joinPath(dir, '.msda-'));
    } catch (e) {
      throw new CliError(1, `--out ${dir}: cannot create a private directory for the outputs: ${why(e)}`);
    }
    const staged = names.map((n) => `${staging}/${n}.npy`);
    for (let i = 0; i < names.length; i++) {
      const { data, shape } = outputs[names[i]];
      let fh;
      try {
        fh = await open(staged[i], EXCLUSIVE, 0o666);
      } catch (e) {
        throw new CliError(1, `${final[i]}: cannot create: ${why(e)}`);
      }
      try {
        // float16: '<f2' bits; bfloat16: the float32 values of the nearest bfloat16 numbers
        // (NumPy has no bfloat16; float32 holds them exactly). As the native CLI writes them.
        const half = outDtype === 'float32' ? null : narrowToHalf(data, outDtype);
        await fh.write(npyHeader(outDtype === 'float16' ? '<f2' : '<f4', shape));
        const body = outDtype === 'float16' ? npyDataBytes(half, '<f2')
          : npyDataBytes(outDtype === 'bfloat16' ? widenHalf(half, 'bfloat16') : data);
        for (let off = 0; off < body.length; off += WRITE_CHUNK) {
          const n = Math.min(WRITE_CHUNK, body.length - off);
          for (let done = 0; done < n;) done += (await fh.write(body, off + done, n - done)).bytesWritten;
        }
        await fh.close();
        fh = null;
      } catch (e) {
        await fh?.close().catch(() => {});
        throw new CliError(1, `${final[i]}: write error: ${why(e)}`);
      }
    }
    // One synchronous step from here: a signal is handled after it, so all outputs appear or none.
    checkDestinations(dir, names, 1);
    for (let i = 0; i < names.length; i++) {
      try {
        renameSync(staged[i], final[i]);
      } catch (e) {
        const already = names.slice(0, i).map((n) => `${n}.npy`).join(', ');
        throw new CliError(1, i
          ? `${final[i]}: cannot rename into place: ${why(e)} (--out changed during the run; this run already replaced ${already})`
          : `${final[i]}: cannot rename into place: ${why(e)}`);
      }
    }
  } finally {
    removeStaging();
    // A signal that came during the synchronous renames is dispatched when the loop next polls
    // (after this turn's check phase): listen until then, or it is lost (the run would exit 0
    // after the user's Ctrl-C).
    for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setImmediate(resolve));
    for (const s of CLEANUP_SIGNALS) process.removeListener(s, onSignal);
  }
}

// ---- crosscheck --------------------------------------------------------------------------------------

/**
 * Compares got with ref element by element: the largest absolute difference, the largest
 * relative one (over elements with ref != 0), and how many elements fall outside
 * |got - ref| <= abs + rel*|ref| (NaN matches NaN; an infinity matches the same infinity).
 */
export function compareArrays(got, ref, tol = TOLERANCE) {
  let maxAbs = 0, maxRel = 0, bad = 0, worst = -1, worstExcess = -Infinity, largest = 0;
  if (tol.scale) for (const r of ref) if (Number.isFinite(r)) largest = Math.max(largest, Math.abs(r));
  for (let i = 0; i < ref.length; i++) {
    const a = got[i], r = ref[i];
    if (Number.isNaN(a) && Number.isNaN(r)) continue;
    if (a === r) continue; // same infinities too
    const d = Math.abs(a - r);
    const diff = Number.isNaN(d) ? Infinity : d;
    maxAbs = Math.max(maxAbs, diff);
    if (r !== 0) maxRel = Math.max(maxRel, diff / Math.abs(r));
    const limit = tol.abs + tol.rel * Math.abs(r) + (tol.scale ? tol.scale * largest : 0);
    if (!(diff <= limit)) {
      bad++;
      const excess = diff - limit;
      if (excess > worstExcess || worst < 0) { worstExcess = excess; worst = i; }
    }
  }
  return { maxAbs, maxRel, bad, worst, count: ref.length };
}


// Which inputs hold values the dtype cannot: then the user's kernel did not read these very
// inputs, and the comparison would measure the rounding of its inputs, not the kernel.
function notRepresentable(files, dtype) {
  if (dtype === 'float32') return [];
  const notes = [];
  for (const key of ['value', 'samplingLocations', 'attentionWeights', 'gradOutput']) {
    const f = files[key];
    if (!f) continue;
    const bits = narrowToHalf(f.data, dtype), back = widenHalf(bits, dtype);
    const i = f.data.findIndex((x, k) => !Object.is(x, back[k]) && !(Number.isNaN(x) && Number.isNaN(back[k])));
    if (i >= 0) notes.push(`${f.path} holds values that ${dtype} cannot (element ${i}: ${f.data[i]}); if your kernel read them rounded to ${dtype}, save the rounded inputs`);
  }
  return notes;
}

// The half-precision dtype that holds every value of data (NaN aside), when it has a value other
// than 0, or null: a dump of such a kernel, checked against float32's bound for want of --dtype.
// bfloat16 first: its values within float16's range are float16 values too.
function halfDtypeHolding(data) {
  if (!data.some((x) => x !== 0 && !Number.isNaN(x))) return null;
  return ['bfloat16', 'float16'].find((dtype) => {
    const back = widenHalf(narrowToHalf(data, dtype), dtype);
    return data.every((x, k) => Object.is(x, back[k]) || Number.isNaN(x));
  }) ?? null;
}

// Everything agrees: "all 4 outputs agree", "output agrees".
const allAgree = (names) => (names.length === 1 ? `crosscheck: ${names[0]} agrees` : `crosscheck: all ${names.length} outputs agree`);

// --expect: the user's files against the float64 reference with per-element bounds.
async function crosscheckExpected(o, print, expected) {
  const wantForward = 'output' in expected;
  const wantBackward = Object.keys(expected).some((n) => n !== 'output');
  const files = loadCase(o.in, wantBackward);
  const args = deriveProblem(o, files);
  const names = CHECKED_OUTPUTS.filter((n) => n in expected);
  const ref = referenceWithBounds(args, { forward: wantForward, backward: wantBackward });
  for (const n of names) {
    const e = expected[n], want = n === 'output' ? [args.value.shape[0], args.attentionWeights.shape[1],
      (o.valueLayout === 'BLNC' ? args.value.shape[2] : args.value.shape[1]) * args.value.shape[3]]
      : n === 'grad_value' ? args.value.shape : n === 'grad_sampling_locations' ? args.samplingLocations.shape
        : args.attentionWeights.shape;
    if (!sameShape(e.shape, want)) {
      throw bad(`${e.path}: shape ${formatShape(e.exactShape)}, expected ${formatShape(want)} (the shape of ${n})`);
    }
  }
  // The dtype: as given, else the files' own when they are all half precision of one kind.
  let dtype = o.dtype, dtypeFrom = '--dtype';
  if (dtype === null && o.rtol === null && o.atol === null) {
    const kinds = new Set(names.map((n) => expected[n].dtype));
    dtype = kinds.size === 1 && kinds.has('<f2') ? 'float16' : kinds.size === 1 && kinds.has('bfloat16') ? 'bfloat16' : 'float32';
    dtypeFrom = dtype === 'float32' ? 'the default' : 'the dtype of the files';
  }
  const tol = dtype === null ? { rtol: o.rtol ?? 0, atol: o.atol ?? 0 } : { dtype };
  const rule = dtype === null ? `|yours - ours| <= ${tol.atol} + ${tol.rtol}*|ours|` : `${BOUND_RULE}, u = 2^${Math.log2(UNIT_ROUNDOFF[dtype])}`;
  const results = names.map((n) => [n, compareWithBounds(n, expected[n].data, ref[n], args, tol, o.top)]);
  const notes = dtype ? notRepresentable(files, dtype) : [];
  const failures = results.filter(([, r]) => r.disagree).map(([n, r]) => `${n} (${r.disagree} of ${r.count} elements)`);
  if (dtypeFrom === 'the default') {
    for (const [n, r] of results) {
      const half = r.disagree ? halfDtypeHolding(expected[n].data) : null;
      if (half) notes.push(`every value in ${expected[n].path} is a ${half} value: if your kernel stores ${half}, give --dtype ${half}`);
    }
  }
  if (o.backendNamed) notes.push(`--backend ${o.backend} is not used with --expect: ours is the float64 reference`);
  if (o.json) {
    const doc = {
      in: o.in, expect: o.expect, yours: `the files in ${o.expect}`, ours: 'the float64 reference (docs/SEMANTICS.md)',
      tolerance: dtype === null ? { rtol: tol.rtol, atol: tol.atol, rule } : { dtype, from: dtypeFrom, unitRoundoff: UNIT_ROUNDOFF[dtype], rule },
      agree: failures.length === 0, notes,
      outputs: Object.fromEntries(results.map(([n, r]) => [n, {
        file: expected[n].path, dtype: expected[n].dtype, count: r.count, disagree: r.disagree,
        maxAbsDiff: jsonNumber(r.maxAbsDiff), maxRatioToBound: jsonNumber(r.maxRatio), noBound: r.noBound,
        perLevel: r.perLevel, perHead: r.perHead,
        worst: r.worst.map((w) => ({
          coordinates: w.coordinates, index: w.index, yours: jsonNumber(w.yours), ours: jsonNumber(w.ours),
          diff: jsonNumber(w.diff), bound: jsonNumber(w.bound),
        })),
      }])),
    };
    print(JSON.stringify(doc, null, 2));
  } else {
    print(`crosscheck ${o.in}: yours = the files in ${o.expect}, ours = the float64 reference (docs/SEMANTICS.md)`);
    print(dtype === null ? `  tolerance (--rtol/--atol): ${rule}, per element`
      : `  tolerance for ${dtype} (${dtypeFrom}): ${rule}, per element`);
    for (const note of notes) print(`  note: ${note}`);
    for (const [n, r] of results) {
      // a ratio to the bound of an element with none (ours exactly 0) would say nothing
      const ratio = r.noBound && !(r.maxRatio > 0) ? [] : [`max |yours - ours| / bound ${fmt(r.maxRatio)}`];
      const unbounded = r.noBound ? [`${r.noBound} with no bound to compare (ours exactly 0)`] : [];
      const maxText = [`max |yours - ours| ${fmt(r.maxAbsDiff)}`, ...ratio, ...unbounded].join(', ');
      const counts = [...(r.perLevel ? [`per level: ${r.perLevel.map((c, l) => `l=${l}: ${c}`).join(', ')}`] : []),
        `per head: ${r.perHead.map((c, h) => `h=${h}: ${c}`).join(', ')}`];
      print(r.disagree ? `  ${n.padEnd(24)} DISAGREE  ${r.disagree} of ${r.count} elements beyond their bound (${counts.join('; ')}); ${maxText}`
        : `  ${n.padEnd(24)} ok        ${r.count} elements; ${maxText}`);
      for (const w of r.worst) {
        const [y, u] = pair(w.yours, w.ours);
        print(`    ${formatCoordinates(n, w.coordinates)}: yours ${y}, ours ${u}, |diff| ${fmt(w.diff)} > bound ${fmt(w.bound)}`);
      }
    }
    if (!failures.length) print(allAgree(names));
  }
  if (failures.length) throw new CliError(1, `crosscheck: ${failures.join(', ')} beyond tolerance`);
}

async function crosscheck(o, print) {
  const gradPath = joinPath(o.in, 'grad_output.npy');
  let expected = null;
  if (o.expect !== null) {
    const source = openSource('--expect', o.expect);
    // A file that is no output's would go unchecked: a typo must not pass.
    const files = CHECKED_OUTPUTS.map((n) => `${n}.npy`);
    const strays = source.names().filter((n) => !files.includes(n));
    if (strays.length) {
      throw bad(`--expect ${o.expect}: ${shown(strays[0])}${strays.length > 1 ? ` and ${strays.length - 1} more are not output names`
        : ' is not an output name'} (${files.join(', ')})`);
    }
    expected = {};
    const problems = [];
    for (const n of ['output', 'grad_value', 'grad_sampling_locations', 'grad_attention_weights']) {
      try {
        if (source.has(`${n}.npy`)) expected[n] = source.read(`${n}.npy`, 'float');
      } catch (e) {
        if (!(e instanceof CliError)) throw e;
        problems.push(e.message);
      }
    }
    if (problems.length) throw bad(problems.join('; also: '));
    if (Object.keys(expected).length === 0) {
      throw bad(`--expect ${o.expect}: none of output.npy, grad_value.npy, grad_sampling_locations.npy, grad_attention_weights.npy is there`);
    }
    return crosscheckExpected(o, print, expected);
  }
  const wantForward = true;
  const wantBackward = exists(gradPath);
  const files = loadCase(o.in, wantBackward);
  const args = deriveProblem(o, files);

  const named = o.backendNamed;
  const tested = await backendApi(o.backend, o.threads, named);
  const testedName = tested.backend === 'wasm' ? `wasm (${tested.simd ? 'SIMD' : 'scalar'})` : tested.backend;
  let mine = {};
  if (wantForward) mine = { ...mine, ...compute(tested, 'forward', args, named) };
  if (wantBackward) mine = { ...mine, ...compute(tested, 'backward', args, named) };

  let pairs, refName; // [name, got, ref]
  let tolerance = TOLERANCE;
  {
    // Native where the addon loads (and is not what is tested), else the float64 reference.
    let native = null, whyNot = '';
    if (tested.backend !== 'native') {
      const { init } = await import('./index.js');
      try {
        native = await init({ backend: 'native' });
      } catch (e) {
        whyNot = e.code === 'MSDA_NATIVE_UNAVAILABLE' ? `the native addon is not available on ${process.platform}-${process.arch}`
          : 'the native addon does not load here';
      }
    }
    let ref = {};
    if (native) {
      if (wantForward) ref = { ...ref, ...compute(native, 'forward', args, true) };
      if (wantBackward) ref = { ...ref, ...compute(native, 'backward', args, true) };
      print(`crosscheck ${o.in}: ${testedName} against native`);
      refName = 'native';
    } else {
      const { referenceBackward, referenceForward } = await import('./reference.js');
      const { gradOutput, threads, ...forwardArgs } = args;
      if (wantForward) ref.output = referenceForward(forwardArgs);
      if (wantBackward) {
        const g = referenceBackward({ ...forwardArgs, gradOutput });
        Object.assign(ref, { grad_value: g.gradValue, grad_sampling_locations: g.gradSamplingLocations,
          grad_attention_weights: g.gradAttentionWeights });
      }
      tolerance = REFERENCE_TOLERANCE;
      refName = 'reference';
      print(`crosscheck ${o.in}: ${testedName} against the float64 reference${whyNot ? ` (${whyNot})` : ''}`);
    }
    pairs = Object.keys(mine).map((n) => [n, mine[n].data, ref[n].data]);
  }
  if (!wantBackward) print(`  backward skipped: no ${gradPath}`);
  print(tolerance.scale
    ? '  pass when |got - ref| <= 1e-5 + 1e-4*|ref| + 1e-4*max|ref| for every element (max rel diff: over ref != 0)'
    : '  pass when |got - ref| <= 1e-5 + 1e-4*|ref| for every element (max rel diff: over ref != 0)');
  const failures = [];
  for (const [name, got, ref] of pairs) {
    const c = compareArrays(got, ref, tolerance);
    let verdict = 'ok';
    if (c.bad) {
      const [g, r] = pair(got[c.worst], ref[c.worst]);
      verdict = `DISAGREE: ${c.bad} of ${c.count} elements, worst ${formatCoordinates(name, coordinates(name, c.worst, args))}: ${testedName} ${g}, ${refName} ${r}`;
      failures.push(`${name} (${c.bad} of ${c.count} elements)`);
    }
    print(`  ${name.padEnd(24)} max abs diff ${fmt(c.maxAbs).padEnd(9)} max rel diff ${fmt(c.maxRel).padEnd(9)} ${verdict}`);
  }
  if (failures.length) throw new CliError(1, `crosscheck: ${failures.join(', ')} beyond tolerance`);
  print(allAgree(pairs.map(([n]) => n)));
}

// ---- main ------------------------------------------------------------------------------------------

// A reader that went away (`msda crosscheck ... | head -1`): the rest of the output is dropped,
// the command still finishes and exits with its own status, and nothing is said about it.
let stdoutGone = false;
const STDIO = { out: (s) => { if (!stdoutGone) process.stdout.write(s); }, err: (s) => process.stderr.write(s) };

/**
 * Runs the command line on argv (without node and the script); returns the exit status.
 * io.out / io.err receive stdout and stderr text (default: the process's).
 */
export async function main(argv, io = STDIO) {
  try {
    if (argv[0] === 'demo') return await (await import('./demo.js')).demo(argv.slice(1), io);
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

// Run when executed (directly or through the npm bin link), not when imported.
const invokedAs = (() => {
  try {
    return process.argv[1] ? realpathSync(process.argv[1]) : '';
  } catch {
    return '';
  }
})();
if (invokedAs === fileURLToPath(import.meta.url)) {
  process.stdout.on('error', (e) => {
    if (e.code !== 'EPIPE') throw e;
    stdoutGone = true;
  });
  process.exitCode = await main(process.argv.slice(2));
}
