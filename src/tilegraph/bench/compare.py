"""compare(): run variants of one computation side by side, correctness first, then speed.

    result = bench.compare({"torch": f1, "triton": f2}, reference=ref, args=(x,),
                           bytes=2 * x.numel() * x.element_size())
    print(result)   # a Markdown table

Every variant is called with `args` and checked against `reference(*args)` (best computed in
float64) by relative error, with the tolerance of the output's dtype. A variant that is wrong
is reported FAIL and never timed; one that raises is reported as an error; one given as
`Unavailable("why")` is listed as skipped with its reason. Only then are the correct ones
timed, and throughput is quoted against this device's measured ceilings. Yardsticks (e.g. a
plain copy of the same bytes) are timed the same way but not checked: they do a different
computation, and show how fast any pass over those bytes can be at this size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..testing import TOLERANCES, rel_error
from .timing import Stats, measure, merged


@dataclass(frozen=True)
class Unavailable:
    """A variant that cannot run here (no GPU, no nvcc, ...): listed as skipped, with why."""
    reason: str


@dataclass
class VariantResult:
    name: str
    status: str  # "ok", "FAIL" (wrong result, not timed), "error" (raised), "skipped",
    #              "yardstick" (timed, not checked: not the same computation)
    rel_error: float | None = None
    tolerance: float | None = None
    stats: Stats | None = None
    gbps: float | None = None
    tflops: float | None = None
    pct_ceiling: float | None = None  # % of the roofline floor: max(bytes/copy, flops/rate)
    speedup: float | None = None  # baseline median / this median
    reason: str = ""

    def as_row(self) -> dict:
        row = {"variant": self.name, "status": self.status, "rel_error": self.rel_error,
               "tolerance": self.tolerance, "gbps": self.gbps, "tflops": self.tflops,
               "pct_ceiling": self.pct_ceiling, "speedup": self.speedup, "reason": self.reason}
        if self.stats is not None:
            row.update({f"{key}_ms": value for key, value in self.stats.as_dict().items()
                        if key not in ("n", "clock")})
            row["n"], row["clock"] = self.stats.n, self.stats.clock
        return row


@dataclass
class Comparison:
    """The outcome of compare(): one VariantResult per variant, in the order given."""
    results: list[VariantResult]
    baseline: str | None
    bytes: int | None = None
    flops: int | None = None
    ceilings: dict = field(default_factory=dict)

    def __getitem__(self, name: str) -> VariantResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no variant {name!r}; variants: {[r.name for r in self.results]}")

    @property
    def failed(self) -> list[VariantResult]:
        return [r for r in self.results if r.status in ("FAIL", "error")]

    def rows(self) -> list[dict]:
        return [r.as_row() for r in self.results]

    def __str__(self) -> str:
        from .report import markdown_table

        return markdown_table(self.rows())


def _leaves(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _leaves(item)]
    if isinstance(value, Mapping):
        return [t for item in value.values() for t in _leaves(item)]
    return []


def _error_against(output, expected) -> tuple[float, float]:
    """(worst relative error over the output's tensors, tolerance of its lowest precision)."""
    outs, refs = _leaves(output), _leaves(expected)
    if len(outs) != len(refs) or not outs:
        raise ValueError(f"variant returned {len(outs)} tensor(s), the reference {len(refs)}")
    errors, tolerances = [], []
    for out, ref in zip(outs, refs, strict=True):
        if out.shape != ref.shape:
            raise ValueError(f"variant returned shape {tuple(out.shape)}, "
                             f"the reference {tuple(ref.shape)}")
        errors.append(rel_error(out, ref))
        tolerances.append(TOLERANCES.get(out.dtype, TOLERANCES[torch.float32]))
    return max(errors), max(tolerances)


def _rotated_args(args: Sequence, rotate: Sequence[int] | None = None,
                  copies_past_l2: float = 3.0) -> list[tuple]:
    """Copies of `args` whose rotated tensors (positions `rotate`; None: all) together span
    about 3x L2, so that cycling through them reads memory, not a cache the previous call
    warmed (for graph-mode timing). The other arguments are shared by every copy."""
    rotate = range(len(args)) if rotate is None else rotate
    nbytes = sum(t.numel() * t.element_size() for t in _leaves([args[i] for i in rotate]))
    if not torch.cuda.is_available() or nbytes == 0:
        return [tuple(args)]
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 * 2**20)
    # Enough copies to span 3x L2 whatever the size (small weights need hundreds); the cap
    # only bounds tiny arguments, which no number of copies pushes out of L2.
    copies = min(4096, math.ceil(copies_past_l2 * l2 / nbytes))

    def copy():
        return tuple(a.clone() if i in rotate and isinstance(a, torch.Tensor) else a
                     for i, a in enumerate(args))
    return [tuple(args)] + [copy() for _ in range(copies - 1)]


def _cycling(fn: Callable, arg_sets: list[tuple]) -> Callable[[], object]:
    if len(arg_sets) == 1:
        only = arg_sets[0]
        return lambda: fn(*only)
    position = [0]

    def call():
        args = arg_sets[position[0] % len(arg_sets)]
        position[0] += 1
        return fn(*args)
    return call


def _floor_ms(nbytes: int | None, flops: int | None, dtype: torch.dtype | None,
              ceilings: dict) -> float | None:
    """The roofline floor in ms: the larger of bytes / copy bandwidth and flops / matmul rate."""
    floors = []
    if nbytes and "copy_gbps" in ceilings:
        floors.append(nbytes / (ceilings["copy_gbps"] * 1e9) * 1e3)
    if flops and dtype is not None:
        key = "matmul_tflops_float32" if dtype == torch.float32 else "matmul_tflops_bfloat16"
        if key in ceilings:
            floors.append(flops / (ceilings[key] * 1e12) * 1e3)
    return max(floors) if floors else None


def compare(variants: Mapping[str, Callable | Unavailable], reference: Callable,
            args: Sequence = (), bytes: int | None = None, flops: int | None = None,
            baseline: str | None = None, *, graph: bool = False, flush_l2: bool = True,
            rotate: Sequence[int] | None = None,
            warmup_ms: float = 25, rep_ms: float = 100, rounds: int = 3,
            ceilings: dict | None = None, progress: Callable[[str], None] | None = None,
            yardsticks: Mapping[str, Callable] | None = None) -> Comparison:
    """Check every variant against `reference`, then time the correct ones.

    bytes / flops: ideal traffic and arithmetic of one call, for GB/s, TFLOP/s and % of the
    device ceiling. baseline: the variant speed-ups are quoted against (default: the first).
    graph: time replays of a CUDA graph of many calls (for microsecond calls); with flush_l2
    the calls then cycle through copies of `args` spanning 3x L2 (only of the arguments at
    positions `rotate` when given, e.g. a layer's weights but not the activations the
    previous kernel just wrote, which a real stack finds in L2). ceilings: as returned by
    bench.ceilings(); measured (or read from its cache) when omitted on a GPU.
    yardsticks: callables taking `args`, timed like the variants but never checked, listed
    after them with status "yardstick".
    rounds: every timed callable is measured in this many interleaved rounds (variants and
    yardsticks in turn, warmup_ms and rep_ms split between them), so a passing slowdown of
    the GPU (clocks, power) falls on all of them alike: timed one after another, the same
    cuBLAS call once read 7% slower than itself (issue 17's grid, H200, session 89).
    """
    if not variants:
        raise ValueError("compare() needs at least one variant")
    names = list(variants)
    if baseline is not None and baseline not in variants:
        raise ValueError(f"baseline {baseline!r} is not one of the variants {names}")
    yardsticks = dict(yardsticks or {})
    if set(yardsticks) & set(variants):
        raise ValueError(f"yardstick names {sorted(set(yardsticks) & set(variants))} are "
                         "also variant names")
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    if ceilings is None:
        from .roofline import ceilings as measured_ceilings

        ceilings = measured_ceilings() if torch.cuda.is_available() else {}
    expected = reference(*args)
    out_dtype = next((t.dtype for t in _leaves(expected)), None)
    arg_sets = _rotated_args(args, rotate) if graph and flush_l2 else [tuple(args)]

    to_time: list[tuple[VariantResult, Callable]] = []  # measured below, in rounds
    results = []
    for name, fn in variants.items():
        if progress is not None:
            progress(name)
        if isinstance(fn, Unavailable):
            results.append(VariantResult(name, "skipped", reason=fn.reason))
            continue
        try:
            output = fn(*args)
            out_dtype = next((t.dtype for t in _leaves(output)), out_dtype)
            err, tol = _error_against(output, expected)
        except Exception as e:  # a broken variant is reported, and the others still run
            results.append(VariantResult(name, "error", reason=f"{type(e).__name__}: {e}"))
            continue
        result = VariantResult(name, "ok" if err <= tol else "FAIL", rel_error=err,
                               tolerance=tol)
        if result.status == "ok":
            to_time.append((result, fn))
        else:
            result.reason = f"relative error {err:.2e} > tolerance {tol:.0e}"
        results.append(result)
    for name, fn in yardsticks.items():
        result = VariantResult(name, "yardstick", reason="not checked: a different "
                               "computation over the same bytes, timed the same way")
        to_time.append((result, fn))
        results.append(result)

    rounds_of = {id(result): [] for result, _ in to_time}
    for round_ in range(rounds):
        for result, fn in to_time:
            if progress is not None:
                progress(f"{result.name}, timing round {round_ + 1}/{rounds}")
            rounds_of[id(result)].append(measure(
                _cycling(fn, arg_sets), warmup_ms=warmup_ms / rounds, rep_ms=rep_ms / rounds,
                flush_l2=flush_l2 and not graph, graph=graph))
    for result, _ in to_time:
        result.stats = merged(rounds_of[id(result)])
        seconds = result.stats.median * 1e-3
        result.gbps = bytes / seconds * 1e-9 if bytes else None
        result.tflops = flops / seconds * 1e-12 if flops else None

    floor = _floor_ms(bytes, flops, out_dtype, ceilings)
    timed = {r.name: r.stats.median for r in results if r.stats is not None}
    reference_name = baseline or names[0]
    for result in results:
        if result.stats is None:
            continue
        if floor is not None:
            result.pct_ceiling = 100 * floor / result.stats.median
        if reference_name in timed:
            result.speedup = timed[reference_name] / result.stats.median
    return Comparison(results, reference_name, bytes, flops, dict(ceilings))
