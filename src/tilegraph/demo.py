"""`tilegraph demo`: the decode stack run token after token, several ways, measured in one run.

    eager         the nn.Module in PyTorch: four or five small kernels per layer
    torch-graph   the same PyTorch ops captured by hand (tg.capture), replayed per token
    tilegraph     LayerStack.fused_forward (tg.decode_stack: one kernel a layer where
                  that was measured faster, else two) in a tg.GraphRunner, one replay a token
    compile       torch.compile(mode="reduce-overhead") of the module (behind --compile)

Each token's hidden state is copied into the variant's input, the step runs, and its output is
copied out, so every variant does the same per-token work (tilegraph's runner makes both
copies nodes of its graph: runner(x, out=...)). Every variant's outputs for all tokens are
checked against a float64 reference before it is timed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ._runtime import INTERPRET, synchronize
from .bench import Unavailable, measure, report
from .graph import GraphRunner, capture
from .models import LayerStack, LayerStackConfig
from .testing import max_token_error, stack_tolerance

RUNNER_SIZES = (1, 2, 4, 8)
VARIANTS = ("eager", "torch-graph", "tilegraph", "compile")


@dataclass
class Variant:
    name: str
    step: Callable[[torch.Tensor], torch.Tensor]  # one token: (batch, d) -> (batch, d)
    build_seconds: float  # JIT, capture or compile before the first timed token
    # one token into a tensor of the caller's, where the variant can write it there itself
    step_into: Callable[[torch.Tensor, torch.Tensor], object] | None = None


def _timed_build(name: str, build: Callable[[], Callable]) -> Variant:
    synchronize()
    start = time.perf_counter()
    step = build()
    synchronize()
    return Variant(name, step, time.perf_counter() - start)


def build_variant(name: str, stack: LayerStack, example: torch.Tensor,
                  runner_sizes: Sequence[int] | None = None) -> Variant | Unavailable:
    """One decode step of `stack` the way `name` runs it, ready to call (warmed up)."""
    if name == "eager":
        return Variant("eager", stack, 0.0)
    if name == "torch-graph":
        def build_graph():
            static_input = example.clone()
            graph = capture(stack, static_input)

            def step(x):
                static_input.copy_(x)
                return graph.replay()
            return step
        return _timed_build(name, build_graph)
    if name == "tilegraph":
        sizes = runner_sizes or (example.shape[0],)
        variant = _timed_build(name, lambda: GraphRunner(stack.fused_forward, (example,),
                                                         sizes=sizes))
        runner = variant.step
        variant.step_into = lambda x, out: runner(x, out=out)
        return variant
    if name == "compile":
        if INTERPRET:
            return Unavailable("needs CUDA (reduce-overhead mode is CUDA graphs)")

        def build_compiled():
            torch.compiler.reset()
            compiled = torch.compile(stack, mode="reduce-overhead", fullgraph=True)
            for _ in range(3):  # compile, then record its graphs
                compiled(example)
            return compiled
        return _timed_build(name, build_compiled)
    raise ValueError(f"unknown variant {name!r}")


def decode(variant: Variant, inputs: torch.Tensor, outputs: torch.Tensor) -> None:
    """Run every token of inputs (tokens, batch, d) through the variant, into outputs."""
    if variant.step_into is not None:
        for token in range(inputs.shape[0]):
            variant.step_into(inputs[token], outputs[token])
        return
    for token in range(inputs.shape[0]):
        outputs[token].copy_(variant.step(inputs[token]))


@dataclass
class DecodeResult:
    variant: str
    status: str  # ok, FAIL, skipped
    rel_error: float | None = None
    ms_per_token: float | None = None
    build_seconds: float | None = None
    reason: str = ""


def run_decode(variant: Variant | Unavailable, name: str, inputs: torch.Tensor,
               expected: torch.Tensor, tolerance: float, rep_ms: float = 300,
               timed: bool | None = None) -> DecodeResult:
    """Check the variant on every token, then time whole decode runs (median per token).

    timed defaults to "on a GPU": interpreter times are not worth the minutes they take."""
    if isinstance(variant, Unavailable):
        return DecodeResult(name, "skipped", reason=variant.reason)
    outputs = torch.full_like(inputs, math.nan)  # poisoned: an unwritten token fails
    decode(variant, inputs, outputs)
    error = max_token_error(outputs, expected)
    result = DecodeResult(name, "ok" if error <= tolerance else "FAIL", error,
                          build_seconds=variant.build_seconds)
    if result.status != "ok":
        result.reason = f"relative error {error:.2e} > tolerance {tolerance:.0e}"
        return result
    if not (timed if timed is not None else not INTERPRET):
        return result
    stats = measure(lambda: decode(variant, inputs, outputs), warmup_ms=rep_ms / 10,
                    rep_ms=rep_ms, flush_l2=False)
    result.ms_per_token = stats.median / inputs.shape[0]
    return result


def summarize(results: list[DecodeResult], weight_bytes: int, batch: int,
              copy_gbps: float | None) -> list[dict]:
    """Table rows: throughput, % of the bandwidth floor, speed-ups against eager and the
    hand-made graph."""
    times = {r.variant: r.ms_per_token for r in results if r.ms_per_token}
    floor_ms = weight_bytes / (copy_gbps * 1e9) * 1e3 if copy_gbps else None
    rows = []
    for r in results:
        row = {"variant": r.variant, "status": r.status, "ms_per_token": r.ms_per_token,
               "tokens_per_s": None, "gbps": None, "pct_floor": None, "vs_eager": None,
               "vs_torch_graph": None, "rel_error": r.rel_error,
               "build_seconds": r.build_seconds, "reason": r.reason}
        if r.ms_per_token:
            row["tokens_per_s"] = batch * 1e3 / r.ms_per_token
            row["gbps"] = weight_bytes / (r.ms_per_token * 1e-3) * 1e-9
            if floor_ms:
                row["pct_floor"] = 100 * floor_ms / r.ms_per_token
            for key, other in (("vs_eager", "eager"), ("vs_torch_graph", "torch-graph")):
                if other in times:
                    row[key] = times[other] / r.ms_per_token
        rows.append(row)
    return rows


def expected_outputs(stack: LayerStack, inputs: torch.Tensor) -> torch.Tensor:
    """float64 outputs for (tokens, batch, d) inputs: tokens are independent, so at once."""
    return stack.reference(inputs.reshape(-1, inputs.shape[-1])).reshape(inputs.shape)


def layer_counts(layers: int) -> list[int]:
    return sorted({n for n in (1, 2, 4, 8, 16) if n < layers} | {layers})


def sweep_layers(stack: LayerStack, tokens: int, batch: int,
                 progress: Callable[[str], None] = lambda what: None) -> list[dict]:
    """ms/token of eager, torch-graph and tilegraph for the first 1, 2, 4, ... layers."""
    rows = []
    for n_layers in layer_counts(len(stack.layers)):
        sub = stack.first(n_layers)
        inputs = sub.token_inputs(tokens, batch)
        expected = expected_outputs(sub, inputs)
        results = []
        for name in ("eager", "torch-graph", "tilegraph"):
            progress(f"layers sweep: {n_layers} layers, {name}")
            variant = build_variant(name, sub, inputs[0])
            results.append(run_decode(variant, name, inputs, expected,
                                      stack_tolerance(inputs.dtype, n_layers), rep_ms=100))
        for row in summarize(results, sub.config.weight_bytes, batch, None):
            rows.append({"layers": n_layers, **row})
    return rows


def sweep_batch(stack: LayerStack, tokens: int, batches: Sequence[int] = range(1, 9),
                progress: Callable[[str], None] = lambda what: None) -> list[dict]:
    """One tilegraph runner with sizes (1, 2, 4, 8); per batch size its cost per decode step
    and per sequence-token, padded sizes (3, 5, 6, 7) included."""
    example = stack.token_inputs(1, max(RUNNER_SIZES))[0]
    variant = build_variant("tilegraph", stack, example, runner_sizes=RUNNER_SIZES)
    rows = []
    for batch in batches:
        progress(f"batch sweep: batch {batch}")
        inputs = stack.token_inputs(tokens, batch, seed=batch)
        result = run_decode(variant, "tilegraph", inputs, expected_outputs(stack, inputs),
                            stack_tolerance(inputs.dtype, len(stack.layers)), rep_ms=100)
        graph_size = next(s for s in RUNNER_SIZES if s >= batch)
        ms = result.ms_per_token
        rows.append({"batch": batch, "graph_size": graph_size, "status": result.status,
                     "ms_per_step": ms, "us_per_sequence_token": ms * 1e3 / batch if ms else None,
                     "gbps": stack.config.weight_bytes / (ms * 1e-3) * 1e-9 if ms else None,
                     "rel_error": result.rel_error, "reason": result.reason})
    return rows


def compare_variants(stack: LayerStack, names: Sequence[str], tokens: int, batch: int,
                     progress: Callable[[str], None] = lambda what: None,
                     timed: bool | None = None) -> list[DecodeResult]:
    """The demo's main table: each named variant built, checked and timed on the same tokens."""
    inputs = stack.token_inputs(tokens, batch)
    expected = expected_outputs(stack, inputs)
    variants = {}
    for name in names:
        progress(f"building {name}")
        runner_sizes = RUNNER_SIZES if batch <= max(RUNNER_SIZES) else None
        variants[name] = build_variant(name, stack, inputs[0], runner_sizes=runner_sizes
                                       if name.startswith("tilegraph") else None)
    # Timed only once all are built: building torch.compile's graphs makes every graph node
    # of the process cost more from then on (0.97 -> 1.15 us on an H100, notes/graphs.md),
    # and the variants built before it would otherwise be timed in the cheaper state.
    results = []
    for name, variant in variants.items():
        progress(f"decoding {tokens} tokens: {name}")
        results.append(run_decode(variant, name, inputs, expected,
                                  stack_tolerance(inputs.dtype, len(stack.layers)), timed=timed))
    return results


def batch_plot_rows(batch_rows: list[dict]) -> list[dict]:
    """The batch sweep as two series in microseconds: per decode step, per sequence-token."""
    return [{"batch": r["batch"], "what": what, "us": value}
            for r in batch_rows if r["ms_per_step"] is not None
            for what, value in (("us per step", r["ms_per_step"] * 1e3),
                                ("us per sequence-token", r["us_per_sequence_token"]))]


def planned_steps(names: Sequence[str], layers: int, sweeps: bool) -> int:
    """Progress steps of a demo run: one a variant, three a layer count, eight batch sizes."""
    return len(names) + (3 * len(layer_counts(layers)) + 8 if sweeps else 0)


def floor_ms(config: LayerStackConfig, copy_gbps: float) -> float:
    """The bandwidth floor of one token: weight bytes / measured copy bandwidth."""
    return config.weight_bytes / (copy_gbps * 1e9) * 1e3


def save(out: Path, config: LayerStackConfig, copy_gbps: float | None, rows: list[dict],
         layer_rows: list[dict], batch_rows: list[dict]) -> list[Path]:
    """JSON, CSV and Markdown of each table (with the environment), PNGs of the sweeps."""
    extra = {"config": {**config.__dict__, "dtype": str(config.dtype)}, "copy_gbps": copy_gbps}
    written = report.save(rows, out, "demo", title="tilegraph demo", **extra)
    if not (layer_rows or batch_rows):
        return written
    written += report.save(layer_rows, out, "demo-layers",
                           title="decode: ms per token by number of layers", **extra)
    written += report.save(batch_rows, out, "demo-batch",
                           title="decode: batch sizes through one runner", **extra)
    for path in (report.plot(layer_rows, out / "demo-layers.png", x="layers",
                             y="ms_per_token", title="decode ms/token vs layers",
                             ylabel="ms per token", logx=False),
                 report.plot(batch_plot_rows(batch_rows), out / "demo-batch.png", x="batch",
                             y="us", series="what", title="one runner, sizes 1, 2, 4, 8",
                             logx=False)):
        if path is not None:
            written.append(path)
    return written


def profile_step(variant: str | None) -> tuple[str, Callable[[], object]]:
    """(label, one decode step of the default preset the way `variant` runs it), to profile."""
    from .models import PRESETS

    config = PRESETS["tiny" if INTERPRET else "seed"]
    stack = LayerStack(config, device="cpu" if INTERPRET else "cuda")
    x = stack.token_inputs(1, config.batch)[0]
    name = variant or "tilegraph"
    if name not in VARIANTS:
        raise ValueError(f"the demo has no variant {name!r}; choose from {VARIANTS}")
    built = build_variant(name, stack, x)
    if isinstance(built, Unavailable):
        raise ValueError(f"{name} cannot run here: {built.reason}")
    return f"{built.name} decode step, d={config.d}, {config.layers} layers", lambda: built.step(x)
