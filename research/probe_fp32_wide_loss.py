"""Is the training benchmark's final loss at fp32, d=2048, 4 layers, 512 tokens a fair check?
tg.TrainStep ended 4% from eager there (session 28). This bisects: the first step's gradients
of eager and of tilegraph's layers against float64, then the loss trajectories of the
benchmark's task (its learning rate, 200 steps) for

    eager                  PyTorch, torch's fused AdamW (the reference)
    eager nudged 1e-6      the same from weights nudged by 1e-6 relative noise (chaos?)
    tilegraph uncaptured   tilegraph's layers, torch's AdamW, no graph (the kernels?)
    TrainStep              as the benchmark: tilegraph's layers and multi-tensor Adam, captured
    TrainStep torch AdamW  the same stepped by torch's fused AdamW (the Adam kernel?)
    TrainStep eager layers PyTorch's layers, multi-tensor Adam, captured (the capture?)

and for each the first step whose loss is 1e-5, 1e-4, 1e-3, 1e-2 (relative) from eager's.

    PYTHONPATH=src python3 research/probe_fp32_wide_loss.py [--variants a,b] [--out f.json]
    PYTHONPATH=src python3 research/probe_fp32_wide_loss.py --cpu [--threads 2]

--cpu: eager and nudged eager only, with the CPU's weights and batches (about 11 minutes a
trajectory on two cores). Session 28, --cpu: 0.2092 and 0.2092 at step 199 (0.2703 against
0.2704 at step 175). Session 29, GPU: the kernels and the capture agree with eager (1e-4 apart
from step 149 on, as nudged eager from 129); TrainStep's Adam kernel was 1e-5 off from step 1
and ended 4% away: its first update (research/probe_adam_first_steps.py), since fixed. The
task amplifies a perturbation about 10x every 40 steps.
"""
import argparse
import copy
import json
import time

import torch
import torch.nn.functional as F

import tilegraph as tg
import tilegraph.graph.train as train_module
from tilegraph.bench.training import LEARNING_RATE
from tilegraph.models.mlp import MLPStack

D, LAYERS, TOKENS, STEPS = 2048, 4, 512, 200
THRESHOLDS = (1e-5, 1e-4, 1e-3, 1e-2)


def _optimizer(model, device: str):
    lr = torch.tensor(LEARNING_RATE, device=device) if device == "cuda" else LEARNING_RATE
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01,
                             fused=device == "cuda", capturable=device == "cuda")


def eager_trajectory(model, batches, device: str) -> list[float]:
    optimizer = _optimizer(model, device)
    losses = []
    for i in range(STEPS):
        x, y = batches[i % len(batches)]
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_step_trajectory(model, batches, torch_adam: bool) -> list[float]:
    optimizer = _optimizer(model, "cuda")
    kept = train_module.ADAM_TYPES
    if torch_adam:  # TrainStep steps only these types through its own kernel
        train_module.ADAM_TYPES = ()
    try:
        step = tg.TrainStep(model, optimizer, F.mse_loss, batches[0])
    finally:
        train_module.ADAM_TYPES = kept
    return [step(*batches[i % len(batches)]).item() for i in range(STEPS)]


def first_gradients(template, batches, fused: bool, dtype) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(template).to(dtype)
    for layer in model.layers:
        layer.fused = fused
    x, y = (t.to(dtype) for t in batches[0])
    F.mse_loss(model(x), y).backward()
    return {name: p.grad.double() for name, p in model.named_parameters()}


def gradient_errors(template, batches) -> None:
    reference = first_gradients(template, batches, False, torch.float64)
    for label, fused in (("eager fp32", False), ("tilegraph fp32", True)):
        grads = first_gradients(template, batches, fused, torch.float32)
        worst = max((((g - reference[n]).norm() / reference[n].norm()).item(), n)
                    for n, g in grads.items())
        print(f"step 0 gradients, {label}: worst relative error {worst[0]:.2e} ({worst[1]})",
              flush=True)


def divergence(losses: list[float], reference: list[float]) -> str:
    firsts = []
    for threshold in THRESHOLDS:
        step = next((i for i, (a, b) in enumerate(zip(losses, reference, strict=True))
                     if abs(a - b) > threshold * abs(b)), None)
        firsts.append(f"{threshold:.0e}@{step}")
    return " ".join(firsts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variants", default="")
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    device = "cpu" if args.cpu else "cuda"
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)   # as bench/training.py's run()
    template = MLPStack(D, LAYERS, fused=False).to(device=device, dtype=torch.float32)
    batches = [(torch.randn(TOKENS, D, device=device), torch.randn(TOKENS, D, device=device))
               for _ in range(8)]

    def fused_copy(fused: bool = True):
        model = copy.deepcopy(template)
        for layer in model.layers:
            layer.fused = fused
        return model

    def nudged():
        model = copy.deepcopy(template)
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1 + 1e-6 * torch.randn_like(p))
        return model

    variants = {
        "eager": lambda: eager_trajectory(fused_copy(False), batches, device),
        "eager nudged 1e-6": lambda: eager_trajectory(nudged(), batches, device),
    }
    if device == "cuda":
        gradient_errors(template, batches)
        variants |= {
            "tilegraph uncaptured": lambda: eager_trajectory(fused_copy(), batches, device),
            "TrainStep": lambda: train_step_trajectory(fused_copy(), batches, False),
            "TrainStep torch AdamW": lambda: train_step_trajectory(fused_copy(), batches, True),
            "TrainStep eager layers":
                lambda: train_step_trajectory(fused_copy(False), batches, False),
        }
    chosen = args.variants.split(",") if args.variants else list(variants)
    print(f"{device}; loss at steps 0, 25, ..., {STEPS - 1}; first step that far from eager")
    results = {}
    for name in ["eager"] + [n for n in chosen if n != "eager"]:
        start = time.time()
        losses = variants[name]()
        results[name] = losses
        print(f"{name:>22}: " + " ".join(f"{v:.4f}" for v in losses[::25] + losses[-1:]),
              f"| {divergence(losses, results['eager'])} ({time.time() - start:.0f} s)",
              flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main()
