"""The epilogue of a fused q|k|v projection: rotary embedding, then q out, k and v to the cache.

The projection's weight rows come with each head's halves interleaved
(interleave_rotary_pairs: rows 0, d/2, 1, d/2 + 1, ... of every head of q, k and v), so the
pair (x_i, x_{i + d/2}) that rotary embedding turns together sits in neighbouring columns:
any tile of an even width holds whole pairs, as with SwiGLU's (gate, up). The epilogue
rotates each pair and writes its two values back to their places i and i + d/2 of the head,
so q, the k cache and the v cache hold the usual (half-split) layout.
"""

import triton
import triton.language as tl


@triton.jit
def rotary_inputs(offs_m, offs_n, M, rotary, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """What rotary_store reads besides the tile, rows offs_m < M, columns offs_n: each row's
    position p and cache slot, and each pair's c = cos[p, i] and s = sin[p, i] (fp32; 1 and
    0 for v). A kernel reads them before its first cross-warp reduction: read after one,
    the position and then the table behind it are two serial round trips to memory between
    the reduction and the store."""
    (k_ptr, v_ptr, stride_cb, stride_ch, stride_cp, cos_ptr, sin_ptr, stride_cs,
     positions_ptr, slots_ptr, q_dim, kv_dim, head_dim) = rotary
    cols, _ = tl.split(tl.reshape(offs_n, (BLOCK_N // 2, 2)))       # each pair's first
    pair = (cols % head_dim) // 2                # i: the pair's place in its head
    row_mask = offs_m < M
    position = tl.load(positions_ptr + offs_m, mask=row_mask, other=0).to(tl.int64)
    slot = tl.load(slots_ptr + offs_m, mask=row_mask, other=0).to(tl.int64)
    rotated = (cols < q_dim + kv_dim)[None, :] & row_mask[:, None]
    table = position[:, None] * stride_cs + pair[None, :]
    c = tl.load(cos_ptr + table, mask=rotated, other=1.0)   # v: c = 1, s = 0
    s = tl.load(sin_ptr + table, mask=rotated, other=0.0)
    return position, slot, c, s


@triton.jit
def rotary_store(acc, offs_m, offs_n, M, N, q_ptr, stride_qm, rotary, position, slot, c, s,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Store a (BLOCK_M, BLOCK_N) tile of the projection, columns offs_n (interleaved
    pairs), rows offs_m < M of N columns. rotary = (k_ptr, v_ptr, stride_cb, stride_ch,
    stride_cp, cos_ptr, sin_ptr, stride_cs, positions_ptr, slots_ptr, q_dim, kv_dim,
    head_dim): row m sits at position p = positions[m] of cache slot slots[m]; position,
    slot, c and s as rotary_inputs reads them.

    Pair (x1, x2) of a q or k head becomes (x1 c - x2 s, x2 c + x1 s), c = cos[p, i],
    s = sin[p, i] (fp32); v pairs pass unrotated. q goes to q[m, head, i and i + d/2], k and
    v to the caches at [slot, kv_head, p, i and i + d/2].
    """
    (k_ptr, v_ptr, stride_cb, stride_ch, stride_cp, cos_ptr, sin_ptr, stride_cs,
     positions_ptr, slots_ptr, q_dim, kv_dim, head_dim) = rotary
    x1, x2 = tl.split(tl.reshape(acc, (BLOCK_M, BLOCK_N // 2, 2)))   # (BM, BN / 2) each
    cols, _ = tl.split(tl.reshape(offs_n, (BLOCK_N // 2, 2)))       # each pair's first
    half = head_dim // 2
    pair = (cols % head_dim) // 2                # i: the pair's place in its head
    head = cols // head_dim                      # over the q, k and v heads in turn
    row_mask = offs_m < M
    out1 = x1 * c - x2 * s
    out2 = x2 * c + x1 * s

    q_mask = row_mask[:, None] & (cols < q_dim)[None, :]
    q_at = q_ptr + offs_m[:, None].to(tl.int64) * stride_qm + (head * head_dim + pair)[None, :]
    tl.store(q_at, out1.to(q_ptr.dtype.element_ty), mask=q_mask)
    tl.store(q_at + half, out2.to(q_ptr.dtype.element_ty), mask=q_mask)

    is_v = cols >= q_dim + kv_dim
    kv_head = (cols - q_dim - tl.where(is_v, kv_dim, 0)) // head_dim
    cache_at = (slot[:, None] * stride_cb + position[:, None] * stride_cp
                + (kv_head * stride_ch + pair)[None, :])
    k_mask = row_mask[:, None] & ((cols >= q_dim) & ~is_v)[None, :]
    tl.store(k_ptr + cache_at, out1.to(k_ptr.dtype.element_ty), mask=k_mask)
    tl.store(k_ptr + cache_at + half, out2.to(k_ptr.dtype.element_ty), mask=k_mask)
    v_mask = row_mask[:, None] & (is_v & (cols < N))[None, :]
    tl.store(v_ptr + cache_at, out1.to(v_ptr.dtype.element_ty), mask=v_mask)
    tl.store(v_ptr + cache_at + half, out2.to(v_ptr.dtype.element_ty), mask=v_mask)


NO_ROTARY = ()  # the `rotary` argument of a projection without this epilogue


def rotary_args(k_cache, v_cache, cos, sin, positions, slots, n_heads: int) -> tuple:
    """The epilogue's `rotary` tuple for caches (max_batch, kv_heads, max_seq, head_dim)."""
    kv_heads, head_dim = k_cache.shape[1], k_cache.shape[3]
    return (k_cache, v_cache, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            cos, sin, cos.stride(0), positions, slots, n_heads * head_dim,
            kv_heads * head_dim, head_dim)

