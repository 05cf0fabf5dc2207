"""Qwen3's and Gemma 3's head norms in the epilogue of the one-row q|k|v GEMV.

A head's RMS norm needs all of its head_dim values, which the GEMV's column blocks hold in
parts (BLOCK_N of them a block, BLOCK_N dividing head_dim). Each program of a q or k head
leaves its values in the split workspace's scratch, rounded to the projection's dtype as its
output would be, and counts its arrival at the head; the last to arrive reads the whole
head back, normalises, rotates and stores it (to q or the k cache) and sets the head's
counter back to zero, so the counters are zero before every launch without a memset
(_split_workspace.py). v blocks are stored as the plain rotary epilogue stores them.

Without this a model with head norms runs its batch-1 q|k|v projection and then
tg.rotary_qkv's kernel for the norms, the rotation and the cache writes: one launch and
one boundary more a layer.
"""

import torch
import triton
import triton.language as tl

from ._rotary_store import rotary_store

NO_HEAD_NORM = ()  # the `head_norm` argument of a GEMV without head norms


def head_norm_args(scratch: torch.Tensor, counters: torch.Tensor, q_norm: torch.Tensor,
                   k_norm: torch.Tensor, eps: float) -> tuple:
    """The GEMV's `head_norm` tuple: fp32 scratch of the q and k columns, a zeroed int32
    counter a q or k head (a split workspace), the norm weights (head_dim,) and eps."""
    return (scratch, counters, q_norm, k_norm, eps)


@triton.jit
def normed_head(x1, x2, g1, g2, eps, head_dim, dtype):
    """A head's halves (x1, x2) (fp32, values of `dtype`) RMS-normalised over its head_dim
    values and scaled by the norm weight's halves (g1, g2), rounded where Hugging Face
    rounds: the normalised head, then its product with the weight."""
    scale = tl.rsqrt((tl.sum(x1 * x1) + tl.sum(x2 * x2)) / head_dim + eps)
    x1 = (g1 * (x1 * scale).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    x2 = (g2 * (x2 * scale).to(dtype).to(tl.float32)).to(dtype).to(tl.float32)
    return x1, x2


@triton.jit
def head_normed_store(acc, block, offs_n, N, q_ptr, rotary, head_norm, position, slot, c, s,
                      BLOCK_N: tl.constexpr, HEAD_HALF: tl.constexpr):
    """Store column block `block` (outputs offs_n, acc (BLOCK_N,) with the bias added) of a
    one-row q|k|v projection by interleaved weights: v blocks rotated by nothing into the v
    cache (rotary_store, with position, slot, c and s as rotary_inputs read them); q and k
    blocks through the scratch, the last block of a head to arrive finishing it (see the
    module). HEAD_HALF: head_dim / 2 rounded up to a power of two."""
    (k_ptr, v_ptr, stride_cb, stride_ch, stride_cp, cos_ptr, sin_ptr, stride_cs,
     positions_ptr, slots_ptr, q_dim, kv_dim, head_dim) = rotary
    scratch_ptr, count_ptr, q_norm_ptr, k_norm_ptr, eps = head_norm
    start = block * BLOCK_N
    if start >= q_dim + kv_dim:  # v: no norm
        rotary_store(tl.reshape(acc, (1, BLOCK_N)), tl.arange(0, 1), offs_n, 1, N, q_ptr, 0,
                     rotary, position, slot, c, s, 1, BLOCK_N)
    else:
        dtype = q_ptr.dtype.element_ty
        tl.store(scratch_ptr + offs_n, acc.to(dtype).to(tl.float32))
        tl.debug_barrier()  # every thread's values are out before the count says so
        head = start // head_dim
        arrived = tl.atomic_add(count_ptr + head, 1, sem="acq_rel")
        if arrived == head_dim // BLOCK_N - 1:
            half = head_dim // 2
            offs = tl.arange(0, HEAD_HALF)
            mask = offs < half
            at = scratch_ptr + head * head_dim   # the head's pairs side by side
            x1 = tl.load(at + 2 * offs, mask=mask, other=0.0, cache_modifier=".cg")
            x2 = tl.load(at + 2 * offs + 1, mask=mask, other=0.0, cache_modifier=".cg")
            is_q = start < q_dim
            # tl.where, not mask & is_q: the interpreter cannot mask by a tensor & a scalar
            q_mask = tl.where(is_q, mask, False)
            k_mask = tl.where(is_q, False, mask)
            g1 = (tl.load(q_norm_ptr + offs, mask=q_mask, other=0.0).to(tl.float32)
                  + tl.load(k_norm_ptr + offs, mask=k_mask, other=0.0).to(tl.float32))
            g2 = (tl.load(q_norm_ptr + half + offs, mask=q_mask, other=0.0).to(tl.float32)
                  + tl.load(k_norm_ptr + half + offs, mask=k_mask, other=0.0).to(tl.float32))
            p = tl.sum(position)   # the one row's
            table = p * stride_cs + offs
            cos = tl.load(cos_ptr + table, mask=mask, other=1.0)
            sin = tl.load(sin_ptr + table, mask=mask, other=0.0)
            x1, x2 = normed_head(x1, x2, g1, g2, eps, head_dim, dtype)
            out1 = x1 * cos - x2 * sin
            out2 = x2 * cos + x1 * sin
            q_at = q_ptr + head * head_dim + offs
            tl.store(q_at, out1.to(dtype), mask=q_mask)
            tl.store(q_at + half, out2.to(dtype), mask=q_mask)
            cache_at = (tl.sum(slot) * stride_cb + p * stride_cp
                        + (head - q_dim // head_dim) * stride_ch + offs)
            tl.store(k_ptr + cache_at, out1.to(k_ptr.dtype.element_ty), mask=k_mask)
            tl.store(k_ptr + cache_at + half, out2.to(k_ptr.dtype.element_ty), mask=k_mask)
            tl.store(count_ptr + head, 0)  # zero for the next launch on this stream
