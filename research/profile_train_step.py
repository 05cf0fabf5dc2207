"""Where a training step's GPU time goes: kernels of the MLP stack's step (models/mlp.py,
AdamW fused), tilegraph's path against plain PyTorch's, from torch.profiler; then the same
step captured by tg.TrainStep (replays profiled) and the GEMM tuner's choice per product.

    PYTHONPATH=src python3 research/profile_train_step.py --dtype bf16 --tokens 4096
"""

import argparse

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import tilegraph as tg
from tilegraph.kernels import autotune
from tilegraph.models.mlp import MLPStack


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--d", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    x = torch.randn(args.tokens, args.d, device="cuda", dtype=dtype)
    y = torch.randn_like(x)
    for fused in (False, True):
        torch.manual_seed(0)
        model = MLPStack(args.d, args.layers, fused=fused).to("cuda", dtype)
        optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-3, device="cuda"),
                                      fused=True, capturable=True)

        def step():
            optimizer.zero_grad(set_to_none=True)
            F.mse_loss(model(x), y).backward()
            optimizer.step()

        for _ in range(5):  # compile, tune
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                step()
            torch.cuda.synchronize()
        print(f"\n== {'tilegraph' if fused else 'PyTorch'} {args.dtype} {args.tokens} tokens, "
              "3 steps ==")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=32,
                                        max_name_column_width=70))
        if not fused:
            continue
        train_step = tg.TrainStep(model, optimizer, F.mse_loss, (x, y))
        for _ in range(3):
            train_step(x, y)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                train_step(x, y)
            torch.cuda.synchronize()
        print(f"\n== tg.TrainStep {args.dtype} {args.tokens} tokens, 3 replays ==")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=16,
                                        max_name_column_width=70))
        for key, config in autotune.choices().get("gemm-cold", {}).items():
            print(key, config)


if __name__ == "__main__":
    main()
