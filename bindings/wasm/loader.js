// Instantiates and wraps the WebAssembly module (the entries, browser.js and node.js, say where
// its file is and how to read it); everything that touches the wasm heap lives in this file.

// The 31-byte module wasm-feature-detect uses: it validates only where SIMD128 is supported.
const SIMD_PROBE = new Uint8Array([
  0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
]);

/** True when this runtime can run the SIMD128 module. */
export function simdSupported() {
  try {
    return WebAssembly.validate(SIMD_PROBE);
  } catch {
    return false;
  }
}

// wasm32 addresses 4 GiB at most (MAXIMUM_MEMORY=4GB in mk/wasm.mk).
export const WASM_MAX_BYTES = 2 ** 32;

// A wasm store's heap block: the problem description, then each tensor, each on a 64-byte cache
// line: a 128-byte row (C = 32) then spans 2 lines, not 3 (wasm SIMD backward ~10% faster on the
// encoder); ALIGN spare bytes let them start on a line wherever malloc puts the block.
export const ALIGN = 64;
export const alignUp = (n) => Math.ceil(n / ALIGN) * ALIGN;

/** Bytes a wasm store for this layout takes. */
export function wasmBytesNeeded(descCount, layout) {
  let bytes = ALIGN + alignUp(descCount * 8);
  for (const { elements } of layout) bytes += alignUp(elements * 4);
  return bytes;
}

/** A wasm store's block of `bytes` (wasmBytesNeeded) against the heap, before malloc and after it (block 0: refused). */
export function checkHeapBlock(backend, bytes, block = undefined) {
  const most = backend.limits.callBytes;
  if (block === undefined) {
    if (bytes > most) {
      throw new RangeError(`ms-deform-attn: this problem needs ${bytes} bytes of WebAssembly memory, more than the ${most} bytes a wasm32 heap can give one call`);
    }
    return;
  }
  if (block === 0) {
    throw new RangeError(`ms-deform-attn: could not allocate ${bytes} bytes of WebAssembly memory: ${backend.heapInUse()} bytes are in use (prepared problems not yet disposed) and a wasm32 heap gives at most ${most} bytes in all`);
  }
}

// One tensor spans at most PTRDIFF_MAX (2^31 - 1) bytes in wasm32: the C library refuses more.
export const WASM_MAX_TENSOR_ELEMENTS = Math.floor((2 ** 31 - 1) / 4);
// Kept free below 4 GiB for the allocator's own headers (72 bytes in these builds).
const ALLOCATOR_SLACK = 4096;

/**
 * Instantiates `source`, a fetch() Response (compiled while it streams when the server sent
 * application/wasm) or the module's bytes.
 */
export async function instantiateSource(source, imports) {
  if (!isResponse(source)) return WebAssembly.instantiate(source, imports);
  if (typeof WebAssembly.instantiateStreaming === 'function') {
    try {
      return await WebAssembly.instantiateStreaming(source.clone(), imports);
    } catch {
      // Served without `application/wasm` (or streaming unavailable): compile from the bytes.
    }
  }
  return WebAssembly.instantiate(await source.arrayBuffer(), imports);
}

/** Compiles `source` (a Response or bytes) without instantiating it. */
export async function compileSource(source) {
  if (!isResponse(source)) return WebAssembly.compile(source);
  if (typeof WebAssembly.compileStreaming === 'function') {
    try {
      return await WebAssembly.compileStreaming(source.clone());
    } catch {
      // Served without `application/wasm`: compile from the bytes.
    }
  }
  return WebAssembly.compile(await source.arrayBuffer());
}

const isResponse = (x) => typeof Response !== 'undefined' && x instanceof Response;

/** fetch() that names the URL and the HTTP status when the file is not there. */
export async function fetchChecked(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (e) {
    throw new Error(`ms-deform-attn: fetching ${url} failed: ${e && e.message ? e.message : e} (init's wasmPaths says where the package's files are served)`, { cause: e });
  }
  if (!response.ok) {
    throw new Error(`ms-deform-attn: fetching ${url} failed with HTTP ${response.status} (init's wasmPaths says where the package's files are served)`);
  }
  return response;
}

/**
 * Instantiates the module: `module` (a WebAssembly.Module) or `wasmBinary` (bytes) when given,
 * otherwise what `source()` gives (the entry's platform reads or fetches the file). Returns a
 * WasmBackend. init (core/init.js) has checked `module` and `wasmBinary`.
 */
export async function loadWasm({ wasmBinary, module, source }) {
  const imports = { env: { emscripten_notify_memory_growth() {} } };
  let instance;
  if (module !== undefined) {
    instance = await WebAssembly.instantiate(module, imports);
  } else if (wasmBinary !== undefined) {
    ({ instance } = await WebAssembly.instantiate(wasmBinary, imports));
  } else {
    ({ instance } = await instantiateSource(await source(), imports));
  }
  instance.exports._initialize();
  return new WasmBackend(instance);
}

/** loadWasm on this thread, synchronously, from the module's bytes (Node; browsers refuse to
 *  compile a module this size synchronously on their main thread). */
export function loadWasmSync(bytes) {
  const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), { env: { emscripten_notify_memory_growth() {} } });
  instance.exports._initialize();
  return new WasmBackend(instance);
}

const textDecoder = new TextDecoder();

/** The heap-facing half of the API: allocation, views, and the calls into C. */
export class WasmBackend {
  constructor(instance) {
    this.exports = instance.exports;
    this.memory = instance.exports.memory;
    this.simd = instance.exports.msda_wasm_simd() === 1;
    this.name = this.simd ? 'wasm' : 'wasm-scalar';
    this.isa = this.simd ? 'wasm-simd128' : 'scalar';
    // Below the heap: static data and the C stack (a module from an older build: assume 16 MiB).
    const heapBase = typeof this.exports.msda_wasm_heap_base === 'function' ? this.exports.msda_wasm_heap_base() >>> 0 : 2 ** 24;
    /** Most bytes one call (or one prepared problem) can have in this heap, with nothing else in it. */
    this.maxCallBytes = WASM_MAX_BYTES - heapBase - ALLOCATOR_SLACK;
    /** Most elements one tensor can have. */
    this.maxTensorElements = WASM_MAX_TENSOR_ELEMENTS;
    this.limits = { tensorBytes: 4 * this.maxTensorElements, callBytes: this.maxCallBytes };
  }

  /** msda_fast_dtype(d) (core/backend.js); false for a module from before it was exported. */
  fastDtype(d) {
    const fast = this.exports.msda_wasm_fast_dtype;
    return typeof fast === 'function' && fast(d) === 1;
  }

  /** Bytes the WebAssembly memory currently spans. */
  memoryBytes() {
    return this.memory.buffer.byteLength;
  }

  /** Bytes malloc has handed out and not had back. */
  heapInUse() {
    return this.exports.msda_wasm_heap_in_use() >>> 0;
  }

  cString(ptr) {
    const bytes = new Uint8Array(this.memory.buffer, ptr >>> 0);
    const end = bytes.indexOf(0);
    // slice, not subarray: TextDecoder refuses views of a SharedArrayBuffer (threads.js).
    return textDecoder.decode(bytes.slice(0, end < 0 ? 0 : end));
  }

  /** A result array of `length` elements that the caller owns, every element to be written by us. */
  resultArray(length) {
    return this.outputArray === undefined ? new Float32Array(length) : this.outputArray(length);
  }

  /**
   * One heap block holding the int64 problem description and every tensor of `layout`
   * (an array of { name, elements }), checked by checkSizes (core/backend.js) first.
   */
  allocate(desc, layout) {
    return new WasmStore(this, desc, layout);
  }
}

class WasmStore {
  constructor(backend, desc, layout) {
    this.backend = backend;
    this.bytes = wasmBytesNeeded(desc.length, layout);
    checkHeapBlock(backend, this.bytes);
    const block = backend.exports.malloc(this.bytes) >>> 0;
    checkHeapBlock(backend, this.bytes, block);
    if (block + this.bytes > backend.memoryBytes()) {
      // Never a block the memory does not hold (mk/wasm.mk fixes emmalloc's fit test).
      throw new Error(`ms-deform-attn: malloc(${this.bytes}) returned ${block}, past the end of the ${backend.memoryBytes()}-byte memory`);
    }
    const base = alignUp(block);
    this.block = block;
    this.base = base;
    this.descCount = desc.length;
    new BigInt64Array(backend.memory.buffer, base, desc.length).set(desc);
    this.ptr = new Map();
    this.elements = new Map();
    let offset = base + alignUp(desc.length * 8);
    for (const { name, elements } of layout) {
      this.ptr.set(name, offset);
      this.elements.set(name, elements);
      offset += alignUp(elements * 4);
    }
    this.views = new Map();
  }

  /** A Float32Array over the tensor's heap bytes, re-created whenever memory has grown. */
  view(name) {
    const buffer = this.backend.memory.buffer;
    let v = this.views.get(name);
    if (v === undefined || v.buffer !== buffer) {
      v = new Float32Array(buffer, this.ptr.get(name), this.elements.get(name));
      this.views.set(name, v);
    }
    return v;
  }

  /** The outputs' pages touched now (prepare), not in the first call. */
  prefault(outputs) {
    for (const name of outputs) if (this.ptr.has(name)) this.view(name).fill(0);
  }

  /**
   * Copies `data` (a Float32Array, or HalfBits widened in C) into the tensor, from element `at` on.
   * `asIs` (value only, at 0): HalfBits stay half-precision bits, which the kernels widen as they
   * read them (core/half.js, halfRows; the problem description's valueDtype says so).
   */
  load(name, data, at = 0, asIs = false) {
    if (ArrayBuffer.isView(data)) {   // else HalfBits (core/half.js): { bits, dtype }
      this.view(name).set(data, at);
      return;
    }
    const n = data.length, dst = this.ptr.get(name) + 4 * at;
    if (asIs && name === 'value' && at === 0) {
      new Uint16Array(this.backend.memory.buffer, dst, n).set(data.bits);
      return;
    }
    // The bits go in the upper half of their elements' bytes, widened in place (msda_widen_half).
    const src = dst + 2 * n;
    new Uint16Array(this.backend.memory.buffer, src, n).set(data.bits);
    this.backend.exports.msda_wasm_widen_half(src, dst, n, data.dtype === 'bfloat16' ? 1 : 0);
  }

  /** Rewrites the problem description (same length): a window of a streamed forward. */
  describe(desc) {
    new BigInt64Array(this.backend.memory.buffer, this.base, this.descCount).set(desc);
  }

  // A result array of its own: the entry's outputArray where it has one (Node: no zero fill, the
  // copy overwrites every element at once; ~2x faster than slice for the encoder's outputs).
  take(name) {
    const view = this.view(name);
    const make = this.backend.outputArray;
    if (make === undefined) return view.slice();
    const out = make(view.length);
    out.set(view);
    return out;
  }

  /** Copies the tensor's elements [from, from + count) into `target` from element `at` on. */
  takeInto(name, target, at, count, from = 0) {
    target.set(this.view(name).subarray(from, from + count), at);
  }

  /** Calls into C; null on success, else { status, code, message }. */
  run(op) {
    const e = this.backend.exports;
    const p = (n) => this.ptr.get(n);
    // A trap unwinds past the C functions that would have put the stack pointer back: restore
    // it here, or every trap would leak C stack until even tiny calls overflow it.
    const stack = e.stackSave();
    let status;
    try {
      status = op === 'forward'
        ? e.msda_wasm_forward(this.base, this.descCount, p('value'), p('samplingLocations'),
          p('attentionWeights'), p('output'))
        : e.msda_wasm_backward(this.base, this.descCount, p('gradOutput'), p('value'), p('samplingLocations'),
          p('attentionWeights'), p('gradValue'), p('gradSamplingLocations'), p('gradAttentionWeights'));
    } finally {
      e.stackRestore(stack);
    }
    if (status === 0) return null;
    return {
      status,
      code: this.backend.cString(e.msda_wasm_status_name(status)),
      // The threads' pool says which worker failed and how (threads.js).
      message: this.backend.cString(e.msda_wasm_error_message()) + (this.backend.pool?.failure ? `: ${this.backend.pool.failure}` : ''),
    };
  }

  free() {
    if (this.base !== 0) this.backend.exports.free(this.block);
    this.base = 0;
    this.views.clear();
  }
}
