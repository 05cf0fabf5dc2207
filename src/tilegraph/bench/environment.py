"""What every saved result carries: device, versions, git revision, date, command line."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch
import triton

from .._runtime import INTERPRET, device_name


def git_revision() -> str:
    """The checkout's commit, with "-dirty" when its files differ from that commit (results
    then came from code no commit holds exactly)."""
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=7"],
                              capture_output=True, text=True, cwd=Path(__file__).parent,
                              timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def switches() -> dict[str, str]:
    """The TILEGRAPH_* variables of this process (TILEGRAPH_PDL=0, TILEGRAPH_NORM_HANDOFF=0,
    ...): they change what runs, so a result made with one set says so."""
    return {key: value for key, value in sorted(os.environ.items())
            if key.startswith("TILEGRAPH_")}


def command_line() -> str:
    """How this process was started, with `python -m tilegraph` rather than a path to it,
    after the TILEGRAPH_* variables it ran with (as a shell would take them)."""
    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if program == "__main__.py":
        program = f"python -m {Path(sys.argv[0]).parent.name}"
        if "LOCAL_WORLD_SIZE" in os.environ:   # started by torchrun
            program = (f"torchrun --nproc-per-node {os.environ['LOCAL_WORLD_SIZE']} -m "
                       f"{Path(sys.argv[0]).parent.name}")
    settings = [f"{key}={shlex.quote(value)}" for key, value in switches().items()]
    return " ".join([*settings, program, *sys.argv[1:]])


def environment() -> dict:
    from .. import __version__

    return {"device": device_name(), "tilegraph": __version__, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(), "git": git_revision(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command_line()}


def describe() -> dict[str, str]:
    """What `tilegraph info` shows: device, versions and how kernels run here."""
    env = environment()
    shown = {key: str(env[key]) for key in ("device", "tilegraph", "torch", "triton", "python")}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        shown["SMs"] = str(props.multi_processor_count)
        shown["memory"] = f"{props.total_memory / 2**30:.1f} GiB"
        shown["CUDA"] = str(env["cuda"])
    shown["kernels run"] = "Triton interpreter on CPU" if INTERPRET else "compiled for CUDA"
    shown["switches"] = " ".join(f"{key}={value}" for key, value in switches().items()
                                 ) or "none set (defaults)"
    return shown
