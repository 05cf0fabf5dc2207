"""RMSNorm over the last dimension, computed in fp32."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import (
    as_rows,
    check_eps,
    check_like,
    check_no_out_for_grad,
    check_no_overlap,
    check_shape,
    check_tensor,
    prepare_out,
    wants_grad,
)
from ._launch import MAX_ROW_TILE, row_config, sm_count, supports_pdl
from ._ops import custom_op, functional_op
from ._partials import sum_partials
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import launched


@triton.jit
def _rms_norm_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, res_ptr, stride_rm, n_rows,
                     n_cols, eps, HAS_RESIDUAL: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr,
                     LOAD_POLICY: tl.constexpr, PDL: tl.constexpr = False):
    """y_ij = x_ij / sqrt(mean_j x_ij^2 + eps) * w_j (Zhang & Sennrich 2019), BLOCK_M rows a
    program; rows longer than one tile are read twice (sum of squares, then scale).
    HAS_RESIDUAL: y_ij = r_ij + that, the norm rounded to y's dtype before the add (as a
    decoder's residual stream adds a normalised output, Gemma's sandwich norms).
    LOAD_POLICY: eviction policy of the one-tile path's x load ("" or "evict_last").
    PDL: launched with programmatic dependent launch (a decode step's norm between two
    projections), it starts while the kernel before it finishes, reads nothing before that
    is done, and then releases the next one, whose weights stream in meanwhile."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # x and the residual are final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start; it waits for us
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < n_rows
    x_rows = x_ptr + rows[:, None] * stride_xm
    y_rows = y_ptr + rows[:, None] * stride_ym
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        col_mask = cols < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0,
                    eviction_policy=LOAD_POLICY).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = _plus_residual(x * rstd[:, None] * w[None, :], res_ptr, stride_rm, rows, cols,
                           mask, y_ptr.dtype.element_ty, HAS_RESIDUAL)
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
            y = _plus_residual(x * rstd[:, None] * w[None, :], res_ptr, stride_rm, rows,
                               start + cols, mask, y_ptr.dtype.element_ty, HAS_RESIDUAL)
            tl.store(y_rows + start + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _plus_residual(y, res_ptr, stride_rm, rows, cols, mask, dtype: tl.constexpr,
                   HAS_RESIDUAL: tl.constexpr):
    """y (rows, cols), or y rounded to dtype plus the residual's values there (fp32)."""
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + rows[:, None] * stride_rm + cols[None, :], mask=mask, other=0.0)
        y = y.to(dtype).to(tl.float32) + res.to(tl.float32)
    return y


@triton.jit
def _rms_norm_backward_kernel(dx_ptr, stride_dxm, dw_partial_ptr, dy_ptr, stride_dym,
                              x_ptr, stride_xm, w_ptr, n_rows, n_cols, rows_per_program, eps,
                              BLOCK_N: tl.constexpr, SINGLE_PASS: tl.constexpr):
    """With r = 1 / sqrt(mean_j x_j^2 + eps), x^_j = x_j r and g_j = dy_j w_j (one row):
    dx_j = r (g_j - x^_j mean_k g_k x^_k), and dw_j = sum over rows of dy_j x^_j.

    Program p takes rows [p R, (p + 1) R) one after another, recomputing r from x (nothing
    saved by the forward but x), and writes its sum of dy x^ to row p of dw_partial (fp32),
    so no two programs add to the same memory. Rows of one tile keep that sum in registers;
    longer rows are read twice and add into their own partial row in memory.
    """
    pid = tl.program_id(0)
    row_start = pid * rows_per_program
    row_end = tl.minimum(row_start + rows_per_program, n_rows)
    partial = dw_partial_ptr + pid.to(tl.int64) * n_cols
    # 64-bit row pointers, advanced one row a step (offsets overflow int32 on big tensors).
    x_ptr += row_start.to(tl.int64) * stride_xm
    dy_ptr += row_start.to(tl.int64) * stride_dym
    dx_ptr += row_start.to(tl.int64) * stride_dxm
    cols = tl.arange(0, BLOCK_N)
    if SINGLE_PASS:
        col_mask = cols < n_cols
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        dw = tl.zeros([BLOCK_N], tl.float32)
        for _ in range(row_start, row_end):
            x = tl.load(x_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
            rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
            x_hat = x * rstd
            g = dy * w
            dx = rstd * (g - x_hat * (tl.sum(g * x_hat, axis=0) / n_cols))
            tl.store(dx_ptr + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
            dw += dy * x_hat
            x_ptr += stride_xm
            dy_ptr += stride_dym
            dx_ptr += stride_dxm
        tl.store(partial + cols, dw, mask=col_mask)
    else:
        for _ in range(row_start, row_end):
            sum_sq = tl.zeros([BLOCK_N], tl.float32)
            sum_gx = tl.zeros([BLOCK_N], tl.float32)
            for start in range(0, n_cols, BLOCK_N):
                col_mask = start + cols < n_cols
                x = tl.load(x_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
                sum_sq += x * x
                sum_gx += dy * w * x
            rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
            mean_gx_hat = tl.sum(sum_gx, axis=0) * rstd / n_cols
            for start in range(0, n_cols, BLOCK_N):
                col_mask = start + cols < n_cols
                x_hat = tl.load(x_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
                x_hat = x_hat * rstd
                dy = tl.load(dy_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
                w = tl.load(w_ptr + start + cols, mask=col_mask, other=0.0).to(tl.float32)
                dx = rstd * (dy * w - x_hat * mean_gx_hat)
                tl.store(dx_ptr + start + cols, dx.to(dx_ptr.dtype.element_ty), mask=col_mask)
                dw = tl.load(partial + start + cols, mask=col_mask, other=0.0)
                tl.store(partial + start + cols, dw + dy * x_hat, mask=col_mask)
            x_ptr += stride_xm
            dy_ptr += stride_dym
            dx_ptr += stride_dxm


def launch_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float,
                     residual: torch.Tensor | None, out: torch.Tensor) -> None:
    x_rows, y_rows = as_rows(x), out.view(-1, x.shape[-1])
    res_rows = as_rows(residual) if residual is not None else None
    n_rows, n_cols = x_rows.shape
    config = row_config(n_rows, n_cols, x.element_size())
    programs = triton.cdiv(n_rows, config["BLOCK_M"])
    # Only a grid of one wave: programs of the next kernel started early could otherwise
    # hold the SMs that this grid's later waves need.
    pdl = PDL_ENABLED and supports_pdl(x.device) and programs <= (sm_count(x.device) or 0)
    _rms_norm_kernel[(programs,)](
        y_rows, y_rows.stride(0), x_rows, x_rows.stride(0), weight.contiguous(), res_rows,
        res_rows.stride(0) if res_rows is not None else 0, n_rows, n_cols, eps,
        HAS_RESIDUAL=residual is not None, PDL=pdl, **config,
        **({"launch_pdl": True} if pdl else {}))
    launched(x.device, pdl, (out,))


_run_rms_norm = custom_op("rms_norm", launch_rms_norm)


def rms_norm_rows(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """rms_norm(x) * weight into a fresh contiguous tensor (no checks, no autograd)."""
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if out.numel():
        launch_rms_norm(x, weight, eps, None, out)
    return out


def _rms_norm_input_grads(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of rms_norm(x, weight, eps) given dy."""
    x_rows, dy_rows = as_rows(x), as_rows(dy)
    n_rows, n_cols = x_rows.shape
    dx = torch.empty_like(x_rows)
    # A few programs an SM, each summing its rows' share of dweight.
    programs = max(1, min(n_rows, 4 * (sm_count(x.device) or 1)))
    rows_per_program = triton.cdiv(n_rows, programs)
    programs = triton.cdiv(n_rows, rows_per_program) if n_rows else 0
    single_pass = triton.next_power_of_2(n_cols) <= MAX_ROW_TILE
    block_n = triton.next_power_of_2(n_cols) if single_pass else 4096
    dw_partial = (torch.empty if single_pass else torch.zeros)(
        (programs, n_cols), dtype=torch.float32, device=x.device)
    if programs:
        _rms_norm_backward_kernel[(programs,)](
            dx, dx.stride(0), dw_partial, dy_rows, dy_rows.stride(0), x_rows, x_rows.stride(0),
            weight.contiguous(), n_rows, n_cols, rows_per_program, eps, BLOCK_N=block_n,
            SINGLE_PASS=single_pass, num_warps=max(1, min(16, block_n // 256)))
    return dx.view(x.shape), sum_partials(dw_partial, weight.dtype)


rms_norm_input_grads = functional_op(
    "rms_norm_backward", _rms_norm_input_grads,
    lambda dy, x, weight, eps: (torch.empty_like(x), torch.empty_like(weight)))


def _save_inputs(ctx, inputs, output) -> None:
    x, weight, ctx.eps = inputs
    ctx.save_for_backward(x, weight)


def _rms_norm_backward(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, dweight = rms_norm_input_grads(dy, x, weight, ctx.eps)
    return (dx if ctx.needs_input_grad[0] else None,
            dweight if ctx.needs_input_grad[1] else None, None)


rms_norm_autograd = functional_op("rms_norm_autograd", rms_norm_rows,
                                  lambda x, weight, eps: torch.empty_like(x))
rms_norm_autograd.register_autograd(_rms_norm_backward, setup_context=_save_inputs)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
             residual: torch.Tensor | None = None,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """x / sqrt(mean(x^2, last dim) + eps) * weight; weight has shape (x.shape[-1],).

    residual (x's shape): returns residual + that, the norm rounded to x's dtype before the
    add, in one kernel (a residual stream adding a normalised output, as Gemma's norms after
    attention and the MLP do)."""
    check_tensor("x", x, min_ndim=1, differentiable=True)
    check_tensor("weight", weight, differentiable=True)
    check_like("weight", weight, "x", x)
    check_shape("weight", weight, (x.shape[-1],))
    if residual is not None:
        check_tensor("residual", residual, differentiable=True)
        check_like("residual", residual, "x", x)
        check_shape("residual", residual, tuple(x.shape))
    eps = check_eps(eps)
    if wants_grad(x, weight, *([residual] if residual is not None else [])):
        check_no_out_for_grad(out)
        normed = rms_norm_autograd(x, weight, eps)
        return normed if residual is None else residual + normed
    out = prepare_out(out, x.shape, x.dtype, x.device)
    # In place (out is x, or the residual) is fine: a program reads each element before
    # writing it, and reads no other program's rows.
    check_no_overlap(out, "x", x, allow_identical=True)
    check_no_overlap(out, "weight", weight)
    if residual is not None:
        check_no_overlap(out, "residual", residual, allow_identical=True)
    if out.numel():
        _run_rms_norm(x, weight, eps, residual, out)
    return out


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6,
                 residual: torch.Tensor | None = None) -> torch.Tensor:
    """Reference, float64 for float64 input, else fp32 cast back (the norm rounded to x's
    dtype before a residual's add)."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    v = x.to(compute)
    rstd = torch.rsqrt(v.pow(2).mean(dim=-1, keepdim=True) + eps)
    normed = (v * rstd * weight.to(compute)).to(x.dtype)
    if residual is None:
        return normed
    return (normed.to(compute) + residual.to(compute)).to(x.dtype)
