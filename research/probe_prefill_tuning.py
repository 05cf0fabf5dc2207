"""What a Llama prefill's first call at a new row count costs, and which of the tuned
products' candidates win: tg.linear past DECODE_MAX_ROWS tunes launch_gemm on first use,
compiling and timing every candidate (pointer tiles, TMA tiles, cuBLAS with an epilogue).

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/probe_prefill_tuning.py \
        tinyllama:1x128,8x128,1x200 qwen2-0.5b:1x128

Random weights, bf16, in one process, in the order given (later shapes find the kernels the
earlier ones compiled): seconds of the first prefill of each batch x prompt length and of a
second one; then for each product tuned, the best median of each kind of candidate against
the winner's, and how many candidates came within 5% of it. (Session 77's run also printed
the first prefill's seconds in Tuner._compiles and Tuner._time from a cProfile of the call:
0.0 for both, the profile saw none of the tuner's calls; removed.)
"""

import sys
import time

import torch

from tilegraph.kernels import matmul
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


def kind(config: dict) -> str:
    if config.get("CUBLAS"):
        return "cublas+pass" if config.get("BIAS_IN_PASS") else "cublas"
    return "tma" if config.get("TMA") else "pointer"


def main() -> None:
    for item in sys.argv[1:]:
        name, shapes = item.split(":")
        model = Llama(LlamaConfig.from_hf(hf_config(name)), dtype=torch.bfloat16,
                      device="cuda")
        for shape in shapes.split(","):
            batch, length = map(int, shape.split("x"))
            cache = model.new_cache(batch, 2048)
            ids = torch.randint(0, model.config.vocab_size, (batch, length), device="cuda")
            known = set(matmul._tuner.timings)
            torch.cuda.synchronize()
            start = time.perf_counter()
            model.prefill(ids, cache)
            torch.cuda.synchronize()
            first = time.perf_counter() - start
            start = time.perf_counter()
            model.prefill(ids, cache)
            torch.cuda.synchronize()
            again = time.perf_counter() - start
            print(f"{name} {batch}x{length}: first prefill {first:.1f} s, again "
                  f"{1e3 * again:.2f} ms", flush=True)
            for key, timed in matmul._tuner.timings.items():
                if key in known:
                    continue
                best = min(ms for _, ms in timed)
                winner = next(c for c, ms in timed if ms == best)
                kinds = {}
                for config, ms in timed:
                    kinds[kind(config)] = min(ms, kinds.get(kind(config), float("inf")))
                near = sum(ms <= 1.05 * best for _, ms in timed)
                shown = ", ".join(f"{k} {ms / best:.2f}x" for k, ms in sorted(kinds.items()))
                print(f"  {key}: {len(timed)} timed, best {1e3 * best:.1f} us "
                      f"({kind(winner)} {winner}); {near} within 5%; {shown}", flush=True)
            del cache
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
