"""Where a Llama decode step's time goes: each kernel of one eager step (torch.profiler,
device times), against one replay of the same step captured in a graph.

    PYTHONPATH=src python3 research/profile_llama_decode.py --model tinyllama --batch 1

The sum of kernel times is what the kernels cost alone; the replay minus that sum is what
the boundaries between them cost in a graph (launch gaps, ramp-up, tails). Last, the same
timeline of tg.Generator's graph for the band of that context, its launches chosen in its
steps.
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


def replay_kernels(graph, replays: int, name_chars: int = 60) -> list[tuple]:
    """(start, end, name) of every kernel of `replays` replays of graph, on the device's own
    clock, in start order."""
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    return sorted((e.time_range.start, e.time_range.end, e.name[:name_chars])
                  for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def replay_timeline(graph, layers: int, replays: int = 5) -> None:
    """Kernels inside graph replays, on the device's own clock: each kernel's exposed time
    (the part of [start, end) that no earlier kernel still covers), by name and by its place
    in a layer. Under programmatic dependent launch a kernel starts while the one before is
    still running, so its exposed time, not its duration, is what it adds to the step."""
    kernels = replay_kernels(graph, replays)
    if not kernels:
        print("replay timeline: the profiler recorded no kernels inside graph replays")
        return
    per_step = len(kernels) // replays
    exposed: dict[str, list[float]] = collections.defaultdict(list)
    durations: dict[str, list[float]] = collections.defaultdict(list)
    covered = kernels[0][0]
    for start, end, name in kernels[per_step:]:  # the first replay warms the profiler
        exposed[name].append(max(0.0, end - max(start, covered)))
        durations[name].append(end - start)
        covered = max(covered, end)
    steps = replays - 1
    span = (kernels[-1][1] - kernels[per_step][0]) / steps
    print(f"replay timeline: {per_step} kernels a step, {span:.1f} us from the first start to "
          f"the last end; per name, a step's exposed time (duration if alone):")
    for name, times in sorted(exposed.items(), key=lambda item: -sum(item[1])):
        count = len(times) // steps
        print(f"  {sum(times) / steps:8.1f} us exposed  {count:4d} x {sum(times) / len(times):6.2f}"
              f" us ({sum(durations[name]) / len(times):6.2f})  {name}")
    # By place in a layer: the layers repeat from the kernel before the first attention.
    step = kernels[per_step:2 * per_step]
    attention = [i for i, (_, _, name) in enumerate(step) if "attention" in name]
    if len(attention) == layers and layers > 1:
        width, first = attention[1] - attention[0], attention[0] - 1
        slots = collections.defaultdict(list)
        covered = step[first - 1][1] if first else step[0][0]
        for i, (start, end, name) in enumerate(step):
            if first <= i < first + layers * width:
                slots[((i - first) % width, name)].append(
                    (max(0.0, end - max(start, covered)), end - start))
            covered = max(covered, end)
        print("  by place in a layer (one replay; mean exposed, mean duration):")
        for (place, name), times in sorted(slots.items()):
            print(f"    {place}: {sum(t[0] for t in times) / len(times):6.2f} us "
                  f"({sum(t[1] for t in times) / len(times):6.2f})  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--context", type=int, default=256, help="position of the token")
    parser.add_argument("--max-seq", type=int, default=2048)
    args = parser.parse_args()

    config = LlamaConfig.from_hf(hf_config(args.model))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(args.batch, args.max_seq)
    tokens = torch.randint(0, config.vocab_size, (args.batch,), device="cuda")
    positions = torch.full((args.batch,), args.context, device="cuda")
    for _ in range(3):
        model.decode(tokens, positions, cache)
    torch.cuda.synchronize()

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model.decode(tokens, positions, cache)
        torch.cuda.synchronize()
    per_name: dict[str, list[float]] = collections.defaultdict(list)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            per_name[event.name[:70]].append(event.device_time)
    total = sum(sum(t) for t in per_name.values())
    kernels = sum(len(t) for t in per_name.values())
    print(f"{args.model} batch {args.batch}, position {args.context}: {kernels} kernels, "
          f"{total / 1e3:.3f} ms of kernel time in one eager step")
    for name, times in sorted(per_name.items(), key=lambda item: -sum(item[1])):
        print(f"  {sum(times):8.1f} us  {len(times):4d} x {sum(times) / len(times):6.2f} us  "
              f"{name}")

    graph = tg.capture(model.decode, tokens, positions, cache)
    for _ in range(20):
        graph.replay()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(200):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    replay_ms = start.elapsed_time(stop) / 200
    floor_ms = (config.decode_bytes(2) + 2 * config.n_layers * args.batch * config.n_kv_heads
                * (args.context + 1) * config.head_dim * 2) / ceilings()["copy_gbps"] / 1e6
    print(f"graph replay {replay_ms:.3f} ms; kernels alone {total / 1e3:.3f} ms; boundaries "
          f"{replay_ms - total / 1e3:.3f} ms ({(replay_ms * 1e3 - total) / kernels:.2f} us a "
          f"kernel); floor {floor_ms:.3f} ms ({100 * floor_ms / replay_ms:.0f}% reached)")

    replay_timeline(graph, len(model.layers))

    # The same model behind tg.Generator: what a greedy step adds to the forward (argmax,
    # positions + 1, the history write, the next step's embeddings; less the forward's
    # decode_inputs), and the copies and syncs of its loop.
    generator = tg.Generator(model, max_batch=args.batch, max_seq=args.max_seq,
                             sizes=(args.batch,))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        generator._greedy_step(*generator._embed(tokens, positions), generator.cache)
        torch.cuda.synchronize()
    names = collections.Counter(e.name[:60] for e in prof.events()
                                if e.device_type == torch.autograd.DeviceType.CUDA)
    print("greedy step kernels beyond the forward:",
          {name: n for name, n in names.items() if name not in per_name})
    prompt = torch.randint(0, config.vocab_size, (args.batch, args.context), device="cuda")
    for _ in range(2):
        generator.generate(prompt, max_new_tokens=128)
    print(f"Generator: {generator.stats.decode_ms_per_token:.3f} ms/token over 128 tokens "
          f"from position {args.context} (replay alone {replay_ms:.3f} ms)")
    step = generator._runner(False, args.context + 1)  # the band of this length
    start.record()
    inputs = generator._embed(tokens, positions)
    for _ in range(200):
        step(*inputs)
    stop.record()
    torch.cuda.synchronize()
    print(f"runner call in a loop, no sync: {start.elapsed_time(stop) / 200:.3f} ms a step")
    # the Generator's own graph: its launches as its step tuning chose them (the replays
    # move its static positions on, from this context)
    print("the Generator's graph of this band:")
    replay_timeline(step._graphs[args.batch], len(model.layers))


if __name__ == "__main__":
    main()
