"""Qwen3's and Gemma 3's head norms in the epilogue of a fused q|k|v projection.

A head's RMS norm needs all of its head_dim values, which the projection's column blocks
hold in parts (BLOCK_N of them a block, BLOCK_N dividing head_dim), each for every row of
the launch. Each q or k block stores its rows unrotated where they belong (q, or the k cache
at each row's slot and position), rounded to the projection's dtype as its output would be,
and counts its arrival at the head; the last block to arrive reads the whole head of every
row back from there, normalises, rotates and stores it over the values it read, and sets
the head's counter back to zero, so the counters are zero before every launch without a
memset (_split_workspace.py). v blocks are stored as the plain rotary epilogue stores them.

The kernels that take it: the one-row GEMV, the several-row CUDA-core kernel (_matvec_kernel)
and the tensor-core kernel for 2-16 rows, split-K or not (the block's last split program
finishes the block, then counts it at the head). Without it a model with head norms runs
the projection and then tg.rotary_qkv's kernel for the norms, the rotation and the cache
writes: one launch and one boundary more a layer.
"""

import torch
import triton
import triton.language as tl

from ._rotary_store import rotary_store

NO_HEAD_NORM = ()  # the `head_norm` argument of a projection without head norms


def head_norm_args(counters: torch.Tensor, q_norm: torch.Tensor, k_norm: torch.Tensor,
                   eps: float) -> tuple:
    """A projection's `head_norm` tuple: a zeroed int32 counter a q or k head (from a split
    workspace, clear of the launch's own split counters), the norm weights ((head_dim,), or
    (heads, head_dim): a weight a head), the elements from one head's weight to the next's
    (0 where they share one) and eps."""
    return (counters, q_norm, k_norm, q_norm.shape[-1] if q_norm.ndim == 2 else 0, eps)


def head_half_block(head_dim: int) -> int:
    """The kernels' HEAD_HALF: head_dim / 2 rounded up to a power of two."""
    return triton.next_power_of_2(head_dim // 2)


@triton.jit
def normed_head(x1, x2, g1, g2, eps, head_dim, dtype):
    """Heads' halves (x1, x2) (fp32, values of `dtype`; a head a row along the last axis)
    RMS-normalised over their head_dim values and scaled by the norm weight's halves (g1,
    g2), rounded where Hugging Face rounds: the normalised head, then its product with the
    weight."""
    squares = tl.sum(x1 * x1, axis=-1, keep_dims=True) + tl.sum(x2 * x2, axis=-1, keep_dims=True)
    return scaled_head(x1, x2, g1, g2, tl.rsqrt(squares / head_dim + eps), dtype)


@triton.jit
def scaled_head(x1, x2, g1, g2, scale, dtype):
    """normed_head's values given their norm's 1 / rms, `scale` (a norm spanning more than
    the head: OLMo 2's, over all of q or all of k)."""
    x1 = (g1 * (x1 * scale).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    x2 = (g2 * (x2 * scale).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    return x1, x2


@triton.jit
def head_normed_store(acc, block, offs_m, offs_n, M, N, q_ptr, stride_qm, rotary, head_norm,
                      position, slot, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      HEAD_HALF: tl.constexpr):
    """Store column block `block` (outputs offs_n; acc (BLOCK_M, BLOCK_N) with bias and input
    norm applied, rows offs_m < M) of a q|k|v projection by interleaved weights, q and k
    heads normalised (see the module). position and slot: each row's, as rotary_inputs
    reads them."""
    (k_ptr, v_ptr, stride_cb, stride_ch, stride_cp, cos_ptr, sin_ptr, stride_cs,
     positions_ptr, slots_ptr, q_dim, kv_dim, head_dim) = rotary
    count_ptr, q_norm_ptr, k_norm_ptr, weight_stride, eps = head_norm
    # every block unrotated first (c = 1, s = 0): v for good, q and k until their heads
    # are normalised
    ones = tl.full([BLOCK_M, BLOCK_N // 2], 1.0, tl.float32)
    rotary_store(acc, offs_m, offs_n, M, N, q_ptr, stride_qm, rotary, position, slot, ones,
                 ones * 0.0, BLOCK_M, BLOCK_N)
    start = block * BLOCK_N
    if start < q_dim + kv_dim:
        tl.debug_barrier()  # every thread's values are out before the count says so
        head = start // head_dim
        arrived = tl.atomic_add(count_ptr + head, 1, sem="acq_rel")
        if arrived == head_dim // BLOCK_N - 1:
            dtype = q_ptr.dtype.element_ty
            half = head_dim // 2
            offs = tl.arange(0, HEAD_HALF)
            is_q = start < q_dim
            rows = offs_m < M
            mask = rows[:, None] & (offs < half)[None, :]
            # tl.where, not mask & is_q: the interpreter cannot mask by a tensor & a scalar
            q_mask = tl.where(is_q, mask, False)
            k_mask = tl.where(is_q, False, mask)
            q_at = (q_ptr + offs_m[:, None].to(tl.int64) * stride_qm
                    + (head * head_dim + offs)[None, :])
            k_at = (k_ptr + slot[:, None] * stride_cb + position[:, None] * stride_cp
                    + ((head - q_dim // head_dim) * stride_ch + offs)[None, :])
            x1 = (tl.load(q_at, mask=q_mask, other=0.0, cache_modifier=".cg").to(tl.float32)
                  + tl.load(k_at, mask=k_mask, other=0.0, cache_modifier=".cg").to(tl.float32))
            x2 = (tl.load(q_at + half, mask=q_mask, other=0.0, cache_modifier=".cg")
                  .to(tl.float32)
                  + tl.load(k_at + half, mask=k_mask, other=0.0, cache_modifier=".cg")
                  .to(tl.float32))
            g_mask = offs < half
            q_g = tl.where(is_q, g_mask, False)
            k_g = tl.where(is_q, False, g_mask)
            # the head's own weight where each has one (weight_stride 0: one for all)
            q_g_at = q_norm_ptr + head * weight_stride + offs
            k_g_at = k_norm_ptr + (head - q_dim // head_dim) * weight_stride + offs
            g1 = (tl.load(q_g_at, mask=q_g, other=0.0).to(tl.float32)
                  + tl.load(k_g_at, mask=k_g, other=0.0).to(tl.float32))
            g2 = (tl.load(q_g_at + half, mask=q_g, other=0.0).to(tl.float32)
                  + tl.load(k_g_at + half, mask=k_g, other=0.0).to(tl.float32))
            table = position[:, None] * stride_cs + offs[None, :]
            cos = tl.load(cos_ptr + table, mask=mask, other=1.0)
            sin = tl.load(sin_ptr + table, mask=mask, other=0.0)
            x1, x2 = normed_head(x1, x2, g1[None, :], g2[None, :], eps, head_dim, dtype)
            out1 = x1 * cos - x2 * sin
            out2 = x2 * cos + x1 * sin
            tl.store(q_at, out1.to(dtype), mask=q_mask)
            tl.store(q_at + half, out2.to(dtype), mask=q_mask)
            tl.store(k_at, out1.to(k_ptr.dtype.element_ty), mask=k_mask)
            tl.store(k_at + half, out2.to(k_ptr.dtype.element_ty), mask=k_mask)
            tl.store(count_ptr + head, 0)  # zero for the next launch on this stream
