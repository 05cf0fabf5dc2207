"""The CPU half of research/probe_fp32_wide_loss.py: is fp32 training of the benchmark's
task at d=2048, 4 layers, 512 tokens (lr 3e-4, 200 steps) chaotic? Eager PyTorch on the CPU
against the same with the weights nudged by 1e-6 relative noise (CPU weights and batches:
the CPU's generator, not the GPU run's). Two cores: about 11 minutes a trajectory.

    PYTHONPATH=src python3 research/probe_fp32_wide_loss_cpu.py [threads]

Session 28: 0.2092 and 0.2092 at step 199 (0.2703 and 0.2704 at step 175): not chaotic.
"""
import copy
import sys
import time

import torch
import torch.nn.functional as F

from tilegraph.models.mlp import MLPStack

D, LAYERS, TOKENS, STEPS = 2048, 4, 512, 200


def trajectory(model, batches) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    losses = []
    for i in range(STEPS):
        x, y = batches[i % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
torch.manual_seed(0)
template = MLPStack(D, LAYERS, fused=False)
batches = [(torch.randn(TOKENS, D), torch.randn(TOKENS, D)) for _ in range(8)]
nudged = copy.deepcopy(template)
with torch.no_grad():
    for p in nudged.parameters():
        p.mul_(1 + 1e-6 * torch.randn_like(p))
for name, model in (("fp32", copy.deepcopy(template)), ("fp32 nudged 1e-6", nudged)):
    start = time.time()
    losses = trajectory(model, batches)
    print(f"{name:>18}: " + " ".join(f"{v:.4f}" for v in losses[::25] + losses[-1:]),
          f"({time.time() - start:.0f} s)", flush=True)
