"""Config search whose results persist on disk and that refuses to run inside graph capture.

Results are keyed by GPU name, Triton version, kernel name and a problem key (sizes, dtype),
stored as JSON under $TILEGRAPH_CACHE_DIR (default: $XDG_CACHE_HOME/tilegraph or
~/.cache/tilegraph), so a second process captures its graphs without re-tuning.
TILEGRAPH_AUTOTUNE=0 skips timing and takes each kernel's default config.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
import triton

try:
    from triton.runtime._async_compile import AsyncCompileMode
except ImportError:  # Triton before 3.4
    AsyncCompileMode = None

from .._runtime import INTERPRET, device_name, is_capturing, side_stream
from ..errors import CaptureError

Config = dict  # kernel meta-parameters plus num_warps / num_stages
# Operands that together span three H100 L2 caches: a call cycling through copies of them
# reads every one from memory, as a model's step does. Timing one warm copy over and over
# ranks candidates wrongly: at 512 x 1024 x 4096 (bf16, with bias and residual) a 64 x 64
# pointer kernel took 14.3 us warm and 21.8 us cold, cuBLAS 13.5 and 16.6
# (research/probe_train_gemms.py, H100).
L2_SPAN_BYTES = 150 * 2**20
# Candidates more than this factor slower than the fastest in the first round of timing are
# not timed again (run-to-run spread of one round: a few percent).
CONTENDER_MARGIN = 1.25
# The first round only sorts out those: about 5 ms of calls a graph, the median of 3 replays
# (the later rounds' 10 and 10 took most of a first prefill's search, session 80).
FIRST_ROUND_MS, FIRST_ROUND_REPLAYS = 5, 3
# Threads that compile a search's candidates side by side (compile_side_by_side), at most.
# 42 GEMM kernels compiled in 22.3 s one after another, 5.2 s in 8 threads and 4.4 s in 16
# (Triton 3.6, H200 machine of 16 cores; research/probe_parallel_compile.py, session 78).
COMPILE_THREADS = 16
_TUNERS: list[Tuner] = []  # every Tuner made, for reports of what was picked
_searches = 0  # timing searches run in this process (searches_run)


def cache_dir() -> Path:
    root = os.environ.get("TILEGRAPH_CACHE_DIR")
    if root:
        return Path(root)
    xdg = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(xdg) / "tilegraph"


def timing_enabled() -> bool:
    """False where candidates are not timed: the interpreter (its timing says nothing about
    a GPU) and TILEGRAPH_AUTOTUNE=0 (the test-suite); callers take their default config."""
    return not INTERPRET and os.environ.get("TILEGRAPH_AUTOTUNE", "1") != "0"


def searches_run() -> int:
    """How many times a Tuner has timed candidates in this process so far. Graphs captured
    before such a search replay slower after it (a Qwen2-0.5B decode step 3%, H100), and
    captured again they do not (notes/graphs.md): tg.GraphRunner and tg.Generator watch
    this count."""
    return _searches


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def copies_spanning_l2(nbytes: int, most: int = 64) -> int:
    """How many copies of operands of `nbytes` together span L2_SPAN_BYTES (at least 1)."""
    return max(1, min(most, -(-L2_SPAN_BYTES // max(1, nbytes))))


def rotating(call: Callable[[Any], object], items: list) -> Callable[[], None]:
    """A function of no arguments that calls `call` on items[0], items[1], ... in turn."""
    turn = [0]

    def run() -> None:
        call(items[turn[0] % len(items)])
        turn[0] += 1
    return run


class RotatedCopies:
    """Calling it returns `tensors`, then copies of them, in turn (None entries stay None):
    enough copies to span L2_SPAN_BYTES together. They are made on the first call, so a
    tuner that finds its answer cached makes none; release() drops them (and the originals),
    whoever still holds this object."""

    def __init__(self, tensors: tuple):
        self._tensors: tuple | None = tensors
        self._copies: list[tuple] = []
        self._turn = 0

    def __call__(self) -> tuple:
        if not self._copies:
            tensors = self._tensors
            nbytes = sum(t.numel() * t.element_size() for t in tensors if t is not None)
            self._copies = [tensors] + [tuple(None if t is None else t.clone() for t in tensors)
                                        for _ in range(copies_spanning_l2(nbytes) - 1)]
        self._turn += 1
        return self._copies[(self._turn - 1) % len(self._copies)]

    def release(self) -> None:
        self._tensors, self._copies = None, []


class Tuner:
    """Times each candidate config once per problem key and remembers the fastest."""

    def __init__(self, kernel: str, configs: list[Config]):
        if not configs:
            raise ValueError(f"{kernel}: no candidate configs")
        self.kernel = kernel
        self.configs = configs
        self._memo: dict[str, Config] = {}
        # Problem key -> (config, median ms) of every candidate timed in this process.
        self.timings: dict[str, list[tuple[Config, float]]] = {}
        self._disk_loaded = False
        _TUNERS.append(self)

    @property
    def path(self) -> Path:
        return (cache_dir() / "autotune" / slug(device_name())
                / f"triton-{triton.__version__}" / f"{self.kernel}.json")

    def _load_disk(self) -> None:
        if self._disk_loaded:
            return
        self._disk_loaded = True
        try:
            self._memo.update(json.loads(self.path.read_text()))
        except (OSError, ValueError):
            pass  # no cache yet, or a damaged one: tune again and overwrite it

    def _save_disk(self) -> None:
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:  # merge with what another process may have written meanwhile
                merged = json.loads(path.read_text())
            except (OSError, ValueError):
                merged = {}
            merged.update(self._memo)
            with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
                json.dump(merged, f, indent=1, sort_keys=True)
            os.replace(f.name, path)
        except OSError:
            pass  # a read-only cache costs re-tuning, never correctness

    def lookup(self, key: tuple) -> Config | None:
        """The config chosen for `key` in this process or an earlier one, else None."""
        skey = repr(key)
        config = self._memo.get(skey)
        if config is None:
            self._load_disk()
            config = self._memo.get(skey)
        return config

    def record(self, key: tuple, config: Config) -> None:
        """Remember `config` for `key`, here and on disk (for choices timed elsewhere)."""
        self._load_disk()
        self._memo[repr(key)] = config
        self._save_disk()

    def pick(self, key: tuple, run: Callable[[Config], None],
             candidates: list[Config] | None = None,
             compile_only: Callable[[Config], None] | None = None) -> Config:
        """The best config for `key`; `run(config)` launches once (into scratch memory).
        `compile_only(config)`, where given, compiles the config's Triton kernels without
        launching them (their warmup()): a search then compiles its candidates side by
        side first."""
        config = self.lookup(key)
        if config is not None:
            return config
        candidates = candidates or self.configs
        if not timing_enabled():
            return candidates[0]   # the first candidate is each kernel's default
        if is_capturing():
            raise CaptureError(
                f"tilegraph kernel {self.kernel!r} needs autotuning for {key} while a CUDA "
                "graph is being captured; run the function once before capture (warm up), "
                "or use tg.capture, which warms up for you")
        if compile_only is not None:
            compile_side_by_side(compile_only, candidates)
        config = self._search(key, run, candidates)
        self.record(key, config)
        return config

    def _search(self, key: tuple, run: Callable[[Config], None],
                candidates: list[Config]) -> Config:
        """Time every candidate once, then those within CONTENDER_MARGIN of the fastest in
        two more interleaved rounds; keep the lowest median.

        Interleaving spreads clock ramp-up and thermal drift over all candidates alike: one
        pass in order once picked a config 14% slower than the best at 8192^3. Candidates
        already far behind after one round do not come back: they would only lengthen the
        search (an exact-fp32 product has 40 of them).
        """
        global _searches
        _searches += 1
        usable = [c for c in candidates if self._compiles(run, c)]
        if not usable:
            raise RuntimeError(f"{self.kernel}: no candidate config runs on this GPU")
        first = [self._time(run, c, FIRST_ROUND_MS, FIRST_ROUND_REPLAYS) for c in usable]
        contenders = [i for i, t in enumerate(first) if t <= CONTENDER_MARGIN * min(first)]
        later = [[self._time(run, usable[i], 10) for i in contenders] for _ in range(2)]
        medians = list(first)
        for i, times in zip(contenders, zip(*later, strict=True), strict=True):
            medians[i] = statistics.median((first[i], *times))
        self.timings[repr(key)] = list(zip(usable, medians, strict=True))
        best = min(contenders, key=medians.__getitem__)
        return usable[best]

    def results(self) -> dict[str, Config]:
        """Every choice made or loaded so far, by problem key (for reports)."""
        return dict(self._memo)

    @staticmethod
    def _compiles(run: Callable[[Config], None], config: Config) -> bool:
        """Run once (compiling it) outside any graph; False if it needs more than the GPU
        has (shared memory, registers)."""
        try:
            run(config)
            return True
        except triton.runtime.errors.OutOfResources:
            return False
        finally:
            torch.cuda.synchronize()

    @staticmethod
    def _time(run: Callable[[Config], None], config: Config, rep_ms: float,
              replays: int = 10) -> float:
        """Median ms of one call, replayed from a CUDA graph: the GPU's time, which is what a
        captured step pays. Eager timing would also charge the host's launch cost, and so
        favour one big kernel over a cuBLAS call plus an element-wise pass even where the
        pair finishes first on the GPU."""
        try:
            return _graph_replay_ms(lambda: run(config), rep_ms, replays)
        finally:
            torch.cuda.synchronize()


def compile_side_by_side(compile_only: Callable[[Config], None],
                         configs: list[Config]) -> None:
    """Call compile_only(config) for every config, Triton compiling in up to COMPILE_THREADS
    threads (Triton's AsyncCompileMode: a kernel's warmup() hands its compile to the pool),
    and wait for them all. Compiling is what a first search spends most of its time on, and
    ptxas and LLVM run outside the interpreter lock. A compile that fails is left to the
    serial run after it, which raises or skips it as it would have; where this Triton has
    no AsyncCompileMode (before 3.4) nothing is compiled ahead."""
    if INTERPRET or AsyncCompileMode is None or len(configs) < 2:
        return
    threads = max(1, min(COMPILE_THREADS, len(configs), os.cpu_count() or 1))
    try:
        with ThreadPoolExecutor(threads) as pool, AsyncCompileMode(pool):
            for config in configs:
                compile_only(config)
    except Exception:  # noqa: BLE001 - each candidate's own run reports its error
        pass


def _graph_replay_ms(fn: Callable[[], None], rep_ms: float, replays: int = 10) -> float:
    """Median ms of one call of fn, from replays of a graph holding about rep_ms of calls.

    Captured on tilegraph's side stream after fn has first run there outside capture, as
    in a tg.capture: kernels keep scratch memory per stream (the split-K workspaces) that a
    capture may use but not make. triton.testing.do_bench_cudagraph warms up on one stream
    and captures on another, and so timed split-K configs without their split. No stream
    of its own: each new one slows every later graph node (_runtime.side_stream)."""
    stream = side_stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
        single = torch.cuda.CUDAGraph()
        with torch.cuda.graph(single, stream=stream):
            fn()
        calls = max(1, round(rep_ms / max(_replay_ms(single, stream), 1e-3)))
        del single
        batch = torch.cuda.CUDAGraph()
        with torch.cuda.graph(batch, stream=stream):
            for _ in range(calls):
                fn()
        return statistics.median(_replay_ms(batch, stream) / calls for _ in range(replays))


def _replay_ms(graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(stream)
    graph.replay()
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)


def choices() -> dict[str, dict[str, Config]]:
    """{kernel: {problem key: config}} of every tuner that has picked or loaded something."""
    return {t.kernel: t.results() for t in _TUNERS if t.results()}
