"""The kernels as torch.library custom ops: traced whole by torch.compile(fullgraph=True) and
recorded by CUDA graph capture."""

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.matmul import matmul_ref
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.kernels.softmax import softmax_ref
from tilegraph.testing import assert_close, randn


def _block(x, w, g, r):
    h = tg.linear(x, w, norm_weight=g, residual=r)
    h = tg.gelu(h)
    h = tg.add(h, tg.softmax(h))
    return tg.rms_norm(tg.matmul(h, w.t()), g)


def _block_ref(x, w, g, r):
    h = linear_ref(x, w, norm_weight=g, residual=r)
    h = gelu_ref(h)
    h = h + softmax_ref(h)
    return rms_norm_ref(matmul_ref(h, w.t()), g)


def test_ops_are_registered():
    for name in ("add", "gelu", "softmax", "rms_norm", "linear", "matmul", "decode_layer"):
        assert hasattr(torch.ops.tilegraph, name)


def test_opcheck_linear(device):
    x, w = randn(3, 16, device=device), randn(8, 16, device=device)
    out = torch.empty(3, 8, device=device)
    torch.library.opcheck(torch.ops.tilegraph.linear.default,
                          (x, w, None, None, 1e-6, "none", None, False, out),
                          test_utils=("test_schema", "test_faketensor"))


def test_opcheck_decode_layer(device):
    h, g = randn(3, 16, device=device), randn(16, device=device)
    wq, wo = randn(16, 16, device=device, scale=0.25), randn(16, 16, device=device, scale=0.25)
    torch.library.opcheck(torch.ops.tilegraph.decode_layer.default,
                          (h, g, wq, wo, 1e-6, torch.empty_like(h)),
                          test_utils=("test_schema", "test_faketensor"))


def test_compile_fullgraph_traces_every_op(device):
    # aot_eager runs dynamo and functionalisation without building code: fast on CPU.
    args = (randn(3, 16, device=device), randn(16, 16, device=device, scale=0.25),
            randn(16, device=device), randn(3, 16, device=device))
    compiled = torch.compile(_block, fullgraph=True, backend="aot_eager")
    assert_close(compiled(*args), _block_ref(*(a.double() for a in args)), torch.float32)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compile_inductor_gpu(dtype):
    args = (randn(5, 256, dtype=dtype, device="cuda"),
            randn(256, 256, dtype=dtype, device="cuda", scale=1 / 16),
            randn(256, dtype=dtype, device="cuda"), randn(5, 256, dtype=dtype, device="cuda"))
    compiled = torch.compile(_block, fullgraph=True)
    assert_close(compiled(*args), _block_ref(*(a.double() for a in args)), dtype)


@pytest.mark.gpu
def test_cuda_graph_capture_and_replay():
    x, w = randn(2, 512, device="cuda"), randn(512, 512, device="cuda", scale=512**-0.5)
    g, r = randn(512, device="cuda"), randn(2, 512, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        _block(x, w, g, r)  # warm-up: JIT and autotuning happen outside capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _block(x, w, g, r)
    for _ in range(3):  # fresh inputs each replay, written into the captured buffers
        for t in (x, g, r):
            t.copy_(torch.randn_like(t))
        out.fill_(float("nan"))
        graph.replay()
        assert_close(out, _block_ref(x.double(), w.double(), g.double(), r.double()),
                     torch.float32)
