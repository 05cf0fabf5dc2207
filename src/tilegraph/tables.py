"""The tables the `tilegraph` command prints (rich), one function a table, from plain rows."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def show(console: Console, table: Table) -> None:
    """Print a table with every value whole. A log or a pipe, which has no width of its
    own, gets the table at the width it needs; a terminal too narrow for it gets it turned
    on its side (a row per column, a column per row), and cells that still do not fit wrap
    instead of being cut to '2.1e…'."""
    unbounded = console.options.update_width(100_000)
    natural = console.measure(table, options=unbounded).maximum
    if not console.is_terminal:
        # (print's own width= is capped at the console's width)
        Console(file=console.file, width=max(console.width, natural),
                no_color=console.no_color, quiet=console.quiet).print(table)
        return
    if natural > console.width:
        table = _on_its_side(table)
    for column in table.columns:
        column.overflow = "fold"
    console.print(table)


def _on_its_side(table: Table) -> Table:
    turned = Table(title=table.title, caption=table.caption, show_header=False)
    rows = list(zip(*(list(column.cells) for column in table.columns), strict=True))
    turned.add_column(style="bold")
    for _ in rows:
        turned.add_column(justify="right")
    for index, column in enumerate(table.columns):
        turned.add_row(column.header, *(row[index] for row in rows))
    return turned


def fmt(value, spec: str, scale: float = 1.0) -> str:
    return "" if value is None else format(value * scale, spec)


def key_values(title: str, values: dict[str, str]) -> Table:
    table = Table(title=title, show_header=False)
    for key, value in values.items():
        table.add_row(key, value)
    return table


def check_table(results, tolerances: dict) -> Table:
    table = Table(title="tilegraph check")
    for column in ("kernel", "dtype", "shape", "max rel. error", "tolerance", "result"):
        table.add_column(column)
    for r in results:
        table.add_row(r.kernel, str(r.dtype).removeprefix("torch."), r.shape, f"{r.error:.2e}",
                      f"{tolerances[r.dtype]:.0e}",
                      "[green]pass[/green]" if r.passed else "[red]FAIL[/red]")
    return table


def bench_table(kernel: str, rows: list[dict], throughput: str) -> Table:
    unit = "TFLOP/s" if throughput == "tflops" else "GB/s"
    table = Table(title=f"{kernel} ({rows[0]['dtype']})")
    for column in ("shape", "variant", "result", "rel. error", "median us", "p20-p80 us", unit,
                   "% ceiling", "speed-up"):
        table.add_column(column, justify="left" if column in ("shape", "variant") else "right")
    for row in rows:
        status = {"ok": "[green]ok[/green]", "FAIL": "[red]FAIL[/red]",
                  "error": "[red]error[/red]"}.get(row["status"], f"[dim]{row['status']}[/dim]")
        spread = (f"{row['p20_ms'] * 1e3:.2f}-{row['p80_ms'] * 1e3:.2f}"
                  if row.get("p20_ms") is not None else "")
        table.add_row(row["shape"], row["variant"], status, fmt(row["rel_error"], ".1e"),
                      fmt(row.get("median_ms"), ".2f", 1e3), spread,
                      fmt(row[throughput], ".0f" if throughput == "gbps" else ".1f"),
                      fmt(row["pct_ceiling"], ".1f"),
                      fmt(row["speedup"], ".2f") + ("x" if row["speedup"] else ""))
    reasons = dict.fromkeys(f"{r['variant']} {r['status']}: {r['reason']}" for r in rows
                            if r["reason"])
    table.caption = "\n".join(reasons)
    return table


def demo_table(rows: list[dict]) -> Table:
    columns = {"variant": lambda r: r["variant"], "result": lambda r: r["status"],
               "ms/token": lambda r: fmt(r["ms_per_token"], ".3f"),
               "tokens/s": lambda r: fmt(r["tokens_per_s"], ".0f"),
               "GB/s": lambda r: fmt(r["gbps"], ".0f"),
               "% floor": lambda r: fmt(r["pct_floor"], ".1f"),
               "vs eager": lambda r: fmt(r["vs_eager"], ".2f"),
               "vs torch-graph": lambda r: fmt(r["vs_torch_graph"], ".2f"),
               "max rel. error": lambda r: fmt(r["rel_error"], ".1e"),
               "build s": lambda r: fmt(r["build_seconds"], ".2f")}
    table = _filled_columns("decode, token after token", columns, rows)
    table.caption = "\n".join(f"{r['variant']}: {r['reason']}" for r in rows if r["reason"])
    return table


def model_table(rows: list[dict], title: str) -> Table:
    columns = {"batch": lambda r: str(r["batch"]), "variant": lambda r: r["variant"],
               "result": lambda r: r["status"],
               "ms/token": lambda r: fmt(r["ms_per_token"], ".3f"),
               "tokens/s": lambda r: fmt(r["tokens_per_s"], ".0f"),
               "% floor": lambda r: fmt(r["pct_floor"], ".1f"),
               "vs hf-graph": lambda r: fmt(r["vs_hf_graph"], ".2f"),
               "vs hf-compile": lambda r: fmt(r["vs_hf_compile"], ".2f"),
               "vs plain-autotune": lambda r: fmt(r.get("vs_plain_autotune"), ".2f"),
               "vs TP=1": lambda r: fmt(r.get("vs_tp1"), ".2f"),
               "build s": lambda r: fmt(r["build_seconds"], ".2f"),
               "rel. error": lambda r: fmt(r["rel_error"], ".1e"),
               "same tokens": lambda r: fmt(r["same_tokens"], ".0%")}
    table = _filled_columns(title, columns, rows)
    table.caption = "\n".join(f"batch {r['batch']} {r['variant']}: {r['reason']}"
                              for r in rows if r["reason"])
    return table


def _filled_columns(title: str, columns: dict, rows: list[dict]) -> Table:
    """A table of the columns that have a value in some row: timings are left out on CPU,
    and the table stays readable in 80 columns."""
    cells = {name: [get(r) for r in rows] for name, get in columns.items()}
    shown = [name for name, values in cells.items() if any(values)]
    table = Table(title=title)
    for name in shown:
        table.add_column(name, justify="left" if name == "variant" else "right")
    for i in range(len(rows)):
        table.add_row(*(cells[name][i] for name in shown))
    return table


def sweep_table(title: str, rows: list[dict], columns: tuple[str, ...]) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(fmt(row[c], ".3f") if isinstance(row.get(c), float)
                        else "" if row.get(c) is None else str(row[c]) for c in columns))
    return table


def grid_table(results: list[dict], dtype: str, fused: bool = False) -> Table:
    """Speed-up by shape and row count: tg.linear's default over F.linear (with PDL off in
    brackets), or with `fused` the layer's part fused (a norm before or a residual add after,
    bench/grid.fused_part) over PyTorch with the same part (over F.linear alone in
    brackets); then its % of the floor. * marks the points where tg.linear's plain call ran
    cuBLAS (its fallback where no kernel of its own was faster)."""
    mine = [r for r in results if r["dtype"] == dtype]
    row_counts = sorted({r["rows"] for r in mine})
    speedup, bracket = ("fused", "fused_over_linear") if fused else ("tilegraph", "nopdl")
    title = (f"decode grid, {dtype}, with the layer's norm or residual: fused over PyTorch "
             "with it (over F.linear alone)" if fused else
             f"decode grid, {dtype}: speed-up over F.linear, default (PDL off), * where "
             "it ran cuBLAS")
    table = Table(title=f"{title}; % of floor")
    table.add_column("N x K")
    table.add_column("MB", justify="right")
    for m in row_counts:
        table.add_column(f"{m} rows", justify="right")
    for n, k in dict.fromkeys((r["n"], r["k"]) for r in mine):
        cells = []
        for m in row_counts:
            r = next((r for r in mine if (r["n"], r["k"], r["rows"]) == (n, k, m)), None)
            if r is None:  # a grid stopped before this point
                cells.append("[dim]not run[/dim]")
                continue
            if r["status"] != "ok":
                cells.append(f"[red]{r['status']}[/red]")
                continue
            cells.append(f"{fmt(r[f'{speedup}_speedup'], '.2f')} "
                         f"({fmt(r[f'{bracket}_speedup'], '.2f')}) "
                         f"{fmt(r[f'{speedup}_pct_floor'], '.0f')}%"
                         + ("*" if not fused and r.get("kernel") == "cublas" else ""))
        first = next(r for r in mine if (r["n"], r["k"]) == (n, k))
        label = f"{n} x {k}" + (f", {first['fused_part']}" if fused else "")
        table.add_row(label, f"{first['weight_mb']:.1f}", *cells)
    return table


def tune_table(results, device: str) -> Table:
    """tilegraph tune: the plan kept per shape, against the rule's plan and cuBLAS."""
    table = Table(title=f"tilegraph tune on {device}: fastest plan per shape (graph replays, "
                        "weights rotated past L2)")
    for name in ("N x K", "rows", "dtype", "kept", "us", "rule us", "cuBLAS us"):
        table.add_column(name, justify="left" if name in ("N x K", "kept") else "right")
    for r in results:
        plan = r["plan"]
        kept = plan["kind"] + "".join(
            f" {key.lower().removeprefix('block_')}={value}" for key, value in plan.items()
            if key not in ("kind", "fused"))
        table.add_row(f"{r['n']} x {r['k']}", str(r["rows"]), r["dtype"], kept,
                      fmt(r["us"], ".2f"), fmt(r["rule_us"], ".2f"), fmt(r["cublas_us"], ".2f"))
    return table
