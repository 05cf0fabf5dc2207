"""Backward of the activations: dz = dy * act'(z), one pass over dy and z.

Used by tg.gelu's backward (z is its input) and by the backward of tg.linear and tg.matmul
(z is the pre-activation their forward kept). A GLU reads z as interleaved (gate, up)
pairs, as the forward does, and writes both halves of each pair.

activation_bias_grads also sums dz over rows (the bias gradient) in the same pass: a separate
column reduction would read all of dz again, as long as this pass itself takes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ._activation import GLU_ACTIVATIONS, activation_derivative, glu_grads, is_glu
from ._checks import as_rows
from ._launch import elementwise_shape, grid_1d, sm_count
from ._ops import functional_op
from ._partials import sum_partials


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
def _glu_grad_kernel(dz_ptr, dy_ptr, z_ptr, n_elements, ACTIVATION: tl.constexpr,
                     BLOCK_SIZE: tl.constexpr):
    """y_i = act(g_i) u_i with (g_i, u_i) = (z_2i, z_2i+1); n_elements counts dy's
    elements."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    dy = tl.load(dy_ptr + offsets, mask=mask).to(tl.float32)
    gate = tl.load(z_ptr + 2 * offsets, mask=mask).to(tl.float32)
    up = tl.load(z_ptr + 2 * offsets + 1, mask=mask).to(tl.float32)
    d_gate, d_up = glu_grads(dy, gate, up, ACTIVATION)
    tl.store(dz_ptr + 2 * offsets, d_gate.to(dz_ptr.dtype.element_ty), mask=mask)
    tl.store(dz_ptr + 2 * offsets + 1, d_up.to(dz_ptr.dtype.element_ty), mask=mask)


def _activation_grad(dy: torch.Tensor, z: torch.Tensor, activation: str) -> torch.Tensor:
    dy, z = dy.contiguous(), z.contiguous()
    dz = torch.empty_like(z)
    n = dy.numel()
    if n == 0:
        return dz
    block, num_warps = elementwise_shape(n, dz.element_size())
    if activation in GLU_ACTIVATIONS:
        _glu_grad_kernel[grid_1d(n, block)](dz, dy, z, n, ACTIVATION=activation,
                                             BLOCK_SIZE=block, num_warps=num_warps)
    else:
        _activation_grad_kernel[grid_1d(n, block)](dz, dy, z, n, ACTIVATION=activation,
                                                   BLOCK_SIZE=block, num_warps=num_warps)
    return dz


# dz has z's shape (for a GLU twice dy's width) and dtype.
activation_grad = functional_op("activation_grad", _activation_grad,
                                lambda dy, z, activation: torch.empty_like(z))


@triton.jit
def _bias_grad_kernel(dz_ptr, stride_dzm, partial_ptr, dy_ptr, stride_dym, z_ptr, stride_zm,
                      M, N, rows_per_program, ACTIVATION: tl.constexpr, STORE_DZ: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """dz = dy * act'(z) over rows [pid_m * rows_per_program, ...) and columns of block pid_n of
    dy (M, N), and partial[pid_m, j] = sum of those rows of dz_:j in fp32. A GLU: z and dz
    are (M, 2N) (gate, up) pairs and partial sums both columns of each pair. STORE_DZ=False
    (activation "none", dz = dy) only sums."""
    pid_m = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    row_start = pid_m * rows_per_program
    row_end = tl.minimum(M, row_start + rows_per_program)
    # Sums stay per (row, column) of the tile until the end: reducing across the tile's
    # rows at every step would cost a shared-memory round trip and a barrier a step.
    if is_glu(ACTIVATION):
        sum_gate = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        sum_up = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    else:
        col_sum = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for r0 in range(row_start, row_end, BLOCK_M):
        rows = (r0 + tl.arange(0, BLOCK_M)).to(tl.int64)
        mask = (rows < row_end)[:, None] & col_mask[None, :]
        dy = tl.load(dy_ptr + rows[:, None] * stride_dym + cols[None, :], mask=mask,
                     other=0.0).to(tl.float32)
        if is_glu(ACTIVATION):
            z_rows = z_ptr + rows[:, None] * stride_zm
            gate = tl.load(z_rows + 2 * cols[None, :], mask=mask, other=0.0).to(tl.float32)
            up = tl.load(z_rows + 2 * cols[None, :] + 1, mask=mask, other=0.0).to(tl.float32)
            d_gate, d_up = glu_grads(dy, gate, up, ACTIVATION)
            dz_rows = dz_ptr + rows[:, None] * stride_dzm
            tl.store(dz_rows + 2 * cols[None, :], d_gate.to(dz_ptr.dtype.element_ty), mask=mask)
            tl.store(dz_rows + 2 * cols[None, :] + 1, d_up.to(dz_ptr.dtype.element_ty),
                     mask=mask)
            sum_gate += d_gate
            sum_up += d_up
        else:
            dz = dy
            if STORE_DZ:
                z = tl.load(z_ptr + rows[:, None] * stride_zm + cols[None, :], mask=mask,
                            other=0.0).to(tl.float32)
                dz = dy * activation_derivative(z, ACTIVATION)
                tl.store(dz_ptr + rows[:, None] * stride_dzm + cols[None, :],
                         dz.to(dz_ptr.dtype.element_ty), mask=mask)
            col_sum += dz
    # (partial is the bias gradient itself, in its dtype, where one slice covers all rows)
    partial_row = partial_ptr + pid_m.to(tl.int64) * (2 * N if is_glu(ACTIVATION) else N)
    out_dtype = partial_ptr.dtype.element_ty
    if is_glu(ACTIVATION):
        tl.store(partial_row + 2 * cols, tl.sum(sum_gate, axis=0).to(out_dtype), mask=col_mask)
        tl.store(partial_row + 2 * cols + 1, tl.sum(sum_up, axis=0).to(out_dtype),
                 mask=col_mask)
    else:
        tl.store(partial_row + cols, tl.sum(col_sum, axis=0).to(out_dtype), mask=col_mask)


@dataclass(frozen=True)
class BiasGradPlan:
    """How _bias_grad_kernel splits dy (M, N): row slices x column blocks of BLOCK_N, tiles of
    BLOCK_M rows. One slice writes the gradient directly; more leave fp32 partial sums."""
    slices: int
    rows_per_program: int
    block_m: int
    block_n: int
    num_warps: int = 4


# Bytes (dy, and z and dz where there is an activation) up to which one pass writes the
# gradient directly. Below it the second launch and the partial sums' round trip cost more
# than the lower bandwidth of programs that each run down whole columns; above it the row
# slices win (research/probe_bias_grad.py, H100: bf16 512 x 4096 gelu 7.4 us against 11.3,
# 1000 x 3072 14.7 -> 11.7, 2048 x 1024 none 9.3 -> 3.8; 2048 x 4096 gelu 27.7 against 32.9).
SINGLE_PASS_BYTES = 40 << 20


def bias_grad_plan(M: int, N: int, element_size: int, activation: str,
                   sms: int) -> BiasGradPlan:
    """The split of dy (M, N) for a GPU of `sms` SMs: whole columns where few bytes move,
    else row slices."""
    tensors = 1 if activation == "none" else 3
    # swiglu's interleaved columns ran slower in whole-column programs at every size tried
    gated = activation in GLU_ACTIVATIONS
    if not gated and M and M * N * element_size * tensors <= SINGLE_PASS_BYTES:
        # Columns 16 (or, for narrow outputs, 8) a program: at least one program an SM
        # where N allows. Tiles of up to 256 rows keep four warps' loads in flight.
        block_n = 16 if N >= 16 * sms else 8
        return BiasGradPlan(1, M, min(256, max(16, triton.next_power_of_2(M))), block_n)
    # Row slices so that about four programs share each SM; every slice leaves one row of
    # fp32 partial sums, added up afterwards in a fixed order (reproducible, unlike atomics).
    block_n = min(256, triton.next_power_of_2(max(N, 1)))
    col_blocks = triton.cdiv(N, block_n)
    slices = max(1, min(triton.cdiv(M, 16), 4 * sms // col_blocks))
    rows_per_program = triton.cdiv(M, slices) if M else 1
    return BiasGradPlan(triton.cdiv(M, rows_per_program) if M else 0, rows_per_program, 16,
                        block_n)


def launch_bias_grad(dy: torch.Tensor, z: torch.Tensor | None, dz: torch.Tensor | None,
                     activation: str, plan: BiasGradPlan | None = None) -> torch.Tensor:
    """Launch _bias_grad_kernel over rows dy (M, N); returns the bias gradient (dz's width,)."""
    M, N = dy.shape
    width = 2 * N if activation in GLU_ACTIVATIONS else N
    if plan is None:
        plan = bias_grad_plan(M, N, dy.element_size(), activation,
                              sm_count(dy.device) or 1)
    if plan.slices == 1:
        out = torch.empty(width, dtype=dy.dtype, device=dy.device)
    else:  # every program writes its whole row of partial sums: no zeroing needed
        out = torch.empty((plan.slices if N else 0, width), dtype=torch.float32,
                          device=dy.device)
    if out.numel():  # (no rows: the sums the programs write are zeros)
        _bias_grad_kernel[(plan.slices, triton.cdiv(N, plan.block_n))](
            dz, dz.stride(0) if dz is not None else 0, out, dy, dy.stride(0),
            z, z.stride(0) if z is not None else 0, M, N, plan.rows_per_program,
            ACTIVATION=activation, STORE_DZ=dz is not None, BLOCK_M=plan.block_m,
            BLOCK_N=plan.block_n, num_warps=plan.num_warps)
    return out if plan.slices == 1 else sum_partials(out, dy.dtype)


def _activation_bias_grads(dy: torch.Tensor, z: torch.Tensor,
                           activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(dz, dbias) for rows dy (M, N): dz = dy * act'(z) and dbias = dz summed over rows."""
    dy, z = as_rows(dy), as_rows(z)
    dz = torch.empty_like(z, memory_format=torch.contiguous_format)
    return dz, launch_bias_grad(dy, z, dz, activation)


def _column_sums(dy: torch.Tensor) -> torch.Tensor:
    """dy (M, N) summed over rows: the bias gradient of a product without activation."""
    return launch_bias_grad(as_rows(dy), None, None, "none")


# (dz, dbias) for an activation other than "none": dz has z's shape; dbias (z's width,).
activation_bias_grads = functional_op(
    "activation_bias_grads", _activation_bias_grads,
    lambda dy, z, activation: (torch.empty_like(z), z.new_empty((z.shape[1],))))
column_sums = functional_op("column_sums", _column_sums,
                            lambda dy: dy.new_empty((dy.shape[1],)))
