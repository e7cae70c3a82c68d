// parseNpy reads NumPy's bool ('|b1'), as PyTorch padding
// masks are saved, into a Uint8Array of 0 and 1, and refuses any other byte; the layer takes the
// parsed mask; the CLI still refuses a bool file where an integer one is needed, with the native
// CLI's very message.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { NpyError, parseNpy, serializeNpy } from '../../bindings/npy.js';
import { MSDeformAttn } from '../../bindings/tfjs.js';

tf.enableProdMode();

// The bytes numpy.save writes for np.array(mask, dtype=bool): version 1.0, a header padded with
// spaces to 64 bytes and a newline, then one byte per element.
function boolNpy(bytes, shape) {
  const dict = `{'descr': '|b1', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  const out = new Uint8Array(total + bytes.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, (total - 10) & 0xff, (total - 10) >> 8]);
  for (let i = 0; i < dict.length; i++) out[10 + i] = dict.charCodeAt(i);
  out.fill(0x20, 10 + dict.length, total - 1);
  out[total - 1] = 0x0a;
  out.set(bytes, total);
  return out;
}

test("parseNpy reads '|b1' into a Uint8Array of 0 and 1; any other byte is an NpyError naming it", () => {
  const a = parseNpy(boolNpy([0, 1, 1, 0, 0, 1], [2, 3]));
  assert.equal(a.dtype, '|b1');
  assert.deepEqual(a.shape, [2, 3]);
  assert.ok(a.data instanceof Uint8Array);
  assert.deepEqual(Array.from(a.data), [0, 1, 1, 0, 0, 1]);
  assert.throws(() => parseNpy(boolNpy([0, 1, 2], [3])), (e) => e instanceof NpyError
    && e.message === "'|b1' data of shape (3,): element 2 is the byte 2, expected 0 (False) or 1 (True)");
  assert.throws(() => parseNpy(boolNpy([0, 1], [3])), /truncated: shape \(3,\) of '\|b1' needs 3 data bytes, the file has 2/);
});

test('the layer takes a parsed |b1 padding mask: the output of the same mask as a bool tensor', async () => {
  await tf.setBackend('cpu');
  const layer = new MSDeformAttn({ d_model: 4, n_heads: 1, n_levels: 1, n_points: 2, seed: 9 });
  const shapes = [[2, 3]];
  const q = tf.randomUniform([1, 2, 4], -1, 1, 'float32', 1), ref = tf.randomUniform([1, 2, 1, 2], 0, 1, 'float32', 2);
  const input = tf.randomUniform([1, 6, 4], -1, 1, 'float32', 3);
  const bits = [0, 1, 1, 0, 0, 1];
  const a = layer.apply(q, ref, input, shapes, null, parseNpy(boolNpy(bits, [1, 6])));
  const maskTensor = tf.tensor(bits.map(Boolean), [1, 6], 'bool');
  const b = layer.apply(q, ref, input, shapes, null, maskTensor);
  const none = layer.apply(q, ref, input, shapes);
  assert.deepEqual(Array.from(a.dataSync()), Array.from(b.dataSync()));
  assert.notDeepEqual(Array.from(a.dataSync()), Array.from(none.dataSync()), 'the mask matters');
  tf.dispose([q, ref, input, a, b, none, maskTensor]);
  layer.dispose();
});

test('a |b1 file where the CLI needs integers: the native CLI\'s message, exit 2', () => {
  const dir = mkdtempSync(`${tmpdir()}/msda-h3-npy-`);
  try {
    const w = (name, bytes) => writeFileSync(`${dir}/${name}.npy`, bytes);
    w('value', serializeNpy({ data: new Float32Array(6), shape: [1, 6, 1, 1] }));
    w('spatial_shapes', boolNpy([1, 1], [1, 2]));
    w('level_start_index', serializeNpy({ data: BigInt64Array.from([0n]), shape: [1] }));
    w('sampling_locations', serializeNpy({ data: new Float32Array(2), shape: [1, 1, 1, 1, 1, 2] }));
    w('attention_weights', serializeNpy({ data: new Float32Array(1), shape: [1, 1, 1, 1, 1] }));
    const args = ['forward', '--in', dir, '--out', `${dir}/out`];
    const js = spawnSync(process.execPath, [fileURLToPath(new URL('../../bindings/cli.js', import.meta.url)), ...args], { encoding: 'utf8' });
    const native = spawnSync(fileURLToPath(new URL('../../build/native/msda', import.meta.url)), args, { encoding: 'utf8' });
    assert.equal(native.status, 2, native.stderr);
    assert.equal(js.status, 2, js.stderr);
    assert.equal(js.stderr, native.stderr);
    assert.match(js.stderr, /spatial_shapes\.npy: dtype '\|b1': spatial_shapes\.npy must be int64 or int32/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
