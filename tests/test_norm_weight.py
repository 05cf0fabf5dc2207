"""A norm weight of one value (a (K,) tensor expanded from one element, stride 0): the
decode kernels read it once as that value (NORM_SCALAR) on every path, and the results
match the reference with the weight materialised."""

import pytest
import torch

import tilegraph as tg
import tilegraph.kernels._matvec as matvec_module
from _launches import record_launches
from tilegraph.kernels import _dot_rows, decode_plan
from tilegraph.kernels import _norm_handoff as norm_handoff
from tilegraph.kernels._norm_weight import is_one_value, kernel_norm_weight
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import assert_close, poisoned, randn

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _one_value(value: float, k: int, dtype, device) -> torch.Tensor:
    return torch.full((), value, dtype=dtype, device=device).expand(k)


def test_only_an_expanded_vector_is_one_value():
    assert is_one_value(torch.ones(()).expand(5))
    assert is_one_value(torch.ones(1).expand(5))
    assert not is_one_value(torch.ones(5))
    assert not is_one_value(torch.ones(1))            # one entry: nothing to expand
    assert not is_one_value(torch.ones(10)[::2])      # strided, several values
    assert not is_one_value(None)
    strided = torch.arange(10.0)[::2]
    assert kernel_norm_weight(strided).is_contiguous()
    assert torch.equal(kernel_norm_weight(strided), strided)
    expanded = torch.ones(()).expand(5)
    assert kernel_norm_weight(expanded) is expanded


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 3, 8, 13, 40])   # GEMVs, row loop, tensor cores, GEMM
@pytest.mark.parametrize("activation", [None, "swiglu"])
def test_linear_with_a_norm_weight_of_one_value(rows, activation, dtype, device):
    k, n = 301, 38
    x = randn(rows, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    r = randn(rows, n // 2 if activation else n, dtype=dtype, device=device)
    g = _one_value(0.75, k, dtype, device)
    out = tg.linear(x, w, norm_weight=g, activation=activation, residual=r,
                    out=poisoned(r.shape, dtype, device))
    ref = linear_ref(x.double(), w.double(), norm_weight=g.double().contiguous(),
                     activation=activation, residual=r.double())
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("rows", [1, 3])
def test_the_gemv_reads_one_value_once(rows, persistent, dtype, device, monkeypatch):
    """The one-row and several-row GEMV, a program a row block and persistent, told the
    weight is one value (and the launch says so)."""
    k, n = 300, 37
    config = {"BLOCK_N": 4, "SPLIT": 4, "CHUNK": 128, "num_warps": 4, "num_stages": 1}
    if persistent:   # whole rows of 300 columns in one flat tile of 512
        config = {**config, "PROGRAMS_PER_SM": 2}
    name = "_gemv_kernel" if rows == 1 else "_gemv_rows_kernel"
    launched = record_launches(monkeypatch, matvec_module, name, "NORM_SCALAR")
    x = randn(rows, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    b = randn(n, dtype=dtype, device=device)
    g = _one_value(-1.25, k, dtype, device)
    out = poisoned((rows, n), dtype, device)
    matvec_module.launch_matvec(x, w, out, g, 1e-6, b, "gelu", None, config, False)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double().contiguous(),
                     activation="gelu")
    assert_close(out, ref, dtype)
    assert launched == [True]


@pytest.mark.parametrize("in_loop", [False, True])
def test_the_tensor_core_kernel_reads_one_value(in_loop, device, monkeypatch):
    """Its norm kernel before it, or the norm in its K loop."""
    rows, k, n = 6, 200, 72
    config = {**decode_plan.rule(rows, n, k, torch.bfloat16, None).config,
              "NORM_IN_LOOP": in_loop}
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: decode_plan.Plan(
        "dot", config))
    launched = record_launches(monkeypatch, _dot_rows, "_dot_rows_kernel", "NORM_SCALAR")
    norms = record_launches(monkeypatch, _dot_rows, "_norm_rows_kernel", "NORM_SCALAR")
    x = randn(rows, k, dtype=torch.bfloat16, device=device)
    w = randn(n, k, dtype=torch.bfloat16, device=device, scale=k**-0.5)
    g = _one_value(1.5, k, torch.bfloat16, device)
    out = tg.linear(x, w, norm_weight=g, out=poisoned((rows, n), torch.bfloat16, device))
    assert_close(out, linear_ref(x.double(), w.double(), norm_weight=g.double().contiguous()),
                 torch.bfloat16)
    assert (launched, norms) == (([True], []) if in_loop else ([False], [True]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_norm_of_one_value_handed_over(dtype, device):
    """A producer on the tensor-core path hands over a norm whose weight is one value, and
    its consumer reads it: h * g and the partial sums, as with a vector."""
    rows, d, n = 9, 72, 40
    h = randn(rows, d, dtype=dtype, device=device)
    q = randn(rows, n, dtype=dtype, device=device)
    wo = randn(d, n, dtype=dtype, device=device, scale=n**-0.5)
    w2 = randn(d + 17, d, dtype=dtype, device=device, scale=d**-0.5)
    g = _one_value(0.5, d, dtype, device)
    assert decode_plan.plan(rows, d, n, dtype, torch.device(device), fused=True).kind == "dot"
    h_next = tg.linear(q, wo, residual=h, next_norm_weight=g)
    handoff = norm_handoff.take(h_next, g)
    assert handoff is not None
    assert_close(handoff.x_next, h_next.double() * 0.5, dtype)
    y = tg.linear(h_next, w2, norm_weight=g, out=poisoned((rows, d + 17), dtype, device))
    assert_close(y, linear_ref(h_next.double(), w2.double(),
                               norm_weight=g.double().contiguous()), dtype)
