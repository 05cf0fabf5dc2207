"""Can the tuner's candidates compile side by side? A first prefill at a new row count spends
10-60 s compiling launch_gemm's candidates one after another (notes/models.md, session 77),
and a Generator's build about 40 s compiling its kernels (ptxas 14 s, LLVM 14 s). Triton
(3.4 on) compiles in an executor inside `triton.runtime._async_compile.AsyncCompileMode`
where a kernel is warmed up (`kernel.warmup(...)`) rather than launched.

    PYTHONPATH=src TRITON_CACHE_DIR=$(mktemp -d) python3 research/probe_parallel_compile.py MODE

MODE: `serial`, or `threads-N` (a ThreadPoolExecutor of N). Run each in its own process over
a fresh TRITON_CACHE_DIR: compiles launch_gemm's 16-bit pointer candidates (plain, with a
residual and with a norm: 42 kernels) for 128 x 2048 x 2048 bf16, prints the seconds, then
launches each once and checks it against torch.
"""

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import triton

from tilegraph.kernels import matmul

try:
    from triton.runtime._async_compile import AsyncCompileMode
except ImportError:  # Triton before 3.4
    AsyncCompileMode = None

M, N, K = 128, 2048, 2048
PARTS = ({}, {"residual": True}, {"norm": True})


def launch(config, parts, a, b, norm_weight, residual, out, warmup: bool):
    kernel_args = dict(HAS_NORM="norm" in parts, HAS_BIAS=False,
                       HAS_RESIDUAL="residual" in parts, STORE_PREACT=False, ACTIVATION="none",
                       DOT_PRECISION="tf32", UPCAST_DOT=False)
    grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)
    args = (out, out.stride(0), out.stride(1), a, a.stride(0), a.stride(1), b, b.stride(0),
            b.stride(1), norm_weight if "norm" in parts else None, None,
            residual if "residual" in parts else None, residual.stride(0), residual.stride(1),
            None, 0, 0, M, N, K, 1e-6)
    if warmup:
        return matmul._gemm_kernel.warmup(*args, grid=grid, **kernel_args, **config)
    matmul._gemm_kernel[grid](*args, **kernel_args, **config)


def main() -> None:
    mode = sys.argv[1]
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    weight = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    b = weight.t()
    norm_weight = torch.rand(K, device="cuda", dtype=torch.bfloat16) + 0.5
    residual = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    jobs = [(config, parts) for parts in PARTS for config in matmul._CONFIGS_16BIT]
    torch.cuda.synchronize()
    start = time.perf_counter()
    if mode == "serial":
        for config, parts in jobs:
            launch(config, parts, a, b, norm_weight, residual, out, warmup=True)
    else:
        if AsyncCompileMode is None:
            raise SystemExit(f"triton {triton.__version__} has no AsyncCompileMode")
        workers = int(mode.split("-")[1])
        with ThreadPoolExecutor(workers) as pool, AsyncCompileMode(pool):
            for config, parts in jobs:
                launch(config, parts, a, b, norm_weight, residual, out, warmup=True)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    worst = 0.0
    for config, parts in jobs:
        out.fill_(float("nan"))
        launch(config, parts, a, b, norm_weight, residual, out, warmup=False)
        x = a.float()
        if parts.get("norm"):
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * norm_weight.float()
        want = x @ weight.float().t() + (residual.float() if parts.get("residual") else 0)
        worst = max(worst, ((out.float() - want).norm() / want.norm()).item())
    torch.cuda.synchronize()
    print(f"{torch.cuda.get_device_name()}, triton {triton.__version__}, {mode}: {len(jobs)} "
          f"kernels compiled in {compiled:.1f} s; launched once each in "
          f"{time.perf_counter() - start:.1f} s, worst relative error {worst:.1e}", flush=True)


if __name__ == "__main__":
    main()
