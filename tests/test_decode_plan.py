"""The few-row (decode) kernels of tg.linear, their choice by rule or by tuning, and
programmatic dependent launch on by default: every plan against a float64 reference."""

import itertools
import math
import warnings

import pytest
import torch

import tilegraph as tg
from _shapes import DTYPES
from tilegraph import tune
from tilegraph.bench import timing
from tilegraph.kernels import _dot_rows, _pdl, decode_plan
from tilegraph.kernels._added_norm import added_args
from tilegraph.kernels._launch import weight_alignment
from tilegraph.kernels._matvec import (
    FIT,
    gemv_config,
    small_persistent_gemv_config,
    two_row_gemv_config,
)
from tilegraph.kernels.autotune import Tuner
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.testing import assert_close, poisoned, randn


def _parts(rows, n, k, dtype, device):
    x = randn(rows, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    b = randn(n, dtype=dtype, device=device)
    g = randn(k, dtype=dtype, device=device)
    r = randn(rows, n, dtype=dtype, device=device)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation="gelu", residual=r.double())
    return x, w, b, g, r, ref


def _run(plan, x, w, b, g, r, pdl=False):
    out = poisoned((x.shape[0], w.shape[0]), x.dtype, x.device)
    decode_plan.launch(plan, x, w, out, g, 1e-6, b, "gelu", r, pdl)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8, 9, 16])
def test_rule_plan_at_awkward_sizes(rows, dtype, device):
    """N and K multiples of no block (70 x 300), every part at once."""
    x, w, b, g, r, ref = _parts(rows, 70, 300, dtype, device)
    plan = decode_plan.rule(rows, 70, 300, dtype, None)
    if plan.kind == "cublas":  # plain projections only: fused calls take its "fused" plan
        plain = linear_ref(x.double(), w.double(), b.double(), residual=r.double())
        out = poisoned((rows, 70), dtype, device)
        decode_plan.launch(plan, x, w, out, None, 1e-6, b, "none", r, False)
        assert_close(out, plain, dtype)
        plan = decode_plan.Plan.from_dict(plan.config["fused"])
    assert_close(_run(plan, x, w, b, g, r), ref, dtype, what=str(plan))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [3, 16])
@pytest.mark.parametrize("tile", decode_plan.WHOLE_SLICE_TILES, ids=["weight-left", "x-left"])
def test_whole_slice_tile_with_a_short_last_slice(tile, rows, dtype, device, monkeypatch):
    """The rule's whole-slice tiles at 70 x 1100: slices of 256 (or 512) columns, the last 76
    wide, each one step; with a PDL wait where the GPU has one."""
    monkeypatch.setattr(decode_plan, "WHOLE_SLICE_TILES", (tile,))
    plan = decode_plan.rule(rows, 70, 1100, dtype, None)
    slices = 5 if tile["BLOCK_K"] == 256 else 3
    assert (plan.config["BLOCK_K"], plan.config["SPLIT_K"], plan.config["num_stages"]) == \
        (tile["BLOCK_K"], slices, 1)
    x, w, b, g, r, ref = _parts(rows, 70, 1100, dtype, device)
    assert_close(_run(plan, x, w, b, g, r, pdl=_pdl.use_pdl(x.device, ())), ref, dtype)


@pytest.mark.parametrize("rows, k, dtype", [
    (1, 300, torch.bfloat16), (1, 2560, torch.bfloat16), (1, 6000, torch.float16),
    (1, 300, torch.float32), (1, 3000, torch.float32), (3, 300, torch.float32),
    (3, 1100, torch.bfloat16),
    (2, 1100, torch.bfloat16), (2, 2560, torch.bfloat16), (8, 300, torch.bfloat16),
    (16, 1100, torch.float16)])
@pytest.mark.parametrize("norm", [True, False])
def test_plans_add_a_normed_stream(rows, k, norm, dtype, device):
    """Every candidate plan with `added`: the row it projects is x + rms_norm(h) * w rounded
    as tg.rms_norm rounds it, which it also writes (the one-row GEMV's split tile with and
    without a tail or a second pass, persistent; the several-row GEMV; _matvec_kernel's one
    row and row loop, in their prologues, h's norm from the row as loaded where its first
    step holds it whole, else from a pass of its own; the tensor-core kernel in its norm's
    kernel, or tg.rms_norm's where it has no norm)."""
    x, w, b, g, r, _ = _parts(rows, 70, k, dtype, device)
    g = g if norm else None
    h = randn(rows, k, dtype=dtype, device=device, scale=3.0)
    post = randn(k, dtype=dtype, device=device)
    stream = rms_norm_ref(h, post, residual=x)
    plans = decode_plan.candidates(rows, 70, k, dtype, None)
    assert all(decode_plan.takes_added(p) for p in plans)
    for plan in _one_of_each_path(plans, k):
        out = poisoned((rows, 70), dtype, device)
        written = poisoned((rows, k), dtype, device)
        decode_plan.launch(plan, x, w, out, g, 1e-6, b, "gelu", r, False,
                           added=added_args(h, post, written))
        assert_close(written, stream.double(), dtype, what=f"{plan}: the stream")
        # against the stream written (the interpreter rounds bf16 by truncation)
        ref = linear_ref(written.double(), w.double(), b.double(),
                         norm_weight=g.double() if norm else None, activation="gelu",
                         residual=r.double())
        assert_close(out, ref, dtype, what=str(plan))


def _one_of_each_path(plans, k):
    """A plan of each code path among `plans` (the interpreter is slow): kernel, persistent
    or not, tail, row loop and its gathering, split K, weight on the left, and whether the
    CUDA-core kernels' first tile or step holds a whole row of k columns."""
    paths = {}
    for plan in plans:
        c = plan.config
        first = ((c["SPLIT"] + c.get("TAIL", 0)) * c["CHUNK"] if "SPLIT" in c
                 else c.get("BLOCK_K", k))
        key = (plan.kind, "PROGRAMS_PER_SM" in c, bool(c.get("TAIL")), c.get("ROW_LOOP"),
               c.get("GATHER_ROWS"), c.get("SPLIT_K", 1) > 1, c.get("W_LHS"), k <= first)
        paths.setdefault(key, plan)
    return paths.values()


def test_cublas_refuses_a_normed_stream(device):
    x, w, b, g, r, _ = _parts(3, 70, 300, torch.bfloat16, device)
    plan = decode_plan.Plan("cublas", {"fused": decode_plan.rule(3, 70, 300, x.dtype,
                                                                 None).as_dict()})
    assert not decode_plan.takes_added(plan)
    with pytest.raises(ValueError, match="adds no normed stream"):
        decode_plan.launch(plan, x, w, torch.empty(3, 70, dtype=x.dtype, device=device), None,
                           1e-6, b, "none", None, False, added=added_args(x, g, x.clone()))


@pytest.mark.parametrize("dtype", DTYPES)
def test_weight_alignment_divides_where_triton_cannot_see_it(dtype):
    size = dtype.itemsize
    vector = 16 // size   # elements in 16 bytes
    assert weight_alignment(size, 1000, 1000) == vector
    assert weight_alignment(size, 1000, 1000, 1000 + vector) == vector
    assert weight_alignment(size, 1008, 1008) == 1   # Triton marks multiples of 16 itself
    assert weight_alignment(size, 1008, 1008 + vector) == vector   # a padded row stride
    assert weight_alignment(size, 1002, 1002) == 1   # not a whole 16 bytes
    assert weight_alignment(size, 1000, 1002) == 1


ALIGN_PLANS = {
    "gemv": (1, decode_plan.Plan("gemv", gemv_config(70, 1000))),
    "gemv-rows": (3, decode_plan.Plan("gemv", gemv_config(70, 1000))),
    "matvec": (1, decode_plan.Plan("matvec", {"BLOCK_N": 4, "BLOCK_K": 1024, "num_warps": 4,
                                              "num_stages": 1, "ROW_LOOP": False})),
    "matvec-row-loop": (5, decode_plan.Plan("matvec", {"BLOCK_N": 8, "BLOCK_K": 512,
                                                       "num_warps": 4, "num_stages": 1,
                                                       "ROW_LOOP": True})),
    "dot-split-slices": (5, decode_plan.Plan("dot", {"BLOCK_N": 64, "BLOCK_K": 256,
                                                     "W_LHS": True, "num_warps": 4,
                                                     "num_stages": 1, "SPLIT_K": 4})),
    "dot-k-loop": (5, decode_plan.Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4,
                                               "num_stages": 3})),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stride", [1000, 1004, 1016])
@pytest.mark.parametrize("kernel", list(ALIGN_PLANS))
def test_rows_where_k_is_not_a_multiple_of_16(kernel, stride, dtype, device):
    """K = 1000, weight rows `stride` apart, norm prologue (its mean over K) and fused parts:
    K, the split and the stride reach the kernels divided by the elements in 16 bytes where
    all of them divide (weight_alignment), else as they are."""
    rows, plan = ALIGN_PLANS[kernel]
    x, _, b, g, r, _ = _parts(rows, 70, 1000, dtype, device)
    w = randn(70, stride, dtype=dtype, device=device, scale=1000**-0.5)[:, :1000]
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation="gelu", residual=r.double())
    assert_close(_run(plan, x, w, b, g, r), ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tile", [(16, 32, 2), (32, 64, 3), (64, 16, 4)])
@pytest.mark.parametrize("rows", [1, 4, 16])
def test_tensor_core_tiles(tile, rows, dtype, device):
    """Rows fewer than the 16-row tile, a partial last N block, a partial last K block and
    a K loop, with x rows strided (a column slice of a wider tensor)."""
    block_n, block_k, stages = tile
    plan = decode_plan.Plan("dot", {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4,
                                    "num_stages": stages})
    x, w, b, g, r, ref = _parts(rows, 37, 150, dtype, device)
    wide = randn(rows, 170, dtype=dtype, device=device)
    wide[:, 10:160] = x
    assert_close(_run(plan, wide[:, 10:160], w, b, g, r), ref, dtype, what=str(plan))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [3, 16])
def test_weight_left_tile_with_a_split_and_partial_blocks(rows, dtype, device):
    """weight_left_config's tile (acc^T = W x^T) at 100 x 700: 64-row blocks, the last 36
    rows, and 128-column steps split three ways (256 + 256 + 188), every part fused, x
    strided, PDL where the GPU has it; bit-identical when launched again."""
    plan = decode_plan.Plan("dot", {**decode_plan.weight_left_config(100, 700, 132),
                                    "SPLIT_K": 3})
    assert plan.config["W_LHS"] and plan.config["BLOCK_K"] == 128
    x, w, b, g, r, ref = _parts(rows, 100, 700, dtype, device)
    wide = randn(rows, 720, dtype=dtype, device=device)
    wide[:, 9:709] = x
    pdl = _pdl.use_pdl(x.device, ())
    first = _run(plan, wide[:, 9:709], w, b, g, r, pdl)
    assert_close(first, ref, dtype, what=str(plan))
    assert torch.equal(_run(plan, wide[:, 9:709], w, b, g, r, pdl), first)


def test_split_slices_of_two_tiles_or_more_ask_l2_for_the_next_under_pdl():
    """l2_ahead_tiles: L2_AHEAD_TILES where K is split into slices of two tiles or more
    under PDL; none unsplit, with one tile a slice, or without PDL; a config's count wins."""
    ahead = _dot_rows.L2_AHEAD_TILES
    assert ahead > 0
    assert _dot_rows.l2_ahead_tiles(None, 2048, 64, 8, True) == ahead     # 4 tiles a slice
    assert _dot_rows.l2_ahead_tiles(None, 700, 128, 3, True) == ahead     # 6 steps: 2 a slice
    assert _dot_rows.l2_ahead_tiles(None, 700, 128, 6, True) == 0         # 1 a slice
    assert _dot_rows.l2_ahead_tiles(None, 1024, 128, 8, True) == 0
    assert _dot_rows.l2_ahead_tiles(None, 4096, 128, 1, True) == 0        # unsplit
    assert _dot_rows.l2_ahead_tiles(None, 2048, 64, 8, False) == 0        # no PDL: no wait
    assert _dot_rows.l2_ahead_tiles(0, 2048, 64, 8, True) == 0
    assert _dot_rows.l2_ahead_tiles(4, 4096, 128, 1, True) == 4


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tiles_asked_of_l2_before_the_wait_leave_the_result_alone(dtype):
    """A split weight-left plan at 100 x 700 (a partial column block, slices of 3 or 6
    tiles) under PDL, its programs asking L2 for 0, 1, 2 or 4 tiles past their first before
    the wait (L2_TILES; 4 runs past the shorter slices' ends), and by default: the same
    bits every time, close to float64."""
    if dtype == torch.float32:
        tile = decode_plan.fp32_weight_left_tile(64, 5, 2)
    else:
        tile = {**decode_plan.weight_left_config(100, 700, 132), "SPLIT_K": 2}
    x, w, b, g, r, ref = _parts(5, 100, 700, dtype, "cuda")
    first = _run(decode_plan.Plan("dot", tile), x, w, b, g, r, pdl=True)
    assert_close(first, ref, dtype)
    for tiles in (0, 1, 2, 4):
        plan = decode_plan.Plan("dot", {**tile, "L2_TILES": tiles})
        assert torch.equal(_run(plan, x, w, b, g, r, pdl=True), first), tiles


@pytest.mark.parametrize("rows", [3, 8])
def test_weight_left_tile_takes_two_stages_where_that_fits_one_wave(rows, device):
    """Past two of the tile's 64-row column blocks an SM and up to three, two stages (three
    programs an SM fit), so that no second wave of a few programs follows; otherwise three.
    The two-stage tile (5 blocks on 2 SMs), every part fused, against float64."""
    for n_blocks, stages in ((264, 3), (265, 2), (396, 2), (397, 3)):
        config = decode_plan.weight_left_config(64 * n_blocks - 5, 1536, 132)
        assert config["num_stages"] == stages and "SPLIT_K" not in config, n_blocks
    assert decode_plan.rule(8, 17920, 1536, torch.bfloat16, 132).config["num_stages"] == 2
    plan = decode_plan.Plan("dot", decode_plan.weight_left_config(300, 200, 2))
    assert plan.config["num_stages"] == 2
    x, w, b, g, r, ref = _parts(rows, 300, 200, torch.bfloat16, device)
    assert_close(_run(plan, x, w, b, g, r), ref, torch.bfloat16, what=str(plan))


@pytest.mark.parametrize("rows", [3, 8])
def test_weight_left_split_fills_three_programs_an_sm_at_two_stages(rows, device):
    """A split that fills at most SPLIT_FILL of two programs an SM at three stages runs at two
    stages, split to fill three an SM, where that fills more; otherwise unchanged. The tile
    so chosen (3 blocks on 4 SMs: split 2 -> 4), every part fused, against float64."""
    assert decode_plan.weight_left_config(6144, 1024, 132) == {
        "BLOCK_N": 64, "BLOCK_K": 128, "num_warps": 4, "num_stages": 2, "W_LHS": True,
        "SPLIT_K": 4}
    for n, k, split in ((3072, 2048, 5), (4096, 4096, 4), (9728, 896, None)):  # > 0.8, unsplit
        config = decode_plan.weight_left_config(n, k, 132)
        assert config["num_stages"] == 3 and config.get("SPLIT_K") == split, (n, k)
    config = decode_plan.weight_left_config(150, 512, 4)
    assert (config["num_stages"], config["SPLIT_K"]) == (2, 4)
    plan = decode_plan.Plan("dot", config)
    x, w, b, g, r, ref = _parts(rows, 150, 512, torch.bfloat16, device)
    assert_close(_run(plan, x, w, b, g, r), ref, torch.bfloat16, what=str(plan))


def _split_plan(split, block_n=32, block_k=32):
    return decode_plan.Plan("dot", {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4,
                                    "num_stages": 2, "SPLIT_K": split})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("split", [2, 3, 8])
@pytest.mark.parametrize("rows", [1, 5, 16])
def test_split_k_at_awkward_sizes(split, rows, dtype, device):
    """K split over programs (3 splits of 300 columns: 128 + 128 + 44; 8 asked of 10 tiles:
    5 splits of 2), every part fused, x strided; launched twice, bit-identical (partials
    summed in split order, counters reset by the last program)."""
    x, w, b, g, r, ref = _parts(rows, 70, 300, dtype, device)
    wide = randn(rows, 310, dtype=dtype, device=device)
    wide[:, 5:305] = x
    plan = _split_plan(split, block_k=64 if split == 3 else 32)
    first = _run(plan, wide[:, 5:305], w, b, g, r)
    assert_close(first, ref, dtype, what=str(plan))
    assert torch.equal(_run(plan, wide[:, 5:305], w, b, g, r), first)


def test_fp32_rows_multiply_at_fp32_accuracy(device):
    """The tensor-core kernel takes fp32 weights at tf32x3 (or IEEE), with x or the weight
    on the mma's left: fp32's tolerance, not tf32's. Values of mixed magnitude, where plain
    tf32 loses about 1e-3."""
    x = randn(12, 513, device=device) * torch.logspace(-2, 2, 513, device=device)
    w = randn(70, 513, device=device)
    ref = linear_ref(x.double(), w.double())
    x_left = {"BLOCK_N": 16, "BLOCK_K": 64, "num_warps": 4, "num_stages": 2}
    # the rule's depth, deeper than a slice's 3 steps of K
    w_left = decode_plan.fp32_weight_left_tile(64, decode_plan.FP32_WEIGHT_LEFT_STAGES, 3)
    for tile, precision in itertools.product((x_left, w_left), ("tf32x3", "ieee")):
        plan = decode_plan.Plan("dot", {**tile, "DOT_PRECISION": precision})
        out = poisoned((12, 70), torch.float32, device)
        decode_plan.launch(plan, x, w, out, None, 1e-6, None, "none", None, False)
        assert_close(out, ref, torch.float32, what=str(plan))


def test_rule_by_rows_dtype_and_size():
    bf16, fp32 = torch.bfloat16, torch.float32
    assert decode_plan.rule(1, 2048, 2048, bf16, 132).kind == "gemv"
    assert decode_plan.rule(1, 4096, 14336, bf16, 132).kind == "dot"     # long rows
    # one row: the GEMV up to 8192 columns (past 4096 by a quarter tile or less: one tile
    # and a tail)
    one_row = {k: decode_plan.rule(1, 2048, k, bf16, 132)
               for k in (4096, 4608, 5120, 5121, 5632, 6144, 8192, 8193)}
    assert {k: p.kind for k, p in one_row.items()} == {
        4096: "gemv", 4608: "gemv", 5120: "gemv", 5121: "gemv", 5632: "gemv", 6144: "gemv",
        8192: "gemv", 8193: "dot"}
    # under 20 MiB of weights a program a row block, past one tile with a tail
    narrow = [decode_plan.rule(1, 1024, k, bf16, 132).config for k in (4608, 5120, 5121)]
    assert [config.get("TAIL", 0) for config in narrow] == [4, 8, 0]
    assert "PROGRAMS_PER_SM" not in one_row[4608].config                 # 18 MiB
    # from 20 MiB persistent: whole rows, in a head of 4096 columns and a tail where those
    # cover the row in less than a power of two
    assert [one_row[k].config.get("PROGRAMS_PER_SM") for k in (5120, 5632, 8192)] == \
        [FIT, FIT, FIT]
    assert [one_row[k].config.get("TAIL", 0) for k in (5120, 5632, 6144, 8192)] == \
        [8, 16, 16, 0]
    assert decode_plan.rule(2, 2048, 2048, bf16, 132).kind == "gemv"     # 8 MiB: persistent
    assert decode_plan.rule(2, 1536, 1536, bf16, 132).kind == "matvec"   # small: latency
    assert decode_plan.rule(2, 8192, 8192, bf16, 132).kind == "dot"
    assert decode_plan.rule(4, 4096, 4096, bf16, 132).kind == "dot"
    assert decode_plan.rule(8, 256, 2048, bf16, 132).kind == "dot"
    assert decode_plan.rule(3, 512, 512, bf16, 132).kind == "dot"       # tiny: CUDA cores slow
    assert decode_plan.rule(3, 640, 640, bf16, 132).kind == "matvec"
    # 3-4 rows from 2M weights: the tensor cores, in whole slices where they apply, else
    # with the weight on the mma's left
    three_four = {(rows, n, k): decode_plan.rule(rows, n, k, bf16, 132)
                  for rows, n, k in ((4, 1024, 1024), (4, 2048, 2048), (3, 1536, 1536),
                                     (4, 2560, 2048), (4, 512, 4608))}  # 320 programs; 9 slices
    assert [p.kind for p in three_four.values()] == ["matvec", "dot", "dot", "dot", "dot"]
    assert three_four[(4, 2048, 2048)].config["num_stages"] == 1
    assert three_four[(4, 2560, 2048)].config["W_LHS"] and \
        three_four[(4, 2560, 2048)].config["num_stages"] > 1
    # counted as the CUDA-core tile holds them: 1152 columns are padded to 2048
    assert decode_plan.rule(3, 1152, 1152, bf16, 132).kind == "dot"
    assert decode_plan.rule(3, 1152, 1024, bf16, 132).kind == "matvec"
    # 2 rows without the persistent GEMV: the CUDA cores up to the whole-slice bound, the
    # tensor cores past it (and on tiny weights, as at 3-4 rows)
    two = {(n, k): decode_plan.rule(2, n, k, bf16, 132, two_row_gemv=False).kind
           for n, k in ((512, 512), (640, 640), (1536, 1536), (2048, 2048), (2560, 2560),
                        (5632, 2048), (896, 4864))}
    assert two == {(512, 512): "dot", (640, 640): "matvec", (1536, 1536): "matvec",
                   (2048, 2048): "matvec", (2560, 2560): "dot", (5632, 2048): "dot",
                   (896, 4864): "dot"}
    assert decode_plan.rule(4, 8192, 8192, fp32, 132).kind == "matvec"
    assert decode_plan.rule(8, 1024, 1024, fp32, 132).kind == "matvec"
    assert decode_plan.rule(8, 2048, 2048, fp32, 132).kind == "dot"
    # fp32 at 5-8 rows: the row loop while its tile (K padded to a power of two) holds under
    # 2M weights; 1152 columns pad to 2048, so 1152^2 counts as 1152 x 2048
    assert decode_plan.rule(6, 1152, 1152, fp32, 132).kind == "dot"
    assert decode_plan.rule(6, 1536, 1024, fp32, 132).kind == "matvec"
    assert decode_plan.rule(6, 1000, 2048, fp32, 132).kind == "matvec"
    assert decode_plan.rule(4, 1152, 1152, fp32, 132).kind == "matvec"
    assert decode_plan.rule(16, 256, 2048, fp32, 132).kind == "dot"
    # BLOCK_N 64 for the weight-left tiles, 32 for fp32's x-left one; K split until about
    # two programs an SM
    tile = lambda n, k, dtype=bf16, sms=132: decode_plan.rule(16, n, k, dtype, sms).config  # noqa: E731
    assert [tile(n, n)["BLOCK_N"] for n in (1024, 2048, 3072, 8192)] == [64, 64, 64, 64]
    assert [tile(n, n, fp32)["BLOCK_N"] for n in (1024, 4096)] == [32, 64]
    split = lambda n, k, dtype=bf16, sms=132: tile(n, k, dtype, sms).get("SPLIT_K", 1)  # noqa: E731
    assert [split(n, n) for n in (4096, 8192)] == [4, 2]  # 4: K's tiles
    assert [split(n, n, fp32) for n in (1024, 2048, 4096, 8192)] == [8, 8, 4, 2]
    assert split(8192, 4096, sms=16) == 1  # a small GPU: the column blocks fill it
    # rows at least twice as long as N is wide: wide tiles (32 below 1024 outputs)
    assert (split(256, 4096), split(2048, 5632), split(4096, 14336)) == (8, 8, 4)
    assert (tile(256, 4096)["BLOCK_N"], tile(2048, 5632)["BLOCK_N"]) == (32, 64)
    assert split(16384, 53248) == 1
    # 16-bit weights that two programs an SM cover in slices of 256 columns: one step each,
    # the weight on the mma's left, but one slice of 512 (no split) where K takes it
    whole = {n: tile(n, n) for n in (256, 512, 768, 1024, 2048, 2560)}
    assert [(c["BLOCK_K"], c.get("SPLIT_K", 1), c["num_stages"]) for c in whole.values()] == \
        [(256, 1, 1), (512, 1, 1), (256, 3, 1), (256, 4, 1), (256, 8, 1), (128, 6, 3)]
    assert [c.get("W_LHS", False) for c in whole.values()] == [True, False] + [True] * 4
    # 9-16 slices of 256 columns: slices of 512 with x on the mma's left
    assert (tile(256, 4096)["BLOCK_K"], tile(256, 4096)["num_stages"]) == (512, 1)
    assert "W_LHS" not in tile(256, 4096)
    # the weight on the mma's left wherever else 16-bit weights take the tensor cores
    assert [tile(n, n).get("W_LHS", False) for n in (256, 2048, 2560, 3072)] == [True] * 4
    # in fp32 where its programs number 1.36 an SM or more: 1280 gives 20 column blocks of 64
    # split 8 (1.2 an SM), 1408 22 (1.33), 1472 23 (1.39), 1536 24 (1.45)
    assert [tile(n, n, fp32).get("W_LHS", False)
            for n in (1024, 1280, 1408, 1472, 1536, 4096)] == [False] * 3 + [True] * 3
    assert tile(14336, 4096, fp32)["W_LHS"] and "SPLIT_K" not in tile(14336, 4096, fp32)
    # five tiles deep (88 KB: two programs an SM) where its programs fit two an SM, else three
    # (48 KB: three an SM): 6144 split 4 gives 384 programs, 32000 500
    assert [tile(n, k, fp32)["num_stages"] for n, k in
            ((4096, 4096), (8192, 8192), (14336, 4096), (6144, 4096), (32000, 2048))] == \
        [5, 5, 5, 3, 3]
    # where the split that keeps two an SM gives fewer than 1.5, twice that split: 96 column
    # blocks (6144) split 4, not 2 (1.45 an SM); 176 (11264) and 192 (12288) split 2
    assert [split(n, 4096, fp32) for n in (6144, 11264, 12288)] == [4, 2, 2]
    assert all(tile(n, 4096, fp32)["W_LHS"] for n in (6144, 11264, 12288))
    assert split(9216, 9216, fp32) == 2 and split(14336, 4096, fp32) == 1  # 1.7 an SM: one
    assert tile(100000, 7)["BLOCK_K"] == 16 and tile(100000, 7)["W_LHS"]  # no wider than K
    assert tile(100, 200)["BLOCK_K"] == 256 and "SPLIT_K" not in tile(100, 200)
    assert tile(100, 300)["BLOCK_K"] == 512 and "SPLIT_K" not in tile(100, 300)
    assert tile(2048, 2048, sms=16)["num_stages"] == 3          # a small GPU: too many
    assert tile(1024, 1024, fp32)["BLOCK_K"] == 128              # 16-bit only
    assert split(32, 4608) == 8 and tile(32, 4608)["num_stages"] == 3  # 9 slices: too many
    # pipelines three tiles deep in 16-bit (whole decode steps), four in fp32's x-left tile
    # where K is not split
    stages = lambda n, k, dtype=bf16: tile(n, k, dtype)["num_stages"]  # noqa: E731
    assert (stages(11264, 2048), stages(2048, 5632)) == (3, 3)
    assert decode_plan.fp32_x_left_config(11264, 2048, 132)["num_stages"] == 4


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, n, k", [(1, 3000, 7), (3, 64, 9000), (16, 16, 16),
                                        (2, 5, 100000)])
def test_every_candidate_is_bounded(rows, n, k, dtype):
    """No tile wider than K, no plan the launcher cannot take, the rule's plan first."""
    plans = decode_plan.candidates(rows, n, k, dtype, 132)
    rule = decode_plan.rule(rows, n, k, dtype, 132)
    assert plans[0] == (rule if rule.kind != "cublas" else
                        decode_plan.Plan.from_dict(rule.config["fused"]))
    assert len(plans) == len(set(map(repr, plans)))
    for plan in plans:
        assert plan.kind in ("gemv", "matvec", "dot")
        assert plan.kind != "gemv" or decode_plan.gemv_runs(rows, plan.config)
        if plan.kind == "dot":
            size = torch.finfo(dtype).bits // 8
            assert 16 <= plan.config["BLOCK_K"] <= max(16, 2 ** (k - 1).bit_length())
            stage_bytes = (plan.config["BLOCK_N"] + 16) * plan.config["BLOCK_K"] * size
            assert stage_bytes * plan.config["num_stages"] <= 200 * 1024  # H100: 227 KB


def test_tuned_plan_is_used_kept_on_disk_and_bucketed(device):
    """A plan `tilegraph tune` recorded is what tg.linear runs (and a fresh store reads it
    from disk); 3 rows take 4 rows' plan; a damaged entry falls back to the rule."""
    tuned = decode_plan.Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4,
                                     "num_stages": 2})
    decode_plan.record(4, 96, 200, torch.float16, tuned)
    assert decode_plan.plan(3, 96, 200, torch.float16, torch.device(device)) == tuned
    assert decode_plan.plan(8, 96, 200, torch.float16, torch.device(device)) == \
        decode_plan.rule(8, 96, 200, torch.float16, decode_plan.sm_count(torch.device(device)))
    fresh = Tuner("linear-decode", [{}])
    assert fresh.lookup(decode_plan.tuned_key(4, 96, 200, torch.float16))["BLOCK_N"] == 32
    x, w, b, g, r, ref = _parts(3, 96, 200, torch.float16, device)
    out = tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r)
    assert_close(out, ref, torch.float16)
    fresh.record(decode_plan.tuned_key(2, 96, 200, torch.float16), {"kind": "bogus"})
    assert decode_plan.plan(2, 96, 200, torch.float16, torch.device(device)).kind != "bogus"


def test_two_plain_rows_time_the_gemv_where_the_rule_takes_none():
    """plain_plan times the one-row GEMV's tile beside a two-row rule that is no GEMV (and
    keys its verdict by it), never at more rows or in fp32, nor a tile with a tail."""
    bf16, sms = torch.bfloat16, 132
    rule = decode_plan.rule(2, 512, 4096, bf16, sms)
    assert rule.kind != "gemv"
    gemv = decode_plan.Plan("gemv", decode_plan.split_gemv_config(512, 4096))
    assert decode_plan.other_plan(2, 512, 4096, bf16, sms, rule) == gemv
    assert repr(gemv.as_dict()) in decode_plan.plain_key(2, 512, 4096, bf16, False, rule)
    four = decode_plan.rule(4, 512, 4096, bf16, sms)
    assert decode_plan.other_plan(4, 512, 4096, bf16, sms, four) is None
    fp32 = decode_plan.rule(2, 512, 4096, torch.float32, sms)  # the row loop's other turn
    assert decode_plan.other_plan(2, 512, 4096, torch.float32, sms, fp32).kind != "gemv"
    assert "TAIL" in decode_plan.split_gemv_config(512, 2560)
    tailed = decode_plan.rule(2, 512, 2560, bf16, sms)
    assert decode_plan.other_plan(2, 512, 2560, bf16, sms, tailed) is None


def test_plain_split_k_is_timed_cut_into_equal_slices_where_that_cuts_k_otherwise():
    """At 3-16 16-bit rows plain_plan times the rule's split-K plan (K's steps dealt out
    evenly, the kernel's default) with K cut into slices of equal width beside it (keyed by
    it), where the two cut K differently; `tilegraph tune` too."""
    bf16, sms = torch.bfloat16, 132
    rule = decode_plan.rule(8, 5632, 2048, bf16, sms)  # 16 steps in 3 slices: 6-5-5 or 6-6-4
    assert rule.config["SPLIT_K"] == 3 and "EVEN_SPLIT" not in rule.config
    equal = decode_plan.other_plan(8, 5632, 2048, bf16, sms, rule)
    assert equal == decode_plan.Plan("dot", {**rule.config, "EVEN_SPLIT": False})
    assert repr(equal.as_dict()) in decode_plan.plain_key(8, 5632, 2048, bf16, False, rule)
    assert equal in decode_plan.candidates(8, 5632, 2048, bf16, sms)
    whole = decode_plan.rule(8, 2048, 2048, bf16, sms)  # 8 steps in 8 slices: one way only
    assert whole.config["SPLIT_K"] == 8
    assert decode_plan.other_plan(8, 2048, 2048, bf16, sms, whole) is None
    fp32 = decode_plan.rule(16, 5632, 2048, torch.float32, sms)
    assert decode_plan.other_plan(16, 5632, 2048, torch.float32, sms, fp32) is None
    assert decode_plan.equal_split_plan(equal, 2048) is None  # its cut named already


def test_plain_rows_time_the_x_left_tile_beside_the_weight_left_tile_unsplit():
    """At 3-16 16-bit rows plain_plan times the pipelined x-left tile of 32 weight rows
    beside the rule's pipelined weight-left tile where K is unsplit (keyed by it), not where
    the rule splits K, reads whole slices, or runs two rows."""
    sms = 132
    for dtype, rows in itertools.product((torch.bfloat16, torch.float16), (3, 8, 16)):
        rule = decode_plan.rule(rows, 9728, 896, dtype, sms)
        assert rule.config["W_LHS"] and "SPLIT_K" not in rule.config
        other = decode_plan.other_plan(rows, 9728, 896, dtype, sms, rule)
        assert other == decode_plan.Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 128, "num_warps": 4,
                                                 "num_stages": 3})
        assert repr(other.as_dict()) in decode_plan.plain_key(rows, 9728, 896, dtype, False,
                                                              rule)
        assert other in decode_plan.candidates(rows, 9728, 896, dtype, sms)
    split = decode_plan.rule(8, 8192, 8192, torch.bfloat16, sms)
    assert split.config.get("SPLIT_K", 1) == 2
    assert decode_plan.other_plan(8, 8192, 8192, torch.bfloat16, sms, split) is None
    whole = decode_plan.rule(8, 100, 64, torch.bfloat16, sms)  # one whole slice, unsplit
    assert whole.config["num_stages"] == 1 and "SPLIT_K" not in whole.config
    assert decode_plan.other_plan(8, 100, 64, torch.bfloat16, sms, whole) is None
    two = decode_plan.rule(2, 14336, 4096, torch.bfloat16, sms)  # weight-left, unsplit
    assert decode_plan.x_left_plan(two) is not None
    assert decode_plan.other_plan(2, 14336, 4096, torch.bfloat16, sms, two).kind == "gemv"


def test_fp32_plain_rows_time_the_row_loop_where_the_rule_takes_tensor_cores():
    """In fp32 at 5-8 rows plain_plan times the CUDA-core row loop beside the rule's tf32x3
    plan (keyed by it); not at 4 or 9 rows (where the rule runs the row loop, its other turn)."""
    fp32, sms = torch.float32, 132
    for rows in (5, 6, 8):
        rule = decode_plan.rule(rows, 3000, 1000, fp32, sms)
        assert rule.kind == "dot"
        other = decode_plan.other_plan(rows, 3000, 1000, fp32, sms, rule)
        assert other.kind == "matvec" and other.config["ROW_LOOP"]
        assert other.config == decode_plan.matvec_config(rows, 3000, 1000, 4)
        assert repr(other.as_dict()) in decode_plan.plain_key(rows, 3000, 1000, fp32, False,
                                                              rule)
    nine = decode_plan.rule(9, 3000, 1000, fp32, sms)
    assert decode_plan.other_plan(9, 3000, 1000, fp32, sms, nine) is None
    four = decode_plan.rule(4, 3000, 1000, fp32, sms)  # the row loop: its other turn instead
    assert decode_plan.other_plan(4, 3000, 1000, fp32, sms, four).kind == "matvec"
    small = decode_plan.rule(6, 512, 512, fp32, sms)  # the row loop: its other turn instead
    assert small.kind == "matvec"
    assert decode_plan.other_plan(6, 512, 512, fp32, sms, small).config["GATHER_ROWS"] is False


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_plain_rows_time_the_row_loops_other_turn(dtype):
    """At 3-4 rows, where the rule's row loop turns each row's sums on its own, plain_plan
    times them gathered beside it (keyed by it), and `tilegraph tune` both ways. In fp32,
    where the rule gathers them (2 and 5-8 rows on small weights), the row-by-row turn is
    timed beside it; in 16-bit at 2 rows the one-row GEMV's tile instead."""
    sms = 132

    def other_turn(plan):
        return decode_plan.Plan("matvec", {**plan.config,
                                           "GATHER_ROWS": not plan.config["GATHER_ROWS"]})

    for rows in (3, 4):
        rule = decode_plan.rule(rows, 1000, 1000, dtype, sms)
        assert rule.kind == "matvec" and not rule.config["GATHER_ROWS"]
        other = decode_plan.other_plan(rows, 1000, 1000, dtype, sms, rule)
        assert other == other_turn(rule)
        assert repr(other.as_dict()) in decode_plan.plain_key(rows, 1000, 1000, dtype, False,
                                                              rule)
        assert other in decode_plan.candidates(rows, 1000, 1000, dtype, sms)
    for rows in (2, 5, 8):
        rule = decode_plan.rule(rows, 1000, 1000, dtype, sms)
        other = decode_plan.other_plan(rows, 1000, 1000, dtype, sms, rule)
        if rule.kind != "matvec":
            continue
        assert rule.config["ROW_LOOP"] and rule.config["GATHER_ROWS"]
        assert other_turn(rule) in decode_plan.candidates(rows, 1000, 1000, dtype, sms)
        if dtype == torch.float32:
            assert other == other_turn(rule)
        else:
            assert rows == 2 and other.kind == "gemv"


def test_a_plain_verdict_holds_for_the_row_count_it_was_timed_at(device):
    """A verdict timed at 3 rows is not taken at 4, where the rule's plan is the same (one
    rows bucket): the row loop's turns won at 3 rows and lost at 4 on the same shape."""
    n, k, fp32 = 1000, 1000, torch.float32
    sms = decode_plan.sm_count(torch.device(device))
    rule = decode_plan.rule(3, n, k, fp32, sms)
    assert rule == decode_plan.rule(4, n, k, fp32, sms)
    assert decode_plan.plain_key(3, n, k, fp32, False, rule) != decode_plan.plain_key(
        4, n, k, fp32, False, rule)
    decode_plan._plain.record(decode_plan.plain_key(3, n, k, fp32, False, rule),
                              {"kind": "cublas", "fused": rule.as_dict()})
    for rows, kind in ((3, "cublas"), (4, rule.kind)):
        x, w, *_ = _parts(rows, n, k, fp32, device)
        out = poisoned((rows, n), fp32, device)
        assert decode_plan.plain_plan(x, w, None, out).kind == kind
        assert_close(tg.linear(x, w, out=out), linear_ref(x.double(), w.double()), fp32)


def test_a_step_verdict_holds_for_the_row_count_it_was_timed_at(device):
    """Steps of 3 and 4 rows share `tilegraph tune`'s plan (one rows bucket) but each keeps
    its own step's verdicts (that the rule's plan wins, that a tile leaves its K loop out),
    whichever was timed last; a row count no step timed takes its bucket's latest.
    (Tuners keep what they record for the process: a shape no other test records.)"""
    bf16, dev = torch.bfloat16, torch.device(device)
    gemv = decode_plan.Plan("gemv", gemv_config(112, 384))
    decode_plan.record(4, 112, 384, bf16, gemv)
    rule = decode_plan.rule(3, 112, 384, bf16, decode_plan.sm_count(dev))
    assert rule != gemv
    for rows, rule_wins in ((3, True), (4, False)):
        decode_plan.set_step_rule(rows, 112, 384, bf16, rule_wins)
        decode_plan.set_one_step(rows, 112, 384, bf16, not rule_wins)
    assert decode_plan.plan(3, 112, 384, bf16, dev) == rule
    assert decode_plan.plan(4, 112, 384, bf16, dev) == gemv
    assert [decode_plan.runs_one_step(rows, 112, 384, bf16) for rows in (3, 4)] == [False, True]
    decode_plan.set_step_rule(3, 112, 384, bf16, True)  # timed last: the bucket's latest
    assert decode_plan.plan(4, 112, 384, bf16, dev) == gemv
    assert decode_plan.step_takes_rule(4, 112, 400, bf16) is False
    decode_plan.set_step_rule(3, 112, 400, bf16, True)
    assert decode_plan.step_takes_rule(4, 112, 400, bf16)
    x, w, b, g, r, ref = _parts(3, 112, 384, bf16, device)
    assert_close(tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r), ref, bf16)


def test_a_tuned_gemv_runs_two_to_four_rows(device):
    """`tilegraph tune` may keep the one-row GEMV's tile for 2-4 rows (_gemv_rows_kernel),
    which tg.linear then runs; the late release is a one-row choice; a tile with a tail
    runs one row only, so there the rule's plan runs."""
    bf16, dev = torch.bfloat16, torch.device(device)
    gemv = decode_plan.Plan("gemv", gemv_config(96, 256))
    decode_plan.record(4, 96, 256, bf16, gemv)
    decode_plan.set_late_release(96, 256, bf16, True)
    assert decode_plan.plan(3, 96, 256, bf16, dev) == gemv
    x, w, b, g, r, ref = _parts(3, 96, 256, bf16, device)
    assert_close(tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r), ref, bf16)
    tail = decode_plan.Plan("gemv", {**gemv.config, "TAIL": 4})
    decode_plan.record(2, 96, 256, bf16, tail)
    assert decode_plan.plan(2, 96, 256, bf16, dev) == decode_plan.rule(
        2, 96, 256, bf16, decode_plan.sm_count(dev))


def test_pdl_is_off_without_a_hopper_gpu_and_when_asked(device):
    assert not _pdl.use_pdl(torch.device(device), (), requested=False)
    if device == "cpu":
        assert not _pdl.use_pdl(torch.device("cpu"), ())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [2, 5, 16])
def test_candidates_are_correct_on_gpu(rows, dtype):
    """The plans the tuner may pick (the CUDA-core ones and every fourth tensor-core tile:
    each compiles for a second or so), PDL launch or not, at a size that loops over K.
    The tuner also checks each plan it times before keeping it."""
    x, w, b, g, r, ref = _parts(rows, 1000, 1500, dtype, "cuda")
    plans = decode_plan.candidates(rows, 1000, 1500, dtype, 132)
    sample = [p for p in plans if p.kind != "dot"] + [p for p in plans if p.kind == "dot"][::4]
    for plan, pdl in itertools.product(sample, (False, True)):
        assert_close(_run(plan, x, w, b, g, r, pdl), ref, dtype, what=f"{plan} pdl={pdl}")


@pytest.mark.gpu
def test_pdl_is_refused_when_the_previous_kernel_writes_the_weight():
    """A linear whose out is the next linear's weight: the second must not prefetch it."""
    if not _pdl.supports_pdl(torch.device("cuda")):
        pytest.skip("programmatic dependent launch needs Hopper or newer")
    x = randn(16, 64, dtype=torch.bfloat16, device="cuda")
    w1 = randn(64, 64, dtype=torch.bfloat16, device="cuda")
    w2 = torch.empty(16, 64, dtype=torch.bfloat16, device="cuda")
    other = torch.empty(16, 64, dtype=torch.bfloat16, device="cuda")
    # An earlier test's last kernel may have written memory the allocator has since given
    # to w1; then the first linear rightly runs without PDL and records nothing.
    _pdl.launched(x.device, False, ())
    tg.linear(x, w1, out=w2)
    assert not _pdl.use_pdl(x.device, (w2,))
    assert _pdl.use_pdl(x.device, (other,))
    assert not _pdl.use_pdl(x.device, (w2[3:5],))  # any overlap counts


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 4, 16])
def test_pdl_chains_in_a_graph_equal_eager_over_replays(rows, dtype):
    """A chain where each linear's output is the next one's input, and where one output is
    the next linear's *weight* (the hazard PDL must avoid), captured with PDL on by default,
    replayed 100 times with fresh inputs, against the same chain run eagerly without PDL."""
    d = 384
    w0, w1, w2 = (randn(d, d, dtype=dtype, device="cuda", scale=d**-0.5) for _ in range(3))
    w_up = randn(d, 16, dtype=dtype, device="cuda", scale=0.25)
    g = randn(d, dtype=dtype, device="cuda")

    def chain(x, a, prefetch=None):
        h = tg.linear(x, w0, norm_weight=g, prefetch_weight=prefetch)
        h = tg.linear(h, w1, residual=x, prefetch_weight=prefetch)
        w_made = tg.linear(a, w2, prefetch_weight=prefetch)       # (16, d), written just now
        y = tg.linear(h, w_made, prefetch_weight=prefetch)        # ... and read as a weight
        return tg.linear(y, w_up, activation="gelu", prefetch_weight=prefetch)

    graph = tg.capture(chain, randn(rows, d, dtype=dtype, device="cuda"),
                       randn(16, d, dtype=dtype, device="cuda"))
    for _ in range(100):
        for static in graph.inputs:
            static.copy_(randn(*static.shape, dtype=dtype, device="cuda"))
        got = graph.replay()
        expected = chain(*(t.clone() for t in graph.inputs), prefetch=False)
        assert_close(got, expected.double(), dtype)


@pytest.mark.gpu
def test_split_k_chains_in_a_graph_equal_eager_and_leave_counters_zero(monkeypatch):
    """Split-K launches back to back (PDL on), each reusing its stream's workspace, captured
    and replayed 100 times with fresh inputs: equal to eager at every replay, and every
    counter is back at zero after the last."""
    from tilegraph.kernels import _split_workspace

    monkeypatch.setattr(decode_plan, "plan", lambda *a, **k: _split_plan(3, 16, 64))
    test_pdl_chains_in_a_graph_equal_eager_over_replays(16, torch.bfloat16)
    torch.cuda.synchronize()
    for _, counters in _split_workspace._workspaces.values():
        assert not counters.any()


def _fresh_split_workspaces(monkeypatch):
    """No stream has a split-K workspace and the device has no spare, as in a new process."""
    from tilegraph.kernels import _split_workspace

    monkeypatch.setattr(_split_workspace, "_workspaces", {})
    monkeypatch.setattr(_split_workspace, "_spares", {})
    return _split_workspace


def _replays_right(graph, out, x, w, b, g, r, replays=20):
    """Fresh x and residual before each replay, out poisoned: every replay against float64
    (g None: no norm)."""
    for _ in range(replays):
        x.copy_(randn(*x.shape, dtype=x.dtype, device=x.device))
        r.copy_(randn(*r.shape, dtype=r.dtype, device=r.device))
        ref = linear_ref(x.double(), w.double(), b.double(),
                         norm_weight=None if g is None else g.double(), activation="gelu",
                         residual=r.double())
        out.fill_(float("nan"))
        graph.replay()
        assert_close(out, ref, x.dtype)


@pytest.mark.gpu
def test_split_k_captured_on_another_stream_takes_the_spare(monkeypatch):
    """PyTorch's recipe: warmed up eagerly on one stream, captured by torch.cuda.graph on a
    stream that never ran a split launch. The eager launch left a zeroed spare workspace
    beside its own; the capture takes it, so the captured kernel is split, right at every
    replay with fresh inputs, its counters back at zero after. A second capture on yet
    another stream finds no spare left: its kernel runs unsplit, says so once, and is
    right too."""
    workspaces = _fresh_split_workspaces(monkeypatch)
    monkeypatch.setattr(workspaces, "_warned_unsplit", False)
    x, w, b, g, r, _ = _parts(4, 300, 1000, torch.bfloat16, "cuda")
    out = poisoned((4, 300), torch.bfloat16, "cuda")
    decode_plan.launch(_split_plan(4), x, w, out, g, 1e-6, b, "gelu", r, False)  # warm-up
    assert len(workspaces._spares) == 1
    keys = []
    for _ in range(2):
        stream = torch.cuda.Stream()
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            with torch.cuda.graph(graph, stream=stream):
                decode_plan.launch(_split_plan(4), x, w, out, g, 1e-6, b, "gelu", r, False)
        unsplit = [warning for warning in said
                   if "split-K kernel captured" in str(warning.message)]
        assert len(unsplit) == (1 if keys else 0)  # the second capture's, not the first
        keys.append((torch.cuda.current_device(), stream.cuda_stream))
        _replays_right(graph, out, x, w, b, g, r)
    assert keys[0] in workspaces._workspaces      # the spare, now that stream's
    assert keys[1] not in workspaces._workspaces  # none left: unsplit
    assert not workspaces._spares
    torch.cuda.synchronize()
    assert not workspaces._workspaces[keys[0]][1].any()


@pytest.mark.gpu
def test_split_k_in_a_scope_warmed_up_on_the_callers_stream_is_split(monkeypatch):
    """tg.scope captures on tilegraph's side stream; a tg.linear warmed up on the caller's
    stream in a new process (no workspace on the side stream) takes the spare there, so its
    split launch stays split, and replays right. (No norm: at this tile it runs as a kernel
    of its own, which another test puts in a scope.)"""
    from tilegraph._runtime import side_stream

    workspaces = _fresh_split_workspaces(monkeypatch)
    monkeypatch.setattr(decode_plan, "plan", lambda *a, **k: _split_plan(4))
    x, w, b, _, r, _ = _parts(4, 300, 1000, torch.bfloat16, "cuda")
    out = poisoned((4, 300), torch.bfloat16, "cuda")

    def block():
        tg.linear(x, w, b, activation="gelu", residual=r, out=out)

    block()  # the warm-up tg.scope asks for, on the caller's stream
    with tg.scope() as captured:
        block()
    assert (torch.cuda.current_device(), side_stream().cuda_stream) in workspaces._workspaces
    _replays_right(captured.graph, out, x, w, b, None, r)


@pytest.mark.gpu
def test_compiling_only_compiles_a_projection_without_running_it():
    """Under compiling_only() a one-row GEMV launch compiles its kernel and writes nothing;
    after it the same launch runs on that kernel, compiling nothing, and is right."""
    from tilegraph.kernels import _matvec
    from tilegraph.kernels._launch import compiling_only

    x, w, b, g, r, ref = _parts(1, 300, 1000, torch.bfloat16, "cuda")
    config = {**gemv_config(300, 1000), "BLOCK_N": 2}   # rows a program no other test takes
    chosen = decode_plan.Plan("gemv", config)
    cache = _matvec._gemv_kernel.device_caches[torch.cuda.current_device()][0]
    out = poisoned((1, 300), torch.bfloat16, "cuda")
    with compiling_only():
        decode_plan.launch(chosen, x, w, out, g, 1e-6, b, "gelu", r, False)
    torch.cuda.synchronize()
    assert out.isnan().all()
    compiled = len(cache)
    decode_plan.launch(chosen, x, w, out, g, 1e-6, b, "gelu", r, False)
    assert len(cache) == compiled   # the launch found the kernel compiled
    assert_close(out, ref, torch.bfloat16)


def test_cublas_plan_runs_plain_projections_and_fused_calls_keep_a_kernel(device):
    """Where tuning found cuBLAS faster, plain projections go to it (bias and residual added
    after), and calls with a norm or an activation run the fastest Triton plan instead."""
    fused = decode_plan.Plan("matvec", {"BLOCK_N": 8, "BLOCK_K": 128, "num_warps": 4,
                                        "num_stages": 1, "ROW_LOOP": True})
    decode_plan.record(2, 50, 120, torch.float32,
                       decode_plan.Plan("cublas", {"fused": fused.as_dict()}))
    where = torch.device(device)
    assert decode_plan.plan(2, 50, 120, torch.float32, where).kind == "cublas"
    assert decode_plan.plan(2, 50, 120, torch.float32, where, fused=True) == fused
    x, w, b, g, r, ref = _parts(2, 50, 120, torch.float32, device)
    plain = linear_ref(x.double(), w.double(), b.double(), residual=r.double())
    assert_close(tg.linear(x, w, b, residual=r), plain, torch.float32)
    assert_close(tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r), ref,
                 torch.float32)


def test_plain_projection_runs_the_faster_of_rule_and_cublas(device, monkeypatch):
    """A plain projection (no norm, activation or residual) runs cuBLAS, as one call with or
    without bias, where its first call timed cuBLAS faster than the rule's plan (recorded
    here by hand); calls with fused parts keep a kernel; a verdict timed against another
    rule plan is not taken."""
    rows, n, k, dtype = 3, 70, 210, torch.float32
    x, w, b, g, r, ref = _parts(rows, n, k, dtype, device)
    rule = decode_plan.rule(rows, n, k, dtype, decode_plan.sm_count(torch.device(device)))
    for has_bias in (False, True):
        decode_plan._plain.record(decode_plan.plain_key(rows, n, k, dtype, has_bias, rule),
                                  {"kind": "cublas", "fused": rule.as_dict()})
    out = poisoned((rows, n), dtype, device)
    assert decode_plan.plain_plan(x, w, b, out).kind == "cublas"
    calls = []
    for name in ("matmul", "addmm"):
        real = getattr(torch, name)
        monkeypatch.setattr(torch, name, lambda *a, real=real, name=name, **kw:
                            calls.append(name) or real(*a, **kw))
    assert_close(tg.linear(x, w, b, out=out), linear_ref(x.double(), w.double(), b.double()),
                 dtype)
    assert_close(tg.linear(x, w), linear_ref(x.double(), w.double()), dtype)
    assert calls == ["addmm", "matmul"]
    assert_close(tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r), ref, dtype)
    assert calls == ["addmm", "matmul"]
    other = decode_plan.Plan("matvec", {**rule.config, "BLOCK_N": 2 * rule.config["BLOCK_N"]})
    monkeypatch.setattr(decode_plan, "rule", lambda *args: other)
    assert decode_plan.plain_plan(x, w, b, out) == other


@pytest.mark.gpu
def test_plain_projection_is_timed_against_cublas_on_first_use_outside_capture(monkeypatch):
    """Timing on: a plain projection's first call inside a capture runs the rule's plan and
    times nothing; its first call outside one times the rule's plan and cuBLAS once and
    keeps the faster; both results equal the reference."""
    rows, n, k, dtype = 6, 1000, 1800, torch.bfloat16
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    ref = linear_ref(x.double(), w.double())
    rule = decode_plan.rule(rows, n, k, dtype, decode_plan.sm_count(torch.device("cuda")))
    key = decode_plan.plain_key(rows, n, k, dtype, False, rule)
    out = poisoned((rows, n), dtype, "cuda")
    tg.linear(x, w, out=out)  # compiled (timing still off)
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    with tg.scope() as s:
        tg.linear(x, w, out=out)
    assert decode_plan._plain.lookup(key) is None
    out.fill_(float("nan"))
    s.graph.replay()
    assert_close(out, ref, dtype)
    assert_close(tg.linear(x, w), ref, dtype)
    assert decode_plan._plain.lookup(key) in (rule.as_dict(),
                                              {"kind": "cublas", "fused": rule.as_dict()})
    assert len(decode_plan._plain.timings[repr(key)]) == 2
    assert_close(tg.linear(x, w), ref, dtype)


def test_the_other_gemv_launch_is_persistent_or_a_program_a_row_block():
    """other_gemv_launch: a program a row block where the rule is persistent, persistent
    (whole rows) where it is not and the rows fit, else a program a row block."""
    persistent = decode_plan.gemv_config(11264, 2048)
    assert persistent["PROGRAMS_PER_SM"] == FIT
    assert decode_plan.other_gemv_launch(11264, 2048, persistent) == \
        decode_plan.split_gemv_config(11264, 2048)
    split = decode_plan.gemv_config(2048, 2048)
    assert "PROGRAMS_PER_SM" not in split
    other = decode_plan.other_gemv_launch(2048, 2048, split)
    assert other["PROGRAMS_PER_SM"] == FIT and other["SPLIT"] * other["CHUNK"] >= 2048
    assert "PROGRAMS_PER_SM" not in decode_plan.other_gemv_launch(
        896, 9000, decode_plan.split_gemv_config(896, 9000))  # rows past PERSISTENT_MAX_K


def test_gemv_chains_run_the_chain_band_persistent(monkeypatch):
    """plan(gemv_chain=True) makes an untuned one-row GEMV of the chain band persistent
    (bf16 from 12.75 MiB, fp16 from 14, both up to 20 MiB, rows of at most PERSISTENT_MAX_K
    columns); elsewhere, and where the step chose rows for the shape, the chain changes
    nothing."""
    _fresh_stores(monkeypatch)
    where = torch.device("cpu")
    assert decode_plan.in_launch_band(3584, 2048, torch.bfloat16)      # 14 MiB exactly
    assert not decode_plan.in_launch_band(3583, 2048, torch.bfloat16)
    band = decode_plan.in_chain_band
    assert band(2592, 2592, torch.bfloat16) and not band(2560, 2560, torch.bfloat16)
    assert band(3264, 2048, torch.bfloat16)                             # 12.75 MiB exactly
    assert not band(3263, 2048, torch.bfloat16)
    assert band(3584, 2048, torch.float16) and not band(3583, 2048, torch.float16)
    assert not band(2592, 2592, torch.float16)
    assert not band(5120, 2048, torch.float16)                          # 20 MiB: the rule's
    assert not band(1024, 9000, torch.bfloat16)                         # past PERSISTENT_MAX_K
    assert not band(2816, 2816, torch.float32)
    bf16_only = decode_plan.plan(1, 2592, 2592, torch.bfloat16, where, gemv_chain=True)
    assert bf16_only == decode_plan.Plan("gemv", decode_plan.persistent_gemv_config(2592, 2592))
    assert decode_plan.plan(1, 2592, 2592, torch.float16, where, gemv_chain=True) == \
        decode_plan.plan(1, 2592, 2592, torch.float16, where)
    for dtype in (torch.bfloat16, torch.float16):
        alone = decode_plan.plan(1, 2816, 2816, dtype, where)
        chained = decode_plan.plan(1, 2816, 2816, dtype, where, gemv_chain=True)
        assert "PROGRAMS_PER_SM" not in alone.config
        assert chained == decode_plan.Plan("gemv", decode_plan.persistent_gemv_config(2816,
                                                                                      2816))
        assert decode_plan.plan(2, 2816, 2816, dtype, where, gemv_chain=True) == \
            decode_plan.plan(2, 2816, 2816, dtype, where)
    for n, k, dtype in [(2048, 2048, torch.bfloat16), (4096, 4096, torch.bfloat16),
                        (2816, 2816, torch.float32), (1024, 9000, torch.bfloat16)]:
        assert decode_plan.plan(1, n, k, dtype, where, gemv_chain=True) == \
            decode_plan.plan(1, n, k, dtype, where)
    decode_plan.set_step_rows(2816, 2816, torch.bfloat16, 8)
    stepped = decode_plan.plan(1, 2816, 2816, torch.bfloat16, where, gemv_chain=True)
    assert stepped.config["BLOCK_N"] == 8 and "PROGRAMS_PER_SM" not in stepped.config


def test_two_rows_of_8_to_64_mib_take_the_persistent_gemv():
    """Two 16-bit rows of 8 to 64 MiB of weights: the persistent GEMV, 16 KB tiles over 4
    warps, 4 programs an SM (NARROW), for rows of up to 4096 columns, the one-row persistent config
    for longer ones; none outside that window, past PERSISTENT_MAX_K columns, in fp32 or at
    3 rows. other_plan gives the plan the rule gave before (and nothing for a non-GEMV)."""
    bf16 = torch.bfloat16
    rule = lambda rows, n, k, dtype=bf16: decode_plan.rule(rows, n, k, dtype, 132)  # noqa: E731
    shape = lambda c: (c["BLOCK_N"], c["SPLIT"] * c["CHUNK"], c["num_warps"],  # noqa: E731
                       c["PROGRAMS_PER_SM"])
    assert shape(rule(2, 2560, 2048).config) == (4, 2048, 4, 4)      # 10 MiB
    assert shape(rule(2, 6144, 4096).config) == (2, 4096, 4, 4)      # 48 MiB
    assert shape(rule(2, 3000, 1800).config) == (4, 2048, 4, 4)      # padded to 2048
    assert shape(rule(2, 896, 4864).config) == shape(decode_plan.gemv_config(2048, 8192))
    assert shape(rule(2, 2048, 8192).config) == (2, 8192, 8, FIT)
    # rows of up to 4096 columns narrow where no norm applies (the launch decides)
    assert rule(2, 2560, 2048).config["NARROW"] and rule(2, 6144, 4096).config["NARROW"]
    assert "NARROW" not in rule(2, 2048, 8192).config
    assert rule(2, 2000, 2000).kind != "gemv"                        # 7.6 MiB
    assert rule(2, 16384, 2048).kind == "dot"                        # 64 MiB
    assert rule(2, 1024, 9000).kind == "dot"                         # past 8192 columns
    assert rule(2, 2560, 2048, torch.float32).kind == "matvec"
    assert rule(3, 2560, 2048).kind == "dot"
    sms = 132
    two = rule(2, 4096, 4096)
    assert decode_plan.other_plan(2, 4096, 4096, bf16, sms, two) == decode_plan.rule(
        2, 4096, 4096, bf16, sms, two_row_gemv=False) != two
    # past 64 MiB the rule's plan is no GEMV: the persistent two-row GEMV is timed beside it
    for n, k in ((8192, 8192), (14336, 4096), (151936, 896)):
        assert rule(2, n, k).kind == "dot"
        wide = decode_plan.other_plan(2, n, k, bf16, sms, rule(2, n, k))
        assert wide == decode_plan.Plan("gemv", two_row_gemv_config(n, k, most_bytes=math.inf))
        assert "PROGRAMS_PER_SM" in wide.config and decode_plan.gemv_runs(2, wide.config)
    # and past the persistent kernel's columns, the one-row tile where it runs
    assert "PROGRAMS_PER_SM" not in decode_plan.other_plan(2, 4096, 16384, bf16, sms,
                                                           rule(2, 4096, 16384)).config
    assert two in decode_plan.candidates(2, 4096, 4096, bf16, sms)
    persistent = [p for p in decode_plan.candidates(4, 4096, 4096, bf16, sms)
                  if "PROGRAMS_PER_SM" in p.config]
    assert len(persistent) == len(decode_plan.ROWS_PERSISTENT_VARIANTS)
    # rows past 4096 columns: a tail tile at one row only (the several-row kernel has none)
    for rows in (1, 2, 4):
        gemvs = [p for p in decode_plan.candidates(rows, 2048, 5632, bf16, sms)
                 if p.kind == "gemv"]
        assert all(decode_plan.gemv_runs(rows, p.config) for p in gemvs)
        assert any(p.config.get("TAIL") for p in gemvs) == (rows == 1)


def _plain_call_times_rule_other_and_cublas(rows, n, k, monkeypatch, dtype=torch.bfloat16):
    """Timing on, tg.linear's first call on (rows, k) x (n, k) times the rule's plan, its
    other plan and cuBLAS, keeps one of them, and equals the reference; so does each plan
    launched alone. Returns (rule, other)."""
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    ref = linear_ref(x.double(), w.double())
    sms = decode_plan.sm_count(torch.device("cuda"))
    rule = decode_plan.rule(rows, n, k, dtype, sms)
    other = decode_plan.other_plan(rows, n, k, dtype, sms, rule)
    key = decode_plan.plain_key(rows, n, k, dtype, False, rule)
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    assert_close(tg.linear(x, w), ref, dtype)
    assert decode_plan._plain.lookup(key) in (rule.as_dict(), other.as_dict(),
                                              {"kind": "cublas", "fused": rule.as_dict()})
    assert len(decode_plan._plain.timings[repr(key)]) == 3
    for plan in (rule, other):
        out = poisoned((rows, n), dtype, "cuda")
        decode_plan.launch(plan, x, w, out, None, 0.0, None, "none", None, False)
        assert_close(out, ref, dtype, what=str(plan))
    return rule, other


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [3, 16])
def test_plain_split_k_projection_times_its_equal_cut(rows, monkeypatch):
    """3 or 16 rows of 3000 x 2600 (21 steps of 128 columns in 5 slices): the first call
    times the rule's split (dealt evenly), the same cut into slices of equal width and
    cuBLAS, keeps the fastest, and equals the reference either way."""
    _, equal = _plain_call_times_rule_other_and_cublas(rows, 3000, 2600, monkeypatch)
    assert equal.config["EVEN_SPLIT"] is False


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [5, 12])
def test_plain_wide_projection_times_the_x_left_tile(rows, monkeypatch):
    """5 or 12 rows of 9100 x 700 (the weight-left tile unsplit, K not a multiple of its
    128 columns): the first call times it, the x-left tile and cuBLAS, keeps the fastest,
    and equals the reference either way."""
    rule, x_left = _plain_call_times_rule_other_and_cublas(rows, 9100, 700, monkeypatch)
    assert rule.config["W_LHS"] and "W_LHS" not in x_left.config


@pytest.mark.gpu
def test_plain_fp32_rows_time_the_row_loop(monkeypatch):
    """6 fp32 rows of 3000 x 1000: the first call times the rule's tf32x3 plan, the
    CUDA-core row loop and cuBLAS, keeps the fastest, and equals the reference either way."""
    rule, loop = _plain_call_times_rule_other_and_cublas(6, 3000, 1000, monkeypatch,
                                                         torch.float32)
    assert rule.kind == "dot" and loop.kind == "matvec"


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 2])
def test_one_or_two_row_plain_projection_times_both_plans(rows, monkeypatch):
    """One row or two: the first call times the rule's GEMV, its other plan and cuBLAS,
    keeps the fastest, and equals the reference either way."""
    rule, _ = _plain_call_times_rule_other_and_cublas(rows, 3000, 1800, monkeypatch)
    assert rule.kind == "gemv"


@pytest.mark.gpu
def test_plain_projection_without_room_to_time_runs_the_rule(monkeypatch):
    """Timing on, but the weight's copies do not fit in memory: the call runs the rule's
    plan correctly instead of failing, records nothing, and times again another time."""
    rows, n, k, dtype = 5, 1100, 700, torch.bfloat16
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    rule = decode_plan.rule(rows, n, k, dtype, decode_plan.sm_count(torch.device("cuda")))
    key = decode_plan.plain_key(rows, n, k, dtype, False, rule)

    def no_room(self):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    monkeypatch.setattr(decode_plan.RotatedCopies, "__call__", no_room)
    out = poisoned((rows, n), dtype, "cuda")
    assert decode_plan.plain_plan(x, w, None, out) == rule
    assert_close(tg.linear(x, w, out=out), linear_ref(x.double(), w.double()), dtype)
    assert decode_plan._plain.lookup(key) is None


def test_late_release_is_taken_by_one_row_gemv_plans_of_its_shape(device):
    """A shape recorded to release the next kernel late gets RELEASE_AFTER_INPUTS in its
    one-row GEMV plan only (not at 2 rows, not another shape), computes the same, and
    goes back to the rule's plan when recorded early again."""
    n, k, dtype, where = 77, 300, torch.bfloat16, torch.device(device)
    rule = decode_plan.plan(1, n, k, dtype, where)
    assert rule.kind == "gemv" and "RELEASE_AFTER_INPUTS" not in rule.config
    two_rows = decode_plan.plan(2, n, k, dtype, where)
    decode_plan.set_late_release(n, k, dtype, True)
    late = decode_plan.plan(1, n, k, dtype, where)
    assert late == decode_plan.Plan("gemv", {**rule.config, "RELEASE_AFTER_INPUTS": True})
    assert decode_plan.plan(2, n, k, dtype, where) == two_rows
    assert decode_plan.plan(1, n, k + 1, dtype, where).config.get("RELEASE_AFTER_INPUTS") is None
    x, w, b, g, r, ref = _parts(1, n, k, dtype, device)
    assert_close(_run(late, x, w, b, g, r, pdl=_pdl.use_pdl(where, ())), ref, dtype)
    decode_plan.set_late_release(n, k, dtype, False)
    assert decode_plan.plan(1, n, k, dtype, where) == rule


@pytest.mark.parametrize("rows, pairs, variants", [
    (8, False, [4, 16]), (16, True, [8]), (2, True, [4]), (2, False, [1, 4]), (1, False, [2])])
def test_gemv_rows_variants_halve_and_double_within_the_kernel_s_bounds(rows, pairs,
                                                                        variants):
    config = {"BLOCK_N": rows, "SPLIT": 8, "CHUNK": 128, "num_warps": 4, "num_stages": 1}
    assert decode_plan.gemv_rows_variants(config, pairs) == variants


def test_step_rows_are_taken_by_one_row_gemv_plans_of_their_shape(device, monkeypatch):
    """Rows a program recorded for a shape replace the one-row GEMV plan's BLOCK_N only (not
    at 2 rows, not another shape), compute the same at an awkward size, and None gives the
    plan's own back."""
    _fresh_stores(monkeypatch)
    n, k, dtype, where = 77, 300, torch.bfloat16, torch.device(device)
    own = decode_plan.plan(1, n, k, dtype, where)
    assert own.kind == "gemv"
    two_rows = decode_plan.plan(2, n, k, dtype, where)
    other_shape = decode_plan.plan(1, n, k + 1, dtype, where)
    for rows in decode_plan.gemv_rows_variants(own.config, pairs=False):
        decode_plan.set_step_rows(n, k, dtype, rows)
        changed = decode_plan.plan(1, n, k, dtype, where)
        assert changed == decode_plan.Plan("gemv", {**own.config, "BLOCK_N": rows})
        assert decode_plan.plan(2, n, k, dtype, where) == two_rows
        assert decode_plan.plan(1, n, k + 1, dtype, where) == other_shape
        x, w, b, g, r, ref = _parts(1, n, k, dtype, device)
        assert_close(_run(changed, x, w, b, g, r, pdl=_pdl.use_pdl(where, ())), ref, dtype)
    decode_plan.set_step_rows(n, k, dtype, None)
    assert decode_plan.plan(1, n, k, dtype, where) == own


def _fresh_stores(monkeypatch, stores=(tune.gemv_rows_in_step, decode_plan._step_rows)):
    """This test's choices only, in memory and on disk (by default the one-row rows')."""
    for store in stores:
        monkeypatch.setattr(store, "_memo", {})
        monkeypatch.setattr(store, "_disk_loaded", True)


def _timed_step(positions, costs, monkeypatch):
    """Stands for a captured step whose replay takes 0.5 ms plus, for each projection, the
    cost (ms) of the rows a program its plan has now, or of OTHER_LAUNCH (`costs`: name ->
    (N, K, {rows: ms}); 0.4 ms for a variant not named)."""
    _time_modeled_steps(monkeypatch)

    def variant(n, k):  # the rows a program its plan has now, or OTHER_LAUNCH
        if decode_plan.step_rows(n, k, torch.bfloat16) == decode_plan.OTHER_LAUNCH:
            return decode_plan.OTHER_LAUNCH
        return decode_plan.plan(1, n, k, torch.bfloat16, positions.device).config["BLOCK_N"]

    def capture_step():
        return _modeled_step(
            0.5 + sum(cost.get(variant(n, k), 0.4) for n, k, cost in costs.values()))
    return capture_step


def _modeled_step(ms: float):
    """A captured step stand-in whose replay takes `ms`, as _time_modeled_steps' timer reads
    it."""
    class Step:
        outputs = torch.ones(1)

        def replay(self):
            pass
    step = Step()
    step.ms = ms
    return step


def _time_modeled_steps(monkeypatch):
    """timing.measure of a _modeled_step's replay: it replays once and reads the modeled time.
    No clock, so a loaded machine cannot reorder equally costly variants (host busy waits in
    their place did, in full `make test` runs on two cores, past a 10% margin)."""
    def measure(fn, **_):
        fn()
        ms = fn.__self__.ms
        return timing.Stats(ms, ms, ms, ms, ms, n=1, clock="modeled")
    monkeypatch.setattr(timing, "measure", measure)


def test_rows_a_program_are_chosen_in_the_step_each_and_together(monkeypatch):
    """Each projection's faster variant is found by timing the step one projection at a time;
    where two are faster, both are timed together again and kept; a projection whose variants
    are no faster than its own rows keeps them; a later process records the step's choice
    again, timing nothing."""
    _fresh_stores(monkeypatch)
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    projections = {"output": (96, 1000, False), "gate/up": (5000, 2048, True),
                   "down": (96, 2048, False)}
    own = {name: decode_plan.plan(1, n, k, dtype, positions.device).config["BLOCK_N"]
           for name, (n, k, _) in projections.items()}
    assert set(own.values()) <= set(range(2, 9))  # every variant exists
    # output faster at half its rows, gate/up at twice; down as fast at half as at its own
    # (within the margin: not taken), slower at twice
    faster = {"output": own["output"] // 2, "gate/up": own["gate/up"] * 2}
    costs = {name: (n, k, {rows: 0.0 if rows == faster.get(name)
                           else 0.4 if rows in (own[name], own[name] // 2) else 0.8
                           for rows in (own[name] // 2, own[name], own[name] * 2)})
             for name, (n, k, _) in projections.items()}
    step = ("a step",)
    result = tune.tune_gemv_rows_in_step_once(
        step, projections, dtype, _timed_step(positions, costs, monkeypatch), positions, 300,
        2e-2)
    expected = faster
    assert result is not None and result["rows"] == expected
    assert tune.gemv_rows_in_step.lookup(step) == {"rows": expected}
    for name, (n, k, _) in projections.items():
        assert decode_plan.step_rows(n, k, dtype) == expected.get(name)
    for n, k, _ in projections.values():  # another step chose since
        decode_plan.set_step_rows(n, k, dtype, None)

    def no_capture():
        raise AssertionError("a step chosen before was timed again")
    assert tune.tune_gemv_rows_in_step_once(step, projections, dtype, no_capture, positions,
                                            300, 2e-2) is None
    for name, (n, k, _) in projections.items():
        assert decode_plan.step_rows(n, k, dtype) == expected.get(name)


def test_the_other_launch_is_chosen_in_the_step_where_it_is_faster(monkeypatch):
    """On weights of STEP_LAUNCH_MIN_BYTES up to PERSISTENT_MIN_BYTES the step also times
    the one-row GEMV launched the other way (persistent), keeps it where the step is faster
    with it, and the plan then is other_gemv_launch's; smaller and larger weights and fp32
    are not offered it."""
    _fresh_stores(monkeypatch)
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    n, k = 4096, 2048                                   # 16 MiB: a program a row block
    own = decode_plan.plan(1, n, k, dtype, positions.device)
    assert "PROGRAMS_PER_SM" not in own.config
    other = decode_plan.OTHER_LAUNCH
    assert other in decode_plan.step_variants(n, k, dtype, own.config, pairs=False)
    small = decode_plan.plan(1, 1024, 2048, dtype, positions.device).config   # 4 MiB
    assert other not in decode_plan.step_variants(1024, 2048, dtype, small, pairs=False)
    assert other not in decode_plan.step_variants(n, k, torch.float32, own.config, False)
    large = decode_plan.plan(1, 8192, 2048, dtype, positions.device).config   # 32 MiB
    assert large.get("PROGRAMS_PER_SM") == FIT
    assert other not in decode_plan.step_variants(8192, 2048, dtype, large, pairs=False)
    costs = {"output": (n, k, {own.config["BLOCK_N"]: 0.4, other: 0.0})}
    result = tune.tune_gemv_rows_in_step_once(
        ("a step",), {"output": (n, k, False)}, dtype,
        _timed_step(positions, costs, monkeypatch), positions, 300, 2e-2)
    assert result is not None and result["rows"] == {"output": other}
    chosen = decode_plan.plan(1, n, k, dtype, positions.device)
    assert chosen == decode_plan.Plan("gemv", decode_plan.other_gemv_launch(n, k, own.config))
    assert chosen.config.get("PROGRAMS_PER_SM") == FIT
    decode_plan.set_step_rows(n, k, dtype, None)


def test_short_rows_are_offered_small_persistent_tiles_in_the_step(monkeypatch):
    """16-bit one-row weights of SMALL_MIN_BYTES or more in rows of at most SMALL_MAX_K
    columns are offered SMALL_LAUNCH in the step (Qwen2-0.5B's q|k|v, output and gate/up,
    TinyLlama's output projection; not down projections' 4864 and 5632 columns, fp32, nor
    under SMALL_MIN_BYTES); recorded, the plan is small_persistent_gemv_config's."""
    _fresh_stores(monkeypatch)
    dtype, device, small = torch.bfloat16, torch.device("cpu"), decode_plan.SMALL_LAUNCH
    offered = {}
    for n, k, pairs in ((1152, 896, True), (896, 896, False), (9728, 896, True),
                        (2048, 2048, False), (896, 4864, False), (2048, 5632, False),
                        (300, 1000, False)):
        own = decode_plan.plan(1, n, k, dtype, device).config
        offered[n, k] = small in decode_plan.step_variants(n, k, dtype, own, pairs)
    assert offered == {(1152, 896): True, (896, 896): True, (9728, 896): True,
                       (2048, 2048): True, (896, 4864): False, (2048, 5632): False,
                       (300, 1000): False}
    own = decode_plan.plan(1, 9728, 896, torch.float32, device).config
    assert small not in decode_plan.step_variants(9728, 896, torch.float32, own, True)
    decode_plan.set_step_rows(9728, 896, dtype, small)
    chosen = decode_plan.plan(1, 9728, 896, dtype, device)
    assert chosen == decode_plan.Plan(
        "gemv", small_persistent_gemv_config(9728, 896))
    assert chosen.config["BLOCK_N"] == 8 and chosen.config["PROGRAMS_PER_SM"] == FIT
    decode_plan.set_step_rows(9728, 896, dtype, None)


def test_projections_of_one_shape_share_rows_in_pairs_if_one_needs_them(monkeypatch):
    """Rows are recorded per shape: a SwiGLU projection and a plain one of the same shape
    never get an odd row count, however fast the plain one would be with it."""
    _fresh_stores(monkeypatch)
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    n, k = 896, 4864
    assert decode_plan.plan(1, n, k, dtype, positions.device).config["BLOCK_N"] == 2
    costs = {"down": (n, k, {1: 0.0, 2: 0.4, 4: 0.8})}
    result = tune.tune_gemv_rows_in_step_once(
        ("a step",), {"gate/up": (n, k, True), "down": (n, k, False)}, dtype,
        _timed_step(positions, costs, monkeypatch), positions, 300, 2e-2)
    assert result is not None and result["rows"] == {}
    assert decode_plan.step_rows(n, k, dtype) is None


def test_rows_a_program_are_not_chosen_where_nothing_may_be_timed(monkeypatch):
    """Without timing (CPU, TILEGRAPH_AUTOTUNE=0) a step never chosen changes no shape's
    rows, those another step chose included."""
    _fresh_stores(monkeypatch)
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    decode_plan.set_step_rows(96, 160, dtype, 2)

    def no_capture():
        raise AssertionError("timed without timing")
    monkeypatch.setattr(tune, "timing_enabled", lambda: False)
    assert tune.tune_gemv_rows_in_step_once(("a step",), {"output": (96, 160, False)}, dtype,
                                            no_capture, positions, 300, 2e-2) is None
    assert decode_plan.step_rows(96, 160, dtype) == 2
    assert tune.gemv_rows_in_step.lookup(("a step",)) is None


def test_release_points_chosen_in_a_step_are_recorded_again_per_shape(monkeypatch):
    """A later process finds a step's choice and records it for each projection's shape
    again (another step may have chosen since), timing nothing; a step never timed, where
    nothing may be timed, changes nothing."""
    monkeypatch.setattr(tune.release_in_step, "_memo", {})
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    projections = {"output": (96, 160), "gate/up": (512, 96)}
    tune.release_in_step.record(("a step",), {"late": ["gate/up"]})
    decode_plan.set_late_release(512, 96, dtype, False)
    decode_plan.set_late_release(96, 160, dtype, True)

    def no_capture():
        raise AssertionError("a step chosen before was timed again")
    assert tune.tune_release_in_step_once(("a step",), projections, dtype, no_capture,
                                          positions, 300, 2e-2) is None
    assert decode_plan.releases_late(512, 96, dtype)
    assert not decode_plan.releases_late(96, 160, dtype)
    assert tune.tune_release_in_step_once(("another step",), projections, dtype, no_capture,
                                          positions, 300, 2e-2) is None
    assert decode_plan.releases_late(512, 96, dtype)
    assert tune.release_in_step.lookup(("another step",)) is None


def test_an_l2_prefetch_chosen_for_a_band_is_applied_again(monkeypatch):
    """A later process finds a context band's choice of what its output projection prefetches
    and applies it, timing nothing; another band, where nothing may be timed, gets none,
    recorded nowhere."""
    monkeypatch.setattr(tune.l2_ahead_in_step, "_memo", {})
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    tune.l2_ahead_in_step.record(("a step", 256, "from 0"), {"bytes": 4 * 2**20})
    applied = []

    def no_capture():
        raise AssertionError("a band chosen before was timed again")
    assert tune.tune_l2_ahead_in_step_once(("a step",), (96, 160), 2**30, dtype,
                                           applied.append, no_capture, positions, 256,
                                           2e-2) == 4 * 2**20
    assert applied == [4 * 2**20]
    monkeypatch.setattr(tune, "timing_enabled", lambda: False)
    assert tune.tune_l2_ahead_in_step_once(("a step",), (96, 160), 2**30, dtype,
                                           applied.append, no_capture, positions, 384, 2e-2,
                                           shortest=256) == 0
    assert applied[-1] == 0 and tune.l2_ahead_in_step.lookup(("a step", 384, "from 256")) is None


def test_an_l2_prefetch_is_kept_only_where_it_beats_none_by_the_margin(monkeypatch):
    """The amounts tried are capped at the weights' size and timed in two rounds; the fastest
    is kept (applied, returned, recorded for the band) only where its step beats the step
    without a prefetch by L2_AHEAD_MARGIN. An output projection that is not the one-row GEMV
    gets none, untimed."""
    monkeypatch.setattr(tune.l2_ahead_in_step, "_memo", {})
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    dtype, positions = torch.bfloat16, torch.zeros(1, dtype=torch.int64)
    current, rounds = [None], []

    def apply(nbytes):
        current[0] = nbytes

    def timed(faster):
        def time_step_candidates(count, choose, *args, **kwargs):
            sizes = []
            for i in range(count):
                choose(i)
                sizes.append(current[0])
            rounds.append(sizes)
            return {i: 1.0 - (faster if size == 3 * 2**20 else 0.0)
                    for i, size in enumerate(sizes)}
        return time_step_candidates
    for step, faster, kept in (("slightly", 0.002, 0), ("clearly", 0.02, 3 * 2**20)):
        monkeypatch.setattr(tune, "time_step_candidates", timed(faster))
        rounds.clear()
        chosen = tune.tune_l2_ahead_in_step_once((step,), (96, 160), 3 * 2**20, dtype, apply,
                                                 None, positions, 256, 2e-2)
        assert rounds == [[0, 2**20, 2 * 2**20, 3 * 2**20]] * 2   # 4 MiB capped at 3
        assert chosen == kept == current[0]
        assert tune.l2_ahead_in_step.lookup((step, 256, "from 0")) == {"bytes": kept}
    rounds.clear()
    assert tune.tune_l2_ahead_in_step_once(("fp32",), (96, 160), 6 * 2**20, torch.float32,
                                           apply, None, positions, 256, 2e-2) == 0
    assert rounds == [] and current[0] == 0
    assert tune.l2_ahead_in_step.lookup(("fp32", 256, "from 0")) is None


def test_tuned_plans_that_lose_in_a_step_give_way_to_the_rule(monkeypatch):
    """Where `tilegraph tune` recorded a plan other than the rule's, a step tried with each
    such projection back on the rule's keeps the faster (per shape and rows, on disk, and
    under the step key, so a later process times nothing); shapes tuned to the rule's own
    plan, or not tuned, are not timed at all."""
    _fresh_stores(monkeypatch,
                  (decode_plan._tuned, decode_plan._step_rule, tune.tuned_plans_in_step))
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    dtype, rows, positions = torch.bfloat16, 8, torch.zeros(8, dtype=torch.int64)
    shapes = {"q|k|v": (2560, 2048), "gate/up": (11264, 2048), "down": (2048, 5632),
              "output": (2048, 2048)}
    rule = {name: decode_plan.rule(rows, *nk, dtype, None) for name, nk in shapes.items()}
    other = decode_plan.Plan("dot", {**rule["q|k|v"].config, "num_stages": 5})
    for name in ("q|k|v", "gate/up"):
        decode_plan.record(rows, *shapes[name], dtype, other)
    decode_plan.record(rows, *shapes["down"], dtype, rule["down"])   # tuned to the rule's own
    assert [decode_plan.tuned_differs(rows, *nk, dtype, positions.device)
            for nk in shapes.values()] == [True, True, False, False]
    assert decode_plan.plan(rows, *shapes["q|k|v"], dtype, positions.device) == other

    def capture_step():  # q|k|v is 0.4 ms slower on its tuned plan, gate/up on the rule's
        plans = {name: decode_plan.plan(rows, *nk, dtype, positions.device)
                 for name, nk in shapes.items()}
        return _modeled_step(0.5 + 0.4 * (plans["q|k|v"] == other)
                             + 0.4 * (plans["gate/up"] != other))
    _time_modeled_steps(monkeypatch)
    said = []
    result = tune.tune_tuned_plans_in_step_once(("a step", rows), rows, shapes, dtype,
                                                capture_step, positions, 300, 2e-2,
                                                said.append)
    assert said == ["checking the tuned plans of q|k|v, gate/up in the batch-8 step"]
    assert result is not None and result["rule"] == ["q|k|v"]
    assert set(result["candidates"]) == {"none", "q|k|v", "gate/up", "q|k|v, gate/up"}
    assert decode_plan.plan(rows, *shapes["q|k|v"], dtype, positions.device) == rule["q|k|v"]
    assert decode_plan.plan(rows, *shapes["gate/up"], dtype, positions.device) == other
    assert decode_plan.plan(5, *shapes["q|k|v"], dtype, positions.device) == rule["q|k|v"]
    assert decode_plan.plan(4, *shapes["q|k|v"], dtype, positions.device) != other

    def no_capture():
        raise AssertionError("a step chosen before was timed again")
    decode_plan.set_step_rule(rows, *shapes["q|k|v"], dtype, False)  # as a new process finds
    assert tune.tune_tuned_plans_in_step_once(("a step", rows), rows, shapes, dtype,
                                              no_capture, positions, 300, 2e-2) is None
    assert decode_plan.step_takes_rule(rows, *shapes["q|k|v"], dtype)
    for store in (decode_plan._tuned, decode_plan._step_rule):
        monkeypatch.setattr(store, "_memo", {})
    assert tune.tune_tuned_plans_in_step_once(("untuned", rows), rows, shapes, dtype,
                                              no_capture, positions, 300, 2e-2,
                                              said.append) is None
    assert len(said) == 1 and tune.tuned_plans_in_step.lookup(("untuned", rows)) is None


@pytest.mark.parametrize("faster", [0.004, 0.03])
def test_whole_slice_tiles_leave_their_k_loop_out_where_the_step_is_faster(faster,
                                                                           monkeypatch):
    """Of a batch-8 step's projections, those whose plan is a whole-slice tensor-core tile
    (2048^2 and 1024 x 3072 at 8 rows, not 2560 x 2048 nor the one-row GEMV) are timed with
    their K loop out, each alone and together; one that makes the step faster is timed again
    beside none and kept only where it wins by the margin both times (0.4% does not, 3%
    does); the choice is recorded per shape and rows and under the step key, so a later
    process times nothing."""
    _fresh_stores(monkeypatch, (decode_plan._tuned, decode_plan._one_step, tune.one_step_in_step))
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    dtype, rows, positions = torch.bfloat16, 8, torch.zeros(8, dtype=torch.int64)
    shapes = {"q|k|v": (2560, 2048), "output": (2048, 2048), "down": (1024, 3072),
              "again": (2048, 2048)}
    assert [_dot_rows.one_step_a_slice(k, decode_plan.rule(rows, n, k, dtype, None).config)
            for n, k in shapes.values()] == [False, True, True, True]
    assert not decode_plan.plan(rows, 2048, 2048, dtype, positions.device).config.get(
        "ONE_STEP")

    def loop_out(n, k, rows=rows):
        return decode_plan.plan(rows, n, k, dtype, positions.device).config.get("ONE_STEP",
                                                                                False)
    timed = []

    def capture_step():  # output's loop out is `faster` ms quicker, down's 0.1 ms slower
        out = {name: loop_out(*shapes[name]) for name in ("q|k|v", "output", "down")}
        assert not out["q|k|v"]
        timed.append(", ".join(name for name, on in out.items() if on) or "none")
        return _modeled_step(1.0 - faster * out["output"] + 0.1 * out["down"])
    _time_modeled_steps(monkeypatch)
    said = []
    result = tune.tune_one_step_in_step_once(("a step", faster), rows, shapes, dtype,
                                             capture_step, positions, 300, 2e-2, said.append)
    assert said == ["timing the K loop of output, down left out in the batch-8 step"]
    kept = faster > tune.ROWS_MARGIN
    assert result is not None and result["one_step"] == (["output"] if kept else [])
    once = {"none", "output", "down", "output, down"}
    assert set(result["candidates"]) == once | ({"again none", "again output"} if kept
                                                else set())
    assert loop_out(2048, 2048) == kept and not loop_out(1024, 3072)
    assert not loop_out(2048, 2048, rows=16) and not loop_out(2560, 2048)
    assert not loop_out(2048, 2048, rows=1)   # a GEMV plan: no such key

    def no_capture():
        raise AssertionError("a step chosen before was timed again")
    decode_plan.set_one_step(rows, 2048, 2048, dtype, not kept)   # as a new process finds
    assert tune.tune_one_step_in_step_once(("a step", faster), rows, shapes, dtype,
                                           no_capture, positions, 300, 2e-2) is None
    assert loop_out(2048, 2048) == kept


def test_tune_needs_a_gpu_and_the_cli_says_so(capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from tilegraph.cli import main
    from tilegraph.tune import tune_shape

    with pytest.raises(RuntimeError, match="CUDA GPU"):
        tune_shape(2, 64, 64, torch.bfloat16)
    assert main(["tune", "--shapes", "64x64"]) == 2
    assert "there is none here" in capsys.readouterr().out


@pytest.mark.gpu
def test_tune_keeps_a_correct_plan_and_refuses_capture():
    from tilegraph.errors import CaptureError
    from tilegraph.tune import tune_shape

    result = tune_shape(4, 300, 520, torch.bfloat16)
    assert result["plan"] == decode_plan.plan(4, 300, 520, torch.bfloat16,
                                              torch.device("cuda")).as_dict()
    assert result["us"] <= min(result["candidates"].values()) + 1e-9
    x, w, b, g, r, ref = _parts(4, 300, 520, torch.bfloat16, "cuda")
    assert_close(tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r), ref,
                 torch.bfloat16)
    with pytest.raises(CaptureError, match="captured"):
        with tg.scope():
            tune_shape(4, 300, 520, torch.bfloat16)
