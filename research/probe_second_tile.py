"""Which second tensor-core tile tg.linear's first call should time beside the rule's at 3-16
16-bit rows (decode_plan.plain_plan times the rule, its other_plan and cuBLAS, and keeps the
fastest): each shape's rule against a few fixed tiles and cuBLAS, in interleaved rounds (us,
median of graph replays over weights rotated past L2, PDL on).

Why: where the rule's weight-left tile has no split and its column blocks outnumber the
SMs, other_plan has nothing to offer (no split to cut otherwise), and the grid's points there
tie cuBLAS (14336 x 4096 and 8192^2 at 4-16 rows run cuBLAS at 92-96% of copy; session 99).
`tilegraph tune` found x-left BN 32 tiles 3-12% faster than the rule on wide N (17920 x 1536
20.9 against 23.8 us at 4 rows, 11264 x 2048, 6144 x 4096; notes/kernels.md, session 41),
where the same tile as the rule lost on most shapes. Timed, not ruled, it can only win.
Variants (BLOCK_N / BLOCK_K elements / stages; x-left unless `w`):
  x32-128-3, x32-256-2, x32-128-4, x64-64-3   x-left tiles, K unsplit
  w-stages2, w-stages4                         the rule's tile at other depths

    PYTHONPATH=src:research python3 research/probe_second_tile.py [--shapes 14336x4096,...]
        [--rows 4,16] [--dtype bf16] [--rounds 3]
"""

from __future__ import annotations

import torch
from rounds import distinct_dot_plans, over_shapes, rounds_line, tensor_core_rule, time_plans

from tilegraph.kernels import decode_plan

# the grid's shapes past the whole-slice tile, then shapes no issue names: wide-N
# projections of Llama- and Qwen-family models and LM heads of other vocabularies
SHAPES = ("14336x4096,8192x8192,32000x2048,4096x4096,5632x2048,17920x1536,11264x2048,"
          "10240x2560,6144x4096,11008x4096,9728x896,13824x5120,18944x3584,4864x896")


def variants(plan: decode_plan.Plan) -> dict:
    """{name: plan} of the tiles timed beside the rule's `plan` (those that differ from it)."""
    def x_left(block_n, block_k, stages):
        return {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4, "num_stages": stages}
    config = plan.config
    found = {"x32-128-3": x_left(32, 128, 3), "x32-256-2": x_left(32, 256, 2),
             "x32-128-4": x_left(32, 128, 4), "x64-64-3": x_left(64, 64, 3)}
    if config.get("W_LHS"):
        for stages in (2, 4):
            found[f"w-stages{stages}"] = {**config, "num_stages": stages}
    return distinct_dot_plans(found, config)


def compare(n: int, k: int, rows: int, dtype: torch.dtype, rounds: int) -> None:
    ruled = tensor_core_rule(n, k, rows, dtype)
    if ruled is None:
        return
    plan, sms = ruled
    other = decode_plan.other_plan(rows, n, k, dtype, sms, plan)
    named = {"rule": plan, **({"other": other} if other is not None else {}), **variants(plan)}
    times, medians = time_plans(n, k, rows, dtype, rounds, named)
    best = min((name for name in medians if name != "cublas"), key=medians.get)
    kept = min(medians["rule"], medians.get("other", float("inf")), medians["cublas"])
    print(f"{n} x {k}, {rows} rows, rule {plan.as_dict()}: "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; best {best} "
          f"{medians['rule'] / medians[best]:.3f}x the rule, "
          f"{kept / medians[best]:.3f}x what plain_plan keeps now", flush=True)


if __name__ == "__main__":
    over_shapes(__doc__, SHAPES, "4,16", "rule / [other] / variants / cuBLAS", compare)
