// The JS CLI's outputs (src/cli/outputs.c is the other half): --out prepared before computing,
// then every output written into a private directory and renamed into place only once all are
// complete.
import { accessSync, constants, existsSync, lstatSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname } from 'node:path';
import { narrowToHalf, widenHalf } from '../core/half.js';
import { npyDataBytes, npyHeader } from '../npy.js';
import { bad, CliError, joinPath, say, T, why } from './messages.js';

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

export function prepareOut(dir) {
  if (Buffer.byteLength(joinPath(dir, '.msda-XXXXXX')) >= STAGING_PATH_MAX) throw bad(say(T.outPathTooLong, dir));
  try {
    mkdirs(dir);
  } catch (e) {
    if (e.code !== 'EEXIST') throw bad(say(T.outCannotCreateDir, dir, e.path || dir, why(e)));
  }
  let st;
  try {
    st = statSync(dir);
  } catch (e) {
    throw bad(say(T.outSays, dir, why(e)));
  }
  if (!st.isDirectory()) throw bad(say(T.outNotDirectory, dir));
  try {
    accessSync(dir, constants.W_OK | constants.X_OK);
  } catch (e) {
    throw bad(say(T.outNotWritable, dir, why(e)));
  }
}

export const OUTPUT_NAMES = {
  forward: ['output'],
  backward: ['grad_value', 'grad_sampling_locations', 'grad_attention_weights'],
};

// A destination must be absent or something rename() replaces (a file, or a symlink: the link
// itself, never its target); a directory cannot be. Checked before computing (exit 2) and again
// before the first rename (exit 1: --out changed meanwhile).
export function checkDestinations(dir, names, code) {
  for (const n of names) {
    const p = joinPath(dir, `${n}.npy`);
    let st = null;
    try {
      st = lstatSync(p);
    } catch { /* absent, or not ours to judge: rename says */ }
    if (st?.isDirectory()) throw new CliError(code, say(T.outIsDirectory, dir, p));
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
export async function writeOutputs(dir, outputs, outDtype = 'float32') {
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
      throw new CliError(1, say(T.outNoPrivateDir, dir, why(e)));
    }
    const staged = names.map((n) => `${staging}/${n}.npy`);
    for (let i = 0; i < names.length; i++) {
      const { data, shape, bytes } = outputs[names[i]]; // bytes: a whole .npy file (make-case)
      let fh;
      try {
        fh = await open(staged[i], EXCLUSIVE, 0o666);
      } catch (e) {
        throw new CliError(1, say(T.cannotCreate, final[i], why(e)));
      }
      try {
        // float16: '<f2' bits; bfloat16: the float32 values of the nearest bfloat16 numbers
        // (NumPy has no bfloat16; float32 holds them exactly). As the native CLI writes them.
        const half = outDtype === 'float32' || bytes ? null : narrowToHalf(data, outDtype);
        if (!bytes) await fh.write(npyHeader(outDtype === 'float16' ? '<f2' : '<f4', shape));
        const body = bytes ?? (outDtype === 'float16' ? npyDataBytes(half, '<f2')
          : npyDataBytes(outDtype === 'bfloat16' ? widenHalf(half, 'bfloat16') : data));
        for (let off = 0; off < body.length; off += WRITE_CHUNK) {
          const n = Math.min(WRITE_CHUNK, body.length - off);
          for (let done = 0; done < n;) done += (await fh.write(body, off + done, n - done)).bytesWritten;
        }
        await fh.close();
        fh = null;
      } catch (e) {
        await fh?.close().catch(() => {});
        throw new CliError(1, say(T.writeError, final[i], why(e)));
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
          ? say(T.cannotRenameAfter, final[i], why(e), already)
          : say(T.cannotRename, final[i], why(e)));
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
