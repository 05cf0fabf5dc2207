"""Ceilings measured on this device (never datasheet numbers), cached on disk.

copy_gbps: a device-to-device copy of 1 GiB, bytes read + written per second.
matmul_tflops: cuBLAS (torch.matmul) on 8192^3 bf16 and 4096^3 fp32 random inputs.
"""

from __future__ import annotations

import json

import torch
import triton

from .._runtime import device_name
from ..kernels.autotune import cache_dir, slug
from .timing import measure


def _copy_gbps(n_bytes: int = 2**30) -> float:
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    copy = measure(lambda: dst.copy_(src), flush_l2=False)
    return 2 * n_bytes * 1e-9 / (copy.median * 1e-3)  # read + write


def _measure_ceilings() -> dict:
    result = {"copy_gbps": _copy_gbps()}
    for dtype, n in ((torch.bfloat16, 8192), (torch.float32, 4096)):
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        t = measure(lambda a=a, b=b: a @ b, flush_l2=False)
        result[f"matmul_tflops_{str(dtype).removeprefix('torch.')}"] = (
            2 * n**3 * 1e-12 / (t.median * 1e-3))
    return result


def ceilings(refresh: bool = False) -> dict:
    """{'copy_gbps', 'matmul_tflops_bfloat16', 'matmul_tflops_float32'} for this GPU."""
    if not torch.cuda.is_available():
        raise RuntimeError("ceilings() measures a CUDA device; there is none here")
    path = (cache_dir() / "ceilings"
            / f"{slug(device_name())}-torch-{torch.__version__}-triton-{triton.__version__}.json")
    if not refresh:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            pass
    result = _measure_ceilings()
    result["device"] = device_name()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1))
    except OSError:
        pass  # an unwritable cache only costs measuring again
    return result
