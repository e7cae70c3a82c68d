// `ms-deform-attn/native`: the Node addon behind the same API (initNative), where the addon for
// this platform is, and the code of the error when it cannot be used. The loader is node/addon.js.

export { initNative } from './node.js';
export { nativeAddonPath } from './node/addon.js';
/** The `.code` of the Error thrown when the native addon cannot be used here. */
export { NATIVE_UNAVAILABLE } from './core/init.js';
