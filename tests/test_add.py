import pytest
import torch

import tilegraph as tg
from _shapes import DTYPES, ROW_SHAPES
from tilegraph.kernels.add import add_ref
from tilegraph.testing import assert_close, poisoned, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
def test_matches_reference(shape, dtype, device):
    a, b = randn(*shape, dtype=dtype, device=device), randn(*shape, dtype=dtype, device=device)
    out = tg.add(a, b, out=poisoned(shape, dtype, device))
    assert_close(out, add_ref(a.double(), b.double()), dtype)


def test_allocates_when_no_out(device):
    a, b = randn(5, 9, device=device), randn(5, 9, device=device)
    out = tg.add(a, b)
    assert out.shape == a.shape and out.dtype == a.dtype
    assert_close(out, add_ref(a.double(), b.double()), torch.float32)


def test_in_place_and_strided_inputs(device):
    a = randn(13, 24, device=device)
    b = randn(24, 13, device=device).t()  # non-contiguous
    expected = add_ref(a.double(), b.double())
    result = tg.add(a, b, out=a)
    assert result is a
    assert_close(a, expected, torch.float32)


def test_empty_input_returns_empty(device):
    a = torch.empty(0, 5, device=device)
    assert tg.add(a, a).shape == (0, 5)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(b_shape=(4, 6)), ValueError, r"b has shape \(4, 6\), expected \(4, 5\)"),
    (dict(b_dtype=torch.float16), TypeError, "b has dtype torch.float16 but a has"),
    (dict(a_dtype=torch.int32), TypeError, "a has dtype torch.int32; supported"),
    (dict(out_shape=(5, 4)), ValueError, r"out has shape \(5, 4\), expected \(4, 5\)"),
    (dict(out_dtype=torch.float16), TypeError, "out has dtype torch.float16, expected"),
])
def test_bad_input(device, kwargs, error, match):
    a = torch.ones(4, 5, dtype=kwargs.get("a_dtype", torch.float32), device=device)
    b = torch.ones(kwargs.get("b_shape", (4, 5)), dtype=kwargs.get("b_dtype", a.dtype),
                   device=device)
    out = None
    if "out_shape" in kwargs or "out_dtype" in kwargs:
        out = torch.empty(kwargs.get("out_shape", (4, 5)),
                          dtype=kwargs.get("out_dtype", torch.float32), device=device)
    with pytest.raises(error, match=match):
        tg.add(a, b, out=out)


def test_rejects_non_tensor_and_non_contiguous_out(device):
    a = randn(4, 6, device=device)
    with pytest.raises(TypeError, match="b must be a torch.Tensor, got list"):
        tg.add(a, [1, 2])
    with pytest.raises(ValueError, match="out must be contiguous"):
        tg.add(a, a, out=torch.empty(6, 4, device=device).t())


def test_rejects_shifted_overlap(device):
    buf = randn(20, device=device)
    with pytest.raises(ValueError, match="out overlaps a"):
        tg.add(buf[:10], buf[:10], out=buf[5:15])


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_large_gpu(dtype):
    n = 3 * 2**22 + 17
    a, b = randn(n, dtype=dtype, device="cuda"), randn(n, dtype=dtype, device="cuda")
    out = tg.add(a, b, out=poisoned((n,), dtype, "cuda"))
    assert_close(out, add_ref(a.double(), b.double()), dtype)


@pytest.mark.gpu
def test_cpu_tensor_on_gpu_machine_is_refused():
    with pytest.raises(ValueError, match="a is on cpu; tilegraph kernels need CUDA tensors"):
        tg.add(torch.ones(3), torch.ones(3))
