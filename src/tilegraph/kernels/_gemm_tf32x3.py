"""Exact-fp32 products on the tensor cores from operands split in memory: a GEMM candidate.

Each fp32 operand is split once by a pass of its own into a tf32 part and the fp32
remainder, x = x_hi + x_lo, both stored K-major (A as (M, K), B as B.T (N, K)) whatever the
input's layout. The product then takes three tf32 products a tile, lo*hi + hi*lo + hi*hi (the
lo*lo term lies below fp32's rounding), straight from shared memory as the tensor cores want
them. Triton's own tf32x3 splits inside the loop and ran at about cuBLAS SGEMM's rate on an
H100; split first, the products alone ran at 1.6-2.4x it at six of seven shapes (0.6x at
777 x 1536 x 2345), 1.0-1.7x with the split passes where the tuner picked them
(research/probe_split_tf32.py, research/probe_fp32_gemm.py).

One operand may instead be split tile by tile in the loop (IN_LOOP): it is the left operand
of the dots, which Hopper's warp-group dot takes from registers (research/ir_inloop_operand.py
shows it so in the compiled IR), so unlike Triton's tf32x3 (both operands split in registers,
the right one then stored to shared memory) nothing goes back through shared memory. That
saves the operand's split pass, which costs the same at any token count for a weight: a
training step's weight products at 256-512 tokens took 20-33% less time so
(research/probe_inloop_split.py, H100); at 4096 tokens splitting both first still wins some.

Each tile's three products start from zero and are added to the fp32 accumulator on the
CUDA cores: accumulated on the tensor cores across the whole K loop, the error grew with K
(3e-5 at K = 4096, 60 times cuBLAS's), since the tensor cores add inside an instruction with
fewer bits than fp32; tile by tile it is below cuBLAS's (1.5-3.6e-7 against 4-11e-7).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._gemm_tiles import store_tile, tile_position
from ._split_workspace import plan_split


@triton.jit
def split_tf32(x):
    """(hi, lo) of fp32 x: hi = x rounded to tf32 (to nearest, ties away; truncated where
    rounding would overflow), lo = x - hi (exact in fp32; 0 where x is infinite)."""
    bits = x.to(tl.uint32, bitcast=True)
    hi = ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)
    overflowed = (tl.abs(hi) == float("inf")) & (tl.abs(x) != float("inf"))
    hi = tl.where(overflowed, (bits & 0xFFFFE000).to(tl.float32, bitcast=True), hi)
    lo = tl.where(tl.abs(hi) == float("inf"), 0.0, x - hi)   # inf - inf would be NaN
    return hi, lo


@triton.jit
def _split_kernel(x_ptr, stride_xr, stride_xc, hi_ptr, lo_ptr, stride_out, R, C,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """split_tf32 of x (R, C) of any strides, hi and lo each stored (R, C) with row stride
    stride_out."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows < R)[:, None] & (cols < C)[None, :]
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * stride_xr + cols[None, :] * stride_xc,
                mask=mask, other=0.0)
    hi, lo = split_tf32(x)
    out = rows.to(tl.int64)[:, None] * stride_out + cols[None, :]
    tl.store(hi_ptr + out, hi, mask=mask)
    tl.store(lo_ptr + out, lo, mask=mask)


@triton.jit
def _gemm_tf32x3_kernel(c_ptr, stride_cm, stride_cn, a_hi_ptr, a_lo_ptr, stride_am, stride_ak,
                        b_hi_ptr, b_lo_ptr, stride_bn, stride_bk,
                        bias_ptr, res_ptr, stride_rm, stride_rn, preact_ptr, stride_pm,
                        stride_pn, partial_ptr, count_ptr, M, N, K, K_SPLIT,
                        HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                        STORE_PREACT: tl.constexpr, ACTIVATION: tl.constexpr,
                        IN_LOOP: tl.constexpr, SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = act(A @ B + bias) + residual in fp32 from A = a_hi + a_lo (M, K) and
    B.T = b_hi + b_lo (N, K), element (m, k) of A at m * stride_am + k * stride_ak and
    (n, k) of B.T at n * stride_bn + k * stride_bk.

    IN_LOOP "a" or "b": that operand is the plain fp32 matrix (its hi pointer; lo unused),
    split tile by tile in registers, which saves its split pass. The operand split in the
    loop is the left one of the dots, which the tensor cores may take from registers:
    for "b" the tile is computed transposed, (B.T @ A.T).T.

    SPLIT_K > 1: program (tile, s) sums K from s * K_SPLIT only, so that a grid of fewer
    output tiles than SMs (few tokens times a narrow layer) still fills the GPU. Each leaves
    its partial tile in the workspace (_split_workspace.py) and counts itself in; the last of
    the tile's SPLIT_K to arrive adds the partials in split order (bit-reproducible whatever
    the arrival order), zeroes the counter for the next launch and runs the epilogue."""
    tile = tl.program_id(0)
    pid_m, pid_n = tile_position(tile, tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), GROUP_M)
    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    # Rows/cols past the edge wrap onto valid ones: loads need no mask, the store drops them.
    offs_m = tl.arange(0, BLOCK_M) % (M - row0)
    offs_n = tl.arange(0, BLOCK_N) % (N - col0)
    offs_k = tl.arange(0, BLOCK_K)
    a_offs = (row0 + offs_m).to(tl.int64)[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_offs = (col0 + offs_n).to(tl.int64)[:, None] * stride_bn + offs_k[None, :] * stride_bk
    k_stop = K
    k_start = 0
    if SPLIT_K > 1:
        k_start = tl.program_id(1) * K_SPLIT
        k_stop = tl.minimum(K, k_start + K_SPLIT)
    if IN_LOOP == "b":
        acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(k_start, k_stop, BLOCK_K):
        k_mask = offs_k[None, :] < k_stop - k0
        if IN_LOOP == "a":
            a_hi, a_lo = split_tf32(tl.load(a_hi_ptr + a_offs + k0 * stride_ak, mask=k_mask,
                                            other=0.0))
        else:
            a_hi = tl.load(a_hi_ptr + a_offs + k0 * stride_ak, mask=k_mask, other=0.0)
            a_lo = tl.load(a_lo_ptr + a_offs + k0 * stride_ak, mask=k_mask, other=0.0)
        if IN_LOOP == "b":
            b_hi, b_lo = split_tf32(tl.load(b_hi_ptr + b_offs + k0 * stride_bk, mask=k_mask,
                                            other=0.0))
            # the small terms first; the tile's sum joins acc in fp32 (module docstring)
            part = tl.dot(b_lo, tl.trans(a_hi), input_precision="tf32")
            part = tl.dot(b_hi, tl.trans(a_lo), part, input_precision="tf32")
            acc += tl.dot(b_hi, tl.trans(a_hi), part, input_precision="tf32")
        else:
            b_hi = tl.load(b_hi_ptr + b_offs + k0 * stride_bk, mask=k_mask, other=0.0)
            b_lo = tl.load(b_lo_ptr + b_offs + k0 * stride_bk, mask=k_mask, other=0.0)
            part = tl.dot(a_lo, tl.trans(b_hi), input_precision="tf32")
            part = tl.dot(a_hi, tl.trans(b_lo), part, input_precision="tf32")
            acc += tl.dot(a_hi, tl.trans(b_hi), part, input_precision="tf32")
    if IN_LOOP == "b":
        acc = tl.trans(acc)
    if SPLIT_K > 1:
        # partials (SPLIT_K, tiles, BLOCK_M, BLOCK_N), whole tiles (wrapped rows included)
        in_tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tiles = tl.num_programs(0)
        mine = partial_ptr + (tl.program_id(1) * tiles + tile).to(tl.int64) * (BLOCK_M * BLOCK_N)
        tl.store(mine + in_tile, acc)
        tl.debug_barrier()  # every thread's partials are out before the count says so
        arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for s in range(SPLIT_K):  # split order, whatever the arrival order
                split_tile = partial_ptr + (s * tiles + tile).to(tl.int64) * (BLOCK_M * BLOCK_N)
                acc += tl.load(split_tile + in_tile, cache_modifier=".cg")
            tl.store(count_ptr + tile, 0)
            store_tile(acc, row0, col0, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, res_ptr,
                       stride_rm, stride_rn, preact_ptr, stride_pm, stride_pn, HAS_BIAS,
                       HAS_RESIDUAL, STORE_PREACT, ACTIVATION, BLOCK_M, BLOCK_N)
    else:
        store_tile(acc, row0, col0, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, res_ptr,
                   stride_rm, stride_rn, preact_ptr, stride_pm, stride_pn, HAS_BIAS,
                   HAS_RESIDUAL, STORE_PREACT, ACTIVATION, BLOCK_M, BLOCK_N)


def split_pitch(columns: int) -> int:
    """The row stride split_rows gives C columns: a multiple of 32 elements (128 bytes), so
    that every row starts aligned and Triton, which specialises strides divisible by 16,
    vectorises the loads whatever C is."""
    return triton.cdiv(columns, 32) * 32


def split_rows(x: torch.Tensor, pitch: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) of the fp32 matrix x (R, C), any strides, each a fresh (R, C) matrix with
    unit column stride and row stride `pitch` (default split_pitch(C))."""
    R, C = x.shape
    pitch = split_pitch(C) if pitch is None else pitch
    hi = torch.empty((R, pitch), dtype=torch.float32, device=x.device)[:, :C]
    lo = torch.empty((R, pitch), dtype=torch.float32, device=x.device)[:, :C]
    grid = (triton.cdiv(R, 64), triton.cdiv(C, 64))
    _split_kernel[grid](x, x.stride(0), x.stride(1), hi, lo, pitch, R, C, BLOCK_R=64,
                        BLOCK_C=64, num_warps=4)
    return hi, lo


def launch_gemm_tf32x3(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, config: dict, *,
                       bias=None, activation: str = "none", residual=None,
                       preact=None) -> None:
    """out (M, N) = act(a (M, K) @ b (K, N) + bias) + residual, fp32, any strides; config:
    BLOCK_M/N/K, GROUP_M, num_warps, num_stages, optionally SPLIT_K and IN_LOOP ("a" or
    "b": the operand split tile by tile in the kernel rather than by a pass first; other
    keys ignored)."""
    in_loop = config.get("IN_LOOP", "none")
    a_pair = (a, a) if in_loop == "a" else split_rows(a)
    # B.T (N, K): split, K-major as the tensor cores read it
    b_pair = (b.t(), b.t()) if in_loop == "b" else split_rows(b.t())
    launch_split_product(*a_pair, *b_pair, out, config, bias=bias, activation=activation,
                         residual=residual, preact=preact)


def launch_split_product(a_hi, a_lo, b_hi, b_lo, out: torch.Tensor, config: dict, *,
                         bias=None, activation: str = "none", residual=None,
                         preact=None) -> None:
    """launch_gemm_tf32x3 over operands a (M, K) and b.T (N, K) as (hi, lo) pairs, as
    split_rows gives them, or, for the one config["IN_LOOP"] names, the fp32 matrix twice."""
    M, K = a_hi.shape
    N = b_hi.shape[0]
    meta = {key: config[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M",
                                         "num_warps", "num_stages")}
    tiles = triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])
    split, k_split, partials, counters = plan_split(
        out.device, K, meta["BLOCK_K"], config.get("SPLIT_K", 1),
        tiles * meta["BLOCK_M"] * meta["BLOCK_N"], tiles, placeholder=out)
    res_strides = residual.stride() if residual is not None else (0, 0)
    preact_strides = preact.stride() if preact is not None else (0, 0)
    _gemm_tf32x3_kernel[(tiles, split)](
        out, out.stride(0), out.stride(1), a_hi, a_lo, *a_hi.stride(), b_hi, b_lo,
        *b_hi.stride(), bias, residual, *res_strides, preact, *preact_strides, partials,
        counters, M, N, K, k_split,
        HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None,
        STORE_PREACT=preact is not None, ACTIVATION=activation,
        IN_LOOP=config.get("IN_LOOP", "none"), SPLIT_K=split, **meta)
