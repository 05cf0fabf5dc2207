import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from _shapes import DTYPES, ROW_SHAPES
from tilegraph.kernels._launch import elementwise_shape
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.testing import assert_close, poisoned, randn


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_matches_reference(shape, dtype, approximate, device):
    x = randn(*shape, dtype=dtype, device=device, scale=3.0)
    out = tg.gelu(x, approximate=approximate, out=poisoned(shape, dtype, device))
    assert_close(out, gelu_ref(x.double(), approximate), dtype)


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_matches_torch_and_extremes(approximate, device):
    x = torch.tensor([-1e4, -30.0, -5.0, -1e-6, 0.0, 1e-6, 5.0, 30.0, 1e4], device=device)
    out = tg.gelu(x, approximate=approximate)
    expected = torch.nn.functional.gelu(x.double(), approximate=approximate)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), expected, rtol=1e-6, atol=1e-7)


def test_default_is_tanh_and_strided_input(device):
    x = randn(33, 17, device=device).t()
    assert_close(tg.gelu(x), gelu_ref(x.double(), "tanh"), torch.float32)


def test_nan_propagates(device):
    x = torch.tensor([1.0, math.nan, -1.0], device=device)
    assert torch.isnan(tg.gelu(x)).tolist() == [False, True, False]


def test_bad_input(device):
    x = randn(4, device=device)
    with pytest.raises(ValueError, match="approximate must be 'tanh' or 'none'"):
        tg.gelu(x, approximate="fast")
    with pytest.raises(TypeError, match="x has dtype torch.float64"):
        tg.gelu(x.double())
    with pytest.raises(ValueError, match=r"out has shape \(5,\), expected \(4,\)"):
        tg.gelu(x, out=torch.empty(5, device=device))
    assert tg.gelu(torch.empty(0, 3, device=device)).shape == (0, 3)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       dtype=st.sampled_from(DTYPES), approximate=st.sampled_from(["tanh", "none"]))
def test_any_shape(shape, dtype, approximate):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = randn(*shape, dtype=dtype, device=device, scale=2.0)
    out = tg.gelu(x, approximate=approximate, out=poisoned(shape, dtype, device))
    assert_close(out, gelu_ref(x.double(), approximate), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_gpu(dtype):
    x = randn(4099, 4097, dtype=dtype, device="cuda", scale=3.0)
    out = tg.gelu(x, out=poisoned(x.shape, dtype, "cuda"))
    assert_close(out, gelu_ref(x.double()), dtype)


@pytest.mark.parametrize("element_size", [2, 4])
@pytest.mark.parametrize("n", [1, 7, 781, 1823, 4099, 2**20, 2**26])
def test_elementwise_rule_gives_each_thread_one_16_byte_vector(n, element_size):
    """GELU and add launch programs of one 16-byte vector a thread and up to 16 warps
    (fastest on H100 at 64M elements, notes/kernels.md); a small input gets one
    program no larger than it needs."""
    block, warps = elementwise_shape(n, element_size)
    assert block == warps * 32 * (16 // element_size)
    assert 1 <= warps <= 16
    assert block >= n or warps == 16
    if n == 2**26:
        assert (block, warps) == ((2048, 16) if element_size == 4 else (4096, 16))
