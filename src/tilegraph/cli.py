"""The `tilegraph` command: info, check, bench, profile, demo. Parsing and printing only; the
work lives in check.py, bench/, demo.py.

    tilegraph info                      device, versions, measured ceilings
    tilegraph check                     every kernel against its float64 reference
    tilegraph bench gelu softmax --out out/bench --plot
    tilegraph profile rms_norm --trace out/rms_norm.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from . import __version__, tables
from ._runtime import INTERPRET, device_name
from .errors import CollectiveError

console = Console()
# rich draws its bars and spinners only on a terminal: piped into a log (CI, `> file`), a
# build or sweep of minutes would say nothing, so there each new message is also a line here
# (stderr: stdout keeps the tables and the generated text).
narration = Console(stderr=True, highlight=False)

GRID = "decode-grid"  # `tilegraph bench decode-grid`: tg.linear against cuBLAS over a grid
STACK_GRID = "stack-grid"  # `tilegraph bench stack-grid`: the decode stack against a hand graph
ATTENTION_GRID = "attention-grid"  # tg.decode_attention against SDPA on the same cache
TRAIN = "train"  # training steps: eager, hand graph, torch.compile, tilegraph, tg.TrainStep
GRIDS = (GRID, STACK_GRID, ATTENTION_GRID, TRAIN)  # each runs alone, not the kernel suite
DTYPES = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16,
          "float16": torch.float16, "bf16": torch.bfloat16, "bfloat16": torch.bfloat16}


def cmd_info(args: argparse.Namespace) -> int:
    from .bench.environment import describe

    shown = describe()
    if torch.cuda.is_available():
        from .bench import ceilings

        with _status("measuring this device's ceilings (cached afterwards)"):
            ceil = ceilings(refresh=args.refresh)
        shown["copy bandwidth"] = f"{ceil['copy_gbps']:.0f} GB/s (read + write, measured)"
        shown["bf16 matmul"] = f"{ceil['matmul_tflops_bfloat16']:.0f} TFLOP/s (cuBLAS)"
        shown["fp32 matmul"] = f"{ceil['matmul_tflops_float32']:.1f} TFLOP/s (cuBLAS)"
    else:
        shown["ceilings"] = "need a CUDA device"
    tables.show(console, tables.key_values("tilegraph", shown))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .check import run_checks
    from .testing import TOLERANCES

    where = "the Triton interpreter (no GPU here)" if INTERPRET else device_name()
    console.print(f"Checking every kernel against its float64 reference on {where}")
    with _status("checking") as update:
        results = run_checks(seed=args.seed, progress=lambda what: update(f"checking {what}"))
    tables.show(console, tables.check_table(results, TOLERANCES))
    failed = [r for r in results if not r.passed]
    console.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    if INTERPRET:
        console.print("Kernels ran through Triton's interpreter: timings and CUDA graphs "
                      "need a CUDA GPU.")
    return 1 if failed else 0


def _narrator() -> Callable[[str], None]:
    """say(what): where the console is not a terminal, `what` as a line with the seconds since
    the narrator was made, unless it repeats the last; on a terminal nothing (the live
    display shows it), nor where the console is quiet (a tensor-parallel rank but 0)."""
    if console.is_terminal:
        return lambda what: None
    start, last = time.perf_counter(), [None]

    def say(what: str) -> None:
        if what != last[0] and not console.quiet:
            last[0] = what
            narration.print(f"[{time.perf_counter() - start:6.1f} s] {what}", markup=False,
                            soft_wrap=True)
    return say


class _NarratedProgress(Progress):
    """A Progress whose task descriptions are also said as lines off a terminal (_narrator)."""

    def __init__(self, *columns, **kwargs):
        super().__init__(*columns, **kwargs)
        self._say = _narrator()

    def update(self, task_id, *, description: str | None = None, **kwargs) -> None:
        super().update(task_id, description=description, **kwargs)
        if description is not None:
            self._say(description)


def _progress() -> Progress:
    """A bar for long sweeps: what runs now, how many steps of how many, time so far."""
    return _NarratedProgress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                             transient=True)


@contextlib.contextmanager
def _status(message: str) -> Iterator[Callable[[str], None]]:
    """console.status(message), yielding its update(what); off a terminal the message and
    each update said as lines instead (_narrator)."""
    if console.is_terminal:
        with console.status(message) as status:
            yield status.update
        return
    say = _narrator()
    say(message)
    yield say


def _stepper(progress: Progress, task) -> Callable[[str], None]:
    """A sweep's `progress(what)` callback: say what runs, count one step."""
    def step(what: str) -> None:
        progress.update(task, description=what)
        progress.advance(task)
    return step


# The exit status of a sweep stopped early (Ctrl-C or SIGTERM), as a shell reports SIGINT.
STOPPED_STATUS = 130


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _sweep(description: str, total: int, run: Callable[..., object],
           **kwargs) -> tuple[list[dict], str | None]:
    """Run a grid under a progress bar, keeping its rows as they come. Ctrl-C, or SIGTERM as
    `timeout` sends it, stops it: the rows finished so far come back with why it stopped, to
    be shown and saved like a whole run's (a grid of many points can take minutes)."""
    rows: list[dict] = []
    main = threading.current_thread() is threading.main_thread()  # only it sets handlers
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if main else None
    try:
        with _progress() as progress:
            task = progress.add_task(description, total=total)
            run(progress=_stepper(progress, task), on_row=rows.append, **kwargs)
    except KeyboardInterrupt:
        return rows, f"stopped after {len(rows)} of {total} points"
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    return rows, None


def _report_stop(stopped: str | None, saving: bool) -> None:
    if stopped:
        console.print(f"[yellow]{stopped}: the points done are shown"
                      f"{' and saved' if saving else ''}[/yellow]")


# The Markdown report's columns; JSON and CSV keep every field.
REPORT_COLUMNS = ("kernel", "shape", "dtype", "variant", "status", "rel_error", "median_ms",
                  "p20_ms", "p80_ms", "gbps", "tflops", "pct_ceiling", "speedup", "reason")


def cmd_decode_grid(args: argparse.Namespace, ceil: dict | None) -> int:
    from .bench import grid

    dtypes = [args.dtype] if args.dtype else list(grid.DTYPES)
    rows = args.rows or grid.ROWS
    shapes = args.shapes or grid.default_shapes()
    results, stopped = _sweep("decode grid", len(dtypes) * len(rows) * len(shapes), grid.run,
                              dtypes=dtypes, rows=rows, shapes=shapes, ceilings=ceil or {})
    if stopped and not results:
        _report_stop(stopped, False)
        return STOPPED_STATUS
    for dtype in dict.fromkeys(r["dtype"] for r in results):
        for fused in (False, True):
            tables.show(console, tables.grid_table(results, dtype, fused))
    summary = grid.summary(results)
    tables.show(console, tables.sweep_table(
        "geometric mean speed-ups, and points slower: "
        + "; ".join(f"{key} over {over}" for key, over in grid.SPEEDUPS.items())
        + "; of tilegraph's slower points, those where it ran cuBLAS itself; points with a "
        f"% of copy bandwidth to reach (16-bit, weights of {grid.FLOOR_TARGET_MIB} MiB or "
        "more), and how many miss it", summary,
        ("dtype", "points", *(f"{key}_{what}" for key in grid.SPEEDUPS
                              for what in ("geomean", "slower")),
         "tilegraph_slower_on_cublas", "floor_targets", "floor_targets_missed")))
    if args.out:
        written = grid.save(results, summary, args.out, args.format, ceil or {}, stopped)
        console.print("saved " + ", ".join(str(p) for p in written))
    _report_stop(stopped, bool(args.out))
    failed = [r for r in results if r["status"] != "ok"]
    for r in failed:
        console.print(f"[red]{r['dtype']} {r['n']}x{r['k']} {r['rows']} rows: {r['reason']}[/red]")
    return 1 if failed else STOPPED_STATUS if stopped else 0


def cmd_stack_grid(args: argparse.Namespace, ceil: dict | None) -> int:
    from . import stack_grid

    dtypes = [args.dtype] if args.dtype else list(stack_grid.DTYPES)
    batches = args.rows or stack_grid.BATCHES
    widths = args.widths or stack_grid.default_widths()
    copy_gbps = (ceil or {}).get("copy_gbps")
    results, stopped = _sweep("stack grid", len(dtypes) * len(batches) * len(widths),
                              stack_grid.run, dtypes=dtypes, batches=batches, widths=widths,
                              copy_gbps=copy_gbps)
    if stopped and not results:
        _report_stop(stopped, False)
        return STOPPED_STATUS
    columns = ("dtype", "d", "batch", "layers", "hand_us", "tilegraph_us", "speedup",
               "hand_pct_floor", "tilegraph_pct_floor", "target")
    tables.show(console, tables.sweep_table(
        "stack grid: us per token, tilegraph's GraphRunner against the hand graph", results,
        columns))
    summary = stack_grid.summary(results)
    tables.show(console, tables.sweep_table(
        "geometric mean speed-up over the hand graph", summary,
        ("dtype", "points", "geomean_speedup", "min_speedup", "missed")))
    if args.out:
        written = stack_grid.save(results, summary, args.out, args.format, copy_gbps, stopped)
        console.print("saved " + ", ".join(str(p) for p in written))
    _report_stop(stopped, bool(args.out))
    if INTERPRET:
        console.print("No CUDA device: both variants ran through Triton's interpreter and were "
                      "checked; timings need a CUDA GPU.")
    failed = [r for r in results if r["status"] != "ok"]
    for r in failed:
        console.print(f"[red]{r['dtype']} d={r['d']} batch {r['batch']}: {r['reason']}[/red]")
    return 1 if failed else STOPPED_STATUS if stopped else 0


def cmd_attention_grid(args: argparse.Namespace, ceil: dict | None) -> int:
    from .bench import attention_grid

    dtypes = [args.dtype] if args.dtype else list(attention_grid.DTYPES)
    batches = args.rows or attention_grid.BATCHES
    contexts = args.contexts or attention_grid.default_contexts()
    shapes = attention_grid.default_shapes()
    results, stopped = _sweep("attention grid",
                              len(dtypes) * len(batches) * len(contexts) * len(shapes),
                              attention_grid.run, dtypes=dtypes, batches=batches,
                              contexts=contexts, shapes=shapes, ceilings=ceil or {})
    if stopped and not results:
        _report_stop(stopped, False)
        return STOPPED_STATUS
    columns = ("dtype", "heads", "kv_heads", "head_dim", "batch", "context", "cache_mb",
               "sdpa_us", "tilegraph_us", "speedup", "tilegraph_pct_floor", "pass_pct_floor",
               "rule_speedup")
    tables.show(console, tables.sweep_table(
        "attention grid: us a call, graph replays, caches rotated past L2 (tilegraph tuned "
        "per shape; rule_speedup: its default rule; pass_pct_floor: a plain pass moving as "
        "many bytes)", results, columns))
    summary = attention_grid.summary(results)
    tables.show(console, tables.sweep_table(
        "tg.decode_attention against SDPA", summary,
        ("dtype", "points", "geomean_speedup", "min_speedup", "slower", "min_pct_floor_16mb",
         "pass_pct_floor_there", "rule_geomean_speedup")))
    if args.out:
        written = attention_grid.save(results, summary, args.out, args.format, ceil or {},
                                      stopped)
        console.print("saved " + ", ".join(str(p) for p in written))
    _report_stop(stopped, bool(args.out))
    if INTERPRET:
        console.print("No CUDA device: both ran through Triton's interpreter or on the CPU "
                      "and were checked; timings need a CUDA GPU.")
    failed = [r for r in results if r["status"] != "ok"]
    for r in failed:
        console.print(f"[red]{r['dtype']} {r['heads']}/{r['kv_heads']}x{r['head_dim']} batch "
                      f"{r['batch']} context {r['context']}: {r['reason']}[/red]")
    return 1 if failed else STOPPED_STATUS if stopped else 0


def cmd_train_bench(args: argparse.Namespace) -> int:
    from .bench import report, training

    dtypes = [args.dtype] if args.dtype else [torch.bfloat16, torch.float32]
    token_counts = args.rows or ((64,) if INTERPRET else (512, 4096))
    widths = args.widths or ((32,) if INTERPRET else (1024,))
    layers = args.layers or (2 if INTERPRET else 8)
    variants = args.variants or list(training.VARIANTS)
    schedule = {"steps": 6, "warmup_steps": 2} if INTERPRET else {}
    rows: list[dict] = []
    with _progress() as progress:
        task = progress.add_task("train", total=len(dtypes) * len(widths) * len(token_counts))
        for dtype in dtypes:
            for d in widths:
                for tokens in token_counts:
                    rows += training.run(dtype, tokens, d=d, layers=layers, variants=variants,
                                         **schedule, progress=lambda what: (
                                             progress.update(task, description=what)))
                    progress.advance(task)
    columns = ("dtype", "d", "layers", "tokens", "variant", "ms_per_step", "steps_per_s",
               "vs_compile_ro", "vs_compile", "vs_hand_graph", "build_s", "final_loss",
               "loss_rel_diff", "status")
    tables.show(console, tables.sweep_table(
        "training steps: MLP stack (x + W2 gelu(W1 rms_norm(x))), AdamW; ratios are the "
        "peer's time over this variant's", rows, columns))
    if args.out:
        written = report.save(rows, args.out, "train", args.format,
                              title="training steps against PyTorch eager, hand graph and "
                                    "torch.compile", columns=columns)
        console.print("saved " + ", ".join(str(p) for p in written))
    if INTERPRET:
        console.print("No CUDA device: a tiny model trained through Triton's interpreter and "
                      "checked; graphs, torch.compile peers and timings need a CUDA GPU.")
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed:
        console.print(f"[red]{r['dtype']} {r['tokens']} tokens, {r['variant']}: "
                      f"{r['reason']}[/red]")
    return 1 if any(r["variant"].startswith("tilegraph") for r in failed) else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from .bench.cases import KERNELS
    from .bench.suite import run_kernel, save

    benches = [KERNELS[name] for name in args.kernels or KERNELS if name not in GRIDS]
    ceil = None
    if torch.cuda.is_available():
        from .bench import ceilings

        with _status("measuring this device's ceilings"):
            ceil = ceilings(refresh=args.refresh_ceilings)
        console.print(f"{device_name()}: copy {ceil['copy_gbps']:.0f} GB/s, bf16 matmul "
                      f"{ceil['matmul_tflops_bfloat16']:.0f} TFLOP/s (measured)")
    else:
        console.print("No CUDA device: kernels run through Triton's interpreter on small sizes; "
                      "times are CPU times, not GPU figures.")
    if args.kernels == [GRID]:
        return cmd_decode_grid(args, ceil)
    if args.kernels == [STACK_GRID]:
        return cmd_stack_grid(args, ceil)
    if args.kernels == [ATTENTION_GRID]:
        return cmd_attention_grid(args, ceil)
    if args.kernels == [TRAIN]:
        return cmd_train_bench(args)
    plan = [(b, args.sizes or b.default_sizes()) for b in benches]
    all_rows: list[dict] = []
    with _progress() as progress:
        task = progress.add_task("bench", total=sum(len(sizes) for _, sizes in plan))
        for bench, sizes in plan:
            rows = []
            for size in sizes:
                rows += run_kernel(bench, (size,), args.dtype or bench.dtype, args.variants,
                                   ceilings=ceil, progress=lambda what: progress.update(
                                       task, description=what))
                progress.advance(task)
            if rows:
                tables.show(progress.console,
                            tables.bench_table(bench.name, rows, bench.throughput))
            all_rows += rows
    if not all_rows:
        device = "cpu" if INTERPRET else "cuda"
        known = sorted({name for bench, sizes in plan for name in
                        bench.build(min(sizes), args.dtype or bench.dtype, device).variants})
        console.print(f"[red]No variant matched --variants[/red]; the variants of "
                      f"{', '.join(b.name for b in benches)} are: {', '.join(known)}")
        return 2
    if args.out:
        written = save(all_rows, benches, args.out, args.format, REPORT_COLUMNS, ceil or {},
                       args.plot)
        console.print("saved " + ", ".join(str(p) for p in written))
    failed = [r for r in all_rows if r["status"] in ("FAIL", "error")]
    if failed:
        console.print(f"[red]{len(failed)} variant(s) wrong or broken:[/red] " + "; ".join(
            f"{r['kernel']} {r['shape']} {r['variant']}: {r['reason']}" for r in failed))
    return 1 if any(r["status"] == "FAIL" and r["variant"].startswith("tilegraph")
                    for r in failed) else 0


def cmd_profile(args: argparse.Namespace) -> int:
    from .bench import profile

    try:
        if args.target == "demo":
            from .demo import profile_step

            label, fn = profile_step(args.variant)
        else:
            from .bench.cases import KERNELS
            from .bench.suite import profile_step

            label, fn = profile_step(KERNELS[args.target], args.size, args.dtype, args.variant)
    except ValueError as e:
        console.print(f"[red]{e}[/red]")
        return 2
    result = profile(fn, trace=args.trace, steps=args.steps)
    console.print(f"{label}, {args.steps} steps, sorted by {result.sort_by}")
    print(result.table)
    if result.trace:
        console.print(f"Chrome trace: {result.trace} (open in ui.perfetto.dev)")
    return 0


def _copy_gbps() -> float | None:
    """This GPU's measured copy bandwidth (cached on disk), or None without one."""
    if not torch.cuda.is_available():
        return None
    from .bench import ceilings

    with _status("measuring this device's copy bandwidth (cached afterwards)"):
        return ceilings()["copy_gbps"]


def _needs_hf() -> str | None:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return "this needs transformers and safetensors: pip install 'tilegraph[hf]'"
    return None


def cmd_model_demo(args: argparse.Namespace) -> int:
    from . import model_demo
    from .models.hf_presets import SHAPES

    if (missing := _needs_hf()) is not None:
        console.print(f"[red]{missing}[/red]")
        return 2
    name = args.model
    demo_model = model_demo.DemoModel(name)
    if (problem := demo_model.problem()) is not None:
        console.print(f"[red]{problem}[/red]")
        return 2
    try:   # a config transformers cannot read, or a model our Llama does not take
        config = demo_model.llama_config()
    except (ValueError, OSError) as error:
        console.print(f"[red]{name}: {error}[/red]")
        return 2
    if INTERPRET and config.parameter_count() > model_demo.INTERPRETER_MAX_PARAMETERS:
        console.print(f"[red]{name} needs a CUDA GPU[/red]: through Triton's interpreter it "
                      "would take hours; use a tiny shape (--model "
                      f"{'|'.join(n for n in SHAPES if n.startswith('tiny-'))})")
        return 2
    dtype = args.dtype or (torch.float32 if INTERPRET else torch.bfloat16)
    prompt = args.prompt_tokens or (9 if INTERPRET else 128)
    new = args.new_tokens or (6 if INTERPRET else 256)
    # (at most the positions a model of learned position embeddings has: GPT-2's 1024)
    max_seq = args.max_seq or min(32 if INTERPRET else 2048,
                                  config.learned_positions or 2048)
    if prompt + new > max_seq:
        console.print(f"[red]--prompt-tokens {prompt} + --new-tokens {new} exceed --max-seq "
                      f"{max_seq}[/red]")
        return 2
    if not INTERPRET and args.tp == 1 and (short := model_demo.memory_shortfall(
            config, dtype, torch.cuda.mem_get_info()[0])) is not None:
        console.print(f"[red]{name}: {short}[/red]")
        return 2
    batches = args.batch or (1,)
    if args.tp > 1:
        if args.variants:
            console.print("[red]--tp runs tilegraph at TP=N and TP=1; --variants does not "
                          "apply[/red]")
            return 2
        return _tensor_parallel_demo(args, name, dtype, prompt, new, max_seq, batches)
    variants = args.variants or list(model_demo.VARIANTS)
    unknown = [v for v in variants if v not in model_demo.VARIANTS]
    if unknown:
        console.print(f"[red]unknown variant(s) {unknown}[/red]; choose from "
                      f"{', '.join(model_demo.VARIANTS)}")
        return 2
    copy_gbps = _copy_gbps()
    device = "cpu" if INTERPRET else "cuda"
    name = demo_model.label
    console.print(f"{name}: {demo_model.source}, {str(dtype).removeprefix('torch.')}, prompt "
                  f"{prompt} tokens, {new} new tokens, max_seq {max_seq}, batch "
                  f"{', '.join(map(str, batches))}, on {device_name()}")
    rows, builds = [], {}
    with _progress() as progress:
        task = progress.add_task("model demo", total=len(batches) * len(variants))

        def step(what: str) -> None:
            progress.update(task, description=what)
            if what.startswith(f"{name} batch") and "decoding" in what:
                progress.advance(task)

        for batch in batches:
            result = model_demo.run(args.model, batch, prompt, new, max_seq, dtype, device,
                                    variants, progress=step)
            element = torch.empty((), dtype=dtype).element_size()
            rows += model_demo.summarize(name, batch, result["runs"], result["config"],
                                         element, prompt + new / 2, copy_gbps)
            builds[batch] = result["builds"]
            # the batch's models, graphs and caches, which reference cycles hold, freed
            # before the next batch loads its own (Solar Open's first 6 layers, 14 B
            # parameters, fit an H100 once and ran out of its memory at the second batch)
            del result
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    tables.show(console, tables.model_table(rows, f"{name}: decode, token after token"))
    for batch, seconds in builds.items():
        if seconds:
            console.print(f"batch {batch}: tilegraph graphs for every bucket built in "
                          f"{seconds['cold']:.2f} s (first build), {seconds['warm']:.2f} s "
                          "(again, kernels compiled)")
    settings = {"model": name, "source": demo_model.source,
                "dtype": str(dtype).removeprefix("torch."),
                "prompt_tokens": prompt, "new_tokens": new, "max_seq": max_seq,
                "copy_gbps": copy_gbps, "tilegraph_build_seconds": builds}
    written = model_demo.save(args.out, name, rows, settings)
    console.print("saved " + ", ".join(str(p) for p in written))
    if INTERPRET:
        console.print("No CUDA device: tilegraph's kernels ran through Triton's interpreter "
                      "and were checked against transformers; timings need a CUDA GPU.")
    # a peer that fails its check is left out of the ratios and named above; the exit
    # status is about tilegraph's own rows
    return 1 if any(r["status"] == "FAIL" and r["variant"] == "tilegraph" for r in rows) else 0


def _join_tensor_parallel(tp: int, timeout: float):
    """The process group of `torchrun --nproc-per-node tp`, or an error line (None, why).
    Ranks other than 0 print nothing."""
    from . import dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world != tp:
        return None, (f"--tp {tp} needs {tp} processes: run `torchrun --nproc-per-node {tp} "
                      f"-m tilegraph ...` (this is {world})")
    group = dist.init(timeout=timeout)
    console.quiet = group.rank != 0
    return group, ""


def _timings(times: dict) -> str:
    return ", ".join(f"{k} {v:.2f} us" if isinstance(v, float) else f"{k} {v}"
                     for k, v in times.items() if k != "bytes")


def _leave_process_group() -> None:
    """After a tensor-parallel command, on every rank: wait for the others, then tear the
    group down (without it gloo can abort a rank at exit, and NCCL warns)."""
    import gc

    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        # The command's Generator sits in reference cycles, and destroying a communicator
        # that a live CUDA graph captured hangs (pytorch/pytorch#115388): free the graphs
        # first.
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()


def _ranks_disagree(rows: list[list[int]], group) -> str:
    """Every rank checks that all ranks generated the same tokens."""
    import torch.distributed as dist

    every = [None] * group.size
    dist.all_gather_object(every, rows)
    differing = [rank for rank, other in enumerate(every) if other != rows]
    return f"ranks {differing} generated other tokens than this one" if differing else ""


def _tensor_parallel_demo(args, name, dtype, prompt, new, max_seq, batches) -> int:
    from . import model_demo

    # rank 0's TP=1 build (Triton compiles, captures) runs while the others wait
    group, problem = _join_tensor_parallel(args.tp, timeout=1800)
    if group is None:
        console.print(f"[red]{problem}[/red]")
        return 2
    copy_gbps = _copy_gbps()
    spec, demo_model = name, model_demo.DemoModel(name)
    name = demo_model.label
    console.print(f"{name}: {demo_model.source}, {str(dtype).removeprefix('torch.')}, prompt "
                  f"{prompt} tokens, {new} new tokens, max_seq {max_seq}, tensor-parallel "
                  f"over {args.tp} x {device_name()}")
    rows, all_reduce = [], {}
    with _progress() as progress:
        task = progress.add_task("tensor-parallel demo", total=None)
        for batch in batches:
            try:
                result = model_demo.run_tensor_parallel(
                    spec, batch, prompt, new, max_seq, dtype, group,
                    progress=lambda what: progress.update(task, description=what))
            except ValueError as error:   # heads or MLP that do not divide by --tp
                console.print(f"[red]{error}[/red]")
                group.barrier("the exit")   # as in generate: rank 0 prints first
                return 2
            element = torch.empty((), dtype=dtype).element_size()
            rows += model_demo.summarize(name, batch, result["runs"], result["config"],
                                         element, prompt + new / 2, copy_gbps)
            all_reduce[batch] = result["all_reduce_us"]
    tables.show(console, tables.model_table(rows, f"{name}: decode over {args.tp} GPUs "
                                                  "(tensor-parallel) and on one"))
    for batch, by_size in all_reduce.items():
        for size, times in by_size.items():
            if "nccl" not in times:   # timed on GPUs only
                continue
            one_shot = times["symm_mem_one_shot"]
            one_shot = f"{one_shot:.2f} us" if isinstance(one_shot, float) else one_shot
            console.print(f"batch {batch}, TP={size}: all-reduce of a layer's output "
                          f"({times['bytes']} bytes) in a graph: NCCL {times['nccl']:.2f} us, "
                          f"torch's symmetric-memory one-shot {one_shot}. The model runs two "
                          f"a layer with {times['model_uses']}, the faster at its build of "
                          f"{_timings(times['model_timing_us'])} (16 rows; one-shot: "
                          "tilegraph's, with PDL)")
    if group.rank == 0:
        settings = {"model": name, "source": demo_model.source,
                    "dtype": str(dtype).removeprefix("torch."), "tp": args.tp,
                    "prompt_tokens": prompt, "new_tokens": new, "max_seq": max_seq,
                    "copy_gbps": copy_gbps, "all_reduce_us": all_reduce}
        written = model_demo.save(args.out, f"{name}-tp{args.tp}", rows, settings)
        console.print("saved " + ", ".join(str(p) for p in written))
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


def cmd_generate(args: argparse.Namespace) -> int:
    from .generate import Generator
    from .models.hf_presets import SHAPES, random_hf_model
    from .models.llama import Llama

    if (missing := _needs_hf()) is not None:
        console.print(f"[red]{missing}[/red]")
        return 2
    device = "cpu" if INTERPRET else "cuda"
    dtype = args.dtype or (torch.float32 if INTERPRET else torch.bfloat16)
    tokenizer = None
    path = Path(args.model)
    if args.model not in SHAPES and not (path / "config.json").is_file():
        console.print(f"[red]{path} is not a checkpoint directory (config.json + "
                      "*.safetensors or pytorch_model*.bin) nor a named shape "
                      f"({', '.join(SHAPES)})[/red]")
        return 2
    group = None
    if args.tp > 1:
        group, problem = _join_tensor_parallel(args.tp, timeout=600)
        if group is None:
            console.print(f"[red]{problem}[/red]")
            return 2
    try:   # an unsupported config, heads that do not divide by --tp, or no weights: said
        if args.model in SHAPES:
            console.print(f"[yellow]{args.model}: random weights of that shape[/yellow]")
            model = Llama.from_hf(random_hf_model(args.model, dtype=dtype, device=device),
                                  tp=group)
        else:
            with _status(f"loading {path}"):
                model = Llama.from_hf(path, dtype=dtype, device=device, tp=group)
    except (ValueError, FileNotFoundError) as error:
        console.print(f"[red]{error}[/red]")
        if group is not None:   # every rank meets the same error: rank 0 prints before
            group.barrier("the exit")   # torchrun stops the ranks at the first exit
        return 2
    if args.model not in SHAPES and any((path / f).is_file()
                                        for f in ("tokenizer.json", "tokenizer.model")):
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path)
    if args.prompt_ids is not None:
        prompt = list(args.prompt_ids)
    elif tokenizer is None:
        console.print("[red]this model has no tokenizer: give --prompt-ids 1,2,3[/red]")
        return 2
    else:
        prompt = tokenizer(args.prompt or "", add_special_tokens=True)["input_ids"]
    if not prompt:
        console.print("[red]the prompt is empty[/red]")
        return 2
    max_seq = args.max_seq or len(prompt) + args.max_new_tokens
    try:   # a cache past the positions a model learned embeddings for (GPT-2's 1024)
        with _status("building the decoder") as update:
            generator = Generator(model, max_batch=args.batch, max_seq=max_seq,
                                  progress=update)
    except ValueError as error:
        console.print(f"[red]{error}[/red]")
        return 2
    eos = tokenizer.eos_token_id if tokenizer is not None else None
    kwargs = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                  seed=args.seed, eos_token_id=eos)
    prompts = [prompt] * args.batch
    rows = [[] for _ in prompts]
    try:
        for tokens in generator.stream(prompts, args.max_new_tokens, **kwargs):
            for row, token in zip(rows, tokens, strict=True):
                row.append(token)
            if args.batch == 1:
                text = tokenizer.decode([tokens[0]]) if tokenizer else f"{tokens[0]} "
                console.out(text, end="", highlight=False)
        if args.batch == 1:
            console.out("")
        else:
            for b, row in enumerate(rows):
                console.out(f"[{b}] " + (tokenizer.decode(row) if tokenizer else str(row)),
                            highlight=False)
    except ValueError as error:
        console.print(f"[red]{error}[/red]")
        return 2
    if group is not None and (problem := _ranks_disagree(rows, group)):
        console.quiet = False
        console.print(f"[red]rank {group.rank}: {problem}[/red]")
        return 1
    stats = generator.stats
    console.print(f"time to first token {stats.prefill_seconds * 1e3:.1f} ms; decode "
                  f"{stats.decode_ms_per_token:.2f} ms/token, {stats.tokens_per_second:.1f} "
                  f"tokens/s over {stats.batch} sequence(s); graphs built in "
                  f"{sum(generator.build_seconds.values()):.2f} s")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    if args.model:
        return cmd_model_demo(args)
    from . import demo
    from .models import PRESETS, LayerStack

    if args.batch and len(args.batch) > 1:
        console.print("[red]the stack demo takes one --batch (several with --model)[/red]")
        return 2
    config = PRESETS[args.preset or ("tiny" if INTERPRET else "seed")]
    batch = args.batch[0] if args.batch else None
    config = config.with_(**{k: v for k, v in (("tokens", args.tokens), ("batch", batch))
                             if v is not None})
    if INTERPRET and config.d > 256:
        console.print(f"[red]preset {args.preset} (d={config.d}) needs a CUDA GPU[/red]: "
                      "through Triton's interpreter it would take hours; use --preset tiny")
        return 2
    names = ["eager", "torch-graph", "tilegraph"] + (["compile"] if args.compile else [])
    console.print(f"decode stack: d={config.d}, {config.layers} layers, "
                  f"{str(config.dtype).removeprefix('torch.')}, batch {config.batch}, "
                  f"{config.tokens} tokens; weights {config.weight_bytes / 2**20:.1f} MiB "
                  f"per token, on {device_name()}")
    copy_gbps = _copy_gbps()
    if copy_gbps is not None:
        console.print(f"floor: weight bytes / measured copy bandwidth ({copy_gbps:.0f} GB/s) "
                      f"= {demo.floor_ms(config, copy_gbps):.3f} ms per token")
    stack = LayerStack(config, device="cpu" if INTERPRET else "cuda")
    sweep_tokens = min(config.tokens, args.sweep_tokens or (2 if INTERPRET else 64))
    sweeps = not args.no_sweeps
    layer_rows, batch_rows = [], []
    with _progress() as progress:
        task = progress.add_task("demo", total=demo.planned_steps(names, config.layers, sweeps))

        def step(what: str) -> None:
            progress.update(task, description=what)
            if not what.startswith("building"):
                progress.advance(task)

        results = demo.compare_variants(stack, names, config.tokens, config.batch, step)
        rows = demo.summarize(results, config.weight_bytes, config.batch, copy_gbps)
        tables.show(progress.console, tables.demo_table(rows))
        if sweeps:
            layer_rows = demo.sweep_layers(stack, sweep_tokens, config.batch, step)
            batch_rows = demo.sweep_batch(stack, sweep_tokens, progress=step)
    if sweeps and INTERPRET:
        console.print("The layer and batch sweeps ran for correctness only: their tables are "
                      "timings, which need CUDA.")
    elif sweeps:
        tables.show(console, tables.sweep_table(
            "graph speed-up by number of layers", layer_rows,
            ("layers", "variant", "ms_per_token", "vs_eager", "vs_torch_graph")))
        tables.show(console, tables.sweep_table(
            "batch sizes through one runner (sizes 1, 2, 4, 8)", batch_rows,
            ("batch", "graph_size", "ms_per_step", "us_per_sequence_token", "gbps")))
    written = demo.save(args.out, config, copy_gbps, rows, layer_rows, batch_rows)
    console.print("saved " + ", ".join(str(p) for p in written))
    if INTERPRET:
        console.print("No CUDA device: the kernels ran through Triton's interpreter and the "
                      "'graphs' re-ran their functions. Correctness is checked; CUDA graphs "
                      "and timings need a CUDA GPU, so none were taken.")
    failed = [r for r in results if r.status == "FAIL"]
    failed += [r for r in layer_rows + batch_rows if r["status"] == "FAIL"]
    return 1 if failed else 0


def cmd_tune(args: argparse.Namespace) -> int:
    from .bench import grid
    from .bench.report import save
    from .tune import tune_shape

    if INTERPRET or not torch.cuda.is_available():
        console.print("[red]tilegraph tune times kernels on a CUDA GPU; there is none here.[/red]")
        return 2
    shapes = args.shapes or grid.GPU_SHAPES
    points = [(m, n, k) for n, k in shapes for m in args.rows]
    results = []
    with _progress() as progress:
        task = progress.add_task("tune", total=len(points))
        for m, n, k in points:
            results.append(tune_shape(m, n, k, args.dtype, progress=lambda what: progress.update(
                task, description=what)))
            progress.advance(task)
    tables.show(console, tables.tune_table(results, device_name()))
    if args.out:
        rows = [{k: v for k, v in r.items() if k != "candidates"} for r in results]
        written = save(rows, args.out, "tune", ("json", "csv", "md"),
                       title=f"tilegraph tune on {device_name()}", candidates=[
                           {"rows": r["rows"], "n": r["n"], "k": r["k"], "us": r["candidates"]}
                           for r in results])
        console.print("saved " + ", ".join(str(p) for p in written))
    return 0


def _shapes(text: str) -> tuple[tuple[int, int], ...]:
    """'4096x4096,14336x4096' -> ((4096, 4096), (14336, 4096))."""
    try:
        pairs = [tuple(parse_size(v) for v in item.lower().split("x"))
                 for item in text.split(",") if item.strip()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not pairs or any(len(p) != 2 or min(p) < 1 for p in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: give N x K pairs, e.g. 4096x4096,256x2048")
    return tuple(pairs)


def _dtype(text: str) -> torch.dtype:
    try:
        return DTYPES[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"unknown dtype {text!r}; choose from {', '.join(DTYPES)}") from None


def parse_size(text: str) -> int:
    """'4096', '64K', '16M' -> int (K = 1024, M = 1024^2)."""
    text = text.strip()
    scale = {"k": 2**10, "m": 2**20, "g": 2**30}.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"size {text!r} is not a positive integer (suffixes K and M allowed)")
    return int(digits) * scale


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(parse_size(s) for s in text.split(",") if s.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not sizes:
        raise argparse.ArgumentTypeError(f"expected comma-separated sizes, got {text!r}")
    return sizes


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated token ids, got {text!r}") from error
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative token ids, got {text!r}")
    return ids


def _names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return names


def _unwritable(path: Path, as_file: bool) -> str | None:
    """Why results cannot be written at `path` (a folder, or a file with as_file), checked
    before any work: the nearest existing ancestor must be a writable folder."""
    if as_file and path.is_dir():
        return f"{path} is a folder; give a file name"
    folder = path.parent if as_file else path
    for ancestor in (folder, *folder.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                return f"{ancestor} is a file, so {folder} cannot be a folder"
            if not os.access(ancestor, os.W_OK):
                return f"{ancestor} is not writable"
            return None
    return None


def _formats(text: str) -> tuple[str, ...]:
    from .bench.report import FORMATS

    formats = tuple(_names(text))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(f"unknown format(s) {unknown}; choose from {FORMATS}")
    return formats


def build_parser() -> argparse.ArgumentParser:
    from .bench.cases import KERNELS

    parser = argparse.ArgumentParser(prog="tilegraph", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tilegraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="device, versions, measured ceilings")
    info.add_argument("--refresh", action="store_true", help="measure ceilings again")
    info.set_defaults(func=cmd_info)

    check = sub.add_parser("check", help="every kernel against its reference on this device")
    check.add_argument("--seed", type=int, default=0, help="random seed for the inputs")
    check.set_defaults(func=cmd_check)

    kernel_help = "; ".join(f"{k.name}: size = {k.size_means}" for k in KERNELS.values())
    bench = sub.add_parser("bench", help="the kernel suite against PyTorch, torch.compile, "
                           "CUDA C++", description=f"Kernels and sizes: {kernel_help}.")
    bench.add_argument("kernels", nargs="*", metavar="KERNEL",
                       help=f"which kernels (default: all): {', '.join(KERNELS)}; or "
                       f"{GRID} alone: one projection at 1-16 rows over decoder shapes, "
                       f"tg.linear against F.linear, and with the layer's norm before it or "
                       f"residual add after it fused, against PyTorch with the same; or "
                       f"{STACK_GRID} alone: the decode stack "
                       f"over widths and batches against its hand-captured graph; or "
                       f"{ATTENTION_GRID} alone: tg.decode_attention against SDPA over "
                       f"batches, contexts and grouped-query shapes; or {TRAIN} alone: "
                       "training steps of an MLP stack, tg.TrainStep against eager, a hand "
                       "graph and torch.compile")
    bench.add_argument("--dtype", type=_dtype, help="fp32, fp16 or bf16 (default per kernel)")
    bench.add_argument("--sizes", type=_sizes, help="comma-separated, e.g. 4096,1M")
    bench.add_argument("--rows", type=_sizes, help=f"{GRID}: row counts, {STACK_GRID} and "
                       f"{ATTENTION_GRID}: batch sizes (default 1,2,4,8,16; 1,4,8); {TRAIN}: "
                       "tokens a step (default 512,4096)")
    bench.add_argument("--shapes", type=_shapes, help=f"{GRID}: N x K weight shapes, e.g. "
                       "3072x2048,2048x8192 (default: issue 17's nine; two small ones through "
                       "the interpreter)")
    bench.add_argument("--contexts", type=_sizes, help=f"{ATTENTION_GRID}: cached positions "
                       "a sequence (default 128,1024,8192)")
    bench.add_argument("--widths", type=_sizes, help=f"{STACK_GRID}: model widths d "
                       f"(default 512,1024,2048,4096,8192); {TRAIN}: model widths (default "
                       "1024)")
    bench.add_argument("--layers", type=_positive, help=f"{TRAIN}: layers (default 8)")
    bench.add_argument("--variants", type=_names,
                       help="comma-separated variant names to keep, e.g. tilegraph,F.gelu")
    bench.add_argument("--out", type=Path, help="folder for the result files")
    bench.add_argument("--format", type=_formats, default=("json", "csv", "md"),
                       help="comma-separated: json, csv, md (default: all three)")
    bench.add_argument("--plot", action="store_true", help="also a PNG per kernel (needs --out)")
    bench.add_argument("--refresh-ceilings", action="store_true",
                       help="measure copy bandwidth and matmul rate again")
    bench.set_defaults(func=cmd_bench)

    prof = sub.add_parser("profile", help="torch.profiler table (and trace) of one kernel")
    prof.add_argument("target", metavar="KERNEL|demo", choices=[*KERNELS, "demo"],
                      help=f"one of {', '.join(KERNELS)}, or demo (one decode step)")
    prof.add_argument("--variant", help="which variant (default: the first tilegraph one)")
    prof.add_argument("--size", type=lambda s: _sizes(s)[0], help="one size (default: largest)")
    prof.add_argument("--dtype", type=_dtype)
    prof.add_argument("--steps", type=int, default=5)
    prof.add_argument("--trace", type=Path, help="write a Chrome trace here")
    prof.set_defaults(func=cmd_profile)

    tune = sub.add_parser("tune", help="time tg.linear's decode kernels for your shapes on this "
                          "GPU and keep the fastest (cached on disk)")
    tune.add_argument("--shapes", type=_shapes,
                      help="N x K weight shapes, e.g. 4096x4096,256x2048 (default: the decode "
                      "grid's nine)")
    tune.add_argument("--rows", type=_sizes, default=(1, 2, 4, 8, 16),
                      help="row counts (default 1,2,4,8,16; 3 rows use 4's choice)")
    tune.add_argument("--dtype", type=_dtype, default=torch.bfloat16, help="default bf16")
    tune.add_argument("--out", type=Path, help="folder for tune.{json,csv,md}")
    tune.set_defaults(func=cmd_tune)

    from .models import PRESETS
    from .models.hf_presets import SHAPES

    demo = sub.add_parser("demo", help="the decode stack: eager, hand graph, tilegraph, compile")
    demo.add_argument("--preset", choices=list(PRESETS),
                      help="model size (default: seed on a GPU, tiny without one)")
    demo.add_argument("--compile", action="store_true",
                      help="also torch.compile(mode='reduce-overhead') (takes seconds to build)")
    demo.add_argument("--tokens", type=_positive, help="tokens per decode run (default: preset)")
    demo.add_argument("--batch", type=_sizes, help="sequences decoded together (with --model, "
                      "a comma-separated list: one table row set each)")
    demo.add_argument("--sweep-tokens", type=_positive,
                      help="tokens per run in the layer and batch sweeps (default 64; 2 on CPU)")
    demo.add_argument("--no-sweeps", action="store_true", help="the main table only")
    demo.add_argument("--out", type=Path, default=Path("out/demo"),
                      help="folder for the result files (default out/demo)")
    model_group = demo.add_argument_group(
        "real models (--model)", "a Llama-family model: transformers eager, + a "
        "hand-captured graph, + torch.compile, and tilegraph's Generator")
    model_group.add_argument("--model", metavar="SHAPE_OR_DIR",
                             help=f"a shape with random weights ({', '.join(SHAPES)}; tiny-* "
                             "run on CPU through the interpreter), or a checkpoint directory: "
                             "config.json, and *.safetensors or pytorch_model*.bin for its "
                             "weights (random weights of that config without them)")
    model_group.add_argument("--dtype", type=_dtype, help="default bf16 (fp32 on CPU)")
    model_group.add_argument("--prompt-tokens", type=_positive, help="default 128 (9 on CPU)")
    model_group.add_argument("--new-tokens", type=_positive, help="default 256 (6 on CPU)")
    model_group.add_argument("--max-seq", type=_positive,
                             help="default 2048 (32 on CPU), or the positions a model of "
                                  "learned position embeddings has, if fewer")
    model_group.add_argument("--variants", type=_names, help="comma-separated subset of "
                             "hf-eager,hf-graph,hf-compile,plain-autotune,tilegraph")
    model_group.add_argument("--tp", type=_positive, default=1,
                             help="tensor-parallel over N GPUs, under `torchrun "
                             "--nproc-per-node N`: tilegraph at TP=N against TP=1 on rank 0's "
                             "GPU, every rank checked against transformers")
    demo.set_defaults(func=cmd_demo)

    gen = sub.add_parser("generate", help="decode text with a Llama-family checkpoint "
                         "(config.json + *.safetensors or pytorch_model*.bin), one graph "
                         "replay a token")
    gen.add_argument("--model", required=True,
                     help=f"checkpoint directory, or a shape with random weights: "
                     f"{', '.join(SHAPES)}")
    gen.add_argument("--prompt", help="text (needs the checkpoint's tokenizer)")
    gen.add_argument("--prompt-ids", type=_ids, help="token ids, e.g. 1,450,4996")
    gen.add_argument("--max-new-tokens", type=_positive, default=64)
    gen.add_argument("--batch", type=_positive, default=1, help="copies of the prompt")
    gen.add_argument("--dtype", type=_dtype, help="default bf16 (fp32 on CPU)")
    gen.add_argument("--max-seq", type=_positive, help="cache length (default: prompt + new)")
    gen.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    gen.add_argument("--top-k", type=int)
    gen.add_argument("--top-p", type=float)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--tp", type=_positive, default=1, help="tensor-parallel over N GPUs: "
                     "run under `torchrun --nproc-per-node N`; rank 0 prints")
    gen.set_defaults(func=cmd_generate)
    parser.subcommands = sub.choices
    return parser


def main(argv: list[str] | None = None) -> int:
    from .bench.cases import KERNELS

    parser = build_parser()
    args = parser.parse_args(argv)
    command = parser.subcommands[args.command]   # errors show the subcommand's usage
    kernels = getattr(args, "kernels", [])
    unknown = [k for k in kernels if k not in KERNELS and k not in GRIDS]
    if unknown:
        command.error(f"unknown kernel(s) {unknown}; choose from {', '.join(KERNELS)}, "
                      f"{', '.join(GRIDS)}")
    grids = [k for k in kernels if k in GRIDS]
    if grids and len(kernels) > 1:
        command.error(f"{grids[0]} runs alone: give it without other kernels")
    if grids and (args.sizes or (args.variants and grids[0] != TRAIN)):
        command.error(f"{grids[0]} takes --dtype, --rows, --out and --format"
                      f"{', --widths' if grids[0] in (STACK_GRID, TRAIN) else ''}"
                      f"{', --contexts' if grids[0] == ATTENTION_GRID else ''}"
                      f"{', --layers, --variants' if grids[0] == TRAIN else ''}, not --sizes"
                      f"{'' if grids[0] == TRAIN else ' or --variants'}")
    if args.command == "bench" and args.rows and not grids:
        command.error(f"--rows applies to {', '.join(GRIDS)} only")
    if args.command == "bench" and args.contexts and kernels != [ATTENTION_GRID]:
        command.error(f"--contexts applies to {ATTENTION_GRID} only")
    if args.command == "bench" and args.widths and kernels not in ([STACK_GRID], [TRAIN]):
        command.error(f"--widths applies to {STACK_GRID} and {TRAIN} only")
    if args.command == "bench" and args.layers and kernels != [TRAIN]:
        command.error(f"--layers applies to {TRAIN} only")
    if kernels == [TRAIN] and args.variants:
        from .bench.training import VARIANTS as TRAIN_VARIANTS
        unknown = [v for v in args.variants if v not in TRAIN_VARIANTS]
        if unknown:
            command.error(f"unknown variant(s) {unknown}; choose from "
                          f"{', '.join(TRAIN_VARIANTS)}")
    if getattr(args, "plot", False) and not args.out:
        command.error("--plot writes files: give --out DIR")
    if getattr(args, "steps", 1) < 1:
        command.error("--steps must be at least 1")
    for option, as_file in (("out", False), ("trace", True)):
        path = getattr(args, option, None)
        problem = _unwritable(path, as_file) if path is not None else None
        if problem:
            command.error(f"--{option} {path}: {problem}")
    try:
        code = args.func(args)
        _leave_process_group()
        return code
    except CollectiveError as error:
        # a peer failed or hangs: say so on every rank and leave at once (tearing down a
        # communicator whose kernel waits for that peer can hang the exit itself); torchrun
        # then stops the other ranks
        console.quiet = False
        console.print(f"[red]{error}[/red]")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main())
