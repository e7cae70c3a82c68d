#!/usr/bin/env python3
"""Writes seeds of fuzz_npz (tests/fuzz/corpus/npz/) with Python's zipfile: stored and deflated
members, zip64 extra fields (force_zip64) and zip64 end records, data descriptors (an archive
written to a stream that cannot seek), other extra fields beside zip64's, and comments. The
members are small .npy-like bytes with structure, so deflate uses both literals and matches.
Run once; the outputs are committed (deflated.npz and stored.npz are older seeds)."""
import io
import os
import struct
import zipfile

d = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus', 'npz')
os.makedirs(d, exist_ok=True)
members = [('value.npy', b'\x93NUMPY\x01\x00v\x00' + b"{'descr': '<f4', 'shape': (3,), }" + bytes(range(40)) * 3),
           ('spatial_shapes.npy', struct.pack('<4q', 3, 4, 2, 2))]


class Unseekable(io.RawIOBase):
    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def archive(name, method, zip64=False, stream=False, extra=b'', comment=b''):
    out = Unseekable() if stream else io.BytesIO()
    with zipfile.ZipFile(out, 'w', compression=method, allowZip64=True) as z:
        for n, data in members:
            info = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = method
            info.extra = extra
            info.comment = comment
            with z.open(info, 'w', force_zip64=zip64) as f:
                f.write(data)
        z.comment = comment
    with open(os.path.join(d, name), 'wb') as f:
        f.write(out.buf if stream else out.getvalue())


# an extra field of another kind (0x5455, extended timestamp) before zip64's
ts = struct.pack('<HHBI', 0x5455, 5, 1, 1577836800)
for method, m in ((zipfile.ZIP_STORED, 'stored'), (zipfile.ZIP_DEFLATED, 'deflated')):
    archive(f'{m}-zip64.npz', method, zip64=True)
    archive(f'{m}-descriptor.npz', method, stream=True)
    archive(f'{m}-descriptor-zip64.npz', method, zip64=True, stream=True)
    archive(f'{m}-extra.npz', method, extra=ts, comment=b'a comment')
