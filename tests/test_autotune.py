import json

import pytest
import torch
import triton

from tilegraph import CaptureError
from tilegraph._runtime import device_name
from tilegraph.kernels import autotune
from tilegraph.kernels.autotune import Tuner, cache_dir

CONFIGS = [{"BLOCK": 64, "num_warps": 4}, {"BLOCK": 128, "num_warps": 4}]


def test_cache_path_is_per_gpu_triton_and_kernel(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    path = Tuner("my_kernel", CONFIGS).path
    assert path.parent.parent.parent == tmp_path / "autotune"
    assert path.name == "my_kernel.json"
    assert path.parent.name == f"triton-{triton.__version__}"
    assert cache_dir() == tmp_path


def test_reads_results_saved_by_another_process(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    tuner = Tuner("k", CONFIGS)
    tuner.path.parent.mkdir(parents=True)
    tuner.path.write_text(json.dumps({repr((1, 2)): CONFIGS[1]}))

    def must_not_run(config):
        raise AssertionError("a cached key was tuned again")

    assert Tuner("k", CONFIGS).pick((1, 2), must_not_run) == CONFIGS[1]


def test_damaged_cache_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    tuner = Tuner("k", CONFIGS)
    tuner.path.parent.mkdir(parents=True)
    tuner.path.write_text("{not json")
    assert tuner.pick((3,), lambda config: None) in CONFIGS


def test_needs_configs():
    with pytest.raises(ValueError, match="no candidate configs"):
        Tuner("k", [])


@pytest.mark.gpu
def test_tunes_once_and_persists(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    x = torch.randn(1 << 20, device="cuda")
    calls = []

    def run(config):
        calls.append(config["BLOCK"])
        # a real launch so do_bench has work to time; bigger blocks are not slower here
        x.mul_(1.0)

    tuner = Tuner("persist", CONFIGS)
    best = tuner.pick(("n", 1 << 20), run)
    assert best in CONFIGS and set(calls) == {64, 128}
    timed = tuner.timings[repr(("n", 1 << 20))]
    assert [config for config, _ in timed] == CONFIGS and all(ms > 0 for _, ms in timed)
    saved = json.loads(Tuner("persist", CONFIGS).path.read_text())
    assert saved == {repr(("n", 1 << 20)): best}
    assert str(tmp_path) in str(Tuner("persist", CONFIGS).path)
    assert device_name().split()[0] in Tuner("persist", CONFIGS).path.parts[-3]
    calls.clear()
    assert Tuner("persist", CONFIGS).pick(("n", 1 << 20), run) == best
    assert calls == []


@pytest.mark.gpu
def test_tuning_during_capture_raises(monkeypatch):
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    tuner = Tuner("captured", CONFIGS)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(CaptureError, match="warm up"):  # noqa: SIM117
        with torch.cuda.graph(graph):
            tuner.pick(("new key",), lambda config: None)


def test_choices_report_every_tuners_picks(tmp_path, monkeypatch):
    from tilegraph.kernels.autotune import choices

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    tuner = Tuner("reported_kernel", CONFIGS)
    assert "reported_kernel" not in choices()  # nothing picked yet
    tuner.path.parent.mkdir(parents=True)
    tuner.path.write_text(json.dumps({repr((5, 6)): CONFIGS[1]}))  # tuned by another process
    assert tuner.pick((5, 6), lambda config: None) == CONFIGS[1]
    assert choices()["reported_kernel"] == {repr((5, 6)): CONFIGS[1]}


@pytest.mark.gpu
def test_graph_timing_gives_kernels_their_per_stream_scratch():
    """The tuner captures on a stream where the candidate has already run outside capture,
    so a split-K candidate finds its workspace and is timed split, as it will run."""
    from tilegraph.kernels._split_workspace import split_workspace
    found, x = [], torch.zeros(8, device="cuda")

    def candidate():
        found.append(split_workspace(x.device, 1 << 20, 64) is not None)
        x.add_(1)
    assert autotune._graph_replay_ms(candidate, rep_ms=0.05) > 0
    assert len(found) >= 3 and all(found)


def test_search_times_only_contenders_again(monkeypatch):
    """One short round for every candidate, two longer ones only for those within
    CONTENDER_MARGIN of the fastest; the lowest median of three wins, even over a faster
    first round."""
    rounds = {"a": [1.0, 1.3, 1.3], "b": [1.2, 1.0, 1.0], "slow": [2.0], "edge": [1.25, 1.3, 1.3]}
    timed = {name: 0 for name in rounds}
    lengths = []

    def fake_time(run, config, rep_ms, replays=10):
        name = config["name"]
        timed[name] += 1
        lengths.append((rep_ms, replays))
        return rounds[name][timed[name] - 1]

    monkeypatch.setattr(Tuner, "_compiles", staticmethod(lambda run, config: True))
    monkeypatch.setattr(Tuner, "_time", staticmethod(fake_time))
    configs = [{"name": name} for name in rounds]
    tuner = Tuner("search", configs)
    assert tuner._search(("k",), lambda config: None, configs) == {"name": "b"}
    assert timed == {"a": 3, "b": 3, "slow": 1, "edge": 3}
    first = (autotune.FIRST_ROUND_MS, autotune.FIRST_ROUND_REPLAYS)
    assert lengths == [first] * 4 + [(10, 10)] * 6
    assert dict((c["name"], ms) for c, ms in tuner.timings[repr(("k",))]) == {
        "a": 1.3, "b": 1.0, "slow": 2.0, "edge": 1.3}


def test_candidates_compile_side_by_side_before_the_search(monkeypatch):
    """A pick given compile_only hands every candidate to it inside one AsyncCompileMode over
    a thread pool, before the search runs any; a compile that raises leaves the search to
    run and report as before; one candidate, or none of Triton's async compiling, compiles
    nothing ahead."""
    events = []

    class Mode:  # stands for Triton's AsyncCompileMode: records what ran inside it
        def __init__(self, pool):
            assert pool is not None

        def __enter__(self):
            events.append("enter")

        def __exit__(self, *exc):
            events.append("exit")

    monkeypatch.setattr(autotune, "INTERPRET", False)
    monkeypatch.setattr(autotune, "AsyncCompileMode", Mode)
    monkeypatch.setattr(autotune, "timing_enabled", lambda: True)
    monkeypatch.setattr(Tuner, "_search", lambda self, key, run, candidates:
                        events.append("search") or candidates[-1])
    monkeypatch.setattr(Tuner, "_save_disk", lambda self: None)
    tuner = Tuner("side-by-side", CONFIGS)
    monkeypatch.setattr(tuner, "_disk_loaded", True)

    def compile_only(config):
        events.append(config["BLOCK"])
        if config["BLOCK"] == 64:
            raise RuntimeError("a compile error, reported by the search's own run")
    assert tuner.pick(("k", 1), lambda config: None, CONFIGS, compile_only=compile_only) \
        == CONFIGS[1]
    assert events == ["enter", 64, "exit", "search"]   # the error ended the compiles early
    events.clear()
    assert tuner.pick(("k", 2), lambda config: None, CONFIGS,
                      compile_only=lambda config: events.append(config["BLOCK"])) == CONFIGS[1]
    assert events == ["enter", 64, 128, "exit", "search"]
    events.clear()
    tuner.pick(("k", 3), lambda config: None, CONFIGS[:1],
               compile_only=lambda config: events.append(config["BLOCK"]))
    monkeypatch.setattr(autotune, "AsyncCompileMode", None)
    tuner.pick(("k", 4), lambda config: None, CONFIGS,
               compile_only=lambda config: events.append(config["BLOCK"]))
    assert events == ["search", "search"]
