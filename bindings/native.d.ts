// Types for `ms-deform-attn/native` (bindings/native.js): the Node addon behind the same API.
export { initNative } from './index.js';
