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
makes a new one and keeps the old. A capture that finds none large enough gets None (memory
allocated during capture would be zeroed only when the graph replays) and the caller runs
without splitting; tilegraph's captures warm up on their capture stream first, so they find it.
Graphs captured on one stream share its workspace: replay them one after another (as a decode
loop does), not at the same time on two streams.
"""

from __future__ import annotations

import torch
import triton

from .._runtime import is_capturing
from ._launch import stream_key

# (device index, stream handle) -> (partials fp32, counters int32), the largest made there.
_workspaces: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}
_kept: list[tuple[torch.Tensor, torch.Tensor]] = []  # outgrown ones, still in captured graphs


def split_workspace(device: torch.device, partial_elements: int,
                    counters: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """fp32 scratch of at least `partial_elements` and `counters` zeroed int32 counters for a
    split-K launch on the current stream of `device`; None during a capture that finds none
    large enough."""
    if device.type != "cuda":  # the interpreter runs programs one by one: fresh ones do
        return (torch.empty(partial_elements, dtype=torch.float32, device=device),
                torch.zeros(counters, dtype=torch.int32, device=device))
    key = stream_key(device)
    have = _workspaces.get(key)
    if have is not None and have[0].numel() >= partial_elements and have[1].numel() >= counters:
        return have
    if is_capturing():
        return None
    if have is not None:
        _kept.append(have)
        partial_elements = max(partial_elements, have[0].numel())
        counters = max(counters, have[1].numel())
    made = (torch.empty(partial_elements, dtype=torch.float32, device=device),
            torch.zeros(counters, dtype=torch.int32, device=device))
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
               for pair in (*_workspaces.values(), *_kept) for kept in pair)
