"""tg.decode_attention's launch shape, timed as graph replays over caches rotated past L2,
against SDPA on the same cache.

    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep tiles   # tile, stages,
                                                                              # warps, programs
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep rules   # whole rules over
                                                                              # the grid and more
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep preload # first tiles read
                                                                              # before the wait
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep merge   # more runs than
                                                                              # one merge holds
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep blocks  # q heads in
                                                                              # blocks
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep blockrule  # the rule's
                                                            # blocks against 1, 2, 4 and 8
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep big     # stages, programs
                                                            # an SM, tiles, warps on big caches
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep tile    # tiles of twice
                                                # the default positions, on every point above
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep apart   # runs merged by
                                                # a kernel of their own, past the merge's cap
    PYTHONPATH=src python3 research/sweep_decode_attention.py --sweep tiles --points below70 \
        --merge-elements 32768 --tiles 64,128,256   # the grid's points under 70% of copy, with
                                                    # more runs than the merge's cap allows
"""

from __future__ import annotations

import argparse
import itertools
import math

import torch
import torch.nn.functional as F
import triton

from tilegraph.bench import compare
from tilegraph.kernels.decode_attention import (
    MERGE_ELEMENTS,
    attention_config,
    decode_attention_ref,
    default_tile,
    launch_decode_attention,
)
from tilegraph.testing import randn

SHAPES = ((32, 4, 64), (14, 2, 64), (32, 8, 128), (32, 32, 128))  # (heads, kv heads, dim)
TILE_POINTS = [  # the grid's points below SDPA in session 16, and two that were above
    (32, 32, 128, 4, 1024), (32, 32, 128, 8, 1024), (32, 32, 128, 4, 8192),
    (32, 8, 128, 4, 1024), (32, 4, 64, 8, 1024), (32, 4, 64, 8, 8192), (14, 2, 64, 8, 8192),
    (32, 4, 64, 1, 8192), (32, 8, 128, 1, 8192), (14, 2, 64, 1, 8192),
]


# The attention grid's points of >= 16 MB of cache under 70% of copy (H100, session 43).
BELOW70_POINTS = [
    (14, 2, 64, 4, 8192), (14, 2, 64, 8, 8192), (32, 4, 64, 4, 8192), (32, 8, 64, 1, 8192),
    (32, 8, 64, 8, 1024), (32, 8, 128, 4, 1024), (32, 32, 128, 1, 1024),
]
# Few pairs of a wide group: the merge's cap on runs leaves most SMs idle (b1-2 GQA decode).
MERGE_POINTS = [
    (28, 4, 128, 1, 1024), (28, 4, 128, 1, 4096), (28, 4, 128, 1, 8192), (28, 4, 128, 2, 4096),
    (64, 8, 128, 1, 4096), (64, 8, 128, 1, 8192), (32, 4, 64, 1, 4096), (32, 4, 64, 1, 8192),
    (32, 4, 64, 2, 8192), (14, 2, 64, 1, 2048), (14, 2, 64, 1, 4096), (14, 2, 64, 1, 8192),
    (32, 8, 128, 1, 8192),
]
RULE_POINTS = [(*shape, batch, context)
               for shape in ((32, 32, 128), (14, 2, 64), (32, 8, 128), (32, 4, 64), (28, 4, 128),
                             (16, 8, 64))
               for batch in (1, 3, 8, 16) for context in (256, 1024, 4096)]
# The rule's blocks of q heads, on the rule's points, the merge's and layouts named nowhere
# else: Llama-3.2-3B (24/8x128), Qwen2-1.5B (12/2x128), Qwen2.5-14B (40/8x128), Qwen2.5-3B
# (16/2x128), Llama-3.2-1B (32/8x64), at cache sizes the others skip.
BLOCK_RULE_POINTS = (RULE_POINTS + MERGE_POINTS
                     + [(*shape, batch, context)
                        for shape in ((24, 8, 128), (12, 2, 128), (40, 8, 128), (16, 2, 128),
                                      (32, 8, 64))
                        for batch in (1, 2, 4) for context in (128, 512, 2048, 6000)])
# Big caches at batch 2-16 where the rule lost to SDPA in sessions 58-59 (H200; head_dim 128
# most), and head_dim 64 at 8192 positions for contrast.
BIG_POINTS = [
    (32, 32, 128, 3, 1024), (32, 32, 128, 3, 4096), (32, 32, 128, 4, 1024),
    (32, 32, 128, 4, 8192), (32, 32, 128, 8, 1024), (32, 32, 128, 8, 8192),
    (32, 32, 128, 16, 1024), (32, 32, 128, 16, 4096), (28, 4, 128, 3, 6000),
    (28, 4, 128, 8, 2048), (28, 4, 128, 8, 6000), (40, 8, 128, 2, 6000), (40, 8, 128, 4, 2048),
    (32, 8, 128, 4, 8192), (32, 8, 128, 8, 8192), (32, 8, 128, 16, 4096),
    (64, 8, 128, 1, 8192), (12, 2, 128, 4, 6000), (14, 2, 64, 8, 8192), (32, 4, 64, 4, 8192),
    (32, 4, 64, 8, 8192), (32, 8, 64, 8, 8192),
]
# Caches of 16 MB and more read by few (sequence, kv head) pairs, where the last run's merge
# caps the runs (the attention grid's worst share of copy: 28/4x128 b1 @8192, 32.5%, session
# 60), layouts named nowhere else among them (40/8x128, 12/2x128, 16/2x128), and two short
# caches where a second kernel may cost more than it saves.
APART_POINTS = [
    (28, 4, 128, 1, 8192), (28, 4, 128, 1, 4096), (28, 4, 128, 2, 8192), (28, 4, 128, 4, 8192),
    (64, 8, 128, 1, 8192), (32, 8, 128, 1, 8192), (32, 8, 128, 4, 4096), (32, 4, 64, 1, 8192),
    (14, 2, 64, 4, 8192), (32, 8, 64, 1, 8192), (40, 8, 128, 1, 6000), (12, 2, 128, 1, 8192),
    (16, 2, 128, 2, 6000), (28, 4, 128, 1, 1024), (32, 8, 128, 1, 1024),
]
RULES = {  # name: (tile for head_dim <= 64, tile above, stages, programs an SM)
    "s3x1": (128, 64, 3, 1), "s4x1": (128, 64, 4, 1), "s4x2": (128, 64, 4, 2),
    "s4x2-64": (128, 64, 4, None), "T128s3x1": (128, 128, 3, 1),
}


def rule_configs(base: dict, pairs: int, max_seq: int):
    for name, (tile_64, tile_128, stages, per_sm) in RULES.items():
        block_t = tile_64 if base["BLOCK_D"] <= 64 else tile_128
        per_sm = per_sm or (2 if base["BLOCK_D"] <= 64 else 1)
        merge_runs = MERGE_ELEMENTS // (base["GROUP_P2"] * base["BLOCK_D"])
        splits = max(1, min(triton.cdiv(per_sm * 132, pairs), merge_runs,
                            triton.cdiv(max_seq, block_t)))
        yield name, {**base, "BLOCK_T": block_t, "num_stages": stages, "SPLITS": splits,
                     "BLOCK_SPLITS": triton.next_power_of_2(splits)}


def tile_configs(base: dict, pairs: int, max_seq: int, tiles=(64, 128),
                 merge_elements: int = MERGE_ELEMENTS):
    for block_t, stages, warps, per_sm in itertools.product(tiles, (2, 3, 4), (4, 8),
                                                            (1, 2, 4)):
        # keys and values, `stages` deep, in shared memory: past ~220 KB it cannot launch
        if 2 * block_t * base["BLOCK_D"] * 2 * stages > 220 * 1024:
            continue
        merge_runs = merge_elements // (base["GROUP_P2"] * base["BLOCK_D"])
        splits = max(1, min(triton.cdiv(per_sm * 132, pairs), merge_runs,
                            triton.cdiv(max_seq, block_t)))
        yield (f"T{block_t} s{stages} w{warps} x{per_sm} S{splits}",
               {**base, "BLOCK_T": block_t, "num_stages": stages, "num_warps": warps,
                "SPLITS": splits, "BLOCK_SPLITS": triton.next_power_of_2(splits)})


def preload_configs(base: dict, pairs: int, max_seq: int):
    """The rule and 4 stages with each run's first tile read before the wait (alone, the
    kernel before writes no cache row)."""
    for stages in (2, 3, 4):
        yield f"preload s{stages}", {**base, "PRELOAD": True, "num_stages": stages}
    yield "s2", {**base, "num_stages": 2}


def merge_configs(shape: tuple, blocks: bool = False):
    """The rule with its runs' cap raised to 2-8 chunks of the runs one merge holds; with
    `blocks`, each pair's q heads in 2 or 4 blocks, a program and a merge each."""
    if blocks:
        for heads, chunks, per_sm in ((2, 1, 1), (2, 2, 1), (2, 2, 2), (4, 1, 1), (4, 2, 2)):
            yield (f"blocks {heads} chunks {chunks} x{per_sm}",
                   attention_config(*shape, head_blocks=heads, merge_chunks=chunks,
                                    programs_per_sm=per_sm))
        yield "chunks 2", attention_config(*shape, merge_chunks=2)
        return
    for chunks in (2, 4, 8):
        yield f"chunks {chunks}", attention_config(*shape, merge_chunks=chunks)
    yield "chunks 4 x2", attention_config(*shape, merge_chunks=4, programs_per_sm=2)
    yield "chunks 4 preload s4", attention_config(*shape, merge_chunks=4, preload=True,
                                                  stages=4)


def block_configs(shape: tuple, base: dict):
    """Each pair's q heads in 1, 2, 4 or 8 blocks (as many as the group allows), where not
    the rule's."""
    seen = [base]
    for blocks in (1, 2, 4, 8):
        config = attention_config(*shape, head_blocks=blocks)
        if config not in seen:
            seen.append(config)
            yield f"blocks {config['HEAD_BLOCKS']}", config


def big_configs(shape: tuple):
    """Stages, programs an SM, tiles of twice the default positions and 8 warps, each
    through attention_config (so the merge's cap and the blocks rule still apply)."""
    seen = [attention_config(*shape)]
    tile = 2 * default_tile(shape[3])
    for name, variant, warps in (
            ("s4", {"stages": 4}, 4), ("s2", {"stages": 2}, 4),
            ("x2", {"programs_per_sm": 2}, 4), ("s4 x2", {"stages": 4, "programs_per_sm": 2}, 4),
            ("x4", {"programs_per_sm": 4}, 4), ("s2 x4", {"stages": 2, "programs_per_sm": 4}, 4),
            (f"T{tile} s2", {"tile": tile, "stages": 2}, 4), (f"T{tile}", {"tile": tile}, 4),
            ("w8", {}, 8), ("s4 w8", {"stages": 4}, 8), ("s4 x2 w8",
                                                        {"stages": 4, "programs_per_sm": 2}, 8)):
        config = {**attention_config(*shape, **variant), "num_warps": warps}
        if config not in seen:
            seen.append(config)
            yield f"{name} S{config['SPLITS']}", config


def double_tile_configs(shape: tuple):
    """Tiles of twice the default positions, 3 and 2 stages deep, and 4 stages of the
    default tile."""
    seen = [attention_config(*shape)]
    tile = 2 * default_tile(shape[3])
    for name, variant in ((f"T{tile}", {"tile": tile}), (f"T{tile} s2", {"tile": tile,
                                                                        "stages": 2}),
                          ("s4", {"stages": 4})):
        config = attention_config(*shape, **variant)
        if config not in seen:
            seen.append(config)
            yield f"{name} S{config['SPLITS']}", config


def apart_configs(shape: tuple):
    """Runs merged by a kernel of their own (merge_apart: as many runs as fill the SMs, one
    block of q heads), 1-2 programs an SM, 3-4 stages, tiles of twice the positions."""
    seen = [attention_config(*shape)]
    tile = 2 * default_tile(shape[3])
    for name, variant in (("apart", {}), ("apart x2", {"programs_per_sm": 2}),
                          ("apart s4", {"stages": 4}),
                          ("apart x2 s4", {"programs_per_sm": 2, "stages": 4}),
                          (f"apart T{tile}", {"tile": tile}),
                          ("apart x2 s2", {"programs_per_sm": 2, "stages": 2})):
        config = attention_config(*shape, merge_apart=True, **variant)
        if config not in seen:
            seen.append(config)
            yield f"{name} S{config['SPLITS']}", config


def sweep_point(heads: int, kv_heads: int, head_dim: int, batch: int, context: int,
                sweep: str, tiles=(64, 128), merge_elements: int = MERGE_ELEMENTS
                ) -> dict[str, float]:
    """Prints the point's table; returns each variant's speed-up over SDPA."""
    q = randn(batch, heads, head_dim, dtype=torch.bfloat16, device="cuda")
    k = randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
    v = randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
    lengths = torch.full((batch,), context, device="cuda")
    out = torch.empty_like(q)
    shape = (batch, kv_heads, heads // kv_heads, head_dim, context, 132)
    base = attention_config(*shape)
    variants = {"SDPA": lambda q, k, v, n: F.scaled_dot_product_attention(
        q[:, :, None], k, v, enable_gqa=heads != kv_heads)[:, :, 0],
        "default": lambda q, k, v, n: launch_decode_attention(
            q, k, v, n, head_dim ** -0.5, out) or out}
    pairs = batch * kv_heads
    configs = {
        "tiles": lambda: tile_configs(base, pairs, context, tiles, merge_elements),
        "rules": lambda: rule_configs(base, pairs, context),
        "preload": lambda: preload_configs(base, pairs, context),
        "merge": lambda: merge_configs(shape),
        "blocks": lambda: merge_configs(shape, blocks=True),
        "blockrule": lambda: block_configs(shape, base),
        "big": lambda: big_configs(shape),
        "tile": lambda: double_tile_configs(shape),
        "apart": lambda: apart_configs(shape),
    }[sweep]()
    for name, config in configs:
        variants[name] = (lambda c: lambda q, k, v, n: launch_decode_attention(
            q, k, v, n, head_dim ** -0.5, out, c) or out)(config)
    result = compare(variants, lambda q, k, v, n: decode_attention_ref(
        q.double(), k.double(), v.double(), n), (q, k, v, lengths),
        bytes=2 * k.numel() * 2, baseline="SDPA", graph=True, rotate=(1, 2),
        warmup_ms=5, rep_ms=25)
    rows = sorted((r for r in result.results if r.stats is not None),
                  key=lambda r: r.stats.median)
    print(f"\n{heads}/{kv_heads}x{head_dim} batch {batch} context {context} "
          f"({2 * k.numel() * 2 / 2**20:.1f} MB), default {base}", flush=True)
    shown = rows if sweep != "tiles" else rows[:6]
    for r in shown + [r for r in rows if r.name in ("SDPA", "default") and r not in shown]:
        print(f"  {r.name:22s} {r.stats.median * 1e3:7.2f} us  {r.pct_ceiling:5.1f}% "
              f"x{r.speedup:.2f}")
    return {r.name: r.speedup for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweep", default="rules", choices=("tiles", "rules", "preload",
                                                             "merge", "blocks", "blockrule", "big",
                                                             "tile", "apart"))
    parser.add_argument("--points", choices=("tiles", "rules", "below70", "merge",
                                             "blockrule", "big", "apart"),
                        help="which points (default: the sweep's own)")
    parser.add_argument("--tiles", default="64,128", help="tiles: positions a tile to try")
    parser.add_argument("--merge-elements", type=int, default=MERGE_ELEMENTS,
                        help="tiles: the merge's cap on runs x q heads x head_dim")
    args = parser.parse_args()
    points = {"tiles": TILE_POINTS, "rules": RULE_POINTS, "preload": RULE_POINTS,
              "below70": BELOW70_POINTS, "merge": MERGE_POINTS,
              "blocks": MERGE_POINTS, "blockrule": BLOCK_RULE_POINTS, "big": BIG_POINTS,
              "tile": BLOCK_RULE_POINTS + BIG_POINTS, "apart": APART_POINTS}
    points = points[args.points or args.sweep]
    tiles = tuple(int(t) for t in args.tiles.split(","))
    speedups: dict[str, list[float]] = {}
    for point in points:
        for name, speedup in sweep_point(*point, args.sweep, tiles,
                                         args.merge_elements).items():
            speedups.setdefault(name, []).append(speedup)
    print(f"\n{'variant':22s} points  geomean x SDPA  slower  min")
    for name, values in speedups.items():
        geomean = math.exp(sum(map(math.log, values)) / len(values))
        print(f"{name:22s} {len(values):6d}  {geomean:14.3f}  {sum(v < 1 for v in values):6d}  "
              f"{min(values):.2f}")


if __name__ == "__main__":
    main()
