"""tg.capture and tg.scope: replay equals eager, errors say what went wrong and where."""

import gc
import warnings

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.softmax import softmax_ref
from tilegraph.testing import assert_close, randn


def _step(x, w, g, saved):
    """tg kernels, torch ops and a copy, as a decode step mixes them."""
    h = tg.linear(x, w, norm_weight=g, residual=x)
    saved.copy_(torch.tanh(h))
    return {"probs": tg.softmax(h), "h": h}


def _step_ref(x, w, g):
    h = linear_ref(x.double(), w.double(), norm_weight=g.double(), residual=x.double())
    return softmax_ref(h), h, torch.tanh(h)


def _inputs(device, rows=2, d=64):
    return (randn(rows, d, device=device), randn(d, d, device=device, scale=d**-0.5),
            randn(d, device=device), torch.empty(rows, d, device=device))


def _check_replays(graph, args, replays):
    x, w, g, saved = args
    for _ in range(replays):
        x.copy_(torch.randn_like(x))            # fresh input in the static buffer
        for out in graph.outputs.values():
            out.fill_(float("nan"))             # poison: every element must be rewritten
        outputs = graph.replay()
        assert outputs is graph.outputs
        probs, h, tanh_h = _step_ref(x, w, g)
        assert_close(outputs["probs"], probs, torch.float32)
        assert_close(outputs["h"], h, torch.float32)
        assert_close(saved, tanh_h, torch.float32)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path: kernels take CPU tensors "
                    "only through the interpreter, on machines without CUDA")
def test_cpu_replay_reruns_and_writes_same_outputs():
    args = _inputs("cpu")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        graph = tg.capture(_step, *args)
    assert graph.inputs == args and not graph.is_cuda_graph and graph.capture_seconds > 0
    _check_replays(graph, args, replays=3)
    assert graph.replays == 3


def test_capture_validates_warmup():
    with pytest.raises(ValueError, match="warmup must be >= 1"):
        tg.capture(lambda x: x, torch.ones(1), warmup=0)


def test_scope_refuses_allocation_and_names_the_line():
    x = torch.ones(4)
    with pytest.raises(tg.CaptureError) as info:  # noqa: SIM117
        with tg.scope():
            y = x * 2  # allocates
            del y
    message = str(info.value)
    assert "aten.mul.Tensor allocates a new tensor inside tg.scope()" in message
    assert "test_capture.py" in message and "y = x * 2" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path: kernels take CPU "
                    "tensors through the interpreter")
def test_cpu_scope_records_and_replays():
    """On CPU a scope records its PyTorch and tilegraph ops; a replay runs them again on
    what the buffers hold then, as a CUDA graph would."""
    x, w, out, total = randn(3, 16), randn(8, 16), torch.empty(3, 8), torch.zeros(3, 8)
    with tg.scope() as s:
        tg.linear(x, w, activation="gelu", out=out)
        out.mul_(2)
        tg.add(total, out, out=total)
    assert s.graph is not None and not s.graph.is_cuda_graph
    expected_total = 2 * linear_ref(x.double(), w.double(), activation="gelu")
    assert_close(out, expected_total, torch.float32)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        s.graph.replay()
        expected = 2 * linear_ref(x.double(), w.double(), activation="gelu")
        expected_total = expected_total + expected
        assert_close(out, expected, torch.float32)
        assert_close(total, expected_total, torch.float32)
    assert s.graph.replays == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path")
def test_cpu_scope_with_a_hand_launched_kernel_refuses_to_replay():
    from tilegraph.kernels.add import _add_kernel

    a, out = torch.randn(8), torch.empty(8)
    with tg.scope() as s:
        _add_kernel[(1,)](out, a, a, 8, BLOCK_SIZE=8)
    assert_close(out, 2 * a.double(), torch.float32)
    with pytest.raises(RuntimeError, match="launched a Triton kernel directly"):
        s.graph.replay()


@pytest.mark.gpu
def test_gpu_replay_equals_eager_over_many_replays():
    args = _inputs("cuda", rows=3, d=512)
    graph = tg.capture(_step, *args)
    assert graph.is_cuda_graph and graph.capture_seconds > 0 and graph.memory_bytes > 0
    _check_replays(graph, args, replays=120)


@pytest.mark.gpu
def test_gpu_no_memory_growth_over_1000_replays():
    args = _inputs("cuda")
    graph = tg.capture(_step, *args)
    graph.replay()
    torch.cuda.synchronize()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    for _ in range(1000):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.memory_reserved() == reserved


def _item(x):
    return x * float(x.sum().item())


def _cpu(x):
    return x.cpu()


def _print(x):
    print(x)
    return x


def _branch(x):
    if x.sum() > 0:  # a value-dependent branch would be frozen at capture: refused instead
        return x + 1
    return x - 1


def _dropout_branch(x):
    y = torch.nn.functional.dropout(x, 0.5)  # draws from the CUDA RNG inside the capture
    return y + 1 if y.sum() > 0 else y


@pytest.mark.gpu
@pytest.mark.parametrize("warmup", [2, 1])
@pytest.mark.parametrize("fn, line", [(_item, "x.sum().item()"), (_cpu, "x.cpu()"),
                                      (_print, "print(x)"), (_branch, "if x.sum() > 0"),
                                      (_dropout_branch, "y + 1 if y.sum() > 0")])
def test_gpu_host_sync_raises_capture_error_naming_the_line(fn, line, warmup):
    """Found by the last warm-up call (before capture begins) or, with warmup=1, by the
    capture itself; either way the process stays usable."""
    x = torch.randn(8, device="cuda")
    with pytest.raises(tg.CaptureError) as info:
        tg.capture(fn, x, warmup=warmup)
    assert "test_capture.py" in str(info.value) and line in str(info.value)
    # The CUDA RNG is not left in capture state (raw torch.cuda.graph leaves it there:
    # "Offset increment outside graph capture encountered unexpectedly").
    assert torch.randn(4, device="cuda").isfinite().all()
    assert torch.nn.functional.dropout(x, 0.5).shape == x.shape
    # The failed capture leaves CUDA usable: the next capture works.
    graph = tg.capture(lambda v: tg.gelu(v), x)
    assert_close(graph.replay(), gelu_ref(x.double()), torch.float32)


@pytest.mark.gpu
def test_gpu_scope_records_and_replays():
    x, w = randn(2, 256, device="cuda"), randn(128, 256, device="cuda", scale=1 / 16)
    out = torch.empty(2, 128, device="cuda")
    tg.linear(x, w, out=out)  # warm-up: compile outside the capture
    with tg.scope() as s:
        tg.linear(x, w, out=out)
    for _ in range(5):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        s.graph.replay()
        assert_close(out, linear_ref(x.double(), w.double()), torch.float32)


class _SyncingCycle:
    """Garbage only a collection frees, whose finalizer synchronizes (forbidden during
    capture, as freeing an event or a graph is)."""

    def __init__(self, finalized: list):
        self.me, self.finalized = self, finalized

    def __del__(self):
        self.finalized.append(True)
        torch.cuda.synchronize()


@pytest.mark.gpu
def test_gpu_garbage_is_not_collected_while_a_graph_is_recorded():
    """A collection during capture would run such a finalizer and invalidate the capture:
    the collector waits until the graph is recorded, and collects afterwards."""
    x = randn(1000, device="cuda")
    out = torch.empty_like(x)
    finalized = []

    def step():
        _SyncingCycle(finalized)   # garbage at once; the next allocation may collect it
        tg.gelu(x, out=out)
        return out

    step()
    gc.collect()
    thresholds = gc.get_threshold()
    gc.set_threshold(1)   # a collection at almost every allocation of a Python object
    try:
        with tg.scope() as s:
            step()
        graph = tg.capture(step)
    finally:
        gc.set_threshold(*thresholds)
    gc.collect()
    assert len(finalized) >= 2 and gc.isenabled()
    for replay in (s.graph.replay, graph.replay):
        x.copy_(torch.randn_like(x))
        out.fill_(float("nan"))
        replay()
        assert_close(out, gelu_ref(x.double()), torch.float32)


@pytest.mark.gpu
def test_gpu_scope_allows_the_scratch_a_tilegraph_op_makes(monkeypatch):
    """A scope refuses what the caller's code allocates, not the scratch inside a tilegraph
    op: a norm run as a kernel of its own before the tensor-core projection (its rows in a
    buffer the launcher makes), a decode layer of two kernels (its q), a softmax over a
    dimension not the last (the rows moved last). All replay right with fresh inputs."""
    from tilegraph.kernels import decode_plan
    from tilegraph.kernels.decode_layer import decode_layer_ref

    split = decode_plan.Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4,
                                     "num_stages": 2, "SPLIT_K": 4})
    monkeypatch.setattr(decode_plan, "plan", lambda *a, **k: split)  # the norm not in its loop
    x = randn(4, 1000, dtype=torch.bfloat16, device="cuda")
    w = randn(300, 1000, dtype=torch.bfloat16, device="cuda", scale=1000**-0.5)
    g = randn(1000, dtype=torch.bfloat16, device="cuda")
    y = torch.empty(4, 300, dtype=torch.bfloat16, device="cuda")
    h = randn(4, 256, device="cuda")
    gh = randn(256, device="cuda")
    wq, wo = (randn(256, 256, device="cuda", scale=1 / 16) for _ in range(2))
    out = torch.empty(4, 256, device="cuda")
    z = randn(5, 3, 7, device="cuda")
    probs = torch.empty_like(z)

    def block():
        tg.linear(x, w, norm_weight=g, out=y)
        tg.decode_layer(h, gh, wq, wo, out=out)
        tg.softmax(z, dim=0, out=probs)

    block()  # warm-up
    with tg.scope() as s:
        block()
    for _ in range(5):
        for t in (x, h, z):
            t.copy_(torch.randn_like(t))
        for t in (y, out, probs):
            t.fill_(float("nan"))
        s.graph.replay()
        assert_close(y, linear_ref(x.double(), w.double(), norm_weight=g.double()),
                     torch.bfloat16)
        assert_close(out, decode_layer_ref(h.double(), gh.double(), wq.double(),
                                           wo.double()), torch.float32)
        assert_close(probs, softmax_ref(z.double(), dim=0), torch.float32)


@pytest.mark.gpu
def test_gpu_scope_allocation_raises():
    x = torch.randn(4, device="cuda")
    with pytest.raises(tg.CaptureError, match="allocates a new tensor"):  # noqa: SIM117
        with tg.scope():
            tg.gelu(x)  # no out=: allocates its result


@pytest.mark.gpu
def test_gpu_autotuning_during_capture_raises(monkeypatch):
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    a, b = randn(96, 80, device="cuda"), randn(80, 72, device="cuda")
    out = torch.empty(96, 72, device="cuda")
    with pytest.raises(tg.CaptureError, match="warm up"):  # noqa: SIM117
        with tg.scope():
            tg.matmul(a, b, out=out)  # never run before: would need tuning


def test_a_function_recording_autograd_history_is_refused(device):
    w = torch.nn.Parameter(randn(8, 8, device=device))
    x = randn(2, 8, device=device)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="no CUDA device")
        with pytest.raises(tg.CaptureError, match="records autograd history.*inference_mode"):
            tg.capture(lambda v: v @ w, x)
        with torch.no_grad():
            graph = tg.capture(lambda v: v @ w, x)
    assert torch.equal(graph.replay(), (x @ w).detach())
