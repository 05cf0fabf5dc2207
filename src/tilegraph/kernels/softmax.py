"""Softmax along one dimension (the last by default), computed in fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import (
    as_rows,
    check_no_out_for_grad,
    check_no_overlap,
    check_tensor,
    prepare_out,
    wants_grad,
)
from ._launch import row_config, softmax_config
from ._ops import custom_op, functional_op


@triton.jit
def _softmax_kernel(y_ptr, stride_ym, x_ptr, stride_xm, n_rows, n_cols,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr,
                    LOAD_POLICY: tl.constexpr):
    """y_ij = exp(x_ij - max_j x_ij) / sum_j exp(x_ij - max_j x_ij), BLOCK_M rows a program.

    Rows that fit one tile are read once; longer rows take an online pass (running max and
    rescaled sum, Milakov & Gimelshein 2018) and a second pass that writes.
    LOAD_POLICY: eviction policy of the one-tile path's x load ("" or "evict_last").
    """
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    x_rows = x_ptr + rows[:, None] * stride_xm
    y_rows = y_ptr + rows[:, None] * stride_ym
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_rows + cols[None, :], mask=mask, other=-float("inf"),
                    eviction_policy=LOAD_POLICY).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=1)[:, None])
        y = e / tl.sum(e, axis=1)[:, None]
        tl.store(y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)
    else:
        row_max = tl.full([BLOCK_M], -float("inf"), tl.float32)
        row_sum = tl.zeros([BLOCK_M], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            mask = row_mask[:, None] & (start + cols[None, :] < n_cols)
            x = tl.load(x_rows + start + cols[None, :], mask=mask,
                        other=-float("inf")).to(tl.float32)
            new_max = tl.maximum(row_max, tl.max(x, axis=1))
            row_sum = row_sum * tl.exp(row_max - new_max) + tl.sum(
                tl.exp(x - new_max[:, None]), axis=1)
            row_max = new_max
        for start in range(0, n_cols, BLOCK_N):
            mask = row_mask[:, None] & (start + cols[None, :] < n_cols)
            x = tl.load(x_rows + start + cols[None, :], mask=mask,
                        other=-float("inf")).to(tl.float32)
            y = tl.exp(x - row_max[:, None]) / row_sum[:, None]
            tl.store(y_rows + start + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_backward_kernel(dx_ptr, stride_dxm, dy_ptr, stride_dym, y_ptr, stride_ym,
                             n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                             SINGLE_PASS: tl.constexpr, LOAD_POLICY: tl.constexpr):
    """dx_ij = y_ij (dy_ij - sum_j dy_ij y_ij), y the forward's output; BLOCK_M rows a
    program, rows longer than one tile read twice (the dot product, then dx)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    dy_rows = dy_ptr + rows[:, None] * stride_dym
    y_rows = y_ptr + rows[:, None] * stride_ym
    dx_rows = dx_ptr + rows[:, None] * stride_dxm
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        mask = row_mask[:, None] & (cols[None, :] < n_cols)
        dy = tl.load(dy_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        y = tl.load(y_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        dx = y * (dy - tl.sum(dy * y, axis=1)[:, None])
        tl.store(dx_rows + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)
    else:
        dot = tl.zeros([BLOCK_M], tl.float32)
        for start in range(0, n_cols, BLOCK_N):
            mask = row_mask[:, None] & (start + cols[None, :] < n_cols)
            dy = tl.load(dy_rows + start + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            y = tl.load(y_rows + start + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dot += tl.sum(dy * y, axis=1)
        for start in range(0, n_cols, BLOCK_N):
            mask = row_mask[:, None] & (start + cols[None, :] < n_cols)
            dy = tl.load(dy_rows + start + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            y = tl.load(y_rows + start + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            dx = y * (dy - dot[:, None])
            tl.store(dx_rows + start + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


def _launch_softmax(x: torch.Tensor, dim: int, out: torch.Tensor) -> None:
    if dim != x.ndim - 1:
        # Move `dim` last, normalise dense rows, move it back into the caller's buffer.
        moved = torch.empty_like(x.movedim(dim, -1), memory_format=torch.contiguous_format)
        _launch_softmax(x.movedim(dim, -1), moved.ndim - 1, moved)
        out.copy_(moved.movedim(-1, dim))
        return
    x_rows, y_rows = as_rows(x), out.view(-1, x.shape[-1])
    n_rows, n_cols = x_rows.shape
    config = softmax_config(n_rows, n_cols, x.element_size())
    _softmax_kernel[(triton.cdiv(n_rows, config["BLOCK_M"]),)](
        y_rows, y_rows.stride(0), x_rows, x_rows.stride(0), n_rows, n_cols, **config)


_run_softmax = custom_op("softmax", _launch_softmax)


def _softmax_forward(x: torch.Tensor, dim: int) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if out.numel():
        _launch_softmax(x, dim, out)
    return out


def _softmax_input_grad(dy: torch.Tensor, y: torch.Tensor, dim: int) -> torch.Tensor:
    """dx from dy and the forward's output y (contiguous), along `dim`."""
    # Rows along the last dimension: move `dim` there (a copy only when it is not already).
    dy_last = dy.movedim(dim, -1).contiguous()
    y_last = y.movedim(dim, -1).contiguous()
    dx_last = torch.empty_like(y_last)
    if dx_last.numel():
        dy_rows, y_rows = dy_last.view(-1, y_last.shape[-1]), y_last.view(-1, y_last.shape[-1])
        dx_rows = dx_last.view(dy_rows.shape)
        n_rows, n_cols = dy_rows.shape
        config = row_config(n_rows, n_cols, y.element_size())
        _softmax_backward_kernel[(triton.cdiv(n_rows, config["BLOCK_M"]),)](
            dx_rows, dx_rows.stride(0), dy_rows, dy_rows.stride(0), y_rows, y_rows.stride(0),
            n_rows, n_cols, **config)
    return dx_last.movedim(-1, dim).contiguous()


_softmax_grad_op = functional_op("softmax_backward", _softmax_input_grad,
                                 lambda dy, y, dim: torch.empty_like(y))


def _save_output(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)
    ctx.dim = inputs[1]


def _softmax_backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return _softmax_grad_op(dy, y, ctx.dim), None


_softmax_autograd = functional_op("softmax_autograd", _softmax_forward,
                                  lambda x, dim: torch.empty_like(x))
_softmax_autograd.register_autograd(_softmax_backward, setup_context=_save_output)


def softmax(x: torch.Tensor, dim: int = -1, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax of x along `dim`; same shape and dtype as x."""
    check_tensor("x", x, min_ndim=1, differentiable=True)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {type(dim).__name__} {dim!r}")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"dim={dim!r} is out of range for x of shape {tuple(x.shape)}")
    if wants_grad(x):
        check_no_out_for_grad(out)
        return _softmax_autograd(x, dim % x.ndim)
    out = prepare_out(out, x.shape, x.dtype, x.device)
    # In place (out is x) is fine: a program reads each element before writing it, and
    # reads no other program's rows.
    check_no_overlap(out, "x", x, allow_identical=True)
    if out.numel():
        _run_softmax(x, dim % x.ndim, out)
    return out


def softmax_ref(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Reference: max-shifted exp over sum, float64 for float64 input, else fp32 cast back."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    v = x.to(compute)
    e = torch.exp(v - v.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)
