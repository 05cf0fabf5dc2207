"""What tg.linear's first call on an untuned shape times and keeps (decode_plan.plain_plan:
the rule's plan, its other launch at 1-2 rows, cuBLAS), each candidate's median time printed,
in a fresh tuning cache each repeat: whether a pick is settled by a margin or by the noise.

Session 84's grids ran 5632 x 2048 at one row 7% slower in fp16 than in bf16 (6.82 against
6.31 us, both the GEMV; results/2026-12-02-session84/README.md), with no record of which
launch each had kept.

Session 85: at 2-16 rows on weights L2 holds plain_plan also times the one-row GEMV's tile
(four rows a program); this prints what each shape and row count keeps.

    PYTHONPATH=src python3 research/probe_plain_pick.py [--shape 5632x2048[,NxK...]]
        [--rows 1[,R...]] [--dtypes fp16,bf16] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import torch

from tilegraph.kernels import autotune, decode_plan
from tilegraph.kernels._launch import sm_count

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def forget_picks() -> None:
    """Every tuner's picks forgotten in this process; with a fresh TILEGRAPH_CACHE_DIR, on
    disk too: the next call times its candidates again."""
    for tuner in autotune._TUNERS:
        tuner._memo.clear()
        tuner._disk_loaded = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="5632x2048", help="N x K of the weights, commas")
    parser.add_argument("--rows", default="1", help="row counts, commas")
    parser.add_argument("--dtypes", default="fp16,bf16")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    for shape in args.shape.split(","):
        for rows in (int(r) for r in args.rows.split(",")):
            pick(*(int(v) for v in shape.split("x")), rows, args.dtypes.split(","),
                 args.repeats)


def pick(N: int, K: int, rows: int, dtypes: list[str], repeats: int) -> None:
    print(f"{torch.cuda.get_device_name()}: {N} x {K}, {rows} rows")
    for repeat in range(repeats):
        for name in dtypes:
            dtype = DTYPES[name]
            # a fresh cache: the pick is timed again, not read back
            os.environ["TILEGRAPH_CACHE_DIR"] = tempfile.mkdtemp(prefix="pick-")
            forget_picks()
            x = torch.randn(rows, K, device="cuda", dtype=dtype)
            w = torch.randn(N, K, device="cuda", dtype=dtype) * K**-0.5
            out = torch.empty(rows, N, device="cuda", dtype=dtype)
            rule = decode_plan.rule(rows, N, K, dtype, sm_count(x.device))
            print(f"  {name} repeat {repeat + 1}: rule {rule.as_dict()}")
            kept = decode_plan.plain_plan(x, w, None, out)
            for timings in decode_plan._plain.timings.values():  # this search's only
                for config, ms in sorted(timings, key=lambda pair: pair[1]):
                    print(f"    {ms * 1e3:8.2f} us  {config}")
            decode_plan._plain.timings.clear()
            print(f"  {name} repeat {repeat + 1}: kept {kept.as_dict()}", flush=True)


if __name__ == "__main__":
    main()
