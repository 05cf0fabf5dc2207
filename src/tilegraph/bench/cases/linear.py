"""Batch-1 decode projections: y = x @ W.T, and x + rms_norm(x) * g @ W.T fused."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import randn

from ..suite import Case, KernelBench, compiled


def norm_linear_formula(x, w, g, eps: float = 1e-6):
    """The decode projection unfused: y = x + rms_norm(x) * g @ W.T."""
    return F.linear(F.rms_norm(x, (x.shape[-1],), g, eps), w) + x


def _linear(d: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(1, d, dtype=dtype, device=device)
    w = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    out = torch.empty_like(x)
    return Case(f"1x{d} @ {d}x{d}", {
        "F.linear": F.linear,
        "tilegraph": lambda x, w: tg.linear(x, w, out=out),
        "tilegraph, no PDL": lambda x, w: tg.linear(x, w, out=out, prefetch_weight=False),
        "torch.compile": compiled(F.linear),
    }, lambda x, w: linear_ref(x.double(), w.double()), (x, w), "F.linear",
        bytes=(d * d + 2 * d) * x.element_size(), flops=2 * d * d, graph=True,
        rotate=(1,))  # weights rotated past L2; x is in L2, written by the previous layer


def _norm_linear(d: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(1, d, dtype=dtype, device=device)
    w = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    g = randn(d, dtype=dtype, device=device)
    out = torch.empty_like(x)
    return Case(f"1x{d} @ {d}x{d}", {
        "torch formula": norm_linear_formula,
        "tilegraph fused": lambda x, w, g: tg.linear(x, w, norm_weight=g, residual=x, out=out),
        "tilegraph fused, no PDL": lambda x, w, g: tg.linear(
            x, w, norm_weight=g, residual=x, out=out, prefetch_weight=False),
        "torch.compile": compiled(norm_linear_formula),
    }, lambda x, w, g: linear_ref(x.double(), w.double(), norm_weight=g.double(),
                                  residual=x.double()),
        (x, w, g), "torch formula", bytes=(d * d + 4 * d) * x.element_size(), flops=2 * d * d,
        graph=True, rotate=(1, 2))  # a layer's weights rotated past L2, as in _linear


BENCHES = [
    KernelBench("linear", "d of a batch-1 projection 1xd @ dxd", torch.bfloat16,
                (512, 2048, 4096), (96, 260), _linear),
    KernelBench("norm_linear", "d of x + rms_norm(x) @ W.T, batch 1", torch.bfloat16,
                (512, 2048, 4096), (96, 260), _norm_linear),
]
