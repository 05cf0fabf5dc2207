"""fp32 products on the tensor cores: does 3xTF32 (Triton's input_precision="tf32x3" in the
loop, or over operands split first) keep fp32's accuracy, and how much faster than cuBLAS's
exact SGEMM and Triton's exact dot is it?
For each shape: the GEMM tuner's timing of every candidate (operands rotated past L2, graph
replays), best of each kind, and each kind's relative error against float64.

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/probe_fp32_gemm.py
"""
import torch

import tilegraph.kernels.matmul as mm
from tilegraph.testing import randn, rel_error

# The MLP step's products (forward, dx, dW at 512 and 4096 tokens) and a few off the list.
SHAPES = [(512, 4096, 1024), (512, 1024, 4096), (1024, 4096, 512), (4096, 1024, 512),
          (4096, 4096, 1024), (4096, 1024, 4096), (1024, 4096, 4096), (2048, 2048, 2048),
          (777, 1536, 2345), (3000, 5000, 384)]


def kind(config: dict) -> str:
    if config.get("CUBLAS"):
        return "cublas+pass" if config.get("BIAS_IN_PASS") else "cublas"
    if config.get("SPLIT_TF32") and config.get("SPLIT_K"):
        return "split-k"  # the same, the sum over K split between programs
    if config.get("SPLIT_TF32"):
        return "split"   # 3xTF32 over operands split first (kernels/_gemm_tf32x3.py)
    return config.get("DOT_PRECISION", "ieee")


print(f"{'M x N x K':>20} {'kind':>8} {'best us':>9} {'TFLOP/s':>8} {'rel err':>9}  config")
for m, n, k in SHAPES:
    a = randn(m, k, device="cuda")
    b = randn(k, n, device="cuda", scale=k ** -0.5)
    ref = a.double() @ b.double()
    out = torch.empty(m, n, device="cuda")
    mm.launch_gemm(a, b, out)  # tunes: every candidate timed
    timings = list(mm._tuner.timings.values())[-1]   # this product's, timed just now
    best = {}
    for config, ms in timings:
        if kind(config) not in best or ms < best[kind(config)][1]:
            best[kind(config)] = (config, ms)
    for name, (config, ms) in sorted(best.items(), key=lambda item: item[1][1]):
        original = mm._tuner.pick
        mm._tuner.pick = lambda key, run, candidates=None, c=config: c
        try:
            mm.launch_gemm(a, b, out)
        finally:
            mm._tuner.pick = original
        error = rel_error(out, ref)
        tflops = 2 * m * n * k / (ms * 1e-3) / 1e12
        short = {key: value for key, value in config.items() if key != "DOT_PRECISION"}
        print(f"{m:>6} x {n:>5} x {k:>5} {name:>8} {ms * 1e3:9.1f} {tflops:8.1f} "
              f"{error:9.2e}  {short}")
    print(flush=True)
