"""When a decode kernel may start before the previous kernel in its stream has finished.

Programmatic dependent launch (Hopper on) lets a kernel launched with it run its prologue
while the kernel before it in the stream is still running: tilegraph's decode kernels load
their first weight tiles there, then wait (griddepcontrol.wait) for the previous kernel to
finish before reading anything else. Each of them releases the next kernel only after its
own wait, so while one prefetches, the only kernel still running is the one just before it.
The prefetch is wrong only if that kernel writes what is prefetched, so the launchers note
what every PDL kernel writes, per stream, and launch without PDL when the next one's early
reads overlap it. A kernel launched without PDL never releases its successor early, and a
kernel not launched by tilegraph (no release) makes the next one wait as usual.

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


def launched(device: torch.device, pdl: bool, writes: Sequence[torch.Tensor]) -> None:
    """Note the kernel just launched on the current stream: with PDL, what it writes."""
    if device.type != "cuda":
        return
    key = stream_key(device)
    if pdl:
        _in_flight_writes[key] = tuple(byte_range(t) for t in writes if t.numel())
    else:
        _in_flight_writes.pop(key, None)
