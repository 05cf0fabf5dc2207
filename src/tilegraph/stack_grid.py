"""`tilegraph bench stack-grid`: the decode stack over widths, batches and dtypes, tilegraph's
GraphRunner against the same PyTorch ops captured by hand.

Every point builds a LayerStack of width d with enough layers that its weights span three L2
caches (so each replay streams them from memory and % of the floor is honest), checks both
variants on every token against float64, then times whole decode runs (demo.run_decode):
    torch-graph  the nn.Module's PyTorch ops captured in one CUDA graph (tg.capture)
    tilegraph    LayerStack.fused_forward in a tg.GraphRunner, defaults only
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ._runtime import INTERPRET
from .demo import build_variant, expected_outputs, floor_ms, run_decode
from .kernels.autotune import L2_SPAN_BYTES
from .models import LayerStack, LayerStackConfig
from .testing import stack_tolerance

GPU_WIDTHS = (512, 1024, 2048, 4096, 8192)
CPU_WIDTHS = (48, 96)  # through the interpreter: small
BATCHES = (1, 2, 4, 8, 16)
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
# At least as deep as the shallowest stack (d=4096, 8 layers) and real decoders
# (16-80 layers): with 2-3 layers the token's fixed costs (input copy, graph launch, a first
# kernel that cannot prefetch) would be a third of a d=4096 point.
MIN_LAYERS, MAX_LAYERS = 8, 64
CPU_LAYERS = 2  # through the interpreter: seconds a layer
TOKENS = 4  # a decode run: enough to check and to time, the timing loop repeats it
BIG_LAYER_BYTES = 8 * 2**20  # the "a layer's weights >= 8 MB" points


def default_widths() -> tuple[int, ...]:
    return CPU_WIDTHS if INTERPRET else GPU_WIDTHS


def layers_for(d: int, dtype: torch.dtype) -> int:
    """Layers whose weights together span L2_SPAN_BYTES, within MIN_LAYERS..MAX_LAYERS."""
    if INTERPRET:
        return CPU_LAYERS
    layer_bytes = 2 * d * d * torch.finfo(dtype).bits // 8
    return max(MIN_LAYERS, min(MAX_LAYERS, math.ceil(L2_SPAN_BYTES / layer_bytes)))


def _point(stack: LayerStack, batch: int, copy_gbps: float | None) -> dict:
    config = stack.config.with_(batch=batch)
    d, dtype = config.d, config.dtype
    inputs = stack.token_inputs(TOKENS, batch)
    expected = expected_outputs(stack, inputs)
    tolerance = stack_tolerance(dtype, config.layers)
    layer_bytes = config.weight_bytes / config.layers
    row = {"dtype": str(dtype).removeprefix("torch."), "d": d, "batch": batch,
           "layers": config.layers, "layer_mb": layer_bytes / 2**20, "status": "ok",
           "reason": ""}
    floor = floor_ms(config, copy_gbps) if copy_gbps else None
    times = {}
    for name, key in (("torch-graph", "hand"), ("tilegraph", "tilegraph")):
        result = run_decode(build_variant(name, stack, inputs[0]), name, inputs, expected,
                            tolerance, rep_ms=100)
        times[key] = result.ms_per_token
        row[f"{key}_us"] = result.ms_per_token * 1e3 if result.ms_per_token else None
        row[f"{key}_pct_floor"] = (100 * floor / result.ms_per_token
                                   if floor and result.ms_per_token else None)
        row[f"{key}_rel_error"] = result.rel_error
        if result.status != "ok" and row["status"] == "ok":
            row["status"], row["reason"] = result.status, f"{name}: {result.reason}"
    row["speedup"] = (times["hand"] / times["tilegraph"]
                      if times["hand"] and times["tilegraph"] else None)
    row["target"] = _target(row, layer_bytes)
    return row


def _target(row: dict, layer_bytes: float) -> str:
    """The issue's bar at this point: >= 1.3x the hand graph or >= 85% of the floor, and
    where a layer's weights are >= 8 MB, >= 80% of the floor at batch 1 and >= 65% at 8."""
    speedup, pct = row["speedup"], row["tilegraph_pct_floor"]
    if speedup is None or pct is None:
        return ""
    met = speedup >= 1.3 or pct >= 85
    if layer_bytes >= BIG_LAYER_BYTES and row["batch"] in (1, 8):
        met = met and pct >= (80 if row["batch"] == 1 else 65)
    return "met" if met else "missed"


def run(dtypes: Sequence[torch.dtype] = DTYPES, batches: Sequence[int] = BATCHES,
        widths: Sequence[int] | None = None, copy_gbps: float | None = None,
        progress: Callable[[str], None] | None = None,
        on_row: Callable[[dict], None] | None = None) -> list[dict]:
    """One row per (dtype, d, batch); `progress(what)` is called before each point,
    `on_row(row)` after it."""
    device = "cpu" if INTERPRET else "cuda"
    results = []
    for dtype in dtypes:
        for d in widths or default_widths():
            config = LayerStackConfig(d=d, layers=layers_for(d, dtype), dtype=dtype,
                                      tokens=TOKENS)
            stack = LayerStack(config, device=device)
            for batch in batches:
                if progress is not None:
                    progress(f"stack grid {str(dtype).removeprefix('torch.')} d={d}, "
                             f"batch {batch}")
                results.append(_point(stack, batch, copy_gbps))
                if on_row is not None:
                    on_row(results[-1])
            del stack
            if device == "cuda":
                torch.cuda.empty_cache()
    return results


def summary(results: Sequence[dict]) -> list[dict]:
    """Per dtype: geometric-mean speed-up over the hand graph, the lowest, points missed."""
    rows = []
    for dtype in dict.fromkeys(r["dtype"] for r in results):
        mine = [r for r in results if r["dtype"] == dtype]
        speedups = [r["speedup"] for r in mine if r["speedup"]]
        rows.append({"dtype": dtype, "points": len(mine),
                     "geomean_speedup": (math.exp(sum(map(math.log, speedups)) / len(speedups))
                                         if speedups else None),
                     "min_speedup": min(speedups, default=None),
                     "missed": sum(1 for r in mine if r["target"] == "missed")})
    return rows


def save(results: Sequence[dict], summary_rows: Sequence[dict], out: Path, formats,
         copy_gbps: float | None, stopped: str | None = None) -> list[Path]:
    """stack-grid.{json,csv,md}, the JSON with the summary and the copy ceiling."""
    from .bench import report

    return report.save(results, out, "stack-grid", formats,
                       title="stack grid: LayerStack through a GraphRunner against the hand "
                             "graph", stopped=stopped, copy_gbps=copy_gbps,
                       summary=list(summary_rows))
