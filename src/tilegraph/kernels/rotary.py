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

from ._checks import check_tensor, prepare_out
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
                       N_HEADS: tl.constexpr, N_KV_HEADS: tl.constexpr,
                       HEAD_DIM: tl.constexpr, PDL: tl.constexpr, BLOCK_HALF: tl.constexpr):
    """Program (row, head) over heads q_0..q_{H-1}, k_0..k_{KV-1}: x of that head, rotated
    at the row's position p in the half-split layout, (x1, x2) -> (x1 c - x2 s, x2 c + x1 s)
    with c = cos[p], s = sin[p] (fp32); q heads go to q, k heads to k_cache[slot, head, p]
    together with the same head of v. PDL: launched with programmatic dependent launch, it
    starts while the projection before it finishes and reads nothing before that is done."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # qkv is final
        tl.extra.cuda.gdc_launch_dependents()  # attention may launch; it waits for us too
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    half: tl.constexpr = HEAD_DIM // 2
    offs = tl.arange(0, BLOCK_HALF)
    mask = offs < half
    position = tl.load(positions_ptr + row).to(tl.int64)
    c = tl.load(cos_ptr + position * stride_cs + offs, mask=mask)
    s = tl.load(sin_ptr + position * stride_cs + offs, mask=mask)
    x_row = qkv_ptr + row * stride_xr + head * HEAD_DIM   # q heads, then k heads: contiguous
    x1 = tl.load(x_row + offs, mask=mask).to(tl.float32)
    x2 = tl.load(x_row + half + offs, mask=mask).to(tl.float32)
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
        v1 = tl.load(v_row + offs, mask=mask)
        v2 = tl.load(v_row + half + offs, mask=mask)
        tl.store(v_ptr + cache + offs, v1, mask=mask)
        tl.store(v_ptr + cache + half + offs, v2, mask=mask)


def _launch_rotary_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                       positions: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor,
                       v_cache: torch.Tensor, n_heads: int, out: torch.Tensor) -> None:
    rows = qkv.shape[0]
    n_kv_heads, head_dim = k_cache.shape[1], k_cache.shape[3]
    pdl = PDL_ENABLED and supports_pdl(qkv.device)
    _rotary_qkv_kernel[(rows, n_heads + n_kv_heads)](
        out, out.stride(0), out.stride(1), qkv, qkv.stride(0), cos, sin, cos.stride(0),
        positions, slots, k_cache, v_cache, k_cache.stride(0), k_cache.stride(1),
        k_cache.stride(2), N_HEADS=n_heads, N_KV_HEADS=n_kv_heads, HEAD_DIM=head_dim,
        PDL=pdl, BLOCK_HALF=triton.next_power_of_2(head_dim // 2), num_warps=1,
        **({"launch_pdl": True} if pdl else {}))
    launched(qkv.device, pdl, (out, k_cache, v_cache), ((k_cache, v_cache), slots, positions))


_run_rotary_qkv = custom_op("rotary_qkv", _launch_rotary_qkv,
                            mutates=("k_cache", "v_cache", "out"))


def rotary_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               positions: torch.Tensor, slots: torch.Tensor, k_cache: torch.Tensor,
               v_cache: torch.Tensor, *, n_heads: int, out: torch.Tensor | None = None
               ) -> torch.Tensor:
    """Rotate q and k of each row of `qkv` (rows, (H + 2 KV) * head_dim) at its position;
    write k and v into k_cache / v_cache (max_batch, KV, max_seq, head_dim) at [slot,
    :, position]; return q (rows, H, head_dim). cos, sin: fp32 (max_seq, head_dim / 2);
    positions, slots: int (rows,), on qkv's device. Positions must be below max_seq and
    slots below max_batch (they are read on the device, unchecked)."""
    check_tensor("qkv", qkv)
    n_kv_heads, head_dim = check_cache_inputs(qkv, cos, sin, positions, slots, k_cache,
                                              v_cache, rows=qkv.shape[0] if qkv.ndim else 0)
    if qkv.ndim != 2 or qkv.stride(1) != 1 or \
            qkv.shape[1] != (n_heads + 2 * n_kv_heads) * head_dim:
        raise ValueError(f"qkv must be (rows, {(n_heads + 2 * n_kv_heads) * head_dim}) with "
                         f"unit column stride for {n_heads} heads, {n_kv_heads} kv heads of "
                         f"{head_dim}; got {tuple(qkv.shape)}")
    rows = qkv.shape[0]
    out = prepare_out(out, (rows, n_heads, head_dim), qkv.dtype, qkv.device)
    if out.stride(2) != 1:
        raise ValueError("out must have a unit last stride")
    if rows:
        _run_rotary_qkv(qkv, cos, sin, positions, slots, k_cache, v_cache, n_heads, out)
    return out


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


def rotary_qkv_ref(qkv, cos, sin, positions, slots, k_cache, v_cache, *, n_heads: int):
    """The same in PyTorch (fp32 rotation, cast back); writes the caches, returns q."""
    n_kv, head_dim = k_cache.shape[1], k_cache.shape[3]
    rows = qkv.shape[0]
    heads = qkv.view(rows, n_heads + 2 * n_kv, head_dim)
    x = heads[:, :n_heads + n_kv].float()
    first, second = x.chunk(2, dim=-1)
    c, s = cos[positions][:, None], sin[positions][:, None]
    rotated = torch.cat((first * c - second * s, second * c + first * s), -1).to(qkv.dtype)
    k_cache[slots, :, positions] = rotated[:, n_heads:]
    v_cache[slots, :, positions] = heads[:, n_heads + n_kv:]
    return rotated[:, :n_heads]
