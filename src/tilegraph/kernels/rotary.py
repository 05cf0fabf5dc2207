"""Rotary embedding of a fused q|k|v projection, with k and v written into a KV cache.

    q = tg.rotary_qkv(qkv, cos, sin, positions, slots, k_cache, v_cache, n_heads=H)

One kernel where PyTorch takes about twenty a layer (fp32 casts, halves, products, concat,
and two indexed cache writes): in a decode step of a 1B-parameter model those small kernels
cost more than the projections around them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import check_eps, check_like, check_tensor, prepare_out
from ._head_norm_store import scaled_head
from ._launch import supports_pdl
from ._ops import custom_op
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import launched


@triton.jit
def _rotary_qkv_kernel(q_ptr, stride_qr, stride_qh,
                       qkv_ptr, stride_xr,
                       cos_ptr, sin_ptr, stride_cs,
                       positions_ptr, slots_ptr,
                       k_ptr, v_ptr, stride_cb, stride_ch, stride_cp,
                       q_norm_ptr, k_norm_ptr, q_bias_ptr, k_bias_ptr, eps,
                       N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr,
                       HEAD_DIM: tl.constexpr, HEAD_NORM: tl.constexpr,
                       HEAD_NORM_BIAS: tl.constexpr,
                       Q_NORM_HEADS: tl.constexpr, K_NORM_HEADS: tl.constexpr,
                       WEIGHT_PER_HEAD: tl.constexpr, NORM_AFTER_ROTARY: tl.constexpr,
                       INTERLEAVED: tl.constexpr, PDL: tl.constexpr,
                       BLOCK_HALF: tl.constexpr):
    """Program (row, head) over heads q_0..q_{H-1}, k_0..k_{KV-1}: x of that head, rotated
    at the row's position p in the half-split layout, (x1, x2) -> (x1 c - x2 s, x2 c + x1 s)
    with c = cos[p], s = sin[p] (fp32); q heads go to q, k heads to k_cache[slot, head, p]
    together with the same head of v. HEAD_NORM: each q and k head first RMS-normalised over
    its head_dim values and scaled by q_norm or k_norm (Qwen3), rounded where Hugging Face
    rounds (the normalised head, then its product with the weight). Q_NORM_HEADS,
    K_NORM_HEADS: 0, or q's (k's) norm spans all of its heads at once (OLMo 2), its weight a
    head_dim slice a head, and every program loads them all in one tile of this many heads
    (their count, a power of two up). WEIGHT_PER_HEAD: each head normalised alone, scaled
    by a weight of its own (StableLM's and Cohere's per-head norms). HEAD_NORM_BIAS: then
    plus q_bias or k_bias, laid out as the weights (Persimmon's head LayerNorms), rounded
    again. NORM_AFTER_ROTARY: the heads rotated first (rounded to qkv's dtype), then
    normalised (Hunyuan's order).
    INTERLEAVED: qkv's heads hold their pairs side by side (x_0, x_{d/2}, x_1, ...: a
    projection by interleave_rotary_pairs weights). PDL: launched with programmatic
    dependent launch, it starts while the projection before it finishes and reads nothing
    before that is done."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # qkv is final
        tl.extra.cuda.gdc_launch_dependents()  # attention may launch; it waits for us too
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    half: tl.constexpr = HEAD_DIM // 2
    offs = tl.arange(0, BLOCK_HALF)
    mask = offs < half
    # where a head's x_i and x_{i + d/2} sit
    first = 2 * offs if INTERLEAVED else offs
    second = 2 * offs + 1 if INTERLEAVED else half + offs
    position = tl.load(positions_ptr + row).to(tl.int64)
    c = tl.load(cos_ptr + position * stride_cs + offs, mask=mask)
    s = tl.load(sin_ptr + position * stride_cs + offs, mask=mask)
    x_row = qkv_ptr + row * stride_xr + head * HEAD_DIM   # q heads, then k heads: contiguous
    x1 = tl.load(x_row + first, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_row + second, mask=mask, other=0.0).to(tl.float32)
    if NORM_AFTER_ROTARY:
        x1, x2 = _rotated(x1, x2, c, s, qkv_ptr.dtype.element_ty)
    if HEAD_NORM:
        # 1 / rms over the head, or over all of q (k), and the norm weight's slice
        x_start = qkv_ptr + row * stride_xr
        squares = tl.sum(x1 * x1, axis=0) + tl.sum(x2 * x2, axis=0)
        if head < N_HEADS:
            g_at, b_at = q_norm_ptr, q_bias_ptr
            scale = tl.rsqrt(squares / HEAD_DIM + eps)
            if WEIGHT_PER_HEAD or Q_NORM_HEADS:   # its weight, or its slice of all heads' one
                g_at += head * HEAD_DIM
                b_at += head * HEAD_DIM
            if Q_NORM_HEADS:
                squares = _squares(x_start, N_HEADS, HEAD_DIM, Q_NORM_HEADS, 2 * BLOCK_HALF)
                scale = tl.rsqrt(squares / (N_HEADS * HEAD_DIM) + eps)
        else:
            g_at, b_at = k_norm_ptr, k_bias_ptr
            scale = tl.rsqrt(squares / HEAD_DIM + eps)
            if WEIGHT_PER_HEAD or K_NORM_HEADS:
                g_at += (head - N_HEADS) * HEAD_DIM
                b_at += (head - N_HEADS) * HEAD_DIM
            if K_NORM_HEADS:
                squares = _squares(x_start + N_HEADS * HEAD_DIM, N_KV_HEADS, HEAD_DIM,
                                   K_NORM_HEADS, 2 * BLOCK_HALF)
                scale = tl.rsqrt(squares / (N_KV_HEADS * HEAD_DIM) + eps)
        g1 = tl.load(g_at + offs, mask=mask).to(tl.float32)
        g2 = tl.load(g_at + half + offs, mask=mask).to(tl.float32)
        x1, x2 = scaled_head(x1, x2, g1, g2, scale, qkv_ptr.dtype.element_ty)
        if HEAD_NORM_BIAS:
            b1 = tl.load(b_at + offs, mask=mask).to(tl.float32)
            b2 = tl.load(b_at + half + offs, mask=mask).to(tl.float32)
            x1 = (x1 + b1).to(qkv_ptr.dtype.element_ty).to(tl.float32)
            x2 = (x2 + b2).to(qkv_ptr.dtype.element_ty).to(tl.float32)
    out1, out2 = x1, x2
    if not NORM_AFTER_ROTARY:
        out1 = x1 * c - x2 * s
        out2 = x2 * c + x1 * s
    if head < N_HEADS:
        q_row = q_ptr + row * stride_qr + head * stride_qh
        tl.store(q_row + offs, out1.to(q_ptr.dtype.element_ty), mask=mask)
        tl.store(q_row + half + offs, out2.to(q_ptr.dtype.element_ty), mask=mask)
    else:
        kv_head = head - N_HEADS
        slot = tl.load(slots_ptr + row).to(tl.int64)
        cache = slot * stride_cb + kv_head * stride_ch + position * stride_cp
        tl.store(k_ptr + cache + offs, out1.to(k_ptr.dtype.element_ty), mask=mask)
        tl.store(k_ptr + cache + half + offs, out2.to(k_ptr.dtype.element_ty), mask=mask)
        v_row = qkv_ptr + row * stride_xr + (N_HEADS + N_KV_HEADS + kv_head) * HEAD_DIM
        v1 = tl.load(v_row + first, mask=mask)
        v2 = tl.load(v_row + second, mask=mask)
        tl.store(v_ptr + cache + offs, v1, mask=mask)
        tl.store(v_ptr + cache + half + offs, v2, mask=mask)


@triton.jit
def _rotated(x1, x2, c, s, dtype):
    """A head's halves turned by (c, s), rounded to `dtype` (values in fp32)."""
    return ((x1 * c - x2 * s).to(dtype).to(tl.float32),
            (x2 * c + x1 * s).to(dtype).to(tl.float32))


@triton.jit
def _squares(x, HEADS: tl.constexpr, HEAD_DIM: tl.constexpr, HEADS_BLOCK: tl.constexpr,
             BLOCK: tl.constexpr):
    """The sum of squares (fp32) of the HEADS heads from x on, loaded as one tile: one
    round trip to L2, where a loop over the heads would wait on each."""
    heads = tl.arange(0, HEADS_BLOCK)
    dims = tl.arange(0, BLOCK)
    mask = (heads < HEADS)[:, None] & (dims < HEAD_DIM)[None, :]
    values = tl.load(x + heads[:, None] * HEAD_DIM + dims[None, :], mask=mask,
                     other=0.0).to(tl.float32)
    return tl.sum(tl.sum(values * values, axis=1), axis=0)


def launch_rotary_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                      positions: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, n_heads: int, q_norm_weight: torch.Tensor | None,
                      k_norm_weight: torch.Tensor | None, q_norm_bias: torch.Tensor | None,
                      k_norm_bias: torch.Tensor | None, norm_eps: float,
                      norm_after_rotary: bool, interleaved: bool, out: torch.Tensor) -> None:
    """The kernel on checked inputs; interleaved: qkv's heads in interleave_rotary_pairs
    order (tg.linear_qkv's projection, which calls this for models with head norms)."""
    rows = qkv.shape[0]
    n_kv_heads, head_dim = k_cache.shape[1], k_cache.shape[3]
    pdl = PDL_ENABLED and supports_pdl(qkv.device)
    head_norm = q_norm_weight is not None
    # a norm over all of q (k) loads their heads as one tile: the heads, a power of two up
    q_tile, k_tile = (triton.next_power_of_2(heads)
                      if head_norm and t.ndim == 1 and t.numel() > head_dim else 0
                      for heads, t in ((n_heads, q_norm_weight), (n_kv_heads, k_norm_weight)))
    block_half = triton.next_power_of_2(head_dim // 2)
    # about 32 of the tile's values a thread (one warp a head where no norm spans more)
    warps = min(8, max(1, max(q_tile, k_tile) * 2 * block_half // 1024))
    _rotary_qkv_kernel[(rows, n_heads + n_kv_heads)](
        out, out.stride(0), out.stride(1), qkv, qkv.stride(0), cos, sin, cos.stride(0),
        positions, slots, k_cache, v_cache, k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), *(t if t is not None else qkv for t in (
            q_norm_weight, k_norm_weight, q_norm_bias, k_norm_bias)), norm_eps,
        N_HEADS=n_heads, N_KV_HEADS=n_kv_heads, HEAD_DIM=head_dim, HEAD_NORM=head_norm,
        HEAD_NORM_BIAS=q_norm_bias is not None,
        Q_NORM_HEADS=q_tile, K_NORM_HEADS=k_tile,
        WEIGHT_PER_HEAD=head_norm and q_norm_weight.ndim == 2,
        NORM_AFTER_ROTARY=head_norm and norm_after_rotary, INTERLEAVED=interleaved, PDL=pdl,
        BLOCK_HALF=block_half, num_warps=warps, **({"launch_pdl": True} if pdl else {}))
    launched(qkv.device, pdl, (out, k_cache, v_cache), ((k_cache, v_cache), slots, positions))


def _launch_rotary_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                       positions: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor,
                       v_cache: torch.Tensor, n_heads: int, q_norm_weight: torch.Tensor | None,
                       k_norm_weight: torch.Tensor | None, q_norm_bias: torch.Tensor | None,
                       k_norm_bias: torch.Tensor | None, norm_eps: float,
                       norm_after_rotary: bool, out: torch.Tensor) -> None:
    launch_rotary_qkv(qkv, cos, sin, positions, slots, k_cache, v_cache, n_heads,
                      q_norm_weight, k_norm_weight, q_norm_bias, k_norm_bias, norm_eps,
                      norm_after_rotary, False, out)


_run_rotary_qkv = custom_op("rotary_qkv", _launch_rotary_qkv,
                            mutates=("k_cache", "v_cache", "out"))


def rotary_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor,
               v_cache: torch.Tensor, *, n_heads: int, q_norm_weight: torch.Tensor | None = None,
               k_norm_weight: torch.Tensor | None = None, norm_eps: float = 1e-6,
               norm_after_rotary: bool = False, q_norm_bias: torch.Tensor | None = None,
               k_norm_bias: torch.Tensor | None = None, out: torch.Tensor | None = None
               ) -> torch.Tensor:
    """Rotate q and k of each row of `qkv` (rows, (H + 2 KV) * head_dim) at its position;
    write k and v into k_cache / v_cache (max_batch, KV, max_seq, head_dim) at [slot,
    :, position]; return q (rows, H, head_dim). cos, sin: fp32 (max_seq, head_dim / 2);
    positions, slots: int (rows,), on qkv's device. Positions must be below max_seq and
    slots below max_batch (they are read on the device, unchecked).
    q_norm_weight, k_norm_weight (head_dim,), given together: each q and k head
    RMS-normalised (norm_eps) and scaled by them before its rotation, as Qwen3 does; either
    one as wide as all of its heads, (n_heads * head_dim,) or (kv_heads * head_dim,): q (k)
    normalised as a whole instead, as OLMo 2 does; both (n_heads, head_dim) and (kv_heads,
    head_dim): each head scaled by its own weight, as StableLM's and Cohere's per-head
    LayerNorms do (of heads whose mean is zero: their projections' rows centred).
    q_norm_bias, k_norm_bias (the weights' shapes), given together and only with them:
    added after the weights, as Persimmon's head LayerNorms add theirs.
    norm_after_rotary: the heads rotated first, then normalised, as Hunyuan does."""
    check_tensor("qkv", qkv)
    n_kv_heads, head_dim = check_cache_inputs(qkv, cos, sin, positions, slots, k_cache,
                                              v_cache, rows=qkv.shape[0] if qkv.ndim else 0)
    if qkv.ndim != 2 or qkv.stride(1) != 1 or \
            qkv.shape[1] != (n_heads + 2 * n_kv_heads) * head_dim:
        raise ValueError(f"qkv must be (rows, {(n_heads + 2 * n_kv_heads) * head_dim}) with "
                         f"unit column stride for {n_heads} heads, {n_kv_heads} kv heads of "
                         f"{head_dim}; got {tuple(qkv.shape)}")
    q_norm_weight, k_norm_weight, q_norm_bias, k_norm_bias = check_head_norms(
        q_norm_weight, k_norm_weight, qkv, head_dim, n_heads, n_kv_heads, q_norm_bias,
        k_norm_bias)
    norm_eps = check_eps(norm_eps)
    rows = qkv.shape[0]
    out = prepare_out(out, (rows, n_heads, head_dim), qkv.dtype, qkv.device)
    if out.stride(2) != 1:
        raise ValueError("out must have a unit last stride")
    if rows:
        _run_rotary_qkv(qkv, cos, sin, positions, slots, k_cache, v_cache, n_heads,
                        q_norm_weight, k_norm_weight, q_norm_bias, k_norm_bias, norm_eps,
                        bool(norm_after_rotary), out)
    return out


def check_head_norms(q_norm_weight, k_norm_weight, like: torch.Tensor, head_dim: int,
                     n_heads: int, n_kv_heads: int, q_norm_bias=None, k_norm_bias=None):
    """q and k norm weights in like's dtype and on its device, both or neither, each of a
    head (head_dim,) or of all of its heads (heads * head_dim,), or both a weight a head
    (heads, head_dim); their biases, both or neither, of the weights' shapes; the four
    returned contiguous (None where not given)."""
    if (q_norm_weight is None) != (k_norm_weight is None):
        raise ValueError("q_norm_weight and k_norm_weight go together: give both or neither")
    if (q_norm_bias is None) != (k_norm_bias is None):
        raise ValueError("q_norm_bias and k_norm_bias go together: give both or neither")
    if q_norm_bias is not None and q_norm_weight is None:
        raise ValueError("q_norm_bias and k_norm_bias are added after q_norm_weight and "
                         "k_norm_weight: give those too")
    if q_norm_weight is None:
        return None, None, None, None
    checked = []
    for name, t, heads in (("q_norm_weight", q_norm_weight, n_heads),
                           ("k_norm_weight", k_norm_weight, n_kv_heads)):
        check_tensor(name, t)
        check_like(name, t, "qkv", like)
        if t.shape not in ((head_dim,), (heads * head_dim,), (heads, head_dim)):
            raise ValueError(f"{name} has shape {tuple(t.shape)}, expected ({head_dim},) "
                             f"for a norm a head, ({heads * head_dim},) for one over all "
                             f"{heads} heads or ({heads}, {head_dim}) for a weight a head")
        checked.append(t.contiguous())
    if (q_norm_weight.ndim == 2) != (k_norm_weight.ndim == 2):
        raise ValueError("q_norm_weight and k_norm_weight are both a weight a head "
                         "(heads, head_dim) or neither")
    for name, t, weight in (("q_norm_bias", q_norm_bias, checked[0]),
                            ("k_norm_bias", k_norm_bias, checked[1])):
        if t is not None:
            check_tensor(name, t)
            check_like(name, t, "qkv", like)
            if t.shape != weight.shape:
                raise ValueError(f"{name} has shape {tuple(t.shape)}; it must be its "
                                 f"weight's, {tuple(weight.shape)}")
        checked.append(t.contiguous() if t is not None else None)
    return tuple(checked)


def check_cache_inputs(like: torch.Tensor, cos, sin, positions, slots, k_cache, v_cache, *,
                       rows: int) -> tuple[int, int]:
    """The KV cache, rotary tables, positions and slots of `rows` rows of a projection in
    like's dtype and on its device; returns (kv_heads, head_dim)."""
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t)
        if t.dtype != like.dtype or t.device != like.device or t.ndim != 4 or \
                t.stride(-1) != 1:
            raise ValueError(f"{name} must be a (max_batch, kv_heads, max_seq, head_dim) "
                             f"tensor of {like.dtype} on {like.device} with unit last stride")
    if k_cache.shape != v_cache.shape or k_cache.stride() != v_cache.stride():
        raise ValueError("k_cache and v_cache must have one shape and layout")
    head_dim = k_cache.shape[3]
    if head_dim % 2:
        raise ValueError(f"rotary embedding turns pairs of values: head_dim {head_dim} must "
                         "be even")
    for name, t in (("cos", cos), ("sin", sin)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or \
                t.device != like.device or t.ndim != 2 or t.shape[1] != head_dim // 2 or \
                t.stride(1) != 1 or t.stride() != cos.stride():
            raise ValueError(f"{name} must be fp32 (positions, {head_dim // 2}) on "
                             f"{like.device}, laid out like cos")
    for name, t in (("positions", positions), ("slots", slots)):
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int32, torch.int64) or \
                t.shape != (rows,) or t.device != like.device or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous int tensor of shape ({rows},) on "
                             f"{like.device}")
    return k_cache.shape[1], head_dim


def rotary_qkv_ref(qkv, cos, sin, positions, slots, k_cache, v_cache, *, n_heads: int,
                   q_norm_weight=None, k_norm_weight=None, norm_eps: float = 1e-6,
                   norm_after_rotary: bool = False, q_norm_bias=None, k_norm_bias=None):
    """The same in PyTorch (the rotation in fp32, float64 for float64, cast back; head norms
    as Hugging Face rounds them); writes the caches, returns q."""
    n_kv, head_dim = k_cache.shape[1], k_cache.shape[3]
    rows = qkv.shape[0]
    heads = qkv.view(rows, n_heads + 2 * n_kv, head_dim)

    def normed(x):
        if q_norm_weight is None:
            return x
        return torch.cat((_norm_ref(x[:, :n_heads], q_norm_weight, norm_eps, q_norm_bias),
                          _norm_ref(x[:, n_heads:], k_norm_weight, norm_eps, k_norm_bias)),
                         dim=1)

    x = heads[:, :n_heads + n_kv]
    x = x if norm_after_rotary else normed(x)
    compute = torch.float64 if qkv.dtype == torch.float64 else torch.float32
    first, second = x.to(compute).chunk(2, dim=-1)
    c, s = cos[positions][:, None].to(compute), sin[positions][:, None].to(compute)
    rotated = torch.cat((first * c - second * s, second * c + first * s), -1).to(qkv.dtype)
    rotated = normed(rotated) if norm_after_rotary else rotated
    k_cache[slots, :, positions] = rotated[:, n_heads:]
    v_cache[slots, :, positions] = heads[:, n_heads + n_kv:]
    return rotated[:, :n_heads]


def _norm_ref(heads: torch.Tensor, weight: torch.Tensor, eps: float,
              bias: torch.Tensor | None = None) -> torch.Tensor:
    """heads (rows, heads, head_dim) normalised each (weight (head_dim,), or (heads,
    head_dim): one a head) or all together (weight (heads * head_dim,)); plus bias (the
    weight's shape), rounded again, where given."""
    if weight.numel() == heads.shape[-1] or weight.ndim == 2:
        normed = head_norm_ref(heads, weight, eps)
    else:
        normed = head_norm_ref(heads.flatten(1), weight, eps).view(heads.shape)
    if bias is None:
        return normed
    return normed + bias.to(heads.dtype).reshape(-1, heads.shape[-1])   # (1 or heads, dim)


def head_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dim in Hugging Face's order: normalised in fp32 (float64 for
    float64), cast back, then times the weight."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    wide = x.to(compute)
    normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
    return weight.to(x.dtype) * normed.to(x.dtype)
