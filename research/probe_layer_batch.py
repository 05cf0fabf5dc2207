"""One kernel a layer at 2-4 rows: does tg.decode_stack's one-kernel chain (fp32 accumulator
copies, PDL) beat the two projections a layer that the rule runs past one row, on narrow
stacks where a layer's programs still fit one wave?

    PYTHONPATH=src python3 research/probe_layer_batch.py bf16 512x2,640x3,1024x4

For each d x batch: a LayerStack spanning three L2 caches (stack_grid.layers_for), timed
through a tg.GraphRunner the way `tilegraph bench stack-grid` times it, with the library's
rule, then with decode_layer's one-kernel rule taking every row count (tiles of 8 rows of
Wq a program, the library's choice past one row, and of 16), each checked against float64
first. Research only: the rule's functions are replaced in the module for the variants.
Prints microseconds a token.
"""

import sys

import torch

import tilegraph as tg
from tilegraph.bench.timing import measure
from tilegraph.kernels import decode_layer as dl
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
RULE_FASTER, RULE_CONFIG = dl.one_kernel_is_faster, dl.decode_layer_config


def forced(block_q):
    """(one_kernel_is_faster, decode_layer_config) taking one kernel at any row count."""
    def config(rows, d, element_size):
        return {**RULE_CONFIG(rows, d, element_size), "BLOCK_Q": block_q or
                RULE_CONFIG(rows, d, element_size)["BLOCK_Q"]}

    def faster(cfg, rows, d, element_size, sm_count):
        return RULE_FASTER(cfg, 1, d, element_size, sm_count)
    return faster, config


def main():
    name, points = sys.argv[1], sys.argv[2]
    dtype = DTYPES[name]
    torch.manual_seed(0)
    variants = {"rule": (RULE_FASTER, RULE_CONFIG), "one BQ8": forced(8),
                "one BQ16": forced(16)}
    for point in points.split(","):
        d, batch = map(int, point.split("x"))
        layers = layers_for(d, dtype)
        stack = LayerStack(LayerStackConfig(d=d, layers=layers, dtype=dtype), device="cuda")
        x = stack.token_inputs(1, batch)[0]
        expected = stack.reference(x)
        line = [f"{name} d={d} b={batch} L={layers}"]
        for label, (faster, config) in variants.items():
            dl.one_kernel_is_faster, dl.decode_layer_config = faster, config
            try:
                runner = tg.GraphRunner(stack.fused_forward, (x,), sizes=(batch,))
                y = runner(x).double()
                error = ((y - expected).abs().max() / expected.abs().max()).item()
                flag = "" if error < 0.05 else f" (ERROR {error:.0e})"
                t = measure(lambda r=runner, x=x: r(x), warmup_ms=20, rep_ms=60).median * 1e3
                line.append(f"{label} {t:.1f}{flag}")
            except Exception as error:  # noqa: BLE001 - research: report and go on
                line.append(f"{label} failed ({type(error).__name__}: {error})"[:120])
            finally:
                dl.one_kernel_is_faster, dl.decode_layer_config = RULE_FASTER, RULE_CONFIG
        print(" | ".join(line), flush=True)
        del stack
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
