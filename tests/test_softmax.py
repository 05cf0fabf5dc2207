import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from _shapes import DTYPES, ROW_SHAPES
from tilegraph.kernels.softmax import softmax_ref
from tilegraph.testing import assert_close, poisoned, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES + [(3, 20000)])  # the last loops over chunks
def test_matches_reference(shape, dtype, device):
    x = randn(*shape, dtype=dtype, device=device, scale=4.0)
    out = tg.softmax(x, out=poisoned(shape, dtype, device))
    assert_close(out, softmax_ref(x.double()), dtype)


@pytest.mark.parametrize("n_cols", [781, 20000])
def test_properties(n_cols, device):
    # Multiples of 1/4: x + 1000 is exact in fp32, so shifting must change nothing.
    x = torch.randint(-40, 40, (5, n_cols), device=device).float() / 4
    y = tg.softmax(x)
    torch.testing.assert_close(y.sum(-1), torch.ones(5, device=device), rtol=0, atol=1e-5)
    assert (y >= 0).all()
    # Shift invariance: adding a constant to a row changes nothing.
    assert_close(tg.softmax(x + 1000.0), y.double(), torch.float32)


def test_extreme_values(device):
    x = torch.tensor([[1e30, 0.0, -1e30], [-math.inf, 0.0, 0.0], [88.0, 89.0, 90.0]],
                     device=device)
    y = tg.softmax(x)
    expected = torch.softmax(x.double(), -1)
    torch.testing.assert_close(y.double(), expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dim", [0, 1, -2])
def test_other_dims(dim, device):
    x = randn(4, 6, 9, device=device)
    out = tg.softmax(x, dim, out=poisoned(x.shape, torch.float32, device))
    assert_close(out, softmax_ref(x.double(), dim), torch.float32)


def test_strided_rows_and_in_place(device):
    x = randn(40, 64, device=device)[::3, 5:50]   # row stride 192, not contiguous
    expected = softmax_ref(x.double())
    assert_close(tg.softmax(x), expected, torch.float32)
    y = x.contiguous()
    assert tg.softmax(y, out=y) is y
    assert_close(y, expected, torch.float32)


def test_bad_input(device):
    x = randn(3, 4, device=device)
    with pytest.raises(ValueError, match="dim=2 is out of range"):
        tg.softmax(x, 2)
    with pytest.raises(ValueError, match="at least 1 dimension"):
        tg.softmax(torch.tensor(1.0, device=device))
    with pytest.raises(TypeError, match="out has dtype torch.float16, expected torch.float32"):
        tg.softmax(x, out=torch.empty(3, 4, dtype=torch.float16, device=device))
    assert tg.softmax(torch.empty(0, 7, device=device)).shape == (0, 7)
    with pytest.raises(TypeError, match="dim must be an int, got float 1.0"):
        tg.softmax(x, dim=1.0)


def test_out_overlapping_x_shifted_is_refused(device):
    buffer = randn(9, 64, device=device)
    with pytest.raises(ValueError, match="out overlaps x"):
        tg.softmax(buffer[:8], out=buffer[1:])


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 300), dtype=st.sampled_from(DTYPES))
def test_any_shape(rows, cols, dtype):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = randn(rows, cols, dtype=dtype, device=device, scale=3.0)
    out = tg.softmax(x, out=poisoned(x.shape, dtype, device))
    assert_close(out, softmax_ref(x.double()), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8192, 4096), (1823, 781), (17, 100_003)])
def test_large_gpu(shape, dtype):
    x = randn(*shape, dtype=dtype, device="cuda", scale=3.0)
    out = tg.softmax(x, out=poisoned(shape, dtype, "cuda"))
    assert_close(out, softmax_ref(x.double()), dtype)
