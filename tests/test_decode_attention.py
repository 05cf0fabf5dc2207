"""tg.decode_attention against a float64 reference: grouped-query ratios, head dims, per-sequence
lengths (0 and past the cache included), splits merged in one kernel, graph replays."""

import itertools
import math

import pytest
import torch
import triton

import tilegraph as tg
from _launches import record_launches
from tilegraph import tune
from tilegraph.kernels import _pdl
from tilegraph.kernels import decode_attention as attention
from tilegraph.kernels._launch import sm_count
from tilegraph.kernels.decode_attention import (
    MERGE_ELEMENTS,
    attention_candidates,
    attention_config,
    attention_key,
    decode_attention_in_layer,
    decode_attention_ref,
    launch_decode_attention,
    step_candidates,
)
from tilegraph.kernels.greedy import greedy_step
from tilegraph.models.hf_families import alibi_slopes
from tilegraph.testing import TOLERANCES, assert_close, poisoned, rel_error
from tilegraph.tune import tune_attention, tune_attention_in_step_once

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device, max_batch=None):
    max_batch = max_batch or batch + 1
    q = torch.randn(batch, heads, head_dim).to(dtype=dtype, device=device)
    k = torch.randn(max_batch, kv_heads, max_seq, head_dim).to(dtype=dtype, device=device)
    v = torch.randn(max_batch, kv_heads, max_seq, head_dim).to(dtype=dtype, device=device)
    return q, k, v


def _attended(in_layer, q, k, v, lengths, window=None, **extra):
    """decode_attention_in_layer's result (a model's layer merges the runs in the kernel), or
    tg.decode_attention's into a poisoned out (merged apart)."""
    if in_layer:
        return decode_attention_in_layer(q, k, v, lengths, window, **extra)
    return tg.decode_attention(q, k, v, lengths, window=window,
                               out=poisoned(q.shape, q.dtype, q.device), **extra)


def _check(q, k, v, lengths, scale=None):
    out = poisoned(q.shape, q.dtype, q.device)
    result = tg.decode_attention(q, k, v, lengths, scale, out=out)
    assert result.data_ptr() == out.data_ptr()
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths, scale)
    assert_close(result, ref, q.dtype, what=f"lengths {lengths.tolist()}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq", [
    (1, 4, 4, 64, 70),      # no grouping, two runs of the sequence
    (3, 14, 2, 24, 130),    # 7 q heads a kv head, head_dim not a power of two
    (2, 8, 1, 16, 33),      # one kv head for all (multi-query)
    (1, 2, 2, 64, 300),     # batch 1: short, one run (ONE_RUN_TILES)
    (1, 2, 2, 64, 1100),    # batch 1: many runs, merged by the last one
])
def test_matches_reference(batch, heads, kv_heads, head_dim, max_seq, dtype, device):
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device)
    lengths = torch.randint(1, max_seq + 1, (batch,), device=device)
    lengths[0] = max_seq
    _check(q, k, v, lengths)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq, window", [
    (3, 14, 2, 24, 130, 37),    # 7 q heads a kv head; the window not a multiple of a tile
    (1, 2, 2, 64, 1100, 300),   # batch 1: the window cut into runs, merged
    (2, 8, 1, 16, 33, 1),       # a window of one position: the newest token alone
    (2, 4, 4, 64, 70, 69),      # one position short of the cache
])
@pytest.mark.parametrize("in_layer", [False, True])
def test_sliding_window_matches_reference(batch, heads, kv_heads, head_dim, max_seq, window,
                                          in_layer, dtype, device):
    """A sliding window: each sequence attends to its last `window` positions (fewer where
    it is shorter), split into runs from the window's first position, merged apart (alone)
    or by the last run (in a model's layer)."""
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device)
    lengths = torch.randint(1, max_seq + 1, (batch,), device=device)
    lengths[0] = max_seq
    lengths[-1] = min(window, max_seq) if batch > 1 else lengths[-1]
    if in_layer:
        result = decode_attention_in_layer(q, k, v, lengths, window)
    else:
        result = tg.decode_attention(q, k, v, lengths, window=window,
                                     out=poisoned(q.shape, q.dtype, q.device))
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths, window=window)
    assert_close(result, ref, dtype, what=f"window {window}, lengths {lengths.tolist()}")
    whole = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
    assert not torch.allclose(ref[0], whole[0])   # the window hid positions of sequence 0


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq, window", [
    (3, 14, 2, 24, 130, None),   # 7 q heads a kv head
    (1, 2, 2, 64, 1100, 300),    # batch 1: runs merged; a window too (Gemma 2's layers)
])
@pytest.mark.parametrize("in_layer", [False, True])
def test_softcapped_scores_match_reference(batch, heads, kv_heads, head_dim, max_seq, window,
                                           in_layer, dtype, device):
    """Scores capped by softcap tanh(s / softcap) before the softmax (Gemma 2's 50; here 4
    over scores of up to about 10, so the cap changes the result)."""
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device)
    q = (q.float() * 3.0).to(dtype)
    lengths = torch.randint(1, max_seq + 1, (batch,), device=device)
    lengths[0] = max_seq
    if in_layer:
        result = decode_attention_in_layer(q, k, v, lengths, window, 4.0)
    else:
        result = tg.decode_attention(q, k, v, lengths, window=window, softcap=4.0,
                                     out=poisoned(q.shape, q.dtype, q.device))
    args = (q.double(), k.double(), v.double(), lengths)
    ref = decode_attention_ref(*args, window=window, softcap=4.0)
    assert_close(result, ref, dtype, what=f"lengths {lengths.tolist()}")
    assert rel_error(ref, decode_attention_ref(*args, window=window)) > 0.05


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq", [
    (3, 14, 2, 24, 130),   # 7 q heads a kv head: each its own slope within one tile
    (1, 5, 5, 64, 1100),   # batch 1: runs merged (a non-power-of-two head count, BLOOM's)
])
@pytest.mark.parametrize("in_layer", [False, True])
def test_alibi_matches_a_bias_from_position_zero(batch, heads, kv_heads, head_dim, max_seq,
                                                 in_layer, dtype, device):
    """ALiBi: head h's scores plus slopes[h] times the key's position, as BLOOM adds them
    (the kernel counts back from the query; the softmax drops the difference). Slopes 5x
    ALiBi's, so that distances within a tile matter."""
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device)
    slopes = (torch.tensor(alibi_slopes(heads)) * 5).to(device)
    lengths = torch.randint(1, max_seq + 1, (batch,), device=device)
    lengths[0] = max_seq
    result = _attended(in_layer, q, k, v, lengths, alibi_slopes=slopes)
    group = heads // kv_heads
    keys, values = (t[:batch].double().repeat_interleave(group, dim=1) for t in (k, v))
    positions = torch.arange(max_seq, device=device, dtype=torch.float64)
    scores = (torch.einsum("bhd,bhtd->bht", q.double(), keys) * head_dim ** -0.5
              + slopes.double()[None, :, None] * positions)
    scores = scores.masked_fill(positions >= lengths[:, None, None], float("-inf"))
    ref = torch.einsum("bht,bhtd->bhd", scores.softmax(-1), values)
    assert_close(result, ref, dtype, what=f"lengths {lengths.tolist()}")
    torch.testing.assert_close(decode_attention_ref(q.double(), k.double(), v.double(),
                                                    lengths, alibi_slopes=slopes), ref)
    assert rel_error(ref, decode_attention_ref(q.double(), k.double(), v.double(),
                                               lengths)) > 0.05


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq", [
    (3, 14, 2, 24, 130),   # 7 q heads a kv head: each its own slope within one tile
    (1, 5, 5, 64, 1100),   # batch 1: runs merged
])
@pytest.mark.parametrize("in_layer", [False, True])
def test_rounded_alibi_matches_falcons_bias(batch, heads, kv_heads, head_dim, max_seq,
                                            in_layer, dtype, device):
    """Falcon's ALiBi (alibi_rounded): head h's scores plus bf16(slopes[h] * t), t the key's
    position from 0, before the scale. Slopes 5x ALiBi's, rounded to bf16 as Falcon's are:
    products of up to 5000, whose rounding (steps of 32 there) moves the result."""
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device)
    slopes = (torch.tensor(alibi_slopes(heads)) * 5).bfloat16().float().to(device)
    lengths = torch.randint(1, max_seq + 1, (batch,), device=device)
    lengths[0] = max_seq
    result = _attended(in_layer, q, k, v, lengths, alibi_slopes=slopes, alibi_rounded=True)
    group = heads // kv_heads
    keys, values = (t[:batch].double().repeat_interleave(group, dim=1) for t in (k, v))
    positions = torch.arange(max_seq, device=device)
    bias = (slopes[:, None] * positions).bfloat16().double()   # exact products, rounded once
    scores = (torch.einsum("bhd,bhtd->bht", q.double(), keys) + bias) * head_dim ** -0.5
    scores = scores.masked_fill(positions >= lengths[:, None, None], float("-inf"))
    ref = torch.einsum("bht,bhtd->bhd", scores.softmax(-1), values)
    assert_close(result, ref, dtype, what=f"lengths {lengths.tolist()}")
    args = (q.double(), k.double(), v.double(), lengths)
    torch.testing.assert_close(
        decode_attention_ref(*args, alibi_slopes=slopes, alibi_rounded=True), ref)
    unrounded = decode_attention_ref(*args, alibi_slopes=slopes * head_dim ** -0.5)
    # (the rounding moves the result past the dtype's tolerance: a kernel that left it out
    # would fail the check above)
    assert rel_error(ref, unrounded) > TOLERANCES[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq, window", [
    (3, 14, 2, 24, 130, None),   # 7 q heads a kv head; a sequence of length 0
    (1, 4, 2, 64, 1100, None),   # batch 1: runs merged
    (2, 4, 2, 64, 1100, 300),    # a sliding window cut into runs (Granite SWA's layers)
])
@pytest.mark.parametrize("in_layer", [False, True])
def test_sinks_match_an_extra_logit_without_a_value(batch, heads, kv_heads, head_dim, max_seq,
                                                    window, in_layer, dtype, device):
    """Attention sinks: each head's softmax over its positions and one more logit, sinks[h],
    whose value is zero (as GPT-OSS and Granite SWA add them), merged across runs alike.
    Sinks of -1 to 7: next to a thousand positions' scores too, they move the result."""
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, device)
    sinks = torch.linspace(-1.0, 7.0, heads).to(dtype=dtype, device=device)
    lengths = torch.randint(1, max_seq + 1, (batch,), device=device)
    lengths[0] = max_seq
    if batch > 2:
        lengths[-1] = 0
    result = _attended(in_layer, q, k, v, lengths, window, sinks=sinks)
    group = heads // kv_heads
    keys, values = (t[:batch].double().repeat_interleave(group, dim=1) for t in (k, v))
    positions = torch.arange(max_seq, device=device)
    scores = torch.einsum("bhd,bhtd->bht", q.double(), keys) * head_dim ** -0.5
    hidden = positions >= lengths[:, None]
    if window is not None:
        hidden |= positions < lengths[:, None] - window
    scores = scores.masked_fill(hidden[:, None, :], float("-inf"))
    weights = torch.exp(scores - sinks.double()[None, :, None])   # relative to the sink
    ref = torch.einsum("bht,bhtd->bhd", weights / (1 + weights.sum(-1, keepdim=True)), values)
    assert_close(result, ref, dtype, what=f"lengths {lengths.tolist()}")
    args = (q.double(), k.double(), v.double(), lengths)
    torch.testing.assert_close(decode_attention_ref(*args, window=window, sinks=sinks), ref)
    assert rel_error(ref, decode_attention_ref(*args, window=window)) > 0.02


def test_alibi_rounded_needs_slopes(device):
    q, k, v = _case(1, 4, 2, 16, 20, torch.float32, device)
    lengths = torch.tensor([20], device=device)
    for slopes, rounded in ((None, True), (torch.ones(4, device=device), 1)):
        with pytest.raises(ValueError, match="alibi_rounded"):
            tg.decode_attention(q, k, v, lengths, alibi_slopes=slopes, alibi_rounded=rounded)


@pytest.mark.parametrize("name, wrong_dtype", [("alibi_slopes", torch.float16),
                                               ("sinks", torch.int32)])
def test_per_head_inputs_are_checked(name, wrong_dtype, device):
    """ALiBi's slopes (fp32 only) and the sinks (any float): a tensor of one value a q head,
    contiguous, on q's device."""
    q, k, v = _case(1, 4, 2, 16, 20, torch.float32, device)
    lengths = torch.tensor([20], device=device)
    for given, error in ((torch.ones(4, dtype=wrong_dtype, device=device), TypeError),
                         ([0.5] * 4, TypeError),
                         (torch.ones(2, device=device), ValueError),
                         (torch.ones(8, device=device)[::2], ValueError)):
        with pytest.raises(error, match=name):
            tg.decode_attention(q, k, v, lengths, **{name: given})


def test_softcap_must_be_positive(device):
    q, k, v = _case(1, 2, 2, 16, 20, torch.float32, device)
    lengths = torch.tensor([20], device=device)
    for softcap in (0, -1.0, math.inf, True, "50"):
        with pytest.raises(ValueError, match="softcap must be a positive number"):
            tg.decode_attention(q, k, v, lengths, softcap=softcap)


def test_a_window_past_the_cache_attends_to_every_position(device):
    q, k, v = _case(2, 4, 2, 16, 40, torch.float32, device)
    lengths = torch.tensor([40, 17], device=device)
    assert torch.equal(tg.decode_attention(q, k, v, lengths, window=40),
                       tg.decode_attention(q, k, v, lengths))
    for window in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="window must be a positive int"):
            tg.decode_attention(q, k, v, lengths, window=window)


def test_lengths_of_zero_and_past_the_cache(device):
    q, k, v = _case(3, 4, 2, 16, 40, torch.float32, device)
    lengths = torch.tensor([0, 40 + 9, 1], device=device)   # read clamped to [0, max_seq]
    out = tg.decode_attention(q, k, v, lengths)
    assert torch.equal(out[0], torch.zeros_like(out[0])), "a length of 0 attends to nothing"
    _check(q, k, v, lengths)
    assert_close(out[2], v[2, :, 0].repeat_interleave(2, dim=0), what="one position: its v")


def test_int32_lengths_scale_and_strided_q(device):
    q, k, v = _case(2, 6, 3, 32, 50, torch.float32, device)
    wide = torch.randn(2, 6, 48, device=device)
    wide[..., :32] = q
    lengths = torch.tensor([50, 17], dtype=torch.int32, device=device)
    _check(wide[..., :32], k, v, lengths, scale=0.3)


def test_uniform_values_give_that_value(device):
    q, k, v = _case(2, 4, 2, 16, 90, torch.float32, device)
    v[:] = torch.arange(16, dtype=torch.float32, device=device)
    out = tg.decode_attention(q * 50, k, v, torch.tensor([90, 61], device=device))
    torch.testing.assert_close(out, v[0, 0, :1].expand_as(out).contiguous())


def test_split_count_fills_the_gpu_within_the_merge_and_the_cache():
    assert attention_config(1, 4, 8, 64, 2048, 132)["SPLITS"] == 16    # merge-bound
    # at most a program an SM: 4 x 32 pairs is one wave of 132 SMs, 5 x 32 would be two
    assert attention_config(1, 32, 1, 128, 8192, 132)["SPLITS"] == 4
    assert attention_config(8, 8, 4, 128, 8192, 132)["SPLITS"] == 2
    assert attention_config(1, 4, 8, 64, 300, 132)["SPLITS"] == 3      # one a tile of max_seq
    assert attention_config(16, 32, 1, 64, 4096, 132)["SPLITS"] == 1
    assert attention_config(16, 32, 1, 64, 4096, 132, programs_per_sm=2)["SPLITS"] == 1
    assert attention_config(8, 8, 1, 128, 4096, 132, programs_per_sm=2)["SPLITS"] == 4
    assert attention_config(1, 1, 32, 64, 64, 132, head_blocks=1)["BLOCK_G"] == 32
    for group, head_dim, chunks in itertools.product((1, 2, 7, 8, 32), (64, 128, 256),
                                                     (1, 2, 4)):
        config = attention_config(1, 1, group, head_dim, 65536, 132, merge_chunks=chunks)
        merged = config["MERGE_RUNS"] * config["GROUP_P2"] * config["BLOCK_D"]
        assert merged <= MERGE_ELEMENTS, (group, head_dim, config)
        assert config["SPLITS"] <= chunks * max(config["MERGE_RUNS"], 1)
        assert config["MERGE_RUNS"] <= config["BLOCK_SPLITS"]
    # more runs than one merge holds, where few pairs would leave most SMs idle
    assert attention_config(1, 4, 8, 64, 8192, 132, merge_chunks=2)["SPLITS"] == 32
    assert attention_config(1, 4, 8, 64, 8192, 132, merge_chunks=2)["MERGE_RUNS"] == 16
    # q heads in blocks: a program each, the merge's cap counted per block, none empty
    blocks = attention_config(1, 4, 7, 128, 8192, 132, head_blocks=2)
    assert (blocks["HEAD_BLOCKS"], blocks["GROUP_P2"], blocks["SPLITS"]) == (2, 4, 16)
    assert attention_config(1, 4, 6, 128, 8192, 132, head_blocks=4)["HEAD_BLOCKS"] == 3
    assert attention_config(1, 4, 1, 128, 8192, 132, head_blocks=2)["HEAD_BLOCKS"] == 1


def _programs(config: dict, batch: int, n_kv_heads: int) -> int:
    return batch * n_kv_heads * config["HEAD_BLOCKS"] * config["SPLITS"]


@pytest.mark.parametrize("batch, n_kv_heads, group, head_dim, max_seq, blocks", [
    (1, 4, 7, 128, 8192, 2),   # the merge's cap: 4 pairs x 8 runs on 132 SMs
    (2, 4, 7, 128, 4096, 2),
    (1, 4, 8, 64, 8192, 2),    # TinyLlama's layout
    (2, 4, 8, 64, 8192, 1),    # 8 pairs x 16 runs fill the SMs already
    (1, 8, 4, 128, 8192, 1),
    (1, 2, 7, 64, 2048, 4),    # a short cache: 2 pairs x 16 tiles
    (1, 2, 7, 64, 128, 7),     # one tile: a head a program
    (4, 32, 1, 128, 8192, 1),  # no group to split
])
def test_rule_splits_q_heads_while_half_the_sms_would_idle(batch, n_kv_heads, group,
                                                            head_dim, max_seq, blocks):
    config = attention_config(batch, n_kv_heads, group, head_dim, max_seq, 132)
    assert config["HEAD_BLOCKS"] == blocks
    assert _programs(config, batch, n_kv_heads) <= 132
    if blocks > 1:  # the blocks before filled at most half the SMs
        fewer = attention_config(batch, n_kv_heads, group, head_dim, max_seq, 132,
                                 head_blocks=blocks // 2)
        assert 2 * _programs(fewer, batch, n_kv_heads) <= 132
    if blocks < group:
        assert 2 * _programs(config, batch, n_kv_heads) > 132
    # two programs an SM: twice the slots to fill
    doubled = attention_config(batch, n_kv_heads, group, head_dim, max_seq, 132,
                               programs_per_sm=2)
    assert doubled["HEAD_BLOCKS"] >= blocks


def _pipeline(config: dict) -> tuple[int, int]:
    return config["BLOCK_T"], config["num_stages"]


H100_SHARED, A100_SHARED, SM86_SHARED = 232448, 166912, 101376  # bytes a program may use


@pytest.mark.parametrize("shape, element_size, shared, pipeline", [
    ((8, 32, 1, 128, 1024), 2, H100_SHARED, (128, 3)),   # 16 tiles a run: twice the tile
    ((8, 32, 1, 128, 300), 2, H100_SHARED, (64, 4)),     # 4.7 tiles a run: 4 deep
    ((8, 32, 1, 128, 200), 2, H100_SHARED, (64, 3)),     # 3.1: the default
    ((6, 32, 1, 128, 700), 2, H100_SHARED, (64, 3)),     # 192 programs: a wave 45% full
    ((16, 32, 1, 128, 4096), 2, H100_SHARED, (128, 3)),  # 512: 4 waves, 97% full
    ((4, 8, 8, 64, 8192), 2, H100_SHARED, (256, 3)),     # head_dim 64: tiles of 128 doubled
    ((1, 4, 8, 64, 2048), 2, H100_SHARED, (128, 3)),     # TinyLlama b1: one tile a run
    ((8, 32, 1, 128, 1024), 2, A100_SHARED, (64, 4)),    # twice the tile does not fit
    ((8, 32, 1, 128, 1024), 2, SM86_SHARED, (64, 3)),    # nor 4 deep
    ((8, 32, 1, 128, 1024), 4, H100_SHARED, (64, 3)),    # fp32 caches: twice the bytes
])
def test_rule_keeps_more_loads_in_flight_on_long_runs(shape, element_size, shared, pipeline):
    config = attention_config(*shape, 132, element_size=element_size, shared_memory=shared)
    assert _pipeline(config) == pipeline
    tile, stages = pipeline
    default = attention_config(*shape, 132, tile=attention.default_tile(shape[3]))
    if pipeline != _pipeline(default):  # deeper only where it fits, with room to spare
        assert stages * 2 * tile * config["BLOCK_D"] * element_size + 32 * 1024 <= shared
    # the splits are the default pipeline's: a doubled tile leaves each run 4 of them or more
    assert config["SPLITS"] == default["SPLITS"] and _pipeline(default)[1] == 3
    # given a tile or stages, the other stays the default
    assert _pipeline(attention_config(*shape, 132, stages=4)) == (default["BLOCK_T"], 4)
    assert _pipeline(attention_config(*shape, 132, tile=32)) == (32, 3)


@pytest.mark.parametrize("head_dim, element_size, shared, pipeline", [
    (256, 4, H100_SHARED, (32, 3)),   # fp32 heads of 256 (Gemma's in fp32): half the tile
    (256, 2, H100_SHARED, (64, 3)),   # in 16 bits the default fits
    (256, 4, SM86_SHARED, (16, 3)),
    (512, 4, SM86_SHARED, (16, 2)),   # the smallest tile, then fewer stages
])
def test_tiles_in_flight_fit_shared_memory(head_dim, element_size, shared, pipeline):
    """The rule's tile (and, past the smallest tile, its stages) halved until the keys and
    values Triton keeps in flight (stages - 1 tiles) fit a program's shared memory: an
    untuned shape must launch (the tuner skips a candidate that does not)."""
    for stages in (None, 4):
        config = attention_config(4, 1, 4, head_dim, 2048, 132, stages=stages,
                                  element_size=element_size, shared_memory=shared)
        tile, depth = _pipeline(config)
        assert (depth - 1) * 2 * tile * config["BLOCK_D"] * element_size + 32 * 1024 <= shared
        if stages is None:
            assert (tile, depth) == pipeline


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch, heads, kv_heads, head_dim, max_seq, pipeline", [
    (8, 32, 32, 128, 300, (64, 4)), (3, 28, 4, 128, 6001, (128, 3)),
    (8, 16, 8, 64, 4099, (256, 3)), (5, 12, 2, 128, 2500, (64, 4)),
])
def test_deeper_pipelines_match_reference(batch, heads, kv_heads, head_dim, max_seq,
                                          pipeline, dtype):
    """The rule's pipelines on an H100 or H200 (132 SMs, 227 KB a program), whatever this
    GPU's rule would choose."""
    config = attention_config(batch, kv_heads, heads // kv_heads, head_dim, max_seq, 132)
    assert _pipeline(config) == pipeline
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, "cuda")
    lengths = torch.randint(1, max_seq + 1, (batch,), device="cuda")
    lengths[0] = max_seq
    out = poisoned(q.shape, q.dtype, q.device)
    launch_decode_attention(q, k, v, lengths, head_dim ** -0.5, out, config)
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
    assert_close(out, ref, dtype, what=f"lengths {lengths.tolist()}")


@pytest.mark.parametrize("shape", [(1, 4, 8, 64, 2048), (8, 32, 1, 128, 4096),
                                   (3, 2, 7, 24, 300), (16, 8, 4, 128, 1024),
                                   (1, 4, 7, 128, 8192)])
def test_candidates_start_with_the_rule_and_fit_the_merge(shape):
    candidates = attention_candidates(*shape, 132)
    # the rule alone: runs merged apart where the launch splits; the layer's rule timed too
    assert candidates[0] == attention_config(*shape, 132, merge_apart=True)
    assert attention_config(*shape, 132) in candidates
    assert len({repr(c) for c in candidates}) == len(candidates) >= 2
    for config in candidates:
        assert config["SPLITS"] <= config["BLOCK_SPLITS"]
        assert config["MERGE_RUNS"] * config["GROUP_P2"] * config["BLOCK_D"] <= MERGE_ELEMENTS
    # where the merge's cap leaves SMs idle, twice the runs merged in two chunks is timed
    chunked = [c for c in candidates
               if c["MERGE_RUNS"] < c["BLOCK_SPLITS"] and not c.get("MERGE_APART")]
    assert bool(chunked) == (shape == (1, 4, 7, 128, 8192))
    # and q heads in blocks, wherever a group has more than one
    blocks = {c["HEAD_BLOCKS"] for c in candidates}
    assert {1, 2, 4} & set(range(1, shape[2] + 1)) <= blocks <= set(range(1, shape[2] + 1))


@pytest.mark.parametrize("splits, block_t, one_run_tiles, merge_runs, head_blocks, run_tiles", [
    (8, 16, 0, 8, 1, 1),     # runs of two tiles, fewer used than programs; a length of 0
    (16, 64, 0, 16, 1, 1),   # runs of one tile; idle runs
    (16, 64, 3, 16, 1, 1),   # short sequences in one run, written with no merge; idle runs
    (12, 16, 0, 4, 1, 1),    # merged four runs at a time: 10 runs used by 150 positions (4, 4, 2)
    (16, 16, 0, 2, 1, 1),    # two at a time: 3 runs used by 37 positions (2, 1)
    (8, 16, 0, 8, 2, 1),     # 7 q heads a kv head in blocks of 4 and 3, each merged apart
    (16, 64, 3, 16, 4, 1),   # blocks of 2, 2, 2 and 1 head, short sequences written directly
    (12, 16, 0, 4, 3, 1),    # blocks of 3, 3 and 1 head, merged in chunks
    (16, 16, 2, 16, 1, 2),   # runs of at least two tiles: 150 positions in 5, 37 in 2 (2, 1)
    (4, 16, 0, 4, 2, 3),     # at least three: 150 in 4 (3, 3, 3, 1), 37 in one run, unmerged
])
def test_launch_shapes_match_reference(splits, block_t, one_run_tiles, merge_runs,
                                       head_blocks, run_tiles, device):
    q, k, v = _case(3, 14, 2, 16, 150, torch.float32, device)
    lengths = torch.tensor([150, 0, 37], device=device)
    base = attention_config(3, 2, 7, 16, 150, 1, head_blocks=head_blocks)
    assert base["HEAD_BLOCKS"] == head_blocks
    config = {**base, "BLOCK_T": block_t, "SPLITS": splits,
              "BLOCK_SPLITS": triton.next_power_of_2(splits), "ONE_RUN_TILES": one_run_tiles,
              "MERGE_RUNS": merge_runs, "RUN_TILES": run_tiles}
    for _ in range(2):   # the arrival counters are back at zero for the second launch
        out = poisoned(q.shape, q.dtype, q.device)
        launch_decode_attention(q, k, v, lengths, 16 ** -0.5, out, config)
        ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
        assert_close(out, ref, q.dtype, what=f"config {config}")


APART_LAUNCHES = [  # (splits, block_t, one_run_tiles, head_blocks, run_tiles)
    (8, 16, 0, 1, 1),     # runs of two tiles, fewer used than programs; a length of 0
    (64, 16, 0, 1, 1),    # more runs than the last run's merge could hold (one a tile)
    (16, 64, 3, 1, 1),    # short sequences in one run, written with no merge; idle runs
    (12, 16, 0, 3, 1),    # blocks of 3, 3 and 1 head, each merged by its own programs
    (16, 16, 2, 1, 2),    # runs of at least two tiles: 150 positions in 5, 37 in 2
]


@pytest.mark.parametrize("launch, dtype", [
    *((launch, torch.float32) for launch in APART_LAUNCHES),
    *((launch, dtype) for launch in APART_LAUNCHES[:2]
      for dtype in (torch.bfloat16, torch.float16))])
def test_runs_merged_apart_match_reference(launch, dtype, device):
    """The runs' partial results merged by a kernel of their own (merge_apart)."""
    splits, block_t, one_run_tiles, head_blocks, run_tiles = launch
    q, k, v = _case(3, 14, 2, 16, 150, dtype, device)
    lengths = torch.tensor([150, 0, 37], device=device)
    base = attention_config(3, 2, 7, 16, 150, 132, head_blocks=head_blocks, merge_apart=True)
    assert base["MERGE_APART"] and base["HEAD_BLOCKS"] == head_blocks
    config = {**base, "BLOCK_T": block_t, "SPLITS": splits,
              "BLOCK_SPLITS": triton.next_power_of_2(splits), "ONE_RUN_TILES": one_run_tiles,
              "RUN_TILES": run_tiles}
    for _ in range(2):
        out = poisoned(q.shape, q.dtype, q.device)
        launch_decode_attention(q, k, v, lengths, 16 ** -0.5, out, config)
        ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
        assert_close(out, ref, q.dtype, what=f"config {config}")


def test_alone_runs_merge_apart_and_a_layer_s_in_the_kernel(monkeypatch, device):
    """tg.decode_attention's rule merges a split sequence's runs in a kernel of their own; a
    model's decode layer (decode_attention_in_layer) keeps the merge in the kernel, even where
    the launch tuned alone merged apart: five kernels a layer."""
    monkeypatch.setattr(attention.tuned, "_memo", {})
    monkeypatch.setattr(attention.tuned, "_disk_loaded", True)  # this test's records only
    merges = []
    real = attention._merge_apart_kernel

    class Counted:
        def __getitem__(self, grid):
            merges.append(grid)
            return real[grid]
    monkeypatch.setattr(attention, "_merge_apart_kernel", Counted())
    q, k, v = _case(1, 8, 2, 16, 1100, torch.float32, device)
    lengths = torch.tensor([1100], device=device)
    _check(q, k, v, lengths)
    assert len(merges) == 1
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
    key = attention_key(1, 2, 4, 16, 1100, torch.float32)
    for tuned_alone in (None, attention_config(1, 2, 4, 16, 1100, 132, merge_apart=True)):
        if tuned_alone is not None:
            assert tuned_alone["MERGE_APART"]
            attention.tuned.record(key, tuned_alone)
        assert_close(attention.decode_attention_in_layer(q, k, v, lengths), ref, q.dtype)
        assert len(merges) == 1


def test_runs_merged_apart_fill_the_sms_past_the_merge_s_cap():
    """Apart, a pair's runs fill the SMs however many heads its group has (up to
    APART_SPLITS and the cache's tiles); merged by the last run they stop at its cap."""
    apart = attention_config(1, 4, 7, 128, 8192, 132, merge_apart=True)
    assert apart["MERGE_APART"] and apart["HEAD_BLOCKS"] == 1
    assert apart["SPLITS"] == 132 // 4 > attention_config(1, 4, 7, 128, 8192, 132,
                                                          head_blocks=1)["SPLITS"]
    assert attention_config(1, 1, 8, 64, 8192, 132, merge_apart=True)["SPLITS"] == (
        attention.APART_SPLITS)
    assert attention_config(1, 4, 7, 128, 256, 132, merge_apart=True)["SPLITS"] == 256 // 64
    assert "MERGE_APART" not in attention_config(1, 4, 7, 128, 8192, 132)


def test_a_launch_chosen_among_older_candidates_is_timed_again(monkeypatch):
    monkeypatch.setattr(attention.tuned, "_memo", {})
    monkeypatch.setattr(attention.tuned, "_disk_loaded", True)  # this test's records only
    shape = (2, 2, 4, 64, 700)
    chosen = attention_candidates(*shape, 132)[1]
    version = attention.CANDIDATES_VERSION
    monkeypatch.setattr(attention, "CANDIDATES_VERSION", version - 1)
    attention.tuned.record(attention_key(*shape, torch.bfloat16), chosen)
    assert attention.tuned.lookup(attention_key(*shape, torch.bfloat16)) == chosen
    monkeypatch.setattr(attention, "CANDIDATES_VERSION", version)
    assert attention.tuned.lookup(attention_key(*shape, torch.bfloat16)) is None


@pytest.mark.parametrize("shape", [(1, 4, 8, 64, 2048), (8, 8, 4, 128, 1024), (3, 2, 7, 24, 300)])
def test_step_candidates_start_with_the_chosen_launch(shape):
    rule = attention_config(*shape, 132)
    for chosen in attention_candidates(*shape, 132):
        candidates = step_candidates(*shape, 132, chosen)
        if chosen.get("MERGE_APART"):   # a layer merges in the kernel: the rule first
            chosen = rule
        preloaded = attention_config(*shape, 132, preload=True, stages=2)
        tile = attention.default_tile(shape[3])
        two = attention_config(*shape, 132, preload=2, stages=2, warps=8)
        two_a_run = attention_config(*shape, 132, preload=2, stages=2, warps=8, run_tiles=2)
        one_a_run = attention_config(*shape, 132, preload=True, stages=2, one_run_tiles=1)
        blocks = [attention_config(*shape, 132, preload=2, stages=2, warps=8, run_tiles=2,
                                   head_blocks=n)
                  for n in (rule["HEAD_BLOCKS"] // 2, 2 * rule["HEAD_BLOCKS"])
                  if 1 <= n <= shape[2]]
        assert blocks and all(c["HEAD_BLOCKS"] != rule["HEAD_BLOCKS"] for c in blocks)
        assert candidates[0] == chosen
        assert len({repr(c) for c in candidates}) == len(candidates)
        assert len(candidates) == 7 + len(blocks) + (chosen != rule) - (chosen == preloaded)
        assert rule in candidates and preloaded in candidates and two in candidates
        assert two_a_run in candidates and all(c in candidates for c in blocks)
        assert one_a_run in candidates and one_a_run["ONE_RUN_TILES"] == 1
        assert (two["PRELOAD"], two["PRELOAD_TILES"], two["num_warps"]) == (True, 2, 8)
        assert (two_a_run["ONE_RUN_TILES"], two_a_run["RUN_TILES"]) == (2, 2)
        assert "RUN_TILES" not in two   # the other launches keep their keys
        assert {(c["BLOCK_T"], c["num_stages"], c["BLOCK_G"]) for c in candidates[1:]} >= {
            (2 * tile, 2, rule["BLOCK_G"]), (rule["BLOCK_T"], rule["num_stages"], 64)}
        for config in candidates:
            assert (config["MERGE_RUNS"] * config["GROUP_P2"] * config["BLOCK_D"]
                    <= MERGE_ELEMENTS)


def test_runs_of_two_tiles_are_no_more_than_the_longest_sequence_takes(device):
    """With runs of at least two tiles, or of one, a launch has only as many runs as a
    sequence of `longest` positions takes: an idle run's program would hold an SM the next
    kernel's programs could load their weights on. Those launches equal the reference."""
    shape = (1, 4, 8, 64, 2048, 132)   # TinyLlama's, 16 runs a pair by the rule
    assert attention_config(*shape)["SPLITS"] == 16
    for longest, runs in ((384, 2), (256, 1), (1800, 8), (2048, 8), (None, 8)):
        config = attention_config(*shape, preload=2, stages=2, warps=8, run_tiles=2,
                                  longest=longest)
        assert (config["SPLITS"], config["RUN_TILES"], config["ONE_RUN_TILES"]) == (runs, 2, 2)
        assert config["MERGE_RUNS"] <= config["BLOCK_SPLITS"] == triton.next_power_of_2(runs)
        assert config in step_candidates(*shape, attention_config(*shape), longest=longest)
    for longest, runs in ((384, 3), (256, 2), (None, 16)):   # runs of one tile
        config = attention_config(*shape, preload=True, stages=2, one_run_tiles=1,
                                  longest=longest)
        assert (config["SPLITS"], config["ONE_RUN_TILES"]) == (runs, 1)
        assert "RUN_TILES" not in config
        assert config in step_candidates(*shape, attention_config(*shape), longest=longest)
    q, k, v = _case(2, 8, 2, 16, 150, torch.bfloat16, device)
    lengths = torch.tensor([70, 33], device=device)
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
    for config, splits in (   # 70 positions: 5 tiles in runs of 2, 2 and 1; of one tile
            (attention_config(2, 2, 4, 16, 150, 132, tile=16, stages=2, preload=2,
                              run_tiles=2, longest=70), 3),
            (attention_config(2, 2, 4, 16, 150, 132, tile=16, stages=2, preload=True,
                              one_run_tiles=1, longest=70), 5)):
        assert config["SPLITS"] == splits
        out = poisoned(q.shape, q.dtype, q.device)
        launch_decode_attention(q, k, v, lengths, 16 ** -0.5, out, config)
        assert_close(out, ref, q.dtype, what=f"config {config}")


@pytest.mark.parametrize("max_seq, splits, one_run_tiles, preloaded", [
    (32, 1, 3, True), (48, 1, 3, False), (150, 5, 2, True), (150, 4, 2, False)])
def test_runs_that_fit_the_preloaded_tiles_leave_the_run_loop_out(max_seq, splits,
                                                                  one_run_tiles, preloaded,
                                                                  device, monkeypatch):
    """With COMPILE_PRELOADED_RUNS, two preloaded tiles of 16 positions: the launch leaves the
    loop over a run's further tiles out exactly where no run at any length up to max_seq is
    longer (32 positions in one run; 150 in 5 runs of at most 2 tiles, not 4 of 3), and
    every position is attended either way."""
    monkeypatch.setattr(attention, "COMPILE_PRELOADED_RUNS", True)
    launched = record_launches(monkeypatch, attention, "_decode_attention_kernel",
                               "RUNS_PRELOADED")
    q, k, v = _case(3, 8, 2, 16, max_seq, torch.bfloat16, device)
    config = {**attention_config(3, 2, 4, 16, max_seq, 132, tile=16, stages=2, preload=2),
              "ONE_RUN_TILES": one_run_tiles, "SPLITS": splits,
              "BLOCK_SPLITS": triton.next_power_of_2(splits),
              "MERGE_RUNS": triton.next_power_of_2(splits), "MERGE_APART": False}
    lengths = torch.tensor([max_seq, 1, max_seq // 2 + 3], device=device)
    out = poisoned(q.shape, q.dtype, q.device)
    _pdl.launched(q.device, False, ())  # nothing in flight: the preload stays (on a GPU too)
    launch_decode_attention(q, k, v, lengths, 16 ** -0.5, out, config)
    assert launched == [preloaded]
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths, 16 ** -0.5)
    assert_close(out, ref, q.dtype, what=f"config {config}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("softcap", [None, 2.0])
def test_a_window_under_every_launch_matches_reference(softcap, dtype, device):
    """A window of 45 positions under every launch shape a step or the tuner may take (the
    first tiles preloaded, q tiles of 64 rows, runs merged apart or by the last run, blocks
    of heads, runs of at least two tiles): sequences of 150, 0, 46, 45 and 37 positions;
    with the scores softcapped too."""
    q, k, v = _case(5, 6, 2, 16, 150, dtype, device)
    lengths = torch.tensor([150, 0, 46, 45, 37], device=device)
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths, window=45,
                               softcap=softcap)
    rule = attention_config(5, 2, 3, 16, 150, 1)
    launches = [{**config, "ONE_RUN_TILES": one_run_tiles, "SPLITS": 4, "BLOCK_SPLITS": 4}
                for config in step_candidates(5, 2, 3, 16, 150, 1, rule)
                for one_run_tiles in (0, 3)]
    for splits, block_t, one_run_tiles, head_blocks, run_tiles in APART_LAUNCHES:
        base = attention_config(5, 2, 3, 16, 150, 132, head_blocks=min(head_blocks, 3),
                                merge_apart=True)
        launches.append({**base, "BLOCK_T": block_t, "SPLITS": splits,
                         "BLOCK_SPLITS": triton.next_power_of_2(splits),
                         "ONE_RUN_TILES": one_run_tiles, "RUN_TILES": run_tiles})
    for config in launches:
        out = poisoned(q.shape, q.dtype, q.device)
        launch_decode_attention(q, k, v, lengths, 16 ** -0.5, out, config, window=45,
                                softcap=softcap or 0.0)
        assert_close(out, ref, q.dtype, what=f"config {config}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_step_candidates_match_reference(dtype, device):
    """Every launch a step may choose (a q tile of 64 rows, tiles of twice the positions,
    the first tile preloaded), split and in one run, equals the float64 reference."""
    q, k, v = _case(3, 6, 2, 16, 150, dtype, device)
    lengths = torch.tensor([150, 1, 37], device=device)
    rule = attention_config(3, 2, 3, 16, 150, 1)
    for config in step_candidates(3, 2, 3, 16, 150, 1, rule)[1:]:
        for one_run_tiles in (0, 3):
            config = {**config, "ONE_RUN_TILES": one_run_tiles, "SPLITS": 4, "BLOCK_SPLITS": 4}
            out = poisoned(q.shape, q.dtype, q.device)
            launch_decode_attention(q, k, v, lengths, 16 ** -0.5, out, config)
            ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
            assert_close(out, ref, q.dtype, what=f"config {config}")


def test_a_launch_chosen_in_a_step_is_recorded_for_its_attention_key(monkeypatch):
    """A later process finds the step's choice and records it for the attention key again
    (another step of the same attention shape may have chosen since), timing nothing."""
    monkeypatch.setattr(attention.tuned, "_memo", {})
    monkeypatch.setattr(tune.attention_in_step, "_memo", {})
    step = (512, 1536, 4, 1000)
    key = attention_key(2, 2, 4, 64, 700, torch.bfloat16)
    chosen = step_candidates(2, 2, 4, 64, 700, 132, attention_config(2, 2, 4, 64, 700, 132))[1]
    tune.attention_in_step.record((*key, *step), chosen)
    attention.tuned.record(key, attention_config(2, 2, 4, 64, 700, 132))

    def no_capture():
        raise AssertionError("a step chosen before was timed again")
    positions = torch.zeros(2, dtype=torch.int64)
    result = tune_attention_in_step_once(2, 8, 2, 64, 700, torch.bfloat16, step, no_capture,
                                         positions, 2e-2)
    assert result is None and attention.tuned.lookup(key) == chosen


def _every_launch_right(monkeypatch):
    """The check of each launch alone (tested on its own below) left out: through the
    interpreter it takes a minute at these shapes."""
    monkeypatch.setattr(tune, "right_attention_launches", lambda candidates, *shape: candidates)


def test_only_launches_that_give_the_reference_s_result_are_tried_in_a_step(monkeypatch):
    """A launch that leaves out each sequence's newest position, which a small model's
    logits hardly show, is left out before any step is timed; the others keep their
    order."""
    launch = attention.launch_decode_attention

    def misreading(q, k, v, lengths, scale, out, config, **how):
        if config.get("MISREAD"):
            config = {key: value for key, value in config.items() if key != "MISREAD"}
            lengths = (lengths - 1).clamp(min=1)
        launch(q, k, v, lengths, scale, out, config, **how)
    monkeypatch.setattr(attention, "launch_decode_attention", misreading)
    candidates = step_candidates(2, 2, 2, 16, 300, 4, attention_config(2, 2, 2, 16, 300, 4))
    wrong = {**candidates[1], "MISREAD": True}
    right = tune.right_attention_launches([candidates[0], wrong, *candidates[1:]], 2, 4, 2,
                                          16, 300, torch.float32, torch.device("cpu"))
    assert right == candidates


@pytest.mark.parametrize("head_dim, max_seq, shortest, timed_at", [
    (64, 2048, 0, {255, 383, 767, 2047}), (128, 2048, 0, {255, 191, 383, 2047}),
    (64, 300, 0, {255, 299}), (64, 2048, 384, {384, 767, 2047}), (64, 384, 0, {255, 383})])
def test_a_step_is_timed_where_one_run_reads_the_most(head_dim, max_seq, shortest, timed_at,
                                                      monkeypatch):
    """Each candidate's step is timed at a short position, at the longest sequence one
    program reads unsplit (for the rule's tiles and for the candidates' tiles of twice the
    positions) and at the last position; none before `shortest` (a context band's first)."""
    monkeypatch.setattr(attention.tuned, "_memo", {})
    monkeypatch.setattr(attention.tuned, "_disk_loaded", True)
    monkeypatch.setattr(tune.attention_in_step, "_memo", {})
    monkeypatch.setattr(tune.attention_in_step, "_disk_loaded", True)
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    _every_launch_right(monkeypatch)
    positions = torch.zeros(1, dtype=torch.int64)
    seen = set()

    class Step:   # stands for the captured step: its replays read the positions
        outputs = torch.ones(1)

        def replay(self):
            seen.add(int(positions[0]))
    result = tune_attention_in_step_once(1, 8, 2, head_dim, max_seq, torch.bfloat16, (1,),
                                         Step, positions, 2e-2, shortest)
    assert result is not None and seen == timed_at
    key = attention.attention_key(1, 2, 4, head_dim, max_seq, torch.bfloat16)
    band = (f"from {shortest}",) if shortest else ()   # bands chosen apart
    assert tune.attention_in_step.lookup((*key, 1, *band)) == result["config"]


@pytest.mark.parametrize("first_from_reference, kept", [
    (None, {0, 1}), (0.0, {0, 1}), (0.02, {0, 1, 2}), (0.08, {0, 1, 2}), (0.5, {0, 1}),
    (float("nan"), {0, 1}), ("out of memory", {0, 1})])
def test_a_step_candidate_may_depart_from_the_first_by_rounding_alone(first_from_reference,
                                                                      kept):
    """A candidate whose output departs from the first's by more than the tolerance (2e-2)
    is dropped, unless the first departs from the step computed another way (the reference)
    as well: then up to twice that distance is rounding, where it is within five
    tolerances. A candidate 0.3 away is wrong whatever the reference says; a reference that
    does not fit in memory allows nothing more."""
    first = torch.randn(64, dtype=torch.float64)
    departures = [0.0, 0.01, 0.03, 0.3]   # each candidate's relative distance from the first
    noise = torch.randn(64, dtype=torch.float64)
    noise /= noise.norm() / first.norm()
    chosen = []

    class Step:   # stands for the captured step of the candidate applied last
        def __init__(self):
            self.outputs = first + departures[chosen[-1]] * noise

        def replay(self):
            pass

    def reference():
        if first_from_reference == "out of memory":
            raise torch.OutOfMemoryError("the plain step's repeated kv heads")
        return first + first_from_reference * noise.flip(0)
    times = tune.time_step_candidates(len(departures), chosen.append, Step,
                                      torch.zeros(1, dtype=torch.int64), 300, 2e-2,
                                      reference=None if first_from_reference is None else reference)
    assert set(times) == kept and chosen == [0, 1, 2, 3]


def test_a_band_s_step_tries_the_whole_cache_s_launches(monkeypatch):
    """A step over a window of 384 positions of a 2048-position cache times the whole
    cache's candidates, its step's choice first, each recorded for the window's key while
    its step is captured; those of runs of two tiles have the runs 384 positions take."""
    for store in (attention.tuned, tune.attention_in_step):
        monkeypatch.setattr(store, "_memo", {})
        monkeypatch.setattr(store, "_disk_loaded", True)
    monkeypatch.setattr(tune, "timing_enabled", lambda: True)
    _every_launch_right(monkeypatch)
    shape = (1, 2, 4, 64)   # batch, kv heads, group, head_dim
    whole_choice = attention_config(*shape, 2048, 132, preload=2, warps=8)
    attention.tuned.record(attention_key(*shape, 2048, torch.bfloat16), whole_choice)
    captured = []

    class Step:
        outputs = torch.ones(1)

        def __init__(self):
            captured.append(attention.tuned.lookup(attention_key(*shape, 384, torch.bfloat16)))

        def replay(self):
            pass
    tune_attention_in_step_once(1, 8, 2, 64, 384, torch.bfloat16, (1,), Step,
                                torch.zeros(1, dtype=torch.int64), 2e-2, 0, 2048)
    facts = attention.device_facts(torch.bfloat16, torch.device("cpu"))  # as the tuner sees it
    assert captured == step_candidates(*shape, 2048, None, whole_choice, longest=384, **facts)
    assert captured[0] == whole_choice
    runs_of_two = [c for c in captured if c.get("RUN_TILES") == 2]  # 4 q-head blocks and 2
    assert len(runs_of_two) == 2 and {c["SPLITS"] for c in runs_of_two} == {2}


def test_a_tuned_launch_shape_is_the_one_launched(device, monkeypatch):
    monkeypatch.setattr(attention.tuned, "_memo", {})   # this test's choice only
    q, k, v = _case(2, 6, 2, 16, 150, torch.float32, device)
    chosen = attention_candidates(2, 2, 3, 16, 150, 132)[-1]
    attention.tuned.record(attention_key(2, 2, 3, 16, 150, torch.float32), chosen)

    def no_rule(*args, **kwargs):
        raise AssertionError("the rule was consulted for a tuned shape")
    monkeypatch.setattr(attention, "attention_config", no_rule)
    _check(q, k, v, torch.tensor([150, 61], device=device))


def test_bad_inputs_are_named(device):
    q, k, v = _case(2, 4, 2, 16, 20, torch.float32, device)
    lengths = torch.tensor([3, 4], device=device)
    with pytest.raises(ValueError, match="one shape and layout"):
        tg.decode_attention(q, k, v[:, :, :10], lengths)
    with pytest.raises(ValueError, match="not a multiple"):
        tg.decode_attention(q[:, :3], k, v, lengths)
    with pytest.raises(ValueError, match="head_dim 8"):
        tg.decode_attention(q[..., :8], k, v, lengths)
    with pytest.raises(ValueError, match="room for 3"):
        tg.decode_attention(torch.randn(4, 4, 16, device=device), k, v, torch.ones(
            4, dtype=torch.int64, device=device))
    with pytest.raises(TypeError, match="lengths must be an int"):
        tg.decode_attention(q, k, v, lengths.float())
    with pytest.raises(ValueError, match="lengths must have shape"):
        tg.decode_attention(q, k, v, lengths[:1])
    with pytest.raises(ValueError, match="k_cache must have q's dtype"):
        tg.decode_attention(q, k.half(), v.half(), lengths)
    with pytest.raises(ValueError, match="scale must be"):
        tg.decode_attention(q, k, v, lengths, scale=float("nan"))
    with pytest.raises(ValueError, match="out has shape"):
        tg.decode_attention(q, k, v, lengths, out=torch.empty(2, 4, 8, device=device))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads, kv_heads, head_dim", [(32, 4, 64), (32, 32, 128), (28, 4, 128),
                                                       (14, 2, 64), (8, 1, 128), (1, 1, 64),
                                                       (32, 32, 96), (16, 8, 256)])
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_real_shapes_on_gpu(batch, heads, kv_heads, head_dim, dtype):
    max_seq = 4099
    q, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, "cuda")
    lengths = torch.randint(1, max_seq + 1, (batch,), device="cuda")
    lengths[0] = max_seq
    _check(q, k, v, lengths)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lengths, window", [([6000], 4096), ([8192, 4097, 4096, 100], 4096),
                                             ([3000, 2048], 2047)])
def test_sliding_windows_at_real_shapes_on_gpu(lengths, window, dtype):
    """Mistral's layout (32 q heads on 8 kv heads of 128) over a cache of 8192 positions:
    windows of 4096 (Mistral 7B v0.1) and 2047 (Phi-3-mini), alone and as a layer runs it."""
    batch = len(lengths)
    q, k, v = _case(batch, 32, 8, 128, 8192, dtype, "cuda")
    lengths = torch.tensor(lengths, device="cuda")
    ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths, window=window)
    assert_close(tg.decode_attention(q, k, v, lengths, window=window), ref, dtype)
    assert_close(decode_attention_in_layer(q, k, v, lengths, window), ref, dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("lengths, window", [([8192], None), ([6000, 4097, 300], 4096)])
def test_softcapped_gemma2_layout_on_gpu(lengths, window, dtype):
    """Gemma 2 2B's layout (8 q heads on 4 kv heads of 256), its softcap of 50 over scores
    scaled up to reach it, its window of 4096 over a cache of 8192, alone and in a layer."""
    q, k, v = _case(len(lengths), 8, 4, 256, 8192, dtype, "cuda")
    q = (q.float() * 40.0).to(dtype)
    lengths = torch.tensor(lengths, device="cuda")
    args = (q.double(), k.double(), v.double(), lengths)
    ref = decode_attention_ref(*args, window=window, softcap=50.0)
    assert rel_error(ref, decode_attention_ref(*args, window=window)) > 0.05
    assert_close(tg.decode_attention(q, k, v, lengths, window=window, softcap=50.0), ref,
                 dtype)
    assert_close(decode_attention_in_layer(q, k, v, lengths, window, 50.0), ref, dtype)


@pytest.mark.gpu
def test_one_graph_serves_every_length():
    q, k, v = _case(2, 32, 4, 64, 2048, torch.bfloat16, "cuda")
    lengths = torch.tensor([1, 1], device="cuda")
    out = torch.empty_like(q)
    graph = tg.capture(lambda: tg.decode_attention(q, k, v, lengths, out=out))
    for length in (1, 7, 64, 65, 600, 2048, 3):
        for _ in range(30):  # repeated replays: the arrival counters reset every time
            lengths.copy_(torch.tensor([length, max(1, 2048 - length)]))
            graph.replay()
        ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
        assert_close(out, ref, torch.bfloat16, what=f"length {length} after replays")


@pytest.mark.gpu
def test_runs_merged_apart_in_one_graph_serve_every_length():
    """Attention and its merge kernel chained under PDL, three times in one graph (each
    launch's partials in the one workspace the next overwrites): every replay equals the
    reference at every length."""
    q, k, v = _case(2, 28, 4, 128, 4096, torch.bfloat16, "cuda")
    lengths = torch.tensor([1, 1], device="cuda")
    config = attention_config(2, 4, 7, 128, 4096, sm_count(q.device), merge_apart=True)
    assert config["MERGE_APART"] and config["SPLITS"] > 8
    outs = [torch.empty_like(q) for _ in range(3)]
    queries = [q, q.flip(1).contiguous(), (q * 0.5).contiguous()]

    def attend():
        for query, out in zip(queries, outs, strict=True):
            launch_decode_attention(query, k, v, lengths, 128 ** -0.5, out, config)
    graph = tg.capture(attend)
    for length in (1, 65, 4096, 700, 3):
        for _ in range(20):
            lengths.copy_(torch.tensor([length, max(1, 4096 - length)]))
            graph.replay()
        for query, out in zip(queries, outs, strict=True):
            ref = decode_attention_ref(query.double(), k.double(), v.double(), lengths)
            assert_close(out, ref, torch.bfloat16, what=f"length {length} after replays")


@pytest.mark.gpu
def test_runs_captured_on_another_stream_stay_split(monkeypatch):
    """PyTorch's recipe: warmed up on one stream, captured by torch.cuda.graph on a stream
    that never ran a split launch. The capture takes the spare workspace the warm-up left,
    so the runs stay split, and every replay equals the reference at every length."""
    from tilegraph.kernels import _split_workspace

    monkeypatch.setattr(_split_workspace, "_workspaces", {})
    monkeypatch.setattr(_split_workspace, "_spares", {})
    q, k, v = _case(2, 28, 4, 128, 4096, torch.bfloat16, "cuda")
    lengths = torch.tensor([4096, 1000], device="cuda")
    config = attention_config(2, 4, 7, 128, 4096, sm_count(q.device), merge_apart=True)
    assert config["SPLITS"] > 1
    out = torch.empty_like(q)
    launch_decode_attention(q, k, v, lengths, 128 ** -0.5, out, dict(config))  # warm-up
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        launch_decode_attention(q, k, v, lengths, 128 ** -0.5, out, dict(config))
    assert (torch.cuda.current_device(), stream.cuda_stream) in _split_workspace._workspaces
    for length in (1, 65, 4096, 700):
        lengths.copy_(torch.tensor([length, max(1, 4096 - length)]))
        out.fill_(float("nan"))
        graph.replay()
        ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
        assert_close(out, ref, torch.bfloat16, what=f"length {length} after a replay")


@pytest.mark.gpu
def test_lengths_written_by_the_kernel_just_before():
    """Lengths written by a PyTorch kernel just before, inside the same graph (launched
    without PDL, it ends before the attention starts): every replay reads the new ones."""
    q, k, v = _case(3, 28, 4, 128, 1500, torch.bfloat16, "cuda")
    base = torch.tensor([0, 700, 1499], device="cuda")
    step = torch.zeros(3, dtype=torch.int64, device="cuda")
    lengths = torch.empty(3, dtype=torch.int64, device="cuda")
    out = torch.empty_like(q)

    def attend():
        torch.add(base, step, out=lengths)   # the kernel right before the attention
        return tg.decode_attention(q, k, v, lengths, out=out)
    graph = tg.capture(attend)
    for shift in (1, 129, 64, 800, 1, 257, 0):
        step.copy_(torch.tensor([shift, -shift // 2, 1 - shift]))
        graph.replay()
        ref = decode_attention_ref(q.double(), k.double(), v.double(), base + step)
        assert_close(out, ref, torch.bfloat16, what=f"shift {shift}")


@pytest.mark.gpu
def test_lengths_written_by_a_pdl_kernel_just_before():
    """Lengths a kernel launched with PDL writes just before: the attention may start
    before they are final, so it must read them again after its wait (lengths written
    further back are read before it). The greedy step writes positions + 1 after a scan of
    a wide vocabulary, long enough for a stale read to show."""
    q, k, v = _case(3, 28, 4, 128, 1500, torch.bfloat16, "cuda")
    logits = torch.randn(3, 150_000, device="cuda")
    positions = torch.zeros(3, dtype=torch.int64, device="cuda")
    slots = torch.arange(3, device="cuda")
    history = torch.zeros(3, 1500, dtype=torch.int64, device="cuda")
    tokens, lengths = (torch.zeros(3, dtype=torch.int64, device="cuda") for _ in range(2))
    out = torch.empty_like(q)

    def attend():
        greedy_step(logits, positions, slots, history, tokens_out=tokens, positions_out=lengths)
        return tg.decode_attention(q, k, v, lengths, out=out)
    graph = tg.capture(attend)
    for first in (0, 128, 63, 799, 1, 1400, 256):
        positions.copy_(torch.tensor([first, 1498 - first, (first * 7) % 1499]))
        graph.replay()
        ref = decode_attention_ref(q.double(), k.double(), v.double(), positions + 1)
        assert_close(out, ref, torch.bfloat16, what=f"positions from {first}")


@pytest.mark.gpu
def test_cache_rows_in_flight_are_named_only_by_their_writer():
    """What attention may read before its wait: every cache row when the kernel before
    writes none of them, all but the rows it names when it names them for these very caches,
    nothing when it writes them otherwise or names rows of another view."""
    device = torch.device("cuda")
    _, k, v = _case(2, 4, 2, 16, 64, torch.bfloat16, "cuda")
    slots, positions = torch.arange(2, device="cuda"), torch.tensor([5, 9], device="cuda")
    other = torch.empty(8, device="cuda")
    _pdl.launched(device, False, ())
    assert _pdl.cache_rows_in_flight(device, (k, v)) == ()
    _pdl.launched(device, True, (other, k, v), ((k, v), slots, positions))
    named = _pdl.cache_rows_in_flight(device, (k, v))
    assert named[0] is slots and named[1] is positions
    assert _pdl.cache_rows_in_flight(device, (k[:1], v[:1])) is None  # rows of another view
    _pdl.launched(device, True, (other,))
    assert _pdl.cache_rows_in_flight(device, (k, v)) == ()
    _pdl.launched(device, True, (k[1, 0, 3],))
    assert _pdl.cache_rows_in_flight(device, (k, v)) is None
    _pdl.launched(device, False, ())


@pytest.mark.gpu
@pytest.mark.parametrize("kv_heads, max_seq, one_run_tiles, tiles, warps, run_tiles",
                         [(2, 1024, 3, 1, 4, 1), (4, 700, 0, 1, 4, 1), (2, 1024, 3, 2, 8, 1),
                          (4, 700, 0, 2, 8, 1), (2, 1024, 2, 2, 8, 2), (4, 700, 2, 2, 8, 2)])
def test_preloaded_tiles_read_the_rows_the_projection_just_wrote(kv_heads, max_seq,
                                                                 one_run_tiles, tiles, warps,
                                                                 run_tiles, monkeypatch):
    """Each run's first tile read before the wait while tg.linear_qkv, the kernel just
    before under PDL, writes the new token's keys and values: attention reads those rows
    again after its wait. They hold NaN before every replay, so a stale read shows; slots
    out of order, each sequence at its own position. Also with the first two tiles preloaded
    over 8 warps, and so in runs of at least two tiles."""
    monkeypatch.setattr(attention.tuned, "_memo", {})
    monkeypatch.setattr(attention.tuned, "_disk_loaded", True)  # this test's records only
    batch, heads, head_dim, dim, dtype = 3, 8, 64, 256, torch.bfloat16
    _, k, v = _case(batch, heads, kv_heads, head_dim, max_seq, dtype, "cuda")
    x = torch.randn(batch, dim, device="cuda").to(dtype)
    w = (torch.randn((heads + 2 * kv_heads) * head_dim, dim, device="cuda") * dim ** -0.5
         ).to(dtype)
    angles = torch.outer(torch.arange(max_seq, device="cuda").float(),
                         torch.rand(head_dim // 2, device="cuda"))
    cos, sin = angles.cos(), angles.sin()
    slots = torch.tensor([2, 0, 1], device="cuda")
    positions = torch.zeros(batch, dtype=torch.int64, device="cuda")
    lengths = torch.zeros_like(positions)
    config = {**attention_config(batch, kv_heads, heads // kv_heads, head_dim, max_seq,
                                 sm_count(x.device), preload=tiles, stages=2, warps=warps,
                                 run_tiles=run_tiles),
              "ONE_RUN_TILES": one_run_tiles}
    attention.tuned.record(attention_key(batch, kv_heads, heads // kv_heads, head_dim,
                                         max_seq, dtype), config)
    q = torch.empty(batch, heads, head_dim, dtype=dtype, device="cuda")
    out = torch.empty_like(q)

    def step():
        tg.linear_qkv(x, w, cos=cos, sin=sin, positions=positions, slots=slots, k_cache=k,
                      v_cache=v, n_heads=heads, out=q)
        return tg.decode_attention(q, k, v, lengths, out=out)

    graph = tg.capture(step)
    for first in (0, 127, 128, 300, max_seq - 2, 1, 64):
        positions.copy_(torch.tensor([first, (first * 7 + 5) % max_seq, max_seq - 1 - first]))
        lengths[slots] = positions + 1   # the new row is each sequence's last
        x.copy_(torch.randn(batch, dim, device="cuda"))
        k[slots, :, positions] = float("nan")
        v[slots, :, positions] = float("nan")
        graph.replay()
        assert not k[slots, :, positions].isnan().any()
        ref = decode_attention_ref(q.double(), k.double(), v.double(), lengths)
        assert_close(out, ref, dtype, what=f"positions from {first}")


@pytest.mark.gpu
def test_tuning_records_a_checked_candidate(monkeypatch):
    monkeypatch.setattr(attention.tuned, "_memo", {})
    result = tune_attention(2, 8, 2, 64, 700, torch.bfloat16)
    key = attention_key(2, 2, 4, 64, 700, torch.bfloat16)
    sms = sm_count(torch.device("cuda"))
    assert result["config"] in attention_candidates(2, 2, 4, 64, 700, sms)
    assert attention.tuned.lookup(key) == result["config"]
    assert result["us"] == min(result["candidates"].values()) > 0
    q, k, v = _case(2, 8, 2, 64, 700, torch.bfloat16, "cuda")
    _check(q, k, v, torch.tensor([700, 333], device="cuda"))
