"""Is the training benchmark's final loss at fp32, d=2048, 4 layers, 512 tokens a fair check?
tg.TrainStep ended 4% from eager there (session 28). Loss trajectories on the benchmark's own
weights and batches: eager PyTorch, eager with the weights nudged by 1e-6 relative noise, and
tilegraph's layers uncaptured with torch's AdamW (TILEGRAPH_AUTOTUNE=0: the default kernels).

    TILEGRAPH_AUTOTUNE=0 PYTHONPATH=src python3 research/probe_fp32_wide_loss.py
"""
import copy

import torch
import torch.nn.functional as F

from tilegraph.models.mlp import MLPStack

D, LAYERS, TOKENS, STEPS = 2048, 4, 512, 200


def trajectory(model, batches) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=torch.tensor(3e-4, device="cuda"),
                                  weight_decay=0.01, fused=True, capturable=True)
    losses = []
    for i in range(STEPS):
        x, y = batches[i % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


torch.manual_seed(0)   # as bench/training.py's run()
template = MLPStack(D, LAYERS, fused=False).to(device="cuda", dtype=torch.float32)
batches = [(torch.randn(TOKENS, D, device="cuda"), torch.randn(TOKENS, D, device="cuda"))
           for _ in range(8)]
nudged = copy.deepcopy(template)
with torch.no_grad():
    for p in nudged.parameters():
        p.mul_(1 + 1e-6 * torch.randn_like(p))
fused = copy.deepcopy(template)
for layer in fused.layers:
    layer.fused = True
print(f"{torch.cuda.get_device_name()}; loss at steps 0, 25, ..., {STEPS - 1}")
for name, model in (("eager", copy.deepcopy(template)), ("eager nudged 1e-6", nudged),
                    ("tilegraph uncaptured", fused)):
    losses = trajectory(model, batches)
    print(f"{name:>22}: " + " ".join(f"{v:.4f}" for v in losses[::25] + losses[-1:]),
          flush=True)
