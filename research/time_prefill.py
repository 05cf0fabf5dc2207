"""Time to a first token through tg.Generator: generate(prompts, 1) is a prefill and the
choice of its first token, so its wall time is what a user waits before the first token.
For timing two trees against each other (session 79: prefills replayed from graphs).

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/time_prefill.py TAG \
        tinyllama [128 37 8x128 100,60,128,20 ...]

Random weights, bf16 on CUDA (fp32 on the CPU, a check of the script only); a Generator of
max_batch 8 (or --max-batch N) and max_seq 2048. Each argument is a set of prompts: N (one of
N tokens), BxN (B of N) or N,M,... (one each): the first call's seconds (tuning, captures),
then the median and least wall ms of 10 more. Under `torchrun --nproc-per-node N` the model
is tensor-parallel over the N GPUs (session 80), and rank 0 prints.
"""

import os
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
    args = sys.argv[1:]
    max_batch = 8
    if "--max-batch" in args:
        at = args.index("--max-batch")
        max_batch = int(args[at + 1])
        del args[at:at + 2]
    tag, name, *specs = args
    cuda = torch.cuda.is_available()
    device, dtype = ("cuda", torch.bfloat16) if cuda else ("cpu", torch.float32)
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    if ranks > 1:
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    say = print if os.environ.get("RANK", "0") == "0" else (lambda *a, **k: None)
    config = LlamaConfig.from_hf(hf_config(name))
    model = Llama(config, dtype=dtype, device=device, tp=ranks if ranks > 1 else None)
    start = time.perf_counter()
    generator = tg.Generator(model, max_batch=max_batch, max_seq=2048,
                             sizes=tuple(s for s in (1, 2, 4, 8) if s <= max_batch))
    say(f"{tag} {name} on {torch.cuda.get_device_name() if cuda else 'cpu'}, tp {ranks}: "
        f"Generator built in {time.perf_counter() - start:.1f} s", flush=True)
    prompt_rng = torch.Generator().manual_seed(0)   # the same prompts on every rank
    for spec in specs or ["128", "37", "8x128", "100,60,128,20"]:
        prompts = [torch.randint(0, config.vocab_size, (n,), generator=prompt_rng).tolist()
                   for n in prompt_lengths(spec)]

        def first_token(prompts=prompts) -> float:
            start = time.perf_counter()
            generator.generate(prompts, 1)
            return time.perf_counter() - start
        first = first_token()
        walls = [first_token() * 1e3 for _ in range(10)]
        say(f"{tag} {name} prompts {spec}: first call {first:.2f} s, then "
            f"{statistics.median(walls):.2f} ms (least {min(walls):.2f})", flush=True)
    if ranks > 1:
        model.tp.barrier("the exit")
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
