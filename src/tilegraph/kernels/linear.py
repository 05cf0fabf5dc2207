"""Fused linear layer: y = act(rms_norm(x) * norm_weight @ weight.T + bias) + residual.

One kernel for the whole expression, every part optional (except a norm prologue on the
tensor-core decode path where its tile reads K in several steps: that runs as a small kernel
just before it, unless the call that wrote x handed it over: next_norm_weight,
_norm_handoff.py). Up to DECODE_MAX_ROWS rows (decode) take one of the kernels that stream
the weight once for all rows (decode_plan.py says which: tuned per shape, or by rule),
launched with programmatic dependent launch where that is safe (_pdl.py); more rows take
the tiled tensor-core GEMM of matmul.py with the same prologue and epilogue.
"""

from __future__ import annotations

import torch
import triton

from . import _norm_handoff as norm_handoff
from . import decode_plan
from ._activation import GLU_ACTIVATIONS, activation_code, activation_ref
from ._added_norm import added_args
from ._checks import (
    as_rows,
    check_eps,
    check_like,
    check_no_out_for_grad,
    check_no_overlap,
    check_shape,
    check_tensor,
    prepare_out,
    wants_grad,
)
from ._dot_rows import DOT_ROWS
from ._linear_autograd import linear_autograd
from ._norm_handoff import NormHandoff
from ._norm_weight import kernel_norm_weight
from ._ops import custom_op
from ._pdl import launched, use_pdl
from .matmul import launch_gemm
from .rms_norm import launch_rms_norm, rms_norm, rms_norm_ref


def _launch_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                   norm_weight: torch.Tensor | None, norm_eps: float, activation: str,
                   residual: torch.Tensor | None, prefetch_weight: bool | None,
                   out: torch.Tensor, gemv_chain: bool = False,
                   l2_ahead: torch.Tensor | None = None) -> None:
    """gemv_chain: as decode_plan.plan's (tg.decode_layer's projections); l2_ahead: as
    tg.linear's."""
    x_rows = as_rows(x)
    y_rows = out.view(-1, out.shape[-1])
    res_rows = as_rows(residual) if residual is not None else None
    weight = weight if weight.stride(-1) == 1 else weight.contiguous()
    bias = bias.contiguous() if bias is not None else None
    norm_weight = kernel_norm_weight(norm_weight)
    rows, k = x_rows.shape
    if rows <= decode_plan.DECODE_MAX_ROWS:
        fused = norm_weight is not None or activation != "none"
        plain = not fused and residual is None and x.dtype == weight.dtype == out.dtype and (
            bias is None or bias.dtype == weight.dtype)
        if plain:  # cuBLAS runs it as one call: timed against the rule on first use
            chosen = decode_plan.plain_plan(x_rows, weight, bias, y_rows)
        else:
            chosen = decode_plan.plan(rows, weight.shape[0], k, weight.dtype, x.device, fused,
                                      gemv_chain)
        pdl = chosen.kind != "cublas" and use_pdl(x.device, (weight,), prefetch_weight)
        decode_plan.launch(chosen, x_rows, weight, y_rows, norm_weight, norm_eps, bias,
                           activation, res_rows, pdl, l2_ahead=l2_ahead)
        launched(x.device, pdl, (y_rows,))
    else:
        # tg.decode_layer may pass fp32 rows with 16-bit weights; tensor cores take one dtype.
        x_rows = x_rows.to(weight.dtype)
        norm_weight = norm_weight.contiguous() if norm_weight is not None else None
        launch_gemm(x_rows, weight.t(), y_rows, norm_weight=norm_weight, eps=norm_eps,
                    bias=bias, activation=activation, residual=res_rows)


_run_linear = custom_op("linear", _launch_linear)


def _launch_linear_added(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         norm_weight: torch.Tensor | None, norm_eps: float, activation: str,
                         residual: torch.Tensor | None, prefetch_weight: bool | None,
                         addend: torch.Tensor, addend_weight: torch.Tensor,
                         sum_out: torch.Tensor, out: torch.Tensor,
                         l2_ahead: torch.Tensor | None = None) -> None:
    """_launch_linear of s = x + rms_norm(addend) * addend_weight, s written to sum_out: by
    the decode kernels (_added_norm.py; a fused plan, never cuBLAS), or tg.rms_norm's kernel
    before the tiled GEMM."""
    x_rows = as_rows(x)
    rows, k = x_rows.shape
    if rows <= decode_plan.DECODE_MAX_ROWS:
        weight = weight if weight.stride(-1) == 1 else weight.contiguous()
        chosen = decode_plan.plan(rows, weight.shape[0], k, weight.dtype, x.device, fused=True)
        y_rows, sum_rows = out.view(-1, out.shape[-1]), sum_out.view(-1, k)
        pdl = use_pdl(x.device, (weight,), prefetch_weight)
        decode_plan.launch(
            chosen, x_rows, weight, y_rows, kernel_norm_weight(norm_weight), norm_eps,
            bias.contiguous() if bias is not None else None, activation,
            as_rows(residual) if residual is not None else None, pdl, l2_ahead=l2_ahead,
            added=added_args(as_rows(addend), addend_weight.contiguous(), sum_rows))
        launched(x.device, pdl, (y_rows, sum_rows))
        return
    launch_rms_norm(addend, addend_weight, norm_eps, x, sum_out)
    _launch_linear(sum_out, weight, bias, norm_weight, norm_eps, activation, residual,
                   prefetch_weight, out, False, l2_ahead)


_run_linear_added = custom_op("linear_added", _launch_linear_added,
                              mutates=("sum_out", "out"))


def _launch_linear_handoff(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                           norm_weight: torch.Tensor | None, x_next: torch.Tensor | None,
                           norm_parts: torch.Tensor | None, norm_eps: float, activation: str,
                           residual: torch.Tensor | None, prefetch_weight: bool | None,
                           next_norm_weight: torch.Tensor | None,
                           next_x_next: torch.Tensor | None, next_parts: torch.Tensor | None,
                           out: torch.Tensor) -> None:
    """_launch_linear on the tensor-core decode path, with a norm handed over to it
    (x_next = x * norm_weight and norm_parts) or by it (next_norm_weight, into next_x_next
    and next_parts), or both (_norm_handoff.py)."""
    x_rows = as_rows(x)
    y_rows = out.view(-1, out.shape[-1])
    rows, k = x_rows.shape
    chosen = decode_plan.plan(rows, weight.shape[0], k, weight.dtype, x.device, fused=True)
    early_reads = (weight,) if next_norm_weight is None else (weight, next_norm_weight)
    pdl = use_pdl(x.device, early_reads, prefetch_weight)
    hand_over = None
    if next_norm_weight is not None:
        hand_over = (kernel_norm_weight(next_norm_weight), next_x_next, next_parts)
    decode_plan.launch(chosen, x_rows, weight if weight.stride(-1) == 1 else weight.contiguous(),
                       y_rows, kernel_norm_weight(norm_weight),
                       norm_eps, bias.contiguous() if bias is not None else None,
                       activation, as_rows(residual) if residual is not None else None, pdl,
                       handed=(x_next, norm_parts) if norm_parts is not None else None,
                       hand_over=hand_over)
    launched(x.device, pdl,
             (y_rows,) if hand_over is None else (y_rows, next_x_next, next_parts))


_run_linear_handoff = custom_op("linear_handoff", _launch_linear_handoff,
                                mutates=("out", "next_x_next", "next_parts"))


def _tensor_core_plan(x: torch.Tensor, weight: torch.Tensor):
    """The decode plan of a call whose norm may be handed over, where it is the tensor-core
    kernel's (the only one that takes a handoff); else None."""
    rows, k = x.numel() // x.shape[-1], x.shape[-1]
    if torch.compiler.is_compiling() or not 2 <= rows <= decode_plan.DECODE_MAX_ROWS:
        return None
    chosen = decode_plan.plan(rows, weight.shape[0], k, weight.dtype, x.device, fused=True)
    return chosen if chosen.kind == "dot" else None


def usable_handoff(x: torch.Tensor, weight: torch.Tensor,
                   norm_weight: torch.Tensor | None) -> NormHandoff | None:
    """The norm handed over with x, where a call of x by weight with this norm can use it."""
    if norm_weight is None:
        return None
    handed = norm_handoff.take(x, norm_weight)
    return handed if handed is not None and _tensor_core_plan(x, weight) else None


def _next_buffers(x: torch.Tensor, weight: torch.Tensor, activation: str, out: torch.Tensor,
                  next_norm_weight: torch.Tensor | None) -> tuple | None:
    """(x_next, parts) where this call can hand the next norm over; else None."""
    if next_norm_weight is None or activation in GLU_ACTIVATIONS:
        return None
    chosen = _tensor_core_plan(x, weight)
    if chosen is None:
        return None
    n_blocks = triton.cdiv(weight.shape[0], chosen.config["BLOCK_N"])
    if not norm_handoff.can_hand_over(out, next_norm_weight, n_blocks):
        return None
    return norm_handoff.new_buffers(x.numel() // x.shape[-1], weight.shape[0], n_blocks,
                                    DOT_ROWS, x.dtype, x.device)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           norm_weight: torch.Tensor | None = None, norm_eps: float = 1e-6,
           activation: str | None = None, residual: torch.Tensor | None = None,
           out: torch.Tensor | None = None, prefetch_weight: bool | None = None,
           next_norm_weight: torch.Tensor | None = None,
           l2_ahead: torch.Tensor | None = None,
           add_normed: tuple[torch.Tensor, torch.Tensor] | None = None,
           sum_out: torch.Tensor | None = None) -> torch.Tensor:
    """act(rms_norm(x) * norm_weight @ weight.T + bias) + residual, fused (see the module).

    x (..., K); weight (N, K); bias (N,); norm_weight (K,) turns the RMSNorm prologue on;
    residual (..., N). All tensors share x's dtype and device. Returns (..., N). A norm
    weight expanded from one value (stride 0: `g.expand(K)` of a one-element g, such as the
    ones a norm leaves where its weight is folded into `weight`'s columns) is read as that
    one value on the decode path (kernels/_norm_weight.py).
    activation: None, "relu", "gelu", "gelu_tanh", "relu2" (relu(x)^2), or a gated one,
    "swiglu", "geglu" or "geglu_tanh": the rows of weight (and bias) interleave gate and
    up, (gate_0, up_0, gate_1, up_1, ...) (interleave_gate_up makes that layout), and the
    result act(gate) * up has N // 2 columns, as has residual; act is silu, gelu, or gelu's
    tanh approximation.

    Few rows (decode) on Hopper or newer launch with programmatic dependent launch: the
    kernel starts streaming `weight` while the previous kernel in the stream is still
    finishing, and reads everything else only after it has; it does not when that previous
    kernel is a tilegraph kernel writing `weight`. prefetch_weight=False (or TILEGRAPH_PDL=0
    for the process) turns it off; None and True leave it on where it is safe.

    next_norm_weight (N_out,): the norm weight of the call that will read this result next
    as `tg.linear(result, w, norm_weight=next_norm_weight)` (a decoder's residual stream).
    On the tensor-core decode path (2-16 rows) this kernel then also hands that norm over,
    and the next call runs no norm kernel of its own; the result is the same either way.
    The handoff holds while the result is unchanged (see kernels/_norm_handoff.py).

    l2_ahead (contiguous, on x's device; e.g. the first rows of the next projection's
    weight): a hint. A one-row call that runs the GEMV asks L2 for all of its bytes before
    it waits for the kernel before it, so that a later kernel finds them there: what an
    output projection beside attention, which reads little memory, can stream for gate/up
    (tg.Generator chooses how much by timing its batch-1 steps). Other calls ignore it; the
    result is the same with or without it.

    add_normed (h, w), with sum_out: the projection reads s = x + rms_norm(h) * w instead
    of x (h of x's shape, w (K,); the norm by norm_eps, rounded to x's dtype before the
    add, as tg.rms_norm(h, w, norm_eps, residual=x) makes s) and writes s to sum_out (x's
    shape, contiguous, apart from every other argument): a residual stream whose
    projection outputs are normalised before they are added (Gemma's norms after attention
    and the MLP). Up to 16 rows the decode kernels form s in their prologue (the
    tensor-core kernel in its norm's kernel before it); more rows (the tiled GEMM) run
    tg.rms_norm's kernel first. No autograd.
    """
    check_tensor("x", x, min_ndim=1, differentiable=True)
    check_tensor("weight", weight, differentiable=True)
    check_like("weight", weight, "x", x)
    if weight.ndim != 2:
        raise ValueError(f"weight must be 2-D (out_features, in_features), got shape "
                         f"{tuple(weight.shape)}")
    code = activation_code(activation, glu=True)
    n_rows, k = weight.shape
    gated = code in GLU_ACTIVATIONS
    n_out = n_rows // 2 if gated else n_rows
    if gated and n_rows % 2:
        raise ValueError(f"activation={code!r} takes a weight of interleaved (gate, up) rows, "
                         f"an even count; got {n_rows}")
    if x.shape[-1] != k:
        raise ValueError(f"x has {x.shape[-1]} features but weight expects {k} "
                         f"(x {tuple(x.shape)}, weight {tuple(weight.shape)})")
    if k == 0:
        raise ValueError("x and weight have 0 input features; nothing to normalise or sum")
    out_shape = (*x.shape[:-1], n_out)
    for name, t, shape in (("bias", bias, (n_rows,)), ("norm_weight", norm_weight, (k,)),
                           ("residual", residual, out_shape),
                           ("next_norm_weight", next_norm_weight, (n_out,))):
        if t is not None:
            check_tensor(name, t, differentiable=True)
            check_like(name, t, "x", x)
            check_shape(name, t, shape)
    norm_eps = check_eps(norm_eps)
    if add_normed is not None:
        check_add_normed(add_normed, sum_out, x, out, ("weight", weight), ("bias", bias),
                          ("norm_weight", norm_weight), ("residual", residual))
    elif sum_out is not None:
        raise ValueError("sum_out is written only with add_normed=(h, w)")
    if l2_ahead is not None and (not isinstance(l2_ahead, torch.Tensor)
                                 or l2_ahead.device != x.device
                                 or not l2_ahead.is_contiguous()):
        raise ValueError("l2_ahead must be a contiguous tensor on x's device")
    if wants_grad(x, weight, bias, norm_weight, residual,
                  *(add_normed if add_normed is not None else ())):
        # Training: the tiled GEMM at every row count, keeping what the backward needs.
        check_no_out_for_grad(out)
        if add_normed is not None:
            raise ValueError("add_normed writes sum_out, which autograd cannot follow: "
                             "call tg.rms_norm(h, w, residual=x) and tg.linear apart")
        return linear_autograd(x, weight, bias, norm_weight, norm_eps, code, residual)[0]
    out = prepare_out(out, out_shape, x.dtype, x.device)
    for name, t in (("x", x), ("weight", weight), ("bias", bias), ("norm_weight", norm_weight),
                    ("next_norm_weight", next_norm_weight)):
        check_no_overlap(out, name, t)
    check_no_overlap(out, "residual", residual, allow_identical=True)
    for name, t in zip(("add_normed's h", "add_normed's w"), add_normed or (), strict=False):
        check_no_overlap(out, name, t)
    if not out.numel():
        if add_normed is not None and sum_out.numel():   # no outputs, but the sum
            rms_norm(add_normed[0], add_normed[1], norm_eps, residual=x, out=sum_out)
        return out
    requested = None if prefetch_weight is None else bool(prefetch_weight)
    buffers = _next_buffers(x, weight, code, out, next_norm_weight)
    if add_normed is not None:
        if buffers is None:
            _run_linear_added(x, weight, bias, norm_weight, norm_eps, code, residual,
                              requested, *add_normed, sum_out, out, l2_ahead)
            return out
        x = rms_norm(add_normed[0], add_normed[1], norm_eps, residual=x, out=sum_out)
    handed = usable_handoff(x, weight, norm_weight)
    if handed is None and buffers is None:
        _run_linear(x, weight, bias, norm_weight, norm_eps, code, residual, requested, out,
                    False, l2_ahead)
        return out
    x_next, next_parts = buffers if buffers is not None else (None, None)
    _run_linear_handoff(x, weight, bias, norm_weight, handed.x_next if handed else None,
                        handed.parts if handed else None, norm_eps, code, residual, requested,
                        next_norm_weight if buffers is not None else None, x_next, next_parts,
                        out)
    if buffers is not None:
        norm_handoff.attach(out, next_norm_weight, x_next, next_parts)
    return out


def check_add_normed(add_normed, sum_out, x: torch.Tensor, out, *others) -> None:
    """add_normed = (h, w) and sum_out as tg.linear takes them, or a ValueError/TypeError
    naming what is wrong."""
    if not isinstance(add_normed, tuple | list) or len(add_normed) != 2:
        raise TypeError("add_normed must be a pair (h, w): the output to normalise and add, "
                        "and its norm weight")
    h, w = add_normed
    for name, t, shape in (("add_normed's h", h, tuple(x.shape)),
                           ("add_normed's w", w, (x.shape[-1],))):
        check_tensor(name, t)
        check_like(name, t, "x", x)
        check_shape(name, t, shape)
    if sum_out is None:
        raise ValueError("add_normed needs sum_out, where the sum x + rms_norm(h) * w goes")
    if not isinstance(sum_out, torch.Tensor):
        raise TypeError(f"sum_out must be a torch.Tensor, got {type(sum_out).__name__}")
    check_shape("sum_out", sum_out, tuple(x.shape))
    check_like("sum_out", sum_out, "x", x)
    prepare_out(sum_out, tuple(x.shape), x.dtype, x.device)   # contiguous, no grad
    # every program reads x, h and w while one of them writes the sum
    for name, t in (("x", x), ("add_normed's h", h), ("add_normed's w", w), ("out", out),
                    *others):
        check_no_overlap(sum_out, name, t, out_name="sum_out")


def interleave_gate_up(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Rows (gate_0, up_0, gate_1, up_1, ...) of two (F, ...) tensors: the weight (or bias)
    layout of the gated activations ("swiglu", "geglu", "geglu_tanh"), where any even tile
    of the projection holds whole pairs."""
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ in shape")
    return torch.stack((gate, up), dim=1).flatten(0, 1)


def linear_ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
               norm_weight: torch.Tensor | None = None, norm_eps: float = 1e-6,
               activation: str | None = None, residual: torch.Tensor | None = None):
    """The unfused expression, float64 for float64 input, else fp32 cast back."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    h = x.to(compute)
    if norm_weight is not None:
        h = rms_norm_ref(h, norm_weight.to(compute), norm_eps)
    y = h @ weight.to(compute).T
    if bias is not None:
        y = y + bias.to(compute)
    y = activation_ref(y, activation)
    if residual is not None:
        y = y + residual.to(compute)
    return y.to(x.dtype)
