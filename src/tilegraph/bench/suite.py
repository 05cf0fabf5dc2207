"""The kernel suite behind `tilegraph bench`: what a case is, and running one at several sizes.
Each op's cases live in bench/cases/<op>.py: the tilegraph kernel beside the approaches a user
would otherwise pick, all checked against a float64 reference first.

A kernel's *size* is one integer, its meaning given in KERNELS[name].size_means. Bytes count the
ideal traffic (each input read once, each output written once); flops count multiply-adds x 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .._runtime import INTERPRET
from .compare import Unavailable

ROWS_GPU, ROWS_CPU = 8192, 7  # rows of the softmax / rms_norm inputs (8192: PERF.md sizes)


@dataclass
class Case:
    """One kernel at one size and dtype: what bench.compare() needs."""
    shape: str
    variants: dict
    reference: Callable
    args: tuple
    baseline: str
    bytes: int | None = None
    flops: int | None = None
    graph: bool = False  # time graph replays over inputs rotated past L2 (notes/kernels.md)
    rotate: tuple[int, ...] | None = None  # which args those are (None: all)
    yardsticks: dict = field(default_factory=dict)  # timed beside, not checked


@dataclass(frozen=True)
class KernelBench:
    name: str
    size_means: str
    dtype: torch.dtype
    gpu_sizes: tuple[int, ...]
    cpu_sizes: tuple[int, ...]
    build: Callable[[int, torch.dtype, str], Case]
    throughput: str = "gbps"  # what its plot shows: "gbps" or "tflops"

    def default_sizes(self) -> tuple[int, ...]:
        return self.cpu_sizes if INTERPRET else self.gpu_sizes


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def compiled(fn: Callable) -> Callable | Unavailable:
    if INTERPRET:
        return Unavailable("CPU machine: this suite compares GPU code")
    torch.compiler.reset()  # each case compiles afresh; no recompile limit across sizes
    return torch.compile(fn, dynamic=False)


def plain_pass(x: torch.Tensor) -> dict:
    """The yardstick of a memory-bound case: the same bytes read and written by the simplest
    elementwise kernel, x.neg() into another buffer. Not copy_(): captured in a graph that is
    a memcpy node, which moved 512 MiB at 81% of the copy ceiling on an H100 where kernels
    moved it at 100%.

    Memory-bound cases are timed as graph replays cycling through input copies that span 3x
    L2 (QuACK's method): one call after an L2 flush charges a 47 us kernel ~5% for the event,
    the launch and the flush's dirty lines, a plain copy included (notes/kernels.md)."""
    y = torch.empty_like(x)
    return {"plain pass (same bytes)": lambda x, *rest: torch.neg(x, out=y)}




def row_count(device: str) -> int:
    """Rows of the row-kernel cases: PERF.md's 8192 on a GPU, a few through the interpreter."""
    return ROWS_GPU if device == "cuda" else ROWS_CPU


def select_variants(case: Case, wanted: list[str] | None) -> dict:
    """The case's variants, only those named in `wanted` (case-insensitive) when given."""
    return _named(case.variants, wanted)


def _named(fns: dict, wanted: list[str] | None) -> dict:
    if not wanted:
        return fns
    keep = {w.lower() for w in wanted}
    return {name: fn for name, fn in fns.items() if name.lower() in keep}


def run_kernel(bench: KernelBench, sizes: tuple[int, ...], dtype: torch.dtype,
               variants: list[str] | None = None, device: str | None = None,
               ceilings: dict | None = None,
               progress: Callable[[str], None] | None = None) -> list[dict]:
    """compare() at every size; one flat row per variant and size (kernel, size, shape, dtype
    first). Sizes with no selected variant are left out."""
    from .compare import compare

    device = device or ("cpu" if INTERPRET else "cuda")
    # interpreter: seconds a call, one round
    short = {"warmup_ms": 2, "rep_ms": 10, "rounds": 1} if INTERPRET else {}
    rows = []
    for size in sizes:
        case = bench.build(size, dtype, device)
        chosen = select_variants(case, variants)
        if not chosen:
            continue
        baseline = case.baseline if case.baseline in chosen else None
        result = compare(chosen, case.reference, case.args, bytes=case.bytes, flops=case.flops,
                         baseline=baseline, graph=case.graph, rotate=case.rotate,
                         ceilings=ceilings, yardsticks=_named(case.yardsticks, variants),
                         progress=(lambda v, s=size: progress(f"{bench.name} {s}: {v}"))
                         if progress else None, **short)
        for row in result.rows():
            rows.append({"kernel": bench.name, "size": size, "shape": case.shape,
                         "dtype": str(dtype).removeprefix("torch."), "baseline": result.baseline,
                         **row})
    return rows


def profile_step(bench: KernelBench, size: int | None, dtype: torch.dtype | None,
                 variant: str | None) -> tuple[str, Callable[[], object]]:
    """(label, one variant of a case at one size) to profile; the first tilegraph variant and
    the largest default size unless given."""
    dtype = dtype or bench.dtype
    case = bench.build(size or bench.default_sizes()[-1], dtype, "cpu" if INTERPRET else "cuda")
    names = {name.lower(): name for name in case.variants}
    wanted = variant or next(n for n in case.variants if n.startswith("tilegraph"))
    if wanted.lower() not in names:
        raise ValueError(f"{bench.name} has no variant {wanted!r}; "
                         f"choose from {list(case.variants)}")
    fn = case.variants[names[wanted.lower()]]
    if isinstance(fn, Unavailable):
        raise ValueError(f"{wanted} cannot run here: {fn.reason}")
    label = f"{wanted} on {bench.name} {case.shape} ({str(dtype).removeprefix('torch.')})"
    return label, lambda: fn(*case.args)


def save(rows: list[dict], benches: list[KernelBench], out, formats, columns, ceilings: dict,
         plot: bool) -> list:
    """The rows as JSON / CSV / Markdown (with the environment and the autotuners' picks),
    and a PNG a kernel with `plot`."""
    from ..kernels.autotune import choices
    from . import report

    written = report.save(rows, out, "bench", formats, title="tilegraph bench",
                          columns=columns, ceilings=ceilings, autotune=choices())
    for bench in benches if plot else ():
        path = report.plot([r for r in rows if r["kernel"] == bench.name],
                           out / f"bench-{bench.name}.png", y=bench.throughput,
                           title=bench.name, xlabel=f"size: {bench.size_means}",
                           ylabel="TFLOP/s" if bench.throughput == "tflops" else "GB/s")
        if path is not None:
            written.append(path)
    return written
