"""Fused linear layer: y = act(rms_norm(x) * norm_weight @ weight.T + bias) + residual.

One kernel for the whole expression, every part optional. Few rows (decode) take a
matrix-vector kernel that streams the weight once with all rows at a time (one row of 16-bit
weights: _gemv_kernel, whose tile needs fewer registers); many rows take the tiled
tensor-core GEMM of matmul.py with the same prologue and epilogue.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._activation import activation_code, activation_ref, apply_activation
from ._checks import (
    as_rows,
    check_eps,
    check_like,
    check_no_overlap,
    check_shape,
    check_tensor,
    prepare_out,
)
from ._launch import MATVEC_MAX_ROWS, supports_pdl
from ._ops import custom_op
from .matmul import launch_gemm
from .rms_norm import rms_norm_ref


@triton.jit
def _matvec_step(acc, sum_sq, x_ptr, stride_xm, w, norm_w_ptr, offs_m, offs_k, M, k0, K,
                 HAS_NORM: tl.constexpr, BLOCK_M: tl.constexpr, ROW_LOOP: tl.constexpr,
                 X_CACHE: tl.constexpr):
    """Fold one (BLOCK_N, BLOCK_K) weight tile into the (BLOCK_M, BLOCK_N) accumulator.

    One row (BLOCK_M == 1) is applied as a vector in the tile's own layout: a 2-D x tile and
    the broadcast product cost layout shuffles through shared memory (notes/decode.md). For
    more rows, ROW_LOOP applies the tile to one x row at a time, so the weight tile can stay
    as large as at batch 1 whatever BLOCK_M is; otherwise one (BM, BN, BK) broadcast product
    does all rows, whose size limits the weight tile to 1 / BM of that. X_CACHE is the cache
    modifier of the x loads (".cg" reads x from L2 when other programs of a running grid
    wrote it).
    """
    k_mask = offs_k < K - k0
    if HAS_NORM:
        g = tl.load(norm_w_ptr + k0 + offs_k, mask=k_mask, other=0.0).to(tl.float32)
    if BLOCK_M == 1:  # one vector in the weight tile's own layout: no 2-D detour
        x1 = tl.load(x_ptr + k0 + offs_k, mask=k_mask, other=0.0,
                     cache_modifier=X_CACHE).to(tl.float32)                   # (BK,)
        if HAS_NORM:
            sum_sq += tl.sum(x1 * x1)
            x1 = x1 * g
        acc += tl.sum(w.to(tl.float32) * x1[None, :], axis=1)[None, :]
    else:
        # All rows in one load: loaded row by row, each load would wait behind the previous
        # row's reduction (a round trip to L2 per row).
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k0 + offs_k[None, :],
                    mask=(offs_m < M)[:, None] & k_mask[None, :], other=0.0,
                    cache_modifier=X_CACHE)
        x = x.to(tl.float32)                                                  # (BM, BK)
        if HAS_NORM:
            sum_sq += tl.sum(x * x, axis=1)
            x = x * g[None, :]
        if ROW_LOOP:
            for m in tl.static_range(BLOCK_M):
                x_m = tl.sum(tl.where(offs_m[:, None] == m, x, 0.0), axis=0)  # (BK,)
                part = tl.sum(w.to(tl.float32) * x_m[None, :], axis=1)        # (BN,)
                acc += tl.where(offs_m[:, None] == m, part[None, :], 0.0)
        else:
            acc += tl.sum(x[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)  # (BM, BN)
    return acc, sum_sq


@triton.jit
def _matvec_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, stride_wn,
                   norm_w_ptr, bias_ptr, res_ptr, stride_rm,
                   M, N, K, eps,
                   HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                   ACTIVATION: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   ROW_LOOP: tl.constexpr):
    """y_mn = act(rstd_m * sum_k x_mk g_k W_nk + b_n) + r_mn for BLOCK_N outputs a program,
    with rstd_m = 1 / sqrt(mean_k x_mk^2 + eps) gathered in the same pass over K.

    Each program streams its BLOCK_N rows of W exactly once and applies them to every x row;
    x is tiny and re-read from L2 by every program.

    PREFETCH_WEIGHT (launched with programmatic dependent launch, Hopper+): the first W tile
    is loaded before griddepcontrol.wait, i.e. while the previous kernel in the stream is
    still finishing; x, norm weights, bias and residual are read only after the wait. Valid
    only when no earlier kernel in flight writes W (decode weights are constant).
    """
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    m_mask = offs_m < M
    n_mask = offs_n < N
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]

    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    sum_sq = tl.zeros([BLOCK_M], tl.float32)
    w_first = tl.load(w_ptrs, mask=n_mask[:, None] & (offs_k < K)[None, :], other=0.0)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start its own prefetch
        tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
    acc, sum_sq = _matvec_step(acc, sum_sq, x_ptr, stride_xm, w_first, norm_w_ptr, offs_m,
                               offs_k, M, 0, K, HAS_NORM, BLOCK_M, ROW_LOOP, "")
    for k0 in range(BLOCK_K, K, BLOCK_K):
        w = tl.load(w_ptrs + k0, mask=n_mask[:, None] & (offs_k < K - k0)[None, :], other=0.0)
        acc, sum_sq = _matvec_step(acc, sum_sq, x_ptr, stride_xm, w, norm_w_ptr, offs_m,
                                   offs_k, M, k0, K, HAS_NORM, BLOCK_M, ROW_LOOP, "")

    if HAS_NORM:
        acc = acc * tl.rsqrt(sum_sq / K + eps)[:, None]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)[None, :]
    acc = apply_activation(acc, ACTIVATION)
    y_mask = m_mask[:, None] & n_mask[None, :]
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :], mask=y_mask,
                      other=0.0)
        acc += res.to(tl.float32)
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=y_mask)


@triton.jit
def _gemv_step(acc, sum_sq, w, x_ptr, norm_w_ptr, cols, k0, K, HAS_NORM: tl.constexpr):
    """Fold one (BLOCK_N, SPLIT, CHUNK) weight tile w, columns k0 + cols, into acc (BLOCK_N,).
    The norm weights are read here, after the wait, although they are constant: read with
    the weight tile before it, their registers cost more (fewer programs an SM) than the
    load saves (notes/kernels.md)."""
    k_mask = cols < K - k0
    x = tl.load(x_ptr + k0 + cols, mask=k_mask, other=0.0).to(tl.float32)   # (1, S, C)
    if HAS_NORM:
        sum_sq += tl.sum(x * x)
        x = x * tl.load(norm_w_ptr + k0 + cols, mask=k_mask, other=0.0).to(tl.float32)
    acc += tl.sum(tl.sum(w.to(tl.float32) * x, axis=2), axis=1)
    return acc, sum_sq


@triton.jit
def _gemv_kernel(y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr, res_ptr,
                 N, K, eps,
                 HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                 ACTIVATION: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                 BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, CHUNK: tl.constexpr):
    """One row: y_n = act(rstd * sum_k x_k g_k W_nk + b_n) + r_n, BLOCK_N outputs a program,
    rstd = 1 / sqrt(mean_k x_k^2 + eps) gathered in the same pass over K.

    The weight tile is (BLOCK_N, SPLIT, CHUNK), SPLIT chunks of one row side by side, which
    Triton lays out with the warps across the chunks and each thread holding a few 16-byte
    vectors of every row: the tile costs little more than its own registers, so small
    programs fit many to an SM and the next kernel's programs find room to start streaming
    early (notes/kernels.md). PREFETCH_WEIGHT as in _matvec_kernel: the first weight tile is
    read before griddepcontrol.wait.
    """
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    cols = tl.arange(0, SPLIT)[None, :, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
    w_ptrs = w_ptr + offs_n[:, None, None].to(tl.int64) * stride_wn + cols  # (BN, S, C)
    w_mask = n_mask[:, None, None]
    acc = tl.zeros([BLOCK_N], tl.float32)
    sum_sq = 0.0
    w = tl.load(w_ptrs, mask=w_mask & (cols < K), other=0.0)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start its own prefetch
        tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
    acc, sum_sq = _gemv_step(acc, sum_sq, w, x_ptr, norm_w_ptr, cols, 0, K, HAS_NORM)
    for k0 in range(SPLIT * CHUNK, K, SPLIT * CHUNK):
        w = tl.load(w_ptrs + k0, mask=w_mask & (cols < K - k0), other=0.0)
        acc, sum_sq = _gemv_step(acc, sum_sq, w, x_ptr, norm_w_ptr, cols, k0, K, HAS_NORM)

    if HAS_NORM:
        acc = acc * tl.rsqrt(sum_sq / K + eps)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    acc = apply_activation(acc, ACTIVATION)
    if HAS_RESIDUAL:
        acc += tl.load(res_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs_n, acc.to(y_ptr.dtype.element_ty), mask=n_mask)


# Batch 1, 16-bit weights: programs of GEMV_WARPS warps, GEMV_ELEMENTS_PER_THREAD weight
# values a thread, rows split in chunks of GEMV_CHUNK columns (see matvec_config).
GEMV_WARPS = 4
GEMV_ELEMENTS_PER_THREAD = 64
GEMV_CHUNK = 128
# Batch 1, fp32 weights: a _matvec_kernel tile of at most 32 KB, 64 elements a thread.
MATVEC_TILE_BYTES = 32 * 1024
MATVEC_ELEMENTS_PER_THREAD = 64


def gemv_config(N: int, K: int) -> dict:
    """Tile of the one-row kernel (_gemv_kernel): GEMV_WARPS warps, GEMV_ELEMENTS_PER_THREAD
    values a thread, chunks of GEMV_CHUNK columns, at most 16 rows."""
    block_k = max(16, min(triton.next_power_of_2(K), 2048))
    chunk = min(GEMV_CHUNK, block_k)
    block_n = GEMV_ELEMENTS_PER_THREAD * 32 * GEMV_WARPS // block_k
    block_n = max(1, min(16, block_n, triton.next_power_of_2(N)))
    num_warps = block_n * block_k // (32 * GEMV_ELEMENTS_PER_THREAD)
    return {"BLOCK_N": block_n, "SPLIT": block_k // chunk, "CHUNK": chunk,
            "num_warps": max(1, min(GEMV_WARPS, num_warps)), "num_stages": 1}


def matvec_config(M: int, N: int, K: int, element_size: int = 4) -> dict:
    """Kernel and tile for 1 to MATVEC_MAX_ROWS rows, chosen by rule rather than by timing:
    timing one weight (as an autotuner does) sees it hot in L2, while a layer stack streams
    every weight from memory. The rules come from sweeps over weights rotated past L2 and
    over whole decode stacks (notes/kernels.md, notes/decode.md):
    - one row, 16-bit: _gemv_kernel, chunks of 128 columns, 64 values a thread, 4 warps.
    - one row, fp32: _matvec_kernel with the whole row (up to 2048 columns), at most 32 KB
      and 8 rows, 64 values a thread (64 fp32 values are 64 registers of data, so the split
      tile saves less there).
    - several rows: 8 rows x up to 2048 columns over 4 warps, applied to one x row at a
      time (ROW_LOOP): one broadcast product over all rows needs a tile 1 / rows as large.
    """
    block_k = max(16, min(triton.next_power_of_2(K), 2048))
    if M == 1 and element_size <= 2:
        return gemv_config(N, K)
    if M == 1:
        block_n = max(1, min(8, MATVEC_TILE_BYTES // (block_k * element_size)))
        num_warps = block_n * block_k // (32 * MATVEC_ELEMENTS_PER_THREAD)
        return {"BLOCK_N": block_n, "BLOCK_K": block_k,
                "num_warps": max(1, min(16, num_warps)), "num_stages": 1, "ROW_LOOP": False}
    return {"BLOCK_N": 8, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 1, "ROW_LOOP": True}


def _launch_matvec(x, weight, out, norm_weight, eps, bias, activation, residual,
                   prefetch_weight: bool = False, config: dict | None = None):
    """y = linear(x) for 1 to MATVEC_MAX_ROWS rows; a config with SPLIT (one row only) runs
    _gemv_kernel, one with BLOCK_K _matvec_kernel. Returns Triton's compiled-kernel handle."""
    M, K = x.shape
    N = weight.shape[0]
    config = config or matvec_config(M, N, K, weight.element_size())
    pdl = {"launch_pdl": True} if prefetch_weight and supports_pdl(x.device) else {}
    parts = dict(HAS_NORM=norm_weight is not None, HAS_BIAS=bias is not None,
                 HAS_RESIDUAL=residual is not None, ACTIVATION=activation,
                 PREFETCH_WEIGHT=bool(pdl))
    grid = (triton.cdiv(N, config["BLOCK_N"]),)
    if "SPLIT" in config:
        if M != 1:
            raise ValueError(f"the one-row kernel got {M} rows")
        return _gemv_kernel[grid](out, x, weight, weight.stride(0), norm_weight, bias,
                                  residual, N, K, eps, **parts, **config, **pdl)
    return _matvec_kernel[grid](
        out, out.stride(0), x, x.stride(0), weight, weight.stride(0),
        norm_weight, bias, residual, residual.stride(0) if residual is not None else 0,
        M, N, K, eps, **parts, BLOCK_M=triton.next_power_of_2(M), **config, **pdl)


def _launch_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   norm_weight: torch.Tensor | None, norm_eps: float, activation: str,
                   residual: torch.Tensor | None, prefetch_weight: bool,
                   out: torch.Tensor) -> None:
    x_rows = as_rows(x)
    y_rows = out.view(-1, weight.shape[0])
    res_rows = as_rows(residual) if residual is not None else None
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    bias = bias.contiguous() if bias is not None else None
    norm_weight = norm_weight.contiguous() if norm_weight is not None else None
    if x_rows.shape[0] <= MATVEC_MAX_ROWS:
        _launch_matvec(x_rows, weight, y_rows, norm_weight, norm_eps, bias, activation,
                       res_rows, prefetch_weight)
    else:
        # tg.decode_layer may pass fp32 rows with 16-bit weights; tensor cores take one dtype.
        x_rows = x_rows.to(weight.dtype)
        launch_gemm(x_rows, weight.t(), y_rows, norm_weight=norm_weight, eps=norm_eps,
                    bias=bias, activation=activation, residual=res_rows)


_run_linear = custom_op("linear", _launch_linear)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           norm_weight: torch.Tensor | None = None, norm_eps: float = 1e-6,
           activation: str | None = None, residual: torch.Tensor | None = None,
           out: torch.Tensor | None = None, prefetch_weight: bool = False) -> torch.Tensor:
    """act(rms_norm(x) * norm_weight @ weight.T + bias) + residual in one kernel.

    x (..., K); weight (N, K); bias (N,); norm_weight (K,) turns the RMSNorm prologue on;
    residual (..., N). All tensors share x's dtype and device. Returns (..., N).

    prefetch_weight=True (few rows, Hopper or newer; ignored elsewhere) launches with
    programmatic dependent launch: the kernel starts streaming `weight` while the previous
    kernel in the stream is still finishing, and reads everything else only after it has.
    Pass it only when no kernel still in flight writes `weight`, as with a model's weights.
    """
    check_tensor("x", x, min_ndim=1)
    check_tensor("weight", weight)
    check_like("weight", weight, "x", x)
    if weight.ndim != 2:
        raise ValueError(f"weight must be 2-D (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")
    n_out, k = weight.shape
    if x.shape[-1] != k:
        raise ValueError(f"x has {x.shape[-1]} features but weight expects {k} "
                         f"(x {tuple(x.shape)}, weight {tuple(weight.shape)})")
    if k == 0:
        raise ValueError("x and weight have 0 input features; nothing to normalise or sum")
    out_shape = (*x.shape[:-1], n_out)
    for name, t, shape in (("bias", bias, (n_out,)), ("norm_weight", norm_weight, (k,)),
                           ("residual", residual, out_shape)):
        if t is not None:
            check_tensor(name, t)
            check_like(name, t, "x", x)
            check_shape(name, t, shape)
    code = activation_code(activation)
    norm_eps = check_eps(norm_eps)
    out = prepare_out(out, out_shape, x.dtype, x.device)
    for name, t in (("x", x), ("weight", weight), ("bias", bias), ("norm_weight", norm_weight)):
        check_no_overlap(out, name, t)
    check_no_overlap(out, "residual", residual, allow_identical=True)
    if out.numel():
        _run_linear(x, weight, bias, norm_weight, norm_eps, code, residual,
                    bool(prefetch_weight), out)
    return out


def linear_ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
               norm_weight: torch.Tensor | None = None, norm_eps: float = 1e-6,
               activation: str | None = None, residual: torch.Tensor | None = None):
    """The unfused expression, float64 for float64 input, else fp32 cast back."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    h = x.to(compute)
    if norm_weight is not None:
        h = rms_norm_ref(h, norm_weight.to(compute), norm_eps)
    y = h @ weight.to(compute).T
    if bias is not None:
        y = y + bias.to(compute)
    y = activation_ref(y, activation)
    if residual is not None:
        y = y + residual.to(compute)
    return y.to(x.dtype)
