"""LayerNorm of a decode step's rows, computed in fp32, chained to its neighbours by PDL.

OPT 350M normalises the residual stream after each residual add (LlamaConfig.norm_after_add):
two norms a layer between projections, each on a handful of rows. PyTorch's LayerNorm
there is one more launch that neither starts early nor lets the next projection start
early; this kernel does both, as tg.rms_norm's does for Gemma's norms (kernels/rms_norm.py):
it loads the weight and bias, waits for the rows, and releases the next kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from ._launch import MAX_ROW_TILE, row_config, sm_count, supports_pdl
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import launched


@triton.jit
def _layer_norm_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, b_ptr, n_rows, n_cols, eps,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr):
    """y_ij = (x_ij - mean_j x_ij) / sqrt(var_j x_ij + eps) * w_j + b_j (Ba et al. 2016),
    BLOCK_M rows of at most BLOCK_N columns a program, one pass: the variance of the
    centred values, as PyTorch's LayerNorm counts it (biased)."""
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    # the weights are no kernel's output: read before the wait, while the last one ends
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    if PDL:
        tl.extra.cuda.gdc_wait()               # x is final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start; it waits for us
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_xm + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / n_cols
    centred = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(centred * centred, axis=1) / n_cols + eps)
    y = centred * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


def layer_norm_rows(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                    out: torch.Tensor | None = None) -> torch.Tensor:
    """F.layer_norm(x, (K,), weight, bias, eps) for rows x (rows, K), weight and bias (K,) of
    x's dtype, into `out` (rows, K), contiguous, or a new tensor: this module's kernel where
    a row fits one tile, PyTorch's otherwise. For the model's own tensors: no checks, no
    autograd."""
    n_rows, n_cols = x.shape
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.stride(1) != 1 or triton.next_power_of_2(n_cols) > MAX_ROW_TILE or not n_rows:
        return out.copy_(F.layer_norm(x, (n_cols,), weight, bias, eps))
    config = row_config(n_rows, n_cols, x.element_size())
    programs = triton.cdiv(n_rows, config["BLOCK_M"])
    # Only a grid of one wave: programs of the next kernel started early could otherwise
    # hold the SMs that this grid's later waves need.
    pdl = PDL_ENABLED and supports_pdl(x.device) and programs <= (sm_count(x.device) or 0)
    _layer_norm_kernel[(programs,)](
        out, out.stride(0), x, x.stride(0), weight.contiguous(), bias.contiguous(), n_rows,
        n_cols, eps, BLOCK_M=config["BLOCK_M"], BLOCK_N=config["BLOCK_N"], PDL=pdl,
        num_warps=config["num_warps"], **({"launch_pdl": True} if pdl else {}))
    launched(x.device, pdl, (out,))
    return out
