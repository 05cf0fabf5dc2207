"""The RMSNorm prologue of the tensor-core decode kernel: as a kernel of its own before it
(_norm_rows_kernel) or inside its K loop (NORM_IN_LOOP: x * g to the mma, the rows' sums of
x^2 beside it, rstd in the epilogue), on the decode grid's projections that take a norm.

    PYTHONPATH=src python3 research/probe_norm_in_loop.py [bf16|fp16|fp32 ...] [--rows 2,4,8,16]
        [--one-step] [--shapes N:K,...]

For each (N, K) whose grid part is the norm and each row count whose plan is the tensor-core
kernel: F.linear alone, PyTorch's rms_norm then F.linear, and tg's kernel with the norm
before / in the loop, for the plan's tile and for each whole-slice and weight-left tile of
that shape; graph replays over weights rotated past L2, every variant checked against
float64 first. Prints us and the speed-ups of "in loop" over "before" and over F.linear.
"""

import argparse

import torch
import torch.nn.functional as F

from tilegraph.bench import ceilings as measured_ceilings
from tilegraph.bench.compare import compare
from tilegraph.bench.grid import GPU_SHAPES, NORM_EPS, fused_part
from tilegraph.kernels import decode_plan as dp
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import randn

ONE_STEP = False  # --one-step
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def tiles(rows, n, k, dtype, sms):
    """The plan's tile, then the whole-slice and weight-left tiles (16-bit) not the same."""
    size = torch.finfo(dtype).bits // 8
    chosen = dp.plan(rows, n, k, dtype, torch.device("cuda"), fused=True)
    if chosen.kind != "dot":
        return chosen.kind, []
    found = {"plan": chosen.config}
    if size <= 2:
        whole = dp.whole_slice_config(n, k, size, sms)
        if whole is not None:
            found["whole-slice"] = whole
        found["weight-left"] = dp.weight_left_config(n, k, sms)
        if ONE_STEP:  # tiles that read a program's slice in one step, up to 16 slices
            for block_n, block_k, w_lhs in ((32, 512, False), (64, 256, True),
                                            (64, 512, True), (32, 256, False)):
                split = -(-k // block_k)
                if split <= 16:
                    config = {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4,
                              "num_stages": 1, "W_LHS": w_lhs}
                    found[f"one-step {block_n}x{block_k}{' left' if w_lhs else ''}"] = (
                        {**config, "SPLIT_K": split} if split > 1 else config)
    unique = {}
    for name, config in found.items():
        if config not in unique.values():
            unique[name] = config
    return "dot", list(unique.items())


def point(rows, n, k, dtype, sms, ceilings):
    kind, configs = tiles(rows, n, k, dtype, sms)
    if not configs:
        return [f"{n}x{k} {rows} rows: plan {kind}, not the tensor-core kernel"]
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    g = randn(k, dtype=dtype, device="cuda")
    out = torch.empty(rows, n, dtype=dtype, device="cuda")
    variants = {"rms_norm + F.linear": lambda x, w, g: F.linear(
        F.rms_norm(x, g.shape, g, NORM_EPS), w)}
    for name, config in configs:
        for in_loop in (False, True):
            plan = dp.Plan("dot", {**config, "NORM_IN_LOOP": in_loop})
            variants[f"{name} {'in loop' if in_loop else 'before'}"] = (
                lambda x, w, g, plan=plan: (dp.launch(plan, x, w, out, g, NORM_EPS, None,
                                                      "none", None, True), out)[1])
    result = compare(variants, lambda x, w, g: linear_ref(
        x.double(), w.double(), norm_weight=g.double(), norm_eps=NORM_EPS), (x, w, g),
        graph=True, rotate=(1,), ceilings=ceilings, warmup_ms=20, rep_ms=80,
        yardsticks={"F.linear": lambda x, w, g: F.linear(x, w)})  # no norm: timed, unchecked
    us = {r.name: r.stats.median * 1e3 for r in result.results if r.stats is not None}
    lines = [f"{n}x{k} {rows} rows: " + ", ".join(f"{name} {t:.2f}" for name, t in us.items())]
    for name, config in configs:
        before, inside = us.get(f"{name} before"), us.get(f"{name} in loop")
        if before and inside:
            lines.append(f"    {name} {config}: in loop / before {before / inside:.3f}x, "
                         f"over F.linear {us['F.linear'] / inside:.3f}x "
                         f"(before: {us['F.linear'] / before:.3f}x)")
    bad = [f"{r.name}: {r.status} {r.reason}" for r in result.results
           if r.status not in ("ok", "yardstick")]
    return lines + [f"    CHECK {b}" for b in bad]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dtypes", nargs="*", default=["bf16"])
    parser.add_argument("--rows", default="2,4,8,16")
    parser.add_argument("--shapes", default=None,
                        help="N:K,... to time instead of the grid's projections with a norm")
    parser.add_argument("--one-step", action="store_true",
                        help="also tiles of one step a program (BN x BK, up to 16 slices)")
    args = parser.parse_args()
    global ONE_STEP
    ONE_STEP = args.one_step
    sms = sm_count(torch.device("cuda"))
    ceilings = measured_ceilings()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    for dtype in args.dtypes:
        shapes = ([tuple(map(int, item.split(":"))) for item in args.shapes.split(",")]
                  if args.shapes else [s for s in GPU_SHAPES if fused_part(*s) == "norm"])
        for n, k in shapes:
            for rows in map(int, args.rows.split(",")):
                for line in point(rows, n, k, DTYPES[dtype], sms, ceilings):
                    print(f"{dtype} {line}", flush=True)


if __name__ == "__main__":
    main()
