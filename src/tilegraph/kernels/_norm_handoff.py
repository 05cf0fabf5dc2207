"""An RMSNorm handed over from the projection that writes h to the projection that normalises h.

On the tensor-core decode path (2-16 rows, _dot_rows.py) a norm prologue costs: in a K loop
of several steps, scaling x keeps Triton from pipelining its loads, so it runs as a small
kernel of its own, one more link in every layer's chain of dependent launches (10-24% of a
bf16 LayerStack step at d = 1024-4096 and 2-8 rows, notes/kernels.md); where a program reads
its slice in one step it runs in the loop, which still lost to the handoff in stacks and
models (session 48: d=2048 at 8 rows 102.4 against 105.3 us). Yet the kernel that writes h
holds h in its epilogue. Told the next norm's weight g
(`tg.linear(..., next_norm_weight=g)`), it also stores h * g and, for each of its column
blocks, the rows' sums of h^2; a `tg.linear(h, w, norm_weight=g)` given that very result
multiplies h * g by w and scales each row by 1 / sqrt(mean(h^2) + eps) in its epilogue.
In fp16, h * g stored unnormalised may pass 65504 (h near its top, |g| > 1): a consumer's
program whose products come out not finite takes them again from h and g, scaled into range
(_dot_rows.py, REDO_OVERFLOW); finite ones cost only that check.

The handoff describes h's and g's contents when it was written, so it is used only while
they are surely unchanged: the same tensor objects, their version counters unchanged (a
write to them or to a view of them moves those, by a PyTorch op or by a tilegraph op through
out=), and the same stream and capture. Inference tensors keep no version counter: they
never hand over. TILEGRAPH_NORM_HANDOFF=0 (read at import) turns handoffs off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton

from ._launch import stream_place

ENABLED = os.environ.get("TILEGRAPH_NORM_HANDOFF", "1") != "0"  # read at import
# Column blocks whose partial sums the next kernel loads in one tile (BLOCK_N 16 at 4096
# outputs, 64 at 16384); wider producers keep the norm kernel.
MAX_PARTS = 256
_ATTRIBUTE = "_tilegraph_norm_handoff"


@dataclass(frozen=True)
class NormHandoff:
    norm_weight: torch.Tensor  # g, the weight of the norm handed over
    x_next: torch.Tensor       # h * g, (rows, features) in h's dtype
    parts: torch.Tensor        # (column blocks, padded rows) fp32: sums of h^2 a block
    versions: tuple[int, int]  # h's and g's version counters once written
    place: tuple               # stream_place() where it was written


def can_hand_over(h: torch.Tensor, norm_weight: torch.Tensor, n_blocks: int) -> bool:
    """Whether a producer of h in n_blocks column blocks hands the norm of this weight over."""
    return (ENABLED and not h.is_inference()
            and not norm_weight.is_inference() and n_blocks <= MAX_PARTS)


def new_buffers(rows: int, features: int, n_blocks: int, padded_rows: int,
                dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_next, parts) for a producer of `rows` x `features` in n_blocks column blocks."""
    return (torch.empty((rows, features), dtype=dtype, device=device),
            torch.empty((n_blocks, padded_rows), dtype=torch.float32, device=device))


def attach(h: torch.Tensor, norm_weight: torch.Tensor, x_next: torch.Tensor,
           parts: torch.Tensor) -> None:
    """Record on h (just written, with x_next and parts) the norm its kernel handed over."""
    setattr(h, _ATTRIBUTE, NormHandoff(norm_weight, x_next, parts,
                                       (h._version, norm_weight._version),
                                       stream_place(h.device)))


def take(x: torch.Tensor, norm_weight: torch.Tensor) -> NormHandoff | None:
    """x's handoff for this norm weight, if it still describes x here; else None (always
    under torch.compile, which traces no handoff)."""
    if torch.compiler.is_compiling():
        return None
    handoff = x.__dict__.get(_ATTRIBUTE)
    if (handoff is None or handoff.norm_weight is not norm_weight or x.is_inference()
            or handoff.versions != (x._version, norm_weight._version)
            or handoff.place != stream_place(x.device)):
        return None
    return handoff


def parts_block(n_parts: int) -> int:
    """The consumer's tile of partial sums: n_parts rounded up to a power of two."""
    return triton.next_power_of_2(n_parts)
