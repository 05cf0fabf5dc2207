"""Tensor-core tiles of 4-16 rows (_dot_rows_kernel) against the rule's plan: alone over
weights rotated past L2, with each projection's fused parts, and forced into whole Llama
decode steps. Session 68 asked whether the weight-left tile's programs that do not fit one
wave cost a second wave of a few programs (they do: WEIGHT_LEFT_SLOTS in decode_plan).

    PYTHONPATH=src python3 research/probe_dot_rows_waves.py lone --rows 8 [--only NAMES]
    PYTHONPATH=src python3 research/probe_dot_rows_waves.py step --model tinyllama --batch 8 \
        --variants "wl st2" --groups gate/up

lone: us a call (graph replays, PDL on) of the rule (tg.linear), cuBLAS and each variant,
with the relative error against float64 and the compiled kernel's shared memory. step: ms a
step of model.decode captured with the variant recorded for the named projections (as
`tilegraph tune` records a plan), the rule's plans between variants so drift shows.

The same session's stream-K kernel (a fixed grid of programs dividing a projection's weight
tiles evenly, one pipelined loop a program; its "s..." variants) lost to the rule almost
everywhere: kernel and variants at f28abc1 (notes/kernels.md, session 68).
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from sweep_dot_rows import L2_SPAN, rotated  # research/ is the script's own folder
from sweep_gemv import MORE_SHAPES, SHAPES

import tilegraph as tg
from tilegraph.bench.roofline import ceilings
from tilegraph.bench.timing import measure
from tilegraph.kernels import decode_plan
from tilegraph.kernels._dot_rows import launch_dot_rows
from tilegraph.kernels.decode_plan import Plan
from tilegraph.kernels.linear import linear_ref
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig
from tilegraph.testing import rel_error

# Weights whose 64-row blocks number a little more than two an SM (the weight-left tile's
# programs that fit at three stages): a second wave of a few programs.
TAIL_SHAPES = (("qwen2.5-3b gate/up", 22016, 2048, "swiglu"), ("tail 19000x2048", 19000, 2048,
                                                                  "norm"),
               # session 69: short rows whose blocks fill under one wave (Qwen3-0.6B's shape)
               ("qwen3-0.6b gate/up", 6144, 1024, "swiglu"))


def weight_left(stages, split=1, block_n=64) -> dict:
    """_dot_rows_kernel's weight-left tile (the rule's past the whole-slice bound)."""
    config = {"BLOCK_N": block_n, "BLOCK_K": 128, "num_warps": 4, "num_stages": stages,
              "W_LHS": True}
    return {**config, "SPLIT_K": split} if split > 1 else config


VARIANTS = {
    "wl st2": weight_left(2), "wl st3": weight_left(3), "wl st4": weight_left(4),
    "wl st2 split2": weight_left(2, 2), "wl st3 split2": weight_left(3, 2),
    "wl st2 bn32": weight_left(2, block_n=32), "wl st3 bn32": weight_left(3, block_n=32),
    # the rule's splits (TinyLlama's down 8, q|k|v 6; Llama-3.2-1B's q|k|v 5) a stage deeper
    "wl st4 split8": weight_left(4, 8), "wl st4 split6": weight_left(4, 6),
    "wl st4 split5": weight_left(4, 5),
    # session 69: splits that fill three programs an SM at two stages where two an SM at
    # three stages leave SMs idle (rows of 896-1024 columns)
    "wl st2 split3": weight_left(2, 3), "wl st2 split4": weight_left(2, 4),
    "wl st3 split3": weight_left(3, 3), "wl st2 split8": weight_left(2, 8),
    # whole_slice_config's tiles past its bound of about two programs an SM (K = 2048)
    "ws64x256 split8": {"BLOCK_N": 64, "BLOCK_K": 256, "W_LHS": True, "num_warps": 4,
                        "num_stages": 1, "SPLIT_K": 8},
    "ws32x512 split4": {"BLOCK_N": 32, "BLOCK_K": 512, "num_warps": 4, "num_stages": 1,
                        "SPLIT_K": 4},
}


def calls(x, out, g, activation, r, chosen) -> dict:
    """variant -> a call of weight w: cuBLAS (plain), the rule's plan and each chosen
    variant, with the fused parts."""
    fused = dict(norm_weight=g, residual=r, activation=None if activation == "none" else activation)

    def launcher(config):
        return lambda w: launch_dot_rows(x, w, out, g, 1e-6, None, activation, r, config, True)

    return {"cublas": lambda w: F.linear(x, w),
            "rule": lambda w: tg.linear(x, w, out=out, **fused),
            **{variant: launcher(VARIANTS[variant]) for variant in chosen}}


def lone(args) -> None:
    copy_gbps = ceilings()["copy_gbps"]
    dtype = torch.bfloat16
    for name, n, k, part in SHAPES + MORE_SHAPES + TAIL_SHAPES:
        if args.only and not any(part in name for part in args.only.split(",")):
            continue
        torch.cuda.empty_cache()
        copies = max(2, -(-L2_SPAN // (n * k * 2)))
        weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
                   for _ in range(copies)]
        g = torch.rand(k, device="cuda", dtype=dtype) + 0.5 if part != "residual" else None
        n_out = n // 2 if part == "swiglu" else n
        activation = "swiglu" if part == "swiglu" else "none"
        for rows in args.rows:
            x = torch.randn(rows, k, device="cuda", dtype=dtype)
            r = (torch.randn(rows, n_out, device="cuda", dtype=dtype)
                 if part == "residual" else None)
            out = torch.empty(rows, n_out, device="cuda", dtype=dtype)
            ref = linear_ref(x.double(), weights[0].double(),
                             norm_weight=None if g is None else g.double(),
                             activation=None if activation == "none" else activation,
                             residual=None if r is None else r.double())
            floor_us = (n * k + rows * (k + 2 * n_out)) * 2 / copy_gbps * 1e-3
            variants = calls(x, out, g, activation, r, args.variants or VARIANTS)
            line = []
            for variant, fn in variants.items():
                try:
                    out.fill_(float("nan"))
                    launched = fn(weights[0])
                    torch.cuda.synchronize()
                    shared = getattr(getattr(launched, "metadata", None), "shared", None)
                    err = 0.0 if variant == "cublas" else rel_error(out.double(), ref)
                    s = measure(rotated(fn, weights), warmup_ms=3, rep_ms=10, graph=True)
                    us = s.median * 1e3
                    line.append((variant, us, err, shared))
                except Exception as e:  # out of resources and the like: note and go on
                    line.append((variant, float("nan"), repr(e)[:80], None))
            rule_us = {v: u for v, u, _, _ in line}["rule"]
            print(f"{name:22s} {n}x{k} {part:8s} rows {rows:2d} floor {floor_us:6.2f} us",
                  flush=True)
            for variant, us, err, shared in line:
                err_text = f"{err:.1e}" if isinstance(err, float) else err
                print(f"    {variant:22s} {us:7.2f} us {100 * floor_us / us:5.1f}% "
                      f"x{rule_us / us:5.3f} err {err_text} smem {shared}", flush=True)


def step(args) -> None:
    overrides = {field: int(value) for field, value in (item.split("=") for item in args.set)}
    config = LlamaConfig.from_hf(hf_config(args.model, **overrides))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(args.batch, 2048)
    tokens = torch.randint(0, config.vocab_size, (args.batch,), device="cuda")
    positions = torch.full((args.batch,), args.context, device="cuda")
    d, ffn, dtype = config.dim, config.ffn_dim, torch.bfloat16
    named = {"q|k|v": ((config.n_heads + 2 * config.n_kv_heads) * config.head_dim, d),
             "output": (d, config.n_heads * config.head_dim),
             "gate/up": (2 * ffn, d), "down": (d, ffn),
             "head": (config.vocab_size, d)}
    rule = {shape: decode_plan.rule(args.batch, *shape, dtype, None)
            for shape in named.values()}
    outputs = {}

    def step_ms(plans) -> float:
        for (n, k), chosen in {**rule, **plans}.items():
            decode_plan.record(args.batch, n, k, dtype, chosen)
        graph = tg.capture(model.decode, tokens, positions, cache)
        for _ in range(20):
            graph.replay()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(5):
            start.record()
            for _ in range(100):
                graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 100)
        outputs["last"] = graph.outputs.float().clone()
        return sorted(times)[2]

    print(f"{args.model} {args.set} batch {args.batch}, position {args.context}; rule: "
          + "; ".join(f"{n}x{k} {p.kind} {p.config}" for (n, k), p in rule.items()),
          flush=True)
    print(f"  {'rule':40s} {step_ms({}):.4f} ms", flush=True)
    reference = outputs["last"]
    groups = [tuple(group.split("+")) for group in args.groups]
    for variant in args.variants or ["wl st2"]:
        for group in groups:
            plans = {named[p]: Plan("dot", VARIANTS[variant]) for p in group}
            ms = step_ms(plans)
            error = rel_error(outputs["last"], reference)
            print(f"  {variant + ' ' + '+'.join(group):40s} {ms:.4f} ms   (rule again "
                  f"{step_ms({}):.4f}; logits' error {error:.1e})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("lone", "step"))
    parser.add_argument("--rows", type=lambda s: [int(v) for v in s.split(",")], default=[8])
    parser.add_argument("--only", default=None,
                        help="comma-separated substrings of the shape names to run")
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=INT",
                        help="step: transformers config fields to replace")
    parser.add_argument("--groups", nargs="*", metavar="NAME+NAME",
                        default=["gate/up", "down", "gate/up+down", "q|k|v+output",
                                 "q|k|v+output+gate/up+down", "q|k|v+output+gate/up+down+head"],
                        help="step: projections given the variant together")
    parser.add_argument("--variants", nargs="*", default=None,
                        help="names in VARIANTS (lone: all by default)")
    args = parser.parse_args()
    start = time.time()
    (lone if args.mode == "lone" else step)(args)
    print(f"[{time.time() - start:.0f} s]")


if __name__ == "__main__":
    main()
