"""Exploration (not a deliverable): the persistent decode-stack kernel against two kernels
per layer, GPU time per token from graphs holding many tokens, and its launch shapes.

    PYTHONPATH=src python3 benchmarks/explore_decode_stack.py [seed seed-bf16 small ...]
"""

import dataclasses
import os
import sys

import torch
import triton

from tilegraph.bench import ceilings, measure
from tilegraph.models import PRESETS, LayerStack
from tilegraph.testing import rel_error

ds = sys.modules["tilegraph.kernels.decode_stack"]


def gpu_us(fn) -> float:
    """Median GPU time of one call, from a graph of many calls (launch cost excluded)."""
    return measure(fn, graph=True, warmup_ms=20, rep_ms=200).median * 1e3


def explore(preset: str, copy_gbps: float) -> None:
    config = PRESETS[preset]
    stack = LayerStack(config, device="cuda")
    floor_us = config.weight_bytes / (copy_gbps * 1e9) * 1e6
    print(f"\n{preset}: d={config.d} layers={config.layers} {config.dtype}, "
          f"floor {floor_us:.1f} us")
    for batch in (1, 8):
        explore_batch(stack, batch, floor_us)


def explore_batch(stack: LayerStack, batch: int, floor_us: float) -> None:
    config, w = stack.config, stack.weights
    x = stack.token_inputs(1, batch)[0]
    ref = stack.reference(x)
    out = torch.empty_like(x)
    base = ds.decode_stack_config(config.d, config.d, x.element_size(), ds._sm_count(0))
    candidates = [("layers (2 kernels/layer, PDL)",
                   lambda: stack.fused_forward(x, kernels_per_layer=2))]
    shapes = [(w, c) for w in (4, 8, 16) for c in (64, 128)] if batch == 1 else [
        (base.num_warps, ds.CHUNK_BYTES_PER_THREAD)]
    for warps, chunk_bytes in shapes:
        elements = chunk_bytes // x.element_size() * 32 * warps
        block_k = min(triton.next_power_of_2(config.d), max(16, elements // base.block_n))
        cfg = dataclasses.replace(base, num_warps=warps, block_k=block_k,
                                  chunks=triton.cdiv(config.d, block_k))
        label = f"persistent warps={warps} bk={block_k} chunks={cfg.chunks}"
        candidates.append((label, lambda cfg=cfg: ds._launch_decode_stack(
            x, w.norm_weight, w.wq, w.wo, config.eps, stack.workspace, out, cfg)))
    candidates.append(("no barrier, one launch (WRONG results: stream time)",
                       lambda: unsynced_launch(stack, x, out, base)))
    for label, fn in candidates:
        try:
            out.fill_(float("nan"))
            result = fn()
            torch.cuda.synchronize()
            err = rel_error(result if isinstance(result, torch.Tensor) else out, ref)
            us = gpu_us(fn)
            print(f"  batch {batch} {label:45s} {us:8.1f} us/token "
                  f"{100 * floor_us / us:5.1f}% floor  err {err:.1e}", flush=True)
        except Exception as e:  # keep exploring the other shapes
            print(f"  batch {batch} {label:45s} ERROR {type(e).__name__}: {e}"[:300], flush=True)


def unsynced_launch(stack: LayerStack, x: torch.Tensor, out: torch.Tensor, config):
    """The whole stack in one launch with the barriers compiled out: what the weight stream
    alone costs (the results are wrong: phases race)."""
    w, m = stack.weights, x.shape[0]
    block_m = triton.next_power_of_2(m)
    q = torch.empty_like(x)
    kernel = ds._decode_stack_kernel[(config.programs,)](
        out, x, x.stride(0), q, w.norm_weight, w.wq, w.wo, stack.workspace, m, stack.config.d,
        stack.config.d, 0, stack.config.layers, stack.config.eps, RUN_A=True, RUN_B=True,
        SYNC=False, BLOCK_M=block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
        CHUNKS=config.chunks, num_warps=config.num_warps, num_stages=1)
    return kernel


def dump_kernels(out_dir: str) -> None:
    """PTX and register counts of every compiled decode-stack kernel, for reading."""
    os.makedirs(out_dir, exist_ok=True)
    for cache in ds._decode_stack_kernel.device_caches.values():
        for i, kernel in enumerate(cache[0].values()):
            meta = kernel.metadata
            name = f"{i}-w{meta.num_warps}"
            print(f"kernel {name}: {kernel.n_regs} registers, {kernel.n_spills} spills")
            with open(os.path.join(out_dir, name + ".ptx"), "w") as f:
                f.write(kernel.asm["ptx"])


def main() -> None:
    presets = sys.argv[1:] or ["seed", "seed-bf16", "small"]
    copy_gbps = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}: copy {copy_gbps:.0f} GB/s, "
          f"{ds._sm_count(0)} SMs")
    for preset in presets:
        explore(preset, copy_gbps)
    if os.environ.get("OUT"):
        dump_kernels(os.path.join(os.environ["OUT"], "ptx"))


if __name__ == "__main__":
    main()
