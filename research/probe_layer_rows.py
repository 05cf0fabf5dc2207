"""Rows of Wq a one-kernel-layer program holds, fewer than its 16-row tile: at d=1536 the
rule's 16 rows make 96 programs for 132 SMs; 12 rows in the same tile make 128. Whole
one-row LayerStacks through tg.decode_stack, captured in CUDA graphs, the rule against
`ROWS = cdiv(d, SMs)` (same tile, same warps), alternating rounds.

    PYTHONPATH=src python3 research/probe_layer_rows.py bf16 1024,1280,1536,1792 [--rounds 2]

Prints us a replay and % of the floor; every variant is checked against float64 first.
"""

import argparse

import torch
import triton
from probe_layer_copies import replay_us  # research/ is on sys.path when run

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.kernels import decode_layer
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dtype", choices=DTYPES)
    parser.add_argument("widths")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s, {sms} SMs", flush=True)
    dtype, rule = DTYPES[args.dtype], decode_layer.decode_layer_config
    for d in (int(w) for w in args.widths.split(",")):
        config = LayerStackConfig(d=d, layers=layers_for(d, dtype), dtype=dtype)
        stack = LayerStack(config, device="cuda")
        floor_us = config.weight_bytes / (copy_gbps * 1e3)
        h = stack.token_inputs(1, 1)[0]
        expected = stack.reference(h)
        base = rule(1, d, stack.layers[0].wq.element_size())
        rows = triton.cdiv(d, sms)
        print(f"d={d} {args.dtype} b1, {config.layers} layers, floor {floor_us:.1f} us, rule "
              f"{base}, {triton.cdiv(d, base['BLOCK_Q'])} programs; variant {rows} rows, "
              f"{triton.cdiv(d, rows)} programs", flush=True)
        graphs = {"rule": tg.capture(stack.fused_forward, h)}
        if rows < base["BLOCK_Q"]:
            decode_layer.decode_layer_config = (  # research only
                lambda *a, base=base, rows=rows: {**base, "ROWS": rows})
            try:
                graphs[f"{rows} rows"] = tg.capture(stack.fused_forward, h)
            finally:
                decode_layer.decode_layer_config = rule
        for label, graph in graphs.items():
            y = graph.replay().double()
            error = ((y - expected).abs().max() / expected.abs().max()).item()
            print(f"  {label:8s} error {error:.1e}", flush=True)
        for r in range(args.rounds):
            for label, graph in graphs.items():
                t = replay_us(graph)
                print(f"  {label:8s} {t:7.1f} us {100 * floor_us / t:5.1f}%  (round {r})",
                      flush=True)
        del graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
