// The device side of the WebGPU backend: a GPUDevice with its pipeline cache (each program's
// variant compiled once), the guards that make a lost device or a disposed instance reject what
// waits, the startup probe of the device's numerics, and one call's recording (CallEncoder): its
// compute passes (dispatch, with the program's dispatch words by name) and prefix sums (scan).

import { DISPATCH_WORDS, SCAN_BLOCK } from './kernels/problem.js';
import { FORWARD } from './kernels/forward.js';
import { SAMPLES } from './kernels/backward.js';
import { SCAN, SCAN_FLAT, SCAN_REDUCE, SCAN_TWO } from './kernels/scan.js';
import { SORT_COUNT, SORT_SCATTER, SORT_TERMS, WALK_COUNT } from './kernels/sort.js';
import { ORDER_COUNT, ORDER_WALK } from './kernels/walks.js';
import { GATHER } from './kernels/segments.js';
import { PROBE } from './kernels/probe.js';
import { NARROW, WIDEN } from './kernels/half.js';
import { codedError, WEBGPU_DEVICE_LOST } from '../core/errors.js';

// GPUBufferUsage / GPUMapMode values (the spec's; Node has no such globals unless a caller sets them).
export const MAP_READ = 0x1, COPY_SRC = 0x4, COPY_DST = 0x8, UNIFORM = 0x40, STORAGE = 0x80;
export const MAP_MODE_READ = 0x1;
export const COMPUTE = 0x4;   // GPUShaderStage.COMPUTE

/** Every program by its label. */
export const KERNELS = Object.fromEntries([FORWARD, SAMPLES, SCAN_REDUCE, SCAN, SCAN_TWO, ORDER_COUNT, ORDER_WALK, SORT_COUNT, SORT_SCATTER, SORT_TERMS, WALK_COUNT, GATHER, WIDEN, NARROW, PROBE].map((k) => [k.label, k]));

const MAX_GRID = 65535;

/** The most workgroups a dispatch may have in one dimension on a device of these limits. */
export const gridSide = (limits) => Math.min(limits.maxComputeWorkgroupsPerDimension ?? MAX_GRID, MAX_GRID);

// A program's bind group entries from its bindings by name: each one given, no other.
function bindings(prog, resources) {
  const given = Object.keys(resources);
  const unknown = given.find((name) => !prog.bindings.includes(name));
  const missing = prog.bindings.find((name) => !given.includes(name));
  if (unknown !== undefined || missing !== undefined) {
    throw new Error(`ms-deform-attn: the WebGPU ${prog.label} pass ${unknown !== undefined ? `has no binding ${unknown}` : `lacks its binding ${missing}`}`);
  }
  return prog.bindings.map((name, binding) => ({ binding, resource: resources[name] }));
}

// The uniform's program words from its dispatch words by name (kernels/problem.js program()
// `words`): each one given, no other; a word the program lacks is 0.
function dispatchWords(prog, words) {
  const given = Object.keys(words);
  const unknown = given.find((name) => !prog.words.includes(name));
  const missing = prog.words.find((name) => !given.includes(name));
  if (unknown !== undefined || missing !== undefined) {
    throw new Error(`ms-deform-attn: the WebGPU ${prog.label} pass ${unknown !== undefined ? `has no dispatch word ${unknown}` : `lacks its dispatch word ${missing}`}`);
  }
  return Array.from({ length: DISPATCH_WORDS }, (_, i) => (i < prog.words.length ? words[prog.words[i]] : 0));
}

/** A device, its pipelines, and what guards the Promises of its work. */
export class Gpu {
  static async create(device, owned, info) {
    const gpu = new Gpu(device, owned, info);
    await gpu._start();
    return gpu;
  }

  // Without awaiting (for synchronous callers such as a tfjs kernel): each pipeline made with
  // createComputePipeline by the first call that needs it (a compile error surfaces in that
  // call's error scope), the probe's answer filled in when it comes.
  static createSync(device, info) {
    const gpu = new Gpu(device, false, info);
    gpu.numerics = null;
    gpu.probe().then((n) => { gpu.numerics = n; }, () => {});
    return gpu;
  }

  constructor(device, owned, info) {
    this.device = device;
    this.owned = owned;
    this.info = info ? { vendor: info.vendor ?? '', architecture: info.architecture ?? '', device: info.device ?? '', description: info.description ?? '' } : null;
    // An adapter that is a CPU (SwiftShader, llvmpipe/lavapipe, WARP): its passes are bound by
    // arithmetic, not by memory, so work is worth more than bytes there (tensors.js halfInPlace).
    this.onCpu = !!info && (info.isFallbackAdapter === true ||
      /swiftshader|llvmpipe|lavapipe|warp/i.test(`${this.info.vendor} ${this.info.architecture} ${this.info.device} ${this.info.description}`));
    this.lost = null;
    this.closed = null;   // dispose()'s Error, which calls still pending reject with
    this.pending = new Set();
    // Pipelines by key (program() key: label and variant flags), those compiling, and the keys in
    // the order they were asked for (the instance's `compiled`).
    this.pipelines = new Map();
    this.compiling = new Map();
    this.compiled = [];
    // What calls keep between them (kept(), stage(), bindGroup()): scratch by role, free
    // readback buffers, and each dispatch number's last bind group.
    this.pool = new Map();
    this.stagings = [];
    this.bindGroups = new Map();
    const lim = device.limits;
    this.limits = {
      maxStorageBufferBindingSize: lim.maxStorageBufferBindingSize,
      maxBufferSize: lim.maxBufferSize,
      maxComputeWorkgroupsPerDimension: lim.maxComputeWorkgroupsPerDimension,
      minStorageBufferOffsetAlignment: lim.minStorageBufferOffsetAlignment,
      maxStorageBuffersPerShaderStage: lim.maxStorageBuffersPerShaderStage,
      minUniformBufferOffsetAlignment: lim.minUniformBufferOffsetAlignment,
    };
    this.lostPromise = device.lost.then((info) => {
      this.lost = info ?? { reason: 'unknown', message: '' };
      const err = this.lostError();
      for (const reject of this.pending) reject(err);
      this.pending.clear();
    });
  }

  // Calls still pending reject with `err` (dispose()), as do later waits.
  close(err) {
    this.closed = err;
    this.release();
    for (const reject of this.pending) reject(err);
    this.pending.clear();
  }

  lostError() {
    const { reason, message } = this.lost;
    return codedError(`ms-deform-attn: the WebGPU device was lost (reason: ${reason}${message ? `, ${message}` : ''}); init() again for a new one`, WEBGPU_DEVICE_LOST);
  }

  async _start() {
    await this.compile([PROBE], {});
    this.numerics = await this.probe();
  }

  // The pipelines of `programs` for `variant`, each compiled once (createComputePipelineAsync; a
  // compile in flight is shared): resolves when all are ready, rejects naming a kernel that fails
  // to compile, or when the device is lost.
  compile(programs, variant) {
    const d = this.device;
    const wait = [];
    d.pushErrorScope('validation');   // popped at once: it holds only these modules' creation
    try {
      this._compileAll(programs, variant, wait);
    } catch (e) {   // thrown, not reported: the scope popped all the same (a shared device's caller keeps its own)
      d.popErrorScope().catch(() => {});
      for (const w of wait) w.catch(() => {});
      throw e;
    }
    const scope = d.popErrorScope();
    return this.guard(Promise.all(wait).then(async () => {
      const err = await scope;
      if (err) throw new Error(`ms-deform-attn: WebGPU kernels failed to compile: ${err.message}`);
    }, (e) => { scope.catch(() => {}); throw e; }));
  }

  // prepare()'s compiles started (or joined) into `wait`.
  _compileAll(programs, variant, wait) {
    const d = this.device;
    for (const prog of programs) {
      const key = prog.key(variant);
      if (this.pipelines.has(key)) continue;
      if (!this.compiling.has(key)) {
        const label = `msda ${key}`;
        const module = d.createShaderModule({ code: prog.code(variant), label });
        this.compiled.push(key);
        this.compiling.set(key, (async () => {
          const info = module.getCompilationInfo ? await module.getCompilationInfo() : { messages: [] };
          const errors = info.messages.filter((m) => m.type === 'error');
          const failed = (detail, cause) => new Error(`ms-deform-attn: the WebGPU kernel '${label}' failed to compile here: ${detail}`, cause ? { cause } : undefined);
          if (errors.length > 0) throw failed(errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; '));
          // the WGSL is valid, the pipeline may still not be (a device limit: GPUPipelineError)
          const pipeline = await d.createComputePipelineAsync({ label, layout: 'auto', compute: { module, entryPoint: 'main' } })
            .catch((e) => { throw failed(e.message, e); });
          if (!this.pipelines.has(key)) this.pipelines.set(key, pipeline);
        })().then(() => this.compiling.delete(key), (e) => {
          this.compiling.delete(key);
          if (!this.pipelines.has(key)) this.forget(key);
          throw e;
        }));
      }
      wait.push(this.compiling.get(key));
    }
  }

  // The pipeline of `prog` for `variant`: one compile() made or, where `now` (the synchronous
  // calls), one made here with createComputePipeline, in an error scope of its own: one that
  // fails to compile is dropped (a later call compiles it again) and its error, naming the
  // kernel, goes into `checks` (the call's, as encode.js submitCall reports them).
  pipeline(prog, variant, now, checks = []) {
    const key = prog.key(variant);
    let p = this.pipelines.get(key);
    if (p !== undefined) return p;
    if (!now) throw new Error(`ms-deform-attn: the WebGPU pipeline '${key}' was dispatched before it was compiled`);
    const d = this.device, label = `msda ${key}`;
    d.pushErrorScope('validation');
    try {
      p = d.createComputePipeline({ label, layout: 'auto', compute: { module: d.createShaderModule({ code: prog.code(variant), label }), entryPoint: 'main' } });
    } catch (e) {   // thrown, not reported: the scope popped all the same (a shared device's caller keeps its own)
      d.popErrorScope().catch(() => {});
      throw e;
    }
    const made = p;
    checks.push(d.popErrorScope().then((err) => {
      if (err === null) return null;
      if (this.pipelines.get(key) === made) {
        this.pipelines.delete(key);
        if (!this.compiling.has(key)) this.forget(key);
      }
      return new Error(`the WebGPU kernel '${label}' failed to compile here: ${err.message}`);
    }, () => null));
    this.pipelines.set(key, p);
    if (!this.compiled.includes(key)) this.compiled.push(key);
    return p;
  }

  // `key` off the list of pipelines made or being made.
  forget(key) {
    const at = this.compiled.indexOf(key);
    if (at >= 0) this.compiled.splice(at, 1);
  }

  // A Promise that also rejects when the device is lost (nothing waits forever on a dead device)
  // or the instance disposed.
  guard(promise) {
    if (this.closed || this.lost) {
      promise.catch(() => {});
      return Promise.reject(this.closed ?? this.lostError());
    }
    return new Promise((resolve, reject) => {
      this.pending.add(reject);
      promise.then((v) => { this.pending.delete(reject); resolve(v); },
        async (e) => {
          this.pending.delete(reject);
          // A mapAsync aborted by a lost device may reject before device.lost resolves.
          if (!this.lost) await Promise.race([this.lostPromise, new Promise((r) => setTimeout(r, 100))]);
          reject(this.lost ? this.lostError() : e);
        });
    });
  }

  // fusedMultiplyAdd: a * b + c as written came back fused; productsRounded: as the kernels write
  // it (kernels/probe.js) it came back with the product rounded first, the CPU's bits;
  // flushesSubnormals: a subnormal input read as 0.
  async probe() {
    const io = new Float32Array([1 + 2 ** -12, 1 + 2 ** -12, -(1 + 2 ** -11), 2 ** -130, 0, 0, 0, 0, 0, 0]);
    const buf = this.buffer(io.byteLength, STORAGE | COPY_SRC | COPY_DST, 'msda probe');
    this.device.queue.writeBuffer(buf, 0, io);
    const enc = this.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    const probe = this.pipeline(PROBE, {}, true);
    pass.setPipeline(probe);
    pass.setBindGroup(0, this.device.createBindGroup({ layout: probe.getBindGroupLayout(0), entries: bindings(PROBE, { io: { buffer: buf } }) }));
    pass.dispatchWorkgroups(1);
    pass.end();
    const staging = this.buffer(io.byteLength, MAP_READ | COPY_DST, 'msda probe readback');
    enc.copyBufferToBuffer(buf, 0, staging, 0, io.byteLength);
    this.device.queue.submit([enc.finish()]);
    let out;
    try {
      await this.guard(staging.mapAsync(MAP_MODE_READ));
      out = new Float32Array(staging.getMappedRange().slice(0));
    } finally {   // also when disposed or lost before it answers
      staging.destroy();
      buf.destroy();
    }
    return {
      fusedMultiplyAdd: out[4] !== 0,
      productsRounded: out[8] === 0,
      flushesSubnormals: out[5] === 0 || out[6] === 0,
    };
  }

  buffer(size, usage, label) {
    return this.device.createBuffer({ size: Math.max(4, Math.ceil(size / 4) * 4), usage, label });
  }

  // A buffer this instance keeps for `role` between calls (grow-only: remade larger when a call
  // needs more), so that a call makes no buffer of its own; released by close(). A buffer it
  // outgrows goes to `call`'s temps: the call may have recorded work on it.
  kept(role, bytes, usage, call) {
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    const had = this.pool.get(role);
    if (had !== undefined && had.size >= size && had.usage === usage) return had;
    if (had !== undefined && call) call.temps.push(had);
    else if (had !== undefined) had.destroy();
    const buf = this.buffer(size, usage, role);
    this.pool.set(role, buf);
    return buf;
  }

  // A mappable readback buffer of at least `bytes`, not in use by another call; give it back
  // with unstage() once read.
  stage(bytes) {
    const size = Math.max(4, Math.ceil(bytes / 4) * 4);
    const at = this.stagings.findIndex((b) => b.size >= size);
    if (at >= 0) return this.stagings.splice(at, 1)[0];
    return this.buffer(size, MAP_READ | COPY_DST, 'msda readback');
  }

  unstage(buf) {
    if (this.closed || this.lost || this.stagings.length >= 4) buf.destroy();
    else this.stagings.push(buf);
  }

  // Frees what the instance keeps between calls.
  release() {
    for (const buf of this.pool.values()) buf.destroy();
    for (const buf of this.stagings) buf.destroy();
    this.pool.clear();
    this.stagings = [];
    this.bindGroups.clear();
  }

  // The bind group of a call's dispatch number `index`: the one the last call made there when it
  // had the same pipeline and resources (a repeated problem), else a new one kept in its place.
  bindGroup(index, pipeline, entries) {
    const had = this.bindGroups.get(index);
    const same = (a, b) => a.buffer === b.buffer && (a.offset ?? 0) === (b.offset ?? 0) && a.size === b.size;
    if (had !== undefined && had.pipeline === pipeline && had.entries.length === entries.length
      && had.entries.every((e, i) => same(e.resource, entries[i].resource))) return had.group;
    const group = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    this.bindGroups.set(index, { pipeline, entries, group });
    return group;
  }

  // The workgroup grid for `groups` workgroups: up to the per-dimension limit in x, the rest in y.
  grid(groups) {
    const max = gridSide(this.limits);
    const x = Math.max(1, Math.min(groups, max));
    const y = Math.ceil(groups / x);
    if (y > max) throw new RangeError(`ms-deform-attn: ${groups} workgroups exceed this device's grid (${max} x ${max})`);
    return [x, y];
  }

  // One compute pass of program `name` into `call` (a CallEncoder) over n invocations (n values
  // for the scan; the program's perGroup of them a workgroup), bindings and dispatch words by
  // name. The pipeline is the variant's of the call.
  dispatch(call, name, n, entries, words = {}) {
    const prog = KERNELS[name];
    const last = dispatchWords(prog, words);
    if (n === 0) return;
    const groups = Math.ceil(n / prog.perGroup);
    const [x, y] = this.grid(groups);
    const p = this.pipeline(prog, call.variant, call.now, call.checks);
    const slot = call.uniform([n, prog.perRow === 'workgroups' ? x : x * prog.perGroup, ...last]);
    const bg = this.bindGroup(slot.index, p, bindings(prog, { ...entries, dispatch: slot.resource }));
    // Benchmarks' GPU time: timestamps around every pass while a profile is set (bench-webgpu).
    const prof = this.profile;
    const timestampWrites = prof && prof.next + 2 <= prof.capacity
      ? { querySet: prof.querySet, beginningOfPassWriteIndex: prof.next++, endOfPassWriteIndex: prof.next++ } : undefined;
    const pass = call.encoder.beginComputePass(timestampWrites ? { label: `msda ${name}`, timestampWrites } : { label: `msda ${name}` });
    pass.setPipeline(p);
    pass.setBindGroup(0, bg);
    pass.dispatchWorkgroups(x, y);
    pass.end();
  }
}

/**
 * One call's recording, made inside the call's error scopes: its GPUCommandEncoder, the variant
 * its passes' pipelines are, whether a pipeline not compiled yet is made now (the synchronous
 * calls), the buffers it outgrew (`temps`, destroyed once submitted: the submitted work keeps
 * them), its dispatch uniforms (one kept buffer, a slot per dispatch, written once by finish())
 * and the errors its error scopes cannot name (`checks`: Promises of an Error or null).
 */
export class CallEncoder {
  constructor(gpu, fn, variant, now) {
    this.gpu = gpu;
    this.variant = variant;
    this.now = now;
    this.temps = [];
    this.checks = [];
    this.words = [];
    this.slotBytes = Math.max(4 * (2 + DISPATCH_WORDS), gpu.limits.minUniformBufferOffsetAlignment ?? 256);
    this.uniforms = null;
    this.encoder = gpu.device.createCommandEncoder({ label: `msda ${fn}` });
  }

  // A buffer the instance keeps between calls for `label` (gpu.kept).
  scratch(bytes, usage, label) {
    return this.gpu.kept(label, bytes, usage, this);
  }

  // The next dispatch's uniform slot for `words` (4 u32): its index and its binding.
  uniform(words) {
    const index = this.words.length;
    const need = (index + 1) * this.slotBytes;
    if (this.uniforms === null || this.uniforms.size < need) {
      // room for the slots of a call this long twice over: kept() grows it rarely
      if (this.uniforms !== null) this.flush();
      this.uniforms = this.gpu.kept('msda dispatch', 2 * need, UNIFORM | COPY_DST, this);
      this.first = index;
    }
    this.words.push(words);
    return { index, resource: { buffer: this.uniforms, offset: index * this.slotBytes, size: 4 * (2 + DISPATCH_WORDS) } };
  }

  // The slots since the uniform buffer was last (re)made, written into it.
  flush() {
    const per = this.slotBytes / 4, slots = this.words.length - this.first;
    if (slots <= 0) return;
    const data = new Uint32Array(slots * per);
    for (let i = 0; i < slots; i++) data.set(this.words[this.first + i], i * per);
    this.gpu.device.queue.writeBuffer(this.uniforms, this.first * this.slotBytes, data);
    this.first = this.words.length;
  }

  // The command buffer, its uniforms written first.
  finish() {
    if (this.uniforms !== null) this.flush();
    return this.encoder.finish();
  }

  dispatch(name, n, entries, words) {
    this.gpu.dispatch(this, name, n, entries, words);
  }

  // Exclusive prefix sums of src[0 .. n) into dst (both u32 buffers; kernels/scan.js): two
  // dispatches up to SCAN_FLAT blocks, the blocks' totals scanned first beyond; src left zero
  // where `clear`. `totals` (a binding: the blocks' totals, counted by the pass that wrote src)
  // saves the first dispatch; the caller zeroes it after. src may be a binding too.
  scan(src, dst, n, clear = false, totals = null, level = 0) {
    const blocks = Math.ceil(n / SCAN_BLOCK);
    if (src.buffer === undefined) src = { buffer: src };
    let sums = totals ?? { buffer: this.scratch(4 * blocks, STORAGE | COPY_DST, `msda scan sums ${level}`) }, base = 0;
    if (blocks > 1) {
      if (totals === null) this.dispatch('scanReduce', blocks, { src, sums }, { count: n });
      base = 1;
      if (blocks > SCAN_FLAT) {
        const scanned = this.scratch(4 * blocks, STORAGE | COPY_DST, `msda scan offsets ${level}`);
        this.scan(sums, scanned, blocks, false, null, level + 1);
        sums = { buffer: scanned };
        base = 2;
      }
    }
    this.dispatch('scan', blocks, { src, dst: { buffer: dst }, sums }, { count: n, clear: clear ? 1 : 0, base });
  }

  // Two prefix sums at once, as scan() makes each, src and src2 left zero where `clear`: one
  // dispatch where each has at most SCAN_FLAT blocks and its totals (bindings), else two scans.
  scanTwo(src, dst, n, totals, src2, dst2, n2, totals2, clear = false) {
    if (Math.ceil(n / SCAN_BLOCK) > SCAN_FLAT || Math.ceil(n2 / SCAN_BLOCK) > SCAN_FLAT) {
      this.scan(src, dst, n, clear, totals);
      this.scan(src2, dst2, n2, clear, totals2);
      return;
    }
    this.dispatch('scanTwo', Math.ceil(n / SCAN_BLOCK) + Math.ceil(n2 / SCAN_BLOCK), {
      src: { buffer: src }, dst: { buffer: dst }, sums: totals, src2: { buffer: src2 }, dst2: { buffer: dst2 }, sums2: totals2,
    }, { count: n, clear: clear ? 1 : 0, count2: n2 });
  }

  destroyScratch() {
    for (const t of this.temps) t.destroy();
  }
}
