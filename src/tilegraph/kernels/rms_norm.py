"""RMSNorm over the last dimension, computed in fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import (
    as_rows,
    check_eps,
    check_like,
    check_no_overlap,
    check_shape,
    check_tensor,
    prepare_out,
)
from ._launch import row_config
from ._ops import custom_op


@triton.jit
def _rms_norm_kernel(y_ptr, y_row_stride, x_ptr, x_row_stride, w_ptr, n_rows, n_cols, eps,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr,
                     LOAD_POLICY: tl.constexpr):
    """y_ij = x_ij / sqrt(mean_j x_ij^2 + eps) * w_j (Zhang & Sennrich 2019), BLOCK_M rows a
    program; rows longer than one tile are read twice (sum of squares, then scale).
    LOAD_POLICY: eviction policy of the one-tile path's x load ("" or "evict_last")."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    x_rows = x_ptr + rows[:, None] * x_row_stride
    y_rows = y_ptr + rows[:, None] * y_row_stride
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        col_mask = cols < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0,
                    eviction_policy=LOAD_POLICY).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        sum_sq = tl.zeros([BLOCK_M], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            mask = row_mask[:, None] & (start + cols[None, :] < n_cols)
            x = tl.load(x_rows + start + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            sum_sq += tl.sum(x * x, axis=1)
        rstd = tl.rsqrt(sum_sq / n_cols + eps)
        for start in range(0, n_cols, BLOCK_N):
            col_mask = start + cols < n_cols
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + start + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
            y = x * rstd[:, None] * w[None, :]
            tl.store(y_rows + start + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
                     out: torch.Tensor) -> None:
    x_rows, y_rows = as_rows(x), out.view(-1, x.shape[-1])
    n_rows, n_cols = x_rows.shape
    config = row_config(n_rows, n_cols, x.element_size())
    _rms_norm_kernel[(triton.cdiv(n_rows, config["BLOCK_M"]),)](
        y_rows, y_rows.stride(0), x_rows, x_rows.stride(0), weight.contiguous(),
        n_rows, n_cols, eps, **config)


_run_rms_norm = custom_op("rms_norm", _launch_rms_norm)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """x / sqrt(mean(x^2, last dim) + eps) * weight; weight has shape (x.shape[-1],)."""
    check_tensor("x", x, min_ndim=1)
    check_tensor("weight", weight)
    check_like("weight", weight, "x", x)
    check_shape("weight", weight, (x.shape[-1],))
    eps = check_eps(eps)
    out = prepare_out(out, x.shape, x.dtype, x.device)
    # In place (out is x) is fine: a program reads each element before writing it, and
    # reads no other program's rows.
    check_no_overlap(out, "x", x, allow_identical=True)
    check_no_overlap(out, "weight", weight)
    if out.numel():
        _run_rms_norm(x, weight, eps, out)
    return out


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Reference, float64 for float64 input, else fp32 cast back."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    v = x.to(compute)
    rstd = torch.rsqrt(v.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (v * rstd * weight.to(compute)).to(x.dtype)
