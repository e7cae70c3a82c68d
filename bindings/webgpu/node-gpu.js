// Node's WebGPU: Dawn, from the 'webgpu' package (an optional peer: `npm install webgpu`), loaded
// only when init({ backend: 'webgpu' }) is given neither `gpu` nor `device`.

// One Dawn instance per process, as a browser has one navigator.gpu: every init shares it (each
// gets a device of its own). Several instances in one process have crashed Dawn on SwiftShader.
let dawn = null;

/** A navigator.gpu-like object from Dawn; `unavailable(message, cause)` makes init's Error. */
export async function nodeGpu(unavailable) {
  if (dawn !== null) return dawn;
  let mod;
  try {
    mod = await import('webgpu');
  } catch (e) {
    throw unavailable(`Node has no navigator.gpu and the 'webgpu' package (Dawn for Node) did not load (${e.message}): npm install webgpu, or pass init({ backend: 'webgpu', gpu }) or { device }`, e);
  }
  try {
    dawn = mod.create([]);
    return dawn;
  } catch (e) {
    throw unavailable(`the 'webgpu' package failed to start Dawn: ${e.message}`, e);
  }
}

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/**
 * Why Dawn found no adapter, as far as Node can tell: on Linux it runs on Vulkan, so either the
 * Vulkan loader does not load (dlopen's own words) or it found no driver (VK_ICD_FILENAMES, where
 * set, names the only ones it looks at). `dlopen(name)` throws what process.dlopen throws.
 */
export function noAdapterHint({ platform = process.platform, env = process.env, dlopen = (name) => process.dlopen({ exports: {} }, name) } = {}) {
  if (platform !== 'linux') return ' (Dawn found no adapter: check that this machine\'s GPU driver is installed)';
  try {
    dlopen('libvulkan.so.1');
  } catch (e) {
    // Loaded, but not a Node addon: the loader is there.
    if (!/did not self-register/.test(e?.message)) {
      return ` (Dawn could not load the Vulkan loader: ${e?.message}; install it: libvulkan1 on Debian and Ubuntu)`;
    }
  }
  const icd = env.VK_ICD_FILENAMES;
  if (icd !== undefined && icd !== '') {
    return ` (the Vulkan loader found no usable driver in VK_ICD_FILENAMES=${icd}: check that it names an existing driver's ICD .json file)`;
  }
  return ` (Dawn found no Vulkan driver: install your GPU's Vulkan driver, or point VK_ICD_FILENAMES at an ICD such as ${SWIFTSHADER_ICD} for a CPU emulation)`;
}
