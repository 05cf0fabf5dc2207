"""Graph benchmark: what a replay saves per kernel node, and what a runner costs per size.

    PYTHONPATH=src python3 benchmarks/graphs.py --out out/bench
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import tilegraph as tg
from tilegraph.bench import measure
from tilegraph.bench.environment import environment


def launch_overhead(n_ops: int = 200) -> dict:
    """Per op: a chain of tiny element-wise ops launched eagerly vs replayed from a graph."""
    x = torch.randn(1024, device="cuda")
    out = torch.empty_like(x)
    results = {}
    for label, op in (("torch.add", lambda: torch.add(x, 1.0, out=out)),
                      ("tg.add", lambda: tg.add(x, x, out=out))):
        def chain(op=op):
            for _ in range(n_ops):
                op()
        eager = measure(chain, flush_l2=False).median * 1e3 / n_ops
        graph = tg.capture(chain)
        replay = measure(graph.replay, flush_l2=False).median * 1e3 / n_ops
        results[label] = {"eager_us_per_op": eager, "graph_us_per_op": replay}
        print(f"  {label:10s} eager {eager:6.2f} us/op   graph replay {replay:6.2f} us/op   "
              f"{eager / replay:5.1f}x", flush=True)
    return results


def runner_per_size(d: int = 2048, dtype=torch.float32) -> dict:
    """A decode layer (2 fused kernels) through a runner with sizes (1, 2, 4, 8)."""
    wq = torch.randn(d, d, device="cuda", dtype=dtype) * d**-0.5
    wo = torch.randn(d, d, device="cuda", dtype=dtype) * d**-0.5
    g = torch.randn(d, device="cuda", dtype=dtype)

    def layer(h):
        q = tg.linear(h, wq, norm_weight=g)
        return tg.linear(q, wo, residual=h)

    runner = tg.GraphRunner(layer, torch.randn(8, d, device="cuda", dtype=dtype))
    results = {}
    for size, stats in runner.stats().items():
        x = torch.randn(size, d, device="cuda", dtype=dtype)
        per_call = measure(lambda x=x: runner(x), flush_l2=False).median * 1e3
        results[size] = {**stats, "us_per_call": per_call}
        print(f"  size {size}: capture {stats['capture_seconds'] * 1e3:7.1f} ms, graph memory "
              f"{stats['memory_bytes'] / 2**20:5.1f} MiB, {per_call:6.1f} us a call "
              "(copy in + replay)", flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("This benchmark needs a CUDA GPU.")
        return 2
    env = environment()
    print(f"{env['device']}  torch {env['torch']}  triton {env['triton']}")
    print("launch overhead, 200 tiny ops on 1024 floats:")
    overhead = launch_overhead()
    print("GraphRunner over one decode layer, d=2048 fp32:")
    sizes = runner_per_size()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "graphs.json"
    path.write_text(json.dumps({"environment": env, "launch_overhead": overhead,
                                "runner": sizes}, indent=1))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
