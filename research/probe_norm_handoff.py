"""A decode step with norms handed over between projections against the same step with a
norm kernel before each tensor-core projection: Llama-family shapes (random weights) and
LayerStacks, in --dtype (bf16), each step captured in one graph and replayed.

    PYTHONPATH=src python3 research/probe_norm_handoff.py                  # handoffs on
    TILEGRAPH_NORM_HANDOFF=0 PYTHONPATH=src python3 research/probe_norm_handoff.py

Run both (the switch is read at import) and compare the ms a step they print.
"""

from __future__ import annotations

import argparse

import torch

import tilegraph as tg
from tilegraph.kernels import _norm_handoff
from tilegraph.models import LayerStack, LayerStackConfig, Llama, LlamaConfig
from tilegraph.models.hf_presets import hf_config
from tilegraph.stack_grid import layers_for


def replay_ms(graph, replays: int = 300) -> float:
    for _ in range(20):
        graph.replay()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / replays


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def model_step(name: str, batch: int, position: int, dtype: torch.dtype) -> float:
    config = LlamaConfig.from_hf(hf_config(name))
    model = Llama(config, dtype=dtype, device="cuda")
    cache = model.new_cache(batch, 2048)
    tokens = torch.randint(0, config.vocab_size, (batch,), device="cuda")
    positions = torch.full((batch,), position, device="cuda")
    return replay_ms(tg.capture(model.decode, tokens, positions, cache))


def stack_step(d: int, batch: int, dtype: torch.dtype) -> float:
    stack = LayerStack(LayerStackConfig(d=d, layers=layers_for(d, dtype), dtype=dtype),
                       device="cuda")
    return replay_ms(tg.capture(stack.fused_forward, stack.token_inputs(1, batch)[0]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="tinyllama:8,qwen2-0.5b:8,llama3.2-1b:4,"
                                            "tinyllama:16,mistral-7b:2")
    parser.add_argument("--stacks", default="1024:8,2048:8,2048:16,3072:8,4096:8,5120:4")
    parser.add_argument("--position", type=int, default=255)
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]
    print(f"norm handoff {'on' if _norm_handoff.ENABLED else 'off'}, {args.dtype}")
    for item in filter(None, args.models.split(",")):
        name, batch = item.split(":")
        step_ms = model_step(name, int(batch), args.position, dtype)
        print(f"model {name} batch {batch}: {step_ms:.4f} ms a step")
    for item in filter(None, args.stacks.split(",")):
        d, batch = (int(v) for v in item.split(":"))
        print(f"stack d={d} batch {batch}: {stack_step(d, batch, dtype) * 1e3:.1f} us a step")


if __name__ == "__main__":
    main()
