"""Projection tiles forced into a whole Llama decode step: which plan of the MLP's
projections makes the captured step fastest, as the step runs them (each kernel overlapping
its neighbours under PDL), rather than alone over rotated weights as `tilegraph tune` times.

    PYTHONPATH=src python3 research/probe_model_tiles.py --model tinyllama --batch 8
    ... --batch 1 --halves   # every one-row projection's GEMV tile at half / twice the rows
    ... --batch 1 --persistent   # gate/up and down in persistent tiles other than the rule's
    ... --batch 8 --only BK128   # the variants whose name holds BK128

Each variant records plans for the gate/up and down shapes in the tuned-plan store (as
`tilegraph tune` would), captures model.decode again and times 200 replays; the rule's own
plan runs between the variants, so drift shows. Prints ms a step per variant.
"""

from __future__ import annotations

import argparse

import torch

import tilegraph as tg
from tilegraph.kernels import decode_plan
from tilegraph.kernels._matvec import FIT, persistent_gemv_config
from tilegraph.kernels.decode_plan import Plan
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig
from tilegraph.testing import rel_error


def gemv(block_n, block_k, warps, chunk=128):
    return Plan("gemv", {"BLOCK_N": block_n, "SPLIT": block_k // chunk, "CHUNK": chunk,
                         "num_warps": warps, "num_stages": 1})


def dot(block_n, block_k, stages, split=1, warps=4):
    config = {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": warps, "num_stages": stages}
    return Plan("dot", {**config, "SPLIT_K": split} if split > 1 else config)


def variants(batch, d, ffn):
    """(name, {(N, K): plan}) for the gate/up (2 ffn x d) and down (d x ffn) projections.
    Session 30 ran them against the rule of its start (16-bit tiles four stages deep
    without split-K); the rule now takes three, so "gate/up BN64 S3" is the rule's own."""
    up, down = (2 * ffn, d), (d, ffn)
    k_up = min(4096, 1 << (d - 1).bit_length())
    k_down = 1 << (ffn - 1).bit_length()
    if batch == 1:  # SwiGLU pairs need an even number of rows a program
        return [("gate/up 32 values a thread", {up: gemv(max(2, 4096 // k_up), k_up, 4)}),
                ("gate/up 128 values a thread", {up: gemv(max(2, 16384 // k_up), k_up, 4)}),
                # as many values a thread as the rule, programs of other sizes (session 48)
                ("gate/up 2 warps", {up: gemv(max(2, 4096 // k_up), k_up, 2)}),
                ("gate/up 8 warps", {up: gemv(max(2, 16384 // k_up), k_up, 8)}),
                ("down 8 warps", {down: gemv(8, 4096, 8)}),
                # one tile a program: every row read before the wait (session 31)
                ("down whole rows", {down: gemv(max(1, 16384 // k_down), k_down, 4)})]
    return [("gate/up BN32 S4", {up: dot(32, 256, 4)}),
            ("gate/up BN32 S3", {up: dot(32, 256, 3)}),
            ("gate/up BN64 S2", {up: dot(64, 256, 2)}),
            ("gate/up BN64 S3", {up: dot(64, 256, 3)}),
            ("gate/up BN16 S4", {up: dot(16, 256, 4)}),
            ("down BN32 split 4", {down: dot(32, 256, 3, 4)}),
            # the x-left tile plain_plan times beside the weight-left one (session 100)
            ("gate/up BN32 BK128 S3", {up: dot(32, 128, 3)})]


def halves(named, rule):
    """(name, {(N, K): plan}) for each one-row GEMV projection (`named`: name -> shape) with
    half and with twice the rule's rows a program (as many warps: half / twice the values a
    thread)."""
    out = []
    for name, shape in named.items():
        if rule[shape].kind != "gemv":
            continue
        rows = rule[shape].config["BLOCK_N"]
        least = 2 if name in ("gate/up", "q|k|v") else 1  # SwiGLU's / rotary's pairs
        for changed, label in ((rows // 2, "half"), (rows * 2, "twice")):
            if least <= changed <= 16:
                config = {**rule[shape].config, "BLOCK_N": changed}
                out.append((f"{name} {label} the rows", {shape: Plan("gemv", config)}))
    return out


# (tile bytes, warps, programs an SM) of persistent one-row GEMVs forced onto gate/up and
# down: tune's fixed variants, then as many an SM as fit (FIT) with other tiles and warps.
PERSISTENT_TRIED = (*decode_plan.PERSISTENT_VARIANTS, (32 * 1024, 16, FIT), (64 * 1024, 16, FIT),
                    (16 * 1024, 8, FIT), (16 * 1024, 4, FIT), (64 * 1024, 16, 2))


def persistent(named, rule):
    """(name, {(N, K): plan}) for gate/up and down in each of PERSISTENT_TRIED's tiles that
    is neither the rule's nor one tried already (short rows' tiles hold at least 2 rows)."""
    out, seen = [], []
    for name in ("gate/up", "down"):
        shape = named[name]
        for tile, warps, per_sm in PERSISTENT_TRIED:
            config = persistent_gemv_config(*shape, tile, warps, per_sm)
            if config != rule[shape].config and (shape, config) not in seen:
                seen.append((shape, config))
                out.append((f"{name} {tile // 1024}K {warps}w {per_sm}/SM",
                            {shape: Plan("gemv", config)}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=INT",
                        help="transformers config fields to replace, e.g. hidden_size=1536")
    parser.add_argument("--halves", action="store_true",
                        help="one-row GEMV tiles of every projection at half / twice the rows")
    parser.add_argument("--persistent", action="store_true",
                        help="one-row gate/up and down in persistent tiles other than the rule's")
    parser.add_argument("--only", default="", help="the variants whose name holds this")
    args = parser.parse_args()
    overrides = {field: int(value) for field, value in (item.split("=") for item in args.set)}
    config = LlamaConfig.from_hf(hf_config(args.model, **overrides))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(args.batch, 2048)
    tokens = torch.randint(0, config.vocab_size, (args.batch,), device="cuda")
    positions = torch.full((args.batch,), args.context, device="cuda")
    d, ffn, dtype = config.dim, config.ffn_dim, torch.bfloat16
    qkv = ((config.n_heads + 2 * config.n_kv_heads) * config.head_dim, d)
    named = {"q|k|v": qkv, "output": (d, config.n_heads * config.head_dim),
             "gate/up": (2 * ffn, d), "down": (d, ffn)}
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
        for _ in range(3):
            start.record()
            for _ in range(100):
                graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 100)
        outputs["last"] = graph.outputs.float().clone()
        return sorted(times)[1]

    print(f"{args.model} {args.set} batch {args.batch}, position {args.context}; rule: "
          + "; ".join(f"{n}x{k} {p}" for (n, k), p in rule.items()))
    print(f"  {'rule':28s} {step_ms({}):.4f} ms")
    reference = outputs["last"]
    listed = (halves(named, rule) if args.halves else persistent(named, rule) if args.persistent
              else variants(args.batch, d, ffn))
    for name, plans in (item for item in listed if args.only in item[0]):
        ms = step_ms(plans)
        error = rel_error(outputs["last"], reference)
        print(f"  {name:28s} {ms:.4f} ms   (rule again {step_ms({}):.4f}; logits' relative "
              f"error {error:.1e})", flush=True)


if __name__ == "__main__":
    main()
