// A case's files for the JS CLI (src/cli/cases.c is the other half): read from a directory or an
// .npz archive as the native CLI reads them, every bad one named, and the problem derived from
// their shapes with each checked against the others.
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { inflateRawSync } from 'node:zlib';
import { widenHalf } from '../core/half.js';
import { looksLikeZip, NpzError, parseNpz } from './npz.js';
import { formatShape, NpyError, parseNpy, parseNpyHeader } from '../npy.js';
import { bad, CliError, joinPath, say, T, why } from './messages.js';

// What to do about a file of the wrong dtype, in NumPy's words (the native CLI prints the same).
function dtypeHint(path, descr, want, name = path.slice(path.lastIndexOf('/') + 1)) {
  if (want === 'float' && (descr === '<V2' || descr === '|V2')) {
    return say(T.dtypeVoid, path, descr);
  }
  if (want === 'float' && (descr === '<i2' || descr === '<u2')) {
    return say(T.dtypeInt16, path, descr);
  }
  const bigEndian = descr.startsWith('>');
  const what = want === 'float' ? T.dtypesFloat : T.dtypesInt;
  const fix = want === 'float' ? (bigEndian ? T.dtypeFixFloatBig : T.dtypeFixFloat) : (bigEndian ? T.dtypeFixIntBig : T.dtypeFixInt);
  return say(T.dtypeWrong, path, descr, bigEndian ? T.dtypeBigEndian : '', name, bigEndian ? T.dtypeLittleEndian : '', what, fix);
}

// As the native CLI reads: open without waiting (a FIFO), check what was opened (so nothing
// swapped in after a check is read), and read the size it had then.
function readFileAsNative(path, large) {
  let fd;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    throw bad(say(T.fileSays, path, say(T.cannotOpen, why(e))));
  }
  try {
    let st;
    try {
      st = fstatSync(fd);
    } catch (e) {
      throw bad(say(T.fileSays, path, say(T.cannotStat, why(e))));
    }
    if (!st.isFile()) throw bad(say(T.fileSays, path, T.notRegularFile));
    if (large !== undefined && st.size > PARTS.limit) return large(fd, st.size);
    let bytes;
    try {
      bytes = Buffer.allocUnsafe(st.size);
    } catch {
      throw new CliError(1, say(T.fileSays, path, say(T.outOfMemoryReading, st.size)));
    }
    let got = 0;
    try {
      while (got < st.size) {
        const n = readSync(fd, bytes, got, Math.min(st.size - got, 1 << 30), null);
        if (n === 0) break; // shrank while reading: parse what is there
        got += n;
      }
    } catch (e) {
      throw new CliError(1, say(T.fileSays, path, say(T.readError, why(e))));
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
      throw new CliError(1, say(T.fileSays, path, say(T.readError, why(e))));
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
        throw new CliError(1, say(T.fileSays, path, say(T.outOfMemoryReading, size)));
      }
      got = readAt(full, 0);
      head = full.subarray(0, got);
      if (got < full.length) judged = got;
    }
  }
  const a = parseNpyHeader(head, judged, { bigint: true, bool: false });
  if (wrongDtype(a, want)) throw bad(dtypeHint(path, a.dtype, want));   // before reading gigabytes
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new CliError(1, say(T.largeFileBigEndian, path));
  let data;
  try {
    data = new ({ '<f4': Float32Array, '<f2': Uint16Array, bfloat16: Uint16Array, '<i4': Int32Array, '<i8': BigInt64Array })[a.dtype](a.count);
  } catch {
    throw new CliError(1, say(T.fileSays, path, say(T.outOfMemoryReading, size)));
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
    if (e instanceof NpyError) throw bad(say(T.fileSays, path, e.message));
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

export function exists(path) {
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
export function openSource(flag, dir) {
  let st;
  try {
    st = statSync(dir);
  } catch (e) {
    throw bad(say(T.sourceSays, flag, dir, why(e)));
  }
  if (st.isDirectory()) {
    // has: the name is in the directory (lstat), so a dangling symlink is read, and refused, not skipped.
    // names: the entries as bytes (latin1), in byte order, as the native CLI lists them.
    const names = () => {
      try {
        return readdirSync(dir, { encoding: 'latin1' }).sort();
      } catch (e) {
        throw bad(say(T.cannotList, flag, dir, why(e)));
      }
    };
    return { has: (name) => !isMissing(joinPath(dir, name)), missing: (name) => isMissing(joinPath(dir, name)),
      read: (name, want) => readNpyFile(joinPath(dir, name), want), path: (name) => joinPath(dir, name), names };
  }
  const bytes = st.isFile() ? readFileAsNative(dir) : null;
  if (bytes === null || !looksLikeZip(bytes)) throw bad(say(T.notDirectoryNorNpz, flag, dir));
  let members;
  try {
    members = parseNpz(bytes, (b, maxOutputLength) => inflateRawSync(b, { maxOutputLength }));
  } catch (e) {
    if (e instanceof NpzError) throw bad(say(T.sourceSays, flag, dir, e.message));
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
      if (m === undefined) throw bad(say(T.fileSays, path(name), T.notInArchive));
      let data;
      try {
        data = m.read();
      } catch (e) {
        if (e instanceof NpzError) throw bad(say(T.fileSays, path(name), e.message));
        throw e;
      }
      return npyFromBytes(path(name), data, want, name);
    },
  };
}

/**
 * Reads the case's files (grad_output.npy when withGrad) from a directory or an .npz; checks --in
 * first. A bad file does not stop the reading: its problem is kept (problems, with the exit status
 * in code) for deriveProblem, which adds those of the shapes and reports them all.
 */
export function loadCase(dir, withGrad) {
  const source = openSource('--in', dir);
  const files = { problems: [], code: 0, paths: {} };
  for (const [key, name, want] of INPUTS) {
    files.paths[key] = source.path(name);
    if (key === 'gradOutput' && !withGrad) continue;
    if (key === 'levelStartIndex' && source.missing(name)) continue; // derived
    try {
      files[key] = source.read(name, want);
    } catch (e) {
      if (!(e instanceof CliError)) throw e;
      files.problems.push(e.message);
      files.code ||= e.exitCode;
    }
  }
  return files;
}

export const sameShape = (a, b) => a.length === b.length && a.every((d, i) => d === b[i]);

// An expected shape with each dimension not known (its file is bad) by its name.
const expectedText = (dims, names) => formatShape(dims.map((d, i) => d ?? names[i]));
const fits = (shape, dims) => shape.length === dims.length && dims.every((d, i) => d === null || shape[i] === d);

/**
 * Derives B, L, N_q, N_h, C_h, N_l, N_p from the files and checks each against the others, with
 * the native CLI's messages. Every bad file is named in one run ("first; also: second"): a file
 * that cannot be read, or fails its own check, leaves its dimensions unknown, and the others are
 * checked against the dimensions known. Returns the arguments of forward()/backward().
 */
export function deriveProblem(o, f) {
  const blnc = o.valueLayout === 'BLNC';
  const bqhlp2 = o.samplingLocationsLayout === 'BQHLP2';
  const valueDims = blnc ? T.valueDimsBlnc : T.valueDimsBnlc;
  const { value, spatialShapes: shapes, levelStartIndex: starts, samplingLocations: loc, attentionWeights: weights } = f;
  const problems = [...f.problems];
  let B = null, L = null, H = null, C = null, NL = null, Q = null, P = null, total = null;
  if (value) {
    const vs = value.shape;
    if (vs.length !== 4) problems.push(say(T.valueNot4d, value.path, formatShape(value.exactShape), valueDims));
    else if (vs.some((d) => d < 1)) problems.push(say(T.valueEmpty, value.path, formatShape(value.exactShape), valueDims));
    else [B, L, H, C] = [vs[0], vs[blnc ? 1 : 2], vs[blnc ? 2 : 1], vs[3]];
  }

  const pairs = [];
  const expectedStarts = [];
  if (shapes) {
    if (shapes.shape.length !== 2 || shapes.shape[1] !== 2 || shapes.shape[0] < 1) {
      problems.push(say(T.shapesShape, shapes.path, formatShape(shapes.exactShape)));
    } else {
      const big = Array.from(shapes.data, BigInt);
      const INT64_MAX = (1n << 63n) - 1n;
      let sum = 0n, row = null;
      for (let l = 0; l < shapes.shape[0] && row === null; l++) {
        const h = big[2 * l], w = big[2 * l + 1];
        if (h < 1n || w < 1n) row = say(T.shapesRow, shapes.path, l, h, w);
        expectedStarts.push(sum);
        sum += h * w;
        if (row === null && (h * w > INT64_MAX || sum > INT64_MAX)) row = say(T.shapesOverflow, shapes.path, l);
        pairs.push([Number(h), Number(w)]);
      }
      if (row !== null) problems.push(row);
      else [NL, total] = [shapes.shape[0], sum];
    }
  }
  if (L !== null && total !== null && BigInt(L) !== total) {
    const vs = value.shape;
    const otherFits = BigInt(vs[blnc ? 2 : 1]) === total;
    problems.push(say(T.valueLength, value.path, formatShape(value.exactShape), L, total, shapes.path, valueDims,
      !otherFits ? '' : blnc ? T.valueFitsBnlc : T.valueFitsBlnc));
    H = null; // the value may be in the other layout
  }
  let startsFit = false;
  if (starts && NL !== null) {
    startsFit = sameShape(starts.shape, [NL]);
    if (!startsFit) problems.push(say(T.startsShape, starts.path, formatShape(starts.exactShape), formatShape([NL]), shapes.path));
  }
  if (weights) {
    const ws = weights.shape;
    const want = [B, null, H, NL, null];
    if (!fits(ws, want) || ws[1] < 1 || ws[4] < 1) {
      problems.push(say(T.weightsShape, weights.path, formatShape(weights.exactShape),
        expectedText(want, ['B', 'N_q', 'N_h', 'N_l', 'N_p']), f.paths.value, f.paths.spatialShapes));
      // Either file may be the wrong one: what they disagree on is not held against the others.
      if (ws.length === 5) [B, H, NL] = [ws[0] === B ? B : null, ws[2] === H ? H : null, ws[3] === NL ? NL : null];
    } else {
      [Q, P] = [ws[1], ws[4]];
    }
  }
  if (loc) {
    const locShape = bqhlp2 ? [B, Q, H, NL, P, 2] : [B, 2, Q, H, NL, P];
    const otherShape = bqhlp2 ? [B, 2, Q, H, NL, P] : [B, Q, H, NL, P, 2];
    if (!fits(loc.shape, locShape)) {
      const ls = loc.shape, q = bqhlp2 ? 1 : 2;
      if (ls.length === 6 && !fits(ls, otherShape)) [B, Q, H] = [ls[0] === B ? B : null, ls[q] === Q ? Q : null, ls[q + 1] === H ? H : null];
      problems.push(say(T.locationsShape, loc.path, formatShape(loc.exactShape),
        expectedText(locShape, bqhlp2 ? ['B', 'N_q', 'N_h', 'N_l', 'N_p'] : ['B', '2', 'N_q', 'N_h', 'N_l', 'N_p']),
        bqhlp2 ? T.locationsDimsBqhlp2 : T.locationsDimsB2qhlp, f.paths.attentionWeights,
        !fits(loc.shape, otherShape) ? '' : bqhlp2 ? T.locationsFitB2qhlp : T.locationsFitBqhlp2));
    }
  }
  if (f.gradOutput) {
    const goShape = [B, Q, H === null || C === null ? null : H * C];
    if (!fits(f.gradOutput.shape, goShape)) {
      problems.push(say(T.gradOutputShape, f.gradOutput.path, formatShape(f.gradOutput.exactShape),
        expectedText(goShape, ['B', 'N_q', 'N_h*C_h'])));
    }
  }
  // The library's level-start rule and message, with the file name.
  if (startsFit) {
    const l = expectedStarts.findIndex((e, i) => BigInt(starts.data[i]) !== e);
    if (l === 0) problems.push(say(T.startsFirst, starts.path, starts.data[0]));
    else if (l > 0) problems.push(say(T.startsLater, starts.path, l, starts.data[l], expectedStarts[l], l - 1));
  }
  if (problems.length) throw new CliError(f.code || 2, problems.join(T.also));
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
