"""The one-row GEMV's split tile applied to 2-4 rows (_gemv_rows_kernel) against the plans
the rule gives those rows (the CUDA-core row-loop matvec, the tensor cores) and cuBLAS: one
projection with the grid's fused part (a norm, or a residual where K > N), timed as the
decode grid times it (graph replays over weights rotated past L2, PDL on).

    PYTHONPATH=src python3 research/probe_gemv_rows.py [--dtype bf16] [--rows 2,3,4]
        [--shapes 2048x2048,...]

Prints microseconds a call and % of copy bandwidth for each plan; an error past the dtype's
tolerance is flagged.
"""

import argparse

import torch
import torch.nn.functional as F

from tilegraph.bench.compare import compare
from tilegraph.bench.grid import NORM_EPS, fused_part
from tilegraph.bench.roofline import ceilings
from tilegraph.kernels import decode_plan as dp
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import randn

SHAPES = ((2048, 2048), (1536, 1536), (1024, 1024), (2560, 2048), (5632, 2048), (2048, 5632),
          (896, 896), (1152, 896), (9728, 896), (896, 4864), (3072, 3072), (768, 768))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def plans(rows: int, n: int, k: int, dtype: torch.dtype) -> dict:
    size = torch.finfo(dtype).bits // 8
    rule = dp.rule(rows, n, k, dtype, 132)
    found = {f"rule({rule.kind})": rule,
             "matvec": dp.Plan("matvec", dp.matvec_config(rows, n, k, size))}
    gemv = dp.gemv_config(n, k)
    if "TAIL" not in gemv:
        found["gemv"] = dp.Plan("gemv", gemv)
        if gemv["BLOCK_N"] > 1:
            half = {**gemv, "BLOCK_N": gemv["BLOCK_N"] // 2,
                    "num_warps": max(1, gemv["num_warps"] // 2)}
            found["gemv-half"] = dp.Plan("gemv", half)
            wide = {**gemv, "BLOCK_N": gemv["BLOCK_N"] // 2}
            found["gemv-halfrows"] = dp.Plan("gemv", wide)
    found["dot"] = dp.Plan("dot", dp.dot_config(n, k, size, 132))
    return found


def point(rows: int, n: int, k: int, dtype: torch.dtype, roof: dict) -> str:
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    part = fused_part(n, k)
    extra = randn(*((k,) if part == "norm" else (rows, n)), dtype=dtype, device="cuda")
    out = torch.empty(rows, n, dtype=dtype, device="cuda")
    norm = part == "norm"

    def forced(plan):
        def call(x, w, e):
            dp.launch(plan, x, w, out, e if norm else None, NORM_EPS, None, "none",
                      None if norm else e, True)
            return out
        return call

    def torch_fused(x, w, e):
        if norm:
            return F.linear(F.rms_norm(x, (k,), e, NORM_EPS), w)
        return F.linear(x, w) + e

    variants = {name: forced(plan) for name, plan in plans(rows, n, k, dtype).items()}
    variants["torch"] = torch_fused
    ref = compare(variants, lambda x, w, e: linear_ref(
        x.double(), w.double(), norm_eps=NORM_EPS,
        **({"norm_weight": e.double()} if norm else {"residual": e.double()})),
        (x, w, extra), bytes=(n * k + 2 * rows * k + rows * n) * x.element_size(),
        graph=True, rotate=(1,), ceilings=roof)
    cells = []
    for name in variants:
        r = ref[name]
        if r.stats is None:
            cells.append(f"{name} {r.status}")
            continue
        cells.append(f"{name} {r.stats.median * 1e3:.2f} ({r.pct_ceiling:.0f}%)"
                     + ("" if r.status == "ok" else f" [{r.status}]"))
    return f"{n}x{k} {part} rows {rows}: " + " | ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--rows", default="2,3,4")
    parser.add_argument("--shapes")
    args = parser.parse_args()
    shapes = (tuple(tuple(int(v) for v in s.split("x")) for s in args.shapes.split(","))
              if args.shapes else SHAPES)
    roof = ceilings()
    print(torch.cuda.get_device_name(), f"copy {roof.get('copy_gbps', 0):.0f} GB/s", flush=True)
    for name in args.dtype.split(","):
        for n, k in shapes:
            for rows in (int(r) for r in args.rows.split(",")):
                print(name, point(rows, n, k, DTYPES[name], roof), flush=True)


if __name__ == "__main__":
    main()
