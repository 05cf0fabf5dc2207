"""The decode step's xIELU kernel (kernels/xielu.py: Apertus's MLP activation)."""

import pytest
import torch

import tilegraph as tg
from _replays import assert_replays_equal_eager
from _shapes import DTYPES
from tilegraph.kernels import _pdl
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.xielu import xielu_ref, xielu_rows
from tilegraph.testing import assert_close, poisoned, randn

# (alpha_p, alpha_n, beta, eps) near an Apertus layer's
PARAMS = (0.83, 0.81, 0.5, -1e-6)


def _reference(x, params=PARAMS):
    """xIELU in float64, expm1's own accuracy."""
    alpha_p, alpha_n, beta, eps = params
    x = x.double()
    return torch.where(x > 0, alpha_p * x * x + beta * x,
                       alpha_n * (torch.expm1(x.clamp(max=eps)) - x) + beta * x)


def _params(device, params=PARAMS):
    return torch.tensor(params, device=device)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 37), (3, 1000), (2, 4099), (5, 3)])
def test_matches_reference_on_both_sides_of_zero(shape, dtype, device):
    """Values from -12 to 12 (the negative side saturating at -alpha_n x + beta x, the
    positive growing as x^2), into a poisoned output."""
    x = (randn(*shape, dtype=torch.float32, device=device) * 4.0).to(dtype)
    out = xielu_rows(x, _params(device), out=poisoned(shape, dtype, device))
    assert_close(out, _reference(x), dtype)


def test_keeps_the_square_that_cancels_just_below_zero(device):
    """Below zero, expm1(x) - x is x^2 / 2 + ...: exp(x) - 1 - x in fp32 keeps only part of
    it for |x| near 1e-3. With beta 0 the result is that term alone, element by element."""
    x = -torch.logspace(-4, 0.5, 999, device=device)
    params = (0.8, 1.3, 0.0, -1e-6)
    out = xielu_rows(x, _params(device, params))
    expected = _reference(x, params)
    worst = ((out.double() - expected).abs() / expected.abs()).max().item()
    assert worst < 2e-6, f"worst relative error {worst:.3g} of an element"


def test_eps_clips_the_exponential_just_below_zero(device):
    """Between eps and 0 the exponential's argument is eps, not x (transformers' min(x,
    eps)): with eps -0.5, x = -0.1 gives alpha_n (expm1(-0.5) + 0.1)."""
    params = (0.8, 2.0, 0.0, -0.5)
    x = torch.tensor([-0.1, -0.7, 0.3], device=device)
    out = xielu_rows(x, _params(device, params))
    expected = torch.tensor([2.0 * (torch.expm1(torch.tensor(-0.5)).item() + 0.1),
                             2.0 * (torch.expm1(torch.tensor(-0.7)).item() + 0.7),
                             0.8 * 0.09], dtype=torch.float64)
    torch.testing.assert_close(out.double().cpu(), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_in_place_and_the_reference_of_transformers_order(dtype, device):
    """out=x overwrites x with its xIELU; xielu_ref, which rounds as transformers does in
    x's dtype, agrees with the float64 formula within the dtype's tolerance."""
    x = randn(4, 333, dtype=dtype, device=device, scale=3.0)
    expected = _reference(x)
    out = xielu_rows(x, _params(device), out=x)
    assert out.data_ptr() == x.data_ptr()
    assert_close(x, expected, dtype)
    y = randn(4, 333, dtype=dtype, device=device, scale=3.0)
    assert_close(xielu_ref(y, _params(device)), _reference(y), dtype)


def test_empty_rows_write_nothing(device):
    x = torch.empty(0, 16, device=device)
    assert xielu_rows(x, _params(device)).shape == (0, 16)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 8])
def test_between_two_projections_in_a_graph_equals_eager_over_replays(rows, dtype):
    """Apertus's MLP, up projection -> xIELU -> down projection + residual, each kernel
    launched with PDL: 50 replays with fresh inputs equal the same calls run eagerly, bit for
    bit, and the float64 reference within tolerance; xIELU's output is in flight after it
    (the next kernel must not prefetch it)."""
    d, ffn = 512, 1344
    w_up = randn(ffn, d, dtype=dtype, device="cuda", scale=d ** -0.5)
    w_down = randn(d, ffn, dtype=dtype, device="cuda", scale=ffn ** -0.5)
    params = _params("cuda")

    def chain(x):
        return tg.linear(xielu_rows(tg.linear(x, w_up), params), w_down, residual=x)

    def reference(x):
        up = linear_ref(x.double(), w_up.double()).to(dtype)
        return linear_ref(_reference(up).to(dtype).double(), w_down.double(),
                          residual=x.double())

    if _pdl.supports_pdl(torch.device("cuda")):
        x = randn(rows, ffn, dtype=dtype, device="cuda")
        out = xielu_rows(x, params)
        assert not _pdl.use_pdl(x.device, (out,))
    assert_replays_equal_eager(chain, reference, (rows, d), dtype)
