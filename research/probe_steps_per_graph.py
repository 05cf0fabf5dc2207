"""What a decode step pays at a graph's boundary: ms a step of a Llama-family model's greedy
decode step (model.decode, then greedy_step feeding the next step's token and position) with
k steps captured in one graph, replayed back to back as tg.Generator replays its one-step
graphs; and the step without greedy_step (logits only), for what the argmax kernel costs.

    PYTHONPATH=src python3 research/probe_steps_per_graph.py --model tinyllama [--batch 1]

Random weights, bf16, the launch rules (nothing tuned). Every variant decodes the same
positions (from --context on, --steps of them a timing, within one band of tiles), the best
of --repeats timings; the one-step graph runs first and last, so drift shows.
"""

from __future__ import annotations

import argparse
import functools

import torch

import tilegraph as tg
from tilegraph.kernels.greedy import greedy_step
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--context", type=int, default=130)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--max-seq", type=int, default=2048)
    args = parser.parse_args()
    config = LlamaConfig.from_hf(hf_config(args.model))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(args.batch, args.max_seq)
    history = torch.zeros(args.batch, args.max_seq, dtype=torch.int64, device="cuda")
    tokens = torch.randint(0, config.vocab_size, (args.batch,), device="cuda")
    positions = torch.full((args.batch,), args.context - 1, device="cuda")
    slots = cache.slots[:args.batch]

    def decode_steps(tokens, positions, steps: int, greedy: bool = True):
        for _ in range(steps):
            logits = model.decode(tokens, positions, cache)
            if greedy:
                greedy_step(logits, positions, slots, history, tokens_out=tokens,
                            positions_out=positions)
        return tokens, positions

    def ms_a_step(steps: int, greedy: bool = True) -> float:
        graph = tg.capture(functools.partial(decode_steps, steps=steps, greedy=greedy),
                           tokens, positions, restore_state=False)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(args.repeats):
            positions.fill_(args.context - 1 + (0 if greedy else args.steps // 2))
            start.record()
            for _ in range(args.steps // steps):
                graph.replay()
            stop.record()
            stop.synchronize()
            best = min(best, start.elapsed_time(stop) / args.steps)
        del graph
        return best

    print(f"{args.model} b{args.batch}, positions {args.context}..{args.context + args.steps}: "
          f"ms a step, {torch.cuda.get_device_name()}", flush=True)
    for name, steps, greedy in [("1 step a graph", 1, True), ("logits only, 1 a graph", 1, False),
                                ("2 steps a graph", 2, True), ("4 steps a graph", 4, True),
                                ("8 steps a graph", 8, True), ("1 step a graph", 1, True)]:
        print(f"  {name:24s} {ms_a_step(steps, greedy):.4f}", flush=True)


if __name__ == "__main__":
    main()
