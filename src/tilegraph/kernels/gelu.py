"""GELU, tanh approximation or exact (erf), computed in fp32."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._activation import apply_activation
from ._activation_grad import activation_grad
from ._checks import check_no_out_for_grad, check_no_overlap, check_tensor, prepare_out, wants_grad
from ._launch import elementwise_shape, grid_1d
from ._ops import custom_op, functional_op

_APPROXIMATIONS = {"tanh": "gelu_tanh", "none": "gelu"}


@triton.jit
def _gelu_kernel(y_ptr, x_ptr, n_elements, ACTIVATION: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """y_i = GELU(x_i) over flat contiguous buffers."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = apply_activation(x, ACTIVATION)
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)


def _launch_gelu(x: torch.Tensor, approximate: str, out: torch.Tensor) -> None:
    x = x.contiguous()
    n = out.numel()
    block, num_warps = elementwise_shape(n, out.element_size())
    _gelu_kernel[grid_1d(n, block)](out, x, n, ACTIVATION=_APPROXIMATIONS[approximate],
                                    BLOCK_SIZE=block, num_warps=num_warps)


_run_gelu = custom_op("gelu", _launch_gelu)


def _gelu_forward(x: torch.Tensor, approximate: str) -> torch.Tensor:
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if out.numel():
        _launch_gelu(x, approximate, out)
    return out


def _save_input(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])
    ctx.approximate = inputs[1]


def _gelu_backward(ctx, dy):
    (x,) = ctx.saved_tensors
    return activation_grad(dy, x, _APPROXIMATIONS[ctx.approximate]), None


_gelu_autograd = functional_op("gelu_autograd", _gelu_forward,
                               lambda x, approximate: torch.empty_like(x))
_gelu_autograd.register_autograd(_gelu_backward, setup_context=_save_input)


def gelu(x: torch.Tensor, *, approximate: str = "tanh",
         out: torch.Tensor | None = None) -> torch.Tensor:
    """GELU of x, as torch.nn.functional.gelu(x, approximate=...); "tanh" by default."""
    check_tensor("x", x, differentiable=True)
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"approximate must be 'tanh' or 'none', got {approximate!r}")
    if wants_grad(x):
        check_no_out_for_grad(out)
        return _gelu_autograd(x, approximate)
    out = prepare_out(out, x.shape, x.dtype, x.device)
    check_no_overlap(out, "x", x, allow_identical=True)
    if out.numel():
        _run_gelu(x, approximate, out)
    return out


def gelu_ref(x: torch.Tensor, approximate: str = "tanh") -> torch.Tensor:
    """Reference formula, in float64 for float64 input, else fp32 cast back."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    v = x.to(compute)
    if approximate == "tanh":
        y = 0.5 * v * (1 + torch.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    else:
        y = 0.5 * v * (1 + torch.erf(v / math.sqrt(2)))
    return y.to(x.dtype)
