"""A fused product done as cuBLAS plus one element-wise pass: the GEMM tuner's fallback.

cuBLAS's main loop outruns our Triton tiles at some shapes (fp32 without TF32 above all,
where Triton's exact fp32 dot has no tensor cores). There the product runs as
    z = a @ b + bias       (cuBLAS; its own epilogue adds the bias)
    c = act(z) + residual  (one Triton pass over z, skipped when there is nothing to apply)
and the tuner weighs the extra pass over z against the faster main loop. z lands in the
caller's pre-activation buffer when there is one (the backward keeps it anyway), else in
scratch memory (taken from the graph's pool during capture, like any other allocation).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._activation import apply_activation, glu, is_glu


@triton.jit
def _epilogue_kernel(c_ptr, stride_cm, stride_cn, z_ptr, stride_zm, stride_zn, bias_ptr,
                     res_ptr, stride_rm, stride_rn, M, N, HAS_BIAS: tl.constexpr,
                     HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """c = act(z + bias) + residual for c (M, N); a GLU reads z (M, 2N) and bias (2N,) as
    (gate, up) column pairs: c_mj = act(z_m,2j + bias_2j) * (z_m,2j+1 + bias_2j+1)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_mask = cols < N
    mask = (rows < M)[:, None] & col_mask[None, :]
    z_rows = z_ptr + rows.to(tl.int64)[:, None] * stride_zm
    if is_glu(ACTIVATION):
        gate = tl.load(z_rows + (2 * cols)[None, :] * stride_zn, mask=mask).to(tl.float32)
        up = tl.load(z_rows + (2 * cols + 1)[None, :] * stride_zn, mask=mask).to(tl.float32)
        if HAS_BIAS:
            gate += tl.load(bias_ptr + 2 * cols, mask=col_mask).to(tl.float32)[None, :]
            up += tl.load(bias_ptr + 2 * cols + 1, mask=col_mask).to(tl.float32)[None, :]
        y = glu(gate, up, ACTIVATION)
    else:
        z = tl.load(z_rows + cols[None, :] * stride_zn, mask=mask).to(tl.float32)
        if HAS_BIAS:
            z += tl.load(bias_ptr + cols, mask=col_mask).to(tl.float32)[None, :]
        y = apply_activation(z, ACTIVATION)
    if HAS_RESIDUAL:
        res_ptrs = res_ptr + rows.to(tl.int64)[:, None] * stride_rm + cols[None, :] * stride_rn
        y += tl.load(res_ptrs, mask=mask).to(tl.float32)
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, y.to(c_ptr.dtype.element_ty), mask=mask)


def cublas_fused(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, bias=None,
                 activation: str = "none", residual=None, preact=None,
                 bias_in_pass: bool = False) -> None:
    """out = act(a @ b + bias) + residual through cuBLAS and one element-wise pass; preact,
    where given, receives a @ b + bias. `out` may be `residual` itself.

    bias_in_pass (taken where there is no preact to receive a @ b + bias): the pass adds the
    bias, not cuBLAS's epilogue, with which cuBLAS picks slower kernels at some shapes (fp32
    512 x 4096 x 1024 on an H100: 142 us with its bias epilogue, 101 us without)."""
    M, N = a.shape[0], b.shape[1]
    bias_in_pass = bias_in_pass and bias is not None and preact is None
    direct = activation == "none" and residual is None and not bias_in_pass
    if preact is not None:
        z = preact
    elif direct:
        z = out
    else:
        z = torch.empty((M, N), dtype=out.dtype, device=out.device)
    if bias is not None and not bias_in_pass:
        torch.addmm(bias, a, b, out=z)
    else:
        torch.mm(a, b, out=z)
    if z is out:
        return
    n_out = out.shape[1]
    block_m, block_n = 16, min(256, triton.next_power_of_2(n_out))
    res_strides = residual.stride() if residual is not None else (0, 0)
    grid = (triton.cdiv(M, block_m), triton.cdiv(n_out, block_n))
    _epilogue_kernel[grid](out, *out.stride(), z, *z.stride(), bias, residual, *res_strides,
                           M, n_out, HAS_BIAS=bias_in_pass, HAS_RESIDUAL=residual is not None,
                           ACTIVATION=activation, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
