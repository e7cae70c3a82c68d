// The backend contract: what the API (core/api.js, core/stream.js) asks of a backend and of the
// store it allocates, and the size rules every call is checked by. The implementations:
//   WasmBackend / WasmStore      bindings/wasm/loader.js (the SIMD and scalar modules)
//   the threads' WasmBackend     bindings/wasm/threads.js (loadThreadedWasm: a WasmBackend whose
//                                kernel calls split among workers; the same store)
//   NativeBackend / NativeStore  bindings/node/addon.js (the Node addon, bindings/c/addon.c)
// tests/js/backend.test.js fails if one lacks a member named here. The WebGPU backend
// (bindings/webgpu/backend.js) is an API of its own (async calls on GPU buffers), not a Backend.
// Part of bindings/core/: environment-neutral code (no fetch, fs, workers or addon here).
//
// Sizes are checked in these places, each once:
//   1. core/args.js: what a problem may be on any backend (levels at most MAX_LEVELS, H*W and
//      shapes exact integers, every tensor's length against its shape).
//   2. checkSizes (here): the backend's limits, before anything is allocated: a wasm call's heap
//      block against limits.callBytes, each tensor against limits.tensorBytes.
//   3. checkHeapBlock (bindings/wasm/loader.js, from WasmStore's constructor): the block an
//      allocation asks for (the streamed forward's window store too), and malloc refusing it;
//      wasmBytesNeeded there is the block's layout, exactWasmBytes here the same in BigInt.
//   4. src/entry.c (msda__plan): the C library's own, for every caller of it: each tensor's bytes
//      within PTRDIFF_MAX and SIZE_MAX, products without overflow.
//   5. bindings/webgpu/backend.js checkPlan: a GPU device's buffer and dispatch limits.

import { WASM_MAX_BYTES, wasmBytesNeeded } from '../wasm/loader.js';
import { exactElementsOf, TENSORS } from './problem.js';

/**
 * A Backend.
 *   name: 'wasm' (the SIMD128 module), 'wasm-scalar' or 'native'.
 *   isa: the vector ISA the kernels run ('wasm-simd128', 'sse2', 'avx2', 'neon', ... 'scalar'),
 *     (MSDA_ISA naming one the CPU lacks is refused at init: MSDA_BAD_ISA).
 *   fastDtype(d): whether the kernels have fast code for value rows of msda_dtype d (core/half.js
 *     VALUE_DTYPES' numbers), read as they are: the C library's msda_fast_dtype (false where the
 *     module or addon predates it).
 *   simd: true when vector code runs.
 *   threads: the threads a call runs on unless it asks for fewer (absent: 1).
 *   memory: the WebAssembly.Memory of a heap backend, null natively.
 *   limits: { tensorBytes, callBytes }: the most bytes one tensor, and one call's (or prepared
 *     problem's) tensors together, may take; null where the machine's memory decides.
 *   allocate(desc, layout): a Store for the problem description (BigInt64Array, core/problem.js
 *     DESC) and the tensors of layout ([{ name, elements }]), checked by checkSizes first.
 * Heap backends (memory not null) also have heapInUse() (bytes malloc has handed out) and
 * resultArray(length) (a Float32Array the caller owns, for the streamed forward). A backend that
 * keeps memory between calls (native: the scratch its half inputs are widened into) has free(),
 * called when the last instance over it is disposed (core/init.js).
 */
export const BACKEND_MEMBERS = ['name', 'isa', 'fastDtype', 'simd', 'memory', 'limits', 'allocate'];
export const HEAP_BACKEND_MEMBERS = ['heapInUse', 'resultArray'];

/**
 * A Store: one problem's tensors in the backend.
 *   load(name, data, at = 0): copies data (a Float32Array, or core/half.js HalfBits, widened by C
 *     where they land) into the tensor from element at on (natively: the array itself is used).
 *   view(name): a Float32Array over the tensor (a wasm view is re-made after the memory grows).
 *   take(name): the tensor as a Float32Array the caller owns.
 *   prefault(names): the named tensors' pages touched now (prepare), not in the first call.
 *   describe(desc): a new problem description of the same length (a streamed window).
 *   run(op): 'forward' or 'backward' on the tensors; null, or { status, code, message }.
 *   free(): gives everything back; the store is not used again.
 * A heap backend's store also has takeInto(name, target, at, count, from) (the streamed forward).
 */
export const STORE_MEMBERS = ['load', 'view', 'take', 'prefault', 'describe', 'run', 'free'];
export const HEAP_STORE_MEMBERS = ['takeInto'];

// wasmBytesNeeded, exact (BigInt) where doubles would round (past 2^53 bytes): each tensor's
// elements split into whole 2^20-element blocks (already aligned) and a rest that
// wasmBytesNeeded pads as it pads any tensor.
export function exactWasmBytes(descCount, layout) {
  const BLOCK = 2n ** 20n;
  const none = wasmBytesNeeded(descCount, []);
  let bytes = BigInt(none);
  for (const { elements } of layout) {
    const rest = elements % BLOCK;
    bytes += 4n * (elements - rest) + BigInt(wasmBytesNeeded(descCount, [{ elements: Number(rest) }]) - none);
  }
  return bytes;
}

/**
 * The call's tensors (TENSORS[mode]) against the backend's limits, before anything is allocated:
 * a RangeError naming the tensor (or the call) and both sizes. Wasm: the heap block against
 * callBytes, then each tensor against tensorBytes (PTRDIFF_MAX in wasm32). Native: each tensor
 * against the longest Float32Array the runtime makes.
 */
export function checkSizes(fn, backend, problem, mode) {
  const { tensorBytes, callBytes } = backend.limits;
  const tensors = TENSORS[mode].map((name) => ({ name, elements: exactElementsOf(problem.shapes[name]) }));
  if (callBytes !== null) {
    const bytes = exactWasmBytes(problem.desc.length, tensors);
    if (bytes > BigInt(callBytes)) {
      throw new RangeError(`${fn}: this call needs ${bytes} bytes of WebAssembly memory, more than the ${callBytes} bytes a wasm32 heap can give one call (4 GiB less ${WASM_MAX_BYTES - callBytes} bytes of static data, C stack and allocator headers)`);
    }
  }
  if (tensorBytes === null) return;
  const most = tensorBytes / 4;
  const where = backend.memory ? `the ${tensorBytes} bytes (${most} elements) one tensor can span in wasm32`
    : `a Float32Array can hold here (${most} elements)`;
  for (const { name, elements } of tensors) {
    if (elements > BigInt(most)) throw new RangeError(`${fn}: ${name} needs ${4n * elements} bytes (${elements} elements), more than ${where}`);
  }
}
