"""Run a function on N processes that form a torch.distributed group (gloo on CPU, NCCL on
GPUs), the way torchrun would start them: for tests of tensor parallelism."""

from __future__ import annotations

import os
import socket
import traceback

import torch
import torch.multiprocessing as mp

from _interpreter import skip_repeated_patching


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, size, port, queue, target, args):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        if not torch.cuda.is_available():   # each rank interprets its kernels on the CPUs
            skip_repeated_patching()
        queue.put((rank, "ok", target(*args)))
    except BaseException as error:   # reported to the test, which fails with the traceback
        queue.put((rank, "error", f"{type(error).__name__}: {error}\n"
                                  f"{traceback.format_exc()}"))


def run_ranks(size: int, target, *args, timeout: float = 300.0, allow_errors=False) -> list:
    """target(*args) on ranks 0..size-1; its results in rank order. A rank that raises fails
    the call (allow_errors: its result is ("error", traceback text) instead); a rank that
    neither returns nor raises within `timeout` seconds fails it too."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    port = _free_port()
    processes = [context.Process(target=_entry, args=(rank, size, port, queue, target, args))
                 for rank in range(size)]
    for p in processes:
        p.start()
    results = {}
    try:
        for _ in range(size):
            rank, status, value = queue.get(timeout=timeout)
            results[rank] = value if status == "ok" else ("error", value)
            if status != "ok" and not allow_errors:
                raise AssertionError(f"rank {rank} failed:\n{value}")
    finally:
        for p in processes:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return [results[rank] for rank in range(size)]
