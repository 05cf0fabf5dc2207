"""A norm weight of one value: a (K,) tensor expanded from a single element (stride 0).

That is how Llama keeps each layer's two norms once it has folded their weights into the
projections after them (models/llama.py: rms_norm(x) * g @ W.T = rms_norm(x) @ (W * g).T),
leaving ones. The decode kernels read such a weight once, as that one value (NORM_SCALAR),
instead of a vector of it: the one-row GEMV's small persistent tiles then hold no K values of
g beside x (Qwen2-0.5B's q|k|v and gate/up 64 -> 56 registers; sm_90, Triton 3.6). With
Llama's norms folded (and the split tile's g addressed anew, _matvec._gemv_inputs) a
Generator's batch-1 step ran 2.0-3.7% faster (TinyLlama, a 1024-wide model; H200,
notes/models.md, session 108). The tiled GEMM of more rows reads a contiguous copy.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


def is_one_value(norm_weight: torch.Tensor | None) -> bool:
    """Whether norm_weight is a vector of several entries expanded from one element."""
    return (norm_weight is not None and norm_weight.dim() == 1
            and norm_weight.shape[0] > 1 and norm_weight.stride(0) == 0)


def kernel_norm_weight(norm_weight: torch.Tensor | None) -> torch.Tensor | None:
    """norm_weight as the decode kernels take it: one value as it is, else contiguous."""
    if norm_weight is None or is_one_value(norm_weight):
        return norm_weight
    return norm_weight.contiguous()


@triton.jit
def norm_weight_at(norm_w_ptr, offs, mask, NORM_SCALAR: tl.constexpr):
    """The norm weights at offs in fp32 (zeros where masked); NORM_SCALAR: the weight's one
    value, loaded once and broadcast to offs' shape (the masked lanes too: they scale zeros)."""
    if NORM_SCALAR:
        return tl.broadcast_to(tl.load(norm_w_ptr).to(tl.float32), offs.shape)
    return tl.load(norm_w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
