"""The q|k|v projection of an attention layer with rotary embedding and the KV-cache writes
fused into it.

    w = tg.interleave_rotary_pairs(torch.cat((wq, wk, wv)), head_dim)   # once, at load time
    q = tg.linear_qkv(x, w, norm_weight=g, cos=cos, sin=sin, positions=positions,
                      slots=slots, k_cache=k_cache, v_cache=v_cache, n_heads=H)

For decode (up to 16 rows) this is one kernel: RMSNorm in the prologue, the projection, and
an epilogue that rotates q and k and writes k and v into the cache (_rotary_store.py). The
weight's rows come with each head's halves interleaved so that every rotated pair lies in
neighbouring columns of one tile. More rows (a prefill) run tg.linear's tiled GEMM, then
tg.rotary_qkv's kernel over its interleaved columns. Heads normalised before their rotation
(Qwen3, Gemma 3) stay one kernel where the plan's column blocks lie inside a head
(_head_norm_store.py; every kernel but the several-row GEMV and cuBLAS), and are otherwise
the projection and that kernel, as are q and k normalised each as a whole (OLMo 2), after
their rotation (Hunyuan) or with a bias after the weight (Persimmon).
"""

from __future__ import annotations

import torch
import triton

from . import decode_plan
from ._added_norm import NO_ADDED, added_args
from ._checks import (
    as_rows,
    check_eps,
    check_like,
    check_no_overlap,
    check_shape,
    check_tensor,
    memory_overlaps,
    prepare_out,
)
from ._head_norm_store import NO_HEAD_NORM, head_norm_args
from ._norm_weight import kernel_norm_weight
from ._ops import custom_op
from ._pdl import launched, use_pdl
from ._rotary_store import rotary_args
from ._split_workspace import split_workspace
from .linear import check_add_normed, linear, linear_ref, usable_handoff
from .rotary import (
    check_cache_inputs,
    check_head_norms,
    launch_rotary_qkv,
    rotary_qkv_ref,
)

# Heads normalised in the q|k|v projection's epilogue where its plan allows; False: the
# projection, then tg.rotary_qkv's kernel for them (research/time_generator.py's
# `head-norms-apart`)
HEAD_NORM_IN_EPILOGUE = True


def interleave_rotary_pairs(t: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Rows of t reordered within each block of head_dim rows as (0, d/2, 1, d/2 + 1, ...):
    the weight (or bias) layout of tg.linear_qkv, whose pairs (x_i, x_{i + d/2}) then sit in
    neighbouring output columns."""
    if head_dim < 2 or head_dim % 2 or t.ndim < 1 or t.shape[0] % head_dim:
        raise ValueError(f"rows ({tuple(t.shape)}) must be whole heads of an even head_dim "
                         f"({head_dim})")
    heads = t.reshape(-1, 2, head_dim // 2, *t.shape[1:])   # (heads, halves, d/2, ...)
    return heads.transpose(1, 2).reshape(t.shape)


def deinterleave_rotary_pairs(y: torch.Tensor, head_dim: int) -> torch.Tensor:
    """The inverse along the last dim: the columns of a projection by interleaved weights
    back in each head's usual (half-split) order."""
    heads = y.unflatten(-1, (-1, head_dim // 2, 2))          # (..., heads, d/2, 2)
    return heads.transpose(-1, -2).flatten(-3)


def _launch_linear_qkv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       norm_weight: torch.Tensor | None, x_next: torch.Tensor | None,
                       norm_parts: torch.Tensor | None, norm_eps: float, cos: torch.Tensor,
                       sin: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
                       k_cache: torch.Tensor, v_cache: torch.Tensor, n_heads: int,
                       q_norm_weight: torch.Tensor | None, k_norm_weight: torch.Tensor | None,
                       q_norm_bias: torch.Tensor | None, k_norm_bias: torch.Tensor | None,
                       norm_after_rotary: bool, addend: torch.Tensor | None,
                       addend_weight: torch.Tensor | None,
                       sum_out: torch.Tensor | None, out: torch.Tensor) -> None:
    """x_next, norm_parts: the norm of x by norm_weight handed over (x_next = x * norm_weight;
    2-16 rows on the tensor-core path only, _norm_handoff.py). addend, addend_weight,
    sum_out: tg.linear's add_normed and sum_out."""
    x_rows = as_rows(x)
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    rows, k = x_rows.shape
    added = (addend, addend_weight) if addend is not None else None
    chosen = head_norm = None
    if rows <= decode_plan.DECODE_MAX_ROWS:
        chosen = decode_plan.plan(rows, weight.shape[0], k, weight.dtype, x.device, fused=True)
        if q_norm_weight is not None and not norm_after_rotary and q_norm_bias is None:
            head_norm = _epilogue_head_norm(chosen, rows, k_cache, n_heads, q_norm_weight,
                                            k_norm_weight, norm_eps)
    if chosen is None or (q_norm_weight is not None and head_norm is None):
        # The tiled GEMM (past 16 rows), or heads to normalise that the projection's
        # epilogue cannot: the projection, then one kernel for the head norms, the
        # rotation and the cache writes, reading the interleaved columns in place.
        qkv = linear(x_rows, weight, bias, norm_weight=norm_weight, norm_eps=norm_eps,
                     add_normed=added, sum_out=sum_out.view(-1, k) if added else None)
        launch_rotary_qkv(qkv, cos, sin, positions, slots, k_cache, v_cache, n_heads,
                          q_norm_weight, k_norm_weight, q_norm_bias, k_norm_bias, norm_eps,
                          norm_after_rotary, True, out)
        return
    bias = bias.contiguous() if bias is not None else None
    norm_weight = kernel_norm_weight(norm_weight)
    writes = (out, k_cache, v_cache, *(head_norm or ())[:1])
    if added:  # a fused plan takes it (never cuBLAS)
        added = added_args(as_rows(addend), addend_weight.contiguous(), sum_out.view(-1, k))
        writes += (sum_out,)
    pdl = use_pdl(x.device, (weight,))
    decode_plan.launch(chosen, x_rows, weight, out.view(rows, -1), norm_weight, norm_eps, bias,
                       "rotary", None, pdl,
                       rotary_args(k_cache, v_cache, cos, sin, positions, slots, n_heads),
                       handed=(x_next, norm_parts) if norm_parts is not None else None,
                       added=added or NO_ADDED, head_norm=head_norm or NO_HEAD_NORM)
    launched(x.device, pdl, writes, ((k_cache, v_cache), slots, positions))


def _epilogue_head_norm(chosen: decode_plan.Plan, rows: int, k_cache: torch.Tensor,
                        n_heads: int, q_norm_weight: torch.Tensor, k_norm_weight: torch.Tensor,
                        norm_eps: float) -> tuple | None:
    """The projection's `head_norm` argument where `chosen` normalises the heads in its
    epilogue (decode_plan.takes_head_norm, _head_norm_store.py) and the stream has a split
    workspace for their counters (a capture may find none); else None, and a kernel of its
    own does it."""
    kv_heads, head_dim = k_cache.shape[1], k_cache.shape[3]
    if not HEAD_NORM_IN_EPILOGUE or not decode_plan.takes_head_norm(chosen, rows, head_dim):
        return None
    if q_norm_weight.ndim == 1 and (q_norm_weight.numel(),
                                    k_norm_weight.numel()) != (head_dim, head_dim):
        return None   # a norm over all of q or k (OLMo 2's) spans more blocks than a head's
    heads = n_heads + kv_heads  # q and k
    # past the counters of the launch's own column blocks (a split-K launch counts there)
    blocks = triton.cdiv((n_heads + 2 * kv_heads) * head_dim, chosen.config["BLOCK_N"])
    workspace = split_workspace(k_cache.device, 0, blocks + heads)
    if workspace is None:
        return None
    return head_norm_args(workspace[1][blocks:blocks + heads], q_norm_weight.contiguous(),
                          k_norm_weight.contiguous(), norm_eps)


_run_linear_qkv = custom_op("linear_qkv", _launch_linear_qkv,
                            mutates=("k_cache", "v_cache", "sum_out", "out"))


def linear_qkv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
               norm_weight: torch.Tensor | None = None, norm_eps: float = 1e-6,
               cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor,
               slots: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               n_heads: int, q_norm_weight: torch.Tensor | None = None,
               k_norm_weight: torch.Tensor | None = None, norm_after_rotary: bool = False,
               q_norm_bias: torch.Tensor | None = None, k_norm_bias: torch.Tensor | None = None,
               out: torch.Tensor | None = None,
               add_normed: tuple[torch.Tensor, torch.Tensor] | None = None,
               sum_out: torch.Tensor | None = None) -> torch.Tensor:
    """q of rotary(rms_norm(x) * norm_weight @ weight.T + bias), with k and v written into
    the caches (see the module).

    x (rows, K); weight ((n_heads + 2 kv_heads) * head_dim, K) and bias (its rows): q|k|v,
    each head's rows in interleave_rotary_pairs order; norm_weight (K,) turns the RMSNorm
    prologue on (one expanded from a single value is read as that value, as in tg.linear).
    k_cache, v_cache (max_batch, kv_heads, max_seq, head_dim); cos, sin fp32
    (max_seq, head_dim / 2); row r is the token at position positions[r] of cache slot
    slots[r] (int tensors (rows,), read on the device: positions must be below max_seq and
    slots below max_batch). Returns q (rows, n_heads, head_dim) in the usual layout, rotated.
    q_norm_weight, k_norm_weight (head_dim, in the usual order), given together: each q and
    k head RMS-normalised (norm_eps) and scaled by them before its rotation (Qwen3): in the
    one-row projection's epilogue where its plan allows, else in a second kernel; either one
    (heads * head_dim,): q (k) normalised as a whole (OLMo 2), in the second kernel; both
    (heads, head_dim): each head scaled by its own weight (StableLM's and Cohere's per-head
    norms), where one for all would be; norm_after_rotary: the heads rotated first, then
    normalised (Hunyuan), in the second kernel; q_norm_bias, k_norm_bias (the weights'
    shapes): added after the weights (Persimmon's head LayerNorms), in the second kernel.
    add_normed (h, w) and sum_out as in tg.linear: the projection of x + rms_norm(h) * w,
    which goes to sum_out.
    """
    check_tensor("x", x)
    check_tensor("weight", weight)
    check_like("weight", weight, "x", x)
    if x.ndim != 2 or weight.ndim != 2:
        raise ValueError(f"x must be (rows, features) and weight 2-D, got x "
                         f"{tuple(x.shape)} and weight {tuple(weight.shape)}")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads must be a positive int, got {n_heads!r}")
    rows, k = x.shape
    kv_heads, head_dim = check_cache_inputs(x, cos, sin, positions, slots, k_cache, v_cache,
                                            rows=rows)
    n = (n_heads + 2 * kv_heads) * head_dim
    if weight.shape != (n, k):
        raise ValueError(f"weight must be ({n}, {k}) for {n_heads} heads and {kv_heads} kv "
                         f"heads of {head_dim} over {k} features, got {tuple(weight.shape)}")
    if k == 0:
        raise ValueError("x and weight have 0 input features; nothing to normalise or sum")
    for name, t, shape in (("bias", bias, (n,)), ("norm_weight", norm_weight, (k,))):
        if t is not None:
            check_tensor(name, t)
            check_like(name, t, "x", x)
            check_shape(name, t, shape)
    q_norm_weight, k_norm_weight, q_norm_bias, k_norm_bias = check_head_norms(
        q_norm_weight, k_norm_weight, x, head_dim, n_heads, kv_heads, q_norm_bias,
        k_norm_bias)
    norm_eps = check_eps(norm_eps)
    if add_normed is not None:
        check_add_normed(add_normed, sum_out, x, out, ("weight", weight), ("bias", bias),
                         ("norm_weight", norm_weight), ("k_cache", k_cache),
                         ("v_cache", v_cache))
    elif sum_out is not None:
        raise ValueError("sum_out is written only with add_normed=(h, w)")
    out = prepare_out(out, (rows, n_heads, head_dim), x.dtype, x.device)
    if memory_overlaps(k_cache, v_cache):
        raise ValueError("k_cache and v_cache overlap in memory; they must be separate")
    for name, t in (("x", x), ("weight", weight), ("bias", bias), ("norm_weight", norm_weight),
                    ("k_cache", k_cache), ("v_cache", v_cache),
                    ("q_norm_weight", q_norm_weight), ("k_norm_weight", k_norm_weight),
                    ("q_norm_bias", q_norm_bias), ("k_norm_bias", k_norm_bias),
                    *zip(("add_normed's h", "add_normed's w"), add_normed or (),
                         strict=False)):
        check_no_overlap(out, name, t)
    if rows:
        # a norm handed over with x is not the norm of x + rms_norm(h) * w
        handed = usable_handoff(x, weight, norm_weight) if add_normed is None else None
        _run_linear_qkv(x, weight, bias, norm_weight, handed.x_next if handed else None,
                        handed.parts if handed else None, norm_eps, cos, sin, positions, slots,
                        k_cache, v_cache, n_heads, q_norm_weight, k_norm_weight, q_norm_bias,
                        k_norm_bias, bool(norm_after_rotary), *(add_normed or (None, None)),
                        sum_out, out)
    return out


def linear_qkv_ref(x, weight, bias=None, *, norm_weight=None, norm_eps: float = 1e-6, cos,
                   sin, positions, slots, k_cache, v_cache, n_heads: int, q_norm_weight=None,
                   k_norm_weight=None, norm_after_rotary: bool = False, q_norm_bias=None,
                   k_norm_bias=None) -> torch.Tensor:
    """The same from linear_ref and rotary_qkv_ref; writes the caches, returns q."""
    qkv = linear_ref(x, weight, bias, norm_weight=norm_weight, norm_eps=norm_eps)
    return rotary_qkv_ref(deinterleave_rotary_pairs(qkv, k_cache.shape[3]), cos, sin,
                          positions, slots, k_cache, v_cache, n_heads=n_heads,
                          q_norm_weight=q_norm_weight, k_norm_weight=k_norm_weight,
                          norm_eps=norm_eps, norm_after_rotary=norm_after_rotary,
                          q_norm_bias=q_norm_bias, k_norm_bias=k_norm_bias)
