"""Time to a first token through tg.Generator: generate(prompts, 1) is a prefill and the
choice of its first token, so its wall time is what a user waits before the first token.
For timing two trees against each other (session 79: prefills replayed from graphs).

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/time_prefill.py TAG \
        tinyllama [128 37 8x128 100,60,128,20 ...]

Random weights, bf16 on CUDA (fp32 on the CPU, a check of the script only); a Generator of
max_batch 8 and max_seq 2048. Each argument is a set of prompts: N (one of N tokens), BxN (B
of N) or N,M,... (one each): the first call's seconds (tuning, captures), then the median
and least wall ms of 10 more.
"""

import statistics
import sys
import time

import torch

import tilegraph as tg
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


def prompt_lengths(spec: str) -> list[int]:
    if "x" in spec:
        batch, length = map(int, spec.split("x"))
        return [length] * batch
    return [int(n) for n in spec.split(",")]


def main() -> None:
    tag, name, *specs = sys.argv[1:]
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    config = LlamaConfig.from_hf(hf_config(name))
    model = Llama(config, dtype=dtype, device=device)
    start = time.perf_counter()
    generator = tg.Generator(model, max_batch=8, max_seq=2048, sizes=(1, 2, 4, 8))
    print(f"{tag} {name} on {torch.cuda.get_device_name() if cuda else 'cpu'}: Generator "
          f"built in {time.perf_counter() - start:.1f} s", flush=True)
    for spec in specs or ["128", "37", "8x128", "100,60,128,20"]:
        prompts = [torch.randint(0, config.vocab_size, (n,)).tolist()
                   for n in prompt_lengths(spec)]

        def first_token(prompts=prompts) -> float:
            start = time.perf_counter()
            generator.generate(prompts, 1)
            return time.perf_counter() - start
        first = first_token()
        walls = [first_token() * 1e3 for _ in range(10)]
        print(f"{tag} {name} prompts {spec}: first call {first:.2f} s, then "
              f"{statistics.median(walls):.2f} ms (least {min(walls):.2f})", flush=True)


if __name__ == "__main__":
    main()
