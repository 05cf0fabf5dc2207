"""Which kinds of GEMM candidate win a training step's products, and by how much: build the
training benchmark's tg.TrainStep at one shape (the tuner times every candidate of every
product) and print, per product, the best time of each kind and the winner. A kind whose
best never comes near the winner costs tuning time for nothing.

    PYTHONPATH=src python3 research/train_gemm_picks.py --d 1024 --layers 8 --tokens 512
"""
import argparse
import ast
import time

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.bench.training import _optimizer
from tilegraph.kernels import matmul
from tilegraph.models.mlp import MLPStack


def kind(config: dict) -> str:
    if config.get("CUBLAS"):
        return "cublas+pass" if config.get("BIAS_IN_PASS") else "cublas"
    if config.get("TMA"):
        return "tma"
    if config.get("IN_LOOP"):
        return f"split, {config['IN_LOOP']} in loop"
    if config.get("SPLIT_TF32"):
        return "split both"
    if config.get("DOT_PRECISION") == "tf32x3":
        return "tf32x3 in loop"
    return "pointer"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16"))
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=512)
    args = parser.parse_args()
    dtype = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    torch.manual_seed(0)
    model = MLPStack(args.d, args.layers, fused=True).to(device="cuda", dtype=dtype)
    batch = (torch.randn(args.tokens, args.d, device="cuda", dtype=dtype),
             torch.randn(args.tokens, args.d, device="cuda", dtype=dtype))
    start = time.perf_counter()
    tg.TrainStep(model, _optimizer(model, "cuda"), F.mse_loss, batch)
    print(f"{torch.cuda.get_device_name()}, {args}: built in {time.perf_counter() - start:.1f} s")
    kinds = sorted({kind(c) for c in matmul._tuner.configs} | {"cublas", "cublas+pass"})
    print(f"{'key':>60} " + " ".join(f"{k[:14]:>14}" for k in kinds) + "  us, best of each kind")
    for key, timings in matmul._tuner.timings.items():
        best = {}
        for config, ms in timings:
            best[kind(config)] = min(best.get(kind(config), float("inf")), ms * 1e3)
        name = ast.literal_eval(key)
        print(f"{str(name[1:])[:60]:>60} " + " ".join(
            f"{best[k]:14.1f}" if k in best else f"{'-':>14}" for k in kinds), flush=True)


if __name__ == "__main__":
    main()
