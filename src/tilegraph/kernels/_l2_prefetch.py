"""Weights streamed into L2 ahead of the kernels that read them, where memory would idle.

Two kernels leave memory idle for part of a decode step. Attention over a short cache moves
a few hundred KB yet takes microseconds of dependent round trips, while the projections after
it stream megabytes of weights. The one-kernel decode layer holds its weight tiles in
registers that fill its SMs, so the next layer's programs cannot start streaming early under
programmatic dependent launch. Either can hand memory the weights read after it:
`cp.async.bulk.prefetch.L2` (sm_90) asks the copy engine to bring a byte range into L2, one
instruction per range, nothing held in registers, no completion to wait for. The later
kernels then read from L2. It is a hint: results do not change, and a line written after
it is prefetched is still read fresh (L2 is the point of coherence).

Not where memory is busy anyway: prefetching the next projection's weights from a
projection whose successor already starts streaming early under PDL (session 4,
notes/decode.md) only competed with the demand loads.

Off until timed in whole decode steps (built in a session without GPU time, notes/models.md
and notes/decode.md): TILEGRAPH_L2_PREFETCH=1 (read at import) turns it on.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._launch import is_hopper_or_newer

ENABLED = os.environ.get("TILEGRAPH_L2_PREFETCH", "0") == "1"
MAX_RANGES = 3  # byte ranges one launch can take (a kernel's arguments are fixed)
CHUNK_BYTES = 16 * 1024  # one prefetch instruction's range: 16 KB spreads 25 MB over ~1600
# threads, so no single SM's copy engine carries much of it
CHUNK = tl.constexpr(CHUNK_BYTES)
# At most this share of L2 a launch: lines prefetched past it would evict earlier ones
# before they are read.
L2_SHARE = 0.5
ALIGN = 16  # the instruction's address and size must be multiples of 16 bytes


def supports_l2_prefetch(device: torch.device) -> bool:
    return ENABLED and not INTERPRET and device.type == "cuda" and is_hopper_or_newer(device)


@functools.cache
def _l2_bytes(index: int) -> int:
    return torch.cuda.get_device_properties(index).L2_cache_size


def check_prefetch(tensors: Sequence[torch.Tensor], device: torch.device,
                   name: str = "prefetch_l2") -> list[torch.Tensor]:
    """The hint's tensors as a list: each a contiguous tensor on `device` (what the prefetch
    reads is its storage from data_ptr on), else an error naming it."""
    tensors = list(tensors)
    for index, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}[{index}] must be a torch.Tensor, got {type(t).__name__}")
        if t.device != device or not t.is_contiguous():
            raise ValueError(f"{name}[{index}] must be a contiguous tensor on {device}, got "
                             f"shape {tuple(t.shape)}, strides {t.stride()} on {t.device}")
    return tensors


def fit_ranges(tensors: Sequence[torch.Tensor], budget: int) -> list[tuple[torch.Tensor, int]]:
    """(tensor, bytes from its start) to prefetch, in order: at most MAX_RANGES ranges and
    `budget` bytes in all, sizes in whole 16-byte units; a tensor not 16-byte aligned is
    skipped (a hint may be incomplete). Tensors must be contiguous."""
    ranges = []
    for t in tensors:
        if len(ranges) == MAX_RANGES or budget < ALIGN:
            break
        if t.data_ptr() % ALIGN:
            continue
        size = min(t.numel() * t.element_size(), budget) // ALIGN * ALIGN
        if size:
            ranges.append((t, size))
            budget -= size
    return ranges


def l2_prefetch_ranges(tensors: Sequence[torch.Tensor], device: torch.device,
                       placeholder: torch.Tensor) -> tuple[list, int]:
    """Kernel arguments (tensor, bytes) * MAX_RANGES for prefetching `tensors` (contiguous,
    on `device`) in order, up to L2_SHARE of this device's L2 (fit_ranges), and the number
    of ranges used: 0 where the device has no bulk prefetch."""
    ranges = []
    if tensors and supports_l2_prefetch(device):
        index = device.index if device.index is not None else torch.cuda.current_device()
        ranges = fit_ranges(tensors, int(_l2_bytes(index) * L2_SHARE))
    used = len(ranges)
    ranges += [(placeholder, 0)] * (MAX_RANGES - used)
    return [value for pair in ranges for value in pair], used


@triton.jit
def _prefetch_range(ptr, nbytes, worker, workers, LANES: tl.constexpr):
    """Bytes [0, nbytes) at ptr (16-byte aligned, nbytes a multiple of 16) into L2, in
    chunks of CHUNK_BYTES dealt out round-robin (chunk c to worker c % workers), so that
    every program's copy engine carries a like share."""
    base = ptr.to(tl.pointer_type(tl.int8))
    chunks = tl.cdiv(nbytes, CHUNK)
    for first in range(worker, chunks, workers * LANES):
        chunk = first + tl.arange(0, LANES) * workers
        offsets = chunk.to(tl.int64) * CHUNK
        size = tl.where(chunk < chunks, tl.minimum(nbytes - offsets, CHUNK), 0).to(tl.int32)
        tl.inline_asm_elementwise(
            "{ .reg .pred p; setp.gt.s32 p, $2, 0; "
            "@p cp.async.bulk.prefetch.L2.global [$1], $2; mov.u32 $0, 0; }",
            "=r,l,r", [base + offsets, size], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def prefetch_l2(ptr0, bytes0, ptr1, bytes1, ptr2, bytes2, worker, workers,
                RANGES: tl.constexpr, LANES: tl.constexpr):
    """Issue the prefetch of the first RANGES of l2_prefetch_ranges' ranges, shared out over
    `workers` programs (this one is `worker`) of LANES threads each."""
    if RANGES > 0:
        _prefetch_range(ptr0, bytes0, worker, workers, LANES)
    if RANGES > 1:
        _prefetch_range(ptr1, bytes1, worker, workers, LANES)
    if RANGES > 2:
        _prefetch_range(ptr2, bytes2, worker, workers, LANES)
