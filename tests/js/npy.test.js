// bindings/npy.js: round trips in every dtype, NumPy's exact header, the Python-literal forms
// NumPy accepts, and one refusal per malformed class with the words of its message (the same
// messages as src/cli/npy.c; tests/js/cli.test.js checks the two CLIs print identical lines).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatShape, NpyError, parseNpy, serializeNpy } from '../../bindings/npy.js';
import { f16ToF32Bits, f32ToBf16Bits, f32ToF16Bits, narrowToHalf, widenHalf } from '../../bindings/core/half.js';

const SIX = new Float32Array([1.5, -2, 0, 3.25, -0, 1e-30]);

/** A file image: magic, version, header length, dict (NumPy's padding when pad), data bytes. */
function image(dict, { major = 1, minor = 0, pad = true, data = new Uint8Array(SIX.buffer) } = {}) {
  const prefix = major === 1 ? 10 : 12;
  const hl = pad ? Math.ceil((prefix + dict.length + 1) / 64) * 64 - prefix : dict.length;
  const out = new Uint8Array(prefix + hl + data.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, major, minor]);
  for (let k = 0; k < prefix - 8; k++) out[8 + k] = (hl >> (8 * k)) & 0xff;
  for (let i = 0; i < dict.length; i++) out[prefix + i] = dict.charCodeAt(i);
  if (pad) {
    out.fill(0x20, prefix + dict.length, prefix + hl - 1);
    out[prefix + hl - 1] = 0x0a;
  }
  out.set(data, prefix + hl);
  return out;
}
const D23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
const dict = (descr, shape, fortran = 'False') => `{'descr': '${descr}', 'fortran_order': ${fortran}, 'shape': ${shape}, }`;

function refused(bytes, words) {
  assert.throws(() => parseNpy(bytes), (e) => {
    assert.ok(e instanceof NpyError, `expected an NpyError, got ${e}`);
    assert.ok(e.message.includes(words), `message "${e.message}" lacks "${words}"`);
    return true;
  });
}

test("serializeNpy writes NumPy's header: (2, 3) <f4 has header length 118 and data at 128", () => {
  const b = serializeNpy({ data: SIX, shape: [2, 3] });
  assert.equal(b.length, 128 + 24);
  assert.deepEqual([...b.subarray(0, 10)], [0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, 118, 0]);
  assert.equal(Buffer.from(b.subarray(10, 10 + D23.length)).toString('latin1'), D23);
  assert.equal(b[127], 0x0a);
  assert.equal(b[126], 0x20);
  for (const shape of [[], [3], [1, 2, 3]]) {
    const n = shape.reduce((a, c) => a * c, 1);
    const bytes = serializeNpy({ data: new Float32Array(n), shape });
    assert.equal((bytes.length - 4 * n) % 64, 0, `header of ${formatShape(shape)} is 64-aligned`);
  }
});

test('round trips: <f4 bit for bit (NaN payload, -0), <i4 and <i8 extremes, () and zero-sized shapes', () => {
  const f = new Float32Array([NaN, -0, Infinity, -Infinity, 1e-45, 3.4e38]);
  new Uint32Array(f.buffer)[0] = 0x7fc12345; // a NaN with a payload
  const back = parseNpy(serializeNpy({ data: f, shape: [3, 2] }));
  assert.equal(back.dtype, '<f4');
  assert.deepEqual(back.shape, [3, 2]);
  assert.deepEqual(new Uint32Array(back.data.buffer), new Uint32Array(f.buffer));
  const i4 = new Int32Array([0, -1, 2147483647, -2147483648]);
  assert.deepEqual(parseNpy(serializeNpy({ data: i4, shape: [4] })).data, i4);
  const i8 = new BigInt64Array([0n, -1n, (1n << 63n) - 1n, -(1n << 63n)]);
  const r8 = parseNpy(serializeNpy({ data: i8, shape: [2, 2] }));
  assert.equal(r8.dtype, '<i8');
  assert.deepEqual(r8.data, i8);
  const scalar = parseNpy(serializeNpy({ data: new Float32Array([7]), shape: [] }));
  assert.deepEqual([scalar.shape, scalar.count, scalar.data[0]], [[], 1, 7]);
  const empty = parseNpy(serializeNpy({ data: new Float32Array(0), shape: [0, 3] }));
  assert.deepEqual([empty.shape, empty.count], [[0, 3], 0]);
  // a Node Buffer with a non-zero offset into a shared pool parses (and is copied, not aliased)
  const buf = Buffer.concat([Buffer.alloc(3), Buffer.from(serializeNpy({ data: SIX, shape: [6] }))]).subarray(3);
  const p = parseNpy(buf);
  assert.deepEqual(p.data, SIX);
  buf.fill(0);
  assert.deepEqual(p.data, SIX);
});

test('versions 1.0, 2.0 and 3.0 and the dict forms NumPy accepts', () => {
  for (const major of [1, 2, 3]) assert.deepEqual(parseNpy(image(D23, { major })).shape, [2, 3], `version ${major}.0`);
  assert.deepEqual(parseNpy(image(D23, { pad: false })).shape, [2, 3], 'no padding, no newline');
  const odd = '{"shape":(6,),"fortran_order":False,"descr":"<f4"}';
  assert.deepEqual(parseNpy(image(odd)).shape, [6], 'double quotes, other order, no trailing comma');
  const spaced = "{\n  'descr' : '<i4' ,\n  'fortran_order' : False ,\n  'shape' : ( 6 , ) ,\n}";
  assert.equal(parseNpy(image(spaced)).dtype, '<i4');
  assert.deepEqual(parseNpy(image(dict('<i8', '(3L,)'))).shape, [3], "Python 2's long suffix");
  assert.deepEqual(parseNpy(image(dict('<f4', '(2, 3,)'))).shape, [2, 3], 'trailing comma');
});

test('refuses a wrong magic, another version and a cut preamble or header', () => {
  refused(new Uint8Array(0), 'empty file');
  const bad = image(D23);
  bad[1] = 0x6e;
  refused(bad, 'does not start with the magic string');
  refused(new Uint8Array([0x50, 0x4b, 3, 4, 0, 0, 0, 0, 0, 0]), 'not a .npy file');
  refused(image(D23).subarray(0, 7), 'truncated: 7 bytes');
  refused(image(D23).subarray(0, 9), 'too short for the version 1.0 preamble');
  refused(image(D23, { major: 4 }), 'unsupported .npy format version 4.0');
  refused(image(D23, { minor: 1 }), 'unsupported .npy format version 1.1');
  refused(image(D23).subarray(0, 100), 'truncated: the header is 118 bytes but only 90');
  const huge = image(D23, { major: 2 });
  huge[11] = 0x7f;
  refused(huge, 'truncated: the header is');
});

test('refuses big-endian, byte-order-less, other and structured dtypes and Fortran order', () => {
  refused(image(dict('>f4', '(2, 3)')), "big-endian dtype '>f4'");
  refused(image(dict('>i8', '(3,)')), "big-endian dtype '>i8'");
  refused(image(dict('|f4', '(2, 3)')), "'|' is for 1-byte types");
  refused(image(dict('<f8', '(3,)')), "unsupported dtype '<f8', expected '<f4', '<f2', 'bfloat16', '<i4' or '<i8'");
  refused(image(dict('<V2', '(3,)')), "2-byte void dtype (np.save writes ml_dtypes' bfloat16 so");
  refused(image(dict('>f2', '(3,)')), "big-endian dtype '>f2'");
  refused(image(dict('|f2', '(3,)')), "'|' is for 1-byte types");
  refused(image(dict('|u1', '(24,)')), "unsupported dtype '|u1'");
  refused(image("{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (6,), }"), 'structured dtypes are not supported');
  refused(image(dict('<f4', '(2, 3)', 'True')), 'Fortran-order');
  refused(image(dict('<f4', '(2, 3)', 'Tru')), 'expected True or False');
  refused(image(dict('<f4', '(2, 3)', 'Falsey')), 'expected True or False');
  refused(image(dict('<f4', '(2, 3)', '0')), 'expected True or False');
});

test('refuses a header that is not a well-formed dict with exactly the three keys', () => {
  refused(image('', { pad: false }), "expected '{' at the start");
  refused(image("['descr', '<f4']"), "expected '{'");
  refused(image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), "), 'expected a quoted string for a key, found the end');
  refused(image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}}"), "after the closing '}'");
  refused(image("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }"), "expected ',' or '}' after the value of 'descr'");
  refused(image("{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "expected ':' after a key");
  refused(image("{descr: '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "expected a quoted string for a key, found 'd'");
  refused(image("{'descr': '<f4", { pad: false }), 'unterminated string');
  refused(image("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }"), 'unsupported character 0x5c');
  refused(image("{'fortran_order': False, 'shape': (2, 3), }"), "missing key 'descr'");
  refused(image("{'descr': '<f4', 'shape': (2, 3), }"), "missing key 'fortran_order'");
  refused(image("{'descr': '<f4', 'fortran_order': False, }"), "missing key 'shape'");
  refused(image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1, }"), "unexpected key 'extra'");
  refused(image("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), "key 'descr' appears twice");
});

test('refuses shapes that are not tuples of non-negative integers or whose size overflows', () => {
  refused(image(dict('<f4', '(6)')), "'shape' (6) is not a tuple, expected (6,)");
  refused(image(dict('<f4', '[2, 3]')), "expected '(' to open the tuple");
  refused(image(dict('<f4', '(2, -3)')), 'negative dimension');
  refused(image(dict('<f4', '(2, 3.0)')), "expected ',' or ')' in 'shape', found '.'");
  refused(image(dict('<f4', '(2, 03)')), 'leading zero');
  refused(image(dict('<f4', '(,)')), "expected an integer in 'shape', found ','");
  refused(image(dict('<f4', '(2, 3')), "expected an integer in 'shape', found '}'");
  refused(image(dict('<f4', '(99999999999999999999,)')), 'exceeds 9223372036854775807');
  refused(image(dict('<f4', '(4294967296, 4294967296)')), 'more elements than fit');
  refused(image(dict('<i8', '(2305843009213693952,)')), 'more elements than fit');
  refused(image(dict('<f4', `(${'1, '.repeat(33)})`), { data: new Uint8Array(4) }), 'more than 32 dimensions');
});

test('refuses data shorter or longer than the shape says', () => {
  const bytes = new Uint8Array(SIX.buffer);
  refused(image(D23, { data: bytes.subarray(0, 20) }), "truncated: shape (2, 3) of '<f4' needs 24 data bytes, the file has 20");
  refused(image(D23, { data: new Uint8Array(0) }), 'needs 24 data bytes, the file has 0');
  refused(image(dict('<f4', '(5,)')), "4 bytes of trailing data after the 20 that shape (5,) of '<f4' needs");
  refused(image(dict('<i8', '(2, 3)')), 'needs 48 data bytes, the file has 24');
  refused(image(dict('<f4', '(0, 3)'), { data: new Uint8Array(4) }), '4 bytes of trailing data after the 0');
});

test('every proper prefix of a valid file is refused with an NpyError', () => {
  const whole = image(D23, { major: 2 });
  for (let n = 0; n < whole.length; n++) assert.throws(() => parseNpy(whole.slice(0, n)), NpyError, `prefix of ${n} bytes`);
});

test('serializeNpy refuses data and shape that disagree', () => {
  assert.throws(() => serializeNpy({ data: new Float64Array(2), shape: [2] }), TypeError);
  assert.throws(() => serializeNpy({ data: new Float32Array(5), shape: [2, 3] }), /shape \(2, 3\) has 6 elements, data has 5/);
  assert.throws(() => serializeNpy({ data: new Float32Array(1), shape: [-1] }), TypeError);
});

test('zero-size arrays with dimensions past 2^53: exact BigInt dimensions with { bigint: true }, refused otherwise (never rounded)', () => {
  const big = image(dict('<f4', '(0, 9007199254740993, 3)'), { data: new Uint8Array(0) });
  refused(big, 'shape (0, 9007199254740993, 3) has dimension 9007199254740993, past 2^53 - 1');
  const a = parseNpy(big, { bigint: true });
  assert.deepEqual(a.shape, [0n, 9007199254740993n, 3n]);
  assert.equal(a.count, 0);
  assert.equal(a.data.length, 0);
  const max = image(dict('<i8', '(9223372036854775807, 0)'), { data: new Uint8Array(0) });
  assert.deepEqual(parseNpy(max, { bigint: true }).shape, [9223372036854775807n, 0n]);
  // at the limit and below: plain numbers, as before
  assert.deepEqual(parseNpy(image(dict('<f4', '(0, 9007199254740991)'), { data: new Uint8Array(0) })).shape, [0, 9007199254740991]);
  assert.deepEqual(parseNpy(serializeNpy({ data: SIX, shape: [2, 3] }), { bigint: true }).shape, [2n, 3n]);
});

// The value of binary16 bits by their definition (independent of half.js's bit operations).
function f16Value(h) {
  const e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const v = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1024 + m) * 2 ** (e - 25);
  return h & 0x8000 ? -v : v;
}
const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
const valueOfBits = (u) => { u32[0] = u; return f32[0]; };

test('half.js: binary16 widens exactly on all 65536 bit patterns (NaN payloads kept) and narrows back', () => {
  let bad = 0;
  for (let h = 0; h < 65536; h++) {
    const u = f16ToF32Bits(h), want = f16Value(h), got = valueOfBits(u);
    if (Number.isNaN(want)) {
      if (!Number.isNaN(got) || (u & 0x7fffff) !== (h & 0x3ff) << 13 || (u >>> 31) !== (h >> 15)) bad++;
    } else if (!Object.is(got, want) || f32ToF16Bits(u) !== h) bad++;
  }
  assert.equal(bad, 0);
  const bits = Uint16Array.from([0x3c00, 0x0001, 0xfc00, 0x7e01]);
  assert.deepEqual([...new Uint32Array(widenHalf(bits, 'float16').buffer)], [0x3f800000, 0x33800000, 0xff800000, 0x7fc02000]);
  assert.deepEqual([...new Uint32Array(widenHalf(bits, 'bfloat16').buffer)], [0x3c000000, 0x00010000, 0xfc000000, 0x7e010000]);
});

test('half.js: float32 narrows to the nearest binary16 / bfloat16, ties to even', () => {
  let seed = 12345, wrong = 0;
  for (let i = 0; i < 200000; i++) {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    const f = ((seed & 0x807fffff) | ((100 + (seed >>> 8) % 48) << 23)) >>> 0;
    const x = valueOfBits(f), h = f32ToF16Bits(f), err = Math.abs(f16Value(h) - x);
    if ((h & 0x7fff) === 0x7c00) { if (Math.abs(x) < 65520) wrong++; continue; }
    for (const d of [-1, 1]) {
      const n = h + d;
      if (((n ^ h) & 0x8000) || ((n >> 10) & 0x1f) === 31 || ((h & 0x7fff) === 0 && d < 0)) continue;
      const other = Math.abs(f16Value(n) - x);
      if (other < err || (other === err && (h & 1))) wrong++;
    }
    const b = f32ToBf16Bits(f), bv = valueOfBits(b << 16);
    const below = valueOfBits((f & 0xffff0000) >>> 0), above = valueOfBits(((f & 0xffff0000) + 0x10000) >>> 0);
    const best = Math.abs(below - x) < Math.abs(above - x) ? below : Math.abs(below - x) > Math.abs(above - x) ? above
      : ((f >>> 16) & 1 ? above : below);
    if (!Object.is(bv, best)) wrong++;
  }
  assert.equal(wrong, 0);
  assert.equal(f32ToF16Bits(new Uint32Array(new Float32Array([1 + 2 ** -11]).buffer)[0]), 0x3c00); // tie to even
  assert.equal(f32ToF16Bits(new Uint32Array(new Float32Array([1 + 3 * 2 ** -11]).buffer)[0]), 0x3c02);
  assert.deepEqual([...narrowToHalf([65504, 65520, 2 ** -25, -0], 'float16')], [0x7bff, 0x7c00, 0, 0x8000]);
});

test("'<f2' and 'bfloat16' files: parsed as their bits (Uint16Array), written back byte for byte", () => {
  const bits = Uint16Array.from([0x3c00, 0xc000, 0x0001, 0x7c00, 0x7e01, 0x8000]);
  for (const descr of ['<f2', 'bfloat16']) {
    const file = image(dict(descr, '(2, 3)'), { data: new Uint8Array(bits.buffer) });
    const a = parseNpy(file);
    assert.equal(a.dtype, descr);
    assert.ok(a.data instanceof Uint16Array);
    assert.deepEqual([...a.data], [...bits]);
    assert.deepEqual(serializeNpy({ data: a.data, shape: a.shape, dtype: descr }), file);
  }
  assert.deepEqual(serializeNpy({ data: bits, shape: [6], dtype: 'float16' }), serializeNpy({ data: bits, shape: [6], dtype: '<f2' }));
  assert.throws(() => serializeNpy({ data: bits, shape: [6] }), /Uint16Array with dtype '<f2' or 'bfloat16'/);
  if (typeof Float16Array === 'function') {
    // eslint-disable-next-line no-undef
    const h = new Float16Array(bits.buffer);
    assert.deepEqual(serializeNpy({ data: h, shape: [6] }), serializeNpy({ data: bits, shape: [6], dtype: '<f2' }));
  }
});

test("widenHalf is exported by ms-deform-attn/npy: a parsed '<f2' file's bits become its float32 values", async () => {
  const { widenHalf: fromNpy } = await import('../../bindings/npy.js');
  const bits = Uint16Array.from([0x3555, 0x0400]); // 0.33325195..., 2^-14
  const a = parseNpy(serializeNpy({ data: bits, shape: [2], dtype: '<f2' }));
  assert.deepEqual([...fromNpy(a.data, 'float16')], [0.333251953125, 2 ** -14]);
});
