"""Scratch memory of the split-K decode kernel: partial sums and arrival counters, per stream.

The programs of a split-K launch each sum one slice of K. They leave their partial sums here
and count their arrival per column block with an atomic; the last to arrive adds the partials
up in a fixed order (so results are bit-reproducible), runs the epilogue and sets its counter
back to zero. The counters are therefore zero before every launch without a memset, which in
a graph would be a node of its own and break the chain of dependent launches.

One workspace serves every launch on a stream: kernels of a stream run one after another (a
kernel launched with PDL touches it only after griddepcontrol.wait, when the previous kernel
has finished). Streams get their own, because kernels on two streams may run at once. A graph
keeps the pointers it was captured with, so a workspace is never freed: a larger request
makes a new one and keeps the old.

No workspace can be made during a capture (memory allocated then would be zeroed only when the
graph replays, and not before a launch outside it). tilegraph's captures warm up on their
capture stream first, so they find one; a capture on another stream, as PyTorch's own recipe
makes (warm up on one stream, `torch.cuda.graph` captures on another) and as tg.scope does
when its block was warmed up on the caller's stream, takes the device's spare: a workspace
made and zeroed outside any capture beside the largest one a stream asked for, which no
stream has used yet, so it becomes that capture stream's own (torch.cuda.graph synchronizes
the device before it captures: the zeros are in memory by then). Only where no spare is left or
large enough does the caller run without splitting (fp32 1280 x 1280 at 8 rows, so captured:
12.4 us a link of a chain, where its split plan took about 5.5 alone; H200, notes/kernels.md,
session 111).
Graphs captured on one stream share its workspace: replay them one after another (as a decode
loop does), not at the same time on two streams.
"""

from __future__ import annotations

import warnings

import torch
import triton

from .._runtime import is_capturing
from ._launch import stream_key

# (device index, stream handle) -> (partials fp32, counters int32), the largest made there.
_workspaces: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
_kept: list[tuple[torch.Tensor, torch.Tensor]] = []  # outgrown ones, still in captured graphs
# device index -> a zeroed workspace no stream has used, for the next capture that finds none
_spares: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
_warned_unsplit = False


def _holds(workspace: tuple[torch.Tensor, torch.Tensor] | None, partial_elements: int,
           counters: int) -> bool:
    return (workspace is not None and workspace[0].numel() >= partial_elements
            and workspace[1].numel() >= counters)


def _zeroed(device: torch.device, partial_elements: int,
            counters: int) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.empty(partial_elements, dtype=torch.float32, device=device),
            torch.zeros(counters, dtype=torch.int32, device=device))


def _keep_a_spare(device: torch.device, index: int, partial_elements: int,
                  counters: int) -> None:
    """Make device `index`'s spare at least this large (outside any capture), zeroed on the
    current stream. No host sync here (tg.capture's second warm-up refuses one):
    torch.cuda.graph, which tg.scope and tilegraph's captures use too, synchronizes the
    device before a capture begins, so a graph whose capture takes the spare finds its
    counters at zero whatever stream it replays on."""
    spare = _spares.get(index)
    if _holds(spare, partial_elements, counters):
        return
    if spare is not None:  # never used by any stream or graph: dropped
        partial_elements = max(partial_elements, spare[0].numel())
        counters = max(counters, spare[1].numel())
    _spares[index] = _zeroed(device, partial_elements, counters)


def _warn_unsplit() -> None:
    global _warned_unsplit
    if not _warned_unsplit:
        _warned_unsplit = True
        warnings.warn(
            "tilegraph: a split-K kernel captured on a stream with no workspace large enough "
            "runs unsplit in this graph, slower; run the captured code once on its capture "
            "stream before capturing (tg.capture and tg.GraphRunner do), or once eagerly "
            "at its largest shape just before the capture", RuntimeWarning, stacklevel=2)


def split_workspace(device: torch.device, partial_elements: int,
                    counters: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """fp32 scratch of at least `partial_elements` and `counters` zeroed int32 counters for a
    split-K launch on the current stream of `device`; during a capture that finds none large
    enough there, the device's spare if it is, else None."""
    if device.type != "cuda":  # the interpreter runs programs one by one: fresh ones do
        return _zeroed(device, partial_elements, counters)
    key = stream_key(device)
    have = _workspaces.get(key)
    if _holds(have, partial_elements, counters):
        return have
    index = key[0]
    if is_capturing():  # the spare becomes this stream's, or nothing
        if not _holds(_spares.get(index), partial_elements, counters):
            _warn_unsplit()
            return None
        made = _spares.pop(index)
    else:
        if have is not None:
            partial_elements = max(partial_elements, have[0].numel())
            counters = max(counters, have[1].numel())
        made = _zeroed(device, partial_elements, counters)
        _keep_a_spare(device, index, partial_elements, counters)
    if have is not None:
        _kept.append(have)
    _workspaces[key] = made
    return made


def plan_split(device: torch.device, K: int, block_k: int, requested: int,
               partials_per_split: int, counters: int, placeholder: torch.Tensor,
               even: bool = False) -> tuple[int, int, torch.Tensor, torch.Tensor]:
    """(splits, K columns a split, partials, counters) for a sum over K cut into up to
    `requested` slices of whole block_k steps, with the workspace they need; one slice, and
    `placeholder` for the workspace, where none is asked for or a capture finds none large
    enough. even: the steps dealt out evenly, `requested` slices (at most one a step) whose
    steps differ by one at most, the longer first (the kernel computes them; the width
    returned is block_k); else slices of equal width, the last shorter (a slice that would
    start past K, from the rounding, is dropped)."""
    steps = triton.cdiv(K, block_k)
    if even:
        split, k_split = max(1, min(requested, steps)), block_k
    else:
        k_split = triton.cdiv(steps, max(1, min(requested, steps))) * block_k
        split = triton.cdiv(K, k_split)
    if split > 1:
        workspace = split_workspace(device, split * partials_per_split, counters)
        if workspace is not None:
            return split, k_split, *workspace
    return 1, K, placeholder, placeholder


def deals_differ(K: int, block_k: int, requested: int) -> bool:
    """Whether plan_split's two ways of cutting K into `requested` slices differ: where the
    steps do not divide evenly among them."""
    steps = triton.cdiv(K, block_k)
    return steps % max(1, min(requested, steps)) != 0


def is_split_workspace(t: torch.Tensor) -> bool:
    """Whether t lives in a split-K workspace: scratch whose contents change with every
    launch and mean nothing between launches (a capture's state watch leaves it alone)."""
    if t.device.type != "cuda":
        return False
    pointer = t.untyped_storage().data_ptr()
    return any(pointer == kept.untyped_storage().data_ptr()
               for pair in (*_workspaces.values(), *_kept, *_spares.values()) for kept in pair)
