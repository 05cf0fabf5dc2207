"""Input checks shared by every op (kernels/_checks.py): nothing silently detached, no
errors from deep inside torch."""

import pytest
import torch

import tilegraph as tg
from tilegraph.testing import randn

D = 16


def _calls(device):
    """Every public op, as (name, call taking the tensor under test as its first input)."""
    w = randn(D, D, device=device)
    g = randn(D, device=device)
    return [
        ("add", lambda x: tg.add(x, randn(4, D, device=device))),
        ("gelu", lambda x: tg.gelu(x)),
        ("softmax", lambda x: tg.softmax(x)),
        ("rms_norm", lambda x: tg.rms_norm(x, g)),
        ("linear", lambda x: tg.linear(x, w, norm_weight=g, residual=x.detach())),
        ("matmul", lambda x: tg.matmul(x, w)),
        ("decode_layer", lambda x: tg.decode_layer(x, g, w, w)),
    ]


@pytest.mark.parametrize("index", range(7))
def test_inputs_that_require_grad_record_history_not_detach(index, device):
    name, call = _calls(device)[index]
    x = randn(4, D, device=device).requires_grad_()
    y = call(x)
    assert y.requires_grad and y.grad_fn is not None, name
    y.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all(), name
    with torch.no_grad():
        assert not call(x).requires_grad, name
    with torch.inference_mode():
        assert call(x.detach()).shape[0] == 4, name


def test_inference_only_ops_refuse_grad_and_out_refuses_it(device):
    x = randn(3, D, device=device)
    with pytest.raises(ValueError, match="out requires grad"):
        tg.gelu(x, out=torch.zeros(3, D, device=device, requires_grad=True))
    q = randn(1, 2, D, device=device).requires_grad_()
    cache = randn(1, 2, 8, D, device=device)
    with pytest.raises(ValueError, match="q requires grad, but this tilegraph op has no "
                                         "backward"):
        tg.decode_attention(q, cache, cache, torch.tensor([5], device=device))


def test_meta_tensors_get_a_clear_error():
    x = torch.empty(4, D, device="meta")
    with pytest.raises(ValueError, match="x is a meta tensor"):
        tg.gelu(x)
    with pytest.raises(ValueError, match="x is a meta tensor"):
        tg.softmax(x)
