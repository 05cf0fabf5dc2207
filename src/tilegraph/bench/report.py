"""Reports: a result set (a list of flat dicts, one per measured row) as JSON, CSV, Markdown
and a PNG plot of throughput against size, one line per variant.

JSON files carry the environment (GPU name, torch/triton/tilegraph versions, git revision,
date, command line) beside the rows, so every saved figure says where it came from.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from .environment import environment

FORMATS = ("json", "csv", "md")


def _columns(rows: Sequence[dict]) -> list[str]:
    """Every key of every row, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[dict], columns: Sequence[str] | None = None) -> str:
    columns = list(columns or _columns(rows))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def write_json(rows: Sequence[dict], path: Path, **extra) -> Path:
    document = {"environment": environment(), **extra, "results": list(rows)}
    path.write_text(json.dumps(document, indent=1, default=str))
    return path


def read_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def write_csv(rows: Sequence[dict], path: Path) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=_columns(rows))
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_markdown(rows: Sequence[dict], path: Path, title: str = "",
                   columns: Sequence[str] | None = None) -> Path:
    env = environment()
    header = (f"# {title}\n\n" if title else "") + (
        f"{env['device']}, torch {env['torch']}, triton {env['triton']}, tilegraph "
        f"{env['tilegraph']} (git {env['git']}), {env['date']}\n\n`{env['command']}`\n\n")
    path.write_text(header + markdown_table(rows, columns) + "\n")
    return path


def plot(rows: Sequence[dict], path: Path, x: str = "size", y: str = "gbps",
         series: str = "variant", title: str = "", xlabel: str | None = None,
         ylabel: str | None = None, logx: bool = True,
         env: dict | None = None) -> Path | None:
    """One line per `series` value of y against x; rows without a number for y are left out.
    Returns None (and writes nothing) when no row has one. `env` (default: this process's)
    names the device in the title, so saved results can be plotted again elsewhere."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display on servers
    import matplotlib.pyplot as plt

    lines: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        if isinstance(row.get(y), (int, float)) and isinstance(row.get(x), (int, float)):
            lines.setdefault(str(row[series]), []).append((row[x], row[y]))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in lines.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    env = env or environment()
    ax.set_title(f"{title}\n{env['device']}, torch {env['torch']}, triton {env['triton']}",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def save(rows: Sequence[dict], out_dir: Path, stem: str, formats: Iterable[str] = FORMATS,
         title: str = "", columns: Sequence[str] | None = None, stopped: str | None = None,
         **json_extra) -> list[Path]:
    """Write `rows` to out_dir/stem.{json,csv,md} (the formats asked for); returns the paths.
    `stopped`: why the run that made them ended early (its title says so, and the JSON)."""
    if stopped:
        title, json_extra = f"{title} ({stopped})", {**json_extra, "stopped": stopped}
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown report format(s) {sorted(unknown)}; choose from {FORMATS}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        path = out_dir / f"{stem}.{fmt}"
        if fmt == "json":
            written.append(write_json(rows, path, title=title, **json_extra))
        elif fmt == "csv":
            written.append(write_csv(rows, path))
        else:
            written.append(write_markdown(rows, path, title, columns))
    return written
