// The Error for a C status that came back from a backend.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

// The Error for a C status that came back: { status, code, message } from a store's run().
export function callError(op, failure) {
  const err = new Error(`${op}: ${failure.message} (${failure.code})`);
  err.code = failure.code;
  err.status = failure.status;
  return err;
}

