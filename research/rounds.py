"""What the split-K and loop probes share: a projection's case (weights rotated past L2, x,
out, the float64 reference), each call checked into a poisoned out, the calls (or decode
plans beside cuBLAS) timed in interleaved rounds (graph replays, us) and the rounds and
medians as one line."""

from __future__ import annotations

import argparse

import torch

from tilegraph.kernels import decode_plan
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels._pdl import use_pdl
from tilegraph.kernels.autotune import _graph_replay_ms, copies_spanning_l2, rotating
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import TOLERANCES, randn, rel_error

COPY_GB_PER_S = 4254  # the H200's measured copy rate: a weight's floor


def projection_case(n: int, k: int, rows: int, dtype: torch.dtype) -> tuple:
    """(weights, x, out, ref): enough (n, k) weights to span L2 (two at least), x (rows, k),
    an out for x W^T, and x W_0^T in float64."""
    weights = [randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
               for _ in range(max(2, copies_spanning_l2(n * k * dtype.itemsize)))]
    x = randn(rows, k, dtype=dtype, device="cuda")
    out = torch.empty(rows, n, dtype=dtype, device="cuda")
    return weights, x, out, linear_ref(x.double(), weights[0].double())


def poisoned_error(call, weight: torch.Tensor, out: torch.Tensor, ref: torch.Tensor) -> float:
    """The relative error of what call(weight) writes into out, poisoned first."""
    out.fill_(float("nan"))
    call(weight)
    torch.cuda.synchronize()
    return rel_error(out, ref)


def time_in_rounds(calls: dict, weights: list, rounds: int) -> tuple[dict, dict]:
    """({name: us of each round}, {name: median us}), each call taking one weight."""
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            times[name].append(_graph_replay_ms(rotating(call, weights), 10) * 1e3)
    return times, {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def tensor_core_rule(n: int, k: int, rows: int, dtype: torch.dtype):
    """(the rule's plan, the SM count) where the rule gives a tensor-core plan; else None,
    said on stdout."""
    sms = sm_count(torch.device("cuda"))
    plan = decode_plan.rule(rows, n, k, dtype, sms)
    if plan.kind != "dot":
        print(f"{n} x {k}, {rows} rows: the rule's plan is no tensor-core plan "
              f"({plan.as_dict()})")
        return None
    return plan, sms


def distinct_dot_plans(found: dict, config: dict) -> dict:
    """{name: Plan} of the tensor-core configs in `found` ({name: config}) that differ from
    `config` and from each other, the first name kept."""
    unique = {}
    for name, c in found.items():
        if c != config and c not in unique.values():
            unique[name] = c
    return {name: decode_plan.Plan("dot", c) for name, c in unique.items()}


def time_plans(n: int, k: int, rows: int, dtype: torch.dtype, rounds: int,
               named: dict) -> tuple[dict, dict]:
    """time_in_rounds over the decode plans in `named` ({name: Plan}, each checked against
    float64 into a poisoned out first) and cuBLAS ("cublas"), PDL where the GPU has it."""
    weights, x, out, ref = projection_case(n, k, rows, dtype)
    pdl = use_pdl(x.device, ())
    calls = {}
    for name, chosen in named.items():
        def call(w, chosen=chosen):
            decode_plan.launch(chosen, x, w, out, None, 0.0, None, "none", None, pdl)
        error = poisoned_error(call, weights[0], out, ref)
        assert error <= TOLERANCES[dtype], (n, k, rows, name, error)
        calls[name] = call
    calls["cublas"] = lambda w: torch.matmul(x, w.T, out=out)
    return time_in_rounds(calls, weights, rounds)


def rounds_line(times: dict, medians: dict, weight_bytes: int) -> str:
    """"a / b / c | ... -> a us (% of the floor), ...": each round, then the medians."""
    floor = weight_bytes / (COPY_GB_PER_S * 1e3)
    rounds = len(next(iter(times.values())))
    each = " | ".join(" / ".join(f"{t[i]:.2f}" for t in times.values()) for i in range(rounds))
    shares = ", ".join(f"{name} {us:.2f} ({100 * floor / us:.0f}%)"
                       for name, us in medians.items())
    return f"{each} -> {shares}"


DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def over_shapes(doc: str, shapes: str, rows: str, columns: str, compare,
                dtype: str = "bf16") -> None:
    """A probe's command line: --shapes N x K pairs, --rows, --dtype (default `dtype`),
    --rounds; then compare(n, k, rows, dtype, rounds) at each point. columns: what its
    rounds time."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--shapes", default=shapes)
    parser.add_argument("--rows", default=rows)
    parser.add_argument("--dtype", default=dtype, choices=list(DTYPES))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, {args.dtype}; us: {columns}, a round each, then "
          f"the medians", flush=True)
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        for count in (int(r) for r in args.rows.split(",")):
            compare(n, k, count, DTYPES[args.dtype], args.rounds)
