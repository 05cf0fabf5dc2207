"""Where the batch-1 step tuner's timing and tg.Generator's tokens part. Session 91: on
Qwen2-0.5B the tuner timed small tiles (gate/up and output) 2.5-4.9% faster, while the
Generator's tokens came out 0.1-0.55% slower; on TinyLlama, Llama-3.2-1B and a 1024-wide
shape the two agreed. For the plans' own projection launches and for the choice the first
Generator made, in turn and twice (A B A B), on one model:

  step    the tuner's measure (tune.time_step_candidates): model.decode captured over the
          whole cache, replayed at one fixed position, each replay after a hold kernel, L2
          not flushed;
  greedy  the Generator's greedy graph of the band that holds the position, replayed back
          to back up to it (REPLAYS steps between one pair of events, the last at it);
  tokens  generate(), ms a token (the Generator's own clock, host included) from prompts
          of each PROMPTS length, 256 new tokens, median of three after one.

    PYTHONPATH=src:research TILEGRAPH_CACHE_DIR=$(mktemp -d) \
        python3 research/probe_step_vs_generator.py qwen2-0.5b [POSITIONS [PROMPTS]]

POSITIONS (default 255,2047; each at least REPLAYS + 8, under MAX_SEQ) and PROMPTS
(default 128,1792) are comma lists. A rows choice is forced by recording it in the step
tuner's store before a Generator is built: the other in-step choices (attention by band,
release points) stay those the first Generator made.
"""

import statistics
import sys

import torch
from time_steps import OFF_LIST

import tilegraph as tg
from tilegraph import tune
from tilegraph.bench.timing import measure
from tilegraph.graph import capture
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

MAX_SEQ = 2048
NEW_TOKENS = 256
REPLAYS = 64


def step_ms(model: Llama, cache, position: int) -> float:
    """The tuner's clock: one captured model.decode replayed at `position`."""
    tokens = torch.zeros(1, dtype=torch.int64, device=model.device)
    positions = torch.zeros_like(tokens)
    graph = capture(model.decode, tokens, positions, cache, restore_state=False)
    positions.fill_(position)
    ms = measure(graph.replay, warmup_ms=5, rep_ms=20, flush_l2=False).median
    del graph
    return ms


def greedy_ms(generator: tg.Generator, position: int) -> float:
    """The greedy graphs of the band that holds `position` replayed back to back, the last
    step at it, ms a step."""
    runner = generator._runner(False, position + 1)
    tokens = torch.randint(0, generator.model.config.vocab_size, (1,),
                           device=generator.model.device)
    times = []
    for _ in range(3):
        positions = torch.full_like(tokens, position - REPLAYS - 8)
        runner(*generator._embed(tokens, positions))   # the first step copies its inputs in
        for _ in range(8):
            runner.again()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(REPLAYS):
            runner.again()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / REPLAYS)
    return statistics.median(times)


def tokens_ms(generator: tg.Generator, prompt_tokens: int, vocab: int) -> float:
    prompts = torch.randint(0, vocab, (1, prompt_tokens)).tolist()
    times = []
    for _ in range(4):
        generator.generate(prompts, NEW_TOKENS)
        times.append(generator.stats.decode_ms_per_token)
    return statistics.median(times[1:])


def main() -> None:
    name = sys.argv[1]
    positions = [int(p) for p in sys.argv[2].split(",")] if len(sys.argv) > 2 else [255, 2047]
    prompts = [int(p) for p in sys.argv[3].split(",")] if len(sys.argv) > 3 else [128, 1792]
    base, overrides = OFF_LIST.get(name, (name, {}))
    c = LlamaConfig.from_hf(hf_config(base, **overrides))
    torch.manual_seed(0)
    model = Llama(c, dtype=torch.bfloat16, device="cuda")
    step = (c.n_heads, c.n_kv_heads, c.head_dim, MAX_SEQ, str(model.dtype), c.dim,
            c.ffn_dim, c.n_layers, c.vocab_size)
    tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))  # tunes; its choice kept
    chosen = (tune.gemv_rows_in_step.lookup(step) or {}).get("rows")
    print(f"{name}: the step tuner chose {chosen}", flush=True)
    if not chosen:
        print("  nothing to compare: the plans' own launches were kept")
        return
    header = ([f"step @{p}" for p in positions] + [f"greedy @{p}" for p in positions]
              + [f"tokens from {p}" for p in prompts])
    print(f"  {'rows':<60} " + " ".join(f"{h:>16}" for h in header), flush=True)
    for rows in ({}, chosen, {}, chosen):
        tune.gemv_rows_in_step.record(step, {"rows": rows})
        generator = tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
        row = [step_ms(model, generator.cache, p) for p in positions]
        row += [greedy_ms(generator, p) for p in positions]
        row += [tokens_ms(generator, p, c.vocab_size) for p in prompts]
        print(f"  {rows!r:<60} " + " ".join(f"{ms:16.4f}" for ms in row), flush=True)
        del generator
        torch.cuda.empty_cache()
    tune.gemv_rows_in_step.record(step, {"rows": chosen})


if __name__ == "__main__":
    main()
