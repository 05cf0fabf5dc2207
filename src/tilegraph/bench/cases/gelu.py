"""GELU (tanh) over n elements: the formula in PyTorch, F.gelu, CUDA C++, tg.gelu, compile."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.cuda import ExtensionUnavailable, gelu_extension, missing_build_tools
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.testing import randn

from ..compare import Unavailable
from ..suite import Case, KernelBench, compiled, element_size, plain_pass


def gelu_tanh_formula(x):
    """GELU as a user writes it in PyTorch: six kernels, each a round trip to memory."""
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def _cuda_gelu():
    reason = missing_build_tools()
    if reason is not None:
        return Unavailable(reason)

    def run(x):
        try:
            return gelu_extension().gelu_tanh_cuda(x)
        except ExtensionUnavailable as e:  # tools present but unusable: say so, do not crash
            raise RuntimeError(f"CUDA C++ build unavailable: {e}") from e
    return run


def _gelu(n: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(n, dtype=dtype, device=device, scale=3.0)
    out = torch.empty_like(x)
    return Case(f"{n}", {
        "torch formula": gelu_tanh_formula,
        "F.gelu": lambda x: F.gelu(x, approximate="tanh"),
        "CUDA C++": _cuda_gelu(),
        "tilegraph": lambda x: tg.gelu(x, out=out),
        "torch.compile": compiled(gelu_tanh_formula),
    }, lambda x: gelu_ref(x.double()), (x,), "F.gelu", bytes=2 * n * element_size(dtype),
        yardsticks=plain_pass(x), graph=True)


BENCHES = [KernelBench("gelu", "elements", torch.float32, (2**16, 2**20, 2**24, 2**26),
                       (1000, 4099), _gelu)]
