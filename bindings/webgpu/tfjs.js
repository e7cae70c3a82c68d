// The tfjs op (bindings/tfjs/op.js) on tfjs-backend-webgpu: the kernels run on tfjs's own GPUDevice,
// between its ops, with no copy through the CPU: inputs come as GPU buffers (tensor.dataToGPU(), a
// copy on the GPU that tfjs submits with everything queued before it), results go back as
// tensors made from our buffers (tf.tensor({ buffer }), which tfjs copies on the GPU; ours are
// destroyed once that copy is submitted). Synchronous, as tfjs kernels are: the GPU queue keeps
// the order.

import { MsdaWebGPU } from './backend.js';

/** tfjs-backend-webgpu (or a backend like it): one with a GPUDevice and WebGPU programs. */
export function isTfjsWebGPU(backend) {
  return typeof backend?.runWebGPUProgram === 'function' && typeof backend.device?.createBuffer === 'function';
}

// One instance per tfjs device, made on first use.
const onDevice = new WeakMap();

/** The instance the op uses on this tfjs backend: `msda` when it runs on tfjs's device, else one of its own there. */
export function instanceFor(backend, msda) {
  if (msda instanceof MsdaWebGPU && !msda.disposed && msda.device === backend.device) return msda;
  let m = onDevice.get(backend.device);
  if (m === undefined || m.disposed) onDevice.set(backend.device, (m = MsdaWebGPU.onDeviceSync(backend.device)));
  return m;
}

/** What run() in bindings/tfjs/op.js does for a webgpu instance or on tfjs-backend-webgpu. */
export function runOnTfjsWebGPU(tf, msda, mode, options, inputs, outputs) {
  const backend = tf.backend();
  if (!isTfjsWebGPU(backend)) {
    // tfjs's own name for its backend: a class name is minified away in a production build
    throw new Error(`msDeformAttn: the instance given to setMsda runs on WebGPU, for tfjs-backend-webgpu; tfjs runs on '${tf.getBackend()}' here: setMsda(await init()) for the CPU kernels`);
  }
  const m = instanceFor(backend, msda);
  const refs = [];
  try {
    const args = { ...options };
    for (const [name, t] of Object.entries(inputs)) {
      // a tensor whose values tfjs still holds on the CPU goes up first, as any of its kernels would
      if (typeof backend.uploadToGPU === 'function') backend.uploadToGPU(t.dataId);
      const { buffer, tensorRef } = t.dataToGPU();
      refs.push(tensorRef);
      args[name] = { buffer, shape: t.shape };
    }
    const result = mode === 'forward' ? { output: m.dispatchForward(args) } : m.dispatchBackward(args);
    return outputs.map((name) => {
      const { buffer, shape } = result[name];
      const t = tf.tensor({ buffer }, shape, 'float32');
      buffer.destroy();
      return t;
    });
  } finally {
    for (const r of refs) r.dispose();
  }
}
