"""Does a decode-grid point read slower because of what ran before it in the process?

    PYTHONPATH=src python3 research/probe_grid_state.py

tg.linear alone (the grid's timing: a graph of many calls, weights rotated past L2) on the
one- and two-row 8-22 MB points issue 17 asks 85% of copy at, first thing in a fresh process,
then after the grid's own point (F.linear, the no-PDL variant, the fused parts), then after
kernels on four new streams (notes/graphs.md: graph nodes then cost ~0.35 us more), us a call.
"""

import torch

import tilegraph as tg
from tilegraph.bench import ceilings, grid
from tilegraph.bench.compare import compare
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import randn

POINTS = ((2048, 2048, 1), (2048, 2048, 2), (5632, 2048, 1), (2048, 5632, 2))


def alone(n, k, rows, ceil):
    x = randn(rows, k, dtype=torch.bfloat16, device="cuda")
    w = randn(n, k, dtype=torch.bfloat16, device="cuda", scale=k**-0.5)
    out = torch.empty(rows, n, dtype=torch.bfloat16, device="cuda")
    result = compare({"tilegraph": lambda x, w: tg.linear(x, w, out=out)},
                     lambda x, w: linear_ref(x.double(), w.double()), (x, w),
                     bytes=(n * k + rows * k + rows * n) * 2, graph=True, rotate=(1,),
                     ceilings=ceil)
    r = result["tilegraph"]
    return f"{r.stats.median * 1e3:.3f} us ({r.pct_ceiling:.1f}%)"


def main():
    ceil = ceilings()
    print(torch.cuda.get_device_name(), f"copy {ceil['copy_gbps']:.0f} GB/s")
    for stage in ("fresh", "after the grid's points", "after four new streams"):
        if stage == "after the grid's points":
            for n, k, rows in POINTS:
                row = grid._point(n, k, rows, torch.bfloat16, "cuda", ceil)
                print(f"  grid {n}x{k} r{rows}: tilegraph {row['tilegraph_us']:.3f} us "
                      f"({row['tilegraph_pct_floor']:.1f}%), F.linear {row['cublas_us']:.3f}")
        if stage == "after four new streams":
            for _ in range(4):
                s = torch.cuda.Stream()
                with torch.cuda.stream(s):
                    torch.ones(8, device="cuda").add_(1)
            torch.cuda.synchronize()
        for n, k, rows in POINTS:
            print(f"{stage}: {n}x{k} r{rows} {alone(n, k, rows, ceil)}", flush=True)


if __name__ == "__main__":
    main()
