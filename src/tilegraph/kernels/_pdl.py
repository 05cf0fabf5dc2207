"""When a decode kernel may start before the previous kernel in its stream has finished.

Programmatic dependent launch (Hopper on) lets a kernel launched with it run its prologue
while the kernel before it in the stream is still running: tilegraph's decode kernels load
their first weight tiles there, then wait (griddepcontrol.wait) for the previous kernel to
finish before reading anything else. Each of them releases the next kernel only after its
own wait, so while one prefetches, the only kernel still running is the one just before it.
The prefetch is wrong only if that kernel writes what is prefetched, so the launchers note
what every PDL kernel writes, per stream, and launch without PDL when the next one's early
reads overlap it. A kernel that writes a KV cache only at one row a sequence (the q|k|v
projection writing the new token's keys and values) says which rows, so that attention may
read every other row before its wait. A kernel launched without PDL never releases its
successor early, and a kernel not launched by tilegraph (no release) makes the next one wait
as usual.

On by default wherever the GPU has it; TILEGRAPH_PDL=0 (read at import) or
`prefetch_weight=False` on a call turns it off.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import torch

from ._checks import byte_range
from ._launch import stream_key, supports_pdl

ENABLED = os.environ.get("TILEGRAPH_PDL", "1") != "0"

# (device index, stream handle) -> byte ranges the last tilegraph kernel launched with PDL on
# that stream writes; absent once a kernel without PDL was launched there.
_in_flight_writes: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {}
# The same key -> (layouts of the caches that kernel writes only at rows, slots, positions):
# row positions[r] of slot slots[r] in each cache (slot, head, position, dim).
_in_flight_rows: dict[tuple[int, int], tuple[tuple, torch.Tensor, torch.Tensor]] = {}


def _layout(t: torch.Tensor) -> tuple:
    return t.data_ptr(), tuple(t.shape), t.stride(), t.dtype


def use_pdl(device: torch.device, early_reads: Sequence[torch.Tensor],
            requested: bool | None = None) -> bool:
    """Whether a decode kernel reading `early_reads` before its wait may launch with PDL:
    the GPU has it, it is not turned off, and the kernel before it does not write them."""
    if requested is False or not ENABLED or not supports_pdl(device):
        return False
    writes = _in_flight_writes.get(stream_key(device), ())
    for t in early_reads:
        if t is None or t.numel() == 0:
            continue
        start, end = byte_range(t)
        if any(start < w_end and w_start < end for w_start, w_end in writes):
            return False
    return True


def launched(device: torch.device, pdl: bool, writes: Sequence[torch.Tensor],
             cache_rows: tuple[Sequence[torch.Tensor], torch.Tensor, torch.Tensor] | None = None
             ) -> None:
    """Note the kernel just launched on the current stream: with PDL, what it writes.
    cache_rows: (caches, slots, positions) where it writes those caches (among `writes`) only
    at row positions[r] of slot slots[r]."""
    if device.type != "cuda":
        return
    key = stream_key(device)
    _in_flight_rows.pop(key, None)
    if not pdl:
        _in_flight_writes.pop(key, None)
        return
    _in_flight_writes[key] = tuple(byte_range(t) for t in writes if t.numel())
    if cache_rows is not None:
        caches, slots, positions = cache_rows
        _in_flight_rows[key] = (tuple(_layout(t) for t in caches), slots, positions)


def cache_rows_in_flight(device: torch.device, caches: Sequence[torch.Tensor]
                         ) -> tuple[torch.Tensor, torch.Tensor] | tuple[()] | None:
    """What the kernel before on this stream may still write in `caches` while the next
    kernel, launched with PDL, starts: () nothing; (slots, positions) only row
    positions[r] of slot slots[r] (both final: that kernel reads them); None anything else."""
    key = stream_key(device)
    writes = _in_flight_writes.get(key, ())
    row_caches, slots, positions = _in_flight_rows.get(key, ((), None, None))
    rows_written = False
    for t in caches:
        start, end = byte_range(t)
        if not any(start < w_end and w_start < end for w_start, w_end in writes):
            continue
        if _layout(t) not in row_caches:
            return None
        rows_written = True
    return (slots, positions) if rows_written else ()
