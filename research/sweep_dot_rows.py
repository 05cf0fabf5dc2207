"""Block shapes of the tensor-core few-row kernel (kernels/_dot_rows.py) against the
matrix-vector path and cuBLAS, one projection at 2-16 rows over decoder shapes, each timed
as graph replays over weights rotated past L2 (how a stack streams them), PDL on.

    PYTHONPATH=src python3 research/sweep_dot_rows.py --out DIR [--dtype bfloat16] [--rows 2 8 16]
        [--split]   (tiles x SPLIT_K in 1-8 instead of the tile sweep; off-list shapes added)
        [--weight-left]   (also the weight on the mma's left, split 1-4 ways)
        [--tiles '[{"BLOCK_N": 32, ...}, ...]']   (these configs only; one with ROW_LOOP
                                                   runs the CUDA-core row loop, _matvec)

Writes DIR/sweep-dot-rows.json: one record per (shape, rows, candidate) with its time, and
prints the best candidate per point beside cuBLAS and the matrix-vector path.
"""

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.bench.environment import environment
from tilegraph.bench.roofline import ceilings
from tilegraph.bench.timing import measure
from tilegraph.kernels._dot_rows import launch_dot_rows
from tilegraph.kernels._matvec import launch_matvec
from tilegraph.kernels.linear import linear_ref

SHAPES = ((2048, 2048), (4096, 4096), (8192, 8192), (5632, 2048), (2048, 5632), (256, 2048),
          (14336, 4096), (4096, 14336), (32000, 2048), (1024, 1024), (3072, 1536))
SPLIT_SHAPES = SHAPES + ((11008, 4096), (1536, 8960), (3072, 3072), (8960, 1536),
                         (4096, 11008), (512, 4096))
L2_SPAN = 150 * 2**20  # rotate weights over 3x the H100's 50 MB L2


def split_candidates(element_size):
    for bn, bk_bytes, stages, split in itertools.product((16, 32, 64, 128), (512, 1024), (3, 4),
                                                         (1, 2, 3, 4, 6, 8)):
        if bn == 128 and split == 1:
            continue
        yield {"BLOCK_N": bn, "BLOCK_K": bk_bytes // element_size,
               "num_warps": 8 if bn == 128 else 4, "num_stages": stages, "SPLIT_K": split}


def candidates():
    for bn, bk, stages, warps in itertools.product((16, 32, 64), (64, 128, 256), (2, 3, 4),
                                                   (4,)):
        yield {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": stages}
    for bn, bk, warps in ((16, 128, 2), (32, 128, 2), (64, 128, 8), (64, 256, 8)):
        yield {"BLOCK_N": bn, "BLOCK_K": bk, "num_warps": warps, "num_stages": 3}


def weight_left_candidates(K):
    """The weight on the mma's left (64 weight rows a program), split over K up to 4 ways."""
    for bk, stages, split in itertools.product((64, 128, 256), (2, 3, 4), (1, 2, 3, 4)):
        if split <= -(-K // bk):
            yield {"BLOCK_N": 64, "BLOCK_K": bk, "num_warps": 4, "num_stages": stages,
                   "W_LHS": True, **({"SPLIT_K": split} if split > 1 else {})}


def rotated(fn_of_weight, weights):
    state = {"i": 0}

    def call():
        w = weights[state["i"] % len(weights)]
        state["i"] += 1
        fn_of_weight(w)
    return call


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--rows", type=int, nargs="+", default=[2, 8, 16])
    parser.add_argument("--shapes", type=int, nargs="+", default=None, help="N K N K ...")
    parser.add_argument("--split", action="store_true")
    parser.add_argument("--weight-left", action="store_true", help="add weight-left tiles")
    parser.add_argument("--tiles", type=json.loads, default=None,
                        help="a JSON list of configs to time instead of the sweep's")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    shapes = SPLIT_SHAPES if args.split else SHAPES
    shapes = shapes if args.shapes is None else tuple(zip(args.shapes[::2], args.shapes[1::2]))
    size = torch.finfo(dtype).bits // 8
    tiles = args.tiles or list(split_candidates(size) if args.split else candidates())
    args.out.mkdir(parents=True, exist_ok=True)
    copy_gbps = ceilings()["copy_gbps"]
    records = []
    start = time.time()
    for n, k in shapes:
        torch.cuda.empty_cache()
        copies = max(2, -(-L2_SPAN // (n * k * size)))
        weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5 for _ in range(copies)]
        for m in args.rows:
            x = torch.randn(m, k, device="cuda", dtype=dtype)
            out = torch.empty(m, n, device="cuda", dtype=dtype)
            ref = linear_ref(x.double(), weights[0].double())
            floor_us = (n * k + m * k + m * n) * size / copy_gbps * 1e-3
            point = {"n": n, "k": k, "rows": m, "floor_us": floor_us}
            variants = {
                "cublas": lambda w: F.linear(x, w),
                "tilegraph": lambda w: tg.linear(x, w, out=out, prefetch_weight=True),
            }
            for c in tiles + (list(weight_left_candidates(k)) if args.weight_left else []):
                launcher = launch_matvec if "ROW_LOOP" in c else launch_dot_rows
                variants[json.dumps(c)] = (lambda w, c=c, launcher=launcher: launcher(
                    x, w, out, None, 0.0, None, "none", None, c, True))
            for name, fn in variants.items():
                try:
                    out.fill_(float("nan"))
                    got = fn(weights[0])
                    got = out if name != "cublas" else F.linear(x, weights[0])
                    err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
                    if not err < (2e-2 if size == 2 else 1e-4):
                        records.append({**point, "variant": name, "error": err})
                        continue
                    s = measure(rotated(fn, weights), warmup_ms=3, rep_ms=10, graph=True)
                    records.append({**point, "variant": name, "us": s.median * 1e3,
                                    "pct_floor": 100 * floor_us / (s.median * 1e3)})
                except Exception as e:  # out of resources and the like: note and go on
                    records.append({**point, "variant": name, "failed": repr(e)[:200]})
            mine = [r for r in records if r["n"] == n and r["k"] == k and r["rows"] == m
                    and "us" in r]
            by = {r["variant"]: r["us"] for r in mine}
            best = min((r for r in mine if r["variant"].startswith("{")),
                       key=lambda r: r["us"], default=None)
            print(f"[{time.time() - start:6.0f}s] {n}x{k} rows {m}: cublas {by.get('cublas', 0):.2f}"
                  f" tilegraph {by.get('tilegraph', 0):.2f} best dot "
                  f"{best and best['us']:.2f} ({best and best['pct_floor']:.0f}%) "
                  f"{best and best['variant']}", flush=True)
        del weights
        # after every shape: a run cut short by a time limit keeps what it measured
        (args.out / "sweep-dot-rows.json").write_text(json.dumps(
            {"environment": environment(), "command": " ".join(sys.argv), "dtype": args.dtype,
             "copy_gbps": copy_gbps, "records": records}, indent=1))


if __name__ == "__main__":
    main()
