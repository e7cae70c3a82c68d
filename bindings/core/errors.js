// How errors are worded: what an argument is (describe), and the Error for a C status that
// came back from a backend.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

// The Error for a C status that came back: { status, code, message } from a store's run().
export function callError(op, failure) {
  const err = new Error(`${op}: ${failure.message} (${failure.code})`);
  err.code = failure.code;
  err.status = failure.status;
  return err;
}


/** What x is, for an error message: 'null', 'missing', 'an Array', a class name, or a value. */
export function describe(x) {
  if (x === null) return 'null';
  if (x === undefined) return 'missing';
  if (Array.isArray(x)) return 'an Array';
  if (typeof x === 'object' || typeof x === 'function') return (x.constructor && x.constructor.name) || typeof x;
  if (typeof x === 'string') return `the string ${JSON.stringify(x)}`;
  return `${typeof x} ${String(x)}`;
}
