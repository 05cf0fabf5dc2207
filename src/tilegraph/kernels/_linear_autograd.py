"""The differentiable path of tg.linear and tg.matmul (tg.matmul(a, b) is linear(a, b.T)).

Forward: xn = rms_norm(x) * g as a row pass of its own (kept: the weight's gradient needs it),
then the GEMM with every fused epilogue part, which also writes the pre-activation
z = xn @ W.T + b where there is an activation (the backward needs act'(z)).
Backward, with dz = dy * act'(z) (one element-wise kernel; dz = dy without activation):
    dW = dz.T @ xn
    db = sum of dz over rows, in the same pass as dz
    dx = dz @ W          then through the norm's backward (one row pass, also giving dg)
    d residual = dy
The products go through the same tuned GEMM (any strides: dz.T is a view, not a copy),
where cuBLAS competes with the Triton kernels.
"""

from __future__ import annotations

import torch

from ._activation import GLU_ACTIVATIONS
from ._activation_grad import activation_bias_grads, activation_grad, column_sums
from ._ops import functional_op
from .matmul import launch_gemm
from .rms_norm import rms_norm_input_grads, rms_norm_rows


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
    return weight.shape[0] // 2 if activation in GLU_ACTIVATIONS else weight.shape[0]


def _forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
             norm_weight: torch.Tensor | None, norm_eps: float, activation: str,
             residual: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x_rows = x.reshape(-1, x.shape[-1])
    n_out = _out_width(weight, activation)
    y = torch.empty((*x.shape[:-1], n_out), dtype=x.dtype, device=x.device)
    # The pre-activation, kept for act'(z), and the normalised rows, kept for dW; each an
    # empty tensor where there is none.
    z = x.new_empty((x_rows.shape[0], weight.shape[0]) if activation != "none" else (0,))
    xn = x.new_empty((0,))
    if norm_weight is not None and x_rows.shape[0]:
        xn = rms_norm_rows(x_rows, norm_weight, norm_eps)
    if y.numel():
        res_rows = residual.reshape(-1, n_out) if residual is not None else None
        launch_gemm(x_rows if norm_weight is None else xn, weight.t(), y.view(-1, n_out),
                    bias=bias, activation=activation, residual=res_rows,
                    preact=z if z.numel() else None)
    return y, z, xn


def _fake_forward(x, weight, bias, norm_weight, norm_eps, activation, residual):
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    y = x.new_empty((*x.shape[:-1], _out_width(weight, activation)))
    z = x.new_empty((rows, weight.shape[0]) if activation != "none" else (0,))
    xn = x.new_empty((rows, x.shape[-1]) if norm_weight is not None and rows else (0,))
    return y, z, xn


def _setup_context(ctx, inputs, output) -> None:
    x, weight, _, norm_weight, ctx.norm_eps, ctx.activation, _ = inputs
    _, z, xn = output
    ctx.save_for_backward(x, weight, norm_weight, z, xn)
    # z and xn are by-products: no gradient flows into them, and none is materialised.
    ctx.mark_non_differentiable(z, xn)
    ctx.set_materialize_grads(False)


def _backward(ctx, dy, _dz_unused, _dxn_unused):
    x, weight, norm_weight, z, xn = ctx.saved_tensors
    need_x, need_w, need_b, need_g, _, _, need_residual = ctx.needs_input_grad
    dx = d_weight = d_bias = d_norm = d_residual = None
    if dy is None:
        return dx, d_weight, d_bias, d_norm, None, None, d_residual
    dy_rows = dy.reshape(-1, dy.shape[-1])
    # The bias gradient (dz summed over rows) comes out of the pass that forms dz.
    if ctx.activation == "none":
        dz, d_bias = dy_rows, column_sums(dy_rows) if need_b else None
    elif need_b:
        dz, d_bias = activation_bias_grads(dy_rows, z, ctx.activation)
    else:
        dz = activation_grad(dy_rows, z, ctx.activation)
    x_rows = x.reshape(-1, x.shape[-1])
    if need_w:
        d_weight = product(dz.t(), x_rows if norm_weight is None else xn)
    if need_x or need_g:
        dx = product(dz, weight)
        if norm_weight is not None:
            dx, d_norm = rms_norm_input_grads(dx, x_rows, norm_weight, ctx.norm_eps)
        dx = dx.view(x.shape)
    if need_residual:
        d_residual = dy
    return dx, d_weight, d_bias, d_norm, None, None, d_residual


# (y, z, xn): y as tg.linear computes it, z the pre-activation and xn the normalised rows
# (each an empty tensor where there is none).
linear_autograd = functional_op("linear_autograd", _forward, _fake_forward)
linear_autograd.register_autograd(_backward, setup_context=_setup_context)
