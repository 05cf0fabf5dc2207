"""Decode plans forced onto whole LayerStacks: which kernel and tile a layer's projections
should take, measured where they really run (each projection reads an x the kernel before
it has just written), not on a lone projection.

    PYTHONPATH=src python3 research/stack_plans.py bf16 2048x8,4096x4 [short | rowloop | TILES]

For each d x batch: a stack of layers spanning 150 MB (tilegraph.stack_grid.layers_for),
the hand-captured PyTorch graph, then tilegraph's GraphRunner with the rule's plan, the
CUDA-core plan (at several rows also with 8, 4 and 2 rows a program; sessions 54, 99), the
one-row GEMV's tile (16-bit, 1-4 rows, K without a tail; session 53), the rule's tensor-core tile,
and (without `short`) a fixed set of tensor-core
tiles (BLOCK_N x SPLIT_K x stages) or the TILES given (BLOCK_N/BLOCK_K/stages/SPLIT_K,
comma-separated, e.g. 32/512/3/4,32/128/3/4; SPLIT_K 0 picks about two programs an SM; a
fifth field sets num_warps, 4 unless given, a sixth a register cap a thread, maxnreg, 0 for
none, a seventh 1 for W_LHS, the weight tile as the mma's left operand, and an eighth the
tiles a program asks L2 for before its wait beyond its first, L2_TILES: -1 or none for the
launcher's default, _dot_rows.L2_AHEAD_TILES on split plans), each recorded
as the tuned plan for that shape before the runner captures. Prints microseconds a token;
an error over 5% against float64 is flagged. The tuned plans go to the cache on disk: give
each run its own TILEGRAPH_CACHE_DIR, or a later run's "rule" reads an earlier one's tile.
`rowloop`: `short`'s plans and the CUDA-core row loop in programs of one or two warps
(ROW_WARPS: BLOCK_N / num_warps / BLOCK_K), whose reductions over K stay within a warp:
at 4 warps a program the loop of 8 rows compiles to 87 barriers (session 104); and the
rule's tile with each step's row sums turned row by row (matvecT) or gathered (matvecG), at
its BLOCK_K and half of it (session 105).
Results behind the rule: results/2026-11-22-session13/README.md.
"""

import itertools
import sys

import torch

import tilegraph as tg
from tilegraph.bench.timing import measure
from tilegraph.kernels import decode_plan as dp
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TILES = ((16, 1, 4), (32, 1, 4), (16, 2, 3), (32, 2, 3), (32, 4, 3), (64, 4, 3), (16, 1, 2))
# sm_90 (Triton 3.6) at 8 fp32 rows of 1024 columns with the norm: 2 / 1 / 1024 takes 186
# registers and no barrier, 4 / 1 / 512 168 and 16, 4 / 2 / 512 157 and 87; 4 / 1 / 1024
# and 8 / 2 / 1024 spill.
ROW_WARPS = ((2, 1, 1024), (4, 1, 512), (2, 1, 512), (4, 2, 512))


def us(fn):
    return measure(fn, warmup_ms=20, rep_ms=60).median * 1e3


def dot_plan(block_n, block_k, stages, split, warps=4, maxnreg=0, w_lhs=0, l2_tiles=-1):
    config = {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": warps, "num_stages": stages}
    if w_lhs:
        config["W_LHS"] = True
    if l2_tiles >= 0:
        config["L2_TILES"] = l2_tiles
    if maxnreg:  # a register cap a thread (Triton's compile option): more programs an SM
        config["maxnreg"] = maxnreg
    return dp.Plan("dot", {**config, "SPLIT_K": split} if split > 1 else config)


def plans(batch, d, dtype, short, tiles=None):
    size = torch.finfo(dtype).bits // 8
    found = {"rule": None, "matvec": dp.Plan("matvec", dp.matvec_config(batch, d, d, size))}
    if batch <= 4 and size == 2 and (batch == 1 or "TAIL" not in dp.gemv_config(d, d)):
        found["gemv"] = dp.Plan("gemv", dp.gemv_config(d, d))  # 2-4 rows: _gemv_rows_kernel
    found["dot-rule"] = dp.Plan("dot", dp.dot_config(d, d, size, 132))
    if batch > 1 and "ROW_LOOP" in found["matvec"].config:  # rows a program (session 54)
        for block_n in (8, 4, 2):
            found[f"matvec{block_n}"] = dp.Plan(
                "matvec", {**found["matvec"].config, "BLOCK_N": block_n})
    if short == "rowloop" and "ROW_LOOP" in found["matvec"].config:
        for block_n, warps, block_k in ROW_WARPS:
            found[f"matvec{block_n}w{warps}k{block_k}"] = dp.Plan("matvec", {
                **found["matvec"].config, "BLOCK_N": block_n, "num_warps": warps,
                "BLOCK_K": min(block_k, found["matvec"].config["BLOCK_K"])})
        # each step's row sums turned one row at a time (T) or gathered (G; session 105), at
        # the rule's BLOCK_K and half of it
        rule_k = found["matvec"].config["BLOCK_K"]
        for gather, block_k in itertools.product((False, True), (rule_k, rule_k // 2)):
            plan = dp.Plan("matvec", {**found["matvec"].config, "GATHER_ROWS": gather,
                                      "BLOCK_K": block_k})
            if plan != found["matvec"]:
                found[f"matvec{'G' if gather else 'T'}k{block_k}"] = plan
    if short:
        return found
    if tiles:
        for block_n, block_k, stages, split, warps, maxnreg, w_lhs, l2_tiles in (
                t + (4, 0, 0, -1)[len(t) - 4:] for t in tiles):
            if split == 0:
                steps = -(-d // block_k)
                split = max(1, min(dp.MAX_SPLIT_K, steps, 2 * 132 // -(-d // block_n)))
            label = f"dot{block_n}k{block_k}s{split}st{stages}w{warps}r{maxnreg}"
            label += ("L" if w_lhs else "") + (f"p{l2_tiles}" if l2_tiles >= 0 else "")
            found[label] = dot_plan(block_n, block_k, stages, split, warps, maxnreg, w_lhs,
                                    l2_tiles)
        return found
    block_k = dp.dot_block_k(d, size)
    for block_n, split, stages in TILES:
        found[f"dot{block_n}s{split}st{stages}"] = dot_plan(block_n, block_k, stages, split)
    return found


def main():
    name, points = sys.argv[1], sys.argv[2]
    option = sys.argv[3] if len(sys.argv) > 3 else ""
    dtype, short = DTYPES[name], option if option in ("short", "rowloop") else ""
    tiles = [tuple(map(int, t.split("/"))) for t in option.split(",")] if "/" in option else None
    torch.manual_seed(0)
    for point in points.split(","):
        d, batch = map(int, point.split("x"))
        layers = layers_for(d, dtype)
        stack = LayerStack(LayerStackConfig(d=d, layers=layers, dtype=dtype), device="cuda")
        x = stack.token_inputs(1, batch)[0]
        expected = stack.reference(x)
        hand = tg.capture(stack, x.clone())
        line = [f"{name} d={d} b={batch} L={layers} hand {us(hand.replay):.1f}"]
        for label, plan in plans(batch, d, dtype, short, tiles).items():
            dp._tuned._memo.clear()  # research only: forget plans recorded for earlier labels
            if plan is not None:
                dp.record(batch, d, d, dtype, plan)
            runner = tg.GraphRunner(stack.fused_forward, (x,), sizes=(batch,))
            y = runner(x).double()
            error = ((y - expected).abs().max() / expected.abs().max()).item()
            flag = "" if error < 0.05 else f" (ERROR {error:.0e})"
            line.append(f"{label} {us(lambda r=runner, x=x: r(x)):.1f}{flag}")
        print(" | ".join(line), flush=True)
        del stack, hand
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
