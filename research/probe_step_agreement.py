"""How far apart a decode step's logits are with different attention launches: what the
in-step tuner's check (each candidate's logits within MODEL_TOLERANCES of the first's) sees.

    PYTHONPATH=src python3 research/probe_step_agreement.py --model tinyllama --batch 1

Random weights (bf16). For a cache of zeros (as the Generator's tuner finds it: only the
rows its replays write) and for one prefilled with a prompt, each launch among
step_candidates' is recorded, the step captured and replayed at each position in turn (as
tune.time_step_candidates does), and the logits after the last replay compared with the
first candidate's and with plain_decode's (PyTorch's SDPA on the same cache) by
testing.rel_error.
"""

from __future__ import annotations

import argparse

import torch

import tilegraph as tg
from tilegraph.kernels import decode_attention as attention
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig
from tilegraph.testing import rel_error


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--max-seq", type=int, default=2048)
    parser.add_argument("--positions", default="255,383")
    args = parser.parse_args()
    timed = [int(p) for p in args.positions.split(",")]
    torch.manual_seed(0)
    c = LlamaConfig.from_hf(hf_config(args.model))
    model = Llama(c, dtype=torch.bfloat16, device="cuda")
    group = c.n_heads // c.n_kv_heads
    shape = (args.batch, c.n_kv_heads, group, c.head_dim, args.max_seq)
    key = attention.attention_key(*shape, model.dtype)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    facts = attention.device_facts(model.dtype, model.device)
    first = attention.attention_config(*shape, sms, **facts)
    candidates = attention.step_candidates(*shape, sms, first, **facts)
    tokens = torch.zeros(args.batch, dtype=torch.int64, device="cuda")
    positions = torch.zeros_like(tokens)
    for filled in (False, True):
        cache = model.new_cache(args.batch, args.max_seq)
        if filled:
            model.prefill(torch.randint(0, c.vocab_size, (args.batch, max(timed)),
                                        device="cuda"), cache)
        print(f"{args.model} b{args.batch}, cache {'prefilled' if filled else 'of zeros'}, "
              f"replayed at {timed}; rel_error of the logits against the first / plain_decode")
        reference = None
        for config in candidates:
            attention.tuned.record(key, config)
            graph = tg.capture(model.decode, tokens, positions, cache, restore_state=False)
            for position in timed:
                positions.fill_(position)
                for _ in range(3):
                    graph.replay()
            logits = graph.outputs.clone()
            plain = model.plain_decode(tokens, positions, cache)
            reference = logits if reference is None else reference
            summary = {k: config[k] for k in ("HEAD_BLOCKS", "BLOCK_T", "BLOCK_G", "PRELOAD",
                                              "PRELOAD_TILES", "num_stages", "num_warps")}
            print(f"  {summary}: {rel_error(logits, reference):.2e} / "
                  f"{rel_error(logits, plain):.2e}", flush=True)
            del graph


if __name__ == "__main__":
    main()
