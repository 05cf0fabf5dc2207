"""The `tilegraph` command: `tilegraph info`, `tilegraph check`."""

from __future__ import annotations

import argparse
import platform
import sys

import torch
import triton
from rich.console import Console
from rich.table import Table

from . import __version__
from ._runtime import INTERPRET, device_name

console = Console()


def _environment() -> dict[str, str]:
    env = {"device": device_name(), "tilegraph": __version__, "torch": torch.__version__,
           "triton": triton.__version__, "python": platform.python_version()}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env["SMs"] = str(props.multi_processor_count)
        env["memory"] = f"{props.total_memory / 2**30:.1f} GiB"
        env["CUDA"] = str(torch.version.cuda)
    env["kernels run"] = "Triton interpreter on CPU" if INTERPRET else "compiled for CUDA"
    return env


def cmd_info(args: argparse.Namespace) -> int:
    table = Table(title="tilegraph", show_header=False)
    for key, value in _environment().items():
        table.add_row(key, value)
    console.print(table)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from .check import run_checks
    from .testing import TOLERANCES

    where = "the Triton interpreter (no GPU here)" if INTERPRET else device_name()
    console.print(f"Checking every kernel against its float64 reference on {where}")
    with console.status("") as status:
        results = run_checks(seed=args.seed,
                             progress=lambda what: status.update(f"checking {what}"))
    table = Table(title="tilegraph check")
    for column in ("kernel", "dtype", "shape", "max rel. error", "tolerance", "result"):
        table.add_column(column)
    for r in results:
        table.add_row(r.kernel, str(r.dtype).removeprefix("torch."), r.shape, f"{r.error:.2e}",
                      f"{TOLERANCES[r.dtype]:.0e}",
                      "[green]pass[/green]" if r.passed else "[red]FAIL[/red]")
    console.print(table)
    failed = [r for r in results if not r.passed]
    console.print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    if INTERPRET:
        console.print("Kernels ran through Triton's interpreter: timings and CUDA graphs "
                      "need a CUDA GPU.")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tilegraph", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tilegraph {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="device, versions").set_defaults(func=cmd_info)
    check = sub.add_parser("check", help="every kernel against its reference on this device")
    check.add_argument("--seed", type=int, default=0, help="random seed for the inputs")
    check.set_defaults(func=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
