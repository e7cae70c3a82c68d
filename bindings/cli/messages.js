// How the JS CLI speaks (src/cli/messages.c is the other half): an error with its exit status,
// the C library's words for a system error, and paths joined as the user wrote them.

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
