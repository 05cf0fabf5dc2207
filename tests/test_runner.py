"""tg.GraphRunner: static buffers, size buckets, padding, output safety, validation."""

import warnings

import pytest
import torch

import tilegraph as tg
from tilegraph.graph import runner as runner_module
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.kernels.linear import linear_ref
from tilegraph.models.layerstack import PRESETS, LayerStack
from tilegraph.testing import assert_close, randn

D = 48


def _layer(x, w, g):
    """One decode layer: norm fused into the projection, residual into its epilogue."""
    return tg.linear(x, w, norm_weight=g, residual=x)


def _layer_ref(x, w, g):
    return linear_ref(x.double(), w.double(), norm_weight=g.double(), residual=x.double())


@pytest.fixture
def layer(device):
    w, g = randn(D, D, device=device, scale=D**-0.5), randn(D, device=device)
    return (lambda x: _layer(x, w, g)), (lambda x: _layer_ref(x, w, g))


@pytest.fixture(autouse=True)
def _quiet_cpu_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="no CUDA device")
        yield


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 7, 8])
def test_every_size_and_padding(rows, layer, device):
    fn, ref = layer
    runner = tg.GraphRunner(fn, randn(2, D, device=device), sizes=(1, 2, 4, 8))
    x = randn(rows, D, device=device)
    y = runner(x)
    assert y.shape == (rows, D)
    assert_close(y, ref(x), torch.float32)
    padded_to = min(s for s in (1, 2, 4, 8) if s >= rows)
    assert runner.stats()[padded_to]["replays"] == 1


def test_padding_rows_are_zeroed_and_never_returned(device):
    runner = tg.GraphRunner(lambda x: tg.gelu(x), randn(8, 3, device=device), sizes=(8,))
    runner(randn(8, 3, device=device) * 1000)   # fills every static row with large values
    x = randn(5, 3, device=device)
    y = runner(x)
    assert y.shape == (5, 3)
    assert_close(y, gelu_ref(x.double()), torch.float32)
    # the rows past x's were zeroed before the replay (gelu(0) = 0), not left from the call before
    assert torch.equal(runner._graphs[8].outputs[5:], torch.zeros(3, 3, device=device))


def test_outputs_alias_without_clone_and_not_with_it(layer, device):
    fn, ref = layer
    x1, x2 = randn(2, D, device=device), randn(2, D, device=device)
    aliasing = tg.GraphRunner(fn, x1, sizes=(2,))
    y1 = aliasing(x1)
    aliasing(x2)
    assert_close(y1, ref(x2), torch.float32)    # overwritten by the second replay
    cloning = tg.GraphRunner(fn, x1, sizes=(2,), clone_outputs=True)
    y1 = cloning(x1)
    cloning(x2)
    assert_close(y1, ref(x1), torch.float32)


@pytest.mark.parametrize("rows", [1, 3, 4])
def test_out_receives_the_outputs(rows, layer, device):
    """runner(x, out=y) fills y (poisoned first) and returns it, padded sizes included, and
    leaves the next call's y alone; clone_outputs=True and again() return new copies."""
    fn, ref = layer
    runner = tg.GraphRunner(fn, randn(4, D, device=device), sizes=(2, 4))
    outs = [torch.full((rows, D), float("nan"), device=device) for _ in range(3)]
    xs = [randn(rows, D, device=device) for _ in range(3)]
    for x, out in zip(xs, outs, strict=True):
        assert runner(x, out=out) is out
    for x, out in zip(xs, outs, strict=True):
        assert_close(out, ref(x), torch.float32)
    cloning = tg.GraphRunner(fn, randn(4, D, device=device), sizes=(2, 4), clone_outputs=True)
    first = cloning(xs[0])
    again = cloning.again()
    assert again is not first
    assert_close(first, ref(xs[0]), torch.float32)
    assert_close(again, ref(xs[0]), torch.float32)


def test_out_of_several_leaves_and_eager_fallback(device):
    """A tuple of outputs, one of them non-contiguous and one not batched, into an out of
    the same structure; past the largest size, the eager fallback fills out too."""
    bias = randn(3, device=device)

    def fn(x):
        return tg.gelu(x), tg.gelu(x).T.contiguous().T, bias * 2

    runner = tg.GraphRunner(fn, randn(4, 3, device=device), sizes=(2, 4), fallback="eager")
    for rows in (3, 4, 6):
        x = randn(rows, 3, device=device)
        out = tuple(torch.full_like(t, float("nan")) for t in fn(x))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="an output of shape")
            assert runner(x, out=out) is out
        expected = gelu_ref(x.double())
        assert_close(out[0], expected, torch.float32)
        assert_close(out[1], expected, torch.float32)
        assert torch.equal(out[2], bias * 2)
    assert runner.eager_calls == 1


@pytest.mark.parametrize("out, error, match", [
    (lambda d: randn(3, D, device=d), ValueError, r"out has shape \(3, 48\)"),
    (lambda d: randn(2, D, device=d).double(), ValueError, "dtype torch.float64"),
    (lambda d: (randn(2, D, device=d),), ValueError, "out must have the structure"),
    (lambda d: [1.0], ValueError, "out must have the structure"),
])
def test_out_validation(out, error, match, layer, device):
    runner = tg.GraphRunner(layer[0], randn(2, D, device=device), sizes=(2,))
    with pytest.raises(error, match=match):
        runner(randn(2, D, device=device), out=out(device))
    y = runner(randn(2, D, device=device))
    with pytest.raises(ValueError, match="overlaps the runner's static output"):
        runner(randn(1, D, device=device), out=y.flatten()[1:D + 1].view(1, D))
    assert runner(randn(2, D, device=device), out=y) is y  # the static output itself


def test_calls_reuse_the_views_prepared_for_their_row_count(layer, device):
    fn, ref = layer
    runner = tg.GraphRunner(fn, randn(2, D, device=device), sizes=(2, 4))
    x1, x2, x3 = (randn(rows, D, device=device) for rows in (3, 3, 2))
    y1 = runner(x1)
    assert_close(y1, ref(x1), torch.float32)
    assert runner(x2) is y1                     # the same static view, now x2's result
    assert_close(y1, ref(x2), torch.float32)
    y3 = runner(x3)
    assert y3 is not y1 and y3.shape == (2, D)
    assert_close(y3, ref(x3), torch.float32)


def test_stale_output_raises(layer, device):
    fn, ref = layer
    runner = tg.GraphRunner(fn, randn(2, D, device=device), sizes=(2, 4), check_stale=True)
    x = randn(2, D, device=device)
    y = runner(x)
    assert_close(y, ref(x), torch.float32)      # fresh: readable
    other_size = runner(randn(3, D, device=device))  # size 4's graph: y is untouched
    assert_close(y, ref(x), torch.float32)
    runner(randn(1, D, device=device))          # size 2 again: y is overwritten
    with pytest.raises(tg.StaleOutputError, match="overwritten by replay 2"):
        y.sum()
    assert other_size.shape == (3, D)


def test_fallback_modes(layer, device):
    fn, ref = layer
    strict = tg.GraphRunner(fn, randn(2, D, device=device), sizes=(1, 2))
    with pytest.raises(ValueError, match=r"3 rows along dim 0: the runner has graphs for \[1, 2\]"):
        strict(randn(3, D, device=device))
    with pytest.raises(ValueError, match="0 rows"):
        strict(randn(0, D, device=device))
    eager = tg.GraphRunner(fn, randn(2, D, device=device), sizes=(1, 2), fallback="eager")
    x = randn(3, D, device=device)
    assert_close(eager(x), ref(x), torch.float32)
    assert eager.eager_calls == 1


@pytest.mark.parametrize("fn", [lambda x: tg.softmax(x, dim=0),
                                lambda x: x - x.mean(dim=0),          # batch statistics
                                lambda x: tg.gelu(x.sum(dim=0, keepdim=True) + x)])
def test_functions_mixing_rows_are_refused(fn, device):
    with pytest.raises(ValueError, match="fn mixes rows along dim 0"):
        tg.GraphRunner(fn, randn(4, 8, device=device), sizes=(2, 4))


def test_other_batch_dim(device):
    runner = tg.GraphRunner(lambda x: tg.gelu(x), randn(4, 3, device=device), sizes=(2, 4),
                            dim=1)
    x = randn(4, 2, device=device)
    assert_close(runner(x), gelu_ref(x.double()), torch.float32)
    out = torch.full((4, 2), float("nan"), device=device)
    assert runner(x, out=out) is out
    assert_close(out, gelu_ref(x.double()), torch.float32)


@pytest.mark.parametrize("call, error, match", [
    (lambda r, d: r(randn(2, D, device=d).double()), TypeError,
     "input 0 has dtype torch.float64, the runner was built for torch.float32"),
    (lambda r, d: r(randn(2, D + 1, device=d)), ValueError,
     r"input 0 has shape \(2, 49\), expected \(N, 48\) with N along dim 0"),
    (lambda r, d: r(randn(2, D, device=d), randn(2, D, device=d)), ValueError,
     "expected 1 input"),
    (lambda r, d: r([1.0] * D), TypeError, "input 0 must be a torch.Tensor"),
])
def test_call_validation(call, error, match, layer, device):
    runner = tg.GraphRunner(layer[0], randn(2, D, device=device), sizes=(1, 2))
    runner(randn(2, D, device=device))  # a good call first: its prepared call is no shortcut
    with pytest.raises(error, match=match):
        call(runner, device)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(sizes=()), ValueError, "sizes must be positive integers"),
    (dict(sizes=(0, 2)), ValueError, "sizes must be positive integers"),
    (dict(fallback="pad"), ValueError, "fallback must be 'error' or 'eager'"),
    (dict(dim=2), ValueError, "dim=2 is out of range"),
    (dict(clone_outputs=True, check_stale=True), ValueError, "clone_outputs=True already"),
])
def test_construction_validation(kwargs, error, match, device):
    with pytest.raises(error, match=match):
        tg.GraphRunner(lambda x: x + 1, randn(2, 3, device=device), **kwargs)
    with pytest.raises(TypeError, match="example_inputs must be a tensor"):
        tg.GraphRunner(lambda x: x, [1, 2])


def test_stats_report_every_size(layer, device):
    runner = tg.GraphRunner(layer[0], randn(1, D, device=device), sizes=(4, 1, 2))
    runner(randn(1, D, device=device))
    stats = runner.stats()
    assert list(stats) == [1, 2, 4]
    assert stats[1]["replays"] == 1 and stats[4]["replays"] == 0
    assert all(s["capture_seconds"] > 0 and s["memory_bytes"] >= 0 for s in stats.values())


@pytest.mark.parametrize("tunes_at", [None, 2])
def test_sizes_are_captured_again_after_a_warm_up_that_tuned(tunes_at, layer, device,
                                                             monkeypatch):
    """Graphs captured before a tuner's search replay slower (notes/graphs.md): when a
    size's warm-up searches (a kernel's first call at that row count), every size is
    captured again, after it; with no search, once. Here the first call at `tunes_at` rows
    counts a search."""
    searches, captured = [runner_module.searches_run()], []   # earlier tests' counted
    monkeypatch.setattr(runner_module, "searches_run", lambda: searches[0])

    def counted(real_capture):  # plain captures, and (on a GPU) those with copy nodes
        def counted_capture(fn, *views, **kwargs):
            captured.append(views[0].shape[0])
            return real_capture(fn, *views, **kwargs)
        return counted_capture
    for name in ("capture", "capture_keeping_nodes"):
        monkeypatch.setattr(runner_module, name, counted(getattr(runner_module, name)))

    tuned = []

    def step(x):
        if x.shape[0] == tunes_at and not tuned:
            tuned.append(x.shape[0])
            searches[0] += 1
        return layer[0](x)
    runner = tg.GraphRunner(step, randn(4, D, device=device), sizes=(1, 2, 4))
    assert captured == ([4, 2, 1] if tunes_at is None else [4, 2, 1, 4, 2, 1])
    x = randn(3, D, device=device)
    assert_close(runner(x), layer[1](x), torch.float32)


@pytest.mark.gpu
def test_gpu_runner_many_replays_all_sizes():
    w, g = randn(512, 512, device="cuda", scale=512**-0.5), randn(512, device="cuda")
    runner = tg.GraphRunner(lambda x: _layer(x, w, g), randn(8, 512, device="cuda"),
                            sizes=(1, 2, 4, 8), clone_outputs=True)
    for i in range(100):
        x = randn(1 + i % 8, 512, device="cuda")
        assert_close(runner(x), _layer_ref(x, w, g), torch.float32)
    assert sum(s["replays"] for s in runner.stats().values()) == 100


@pytest.mark.gpu
def test_gpu_sizes_share_one_pool():
    w, g = randn(1024, 1024, device="cuda", scale=1 / 32), randn(1024, device="cuda")

    def two_layers(x):
        return _layer(_layer(x, w, g), w, g)

    example = randn(64, 1024, device="cuda")
    alone = tg.GraphRunner(two_layers, example, sizes=(64,))
    many = tg.GraphRunner(two_layers, example, sizes=(1, 2, 4, 8, 16, 24, 32, 64))
    total = sum(s["memory_bytes"] for s in many.stats().values())
    assert alone.stats()[64]["memory_bytes"] > 0
    assert total <= 1.3 * alone.stats()[64]["memory_bytes"]


@pytest.mark.gpu
def test_gpu_graphs_copy_each_calls_inputs_themselves():
    """On a GPU each graph's first nodes copy the inputs, pointed at every call's tensors:
    fresh inputs of every row count, a view past its storage's start, the runner's own
    output fed back, and a non-contiguous input (copied before the replay instead, the
    nodes off), each equal to the reference; contiguous inputs after it use the nodes
    again."""
    w, g = randn(256, 256, device="cuda", scale=1 / 16), randn(256, device="cuda")
    runner = tg.GraphRunner(lambda x: _layer(x, w, g), randn(8, 256, device="cuda"),
                            sizes=(2, 8))
    assert all(s["copies_in_graph"] for s in runner.stats().values())
    for rows in (1, 2, 3, 8, 5, 2):
        x = randn(rows, 256, device="cuda")
        assert_close(runner(x), _layer_ref(x, w, g), torch.float32)
    x = randn(20, 256, device="cuda")[7:10]
    y = runner(x)
    assert_close(y, _layer_ref(x, w, g), torch.float32)
    expected = _layer_ref(y.clone(), w, g)
    assert_close(runner(y), expected, torch.float32)  # y is the graph's own output
    strided = randn(256, 3, device="cuda").T
    assert_close(runner(strided), _layer_ref(strided, w, g), torch.float32)
    for rows in (3, 1):
        x = randn(rows, 256, device="cuda")
        assert_close(runner(x), _layer_ref(x, w, g), torch.float32)


@pytest.mark.gpu
def test_gpu_graphs_copy_outputs_out_themselves():
    """On a GPU the copies out are graph nodes too: fresh out tensors every call
    (poisoned), padded and whole sizes in turn (the padded rows zeroed), a non-contiguous
    out (copied after the replay), clone_outputs, and plain calls between them, which copy
    nothing out (the last out keeps its values)."""
    w, g = randn(256, 256, device="cuda", scale=1 / 16), randn(256, device="cuda")
    runner = tg.GraphRunner(lambda x: _layer(x, w, g), randn(8, 256, device="cuda"),
                            sizes=(2, 8))
    big = randn(8, 256, device="cuda") * 1000
    for rows in (5, 8, 1, 2, 7, 3):
        runner(big)  # every static row large: a padded row left unzeroed would show
        x = randn(rows, 256, device="cuda")
        out = torch.full((rows, 256), float("nan"), device="cuda")
        assert runner(x, out=out) is out
        assert_close(out, _layer_ref(x, w, g), torch.float32)
        padded = runner._buffers[0][rows:2 if rows <= 2 else 8]
        assert torch.equal(padded, torch.zeros_like(padded))
        kept = out.clone()
        runner(randn(rows, 256, device="cuda"))
        assert torch.equal(out, kept)
    strided = torch.full((256, 3), float("nan"), device="cuda").T
    x = randn(3, 256, device="cuda")
    runner(x, out=strided)
    assert_close(strided, _layer_ref(x, w, g), torch.float32)
    cloning = tg.GraphRunner(lambda x: _layer(x, w, g), randn(8, 256, device="cuda"),
                             sizes=(2, 8), clone_outputs=True)
    xs = [randn(1 + i % 8, 256, device="cuda") for i in range(20)]
    ys = [cloning(x) for x in xs]
    for x, y in zip(xs, ys, strict=True):
        assert_close(y, _layer_ref(x, w, g), torch.float32)


def test_again_replays_a_step_that_feeds_itself(device):
    """A step writing its next input over its input loops through again() with no copies;
    again() before any call, or after one without a graph, is refused."""
    def step(x):
        x.add_(tg.gelu(x) * 0 + 1)  # writes its own input: the next step's
        return x

    runner = tg.GraphRunner(step, (torch.zeros(4, 3, device=device),), sizes=(2, 4),
                            fallback="eager")
    with pytest.raises(RuntimeError, match="call the runner first"):
        runner.again()
    out = runner(torch.full((3, 3), 5.0, device=device))
    for _ in range(3):
        runner.again()
    assert torch.equal(out, torch.full((3, 3), 9.0, device=device))
    runner(torch.zeros(5, 3, device=device))  # past the largest size: eager, no graph
    with pytest.raises(RuntimeError, match="call the runner first"):
        runner.again()


@pytest.mark.gpu
def test_gpu_soak_demo_runner_10000_replays():
    """The demo's runner (the seed stack's fused forward), 10,000 tokens of fresh inputs at
    every batch size: equal to eager PyTorch throughout, and no memory growth."""
    stack = LayerStack(PRESETS["seed"], device="cuda")
    d = stack.config.d
    runner = tg.GraphRunner(stack.fused_forward, stack.token_inputs(1, 8)[0], sizes=(1, 2, 4, 8))
    worst = torch.zeros((), device="cuda")

    def token(i):
        x = torch.randn(1 + i % 8, d, device="cuda")
        got, want = runner(x), stack(x)
        error = (got - want).abs().max() / want.abs().max()
        torch.maximum(worst, error, out=worst)  # no host sync per token

    for i in range(100):
        token(i)
    torch.cuda.synchronize()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    for i in range(100, 10_000):
        token(i)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.memory_reserved() == reserved
    assert worst.item() < 1e-5
    assert sum(s["replays"] for s in runner.stats().values()) == 10_000
