"""tg.decode_stack: decode layers in a row, one kernel a layer over copied fp32 accumulators
where every layer takes one kernel, else a loop of tg.decode_layer."""

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels import decode_stack as stack_module
from tilegraph.kernels.decode_layer import _fits_one_kernel
from tilegraph.kernels.decode_stack import accumulator_copies, decode_stack_ref
from tilegraph.testing import TOLERANCES, assert_close, poisoned, randn, rel_error, stack_tolerance


def _layers(d, dtype, device, count, n=None):
    n = n or d
    norms = [randn(d, dtype=dtype, device=device, scale=0.1) + 1 for _ in range(count)]
    wqs = [randn(n, d, dtype=dtype, device=device, scale=d**-0.5) for _ in range(count)]
    wos = [randn(d, n, dtype=dtype, device=device, scale=n**-0.5) for _ in range(count)]
    return norms, wqs, wos


def _all_one_kernel(h, layers):
    _, wqs, wos = layers
    return all(_fits_one_kernel(h, wq, wo) for wq, wo in zip(wqs, wos, strict=True))


def _ref(h, layers):
    return decode_stack_ref(h.double(), *[[t.double() for t in ts] for ts in layers])


@pytest.mark.parametrize("shape, dtype, count, one_kernel", [
    ((1, 96), torch.float32, 3, True),
    ((1, 1, 100), torch.bfloat16, 4, True),   # leading dims, a part-filled last program
    ((1, 72), torch.float16, 1, True),        # one layer: no zeroing of a next one
    ((1, 40), torch.bfloat16, 2, True),       # two layers: a ring of two accumulators
    ((2, 100), torch.float32, 3, True),       # two rows of small fp32 layers: one kernel
    ((3, 100), torch.float32, 3, False),      # several rows: the loop of two kernels
    ((2, 64), torch.bfloat16, 3, False),      # 16-bit, rounded after every layer
])
def test_matches_float64_reference(device, shape, dtype, count, one_kernel):
    layers = _layers(shape[-1], dtype, device, count)
    h = randn(*shape, dtype=dtype, device=device)
    assert _all_one_kernel(h, layers) == one_kernel
    expected = _ref(h, layers)
    for out in (None, poisoned(h.shape, dtype, device)):
        y = tg.decode_stack(h, *layers, out=out)
        assert y.shape == h.shape and y.dtype == dtype
        if out is not None:
            assert y is out
        if one_kernel:  # h carried in fp32, rounded to its dtype once, at the end
            assert rel_error(y, expected) <= TOLERANCES[dtype]
        else:
            assert rel_error(y, expected) <= stack_tolerance(dtype, count)


@pytest.mark.parametrize("copies", [1, 2, 3, 5])
def test_any_number_of_accumulator_copies_gives_the_layer(device, monkeypatch, copies):
    monkeypatch.setattr(stack_module, "accumulator_copies", lambda d: copies)
    layers = _layers(80, torch.bfloat16, device, 4)
    h = randn(1, 80, dtype=torch.bfloat16, device=device)
    assert rel_error(tg.decode_stack(h, *layers), _ref(h, layers)) <= TOLERANCES[torch.bfloat16]


def test_accumulator_copies_rule():
    # Each program reads copies x d floats of h after its wait: at most 4096 of them.
    assert [accumulator_copies(d) for d in (256, 512, 1024, 1280, 1536, 2048)] == \
        [4, 4, 4, 3, 2, 2]


def test_layers_stacked_along_dim_0(device):
    norms, wqs, wos = _layers(64, torch.bfloat16, device, 3)
    h = randn(1, 64, dtype=torch.bfloat16, device=device)
    stacked = tg.decode_stack(h, torch.stack(norms), torch.stack(wqs), torch.stack(wos))
    assert torch.isfinite(stacked).all()
    assert rel_error(stacked, _ref(h, (norms, wqs, wos))) <= TOLERANCES[torch.bfloat16]


def test_fp32_h_over_16_bit_weights(device):
    """A residual stream the caller already keeps in fp32: read as it is, returned in fp32."""
    layers = _layers(72, torch.bfloat16, device, 3)
    h = randn(1, 72, device=device)
    assert _all_one_kernel(h, layers)
    y = tg.decode_stack(h, *layers)
    assert y.dtype == torch.float32
    assert rel_error(y, _ref(h, layers)) <= TOLERANCES[torch.float32]


def test_strided_h(device):
    layers = _layers(64, torch.float32, device, 2)
    wide = randn(1, 128, device=device)
    h = wide[:, ::2]
    assert not h.is_contiguous()
    assert_close(tg.decode_stack(h, *layers), _ref(h, layers))


def test_deterministic_mode_repeats_bit_for_bit(device):
    layers = _layers(96, torch.float32, device, 3)
    h = randn(1, 96, device=device)
    torch.use_deterministic_algorithms(True)  # two kernels a layer, no atomics
    try:
        first, second = tg.decode_stack(h, *layers), tg.decode_stack(h, *layers)
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.equal(first, second)
    assert_close(first, _ref(h, layers))


def test_gradients_flow_through_every_layer(device):
    layers = _layers(32, torch.float32, device, 2)
    h = randn(1, 32, device=device).requires_grad_()
    wq = layers[1][0].clone().requires_grad_()
    layers[1][0] = wq
    y = tg.decode_stack(h, *layers)
    y.square().sum().backward()
    h_ref, wq_ref = h.detach().double().requires_grad_(), wq.detach().double().requires_grad_()
    ref_layers = [[t.double() for t in ts] for ts in layers]
    ref_layers[1][0] = wq_ref
    decode_stack_ref(h_ref, *ref_layers).square().sum().backward()
    assert_close(h.grad, h_ref.grad, what="h.grad")
    assert_close(wq.grad, wq_ref.grad, what="wqs[0].grad")
    with pytest.raises(ValueError, match="out= cannot be used"):
        tg.decode_stack(h, *layers, out=torch.empty_like(h.detach()))


def test_bad_input_is_named(device):
    norms, wqs, wos = _layers(32, torch.float32, device, 2)
    h = randn(1, 32, device=device)
    with pytest.raises(ValueError, match="one tensor a layer"):
        tg.decode_stack(h, norms, wqs, wos[:1])
    with pytest.raises(ValueError, match="no layers"):
        tg.decode_stack(h, [], [], [])
    with pytest.raises(TypeError, match="sequence of tensors"):
        tg.decode_stack(h, {"g": norms[0]}, wqs, wos)
    with pytest.raises(ValueError, match="layers along dim 0"):
        tg.decode_stack(h, norms[0], wqs, wos)  # one layer's (d,) vector, not (layers, d)
    with pytest.raises(ValueError, match="layer 1: wq must have shape"):
        tg.decode_stack(h, norms, [wqs[0], wqs[1][:, :16]], wos)
    with pytest.raises(TypeError, match="layer 0"):
        tg.decode_stack(h, [norms[0].half(), norms[1]], wqs, wos)
    with pytest.raises(ValueError, match="out overlaps h"):
        tg.decode_stack(h, norms, wqs, wos, out=h)
    with pytest.raises(ValueError, match="out overlaps wqs"):
        tg.decode_stack(h, norms, wqs, wos, out=wqs[1][:1])
    empty = torch.empty(0, 32, device=device)
    assert tg.decode_stack(empty, norms, wqs, wos).shape == (0, 32)


@pytest.mark.gpu
@pytest.mark.parametrize("d, dtype", [(2048, torch.bfloat16), (1536, torch.float16),
                                      (1024, torch.float32)])
def test_captured_stack_replays_right_every_time(d, dtype):
    """The width's own one-kernel tiles and copies, PDL chains in a graph: 100 replays, fresh
    inputs each time, each equal to the float64 reference (and so to eager)."""
    layers = _layers(d, dtype, "cuda", 3)
    static = randn(1, d, dtype=dtype, device="cuda")
    assert _all_one_kernel(static, layers)
    graph = tg.capture(lambda h: tg.decode_stack(h, *layers), static)
    for _ in range(100):
        static.copy_(randn(1, d, dtype=dtype, device="cuda"))
        graph.outputs.fill_(float("nan"))
        expected = _ref(static, layers)
        assert rel_error(graph.replay(), expected) <= TOLERANCES[dtype]
        assert rel_error(tg.decode_stack(static, *layers), expected) <= TOLERANCES[dtype]
