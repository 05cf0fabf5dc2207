"""Few rows (2 to 16) of a 16-bit linear layer on the tensor cores, weight streamed once.

A decode batch is too small for a GEMM tile (64-128 rows) and too large for the
matrix-vector kernels, whose per-row reductions on the CUDA cores cost more with every row
(8 rows of 16-bit weights reached 41-57% of the bandwidth floor where one row reached
76-101%, notes/kernels.md). Here the rows are padded to one 16-row tensor-core tile in registers:
each program streams a (BLOCK_N, K) strip of W exactly once, and mma does all rows of a
(BLOCK_N, BLOCK_K) tile at once, so 16 rows cost about what 2 do. Small BLOCK_N (16-64)
keeps enough programs to fill every SM when N is a few thousand.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._matvec import rows_epilogue

DOT_ROWS = 16  # the tile's rows: an mma operand needs at least 16


@triton.jit
def _dot_rows_step(acc, sum_sq, w, x_ptrs, norm_w_ptr, offs_m, offs_k, M, k0, K,
                   HAS_NORM: tl.constexpr, DOT_PRECISION: tl.constexpr,
                   UPCAST_DOT: tl.constexpr):
    """Fold weight tile w (BLOCK_N, BLOCK_K), columns k0 + offs_k, into acc (BLOCK_M, BLOCK_N)."""
    k_mask = offs_k < K - k0
    x = tl.load(x_ptrs + k0, mask=(offs_m < M)[:, None] & k_mask[None, :], other=0.0)
    if HAS_NORM:
        xf = x.to(tl.float32)
        sum_sq += tl.sum(xf * xf, axis=1)
        g = tl.load(norm_w_ptr + k0 + offs_k, mask=k_mask, other=0.0).to(tl.float32)
        x = xf * g[None, :]
    # x may be fp32 (a residual stream kept in fp32): the mma takes the weights' dtype.
    x = x.to(w.dtype)
    if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
        x = x.to(tl.float32)
        w = w.to(tl.float32)
    acc = tl.dot(x, tl.trans(w), acc, input_precision=DOT_PRECISION)
    return acc, sum_sq


@triton.jit
def _dot_rows_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, stride_wn,
                     norm_w_ptr, bias_ptr, res_ptr, stride_rm,
                     M, N, K, eps,
                     HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                     ACTIVATION: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                     DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """y_mn = act(rstd_m * sum_k x_mk g_k W_nk + b_n) + r_mn for M <= BLOCK_M rows and
    BLOCK_N outputs a program, rstd_m = 1 / sqrt(mean_k x_mk^2 + eps) gathered on the way.
    fp32 weights multiply at DOT_PRECISION: "tf32x3" (three tf32 products, about fp32's
    accuracy, still far below the weight stream's time at 16 rows) or "ieee".

    PREFETCH_WEIGHT (programmatic dependent launch): the first weight tile is loaded before
    griddepcontrol.wait, while the previous kernel in the stream finishes; everything else
    after it. The next kernel is released only after the wait, so at most one kernel ahead
    of this one is still running when it prefetches (the launcher checks that kernel does
    not write W).
    """
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]

    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    sum_sq = tl.zeros([BLOCK_M], tl.float32)
    w = tl.load(w_ptrs, mask=n_mask[:, None] & (offs_k < K)[None, :], other=0.0)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start its prefetch
    acc, sum_sq = _dot_rows_step(acc, sum_sq, w, x_ptrs, norm_w_ptr, offs_m,
                                 offs_k, M, 0, K, HAS_NORM, DOT_PRECISION, UPCAST_DOT)
    for k0 in range(BLOCK_K, K, BLOCK_K):
        w = tl.load(w_ptrs + k0, mask=n_mask[:, None] & (offs_k < K - k0)[None, :], other=0.0)
        acc, sum_sq = _dot_rows_step(acc, sum_sq, w, x_ptrs, norm_w_ptr, offs_m,
                                     offs_k, M, k0, K, HAS_NORM, DOT_PRECISION, UPCAST_DOT)

    rows_epilogue(acc, sum_sq, y_ptr, stride_ym, bias_ptr, res_ptr, stride_rm, offs_m, offs_n,
                  M, N, K, eps, HAS_NORM, HAS_BIAS, HAS_RESIDUAL, ACTIVATION)


def launch_dot_rows(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                    norm_weight, eps: float, bias, activation: str, residual,
                    config: dict, pdl: bool):
    """out = linear(x) for 1 to DOT_ROWS rows of x (M, K), x and out with unit column
    stride; config: BLOCK_N, BLOCK_K, num_warps, num_stages, and for fp32 weights
    optionally DOT_PRECISION (default "tf32x3")."""
    M, K = x.shape
    N = weight.shape[0]
    if not 1 <= M <= DOT_ROWS:
        raise ValueError(f"the tensor-core decode kernel takes 1 to {DOT_ROWS} rows, got {M}")
    config = dict(config)
    precision = config.pop("DOT_PRECISION", "tf32x3")
    grid = (triton.cdiv(N, config["BLOCK_N"]),)
    return _dot_rows_kernel[grid](
        out, out.stride(0), x, x.stride(0), weight, weight.stride(0),
        norm_weight, bias, residual, residual.stride(0) if residual is not None else 0,
        M, N, K, eps, HAS_NORM=norm_weight is not None, HAS_BIAS=bias is not None,
        HAS_RESIDUAL=residual is not None, ACTIVATION=activation, PREFETCH_WEIGHT=pdl,
        DOT_PRECISION=precision if weight.dtype == torch.float32 else "tf32",
        UPCAST_DOT=INTERPRET and weight.dtype == torch.bfloat16,
        BLOCK_M=DOT_ROWS, **config, **({"launch_pdl": True} if pdl else {}))
