"""Adding up the per-program partial sums that column reductions leave (bias and norm-weight
gradients): one small kernel, in a fixed order (results reproducible, unlike atomics), and
cast to the gradient's dtype on the way out (torch's sum then cast would be two kernels)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _sum_partials_kernel(out_ptr, partial_ptr, n_partials, N, BLOCK_P: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    """out_j = sum_p partial_pj for partial (n_partials, N) fp32, row-major; BLOCK_P partial
    rows a step, so that a program has many loads in flight (hundreds of partials are common)."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    total = tl.zeros([BLOCK_N], tl.float32)
    for p0 in range(0, n_partials, BLOCK_P):
        rows = p0 + tl.arange(0, BLOCK_P)
        tile = tl.load(partial_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :],
                       mask=(rows < n_partials)[:, None] & col_mask[None, :], other=0.0)
        total += tl.sum(tile, axis=0)
    tl.store(out_ptr + cols, total.to(out_ptr.dtype.element_ty), mask=col_mask)


def sum_partials(partial: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """partial (P, N) fp32 contiguous summed over P, as dtype (N,); zeros where P is 0."""
    n_partials, n = partial.shape
    out = torch.empty(n, dtype=dtype, device=partial.device)
    if n:
        block_n = min(64, triton.next_power_of_2(n))
        _sum_partials_kernel[(triton.cdiv(n, block_n),)](out, partial, n_partials, n,
                                                         BLOCK_P=64, BLOCK_N=block_n,
                                                         num_warps=4)
    return out
