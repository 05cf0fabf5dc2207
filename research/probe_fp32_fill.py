"""Where fp32's weight-left tile (wgmma) should replace the x-left one (mma.sync) on a lone
projection: each shape's x-left tile (fp32_x_left_config), the weight-left tile at every
split it can take, its rule's split four stages deep, and cuBLAS, in interleaved rounds (us,
median of graph replays over weights rotated past L2, PDL on). Each weight-left variant is
named by its split and the programs an SM it launches.

Why: decode_plan takes the weight-left tile where its programs number
FP32_WEIGHT_LEFT_MIN_FILL (1.5) an SM, a bound set on whole stacks (lost at 1.0-1.2 an SM
there, won at 1.64 and up; notes/kernels.md, sessions 100-101). Below it sit shapes whose
column blocks alone number 1.2-1.5 an SM (6144 or 12288 outputs: 96 or 192 blocks; 11008:
172), whose x-left tile read 40-51% of copy (6144 x 4096 at 9 rows, session 101), where the
weight-left tile elsewhere read 70-93%. Session 102 ran it: twice the split won at all of
them (now FP32_TWO_WAVES_BELOW), and the bound went to 1.4.

    PYTHONPATH=src:research python3 research/probe_fp32_fill.py [--shapes 6144x4096,...]
        [--rows 8,16] [--rounds 3]
"""

from __future__ import annotations

import torch
from rounds import distinct_dot_plans, over_shapes, rounds_line, time_plans

from tilegraph.kernels import decode_plan
from tilegraph.kernels._launch import sm_count

# below the bound (programs an SM at the rule's split), then the two stack points that lost
# above it (1664^2 at 1.58, 2560^2 at 1.82)
SHAPES = ("6144x6144,6144x4096,12288x4096,11008x4096,9728x896,1280x1280,1536x1536,"
          "1024x1024,1664x1664,2560x2560")


def variants(n: int, k: int, sms: int) -> dict:
    """{name: config}: x-left, then the weight-left tile at each split that launches 0.9-3.1
    programs an SM (its name gives them) and four stages deep at its rule's split."""
    found = {"x-left": decode_plan.fp32_x_left_config(n, k, sms)}
    ruled = decode_plan.fp32_weight_left_config(n, k, sms, min_fill=0)  # whatever its fill
    block_k, rule_split = ruled["BLOCK_K"], ruled.get("SPLIT_K", 1)
    blocks, steps = -(-n // 64), -(-k // block_k)
    for split in (1, 2, 3, 4, 6, 8):  # those that fill the SMs, about once to three times
        if split <= min(steps, decode_plan.MAX_SPLIT_K) and 0.9 <= blocks * split / sms <= 3.1:
            found[f"w-split{split}@{blocks * split / sms:.2f}"] = \
                decode_plan.fp32_weight_left_tile(block_k, 3, split)
    found[f"w-split{rule_split}-st4"] = decode_plan.fp32_weight_left_tile(block_k, 4, rule_split)
    return found


def compare(n: int, k: int, rows: int, dtype: torch.dtype, rounds: int) -> None:
    sms = sm_count(torch.device("cuda"))
    ruled = decode_plan.rule(rows, n, k, dtype, sms)
    named = distinct_dot_plans(variants(n, k, sms), {})
    times, medians = time_plans(n, k, rows, dtype, rounds, named)
    best = min((name for name in medians if name != "cublas"), key=medians.get)
    print(f"{n} x {k}, {rows} rows, rule {ruled.kind} {ruled.config}: "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; best {best}, "
          f"{medians['x-left'] / medians[best]:.3f}x x-left", flush=True)


if __name__ == "__main__":
    over_shapes(__doc__, SHAPES, "8,16", "x-left, weight-left by split, cuBLAS", compare,
                dtype="fp32")
