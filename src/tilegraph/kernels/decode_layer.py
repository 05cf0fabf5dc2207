"""One decode layer in one kernel: h_next = h + (rms_norm(h) * g @ Wq.T) @ Wo.T.

Two matrix-vector products in a row need the whole q = rms_norm(h) * g @ Wq.T before the
second can finish, which as separate kernels costs a kernel boundary (the previous grid
retiring, the next one's wait, x fetched from L2 again) per product. Here program p owns
the rows [p*BQ, (p+1)*BQ) of Wq and the same columns of Wo: it computes its BQ values of q
alone, multiplies them into its (D, BQ) slice of Wo, and adds that partial h_next into an
fp32 accumulator with atomic adds (program 0 adds h itself, the residual). One boundary per
layer instead of two; every program still streams its own weight bytes exactly once.

The price: the accumulator must be zero before the layer starts, and the order of the fp32
additions differs from run to run (results vary in the last bits; the two-kernel path of
tg.linear is bit-reproducible). Layer l zeroes the buffer that layer l+1 will accumulate
into, after its own griddepcontrol.wait, when the previous layer that read it has finished.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._launch import supports_pdl


@triton.jit
def _decode_layer_kernel(acc_ptr, stride_am, zero_ptr, h_ptr, stride_hm, norm_w_ptr,
                         wq_ptr, stride_wq, wo_ptr, stride_wo_out, stride_wo_in,
                         M, D, eps,
                         PREFETCH_WEIGHT: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_Q: tl.constexpr, BLOCK_D: tl.constexpr):
    """acc_m += [p == 0] h_m + sum_{i in rows(p)} Wo[:, i] * q_mi, with
    q_mi = rstd_m * sum_k h_mk g_k Wq_ik and rstd_m = 1 / sqrt(mean_k h_mk^2 + eps).

    Both weight tiles are read as (BLOCK_Q, BLOCK_D): Wq by its rows, Wo by its columns,
    with any strides (stride_wo_out is 1 where Wo is stored transposed, its columns then
    contiguous). PREFETCH_WEIGHT: both tiles are loaded before griddepcontrol.wait, while
    the previous kernel in the stream finishes.
    """
    pid = tl.program_id(0)
    offs_q = pid * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = offs_q < D
    d_mask = offs_d < D
    tile_mask = q_mask[:, None] & d_mask[None, :]
    rows = offs_q[:, None].to(tl.int64)
    wq = tl.load(wq_ptr + rows * stride_wq + offs_d[None, :], mask=tile_mask, other=0.0)
    wo = tl.load(wo_ptr + rows * stride_wo_in + offs_d[None, :].to(tl.int64) * stride_wo_out,
                 mask=tile_mask, other=0.0)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_launch_dependents()  # the next layer may start its own prefetch
        tl.extra.cuda.gdc_wait()               # h is final; the buffer to zero is free
    g = tl.load(norm_w_ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    for m in tl.static_range(BLOCK_M):
        n_valid = tl.where(m < M, D, 0)  # masks nothing in rows past M
        h = tl.load(h_ptr + m * stride_hm + offs_d, mask=offs_d < n_valid,
                    other=0.0).to(tl.float32)                                 # (BD,)
        rstd = tl.rsqrt(tl.sum(h * h) / D + eps)
        q = tl.sum(wq.to(tl.float32) * (h * g)[None, :], axis=1) * rstd        # (BQ,)
        part = tl.sum(wo.to(tl.float32) * q[:, None], axis=0)                  # (BD,)
        part += tl.where(pid == 0, h, 0.0)
        tl.atomic_add(acc_ptr + m * stride_am + offs_d, part, mask=offs_d < n_valid,
                      sem="relaxed")
        tl.store(zero_ptr + m * stride_am + offs_q, tl.zeros([BLOCK_Q], tl.float32),
                 mask=offs_q < n_valid)


# A program's two weight tiles (its rows of Wq, its columns of Wo) live in registers: at most
# half of an SM's 256 KB register file, so a program fits beside the next layer's.
MAX_TILE_BYTES = 128 * 1024
# Weight bytes a thread holds: 512 was the fastest, or within 10% of it, in every swept case.
BYTES_PER_THREAD = 512
# Rows of h applied one after another to the tiles; more rows belong to a GEMM.
MAX_ROWS = 8


def decode_layer_config(rows: int, d: int, element_size: int) -> dict:
    """Block shape: rows of Wq (and columns of Wo) a program owns, and its warps.

    From whole-stack sweeps on an H100 (benchmarks/explore_decode_layer.py): 16 rows a
    program at batch 1, 8 with more rows of h (more work a row), 512 weight bytes a thread;
    within 10% of the best shape swept wherever one kernel a layer wins at all.
    """
    block_d = triton.next_power_of_2(d)
    block_q = 16 if rows == 1 else 8
    tile_bytes = 2 * block_q * block_d * element_size
    num_warps = max(1, min(16, tile_bytes // (32 * BYTES_PER_THREAD)))
    return {"BLOCK_Q": block_q, "BLOCK_D": block_d, "num_warps": num_warps, "num_stages": 1}


def one_kernel_is_faster(config: dict, rows: int, d: int, element_size: int,
                         sm_count: int | None) -> bool:
    """Whether a stack runs faster with this kernel than with two tg.linear kernels a layer.

    Measured (H100, us per token in a graph, one kernel against two a layer): d=2048 bf16
    batch 1 169 vs 177; d=512 fp32 batch 1/2/4/8 45/83/96/163 vs 65/110/141/258. Slower:
    d=2048 fp32 (302 vs 270 at its best shape: a 32 MB layer does not fit in flight in one
    wave of programs, so half of them start only when the first half has finished) and
    d=2048 bf16 with 2-8 rows (285-576 vs 196-380: applying the tile row by row keeps its
    fp32 copy, 256 values a thread, in registers, which spills).
    """
    tile_bytes = 2 * config["BLOCK_Q"] * config["BLOCK_D"] * element_size
    programs = triton.cdiv(d, config["BLOCK_Q"])
    one_wave = tile_bytes <= MAX_TILE_BYTES and (sm_count is None or programs <= sm_count)
    fits_rows = rows == 1 or BYTES_PER_THREAD // element_size <= 128
    return one_wave and fits_rows and 1 <= rows <= MAX_ROWS


def launch_decode_layer(acc: torch.Tensor, zero: torch.Tensor, h: torch.Tensor,
                        norm_weight: torch.Tensor, wq: torch.Tensor, wo: torch.Tensor,
                        eps: float, config: dict, prefetch_weight: bool = True) -> None:
    """acc += layer(h), with acc zero on entry; zero.zero_(). acc and zero are fp32 (M, D)
    views with the same strides; wo may be any strided view of Wo. Shapes, dtypes and
    devices are unchecked: the caller (LayerStack) owns the buffers and has checked h."""
    M, D = h.shape
    # The kernel walks h, Wq's rows and the norm weight with unit stride (any Wo strides do).
    h, wq, norm_weight = (t if t.stride(-1) == 1 else t.contiguous()
                          for t in (h, wq, norm_weight))
    pdl = {"launch_pdl": True} if prefetch_weight and supports_pdl(h.device) else {}
    _decode_layer_kernel[(triton.cdiv(D, config["BLOCK_Q"]),)](
        acc, acc.stride(0), zero, h, h.stride(0), norm_weight,
        wq, wq.stride(0), wo, wo.stride(0), wo.stride(1),
        M, D, eps, PREFETCH_WEIGHT=bool(pdl), BLOCK_M=triton.next_power_of_2(M), **config, **pdl)
