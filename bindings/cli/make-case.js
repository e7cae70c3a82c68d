// msda make-case --out DIR (the JS CLI's alone: docs/cli.md "Two command lines"): a seeded case
// whose samples reach the edges a kernel can get wrong, for `msda crosscheck --expect`. Each
// sample's x and y take, in turn: a random position inside, one outside the image (zeros
// padding: no corner inside; border: clamped), exactly 0, exactly 1, a pixel centre (an integer
// pixel position, where location gradients jump; exact where the level's W, or W - 1 under
// --align-corners, is a power of two), half a pixel into the padding (one corner outside), and
// one crowded spot every query's such point shares (many samples on the same pixels).
// A directory of .npy files, or an .npz (stored, as np.savez writes) when --out ends in .npz.
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { narrowToHalf, widenHalf } from '../core/half.js';
import { serializeNpy } from '../npy.js';
import { bad, CliError, say, T, why } from './messages.js';
import { crc32 } from './npz.js';
import { checkDestinations, prepareOut, writeOutputs } from './outputs.js';

export const MAKE_CASE_USAGE = `usage: msda make-case --out DIR [options]

Writes a seeded case for msda crosscheck --expect: value, spatial_shapes, level_start_index,
sampling_locations, attention_weights and grad_output, whose samples cover the edges (outside
the image, exactly 0 and 1, pixel centres, half a pixel into the padding, crowded pixels).

  --out DIR                                  a directory of .npy files (created; the six files
                                             replaced all or none), or DIR.npz: one archive
  --seed N                                   0..2^32-1; default 1 (the same N, the same bytes)
  --dtype float32|float16|bfloat16           the values a kernel of that dtype reads: float16 as
                                             '<f2' files, bfloat16 as float32 files; default float32
  --value-layout BLNC|BNLC                   default BLNC
  --sampling-locations-layout BQHLP2|B2QHLP  default BQHLP2
  --align-corners                            pixel centres placed for align_corners=True
  --batch B --queries Q --heads H --channels C --points P    default 1, 16, 2, 8, 7 (1..4096)
  --levels HxW,HxW,...                       default 8x8,4x4,2x2 (9x9,5x5,3x3 with --align-corners)
  -h, --help                                 this text
`;

const CHOICES = {
  '--dtype': ['float32', 'float16', 'bfloat16'],
  '--value-layout': ['BLNC', 'BNLC'],
  '--sampling-locations-layout': ['BQHLP2', 'B2QHLP'],
};
const COUNTS = { '--batch': 'B', '--queries': 'Q', '--heads': 'H', '--channels': 'C', '--points': 'P' };
const orList = (xs) => `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}`;

/** make-case's options from argv (after the command); null for --help. */
export function parseMakeCaseArgs(argv) {
  const o = { out: null, seed: 1, dtype: 'float32', valueLayout: 'BLNC', samplingLocationsLayout: 'BQHLP2',
    alignCorners: false, B: 1, Q: 16, H: 2, C: 8, P: 7, levels: null };
  const seen = new Set();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') return null;
    if (!arg.startsWith('--')) throw bad(say(T.unexpectedArgument, arg));
    const eq = arg.indexOf('=');
    const name = eq >= 0 ? arg.slice(0, eq) : arg;
    const known = ['--out', '--seed', '--levels', ...Object.keys(CHOICES), ...Object.keys(COUNTS)];
    if (name === '--align-corners') {
      if (eq >= 0) throw bad(say(T.takesNoValue, name, arg.slice(eq + 1)));
      o.alignCorners = true;
    } else if (!known.includes(name)) {
      throw bad(say(T.makeCaseUnknownOption, name));
    } else {
      let value;
      if (eq >= 0) value = arg.slice(eq + 1);
      else if (i + 1 < argv.length) value = argv[++i];
      else throw bad(say(T.needsValue, name));
      if (name === '--out') {
        if (value === '') throw bad(say(T.emptyPath, name));
        o.out = value;
      } else if (name === '--seed') {
        if (!/^\d{1,10}$/.test(value) || Number(value) > 0xffffffff) throw bad(say(T.makeCaseBadSeed, value));
        o.seed = Number(value);
      } else if (name in CHOICES) {
        if (!CHOICES[name].includes(value)) throw bad(say(T.badChoice, name, value, orList(CHOICES[name])));
        o[{ '--dtype': 'dtype', '--value-layout': 'valueLayout', '--sampling-locations-layout': 'samplingLocationsLayout' }[name]] = value;
      } else if (name in COUNTS) {
        if (!/^\d{1,4}$/.test(value) || Number(value) < 1 || Number(value) > 4096) throw bad(say(T.makeCaseBadCount, name, value));
        o[COUNTS[name]] = Number(value);
      } else {
        const levels = value.split(',').map((l) => /^(\d{1,4})x(\d{1,4})$/.exec(l));
        if (levels.some((m) => !m || Number(m[1]) < 1 || Number(m[2]) < 1) || levels.length > 16) throw bad(say(T.makeCaseBadLevels, value));
        o.levels = levels.map((m) => [Number(m[1]), Number(m[2])]);
      }
    }
    if (seen.has(name)) throw bad(say(T.givenTwice, name));
    seen.add(name);
  }
  if (o.out === null) throw bad(T.makeCaseMissingOut);
  o.levels ??= o.alignCorners ? [[9, 9], [5, 5], [3, 3]] : [[8, 8], [4, 4], [2, 2]];
  const L = o.levels.reduce((s, [h, w]) => s + h * w, 0);
  if (o.B * L * o.H * o.C > 1 << 26 || o.B * o.Q * o.H * o.levels.length * o.P * 2 > 1 << 26) throw bad(T.makeCaseTooLarge);
  return o;
}

// xorshift32: the same stream for the same seed on every platform.
function random(seed) {
  let s = (seed ^ 0x9e3779b9) >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 2 ** 32;
  };
}

// A coordinate in [0, 1] terms for axis size n, of kind k (the order of the header comment).
const KINDS = 7;
function coordinate(kind, n, align, r, crowd) {
  const centre = (i) => {
    const c = Math.fround(align ? (n === 1 ? 0 : i / (n - 1)) : (i + 0.5) / n);
    return c;
  };
  switch (kind) {
    case 0: return r();
    case 1: return r() < 0.5 ? -0.25 - r() : 1.25 + r();
    case 2: return 0;
    case 3: return 1;
    case 4: return centre(Math.floor(r() * n));
    case 5: return r() < 0.5 ? (align ? -0.5 / Math.max(n - 1, 1) : 0.25 / n) : (align ? 1 + 0.5 / Math.max(n - 1, 1) : 1 - 0.25 / n);
    default: return crowd;
  }
}

/** The case's tensors for options o: { name: { data, shape } }, floats rounded to o.dtype. */
export function makeCase(o) {
  const r = random(o.seed);
  const { B, Q, H, C, P, levels } = o;
  const NL = levels.length, L = levels.reduce((s, [h, w]) => s + h * w, 0);
  const round = (data) => (o.dtype === 'float32' ? data : widenHalf(narrowToHalf(data, o.dtype), o.dtype));
  const fill = (n, f) => round(Float32Array.from({ length: n }, f));
  const value = fill(B * L * H * C, () => 2 * r() - 1);
  const crowd = [r(), r()]; // the spot every query's crowded point samples
  const loc = new Float32Array(B * Q * H * NL * P * 2);
  const bq = o.samplingLocationsLayout === 'BQHLP2';
  for (let b = 0, k = 0; b < B; b++) {
    for (let q = 0; q < Q; q++) {
      for (let h = 0; h < H; h++) {
        for (let l = 0; l < NL; l++) {
          for (let p = 0; p < P; p++, k++) {
            const [Hl, Wl] = levels[l];
            // x walks the kinds with the point, y with the point and the query, so pairs vary
            const kx = p % KINDS, ky = (p + q) % KINDS;
            const at = (xy) => (bq ? (((((b * Q + q) * H + h) * NL + l) * P + p) * 2 + xy)
              : (((((b * 2 + xy) * Q + q) * H + h) * NL + l) * P + p));
            loc[at(0)] = coordinate(kx, Wl, o.alignCorners, r, crowd[0]);
            loc[at(1)] = coordinate(kx === KINDS - 1 ? kx : ky, Hl, o.alignCorners, r, crowd[1]);
          }
        }
      }
    }
  }
  const valueShape = o.valueLayout === 'BLNC' ? [B, L, H, C] : [B, H, L, C];
  const starts = [];
  levels.reduce((s, [h, w]) => { starts.push(s); return s + h * w; }, 0);
  return {
    value: { data: value, shape: valueShape },
    spatial_shapes: { data: BigInt64Array.from(levels.flat(), BigInt), shape: [NL, 2] },
    level_start_index: { data: BigInt64Array.from(starts, BigInt), shape: [NL] },
    sampling_locations: { data: round(loc), shape: bq ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P] },
    attention_weights: { data: fill(B * Q * H * NL * P, () => r()), shape: [B, Q, H, NL, P] },
    grad_output: { data: fill(B * Q * H * C, () => 2 * r() - 1), shape: [B, Q, H * C] },
  };
}

// A tensor as a .npy file: '<f2' bits for float16, float32 (bfloat16 values) otherwise.
function npyBytes(t, dtype) {
  if (!(t.data instanceof Float32Array) || dtype !== 'float16') return serializeNpy(t);
  return serializeNpy({ data: narrowToHalf(t.data, 'float16'), dtype: '<f2', shape: t.shape });
}

// A zip of stored members, as np.savez writes one.
function storedZip(entries) {
  const parts = [], central = [];
  let offset = 0;
  for (const [name, data] of entries) {
    const n = Buffer.from(name, 'latin1'), crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(n.length, 26);
    const c = Buffer.alloc(46);
    c.writeUInt32LE(0x02014b50, 0);
    c.writeUInt16LE(20, 4);
    c.writeUInt16LE(20, 6);
    c.writeUInt32LE(crc, 16);
    c.writeUInt32LE(data.length, 20);
    c.writeUInt32LE(data.length, 24);
    c.writeUInt16LE(n.length, 28);
    c.writeUInt32LE(offset, 42);
    parts.push(local, n, data);
    central.push(c, n);
    offset += 30 + n.length + data.length;
  }
  const cd = Buffer.concat(central), end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, cd, end]);
}

/** msda make-case argv...: writes the case; returns the exit status. */
export async function makeCaseCommand(argv, io) {
  const o = parseMakeCaseArgs(argv);
  if (o === null) {
    io.out(MAKE_CASE_USAGE);
    return 0;
  }
  const tensors = makeCase(o);
  const files = Object.entries(tensors).map(([name, t]) => [name, Buffer.from(npyBytes(t, o.dtype))]);
  if (o.out.endsWith('.npz')) {
    const dir = dirname(o.out);
    prepareOut(dir);
    const tmp = `${o.out}.msda-${process.pid}`;
    try {
      writeFileSync(tmp, storedZip(files.map(([n, b]) => [`${n}.npy`, b])), { flag: 'wx' });
      renameSync(tmp, o.out);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw new CliError(1, say(T.writeError, o.out, why(e)));
    }
  } else {
    prepareOut(o.out);
    checkDestinations(o.out, files.map(([n]) => n), 2);
    await writeOutputs(o.out, Object.fromEntries(files.map(([n, bytes]) => [n, { bytes }])));
  }
  io.out(say(T.makeCaseWrote, o.out, o.seed, o.dtype));
  return 0;
}
