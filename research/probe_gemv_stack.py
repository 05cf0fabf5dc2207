"""One-row GEMV tiles forced onto whole LayerStacks at widths past the one-kernel layer
(d >= 2304 in 16-bit): does a tile that leaves room on an SM for the next kernel's
programs (fewer weight values a thread, fewer warps, a register cap) stream a stack closer
to the floor than the rule's, whose programs fill the SM (notes/decode.md)?

    PYTHONPATH=src python3 research/probe_gemv_stack.py bf16 2560,3072 [--rounds 2] [--sweep]
        [--two-kernels]

Each variant is recorded as the tuned plan of the (d, d) shape (both projections of a
layer), the stack captured again through a GraphRunner and timed; the rule runs first and
again after every variant, so drift shows. Prints us a token and % of the floor (weight
bytes / measured copy bandwidth). Give each run its own TILEGRAPH_CACHE_DIR.
"""

import argparse

import torch

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.bench.timing import measure
from tilegraph.kernels import decode_layer
from tilegraph.kernels import decode_plan as dp
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def variants(d: int, sweep: bool) -> dict:
    """label -> (gemv config or None for the rule, release late). sweep: every BLOCK_N of
    1-16 rows at 2, 4 and 8 warps whose tile holds at most 256 weight values a thread."""
    base = dp.gemv_config(d, d)
    bn = base["BLOCK_N"]
    if sweep:
        out = {}
        cols = (base["SPLIT"] + base.get("TAIL", 0)) * base["CHUNK"]
        for rows in (1, 2, 4, 8, 16):
            for warps in (2, 4, 8):
                per_thread = rows * cols // (32 * warps)
                if 16 <= per_thread <= 256:
                    out[f"BN {rows:2d} w{warps} ({per_thread} a thread)"] = (
                        {**base, "BLOCK_N": rows, "num_warps": warps}, False)
        return out
    out = {"rule": (None, False), "rule late release": (base, True)}
    for label, change in (("rows/2", {"BLOCK_N": max(1, bn // 2)}),
                          ("rows*2", {"BLOCK_N": bn * 2}),
                          ("rows*2 8 warps", {"BLOCK_N": bn * 2, "num_warps": 8}),
                          ("rows/2 2 warps", {"BLOCK_N": max(1, bn // 2), "num_warps": 2}),
                          ("maxnreg 80", {"maxnreg": 80}),
                          ("maxnreg 64", {"maxnreg": 64}),
                          ("rows/2 maxnreg 64", {"BLOCK_N": max(1, bn // 2), "maxnreg": 64})):
        out[label] = ({**base, **change}, False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dtype", choices=DTYPES)
    parser.add_argument("widths")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--two-kernels", action="store_true",
                        help="never the one-kernel layer (d <= 2048): time its rule first")
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s", flush=True)
    torch.manual_seed(0)
    widths = [int(w) for w in args.widths.split(",")]
    one_kernel_is_faster = decode_layer.one_kernel_is_faster
    if args.two_kernels:
        for d in widths:
            probe_width(d, args.dtype, copy_gbps, 0, False)  # the rule: one kernel where it is
        decode_layer.one_kernel_is_faster = lambda *args: False  # research only
    for d in widths:
        probe_width(d, args.dtype, copy_gbps, args.rounds, args.sweep)
        torch.cuda.empty_cache()
    if args.two_kernels:  # the one-kernel rule again, after the variants
        decode_layer.one_kernel_is_faster = one_kernel_is_faster
        for d in widths:
            probe_width(d, args.dtype, copy_gbps, 0, False)


def probe_width(d: int, name: str, copy_gbps: float, rounds: int, sweep: bool) -> None:
    dtype = DTYPES[name]
    layers = layers_for(d, dtype)
    stack = LayerStack(LayerStackConfig(d=d, layers=layers, dtype=dtype), device="cuda")
    floor_us = stack.config.weight_bytes / (copy_gbps * 1e3)
    x = stack.token_inputs(1, 1)[0]
    expected = stack.reference(x)
    print(f"d={d} {name} b1, {layers} layers, floor {floor_us:.1f} us; rule "
          f"{dp.gemv_config(d, d)}", flush=True)

    def time_variant(config, late) -> str:
        dp._tuned._memo.clear()       # research only: forget the last variant's plan
        dp._late_release._memo.clear()
        if config is not None:
            dp.record(1, d, d, dtype, dp.Plan("gemv", config))
        dp.set_late_release(d, d, dtype, late)
        runner = tg.GraphRunner(stack.fused_forward, (x,), sizes=(1,))
        y = runner(x).double()
        error = ((y - expected).abs().max() / expected.abs().max()).item()
        t = measure(lambda: runner(x), warmup_ms=20, rep_ms=80).median * 1e3
        flag = "" if error < 0.05 else f" ERROR {error:.0e}"
        return f"{t:7.1f} us {100 * floor_us / t:5.1f}%{flag}"

    if rounds == 0:
        print(f"  {'rule (one kernel a layer)':28s} {time_variant(None, False)}", flush=True)
    for _ in range(rounds):
        print(f"  {'rule':28s} {time_variant(None, False)}", flush=True)
        for i, (label, (config, late)) in enumerate(variants(d, sweep).items()):
            try:
                line = time_variant(config, late)
            except Exception as error:  # a config the compiler refuses: say so, go on
                line = f"failed: {type(error).__name__}: {str(error)[:120]}"
            print(f"  {label:28s} {line}", flush=True)
            if i % 4 == 3:
                print(f"  {'rule':28s} {time_variant(None, False)}", flush=True)
        print(f"  {'rule':28s} {time_variant(None, False)}", flush=True)

if __name__ == "__main__":
    main()
