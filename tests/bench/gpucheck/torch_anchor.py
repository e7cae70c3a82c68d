#!/usr/bin/env python3
"""PyTorch's reference of the op (Deformable DETR's ms_deform_attn_core_pytorch: F.grid_sample per
level, imported from the checkout's tests/fixtures/crosscheck/make_fixture.py), forward and
backward through autograd, on the bench's exact inputs (tests/bench/cases.js makeCase, ported
below with numpy and checked bit for bit by --hash), timed with CUDA events (median).

    python3 tests/bench/gpucheck/torch_anchor.py CHECKOUT [encoder decoder ...] [--reps 20] [--json out.json] [--hash]

--hash prints the inputs' FNV-1a hashes (as cases.h / cuda_anchor prints them) and exits.
Runs on the CPU where there is no CUDA device (a smoke test; its times mean nothing).
"""
import json
import os
import sys
import time

import numpy as np

DETR = [[100, 167], [50, 84], [25, 42], [13, 21]]
H, C, P = 8, 32, 4


def mulberry32(seed, first, count):
    """Draws first+1 .. first+count of rng(seed) (cases.js): the state is a counter, so any range."""
    a = (np.uint64(seed) + np.arange(first + 1, first + count + 1, dtype=np.uint64) * np.uint64(0x6D2B79F5)) & np.uint64(0xffffffff)
    t = a.astype(np.uint32)
    with np.errstate(over='ignore'):
        t = (t ^ (t >> np.uint32(15))) * (t | np.uint32(1))
        t = t ^ (t + (t ^ (t >> np.uint32(7))) * (t | np.uint32(61)))
    return (t ^ (t >> np.uint32(14))).astype(np.float64) / 4294967296.0


def make_case(name):
    kind, _, div = name.partition('/')
    div = int(div or 1)
    levels = [[-(-h // div), -(-w // div)] for h, w in DETR]
    starts = np.cumsum([0] + [h * w for h, w in levels])[:-1]
    L = sum(h * w for h, w in levels)
    Q = L if kind == 'encoder' else 300
    B, NL = 1, len(levels)
    seed = 0x5eed + len(name)
    at = 0

    def draws(n):
        nonlocal at
        r = mulberry32(seed, at, n)
        at += n
        return r
    value = (-1 + 2 * draws(B * L * H * C)).astype(np.float32)
    gout = (-1 + 2 * draws(B * Q * H * C)).astype(np.float32)
    weights = (draws(B * Q * H * NL * P) / (NL * P)).astype(np.float32)
    per = 2 + 2 * H * NL * P
    r = draws(B * Q * per).reshape(B, Q, per)
    rx, ry = r[:, :, 0], r[:, :, 1]
    if Q == L:   # the encoder: each query at its own pixel's centre
        q = np.arange(Q)
        lev = np.searchsorted(starts, q, side='right') - 1
        pix = q - starts[lev]
        wl = np.array([w for _, w in levels])[lev]
        hl = np.array([h for h, _ in levels])[lev]
        rx = np.broadcast_to(((pix % wl) + 0.5) / wl, (B, Q))
        ry = np.broadcast_to((np.floor(pix / wl) + 0.5) / hl, (B, Q))
    d = r[:, :, 2:].reshape(B, Q, H * NL * P, 2)
    lw = np.array([levels[(i // P) % NL][1] for i in range(H * NL * P)], dtype=np.float64)
    lh = np.array([levels[(i // P) % NL][0] for i in range(H * NL * P)], dtype=np.float64)
    locs = np.empty((B, Q, H * NL * P, 2), dtype=np.float32)
    locs[..., 0] = rx[:, :, None] + (-4 + 8 * d[..., 0]) / lw
    locs[..., 1] = ry[:, :, None] + (-4 + 8 * d[..., 1]) / lh
    return dict(levels=levels, value=value.reshape(B, L, H, C), gout=gout.reshape(B, Q, H * C),
                weights=weights.reshape(B, Q, H, NL, P), locs=locs.reshape(B, Q, H, NL, P, 2))


def fnv(x):
    h = 2166136261
    for byte in np.ascontiguousarray(x).view(np.uint8).tobytes():
        h = ((h ^ byte) * 16777619) & 0xffffffff
    return f'{h:08x}'


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        sys.exit(2)
    root = args.pop(0)
    reps = 20
    out_json = None
    if '--reps' in args:
        i = args.index('--reps'); reps = int(args[i + 1]); del args[i:i + 2]
    if '--json' in args:
        i = args.index('--json'); out_json = args[i + 1]; del args[i:i + 2]
    only_hash = '--hash' in args
    if only_hash:
        args.remove('--hash')
    names = args or ['encoder', 'decoder']
    if only_hash:
        for n in names:
            c = make_case(n)
            print(f"{n} value {fnv(c['value'])} locs {fnv(c['locs'])} weights {fnv(c['weights'])} gout {fnv(c['gout'])}")
        return
    import torch
    sys.path.insert(0, os.path.join(root, 'tests', 'fixtures', 'crosscheck'))
    from make_fixture import ms_deform_attn_core_pytorch
    cuda = torch.cuda.is_available()
    dev = 'cuda' if cuda else 'cpu'
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0) if cuda else 'CPU (smoke test: times mean nothing)'}")
    rows = []
    for n in names:
        c = make_case(n)
        t = {k: torch.from_numpy(np.ascontiguousarray(c[k])).to(dev) for k in ('value', 'locs', 'weights', 'gout')}
        shapes = c['levels']

        def fwd():
            with torch.no_grad():
                return ms_deform_attn_core_pytorch(t['value'], shapes, t['locs'], t['weights'])
        v = t['value'].clone().requires_grad_(True)
        lo = t['locs'].clone().requires_grad_(True)
        w = t['weights'].clone().requires_grad_(True)

        def fwd_bwd():
            v.grad = lo.grad = w.grad = None
            out = ms_deform_attn_core_pytorch(v, shapes, lo, w)
            out.backward(t['gout'])

        def timed(fn):
            for _ in range(3):
                fn()
            ms = []
            for _ in range(reps if cuda else 1):
                if cuda:
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record(); fn(); e1.record(); torch.cuda.synchronize(); ms.append(e0.elapsed_time(e1))
                else:
                    s = time.perf_counter(); fn(); ms.append(1e3 * (time.perf_counter() - s))
            return sorted(ms)[len(ms) // 2]
        f_ms = timed(fwd)
        fb_ms = timed(fwd_bwd)
        row = dict(case=n, fwd_ms=f_ms, fwd_bwd_ms=fb_ms, bwd_ms=fb_ms - f_ms)
        rows.append(row)
        print(f"| {n} | PyTorch grid_sample reference | fwd {f_ms:.3f} ms | fwd+bwd {fb_ms:.3f} ms | bwd ~{fb_ms - f_ms:.3f} ms |")
    if out_json:
        with open(out_json, 'w') as fh:
            json.dump(dict(device=torch.cuda.get_device_name(0) if cuda else 'cpu', torch=torch.__version__, rows=rows), fh, indent=1)


if __name__ == '__main__':
    main()
