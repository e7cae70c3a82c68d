// How the JS CLI speaks (src/cli/messages.c is the other half): the table's texts filled in, an
// error with its exit status, the C library's words for a system error, and paths joined as the
// user wrote them.
import { JS_TEXTS, TEXTS } from './texts.js';

/** The texts the JS CLI prints (bindings/cli/texts.js): both CLIs' and its own. */
export const T = Object.freeze({ ...TEXTS, ...JS_TEXTS });

/**
 * A text of the table filled in, as C's printf fills it: each %s, %d, %ld, %lld or %zu takes the
 * next argument as a string; %-Ns pads it on the right to N characters, %.Ns cuts it to N.
 */
export function say(format, ...args) {
  let next = 0;
  return format.replace(/%(-?)(\d*)(?:\.(\d+))?(s|d|ld|lld|zu)/g, (_, left, width, cut) => {
    let s = String(args[next++]);
    if (cut) s = s.slice(0, Number(cut));
    return left ? s.padEnd(Number(width)) : s.padStart(Number(width || 0));
  });
}

/** An error the CLI reports: one "msda:" line, then exit with exitCode. */
export class CliError extends Error {
  constructor(code, message) {
    super(message);
    this.exitCode = code;
  }
}
export const bad = (message) => new CliError(2, message);

// The C library's strerror texts, so both CLIs print the same words.
const ERRNO_TEXT = {
  ENOENT: 'No such file or directory', EACCES: 'Permission denied', ENOTDIR: 'Not a directory',
  EISDIR: 'Is a directory', EROFS: 'Read-only file system', ENOSPC: 'No space left on device',
  EPERM: 'Operation not permitted', ELOOP: 'Too many levels of symbolic links', ENAMETOOLONG: 'File name too long',
  EEXIST: 'File exists',
};
export const why = (e) => ERRNO_TEXT[e.code] || e.message;

// Like the C join: no normalisation, so messages name the path as the user wrote it.
export const joinPath = (dir, name) => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);

// A file's (or an .npz member's) name as messages show it: bytes outside printable ASCII and
// backslashes as \xNN, cut to 200 characters and '...' (src/cli/messages.c shown).
export function shown(name) {
  let out = '';
  for (let i = 0; i < name.length && out.length <= 200; i++) {
    const c = name.charCodeAt(i);
    out += c < 0x20 || c >= 0x7f || c === 0x5c ? `\\x${c.toString(16).padStart(2, '0')}` : name[i];
  }
  return out.length > 200 ? `${out.slice(0, 200)}...` : out;
}
