"""Exploration (not a deliverable): one kernel per decode layer (kernels/decode_layer.py)
against two tg.linear kernels per layer, block shapes swept on the whole stack, GPU time per
token from graphs of many tokens.

    PYTHONPATH=src python3 benchmarks/explore_decode_layer.py [preset[:rows] ...]
"""

import sys

import torch

from tilegraph.bench import measure
from tilegraph.kernels.decode_layer import decode_layer_config
from tilegraph.models import PRESETS, LayerStack
from tilegraph.testing import rel_error


def sweep(preset: str, rows: int = 1) -> None:
    stack = LayerStack(PRESETS[preset], device="cuda")
    x = stack.token_inputs(1, rows)[0]
    ref = stack.reference(x)
    rule = decode_layer_config(rows, stack.config.d, x.element_size())
    shapes = [{"BLOCK_Q": bq, "BLOCK_D": rule["BLOCK_D"], "num_warps": nw, "num_stages": 1}
              for bq in (4, 8, 16, 32) for nw in (1, 2, 4, 8, 16)
              if 256 <= 2 * bq * rule["BLOCK_D"] * x.element_size() // (32 * nw) <= 1024]
    candidates = {"two kernels a layer": lambda: stack.fused_forward(x, kernels_per_layer=2),
                  f"one kernel, rule {rule}": lambda: stack._one_kernel_layers(x, rule, True)}
    for shape in shapes:
        candidates[f"one kernel {shape}"] = lambda s=shape: stack._one_kernel_layers(x, s, True)
    results = []
    for name, fn in candidates.items():
        try:
            err = rel_error(fn(), ref)
            us = measure(fn, graph=True, rep_ms=100).median * 1e3
        except Exception as e:  # noqa: BLE001 - a shape that fails to compile is data
            print(f"  {name}: {type(e).__name__} {e}"[:200], flush=True)
            continue
        results.append((us, name, err))
    print(f"{preset} rows={rows}: us/token in a graph, best first "
          f"({torch.cuda.get_device_name()})")
    for us, name, err in sorted(results):
        print(f"  {us:7.1f} us {name} err {err:.1e}", flush=True)


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["seed-bf16", "seed", "small"]:
        preset, _, rows = arg.partition(":")
        sweep(preset, int(rows or 1))
