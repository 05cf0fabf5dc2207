"""The decode kernels with a K loop their launch never runs compiled out, against the kernels
as they are: the tensor-core kernel where every slice of K is one BLOCK_K step
(`_dot_rows.COMPILE_ONE_STEP`), the one-row GEMV's split tile where the row fits its first
tile (`_matvec.COMPILE_ONE_TILE`); on the rule's plan of each shape, beside cuBLAS, in
interleaved rounds (us, median of graph replays over
weights rotated past L2, PDL on: each replay a chain of the same projection, so the next
launch's programs need room beside this one's to prefetch).

Why: a loop never run still holds its registers. 2048^2's whole-slice tile (64 x 256, split
8) compiles to 171 registers a thread with the loop and 64 without (sm_90, Triton 3.6): two
programs an SM, and no third beside them, where eight fit by registers and five by shared
memory; the GEMV's 2048-column tile 127-128 against 86-96, Qwen2-0.5B's 896-column one
76-91 against 48-61. A probe kernel of the whole-slice tile without the loop summed 16
rows in 4.31 us where the library took 4.82 (results/2026-12-03-session94/, file 9).

    PYTHONPATH=src python3 research/probe_one_step.py [--shapes 2048x2048,...]
        [--rows 1,4,8,16] [--dtype bf16] [--rounds 3]
"""

from __future__ import annotations

import torch
import triton
from rounds import over_shapes, poisoned_error, projection_case, rounds_line, time_in_rounds

from tilegraph.kernels import _dot_rows, _matvec, decode_plan
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels._pdl import use_pdl
from tilegraph.testing import TOLERANCES

# the grid's plans of one step or one tile (2048^2, 256 x 2048), then shapes no issue names
# whose rule is one: Qwen2-0.5B's q|k|v and output, 1024-, 1536- and 2048-wide layers
SHAPES = "2048x2048,256x2048,1152x896,896x896,1024x1024,1536x1536,2048x1024"


def loop_setting(plan: decode_plan.Plan, k: int) -> tuple | None:
    """(module, setting) that compiles out the K loop `plan` never runs, or None."""
    config = plan.config
    if plan.kind == "dot" and config.get("SPLIT_K", 1) >= triton.cdiv(k, config["BLOCK_K"]):
        return _dot_rows, "COMPILE_ONE_STEP"
    if (plan.kind == "gemv" and "PROGRAMS_PER_SM" not in config and "TAIL" not in config
            and k <= config["SPLIT"] * config["CHUNK"]):
        return _matvec, "COMPILE_ONE_TILE"
    return None


def compare(n: int, k: int, rows: int, dtype: torch.dtype, rounds: int) -> None:
    plan = decode_plan.rule(rows, n, k, dtype, sm_count(torch.device("cuda")))
    setting = loop_setting(plan, k)
    if setting is None:
        print(f"{n} x {k}, {rows} rows: the rule's plan runs its loop ({plan.as_dict()})")
        return
    module, name = setting
    weights, x, out, ref = projection_case(n, k, rows, dtype)
    pdl = use_pdl(x.device, ())
    calls = {}
    for loop_out in (False, True):
        def call(w, loop_out=loop_out):
            setattr(module, name, loop_out)
            try:
                decode_plan.launch(plan, x, w, out, None, 0.0, None, "none", None, pdl)
            finally:
                setattr(module, name, False)
        error = poisoned_error(call, weights[0], out, ref)
        assert error <= TOLERANCES[dtype], (n, k, rows, loop_out, error)
        calls["out" if loop_out else "kept"] = call
    calls["cublas"] = lambda w: torch.matmul(x, w.T, out=out)
    times, medians = time_in_rounds(calls, weights, rounds)
    print(f"{n} x {k}, {rows} rows, {plan.as_dict()}: "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; "
          f"out/kept {medians['kept'] / medians['out']:.3f}x", flush=True)


if __name__ == "__main__":
    over_shapes(__doc__, SHAPES, "1,4,8,16", "loop kept / loop out / cuBLAS", compare)
