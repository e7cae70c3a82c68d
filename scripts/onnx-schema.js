// Writes bindings/onnx/schema.js: ONNX's protobuf schema as protobufjs's JSON descriptor, so that
// ms-deform-attn/onnx reads models with protobufjs/light (no .proto parser at run time).
//
//   node scripts/onnx-schema.js [/usr/lib/python3/dist-packages/onnx/onnx.proto]
import { readFileSync, writeFileSync } from 'node:fs';
import protobuf from 'protobufjs';

const from = process.argv[2] ?? '/usr/lib/python3/dist-packages/onnx/onnx.proto';
const root = protobuf.parse(readFileSync(from, 'utf8'), { keepCase: true }).root;
const head = [
  "// ONNX's protobuf schema (onnx/onnx.proto of ONNX 1.12, proto2; MIT licence, the ONNX Project",
  "// Contributors), as protobufjs's JSON descriptor: read by protobufjs/light, which needs no parser.",
  '// Made by scripts/onnx-schema.js from the .proto python3-onnx ships.',
];
writeFileSync(new URL('../bindings/onnx/schema.js', import.meta.url), `${head.join('\n')}\n\nexport default ${JSON.stringify(root.toJSON())};\n`);
