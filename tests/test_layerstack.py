"""The decode stack: eager, fused (tilegraph kernels), runner and float64 reference agree."""

import math

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels.decode_layer import residual_dtype
from tilegraph.models import PRESETS, LayerStack, LayerStackConfig
from tilegraph.testing import (
    TOLERANCES,
    assert_close,
    max_token_error,
    rel_error,
    stack_tolerance,
)


def test_presets_match_the_issue():
    seed = PRESETS["seed"]
    assert (seed.d, seed.layers, seed.dtype, seed.batch, seed.tokens) == (
        2048, 22, torch.float32, 1, 512)
    assert PRESETS["seed-bf16"].dtype == torch.bfloat16
    assert (PRESETS["small"].d, PRESETS["small"].layers) == (512, 22)
    assert seed.weight_bytes == 22 * (2 * 2048 * 2048 + 2048) * 4


@pytest.mark.parametrize("bad", [dict(d=0), dict(layers=-1), dict(tokens=1.5),
                                 dict(dtype=torch.float64)])
def test_config_rejects_bad_values(bad):
    with pytest.raises((ValueError, TypeError)):
        LayerStackConfig(**bad)


def _expected(stack, inputs):
    """float64 outputs for (tokens, batch, d) inputs: tokens are independent, so at once."""
    return stack.reference(inputs.reshape(-1, inputs.shape[-1])).reshape(inputs.shape)


def test_weights_are_reproducible_and_shared_by_first():
    a, b = LayerStack(PRESETS["tiny"]), LayerStack(PRESETS["tiny"])
    assert torch.equal(a.layers[1].wq, b.layers[1].wq)
    sub = a.first(2)
    assert len(sub.layers) == 2 and sub.config.layers == 2
    assert sub.layers[1].wo.data_ptr() == a.layers[1].wo.data_ptr()
    with pytest.raises(ValueError, match="n_layers"):
        a.first(4)
    with pytest.raises(ValueError, match="layers given"):
        LayerStack(PRESETS["tiny"], layers=list(a.layers)[:2])


def test_bad_input_is_refused():
    stack = LayerStack(PRESETS["tiny"])
    with pytest.raises(ValueError, match="96 features"):
        stack(torch.randn(1, 95))
    with pytest.raises(TypeError, match="float32"):
        stack.fused_forward(torch.randn(1, 96, dtype=torch.float64))


def test_tiny_fused_equals_eager_and_reference(device):
    stack = LayerStack(PRESETS["tiny"], device=device)
    h = stack.token_inputs(2, 3)  # (tokens, batch, d)
    expected = _expected(stack, h)
    assert torch.isfinite(expected).all() and expected.abs().max() > 0
    for t in range(2):
        assert_close(stack(h[t]), expected[t], what="eager")
        assert_close(stack.fused_forward(h[t]), expected[t], what="fused")
        torch.use_deterministic_algorithms(True)  # two kernels a layer, no atomics
        try:
            assert_close(stack.fused_forward(h[t]), expected[t], what="deterministic")
        finally:
            torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_stack_keeps_h_in_fp32_where_one_kernel_a_layer_runs(device, dtype):
    stack = LayerStack(PRESETS["tiny"].with_(dtype=dtype), device=device)
    layer = stack.layers[0]
    for batch in (1, 2):  # 16-bit rows one by one would spill: two kernels from 2 rows
        h = stack.token_inputs(1, batch)[0].view(batch, 1, -1)  # leading dims are kept
        assert residual_dtype(h, layer.wq, layer.wo) == (torch.float32 if batch == 1 else dtype)
        expected = stack.reference(h)
        fused, eager = stack.fused_forward(h), stack(h)
        assert fused.shape == eager.shape == h.shape and fused.dtype == dtype
        if batch == 1:  # h is rounded to its dtype once, at the end, not after every layer
            assert rel_error(fused, expected) <= TOLERANCES[dtype]
            assert rel_error(fused, expected) < rel_error(eager, expected)
        else:  # rounded after every layer, as eager PyTorch does
            assert rel_error(fused, expected) <= stack_tolerance(dtype, len(stack.layers))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_stack_passes_gradients_to_h(device, dtype):
    """A one-row stack that would run one kernel a layer takes autograd's path (h in its own
    dtype): its gradient matches float64's as eager PyTorch's does."""
    stack = LayerStack(PRESETS["tiny"].with_(dtype=dtype), device=device)
    h = stack.token_inputs(1, 1)[0]
    grads = {}
    for name, forward in (("fused", stack.fused_forward), ("eager", stack.forward),
                          ("float64", stack.reference)):
        x = (h.double() if name == "float64" else h.clone()).requires_grad_()
        forward(x).double().square().sum().backward()
        grads[name] = x.grad
    assert grads["float64"].abs().max() > 0
    # The backward pass rounds as many products again as the forward pass.
    tolerance = 2 * stack_tolerance(dtype, len(stack.layers))
    for name in ("fused", "eager"):
        assert rel_error(grads[name], grads["float64"]) <= tolerance, name


def test_empty_batch(device):
    stack = LayerStack(PRESETS["tiny"], device=device)
    empty = stack.token_inputs(1, 1)[0][:0]
    assert stack.fused_forward(empty).shape == empty.shape


def test_activations_stay_finite_over_all_layers_of_every_preset():
    for name, config in PRESETS.items():
        stack = LayerStack(config.with_(d=min(config.d, 128)))
        out = stack.reference(stack.token_inputs(1, 2)[0])
        rms = out.pow(2).mean().sqrt().item()
        assert math.isfinite(rms) and 0.5 < rms < 50, (name, rms)


def test_max_token_error_sees_one_bad_token():
    ref = torch.randn(5, 2, 8, dtype=torch.float64)
    out = ref.clone().float()
    assert max_token_error(out, ref) < 1e-6
    out[3, 1, 0] += 1.0
    assert max_token_error(out, ref) > 1e-2
    out[4, 0, 0] = math.nan
    assert max_token_error(out, ref) == math.inf


def test_runner_pads_batches_and_stays_correct(device):
    stack = LayerStack(PRESETS["tiny"].with_(layers=2), device=device)
    runner = tg.GraphRunner(stack.fused_forward, (stack.token_inputs(1, 8)[0],),
                            sizes=(1, 4, 8), check_stale=True)
    for batch in (1, 3, 8):
        inputs = stack.token_inputs(2, batch, seed=batch)
        expected = _expected(stack, inputs)
        for t in range(2):
            assert_close(runner(inputs[t]).clone(), expected[t], what=f"batch {batch}")


@pytest.mark.gpu
@pytest.mark.parametrize("preset", ["seed", "seed-bf16", "small"])
def test_presets_in_a_runner_every_batch_size(preset):
    """One kernel a layer (seed-bf16 at batch 1, small) and two (seed, seed-bf16 batched):
    the buffers each layer zeroes for the next must be zero again at every replay."""
    stack = LayerStack(PRESETS[preset].with_(layers=3), device="cuda")
    dtype = stack.config.dtype
    runner = tg.GraphRunner(stack.fused_forward, (stack.token_inputs(1, 8)[0],),
                            sizes=(1, 2, 4, 8), check_stale=True)
    for batch in range(1, 9):
        inputs = stack.token_inputs(3, batch, seed=batch)
        expected = _expected(stack, inputs)
        for t in range(3):
            assert_close(runner(inputs[t]).clone(), expected[t], dtype,
                         what=f"batch {batch} token {t}")
    assert sum(s["replays"] for s in runner.stats().values()) == 24


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_seed_shaped_stack_eager_graph_and_fused_agree(dtype):
    stack = LayerStack(PRESETS["seed"].with_(layers=3, dtype=dtype), device="cuda")
    inputs = stack.token_inputs(4, 1)
    expected = _expected(stack, inputs)
    static = inputs[0].clone()
    graph = tg.capture(stack, static)
    for t in range(4):
        static.copy_(inputs[t])
        assert_close(graph.replay(), expected[t], dtype, what="torch-graph")
        assert_close(stack.fused_forward(inputs[t]), expected[t], dtype, what="fused")
