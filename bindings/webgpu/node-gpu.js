// Node's WebGPU: Dawn, from the optional 'webgpu' package (prebuilt dawn.node), loaded only when
// init({ backend: 'webgpu' }) is given neither `gpu` nor `device`.

/** A navigator.gpu-like object from Dawn; `unavailable(message, cause)` makes init's Error. */
export async function nodeGpu(unavailable) {
  let mod;
  try {
    mod = await import('webgpu');
  } catch (e) {
    throw unavailable(`Node has no navigator.gpu and the optional dependency 'webgpu' (Dawn for Node) did not load (${e.message}); npm install webgpu, or pass init({ backend: 'webgpu', gpu }) or { device }`, e);
  }
  try {
    return mod.create([]);
  } catch (e) {
    throw unavailable(`the 'webgpu' package failed to start Dawn: ${e.message}`, e);
  }
}
