"""Decode attention: one query token per sequence against that sequence's cached keys and
values, split over the sequence (flash-decoding), grouped-query aware.

    out = tg.decode_attention(q, k_cache, v_cache, lengths)   # q (B, H, D) -> (B, H, D)

At batch 1 a decode step has one (sequence, kv head) pair per kv head: one program each
would leave most SMs idle, so every pair's length is cut into up to SPLITS runs of whole
tiles (at least RUN_TILES a run), one program a run, each with its own running max and sum
(fp32); a sequence of at most ONE_RUN_TILES tiles is one run. The split count is fixed at
launch (a graph replays it at every length); each program reads its sequence's length on
the device and takes 1 / SPLITS of the tiles, so long contexts and short ones alike spread
over the grid; runs past a short sequence's tiles do nothing, a sequence of one run writes
its output directly, and no program reads past a length. Under PDL a launch may read each
run's first tile before its wait, where the kernel before writes no cache row but those it
names (the q|k|v projection's new rows, read again after the wait; _pdl.py). The q heads
that share a kv head ride in one tensor-core tile, so each key and value is read once; or
in a few blocks, a program and a merge each, which read the same keys and values (the
second from L2 where they run together): where few pairs would leave SMs idle, they fill
them and let a pair take more runs than one merge holds. The last run of a pair to finish
merges the runs' partial results in a fixed order (the result does not depend on which run
finished last): one kernel, no second launch; or, called alone (tg.decode_attention), by a
kernel of its own launched next (merge_apart), which lets a pair take as many runs as fill
the SMs. A model's decode layer keeps the merge in the kernel (decode_attention_in_layer:
five kernels a layer). The launch shape is timed per shape by tune.tune_attention where it
has been run, else a rule.
"""

from __future__ import annotations

import functools
import math

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._checks import check_tensor, prepare_out
from ._l2_prefetch import prefetch_lines
from ._launch import (
    ASSUMED_SHARED_MEMORY,
    ASSUMED_SM_COUNT,
    program_shared_memory,
    sm_count,
    supports_pdl,
)
from ._ops import custom_op
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import cache_rows_in_flight, launched, use_pdl
from ._split_workspace import split_workspace
from .autotune import Tuner

_LOG2E = tl.constexpr(1.4426950408889634)
# The merge loads runs' partial outputs (runs, q heads of a group, head_dim) at most this
# many fp32 values at a time, 64 a thread of 4 warps.
MERGE_ELEMENTS = 8192
# The rule's runs a pair: at most this many chunks of the runs one such load holds. Each
# further chunk costs the merging program a round trip to L2 (1.5-2.4 us on H200): two won
# only on long caches of wide groups, so only the tuner tries them (notes/models.md,
# session 58).
MERGE_CHUNKS = 1
# Runs a pair at most where a kernel of their own merges them (_merge_apart_kernel: a
# program a q head holds this many runs' outputs at once).
APART_SPLITS = 64
# A sequence of at most this many tiles is read by one program, not split: runs of one tile
# pay the partials' round trips and the merge for little streaming. In TinyLlama's decode at
# 128-384 positions (1-3 tiles) one run made a step 4% faster; runs of 4 tiles where the
# sequence had 8-16 made attention 1.1-1.5x slower (notes/models.md, session 29).
ONE_RUN_TILES = 3
# The most tiles a step candidate reads before the wait, as one tile over 8 warps (4 warps
# spill it): more were slower (notes/models.md, session 73).
PRELOADED_TILES = 2
# Where every run of a launch fits its preloaded tiles at every length up to max_seq, the
# launch may leave the loop over a run's further tiles out (RUNS_PRELOADED): a loop never run
# still holds its registers, 100 a thread against 80 at preload 2, 2 stages, 8 warps, heads
# of 64 (sm_90, Triton 3.6). Off: in tg.Generator's steps it moved Qwen2-0.5B (batch 1)
# 1.2% faster, TinyLlama 0.6-0.7% slower at batch 1 and 8, d1024-h128 (batch 8) not at all
# (H200, notes/kernels.md, session 96). A module setting, so that
# research/time_generator.py can build a Generator with it.
COMPILE_PRELOADED_RUNS = False
# Where each run takes at least DEEP_RUN_TILES default tiles of a full cache, the rule keeps
# 4 tiles' loads in flight instead of 3; from DOUBLE_RUN_TILES on, tiles of twice the
# positions 3 deep. Over 167 points (batch 1-16, 128-8192 positions, 12 layouts) this took
# the rule 1.034x faster (geomean), 59 -> 30 points slower than SDPA, the worst 0.961x at
# 32/32x128 b16 @256 (H200, notes/models.md, session 60).
DEEP_RUN_TILES, DOUBLE_RUN_TILES = 4, 8
# A deeper pipeline leaves room for one program an SM where the default's fits two: past one
# wave, it is kept only where the programs fill whole waves to at least this fraction. MHA
# 32/32x128 b6 (192 programs, the second wave 45% full) at 700 and 3000 positions: tiles of
# 128 took 23.6 and 77.9 us, the default 20.5 and 69.8 (fp16, H200, session 60).
FULL_WAVES = 0.9
# Shared memory a program needs beside its stages of keys and values (at most 35 KB: tiles of
# 128 positions of head_dim 128, 3 deep, launched with 227 KB a program).
SPARE_SHARED_MEMORY = 32 * 1024


@triton.jit
def _rounded_to_bf16(x):
    """fp32 x rounded to the nearest bfloat16 (ties to even), kept in fp32: by its bits,
    since Triton's interpreter truncates a cast to bf16 (finite x only)."""
    bits = x.to(tl.int32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & -65536   # (-65536: 0xFFFF0000)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _attend_tile(q, k, v, positions, t_mask, m, denom, acc, qk_scale, softcap, slopes, last,
                 DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                 SOFTCAPPED: tl.constexpr, ALIBI: tl.constexpr, ALIBI_ROUNDED: tl.constexpr):
    """One tile of the online softmax: (m, denom, acc) updated by keys k and values v
    (BLOCK_T, BLOCK_D) at `positions` (BLOCK_T,), those t_mask admits (at least one), scores
    in log2 units; SOFTCAPPED: each score s first becomes softcap tanh(s / softcap) (softcap
    in log2 units too: the cap commutes with the change of base); ALIBI: then plus slopes
    (BLOCK_G,), log2 units, times the key's distance back from the query at `last`, or with
    ALIBI_ROUNDED Falcon's bias: slopes (as given) times the key's position, rounded to
    bfloat16, then scaled as the scores are."""
    if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
        k = k.to(tl.float32)
        v = v.to(tl.float32)
    scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale  # (BG, BT)
    if SOFTCAPPED:
        # tanh(x) = 1 - 2 / (exp(2x) + 1): exp2 overflows to inf (tanh 1) or underflows to
        # 0 (tanh -1) at the ends, never to NaN
        scores = softcap * (1.0 - 2.0 / (tl.exp2(scores * (2.0 * _LOG2E) / softcap) + 1.0))
    if ALIBI_ROUNDED:
        # as transformers' Falcon: from position 0, each product rounded to bf16 (exact in
        # fp32 below 2^16 positions, so rounded once) whatever the model's dtype
        bias = _rounded_to_bf16(slopes[:, None] * positions.to(tl.float32)[None, :])
        scores += bias * qk_scale
    elif ALIBI:
        # relative to the query, not from position 0: the bias stays small where the
        # softmax weighs it most (fp32 keeps 2^-24 of it)
        scores += slopes[:, None] * (positions - last).to(tl.float32)[None, :]
    scores = tl.where(t_mask[None, :], scores, float("-inf"))
    m_new = tl.maximum(m, tl.max(scores, axis=1))  # finite: t_mask admits a position
    alpha = tl.exp2(m - m_new)
    p = tl.exp2(scores - m_new[:, None])
    denom = denom * alpha + tl.sum(p, axis=1)
    # p in the cache's dtype for the tensor cores, as flash attention and transformers'
    # eager attention round the probabilities
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
    return m_new, denom, acc


@triton.jit
def _attend_run(q, k_ptrs, v_ptrs, d_mask, stride_cp, start, stop, qk_scale, softcap,
                slopes, last, m, denom, acc, BLOCK_T: tl.constexpr, EVEN_D: tl.constexpr,
                DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                SOFTCAPPED: tl.constexpr, ALIBI: tl.constexpr, ALIBI_ROUNDED: tl.constexpr):
    """Online softmax over positions [start, stop) from the state (running max m, sum denom,
    unnormalised output acc) of the BLOCK_G query heads in q. k_ptrs, v_ptrs (BLOCK_T,
    BLOCK_D) point at position 0; d_mask: the real head_dim columns (all of them when
    EVEN_D)."""
    offs_t = tl.arange(0, BLOCK_T)
    for t0 in range(start, stop, BLOCK_T):
        t_mask = (t0 + offs_t) < stop
        kv_mask = t_mask[:, None] if EVEN_D else t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_ptrs + t0 * stride_cp, mask=kv_mask, other=0.0)  # (BT, BD)
        v = tl.load(v_ptrs + t0 * stride_cp, mask=kv_mask, other=0.0)
        m, denom, acc = _attend_tile(q, k, v, t0 + offs_t, t_mask, m, denom, acc, qk_scale,
                                     softcap, slopes, last, DOT_PRECISION, UPCAST_DOT,
                                     SOFTCAPPED, ALIBI, ALIBI_ROUNDED)
    return m, denom, acc


@triton.jit
def _run_bounds(lengths_ptr, b, run, max_seq, window, SPLITS: tl.constexpr,
                BLOCK_T: tl.constexpr, ONE_RUN_TILES: tl.constexpr, RUN_TILES: tl.constexpr,
                WINDOWED: tl.constexpr):
    """Positions [start, stop) of run `run` of sequence b, its length clamped to [0,
    max_seq]: the positions it attends to are its last `window` (WINDOWED) or all of them,
    cut into runs of 1 / SPLITS of their tiles of BLOCK_T positions but at least RUN_TILES
    of them, or one run of them all where they are at most ONE_RUN_TILES; and how many runs
    the sequence uses (fewer than SPLITS when it has fewer tiles; at least one, which writes
    zeros for a length of 0), and the length as clamped."""
    length = tl.minimum(tl.maximum(tl.load(lengths_ptr + b).to(tl.int32), 0), max_seq)
    first = tl.maximum(length - window, 0) if WINDOWED else 0
    tiles = tl.cdiv(length - first, BLOCK_T)
    run_tiles = tl.where(tiles <= ONE_RUN_TILES, tl.maximum(tiles, 1),
                         tl.maximum(tl.cdiv(tiles, SPLITS), RUN_TILES))
    start = first + run * run_tiles * BLOCK_T
    stop = tl.minimum(length, start + run_tiles * BLOCK_T)
    used = tl.maximum(tl.cdiv(tiles, run_tiles), 1)
    return start, stop, used, length


@triton.jit
def _prefetch_tile(row0, stride_cp, start, stop, HEAD_DIM: tl.constexpr,
                   BLOCK_T: tl.constexpr, ROW_LINES: tl.constexpr,
                   LINE_ELEMENTS: tl.constexpr):
    """prefetch.global.L2 of the 128-byte lines of positions [start, start + BLOCK_T) below
    stop of the rows at row0 (position 0). Positions past stop ask for stop - 1's lines
    again (position 0 where stop is 0), and no line starts past a row's last element: no
    address leaves the rows the kernel may read."""
    positions = tl.minimum(start + tl.arange(0, BLOCK_T), tl.maximum(stop - 1, 0))
    columns = tl.minimum(tl.arange(0, ROW_LINES) * LINE_ELEMENTS, HEAD_DIM - 1)
    ptrs = row0 + positions[:, None] * stride_cp + columns[None, :]         # (BT, lines)
    prefetch_lines(ptrs)


@triton.jit
def _preload_tile(k_ptr, v_ptr, kv_offsets, stride_cp, t0, stop, d_mask,
                  written_slots_ptr, written_positions_ptr, b, N_WRITTEN: tl.constexpr,
                  BLOCK_WRITTEN: tl.constexpr, BLOCK_T: tl.constexpr):
    """Keys and values of positions [t0, t0 + BLOCK_T) below stop, read before the wait, and
    which of those rows the kernel before may still write (row written_positions[r] of slot
    written_slots[r]: read again after the wait, _reread_written)."""
    positions = t0 + tl.arange(0, BLOCK_T)
    kv_mask = (positions < stop)[:, None] & d_mask[None, :]
    k = tl.load(k_ptr + kv_offsets + t0 * stride_cp, mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + kv_offsets + t0 * stride_cp, mask=kv_mask, other=0.0)
    written = tl.zeros([BLOCK_T], tl.int1)
    if N_WRITTEN > 0:
        r = tl.arange(0, BLOCK_WRITTEN)
        w_slots = tl.load(written_slots_ptr + r, mask=r < N_WRITTEN, other=-1)
        w_positions = tl.load(written_positions_ptr + r, mask=r < N_WRITTEN, other=-1)
        hits = (w_slots[None, :] == b) & (w_positions[None, :] == positions[:, None])
        written = tl.max(hits.to(tl.int32), axis=1) > 0                          # (BT,)
    return k, v, written


@triton.jit
def _reread_written(k_ptr, v_ptr, kv_offsets, stride_cp, t0, stop, d_mask, k, v, written,
                    BLOCK_T: tl.constexpr):
    """A preloaded tile (_preload_tile) after the wait: its rows the kernel before wrote
    read again, the others kept."""
    fresh = (written & (t0 + tl.arange(0, BLOCK_T) < stop))[:, None] & d_mask[None, :]
    k = tl.load(k_ptr + kv_offsets + t0 * stride_cp, mask=fresh, other=k)
    v = tl.load(v_ptr + kv_offsets + t0 * stride_cp, mask=fresh, other=v)
    return k, v


@triton.jit
def _decode_attention_kernel(out_ptr, stride_ob, stride_oh,
                             q_ptr, stride_qb, stride_qh,
                             k_ptr, v_ptr, stride_cb, stride_ch, stride_cp,
                             lengths_ptr, partial_ptr, count_ptr,
                             written_slots_ptr, written_positions_ptr, slopes_ptr,
                             sinks_ptr,
                             qk_scale, max_seq, window, softcap,
                             N_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
                             HEAD_BLOCKS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                             HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr,
                             PDL: tl.constexpr, LENGTHS_FINAL: tl.constexpr,
                             PRELOAD: tl.constexpr, PRELOAD_T: tl.constexpr,
                             N_WRITTEN: tl.constexpr,
                             BLOCK_WRITTEN: tl.constexpr,
                             ONE_RUN_TILES: tl.constexpr, RUN_TILES: tl.constexpr,
                             DOT_PRECISION: tl.constexpr,
                             UPCAST_DOT: tl.constexpr, BLOCK_G: tl.constexpr,
                             GROUP_P2: tl.constexpr, BLOCK_T: tl.constexpr,
                             BLOCK_D: tl.constexpr, BLOCK_SPLITS: tl.constexpr,
                             MERGE_RUNS: tl.constexpr, MERGE_APART: tl.constexpr,
                             ROW_LINES: tl.constexpr, LINE_ELEMENTS: tl.constexpr,
                             RUNS_PRELOADED: tl.constexpr = False,
                             WINDOWED: tl.constexpr = False,
                             SOFTCAPPED: tl.constexpr = False, ALIBI: tl.constexpr = False,
                             ALIBI_ROUNDED: tl.constexpr = False,
                             SINKS: tl.constexpr = False):
    """Program ((b * KV + kv head) * HEAD_BLOCKS + block, run): o_h = sum_t softmax_t(q_h .
    k_t * scale) v_t for block `block` of GROUP_BLOCK of the GROUP q heads h of that kv head,
    over run `run` of the sequence's first lengths[b] positions (clamped to [0, max_seq]), or
    with WINDOWED the last `window` of them (a sliding window); a length of 0 gives zeros.
    SOFTCAPPED: the scores capped by softcap tanh(s / softcap) before the softmax. ALIBI: then
    plus slopes[h] (ALiBi's, one a q head) times (t - (length - 1)), t the key's position;
    ALIBI_ROUNDED (with ALIBI): Falcon's, slopes[h] times t rounded to bf16, times scale.
    SINKS: head h's softmax denominator gains exp(sinks[h]) (an attention sink, a logit
    without a value: GPT-OSS's, Granite SWA's).

    A sequence that fits one run is written by that run directly. Otherwise each run leaves
    (m, denom, acc) of its block's heads in the workspace (_split_workspace.py) and counts
    itself in; the last to arrive merges them (_merge_runs), or with MERGE_APART none does:
    _merge_apart_kernel, launched next, merges them. Runs past the sequence's length do
    nothing. Blocks of heads share the keys and values they read (from L2 where they run
    together) and split the merge between them.

    Under PDL, LENGTHS_FINAL says the lengths read before griddepcontrol.wait are final (the
    kernel just before does not write them; _pdl.py), so they are read once.

    RUNS_PRELOADED (with PRELOAD): no run is longer than its preloaded tiles, and the loop
    over further tiles is left out (COMPILE_PRELOADED_RUNS).
    """
    unit = tl.program_id(0)                    # (pair, block of its q heads)
    run = tl.program_id(1)
    pair = unit // HEAD_BLOCKS
    head0 = (unit % HEAD_BLOCKS) * GROUP_BLOCK  # the block's first q head in the group
    b = pair // N_KV_HEADS
    kv_head = pair % N_KV_HEADS
    kv_base = b.to(tl.int64) * stride_cb + kv_head * stride_ch
    start, stop, used, length = _run_bounds(lengths_ptr, b, run, max_seq, window, SPLITS,
                                            BLOCK_T, ONE_RUN_TILES, RUN_TILES, WINDOWED)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    kv_offsets = kv_base + tl.arange(0, BLOCK_T)[:, None] * stride_cp + offs_d[None, :]
    # The preloaded part of a run, PRELOAD_T positions (whole tiles) in one tile: one softmax
    # round for all of them (a round a tile cost TinyLlama's step 3-5% more, session 70).
    first_offsets = kv_base + tl.arange(0, PRELOAD_T)[:, None] * stride_cp + offs_d[None, :]
    if PRELOAD:
        # The run's first PRELOAD_T positions into registers while the kernel before
        # finishes: it writes no row of the caches but row written_positions[r] of slot
        # written_slots[r] (read again after the wait), so the others are final already.
        k_first, v_first, written_first = _preload_tile(
            k_ptr, v_ptr, first_offsets, stride_cp, start, stop, d_mask, written_slots_ptr,
            written_positions_ptr, b, N_WRITTEN, BLOCK_WRITTEN, PRELOAD_T)
    if PDL:
        # While the kernel before finishes: the run's first keys and values into L2. Only a
        # hint (L2 is coherent, so a line written after this is read fresh below).
        ahead = start + PRELOAD_T if PRELOAD else start
        _prefetch_tile(k_ptr + kv_base, stride_cp, ahead, stop, HEAD_DIM, BLOCK_T, ROW_LINES,
                       LINE_ELEMENTS)
        _prefetch_tile(v_ptr + kv_base, stride_cp, ahead, stop, HEAD_DIM, BLOCK_T, ROW_LINES,
                       LINE_ELEMENTS)
        tl.extra.cuda.gdc_wait()               # q and this layer's cache writes are final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may prefetch its weights
        if not LENGTHS_FINAL:
            # the kernel before may have written them: read again (one more round trip
            # before the first tile's address is known)
            start, stop, used, length = _run_bounds(lengths_ptr, b, run, max_seq, window,
                                                    SPLITS, BLOCK_T, ONE_RUN_TILES,
                                                    RUN_TILES, WINDOWED)
    if run < used:
        offs_g = tl.arange(0, BLOCK_G)
        g_mask = (offs_g < GROUP_BLOCK) & (head0 + offs_g < GROUP)
        heads = kv_head * GROUP + head0 + offs_g
        q = tl.load(q_ptr + b.to(tl.int64) * stride_qb + heads[:, None] * stride_qh
                    + offs_d[None, :], mask=g_mask[:, None] & d_mask[None, :], other=0.0)
        if UPCAST_DOT:
            q = q.to(tl.float32)
        slopes = tl.zeros([BLOCK_G], tl.float32)
        if ALIBI:
            slopes = tl.load(slopes_ptr + heads, mask=g_mask, other=0.0)
            if not ALIBI_ROUNDED:   # (rounded: scaled after the rounding, by qk_scale)
                slopes *= _LOG2E
        m = tl.full([BLOCK_G], float("-inf"), tl.float32)
        denom = tl.zeros([BLOCK_G], tl.float32)
        if SINKS:
            # the sink as run 0's first score, its value zero: every merge after (in the
            # kernel or apart) then weighs it as the positions it attends
            sinks = tl.load(sinks_ptr + heads, mask=g_mask, other=0.0).to(tl.float32)
            m = tl.where(run == 0, sinks * _LOG2E, m)
            denom = tl.where(run == 0, 1.0, denom)
        acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
        if PRELOAD and start < stop:
            k_first, v_first = _reread_written(k_ptr, v_ptr, first_offsets, stride_cp, start,
                                               stop, d_mask, k_first, v_first, written_first,
                                               PRELOAD_T)
            first = start + tl.arange(0, PRELOAD_T)
            m, denom, acc = _attend_tile(q, k_first, v_first, first, first < stop, m, denom,
                                         acc, qk_scale, softcap, slopes, length - 1,
                                         DOT_PRECISION, UPCAST_DOT, SOFTCAPPED, ALIBI,
                                         ALIBI_ROUNDED)
            start += PRELOAD_T
        if not RUNS_PRELOADED:  # a loop never run still holds its registers
            m, denom, acc = _attend_run(q, k_ptr + kv_offsets, v_ptr + kv_offsets, d_mask,
                                        stride_cp, start, stop, qk_scale, softcap, slopes,
                                        length - 1, m, denom, acc, BLOCK_T,
                                        HEAD_DIM == BLOCK_D, DOT_PRECISION, UPCAST_DOT,
                                        SOFTCAPPED, ALIBI, ALIBI_ROUNDED)
        if used == 1:
            out_ptrs = (out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh
                        + offs_d[None, :])
            result = tl.where(denom[:, None] > 0, acc / denom[:, None], 0.0)
            tl.store(out_ptrs, result.to(out_ptr.dtype.element_ty),
                     mask=g_mask[:, None] & d_mask[None, :])
        else:
            # workspace of this unit: maxima (SPLITS, GROUP_P2), sums (the same), then
            # outputs (SPLITS, GROUP_P2, BLOCK_D): the block's heads, not the mma tile's
            # padding rows
            stats = partial_ptr + unit.to(tl.int64) * SPLITS * GROUP_P2 * (2 + BLOCK_D)
            outs = stats + 2 * SPLITS * GROUP_P2
            real = offs_g < GROUP_P2
            tl.store(stats + run * GROUP_P2 + offs_g, m, mask=real)
            tl.store(stats + (SPLITS + run) * GROUP_P2 + offs_g, denom, mask=real)
            tl.store(outs + (run * GROUP_P2 + offs_g[:, None]) * BLOCK_D + offs_d[None, :],
                     acc, mask=real[:, None])
            if not MERGE_APART:
                tl.debug_barrier()  # every thread's partials are out before the count says so
                arrived = tl.atomic_add(count_ptr + unit, 1, sem="acq_rel")
                if arrived == used - 1:
                    _merge_runs(out_ptr, stride_ob, stride_oh, stats, outs, b,
                                kv_head * GROUP + head0,
                                tl.minimum(GROUP - head0, GROUP_BLOCK), used, HEAD_DIM,
                                SPLITS, GROUP_P2, BLOCK_D, BLOCK_SPLITS, MERGE_RUNS)
                    tl.store(count_ptr + unit, 0)  # zero for the next launch on this stream


@triton.jit
def _merge_runs(out_ptr, stride_ob, stride_oh, stats, outs, b, first_head, n_heads, used,
                HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr,
                GROUP_P2: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_SPLITS: tl.constexpr,
                MERGE_RUNS: tl.constexpr):
    """out_h = sum_r exp2(m_rh - M_h) acc_rh / sum_r exp2(m_rh - M_h) denom_rh over the
    `used` runs, M_h = max_r m_rh, summed in run order, for the n_heads q heads from
    first_head on. The statistics of all runs and the partial outputs of the first
    MERGE_RUNS are loaded at once (one round trip to L2: a loop over runs waited for each in
    turn, and merging 32 runs in chunks of 8 took 22 us where 8 runs at once took 13); where
    more runs were used than MERGE_RUNS (whose outputs fill the registers the merge may
    take), the rest follow MERGE_RUNS at a time, weighted by the final maxima, a round trip
    each."""
    runs = tl.arange(0, BLOCK_SPLITS)
    offs_g = tl.arange(0, GROUP_P2)
    offs_d = tl.arange(0, BLOCK_D)
    stat_ptrs = stats + runs[:, None] * GROUP_P2 + offs_g[None, :]
    maxima = tl.load(stat_ptrs, mask=(runs < used)[:, None], other=float("-inf"),
                     cache_modifier=".cg")                                  # (BS, GP)
    sums = tl.load(stat_ptrs + SPLITS * GROUP_P2, mask=(runs < used)[:, None], other=0.0,
                   cache_modifier=".cg")
    # issued with the statistics, before the reduction's barrier: loaded after it, the
    # outputs cost a round trip to L2 of their own
    chunk = tl.arange(0, MERGE_RUNS)
    part_offsets = (chunk[:, None, None] * GROUP_P2 + offs_g[None, :, None]) * BLOCK_D \
        + offs_d[None, None, :]                                             # (MR, GP, BD)
    parts = tl.load(outs + part_offsets, mask=(chunk < used)[:, None, None], other=0.0,
                    cache_modifier=".cg")
    if MERGE_RUNS < BLOCK_SPLITS:  # the first chunk's maxima, beside its outputs
        chunk_maxima = tl.load(stats + chunk[:, None] * GROUP_P2 + offs_g[None, :],
                               mask=(chunk < used)[:, None], other=float("-inf"),
                               cache_modifier=".cg")                        # (MR, GP)
    else:
        chunk_maxima = maxima
    m_max = tl.max(maxima, axis=0)          # (GP,): finite, every used run saw a position
    total = tl.sum(sums * tl.exp2(maxima - m_max[None, :]), axis=0)
    merged = tl.sum(parts * tl.exp2(chunk_maxima - m_max[None, :])[:, :, None], axis=0)
    if MERGE_RUNS < BLOCK_SPLITS:
        for first in range(MERGE_RUNS, used, MERGE_RUNS):
            rows = first + chunk
            in_use = rows < used
            chunk_maxima = tl.load(stats + rows[:, None] * GROUP_P2 + offs_g[None, :],
                                   mask=in_use[:, None], other=float("-inf"),
                                   cache_modifier=".cg")
            parts = tl.load(outs + first * GROUP_P2 * BLOCK_D + part_offsets,
                            mask=in_use[:, None, None], other=0.0, cache_modifier=".cg")
            merged += tl.sum(parts * tl.exp2(chunk_maxima - m_max[None, :])[:, :, None],
                             axis=0)
    result = tl.where(total[:, None] > 0, merged / total[:, None], 0.0)
    heads = first_head + offs_g
    tl.store(out_ptr + b.to(tl.int64) * stride_ob + heads[:, None] * stride_oh
             + offs_d[None, :], result.to(out_ptr.dtype.element_ty),
             mask=(offs_g < n_heads)[:, None] & (offs_d < HEAD_DIM)[None, :])


@triton.jit
def _merge_apart_kernel(out_ptr, stride_ob, stride_oh, lengths_ptr, partial_ptr, max_seq,
                        window, N_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
                        HEAD_BLOCKS: tl.constexpr, GROUP_BLOCK: tl.constexpr,
                        HEAD_DIM: tl.constexpr, SPLITS: tl.constexpr, PDL: tl.constexpr,
                        ONE_RUN_TILES: tl.constexpr,
                        RUN_TILES: tl.constexpr, GROUP_P2: tl.constexpr, BLOCK_T: tl.constexpr,
                        BLOCK_D: tl.constexpr, BLOCK_SPLITS: tl.constexpr,
                        WINDOWED: tl.constexpr = False):
    """Program (unit, g): q head g of the unit's block, its runs' partial results (left by
    _decode_attention_kernel with MERGE_APART) merged as _merge_runs merges them, in run
    order. A program a head, each holding all its runs' outputs at once: no cap on the runs
    of a pair but BLOCK_SPLITS x BLOCK_D values a program. Sequences of one run were written
    by the attention kernel itself."""
    unit = tl.program_id(0)
    g = tl.program_id(1)
    pair = unit // HEAD_BLOCKS
    head = (unit % HEAD_BLOCKS) * GROUP_BLOCK + g  # in the group
    b = pair // N_KV_HEADS
    kv_head = pair % N_KV_HEADS
    # Final before the wait: attention releases this kernel after its own wait (every kernel
    # before it done) and writes no length.
    _, _, used, _ = _run_bounds(lengths_ptr, b, 0, max_seq, window, SPLITS, BLOCK_T,
                                ONE_RUN_TILES, RUN_TILES, WINDOWED)
    if PDL:
        tl.extra.cuda.gdc_wait()               # every run's partials are out
        tl.extra.cuda.gdc_launch_dependents()
    if head < GROUP and used > 1:
        stats = partial_ptr + unit.to(tl.int64) * SPLITS * GROUP_P2 * (2 + BLOCK_D)
        runs = tl.arange(0, BLOCK_SPLITS)
        offs_d = tl.arange(0, BLOCK_D)
        in_use = runs < used
        maxima = tl.load(stats + runs * GROUP_P2 + g, mask=in_use, other=float("-inf"))
        sums = tl.load(stats + (SPLITS + runs) * GROUP_P2 + g, mask=in_use, other=0.0)
        outs = stats + 2 * SPLITS * GROUP_P2
        parts = tl.load(outs + (runs[:, None] * GROUP_P2 + g) * BLOCK_D + offs_d[None, :],
                        mask=in_use[:, None], other=0.0)                    # (BS, BD)
        weights = tl.exp2(maxima - tl.max(maxima, axis=0))  # every used run saw a position
        total = tl.sum(sums * weights, axis=0)
        merged = tl.sum(parts * weights[:, None], axis=0)
        result = tl.where(total > 0, merged / total, 0.0)
        tl.store(out_ptr + b.to(tl.int64) * stride_ob + (kv_head * GROUP + head) * stride_oh
                 + offs_d, result.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)


def longest_run_tiles(max_seq: int, block_t: int, splits: int, one_run_tiles: int,
                      run_tiles: int) -> int:
    """The most tiles a run takes (as _run_bounds cuts them) at any length up to max_seq:
    all of a sequence's tiles up to one_run_tiles, past that a 1 / splits share of them, at
    least run_tiles, both largest at the longest sequence."""
    tiles = triton.cdiv(max_seq, block_t)
    if tiles <= one_run_tiles:
        return max(tiles, 1)
    return max(one_run_tiles, triton.cdiv(tiles, splits), run_tiles)


def attention_config(batch: int, n_kv_heads: int, group: int, head_dim: int, max_seq: int,
                     sms: int | None, *, tile: int | None = None, stages: int | None = None,
                     programs_per_sm: int = 1, query_rows: int = 16,
                     preload: int = 0, merge_chunks: int = MERGE_CHUNKS,
                     head_blocks: int | None = None, warps: int = 4, run_tiles: int = 1,
                     one_run_tiles: int | None = None,
                     longest: int | None = None, element_size: int = 2,
                     shared_memory: int | None = None, merge_apart: bool = False) -> dict:
    """Launch shape: the group's q heads padded to a tensor-core tile of at least `query_rows` rows
    (16, an mma.sync tile; 64, a Hopper warpgroup's wgmma, which does four times the multiplies
    but reduces the softmax's rows within a warp and keeps the probabilities in registers: 2
    barriers an iteration instead of 6 on sm_90); tiles of `tile` positions (default_tile's
    where given no tile) and `stages` loads in flight (3 where given a tile or stages but not
    both; given neither, pipeline_rule's for caches of `element_size` bytes an element on a GPU
    whose programs may use `shared_memory` bytes, an H100's where None); at most
    `programs_per_sm` programs an SM over all (sequence, kv head) pairs (rounded down: a few
    programs past a whole wave would run as a second wave with most SMs idle), but no more runs
    than max_seq has tiles, and no more than `merge_chunks` times the runs whose partial outputs
    the merge holds in registers at once (MERGE_ELEMENTS; each further chunk of runs is one more
    round trip to L2); `preload`: each run's first `preload` tiles (True: one) read into
    registers before the wait under PDL, where the launcher finds that safe; `head_blocks`:
    each pair's q heads in that many blocks (at most the group), a program (and a merge) each,
    which read the same keys and values; by default head_blocks_rule's; `warps` a program;
    `run_tiles`: a sequence of more tiles is cut into runs of at least that many (at most that
    many, one run), so that a preload of as many tiles reads a whole run before the wait;
    `one_run_tiles`: a sequence of more tiles than that is split (default ONE_RUN_TILES, or
    run_tiles where given); with either, no more runs than a sequence of `longest` positions
    (default max_seq) takes: an idle run's program still holds its SM's registers while the
    kernel before runs, where the next kernel's programs would load their weights (session
    74: with 16 runs a pair, of which a sequence of 384 positions used 2, TinyLlama's step
    lost what 2 runs won); `merge_apart`: the runs merged by a kernel of their own, launched
    next, instead of by the last of them (no cap on the runs but APART_SPLITS). The
    defaults are the rule for untuned shapes (research/sweep_decode_attention.py,
    notes/models.md)."""
    sms = sms or ASSUMED_SM_COUNT
    shape = (batch, n_kv_heads, group, head_dim, max_seq, sms, tile or default_tile(head_dim),
             programs_per_sm, 0 if merge_apart else merge_chunks)
    if head_blocks is None:
        head_blocks = head_blocks_rule(shape)
    if tile is None and stages is None:
        tile, stages = pipeline_rule(shape, head_blocks, element_size,
                                     shared_memory or ASSUMED_SHARED_MEMORY)
    tile, stages = _fitting(shape[6] if tile is None else tile, stages or 3,
                            _block_d(head_dim) * element_size,
                            shared_memory or ASSUMED_SHARED_MEMORY)
    shape = (*shape[:6], tile, *shape[7:])
    head_blocks, splits, group_p2, merge_runs = _grid(*shape, head_blocks)
    if run_tiles > 1 or one_run_tiles is not None:
        splits = min(splits, triton.cdiv(triton.cdiv(longest or max_seq, shape[6]), run_tiles))
    block_d = _block_d(head_dim)
    block_splits = triton.next_power_of_2(splits)
    # RUN_TILES only where it is more than one: the other launches keep their keys
    one_run = one_run_tiles or (run_tiles if run_tiles > 1 else ONE_RUN_TILES)
    runs = {"ONE_RUN_TILES": one_run, "RUN_TILES": run_tiles} if run_tiles > 1 else {
        "ONE_RUN_TILES": one_run}
    return {"SPLITS": splits, **runs,
            "BLOCK_G": max(query_rows, group_p2), "GROUP_P2": group_p2, "BLOCK_T": shape[6],
            "BLOCK_D": block_d, "BLOCK_SPLITS": block_splits,
            "MERGE_RUNS": min(merge_runs, block_splits), "HEAD_BLOCKS": head_blocks,
            "PRELOAD": preload > 0, "PRELOAD_TILES": max(1, int(preload)),
            **({"MERGE_APART": True} if merge_apart and splits > 1 else {}),
            "num_warps": warps, "num_stages": stages}


def _fitting(tile: int, stages: int, row_bytes: int, shared_memory: int) -> tuple[int, int]:
    """(tile, stages) as given, or halved (tiles first, down to 16 positions) until the
    tiles of keys and values in flight fit a program's shared memory beside the rest:
    Triton keeps stages - 1 of them (rows of row_bytes). At head_dim 256 in fp32 the default
    tile of 64 positions 3 deep needs 276 KB (an H200 gives a program 227 KB)."""
    def needed(tile: int, stages: int) -> int:
        return (stages - 1) * 2 * tile * row_bytes + SPARE_SHARED_MEMORY

    while needed(tile, stages) > shared_memory and tile > 16:
        tile //= 2
    while needed(tile, stages) > shared_memory and stages > 2:
        stages -= 1
    return tile, stages


def _grid(batch: int, n_kv_heads: int, group: int, head_dim: int, max_seq: int, sms: int,
          block_t: int, programs_per_sm: int, merge_chunks: int,
          head_blocks: int) -> tuple[int, int, int, int]:
    """(head blocks, runs a unit, q heads a block padded to a power of two, runs one merge
    holds) for a launch of q heads in `head_blocks` blocks: attention_config's grid;
    merge_chunks 0: the runs merged by a kernel of their own (APART_SPLITS at most)."""
    head_blocks = triton.cdiv(group, triton.cdiv(group, max(1, head_blocks)))  # none empty
    group_p2 = triton.next_power_of_2(triton.cdiv(group, head_blocks))
    block_d = _block_d(head_dim)
    units = batch * n_kv_heads * head_blocks
    merge_runs = max(1, MERGE_ELEMENTS // (group_p2 * block_d))  # a power of two
    splits = sms * programs_per_sm // units
    cap = merge_chunks * merge_runs if merge_chunks else APART_SPLITS
    splits = max(1, min(splits, cap, triton.cdiv(max_seq, block_t)))
    return head_blocks, splits, group_p2, merge_runs


def head_blocks_rule(shape: tuple) -> int:
    """Blocks of q heads a pair for untuned shapes (`shape`: _grid's arguments but the
    blocks): twice as many while the launch would fill at most half the SMs' program slots.
    Few pairs of a wide group leave SMs idle where the merge's cap or a short cache limits
    their runs; more blocks fill them, each reading the pair's keys and values again (from
    L2 where they run together) and merging fewer heads. Over 13 batch 1-2 points of wide
    groups, 1024-8192 positions, this chose the fastest of 1, 2 and 4 blocks at 12 and 2 blocks
    where 4 were 7% faster at the 13th (H200, notes/models.md, session 58)."""
    batch, n_kv_heads, group, _, _, sms, _, programs_per_sm, _ = shape
    blocks = 1
    while blocks < group:
        used, splits, _, _ = _grid(*shape, blocks)
        if 2 * batch * n_kv_heads * used * splits > sms * programs_per_sm:
            break
        blocks *= 2
    return blocks


def pipeline_rule(shape: tuple, head_blocks: int, element_size: int,
                  shared_memory: int) -> tuple[int, int]:
    """(positions a tile, stages) for untuned shapes (`shape`: _grid's arguments but the
    blocks, the default tile among them): more bytes in flight where each run of a full
    cache streams many tiles (DEEP_RUN_TILES, DOUBLE_RUN_TILES), where shared memory holds
    them; else the default tile, 3 deep. A program with one tile's keys and values in use and
    one or two more loading leaves too few bytes in flight to stream a long run at the copy
    rate: at MHA 32/32x128 batch 8, 1024-8192 positions, 3 stages reached 70-82% of copy
    and tiles of 128 positions 101-105% (SDPA 91-104%). Not where one program an SM would
    add a wave mostly idle (FULL_WAVES)."""
    batch, n_kv_heads, _, head_dim, max_seq, sms, tile = shape[:7]
    blocks, splits, _, _ = _grid(*shape, head_blocks)
    programs = batch * n_kv_heads * blocks * splits
    if programs > sms and programs / (triton.cdiv(programs, sms) * sms) < FULL_WAVES:
        return tile, 3
    run_tiles = max_seq / (splits * tile)
    block_d = _block_d(head_dim)
    options = (((2 * tile, 3),) if run_tiles >= DOUBLE_RUN_TILES else ()) + (
        ((tile, 4),) if run_tiles >= DEEP_RUN_TILES else ())
    for positions, stages in options:
        stage_bytes = 2 * positions * block_d * element_size   # keys and values
        if stages * stage_bytes + SPARE_SHARED_MEMORY <= shared_memory:
            return positions, stages
    return tile, 3


def _block_d(head_dim: int) -> int:
    """head_dim padded to a power of two of at least 16, a tensor-core tile's depth."""
    return max(16, triton.next_power_of_2(head_dim))


def default_tile(head_dim: int) -> int:
    """Positions a tile for untuned shapes: 128 up to head_dim 64, else 64."""
    return 128 if triton.next_power_of_2(head_dim) <= 64 else 64


def preloaded_length(head_dim: int) -> int:
    """Positions a step's widest preload reads before the wait: two default tiles as one. Up
    to here a sequence can be one run read whole before the wait; past it, a launch either
    reads a tile after the wait or splits the sequence into runs and merges them, and which
    costs less depends on the model (notes/models.md, session 81)."""
    return PRELOADED_TILES * default_tile(head_dim)


def one_run_length(head_dim: int) -> int:
    """Positions the rule reads in one program, unsplit (ONE_RUN_TILES default tiles). Up to
    here every run is a whole sequence; past it sequences are split over the SMs: the two
    regimes' fastest launches differ (notes/models.md, session 71)."""
    return ONE_RUN_TILES * default_tile(head_dim)


def attention_candidates(batch: int, n_kv_heads: int, group: int, head_dim: int,
                         max_seq: int, sms: int | None, **device) -> list[dict]:
    """What tune.tune_attention times for one shape (tg.Generator runs it), the default rule
    first; `device`: attention_config's element_size and shared_memory (device_facts). No
    launch was the fastest at most shapes, and each was far slower than the best somewhere,
    so the tuner times a few that each won a kind of cache (notes/models.md):
    - the rule alone (its runs merged apart), then with 4 stages and 2 programs an SM: apart
      beat the in-kernel merge at 14 of 15 caches of 2-64 MB (session 85);
    - the in-kernel merge (the layer's rule) 3 and 4 stages deep, and 4 stages at 2 programs
      an SM: more loads in flight on large caches, more programs where few pairs stream a
      long cache (sessions 47, 60);
    - tiles of twice the default positions: caches of 16 MB and more of several tiles a run
      (session 47);
    - each run's first tile read before the wait, 2 or 4 stages deep (session 56);
    - twice the runs one merge holds, in two chunks, and the q heads of a pair in 1, 2 or 4
      blocks: few pairs of wide groups on long caches (session 58)."""
    shape = (batch, n_kv_heads, group, head_dim, max_seq, sms)
    apart = {"merge_apart": True}
    variants = (apart, {**apart, "stages": 4}, {**apart, "programs_per_sm": 2},
                {**apart, "programs_per_sm": 2, "stages": 4},
                {}, {"stages": 3}, {"stages": 4}, {"stages": 4, "programs_per_sm": 2},
                {"tile": 2 * default_tile(head_dim)}, {"preload": True, "stages": 2},
                {"preload": True, "stages": 4}, {"merge_chunks": 2, "head_blocks": 1},
                {"head_blocks": 1}, {"head_blocks": 2}, {"head_blocks": 4})
    configs = []
    for variant in variants:
        config = attention_config(*shape, **variant, **device)
        if config not in configs:
            configs.append(config)
    return configs


def step_candidates(batch: int, n_kv_heads: int, group: int, head_dim: int, max_seq: int,
                    sms: int | None, chosen: dict, longest: int | None = None,
                    **device) -> list[dict]:
    """What tg.Generator times in its own decode step (tune.tune_attention_in_step_once):
    `chosen` (the launch tuned alone, or the rule; where that merges apart, the layer's rule)
    first (`device` as for attention_candidates), then the variants below. Alone, attention
    does not show what it costs beside the kernels that run with it under PDL: each variant
    was the fastest in some models' steps and the slowest in others' (notes/models.md):
    - the rule, where it was not chosen;
    - tiles of twice the default positions, 2 stages; q tiles of 64 rows (session 43);
    - each run's first tile read before the wait, 2 stages (session 56);
    - the first two default tiles' positions preloaded as one tile over 8 warps (session 70);
    - the same in runs of at least two tiles, as many runs as the step's `longest` sequence
      (default max_seq) takes (session 74), and with the q heads of a kv head in half and
      in twice the rule's blocks (session 75);
    - runs of one tile from two tiles on, each preloaded (sessions 75 and 81;
      generate.context_bands gives those lengths a band of their own)."""
    shape = (batch, n_kv_heads, group, head_dim, max_seq, sms)
    if chosen.get("MERGE_APART"):  # a layer merges in the kernel: its rule instead
        chosen = attention_config(*shape, **device)
    runs_of_two = {"preload": 2, "stages": 2, "warps": 8, "run_tiles": 2, "longest": longest}
    blocks = attention_config(*shape, **device)["HEAD_BLOCKS"]
    configs = [dict(chosen)]
    for variant in ({}, {"tile": 2 * default_tile(head_dim), "stages": 2},
                    {"query_rows": 64}, {"preload": True, "stages": 2},
                    {"preload": 2, "stages": 2, "warps": 8}, runs_of_two,
                    {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": longest},
                    *({**runs_of_two, "head_blocks": n} for n in (blocks // 2, 2 * blocks)
                      if 1 <= n <= group)):
        config = attention_config(*shape, **variant, **device)
        if config not in configs:
            configs.append(config)
    return configs


# Raised whenever attention_candidates or step_candidates change: a launch chosen on disk
# among older candidates is then timed again instead of kept (2: tiles of twice the default
# positions alone, the rule in the step; session 47. 3: the first tile preloaded; session 56.
# 4: runs merged in two chunks, 5: q heads in blocks; session 58. 6: blocks in the rule;
# session 59. 7: deeper pipelines in the rule, the default tile 3 deep timed; session 60. 8: a
# run's first two tiles' positions preloaded over 8 warps in the step; session 70. 9: the same
# in runs of at least two tiles; session 74. 10: those runs in half and twice the rule's
# blocks of q heads; session 75. 11: runs of one tile, each preloaded; session 81. 12: runs
# merged apart, the rule alone; session 85).
CANDIDATES_VERSION = 12


def device_facts(dtype: torch.dtype, device: torch.device) -> dict:
    """attention_config's keywords about the cache's dtype and the device."""
    return {"element_size": dtype.itemsize, "shared_memory": program_shared_memory(device)}


def attention_key(batch: int, n_kv_heads: int, group: int, head_dim: int, max_seq: int,
                  dtype: torch.dtype) -> tuple:
    return (batch, n_kv_heads, group, head_dim, max_seq, str(dtype).removeprefix("torch."),
            f"candidates {CANDIDATES_VERSION}")


tuned = Tuner("decode-attention", [{}])  # a store of timed configs: tune_attention fills it


def layer_key(key: tuple) -> tuple:
    """Where tune_attention keeps, beside the fastest launch alone (`key`), the fastest
    that merges in the kernel: what a decode layer runs where the first merges apart."""
    return (*key, "in a layer")


def layer_launch(key: tuple) -> dict | None:
    """The launch tuned for `key` that a decode layer may run (it merges in the kernel),
    else None."""
    config = tuned.lookup(key)
    return tuned.lookup(layer_key(key)) if config and config.get("MERGE_APART") else config


def _launch_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             lengths: torch.Tensor, scale: float, window: int, softcap: float,
                             alibi_slopes: torch.Tensor | None, alibi_rounded: bool,
                             sinks: torch.Tensor | None, out: torch.Tensor) -> None:
    launch_decode_attention(q, k_cache, v_cache, lengths, scale, out, window=window,
                            softcap=softcap, alibi_slopes=alibi_slopes,
                            alibi_rounded=alibi_rounded, sinks=sinks)


def _launch_in_layer(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     lengths: torch.Tensor, scale: float, window: int, softcap: float,
                     alibi_slopes: torch.Tensor | None, alibi_rounded: bool,
                     sinks: torch.Tensor | None, out: torch.Tensor) -> None:
    launch_decode_attention(q, k_cache, v_cache, lengths, scale, out, in_layer=True,
                            window=window, softcap=softcap, alibi_slopes=alibi_slopes,
                            alibi_rounded=alibi_rounded, sinks=sinks)


def launch_decode_attention(q, k_cache, v_cache, lengths, scale: float, out,
                            config: dict | None = None, *,
                            in_step: tuple[torch.Tensor, torch.Tensor] | None = None,
                            compile_only: bool = False, in_layer: bool = False,
                            window: int = 0, softcap: float = 0.0,
                            alibi_slopes: torch.Tensor | None = None,
                            alibi_rounded: bool = False,
                            sinks: torch.Tensor | None = None) -> None:
    """Launch on checked inputs; config: attention_config's keys (when None: the one `tilegraph
    tune` chose for this shape, else the rule's: alone, the runs merged apart; in_layer, in
    a model's decode layer, merged in the kernel: layer_launch's, else the layer's rule).
    window: a sequence attends to its last `window` positions (0, or as many as the cache
    holds: all of them; the launch shape is chosen for the cache's length either way, and
    the runs cut from the positions attended). softcap > 0: scores capped by softcap
    tanh(s / softcap) before the softmax (Gemma 2's; 0: none, and the kernel compiled
    without the cap's code). alibi_slopes (H,) fp32: each q head's ALiBi slope, times the
    key's distance back from the query added to its scores (None: the kernel compiled
    without it); alibi_rounded: Falcon's form of the bias; sinks (H,): each q head's attention
    sink (decode_attention's; None: compiled without them). in_step,
    (slots, positions): launch as a decode step does, right after the q|k|v projection
    wrote row positions[r] of slot slots[r] in both caches (its PDL noted as that
    projection notes it), so the kernel checked or compiled outside a step is the one the
    step runs. compile_only: compile the kernel (its warmup()) without launching or noting
    it."""
    if in_step is not None:
        launched(q.device, True, (k_cache, v_cache), ((k_cache, v_cache), *in_step))
    batch, n_heads, head_dim = q.shape
    _, n_kv_heads, max_seq, _ = k_cache.shape
    group = n_heads // n_kv_heads
    windowed = 0 < window < max_seq   # else the kernel compiled without the window's code
    if config is None:
        key = attention_key(batch, n_kv_heads, group, head_dim, max_seq, q.dtype)
        # a layer's five kernels (issue 20): its merge in the kernel
        config = layer_launch(key) if in_layer else tuned.lookup(key)
    config = dict(config or attention_config(batch, n_kv_heads, group, head_dim, max_seq,
                                             sm_count(q.device),
                                             **device_facts(q.dtype, q.device),
                                             merge_apart=not in_layer))
    config.setdefault("ONE_RUN_TILES", ONE_RUN_TILES)  # a shape tuned before it was a key
    config.setdefault("RUN_TILES", 1)
    config.setdefault("PRELOAD", False)
    preload_positions = config.pop("PRELOAD_TILES", 1) * config["BLOCK_T"]
    config.setdefault("MERGE_RUNS", config["BLOCK_SPLITS"])  # older configs: all at once
    config.setdefault("HEAD_BLOCKS", 1)
    config.setdefault("MERGE_APART", False)
    partials = counters = out  # placeholders, never touched without a split
    units = batch * n_kv_heads * config["HEAD_BLOCKS"]
    if config["SPLITS"] > 1:
        per_unit = config["SPLITS"] * config["GROUP_P2"] * (2 + config["BLOCK_D"])
        workspace = split_workspace(q.device, units * per_unit, units)
        if workspace is None:  # a capture found none large enough: run unsplit
            config["SPLITS"] = 1
        else:
            partials, counters = workspace
    pdl = PDL_ENABLED and supports_pdl(q.device)
    # A model computes the lengths once a step, many kernels before: read before the wait,
    # they save a round trip to memory ahead of the first keys (1-3% of a step on TinyLlama
    # and Qwen2-0.5B, notes/models.md). Written by the kernel just before, read again.
    lengths_final = pdl and use_pdl(q.device, (lengths,))
    # The first tile is read before the wait where its bounds are final (no PDL, or lengths
    # read once) and the kernel before writes no cache row but those it names.
    rows = cache_rows_in_flight(q.device, (k_cache, v_cache)) if pdl else ()
    if rows is None or (pdl and not lengths_final):
        config["PRELOAD"] = False
    written_slots, written_positions = rows if config["PRELOAD"] and rows else (lengths, lengths)
    config["RUNS_PRELOADED"] = (
        COMPILE_PRELOADED_RUNS and config["PRELOAD"] and preload_positions >= config["BLOCK_T"]
        * longest_run_tiles(max_seq, config["BLOCK_T"], config["SPLITS"],
                            config["ONE_RUN_TILES"], config["RUN_TILES"]))
    n_written = written_positions.numel() if config["PRELOAD"] and rows else 0
    line_elements = 128 // q.element_size()  # an L2 line, for the prefetch under PDL
    row_lines = triton.next_power_of_2(triton.cdiv(head_dim, line_elements))
    group_block = triton.cdiv(group, config["HEAD_BLOCKS"])
    config["MERGE_APART"] = merge_apart = config["MERGE_APART"] and config["SPLITS"] > 1
    grid = (units, config["SPLITS"])
    kernel = (functools.partial(_decode_attention_kernel.warmup, grid=grid) if compile_only
              else _decode_attention_kernel[grid])
    kernel(
        out, out.stride(0), out.stride(1), q, q.stride(0), q.stride(1),
        k_cache, v_cache, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        lengths, partials, counters, written_slots, written_positions,
        alibi_slopes if alibi_slopes is not None else lengths,   # (lengths: never read)
        sinks if sinks is not None else lengths,
        scale * math.log2(math.e), max_seq, window if windowed else max_seq,
        softcap * math.log2(math.e) if softcap > 0 else 1.0,
        N_KV_HEADS=n_kv_heads, GROUP=group, GROUP_BLOCK=group_block, HEAD_DIM=head_dim,
        PDL=pdl, LENGTHS_FINAL=lengths_final, N_WRITTEN=n_written,
        BLOCK_WRITTEN=triton.next_power_of_2(max(n_written, 1)),
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        UPCAST_DOT=INTERPRET and q.dtype == torch.bfloat16,
        LINE_ELEMENTS=line_elements, ROW_LINES=row_lines, PRELOAD_T=preload_positions, **config,
        **({"WINDOWED": True} if windowed else {}),
        **({"SOFTCAPPED": True} if softcap > 0 else {}),
        **({"ALIBI": True} if alibi_slopes is not None else {}),
        **({"ALIBI_ROUNDED": True} if alibi_slopes is not None and alibi_rounded else {}),
        **({"SINKS": True} if sinks is not None else {}),
        **({"launch_pdl": True} if pdl else {}))
    if not compile_only:
        launched(q.device, pdl, (out, partials, counters))
    if merge_apart:
        grid = (units, group_block)
        merge = (functools.partial(_merge_apart_kernel.warmup, grid=grid) if compile_only
                 else _merge_apart_kernel[grid])
        merge(out, out.stride(0), out.stride(1), lengths, partials, max_seq,
              window if windowed else max_seq, N_KV_HEADS=n_kv_heads, GROUP=group,
              HEAD_BLOCKS=config["HEAD_BLOCKS"],
              GROUP_BLOCK=group_block, HEAD_DIM=head_dim, SPLITS=config["SPLITS"], PDL=pdl,
              ONE_RUN_TILES=config["ONE_RUN_TILES"],
              RUN_TILES=config["RUN_TILES"], GROUP_P2=config["GROUP_P2"],
              BLOCK_T=config["BLOCK_T"], BLOCK_D=config["BLOCK_D"],
              BLOCK_SPLITS=config["BLOCK_SPLITS"], num_warps=4,
              **({"WINDOWED": True} if windowed else {}), **({"launch_pdl": True} if pdl else {}))
        if not compile_only:
            launched(q.device, pdl, (out,))
    if compile_only and in_step is not None:   # no q|k|v projection ran: nothing in flight
        launched(q.device, False, ())


_run_decode_attention = custom_op("decode_attention", _launch_decode_attention)
_run_in_layer = custom_op("decode_attention_in_layer", _launch_in_layer)


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     lengths: torch.Tensor, scale: float | None = None, *,
                     window: int | None = None, softcap: float | None = None,
                     alibi_slopes: torch.Tensor | None = None, alibi_rounded: bool = False,
                     sinks: torch.Tensor | None = None,
                     out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) v for one query token per sequence over its cached positions.

    q (B, H, D): sequence b's query heads; k_cache, v_cache (max_batch, KV, max_seq, D) with
    B <= max_batch, sequence b in cache slot b, H a multiple of KV (q heads h * H / KV ..
    (h + 1) * H / KV - 1 share kv head h); lengths (B,) int: positions 0 .. lengths[b] - 1
    of slot b are attended (read on the device: clamped to [0, max_seq], 0 gives zeros), or
    with `window` (a sliding window, as Mistral's and Phi-3's) only the last `window` of
    them: lengths[b] - window .. lengths[b] - 1. scale defaults to D ** -0.5. softcap (a
    positive number, Gemma 2's 50): each score s = q . k * scale becomes softcap *
    tanh(s / softcap) before the softmax. alibi_slopes (H,) fp32 on q's device (ALiBi's
    position bias, as BLOOM's): head h's score of position t then gains alibi_slopes[h] *
    (t - (lengths[b] - 1)), the key's distance back from the query (what the model's bias
    of slope times key position adds, less a constant the softmax drops). alibi_rounded
    (with alibi_slopes): the bias as transformers' Falcon computes it, added to q . k before
    the scale: head h's score of position t gains scale * bf16(alibi_slopes[h] * t), the
    product rounded to bfloat16 whatever q's dtype (Falcon-RW's checkpoints, trained so).
    sinks (H,) on q's device, any float dtype: head h's softmax denominator gains
    exp(sinks[h]), a logit of the scaled scores' units without a value (attention sinks,
    GPT-OSS's and Granite SWA's), so the weights sum to less than one. Softmax in fp32.
    Returns (B, H, D) in q's dtype.
    """
    return _attend(q, k_cache, v_cache, lengths, scale, window, softcap, alibi_slopes,
                   alibi_rounded, sinks, out, _run_decode_attention)


def decode_attention_in_layer(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              lengths: torch.Tensor, window: int | None = None,
                              softcap: float | None = None,
                              alibi_slopes: torch.Tensor | None = None,
                              alibi_rounded: bool = False,
                              sinks: torch.Tensor | None = None) -> torch.Tensor:
    """decode_attention as a model's decode layer runs it: the runs of a split sequence
    merged by the last of them, so that the layer stays five kernels (issue 20); alone,
    tg.decode_attention merges them in a kernel of its own where that is faster."""
    return _attend(q, k_cache, v_cache, lengths, None, window, softcap, alibi_slopes,
                   alibi_rounded, sinks, None, _run_in_layer)


def _attend(q, k_cache, v_cache, lengths, scale, window, softcap, alibi_slopes, alibi_rounded,
            sinks, out, run) -> torch.Tensor:
    """decode_attention's checks, then `run` (a custom op's runner) into out."""
    check_tensor("q", q)
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        check_tensor(name, t)
        if t.dtype != q.dtype or t.device != q.device:
            raise ValueError(f"{name} must have q's dtype and device ({q.dtype}, {q.device}), "
                             f"got {t.dtype} on {t.device}")
        if t.ndim != 4 or t.stride(-1) != 1:
            raise ValueError(f"{name} must be (max_batch, kv_heads, max_seq, head_dim) with a "
                             f"unit last stride, got shape {tuple(t.shape)}")
    if k_cache.shape != v_cache.shape or k_cache.stride() != v_cache.stride():
        raise ValueError(f"k_cache and v_cache must have one shape and layout, got "
                         f"{tuple(k_cache.shape)} and {tuple(v_cache.shape)}")
    max_batch, n_kv_heads, max_seq, head_dim = k_cache.shape
    if q.ndim != 3 or q.stride(-1) != 1:
        raise ValueError(f"q must be (batch, heads, head_dim) with a unit last stride, got "
                         f"shape {tuple(q.shape)}")
    batch, n_heads, q_dim = q.shape
    if q_dim != head_dim:
        raise ValueError(f"q has head_dim {q_dim}, the cache {head_dim}")
    if n_kv_heads == 0 or n_heads % n_kv_heads:
        raise ValueError(f"q's {n_heads} heads are not a multiple of the cache's "
                         f"{n_kv_heads} kv heads")
    if batch > max_batch:
        raise ValueError(f"q has {batch} sequences, the cache room for {max_batch}")
    if not isinstance(lengths, torch.Tensor) or lengths.dtype not in (torch.int32,
                                                                      torch.int64):
        raise TypeError("lengths must be an int32 or int64 tensor")
    if lengths.shape != (batch,) or lengths.device != q.device:
        raise ValueError(f"lengths must have shape ({batch},) on {q.device}, got "
                         f"{tuple(lengths.shape)} on {lengths.device}")
    if scale is None:
        scale = head_dim ** -0.5
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise ValueError(f"scale must be a finite number, got {scale!r}")
    check_window(window)
    if softcap is not None and (isinstance(softcap, bool) or not isinstance(softcap, (int, float))
                                or not 0 < softcap < math.inf):
        raise ValueError(f"softcap must be a positive number or None, got {softcap!r}")
    check_per_head("alibi_slopes", alibi_slopes, n_heads, q.device)
    if not isinstance(alibi_rounded, bool) or (alibi_rounded and alibi_slopes is None):
        raise ValueError(f"alibi_rounded must be a bool, True only with alibi_slopes, got "
                         f"{alibi_rounded!r}")
    check_per_head("sinks", sinks, n_heads, q.device)
    out = prepare_out(out, (batch, n_heads, head_dim), q.dtype, q.device)
    if out.numel():
        run(q, k_cache, v_cache, lengths.contiguous(), float(scale), window or 0,
            float(softcap or 0.0), alibi_slopes, alibi_rounded, sinks, out)
    return out


def check_per_head(name: str, values, n_heads: int, device: torch.device) -> None:
    """Raise unless `values` is None or a contiguous (n_heads,) tensor on `device`, one value
    a q head: alibi_slopes fp32 (ALiBi's slopes), sinks any float (attention sinks' logits)."""
    if values is None:
        return
    slopes = name == "alibi_slopes"
    if not isinstance(values, torch.Tensor) or not (
            values.dtype == torch.float32 if slopes else values.is_floating_point()):
        raise TypeError(f"{name} must be a {'float32' if slopes else 'float'} tensor (one "
                        f"{'slope' if slopes else 'logit'} a q head) or None")
    if values.shape != (n_heads,) or values.device != device or not values.is_contiguous():
        raise ValueError(f"{name} must be a contiguous ({n_heads},) tensor on {device}, got "
                         f"shape {tuple(values.shape)} on {values.device}")


def check_window(window) -> None:
    if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                               or window < 1):
        raise ValueError(f"window must be a positive int (positions attended) or None, got "
                         f"{window!r}")


def decode_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         lengths: torch.Tensor, scale: float | None = None, *,
                         window: int | None = None, softcap: float | None = None,
                         alibi_slopes: torch.Tensor | None = None,
                         alibi_rounded: bool = False,
                         sinks: torch.Tensor | None = None) -> torch.Tensor:
    """The same in PyTorch: float64 for float64 input, else fp32 cast back; a length of 0
    gives zeros."""
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    batch, n_heads, head_dim = q.shape
    n_kv_heads, max_seq = k_cache.shape[1], k_cache.shape[2]
    scale = head_dim ** -0.5 if scale is None else scale
    keys = k_cache[:batch].to(compute).repeat_interleave(n_heads // n_kv_heads, dim=1)
    values = v_cache[:batch].to(compute).repeat_interleave(n_heads // n_kv_heads, dim=1)
    scores = torch.einsum("bhd,bhtd->bht", q.to(compute), keys) * scale
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)
    lengths = lengths.clamp(0, max_seq).to(q.device)
    positions = torch.arange(max_seq, device=q.device)[None, :]
    if alibi_rounded:   # (1, H, T): Falcon's, from position 0, rounded, then scaled
        bias = alibi_slopes.to(compute)[None, :, None] * positions[:, None, :]
        scores = scores + bias.to(torch.bfloat16).to(compute) * scale
    elif alibi_slopes is not None:   # (B, H, T): slope times the distance back from the query
        apart = (positions - (lengths[:, None] - 1)).to(compute)
        scores = scores + alibi_slopes.to(compute)[None, :, None] * apart[:, None, :]
    hidden = positions >= lengths[:, None]   # (B, T)
    if window is not None:
        hidden |= positions < lengths[:, None] - window
    scores = scores.masked_fill(hidden[:, None, :], float("-inf"))
    if sinks is not None:   # a last column of each head's sink logit, its value zero
        sink = sinks.to(compute)[None, :, None].expand(batch, n_heads, 1)
        weights = torch.softmax(torch.cat([scores, sink], dim=-1), dim=-1)[..., :-1]
    else:
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)   # an empty row: zeros
    return torch.einsum("bht,bhtd->bhd", weights, values).to(q.dtype)
