#!/usr/bin/env python3
"""Writes the committed seed corpus of fuzz_npy (tests/fuzz/corpus/npy/): valid files of every
accepted version, dtype and kind of shape, and one file per malformed class."""
import os
import struct

d = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'npy')
os.makedirs(d, exist_ok=True)


def npy(descr, shape, data=None, version=1, fortran='False', extra=b'', header=None):
    if header is None:
        shape_text = '(' + ', '.join(str(s) for s in shape) + (',)' if len(shape) == 1 else ')')
        header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    h = header.encode()
    prefix = 10 if version == 1 else 12
    pad = (64 - (prefix + len(h) + 1) % 64) % 64
    h = h + b' ' * pad + b'\n'
    length = struct.pack('<H', len(h)) if version == 1 else struct.pack('<I', len(h))
    if data is None:
        count = 1
        for s in shape:
            count *= s
        size = {'<f4': 4, '<i4': 4, '<i8': 8, '<f2': 2, 'bfloat16': 2}.get(descr, 4)
        data = bytes((i * 37 + 11) & 0xff for i in range(count * size))
    return b'\x93NUMPY' + bytes([version, 0]) + length + h + data + extra


def write(name, b):
    with open(os.path.join(d, name), 'wb') as f:
        f.write(b)


for version in (1, 2, 3):
    for descr in ('<f4', '<i4', '<i8', '<f2', 'bfloat16'):
        for shape in ((), (0,), (3,), (2, 3), (1, 2, 1, 2)):
            write('ok-v%d-%s-%s' % (version, descr.lstrip('<'), 'x'.join(map(str, shape)) or 'scalar'),
                  npy(descr, shape, version=version))
write('bad-magic', b'\x93NUMPX' + npy('<f4', (2,))[6:])
write('bad-version', npy('<f4', (2,), version=4))
write('big-endian', npy('>f4', (2,)))
write('fortran', npy('<f4', (2, 2), fortran='True'))
write('dtype-f8', npy('<f8', (2,)))
write('dtype-pipe', npy('|i4', (2,)))
write('dtype-void2', npy('<V2', (2,)))
write('structured', npy('<f4', (2,), header="{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"))
write('missing-key', npy('<f4', (2,), header="{'descr': '<f4', 'shape': (2,), }"))
write('extra-key', npy('<f4', (2,), header="{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}"))
write('duplicate-key', npy('<f4', (2,), header="{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"))
write('shape-not-tuple', npy('<f4', (2,), header="{'descr': '<f4', 'fortran_order': False, 'shape': (2)}"))
write('negative-dim', npy('<f4', (2,), header="{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}"))
write('overflow-shape', npy('<f4', (2,), header="{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"))
write('huge-dim', npy('<f4', (2,), header="{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"))
write('truncated-data', npy('<f4', (4,))[:-3])
write('trailing-data', npy('<f4', (4,), extra=b'\0\0\0\0'))
write('truncated-header', npy('<f4', (4,))[:40])
write('header-len-too-big', npy('<f4', (4,))[:8] + b'\xff\xff' + npy('<f4', (4,))[10:])
write('empty', b'')
write('magic-only', b'\x93NUMPY')
write('unterminated-string', npy('<f4', (2,), header="{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}"))
write('not-a-dict', npy('<f4', (2,), header="['descr', '<f4']"))
