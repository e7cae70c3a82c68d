// How errors are worded: what an argument is (describe), the Error for a C status that came
// back from a backend, and every `.code` an Error of this package may carry (one table).
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).

/** The C library's statuses by number (src/msda.h's msda_status; msda_status_string names
 *  them): a failed call's Error has `.code` STATUS_CODES[status] and `.status` the number. */
export const STATUS_CODES = Object.freeze([
  'MSDA_OK', 'MSDA_ERR_NULL_POINTER', 'MSDA_ERR_INVALID_SIZE', 'MSDA_ERR_SHAPE_MISMATCH', 'MSDA_ERR_INVALID_OPTION',
  'MSDA_ERR_OVERFLOW', 'MSDA_ERR_OVERLAP', 'MSDA_ERR_THREADS',
]);

/** The `.code` of the Error thrown when the native addon cannot be used here (node/addon.js). */
export const NATIVE_UNAVAILABLE = 'MSDA_NATIVE_UNAVAILABLE';
/** The `.code` of the Error init({ backend: 'native' }) rejects with when MSDA_ISA names no
 *  instruction set this CPU has (a typo, or one it lacks). */
export const BAD_ISA = 'MSDA_BAD_ISA';
/** The `.code` of the Error init rejects with when no WebGPU adapter or device can be had. */
export const WEBGPU_UNAVAILABLE = 'MSDA_WEBGPU_UNAVAILABLE';
/** The `.code` of the Error a call on a lost WebGPU device rejects with. */
export const WEBGPU_DEVICE_LOST = 'MSDA_WEBGPU_DEVICE_LOST';

/** Every code: the failing statuses, then the JS side's own (tests/js/errors.test.js holds the
 *  sources to this list). */
export const ERROR_CODES = Object.freeze([...STATUS_CODES.slice(1), NATIVE_UNAVAILABLE, BAD_ISA,
  WEBGPU_UNAVAILABLE, WEBGPU_DEVICE_LOST]);

/** An Error with `.code` (one of ERROR_CODES) and, where given, `cause`. */
export function codedError(message, code, cause = undefined) {
  const err = new Error(message, cause === undefined ? undefined : { cause });
  err.code = code;
  return err;
}

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
