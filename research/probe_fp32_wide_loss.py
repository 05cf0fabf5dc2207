"""Is the training benchmark's final loss at fp32, d=2048, 4 layers, 512 tokens a fair check?
tg.TrainStep ended 4% from eager there (session 28). Loss trajectories of the benchmark's task
(lr 3e-4, 200 steps): eager PyTorch, eager with the weights nudged by 1e-6 relative noise, and
on the GPU tilegraph's layers uncaptured with torch's AdamW (TILEGRAPH_AUTOTUNE=0: the
default kernels).

    TILEGRAPH_AUTOTUNE=0 PYTHONPATH=src python3 research/probe_fp32_wide_loss.py
    PYTHONPATH=src python3 research/probe_fp32_wide_loss.py --cpu [--threads 2]

--cpu: eager and nudged eager only, with the CPU's weights and batches (about 11 minutes a
trajectory on two cores). Session 28, --cpu: 0.2092 and 0.2092 at step 199 (0.2703 against
0.2704 at step 175): the task is not chaotic there. The GPU run is still to do.
"""
import argparse
import copy
import time

import torch
import torch.nn.functional as F

from tilegraph.models.mlp import MLPStack

D, LAYERS, TOKENS, STEPS = 2048, 4, 512, 200


def trajectory(model, batches, device: str) -> list[float]:
    lr = torch.tensor(3e-4, device=device) if device == "cuda" else 3e-4
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01,
                                  fused=device == "cuda", capturable=device == "cuda")
    losses = []
    for i in range(STEPS):
        x, y = batches[i % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)   # as bench/training.py's run()
    template = MLPStack(D, LAYERS, fused=False).to(device=device, dtype=torch.float32)
    batches = [(torch.randn(TOKENS, D, device=device), torch.randn(TOKENS, D, device=device))
               for _ in range(8)]
    nudged = copy.deepcopy(template)
    with torch.no_grad():
        for p in nudged.parameters():
            p.mul_(1 + 1e-6 * torch.randn_like(p))
    variants = [("eager", copy.deepcopy(template)), ("eager nudged 1e-6", nudged)]
    if device == "cuda":
        fused = copy.deepcopy(template)
        for layer in fused.layers:
            layer.fused = True
        variants.append(("tilegraph uncaptured", fused))
    print(f"{device}; loss at steps 0, 25, ..., {STEPS - 1}")
    for name, model in variants:
        start = time.time()
        losses = trajectory(model, batches, device)
        print(f"{name:>22}: " + " ".join(f"{v:.4f}" for v in losses[::25] + losses[-1:]),
              f"({time.time() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
