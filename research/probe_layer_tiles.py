"""One-kernel decode layer tiles forced onto whole one-row LayerStacks: rows of Wq a program
(BLOCK_Q), warps and a register cap. The rule's tile (16 rows, 8 warps, 128 KB at d=2048)
fills an SM's registers, so the next layer cannot prefetch beside it, and at d <= 1536 its
grid (d / 16 programs) leaves SMs idle. Does a tile with room for a second layer's program
beside it stream the stack closer to the floor (notes/decode.md)?

    PYTHONPATH=src python3 research/probe_layer_tiles.py bf16 1024,1536,2048 [--rounds 2]

Every variant is the one kernel a layer (the one-wave bound lifted); "two kernels" is the
two-GEMV layer. The rule runs first and again every four variants, so drift shows. Prints us
a token, % of the floor (weight bytes / measured copy bandwidth), registers and spills of the
compiled kernel. Give each run its own TILEGRAPH_CACHE_DIR.
"""

import argparse

import torch
import triton

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.bench.timing import measure
from tilegraph.kernels import decode_layer
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# (rows of Wq a program, warps, register cap or None)
VARIANTS = [(16, 8, None), (8, 4, None), (8, 4, 168), (8, 8, None), (8, 8, 80),
            (4, 2, None), (4, 2, 168), (4, 4, None), (4, 4, 80), (16, 16, None),
            (32, 16, None)]


class KernelSpy:
    """Launches the layer kernel and keeps the compiled kernel of the last launch."""

    def __init__(self, kernel):
        self.kernel, self.last = kernel, None

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.last = self.kernel[grid](*args, **kwargs)
            return self.last
        return launch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dtype", choices=DTYPES)
    parser.add_argument("widths")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s", flush=True)
    spy = KernelSpy(decode_layer._decode_layer_kernel)
    decode_layer._decode_layer_kernel = spy  # research only
    for d in (int(w) for w in args.widths.split(",")):
        probe_width(d, DTYPES[args.dtype], copy_gbps, args.rounds, spy)
        torch.cuda.empty_cache()


def probe_width(d, dtype, copy_gbps, rounds, spy) -> None:
    layers = layers_for(d, dtype)
    stack = LayerStack(LayerStackConfig(d=d, layers=layers, dtype=dtype), device="cuda")
    floor_us = stack.config.weight_bytes / (copy_gbps * 1e3)
    x = stack.token_inputs(1, 1)[0]
    expected = stack.reference(x)
    rule_config, rule_fits = decode_layer.decode_layer_config, decode_layer.one_kernel_is_faster
    print(f"d={d} {dtype} b1, {layers} layers, floor {floor_us:.1f} us; rule "
          f"{rule_config(1, d, stack.layers[0].wq.element_size())}", flush=True)

    def time_variant(variant) -> str:
        spy.last = None
        if variant == "two kernels":
            decode_layer.one_kernel_is_faster = lambda *a: False
        elif variant is not None:
            block_q, warps, cap = variant
            config = {"BLOCK_Q": block_q, "BLOCK_D": triton.next_power_of_2(d),
                      "num_warps": warps, "num_stages": 1,
                      **({"maxnreg": cap} if cap else {})}
            decode_layer.decode_layer_config = lambda *a: dict(config)
            decode_layer.one_kernel_is_faster = lambda config, rows, *a: rows == 1
        try:
            runner = tg.GraphRunner(stack.fused_forward, (x,), sizes=(1,))
            y = runner(x).double()
            error = ((y - expected).abs().max() / expected.abs().max()).item()
            t = measure(lambda: runner(x), warmup_ms=20, rep_ms=80).median * 1e3
        finally:
            decode_layer.decode_layer_config = rule_config
            decode_layer.one_kernel_is_faster = rule_fits
        regs = (f"{spy.last.n_regs} regs {spy.last.n_spills} spills"
                if spy.last is not None else "")
        flag = "" if error < 0.05 else f" ERROR {error:.0e}"
        return f"{t:7.1f} us {100 * floor_us / t:5.1f}% {regs}{flag}"

    for _ in range(rounds):
        print(f"  {'rule':24s} {time_variant(None)}", flush=True)
        labels = [("two kernels", "two kernels")] + [
            (f"BQ {bq:2d} w{w:2d}" + (f" cap {cap}" if cap else ""), (bq, w, cap))
            for bq, w, cap in VARIANTS]
        for i, (label, variant) in enumerate(labels):
            try:
                line = time_variant(variant)
            except Exception as error:  # a config the compiler refuses: say so, go on
                line = f"failed: {type(error).__name__}: {str(error)[:120]}"
            print(f"  {label:24s} {line}", flush=True)
            if i % 4 == 3:
                print(f"  {'rule':24s} {time_variant(None)}", flush=True)
        print(f"  {'rule':24s} {time_variant(None)}", flush=True)


if __name__ == "__main__":
    main()
