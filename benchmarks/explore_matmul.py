"""Exploration (not a deliverable): every tg.matmul candidate config against torch.matmul, in
interleaved rounds so clock drift falls on all alike, with each compiled kernel's shared
memory and registers.

    PYTHONPATH=src python3 benchmarks/explore_matmul.py [n ...]
"""

import statistics
import sys

import torch
import torch.nn.functional as F

from tilegraph.bench import measure
from tilegraph.kernels import matmul_ref
from tilegraph.testing import randn, rel_error

matmul_mod = sys.modules["tilegraph.kernels.matmul"]
ROUNDS = 3


def run(n: int, dtype=torch.bfloat16) -> None:
    a = randn(n, n, dtype=dtype, device="cuda")
    b = randn(n, n, dtype=dtype, device="cuda", scale=n**-0.5)
    out = torch.empty(n, n, dtype=dtype, device="cuda")
    ref = matmul_ref(a, b)
    key = repr(("gemm", n, n, n, str(dtype), "tma"))
    flops = 2 * n**3
    candidates = matmul_mod._candidates(n, n, n, dtype, tma=True)

    def with_config(config, activation=None):
        def call():
            matmul_mod._tuner._memo[key] = config
            matmul_mod.matmul(a, b, activation=activation, out=out)
        return call

    variants = {"torch.matmul": lambda: torch.matmul(a, b, out=out)}
    configs = {}
    for config in candidates:
        name = ("tma " if config.get("TMA") else "ptr ") + "x".join(
            str(config[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
        with_config(config)()
        name += f" err {rel_error(out, ref):.0e}"
        variants[name] = with_config(config)
        configs[name] = config
        if config.get("TMA"):
            compiled = matmul_mod._launch_gemm_tma(a, b, out, "none", config)
            print(f"  {name}: shared {compiled.metadata.shared} B, regs {compiled.n_regs}, "
                  f"spills {compiled.n_spills}", flush=True)
    times = {name: [] for name in variants}
    for _ in range(ROUNDS):
        for name, fn in variants.items():
            times[name].append(measure(fn, rep_ms=200).median)
    base = statistics.median(times["torch.matmul"])
    rounds = [f"{t * 1e3:.0f}" for t in times["torch.matmul"]]
    print(f"\n{torch.cuda.get_device_name()} {n}^3 {dtype}: torch.matmul {base * 1e3:.1f} us "
          f"({flops / base * 1e-9:.0f} TFLOP/s), rounds {rounds}")
    ranked = sorted(((statistics.median(t), name, t) for name, t in times.items()))
    for ms, name, t in ranked[:10]:
        print(f"  {ms * 1e3:8.1f} us {base / ms:6.1%} of cuBLAS  rounds "
              f"{[f'{x * 1e3:.0f}' for x in t]}  {name}", flush=True)

    best_name = next(name for _, name, _ in ranked if name in configs)
    fused = with_config(configs[best_name], "gelu_tanh")
    unfused = lambda: F.gelu(torch.matmul(a, b), approximate="tanh")  # noqa: E731
    pair = {"fused": [], "matmul + F.gelu": []}
    for _ in range(ROUNDS):
        pair["fused"].append(measure(fused, rep_ms=200).median)
        pair["matmul + F.gelu"].append(measure(unfused, rep_ms=200).median)
    print(f"  gelu: fused {statistics.median(pair['fused']) * 1e3:.1f} us, torch.matmul + F.gelu "
          f"{statistics.median(pair['matmul + F.gelu']) * 1e3:.1f} us ({best_name})", flush=True)


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["4096", "8192"]:
        run(int(arg))
