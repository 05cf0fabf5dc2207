"""Does the multi-tensor Adam kernel step like torch's fused AdamW from a fresh state?
tg.TrainStep's replays start from zeroed moments and step count (the warm-up's steps undone),
so its first step runs the kernel at t = 1, where tests/test_adam.py never looked (torch
makes the state there). Errors are measured on the update (new - old parameter), not on the
parameter: an update is ~1% of a weight, so a parameter tolerance hides update errors.

On the benchmark's model (fp32, d=2048, 4 layers) with gradients from real backward passes:
both optimizers take one step to make their state, the state is zeroed and the parameters put
back (as TrainStep's restore does), then both take STEPS steps on the same gradients. Each
step prints, for tilegraph's and torch's update against a float64 evaluation of the formula on
the state each started from: the median and largest error of the update per element in units
of lr (an Adam update is about lr), and each tensor's summed update over the exact one's (a
bias: every element scaled alike).

    PYTHONPATH=src python3 research/probe_adam_first_steps.py
"""
import copy

import torch
import torch.nn.functional as F

from tilegraph.kernels.adam import MultiTensorAdam
from tilegraph.models.mlp import MLPStack

D, LAYERS, TOKENS, STEPS, LR, WD = 2048, 4, 512, 6, 3e-4, 0.01
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


def _optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=torch.tensor(LR, device="cuda"),
                             weight_decay=WD, fused=True, capturable=True)


def _exact_update(p, g, m, v, t):
    """float64 AdamW on the state before the step: (new parameter - old parameter)."""
    p, g, m, v = (x.double() for x in (p, g, m, v))
    m = BETA1 * m + (1 - BETA1) * g
    v = BETA2 * v + (1 - BETA2) * g * g
    denom = v.sqrt() / (1 - BETA2**t) ** 0.5 + EPS
    return -LR * WD * p - LR / (1 - BETA1**t) * m / denom


def _zero_state(optimizer, model, weights):
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights, strict=True):
            p.copy_(w)
            for value in optimizer.state[p].values():
                value.zero_()


def main() -> None:
    torch.manual_seed(0)
    template = MLPStack(D, LAYERS, fused=False).to(device="cuda")
    weights = [p.detach().clone() for p in template.parameters()]
    ours_model, torch_model = copy.deepcopy(template), copy.deepcopy(template)
    ours, theirs = MultiTensorAdam(_optimizer(ours_model)), _optimizer(torch_model)
    for t in range(STEPS + 1):
        x, y = torch.randn(TOKENS, D, device="cuda"), torch.randn(TOKENS, D, device="cuda")
        template.zero_grad(set_to_none=True)
        F.mse_loss(template(x), y).backward()
        grads = [p.grad for p in template.parameters()]
        for model in (ours_model, torch_model):
            for p, g in zip(model.parameters(), grads, strict=True):
                p.grad = g.clone()
        if t == 0:  # make the state, then undo as TrainStep's restore does
            ours.step()
            theirs.step()
            _zero_state(ours.optimizer, ours_model, weights)
            _zero_state(theirs, torch_model, weights)
            continue
        states = {"tilegraph": (ours.optimizer, ours_model), "torch": (theirs, torch_model)}
        before = {name: [(p.detach().clone(), opt.state[p]["exp_avg"].clone(),
                          opt.state[p]["exp_avg_sq"].clone()) for p in model.parameters()]
                  for name, (opt, model) in states.items()}
        fused_before = ours.fused_steps
        ours.step()
        theirs.step()
        assert ours.fused_steps == fused_before + 1, "the kernel did not take the step"
        for name, (_, model) in states.items():
            errors, ratios = [], []
            for (p0, m0, v0), p, g in zip(before[name], model.parameters(), grads,
                                          strict=True):
                exact = _exact_update(p0, g, m0, v0, t)
                delta = p.double() - p0.double()
                errors.append(((delta - exact).abs() / LR).flatten())
                ratios.append((delta.sum() / exact.sum()).item())
            errs = torch.cat(errors)
            sample = errs[torch.randint(errs.numel(), (1 << 22,), device="cuda")]
            print(f"t={t} {name:>9}: |update error| / lr median {sample.median().item():.2e} "
                  f"max {errs.max().item():.2e}; update sum ratio - 1 per tensor "
                  f"{min(ratios) - 1:+.1e}..{max(ratios) - 1:+.1e}", flush=True)


if __name__ == "__main__":
    main()
