"""The seed's decode stack: decode layer after decode layer, h carried between them in the
form the layers' fastest path wants.

Where every layer runs as one kernel (tg.decode_layer's rule: square layers at one row, or
two in small fp32 layers), h is carried in fp32 accumulators: the first layer reads h as it
is, each layer zeroes the next one's accumulator after its wait (decode_layer.py's buffer
protocol), and one small kernel adds the last one up and casts it back to h's dtype. Each
program of such a layer adds a whole partial h_next (d floats) with atomic adds, so with one
accumulator every 128-byte line of it takes programs x 8 vector atomics in a row at the end
of each layer. Here program p adds into copy p % copies of `copies` accumulators instead,
and the next layer reads h as the sum of the copies (notes/decode.md, session 51). A result
of tg.decode_layer must be h itself, so the copies live only inside a stack.

Elsewhere (other row counts, layers past the one-kernel bound, gradients, torch.compile,
deterministic algorithms): a loop of tg.decode_layer, each layer handing its norm over to
the next one's first kernel.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from ._checks import (
    check_eps,
    check_no_out_for_grad,
    check_no_overlap,
    prepare_out,
    wants_grad,
)
from ._pdl import launched, use_pdl
from .decode_layer import (
    _check,
    _fits_one_kernel,
    _launch_one_kernel,
    decode_layer,
    decode_layer_ref,
    residual_dtype,
)

FOLD_BLOCK = 1024


@triton.jit
def _fold_copies_kernel(out_ptr, acc_ptr, stride_ac, n, COPIES: tl.constexpr,
                        BLOCK: tl.constexpr, WAIT: tl.constexpr):
    """out = sum_c acc[c], cast to out's dtype (after the last layer, which writes acc)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if WAIT:
        tl.extra.cuda.gdc_wait()
    total = tl.zeros([BLOCK], tl.float32)
    for c in tl.static_range(COPIES):
        total += tl.load(acc_ptr + c * stride_ac + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=mask)


def accumulator_copies(d: int) -> int:
    """Accumulators a one-kernel layer of width d spreads its atomic adds over: 2 to 4, as
    many as keep the h each program reads after its wait (copies x d floats) within 4096.
    Measured on one-row stacks (H100, notes/decode.md, session 51): bf16 d=2048 2 copies
    1.00x one, 3 and 4 0.95x / 0.93x; d=1536 2-4 1.06x; d=1024 2-4 1.14x; fp32 d=512 and
    1024 4 copies 1.06x / 1.05x, 2 1.04x / 1.03x."""
    return max(2, min(4, 4096 // d))


def _fold(out: torch.Tensor, acc: torch.Tensor) -> None:
    """out = acc.sum(0), in out's dtype, chained after the kernel that wrote acc."""
    pdl = use_pdl(out.device, ())
    n = out.numel()
    _fold_copies_kernel[(triton.cdiv(n, FOLD_BLOCK),)](
        out, acc, acc.stride(0), n, COPIES=acc.shape[0], BLOCK=FOLD_BLOCK, WAIT=pdl,
        num_warps=4, **({"launch_pdl": True} if pdl else {}))
    launched(out.device, pdl, (out,))


def _one_kernel_chain(h: torch.Tensor, layers: list, eps: float, out: torch.Tensor) -> None:
    """out = the stack's result, every layer one kernel over copied fp32 accumulators."""
    copies = accumulator_copies(h.shape[-1])
    # Three buffers in turn: the one a layer zeroes was last read by the layer before it,
    # which has finished once this layer's wait returns.
    ring = [torch.empty((copies, *h.shape), dtype=torch.float32, device=h.device)
            for _ in range(min(3, len(layers)))]
    ring[0].zero_()
    x, x_copies = h, 1
    for i, (norm_weight, wq, wo) in enumerate(layers):
        acc = ring[i % len(ring)]
        zero_next = ring[(i + 1) % len(ring)] if i + 1 < len(layers) else None
        _launch_one_kernel(acc, zero_next, x, norm_weight, wq, wo, eps, h_copies=x_copies)
        x, x_copies = acc, copies
    _fold(out, x.view(copies, -1))


def _layer_loop(h: torch.Tensor, layers: list, eps: float, grad: bool) -> torch.Tensor:
    """The stack as a loop of tg.decode_layer; h in the dtype the first layer's path wants
    (fp32 where it runs one kernel; h's own for autograd), cast back once at the end."""
    _, wq, wo = layers[0]
    stream = h.dtype if grad else residual_dtype(h, wq, wo)
    start = torch.empty(h.shape, dtype=stream, device=h.device) if stream != h.dtype else None
    x = h
    for i, (norm_weight, wq, wo) in enumerate(layers):
        after = layers[i + 1][0] if i + 1 < len(layers) else None
        # The first layer reads a 16-bit h itself and writes the fp32 stream (no cast first).
        x = decode_layer(x, norm_weight, wq, wo, eps, out=start, next_norm_weight=after)
        start = None
    return x.to(h.dtype)


def _per_layer(name: str, tensors, ndim: int) -> list:
    """One tensor a layer, from a sequence or from one tensor with the layers along dim 0."""
    if isinstance(tensors, torch.Tensor):
        if tensors.ndim != ndim + 1:
            raise ValueError(f"{name} as one tensor must have the layers along dim 0 ("
                             f"{ndim + 1} dims), got shape {tuple(tensors.shape)}")
        return list(tensors.unbind(0))
    if not isinstance(tensors, Sequence):
        raise TypeError(f"{name} must be a sequence of tensors (one a layer) or one tensor "
                        f"with the layers along dim 0, got {type(tensors).__name__}")
    return list(tensors)


def _layers(norm_weights, wqs, wos) -> list:
    per_layer = {"norm_weights": _per_layer("norm_weights", norm_weights, 1),
                 "wqs": _per_layer("wqs", wqs, 2), "wos": _per_layer("wos", wos, 2)}
    counts = {name: len(tensors) for name, tensors in per_layer.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"norm_weights, wqs and wos must have one tensor a layer each, got "
                         f"{counts}")
    if not counts["wqs"]:
        raise ValueError("the stack has no layers (empty norm_weights, wqs, wos)")
    return list(zip(*per_layer.values(), strict=True))


def decode_stack(h: torch.Tensor, norm_weights: Sequence[torch.Tensor] | torch.Tensor,
                 wqs: Sequence[torch.Tensor] | torch.Tensor,
                 wos: Sequence[torch.Tensor] | torch.Tensor, eps: float = 1e-6,
                 *, out: torch.Tensor | None = None) -> torch.Tensor:
    """h after len(wqs) decode layers, h <- h + (rms_norm(h) * norm_weights[l]) @ wqs[l].T
    @ wos[l].T, each layer as tg.decode_layer takes it (norm_weights[l] (d,), wqs[l] (n, d),
    wos[l] (d, n), one dtype for all; each argument a sequence of one tensor a layer, or one
    tensor with the layers along dim 0). Returns h's shape and dtype, in out if given.

    Fastest where every layer takes one kernel (tg.decode_layer's rule: square layers at one
    row, or two in small fp32 layers): one kernel a layer, h carried between them in fp32
    (its sums vary in the last bits from run to run; under
    torch.use_deterministic_algorithms(True) the two kernels a layer run instead).
    """
    layers = _layers(norm_weights, wqs, wos)
    for i, layer in enumerate(layers):
        try:
            _check(h, *layer)
        except (TypeError, ValueError) as error:
            raise type(error)(f"layer {i}: {error}") from None
    eps = check_eps(eps)
    params = [t for layer in layers for t in layer]
    if wants_grad(h, *params):
        check_no_out_for_grad(out)
        return _layer_loop(h, layers, eps, grad=True)
    if out is not None:
        out = prepare_out(out, h.shape, h.dtype, h.device)
        check_no_overlap(out, "h", h)
        for i, t in enumerate(params):
            check_no_overlap(out, f"{('norm_weights', 'wqs', 'wos')[i % 3]}[{i // 3}]", t)
    if not h.numel():
        return out if out is not None else torch.empty(h.shape, dtype=h.dtype, device=h.device)
    if not torch.compiler.is_compiling() and all(
            _fits_one_kernel(h, wq, wo) for _, wq, wo in layers):
        if out is None:
            out = torch.empty(h.shape, dtype=h.dtype, device=h.device)
        _one_kernel_chain(h, layers, eps, out)
        return out
    result = _layer_loop(h, layers, eps, grad=False)
    if out is None:
        return result
    return out.copy_(result)


def decode_stack_ref(h: torch.Tensor, norm_weights, wqs, wos, eps: float = 1e-6) -> torch.Tensor:
    """The stack in PyTorch, layer by layer with decode_layer_ref (float64 for float64 h)."""
    for norm_weight, wq, wo in _layers(norm_weights, wqs, wos):
        h = decode_layer_ref(h, norm_weight, wq, wo, eps)
    return h
