"""Exploration (not a deliverable): matrix-vector configs with and without PDL weight
prefetch, and where eager launch time goes.

    PYTHONPATH=src python3 benchmarks/explore_matvec.py [matvec] [batch] [launch]

RMSNorm and softmax tiles: benchmarks/explore_rows.py.
"""

import cProfile
import math
import pstats
import sys

import torch

import tilegraph as tg
from tilegraph.bench import measure
from tilegraph.testing import rel_error

linear_mod = sys.modules["tilegraph.kernels.linear"]


def matvec_sweep(dtype, d=2048, rows=1, prefetches=(False, True), row_loops=(False,)):
    weight_bytes = d * d * torch.tensor([], dtype=dtype).element_size()
    n_sets = max(2, math.ceil(3 * 50e6 / weight_bytes))
    weights = [torch.randn(d, d, device="cuda", dtype=dtype) * d**-0.5 for _ in range(n_sets)]
    x = torch.randn(rows, d, device="cuda", dtype=dtype)
    g = torch.randn(d, device="cuda", dtype=dtype)
    out = torch.empty(rows, d, device="cuda", dtype=dtype)
    results = []
    configs = [{"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": nw, "num_stages": 1,
                "ROW_LOOP": loop}
               for bn in (2, 4, 8, 16) for bk in (512, 1024, 2048) for nw in (4, 8)
               for loop in row_loops
               if (1 if loop else rows) * bn * bk // (32 * nw) <= 128]
    rule = linear_mod.matvec_config(rows, d, d)
    configs = [rule] + [c for c in configs if c != rule]
    for config in configs:
        for prefetch in prefetches:
            state = {"i": 0}

            def fn(state=state, prefetch=prefetch, config=config):
                w = weights[state["i"] % n_sets]
                state["i"] += 1
                linear_mod._launch_matvec(x, w, out, g, 1e-6, None, "none", x, prefetch,
                                          config)

            fn()
            err = rel_error(out, tg.kernels.linear_ref(
                x.double(), weights[0].double(), norm_weight=g.double(), residual=x.double()))
            us = measure(fn, graph=True).median * 1e3
            results.append((us, prefetch, config, err))
    results.sort(key=lambda r: r[0])
    print(f"matvec d={d} rows={rows} {dtype}: floor {weight_bytes / 3.0e6:.2f} us at 3 TB/s")
    for us, prefetch, config, err in results[:8]:
        print(f"  {us:6.2f} us {weight_bytes / us * 1e-3:7.0f} GB/s pdl={prefetch!s:5} "
              f"{config} err {err:.1e}")
    for prefetch in prefetches:
        best = min((r for r in results if r[1] == prefetch), key=lambda r: r[0])
        print(f"  best pdl={prefetch}: {best[0]:.2f} us")
    for us, prefetch, config, _ in results:
        if config == rule:
            print(f"  the rule {rule} pdl={prefetch}: {us:.2f} us")


def launch_profile():
    x = torch.randn(4096, device="cuda")
    out = torch.empty_like(x)
    tg.gelu(x, out=out)
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        tg.gelu(x, out=out)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(18)


def matvec_sweeps():
    for dtype in (torch.bfloat16, torch.float32):
        matvec_sweep(dtype)
    matvec_sweep(torch.bfloat16, rows=4)


def batch_sweeps():
    """Rows 2-8 (batched decode): one broadcast product for all rows vs a loop over rows."""
    for dtype, rows in ((torch.bfloat16, 8), (torch.float32, 8), (torch.bfloat16, 4),
                        (torch.bfloat16, 2)):
        matvec_sweep(dtype, rows=rows, prefetches=(True,), row_loops=(False, True))


def stack_sweep():
    """Batch-1 block shapes timed where they matter: the whole two-kernels-a-layer decode
    stack, GPU time per token from a graph of many tokens."""
    from tilegraph.models import PRESETS, LayerStack

    rule = linear_mod.matvec_config
    for preset in ("seed", "seed-bf16", "small"):
        stack = LayerStack(PRESETS[preset], device="cuda")
        x = stack.token_inputs(1, 1)[0]
        ref = stack.reference(x)
        d = stack.config.d
        results = []
        configs = [{"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": nw, "num_stages": 1,
                    "ROW_LOOP": False}
                   for bn in (4, 8, 16, 32) for bk in (256, 512, 1024, 2048) for nw in (2, 4, 8, 16)
                   if bk <= d and 16 <= bn * bk // (32 * nw) <= 128]
        for config in [None, *configs]:
            linear_mod.matvec_config = (rule if config is None
                                        else lambda M, N, K, c=config: dict(c))
            try:
                err = rel_error(stack.fused_forward(x, kernels_per_layer=2), ref)
                us = measure(lambda s=stack, x=x: s.fused_forward(x, kernels_per_layer=2),
                             graph=True, rep_ms=100).median * 1e3
            except Exception as e:
                print(f"  {config}: {type(e).__name__} {e}"[:200])
                continue
            results.append((us, config or "rule", err))
        linear_mod.matvec_config = rule
        results.sort(key=lambda r: r[0])
        print(f"{preset}: stack us/token, best first")
        for us, config, err in results[:6] + [r for r in results if r[1] == "rule"]:
            print(f"  {us:7.1f} us {config} err {err:.1e}", flush=True)


SWEEPS = {"stack": stack_sweep, "matvec": matvec_sweeps, "batch": batch_sweeps,
          "launch": launch_profile}

if __name__ == "__main__":
    for name in sys.argv[1:] or ["matvec"]:
        SWEEPS[name]()
