"""Pieces shared by the tiled GEMM kernels (matmul.py, _gemm_tf32x3.py): the grouped tile
order and the epilogue of kernels that store through pointers."""

from __future__ import annotations

import triton
import triton.language as tl

from ._activation import apply_activation, glu_pairs, is_glu


@triton.jit
def tile_position(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of output tile number `tile` in grouped order: GROUP_M tile rows walk
    the tile columns together, so the A rows and B columns they share are still in L2 when
    the neighbours need them."""
    tiles_per_group = GROUP_M * num_pid_n
    first_pid_m = (tile // tiles_per_group) * GROUP_M
    group_rows = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile % tiles_per_group) % group_rows
    pid_n = (tile % tiles_per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def store_tile(acc, row0, col0, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, res_ptr,
               stride_rm, stride_rn, preact_ptr, stride_pm, stride_pn,
               HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
               STORE_PREACT: tl.constexpr, ACTIVATION: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The pointer kernels' epilogue for the (BLOCK_M, BLOCK_N) tile at (row0, col0): bias,
    the pre-activation where asked, activation (a GLU pairs columns 2j, 2j + 1 and stores
    N // 2 columns), residual, store; any strides."""
    offs_m = row0 + tl.arange(0, BLOCK_M)
    offs_n = col0 + tl.arange(0, BLOCK_N)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    local_m = tl.arange(0, BLOCK_M)[:, None]
    if STORE_PREACT:
        preact_ptrs = (preact_ptr + row0.to(tl.int64) * stride_pm + col0 * stride_pn
                       + local_m * stride_pm + tl.arange(0, BLOCK_N)[None, :] * stride_pn)
        tl.store(preact_ptrs, acc.to(preact_ptr.dtype.element_ty),
                 mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])
    if is_glu(ACTIVATION):
        acc, local_n = glu_pairs(acc, tl.arange(0, BLOCK_N), BLOCK_M, BLOCK_N, ACTIVATION)
        col0 = col0 // 2
        c_mask = (offs_m < M)[:, None] & (col0 + local_n < N // 2)[None, :]
        local_n = local_n[None, :]
    else:
        acc = apply_activation(acc, ACTIVATION)
        c_mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        local_n = tl.arange(0, BLOCK_N)[None, :]
    tile0 = row0.to(tl.int64)
    if HAS_RESIDUAL:
        res_ptrs = (res_ptr + tile0 * stride_rm + col0 * stride_rn
                    + local_m * stride_rm + local_n * stride_rn)
        acc += tl.load(res_ptrs, mask=c_mask, other=0.0).to(tl.float32)
    c_ptrs = (c_ptr + tile0 * stride_cm + col0 * stride_cn
              + local_m * stride_cm + local_n * stride_cn)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
