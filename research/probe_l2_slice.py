"""Does a tensor-core program that asks L2 for more of its slice before PDL's wait start
faster? The rule's tile loads only its first weight tile before the wait (its pipelined loop
starts after it), where the whole-slice tiles and the one-row GEMV hold their whole slice in
flight before it (a stream loop loading after the wait started 2.8 us slower at 2048^2,
notes/kernels.md, session 68). Each shape's rule against the same plan with L2_TILES =
1, 2, 4, ... (up to the slice's tiles after its first) and cuBLAS, in interleaved rounds (us,
median of graph replays over weights rotated past L2, PDL on).

    PYTHONPATH=src:research python3 research/probe_l2_slice.py [--shapes 4096x4096,...]
        [--rows 4,8,16] [--dtype bf16] [--rounds 3]
"""

from __future__ import annotations

import triton
from rounds import over_shapes, rounds_line, tensor_core_rule, time_plans

from tilegraph.kernels import decode_plan

SHAPES = "2048x2048,4096x4096,5632x2048,2048x5632,14336x4096,11008x4096,6144x6144,3072x1024"


def compare(n: int, k: int, rows: int, dtype, rounds: int) -> None:
    ruled = tensor_core_rule(n, k, rows, dtype)
    if ruled is None:
        return
    plan, _ = ruled
    config = plan.config
    tiles = triton.cdiv(triton.cdiv(k, config["BLOCK_K"]), config.get("SPLIT_K", 1))
    named = {"rule": plan}
    ahead = 1
    while ahead < tiles and ahead <= 32:
        named[f"p{ahead}"] = decode_plan.Plan("dot", {**config, "L2_TILES": ahead})
        ahead *= 2
    times, medians = time_plans(n, k, rows, dtype, rounds, named)
    best = min((name for name in medians if name != "cublas"), key=medians.get)
    print(f"{n} x {k}, {rows} rows, rule {plan.as_dict()} ({tiles} tiles a slice): "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; best {best} "
          f"{medians['rule'] / medians[best]:.3f}x the rule", flush=True)


if __name__ == "__main__":
    over_shapes(__doc__, SHAPES, "4,8,16", "rule / p1 / p2 / ... / cuBLAS", compare)
