"""How much of a few-pair decode attention call is a fixed cost and how much is streaming:
time over a sweep of context lengths, fit t = a + bytes / bandwidth.

    PYTHONPATH=src python3 research/attention_fixed_cost.py [--shapes 28/4x128,32/8x64]
        [--batch 1] [--contexts 2048,4096,8192,16384,32768] [--dtype bf16]

Why: issue 20 asks >= 70% of copy bandwidth wherever a call reads >= 16 MB of cache, and
few pairs at batch 1-8 read 46-59% there (28/4x128 b1 @8192 16.8 MB in 8.6 us on H200,
session 85), where 70% is about 5.6 us. If the slope streams near copy bandwidth, the miss
is a fixed cost a call (two launches: attention and the merge apart; the ramp; the tail);
if the slope is low, the stream itself is short of copy. Variants, each timed as graph
replays of many calls over caches rotated past L2 (bench.compare, as the attention grid):
  apart     the rule tg.decode_attention runs alone (runs merged by a kernel of their own)
  apart pN  the same, each run's first N tiles read into registers before PDL's wait
  in-kernel the rule a model's layer runs (the last run of a pair merges)
  copy      a yardstick: K copied over V (torch), as many bytes moved as attention reads
(Session 110's first run also timed a bare streaming kernel, a program or two an SM summing
the cache in a loop of 2048-element loads: it read at 20-37% of copy, no yardstick at all.)
"""

from __future__ import annotations

import argparse

import torch

from tilegraph.bench.compare import compare
from tilegraph.bench.roofline import ceilings
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels.decode_attention import (
    attention_config,
    decode_attention_ref,
    device_facts,
    launch_decode_attention,
)
from tilegraph.testing import randn

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares t = a + b x over (x, t): (a, b)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    mt = sum(t for _, t in points) / n
    b = (sum((x - mx) * (t - mt) for x, t in points)
         / sum((x - mx) ** 2 for x, _ in points))
    return mt - b * mx, b


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="28/4x128,32/8x64,32/8x128,14/2x64")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--contexts", default="2048,4096,8192,16384,32768")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--preloads", default="0",
                        help="the apart rule with each run's first n tiles read before the "
                             "wait, for each n (0: the rule as it is)")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    copy_gbps = ceilings()["copy_gbps"]
    sms = sm_count(torch.device("cuda"))
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s, {sms} SMs, "
          f"{args.dtype}, batch {args.batch}")
    for shape in args.shapes.split(","):
        heads_part, head_dim = shape.split("x")
        heads, kv_heads = map(int, heads_part.split("/"))
        head_dim = int(head_dim)
        by_variant: dict[str, list[tuple[float, float]]] = {}
        for context in map(int, args.contexts.split(",")):
            q = randn(args.batch, heads, head_dim, dtype=dtype, device="cuda")
            k = randn(args.batch, kv_heads, context, head_dim, dtype=dtype, device="cuda")
            v = randn(args.batch, kv_heads, context, head_dim, dtype=dtype, device="cuda")
            lengths = torch.full((args.batch,), context, device="cuda")
            out = torch.empty_like(q)
            facts = device_facts(dtype, q.device)
            variants = {}
            launches = [(f"apart p{n}" if n else "apart", True, n)
                        for n in map(int, args.preloads.split(","))]
            for name, apart, preload in [*launches, ("in-kernel", False, 0)]:
                config = attention_config(args.batch, kv_heads, heads // kv_heads, head_dim,
                                          context, sms, **facts, merge_apart=apart,
                                          preload=preload)

                def call(q, k, v, lengths, config=config, out=out, scale=head_dim ** -0.5):
                    launch_decode_attention(q, k, v, lengths, scale, out, config)
                    return out
                variants[name] = call
            cache_bytes = 2 * k.numel() * k.element_size()
            result = compare(
                variants, lambda q, k, v, lengths: decode_attention_ref(
                    q.double(), k.double(), v.double(), lengths),
                (q, k, v, lengths), bytes=cache_bytes, graph=True, rotate=(1, 2),
                warmup_ms=10, rep_ms=50,
                # K copied over V: as many bytes moved as attention reads (K and V)
                yardsticks={"copy": lambda q, k, v, lengths: v.copy_(k)})
            row = []
            for r in result.results:
                name = r.name
                if r.stats is None:
                    row.append(f"{name} {r.status}: {r.reason}")
                    continue
                us = r.stats.median * 1e3
                by_variant.setdefault(name, []).append((cache_bytes / 1e6, us))
                row.append(f"{name} {us:.2f} us {cache_bytes / us / 1e3 / copy_gbps:.1%}")
            print(f"  {shape} b{args.batch} @{context} {cache_bytes / 2**20:.1f} MiB: "
                  + ", ".join(row), flush=True)
        for name, points in by_variant.items():
            if len(points) < 2:
                continue
            a, b = fit(points)
            floor16 = 16 * 2**20 / 1e6
            at16 = a + b * floor16
            print(f"  {shape} fit {name}: {a:.2f} us + bytes at {1e3 / b:.0f} GB/s "
                  f"({1e3 / b / copy_gbps:.0%} of copy); at 16 MiB {at16:.2f} us = "
                  f"{floor16 / at16 * 1e3 / copy_gbps:.0%} of copy")


if __name__ == "__main__":
    main()
