// The CPU's bits on drivers that contract a * b + c into one fused rounding (docs/webgpu.md, the
// bits): in the SPIR-V that Dawn hands the driver (dumped by spirv-dump.js in a child process),
// no product reaches an addition or subtraction except through rounded()'s OR with a zero read
// at run time, in every pipeline of every program. A driver may fuse an OpFMul into the
// OpFAdd that takes it; one whose result first passes an integer OR it cannot fold it cannot.
// Values are followed through variables, struct and vector members, calls and returns.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { SWIFTSHADER_ICD } from './helpers.js';

const PRODUCTS = new Set(['OpFMul', 'OpVectorTimesScalar', 'OpDot', 'OpMatrixTimesVector', 'OpVectorTimesMatrix', 'OpMatrixTimesScalar', 'OpMatrixTimesMatrix', 'OpOuterProduct']);
const CARRY = new Set(['OpBitcast', 'OpCopyObject', 'OpPhi', 'OpSelect', 'OpVectorShuffle', 'OpFNegate', 'OpVectorInsertDynamic']);
const CONSTANTS = new Set(['OpConstant', 'OpConstantNull', 'OpConstantComposite', 'OpConstantTrue', 'OpConstantFalse', 'OpSpecConstant']);

// A value's taint: false, true (a product's bits), or per member { index: taint } ('*': any index).
const any = (t) => t === true || (typeof t === 'object' && t !== null && Object.values(t).some(any));
function union(a, b) {
  if (!any(b)) return a;
  if (!any(a)) return b;
  if (a === true || b === true) return true;
  const out = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = union(out[k] ?? false, v);
  return out;
}
function at(t, path) {
  for (const i of path) {
    if (t === true || !any(t)) return t;
    t = i === '*' ? Object.values(t).reduce(union, false) : union(t[i] ?? false, t['*'] ?? false);
  }
  return t;
}
function put(t, path, v) {
  if (path.length === 0) return union(t, v);
  if (t === true) return true;
  const out = typeof t === 'object' && t ? { ...t } : {};
  out[path[0]] = put(out[path[0]] ?? false, path.slice(1), v);
  return out;
}

/** The additions that take a product not rounded first, in one module's SPIR-V disassembly. */
export function contractible(spirv) {
  const code = spirv.split('\n').map((line) => line.replace(/;.*/, '').trim().split(/\s+/)).filter((w) => w[0] !== '')
    .map((w) => (w[1] === '=' ? { id: w[0], op: w[2], args: w.slice(3) } : { id: null, op: w[0], args: w.slice(1) }));
  const consts = new Map();
  for (const i of code) if (CONSTANTS.has(i.op)) consts.set(i.id, i.op === 'OpConstant' ? i.args[1] : '?');
  const index = (id) => (consts.has(id) && consts.get(id) !== '?' ? consts.get(id) : '*');
  const taint = new Map(), vars = new Map(), ptrs = new Map(), rets = new Map(), params = new Map();
  const T = (id) => taint.get(id) ?? false;
  const set = (map, key, v) => { const old = map.get(key) ?? false; const nu = union(old, v); if (JSON.stringify(nu) !== JSON.stringify(old)) { map.set(key, nu); return true; } return false; };
  const ptr = (id) => ptrs.get(id) ?? { base: id, path: [] };
  let bad, changed = true;
  for (let round = 0; changed && round < 50; round++) {
    changed = false;
    bad = [];
    let fn = null, param = 0;
    for (const { id, op, args } of code) {
      let v = false;
      if (op === 'OpFunction') { fn = id; param = 0; continue; }
      if (op === 'OpFunctionParameter') v = params.get(`${fn}:${param++}`) ?? false;
      else if (PRODUCTS.has(op)) v = true;
      else if (op === 'OpExtInst' && /^(Fma|FMix)$/.test(args[2])) bad.push(`${op} ${args[2]}`);
      else if (CARRY.has(op)) v = args.slice(1).map(T).reduce(union, false);
      else if (op === 'OpVectorExtractDynamic') v = at(T(args[1]), ['*']);
      else if (op === 'OpCompositeConstruct') v = Object.fromEntries(args.slice(1).map((a, i) => [i, T(a)]).filter(([, t]) => any(t)));
      else if (op === 'OpCompositeExtract') v = at(T(args[1]), args.slice(2));
      else if (op === 'OpCompositeInsert') v = put(T(args[2]), args.slice(3), T(args[1]));
      else if (op === 'OpBitwiseOr') v = args.slice(1).some((a) => consts.has(a)) ? args.slice(1).map(T).reduce(union, false) : false;
      else if (op === 'OpAccessChain' || op === 'OpInBoundsAccessChain') {
        const p = ptr(args[1]);
        ptrs.set(id, { base: p.base, path: [...p.path, ...args.slice(2).map(index)] });
      } else if (op === 'OpLoad') { const p = ptr(args[1]); v = at(vars.get(p.base) ?? false, p.path); }
      else if (op === 'OpStore') { const p = ptr(args[0]); if (any(T(args[1]))) changed = set(vars, p.base, put(false, p.path, T(args[1]))) || changed; }
      else if (op === 'OpFunctionCall') {
        args.slice(2).forEach((a, i) => { changed = set(params, `${args[1]}:${i}`, T(a)) || changed; });
        v = rets.get(args[1]) ?? false;
      } else if (op === 'OpReturnValue') changed = set(rets, fn, T(args[0])) || changed;
      else if ((op === 'OpFAdd' || op === 'OpFSub') && args.slice(1).some((a) => any(T(a)))) bad.push(`${id} = ${op} ${args.join(' ')}`);
      if (id !== null && any(v)) changed = set(taint, id, v) || changed;
    }
  }
  return bad;
}

test('the analysis finds a product an addition takes, and none once rounded', () => {
  // a * b + c through a variable and a struct member; then with the OR of a loaded zero
  const plain = `%f = OpFunction %void None %t\n%1 = OpFMul %float %a %b\n%s = OpCompositeConstruct %S %1 %c\nOpStore %v %s\n%p = OpAccessChain %ptr %v %uint_0\n%2 = OpLoad %float %p\n%3 = OpFAdd %float %2 %c\n%q = OpAccessChain %ptr %v %uint_1\n%4 = OpLoad %float %q\n%5 = OpFAdd %float %4 %c\nOpFunctionEnd\n%uint_0 = OpConstant %uint 0\n%uint_1 = OpConstant %uint 1`;
  assert.deepEqual(contractible(plain), ['%3 = OpFAdd %float %2 %c']);
  const kept = plain.replace('%s = OpCompositeConstruct %S %1 %c', '%b1 = OpBitcast %uint %1\n%z = OpLoad %uint %zero\n%o = OpBitwiseOr %uint %b1 %z\n%r = OpBitcast %float %o\n%s = OpCompositeConstruct %S %r %c');
  assert.deepEqual(contractible(kept), []);
  assert.equal(contractible(kept.replace('%o = OpBitwiseOr %uint %b1 %z', '%o = OpBitwiseOr %uint %b1 %uint_0')).length, 1, 'an OR with a constant is folded');
});

test('no pipeline of any program leaves a product for an addition to contract', () => {
  const env = { ...process.env, VK_ICD_FILENAMES: process.env.VK_ICD_FILENAMES ?? SWIFTSHADER_ICD };
  const run = spawnSync(process.execPath, [fileURLToPath(new URL('./spirv-dump.js', import.meta.url))], { env, encoding: 'utf8', maxBuffer: 1 << 28 });
  assert.equal(run.status, 0, run.stderr);
  const parts = run.stdout.split(/^### /m).slice(1).map((p) => [p.slice(0, p.indexOf('\n')), p.slice(p.indexOf('/* Dumped SPIRV disassembly */'))]);
  assert.equal(parts.at(-1)[0], 'end');
  const modules = parts.slice(0, -1);
  assert.ok(modules.length >= 10 && modules.every(([, s]) => s.includes('OpEntryPoint')), `${modules.length} modules dumped`);
  // (the probe's a * b + c as written is what it asks the device about)
  const found = modules.filter(([key]) => key !== 'probe').map(([key, s]) => [key, contractible(s)]).filter(([, bad]) => bad.length > 0);
  assert.deepEqual(found, [], 'products an addition takes unrounded');
  // the pipelines that multiply and add floats were looked at
  for (const key of ['forward', 'forward narrow vec4', 'samples', 'samples vec4', 'gather']) {
    assert.ok(modules.some(([k, s]) => k === key && s.includes('OpFMul') && s.includes('OpFAdd')), key);
  }
});
