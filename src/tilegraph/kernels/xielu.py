"""xIELU, Apertus's MLP activation, computed in fp32 and chained to its neighbours by PDL.

xIELU (Huang and Schlag 2024, arXiv:2411.13010) takes scalars of its layer's own,
alpha_p, alpha_n, beta and eps:

    xielu(x) = alpha_p x^2 + beta x                       x > 0
               alpha_n (expm1(min(x, eps)) - x) + beta x  otherwise

A decode step runs it between the MLP's up projection (no activation there) and its down
projection: a launch more a layer than a model whose activation tg.linear's epilogue applies.
Like kernels/layer_norm.py's, the kernel reads what no kernel writes (the scalars) before
it waits for the rows, and lets the next kernel start once it has them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import elementwise_shape, sm_count, supports_pdl
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import launched

# Below this magnitude expm1(x) - x is summed as its series: exp(x) - 1 - x would lose the
# x^2 / 2 it is to cancellation in fp32 (half its bits at |x| = 1e-3, and at 0.1 still an
# ulp of exp(x) is 1e-5 of it; 6e-7 at 0.5).
_SERIES_BELOW = tl.constexpr(0.5)


@triton.jit
def _expm1_minus_x(x):
    """expm1(x) - x for x <= 0, accurate to fp32 everywhere: its series x^2/2! + ... +
    x^9/9! above -0.5 (the first term left out is 3e-9 of the sum there), exp(x) - 1 - x
    below."""
    series = x * (1.0 / 40320.0 + x * (1.0 / 362880.0))
    series = x * (1.0 / 720.0 + x * (1.0 / 5040.0 + series))
    series = x * x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + series))))
    return tl.where(x > -_SERIES_BELOW, series, tl.exp(x) - 1.0 - x)


@triton.jit
def _xielu_kernel(y_ptr, x_ptr, params_ptr, n_elements, BLOCK_SIZE: tl.constexpr,
                  PDL: tl.constexpr):
    """y_i = xielu(x_i) over flat contiguous buffers; params_ptr: (alpha_p, alpha_n, beta,
    eps)."""
    # the scalars are no kernel's output: read before the wait, while the last one ends
    alpha_p = tl.load(params_ptr).to(tl.float32)
    alpha_n = tl.load(params_ptr + 1).to(tl.float32)
    beta = tl.load(params_ptr + 2).to(tl.float32)
    eps = tl.load(params_ptr + 3).to(tl.float32)
    if PDL:
        tl.extra.cuda.gdc_wait()               # x is final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start; it waits for us
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    clipped = tl.minimum(x, eps)   # expm1(clipped) - x = (expm1 - id)(clipped) + clipped - x
    negative = alpha_n * (_expm1_minus_x(clipped) + (clipped - x))
    y = tl.where(x > 0.0, alpha_p * x * x, negative) + beta * x
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def xielu_rows(x: torch.Tensor, params: torch.Tensor, out: torch.Tensor | None = None
               ) -> torch.Tensor:
    """xIELU of x (contiguous) with params (alpha_p, alpha_n, beta, eps) (4,) on x's device,
    into `out` (x's shape, contiguous; x itself is fine) or a new tensor. For the model's
    own tensors: no checks, no autograd."""
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    n = x.numel()
    if not n:
        return out
    block, num_warps = elementwise_shape(n, x.element_size())
    programs = triton.cdiv(n, block)
    # Only a grid of one wave: programs of the next kernel started early could otherwise
    # hold the SMs that this grid's later waves need.
    pdl = PDL_ENABLED and supports_pdl(x.device) and programs <= (sm_count(x.device) or 0)
    _xielu_kernel[(programs,)](out, x, params, n, BLOCK_SIZE=block, PDL=pdl,
                               num_warps=num_warps, **({"launch_pdl": True} if pdl else {}))
    launched(x.device, pdl, (out,))
    return out


def xielu_ref(x: torch.Tensor, params: torch.Tensor) -> torch.Tensor:
    """xIELU as transformers' Python version computes it, in x's dtype (params cast to it):
    each product and sum rounded there."""
    alpha_p, alpha_n, beta, eps = params.to(x.dtype).unbind()
    return torch.where(x > 0, alpha_p * x * x + beta * x,
                       (torch.expm1(torch.min(x, eps)) - x) * alpha_n + beta * x)
