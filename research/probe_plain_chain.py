"""A shape's decode plans alone (as plain_plan times them) and in chains captured PyTorch's
way, with plain_plan's pick.

Why: session 111 (call 1, `probe_rows_warp.py`) timed plain tg.linear chains of fp32
projections at 8 rows, each link reading the output of the one before: 1280^2 12.4 us a
link and 1536^2 17.8, where decode-grid timed 1280^2 alone at about 5.5 (session 107) and a
LayerStack's projections of those widths cost about 6.6 and 7.4 us each (stack grid,
session 105). Those chains were captured as PyTorch's recipe does (warm-up on one stream,
torch.cuda.graph on its own), where split plans find no workspace and run unsplit; with
`results/2026-12-04-session111/capture-spare-workspace.diff` they take a spare. Run on
both trees, this says how much that costs and whether the lone order of the rule's plan,
other_plan's (here the CUDA-core row loop, K padded to 2048) and cuBLAS holds in a chain.

For each shape and row count: plain_plan's pick, then every candidate forced through
decode_plan.launch, timed alone as plain_plan times it (autotune's graph replays, one x,
weights rotated) and in a chain of `--links` dependent links (graph replays, weights
rotated), us.

    PYTHONPATH=src python3 research/probe_plain_chain.py [--shapes 1280x1280,...]
        [--rows 8] [--dtype fp32] [--links 48]
"""

from __future__ import annotations

import argparse

import torch
from probe_rows_warp import chain  # research/ is the script's own folder

from tilegraph.kernels import decode_plan as dp
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels._pdl import use_pdl
from tilegraph.kernels.autotune import RotatedCopies, _graph_replay_ms

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def run_plan(plan: dp.Plan, x, w, y) -> None:
    pdl = plan.kind != "cublas" and use_pdl(x.device, ())
    dp.launch(plan, x, w, y, None, 0.0, None, "none", None, pdl)


def lone_us(plan: dp.Plan, x: torch.Tensor, w: torch.Tensor) -> float:
    weights = RotatedCopies((w,))
    out = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
    try:
        return _graph_replay_ms(lambda: run_plan(plan, x, weights()[0], out), 50) * 1e3
    finally:
        weights.release()


def chain_us(plan: dp.Plan, n: int, rows: int, links: int, dtype: torch.dtype) -> float:
    return chain(n, n, rows, links, lambda x, w, y: run_plan(plan, x, w, y), dtype)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="1280x1280,1536x1536,1024x1024,2048x2048")
    parser.add_argument("--rows", default="8")
    parser.add_argument("--dtype", default="fp32", choices=DTYPES)
    parser.add_argument("--links", type=int, default=48)
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    print(f"{torch.cuda.get_device_name()}, {args.dtype}, us: lone (plain_plan's timing) / "
          "chained")
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        if n != k:
            raise SystemExit("chains need square shapes")
        for rows in (int(r) for r in args.rows.split(",")):
            x = torch.randn(rows, k, device="cuda", dtype=dtype)
            w = torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
            out = torch.empty(rows, n, device="cuda", dtype=dtype)
            picked = dp.plain_plan(x, w, None, out)
            rule = dp.rule(rows, n, k, dtype, sm_count(x.device))
            plans = {"rule": rule}
            other = dp.other_plan(rows, n, k, dtype, sm_count(x.device), rule)
            if other is not None:
                plans["other"] = other
            plans["cublas"] = dp.Plan("cublas", {"fused": rule.as_dict()})
            names = [name for name, plan in plans.items()
                     if plan.as_dict() == picked.as_dict()
                     or (plan.kind == picked.kind == "cublas")]
            print(f"{shape} {rows} rows: plain_plan picked {names or [picked.as_dict()]}")
            for name, plan in plans.items():
                print(f"  {name:7s} {lone_us(plan, x, w):7.2f} / "
                      f"{chain_us(plan, n, rows, args.links, dtype):7.2f}  {plan.as_dict()}",
                      flush=True)


if __name__ == "__main__":
    main()
