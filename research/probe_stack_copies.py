"""How many fp32 accumulators tg.decode_stack's one-kernel layers should spread their atomic
adds over (kernels/decode_stack.py): whole one-row LayerStacks captured in CUDA graphs with
`accumulator_copies` forced to 1-4, replayed in alternating rounds.

    PYTHONPATH=src python3 research/probe_stack_copies.py bf16 1024,1536,2048 [--rounds 2]

Prints us a replay and % of the floor (weight bytes / measured copy bandwidth); every
variant is checked against the float64 reference first.
"""

import argparse

import torch
from probe_layer_copies import replay_us  # research/ is on sys.path when run

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.kernels import decode_stack
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
COPIES = (1, 2, 3, 4)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dtype", choices=DTYPES)
    parser.add_argument("widths")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s", flush=True)
    dtype, rule = DTYPES[args.dtype], decode_stack.accumulator_copies
    for d in (int(w) for w in args.widths.split(",")):
        config = LayerStackConfig(d=d, layers=layers_for(d, dtype), dtype=dtype)
        stack = LayerStack(config, device="cuda")
        floor_us = config.weight_bytes / (copy_gbps * 1e3)
        h = stack.token_inputs(1, 1)[0]
        expected = stack.reference(h)
        print(f"d={d} {args.dtype} b1, {config.layers} layers, floor {floor_us:.1f} us, rule "
              f"{rule(d)} copies", flush=True)
        graphs = {}
        for copies in COPIES:
            decode_stack.accumulator_copies = lambda d, copies=copies: copies  # research only
            try:
                graphs[copies] = tg.capture(stack.fused_forward, h)
            finally:
                decode_stack.accumulator_copies = rule
            y = graphs[copies].replay().double()
            error = ((y - expected).abs().max() / expected.abs().max()).item()
            print(f"  copies {copies}  error {error:.1e}", flush=True)
        for r in range(args.rounds):
            for copies, graph in graphs.items():
                t = replay_us(graph)
                print(f"  copies {copies}  {t:7.1f} us {100 * floor_us / t:5.1f}%  (round {r})",
                      flush=True)
        del graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
