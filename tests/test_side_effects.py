"""State a captured function keeps outside its inputs and outputs: warm-up advances it, and
tg.capture / tg.GraphRunner say so (SideEffectWarning) or put it back (restore_state=True)."""

import functools
import warnings

import pytest
import torch
from torch import nn

import tilegraph as tg


class Cache:
    """A cache that appends at its own counter, as Hugging Face's StaticCache does."""

    def __init__(self, device, rows=16, width=8):
        self.length = torch.zeros((), dtype=torch.int64, device=device)
        self.values = torch.randn(rows, width, device=device)

    def append(self, x):
        self.values.index_copy_(0, self.length.reshape(1), x.sum(0, keepdim=True))
        self.length += 1


def _capture(*args, **kwargs):
    """tg.capture, with the warnings it gave (the CPU-replay notice left out)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = tg.capture(*args, **kwargs)
    return graph, [w for w in caught if issubclass(w.category, tg.SideEffectWarning)]


def test_state_advanced_by_warm_up_is_reported(device):
    cache = Cache(device)
    running = torch.zeros(8, device=device)

    def step(x):
        cache.append(x)
        running.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return x * 2

    _, reported = _capture(step, torch.randn(3, 8, device=device), warmup=2)
    assert len(reported) == 1
    message = str(reported[0].message)
    assert "tg.capture(step)" in message and "restore_state=True" in message
    assert "Cache.length (() int64" in message and "Cache.values ((16, 8) float32" in message
    assert "a tensor ((8,) float32" in message or "running ((8,) float32" in message
    assert reported[0].filename == __file__  # the user's line, not tilegraph's
    assert cache.length.item() == 2  # reported, not undone


def test_restore_state_puts_back_what_warm_up_wrote(device):
    cache = Cache(device)
    running = torch.randn(8, device=device)
    before = (cache.values.clone(), running.clone())

    def step(x):
        cache.append(x)
        running.mul_(0.9).add_(x.mean(0), alpha=0.1)
        return x * 2

    x = torch.randn(3, 8, device=device)
    graph, reported = _capture(step, x, warmup=3, restore_state=True)
    assert not reported
    assert cache.length.item() == 0
    torch.testing.assert_close(cache.values, before[0], rtol=0, atol=0)
    torch.testing.assert_close(running, before[1], rtol=0, atol=0)
    for _ in range(2):  # the graph still advances the state on every replay, from there
        graph.replay()
    assert cache.length.item() == 2
    torch.testing.assert_close(cache.values[1], x.sum(0))
    expected = before[1]
    for _ in range(2):
        expected = expected * 0.9 + x.mean(0) * 0.1
    torch.testing.assert_close(running, expected)


def test_a_tilegraph_kernel_accumulating_into_its_out_is_state(device):
    total = torch.randn(4, 8, device=device)
    before = total.clone()

    def accumulate(x):
        tg.add(total, x, out=total)
        return None

    x = torch.randn(4, 8, device=device)
    _, reported = _capture(accumulate, x)
    assert len(reported) == 1 and "((4, 8) float32" in str(reported[0].message)
    total.copy_(before)
    _, reported = _capture(accumulate, x, restore_state=True)
    assert not reported
    torch.testing.assert_close(total, before, rtol=0, atol=0)


def test_buffers_written_the_same_way_every_call_are_not_state(device):
    """Outputs written into static buffers, a cache written at positions the inputs give,
    an input updated in place: the same values after every warm-up call."""
    out = torch.empty(3, 8, device=device)
    cache = torch.zeros(16, 8, device=device)

    def step(x, position):
        tg.gelu(x, out=out)
        cache.index_copy_(0, position, x[:1])
        x.mul_(1.0)
        return out

    _, reported = _capture(step, torch.randn(3, 8, device=device),
                           torch.tensor([5], device=device))
    assert not reported


def test_restore_state_false_is_silent_and_leaves_state(device):
    cache = Cache(device)
    _, reported = _capture(lambda x: cache.append(x), torch.randn(2, 8, device=device),
                           warmup=2, restore_state=False)
    assert not reported and cache.length.item() == 2


def test_restore_state_is_checked(device):
    with pytest.raises(TypeError, match="restore_state must be True, False or None"):
        tg.capture(lambda x: x * 2, torch.ones(2, device=device), restore_state="yes")


def test_a_failed_capture_restores_and_says_nothing_more(device):
    counter = torch.zeros((), device=device)
    calls = []

    def step(x):
        counter.add_(1)
        calls.append(1)
        if len(calls) > 1:  # the second warm-up call fails
            raise RuntimeError("boom")
        return x * 2

    with pytest.raises(RuntimeError, match="boom"):
        _capture(step, torch.ones(2, device=device), restore_state=True)
    assert counter.item() == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="writes memory through numpy: CPU only")
def test_writes_pytorch_cannot_see_are_reported_as_not_restored():
    counter = torch.zeros(1)

    def step(x):
        counter.numpy()[0] += 1  # no PyTorch op: nothing to snapshot before it
        return x * 2

    _, reported = _capture(step, torch.ones(2), restore_state=True)
    assert len(reported) == 1
    assert "written another way" in str(reported[0].message)


def test_runner_watches_all_its_calls(device):
    """The row check's two calls and each size's warm-up: one report, or all undone."""
    cache = Cache(device)

    def step(x):
        cache.append(x[:1])
        return x * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tg.GraphRunner(step, torch.randn(4, 8, device=device), sizes=(2, 4))
    reported = [w for w in caught if issubclass(w.category, tg.SideEffectWarning)]
    assert len(reported) == 1 and "tg.GraphRunner(step)" in str(reported[0].message)
    assert cache.length.item() == 6  # 2 row-check calls + 2 warm-up calls per size

    cache = Cache(device)
    before = cache.values.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner = tg.GraphRunner(step, torch.randn(4, 8, device=device), sizes=(2, 4),
                                restore_state=True)
    assert not [w for w in caught if issubclass(w.category, tg.SideEffectWarning)]
    assert cache.length.item() == 0
    torch.testing.assert_close(cache.values, before, rtol=0, atol=0)
    runner(torch.randn(3, 8, device=device))
    assert cache.length.item() == 1


def test_a_partial_is_named_by_its_function_without_formatting_its_arguments(device):
    """A partial's str formats its arguments (a decode step's KV cache: its tensors copied to
    the host to be printed, at every capture): messages name the function it wraps."""
    cache = Cache(device)

    class Unprintable:
        def __repr__(self):
            raise AssertionError("an argument of the partial was formatted")

    def step(x, unused):
        cache.append(x[:1])
        return x * 2

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tg.GraphRunner(functools.partial(step, unused=Unprintable()),
                       torch.randn(4, 8, device=device), sizes=(2, 4))
    reported = [w for w in caught if issubclass(w.category, tg.SideEffectWarning)]
    assert len(reported) == 1 and "tg.GraphRunner(step)" in str(reported[0].message)


def test_train_step_restores_running_statistics(device):
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)).to(device)
    model[1].running_mean.normal_()
    before = [b.clone() for b in model.buffers()]
    capturable = {"capturable": True} if device == "cuda" else {}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, **capturable)
    batch = (torch.randn(16, 8, device=device), torch.randn(16, 1, device=device))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        step = tg.TrainStep(model, optimizer, nn.functional.mse_loss, batch)
    assert not [w for w in caught if issubclass(w.category, tg.SideEffectWarning)]
    for buffer, old in zip(model.buffers(), before, strict=True):
        torch.testing.assert_close(buffer, old, rtol=0, atol=0)
    step(*batch)
    assert not torch.equal(model[1].running_mean, before[0])


@pytest.mark.gpu
def test_split_k_scratch_is_not_called_state(monkeypatch):
    """A split-K product leaves new partial sums in its workspace at every launch on new
    values; that is scratch, not state the function advances: only the real state is named."""
    import tilegraph.kernels.matmul as matmul_module
    config = {**matmul_module._config(64, 64, 32, 4, 4), "SPLIT_TF32": True, "SPLIT_K": 2}
    monkeypatch.setattr(matmul_module._tuner, "pick", lambda key, run, candidates=None, **_: config)
    a, b = torch.randn(64, 256, device="cuda"), torch.randn(256, 64, device="cuda")
    scale = torch.ones(3, device="cuda")

    def step(a):
        scale.add_(1.0)   # advanced at every call: reported
        return tg.matmul(a * scale[0], b)

    _, caught = _capture(step, a)
    assert len(caught) == 1
    assert str(caught[0].message).count(" on cuda") == 1 and "(3,)" in str(caught[0].message)
