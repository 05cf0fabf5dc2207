"""Backward of the activations: dz = dy * act'(z), one pass over dy and z.

Used by tg.gelu's backward (z is its input) and by the backward of tg.linear and tg.matmul
(z is the pre-activation their forward kept). "swiglu" reads z as interleaved (gate, up)
pairs, as the forward does, and writes both halves of each pair.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._activation import activation_derivative
from ._launch import elementwise_shape, grid_1d
from ._ops import functional_op


@triton.jit
def _activation_grad_kernel(dz_ptr, dy_ptr, z_ptr, n_elements, ACTIVATION: tl.constexpr,
                            BLOCK_SIZE: tl.constexpr):
    """dz_i = dy_i * act'(z_i) over flat contiguous buffers, in fp32."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    dy = tl.load(dy_ptr + offsets, mask=mask).to(tl.float32)
    z = tl.load(z_ptr + offsets, mask=mask).to(tl.float32)
    dz = dy * activation_derivative(z, ACTIVATION)
    tl.store(dz_ptr + offsets, dz.to(dz_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_grad_kernel(dz_ptr, dy_ptr, z_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    """y_i = silu(g_i) u_i with (g_i, u_i) = (z_2i, z_2i+1): dg = dy u silu'(g), du = dy silu(g),
    silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). n_elements counts dy's elements."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    dy = tl.load(dy_ptr + offsets, mask=mask).to(tl.float32)
    gate = tl.load(z_ptr + 2 * offsets, mask=mask).to(tl.float32)
    up = tl.load(z_ptr + 2 * offsets + 1, mask=mask).to(tl.float32)
    s = 1.0 / (1.0 + tl.exp(-gate))
    d_gate = dy * up * s * (1.0 + gate * (1.0 - s))
    d_up = dy * gate * s
    tl.store(dz_ptr + 2 * offsets, d_gate.to(dz_ptr.dtype.element_ty), mask=mask)
    tl.store(dz_ptr + 2 * offsets + 1, d_up.to(dz_ptr.dtype.element_ty), mask=mask)


def _activation_grad(dy: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    dy, z = dy.contiguous(), z.contiguous()
    dz = torch.empty_like(z)
    n = dy.numel()
    if n == 0:
        return dz
    block, num_warps = elementwise_shape(n, dz.element_size())
    if activation == "swiglu":
        _swiglu_grad_kernel[grid_1d(n, block)](dz, dy, z, n, BLOCK_SIZE=block,
                                               num_warps=num_warps)
    else:
        _activation_grad_kernel[grid_1d(n, block)](dz, dy, z, n, ACTIVATION=activation,
                                                   BLOCK_SIZE=block, num_warps=num_warps)
    return dz


# dz has z's shape (for "swiglu" twice dy's width) and dtype.
activation_grad = functional_op("activation_grad", _activation_grad,
                                lambda dy, z, activation: torch.empty_like(z))
