"""Where a repeated Llama prefill's time goes: session 77 found 35-40 ms for a 128-token
prompt of TinyLlama's shape, against about 1.3 ms of its products' tuned medians.

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/profile_prefill.py \
        tinyllama 1x128 [cublas|default]

Random weights, bf16. The products past the decode rows are tuned on first use (minutes);
`cublas` offers launch_gemm's tuner cuBLAS alone (the pick at 15 of session 77's 20 keys) so
the first call takes seconds, `default` runs every product's first candidate untimed
(TILEGRAPH_AUTOTUNE=0 must then be set too). After three warm prefills, prints: the wall
time of a prefill (synchronised, median of 10), the GPU's busy time in one (torch.profiler:
every kernel's device time summed), the launches it makes, and cProfile's top functions
over 5 prefills by their own time.
"""

import cProfile
import pstats
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

from tilegraph.kernels import matmul
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


def main() -> None:
    name, shape = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "cublas"
    if mode == "cublas":  # research only: the tuner's pool narrowed to cuBLAS
        matmul._candidates = lambda *args, **kwargs: []
    batch, length = map(int, shape.split("x"))
    model = Llama(LlamaConfig.from_hf(hf_config(name)), dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(batch, 2048)
    ids = torch.randint(0, model.config.vocab_size, (batch, length), device="cuda")
    start = time.perf_counter()
    model.prefill(ids, cache)
    torch.cuda.synchronize()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {name} {shape} {mode}: "
          f"first prefill {time.perf_counter() - start:.1f} s", flush=True)
    for _ in range(3):
        model.prefill(ids, cache)
    torch.cuda.synchronize()

    walls = []
    for _ in range(10):
        start = time.perf_counter()
        model.prefill(ids, cache)
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - start)
    # the host's time alone: the calls queued, no wait for the GPU
    start = time.perf_counter()
    model.prefill(ids, cache)
    host = time.perf_counter() - start
    torch.cuda.synchronize()
    print(f"  wall a prefill {statistics.median(walls) * 1e3:.2f} ms (min {min(walls) * 1e3:.2f})"
          f", host time to queue one {host * 1e3:.2f} ms")

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model.prefill(ids, cache)
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.device_time_total for e in events) / 1e3
    print(f"  GPU kernels in one prefill: {len(events)}, their device time {busy:.2f} ms")
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=15))

    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        model.prefill(ids, cache)
    torch.cuda.synchronize()
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
