"""Where a LayerStack decode step's time goes inside a graph replay: each kernel's exposed time
by its place in a layer (issue 17's stack grid, the points that miss their share of the floor).

    PYTHONPATH=src python3 research/profile_stack_decode.py --d 2048 --batch 8 --dtype bf16

The stack spans three L2 caches (as in `bench stack-grid`), its step is captured with
tg.capture (no runner copies), and the replay time is set against the weight floor.
"""

from __future__ import annotations

import argparse
import collections
import time

import torch
from profile_llama_decode import replay_kernels  # research/ is on sys.path when run

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def exposed_by_place(graph, layers: int, replays: int = 5) -> None:
    """Each kernel's exposed time (the part of its span no earlier kernel covers), grouped by
    its place in a layer; the step's first and last kernels that are not a layer's are
    listed apart."""
    kernels = replay_kernels(graph, replays, name_chars=50)
    per_step = len(kernels) // replays
    width = per_step // layers
    extra = per_step - width * layers
    slots = collections.defaultdict(list)
    for r in range(1, replays):  # the first replay warms the profiler
        step = kernels[r * per_step:(r + 1) * per_step]
        covered = step[0][0]
        for i, (start, end, name) in enumerate(step):
            place = f"{i % width}" if i < layers * width else f"tail {i - layers * width}"
            slots[(place, name)].append((max(0.0, end - max(start, covered)), end - start))
            covered = max(covered, end)
    span = sum(kernels[(r + 1) * per_step - 1][1] - kernels[r * per_step][0]
               for r in range(1, replays)) / (replays - 1)
    print(f"  {per_step} kernels a step ({width} a layer, {extra} more), {span:.1f} us first "
          f"start to last end; by place (mean exposed, mean duration):")
    for (place, name), times in sorted(slots.items()):
        print(f"    {place:>6}: {sum(t[0] for t in times) / len(times):6.2f} us "
              f"({sum(t[1] for t in times) / len(times):6.2f})  x{len(times) // (replays - 1)}"
              f"  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--d", type=int, nargs="+", default=[2048])
    parser.add_argument("--batch", type=int, nargs="+", default=[8])
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--layers", type=int, help="default: enough to span three L2 caches")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    copy_gbps = ceilings()["copy_gbps"]
    for d in args.d:
        config = LayerStackConfig(d=d, layers=args.layers or layers_for(d, dtype), dtype=dtype)
        stack = LayerStack(config, device="cuda")
        for batch in args.batch:
            h = stack.token_inputs(1, batch)[0]
            graph = tg.capture(stack.fused_forward, h)
            for _ in range(20):
                graph.replay()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(True)
            start.record()
            host = time.perf_counter()
            for _ in range(200):
                graph.replay()
            host_us = (time.perf_counter() - host) / 200 * 1e6
            stop.record()
            torch.cuda.synchronize()
            us = start.elapsed_time(stop) / 200 * 1e3
            floor_us = config.weight_bytes / copy_gbps / 1e3
            print(f"d={d} batch {batch} {args.dtype}, {config.layers} layers: {us:.1f} us a "
                  f"step, floor {floor_us:.1f} us ({100 * floor_us / us:.1f}%), "
                  f"{us / config.layers:.2f} us a layer (floor {floor_us / config.layers:.2f}); "
                  f"host {host_us:.1f} us a replay")
            exposed_by_place(graph, config.layers)


if __name__ == "__main__":
    main()
