"""How far apart a decode step's logits are with different attention launches, and with
launches that read the wrong positions: what the in-step tuner's check sees (each
candidate's logits against the first's, allowing ROUNDING_MARGIN times the first's distance
from plain_decode where that is within MAX_ROUNDING tolerances; tune.time_step_candidates).

    PYTHONPATH=src python3 research/probe_step_agreement.py --model tinyllama --batch 1 \
        --caches zeros,random

Random weights (bf16). For each cache (`zeros`: only the rows the replays write, as the
Generator's tuner found it before session 72; `random`: normal keys and values, as it fills
it since; `prefilled`: a random prompt's), each launch among step_candidates' is recorded,
the step captured and replayed at each position in turn (as time_step_candidates does), and
the logits after the last replay compared by testing.rel_error with the first candidate's
and with plain_decode's (PyTorch's SDPA on the same cache). Then the first launch with
wrong lengths, as a launch that misread positions would read: the newest position left out
(length - 1), the last tile of 128 left out (length - 128), half the positions.
`--device cpu` runs a small shape through the interpreter (`--model tiny-llama3 --max-seq
64 --positions 20,40`).
"""

from __future__ import annotations

import argparse

import torch

import tilegraph as tg
from tilegraph import tune
from tilegraph.kernels import decode_attention as attention
from tilegraph.kernels._launch import sm_count
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig
from tilegraph.testing import MODEL_TOLERANCES, rel_error

WRONG = {"newest left out": lambda n: n - 1, "last 128 left out": lambda n: n - 128,
         "half": lambda n: n // 2}


def replayed(model, tokens, positions, cache, timed) -> torch.Tensor:
    """The step captured, replayed at each of `timed` in turn; its logits after the last."""
    graph = tg.capture(model.decode, tokens, positions, cache, restore_state=False)
    for position in timed:
        positions.fill_(position)
        for _ in range(3):
            graph.replay()
    logits = graph.outputs.clone()
    del graph
    return logits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--max-seq", type=int, default=2048)
    parser.add_argument("--positions", default="255,383")
    parser.add_argument("--caches", default="zeros,random,prefilled")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    timed = [int(p) for p in args.positions.split(",")]
    torch.manual_seed(0)
    c = LlamaConfig.from_hf(hf_config(args.model))
    device = torch.device(args.device)
    model = Llama(c, dtype=torch.bfloat16, device=device)
    tolerance = MODEL_TOLERANCES[model.dtype]
    group = c.n_heads // c.n_kv_heads
    shape = (args.batch, c.n_kv_heads, group, c.head_dim, args.max_seq)
    key = attention.attention_key(*shape, model.dtype)
    sms = sm_count(device)
    facts = attention.device_facts(model.dtype, model.device)
    first = attention.attention_config(*shape, sms, **facts)
    candidates = attention.step_candidates(*shape, sms, first, **facts)
    tokens = torch.zeros(args.batch, dtype=torch.int64, device=device)
    positions = torch.zeros_like(tokens)
    launch = tg.decode_attention
    for kind in args.caches.split(","):
        cache = model.new_cache(args.batch, args.max_seq)
        if kind == "random":
            rng = torch.Generator(device).manual_seed(0)
            for keys_or_values in (cache.k, cache.v):
                keys_or_values.normal_(generator=rng)
        elif kind == "prefilled":
            model.prefill(torch.randint(0, c.vocab_size, (args.batch, max(timed)),
                                        device=device), cache)
        print(f"{args.model} b{args.batch}, cache {kind}, replayed at {timed}; rel_error of "
              f"the logits against the first / plain_decode", flush=True)
        reference = allowed = None
        for config in candidates:
            attention.tuned.record(key, config)
            logits = replayed(model, tokens, positions, cache, timed)
            plain = model.plain_decode(tokens, positions, cache)
            if reference is None:
                reference, rounding = logits, rel_error(logits, plain)
                allowed = (max(tolerance, tune.ROUNDING_MARGIN * rounding)
                           if rounding <= tune.MAX_ROUNDING * tolerance else tolerance)
            summary = {k: config[k] for k in ("HEAD_BLOCKS", "BLOCK_T", "BLOCK_G", "PRELOAD",
                                              "PRELOAD_TILES", "num_stages", "num_warps")}
            print(f"  {summary}: {rel_error(logits, reference):.2e} / "
                  f"{rel_error(logits, plain):.2e}", flush=True)
        attention.tuned.record(key, candidates[0])
        for name, wrong in WRONG.items():
            def misread(q, k, v, lengths, *rest, wrong=wrong, **kwargs):
                return launch(q, k, v, torch.clamp(wrong(lengths), min=1), *rest, **kwargs)
            tg.decode_attention = misread
            logits = replayed(model, tokens, positions, cache, timed)
            tg.decode_attention = launch
            distance = rel_error(logits, reference)
            print(f"  first launch, {name}: {distance:.2e} from the first "
                  f"({'caught' if not distance <= allowed else 'PASSES'} by the check "
                  f"allowing {allowed:.2e})", flush=True)


if __name__ == "__main__":
    main()
