"""Decode steps with the weights ahead streamed into L2 (`_l2_prefetch.py`: attention hands
over the output, gate/up and down weights; a one-kernel decode layer the next layer's)
against the same steps without, each captured in its own graph from one model, replayed in
alternating rounds.

    PYTHONPATH=src python3 research/probe_l2_prefetch.py --models qwen2-0.5b:1,tinyllama:1 \
        --stacks 2048:1,1024:1 --shares 0.5,0.25

Prints ms a step per variant and round, and whether the variants' outputs agree (Llama steps
bit for bit: the hint changes no arithmetic; LayerStacks to the one-kernel layer's run-to-run
variation, whose atomic sums vary in order).
"""

from __future__ import annotations

import argparse

import torch
from probe_norm_handoff import replay_ms  # research/ is on sys.path when run

import tilegraph as tg
from tilegraph.kernels import _l2_prefetch
from tilegraph.models import LayerStack, LayerStackConfig, Llama, LlamaConfig
from tilegraph.models.hf_presets import hf_config
from tilegraph.stack_grid import layers_for
from tilegraph.testing import rel_error


def capture(step, args, share: float | None):
    """The step captured with the prefetch off (share None) or on at that share of L2."""
    _l2_prefetch.ENABLED = share is not None
    _l2_prefetch.L2_SHARE = share or _l2_prefetch.L2_SHARE
    graph = tg.capture(step, *args)
    output = graph.replay().clone()
    return graph, output


def compare(name: str, step, args, shares: list[float], rounds: int, exact: bool) -> None:
    variants = {"off": capture(step, args, None)}
    for share in shares:
        variants[f"on, {share:g} of L2"] = capture(step, args, share)
    base = variants["off"][1].float()
    for label, (_, output) in variants.items():
        error = rel_error(output.float(), base)
        agree = torch.equal(output, variants["off"][1]) if exact else error < 1e-2
        print(f"{name}: {label} output {'agrees' if agree else 'DIFFERS'} "
              f"(relative difference {error:.1e})", flush=True)
    for r in range(rounds):
        times = {label: replay_ms(graph) for label, (graph, _) in variants.items()}
        print(f"{name} round {r + 1}: " + ", ".join(f"{label} {ms:.4f} ms"
                                                     for label, ms in times.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="qwen2-0.5b:1,tinyllama:1,llama3.2-1b:1,"
                                            "tinyllama:8")
    parser.add_argument("--stacks", default="2048:1,1024:1,1536:1")
    parser.add_argument("--shares", default="0.5", help="L2 budgets to try, comma-separated")
    parser.add_argument("--position", type=int, default=255)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    shares = [float(s) for s in args.shares.split(",")]
    l2_mib = torch.cuda.get_device_properties(0).L2_cache_size / 2**20
    print(f"{torch.cuda.get_device_name()}, L2 {l2_mib:.0f} MiB", flush=True)
    for item in filter(None, args.models.split(",")):
        name, batch = item.split(":")
        config = LlamaConfig.from_hf(hf_config(name))
        model = Llama(config, dtype=torch.bfloat16, device="cuda")
        cache = model.new_cache(int(batch), 2048)
        tokens = torch.randint(0, config.vocab_size, (int(batch),), device="cuda")
        positions = torch.full((int(batch),), args.position, device="cuda")
        compare(f"{name} batch {batch}", model.decode, (tokens, positions, cache), shares,
                args.rounds, exact=True)
        del model, cache
        torch.cuda.empty_cache()
    for item in filter(None, args.stacks.split(",")):
        d, batch = (int(v) for v in item.split(":"))
        stack = LayerStack(LayerStackConfig(d=d, layers=layers_for(d, torch.bfloat16),
                                            dtype=torch.bfloat16), device="cuda")
        compare(f"stack d={d} batch {batch}", stack.fused_forward,
                (stack.token_inputs(1, batch)[0],), shares, args.rounds, exact=False)


if __name__ == "__main__":
    main()
