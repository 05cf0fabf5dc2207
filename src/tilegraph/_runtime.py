"""Where kernels run: compiled for CUDA when a device exists, else Triton's interpreter on CPU.

Imported first by the package: TRITON_INTERPRET must be set before any @triton.jit function
is defined, since triton.jit reads it at decoration time.
"""

import contextlib
import os
import threading
import warnings

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
if INTERPRET:
    # numpy warns about overflow and NaN in lanes that the kernels mask off anyway
    # (exp of a padded -inf, say); on a GPU those lanes are silent.
    warnings.filterwarnings("ignore", category=RuntimeWarning,
                            module=r"triton\.runtime\.interpreter")


def synchronize(device=None) -> None:
    """Wait for the GPU (before and after host-clock timing); nothing to wait for on CPU."""
    if torch.cuda.is_available() and (device is None or torch.device(device).type == "cuda"):
        torch.cuda.synchronize()


def is_capturing() -> bool:
    """True while the current CUDA stream is being captured into a graph."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def device_name() -> str:
    """The GPU's name, or a label for the interpreter (used to key caches and results)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "cpu-interpreter"


_side_streams = threading.local()


def side_stream() -> torch.cuda.Stream:
    """The side stream of this thread and device that every tilegraph graph is captured on.

    Always the same one, for two reasons. The caching allocator reuses a block only on the
    stream that freed it, so graphs sharing a pool must be captured on one stream (a new
    stream per capture made every runner size take a fresh segment). And once a process has
    run work on a few streams, every kernel node of every CUDA graph costs ~0.35 us more,
    for good (H100 and H200, notes/graphs.md): a new stream per capture put tilegraph's own
    benchmarks in that state after their third graph.
    """
    device = torch.cuda.current_device()
    streams = getattr(_side_streams, "by_device", None)
    if streams is None:
        streams = _side_streams.by_device = {}
    if device not in streams:
        streams[device] = torch.cuda.Stream(device)
    return streams[device]


_captures = threading.local()


@contextlib.contextmanager
def tilegraph_capture():
    """Mark the block as one capture made by tilegraph (tg.capture, tg.scope, a runner), so
    that work zeroed for a later call of the same capture is known to belong to it."""
    previous = getattr(_captures, "token", None)
    _captures.token = object()
    try:
        yield
    finally:
        _captures.token = previous


def capture_token() -> object | None:
    """The capture tilegraph is making on this thread, or None."""
    return getattr(_captures, "token", None)


_dispatch = threading.local()


@contextlib.contextmanager
def ops_through_dispatcher():
    """While the block runs on this thread, tilegraph's ops go through PyTorch's dispatcher
    (eager calls normally launch their kernels directly, to save its overhead): a
    TorchDispatchMode then sees each one, with its schema saying what it writes. tg.capture's
    restore_state and tg.scope on CPU need that."""
    previous = getattr(_dispatch, "on", False)
    _dispatch.on = True
    try:
        yield
    finally:
        _dispatch.on = previous


def through_dispatcher() -> bool:
    return getattr(_dispatch, "on", False)
