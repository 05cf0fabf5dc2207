"""Decode steps where each layer's output projection (the one-row GEMV), before its wait,
prefetches the first bytes of the gate/up weights into L2 (prefetch.global.L2, a few 128-byte
lines a thread of every program: tg.linear's l2_ahead, as many bytes as
Llama.l2_ahead_bytes holds for the cache's length), while attention runs and memory idles.
Session 86 chose one amount by timing the whole-cache step and took none; with attention
forced to the Generator's band launches TinyLlama lost at every amount and Qwen2-0.5B gained
3% at 255 positions (8 MiB), 0.7% at 383 (session 87). Since session 92 tg.Generator
chooses it per context band in the band's own step (notes/models.md, session 92).
Sessions 34-35 issued such prefetches (cp.async.bulk.prefetch.L2, 16 KB chunks) from the few
attention programs and lost (H100); here every program of the projection issues a few lines.

    PYTHONPATH=src:research python3 research/probe_l2_ahead.py tinyllama:1@255,qwen2-0.5b:1@383 \
        --mb 0,8,16,32 [--attention pre2]   (attention's launch forced to one of
                                             probe_attention_tile's VARIANTS, as the
                                             Generator's step tuner picks them by band)

Random weights, bf16, the rules' plans (give the run a fresh TILEGRAPH_CACHE_DIR), a cache of
2048 positions; each point timed at each prefetch size (MB of gate/up a layer, capped at its
size), two rounds, ms a step (probe_weight_left.step_ms).
"""

import sys

import torch
from probe_attention_tile import MERGE_APART_KERNEL, RULE, VARIANTS, patched, step_inputs
from probe_weight_left import step_ms

import tilegraph.kernels.decode_attention as attention


def main() -> None:
    sizes = [float(v) for v in sys.argv[sys.argv.index("--mb") + 1].split(",")]
    forced = sys.argv[sys.argv.index("--attention") + 1] if "--attention" in sys.argv else None
    for item in sys.argv[1].split(","):
        name, batch, position, model, cache, tokens, positions = step_inputs(item)
        if forced:
            attention.attention_config = patched(VARIANTS[forced], position)
        line = []
        for _ in range(2):
            for mb in sizes:   # the output projections pass gate/up's first bytes
                model.l2_ahead_bytes = {cache.max_seq: int(mb * 2**20)}
                try:
                    line.append(f"{mb:g} MB {step_ms(model, tokens, positions, cache):.4f}")
                except Exception as error:  # noqa: BLE001 (a probe: report and go on)
                    line.append(f"{mb:g} MB failed: {type(error).__name__}: {error}")
        model.l2_ahead_bytes = {}
        attention.attention_config = RULE   # patched may also have swapped the merge kernel
        attention._merge_apart_kernel = MERGE_APART_KERNEL
        print(f"{name} b{batch}@{position}{' ' + forced if forced else ''}: " + " | ".join(line),
              flush=True)
        del model, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
