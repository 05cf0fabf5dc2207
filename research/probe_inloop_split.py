"""Exact-fp32 products with one operand split in the kernel's loop rather than by a pass of
its own (kernels/_gemm_tf32x3.py, IN_LOOP): the training step's products at few tokens,
where the weights' split passes cost as much at 256 tokens as at 4096 (notes/training.md,
session 27). Each product timed whole (split passes included) from graph replays over
operands rotated past L2, against cuBLAS's exact fp32.

    PYTHONPATH=src python3 research/probe_inloop_split.py
"""
import torch
import triton

from tilegraph.kernels._gemm_tf32x3 import launch_gemm_tf32x3
from tilegraph.kernels.autotune import _graph_replay_ms, copies_spanning_l2, rotating
from tilegraph.kernels.matmul import _config
from tilegraph.testing import randn

torch.backends.cuda.matmul.allow_tf32 = False
CONFIGS = [_config(128, 128, 32, 8, 3), _config(128, 128, 32, 8, 4), _config(128, 64, 32, 4, 4),
           _config(64, 128, 32, 4, 4), _config(64, 64, 32, 4, 4)]
CONFIGS += [{**_config(128, 128, 32, 8, 3), "SPLIT_K": s} for s in (2, 3, 4)]
CONFIGS += [{**_config(128, 64, 32, 4, 4), "SPLIT_K": s} for s in (2, 4)]


def products(tokens: int, d: int, ffn: int):
    """(name, a, b) of the 6 products of one x + W2 gelu(W1 x) layer: a (M, K) @ b (K, N)."""
    for name, n_out, n_in in (("W1", ffn, d), ("W2", d, ffn)):
        w = randn(n_out, n_in, device="cuda", scale=n_in ** -0.5)
        x = randn(tokens, n_in, device="cuda")
        dz = randn(tokens, n_out, device="cuda")
        yield f"{name} fwd", x, w.t()
        yield f"{name} dx", dz, w
        yield f"{name} dW", dz.t(), x


def time_product(a, b, run_one) -> float:
    copies = copies_spanning_l2((a.numel() + b.numel()) * 4)
    pairs = [(a, b)] + [(a.clone(), b.clone()) for _ in range(copies - 1)]
    out = torch.empty(a.shape[0], b.shape[1], device="cuda")
    return _graph_replay_ms(rotating(lambda ab: run_one(*ab, out), pairs), rep_ms=20) * 1e3


def main() -> None:
    print(f"{torch.cuda.get_device_name()}; us per product (split passes included)")
    for tokens, d, ffn in ((256, 1024, 4096), (512, 1024, 4096), (512, 768, 3072)):
        print(f"\n== {tokens} tokens, d={d}, ffn={ffn}")
        print(f"{'product':>8} {'M x N x K':>18} {'cuBLAS':>8} " + " ".join(
            f"{m:>22}" for m in ("split both", "a in loop", "b in loop")))
        for name, a, b in products(tokens, d, ffn):
            ref = a.double() @ b.double()
            cublas = time_product(a, b, lambda a, b, out: torch.mm(a, b, out=out))
            cells = []
            for mode in ("none", "a", "b"):
                best = (float("inf"), "")
                for config in CONFIGS:
                    config = {**config, "IN_LOOP": mode}
                    out = torch.full_like(ref, float("nan"), dtype=torch.float32)
                    try:
                        launch_gemm_tf32x3(a, b, out, config)
                    except triton.runtime.errors.OutOfResources:
                        continue
                    error = ((out.double() - ref).norm() / ref.norm()).item()
                    assert error < 1e-6, (name, config, error)
                    us = time_product(a, b, lambda a, b, out, c=config:
                                      launch_gemm_tf32x3(a, b, out, c))
                    tag = (f"{config['BLOCK_M']}x{config['BLOCK_N']}s{config['num_stages']}"
                           f"k{config.get('SPLIT_K', 1)}")
                    best = min(best, (us, tag))
                cells.append(f"{best[0]:8.1f} {best[1]:>13}")
            m, k = a.shape
            print(f"{name:>8} {m:>5} x {b.shape[1]:>4} x {k:>4} {cublas:8.1f} "
                  + " ".join(f"{c:>22}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
