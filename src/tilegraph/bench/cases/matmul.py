"""n x n x n products: torch.matmul (cuBLAS), tg.matmul, compile; and with a GELU epilogue."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.kernels.matmul import matmul_ref
from tilegraph.testing import randn

from ..suite import Case, KernelBench, compiled


def matmul_gelu_formula(a, b):
    return F.gelu(a @ b, approximate="tanh")


def _matmul(n: int, dtype: torch.dtype, device: str) -> Case:
    a = randn(n, n, dtype=dtype, device=device)
    b = randn(n, n, dtype=dtype, device=device, scale=n**-0.5)
    out = torch.empty_like(a)
    return Case(f"{n}x{n}x{n}", {
        "torch.matmul": torch.matmul,
        "tilegraph": lambda a, b: tg.matmul(a, b, out=out),
        "torch.compile": compiled(torch.matmul),
    }, lambda a, b: matmul_ref(a.double(), b.double()), (a, b), "torch.matmul",
        bytes=3 * n * n * a.element_size(), flops=2 * n**3)


def _matmul_gelu(n: int, dtype: torch.dtype, device: str) -> Case:
    case = _matmul(n, dtype, device)
    out = torch.empty(n, n, dtype=dtype, device=device)
    case.variants = {
        "torch.matmul + F.gelu": matmul_gelu_formula,
        "tilegraph fused": lambda a, b: tg.matmul(a, b, activation="gelu_tanh", out=out),
        "torch.compile": compiled(matmul_gelu_formula),
    }
    case.reference = lambda a, b: matmul_ref(a.double(), b.double(), activation="gelu_tanh")
    case.baseline = "torch.matmul + F.gelu"
    return case


BENCHES = [
    KernelBench("matmul", "n of an n x n x n product", torch.bfloat16, (1024, 4096, 8192),
                (64, 100), _matmul, throughput="tflops"),
    KernelBench("matmul_gelu", "n of gelu(a @ b), n x n x n", torch.bfloat16, (4096,), (64,),
                _matmul_gelu, throughput="tflops"),
]
