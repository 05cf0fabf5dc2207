"""RMSNorm over rows: the formula in PyTorch, F.rms_norm, tg.rms_norm, torch.compile."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.testing import randn

from ..suite import ROWS_CPU, ROWS_GPU, Case, KernelBench, compiled, plain_pass, row_count


def rms_norm_formula(x, w, eps: float = 1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def _rms_norm(n: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(row_count(device), n, dtype=dtype, device=device)
    w = randn(n, dtype=dtype, device=device)
    out = torch.empty_like(x)
    return Case(f"{x.shape[0]}x{n}", {
        "torch formula": rms_norm_formula,
        "F.rms_norm": lambda x, w: F.rms_norm(x, (n,), w, 1e-6),
        "tilegraph": lambda x, w: tg.rms_norm(x, w, out=out),
        "torch.compile": compiled(rms_norm_formula),
    }, lambda x, w: rms_norm_ref(x.double(), w.double()), (x, w), "F.rms_norm",
        bytes=(2 * x.numel() + n) * x.element_size(), yardsticks=plain_pass(x),
        rotate=(0,), graph=True)  # w stays in L2, as it does across a real batch


BENCHES = [KernelBench("rms_norm", f"columns ({ROWS_GPU} rows; {ROWS_CPU} on CPU)",
                       torch.bfloat16, (1024, 4096, 16384), (100, 781), _rms_norm)]
