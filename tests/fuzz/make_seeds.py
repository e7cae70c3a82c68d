#!/usr/bin/env python3
"""Writes the committed seed corpus of fuzz_kernel (tests/fuzz/corpus/kernel/).

Input layout (see fuzz_kernel.c): B, Q, H, channel choice, levels, points, options, data mode,
corruption, corruption argument, six level-shape bytes, then tensor data. Seeds cover every
option combination in each data mode, every corruption kind, the buffer-misuse cases and
many queries."""
import os
import random

d = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'kernel')
os.makedirs(d, exist_ok=True)
rnd = random.Random(7)


def write(name, b):
    with open(os.path.join(d, name), 'wb') as f:
        f.write(bytes(b))


for opt in range(16):
    for mode in range(3):
        hdr = [1, 2, 1, opt % 14, opt % 4, 1 + opt % 3, opt | ((mode + opt) % 4 << 6) | ((opt % 3) << 4),
               mode, 255, 0]
        write(f'opt{opt:02d}-mode{mode}', hdr + [rnd.randrange(256) for _ in range(6 + 48)])
for kind in range(18):
    for arg in (1, 6):
        hdr = [0, 1, 0, 2, 1, 1, rnd.randrange(256), 1, kind, arg + kind]
        write(f'corrupt{kind:02d}-{arg}', hdr + [0x21, 0x43, 0x11, 0x77, 0, 0] + [rnd.randrange(256) for _ in range(8)])
for k in range(54, 62):
    write(f'misuse{k}', [0, 0, 0, 0, 0, 0, 0, 1, k, k * 3] + [0x11] * 6)
# many queries (30..1080): past the query blocks, level stretches and walking chunks
for k in (0xf0, 0xf1, 0xf7, 0xff):
    write(f'many-queries-{k:02x}', [0, k, 0, 2, 0, 1, rnd.randrange(256), 1, 255, 0] + [rnd.randrange(256) for _ in range(6 + 32)])
# every special coordinate (NaN, +-inf, +-1e30, just outside [0, 1], subnormals) in each padding
for opt in (0, 4, 8, 12):
    specials = sum(([240, i] for i in range(16)), [])
    write(f'specials-opt{opt:02d}', [0, 0, 0, 1, 0, 0, opt, 2, 255, 0, 0x33, 0, 0, 0, 0, 0] + specials + [7] * 32)
# one thin level with a long side (the kernels' exact double path): 1000..5080 pixels, both
# axes, every padding / align_corners; and past 2^24 (corruption 62 with argument 0xc0 and up)
for opt in (0, 5, 10, 15):
    for arg in (0x01, 0x24, 0x47, 0x82):
        write(f'thin-opt{opt:02d}-{arg:02x}', [0, 2, 1, opt % 14, 0, 2, opt, opt % 3, 63 + opt % 3, arg] + [rnd.randrange(256) for _ in range(64)])
for opt, arg in ((0, 0xc8), (13, 0xe1)):
    write(f'huge-opt{opt:02d}-{arg:02x}', [0, 1, 0, 1, 0, 1, opt, 1, 62, arg] + [rnd.randrange(256) for _ in range(64)])
