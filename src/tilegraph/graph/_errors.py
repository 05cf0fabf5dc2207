"""Turn CUDA's capture failures into CaptureError messages that say which operation, where
in the user's code, and what to do."""

from __future__ import annotations

import functools
import sysconfig
import traceback
from pathlib import Path

from ..errors import CaptureError

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]
_STANDARD_LIBRARY = Path(sysconfig.get_paths()["stdlib"]).resolve()
_HOST_SYNC_HINTS = ("operation not permitted when stream is capturing",
                    "cudaErrorStreamCaptureUnsupported", "cudaErrorStreamCaptureInvalidated",
                    "cudaErrorStreamCaptureImplicit", "capture")


def callable_name(fn) -> str:
    """A name for `fn` in messages: its own, a partial's function's, else its type's. Never
    str(fn): a partial's str formats its arguments, and a tensor among them is copied to the
    host to be printed (a decode step's KV cache: half a second a capture, H200)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return str(getattr(fn, "__name__", None) or type(fn).__name__)


def user_location(tb=None) -> tuple[str, int, str]:
    """(file, line number, code) of the innermost frame outside torch, triton, tilegraph and
    the standard library, in the traceback `tb`, or in the current stack when `tb` is None."""
    frames = traceback.extract_tb(tb) if tb is not None else traceback.extract_stack()
    for frame in reversed(frames):
        path = Path(frame.filename).resolve()
        parts = set(path.parts)
        if (_PACKAGE_ROOT in path.parents or _STANDARD_LIBRARY in path.parents
                or "torch" in parts or "triton" in parts):
            continue
        return frame.filename, frame.lineno or 0, frame.line or ""
    return "unknown location", 0, ""


def user_frame(tb=None) -> str:
    """'file:line: code' of user_location(tb)."""
    filename, lineno, line = user_location(tb)
    return f"{filename}:{lineno}: {line}" if lineno else filename


def _root_cause(error: BaseException) -> BaseException:
    """The first exception in a chain: capture_end's complaint hides the real one."""
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__context__ or error.__cause__
    return seen[-1]


def as_capture_error(error: BaseException, what: str) -> BaseException:
    """A CaptureError for a failure during `what`, or the error itself if unrelated."""
    if isinstance(error, CaptureError):
        return error
    root = _root_cause(error)
    if isinstance(root, CaptureError):
        return root
    message = str(root)
    if not any(hint in message for hint in _HOST_SYNC_HINTS):
        return error
    return CaptureError(
        f"{what} failed at {user_frame(root.__traceback__)}\n"
        f"  CUDA said: {message.strip().splitlines()[0]}\n"
        "  The host waited for the GPU (.item(), .cpu(), .tolist(), printing a tensor, or a "
        "Python `if` on a tensor value) or ran an operation that cannot be recorded. A graph "
        "replays GPU work only: keep values on the device (torch.where instead of `if`), "
        "and move host reads out of the captured function.")
