"""Softmax over rows: four PyTorch ops, torch.softmax, tg.softmax, torch.compile."""

from __future__ import annotations

import torch

import tilegraph as tg
from tilegraph.kernels.softmax import softmax_ref
from tilegraph.testing import randn

from ..suite import ROWS_CPU, ROWS_GPU, Case, KernelBench, compiled, plain_pass, row_count


def softmax_formula(x):
    """Softmax in four PyTorch ops (max, exp, sum, divide), as first written by hand."""
    shifted = x - x.max(dim=-1, keepdim=True).values
    numerator = torch.exp(shifted)
    return numerator / numerator.sum(dim=-1, keepdim=True)


def _softmax(n: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(row_count(device), n, dtype=dtype, device=device, scale=3.0)
    out = torch.empty_like(x)
    return Case(f"{x.shape[0]}x{n}", {
        "torch formula": softmax_formula,
        "torch.softmax": lambda x: torch.softmax(x, -1),
        "tilegraph": lambda x: tg.softmax(x, out=out),
        "torch.compile": compiled(softmax_formula),
    }, lambda x: softmax_ref(x.double()), (x,), "torch.softmax",
        bytes=2 * x.numel() * x.element_size(), yardsticks=plain_pass(x), graph=True)


BENCHES = [KernelBench("softmax", f"columns ({ROWS_GPU} rows; {ROWS_CPU} on CPU)",
                       torch.float32, (1024, 4096, 16384), (100, 781), _softmax)]
