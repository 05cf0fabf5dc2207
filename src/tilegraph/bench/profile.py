"""profile(): where the time of a call goes, by torch.profiler; nvtx(): ranges for Nsight.

    result = bench.profile(step, trace="trace.json")   # warm-up, then profiled steps
    print(result.table)                                # key_averages, by device time

Each profiled step is a labelled range ("step 0", "step 1", ...) so steps separate in the
Chrome trace (open it in chrome://tracing or ui.perfetto.dev).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, record_function


@dataclass
class Profile:
    table: str  # key_averages, sorted by CUDA (device) time, or CPU time without a GPU
    sort_by: str
    trace: Path | None
    events: object  # torch.profiler's EventList of averages, for custom queries

    def __str__(self) -> str:
        return self.table


@contextlib.contextmanager
def nvtx(name: str) -> Iterator[None]:
    """A named range in Nsight Systems timelines and in torch.profiler traces."""
    with record_function(name):
        if not torch.cuda.is_available():
            yield
            return
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()


def profile(fn: Callable[[], object], trace: str | Path | None = None, warmup: int = 3,
            steps: int = 5, row_limit: int = 20) -> Profile:
    """Run `fn` `warmup` times unprofiled (JIT, autotuning, caches), then `steps` times under
    torch.profiler with CPU and CUDA activity; optionally write a Chrome trace to `trace`."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"need steps >= 1 and warmup >= 0, got steps={steps}, warmup={warmup}")
    cuda = torch.cuda.is_available()
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.profiler.profile(activities=activities) as prof:
        for step in range(steps):
            with nvtx(f"step {step}"):
                fn()
        if cuda:
            torch.cuda.synchronize()
    averages = prof.key_averages()
    sort_by = "device_time_total" if cuda else "cpu_time_total"
    trace_path = None
    if trace is not None:
        trace_path = Path(trace)
        trace_path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(trace_path))
    return Profile(averages.table(sort_by=sort_by, row_limit=row_limit), sort_by, trace_path,
                   averages)
