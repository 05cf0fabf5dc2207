"""Milliseconds a decode step of named Llama-family shapes with the plans the rule picks: one
line a model and batch, for timing two trees against each other in one call.

    PYTHONPATH=src python3 research/time_steps.py new tinyllama:8,qwen2-0.5b:4
    PYTHONPATH=/tmp/old/src python3 research/time_steps.py old tinyllama:8,qwen2-0.5b:4
    PYTHONPATH=src python3 research/time_steps.py new tinyllama:1@2047   (another position)

Random weights, bf16, position 255 (or the one after @) of a cache of 512 positions (or the
next power of two past it); each step captured and replayed
5 x 100 times (probe_weight_left.step_ms), the median round printed after the tag. Besides
tilegraph's named shapes, three that no issue names (OFF_LIST: a Qwen2-1.5B shape, a
1024-wide model with 16 heads of 128, so its output projection is 1024 x 2048, and a
Llama-3.2-3B shape).
Give each run its own TILEGRAPH_CACHE_DIR, so no tuned plan replaces the rule's.
Results: results/2026-11-26-session37/, results/2026-11-26-session38/.
"""

import sys

import torch
from probe_weight_left import step_ms

from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


OFF_LIST = {
    "qwen2-1.5b": ("qwen2-0.5b", dict(hidden_size=1536, intermediate_size=8960,
                                      num_hidden_layers=28, num_attention_heads=12,
                                      num_key_value_heads=2)),
    "d1024-h128": ("llama3.2-1b", dict(hidden_size=1024, intermediate_size=3072,
                                       num_hidden_layers=28, num_attention_heads=16,
                                       num_key_value_heads=8, head_dim=128)),
    "llama3.2-3b": ("llama3.2-1b", dict(hidden_size=3072, intermediate_size=8192,
                                        num_hidden_layers=28, num_attention_heads=24,
                                        num_key_value_heads=8, head_dim=128)),
    "qwen2.5-3b": ("qwen2-0.5b", dict(hidden_size=2048, intermediate_size=11008,
                                      num_hidden_layers=36, num_attention_heads=16,
                                      num_key_value_heads=2)),
}


def main() -> None:
    tag, points = sys.argv[1], sys.argv[2]
    for item in points.split(","):
        name, batch = item.split(":")
        batch, _, position = batch.partition("@")
        position = int(position or 255)
        base, overrides = OFF_LIST.get(name, (name, {}))
        c = LlamaConfig.from_hf(hf_config(base, **overrides))
        torch.manual_seed(0)
        model = Llama(c, dtype=torch.bfloat16, device="cuda")
        cache = model.new_cache(int(batch), max(512, 2 ** (position + 1).bit_length()))
        tokens = torch.randint(0, c.vocab_size, (int(batch),), device="cuda")
        positions = torch.full((int(batch),), position, device="cuda")
        ms = step_ms(model, tokens, positions, cache)
        print(f"{tag} {name} b{batch}@{position} {ms:.4f}", flush=True)
        del model, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
