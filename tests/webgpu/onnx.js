// A tiny ONNX model written byte by byte (protobuf wire format), so that the tests need no model
// file: one elementwise node over float32 (or float16) tensors of a fixed shape, opset 17.

const utf8 = new TextEncoder();

function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}

// Field `field` of wire type 0 (varint) or 2 (length-delimited bytes / string / message).
const int = (field, n) => [...varint((field << 3) | 0), ...varint(n)];
const bytes = (field, b) => [...varint((field << 3) | 2), ...varint(b.length), ...b];
const str = (field, s) => bytes(field, [...utf8.encode(s)]);

// ValueInfoProto { name = 1, type = 2: TypeProto { tensor_type = 1: { elem_type = 1 (FLOAT; 10 FLOAT16), shape = 2 { dim = 1 { dim_value = 1 } } } } }
function valueInfo(name, dims, elemType = 1) {
  const shape = dims.flatMap((d) => bytes(1, int(1, d)));
  return [...str(1, name), ...bytes(2, bytes(1, [...int(1, elemType), ...bytes(2, shape)]))];
}

/** ModelProto bytes of y = op(x, x) (op e.g. 'Add', 'Mul'), or y = op(x) for one-input ops ('Identity', 'Neg'); elemType 10 for float16 tensors. */
export function elementwiseModel(op, dims, { inputs = 2, elemType = 1 } = {}) {
  const node = [...str(1, 'x'), ...(inputs === 2 ? str(1, 'x') : []), ...str(2, 'y'), ...str(3, 'n0'), ...str(4, op)];
  const graph = [...bytes(1, node), ...str(2, 'g'), ...bytes(11, valueInfo('x', dims, elemType)), ...bytes(12, valueInfo('y', dims, elemType))];
  const model = [...int(1, 8), ...str(2, 'ms-deform-attn tests'), ...bytes(7, graph), ...bytes(8, [...str(1, ''), ...int(2, 17)])];
  return new Uint8Array(model);
}

// AttributeProto { name = 1, i = 3, s = 4, ints = 8, type = 20 (INT 2, STRING 3, INTS 7) }
function attribute(name, v) {
  if (typeof v === 'string') return [...str(1, name), ...str(4, v), ...int(20, 3)];
  if (Array.isArray(v)) return [...str(1, name), ...v.flatMap((x) => int(8, x < 0 ? 2n ** 64n + BigInt(x) : x)), ...int(20, 7)];
  return [...str(1, name), ...int(3, v), ...int(20, 2)];
}

// TensorProto { dims = 1, data_type = 2 (FLOAT 1, INT64 7), name = 8, raw_data = 9 }: a list, or
// a number as a scalar (no dims).
function tensor(name, values, type) {
  const list = Array.isArray(values) ? values : [values];
  const raw = new Uint8Array(type === 7 ? new BigInt64Array(list.map(BigInt)).buffer : new Float32Array(list).buffer);
  return [...(Array.isArray(values) ? int(1, values.length) : []), ...int(2, type), ...str(8, name), ...bytes(9, [...raw])];
}

/**
 * ModelProto bytes of a graph: `inputs` / `outputs` [name, dims] pairs (float32), `nodes`
 * { op, inputs, outputs, attrs } (attribute values: int, string or int list), `int64s` and
 * `floats` { name: [values] or a scalar } as initializers.
 */
export function graphModel({ inputs, outputs, nodes, int64s = {}, floats = {}, opset = 17 }) {
  const graph = [
    ...nodes.flatMap((n, i) => bytes(1, [...n.inputs.flatMap((x) => str(1, x)), ...n.outputs.flatMap((x) => str(2, x)),
      ...str(3, `n${i}`), ...str(4, n.op), ...Object.entries(n.attrs ?? {}).flatMap(([k, v]) => bytes(5, attribute(k, v)))])),
    ...str(2, 'g'),
    ...Object.entries(int64s).flatMap(([name, values]) => bytes(5, tensor(name, values, 7))),
    ...Object.entries(floats).flatMap(([name, values]) => bytes(5, tensor(name, values, 1))),
    ...inputs.flatMap(([name, dims]) => bytes(11, valueInfo(name, dims))),
    ...outputs.flatMap(([name, dims]) => bytes(12, valueInfo(name, dims))),
  ];
  return new Uint8Array([...int(1, 8), ...str(2, 'ms-deform-attn tests'), ...bytes(7, graph), ...bytes(8, [...str(1, ''), ...int(2, opset)])]);
}
