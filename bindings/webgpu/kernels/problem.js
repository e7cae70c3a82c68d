// What every WebGPU program shares: the constants held to the C headers, the problem's constants
// as one table (the WGSL struct `pr` and the words plan.js writes both come from it), the
// tensor layouts, and program(), which numbers a pass's bindings from their names.

import { OPTIONS } from '../../core/options.js';

export const WORKGROUP = 64;
export const SCAN_BLOCK = 256;   // values an invocation of the prefix sums (scan.js)

// Shared with C; tests/webgpu/constants.test.js holds each to its header.
export const CANONICAL_NAN = 0x7fc00000;   // src/simd.h f_canonical_nan
export const FLOAT_SIDE = 1024;            // src/kernel/geometry.h MSDA_FLOAT_SIDE
export const BACKWARD_STRIP = 8;           // src/kernel/walks.h MSDA_BACKWARD_STRIP
export const ORDER_CHUNK = 32768;          // src/kernel/walks.h MSDA_ORDER_CHUNK
export const ORDER_CELLS = 8192;           // src/kernel/walks.h MSDA_ORDER_CELLS

// The problem (flags as 0 / 1: WGSL storage holds no bool), then one Level per level.
const PROBLEM = [
  ['batch', 'u32'], ['queries', 'u32'], ['heads', 'u32'], ['channels', 'u32'], ['num_levels', 'u32'],
  ['points', 'u32'], ['length', 'u32'],
  ['blnc', 'u32'],              // value is (B, L, H, C), not (B, H, L, C)
  ['bqhlp2', 'u32'],            // sampling_locations is (B, Q, H, NL, P, 2), not (B, 2, Q, H, NL, P)
  ['padding', 'u32'],           // paddingMode's number (PADDING_* below; core/options.js)
  ['half_shift', 'u32'],        // align_corners false: positions shift by 1/2
  ['bands', 'u32'], ['cols', 'u32'],   // the backward walk's grid of cells (walks.h sample_grid)
  ['zero', 'u32'],              // 0, read at run time: rounded()'s operand
];
const LEVEL = [
  ['h', 'u32'], ['w', 'u32'], ['start', 'u32'],
  ['narrow', 'u32'],                                     // float positions (geometry.h axis4)
  ['scale_x', 'f32'], ['scale_y', 'f32'], ['last_x', 'f32'], ['last_y', 'f32'], ['size_x', 'f32'], ['size_y', 'f32'],
  ['iscale_x', 'u32'], ['iscale_y', 'u32'],              // the scales as integers (geometry.h axis1)
  ['degen_x', 'u32'], ['degen_y', 'u32'],                // align_corners with a side of 1
  ['px', 'u32'], ['row', 'u32'],                         // element strides of a pixel and a row
];

const struct = (name, fields, tail = '') => `struct ${name} {\n${fields.map(([f, t]) => `  ${f}: ${t},`).join('\n')}${tail}\n}\n`;

/** The words of the problem binding: `fields` and each of `levels` by the table's names. */
export function encodeProblem(fields, levels) {
  const words = new Uint32Array(PROBLEM.length + LEVEL.length * levels.length);
  const floats = new Float32Array(words.buffer);
  const put = (table, values, at) => table.forEach(([name, type], i) => {
    const v = values[name];
    if (typeof v !== 'number') throw new Error(`ms-deform-attn: the WebGPU problem lacks ${name}`);
    (type === 'f32' ? floats : words)[at + i] = v;
  });
  put(PROBLEM, fields, 0);
  levels.forEach((level, l) => put(LEVEL, level, PROBLEM.length + LEVEL.length * l));
  return words;
}

// The dispatch uniform: invocations (values for the scan), invocations per grid row (workgroups
// for the scan), then the program's own words by its names (program() `words`), up to
// DISPATCH_WORDS.
export const DISPATCH_WORDS = 4;
const dispatchStruct = (words) => {
  const names = Array.from({ length: DISPATCH_WORDS }, (_, i) => words[i] ?? `unused${i + 2}`);
  return `struct Dispatch { n: u32, per_row: u32, ${names.map((w) => `${w}: u32`).join(', ')} }\n`;
};

const BASICS = /* wgsl */ `
// Bit tests: WGSL lets a compiler assume no NaN or Inf in comparisons.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
// A private variable, not a constant: WGSL refuses a NaN constant expression.
var<private> nan_bits: u32 = ${CANONICAL_NAN}u;
fn canon(x: f32) -> f32 { return select(x, bitcast<f32>(nan_bits), is_nan(x)); }
fn invocation(gid: vec3<u32>) -> u32 { return gid.x + gid.y * disp.per_row; }
`;

// A mode option's values as WGSL constants, its word's name and the value's (core/options.js: an
// option whose word holds its value's number), e.g. PADDING_BORDER.
const MODES = OPTIONS.filter((o) => o.wgsl.words.every((w, i) => w === i))
  .flatMap((o) => o.values.map((v, i) => `const ${o.wgsl.word.toUpperCase()}_${String(v).toUpperCase()} = ${i}u;`)).join('\n');

// The tensor layouts (src/msda.h's strides, as the problem's flags choose).
const LAYOUTS = /* wgsl */ `
${MODES}
${struct('Level', LEVEL)}
${struct('Problem', PROBLEM, '\n  level: array<Level>,')}
fn loc_index(b: u32, q: u32, h: u32, l: u32, p: u32, xy: u32) -> u32 {
  let Q = pr.queries; let H = pr.heads; let NL = pr.num_levels; let P = pr.points;
  if (pr.bqhlp2 != 0u) { return ((((b * Q + q) * H + h) * NL + l) * P + p) * 2u + xy; }
  return ((b * 2u + xy) * Q + q) * (H * NL * P) + (h * NL + l) * P + p;
}
// Element index of channel 0 of pixel 0 of (b, h) in value (and grad_value).
fn value_base(b: u32, h: u32) -> u32 {
  let H = pr.heads; let C = pr.channels; let L = pr.length;
  if (pr.blnc != 0u) { return b * L * H * C + h * C; }
  return (b * H + h) * L * C;
}
// A product rounded on its own, as the CPU's (built with -ffp-contract=off): its bits OR'ed with a
// zero read at run time, which no compiler can see through, so a * b + c is never contracted into
// one fused rounding on a driver that would (docs/webgpu.md, the bits). Every product an addition
// takes goes through it.
fn rounded(x: f32) -> f32 { return bitcast<f32>(bitcast<u32>(x) | pr.zero); }
fn rounded4(x: vec4<f32>) -> vec4<f32> { return bitcast<vec4<f32>>(bitcast<vec4<u32>>(x) | vec4<u32>(pr.zero)); }
fn corner_delta(l: u32, k: u32) -> i32 {
  let px = i32(pr.level[l].px); let row = i32(pr.level[l].row);
  return select(0, px, (k & 1u) != 0u) + select(0, row, (k & 2u) != 0u);
}
`;

/**
 * WGSL that a program's variant chooses: `flags`, the variant's flags it reads (see program()),
 * and `make(variant)`, its code for a variant.
 */
export function variantCode(flags, make) {
  return { flags, make };
}

/**
 * A compute program `main`: its bindings by name, in order ('problem' first where it reads the
 * problem, 'dispatch' last where it has a grid), each `name: 'access type'` (access read or
 * read_write), or a function of the variant giving that; `uses`, WGSL the body calls (strings,
 * or variantCode() pieces: geometry.js); `body`, a string or a function of the variant. A variant
 * is an object of boolean flags that a call's problem allows (plan.js variantOf: `narrow` when
 * every level is narrow); a program has one pipeline per combination of the flags it reads
 * (`variants`, its own, and those of its pieces), each compiled the first time a call needs it.
 * Where it has a grid: `words`, the names of the dispatch uniform's last two words as the body
 * reads them (disp.first_pair), which gpu.js dispatch() is given by name; `perGroup`, the
 * invocations (values) one workgroup covers; `perRow`, what the uniform's per_row counts
 * ('invocations', or 'workgroups'). gpu.js binds by the names.
 */
export function program(label, { problem = true, dispatch = true, words = [], perGroup = WORKGROUP, perRow = 'invocations', bindings, uses = [], variants = [] }, body) {
  if (words.length > DISPATCH_WORDS) throw new Error(`ms-deform-attn: the WebGPU ${label} program names ${words.length} dispatch words, the uniform holds ${DISPATCH_WORDS}`);
  const names = [...(problem ? ['problem'] : []), ...Object.keys(bindings), ...(dispatch ? ['dispatch'] : [])];
  const decls = (variant) => names.map((name, i) => {
    if (name === 'problem') return `@group(0) @binding(${i}) var<storage, read> pr: Problem;`;
    if (name === 'dispatch') return `@group(0) @binding(${i}) var<uniform> disp: Dispatch;`;
    const decl = bindings[name];
    const [access, type] = (typeof decl === 'function' ? decl(variant) : decl).split(/ (.*)/);
    return `@group(0) @binding(${i}) var<storage, ${access}> ${name}: ${type};`;
  });
  const flags = [...new Set([...variants, ...uses.flatMap((u) => (typeof u === 'string' ? [] : u.flags))])].sort();
  const code = (variant = {}) => [dispatch ? dispatchStruct(words) + BASICS : '', problem ? LAYOUTS : '', ...uses.map((u) => (typeof u === 'string' ? u : u.make(variant))),
    decls(variant).join('\n'), typeof body === 'function' ? body(variant) : body].join('\n');
  // The pipeline's name: the label, then the flags it reads that the variant sets, in name order.
  const key = (variant = {}) => [label, ...flags.filter((f) => variant[f])].join(' ');
  return { label, code, key, bindings: names, words, perGroup, perRow };
}
