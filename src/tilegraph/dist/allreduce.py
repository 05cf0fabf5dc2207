"""The all-reduce after each row-parallel projection: NCCL, or tilegraph's one-shot
all-reduce over symmetric memory (one_shot.py), whichever this machine runs faster, measured
when the model is built.

A decode step's all-reduces carry a few KB (a layer's output, batch x dim), where the cost
is latency, not bandwidth. On 2 H200s replayed in a graph (8 KB, bf16) NCCL took 19.0 us a
call and torch's symmetric-memory one-shot 6.4 us (results/2026-11-23-session20): with 64 a
token on a 32-layer model, 1.2 ms against 0.4. A one-shot kernel reads every peer's buffer
directly (no multimem operations: NVLink multicast stays off), so the projection writes its
partial result straight into a symmetric buffer (tg.linear's out=).

Two buffers, one for the attention output's all-reduce and one for the MLP output's: calls
alternate between them, so a rank rewrites a buffer only after every peer has entered the
all-reduce after the one that read it.
"""

from __future__ import annotations

import itertools

import torch

from .._runtime import side_stream
from .group import TensorParallel

ONE_SHOT_ROWS = 16   # decode batches up to this use the one-shot path; prefill uses NCCL
TIMING_CALLS = 32
TIMING_REPLAYS = 10


def graph_us(step, calls: int, replays: int) -> float:
    """Microseconds per call of `step`, captured `calls` times in one CUDA graph, replayed."""
    stream = side_stream()   # not a new stream: each one slows every later graph node
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):   # communicators, buffers and kernels set up outside capture
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(calls):
            step()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return 1e3 * start.elapsed_time(end) / (replays * calls)


class LayerAllReduce:
    """The all-reduces of a tensor-parallel model's layers (see the module).

        out = reduce.output(site, rows)      # a buffer for the projection, or None
        x = tg.linear(..., out=out)
        x = reduce(x, site, what)            # summed over the ranks
    """

    def __init__(self, tp: TensorParallel, dim: int, dtype: torch.dtype,
                 device: torch.device, rows: int = ONE_SHOT_ROWS):
        self.tp = tp
        self.kind = "nccl" if device.type == "cuda" else "gloo"
        self.times_us: dict[str, float | str] = {}
        self._one_shot = None
        if tp.size == 1 or device.type != "cuda":
            return
        try:
            import torch.distributed as dist

            from .one_shot import OneShotAllReduce

            name = (tp.group or dist.group.WORLD).group_name
            one_shot = OneShotAllReduce(tp, name, (rows, dim), dtype)
        except Exception as error:   # an older torch, GPUs without peer access, ...
            # (the same on every rank: the ranks stay on one path)
            self.times_us["one-shot"] = f"unavailable: {type(error).__name__}: {error}"[:200]
            return
        probe = torch.zeros(rows, dim, dtype=dtype, device=device)
        calls = itertools.count()

        def one_shot_step():   # the sites alternate, as a model's calls do
            site = next(calls) % 2
            one_shot(one_shot.buffer(site), site)

        times = torch.tensor([
            graph_us(lambda: tp.all_reduce_(probe, "the all-reduce timing"), TIMING_CALLS,
                     TIMING_REPLAYS),
            graph_us(one_shot_step, TIMING_CALLS, TIMING_REPLAYS)], device=device)
        # every rank must choose the same path: decide on the ranks' summed times
        tp.all_reduce_(times, "the all-reduce timing")
        nccl, one_shot_us = (t / tp.size for t in times.tolist())
        self.times_us = {"nccl": nccl, "one-shot": one_shot_us, "bytes": probe.nbytes}
        if one_shot_us < nccl:
            self.kind, self._one_shot = "one-shot", one_shot

    @property
    def failed(self) -> torch.Tensor | None:
        """A device int32 word, non-zero once a replayed one-shot all-reduce gave up waiting
        for a peer (after tp.timeout); None where no collective can fail that way."""
        return None if self._one_shot is None else self._one_shot.failed

    def output(self, site: int, rows: int) -> torch.Tensor | None:
        """Where all-reduce `site` (0: attention output, 1: MLP output) wants its input
        written: a symmetric buffer, or None (any tensor, reduced by NCCL or gloo)."""
        if self._one_shot is None or rows > self._one_shot.buffer(site).shape[0]:
            return None
        return self._one_shot.buffer(site)[:rows]

    def __call__(self, partial: torch.Tensor, site: int, what: str) -> torch.Tensor:
        """The sum of every rank's `partial`: a new tensor from the one-shot path, `partial`
        itself, summed in place, from NCCL or gloo."""
        if self.tp.size == 1:
            return partial
        if (self._one_shot is not None
                and partial.data_ptr() == self._one_shot.buffer(site).data_ptr()):
            return self._one_shot(partial, site)
        return self.tp.all_reduce_(partial, what)
