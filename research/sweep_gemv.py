"""Tiles of the one-row 16-bit GEMV (kernels/_matvec.py, _gemv_kernel) on the projections of
real decoders, each with the fused parts it has in a decode step (norm prologue; SwiGLU;
residual), timed as graph replays over weights rotated past L2, PDL on, against the rule's
choice (tg.linear) and cuBLAS.

    PYTHONPATH=src python3 research/sweep_gemv.py --out DIR [--dtype bfloat16] [--persistent]
        [--rows 1]

--persistent: programs that stay resident over several row blocks (PROGRAMS_PER_SM) instead
of the tiles, on MORE_SHAPES as well (persistent_tiles). --rows 2-4: the same tiles on several rows
(_gemv_rows_kernel), against the rule's plan for that many rows. --grid: plain projections
of issue 17's grid and wider ones (GRID_SHAPES) in the tiles tune times at 2-4 rows; --widen:
the rule's persistent tiles with the tile widened where used (one row, with
research/one_row_widen.diff applied) or NARROW (two), at more programs an SM (session 88).

Writes DIR/sweep-gemv.json (one record per shape and tile, with the tile's registers and
spills where Triton reports them) and prints the best tile per shape.
"""

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from sweep_dot_rows import L2_SPAN, rotated  # research/ is the script's own folder

import tilegraph as tg
from tilegraph.bench.environment import environment
from tilegraph.bench.roofline import ceilings
from tilegraph.bench.timing import measure
from tilegraph.kernels import _matvec as matvec
from tilegraph.kernels._matvec import launch_matvec, persistent_gemv_config
from tilegraph.kernels.decode_plan import ROWS_PERSISTENT_VARIANTS
from tilegraph.kernels.linear import linear_ref

# (name, N, K, part): part is what the decode step fuses into that projection.
SHAPES = (
    ("tinyllama qkv", 2560, 2048, "norm"), ("tinyllama o", 2048, 2048, "residual"),
    ("tinyllama gate/up", 11264, 2048, "swiglu"), ("tinyllama down", 2048, 5632, "residual"),
    ("qwen2-0.5b qkv", 1152, 896, "norm"), ("qwen2-0.5b o", 896, 896, "residual"),
    ("qwen2-0.5b gate/up", 9728, 896, "swiglu"), ("qwen2-0.5b down", 896, 4864, "residual"),
    ("llama3.2-1b qkv", 3072, 2048, "norm"), ("llama3.2-1b gate/up", 16384, 2048, "swiglu"),
    ("llama3.2-1b down", 2048, 8192, "residual"),
    ("llama3-8b qkv", 6144, 4096, "norm"), ("llama3-8b o", 4096, 4096, "residual"),
    ("llama3-8b gate/up", 28672, 4096, "swiglu"),
    ("qwen2-1.5b gate/up", 17920, 1536, "swiglu"), ("qwen2-1.5b o", 1536, 1536, "residual"),
    ("tinyllama head", 32000, 2048, "norm"),
)
# Shapes of decoders the sweep above does not name, for --persistent (session 61).
MORE_SHAPES = (
    ("qwen2-1.5b qkv", 2048, 1536, "norm"), ("llama3.2-3b qkv", 5120, 3072, "norm"),
    ("llama3.2-3b o", 3072, 3072, "residual"),
    ("llama3.2-3b gate/up", 16384, 3072, "swiglu"), ("llama3.2-3b down", 3072, 8192, "residual"),
    ("qwen2.5-7b qkv", 4608, 3584, "norm"), ("qwen2.5-7b o", 3584, 3584, "residual"),
    ("qwen2.5-7b gate/up", 37888, 3584, "swiglu"), ("phi3-mini qkv", 9216, 3072, "norm"),
    # rows past a power of two (a head and a tail tile) and 12-20 MiB (session 64)
    ("qwen2.5-14b qkv", 7168, 5120, "norm"), ("qwen2.5-14b o", 5120, 5120, "residual"),
    ("phi2 o", 2560, 2560, "residual"), ("phi2 gate/up", 20480, 2560, "swiglu"),
    ("wide6144 o", 6144, 6144, "residual"), ("d2816 qkv", 2816, 2816, "norm"),
    ("llama3.2-3b o fused", 3072, 3072, "norm"),
)
# --grid: plain projections (no fused part) of issue 17's grid with rows of up to 8192
# columns, and wide ones no issue names (session 88: do the persistent GEMV's 2-4 rows beat
# the tensor-core kernel and cuBLAS past 64 MiB, where the rule stops them?).
GRID_SHAPES = (
    ("grid 2048^2", 2048, 2048, "plain"), ("grid 4096^2", 4096, 4096, "plain"),
    ("grid 5632x2048", 5632, 2048, "plain"), ("grid 2048x5632", 2048, 5632, "plain"),
    ("grid 8192^2", 8192, 8192, "plain"), ("grid 14336x4096", 14336, 4096, "plain"),
    ("grid 32000x2048", 32000, 2048, "plain"),
    ("off 11008x4096", 11008, 4096, "plain"), ("off 24576x3072", 24576, 3072, "plain"),
    ("off 151936x896", 151936, 896, "plain"),
)


def tiles(K):
    """(BLOCK_N, SPLIT, CHUNK, num_warps) tiles: rows of 1024-8192 columns in chunks of 128
    or 256, 64 or 128 values a thread."""
    k_cap = max(16, triton.next_power_of_2(K))
    for block_k, chunk, warps, per_thread in itertools.product(
            (1024, 2048, 4096, 8192), (128, 256), (4, 8), (64, 128)):
        block_n = per_thread * 32 * warps // block_k
        if block_k > k_cap or chunk > block_k or not 1 <= block_n <= 16:
            continue
        yield {"BLOCK_N": block_n, "SPLIT": block_k // chunk, "CHUNK": chunk,
               "num_warps": warps, "num_stages": 1}


def persistent_tiles(n, k):
    """Persistent variants: the rule's persistent tile (FIT, a head and a tail tile where
    those cover the row in less than a power of two) whatever the weight's size; where it
    has a tail, the row padded to a power of two instead and the tail tile with twice the
    rows; the padded tile at PROGRAMS_PER_SM 2-4, also with its registers capped (maxnreg)
    so that 3 or 4 programs of 8 warps fit an SM; and whole rows (next_pow2(K) columns) in
    tiles of 16 or 32 KB read 64-256 bytes a thread."""
    rule = persistent_gemv_config(n, k)
    padded = persistent_gemv_config(n, k, tail=False)
    yield rule
    if padded != rule:
        yield padded
        yield {**rule, "BLOCK_N": 2 * rule["BLOCK_N"]}
    for per_sm in (2, 3, 4):
        yield {**padded, "PROGRAMS_PER_SM": per_sm}
    # registers capped (ptxas's .maxnreg) so that 3 or 4 programs of 8 warps fit an SM
    for maxnreg, per_sm in ((80, 3), (64, 4)):
        yield {**padded, "maxnreg": maxnreg, "PROGRAMS_PER_SM": per_sm}
    block_k = max(128, triton.next_power_of_2(k))
    for tile_kb, warps in ((16, 4), (16, 8), (32, 4), (32, 8), (32, 16)):
        block_n = tile_kb * 1024 // (2 * block_k)
        if block_n < 2:  # SwiGLU pairs columns
            continue
        for per_sm in (2, 3, 4):
            yield {"BLOCK_N": block_n, "SPLIT": block_k // 128, "CHUNK": 128,
                   "num_warps": warps, "num_stages": 1, "PROGRAMS_PER_SM": per_sm}


GRID = False  # --grid: rows_tiles
WIDEN = False  # --widen: widen_tiles


def rows_tiles(n, k):
    """The persistent tiles `tilegraph tune` times at 2-4 rows (ROWS_PERSISTENT_VARIANTS) and
    the padded tile at as many programs an SM as fit."""
    yield persistent_gemv_config(n, k, tail=False)
    for variant in ROWS_PERSISTENT_VARIANTS:
        yield persistent_gemv_config(n, k, *variant, tail=False)


def widen_tiles(n, k, rows):
    """Session 88. Two rows: persistent tiles as the rule launches them (16 KB, 4 warps) and
    as the one-row rule does (32 KB, 8 warps), at more programs an SM than the rule's 4 and
    2, each as it is and NARROW (x kept 16-bit, x and the tile widened for each row's
    products; applied only where no norm scales x; timed first as two flags, the tile widened
    alone and with x narrowed too). One row (with research/one_row_widen.diff applied): the
    rule's persistent tile and the same with the tile widened where it is used (WIDEN: 64
    registers where it held 96-100, so 4 programs of 8 warps fit), at 3 and 4 an SM, 16 KB
    tiles over 4 warps at 4, 6 and 8, widened or not, and (with
    research/small_tiles_step.diff) the step variant SMALL_LAUNCH's, as many as fit up to 8."""
    if rows == 1:
        rule = persistent_gemv_config(n, k)
        yield {**rule, "WIDEN": False}  # the launch widens SwiGLU's by default (session 89)
        yield {**rule, "WIDEN": True}
        for per_sm in (3, 4):
            yield {**rule, "WIDEN": True, "PROGRAMS_PER_SM": per_sm}
        for per_sm in (4, 6, 8):  # is it the widening or the small tile? (session 89)
            small = persistent_gemv_config(n, k, 16 * 1024, 4, per_sm)
            yield {**small, "WIDEN": False}
            yield {**small, "WIDEN": True}
        if hasattr(matvec, "small_persistent_gemv_config"):  # the step variant (session 90)
            yield matvec.small_persistent_gemv_config(n, k)
        return
    for tile_bytes, warps, counts in ((16 * 1024, 4, (4, 5, 6)), (32 * 1024, 8, (2, 3))):
        for per_sm in counts:
            tile = persistent_gemv_config(n, k, tile_bytes, warps, per_sm, tail=False)
            yield tile
            yield {**tile, "NARROW": True}


def sweep_shape(name, n, k, part, dtype, copy_gbps, persistent=False, rows=1):
    """Records of every variant on one projection of `rows` rows."""
    size = torch.finfo(dtype).bits // 8
    copies = max(2, -(-L2_SPAN // (n * k * size)))
    weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5 for _ in range(copies)]
    x = torch.randn(rows, k, device="cuda", dtype=dtype)
    g = torch.rand(k, device="cuda", dtype=dtype) + 0.5 if part in ("norm", "swiglu") else None
    n_out = n // 2 if part == "swiglu" else n
    r = torch.randn(rows, n_out, device="cuda", dtype=dtype) if part == "residual" else None
    activation = "swiglu" if part == "swiglu" else "none"
    out = torch.empty(rows, n_out, device="cuda", dtype=dtype)
    ref = linear_ref(x.double(), weights[0].double(),
                     norm_weight=None if g is None else g.double(),
                     activation=activation if part == "swiglu" else None,
                     residual=None if r is None else r.double())
    floor_us = (n * k + rows * (k + 2 * n_out)) * size / copy_gbps * 1e-3
    point = {"shape": name, "n": n, "k": k, "rows": rows, "part": part, "floor_us": floor_us}
    fused = dict(norm_weight=g, residual=r, activation=activation if part == "swiglu" else None)
    variants = {
        "cublas": lambda w: F.linear(x, w),
        "rule": lambda w: tg.linear(x, w, out=out, **fused),
    }
    for c in (widen_tiles(n, k, rows) if WIDEN else rows_tiles(n, k) if GRID
              else persistent_tiles(n, k) if persistent else tiles(k)):
        variants[json.dumps(c)] = (lambda w, c=c: launch_matvec(
            x, w, out, g, 1e-6, None, activation, r, c, True))
    records = []
    for variant, fn in variants.items():
        try:
            out.fill_(float("nan"))
            launched = fn(weights[0])  # a variant's compiled kernel (registers: how many fit)
            regs = {"regs": getattr(launched, "n_regs", None),
                    "spills": getattr(launched, "n_spills", None)}
            if variant != "cublas":
                err = ((out.double() - ref).norm() / ref.norm()).item()
                if not err < 2e-2:
                    records.append({**point, "variant": variant, "error": err})
                    continue
            s = measure(rotated(fn, weights), warmup_ms=3, rep_ms=10, graph=True)
            records.append({**point, "variant": variant, "us": s.median * 1e3,
                            "pct_floor": 100 * floor_us / (s.median * 1e3), **regs})
        except Exception as e:  # out of resources and the like: note and go on
            records.append({**point, "variant": variant, "failed": repr(e)[:200]})
    return records


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--only", default=None,
                        help="substrings of the shape names to run, comma-separated")
    parser.add_argument("--persistent", action="store_true",
                        help="persistent variants instead of the tiles, over more shapes")
    parser.add_argument("--rows", type=int, default=1, help="rows of x: 1 to 4")
    parser.add_argument("--grid", action="store_true",
                        help="with --persistent: GRID_SHAPES (plain) instead of the decoders'")
    parser.add_argument("--widen", action="store_true",
                        help="with --persistent and --rows 2-4: widen_tiles")
    args = parser.parse_args()
    global GRID, WIDEN
    GRID, WIDEN = args.grid, args.widen
    dtype = getattr(torch, args.dtype)
    args.out.mkdir(parents=True, exist_ok=True)
    copy_gbps = ceilings()["copy_gbps"]
    records = []
    start = time.time()
    shapes = GRID_SHAPES if args.grid else SHAPES + (MORE_SHAPES if args.persistent else ())
    for name, n, k, part in shapes:
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        torch.cuda.empty_cache()
        shape_records = sweep_shape(name, n, k, part, dtype, copy_gbps, args.persistent,
                                    args.rows)
        records += shape_records
        mine = {r["variant"]: r for r in shape_records if "us" in r}
        best = min((r for v, r in mine.items() if v.startswith("{")), key=lambda r: r["us"])
        rule = mine.get("rule", {"us": float("nan"), "pct_floor": float("nan")})
        print(f"[{time.time() - start:5.0f}s] {name:20s} {n}x{k}x{args.rows} {part:8s} floor "
              f"{best['floor_us']:6.2f} us | cublas {mine['cublas']['us']:6.2f} | rule "
              f"{rule['us']:6.2f} ({rule['pct_floor']:3.0f}%) | best {best['us']:6.2f} "
              f"({best['pct_floor']:3.0f}%) {best['variant']}", flush=True)
        # after every shape: a run cut short by a time limit keeps what it measured
        (args.out / "sweep-gemv.json").write_text(json.dumps(
            {"environment": environment(), "command": " ".join(sys.argv), "dtype": args.dtype,
             "rows": args.rows,
             "copy_gbps": copy_gbps, "records": records}, indent=1))


if __name__ == "__main__":
    main()
