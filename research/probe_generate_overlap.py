"""What the ends of a decode step cost in tg.Generator: the step's start (the embedding gather
and positions + 1 as two PyTorch kernels, or one tilegraph kernel releasing the first
projection early) and the host's reading of each chunk of tokens (the GPU idle while it
reads, or the next chunk already queued).

    PYTHONPATH=src python3 research/probe_generate_overlap.py --model tinyllama --batch 1

Two Generators over one model (random weights): one captured with the two-kernel start
patched into Llama.decode, one with the library's (written for trees before session 82,
whose greedy steps called Llama.decode: since then they start from the embeddings the step
before wrote, and the patch reaches only the sampled ones; run it on 2a5ac9e or earlier).
Each generates `--new` tokens after a prompt of `--prompt`, with chunks read as the library
does or waited for as soon as they are queued (the serial loop of session 30), in
interleaved rounds; then each one's bare step is timed as 300 graph replays, and graphs
holding 1-8 steps each. Prints ms a token.
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.generate import Generator
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


@torch.no_grad()
def decode_with_torch_start(self, tokens, positions, cache):
    """Llama.decode as it was: F.embedding and positions + 1 as PyTorch kernels."""
    rows = tokens.shape[0]
    lengths = positions + 1

    def attend(q, k_layer, v_layer):
        return tg.decode_attention(q, k_layer, v_layer, lengths).view(rows, -1)

    x = F.embedding(tokens, self.embed)
    x = self._fused_layers(x, cache, positions, cache.slots[:rows], attend)
    return self._lm_head(x)


def serial_chunks(generator: Generator) -> None:
    """Make `generator` wait for each chunk as soon as it is queued."""
    queue = Generator._queue_chunk

    def queue_and_wait(*args):
        queued, tokens, positions = queue(generator, *args)
        if queued.copied is not None:
            queued.copied.synchronize()
        return queued, tokens, positions
    generator._queue_chunk = queue_and_wait


def replay_ms(generator: Generator, first_position: int, replays: int) -> float:
    """Best of three runs of `replays` steps from first_position on (max_seq must hold them)."""
    runner = generator._runner(sampled=False)
    batch = generator.max_batch
    tokens = torch.zeros(batch, dtype=torch.int64, device="cuda")
    positions = torch.full((batch,), first_position, device="cuda")
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(3):
        runner(tokens, positions)   # copies the first position in
        start.record()
        for _ in range(replays):
            runner.again()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / replays)
    return min(times)


def unrolled_ms(generator: Generator, first_position: int, steps: int, replays: int,
                pool=None) -> float:
    """ms a token of a graph holding `steps` greedy steps, best of three runs of
    `replays` tokens."""
    batch = generator.max_batch
    tokens = torch.zeros(batch, dtype=torch.int64, device="cuda")
    positions = torch.full((batch,), first_position, device="cuda")

    def unrolled():
        for _ in range(steps):
            generator._greedy_step(tokens, positions, generator.cache)
    graph = tg.capture(unrolled, restore_state=False, pool=pool)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(3):
        positions.fill_(first_position)
        start.record()
        for _ in range(replays // steps):
            graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / (replays // steps * steps))
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    config = LlamaConfig.from_hf(hf_config(args.model))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    replays = 300
    max_seq = args.prompt + max(args.new, replays + 1)
    library_decode = Llama.decode
    Llama.decode = decode_with_torch_start
    generators = {"two-kernel start": Generator(model, args.batch, max_seq, sizes=(args.batch,))}
    Llama.decode = library_decode
    generators["one-kernel start"] = Generator(model, args.batch, max_seq, sizes=(args.batch,))
    prompts = torch.randint(0, config.vocab_size, (args.batch, args.prompt), device="cuda")
    tokens = {name: g.generate(prompts, args.new) for name, g in generators.items()}
    same = tokens["two-kernel start"] == tokens["one-kernel start"]
    print(f"{args.model} batch {args.batch}, prompt {args.prompt}, {args.new} new tokens; "
          f"both starts give the same tokens: {same}")
    times: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, generator in generators.items():
            for reading in ("queued ahead", "serial"):
                if reading == "serial":
                    serial_chunks(generator)
                generator.generate(prompts, args.new)
                times.setdefault(f"{name}, {reading}", []).append(
                    generator.stats.decode_ms_per_token)
                generator.__dict__.pop("_queue_chunk", None)
    for name, values in times.items():
        print(f"generate, {name}: {statistics.median(values):.4f} ms/token "
              f"(spread {min(values):.4f}-{max(values):.4f})")
    for name, generator in generators.items():
        print(f"bare step, {name}: {replay_ms(generator, args.prompt, replays):.4f} ms")
    runner = generators["one-kernel start"]._runner(sampled=False)
    graph = runner._graphs[args.batch]
    runner(torch.zeros(args.batch, dtype=torch.int64, device="cuda"),
           torch.full((args.batch,), args.prompt, device="cuda"))   # back to the prompt's end
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph._cuda_graph.replay()
    stop.record()
    stop.synchronize()
    print(f"the runner's graph replayed directly: {start.elapsed_time(stop) / replays:.4f} ms")
    ms = unrolled_ms(generators["one-kernel start"], args.prompt, 1, replays, runner.pool)
    print(f"1 step a graph in the runner's pool: {ms:.4f} ms a token")
    for steps in (1, 2, 4, 8):
        ms = unrolled_ms(generators["one-kernel start"], args.prompt, steps, replays)
        print(f"{steps} steps a graph, one-kernel start: {ms:.4f} ms a token")


if __name__ == "__main__":
    main()
