// The native backend's loader: the Node addon behind the same store interface as the wasm heap
// (wasm/loader.js), so init({ backend: 'native' }) gives the same API. Node only; the public face
// is bindings/native.js. Inputs are passed
// to C without copying; outputs are fresh Float32Arrays.
//
// Where the addon comes from: the package ships it prebuilt (prebuildify's layout,
// prebuilds/<platform>-<arch>/ms-deform-attn.node, N-API so one binary serves every Node);
// a checkout of the repository also has build/native/msda.node from `make native`.

import { Buffer, constants } from 'node:buffer';
import { closeSync, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HalfBits } from '../core/half.js';
import { BAD_ISA, codedError, NATIVE_UNAVAILABLE } from '../core/errors.js';

// Paths are joined at run time (not `new URL('…', import.meta.url)`) so bundlers do not try to
// pull a .node file into a bundle.
const packageRoot = () => join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function unavailable(message, cause) {
  return codedError(`ms-deform-attn: ${message}`, NATIVE_UNAVAILABLE, cause);
}

/** Where the addon for this platform would be: the prebuild, else a `make native` build. */
export function nativeAddonPath() {
  const target = `${process.platform}-${process.arch}`;
  const prebuilt = join(packageRoot(), 'prebuilds', target, 'ms-deform-attn.node');
  if (existsSync(prebuilt)) return prebuilt;
  const built = join(packageRoot(), 'build', 'native', 'msda.node');
  if (existsSync(built)) return built;
  throw unavailable(`the native backend is not available on ${target}: this package ships a prebuilt addon for ` +
    "linux-x64 (glibc >= 2.34) only. Use the WebAssembly backend (init() or init({ backend: 'auto' }), same results), " +
    'or build the addon from a checkout of the repository with `make native` and pass ' +
    "init({ backend: 'native', addonPath: '<checkout>/build/native/msda.node' }).");
}

// The version the addon must say it is (bindings/c/addon.c's MSDA_VERSION): this package's.
const PACKAGE_VERSION = createRequire(import.meta.url)('../../package.json').version;

// dlopen maps an ELF file's segments as its headers describe them; pages past the end of a
// truncated file (an interrupted install) are mapped too, and the first touch of one kills the
// process with SIGBUS, which nothing can catch. So the headers are checked against the file's
// size first: the program header table, every segment's bytes and the section header table
// (usually the file's last bytes) must all lie within it. Returns why not, or null.
export function elfProblem(path) {
  let fd;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    return `cannot open ${path} (${e.code ?? e.message})`;
  }
  try {
    const size = fstatSync(fd).size;
    if (!fstatSync(fd).isFile()) return 'it is not a regular file';
    const read = (offset, length) => {
      const b = Buffer.alloc(length);
      return readSync(fd, b, 0, length, offset) === length ? b : null;
    };
    const ident = read(0, 16);
    if (ident === null || ident.readUInt32BE(0) !== 0x7f454c46) {
      // Not ELF: on the ELF platforms never a loadable addon; elsewhere (Mach-O, PE) the loader judges.
      return process.platform === 'darwin' || process.platform === 'win32' ? null : `it is not an ELF shared object (${size} bytes)`;
    }
    const is64 = ident[4] === 2, le = ident[5] === 1;
    if ((ident[4] !== 1 && !is64) || (ident[5] !== 1 && ident[5] !== 2)) return 'its ELF header is damaged';
    const h = read(0, is64 ? 64 : 52);
    if (h === null) return `it is truncated: ${size} bytes, shorter than an ELF header`;
    const u16 = (b, o) => (le ? b.readUInt16LE(o) : b.readUInt16BE(o));
    const u32 = (b, o) => (le ? b.readUInt32LE(o) : b.readUInt32BE(o));
    const word = (b, o) => (is64 ? Number(le ? b.readBigUInt64LE(o) : b.readBigUInt64BE(o)) : u32(b, o));
    const phoff = word(h, is64 ? 0x20 : 0x1c), shoff = word(h, is64 ? 0x28 : 0x20);
    const phentsize = u16(h, is64 ? 0x36 : 0x2a), phnum = u16(h, is64 ? 0x38 : 0x2c);
    const shentsize = u16(h, is64 ? 0x3a : 0x2e), shnum = u16(h, is64 ? 0x3c : 0x30);
    const truncated = (what, end) => `it is truncated: ${size} bytes, but its ${what} ends at byte ${end}`;
    if (phoff + phnum * phentsize > size) return truncated('program header table', phoff + phnum * phentsize);
    if (shoff + shnum * shentsize > size) return truncated('section header table', shoff + shnum * shentsize);
    const ph = read(phoff, phnum * phentsize) ?? Buffer.alloc(0);
    for (let i = 0; i < phnum; i++) {
      const at = i * phentsize;
      const offset = word(ph, at + (is64 ? 8 : 4)), filesz = word(ph, at + (is64 ? 32 : 16));
      if (offset + filesz > size) return truncated(`segment ${i}`, offset + filesz);
    }
    return null;
  } finally {
    closeSync(fd);
  }
}

/** Loads the addon (from addonPath, or the one for this platform); failures carry .code. */
export function loadNative(addonPath) {
  // Relative to the working directory, as wasmPaths; never a package name or a script: the file
  // is loaded with process.dlopen, which runs no JavaScript.
  const path = addonPath === undefined ? nativeAddonPath() : resolve(String(addonPath));
  const named = addonPath === undefined ? path : String(addonPath);
  const cannot = (why, cause) => unavailable(`cannot load the native addon ${named} on ${process.platform}-${process.arch}: ${why}. ` +
    "Use the WebAssembly backend (init() or init({ backend: 'auto' }), same results), or build the addon for this " +
    'machine from a checkout of the repository with `make native`' +
    (addonPath === undefined ? ' (or reinstall the package: its prebuilt addon may have been cut short)' : '') + '.', cause);
  const problem = elfProblem(path);
  if (problem !== null) throw cannot(problem, new Error(`${path}: ${problem}`));
  const module = { exports: {} };
  try {
    process.dlopen(module, path);
  } catch (e) {
    throw cannot(e.message, e);
  }
  const addon = module.exports;
  if (addon === null || typeof addon !== 'object' || typeof addon.forward !== 'function' || typeof addon.backward !== 'function') {
    throw cannot("it is not this package's addon (it has no forward and backward)");
  }
  if (addon.version !== PACKAGE_VERSION) {
    throw cannot(`it is the addon of version ${typeof addon.version === 'string' ? addon.version : 'unknown (from before versions were recorded)'}, ` +
      `expected ${PACKAGE_VERSION}, this package's`);
  }
  // MSDA_ISA naming no instruction set of this CPU fails every call: refused here, naming it.
  if (typeof addon.isa === 'function' && addon.isa() === null) {
    const list = typeof addon.isaList === 'function' ? addon.isaList() : null;
    const err = codedError(`MSDA_ISA is '${process.env.MSDA_ISA}', expected one of this CPU's: ${list ?? 'see msda_isa_list'} (or unset)`, BAD_ISA);
    err.isa = process.env.MSDA_ISA;
    err.isaList = list;
    throw err;
  }
  return new NativeBackend(addon);
}

class NativeBackend {
  constructor(addon) {
    this.addon = addon;
    this.name = 'native';
    // The vector ISA the kernels run, as the library's dispatch chose it (msda_isa: the widest
    // this CPU has, or MSDA_ISA's; one it lacks is refused by loadNative). An addon from before
    // the dispatch ran SSE2 on x86 (every x86-64 has it) and the scalar code elsewhere.
    this.isa = typeof addon.isa === 'function' ? addon.isa()
      : process.arch === 'x64' || process.arch === 'ia32' ? 'sse2' : 'scalar';
    this.simd = this.isa !== null && this.isa !== 'scalar';
    this.memory = null;
    // Elements of the longest typed array this Node makes (V8's limit; 2^32 on Node 20).
    this.maxElements = constants.MAX_LENGTH;
    this.limits = { tensorBytes: 4 * this.maxElements, callBytes: null };
    // Where the addon widens a call's half inputs, kept from call to call (as long as the longest
    // call's; free() lets it go): fresh memory each call would cost a page fault every 4 KiB.
    this.scratch = new Float32Array(0);
  }

  /** msda_fast_dtype(d) (core/backend.js); false for an addon from before it was exported. */
  fastDtype(d) {
    return typeof this.addon.fastDtype === 'function' && this.addon.fastDtype(d) === true;
  }

  allocate(desc, layout) {
    return new NativeStore(this, desc, layout);
  }

  // elements: how many float32 the call's widened inputs take.
  scratchFor(elements) {
    if (this.scratch.length < elements) this.scratch = new Float32Array(elements);
    return this.scratch;
  }

  free() {
    this.scratch = new Float32Array(0);
  }
}

class NativeStore {
  constructor(backend, desc, layout) {
    this.backend = backend;
    this.desc = desc;
    this.elements = new Map(layout.map(({ name, elements }) => [name, elements]));
    this.arrays = new Map();
    this.valueAsIs = false;
  }

  view(name) {
    let a = this.arrays.get(name);
    if (a === undefined) {
      a = new Float32Array(this.elements.get(name));
      this.arrays.set(name, a);
    }
    return a;
  }

  /** The outputs allocated and their pages touched now (prepare), not in the first call. */
  prefault(outputs) {
    for (const name of outputs) if (this.elements.has(name)) this.view(name).fill(0);
  }

  // Inputs are only read by C, so the caller's array is used in place; half-precision bits go to
  // C as they are, widened there into the backend's scratch (bindings/c/addon.c), but for a value
  // loaded `asIs` (core/half.js, halfRows; the description's valueDtype), whose rows the kernels
  // widen as they read them.
  load(name, data, at = 0, asIs = false) {
    this.arrays.set(name, data);
    if (name === 'value') this.valueAsIs = asIs;
  }

  take(name) {
    return this.view(name);
  }

  describe(desc) {
    this.desc = desc;
  }

  run(op) {
    // halfMask: bit i, argument i is bfloat16 bits
    let halfMask = 0, i = 0, widened = 0;
    const a = (n) => {
      const data = this.view(n);
      i++;
      if (!(data instanceof HalfBits)) return data;
      if (data.dtype === 'bfloat16') halfMask |= 1 << i;
      if (n !== 'value' || !this.valueAsIs) widened += data.bits.length;
      return data.bits;
    };
    const { addon } = this.backend;
    if (op === 'forward') {
      const args = [a('value'), a('samplingLocations'), a('attentionWeights'), a('output')];
      return addon.forward(this.desc, ...args, halfMask, this.backend.scratchFor(widened));
    }
    const args = [a('gradOutput'), a('value'), a('samplingLocations'), a('attentionWeights'),
      a('gradValue'), a('gradSamplingLocations'), a('gradAttentionWeights')];
    return addon.backward(this.desc, ...args, halfMask, this.backend.scratchFor(widened));
  }

  free() {
    this.arrays.clear();
  }
}
