"""tilegraph.bench: measure, compare, report, profile; ceilings and the CUDA C++ GELU (GPU)."""

import csv
import json
import math
import time

import pytest
import torch

import tilegraph as tg
from tilegraph import bench
from tilegraph.bench import environment, report, timing
from tilegraph.cuda import ExtensionUnavailable, gelu_extension, missing_build_tools
from tilegraph.kernels.gelu import gelu_ref
from tilegraph.testing import assert_close


def test_measure_cpu_sleep_statistics():
    stats = bench.measure(lambda: time.sleep(0.002), warmup_ms=5, rep_ms=40)
    if torch.cuda.is_available():
        pytest.skip("on a GPU measure() times with CUDA events, not the host clock")
    assert stats.clock == "monotonic-cpu"
    assert stats.n >= 5
    assert 2.0 <= stats.min <= stats.p20 <= stats.median <= stats.p80 <= stats.max
    assert stats.median < 2.0 * 3  # a 2 ms sleep, with room for a loaded machine


def test_measure_scales_with_work(device):
    # on a GPU measure() times the GPU's work (CUDA events): the tensors live there
    x = torch.randn(256, 256, device=device)
    small = bench.measure(lambda: x @ x, warmup_ms=5, rep_ms=30).median
    large_x = torch.randn(1024, 1024, device=device)
    large = bench.measure(lambda: large_x @ large_x, warmup_ms=5, rep_ms=30).median
    assert large > small  # 64x the flops cannot be faster


class _Counting:
    """A variant that counts its calls."""
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *args):
        self.calls += 1
        return self.fn(*args)


def test_compare_fails_wrong_variant_and_does_not_time_it():
    x = torch.randn(1000, dtype=torch.float32)
    right = _Counting(lambda x: x * 2)
    wrong = _Counting(lambda x: x * 2 + 1e-3)
    result = bench.compare({"right": right, "wrong": wrong}, reference=lambda x: x.double() * 2,
                           args=(x,), bytes=8000, warmup_ms=1, rep_ms=5)
    assert result["right"].status == "ok"
    assert result["wrong"].status == "FAIL"
    assert "tolerance" in result["wrong"].reason
    assert wrong.calls == 1  # checked once, never timed
    assert right.calls > 5
    assert result["wrong"].stats is None and result["wrong"].gbps is None
    assert [r.name for r in result.failed] == ["wrong"]


def test_compare_reports_errors_skips_and_speedups():
    x = torch.randn(64, 64)

    def broken(x):
        raise RuntimeError("boom")

    result = bench.compare(
        {"slow": lambda x: (x @ x) + 0 * (x @ x) @ x, "fast": lambda x: x @ x,
         "broken": broken, "absent": bench.Unavailable("no nvcc here")},
        reference=lambda x: x.double() @ x.double(), args=(x,), baseline="slow",
        flops=2 * 64**3, bytes=3 * x.numel() * 4, warmup_ms=1, rep_ms=10,
        ceilings={"copy_gbps": 100.0, "matmul_tflops_float32": 1.0})
    assert result["broken"].status == "error" and "boom" in result["broken"].reason
    assert result["absent"].status == "skipped" and result["absent"].reason == "no nvcc here"
    assert result["slow"].speedup == pytest.approx(1.0)
    fast = result["fast"]
    assert fast.speedup == pytest.approx(result["slow"].stats.median / fast.stats.median)
    assert fast.tflops == pytest.approx(2 * 64**3 / (fast.stats.median * 1e-3) * 1e-12)
    # The floor is the larger of bytes / bandwidth and flops / rate.
    floor_ms = max(3 * 64 * 64 * 4 / 100e9, 2 * 64**3 / 1e12) * 1e3
    assert fast.pct_ceiling == pytest.approx(100 * floor_ms / fast.stats.median)
    assert "| fast |" in str(result)


def test_compare_times_yardsticks_without_checking_them():
    x = torch.randn(1000)
    copy = _Counting(lambda x: x.clone())  # not the computation: would FAIL as a variant
    result = bench.compare({"double": lambda x: x * 2}, reference=lambda x: x.double() * 2,
                           args=(x,), bytes=8000, warmup_ms=1, rep_ms=5, ceilings={},
                           yardsticks={"copy": copy})
    assert [r.name for r in result.results] == ["double", "copy"]
    yardstick = result["copy"]
    assert yardstick.status == "yardstick" and yardstick.rel_error is None
    assert copy.calls > 5 and yardstick.gbps == pytest.approx(
        8000 / (yardstick.stats.median * 1e-3) * 1e-9)
    assert yardstick.speedup == pytest.approx(
        result["double"].stats.median / yardstick.stats.median)
    assert not result.failed
    with pytest.raises(ValueError, match="also variant names"):
        bench.compare({"a": lambda x: x}, reference=lambda x: x, args=(x,),
                      yardsticks={"a": lambda x: x})


def test_compare_times_variants_in_interleaved_rounds():
    """Each variant is checked once, then timed in `rounds` rounds taken in turn, so a
    passing slowdown falls on every variant alike; the rounds' medians give the median."""
    x = torch.randn(1000)
    log = []

    def logged(name):
        return lambda x: (log.append(name), x * 2)[1]

    result = bench.compare({"a": logged("a"), "b": logged("b")},
                           reference=lambda x: x.double() * 2, args=(x,), warmup_ms=1,
                           rep_ms=6, rounds=3, ceilings={})
    turns = [name for i, name in enumerate(log) if i == 0 or log[i - 1] != name]
    assert turns == ["a", "b"] + ["a", "b"] * 3   # checked, then three rounds in turn
    assert result["a"].stats.n >= 3 * 5 and result["b"].stats.n >= 3 * 5
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        bench.compare({"a": logged("a")}, reference=lambda x: x.double() * 2, args=(x,),
                      rounds=0, ceilings={})


def test_merged_rounds_take_the_median_of_medians_and_every_sample():
    rounds = [bench.Stats(median=m, p20=m - 1, p80=m + 1, min=m - 2, max=m + 2, n=10,
                          clock="cuda-graph-replay") for m in (5.0, 3.0, 9.0)]
    stats = timing.merged(rounds)
    assert (stats.median, stats.p20, stats.p80, stats.min, stats.max, stats.n) == \
        (5.0, 4.0, 6.0, 1.0, 11.0, 30)
    assert stats.clock == "cuda-graph-replay"


def test_compare_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one variant"):
        bench.compare({}, reference=lambda: torch.ones(1))
    with pytest.raises(ValueError, match="baseline 'nope'"):
        bench.compare({"a": lambda: torch.ones(1)}, reference=lambda: torch.ones(1),
                      baseline="nope")


def test_compare_shape_mismatch_is_an_error_not_a_pass():
    result = bench.compare({"short": lambda: torch.ones(3)}, reference=lambda: torch.ones(4),
                           ceilings={})
    assert result["short"].status == "error" and "shape" in result["short"].reason


ROWS = [{"kernel": "gelu", "size": 1024, "variant": "a", "gbps": 10.0, "status": "ok"},
        {"kernel": "gelu", "size": 4096, "variant": "a", "gbps": 30.0, "status": "ok"},
        {"kernel": "gelu", "size": 1024, "variant": "b", "gbps": None, "status": "FAIL",
         "reason": "relative error | large"}]


def test_report_files_parse_back(tmp_path):
    paths = report.save(ROWS, tmp_path, "r", title="t", ceilings={"copy_gbps": 1.0})
    assert sorted(p.suffix for p in paths) == [".csv", ".json", ".md"]
    document = report.read_json(tmp_path / "r.json")
    assert document["results"] == ROWS
    for key in ("device", "torch", "triton", "tilegraph", "git", "date", "command"):
        assert document["environment"][key]
    assert document["ceilings"] == {"copy_gbps": 1.0}
    with (tmp_path / "r.csv").open() as f:
        parsed = list(csv.DictReader(f))
    assert [row["variant"] for row in parsed] == ["a", "a", "b"]
    assert float(parsed[1]["gbps"]) == 30.0
    markdown = (tmp_path / "r.md").read_text().splitlines()
    table = [line for line in markdown if line.startswith("|")]
    assert len(table) == 2 + len(ROWS)
    cells = [line.replace("\\|", "").count("|") for line in table]
    assert cells == [cells[0]] * len(table)  # a | inside a cell is escaped


def test_results_name_the_switches_they_ran_with(tmp_path, monkeypatch):
    """A result made with TILEGRAPH_* variables set (PDL off, the norm handoff off, ...) says
    so in the command it records, as a shell would take it."""
    monkeypatch.setenv("TILEGRAPH_NORM_HANDOFF", "0")
    monkeypatch.setenv("TILEGRAPH_PDL", "0")
    report.save(ROWS, tmp_path, "r")
    command = report.read_json(tmp_path / "r.json")["environment"]["command"]
    settings = command.split()[:len(environment.switches())]
    assert "TILEGRAPH_NORM_HANDOFF=0" in settings and "TILEGRAPH_PDL=0" in settings
    assert "TILEGRAPH_NORM_HANDOFF=0 " in (tmp_path / "r.md").read_text()


def test_report_plot_writes_png(tmp_path):
    path = report.plot(ROWS, tmp_path / "p.png", title="gelu")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.plot(ROWS, tmp_path / "none.png", y="tflops") is None  # nothing to plot
    with pytest.raises(ValueError, match="unknown report format"):
        report.save(ROWS, tmp_path, "r", formats=("xml",))


def test_profile_table_and_trace(tmp_path):
    x = torch.randn(300, 300)
    result = bench.profile(lambda: torch.mm(x, x), trace=tmp_path / "trace.json", warmup=1,
                           steps=2)
    assert "aten::mm" in result.table
    events = json.loads(result.trace.read_text())["traceEvents"]
    assert any(e.get("name") == "step 1" for e in events)
    with pytest.raises(ValueError, match="steps"):
        bench.profile(lambda: None, steps=0)


def test_nvtx_range_shows_in_profile():
    def step():
        with bench.nvtx("my range"):
            torch.ones(3) + 1
    assert "my range" in bench.profile(step, warmup=0, steps=1).table


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_extension_says_why_it_cannot_build():
    assert missing_build_tools() == "no CUDA device"
    with pytest.raises(ExtensionUnavailable, match="no CUDA device"):
        gelu_extension()


@pytest.mark.gpu
def test_ceilings_are_plausible(tmp_path, monkeypatch):
    c = bench.ceilings(refresh=True)
    assert 300 < c["copy_gbps"] < 20_000
    assert 20 < c["matmul_tflops_bfloat16"] < 5_000
    assert 1 < c["matmul_tflops_float32"] < 500
    assert bench.ceilings() == c  # served from the cache


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 4099, 1 << 20])
def test_cuda_cpp_gelu_builds_and_matches(n, dtype):
    # Unit scale: GELU of x < -4.4 is subnormal in fp16, where a lone element's relative
    # error measures the format, not the kernel.
    x = torch.randn(n, device="cuda", dtype=dtype)
    y = gelu_extension().gelu_tanh_cuda(x)
    assert_close(y, gelu_ref(x.double()), dtype)
    unaligned = torch.randn(n + 1, device="cuda", dtype=dtype)[1:]  # scalar path
    assert_close(gelu_extension().gelu_tanh_cuda(unaligned),
                 gelu_ref(unaligned.double()), dtype)


@pytest.mark.gpu
def test_profile_on_gpu_lists_the_triton_kernel(tmp_path):
    x = torch.randn(4096, 781, device="cuda")
    out = torch.empty_like(x)
    result = bench.profile(lambda: tg.softmax(x, out=out), trace=tmp_path / "t.json")
    assert result.sort_by == "device_time_total"
    assert "_softmax_kernel" in result.table
    assert result.trace.stat().st_size > 0


@pytest.mark.gpu
def test_measure_graph_mode_is_per_call():
    x = torch.randn(1 << 20, device="cuda")
    one = bench.measure(lambda: x.mul_(1.0), graph=True)
    two = bench.measure(lambda: (x.mul_(1.0), x.mul_(1.0)), graph=True)
    assert one.clock == "cuda-graph-replay"
    assert 1.3 < two.median / one.median < 3.0
    assert not math.isnan(one.median)


@pytest.mark.gpu
def test_rotation_copies_only_the_named_arguments():
    from tilegraph.bench.compare import _rotated_args

    weight = torch.randn(1024, 1024, device="cuda")  # 4 MB: a few dozen copies span 3x L2
    x = torch.randn(1024, device="cuda")
    sets = _rotated_args((x, weight, "tag"), rotate=(1,))
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert len(sets) * weight.numel() * 4 >= 3 * l2
    assert all(s[0] is x and s[2] == "tag" for s in sets)           # shared, not copied
    assert len({s[1].data_ptr() for s in sets}) == len(sets)         # every weight its own
    assert all(torch.equal(s[1], weight) for s in sets[:3])
    everything = _rotated_args((x, weight))
    assert len({s[0].data_ptr() for s in everything}) == len(everything)


@pytest.mark.gpu
def test_host_time_before_the_launch_is_not_counted():
    """A call that spends 2 ms in Python before a microsecond kernel is timed as the kernel,
    not as the host's time to issue it."""
    x = torch.randn(1024, device="cuda")

    def slow_to_issue():
        time.sleep(0.002)
        x.add_(1.0)

    assert bench.measure(slow_to_issue, rep_ms=20).median < 0.5


def test_decode_grid_counts_the_floor_targets_it_misses():
    """Issue 17's bandwidth targets: 16-bit weights of 8 MiB or more, 85% of copy at 1-2
    rows, 70% at 8-16; a point timed nowhere counts as missed."""
    from tilegraph.bench import grid

    square = 2048 * 2048 * 2
    assert grid.floor_target(square, 1, torch.bfloat16) == 85
    assert grid.floor_target(square, 16, torch.float16) == 70
    assert grid.floor_target(square, 4, torch.bfloat16) is None      # a row count not named
    assert grid.floor_target(square, 12, torch.bfloat16) == 70       # inside "8-16 rows"
    assert grid.floor_target(square, 17, torch.bfloat16) is None
    assert grid.floor_target(256 * 2048 * 2, 1, torch.bfloat16) is None  # 1 MiB
    assert grid.floor_target(4096 * 4096 * 4, 1, torch.float32) is None
    results = [{"dtype": "bfloat16", "floor_target_pct": 85, "tilegraph_pct_floor": 77.3},
               {"dtype": "bfloat16", "floor_target_pct": 70, "tilegraph_pct_floor": 81.9},
               {"dtype": "bfloat16", "floor_target_pct": None, "tilegraph_pct_floor": 14.3},
               {"dtype": "bfloat16", "floor_target_pct": 85, "tilegraph_pct_floor": None}]
    row = grid.summary(results)[0]
    assert (row["points"], row["floor_targets"], row["floor_targets_missed"]) == (4, 3, 2)


def test_decode_grid_counts_the_slower_points_that_ran_cublas():
    """Of the points where tg.linear was slower than F.linear, those where it ran cuBLAS
    itself (its fallback) are counted apart; faster or untimed ones are not counted."""
    from tilegraph.bench import grid

    results = [{"dtype": "float16", "kernel": "cublas", "tilegraph_speedup": 0.997},
               {"dtype": "float16", "kernel": "cublas", "tilegraph_speedup": 1.002},
               {"dtype": "float16", "kernel": "gemv", "tilegraph_speedup": 0.95},
               {"dtype": "float16", "kernel": "cublas", "tilegraph_speedup": None},
               {"dtype": "bfloat16", "kernel": "cublas", "tilegraph_speedup": 0.99}]
    rows = {r["dtype"]: r for r in grid.summary(results)}
    assert rows["float16"]["tilegraph_slower"] == 2
    assert rows["float16"]["tilegraph_slower_on_cublas"] == 1
    assert rows["bfloat16"]["tilegraph_slower_on_cublas"] == 1


def test_a_stopped_decode_grid_shows_the_points_it_timed():
    """A grid stopped (timeout's SIGTERM) partway through a shape's row counts leaves that
    shape without its last points: the table shows them as not run instead of failing."""
    from rich.console import Console

    from tilegraph import tables

    point = {"dtype": "bfloat16", "n": 4096, "k": 14336, "weight_mb": 112.0,
             "fused_part": "residual", "status": "ok", "kernel": "gemv",
             "tilegraph_speedup": 1.11, "nopdl_speedup": 1.06, "tilegraph_pct_floor": 97.0,
             "fused_speedup": 1.2, "fused_over_linear_speedup": 1.1, "fused_pct_floor": 94.0}
    results = [dict(point, n=14336, k=4096, rows=rows) for rows in (1, 16)]
    results.append(dict(point, rows=1))  # 4096 x 14336 stopped before its 16 rows
    console = Console(width=200, record=True)
    for fused in (False, True):
        console.print(tables.grid_table(results, "bfloat16", fused))
    text = console.export_text()
    assert text.count("not run") == 2 and text.count("1.11 (1.06) 97%") == 3


def test_attention_grid_names_how_the_tuned_launch_differs_from_the_rule():
    from tilegraph.bench.attention_grid import launch_label
    from tilegraph.kernels.decode_attention import attention_config

    rule = attention_config(3, 32, 1, 128, 200, 132)
    assert launch_label(None, rule) == "rule"            # untuned
    assert launch_label(dict(rule), rule) == "rule"      # the rule won
    chosen = attention_config(3, 32, 1, 128, 200, 132, stages=4, programs_per_sm=2)
    assert launch_label(chosen, rule) == f"SPLITS={chosen['SPLITS']} num_stages=4"
    assert chosen["SPLITS"] != rule["SPLITS"] and chosen["BLOCK_SPLITS"] != rule["BLOCK_SPLITS"]
    apart = attention_config(1, 4, 7, 128, 8192, 132, merge_apart=True)  # the rule alone
    in_kernel = attention_config(1, 4, 7, 128, 8192, 132, head_blocks=1)
    label = launch_label(in_kernel, apart)
    assert label.startswith(f"SPLITS={in_kernel['SPLITS']} ") and label.endswith(
        " no MERGE_APART")


def test_attention_grid_summary_shows_the_plain_pass_where_tilegraph_reads_least():
    """The lowest share of copy over calls reading >= 16 MiB, and what moving as many bytes
    reached at that same point; small caches and failed points do not count."""
    from tilegraph.bench.attention_grid import summary

    def row(cache_mb, pct, pass_pct, status="ok"):
        return {"dtype": "bfloat16", "status": status, "cache_mb": cache_mb, "speedup": 1.2,
                "rule_speedup": 1.1, "tilegraph_pct_floor": pct, "pass_pct_floor": pass_pct}

    rows = [row(64.0, 75.0, 90.0), row(16.0, 46.0, 68.0), row(32.0, 57.0, 80.0),
            row(8.0, 31.0, 52.0), row(16.0, 20.0, 68.0, status="FAIL")]
    (line,) = summary(rows)
    assert line["points"] == 4 and line["slower"] == 0
    assert line["min_pct_floor_16mb"] == 46.0 and line["pass_pct_floor_there"] == 68.0
    (small,) = summary([row(8.0, 31.0, 52.0)])
    assert small["min_pct_floor_16mb"] is None and small["pass_pct_floor_there"] is None


@pytest.mark.gpu
def test_graph_timing_stays_on_one_side_stream(monkeypatch):
    """bench.measure(graph=True) and tg.capture capture on one side stream, made once: after
    kernels have run on a few streams of a process, every graph node there costs ~0.35 us
    more, for good (notes/graphs.md), and a new stream a capture got there by the third."""
    from tilegraph._runtime import side_stream

    stream = side_stream()
    assert side_stream() is stream
    x = torch.randn(1024, device="cuda")
    bench.measure(lambda: x.add_(1.0), graph=True, rep_ms=5)  # torch.cuda.graph makes its
    #                                  class's default stream on first use (made, never used)

    def no_new_streams(*args, stream_id=None, **kwargs):  # stream_id: a handle on one made
        assert stream_id is not None, "a new stream was made"
        return make_stream(*args, stream_id=stream_id, **kwargs)
    make_stream = torch.cuda.Stream
    monkeypatch.setattr(torch.cuda, "Stream", no_new_streams)
    for _ in range(3):
        assert bench.measure(lambda: x.add_(1.0), graph=True, rep_ms=5).median > 0
    tg.capture(lambda t: t.add_(1.0), x).replay()
