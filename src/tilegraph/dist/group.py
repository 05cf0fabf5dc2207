"""TensorParallel: which rank this process is, of how many, and the collectives a
tensor-parallel model runs, each failing with a message that names the rank and the step.

Hangs are what users of multi-GPU decoding fear most, so every wait has a deadline:
- eager collectives: the process group's own timeout (gloo raises; NCCL's watchdog aborts),
  turned into a CollectiveError naming the rank and what was being reduced;
- collectives replayed inside a CUDA graph have no watchdog: the host polls an event
  recorded after them (TensorParallel.wait) and gives up after `timeout` seconds.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch

from ..errors import CollectiveError

DEFAULT_TIMEOUT_S = 300.0   # first steps include Triton compiles and graph captures


@dataclass(frozen=True)
class TensorParallel:
    """Rank `rank` of `size` in `group` (None: the default process group). size 1 runs no
    collective at all."""
    rank: int = 0
    size: int = 1
    group: Any = None
    timeout: float = DEFAULT_TIMEOUT_S

    def __post_init__(self):
        if not isinstance(self.size, int) or self.size < 1:
            raise ValueError(f"tensor-parallel size must be a positive int, got {self.size!r}")
        if not 0 <= self.rank < self.size:
            raise ValueError(f"rank {self.rank} is outside 0..{self.size - 1}")

    @classmethod
    def resolve(cls, tp) -> TensorParallel:
        """None or 1: one process. An int N > 1: the initialised default process group,
        which must have N ranks (tilegraph.dist.init starts it under torchrun). A
        TensorParallel: itself."""
        if isinstance(tp, TensorParallel):
            return tp
        if tp is None or tp == 1:
            return cls()
        if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
            raise ValueError(f"tp must be a positive int or a TensorParallel, got {tp!r}")
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(f"tp={tp} needs torch.distributed: run under `torchrun "
                               f"--nproc-per-node {tp}` and call tilegraph.dist.init() first")
        if dist.get_world_size() != tp:
            raise ValueError(f"tp={tp} but the process group has {dist.get_world_size()} "
                             "ranks")
        return cls(dist.get_rank(), tp)

    def __str__(self) -> str:
        return f"rank {self.rank} of {self.size}"

    # -- collectives ------------------------------------------------------------------------

    def all_reduce_(self, x: torch.Tensor, what: str) -> torch.Tensor:
        """Sum x over the ranks, in place (graph-safe: no allocation, no host sync)."""
        if self.size > 1:
            import torch.distributed as dist

            self._checked(lambda: dist.all_reduce(x, group=self.group), what)
        return x

    def all_gather_columns(self, x: torch.Tensor, columns: int, what: str) -> torch.Tensor:
        """(rows, c) on every rank -> (rows, columns): rank r's block at columns r*c ..
        (r+1)*c - 1, cut at `columns` (the last rank's block may be padding past it)."""
        if self.size == 1:
            return x[:, :columns]
        import torch.distributed as dist

        rows, block = x.shape
        gathered = torch.empty(self.size * rows, block, dtype=x.dtype, device=x.device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        self._checked(lambda: gather(gathered, x.contiguous(), group=self.group), what)
        # (ranks, rows, block) -> (rows, ranks * block): a view at one row
        whole = gathered.view(self.size, rows, block).transpose(0, 1).reshape(rows, -1)
        return whole[:, :columns]

    def error(self, what: str) -> CollectiveError:
        """The error for a collective of this rank that failed or never finished: `what`
        happened, and what every rank should do about it."""
        return CollectiveError(f"{self}: {what}. Another rank failed, stopped or hangs; every "
                               "rank should exit.")

    def _checked(self, collective, what: str) -> None:
        try:
            collective()
        except RuntimeError as error:   # DistBackendError, a gloo timeout or closed peer
            raise self.error(f"{what} failed ({error})") from error

    def wait(self, event: torch.cuda.Event | None, what: str) -> None:
        """Wait for `event` (recorded after replayed collectives) for at most `timeout`
        seconds, then raise CollectiveError: a replayed graph has no watchdog of its own."""
        if event is None or self.size == 1:
            return
        deadline = time.monotonic() + self.timeout
        while not event.query():
            if time.monotonic() > deadline:
                raise self.error(f"{what} did not finish within {self.timeout:.0f} s")
            # short naps: the GPU idles from the event until this returns and the next
            # steps are launched
            time.sleep(5e-5)

    def first(self, size: int) -> TensorParallel | None:
        """Ranks 0..size-1 as a group of their own (to measure a smaller TP in the same run);
        None on the other ranks. Every rank must call it: making a group is collective."""
        if size == self.size:
            return self
        import torch.distributed as dist

        group = dist.new_group(list(range(size)))
        return TensorParallel(self.rank, size, group, self.timeout) if self.rank < size \
            else None

    def abort(self) -> None:
        """Abort the group's NCCL communicators, from any thread: collectives in flight,
        replayed ones included, return, and the group is unusable afterwards. A no-op for
        gloo (its collectives time out by themselves) and without a process group."""
        import torch.distributed as dist

        abort = getattr(dist.distributed_c10d, "_abort_process_group", None)
        if self.size == 1 or abort is None or not dist.is_initialized():
            return
        try:
            abort(self.group)
        except (RuntimeError, ValueError):   # gloo, or a group already destroyed
            pass

    def barrier(self, what: str) -> None:
        if self.size > 1:
            import torch.distributed as dist

            self._checked(lambda: dist.barrier(group=self.group), what)


def init(timeout: float = DEFAULT_TIMEOUT_S, backend: str | None = None) -> TensorParallel:
    """Join the process group torchrun describes (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
    MASTER_PORT): NCCL on GPUs, each rank on GPU LOCAL_RANK, gloo on CPU machines. Every
    collective times out after `timeout` seconds. Without torchrun: one process, size 1."""
    import torch.distributed as dist

    if "WORLD_SIZE" not in os.environ:
        return TensorParallel(timeout=timeout)
    size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ.get("RANK", 0))
    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        if cuda:
            local = int(os.environ.get("LOCAL_RANK", rank))
            if local >= torch.cuda.device_count():
                raise RuntimeError(f"rank {rank}: LOCAL_RANK {local} but this machine has "
                                   f"{torch.cuda.device_count()} GPU(s)")
            torch.cuda.set_device(local)
        dist.init_process_group(backend or ("nccl" if cuda else "gloo"),
                                timeout=timedelta(seconds=timeout),
                                device_id=torch.device("cuda", torch.cuda.current_device())
                                if cuda else None)
    return TensorParallel(rank, size, timeout=timeout)
