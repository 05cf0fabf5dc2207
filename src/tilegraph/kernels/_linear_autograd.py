"""The differentiable path of tg.linear and tg.matmul (tg.matmul(a, b) is linear(a, b.T)).

Forward: the tiled GEMM with every fused part, which also writes the pre-activation
z = rms_norm(x) * g @ W.T + b where there is an activation (the backward needs act'(z)).
Backward, with dz = dy * act'(z) (one element-wise kernel; dz = dy without activation):
    dW = dz.T @ xn       xn = rms_norm(x) * g, recomputed (one row pass) rather than kept
    db = sum of dz over rows
    dx = dz @ W          then through the norm's backward (one row pass, also giving dg)
    d residual = dy
Both products run on the same tiled GEMM (any strides: dz.T is a view, not a copy).
"""

from __future__ import annotations

import torch

from ._activation_grad import activation_grad
from ._ops import functional_op
from .matmul import launch_gemm
from .rms_norm import rms_norm_autograd, rms_norm_input_grads


def _product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    if out.numel():
        if a.shape[1]:
            launch_gemm(a, b, out)
        else:
            out.zero_()  # an empty sum
    return out


# a (M, K) @ b (K, N), any strides; the products of the backward pass.
product = functional_op("product", _product,
                        lambda a, b: a.new_empty((a.shape[0], b.shape[1])))


def _out_width(weight: torch.Tensor, activation: str) -> int:
    return weight.shape[0] // 2 if activation == "swiglu" else weight.shape[0]


def _forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
             norm_weight: torch.Tensor | None, norm_eps: float, activation: str,
             residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    x_rows = x.reshape(-1, x.shape[-1])
    n_out = _out_width(weight, activation)
    y = torch.empty((*x.shape[:-1], n_out), dtype=x.dtype, device=x.device)
    # The pre-activation, kept for act'(z); empty where there is no activation.
    z = x.new_empty((x_rows.shape[0], weight.shape[0]) if activation != "none" else (0,))
    if y.numel():
        res_rows = residual.reshape(-1, n_out) if residual is not None else None
        launch_gemm(x_rows, weight.t(), y.view(-1, n_out), norm_weight=norm_weight,
                    eps=norm_eps, bias=bias, activation=activation, residual=res_rows,
                    preact=z if z.numel() else None)
    return y, z


def _fake_forward(x, weight, bias, norm_weight, norm_eps, activation, residual):
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    y = x.new_empty((*x.shape[:-1], _out_width(weight, activation)))
    return y, x.new_empty((rows, weight.shape[0]) if activation != "none" else (0,))


def _setup_context(ctx, inputs, output) -> None:
    x, weight, _, norm_weight, ctx.norm_eps, ctx.activation, _ = inputs
    ctx.save_for_backward(x, weight, norm_weight, output[1])
    # z is a by-product: no gradient flows into it, and none is materialised for it.
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)


def _backward(ctx, dy, _dz_unused):
    x, weight, norm_weight, z = ctx.saved_tensors
    need_x, need_w, need_b, need_g, _, _, need_residual = ctx.needs_input_grad
    dx = d_weight = d_bias = d_norm = d_residual = None
    if dy is None:
        return dx, d_weight, d_bias, d_norm, None, None, d_residual
    dy_rows = dy.reshape(-1, dy.shape[-1])
    dz = dy_rows if ctx.activation == "none" else activation_grad(dy_rows, z, ctx.activation)
    x_rows = x.reshape(-1, x.shape[-1])
    if need_w:
        xn = x_rows if norm_weight is None else rms_norm_autograd(x_rows, norm_weight,
                                                                 ctx.norm_eps)
        d_weight = product(dz.t(), xn)
    if need_b:
        d_bias = dz.sum(0)
    if need_x or need_g:
        dx = product(dz, weight)
        if norm_weight is not None:
            dx, d_norm = rms_norm_input_grads(dx, x_rows, norm_weight, ctx.norm_eps)
        dx = dx.view(x.shape)
    if need_residual:
        d_residual = dy
    return dx, d_weight, d_bias, d_norm, None, None, d_residual


# (y, z): y as tg.linear computes it, z the pre-activation (or an empty tensor).
linear_autograd = functional_op("linear_autograd", _forward, _fake_forward)
linear_autograd.register_autograd(_backward, setup_context=_setup_context)
