"""CUDA C++ comparators, built on first use with torch.utils.cpp_extension.load_inline.

They exist to be measured against (`tilegraph bench gelu`), not called by the library. Building
needs a CUDA device, a CUDA build of torch, nvcc and ninja; where one is missing,
ExtensionUnavailable says which.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import torch

SOURCES = Path(__file__).parent


class ExtensionUnavailable(RuntimeError):
    """The CUDA C++ extension cannot be built on this machine (the message says why)."""


def missing_build_tools() -> str | None:
    """Why a CUDA extension cannot be built here, or None if it can."""
    from torch.utils import cpp_extension

    if not torch.cuda.is_available():
        return "no CUDA device"
    if torch.version.cuda is None:
        return "torch was built without CUDA"
    if cpp_extension.CUDA_HOME is None and shutil.which("nvcc") is None:
        return "nvcc not found (set CUDA_HOME)"
    if not cpp_extension.is_ninja_available():
        return "ninja not found"
    return None


@functools.cache
def gelu_extension():
    """The compiled module with `gelu_tanh_cuda(x) -> y` (fp32/fp16/bf16, contiguous)."""
    reason = missing_build_tools()
    if reason is not None:
        raise ExtensionUnavailable(reason)
    from torch.utils.cpp_extension import load_inline

    major, minor = torch.cuda.get_device_capability()
    # Build for this GPU only: one architecture compiles in a fraction of the default list.
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    return load_inline(
        name="tilegraph_gelu_cuda",
        cpp_sources="torch::Tensor gelu_tanh_cuda(torch::Tensor x);",
        cuda_sources=(SOURCES / "gelu.cu").read_text(),
        functions=["gelu_tanh_cuda"],
        extra_cuda_cflags=["-O3"],
        verbose=False,
    )
