"""MultiTensorAdam (kernels/adam.py): Adam and AdamW's step in one launch equals torch.optim's
own step on the same state, step for step; options it does not implement go to torch."""

import pytest
import torch

from tilegraph.kernels.adam import MultiTensorAdam
from tilegraph.testing import randn

HAS_CUDA = torch.cuda.is_available()
# Awkward sizes: a block edge inside most tensors, a tensor smaller than a vector, 3-D.
SHAPES = [(37, 19), (1031,), (3,), (5, 7, 11), (2048,)]
# Relative difference from torch's step allowed after several steps: the bias corrections
# are computed another way (-expm1 of a product, not pow); bf16 rounds the stored state.
# (fp16: moments of ~1e-2 differ by a unit in the last place, 1e-3 of the largest)
TOLERANCES = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 4e-3}
# bf16 on the GPU only: Triton's interpreter rounds fp32 -> bf16 toward zero (the GPU to
# nearest), and over steps a parameter drifts a few bf16 steps from torch's that way.
STEP_DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if HAS_CUDA else [])


def _params(dtype, device):
    return [torch.nn.Parameter(randn(*shape, dtype=dtype, device=device)) for shape in SHAPES]


def _optimizer(kind, params, device, **options):
    on_cuda = device == "cuda"
    # On CPU torch's fused path is the one with a step count on the parameters' device.
    return kind(params, lr=torch.tensor(3e-3, device=device), capturable=on_cuda,
                fused=not on_cuda, **options)


def _set_grads(params_a, params_b, step):
    torch.manual_seed(100 + step)
    for a, b in zip(params_a, params_b, strict=True):
        a.grad = randn(*a.shape, dtype=a.dtype, device=a.device)
        b.grad = a.grad.clone()


def _assert_close(a, b, dtype, what):
    scale = b.float().abs().max().clamp_min(1e-30)
    error = ((a.float() - b.float()).abs().max() / scale).item()
    assert error <= TOLERANCES[dtype], f"{what}: relative error {error:.2e}"


@pytest.mark.parametrize("kind, weight_decay", [(torch.optim.AdamW, 0.01),
                                                (torch.optim.Adam, 0.05),
                                                (torch.optim.Adam, 0.0)])
@pytest.mark.parametrize("dtype", STEP_DTYPES)
def test_steps_equal_torch(kind, weight_decay, dtype, device):
    ours, theirs = _params(dtype, device), _params(dtype, device)
    for a, b in zip(ours, theirs, strict=True):
        b.data.copy_(a.data)
    stepper = MultiTensorAdam(_optimizer(kind, ours, device, weight_decay=weight_decay))
    reference = _optimizer(kind, theirs, device, weight_decay=weight_decay)
    for step in range(4):
        _set_grads(ours, theirs, step)
        stepper.step()
        reference.step()
    # the first step makes the state (through torch); the other three run the kernel
    assert stepper.fused_steps == 3
    for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        state_a, state_b = stepper.optimizer.state[a], reference.state[b]
        assert state_a["step"].item() == state_b["step"].item() == 4
        _assert_close(a, b, dtype, f"parameter {index}")
        _assert_close(state_a["exp_avg"], state_b["exp_avg"], dtype, f"exp_avg {index}")
        _assert_close(state_a["exp_avg_sq"], state_b["exp_avg_sq"], dtype, f"exp_avg_sq {index}")


def _float64_update(p, g, m, v, t, lr, weight_decay, betas, eps):
    """AdamW's update (new - old parameter) in float64 from the state before step t."""
    p, g, m, v = (x.double() for x in (p, g, m, v))
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    denom = v.sqrt() / (1 - betas[1] ** t) ** 0.5 + eps
    return -lr * weight_decay * p - lr / (1 - betas[0] ** t) * m / denom


@pytest.mark.parametrize("betas", [(0.9, 0.999), (0.0, 0.99)])
def test_updates_from_a_fresh_state_match_float64(betas, device):
    """tg.TrainStep's replays start from zeroed moments and step count (warm-up undone), so
    the kernel takes the steps at t = 1, 2, ... where 1 - beta2^t is tiny and hard to form in
    fp32. Errors in units of lr (about an update's size), on parameters small enough (~1e-3)
    that storing them in fp32 rounds an update by under 1e-7 of lr; a parameter tolerance
    would not see them."""
    lr, weight_decay, eps = 3e-3, 0.01, 1e-8
    params = [torch.nn.Parameter(randn(*shape, device=device, scale=1e-3)) for shape in SHAPES]
    optimizer = torch.optim.AdamW(params, lr=torch.tensor(lr, device=device), betas=betas,
                                  weight_decay=weight_decay, eps=eps,
                                  capturable=device == "cuda", fused=device != "cuda")
    stepper = MultiTensorAdam(optimizer)
    start = [p.detach().clone() for p in params]
    for p in params:
        p.grad = randn(*p.shape, device=device)
    stepper.step()  # torch makes the state; zero it and undo the step, as TrainStep does
    with torch.no_grad():
        for p, before in zip(params, start, strict=True):
            p.copy_(before)
            for value in optimizer.state[p].values():
                value.zero_()
    for t in (1, 2, 3):
        for p in params:
            p.grad = randn(*p.shape, device=device)
        before = [(p.detach().clone(), optimizer.state[p]["exp_avg"].clone(),
                   optimizer.state[p]["exp_avg_sq"].clone()) for p in params]
        stepper.step()
        for index, (p, (p0, m0, v0)) in enumerate(zip(params, before, strict=True)):
            exact = _float64_update(p0, p.grad, m0, v0, t, lr, weight_decay, betas, eps)
            error = ((p.double() - p0.double() - exact).abs().max() / lr).item()
            assert error <= 1e-6, f"t={t}, parameter {index}: update error {error:.2e} lr"
    assert stepper.fused_steps == 3


def test_parameters_without_gradients_are_left_alone(device):
    params = _params(torch.float32, device)
    stepper = MultiTensorAdam(_optimizer(torch.optim.AdamW, params, device))
    for p in params:
        p.grad = torch.ones_like(p)
    stepper.step()
    params[1].grad = None
    frozen = params[1].detach().clone()
    stepper.step()
    assert stepper.fused_steps == 1
    assert torch.equal(params[1], frozen)
    assert stepper.optimizer.state[params[1]]["step"].item() == 1
    assert stepper.optimizer.state[params[0]]["step"].item() == 2


@pytest.mark.parametrize("option", [{"amsgrad": True}, {"maximize": True}])
def test_options_the_kernel_lacks_go_to_torch(option, device):
    ours, theirs = _params(torch.float32, device), _params(torch.float32, device)
    for a, b in zip(ours, theirs, strict=True):
        b.data.copy_(a.data)
    stepper = MultiTensorAdam(_optimizer(torch.optim.AdamW, ours, device, **option))
    reference = _optimizer(torch.optim.AdamW, theirs, device, **option)
    for step in range(3):
        _set_grads(ours, theirs, step)
        stepper.step()
        reference.step()
    assert stepper.fused_steps == 0
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs, strict=True))


def test_step_hooks_run_as_for_optimizer_step(device):
    params = _params(torch.float32, device)
    optimizer = _optimizer(torch.optim.AdamW, params, device)
    calls = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: calls.append("pre"))
    optimizer.register_step_post_hook(lambda opt, args, kwargs: calls.append("post"))
    stepper = MultiTensorAdam(optimizer)
    for _ in range(2):
        for p in params:
            p.grad = torch.ones_like(p)
        stepper.step()
    assert stepper.fused_steps == 1 and calls == ["pre", "post", "pre", "post"]


def test_other_optimizers_are_refused():
    with pytest.raises(TypeError, match="Adam or AdamW, not SGD"):
        MultiTensorAdam(torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1))


@pytest.mark.gpu
def test_captured_steps_equal_eager_steps():
    """Under capture the offset table comes from pinned memory set aside by an eager step;
    replays then step exactly as eager calls do."""
    ours, theirs = _params(torch.bfloat16, "cuda"), _params(torch.bfloat16, "cuda")
    for a, b in zip(ours, theirs, strict=True):
        b.data.copy_(a.data)
    stepper = MultiTensorAdam(_optimizer(torch.optim.AdamW, ours, "cuda", weight_decay=0.01))
    reference = MultiTensorAdam(_optimizer(torch.optim.AdamW, theirs, "cuda",
                                           weight_decay=0.01))
    for step in range(2):
        _set_grads(ours, theirs, step)
        stepper.step()
        reference.step()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    grads = [p.grad for p in ours]
    with torch.cuda.graph(graph, stream=stream):
        stepper.step()
    assert stepper.fused_steps == 2  # the first step made the state through torch
    for _ in range(4):
        for g, b in zip(grads, theirs, strict=True):
            b.grad = randn(*b.shape, dtype=b.dtype, device="cuda")
            g.copy_(b.grad)  # the same gradients where the graph reads them
        graph.replay()
        reference.step()
    torch.cuda.synchronize()
    for a, b in zip(ours, theirs, strict=True):
        assert torch.equal(a, b)
