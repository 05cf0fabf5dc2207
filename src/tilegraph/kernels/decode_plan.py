"""Which kernel and block shape run a linear layer of 1 to DECODE_MAX_ROWS rows (decode).

Three kernels stream the weight once for all rows: _gemv_kernel (one row, 16-bit; its tile
also on 2-4 rows, _gemv_rows_kernel, where tuned), _matvec_kernel (CUDA cores, rows applied
one at a time) and _dot_rows_kernel (tensor cores, rows padded to 16). A shape takes the
plan `tilegraph tune` timed fastest for it on this GPU (inside a CUDA graph, over weights
rotated past L2, cached on disk by GPU, Triton version, rows, N, K and dtype), or else
`rule`'s. A call with a norm, an activation or a residual never times anything itself:
alone, over rotated weights, a projection's best tile is not the one its decode step runs
fastest with (notes/decode.md). A plain projection, which cuBLAS can run as one call, is
timed once against it (plain_plan): no user should have to know to run `tilegraph tune` for
tg.linear not to lose to F.linear.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import torch
import triton

from .._runtime import is_capturing
from ._added_norm import NO_ADDED
from ._dot_rows import DOT_ROWS, launch_dot_rows, one_step_a_slice
from ._head_norm_store import NO_HEAD_NORM
from ._launch import ASSUMED_SM_COUNT, is_compiling_only, sm_count
from ._matvec import (
    GEMV_MAX_ROWS,
    PERSISTENT_MAX_K,
    PERSISTENT_MIN_BYTES,
    TWO_ROW_MAX_BYTES,
    gemv_config,
    launch_matvec,
    matvec_config,
    persistent_gemv_config,
    small_persistent_gemv_config,
    split_gemv_config,
    two_row_gemv_config,
)
from ._pdl import use_pdl
from ._rotary_store import NO_ROTARY
from ._split_workspace import deals_differ
from .autotune import RotatedCopies, Tuner, timing_enabled

DECODE_MAX_ROWS = DOT_ROWS  # more rows take the tiled GEMM
KINDS = ("gemv", "matvec", "dot", "cublas")
# One 16-bit row takes the split-tile GEMV up to this many columns; past it the GEMV walks K
# one tile at a time (4096 x 14336 with 2048-column tiles: 82% of the floor, 0.91x cuBLAS)
# while the tensor-core kernel keeps four tiles in flight (93% at 2 rows, as fast at 1 as
# at 16).
GEMV_MAX_K = 8192
# At 2-4 rows the CUDA-core kernel took 1.4-1.5x the tensor-core kernel's time on weights
# this small (bf16 stacks of d = 384-512; at 2 rows 373-380 against 252-262 us a token), and
# 0.75x from 576 x 576 up (notes/kernels.md, sessions 35 and 52).
TINY_WEIGHTS = 512 * 512
# The whole-slice tiles, the first that fits taken, except that one taking K in a single
# slice goes first (no split-K partials to sum). 64 weight rows by 256 columns on the mma's
# left (a wgmma) beat 32 by 512 on its right (mma.sync) by 4-10% on bf16 stacks of 4-8 rows,
# d = 768-2048, but cut d = 512 in two and lost 16-20% there; the latter also takes K up to
# 8 x 512. Both hold 164-184 registers a thread, three programs an SM (sm_90,
# notes/kernels.md, session 37).
WHOLE_SLICE_TILES = ({"BLOCK_N": 64, "BLOCK_K": 256, "W_LHS": True},
                     {"BLOCK_N": 32, "BLOCK_K": 512})
# (tile bytes, warps, programs an SM) of persistent GEMVs that `tilegraph tune` times beside
# the rule's, at one row and at 2-4: each was the fastest on some projections (H200,
# notes/kernels.md, sessions 61 and 62).
PERSISTENT_VARIANTS = ((32 * 1024, 8, 2), (32 * 1024, 16, 2), (32 * 1024, 8, 4),
                       (16 * 1024, 8, 4), (32 * 1024, 4, 3))
ROWS_PERSISTENT_VARIANTS = ((16 * 1024, 4, 4), (16 * 1024, 4, 3), (32 * 1024, 8, 2),
                            (32 * 1024, 4, 4))
# The last of a split's programs sums every slice's partials one after another.
MAX_SPLIT_K = 8
# Programs an SM the fp32 weight-left tile needs to be taken (fp32_weight_left_config): on
# whole stacks won at 1.39 (d = 1472, 6 rows 175.8 -> 161.5 us, 16 rows equal), 1.45 (d =
# 1536, 6 rows 159.5 -> 148.5, 16 rows equal) and 1.64-1.94 an SM, lost at 1.33 (d = 1408,
# 137 -> 159), 1.2 and 1.0; lone projections won at 1.39-1.45 (1536 x 4096 1.15-1.31x),
# lost at 1.33 and below (notes/kernels.md, sessions 101-103). The bound sits between.
FP32_WEIGHT_LEFT_MIN_FILL = 1.36
# Below this many programs an SM fp32's weight-left split is doubled, its programs run in two
# waves: 96 column blocks (6144 outputs) split 2 -> 4 ran whole stacks at 6 rows 1257 -> 654
# us a token, 144 (9216) split 1 -> 2 3088 -> 1590; 133-192 blocks lone 1.2-1.6x faster
# (notes/kernels.md, session 102). One wave just past two an SM is not: 6144^2 at split 3
# (2.18 an SM) ran 54.7 us, at 2 50.3 and at 4 44.0.
FP32_TWO_WAVES_BELOW = 1.5
# Weight tiles fp32's weight-left tile keeps in flight where its programs number at most two
# an SM: 16 KB each, 88 KB of shared memory at five, so two programs still share an H100's or
# H200's SM. Whole fp32 stacks at 8 rows, us a token, three -> four -> five stages: d = 2048
# 166.6 -> 171.0 -> 151.6, d = 4096 418.6 -> 414.9 -> 359.4 (61% -> 71% of the floor), d =
# 8192 1428.7 -> 1386.8 -> 1092.5; BLOCK_K 32 at six and eight stages and BLOCK_K 128 at two
# lost. More programs than that keep three stages (48 KB, 123-155 registers: three an SM, so
# up to three an SM run in one wave); at five, 32000 x 2048 (500 programs) read 96% -> 91% of
# copy lone, and d = 6144 stacks (384) ran 868 us a token at 8 rows against 654-709 at 6 and
# 16 rows at three (H200, notes/kernels.md, sessions 102-103).
FP32_WEIGHT_LEFT_STAGES = 5
# Programs of the weight-left tile an SM holds at 3 and at 2 stages: Triton keeps stages + 1
# buffers of (64 + 16) x 128 16-bit values, 80 KB and 60 KB of shared memory, two and three of
# an H100's or H200's 228 KB. Where the column blocks number a little more than two an SM,
# those beyond fill a second wave of a few programs, each streaming its share alone: 17920 x
# 1536 (Qwen2-1.5B's gate/up, 280 blocks) read 59.5% of copy at three stages and 70.4% at
# two; Phi-2's, Qwen2.5-3B's and 19000 x 2048 1.12-1.16x, at 4-16 rows 1.12-1.19x; Qwen2-1.5B's
# decode at batch 8 1.4690 -> 1.4089 ms a step. Past one wave at two stages (Llama-3-8B's
# gate/up, 448 blocks) three stages stay faster: 92.3% against 72.9% (H200, notes/kernels.md,
# session 68). Counted for sm_90's shared memory, the only one measured: an A100's 164 KB
# would hold one program at three stages and two at two, a band elsewhere (not measured).
WEIGHT_LEFT_SLOTS = {3: 2, 2: 3}
# A K split whose programs fill at most this fraction of the two an SM that fit at three
# stages runs at two stages instead, split further to fill the three that fit there, where
# that fills more. Qwen3-0.6B-shaped gate/up (6144 x 1024, 96 blocks: split 2, 192 programs,
# 0.73 -> split 4, 384 of 396): its decode step at batch 8 0.7638-0.7652 -> 0.7364-0.7368 ms,
# at batch 4 0.7565 -> 0.7327; Llama-3-8B's q|k|v (the same counts) 4.1735-4.1776 -> 4.1627 (noise).
# Llama-3.2-1B's q|k|v (split 5, 0.91 -> split 8, 0.97) lost 0.4% (0.8877-0.8885 -> 0.8915),
# so not past this fraction (H200, notes/kernels.md, session 69).
SPLIT_FILL = 0.8
# At 3-4 rows the tensor cores beat the CUDA-core kernel from this many weights up, counted
# as the CUDA-core tile holds them: rows padded to its power-of-two width, whose masked lanes
# hold registers and keep fewer bytes in flight. bf16 stacks, CUDA-core -> tensor-core us:
# d=640-1024 (tiles of 0.4-1.05M) 0.8-3.5% faster on the CUDA cores, d=1152 and 1280 (K
# padded to 2048: 2.4M and 2.6M) 17-26% faster on the tensor cores, d=1536 9.5% (H100,
# notes/kernels.md, session 52).
WHOLE_SLICE_MIN_WEIGHTS = 2 * 2**20
# fp32 at 5-8 rows keeps the CUDA-core row loop below this many weights, counted as its tile
# holds them (K padded to the tile's power of two), and takes tf32x3 on the tensor cores from
# it up. Whole fp32 stacks at 5-8 rows, row loop -> tensor cores, us a token: d = 1024 (tiles
# of 1.05M) 176 -> 186, d = 1152, 1280, 1408 (K padded to 2048: 2.4-2.9M) 225 -> 197, 188 ->
# 162, 164 -> 137 at 6 rows (H200, notes/kernels.md, session 99; d = 1280 at 5 and 8 rows
# 189 / 196 -> 173 on an H100, session 54). Counted unpadded, as before, d = 1152-1408 ran
# the row loop.
FP32_ROW_LOOP_MAX_TILE_WEIGHTS = 2 * 2**20


@dataclass(frozen=True)
class Plan:
    kind: str     # one of KINDS
    config: dict  # the kernel's block shape, num_warps, num_stages; for "cublas", the
                  # fastest Triton plan ("fused"), which calls with fused parts still take

    def as_dict(self) -> dict:
        return {"kind": self.kind, **self.config}

    @staticmethod
    def from_dict(saved: dict) -> Plan:
        config = dict(saved)
        return Plan(config.pop("kind"), config)


def rows_bucket(rows: int) -> int:
    """Tuned plans are kept per power-of-two row count: 3 rows run 4 rows' plan."""
    return triton.next_power_of_2(rows)


def dot_block_k(K: int, element_size: int) -> int:
    """The tensor-core tile's K width: 512-byte rows, no wider than K needs."""
    return max(16, min(512 // element_size, triton.next_power_of_2(K)))


def whole_slice_config(N: int, K: int, element_size: int, sms: int) -> dict | None:
    """A 16-bit tile that reads each program's whole slice of W in one step: of the
    WHOLE_SLICE_TILES whose slices number at most MAX_SPLIT_K and whose programs about two
    an SM, one that takes K in a single slice, else the first; one pipeline stage; None
    where none fits. Each program then asks for all its weights before PDL's wait, so the
    whole weight streams while the kernel before it finishes, and none after.

    Against the x-left pipelined tiles it replaced, on whole bf16 LayerStacks at 8 rows
    (H100, notes/kernels.md): d=512 336 -> 273 us, d=1024 246 -> 229, d=2048 157 -> 124
    (the weight-left pipelined tile there: 130), and with the weight on the mma's left
    d=1024 229 -> 216, d=1536 148 -> 140, d=2048 124 -> 117; past the bound, d=2560 (400
    programs) 162 and d=3072 228, where the weight-left pipelined tile takes 134 and 161."""
    if element_size > 2:
        return None
    fitting = []
    for tile in WHOLE_SLICE_TILES:
        block_k = max(16, min(tile["BLOCK_K"], triton.next_power_of_2(K)))
        split = triton.cdiv(K, block_k)
        if split <= MAX_SPLIT_K and triton.cdiv(N, tile["BLOCK_N"]) * split <= 2 * sms:
            config = {**tile, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 1}
            fitting.append({**config, "SPLIT_K": split} if split > 1 else config)
    unsplit = [config for config in fitting if "SPLIT_K" not in config]
    return (unsplit or fitting or [None])[0]


def weight_left_config(N: int, K: int, sms: int) -> dict:
    """The 16-bit tile of weights too wide for whole slices: BLOCK_N 64 by BLOCK_K 128, three
    stages, the weight tile as the mma's left operand (W_LHS: acc^T = W x^T, 64 weight rows
    by 16 padded x rows). On Hopper that is a wgmma, which reads the pipelined weight tiles
    from shared memory where they land, so they never pass through registers (56-80
    registers a thread against 166-186 with x on the left); K split until the programs fill
    the two an SM that fit (WEIGHT_LEFT_SLOTS[3]). Against the x-left pipelined tiles on
    whole bf16 LayerStacks at 8 rows (H100, notes/kernels.md): d=2560 168 -> 136 us, d=3072
    174 -> 161, d=4096 239 -> 236.
    Two stages where the column blocks number more than WEIGHT_LEFT_SLOTS[3] an SM and at
    most WEIGHT_LEFT_SLOTS[2]: all programs in one wave; and where a split fills at most
    SPLIT_FILL of the slots at three stages, two stages with K split to fill theirs, if that
    fills more."""
    block_k = max(16, min(128, triton.next_power_of_2(K)))
    n_blocks = triton.cdiv(N, 64)

    def split_for(stages: int) -> int:
        return min(MAX_SPLIT_K, triton.cdiv(K, block_k),
                   WEIGHT_LEFT_SLOTS[stages] * sms // n_blocks)

    def filled(stages: int, split: int) -> float:
        return n_blocks * split / (WEIGHT_LEFT_SLOTS[stages] * sms)

    split = split_for(3)
    one_wave_at_two = WEIGHT_LEFT_SLOTS[3] * sms < n_blocks <= WEIGHT_LEFT_SLOTS[2] * sms
    stages = 2 if one_wave_at_two else 3
    if split >= 2 and filled(3, split) <= SPLIT_FILL and filled(2, split_for(2)) > filled(3, split):
        stages, split = 2, split_for(2)
    config = {"BLOCK_N": 64, "BLOCK_K": block_k, "num_warps": 4, "num_stages": stages,
              "W_LHS": True}
    return {**config, "SPLIT_K": split} if split >= 2 else config


def dot_config(N: int, K: int, element_size: int, sms: int) -> dict:
    """Tensor-core tile: in 16-bit the whole-slice tile where it fits (whole_slice_config),
    else the weight-left tile (weight_left_config); in fp32 (tf32x3) the weight-left tile
    where its programs fill the SMs (fp32_weight_left_config), else the x-left tile
    (fp32_x_left_config).

    Chosen on whole LayerStacks through a GraphRunner (H100, notes/kernels.md), where each
    projection reads an x just written by the kernel before it: BLOCK_N 16 re-reads x (16
    padded rows) once for every 16 weight rows, which cost 1.1-1.3x against these tiles at
    8-16 rows (bf16 d=1024-4096, fp32 d=512-8192); a split pays wherever the column blocks
    alone leave SMs idle.
    """
    if element_size <= 2:
        whole = whole_slice_config(N, K, element_size, sms)
        return whole if whole is not None else weight_left_config(N, K, sms)
    return fp32_weight_left_config(N, K, sms) or fp32_x_left_config(N, K, sms)


def fp32_x_left_config(N: int, K: int, sms: int) -> dict:
    """fp32's tile with x on the mma's left: 512-byte rows of K, BLOCK_N 32, K split into up
    to MAX_SPLIT_K slices so that about two programs an SM stream the weight, pipelines three
    tiles deep where K is split and four where not. Rows at least twice as long as N is
    wide (a down projection, a narrow head) keep the rule of the split-K sweep: BLOCK_N 64
    (32 below 1024 outputs)."""
    block_k = dot_block_k(K, 4)
    block_n = 64 if K >= 2 * N and N >= 1024 else 32
    split = min(MAX_SPLIT_K, triton.cdiv(K, block_k), 2 * sms // triton.cdiv(N, block_n))
    if split >= 2:
        return {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 3,
                "SPLIT_K": split}
    return {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 4}


def fp32_weight_left_config(N: int, K: int, sms: int,
                            min_fill: float | None = None) -> dict | None:
    """The fp32 (tf32x3) tile with the weight on the mma's left: BLOCK_N 64 by 256-byte rows of K
    (BLOCK_K 64), K split until about two programs an SM stream the weight (twice that split
    where it launches fewer than FP32_TWO_WAVES_BELOW an SM), where its programs then number
    at least `min_fill` (FP32_WEIGHT_LEFT_MIN_FILL unless given) an SM; else None. Pipelined
    FP32_WEIGHT_LEFT_STAGES tiles deep where every program fits at two an SM, else three.
    On Hopper its three tf32 products are wgmmas at 123-155 registers a thread (the x-left
    tile's are mma.sync at 189-248; sm_90 compile, research/decode_kernel_registers.py --dtype
    fp32). Whole fp32 LayerStacks at 6 and 12 rows, us a token, x-left -> this (H200,
    notes/kernels.md, session 100): d = 2048 (256 programs) 171 -> 160 and 173 -> 163, d = 3584
    (224) 429 -> 365 and 426 -> 367, d = 8192 (256) 1668 -> 1408 and 1670 -> 1418, d = 4096 at
    12 rows 482 -> 421; where it gave fewer programs it lost: d = 1280 (160) 157 -> 169 and 159
    -> 175, d = 1024 at 16 rows (128) 185 -> 224."""
    block_k = max(16, min(64, triton.next_power_of_2(K)))
    n_blocks = triton.cdiv(N, 64)
    k_blocks = triton.cdiv(K, block_k)
    split = max(1, min(MAX_SPLIT_K, k_blocks, 2 * sms // n_blocks))
    if n_blocks * split < FP32_TWO_WAVES_BELOW * sms:
        split = min(MAX_SPLIT_K, k_blocks, 2 * split)
    programs = n_blocks * split
    if programs < (FP32_WEIGHT_LEFT_MIN_FILL if min_fill is None else min_fill) * sms:
        return None
    stages = FP32_WEIGHT_LEFT_STAGES if programs <= 2 * sms else 3   # one wave at two an SM
    return fp32_weight_left_tile(block_k, stages, split)


def fp32_weight_left_tile(block_k: int, stages: int, split: int) -> dict:
    """fp32's weight-left tile (BLOCK_N 64, four warps) at `block_k`, `stages` and K in
    `split` slices."""
    config = {"BLOCK_N": 64, "BLOCK_K": block_k, "num_warps": 4, "num_stages": stages,
              "W_LHS": True}
    return {**config, "SPLIT_K": split} if split > 1 else config


def padded_k(K: int, block_k: int) -> int:
    """K rounded up to whole tiles of block_k columns."""
    return triton.cdiv(K, block_k) * block_k


def gemv_takes_row(K: int) -> bool:
    """Whether one 16-bit row of K columns takes the GEMV: up to GEMV_MAX_K columns. Past one
    tile of GEMV_MAX_BLOCK_K columns, a row whose second tile would hold a quarter of one or
    less reads that sliver as a tail beside the first tile (split_row_in_two): a second pass
    over K would cost a whole memory round trip for it, which sent such rows to the
    tensor-core kernel from session 33 (notes/kernels.md, "One row past 4096 columns") until
    the tail beat it (session 42). Longer rows take the second pass, which then carries a
    good part of the row."""
    return K <= GEMV_MAX_K


def gemv_runs(rows: int, config: dict) -> bool:
    """Whether a GEMV config runs `rows` rows: any at one row; at 2 to GEMV_MAX_ROWS rows
    (_gemv_rows_kernel) one without a tail."""
    return rows == 1 or (rows <= GEMV_MAX_ROWS and "TAIL" not in config)


def rule(rows: int, N: int, K: int, dtype: torch.dtype, sms: int | None,
         two_row_gemv: bool = True) -> Plan:
    """The plan of an untuned shape, from single projections over rotated weights and whole
    LayerStacks on H100 and H200 (notes/kernels.md). One 16-bit row takes the GEMV (up to
    GEMV_MAX_K columns, gemv_takes_row; gemv_config says how it launches); two take it
    persistent where two_row_gemv_config gives them a config (8-64 MiB of weights), unless
    two_row_gemv is False (the plan they took before it, which plain_plan times beside it). The
    tensor-core kernel costs about the same at 2 and 16 rows; the CUDA-core kernel, whose cost
    grows with every row, beats it on small weights at 2-4 rows (where the tensor-core kernel's
    fixed latency shows), except on the smallest (d = 512: 0.65-0.69x) and, at 3-4 rows, from
    WHOLE_SLICE_MIN_WEIGHTS on (rows padded to the CUDA-core tile's width: 1152 x 1152 counts as
    1152 x 2048). At 2 rows (without the persistent GEMV) it still wins where the whole-slice
    tile applies (2048 x 2048: 1.51x cuBLAS against 1.33x), but not past that bound, where the
    weight-left tile takes over (2560 x 2560: 0.80x against 1.16x; 5632 x 2048 1.03x against
    1.12x; notes/kernels.md, session 40). fp32 keeps the CUDA-core kernel up to 4 rows, and up
    to 8 on small weights (FP32_ROW_LOOP_MAX_TILE_WEIGHTS); past that tf32x3 on the tensor
    cores was 1.1-2.2x faster in stacks."""
    sms = sms or ASSUMED_SM_COUNT
    size = torch.finfo(dtype).bits // 8
    weights = N * K
    matvec = Plan("matvec", matvec_config(rows, N, K, size))
    # as the CUDA-core tile of several rows holds them (one row's GEMV splits K in chunks)
    tile_weights = N * (padded_k(K, matvec.config["BLOCK_K"]) if rows > 1 else K)
    if dtype == torch.float32:
        if rows <= 4 or (rows <= 8 and tile_weights < FP32_ROW_LOOP_MAX_TILE_WEIGHTS):
            return matvec
        return Plan("dot", dot_config(N, K, size, sms))
    if rows == 1 and gemv_takes_row(K):
        return Plan("gemv", gemv_config(N, K))
    two_rows = two_row_gemv_config(N, K) if rows == 2 and two_row_gemv else None
    if two_rows is not None:
        return Plan("gemv", two_rows)
    if rows == 2 and TINY_WEIGHTS < weights and (
            weights < WHOLE_SLICE_MIN_WEIGHTS or whole_slice_config(N, K, size, sms) is not None):
        return matvec
    if rows <= 4 and TINY_WEIGHTS < weights and tile_weights < WHOLE_SLICE_MIN_WEIGHTS:
        return matvec
    return Plan("dot", dot_config(N, K, size, sms))


def candidates(rows: int, N: int, K: int, dtype: torch.dtype, sms: int | None) -> list[Plan]:
    """What `tilegraph tune` times for a shape: the rule's kernel first (and at two rows its
    plan without the persistent GEMV; a split-K plan's K also cut into slices of equal
    width, equal_split_plan), then the CUDA-core kernel's default and a few tile
    widths (and in 16-bit at 2-4 rows the one-row GEMV's tile, which the rule does not take:
    notes/kernels.md, session 53, and persistent GEMVs, ROWS_PERSISTENT_VARIANTS; at one row
    the GEMV launched a program a row block and persistent, PERSISTENT_VARIANTS; the row
    loop with its row sums turned the other way, GATHER_ROWS), and
    tensor-core tiles of every width, depth and pipeline length that fits the shared memory,
    the weight-left tile at other depths (in fp32 also split, where the rule's tile is the
    x-left one), and split-K tiles."""
    size = torch.finfo(dtype).bits // 8
    plans = [rule(rows, N, K, dtype, sms)]  # cuBLAS is timed beside them by the tuner
    if rows == 2:
        plans.append(rule(rows, N, K, dtype, sms, two_row_gemv=False))
    equal = equal_split_plan(plans[-1], K) if size <= 2 else None  # fp32's cut already
    if equal is not None:
        plans.append(equal)
    base = matvec_config(rows, N, K, size)
    plans.append(Plan("gemv" if "SPLIT" in base else "matvec", base))
    if "SPLIT" not in base:
        plans += [Plan("matvec", {**base, "BLOCK_N": bn}) for bn in (4, 8, 16)
                  if bn != base["BLOCK_N"]]
        if base["ROW_LOOP"]:  # the row sums turned the other way (matvec_config)
            plans.append(Plan("matvec", {**base, "GATHER_ROWS": not base["GATHER_ROWS"]}))
        gemv = split_gemv_config(N, K)
        if size <= 2 and gemv_runs(rows, gemv):  # the one-row tile on 2-4 rows
            plans.append(Plan("gemv", gemv))
        if size <= 2 and rows <= GEMV_MAX_ROWS and K <= PERSISTENT_MAX_K:
            plans += [Plan("gemv", persistent_gemv_config(N, K, *variant, tail=False))
                      for variant in ROWS_PERSISTENT_VARIANTS]
    if size <= 2 and rows == 1 and gemv_takes_row(K):  # launched a program a row block, or not
        plans.append(Plan("gemv", split_gemv_config(N, K)))
        if K <= PERSISTENT_MAX_K:
            plans += [Plan("gemv", persistent_gemv_config(N, K, *variant))
                      for variant in PERSISTENT_VARIANTS]
    k_cap = triton.next_power_of_2(K)
    for block_n in (16, 32, 64):
        for block_k in (128 // size, 256 // size, 512 // size):
            for stages in (2, 3, 4):
                if block_k > max(16, k_cap):
                    continue
                plans.append(Plan("dot", {"BLOCK_N": block_n, "BLOCK_K": block_k,
                                          "num_warps": 4, "num_stages": stages}))
    if size <= 2:  # one step a program, as whole_slice_config's, the weight on either side
        one_step = [{"BLOCK_N": block_n, "BLOCK_K": block_k}
                    for block_n, block_k in itertools.product((32, 64), (256, 512))]
        one_step += [{"BLOCK_N": 64, "BLOCK_K": block_k, "W_LHS": True} for block_k in (128, 256)]
        for tile in one_step:
            block_k = max(16, min(tile["BLOCK_K"], k_cap))
            split = triton.cdiv(K, block_k)
            config = {**tile, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 1}
            if split <= MAX_SPLIT_K:
                plans.append(Plan("dot", {**config, "SPLIT_K": split} if split > 1 else config))
    if size <= 2:  # the weight on the mma's left (weight_left_config), other depths
        left = weight_left_config(N, K, sms or ASSUMED_SM_COUNT)
        for block_k, stages in ((64, 4), (128, 2), (128, 3), (128, 4), (256, 2), (256, 3)):
            plans.append(Plan("dot", {**left, "BLOCK_K": max(16, min(block_k, k_cap)),
                                      "num_stages": stages}))
    else:  # fp32's weight-left tile (fp32_weight_left_config), also where the rule's is not
        for (block_k, stages), split in itertools.product(((64, 5), (64, 3), (32, 4)),
                                                          (1, 2, 4, 8)):
            block_k = max(16, min(block_k, k_cap))
            if triton.cdiv(K, block_k) >= split:
                plans.append(Plan("dot", fp32_weight_left_tile(block_k, stages, split)))
    block_k = dot_block_k(K, size)
    for block_n, split in itertools.product((32, 64), (2, 4, 8)):
        if triton.cdiv(K, block_k) >= split:
            plans.append(Plan("dot", {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4,
                                      "num_stages": 3, "SPLIT_K": split}))
    unique = []
    for plan in plans:
        if plan not in unique:
            unique.append(plan)
    return unique


_tuned = Tuner("linear-decode", [{}])  # a store of timed plans; `tilegraph tune` fills it


def tuned_key(rows: int, N: int, K: int, dtype: torch.dtype) -> tuple:
    return (rows_bucket(rows), N, K, str(dtype).removeprefix("torch."))


def rows_key(rows: int, N: int, K: int, dtype: torch.dtype) -> tuple:
    """The key of a verdict timed at `rows` rows, which holds for that row count (not its
    rows bucket: plain_key's, session 106)."""
    return (rows, N, K, str(dtype).removeprefix("torch."))


def record_step_verdict(store: Tuner, rows: int, N: int, K: int, dtype: torch.dtype,
                        verdict: dict) -> None:
    """Record a verdict timed in a decode step of `rows` rows, here and on disk: under that
    row count, and under its rows bucket for row counts of the bucket no step timed (a
    generator's steps of 3 and 4 rows are each timed, and under the bucket alone the later
    verdict was read by both)."""
    store.record(("rows", *rows_key(rows, N, K, dtype)), verdict)
    store.record(tuned_key(rows, N, K, dtype), verdict)


def step_verdict(store: Tuner, rows: int, N: int, K: int, dtype: torch.dtype) -> dict | None:
    """The verdict a step of these rows timed, else the latest one of its rows bucket."""
    saved = store.lookup(("rows", *rows_key(rows, N, K, dtype)))
    return saved if saved is not None else store.lookup(tuned_key(rows, N, K, dtype))


# Shapes whose `tilegraph tune` plan lost to the rule's in a model's decode step
# (record_step_verdict): chosen by timing the step (tune.tune_tuned_plans_in_step_once). A
# plan timed alone can lose beside the kernels that overlap it under PDL: TinyLlama's q|k|v
# and gate/up plans tuned at 8 rows, 1.16x and 1.13x faster alone, made its batch-8 step 7%
# and 10% slower (H200, notes/models.md, session 67).
_step_rule = Tuner("linear-decode-step-rule", [{}])


def set_step_rule(rows: int, N: int, K: int, dtype: torch.dtype, rule_wins: bool) -> None:
    """Record whether this shape's tuned plan gives way to the rule's at these rows."""
    record_step_verdict(_step_rule, rows, N, K, dtype, {"rule": rule_wins})


def step_takes_rule(rows: int, N: int, K: int, dtype: torch.dtype) -> bool:
    saved = step_verdict(_step_rule, rows, N, K, dtype)
    return saved is not None and bool(saved.get("rule"))


def tuned_differs(rows: int, N: int, K: int, dtype: torch.dtype,
                  device: torch.device) -> bool:
    """Whether `tilegraph tune` recorded a plan for this shape other than the rule's."""
    saved = _tuned.lookup(tuned_key(rows, N, K, dtype))
    return saved is not None and saved != rule(rows, N, K, dtype, sm_count(device)).as_dict()


# Tensor-core projections whose whole-slice tile compiles its K loop out (the config's
# "ONE_STEP", _dot_rows.COMPILE_ONE_STEP; record_step_verdict): chosen by timing a model's
# whole step (tune.tune_one_step_in_step_once). Fewer registers a thread made TinyLlama's
# batch-8 step 1.7% faster and a 1024-wide model's 2% slower; alone the same tiles lost up
# to 8.5% (H200, notes/kernels.md, session 96).
_one_step = Tuner("linear-decode-one-step", [{}])


def set_one_step(rows: int, N: int, K: int, dtype: torch.dtype, one_step: bool) -> None:
    """Record whether this shape's whole-slice tile at these rows leaves its K loop out."""
    record_step_verdict(_one_step, rows, N, K, dtype, {"one_step": one_step})


def runs_one_step(rows: int, N: int, K: int, dtype: torch.dtype) -> bool:
    saved = step_verdict(_one_step, rows, N, K, dtype)
    return saved is not None and bool(saved.get("one_step"))


# One-row projections that release the next kernel once their x has arrived
# (RELEASE_AFTER_INPUTS), by shape: chosen by timing a model's whole step
# (tune.tune_release_in_step_once), as it wins in some models' steps and loses in others'.
_late_release = Tuner("linear-decode-late-release", [{}])


def set_late_release(N: int, K: int, dtype: torch.dtype, late: bool) -> None:
    """Record, here and on disk, whether one-row GEMV projections of this shape release the
    next kernel late (after their x arrived) or, the default, right after their wait."""
    _late_release.record(tuned_key(1, N, K, dtype), {"late": late})


def releases_late(N: int, K: int, dtype: torch.dtype) -> bool:
    saved = _late_release.lookup(tuned_key(1, N, K, dtype))
    return saved is not None and bool(saved.get("late"))


# One-row GEMV projections whose rows a program were chosen by timing a model's whole step
# (tune.tune_gemv_rows_in_step_once), by shape: {"rows": BLOCK_N, OTHER_LAUNCH, SMALL_LAUNCH,
# or None for the plan's own}.
_step_rows = Tuner("linear-decode-step-rows", [{}])
# The step variant that launches a one-row GEMV the way its plan does not (other_gemv_launch:
# persistent where it is launched a program a row block, or the reverse), tried in the step
# on 16-bit weights from STEP_LAUNCH_MIN_BYTES up to PERSISTENT_MIN_BYTES, where persistent
# won alone and in chains of GEMVs (plan's gemv_chain) but lost in some models' steps
# (_matvec.PERSISTENT_MIN_BYTES; not for want of room beside it: one program an SM fewer lost
# more, notes/kernels.md, session 66). Past it persistent won in the steps too (session 61);
# trying the other launch on every projection doubled a Generator's build (28 -> 59 s,
# notes/kernels.md, session 64).
OTHER_LAUNCH = "other launch"
STEP_LAUNCH_MIN_BYTES = 14 * 2**20


# The step variant that launches a one-row GEMV of short rows in small persistent tiles
# (_matvec.small_persistent_gemv_config), tried on 16-bit weights of at least SMALL_MIN_BYTES
# whose rows it covers in at most SMALL_MAX_K columns (4 rows or more a tile): Qwen2-0.5B's
# rows of 896 columns, where the rule's tiles hold 90-95 registers and 5 programs an SM, and
# 2048-wide models' (TinyLlama, Llama-3.2-1B) too.
SMALL_LAUNCH = "small tiles"
SMALL_MIN_BYTES = 2**20
SMALL_MAX_K = 2048


def in_small_band(N: int, K: int, dtype: torch.dtype) -> bool:
    """Whether one-row weights of this shape are offered SMALL_LAUNCH in a step."""
    size = torch.finfo(dtype).bits // 8
    return size <= 2 and N * K * size >= SMALL_MIN_BYTES and K <= SMALL_MAX_K


def in_launch_band(N: int, K: int, dtype: torch.dtype) -> bool:
    """Whether one-row weights of this shape are 16-bit, of STEP_LAUNCH_MIN_BYTES up to
    PERSISTENT_MIN_BYTES, in rows a persistent GEMV takes whole: where the launch that wins
    depends on the kernels around the projection."""
    size = torch.finfo(dtype).bits // 8
    return (size <= 2 and STEP_LAUNCH_MIN_BYTES <= N * K * size < PERSISTENT_MIN_BYTES
            and K <= PERSISTENT_MAX_K)


# Where a chain of one-row GEMVs (plan's gemv_chain) runs untuned shapes persistent, from
# these weight bytes up to PERSISTENT_MIN_BYTES. One-row stacks through the GraphRunner, split
# -> persistent: bf16 d = 2592-2688 (12.8-13.8 MiB a projection) 1.07-1.09x faster, d = 2560
# (12.5 MiB) 0.98x, d = 2816-3200 (15-19.5 MiB) 1.11-1.25x; fp16 d = 2640 (13.3 MiB) 0.98x,
# d = 3000 (17.2 MiB) 1.09x (H200, notes/kernels.md, sessions 66 and 67).
CHAIN_MIN_BYTES = {torch.bfloat16: int(12.75 * 2**20), torch.float16: STEP_LAUNCH_MIN_BYTES}


def in_chain_band(N: int, K: int, dtype: torch.dtype) -> bool:
    """Whether an untuned one-row GEMV of this shape in a chain of them runs persistent."""
    return (dtype in CHAIN_MIN_BYTES
            and CHAIN_MIN_BYTES[dtype] <= 2 * N * K < PERSISTENT_MIN_BYTES
            and K <= PERSISTENT_MAX_K)


def gemv_rows_variants(config: dict, pairs: bool) -> list[int]:
    """Rows a program to try in a step instead of a one-row GEMV config's: half and twice
    its BLOCK_N, as many warps (so half / twice the weight values a thread), 1 to 16 rows,
    at least 2 where the epilogue works on pairs of columns (SwiGLU, rotary). In batch-1
    steps at position 256 one of them was 1.6-3.2% faster on three shapes (Qwen2-0.5B's
    down projection at half, Qwen2-1.5B's and Llama-3.2-3B's gate/up at twice) and every one
    slower on TinyLlama and Llama-3.2-1B (H200, notes/models.md, session 57): no rule of
    shape says which."""
    rows, least = config["BLOCK_N"], 2 if pairs else 1
    return [n for n in (rows // 2, rows * 2) if least <= n <= 16 and n != rows]


def step_variants(N: int, K: int, dtype: torch.dtype, config: dict,
                  pairs: bool) -> list[int | str]:
    """What tune.tune_gemv_rows_in_step_once tries in a step instead of a one-row GEMV
    config of this shape: gemv_rows_variants', OTHER_LAUNCH on 16-bit weights of
    STEP_LAUNCH_MIN_BYTES up to PERSISTENT_MIN_BYTES where the other launch takes the rows
    (at least 2 a block where the epilogue works on pairs), and SMALL_LAUNCH on those of
    in_small_band."""
    variants: list[int | str] = gemv_rows_variants(config, pairs)
    if in_launch_band(N, K, dtype) and other_gemv_launch(N, K, config)["BLOCK_N"] >= (
            2 if pairs else 1):
        variants.append(OTHER_LAUNCH)
    if in_small_band(N, K, dtype):
        variants.append(SMALL_LAUNCH)
    return variants


def set_step_rows(N: int, K: int, dtype: torch.dtype, rows: int | str | None) -> None:
    """Record, here and on disk, the rows a program of one-row GEMV projections of this
    shape, OTHER_LAUNCH or SMALL_LAUNCH (None: the plan's own)."""
    _step_rows.record(tuned_key(1, N, K, dtype), {"rows": rows})


def step_rows(N: int, K: int, dtype: torch.dtype) -> int | str | None:
    saved = _step_rows.lookup(tuned_key(1, N, K, dtype))
    return None if saved is None else saved.get("rows")


def plan(rows: int, N: int, K: int, dtype: torch.dtype, device: torch.device,
         fused: bool = False, gemv_chain: bool = False) -> Plan:
    """The tuned plan of this shape on this GPU if `tilegraph tune` timed it (and no model's
    step found the rule's faster: set_step_rule), else the rule's, its whole-slice tile
    without the K loop where a step chose that (set_one_step);
    a one-row GEMV takes the rows a program (or the other launch) set_step_rows recorded and
    releases the next kernel where set_late_release says.
    fused: the call has a norm prologue or an activation, which cuBLAS cannot run.
    gemv_chain: the call is one of one-row GEMVs launched back to back (tg.decode_layer's two
    kernels), where an untuned shape of in_chain_band runs persistent (CHAIN_MIN_BYTES), while
    in a model's step, beside attention, the split launch can win (the step tuner's)."""
    saved = _tuned.lookup(tuned_key(rows, N, K, dtype))
    if saved is not None and step_takes_rule(rows, N, K, dtype):
        saved = None
    chosen = Plan.from_dict(saved) if saved is not None and saved.get("kind") in KINDS else None
    if chosen is None or (chosen.kind == "gemv" and not gemv_runs(rows, chosen.config)):
        chosen = rule(rows, N, K, dtype, sm_count(device))
    if chosen.kind == "cublas" and fused:
        chosen = Plan.from_dict(chosen.config["fused"])
    if (chosen.kind == "dot" and one_step_a_slice(K, chosen.config)
            and runs_one_step(rows, N, K, dtype)):
        chosen = Plan("dot", {**chosen.config, "ONE_STEP": True})
    if chosen.kind == "gemv" and rows == 1:
        block_n = step_rows(N, K, dtype)
        if block_n == OTHER_LAUNCH:
            chosen = Plan("gemv", other_gemv_launch(N, K, chosen.config))
        elif block_n == SMALL_LAUNCH:
            chosen = Plan("gemv", small_persistent_gemv_config(N, K))
        elif block_n is not None:
            chosen = Plan("gemv", {**chosen.config, "BLOCK_N": block_n})
        elif gemv_chain and saved is None and in_chain_band(N, K, dtype):
            chosen = Plan("gemv", persistent_gemv_config(N, K))
        if releases_late(N, K, dtype):
            chosen = Plan("gemv", {**chosen.config, "RELEASE_AFTER_INPUTS": True})
    return chosen


# Plain projections of shapes `tilegraph tune` has not timed: the rule's plan or cuBLAS,
# whichever was faster when first timed on this GPU (plain_plan), per row count.
_plain = Tuner("linear-decode-plain-rows", [{}])


def plain_key(rows: int, N: int, K: int, dtype: torch.dtype, has_bias: bool,
              rule_plan: Plan) -> tuple:
    """plain_plan's cache key: a verdict holds for the row count it was timed at (not the
    rows bucket: the row loop's two turns at 3-4 rows share one tile, and timed first at 3
    rows, where the sums gathered won by 2-4%, the verdict ran 4096 x 14336 fp32 at 4 rows
    gathered, 71.5 against 62.1 us turned; H200, notes/kernels.md, session 106), for the
    rule's plan it was timed against, and for the plan other_plan times beside it (a
    verdict reached without it is timed again)."""
    other = other_plan(rows, N, K, dtype, None, rule_plan) if rule_plan.kind != "gemv" else None
    others = (repr(other.as_dict()),) if other is not None else ()
    return (*rows_key(rows, N, K, dtype), has_bias, repr(rule_plan.as_dict()), *others)


def other_gemv_launch(N: int, K: int, config: dict) -> dict:
    """The one-row GEMV launched the way `config` is not: a program a row block where it is
    persistent, persistent (whole rows, where they fit) where it is not."""
    if "PROGRAMS_PER_SM" in config or K > PERSISTENT_MAX_K:
        return split_gemv_config(N, K)
    return persistent_gemv_config(N, K)


def other_plan(rows: int, N: int, K: int, dtype: torch.dtype, sms: int | None,
               chosen: Plan) -> Plan | None:
    """What plain_plan times beside the rule's plan `chosen` and cuBLAS: at one row the GEMV
    launched the other way (other_gemv_launch), at two the plan the rule gave before the
    persistent GEMV; at two 16-bit rows where the rule's plan is no GEMV, the one-row
    GEMV's tile (where it has no tail): over 6 shapes of 0.4-8 MiB (H200, notes/kernels.md,
    session 85) it took 512 x 4096 1.5x faster than the rule's row loop (2.55 against 3.84
    us), tied at 896^2 and 1024^2, lost at the other three. At 4-16 rows it lost on all six
    (four rows a program, 8-16 in groups of four over the same tile: up to 3.5x slower than
    the tensor-core kernel). Past the rule's two-row window (TWO_ROW_MAX_BYTES) the
    persistent two-row GEMV instead: over 6 plain projections of 112-260 MiB it beat the
    rule's kernel and cuBLAS on 3 (14336 x 4096 28.69 us against 29.92 and 30.74, 11008 x
    4096, 8192^2) and lost on 3 (32000 x 2048, 24576 x 3072, 151936 x 896; H200,
    notes/kernels.md, session 88): timed, not ruled (issue 17's grid at 2 rows: 8192^2
    0.98x -> 1.02x F.linear, 14336 x 4096 1.00x -> 1.13x, session 89). At 3-16 16-bit rows,
    the rule's split-K plan with K cut into slices of equal width (equal_split_plan), and
    beside the weight-left tile unsplit the x-left one (x_left_plan). In fp32 at 5-8 rows,
    where the rule gives tf32x3, the CUDA-core row loop it leaves there: a lone projection
    otherwise ran tf32x3 or cuBLAS at its 12-row cost. Over 6 shapes no rule was fitted to
    at 5, 6 and 8 rows it took F.linear from 1.36x to 1.53x (geometric mean; points under
    1x: 5 of 18 -> 1, 9728 x 896 at 8 rows, 1.000x on cuBLAS), e.g. 3000 x 1000 at 6 rows
    10.65 -> 8.63 us, 3072 x 2048 15.17 -> 12.13, 6144 x 4096 47.0 -> 42.5 (H200,
    notes/kernels.md, session 100). Where the rule's plan is the row loop turning each row's
    sums on its own (3-4 rows, matvec_config), the same with the sums gathered: gathering
    took d = 1024 fp32 stacks at 4 rows 3.5% faster and d = 768 3.5% slower, lone 4096 x
    14336 from 87% to 76% of copy and 2048^2 from 66% to 67% (H200, notes/kernels.md, session
    105); at 3 rows it took lone fp32 projections of 44-256 MB 2-4% faster (4096 x 14336 60.0
    -> 57.8 us) and a d = 1024 stack 2% slower (session 106). In fp32 the other turn wherever
    the rule's plan is the row loop: at 8 rows, where gathering took d = 1024 stacks 12%
    faster, lone 1024^2 ran 3.08 us turned against 3.51 on the rule's plan (session 106).
    Else None."""
    if chosen.kind != "gemv":
        config = chosen.config
        fp32 = torch.finfo(dtype).bits > 16
        if (chosen.kind == "matvec" and config.get("ROW_LOOP")
                and (fp32 or not config.get("GATHER_ROWS"))):  # verdicts split by shape
            return Plan("matvec", {**config, "GATHER_ROWS": not config.get("GATHER_ROWS")})
        if fp32:  # on every plain call: cheap tests first
            if chosen.kind == "dot" and 5 <= rows <= 8:  # the row loop the rule left
                return Plan("matvec", matvec_config(rows, N, K, 4))
            return None
        if rows != 2:
            return equal_split_plan(chosen, K) or x_left_plan(chosen)
        if 2 * N * K >= TWO_ROW_MAX_BYTES:  # past the rule's window
            wide = two_row_gemv_config(N, K, most_bytes=math.inf)
            if wide is not None:
                return Plan("gemv", wide)
        gemv = split_gemv_config(N, K)
        return Plan("gemv", gemv) if gemv_runs(rows, gemv) else None
    if rows == 1:
        return Plan("gemv", other_gemv_launch(N, K, chosen.config))
    return rule(rows, N, K, dtype, sms, two_row_gemv=False)


def x_left_plan(chosen: Plan) -> Plan | None:
    """Beside the pipelined weight-left tile with K unsplit (weight_left_config's where its
    column blocks of 64 fill the SMs), the pipelined x-left tile of 32 weight rows (x on the
    mma's left), three stages; else None. Alone at 4 and 16 bf16 rows (H200,
    notes/kernels.md, session 100) it beat the rule on 7 of the 9 such shapes timed, by
    2-21% (11008 x 4096 23.8 against 28.9 us, 10240 x 2560 15.4 / 18.4), and cuBLAS too on
    four: 18944 x 3584 33.8 against the rule's 37.8 and cuBLAS 36.1, 9728 x 896 6.32 / 7.05
    / 6.70, 17920 x 1536 16.2 / 16.8 / 16.7, 13824 x 5120 at 16 rows 36.1 / 36.8 / 37.9.
    It lost where the rule streams at 91-96% of copy (14336 x 4096 by 0.3%, 32000 x 2048 by
    13%) and wherever K is split (4096^2 1.5x slower). As the rule for wide N it lost on
    most shapes and in stacks (session 41): timed, not ruled."""
    config = chosen.config
    if (chosen.kind != "dot" or not config.get("W_LHS") or config["num_stages"] < 2
            or "SPLIT_K" in config):  # no whole slice: weight_left_config's tile alone
        return None
    return Plan("dot", {"BLOCK_N": 32, "BLOCK_K": config["BLOCK_K"], "num_warps": 4,
                        "num_stages": 3})


def equal_split_plan(chosen: Plan, K: int) -> Plan | None:
    """The tensor-core plan `chosen` with K cut into slices of equal width, the last shorter
    (EVEN_SPLIT False), where that cuts K otherwise than the steps dealt out evenly, the
    longer slices first (the kernel's default); else None. The even deal won over 6 bf16
    shapes at 4 and 16 rows, the rule's plans, by 1.6% (geometric mean; H200,
    notes/kernels.md, session 93): 2048 x 5632 split 8 (44 steps: seven slices of 6 and one
    of 2, or 6-5-6-5-6-5-6-5) 8.23 -> 7.97 and 9.14 -> 8.79 us, 1536 x 8960 10.88 -> 10.67 and
    11.74 -> 11.48, 3072 x 2048 and Qwen2-0.5B's down projection up to 2.8%; it lost 5632 x
    2048 split 3 (16 steps: 6-6-4 or 6-5-5; 7.65 -> 7.72 and 8.04 -> 8.09). Dealt with the
    longer slices last (5-5-6) it lost that shape by 6%. So plain_plan times the equal cut
    beside it (other_plan)."""
    config = chosen.config
    split = config.get("SPLIT_K", 1)
    if (chosen.kind != "dot" or split < 2 or "EVEN_SPLIT" in config
            or not deals_differ(K, config["BLOCK_K"], split)):
        return None
    return Plan("dot", {**config, "EVEN_SPLIT": False})


def plain_plan(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               out: torch.Tensor) -> Plan:
    """plan() for out = x @ weight.T + bias (bias optional; x, weight, bias and out of one
    dtype): where `tilegraph tune` has not timed the shape, the rule's plan and cuBLAS are
    timed against each other on its first call outside graph capture, as tune_shape times
    them (graph replays over weights rotated past L2, PDL where the GPU has it), and the
    faster is kept on disk per GPU, row count, shape, bias and rule plan (a later rule
    is timed again). The rule loses to cuBLAS on some shapes no rule was fitted to (5000 x
    1800 bf16 at 2-12 rows: 0.82-0.85x, notes/kernels.md, session 41). A one- or two-row GEMV
    is also timed against its other plan (other_plan; at 3-16 rows a split-K plan against K
    cut into slices of equal width or the weight-left tile against the x-left one, in fp32
    at 5-8 rows tf32x3 against the row loop, the row loop's two turns where the rule's plan is
    the row loop in fp32 or at 3-4 16-bit rows): plain, the largest one-row projections read
    at the copy rate a program a row block and lost 9% persistent, where with a norm or
    SwiGLU they gained 5-14% (H200, notes/kernels.md, session 61). Where nothing may be
    timed (a capture, the interpreter, TILEGRAPH_AUTOTUNE=0) or the weight's copies do not
    fit in memory, the rule's plan runs."""
    rows, K = x.shape
    N = weight.shape[0]
    if (_tuned.lookup(tuned_key(rows, N, K, weight.dtype)) is not None
            and not step_takes_rule(rows, N, K, weight.dtype)):
        return plan(rows, N, K, weight.dtype, x.device)  # tuned beside cuBLAS already
    chosen = rule(rows, N, K, weight.dtype, sm_count(x.device))
    key = plain_key(rows, N, K, weight.dtype, bias is not None, chosen)
    saved = _plain.lookup(key)
    if saved is not None:
        return Plan.from_dict(saved)
    if (not timing_enabled() or is_capturing() or is_compiling_only()
            or x.device.type != "cuda"):
        return chosen  # never timed inside a capture: the caller warms up outside one
    pdl = use_pdl(x.device, ())
    # The weight alone is rotated: x comes from L2 in a decode step (the kernel before
    # wrote it), and read from memory it put the rule's kernel 0.3 us behind where it is
    # 0.3 us ahead (9728 x 896 bf16, 3 rows, H100).
    weights = RotatedCopies((weight,))
    scratch = torch.empty_like(out)

    def run(config: dict) -> None:
        launch(Plan.from_dict(config), x, weights()[0], scratch, None, 0.0, bias, "none",
               None, pdl and config["kind"] != "cublas")

    timed = [chosen.as_dict()]
    other = other_plan(rows, N, K, weight.dtype, sm_count(x.device), chosen)
    if other is not None:  # a GEMV's other launch, a GEMV or an equal split, as well
        timed.append(other.as_dict())
    try:
        picked = _plain.pick(key, run, [*timed, {"kind": "cublas", "fused": chosen.as_dict()}])
    except torch.cuda.OutOfMemoryError:
        return chosen  # no room for the weight's copies: the rule, timed another time
    finally:
        weights.release()
    return Plan.from_dict(picked)


def record(rows: int, N: int, K: int, dtype: torch.dtype, chosen: Plan) -> None:
    """Keep a timed plan for this shape (tuning results)."""
    _tuned.record(tuned_key(rows, N, K, dtype), chosen.as_dict())


def takes_head_norm(chosen: Plan, rows: int, head_dim: int) -> bool:
    """Whether `chosen` can normalise q and k heads of head_dim in its rotary epilogue
    (launch's `head_norm`, _head_norm_store.py): the one-row GEMV, the CUDA-core row kernel
    and the tensor-core kernel, where each of their column blocks lies inside one head; not
    the several-row GEMV (its rows' accumulators apart) or cuBLAS."""
    if chosen.kind == "gemv":
        fits = rows == 1 and "SPLIT" in chosen.config
    else:
        fits = chosen.kind in ("matvec", "dot")
    return fits and head_dim % chosen.config["BLOCK_N"] == 0


def takes_added(chosen: Plan) -> bool:
    """Whether `chosen` adds a normed stream to x before its projection (launch's `added`,
    _added_norm.py): the CUDA-core kernels in their prologue, the tensor-core kernel in the
    norm's kernel before it; cuBLAS (plain projections) does not."""
    return chosen.kind != "cublas"


def launch(chosen: Plan, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
           norm_weight, eps: float, bias, activation: str, residual, pdl: bool,
           rotary: tuple = NO_ROTARY, handed: tuple | None = None,
           hand_over: tuple | None = None, l2_ahead: torch.Tensor | None = None,
           added: tuple = NO_ADDED, head_norm: tuple = NO_HEAD_NORM):
    """Run `chosen` on x (rows, K) into out (rows, N), unit column strides; activation
    "rotary" (with its `rotary` tuple) writes q to out and k, v to the caches instead.
    handed and hand_over (a norm handed over to or by this call, _norm_handoff.py,
    launch_dot_rows) are the tensor-core kernel's alone; l2_ahead (bytes the one-row GEMV
    prefetches into L2, launch_matvec) the GEMV's; added (x first made the stream x +
    rms_norm(h) * w, _added_norm.py) where takes_added; head_norm (q and k heads normalised
    in the rotary epilogue, _head_norm_store.py) where takes_head_norm."""
    if (handed is not None or hand_over is not None) and chosen.kind != "dot":
        raise ValueError(f"a norm is handed over only on the tensor-core path, not {chosen.kind}")
    if added and not takes_added(chosen):
        raise ValueError(f"{chosen.kind} adds no normed stream")
    if head_norm and (activation != "rotary"
                      or not takes_head_norm(chosen, x.shape[0], rotary[-1])):
        raise ValueError(f"{chosen.kind} {chosen.config} normalises no heads in the epilogue "
                         f"of {activation!r} at {x.shape[0]} rows")
    if chosen.kind == "cublas":  # tuned where it beat every plan; no norm, no activation
        if norm_weight is not None or activation != "none":
            raise ValueError("cuBLAS runs plain projections only; plan(fused=True) says what "
                             "runs the others")
        x = x.to(weight.dtype)
        if residual is None and out.dtype == weight.dtype:  # one call, no copy kernel after it
            if bias is None:
                torch.matmul(x, weight.T, out=out)
                return None
            if bias.dtype == weight.dtype:
                torch.addmm(bias, x, weight.T, out=out)
                return None
        y = torch.addmm(bias, x, weight.T) if bias is not None else x @ weight.T
        out.copy_(y if residual is None else y + residual)
        return None
    if chosen.kind == "dot":
        return launch_dot_rows(x, weight, out, norm_weight, eps, bias, activation, residual,
                               chosen.config, pdl, rotary, handed, hand_over, added,
                               head_norm)
    return launch_matvec(x, weight, out, norm_weight, eps, bias, activation, residual,
                         chosen.config, pdl, rotary, l2_ahead, added, head_norm)
