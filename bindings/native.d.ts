// Types for `ms-deform-attn/native` (bindings/native.js): the Node addon behind the same API.
export { initNative } from './index.js';
/** The `.code` of the Error thrown when the native addon cannot be loaded here. */
export const NATIVE_UNAVAILABLE: 'MSDA_NATIVE_UNAVAILABLE';
/** The addon this platform would load: the package's prebuild, else a `make native` build;
 *  throws an Error with code 'MSDA_NATIVE_UNAVAILABLE' where there is none. */
export function nativeAddonPath(): string;
