// Tensors in and out of the WebGPU backend. In: GPU tensors { buffer: GPUBuffer, shape,
// byteOffset?, dtype? }, read once by the core's reader (gpuReader), bound in place or copied,
// and CPU ones uploaded; float16 and bfloat16 ones (2 bytes an element) are bound as their halves,
// which the passes widen as they read them (halfInPlace; one that starts where no binding can is
// widened on the GPU first: kernels/half.js). Out: results as GPU tensors, or read back into CPU ones.

import { typedArrayBuffer, typedArrayByteOffset, typedArrayLength } from '../core/typed.js';
import { describe } from '../core/errors.js';
import { readDtype } from '../core/args.js';
import { HalfBits } from '../core/half.js';
import { COMPUTE, COPY_DST, COPY_SRC, STORAGE } from './gpu.js';

export class GpuTensor {
  constructor(buffer, byteOffset, size, usage, dtype) {
    this.buffer = buffer;
    this.byteOffset = byteOffset;
    this.size = size;
    this.usage = usage;
    this.dtype = dtype;
    this.elementBytes = dtype === 'float32' ? 4 : 2;
  }
}

export const ceil4 = (n) => Math.ceil(n / 4) * 4;
export const product = (shape) => shape.reduce((a, b) => a * b, 1);

export const gpuReader = {
  read(fn, name, t) {
    const buffer = t.buffer;
    const given = t.byteOffset;   // read once: a getter answers one value
    const byteOffset = given === undefined ? 0 : given;
    const dtype = readDtype(fn, name, t.dtype) ?? 'float32';
    if (buffer === null || typeof buffer !== 'object' || typeof buffer.size !== 'number' || typeof buffer.usage !== 'number') {
      throw new TypeError(`${fn}: ${name}.buffer is ${describe(buffer)}, expected a GPUBuffer (or give ${name}.data, a Float32Array)`);
    }
    const tensor = new GpuTensor(buffer, byteOffset, buffer.size, buffer.usage, dtype);
    const step = tensor.elementBytes;
    if (typeof byteOffset !== 'number' || !Number.isSafeInteger(byteOffset) || byteOffset < 0 || byteOffset % step !== 0) {
      throw new RangeError(`${fn}: ${name}.byteOffset is ${describe(byteOffset)}, expected a non-negative multiple of ${step}${step === 2 ? ` (the bytes of a ${dtype})` : ''}`);
    }
    if ((tensor.usage & STORAGE) === 0) {
      throw new TypeError(`${fn}: ${name}.buffer has usage ${tensor.usage}, expected one with GPUBufferUsage.STORAGE (0x80)`);
    }
    return tensor;
  },
  owns: (data) => data instanceof GpuTensor,
  check(fn, name, t, count) {
    const bytes = t.elementBytes * count, end = t.byteOffset + bytes;
    // Halves are read in the 4-byte words WebGPU binds: the last one whole.
    const need = t.elementBytes === 4 ? end : ceil4(end);
    if (need > t.size) {
      const words = need > end ? ` (${need} read in 4-byte words, as WebGPU binds buffers)` : '';
      const hint = t.elementBytes === 4 && t.byteOffset + 2 * count <= t.size ? ` (a float16 or bfloat16 tensor? say so with ${name}.dtype)` : '';
      throw new RangeError(`${fn}: ${name} needs ${bytes} bytes (${count} ${t.dtype}) from byteOffset ${t.byteOffset}, ${end} bytes in all${words}, but its GPUBuffer has ${t.size} bytes${hint}`);
    }
    t.count = count;
    t.bytes = bytes;
  },
};

// The CPU inputs as they are now (a call that waits for its pipelines to compile uploads them
// after the wait): copies in place of the caller's arrays.
export function snapshotInputs(inputs) {
  for (const [name, data] of Object.entries(inputs)) {
    if (data instanceof GpuTensor) continue;
    if (data instanceof HalfBits) {
      const bits = new Uint16Array(data.length);
      bits.set(data.bits);
      inputs[name] = new HalfBits(bits, data.dtype);
      continue;
    }
    inputs[name] = new Float32Array(typedArrayLength(data));
    inputs[name].set(data);
  }
}

// A GPU tensor's buffer bound alone first, in its own error scope, so that what WebGPU says of a
// buffer that is not this device's names the argument: an object that is no GPUBuffer throws
// here; a buffer of another GPUDevice fails validation (the Promise of that error, or null).
function checkOwnBuffer(gpu, fn, name, data) {
  const d = gpu.device;
  gpu.ownLayout ??= d.createBindGroupLayout({ label: 'msda own buffer', entries: [{ binding: 0, visibility: COMPUTE, buffer: { type: 'read-only-storage' } }] });
  d.pushErrorScope('validation');
  try {
    d.createBindGroup({ layout: gpu.ownLayout, entries: [{ binding: 0, resource: { buffer: data.buffer, offset: 0, size: 4 } }] });
  } catch (e) {
    d.popErrorScope().catch(() => {});
    throw new TypeError(`${fn}: ${name}.buffer is ${describe(data.buffer)}, expected a GPUBuffer (WebGPU: ${e.message})`);
  }
  return d.popErrorScope().then((err) => (err
    ? new TypeError(`${fn}: ${name}.buffer belongs to another GPUDevice, expected a buffer of this instance's device (instance.device); copy it over or init({ backend: 'webgpu', device }) on its device`)
    : null), () => null);
}

/**
 * Whether input `name`, `data`, is half precision and bound as its halves, which the passes widen
 * as they read them (kernels/half.js halfInputs): a CPU one (uploaded), or a GPU one at an offset a
 * binding can start at (its first half the binding's first; one past it is widened first). But a
 * float16 grad_output is widened first: the gather reads each of its elements once per corner
 * record that lands on a pixel (16 times an element on DETR's encoder), and the float16 rule's
 * dozen operations a read cost more than one pass over it (docs/webgpu.md); bfloat16's is a shift.
 */
export function halfInPlace(gpu, name, data) {
  if (name === 'gradOutput' && data.dtype === 'float16') return false;
  // The value is read once a corner visit, tens to hundreds of times an element; on an adapter
  // that is a CPU each float16 read is the rule's dozen integer operations, so there it is
  // widened once (SwiftShader, encoder/8 and decoder/8 forward: 1.34-1.54x float32 read in place).
  if (name === 'value' && data.dtype === 'float16' && gpu.onCpu) return false;
  if (data instanceof HalfBits) return true;
  return data instanceof GpuTensor && data.elementBytes === 2 && data.byteOffset % (gpu.limits.minStorageBufferOffsetAlignment ?? 256) === 0;
}

// Half-precision bits (from `src`, the words of a binding, the first at half `firstHalf`)
// widened into a float32 scratch buffer: the binding the passes read.
function widen(call, name, src, firstHalf, count, dtype) {
  const wide = call.scratch(4 * count, STORAGE, `msda ${name} widened`);
  call.dispatch('widen', count, { src, dst: { buffer: wide } }, { first_half: firstHalf, is_bfloat16: dtype === 'bfloat16' ? 1 : 0 });
  return { buffer: wide, size: 4 * count };
}

/**
 * An input as a binding of `call` (a CallEncoder): a GPU tensor in place (or copied when its
 * offset is not aligned for a binding; halves then widened from the aligned words around them),
 * a CPU one uploaded (halves as their bits).
 */
export function bindInput(call, fn, name, data) {
  const gpu = call.gpu;
  if (data instanceof GpuTensor) {
    call.checks.push(checkOwnBuffer(gpu, fn, name, data));
    const align = gpu.limits.minStorageBufferOffsetAlignment ?? 256;
    if (halfInPlace(gpu, name, data)) return { buffer: data.buffer, offset: data.byteOffset, size: ceil4(data.bytes) };
    if (data.elementBytes === 2) {
      const at = data.byteOffset - data.byteOffset % align;
      const src = { buffer: data.buffer, offset: at, size: ceil4(data.byteOffset + data.bytes) - at };
      return widen(call, name, src, (data.byteOffset - at) / 2, data.count, data.dtype);
    }
    if (data.byteOffset % align === 0) return { buffer: data.buffer, offset: data.byteOffset, size: data.bytes };
    if ((data.usage & COPY_SRC) === 0) {
      throw new RangeError(`${fn}: ${name}.byteOffset ${data.byteOffset} is not a multiple of this device's minStorageBufferOffsetAlignment (${align}), and its buffer lacks GPUBufferUsage.COPY_SRC to copy it from`);
    }
    const copy = call.scratch(data.bytes, STORAGE | COPY_DST, `msda ${name}`);
    call.encoder.copyBufferToBuffer(data.buffer, data.byteOffset, copy, 0, data.bytes);
    return { buffer: copy, size: data.bytes };
  }
  if (data instanceof HalfBits) {
    // whole words: an odd count's last half padded (a copy, as for a SharedArrayBuffer's view)
    const n = data.length, bytes = ceil4(2 * n);
    const buf = call.scratch(bytes, STORAGE | COPY_DST, `msda ${name}`);
    const backing = typedArrayBuffer(data.bits);
    if (bytes !== 2 * n || (typeof SharedArrayBuffer !== 'undefined' && backing instanceof SharedArrayBuffer)) {
      const words = new Uint16Array(bytes / 2);
      words.set(data.bits);
      gpu.device.queue.writeBuffer(buf, 0, words);
    } else {
      gpu.device.queue.writeBuffer(buf, 0, backing, typedArrayByteOffset(data.bits), bytes);
    }
    return halfInPlace(gpu, name, data) ? { buffer: buf, size: bytes } : widen(call, name, { buffer: buf }, 0, n, data.dtype);
  }
  // The intrinsics, not the array's own (redefinable) properties; a SharedArrayBuffer's view is
  // copied first (Dawn for Node refuses to write from one).
  const bytes = 4 * typedArrayLength(data);
  const buf = call.scratch(bytes, STORAGE | COPY_DST, `msda ${name}`);
  const backing = typedArrayBuffer(data);
  if (typeof SharedArrayBuffer !== 'undefined' && backing instanceof SharedArrayBuffer) {
    gpu.device.queue.writeBuffer(buf, 0, new Float32Array(data));
  } else {
    gpu.device.queue.writeBuffer(buf, 0, backing, typedArrayByteOffset(data), bytes);
  }
  return { buffer: buf, size: bytes };
}

/** A result on the GPU: { buffer, shape }, with its dtype when half. */
export function gpuResult(problem, name, buffer, dtype) {
  const t = { buffer, shape: problem.shapes[name].slice() };
  if (dtype !== 'float32') t.dtype = dtype;
  return t;
}

/** The results `names` as CPU tensors, from `all` (a staging buffer's mapped range, result i at byte at[i]). */
export function cpuResults(problem, names, all, at, dtype) {
  const result = {};
  names.forEach((name, i) => {
    const shape = problem.shapes[name].slice(), n = product(shape);
    // a half result's buffer ends in a whole word: its elements alone
    result[name] = dtype === 'float32'
      ? { data: new Float32Array(all.slice(at[i], at[i] + 4 * n)), shape }
      : { data: new Uint16Array(all.slice(at[i], at[i] + 2 * n)), shape, dtype };
  });
  return result;
}
