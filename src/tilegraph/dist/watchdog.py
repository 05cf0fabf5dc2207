"""A deadline the host keeps even when it is stuck: a thread that aborts the process group's
communicators once an armed stretch of decoding has lasted `timeout` seconds and more.

TensorParallel.wait polls an event with a deadline, but only once the host gets there. With
a peer gone, a replayed NCCL collective waits for ever, and any host call that synchronizes
the context blocks behind it before the host ever polls (seen on 2 H200s, session 39: the
first launch of a kernel, which CUDA loads then, and loading synchronizes). Aborting the
communicators makes NCCL's kernels return, so the GPU drains and the host gets back to find
`fired` set; tilegraph's one-shot all-reduce gives up by itself (one_shot.py).

    watchdog = Watchdog(tp, device)   # a thread only for a group of GPUs
    with watchdog:            # armed: queue steps, wait for them
        ...
    if watchdog.fired: raise CollectiveError(...)
    watchdog.close()
"""

from __future__ import annotations

import threading
import time

import torch

from .group import TensorParallel

# The host's own deadline (TensorParallel.wait) comes first when the host is free to poll:
# the communicators are aborted only a little after it.
GRACE_S = 2.0


class Watchdog:
    def __init__(self, tp: TensorParallel, device: torch.device):
        self.tp = tp
        self.fired = False
        self._armed_at: float | None = None
        self._closed = threading.Event()
        self._thread = None
        if tp.size > 1 and device.type == "cuda":   # gloo's collectives time out by themselves
            self._thread = threading.Thread(target=self._watch, daemon=True,
                                            name=f"tilegraph watchdog ({tp})")
            self._thread.start()

    def __enter__(self) -> Watchdog:
        self._armed_at = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        self._armed_at = None

    def close(self) -> None:
        """Stop the thread. One that fired may still be inside the abort, which took over
        20 s on 2 H200s (session 39) while the host had already got back: a daemon, it is
        left to finish rather than waited for."""
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)   # an unfired thread wakes within 0.5 s

    def _watch(self) -> None:
        limit = self.tp.timeout + GRACE_S
        while not self._closed.wait(min(0.5, limit / 20)):
            armed_at = self._armed_at
            if armed_at is not None and time.monotonic() - armed_at > limit:
                self.fired = True
                self.tp.abort()
                return
