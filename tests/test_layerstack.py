"""The decode stack: eager, fused (tilegraph kernels), runner and float64 reference agree."""

import math

import pytest
import torch

from tilegraph import GraphRunner, demo
from tilegraph.models import PRESETS, LayerStack, LayerStackConfig
from tilegraph.testing import TOLERANCES, assert_close, rel_error


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


def test_weights_are_reproducible_and_shared_by_first():
    a, b = LayerStack(PRESETS["tiny"]), LayerStack(PRESETS["tiny"])
    assert torch.equal(a.layers[1].wq, b.layers[1].wq)
    sub = a.first(2)
    assert len(sub.layers) == 2 and sub.config.layers == 2
    assert sub.layers[1].wo.data_ptr() == a.layers[1].wo.data_ptr()
    # the layers are views into the stacked weights the persistent kernel reads
    assert a.layers[2].wq.data_ptr() == a.weights.wq[2].data_ptr()
    with pytest.raises(ValueError, match="n_layers"):
        a.first(4)


def test_bad_input_is_refused():
    stack = LayerStack(PRESETS["tiny"])
    with pytest.raises(ValueError, match="96 features"):
        stack(torch.randn(1, 95))
    with pytest.raises(TypeError, match="float32"):
        stack.fused_forward(torch.randn(1, 96, dtype=torch.float64))


def test_tiny_fused_equals_eager_and_reference(device):
    stack = LayerStack(PRESETS["tiny"], device=device)
    h = stack.token_inputs(2, 3)  # (tokens, batch, d)
    expected = demo.expected_outputs(stack, h)
    assert torch.isfinite(expected).all() and expected.abs().max() > 0
    for t in range(2):
        assert_close(stack(h[t]), expected[t], what="eager")
        assert_close(stack.fused_forward(h[t]), expected[t], what="fused")
        assert_close(stack.fused_forward(h[t], prefetch_weight=False), expected[t])
        for kernels in (1, 2):
            assert_close(stack.fused_forward(h[t], kernels_per_layer=kernels), expected[t],
                         what=f"{kernels} kernel(s) a layer")
        assert_close(stack.persistent_forward(h[t]), expected[t], what="persistent")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_one_kernel_a_layer_keeps_h_in_fp32(device, dtype):
    stack = LayerStack(PRESETS["tiny"].with_(dtype=dtype), device=device)
    h = stack.token_inputs(1, 2)[0].view(2, 1, -1)  # leading dims are kept
    expected = stack.reference(h)
    one, two = (stack.fused_forward(h, kernels_per_layer=k) for k in (1, 2))
    assert one.shape == two.shape == h.shape and one.dtype == dtype
    # h is rounded to the storage dtype once, at the end, rather than after every layer
    assert rel_error(one, expected) < rel_error(two, expected)
    assert rel_error(one, expected) <= TOLERANCES[dtype]


def test_kernels_per_layer_is_checked(device):
    stack = LayerStack(PRESETS["tiny"], device=device)
    with pytest.raises(ValueError, match="kernels_per_layer"):
        stack.fused_forward(stack.token_inputs(1, 1)[0], kernels_per_layer=3)
    with pytest.raises(ValueError, match="at most 8 rows"):
        stack.fused_forward(stack.token_inputs(1, 9)[0], kernels_per_layer=1)
    empty = stack.token_inputs(1, 1)[0][:0]
    assert stack.fused_forward(empty, kernels_per_layer=1).shape == empty.shape


def test_persistent_forward_refuses_weights_that_no_longer_alias():
    stack = LayerStack(PRESETS["tiny"])
    stack.layers[2].wo = torch.nn.Parameter(stack.layers[2].wo.clone(), requires_grad=False)
    with pytest.raises(RuntimeError, match="alias"):
        stack.persistent_forward(stack.token_inputs(1, 1)[0])
    with pytest.raises(ValueError, match="expected"):
        LayerStack(PRESETS["tiny"].with_(layers=2), weights=stack.weights)


def test_persistent_variant_is_unavailable_past_eight_rows():
    stack = LayerStack(PRESETS["tiny"])
    built = demo.build_variant("tilegraph-persistent", stack, stack.token_inputs(1, 9)[0])
    assert "at most 8 rows" in built.reason


def test_activations_stay_finite_over_all_layers_of_every_preset():
    for name, config in PRESETS.items():
        stack = LayerStack(config.with_(d=min(config.d, 128)))
        out = stack.reference(stack.token_inputs(1, 2)[0])
        rms = out.pow(2).mean().sqrt().item()
        assert math.isfinite(rms) and 0.5 < rms < 50, (name, rms)


def test_max_token_error_sees_one_bad_token():
    ref = torch.randn(5, 2, 8, dtype=torch.float64)
    out = ref.clone().float()
    assert demo.max_token_error(out, ref) < 1e-6
    out[3, 1, 0] += 1.0
    assert demo.max_token_error(out, ref) > 1e-2
    out[4, 0, 0] = math.nan
    assert demo.max_token_error(out, ref) == math.inf


def test_demo_variants_agree_and_summarize(device):
    stack = LayerStack(PRESETS["tiny"], device=device)
    names = ["eager", "torch-graph", "tilegraph", "tilegraph-persistent"]
    results = demo.compare_variants(stack, names, tokens=2, batch=1, timed=True)
    assert [r.status for r in results] == ["ok"] * 4
    assert all(r.rel_error <= TOLERANCES[torch.float32] for r in results)
    assert demo.stack_tolerance(torch.bfloat16, 4) == pytest.approx(2 * TOLERANCES[torch.bfloat16])
    rows = demo.summarize(results, stack.config.weight_bytes, 1, copy_gbps=1000.0)
    eager, graph, fused, _ = rows
    assert eager["vs_eager"] == pytest.approx(1.0)
    assert fused["vs_torch_graph"] == pytest.approx(graph["ms_per_token"] / fused["ms_per_token"])
    floor_ms = stack.config.weight_bytes / 1e12 * 1e3
    assert fused["pct_floor"] == pytest.approx(100 * floor_ms / fused["ms_per_token"])


def test_wrong_variant_fails_and_is_not_timed(device):
    stack = LayerStack(PRESETS["tiny"], device=device)
    inputs = stack.token_inputs(2, 1)
    calls = []

    def wrong(x):
        calls.append(1)
        return stack(x) * 1.01
    result = demo.run_decode(demo.Variant("wrong", wrong, 0.0), "wrong", inputs,
                             demo.expected_outputs(stack, inputs), tolerance=1e-3)
    assert result.status == "FAIL" and result.ms_per_token is None
    assert len(calls) == 2  # one checking pass over the two tokens, never timed


def test_batch_sweep_pads_and_stays_correct(device):
    stack = LayerStack(PRESETS["tiny"].with_(layers=1), device=device)
    rows = demo.sweep_batch(stack, tokens=1, batches=(1, 3, 8))
    assert [r["graph_size"] for r in rows] == [1, 4, 8]
    assert all(r["status"] == "ok" for r in rows), rows


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_seed_shaped_stack_matches_reference(dtype):
    config = PRESETS["seed"].with_(layers=3, dtype=dtype)
    stack = LayerStack(config, device="cuda")
    inputs = stack.token_inputs(4, 1)
    expected = demo.expected_outputs(stack, inputs)
    for name in ("eager", "torch-graph", "tilegraph", "tilegraph-persistent"):
        variant = demo.build_variant(name, stack, inputs[0])
        outputs = torch.full_like(inputs, math.nan)
        demo.decode(variant.step, inputs, outputs)
        assert demo.max_token_error(outputs, expected) <= TOLERANCES[dtype], name


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("forward", ["fused_forward", "persistent_forward"])
def test_seed_shaped_runner_every_batch_size(dtype, forward):
    stack = LayerStack(PRESETS["seed"].with_(layers=2, dtype=dtype), device="cuda")
    runner = GraphRunner(getattr(stack, forward), (stack.token_inputs(1, 8)[0],),
                         sizes=(1, 2, 4, 8), check_stale=True)
    for batch in range(1, 9):
        inputs = stack.token_inputs(3, batch, seed=batch)
        expected = demo.expected_outputs(stack, inputs)
        for t in range(3):
            assert_close(runner(inputs[t]).clone(), expected[t], dtype,
                         what=f"batch {batch} token {t}")
    assert sum(s["replays"] for s in runner.stats().values()) == 24


@pytest.mark.gpu
@pytest.mark.parametrize("preset", ["seed-bf16", "small"])
def test_one_kernel_a_layer_in_a_runner_every_batch_size(preset):
    stack = LayerStack(PRESETS[preset].with_(layers=3), device="cuda")
    dtype = stack.config.dtype

    def forward(h):
        return stack.fused_forward(h, kernels_per_layer=1)

    runner = GraphRunner(forward, (stack.token_inputs(1, 8)[0],), sizes=(1, 2, 4, 8),
                         check_stale=True)
    for batch in range(1, 9):
        inputs = stack.token_inputs(3, batch, seed=batch)
        expected = demo.expected_outputs(stack, inputs)
        for t in range(3):  # the accumulators must be zero again at every replay
            assert_close(runner(inputs[t]).clone(), expected[t], dtype,
                         what=f"batch {batch} token {t}")
