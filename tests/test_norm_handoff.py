"""A norm handed over between tg.linear calls on the tensor-core decode path: the producer's
result carries h * g and the rows' partial sums of h^2, and the next call with that norm
weight runs no norm kernel of its own; a result changed in between never hands over."""

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels import _dot_rows, decode_plan
from tilegraph.kernels import _norm_handoff as norm_handoff
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import assert_close, poisoned, randn, rel_error, stack_tolerance

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _layer(rows, d, n, dtype, device, seed=0):
    """h (rows, d), its first projection's input q (rows, n), Wo (d, n), then a norm
    weight g and a projection W2 (m, d) that read h_next = h + q @ Wo.T."""
    torch.manual_seed(seed)
    h = randn(rows, d, dtype=dtype, device=device)
    q = randn(rows, n, dtype=dtype, device=device)
    wo = randn(d, n, dtype=dtype, device=device, scale=n**-0.5)
    g = randn(d, dtype=dtype, device=device, scale=0.1) + 1
    w2 = randn(d + 17, d, dtype=dtype, device=device, scale=d**-0.5)
    return h, q, wo, g, w2


class _NoNormKernel:
    """Stands in for the norm kernel where the test says none may run."""

    def __getitem__(self, grid):
        raise AssertionError("the norm kernel ran although its norm was handed over")


def _next(h_next, w2, g):
    return linear_ref(h_next.double(), w2.double(), norm_weight=g.double())


def _takes_tensor_cores(rows, n, k, dtype, device):
    return decode_plan.plan(rows, n, k, dtype, torch.device(device), fused=True).kind == "dot"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, d, n", [
    (9, 72, 40),     # one K step each: every program finishes its own column block
    (16, 100, 300),  # all 16 rows; the producer's K split in slices (its last one finishes)
    (12, 300, 64),   # the consumer's K split: the handed-over sums reach its finishers
])
def test_handed_over_norm_matches_the_reference(device, monkeypatch, dtype, rows, d, n):
    _check_handoff(device, monkeypatch, dtype, rows, d, n)


@pytest.mark.parametrize("rows, d, n", [(16, 100, 300), (12, 300, 64)])
def test_handed_over_norm_through_the_weight_left_tile(device, monkeypatch, rows, d, n):
    """The same with the 16-bit weight-left tile (acc^T = W x^T), which weights too wide for
    whole slices take: the handoff reads the tile after it is turned back."""
    monkeypatch.setattr(decode_plan, "whole_slice_config", lambda *args: None)
    assert decode_plan.rule(rows, n, d, torch.bfloat16, None).config["W_LHS"]
    _check_handoff(device, monkeypatch, torch.bfloat16, rows, d, n)


def _check_handoff(device, monkeypatch, dtype, rows, d, n):
    h, q, wo, g, w2 = _layer(rows, d, n, dtype, device)
    assert _takes_tensor_cores(rows, d, n, dtype, device)
    assert _takes_tensor_cores(rows, w2.shape[0], d, dtype, device)
    h_next = tg.linear(q, wo, residual=h, next_norm_weight=g)
    assert_close(h_next, linear_ref(q.double(), wo.double(), residual=h.double()), dtype)
    handoff = norm_handoff.take(h_next, g)
    assert handoff is not None
    # x_next is h * g of the stored result, in its dtype
    assert_close(handoff.x_next, h_next.double() * g.double(), dtype)
    monkeypatch.setattr(_dot_rows, "_norm_rows_kernel", _NoNormKernel())
    y = tg.linear(h_next, w2, norm_weight=g, out=poisoned((rows, w2.shape[0]), dtype, device))
    assert_close(y, _next(h_next, w2, g), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_call_takes_one_norm_and_hands_the_next_over(device, monkeypatch, dtype):
    """Three calls: the middle one reads the first's norm and hands its own on (the shape of
    a layer whose only projection has a residual, as a one-projection MLP block)."""
    rows, d = 10, 80
    h, q, wo, g, _ = _layer(rows, d, 48, dtype, device)
    w_mid = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    g2 = randn(d, dtype=dtype, device=device, scale=0.1) + 1
    w_last = randn(24, d, dtype=dtype, device=device, scale=d**-0.5)
    first = tg.linear(q, wo, residual=h, next_norm_weight=g)
    monkeypatch.setattr(_dot_rows, "_norm_rows_kernel", _NoNormKernel())
    mid = tg.linear(first, w_mid, norm_weight=g, residual=first, next_norm_weight=g2)
    last = tg.linear(mid, w_last, norm_weight=g2)
    mid_ref = linear_ref(first.double(), w_mid.double(), norm_weight=g.double(),
                         residual=first.double())
    assert_close(mid, mid_ref, dtype)
    assert_close(last, _next(mid, w_last, g2), dtype)


def test_a_result_changed_in_between_normalises_its_new_values(device):
    dtype = torch.bfloat16
    h, q, wo, g, w2 = _layer(8, 64, 64, dtype, device)
    changed_by = {
        "a PyTorch op": lambda t: t.mul_(3),
        "a PyTorch op on a view": lambda t: t[1:3].add_(5),
        "a tilegraph op writing into it": lambda t: tg.add(t, t, out=t),
        "tg.linear writing into it": lambda t: tg.linear(q, wo, out=t),
        "a tilegraph op writing into a view": lambda t: tg.add(t[2], t[3], out=t[2]),
    }
    for what, change in changed_by.items():
        h_next = tg.linear(q, wo, residual=h, next_norm_weight=g)
        change(h_next)
        assert norm_handoff.take(h_next, g) is None, what
        assert_close(tg.linear(h_next, w2, norm_weight=g), _next(h_next, w2, g), dtype,
                     what=what)


def test_no_handoff_where_it_would_not_hold(device):
    dtype = torch.bfloat16
    h, q, wo, g, w2 = _layer(8, 64, 64, dtype, device)
    h_next = tg.linear(q, wo, residual=h, next_norm_weight=g)
    other = g.clone()  # equal values, another tensor: the handoff names its norm weight
    assert norm_handoff.take(h_next, other) is None
    assert_close(tg.linear(h_next, w2, norm_weight=other), _next(h_next, w2, other), dtype)
    for change in (lambda: g.mul_(1.5), lambda: tg.add(g, g, out=g)):
        h_next = tg.linear(q, wo, residual=h, next_norm_weight=g)
        change()  # the norm weight changed since h * g was stored
        assert norm_handoff.take(h_next, g) is None
        assert_close(tg.linear(h_next, w2, norm_weight=g), _next(h_next, w2, g), dtype)
    with torch.inference_mode():  # no version counter to prove the result unchanged
        h_inf = tg.linear(q, wo, residual=h, next_norm_weight=g)
    assert norm_handoff.take(h_inf, g) is None
    one_row = tg.linear(q[:1], wo, residual=h[:1], next_norm_weight=g)  # the GEMV path
    assert norm_handoff.take(one_row, g) is None
    swiglu = tg.linear(q, wo, activation="swiglu", next_norm_weight=g[:32])
    assert norm_handoff.take(swiglu, g[:32]) is None


@pytest.mark.parametrize("rows, d, n, weight_left", [
    (4, 130, 130, False),  # one K step a consumer program
    (12, 300, 64, False),  # the consumer's K split: a slice's programs redo their own
    (16, 100, 300, True),  # the weight-left tile
])
def test_fp16_handoff_of_large_rows_stays_finite(device, monkeypatch, rows, d, n, weight_left):
    """h * g past fp16's range (h 3e4 in even rows, g 4): the stored product is inf there,
    and the consumer's programs that meet it redo their products from h and g scaled into
    range (x / rms(x) * g is about g); odd rows, random, keep theirs."""
    dtype = torch.float16
    if weight_left:
        monkeypatch.setattr(decode_plan, "whole_slice_config", lambda *args: None)
    h, q, wo, _, w2 = _layer(rows, d, n, dtype, device)
    large = (torch.arange(rows, device=device) % 2 == 0)[:, None]
    h = torch.where(large, (h.float().sign() * 3e4).to(dtype), h)
    g = torch.full((d,), 4.0, dtype=dtype, device=device)
    h_next = tg.linear(q, wo, residual=h, next_norm_weight=g)
    handoff = norm_handoff.take(h_next, g)
    assert handoff is not None and not torch.isfinite(handoff.x_next[large[:, 0]]).all()
    monkeypatch.setattr(_dot_rows, "_norm_rows_kernel", _NoNormKernel())
    y = tg.linear(h_next, w2, norm_weight=g, out=poisoned((rows, w2.shape[0]), dtype, device))
    assert torch.isfinite(y).all()
    assert_close(y, _next(h_next, w2, g), dtype)


def test_next_norm_weight_is_checked(device):
    h, q, wo, g, _ = _layer(10, 64, 64, torch.float32, device)
    with pytest.raises(ValueError, match="next_norm_weight"):
        tg.linear(q, wo, residual=h, next_norm_weight=g[:10])
    with pytest.raises(TypeError, match="next_norm_weight"):
        tg.linear(q, wo, residual=h, next_norm_weight=g.double())
    with pytest.raises(ValueError, match="next_norm_weight"):
        tg.decode_layer(h, g, wo, wo, next_norm_weight=g[:3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_layer_stack_hands_every_norm_over(device, monkeypatch, dtype):
    """LayerStack.fused_forward at 12 rows: a layer's first projection gets its norm from the
    layer before, except the first layer's (no producer before it)."""
    from tilegraph.models import LayerStack, LayerStackConfig
    stack = LayerStack(LayerStackConfig(d=64, layers=3, dtype=dtype), device=device)
    h = stack.token_inputs(1, 12)[0]
    launched = _count_norm_kernels(monkeypatch)
    y = stack.fused_forward(h)
    assert len(launched) == 1  # the first layer's
    assert rel_error(y, stack.reference(h.double())) <= stack_tolerance(dtype, 3)


def _count_norm_kernels(monkeypatch) -> list:
    """The grids of the norm kernels launched from now on. A norm the tensor-core kernel
    takes in its loop instead (_dot_rows.norm_in_loop) would not count: that is turned off,
    so every norm not handed over shows here."""
    monkeypatch.setattr(_dot_rows, "norm_in_loop", lambda *args: False)
    launched = []
    original = _dot_rows._norm_rows_kernel
    monkeypatch.setattr(_dot_rows, "_norm_rows_kernel",
                        type("Counted", (), {"__getitem__": lambda self, grid:
                                             launched.append(grid) or original[grid]})())
    return launched


@pytest.mark.parametrize("name", ["tiny-llama3", "tiny-qwen2"])
def test_llama_decode_hands_every_norm_over(device, monkeypatch, name):
    """A bf16 Llama step at 6 rows: every gate/up, every q|k|v after the first and the LM
    head take their norms from the projection before them; the logits match plain_decode's
    (PyTorch ops, norms computed from the stored residual stream)."""
    pytest.importorskip("transformers")
    from tilegraph.models import Llama
    from tilegraph.models.hf_presets import random_hf_model
    from tilegraph.testing import MODEL_TOLERANCES
    model = Llama.from_hf(random_hf_model(name, scale=5.0), dtype=torch.bfloat16,
                          device=device)
    rows = 6
    tokens = torch.randint(0, model.config.vocab_size, (rows,), device=device)
    positions = torch.arange(rows, device=device)
    plain = model.plain_decode(tokens, positions, model.new_cache(rows, 8))
    launched = _count_norm_kernels(monkeypatch)
    logits = model.decode(tokens, positions, model.new_cache(rows, 8))
    assert len(launched) == 1  # the first layer's q|k|v: nothing before it hands one over
    assert rel_error(logits, plain) <= MODEL_TOLERANCES[torch.bfloat16]
