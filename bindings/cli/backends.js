// The backends the JS CLI runs on (the native CLI has one: the library it links).
import { BAD_ISA } from '../core/errors.js';
import { bad, CliError, say, T } from './messages.js';

// --threads N > 1 on the wasm backend loads the threaded module (docs/threads.md); native and
// the scalar module take threads per call.
// A backend is named in a message only when the user named it (named: --backend was given).
export async function backendApi(backend, threads = 1, named = true) {
  const { init } = await import('../index.js');
  try {
    return await init(backend === 'wasm' && threads > 1 ? { backend, threads } : { backend });
  } catch (e) {
    if (e.code === BAD_ISA) throw badIsa(e);
    if (backend === 'native' && named) {
      throw bad(say(T.nativeUnavailable, e.message));
    }
    throw new CliError(1, named ? say(T.onBackend, backend, e.message) : e.message);
  }
}

/** The CLI's refusal of an MSDA_ISA that names no instruction set of this CPU (exit 2, as native). */
export const badIsa = (e) => bad(say(T.badIsa, e.isa, e.isaList));

// Runs forward or backward; the API's own argument errors (sizes past what wasm holds) are bad input.
export function compute(msda, op, args, named = true) {
  // A wasm instance runs on the threads it has (the threaded module at most 64, the scalar one 1):
  // asking for more gives the same bits, and the API's note about it (advice for init, not for
  // this CLI) would be a second stderr line.
  if (msda.wasm && args.threads > msda.threads) args = { ...args, threads: msda.threads };
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
    if (e instanceof RangeError || e instanceof TypeError) throw bad(named ? say(T.onBackend, msda.backend, e.message) : e.message);
    throw new CliError(1, named ? say(T.computeFailedOn, op, msda.backend, e.message) : say(T.computeFailed, op, e.message));
  }
}
