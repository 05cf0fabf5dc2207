"""Gradients of every op against float64 autograd through its reference (kernels/*_ref), at
awkward sizes with every fused option on and off; the same under torch.compile."""

import math

import pytest
import torch

import tilegraph as tg
from _shapes import DTYPES
from tilegraph.kernels import _activation_grad
from tilegraph.kernels._activation import GLU_ACTIVATIONS, activation_ref
from tilegraph.kernels._activation_grad import activation_bias_grads, column_sums
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.matmul import matmul_ref
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.kernels.softmax import softmax_ref
from tilegraph.testing import assert_grad_close, randn

HAS_CUDA = torch.cuda.is_available()
GRAD_DTYPES = DTYPES if HAS_CUDA else [torch.float32]


def _leaves(shapes, dtype, device, scale=1.0):
    return [randn(*s, dtype=dtype, device=device, scale=scale).requires_grad_() for s in shapes]


def _check_grads(op, ref, inputs, dtype, what=""):
    """Backward of `op` with a random dy equals float64 autograd through `ref`, input by
    input (None in `inputs` stays None: an optional part left off)."""
    out = op(*inputs)
    assert out.requires_grad and out.grad_fn is not None, f"{what}: the result was detached"
    dy = randn(*out.shape, dtype=dtype, device=out.device)
    out.backward(dy)
    copies = [None if t is None else t.detach().double().requires_grad_() for t in inputs]
    ref(*copies).backward(dy.double())
    for index, (t, t64) in enumerate(zip(inputs, copies, strict=True)):
        if t is None:
            continue
        assert t.grad is not None, f"{what}: no gradient for input {index}"
        assert_grad_close(t.grad, t64.grad, dtype, f"{what} d(input {index})")


@pytest.mark.parametrize("dtype", GRAD_DTYPES)
@pytest.mark.parametrize("shape", [(1, 7), (7, 33), (3, 5, 129)])
def test_elementwise_and_row_ops(shape, dtype, device):
    a, b = _leaves([shape, shape], dtype, device, scale=2.0)
    _check_grads(tg.add, lambda a, b: a + b, [a, b], dtype, "add")
    for approximate in ("tanh", "none"):
        (x,) = _leaves([shape], dtype, device, scale=2.0)
        _check_grads(lambda x, a=approximate: tg.gelu(x, approximate=a),
                     lambda x, a=approximate: gelu_ref(x, a), [x], dtype, f"gelu {approximate}")
    for dim in range(-1, len(shape) - 1):
        (x,) = _leaves([shape], dtype, device, scale=2.0)
        _check_grads(lambda x, d=dim: tg.softmax(x, d), lambda x, d=dim: softmax_ref(x, d),
                     [x], dtype, f"softmax dim {dim}")
    x, w = _leaves([shape, shape[-1:]], dtype, device)
    _check_grads(lambda x, w: tg.rms_norm(x, w, 1e-5), lambda x, w: rms_norm_ref(x, w, 1e-5),
                 [x, w], dtype, "rms_norm")


def test_rms_norm_long_rows_and_many_rows(device):
    """Rows past one register tile take the two-pass backward; more rows than programs
    make each program sum several rows' share of dweight."""
    for shape in ((3, 20000), (300, 24)):
        x, w = _leaves([shape, shape[-1:]], torch.float32, device)
        _check_grads(tg.rms_norm, rms_norm_ref, [x, w], torch.float32, f"rms_norm {shape}")


@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "relu2", "swiglu",
                                        "geglu", "geglu_tanh"])
@pytest.mark.parametrize("fused", [True, False])
def test_linear(activation, fused, device):
    rows, k, n = (2, 9), 40, 38
    n_out = n // 2 if activation in GLU_ACTIVATIONS else n
    x, w, b, g, r = _leaves([(*rows, k), (n, k), (n,), (k,), (*rows, n_out)], torch.float32,
                            device)
    if not fused:
        b = g = r = None

    def op(x, w, b, g, r):
        return tg.linear(x, w, b, norm_weight=g, activation=activation, residual=r)

    def ref(x, w, b, g, r):
        return linear_ref(x, w, b, norm_weight=g, activation=activation, residual=r)
    _check_grads(op, ref, [x, w, b, g, r], torch.float32, f"linear {activation} {fused}")


@pytest.mark.parametrize("dtype", GRAD_DTYPES)
@pytest.mark.parametrize("rows", [1, 5, 67])
def test_linear_dtypes_and_row_counts(rows, dtype, device):
    """Decode-sized row counts (<= 16) train on the same tiled GEMM as large ones."""
    x, w, g, r = _leaves([(rows, 72), (56, 72), (72,), (rows, 56)], dtype, device)
    _check_grads(lambda x, w, g, r: tg.linear(x, w, norm_weight=g, activation="gelu_tanh",
                                              residual=r),
                 lambda x, w, g, r: linear_ref(x, w, norm_weight=g, activation="gelu_tanh",
                                               residual=r),
                 [x, w, g, r], dtype, f"linear {rows} rows")


# single: one program down whole columns writes the gradient; slices: row slices leave
# partial sums that a second kernel adds up
@pytest.mark.parametrize("plan_bytes", [1 << 40, 0], ids=["single", "slices"])
@pytest.mark.parametrize("activation", ["none", "relu", "gelu_tanh", "swiglu", "geglu_tanh"])
@pytest.mark.parametrize("shape", [(1, 3), (37, 300), (300, 37), (1000, 20)])
def test_bias_gradient_pass(shape, activation, plan_bytes, device, monkeypatch):
    """dz and its column sums (the bias gradient) from one pass: whole columns or row slices
    of several sizes, a column block past the edge, many slices summed."""
    monkeypatch.setattr(_activation_grad, "SINGLE_PASS_BYTES", plan_bytes)
    rows, n = shape
    dy = randn(rows, n, device=device)
    z = randn(rows, 2 * n if activation in GLU_ACTIVATIONS else n, device=device, scale=2.0)
    z64 = z.double().requires_grad_()
    if activation == "none":
        dz64, db = dy.double(), column_sums(dy)
    else:
        dz64 = torch.autograd.grad(activation_ref(z64, activation), z64, dy.double())[0]
        got_dz, db = activation_bias_grads(dy, z, activation)
        assert_grad_close(got_dz, dz64, torch.float32, f"dz {activation}")
    assert_grad_close(db, dz64.sum(0), torch.float32, f"dbias {activation}")


def test_only_some_inputs_require_grad(device):
    """Frozen weights (a fine-tuned head) and frozen inputs: gradients only where asked."""
    x = randn(4, 24, device=device).requires_grad_()
    w = randn(16, 24, device=device)
    tg.linear(x, w, activation="relu").sum().backward()
    assert x.grad is not None and w.grad is None
    x, w = randn(4, 24, device=device), randn(16, 24, device=device).requires_grad_()
    tg.linear(x, w).sum().backward()
    assert w.grad is not None and x.grad is None


@pytest.mark.parametrize("activation", [None, "gelu"])
def test_matmul(activation, device):
    a, b = _leaves([(3, 17, 30), (30, 21)], torch.float32, device)
    _check_grads(lambda a, b: tg.matmul(a, b, activation=activation),
                 lambda a, b: matmul_ref(a, b, activation=activation), [a, b], torch.float32,
                 f"matmul {activation}")


@pytest.mark.parametrize("h_dtype", [None, torch.float32])
def test_decode_layer(h_dtype, device):
    """Weights in bf16 with h in fp32 (the fast decode layout) on GPU; fp32 on CPU."""
    dtype = torch.bfloat16 if HAS_CUDA and h_dtype else torch.float32
    g, wq, wo = _leaves([(24,), (16, 24), (24, 16)], dtype, device, scale=0.3)
    (h,) = _leaves([(3, 24)], h_dtype or dtype, device)

    def ref(h, g, wq, wo):
        return h + rms_norm_ref(h, g) @ wq.T @ wo.T
    _check_grads(tg.decode_layer, ref, [h, g, wq, wo], dtype, "decode_layer")


def test_compiled_forward_and_backward_equal_eager(device):
    """torch.compile(fullgraph=True) traces the differentiable ops and their backward ops
    as opaque nodes: same gradients as eager."""
    def block(x, w1, w2, g):
        h = tg.linear(x, w1, norm_weight=g, activation="gelu_tanh")
        y = tg.add(x, tg.matmul(h, w2))
        return tg.softmax(tg.gelu(tg.rms_norm(y, g)), -1)

    inputs = _leaves([(5, 24), (40, 24), (40, 24), (24,)], torch.float32, device)
    dy = randn(5, 24, device=device)
    block(*inputs).backward(dy)
    eager = [t.grad.clone() for t in inputs]
    for t in inputs:
        t.grad = None
    compiled = torch.compile(block, fullgraph=True, backend="aot_eager")
    compiled(*inputs).backward(dy)
    for t, expected in zip(inputs, eager, strict=True):
        torch.testing.assert_close(t.grad, expected, rtol=1e-5, atol=1e-6)


def test_out_is_refused_when_grad_is_recorded(device):
    x = randn(3, 8, device=device).requires_grad_()
    with pytest.raises(ValueError, match="out= cannot be used when an input requires grad"):
        tg.gelu(x, out=torch.empty(3, 8, device=device))
    with torch.no_grad():  # no history recorded: out= is fine
        out = torch.empty(3, 8, device=device)
        assert tg.gelu(x, out=out) is out


def test_nan_in_dy_propagates(device):
    x = randn(2, 8, device=device).requires_grad_()
    dy = torch.ones(2, 8, device=device)
    dy[1, 3] = math.nan
    tg.softmax(x).backward(dy)
    assert torch.isnan(x.grad[1]).all() and torch.isfinite(x.grad[0]).all()
