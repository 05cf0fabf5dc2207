"""The tensor-core decode kernel's plans at 9-16 rows: the rule's against plans with fewer
split-K partials, on each shape's rule beside cuBLAS, in interleaved rounds (us, median of
graph replays over weights rotated past L2, PDL on: each replay a chain of the same
projection).

Why: the tile's rows are padded to 16 whatever the batch, but its split-K partials are
stored, and summed by the last program of a column block, only for the rows there are. At
16 rows a 256-column slice's partials (64 x 16 fp32) are an eighth of its weights (64 x 256
bf16), and the last program reads eight of them. 2048^2 ran 4.15 us at 8 rows and 4.79 at
16 on the same plan (session 96); `tilegraph tune` at 16 rows found 2048^2 4.65 us on 64 x
512 slices (split 4) against the rule's 4.84 (64 x 256 weight-left, split 8) and 2560 x 2048
5.38 unsplit (32 x 256, four stages) against 6.02 (weight-left, split 6; H200,
results/2026-12-03-session97/). Variants:
  wide-slice  one step of 64 x 512 a program, x on the mma's left (split K / 512)
  half-split  the rule's pipelined plan with half its slices
  unsplit     32 x 256 tiles, x on the left, four stages, K unsplit
  wide-rows   wide_rows_config's plan (one of the two above): a rule for 13-16 rows

Measured (H200, notes/kernels.md, session 97): alone at 16 rows wide-rows beat the rule on
7 of the 9 shapes it applies to (2048^2 4-5%, 3072 x 2048 14%, 3584^2 9%), lost 3200^2 by
1% and 4096^2 once by 5% (2.7% faster in the call before); at 13 rows it lost on 4 of 6. As the rule from 13 rows: whole bf16 LayerStacks at
13 and 16 rows 1-29% slower (d = 1536-4096), tg.Generator at batch 16 TinyLlama 10% and
Qwen2-1.5B 2.7% slower, the grid's 16-row points with the norm 2048^2 1.84x -> 1.40x and
4096^2 1.41x -> 1.17x PyTorch (a pipelined tile runs the norm as a kernel of its own).
Dropped.

    PYTHONPATH=src:research python3 research/probe_wide_rows.py [--shapes 2048x2048,...]
        [--rows 8,12,16] [--dtype bf16] [--rounds 3]
"""

from __future__ import annotations

import torch
import triton
from rounds import distinct_dot_plans, over_shapes, rounds_line, tensor_core_rule, time_plans

from tilegraph.kernels import decode_plan

# the grid's 8-32 MiB shapes on the tensor cores, then shapes no issue names: Qwen2-0.5B's
# down, Qwen2-1.5B's q and down, Llama-3.2-3B's q, 1024-, 1536- and 2560-wide layers
SHAPES = ("2048x2048,4096x4096,2048x5632,5632x2048,896x4864,1536x1536,1536x8960,"
          "3072x3072,1024x1024,2560x2048")


def wide_rows_config(n: int, k: int, sms: int) -> dict | None:
    """The rule session 97 timed for 13-16 rows (and dropped): where whole slices apply,
    split ones of 512 columns a program (x on the mma's left) instead of 256, where that
    leaves at least half an SM's worth of programs an SM; past the whole-slice bound, 32 x
    256 tiles four stages deep with K unsplit, where their column blocks fill 60-100% of
    the SMs in one wave and rows are at most 4096 columns. Else None."""
    whole = decode_plan.whole_slice_config(n, k, 2, sms)
    if whole is not None:
        split = triton.cdiv(k, 512)
        if ("SPLIT_K" not in whole or split > decode_plan.MAX_SPLIT_K
                or not sms // 2 <= triton.cdiv(n, 64) * split <= 2 * sms):
            return None
        return {"BLOCK_N": 64, "BLOCK_K": 512, "num_warps": 4, "num_stages": 1, "SPLIT_K": split}
    if k <= 4096 and 0.6 * sms <= triton.cdiv(n, 32) <= sms:
        return {"BLOCK_N": 32, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4}
    return None


def variants(plan: decode_plan.Plan, n: int, k: int, sms: int) -> dict:
    """{name: plan} of the plans timed beside the rule's `plan` (those that differ from it);
    wide-slice where its programs number two an SM at most, as the rule's whole slices."""
    config = plan.config
    found = {}
    wide_rows = wide_rows_config(n, k, sms)
    if wide_rows is not None:
        found["wide-rows"] = wide_rows
    wide_split = triton.cdiv(k, 512)
    if (k >= 512 and wide_split <= decode_plan.MAX_SPLIT_K
            and triton.cdiv(n, 64) * wide_split <= 2 * sms):
        wide = {"BLOCK_N": 64, "BLOCK_K": 512, "num_warps": 4, "num_stages": 1}
        found["wide-slice"] = {**wide, "SPLIT_K": wide_split} if wide_split > 1 else wide
    split = config.get("SPLIT_K", 1)
    if config.get("num_stages", 1) > 1 and split >= 2:
        half = {**config, "SPLIT_K": triton.cdiv(split, 2)}
        if half["SPLIT_K"] == 1:
            del half["SPLIT_K"]
        found["half-split"] = half
    found["unsplit"] = {"BLOCK_N": 32, "BLOCK_K": 256, "num_warps": 4, "num_stages": 4}
    return distinct_dot_plans(found, config)


def compare(n: int, k: int, rows: int, dtype: torch.dtype, rounds: int) -> None:
    ruled = tensor_core_rule(n, k, rows, dtype)
    if ruled is None:
        return
    plan, sms = ruled
    times, medians = time_plans(n, k, rows, dtype, rounds,
                                {"rule": plan, **variants(plan, n, k, sms)})
    best = min((name for name in medians if name != "cublas"), key=medians.get)
    print(f"{n} x {k}, {rows} rows, rule {plan.as_dict()}: "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; "
          f"best {best} {medians['rule'] / medians[best]:.3f}x the rule", flush=True)


if __name__ == "__main__":
    over_shapes(__doc__, SHAPES, "8,12,16", "rule / variants / cuBLAS", compare)
