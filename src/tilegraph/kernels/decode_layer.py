"""The seed's decode layer: h_next = h + (rms_norm(h) * g) @ Wq.T @ Wo.T, in one or two kernels.

Two kernels: tg.linear's decode path twice, the norm in the first one's prologue and the
residual in the second one's epilogue, each streaming its weight before the previous kernel
ends (programmatic dependent launch); on the tensor-core path (2-16 rows) the norm is a small
kernel of its own before the first. At one row they are GEMVs back to back, planned as such a
chain (decode_plan.plan's gemv_chain). Bit-reproducible.

One kernel (square layers where the rule below says it is faster: one row, or two in small
fp32 layers): program p owns rows [p*BQ, (p+1)*BQ) of Wq and the same columns of Wo. It
computes its BQ values of q alone, multiplies them into its (D, BQ) slice of Wo, and adds
that partial h_next into an fp32 accumulator with atomic adds (program 0 adds h itself, the
residual).
One kernel boundary a layer instead of two; each weight byte is still read once. The price:
the order of the fp32 additions varies from run to run (the last bits of the result vary;
torch.use_deterministic_algorithms(True) selects the two kernels), the result is the fp32
accumulator itself (so this path runs where h, and so the result, is fp32: 16-bit models
carry h in fp32 between layers), and the accumulator must be zero before the kernel starts.

That last point is the buffer protocol. A memset before every layer would break the chain of
dependent launches, so each kernel also zeroes the accumulator of the *next* layer, after its
griddepcontrol.wait (when the previous layer, which may have read that memory, is done). A
result made with out=None carries that zeroed buffer with it, and a decode_layer given that
result as h accumulates into it: a loop of tg.decode_layer costs one kernel a layer. The
buffer is used once, only on the stream and in the capture it was zeroed in (a graph replays
its own zeroing, an eager call cannot), and otherwise a fresh zeroed buffer is made.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import (
    check_eps,
    check_like,
    check_no_out_for_grad,
    check_no_overlap,
    check_shape,
    check_tensor,
    prepare_out,
    wants_grad,
)
from ._launch import sm_count, stream_place, weight_alignment
from ._ops import custom_op
from ._pdl import launched, use_pdl
from .linear import _launch_linear, linear
from .rms_norm import rms_norm_ref


@triton.jit
def _decode_layer_kernel(acc_ptr, stride_am, stride_ac, zero_ptr, h_ptr, stride_hm, stride_hc,
                         norm_w_ptr, wq_ptr, stride_wq, wo_ptr, stride_wo_out, stride_wo_in,
                         M, D, eps,
                         ZERO_NEXT: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_D: tl.constexpr,
                         ALIGN: tl.constexpr = 1, WO_UNIT_OUT: tl.constexpr = False,
                         COPIES: tl.constexpr = 1, H_COPIES: tl.constexpr = 1):
    """acc[p % COPIES]_m += [p == 0] h_m + sum_{i in rows(p)} Wo[:, i] * q_mi, with
    q_mi = rstd_m * sum_k h_mk g_k Wq_ik and rstd_m = 1 / sqrt(mean_k h_mk^2 + eps),
    h_m the sum of H_COPIES copies of h (stride_hc apart; acc's are stride_ac apart).

    Both weight tiles are read as (BLOCK_Q, BLOCK_D): Wq by its rows, Wo by its columns,
    with any strides (stride_wo_out is 1 where Wo is stored transposed, its columns then
    contiguous). PREFETCH_WEIGHT: both tiles are loaded before griddepcontrol.wait, while
    the previous kernel in the stream finishes (_pdl.py: it must not write them).
    ZERO_NEXT: zero the next layer's accumulator (same strides as acc) after the wait.
    ALIGN: D, stride_wq and Wo's stride other than the unit one (stride_wo_in where
    WO_UNIT_OUT, else stride_wo_out) arrive divided by it (_launch.weight_alignment).
    """
    D = D * ALIGN
    stride_wq = stride_wq * ALIGN
    if WO_UNIT_OUT:
        stride_wo_in = stride_wo_in * ALIGN
    else:
        stride_wo_out = stride_wo_out * ALIGN
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
        tl.extra.cuda.gdc_wait()               # h is final; the buffer to zero is free
        tl.extra.cuda.gdc_launch_dependents()  # only now may the next layer prefetch
    g = tl.load(norm_w_ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    for m in tl.static_range(BLOCK_M):
        n_valid = tl.where(m < M, D, 0)  # masks nothing in rows past M
        h = tl.zeros([BLOCK_D], tl.float32)
        for c in tl.static_range(H_COPIES):
            h += tl.load(h_ptr + c * stride_hc + m * stride_hm + offs_d,
                         mask=offs_d < n_valid, other=0.0).to(tl.float32)     # (BD,)
        rstd = tl.rsqrt(tl.sum(h * h) / D + eps)
        q = tl.sum(wq.to(tl.float32) * (h * g)[None, :], axis=1) * rstd        # (BQ,)
        part = tl.sum(wo.to(tl.float32) * q[:, None], axis=0)                  # (BD,)
        part += tl.where(pid == 0, h, 0.0)
        tl.atomic_add(acc_ptr + (pid % COPIES) * stride_ac + m * stride_am + offs_d, part,
                      mask=offs_d < n_valid, sem="relaxed")
        if ZERO_NEXT:
            for c in tl.static_range(COPIES):
                tl.store(zero_ptr + c * stride_ac + m * stride_am + offs_q,
                         tl.zeros([BLOCK_Q], tl.float32), mask=offs_q < n_valid)


# The one-kernel kernel applies each weight tile to the rows one by one (the rule runs it
# at one row, and at two in small fp32 layers). A program's two weight tiles (its rows of
# Wq, its columns of Wo) live in registers: at most half of an SM's 256 KB register file,
# so a program fits beside the next layer's.
MAX_TILE_BYTES = 128 * 1024
# Weight bytes a thread holds: 512 was the fastest, or within 10% of it, in every swept case.
BYTES_PER_THREAD = 512
# fp32 layers up to this size run one kernel at two rows as well: d = 768 (4.7 MB) 1.05x
# faster than two kernels, d = 1024 (8.4 MB) 0.96x (H100, notes/decode.md, session 52).
TWO_ROW_LAYER_BYTES = 6 * 2**20


def decode_layer_config(rows: int, d: int, element_size: int) -> dict:
    """Block shape of the one-kernel path: rows of Wq (and columns of Wo) a program owns, and
    its warps; 16 rows a program at batch 1, 8 with more rows of h (more work a row)."""
    block_d = triton.next_power_of_2(d)
    block_q = 16 if rows == 1 else 8
    tile_bytes = 2 * block_q * block_d * element_size
    num_warps = max(1, min(16, tile_bytes // (32 * BYTES_PER_THREAD)))
    return {"BLOCK_Q": block_q, "BLOCK_D": block_d, "num_warps": num_warps, "num_stages": 1}


def one_kernel_is_faster(config: dict, rows: int, d: int, element_size: int,
                         sm_count: int | None) -> bool:
    """Whether a stack of these layers runs faster in one kernel a layer than in two: where a
    layer fits in one wave of programs of at most MAX_TILE_BYTES (else the second wave
    streams only after the first has finished), at one row, and at two in fp32 on layers of
    at most TWO_ROW_LAYER_BYTES. Measured on whole stacks (notes/decode.md): at one row one
    kernel took bf16 d=1024-2048 and fp32 d=512-1024 1.03-1.52x faster; fp32 at two rows
    1.05-1.22x at d=384-768 (fp32 accumulator copies, session 52) but 0.96x at d=1024;
    elsewhere the two kernels (CUDA-core matvec, tensor cores) were as fast or faster (16-bit
    d=512-1024 at 2-4 rows 1.1-2.3x, fp32 d=512-768 at 3 rows 1.03-1.17x, d=1024 at 2/4/8
    rows 1.06/1.18/1.19x).
    """
    tile_bytes = 2 * config["BLOCK_Q"] * config["BLOCK_D"] * element_size
    programs = triton.cdiv(d, config["BLOCK_Q"])
    one_wave = tile_bytes <= MAX_TILE_BYTES and (sm_count is None or programs <= sm_count)
    two_rows = rows == 2 and element_size == 4 and 2 * d * d * element_size <= TWO_ROW_LAYER_BYTES
    return one_wave and (rows == 1 or two_rows)


def _fits_one_kernel(h: torch.Tensor, wq: torch.Tensor, wo: torch.Tensor) -> bool:
    """Whether the one-kernel path is the faster one for this layer, whatever h's dtype."""
    d = h.shape[-1]
    rows = h.numel() // d
    if wq.shape != (d, d) or wo.shape != (d, d) or torch.are_deterministic_algorithms_enabled():
        return False
    config = decode_layer_config(rows, d, wq.element_size())
    return one_kernel_is_faster(config, rows, d, wq.element_size(), sm_count(h.device))


def _uses_one_kernel(h: torch.Tensor, wq: torch.Tensor, wo: torch.Tensor,
                     result_dtype: torch.dtype | None = None) -> bool:
    """Whether this call runs one kernel: only where its result is fp32 (the kernel's
    accumulator), h's dtype unless the caller's out says otherwise."""
    return (result_dtype or h.dtype) == torch.float32 and _fits_one_kernel(h, wq, wo)


def residual_dtype(h: torch.Tensor, wq: torch.Tensor, wo: torch.Tensor) -> torch.dtype:
    """The dtype to carry h in between layers like this one, for the fastest chain: float32
    where one kernel a layer runs (its fp32 accumulator is the result), else the weights'
    dtype (the two kernels re-read h from L2 in every program: fp32 h doubles those bytes,
    10% of a bf16 d=2048 stack at 3-8 rows, notes/decode.md)."""
    return torch.float32 if _fits_one_kernel(h, wq, wo) else wq.dtype


def _launch_one_kernel(acc: torch.Tensor, zero_next: torch.Tensor | None, h: torch.Tensor,
                       norm_weight: torch.Tensor, wq: torch.Tensor, wo: torch.Tensor,
                       eps: float, config: dict | None = None, h_copies: int = 1) -> None:
    """acc += layer(h), acc being zero on entry, and zero_next.zero_() when given. acc and
    zero_next are contiguous fp32 tensors of h's row shape, or (copies, *that) where the
    programs spread their atomic adds over copies (the layer's result is then their sum);
    h is (h_copies, ..., d) where it is such a sum. config: decode_layer_config's."""
    D = h.shape[-1]
    h_rows = h.reshape(h_copies, -1, D)
    M = h_rows.shape[1]
    # The kernel walks h, Wq's rows and the norm weight with unit stride (any Wo strides do).
    h_rows, wq, norm_weight = (t if t.stride(-1) == 1 else t.contiguous()
                               for t in (h_rows, wq, norm_weight))
    config = config or decode_layer_config(M, D, wq.element_size())
    pdl = use_pdl(h.device, (wq, wo))
    acc_rows = acc.view(-1, M, D)
    # Wo's tile is contiguous along the axis of unit stride; the other stride is the one the
    # alignment is about (none where neither is 1).
    unit_out = wo.stride(0) == 1
    wo_strides = [wo.stride(0), wo.stride(1)]
    long_axis = 1 if unit_out else 0 if wo.stride(1) == 1 else None
    align = 1 if long_axis is None else weight_alignment(
        wq.element_size(), D, wq.stride(0), wo_strides[long_axis])
    if long_axis is not None:
        wo_strides[long_axis] //= align
    _decode_layer_kernel[(triton.cdiv(D, config["BLOCK_Q"]),)](
        acc_rows, acc_rows.stride(1), acc_rows.stride(0),
        zero_next if zero_next is not None else acc_rows,
        h_rows, h_rows.stride(1), h_rows.stride(0), norm_weight, wq, wq.stride(0) // align,
        wo, *wo_strides, M, D // align, eps, ZERO_NEXT=zero_next is not None,
        PREFETCH_WEIGHT=pdl, BLOCK_M=triton.next_power_of_2(M), ALIGN=align,
        WO_UNIT_OUT=unit_out, COPIES=acc_rows.shape[0], H_COPIES=h_copies, **config,
        **({"launch_pdl": True} if pdl else {}))
    launched(h.device, pdl, (acc, zero_next) if zero_next is not None else (acc,))


def _launch_decode_layer(h: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                         wo: torch.Tensor, eps: float, out: torch.Tensor) -> None:
    if _uses_one_kernel(h, wq, wo, out.dtype):
        out.zero_()  # a caller's buffer: nothing zeroed it for us
        _launch_one_kernel(out, None, h, norm_weight, wq, wo, eps)
        return
    h = h.to(out.dtype)  # a 16-bit h starting an fp32 stream: the two kernels take fp32 h
    q = torch.empty((*h.shape[:-1], wq.shape[0]), dtype=out.dtype, device=h.device)
    _launch_linear(h, wq, None, norm_weight, eps, "none", None, None, q, gemv_chain=True)
    _launch_linear(q, wo, None, None, eps, "none", h, None, out, gemv_chain=True)


_run_decode_layer = custom_op("decode_layer", _launch_decode_layer)


def _zeroed_accumulator(h: torch.Tensor) -> torch.Tensor:
    """The zeroed buffer h carries from the decode_layer that made it, if it may be used here;
    else a new zeroed one. A carried buffer is handed out once."""
    carried = h.__dict__.pop("_tilegraph_zeroed_next", None)
    if carried is not None:
        buffer, where = carried
        _, capturing, token = where
        # Inside a capture tilegraph did not start (no token), the buffer may come from an
        # earlier capture on the same stream, whose replays alone zero it.
        if where == stream_place(h.device) and (not capturing or token is not None):
            return buffer
    return torch.zeros(h.shape, dtype=torch.float32, device=h.device)


def _chained_one_kernel(acc: torch.Tensor, h: torch.Tensor, norm_weight: torch.Tensor,
                        wq: torch.Tensor, wo: torch.Tensor, eps: float) -> torch.Tensor:
    """The one kernel into the zeroed acc, which then carries the next layer's accumulator,
    zeroed by the same kernel (the buffer protocol above)."""
    zero_next = torch.empty_like(acc)
    _launch_one_kernel(acc, zero_next, h, norm_weight, wq, wo, eps)
    acc._tilegraph_zeroed_next = (zero_next, stream_place(h.device))
    return acc


def _check(h, norm_weight, wq, wo) -> None:
    check_tensor("h", h, min_ndim=1, differentiable=True)
    for name, t in (("norm_weight", norm_weight), ("wq", wq), ("wo", wo)):
        check_tensor(name, t, differentiable=True)
    check_like("norm_weight", norm_weight, "wq", wq)
    check_like("wo", wo, "wq", wq)
    if h.device != wq.device:
        raise ValueError(f"h is on {h.device} but wq is on {wq.device}")
    if h.dtype not in (wq.dtype, torch.float32):
        raise TypeError(f"h has dtype {h.dtype}; it must be the weights' dtype ({wq.dtype}) "
                        "or float32 (a residual stream kept in fp32)")
    d = h.shape[-1]
    if wq.ndim != 2 or wq.shape[1] != d:
        raise ValueError(f"wq must have shape (q_features, {d}) for h of shape "
                         f"{tuple(h.shape)}, got {tuple(wq.shape)}")
    check_shape("wo", wo, (d, wq.shape[0]))
    check_shape("norm_weight", norm_weight, (d,))
    if d == 0:
        raise ValueError("h has 0 features; nothing to normalise")


def _differentiable_layer(h, norm_weight, wq, wo, eps: float) -> torch.Tensor:
    """Training: the layer as two differentiable tg.linear calls, whose backward passes
    autograd chains (a 16-bit layer over an fp32 h adds its residual in fp32)."""
    q = linear(h.to(wq.dtype), wq, norm_weight=norm_weight, norm_eps=eps)
    if h.dtype == wq.dtype:
        return linear(q, wo, residual=h)
    return h + linear(q, wo).to(h.dtype)


def decode_layer(h: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                 wo: torch.Tensor, eps: float = 1e-6, *, out: torch.Tensor | None = None,
                 next_norm_weight: torch.Tensor | None = None) -> torch.Tensor:
    """h + (rms_norm(h) * norm_weight) @ wq.T @ wo.T for h (..., d), norm_weight (d,),
    wq (n, d), wo (d, n). The weights share one dtype; h is of that dtype or float32 (16-bit
    weights with h kept in fp32 between layers: then a square layer of one row runs as
    one kernel where that was measured faster). Returns h's shape and dtype, or out's:
    out may be float32 where h is 16-bit, the layer that starts an fp32 stream (it reads
    h as it is, so no cast runs before it).

    Weights are streamed before the previous kernel in the stream has finished (programmatic
    dependent launch), except where that kernel is a tilegraph kernel writing them.
    next_norm_weight (d,): the next layer's norm weight, as in tg.linear: on the tensor-core
    path (2-16 rows) this layer hands that norm over to the next layer's first kernel.
    """
    _check(h, norm_weight, wq, wo)
    eps = check_eps(eps)
    if next_norm_weight is not None:
        check_tensor("next_norm_weight", next_norm_weight, differentiable=True)
        check_like("next_norm_weight", next_norm_weight, "wq", wq)
        check_shape("next_norm_weight", next_norm_weight, (h.shape[-1],))
    if wants_grad(h, norm_weight, wq, wo):
        check_no_out_for_grad(out)
        return _differentiable_layer(h, norm_weight, wq, wo, eps)
    starts_fp32 = (out is not None and isinstance(out, torch.Tensor) and h.dtype == wq.dtype
                   and h.dtype != torch.float32 and out.dtype == torch.float32)
    result_dtype = torch.float32 if starts_fp32 else h.dtype
    if out is None and not torch.compiler.is_compiling() and h.numel():
        if _uses_one_kernel(h, wq, wo):
            return _chained_one_kernel(_zeroed_accumulator(h), h, norm_weight, wq, wo, eps)
        # Several rows: two tg.linear calls, which hand the norms over on the tensor cores.
        # One row falls through to the op's two GEMVs, planned as a chain of them.
        if h.dtype == wq.dtype and h.numel() > h.shape[-1]:
            q = linear(h, wq, norm_weight=norm_weight, norm_eps=eps)
            return linear(q, wo, residual=h, next_norm_weight=next_norm_weight)
    out = prepare_out(out, h.shape, result_dtype, h.device)
    for name, t in (("h", h), ("norm_weight", norm_weight), ("wq", wq), ("wo", wo)):
        check_no_overlap(out, name, t)
    if not out.numel():
        return out
    if (starts_fp32 and not torch.compiler.is_compiling()
            and _uses_one_kernel(h, wq, wo, out.dtype)):
        return _chained_one_kernel(out.zero_(), h, norm_weight, wq, wo, eps)
    _run_decode_layer(h, norm_weight, wq, wo, eps, out)
    return out


def decode_layer_ref(h: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                     wo: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The layer in PyTorch: float64 for float64 input, else fp32 cast back to h's dtype."""
    compute = torch.float64 if h.dtype == torch.float64 else torch.float32
    v = h.to(compute)
    q = rms_norm_ref(v, norm_weight.to(compute), eps) @ wq.to(compute).T
    return (v + q @ wo.to(compute).T).to(h.dtype)
