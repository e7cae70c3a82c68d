#!/usr/bin/python3
"""Writes the graph make bench-webgpu times as 'ORT PyTorch-export': PyTorch's reference of the op,
ms_deform_attn_core_pytorch (Deformable DETR; the same function tests/fixtures/crosscheck uses,
imported from there), as torch.onnx.export writes it (opset 17: GridSample per level with its
Split, Reshape, Transpose, Gather, and the Shape / Slice / Concat that flatten() exports), for
each bench case's shapes: value BLNC, locations BQHLP2, zeros padding, align_corners false.
Run once (`apt-get install python3-torch`; not a build dependency, the .onnx files are committed):

    /usr/bin/python3 tests/bench/torch/export.py [CASE ...]    # default: the four below

CASE is encoder or decoder (DETR's levels) or encoder/N, decoder/N (levels at 1/N of the side,
rounded up, as tests/bench/gpu_model.js's defineCase); it writes ms_deform_attn_core_pytorch.CASE.onnx
here, '/' written as '-'.
"""
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', 'fixtures', 'crosscheck'))
from make_fixture import ms_deform_attn_core_pytorch  # noqa: E402

DETR_LEVELS = [[100, 167], [50, 84], [25, 42], [13, 21]]   # tests/bench/cases.js
B, H, C, P = 1, 8, 32, 4
DECODER_QUERIES = 300


class Reference(torch.nn.Module):
    def __init__(self, levels):
        super().__init__()
        self.levels = levels

    def forward(self, value, locations, weights):
        return ms_deform_attn_core_pytorch(value, self.levels, locations, weights)


def export(case):
    kind, _, n = case.partition('/')
    if kind not in ('encoder', 'decoder') or (n and not n.isdigit()):
        sys.exit(f'export.py: case {case!r}: expected encoder, decoder, encoder/N or decoder/N')
    levels = [[math.ceil(h / int(n)), math.ceil(w / int(n))] if n else [h, w] for h, w in DETR_LEVELS]
    L = sum(h * w for h, w in levels)
    Q = L if kind == 'encoder' else DECODER_QUERIES
    args = (torch.rand(B, L, H, C), torch.rand(B, Q, H, len(levels), P, 2), torch.rand(B, Q, H, len(levels), P))
    path = os.path.join(HERE, f'ms_deform_attn_core_pytorch.{case.replace("/", "-")}.onnx')
    torch.onnx.export(Reference(levels), args, path, opset_version=17,
                      input_names=['value', 'locations', 'weights'], output_names=['out'])
    print(f'{path}: torch {torch.__version__}, levels {levels}, N_q {Q}')


if __name__ == '__main__':
    for case in sys.argv[1:] or ['encoder/8', 'decoder/8', 'encoder', 'decoder']:
        export(case)
