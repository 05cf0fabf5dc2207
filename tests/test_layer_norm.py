"""The decode step's LayerNorm kernel (kernels/layer_norm.py: OPT 350M's norms after the
residual adds)."""

import pytest
import torch

import tilegraph as tg
from _replays import assert_replays_equal_eager
from _shapes import DTYPES
from tilegraph.kernels import _pdl
from tilegraph.kernels.layer_norm import layer_norm_rows
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import assert_close, poisoned, randn


def _reference(x, weight, bias, eps=1e-5):
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), weight.double(),
                                          bias.double(), eps)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 32), (3, 33), (5, 1000), (2, 1024)])
def test_matches_reference_on_rows_far_from_zero_mean(shape, dtype, device):
    """Rows whose mean (3) is far above their spread: a norm that did not centre them, or
    summed squares before centring in too few bits, is far off."""
    x = randn(*shape, dtype=dtype, device=device) + 3.0
    weight = randn(shape[-1], dtype=dtype, device=device)
    bias = randn(shape[-1], dtype=dtype, device=device)
    out = layer_norm_rows(x, weight, bias, 1e-5, out=poisoned(shape, dtype, device))
    assert_close(out, _reference(x, weight, bias), dtype)


def test_every_row_comes_out_centred_and_unit(device):
    x = randn(6, 300, device=device, scale=40.0) - 7.0
    out = layer_norm_rows(x, torch.ones(300, device=device), torch.zeros(300, device=device),
                          0.0)
    torch.testing.assert_close(out.mean(-1), torch.zeros(6, device=device), rtol=0, atol=1e-5)
    torch.testing.assert_close(out.var(-1, unbiased=False), torch.ones(6, device=device),
                               rtol=1e-5, atol=0)


@pytest.mark.parametrize("x", [randn(4, 64)[:, ::2], randn(2, 20000)],
                         ids=["strided", "wider than a tile"])
def test_rows_past_the_kernel_take_pytorch_s_norm(x, device):
    """A view whose columns are strided, or rows wider than one tile, come out right too
    (through F.layer_norm)."""
    x = x.to(device)
    weight, bias = randn(x.shape[1], device=device), randn(x.shape[1], device=device)
    out = layer_norm_rows(x, weight, bias, 1e-5, out=poisoned(x.shape, x.dtype, device))
    assert_close(out, _reference(x, weight, bias), torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 8])
def test_norm_after_a_residual_projection_in_a_graph_equals_eager_over_replays(rows, dtype):
    """OPT 350M's order, projection + residual add -> LayerNorm -> projection, each kernel
    launched with PDL: 50 replays with fresh inputs equal the same calls run eagerly, bit for
    bit, and the float64 reference within tolerance; the norm's output is in flight after
    it (the next kernel must not prefetch it)."""
    d = 1024
    w0, w1 = (randn(d, d, dtype=dtype, device="cuda", scale=d**-0.5) for _ in range(2))
    weight, bias = randn(d, dtype=dtype, device="cuda"), randn(d, dtype=dtype, device="cuda")

    def chain(x):
        h = layer_norm_rows(tg.linear(x, w0, residual=x), weight, bias, 1e-5)
        return tg.linear(h, w1, residual=h)

    def reference(x):
        s = linear_ref(x.double(), w0.double(), residual=x.double()).to(dtype)
        h = _reference(s, weight, bias).to(dtype).double()
        return linear_ref(h, w1.double(), residual=h)

    if _pdl.supports_pdl(torch.device("cuda")):
        x = randn(rows, d, dtype=dtype, device="cuda")
        out = layer_norm_rows(x, weight, bias, 1e-5)
        assert not _pdl.use_pdl(x.device, (out,))
    assert_replays_equal_eager(chain, reference, (rows, d), dtype)
