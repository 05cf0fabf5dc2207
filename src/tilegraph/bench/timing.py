"""measure(): CUDA-event timing after warm-up, with L2 flushing or graph replays.

On a GPU every repetition is bracketed by CUDA events; `flush_l2` writes a buffer twice the
L2 size before each one, so data the function reads comes from memory, not from the cache a
previous repetition warmed. Before the start event the GPU is kept busy (a spin kernel) for
twice the host's time to issue one call: otherwise, whenever issuing takes longer than the
kernels run, the GPU reaches the start event first and waits for the launch, and that host
time is counted as kernel time (notes/kernels.md). `graph=True` captures many calls in one
CUDA graph (tg.capture, on tilegraph's one side stream) and divides a replay's time by their
number: for microsecond kernels whose launch cost would otherwise dominate. On CPU a
monotonic clock times plain calls and the result says so.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from ..graph.capture import capture


@dataclass(frozen=True)
class Stats:
    """Times of one call in milliseconds."""
    median: float
    p20: float
    p80: float
    min: float
    max: float
    n: int
    clock: str  # "cuda-events", "cuda-graph-replay" or "monotonic-cpu"

    def as_dict(self) -> dict:
        return asdict(self)


def _summarize(times_ms: list[float], clock: str) -> Stats:
    ordered = sorted(times_ms)
    q = statistics.quantiles(ordered, n=5, method="inclusive") if len(ordered) > 1 \
        else [ordered[0]] * 4
    return Stats(median=statistics.median(ordered), p20=q[0], p80=q[3], min=ordered[0],
                 max=ordered[-1], n=len(ordered), clock=clock)


def merged(rounds: list[Stats]) -> Stats:
    """One call's Stats from rounds of measure() of it: the median of the rounds' medians
    (and quantiles), the extremes of all, every sample counted."""
    return Stats(median=statistics.median(r.median for r in rounds),
                 p20=statistics.median(r.p20 for r in rounds),
                 p80=statistics.median(r.p80 for r in rounds),
                 min=min(r.min for r in rounds), max=max(r.max for r in rounds),
                 n=sum(r.n for r in rounds), clock=rounds[0].clock)


_CYCLES_PER_US = 2000  # a spin of n cycles lasts at least n / 2000 us up to a 2 GHz clock


def _hold_gpu(us: float) -> None:
    """Queue a kernel that spins for about `us` microseconds."""
    sleep = getattr(torch.cuda, "_sleep", None)  # private but long-standing; else no hold
    if sleep is not None and us > 0:
        sleep(int(us * _CYCLES_PER_US))


def _host_us(fn: Callable[[], object], calls: int = 5) -> float:
    """Median host time to issue one call of fn, in microseconds."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def _repetitions(estimate_ms: float, budget_ms: float, lo: int = 5, hi: int = 10_000) -> int:
    return int(min(hi, max(lo, budget_ms / max(estimate_ms, 1e-4))))


def _measure_cpu(fn: Callable[[], object], warmup_ms: float, rep_ms: float) -> Stats:
    start = time.perf_counter()
    fn()
    estimate = (time.perf_counter() - start) * 1e3
    for _ in range(_repetitions(estimate, warmup_ms, lo=1)):
        fn()
    times = []
    for _ in range(_repetitions(estimate, rep_ms)):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return _summarize(times, "monotonic-cpu")


class _L2Flusher:
    def __init__(self) -> None:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 * 2**20)
        self.buffer = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buffer.zero_()


def _time_events(fn: Callable[[], object], reps: int, before=None,
                 hold_us: float = 0.0) -> list[float]:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends, strict=True):
        if before is not None:
            before()
        _hold_gpu(hold_us)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]


def _calls(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def run() -> None:  # outputs dropped: in a graph each call's memory is then reused
        for _ in range(calls):
            fn()
    return run


def measure(fn: Callable[[], object], warmup_ms: float = 25, rep_ms: float = 100,
            flush_l2: bool = True, graph: bool = False) -> Stats:
    """Median and spread of one call of `fn` (no arguments) in milliseconds.

    With `graph=True`, `fn` is captured many times over in one CUDA graph; a closure that
    cycles through several input sets then rotates them past L2 inside the graph.
    """
    if not torch.cuda.is_available():
        return _measure_cpu(fn, warmup_ms, rep_ms)
    flusher = _L2Flusher() if flush_l2 else None
    fn()
    torch.cuda.synchronize()
    hold_us = min(5000.0, 2 * _host_us(fn))
    torch.cuda.synchronize()
    estimate = statistics.median(_time_events(fn, 5, flusher, hold_us))
    if graph:
        calls = _repetitions(estimate, 2.0, lo=10, hi=1000)  # ~2 ms of work per replay
        # (the calls write their own buffers, by design: no state to watch)
        cuda_graph = capture(_calls(fn, calls), warmup=1, restore_state=False)
        hold_us = min(5000.0, 2 * _host_us(cuda_graph.replay, 2))
        replay_ms = statistics.median(_time_events(cuda_graph.replay, 3, flusher, hold_us))
        _time_events(cuda_graph.replay, _repetitions(replay_ms, warmup_ms, lo=1), flusher,
                     hold_us)
        times = _time_events(cuda_graph.replay, _repetitions(replay_ms, rep_ms, hi=200),
                             flusher, hold_us)
        return _summarize([t / calls for t in times], "cuda-graph-replay")
    _time_events(fn, _repetitions(estimate, warmup_ms, lo=1), flusher, hold_us)
    return _summarize(_time_events(fn, _repetitions(estimate, rep_ms), flusher, hold_us),
                      "cuda-events")
