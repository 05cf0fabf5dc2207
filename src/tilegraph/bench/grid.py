"""The decode grid: one projection y = x @ W.T at decode row counts, over the (N, K) shapes of
real decoders, tg.linear against F.linear (cuBLAS), each point checked against a float64
reference and then timed as graph replays over weights rotated past L2 (how a stack streams
them). Each point is also timed as a decoder layer uses it (fused_part): after the layer's
RMSNorm, or before its residual add; tg.linear with that part fused, against PyTorch's
rms_norm then F.linear, or F.linear then the add. Rows: speed-ups and % of the bandwidth
floor, saved as JSON / CSV / Markdown and heatmaps a dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.kernels.decode_plan import plain_plan
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import randn

from .._runtime import INTERPRET
from .compare import compare

# (N, K): square projections, an MLP's up and down (2048 <-> 5632, 4096 <-> 14336), a
# grouped-query k/v projection (256 x 2048) and an LM head (32000 x 2048).
GPU_SHAPES = ((2048, 2048), (4096, 4096), (8192, 8192), (5632, 2048), (2048, 5632),
              (256, 2048), (14336, 4096), (4096, 14336), (32000, 2048))
CPU_SHAPES = ((96, 64), (40, 130))  # through the interpreter: small, awkward
ROWS = (1, 2, 4, 8, 16)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
VARIANTS = ("F.linear", "tilegraph", "tilegraph, no PDL")
# The projection with its part of the layer: PyTorch as a model writes it, and tg.linear with
# the norm in its prologue or the add in its epilogue.
FUSED_VARIANTS = ("PyTorch, with the part", "tilegraph, the part fused")
KEYS = {"F.linear": "cublas", "tilegraph": "tilegraph", "tilegraph, no PDL": "nopdl",
        "PyTorch, with the part": "torch_fused", "tilegraph, the part fused": "fused"}
NORM_EPS = 1e-6
# Speed-ups the summary averages: (field, what it is over).
SPEEDUPS = {"tilegraph": "F.linear", "nopdl": "F.linear",
            "fused": "PyTorch with the same part", "fused_over_linear": "F.linear alone"}
# Projections that read the hidden state although they narrow it: grouped-query k / v.
NARROW_READS = {(256, 2048)}
# Issue 17's bandwidth targets: 16-bit weights of at least FLOOR_TARGET_MIB read at this %
# of copy bandwidth or more, by range of row counts (tg.linear's default, plain): 1-2 rows
# and 8-16 rows, the rows between included (12 rows is in the second range).
FLOOR_TARGET_MIB = 8
FLOOR_TARGET_PCT = {(1, 2): 85, (8, 16): 70}


def fused_part(n: int, k: int) -> str:
    """Where a decoder layer puts an (N, K) projection: after its RMSNorm ("norm": it reads
    the hidden state, as q|k|v, gate/up and the LM head do) or before its residual add
    ("residual": it narrows back to the hidden state, as the output and down projections
    do). A square one could be either; it takes the norm, the part that costs tg.linear a
    kernel of its own at 2-16 rows (kernels/_dot_rows.py)."""
    return "norm" if n >= k or (n, k) in NARROW_READS else "residual"


def floor_target(weight_bytes: int, rows: int, dtype: torch.dtype) -> float | None:
    """The % of copy bandwidth issue 17 asks of a plain projection, or None where it asks
    none (fp32, weights under FLOOR_TARGET_MIB, row counts outside its ranges)."""
    if dtype == torch.float32 or weight_bytes < FLOOR_TARGET_MIB * 2**20:
        return None
    return next((pct for (low, high), pct in FLOOR_TARGET_PCT.items() if low <= rows <= high),
                None)


def default_shapes() -> tuple[tuple[int, int], ...]:
    return CPU_SHAPES if INTERPRET else GPU_SHAPES


def _torch_with_part(part: str) -> Callable:
    if part == "norm":
        return lambda x, w, g: F.linear(F.rms_norm(x, g.shape, g, NORM_EPS), w)
    return lambda x, w, r: r + F.linear(x, w)


def _point(n: int, k: int, rows: int, dtype: torch.dtype, device: str, ceilings: dict) -> dict:
    x = randn(rows, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    part = fused_part(n, k)
    # the norm's weights, or the residual the projection's output is added to
    extra = randn(*((k,) if part == "norm" else (rows, n)), dtype=dtype, device=device)
    out = torch.empty(rows, n, dtype=dtype, device=device)
    size = x.element_size()
    # the interpreter takes seconds a call
    timing = {"graph": True, "rotate": (1,), "ceilings": ceilings,
              **({"warmup_ms": 2, "rep_ms": 10, "rounds": 1} if INTERPRET else {})}
    plain = compare({
        "F.linear": F.linear,
        "tilegraph": lambda x, w: tg.linear(x, w, out=out),
        "tilegraph, no PDL": lambda x, w: tg.linear(x, w, out=out, prefetch_weight=False),
    }, lambda x, w: linear_ref(x.double(), w.double()), (x, w),
        bytes=(n * k + rows * k + rows * n) * size, flops=2 * rows * n * k, **timing)
    argument = "norm_weight" if part == "norm" else "residual"
    fused = compare({
        "PyTorch, with the part": _torch_with_part(part),
        "tilegraph, the part fused": lambda x, w, e: tg.linear(
            x, w, norm_eps=NORM_EPS, out=out, **{argument: e}),
    }, lambda x, w, e: linear_ref(x.double(), w.double(), norm_eps=NORM_EPS,
                                  **{argument: e.double()}),
        (x, w, extra), bytes=(n * k + rows * k + rows * n + extra.numel()) * size,
        flops=2 * rows * n * k, **timing)
    row = {"dtype": str(dtype).removeprefix("torch."), "n": n, "k": k, "rows": rows,
           "weight_mb": n * k * size / 2**20, "fused_part": part,
           # what tg.linear's plain call ran (chosen, and on a GPU timed, on its first call):
           # "cublas" where it fell back to cuBLAS, beside which it cannot be faster
           "kernel": plain_plan(x, w, None, out).kind,
           "floor_target_pct": floor_target(n * k * size, rows, dtype), "status": "ok",
           "reason": ""}
    for result, names in ((plain, VARIANTS), (fused, FUSED_VARIANTS)):
        for name in names:
            r = result[name]
            key = KEYS[name]
            row[f"{key}_us"] = r.stats.median * 1e3 if r.stats is not None else None
            row[f"{key}_pct_floor"] = r.pct_ceiling
            if r.status not in ("ok", "skipped") and row["status"] == "ok":
                row["status"], row["reason"] = r.status, f"{name}: {r.reason}"
    for key, mine, over in (("tilegraph", "tilegraph", "cublas"), ("nopdl", "nopdl", "cublas"),
                            ("fused", "fused", "torch_fused"),
                            ("fused_over_linear", "fused", "cublas")):
        mine, over = row[f"{mine}_us"], row[f"{over}_us"]
        row[f"{key}_speedup"] = over / mine if mine and over else None
    return row


def run(dtypes: Sequence[torch.dtype] = DTYPES, rows: Sequence[int] = ROWS,
        shapes: Sequence[tuple[int, int]] | None = None, ceilings: dict | None = None,
        progress: Callable[[str], None] | None = None,
        on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (dtype, shape, row count); `progress(what)` is called before each point,
    `on_row(row)` after it."""
    device = "cpu" if INTERPRET else "cuda"
    if ceilings is None:
        from .roofline import ceilings as measured

        ceilings = measured() if torch.cuda.is_available() else {}
    results = []
    for dtype in dtypes:
        for n, k in shapes or default_shapes():
            for m in rows:
                what = f"decode grid {str(dtype).removeprefix('torch.')} {n}x{k}, {m} rows"
                if progress is not None:
                    progress(what)
                results.append(_point(n, k, m, dtype, device, ceilings))
                if on_row is not None:
                    on_row(results[-1])
    return results


def geometric_mean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(results: Sequence[dict]) -> list[dict]:
    """Per dtype: the geometric mean of each speed-up in SPEEDUPS, how many points lose (and
    of tg.linear's, how many ran cuBLAS itself: the same kernel, within the timing's noise),
    and of the points with a floor target (floor_target) how many tg.linear's default
    misses."""
    rows = []
    for dtype in dict.fromkeys(r["dtype"] for r in results):
        mine = [r for r in results if r["dtype"] == dtype]
        row = {"dtype": dtype, "points": len(mine)}
        for key in SPEEDUPS:
            speedups = [r.get(f"{key}_speedup") for r in mine]
            row[f"{key}_geomean"] = geometric_mean(speedups)
            row[f"{key}_slower"] = sum(1 for s in speedups if s is not None and s < 1)
        row["tilegraph_slower_on_cublas"] = sum(
            1 for r in mine if r.get("kernel") == "cublas"
            and r.get("tilegraph_speedup") is not None and r["tilegraph_speedup"] < 1)
        targeted = [r for r in mine if r.get("floor_target_pct")]
        row["floor_targets"] = len(targeted)
        row["floor_targets_missed"] = sum(
            1 for r in targeted
            if r.get("tilegraph_pct_floor") is None
            or r["tilegraph_pct_floor"] < r["floor_target_pct"])
        rows.append(row)
    return rows


def heatmap(results: Sequence[dict], dtype: str, path: Path, key: str = "tilegraph_speedup",
            env: dict | None = None) -> Path | None:
    """A speed-up (`key`, over what SPEEDUPS says) by shape (rows of the image) and row count
    (columns), one dtype; None (nothing written) if no point of that dtype was timed."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on servers
    import matplotlib.pyplot as plt

    from .environment import environment

    mine = [r for r in results if r["dtype"] == dtype and r.get(key)]
    if not mine:
        return None
    shapes = list(dict.fromkeys((r["n"], r["k"]) for r in mine))
    row_counts = sorted({r["rows"] for r in mine})
    grid = [[math.nan] * len(row_counts) for _ in shapes]
    for r in mine:
        grid[shapes.index((r["n"], r["k"]))][row_counts.index(r["rows"])] = r[key]
    fig, ax = plt.subplots(figsize=(1.2 * len(row_counts) + 3, 0.45 * len(shapes) + 2))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=0.5, vmax=1.5, aspect="auto")
    for i, line in enumerate(grid):
        for j, value in enumerate(line):
            if not math.isnan(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks(range(len(row_counts)), [str(m) for m in row_counts])
    ax.set_yticks(range(len(shapes)), [f"{n} x {k}" for n, k in shapes])
    ax.set_xlabel("rows")
    ax.set_ylabel("N x K")
    env = env or environment()
    over = SPEEDUPS[key.removesuffix("_speedup")]
    ax.set_title(f"{key.replace('_', ' ')} over {over}, {dtype}\n{env['device']}, "
                 f"torch {env['torch']}, triton {env['triton']}", fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.05)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def save(results: Sequence[dict], summary_rows: Sequence[dict], out: Path, formats,
         ceilings: dict, stopped: str | None = None) -> list[Path]:
    """decode-grid.{json,csv,md} (the JSON with the summary and ceilings) and three heatmaps a
    dtype: tg.linear's default (PDL where safe), with PDL off, and with norm and residual
    fused against PyTorch's three ops."""
    from . import report

    written = report.save(results, out, "decode-grid", formats,
                          title="decode grid: tg.linear against F.linear", stopped=stopped,
                          ceilings=ceilings, summary=list(summary_rows))
    for dtype in dict.fromkeys(r["dtype"] for r in results):
        for variant in ("tilegraph", "nopdl", "fused"):
            path = heatmap(results, dtype, Path(out) / f"decode-grid-{dtype}-{variant}.png",
                           key=f"{variant}_speedup")
            if path is not None:
                written.append(path)
    return written
