"""tg.decode_attention's launch shape: tile length, pipeline depth, warps and programs an SM,
timed as graph replays over caches rotated past L2, against SDPA on the same cache.

    PYTHONPATH=src python3 research/sweep_decode_attention.py
"""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
import triton

from tilegraph.bench import compare
from tilegraph.kernels.decode_attention import (
    MERGE_ELEMENTS,
    attention_config,
    decode_attention_ref,
    launch_decode_attention,
)
from tilegraph.testing import randn

POINTS = [  # (heads, kv heads, head_dim, batch, context)
    (32, 4, 64, 1, 256), (32, 4, 64, 1, 2048), (14, 2, 64, 1, 8192), (32, 32, 128, 1, 1024),
    (32, 8, 128, 8, 1024), (32, 8, 128, 4, 8192),
]


def configs(base: dict, pairs: int, max_seq: int):
    for block_t, stages, warps, per_sm in itertools.product((32, 64, 128), (2, 3), (4, 8),
                                                            (1, 2)):
        limit = MERGE_ELEMENTS // (base["GROUP_P2"] * base["BLOCK_D"])
        splits = max(1, min(triton.cdiv(per_sm * 132, pairs), limit,
                            triton.cdiv(max_seq, block_t)))
        yield (f"T{block_t} s{stages} w{warps} x{per_sm}",
               {**base, "BLOCK_T": block_t, "num_stages": stages, "num_warps": warps,
                "SPLITS": splits})


def sweep_point(heads: int, kv_heads: int, head_dim: int, batch: int, context: int) -> None:
    q = randn(batch, heads, head_dim, dtype=torch.bfloat16, device="cuda")
    k = randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
    v = randn(batch, kv_heads, context, head_dim, dtype=torch.bfloat16, device="cuda")
    lengths = torch.full((batch,), context, device="cuda")
    out = torch.empty_like(q)
    base = attention_config(batch, kv_heads, heads // kv_heads, head_dim, context, 132)
    variants = {"SDPA": lambda q, k, v, n: F.scaled_dot_product_attention(
        q[:, :, None], k, v, enable_gqa=heads != kv_heads)[:, :, 0],
        "default": lambda q, k, v, n: launch_decode_attention(
            q, k, v, n, head_dim ** -0.5, out) or out}
    for name, config in configs(base, batch * kv_heads, context):
        variants[name] = (lambda c: lambda q, k, v, n: launch_decode_attention(
            q, k, v, n, head_dim ** -0.5, out, c) or out)(config)
    result = compare(variants, lambda q, k, v, n: decode_attention_ref(
        q.double(), k.double(), v.double(), n), (q, k, v, lengths),
        bytes=2 * k.numel() * 2, baseline="SDPA", graph=True, rotate=(1, 2),
        warmup_ms=5, rep_ms=25)
    rows = sorted((r for r in result.results if r.stats is not None),
                  key=lambda r: r.stats.median)
    print(f"\n{heads}/{kv_heads}x{head_dim} batch {batch} context {context} "
          f"({2 * k.numel() * 2 / 2**20:.1f} MB), default {base}")
    for r in rows[:8] + [r for r in rows if r.name in ("SDPA", "default")]:
        print(f"  {r.name:22s} {r.stats.median * 1e3:7.2f} us  {r.pct_ceiling:5.1f}% "
              f"x{r.speedup:.2f}")


def main() -> None:
    for point in POINTS:
        sweep_point(*point)


if __name__ == "__main__":
    main()
