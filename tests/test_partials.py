"""sum_partials (kernels/_partials.py): the partial sums the column reductions of the backward
leave, added up in fp32 and cast once, at awkward sizes and every block shape it takes."""

import pytest
import torch

from tilegraph.kernels._partials import sum_partials
from tilegraph.testing import randn

TOLERANCES = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-3}


@pytest.mark.parametrize("dtype", list(TOLERANCES))
@pytest.mark.parametrize("blocks", [(None, None), (8, 16), (16, 128), (64, 64)])
@pytest.mark.parametrize("shape", [(1, 1), (17, 13), (300, 1000), (129, 37)])
def test_sums_equal_the_float64_sum(shape, blocks, dtype, device):
    partial = randn(*shape, device=device)
    out = sum_partials(partial, dtype, block_n=blocks[0], block_p=blocks[1])
    assert out.dtype == dtype and out.shape == (shape[1],)
    expected = partial.double().sum(0)
    error = ((out.double() - expected).abs().max() / expected.abs().max()).item()
    assert error <= TOLERANCES[dtype], f"relative error {error:.2e}"


def test_no_partials_sum_to_zero(device):
    out = sum_partials(torch.empty(0, 7, device=device), torch.float32)
    assert torch.equal(out, torch.zeros(7, device=device))
