// ONNX models in and out (protobufjs/light over ONNX's schema) and the graph's index: who produces
// and who consumes each tensor, constants read as numbers, sub-models of chosen nodes.

import { widenHalf } from '../core/half.js';
import schema from './schema.js';

export const ONNX_UNAVAILABLE = 'MSDA_ONNX_UNAVAILABLE';

// protobufjs is an optional peer: loaded at the first createSession, so that importing the entry
// without it installed works and the error says what to install.
let types = null;
/** Loads protobufjs and ONNX's schema once; an Error with code MSDA_ONNX_UNAVAILABLE when missing. */
export async function loadOnnx() {
  if (types) return;
  let protobuf;
  try {
    ({ default: protobuf } = await import('protobufjs/light.js'));
  } catch (e) {
    const err = new Error(`ms-deform-attn/onnx: the 'protobufjs' package (an optional peer, which reads ONNX files) did not load (${e.message}): npm install protobufjs`, { cause: e });
    err.code = ONNX_UNAVAILABLE;
    throw err;
  }
  types ??= protobuf.Root.fromJSON(schema).lookupType('onnx.ModelProto');
}

function modelType() {
  if (!types) throw new Error('ms-deform-attn/onnx: internal: loadOnnx() was not awaited');
  return types;
}

// int64 fields arrive as Long (protobufjs with `long`) or number.
export const num = (x) => (typeof x === 'number' ? x : x == null ? 0 : Number(x.toString()));

export const ELEM = Object.freeze({ 1: 'float32', 6: 'int32', 7: 'int64', 9: 'bool', 10: 'float16', 11: 'float64' });
const ELEM_OF = Object.fromEntries(Object.entries(ELEM).map(([k, v]) => [v, Number(k)]));

/** ModelProto from the bytes, or an error naming what is wrong with them. */
export function decodeModel(bytes) {
  let model;
  try {
    model = modelType().decode(bytes);
  } catch (e) {
    throw new TypeError(`ms-deform-attn/onnx: model: not an ONNX ModelProto (${e.message})`, { cause: e });
  }
  if (!model.graph || !model.graph.node || model.graph.node.length === 0) {
    throw new TypeError('ms-deform-attn/onnx: model: an ONNX ModelProto without a graph of nodes');
  }
  return model;
}

export const encodeModel = (model) => modelType().encode(modelType().fromObject(model)).finish();

function attrValue(a) {
  switch (a.type) {
    case 1: return a.f;
    case 2: return num(a.i);
    case 3: return new TextDecoder().decode(a.s);
    case 4: return a.t;
    case 6: return a.floats;
    case 7: return a.ints.map(num);
    default: return undefined;
  }
}

/** A node's attribute by name (its value, decoded), or fallback. */
export function attr(node, name, fallback) {
  const a = node.attribute.find((x) => x.name === name);
  return a ? attrValue(a) : fallback;
}

/** The numbers of a TensorProto (int64, int32, float32, float16; raw or typed fields: ONNX keeps
 *  float16 bits in int32_data). */
export function tensorValues(t) {
  const raw = t.raw_data && t.raw_data.length ? t.raw_data : null;
  const view = raw && new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
  switch (t.data_type) {
    case 7: return raw ? Array.from({ length: raw.length / 8 }, (_, i) => Number(view.getBigInt64(i * 8, true))) : t.int64_data.map(num);
    case 6: return raw ? Array.from({ length: raw.length / 4 }, (_, i) => view.getInt32(i * 4, true)) : t.int32_data;
    case 1: return raw ? Array.from({ length: raw.length / 4 }, (_, i) => view.getFloat32(i * 4, true)) : t.float_data;
    case 10: return Array.from(widenHalf(raw ? Uint16Array.from({ length: raw.length / 2 }, (_, i) => view.getUint16(i * 2, true)) : Uint16Array.from(t.int32_data), 'float16'));
    default: return null;
  }
}

// Ops whose output is not a function of their inputs, or that read tensors of the outer scope.
const IMPURE = new Set(['RandomNormal', 'RandomUniform', 'RandomNormalLike', 'RandomUniformLike', 'Bernoulli', 'Multinomial', 'If', 'Loop', 'Scan']);

/** The graph's index: producers, consumers, initializers and Constant nodes' values by tensor name. */
export class Graph {
  constructor(model) {
    this.model = model;
    const g = model.graph;
    this.nodes = g.node;
    this.producer = new Map();
    this.consumers = new Map();
    this.initializers = new Map(g.initializer.map((t) => [t.name, t]));
    this.inputs = g.input.map((v) => v.name).filter((n) => !this.initializers.has(n));
    this.outputs = g.output.map((v) => v.name);
    this.nodes.forEach((n, i) => {
      for (const o of n.output) this.producer.set(o, i);
      for (const x of n.input) {
        if (!x) continue;
        if (!this.consumers.has(x)) this.consumers.set(x, []);
        this.consumers.get(x).push(i);
      }
    });
  }

  /**
   * Indices of the nodes computed from constants alone (Constant nodes, and deterministic ops of
   * ONNX's domain whose inputs are all initializers or such nodes' outputs, none a model output):
   * what the exporter writes for shapes computed from a constant tensor (mmcv's spatial_shapes).
   * Any part of a cut graph may hold its own copy of them.
   */
  get constNodes() {
    if (this._constNodes) return this._constNodes;
    const known = new Set(this.initializers.keys()), set = new Set();
    this.nodes.forEach((n, i) => {
      const ins = n.input.filter(Boolean);
      const pure = n.op_type === 'Constant' || (ins.length > 0 && !n.domain && !IMPURE.has(n.op_type)
        && ins.every((x) => known.has(x)) && !n.output.some((o) => this.outputs.includes(o)));
      if (!pure) return;
      set.add(i);
      for (const o of n.output) known.add(o);
    });
    this._constNodes = set;
    return set;
  }

  node(i) { return this.nodes[i]; }
  producerOf(name) { const i = this.producer.get(name); return i === undefined ? null : this.nodes[i]; }
  consumersOf(name) { return (this.consumers.get(name) ?? []).map((i) => this.nodes[i]); }

  /** The numbers of a constant tensor (an initializer or a Constant node's), or null. */
  constant(name) {
    const t = this.initializers.get(name);
    if (t) return tensorValues(t);
    const p = this.producerOf(name);
    if (p && p.op_type === 'Constant') {
      const v = attr(p, 'value');
      if (v && typeof v === 'object' && 'data_type' in v) return tensorValues(v);
      const ints = attr(p, 'value_ints'), i = attr(p, 'value_int'), f = attr(p, 'value_float');
      return ints ?? (i !== undefined ? [i] : f !== undefined ? [f] : null);
    }
    return null;
  }

  isConstant(name) { return this.constant(name) !== null || this.initializers.has(name); }
}

/**
 * A ModelProto of some of the model's nodes (in the model's order): `inputs` and `outputs`
 * { name, type?, shape? } (type 'float32' ...; none: ORT infers it), the initializers the nodes read.
 */
export function subModel(graph, nodeIndices, inputs, outputs, name) {
  const m = graph.model;
  const order = [...new Set(nodeIndices)].sort((a, b) => a - b);
  const nodes = order.map((i) => graph.nodes[i]);
  const inputNames = new Set(inputs.map((v) => v.name));
  const used = new Set(nodes.flatMap((n) => n.input).filter((x) => x && !inputNames.has(x)));
  const valueInfo = ({ name: n, type, shape }) => ({
    name: n,
    ...(type ? { type: { tensor_type: { elem_type: ELEM_OF[type], ...(shape ? { shape: { dim: shape.map((d) => ({ dim_value: d })) } } : {}) } } } : {}),
  });
  return {
    ir_version: m.ir_version,
    opset_import: m.opset_import,
    producer_name: 'ms-deform-attn/onnx',
    graph: {
      name,
      node: nodes,
      initializer: m.graph.initializer.filter((t) => used.has(t.name)),
      input: inputs.map(valueInfo),
      output: outputs.map(valueInfo),
    },
  };
}
