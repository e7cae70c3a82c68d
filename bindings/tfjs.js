// ms-deform-attn/tfjs: multi-scale deformable attention as a differentiable TensorFlow.js op
// (msDeformAttn) and Deformable DETR's MSDeformAttn module on top of it (MSDeformAttn).
//
//   import * as tf from '@tensorflow/tfjs-core';
//   import { msDeformAttn } from 'ms-deform-attn/tfjs';
//   const out = msDeformAttn(value, samplingLocations, attentionWeights, { spatialShapes });
//
// @tensorflow/tfjs-core is the user's own copy (an optional peer dependency). The kernels run
// in this package's wasm module (or any instance given to setMsda), never in tfjs. Each call
// copies its inputs into that module's memory once and its outputs into tensors once, as the
// core API does: inputs are read where tfjs keeps them (tfjs-backend-cpu's own arrays through
// dataSync(), tfjs-backend-wasm's heap through a view); outputs become tensors through
// tf.tensor(data, shape, 'float32'). tfjs-backend-webgl works too, by reading the data back to the
// CPU; on tfjs-backend-webgpu the op runs the WebGPU kernels on tfjs's device, no CPU copy
// (bindings/webgpu/tfjs.js).
//
// Nothing is fetched at import. In Node the first op makes its instance (the wasm module, one
// thread); in browsers call `await ready()` first (after configure({ wasmPaths }) where the .wasm
// files are served elsewhere), or setMsda(await init({ wasmPaths })).
//
// The parts: bindings/tfjs/instance.js (the instance the op calls), bindings/tfjs/op.js (the op),
// bindings/tfjs/layer.js (the MSDeformAttn layer).

export { configure, getMsda, ready, setMsda } from './tfjs/instance.js';
export { msDeformAttn, msDeformAttnBackward } from './tfjs/op.js';
export { MSDeformAttn } from './tfjs/layer.js';
