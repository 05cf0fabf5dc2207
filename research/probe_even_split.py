"""Split-K slices of the tensor-core decode kernel: K's steps dealt out evenly among a column
block's programs, the longer slices first (EVEN_SPLIT, the kernel's default since session
93: 6-5-5 steps for 16 in 3), or cut into slices of equal width, the last shorter (6-6-4, the
kernel before), on the rule's plan of each shape, beside cuBLAS, in interleaved rounds (us,
median of graph replays over weights rotated past L2).

Why: at 4-16 rows issue 17's 22 MB shapes read 61-71% of copy. 5632 x 2048 runs the
weight-left tile split 3 over 16 steps of 128 columns, two programs an SM: cut 6-6-4, a third
of the SMs hold two 6-step programs (12 steps, 11% over the mean of 10.7). Session 93's first
deal, the longer slices last (5-5-6), lost that shape by 6% and won 1536 x 8960 by 4%; the
longer first (6-5-5) won 1.6% over six shapes and lost 5632 x 2048 by 1%
(results/2026-12-03-session93/).

    PYTHONPATH=src python3 research/probe_even_split.py [--shapes 5632x2048,...]
        [--rows 4,8,16] [--dtype bf16] [--rounds 3]
"""

from __future__ import annotations

import torch
from rounds import over_shapes, poisoned_error, projection_case, rounds_line, time_in_rounds

from tilegraph.kernels import decode_plan
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels._pdl import use_pdl
from tilegraph.testing import TOLERANCES

# the grid's 22 MB shapes, then shapes no issue names whose split the dealing changes
SHAPES = "5632x2048,2048x5632,3072x2048,1536x8960,896x4864,2048x11008"


def compare(n: int, k: int, rows: int, dtype: torch.dtype, rounds: int) -> None:
    plan = decode_plan.rule(rows, n, k, dtype, sm_count(torch.device("cuda")))
    if plan.kind != "dot" or plan.config.get("SPLIT_K", 1) < 2:
        print(f"{n} x {k}, {rows} rows: the rule does not split K ({plan.as_dict()})")
        return
    weights, x, out, ref = projection_case(n, k, rows, dtype)
    pdl = use_pdl(x.device, ())
    calls = {}
    for even in (True, False):
        variant = decode_plan.Plan("dot", {**plan.config, "EVEN_SPLIT": even})

        def call(w, variant=variant):
            decode_plan.launch(variant, x, w, out, None, 0.0, None, "none", None, pdl)
        error = poisoned_error(call, weights[0], out, ref)
        assert error <= TOLERANCES[dtype], (n, k, rows, even, error)
        calls["even" if even else "equal"] = call
    calls["cublas"] = lambda w: torch.matmul(x, w.T, out=out)
    times, medians = time_in_rounds(calls, weights, rounds)
    print(f"{n} x {k}, {rows} rows, split {plan.config['SPLIT_K']}: "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; "
          f"even/equal {medians['equal'] / medians['even']:.3f}x", flush=True)


if __name__ == "__main__":
    over_shapes(__doc__, SHAPES, "4,8,16", "even / equal width / cuBLAS", compare)
