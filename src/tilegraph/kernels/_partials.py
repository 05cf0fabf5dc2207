"""Adding up the per-program partial sums that column reductions leave (bias and norm-weight
gradients): one small kernel, in a fixed order (results reproducible, unlike atomics), and
cast to the gradient's dtype on the way out (torch's sum then cast would be two kernels)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import sm_count


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


def sum_partials(partial: torch.Tensor, dtype: torch.dtype, *, block_n: int | None = None,
                 block_p: int | None = None) -> torch.Tensor:
    """partial (P, N) fp32 contiguous summed over P, as dtype (N,); zeros where P is 0.
    block_n (columns a program) and block_p (partial rows a step) override the rule."""
    n_partials, n = partial.shape
    out = torch.empty(n, dtype=dtype, device=partial.device)
    if n:
        if block_n is None:
            # Narrow column blocks, so that every SM has a program: the partial rows are
            # the long side (research/probe_sum_partials.py, H100: 512 x 1024 partials 3.0 us
            # in 8-column blocks, 6.3 us in 64-column ones; 1000 x 768 4.7 against 11.4).
            block_n = 16 if n >= 32 * (sm_count(partial.device) or 1) else 8
        if block_p is None:
            block_p = min(128, max(16, triton.next_power_of_2(max(n_partials, 1))))
        _sum_partials_kernel[(triton.cdiv(n, block_n),)](out, partial, n_partials, n,
                                                         BLOCK_P=block_p, BLOCK_N=block_n,
                                                         num_warps=4)
    return out
