"""Few rows (2 to 16) of a 16-bit linear layer on the tensor cores, weight streamed once.

A decode batch is too small for a GEMM tile (64-128 rows) and too large for the
matrix-vector kernels, whose per-row reductions on the CUDA cores cost more with every row
(8 rows of 16-bit weights reached 41-57% of the bandwidth floor where one row reached
76-101%, notes/kernels.md). Here the rows are padded to one 16-row tensor-core tile in registers:
each program streams a (BLOCK_N, K) strip of W exactly once, and mma does all rows of a
(BLOCK_N, BLOCK_K) tile at once, so 16 rows cost about what 2 do. Small BLOCK_N (16-64)
keeps enough programs to fill every SM when N is a few thousand, and split-K where N is
narrow for its K. A norm prologue runs in the K loop where each program reads its slice in
one step (norm_in_loop), else as a small kernel of its own just before (_norm_rows_kernel),
unless the kernel that wrote x handed it over (_norm_handoff.py); bias, activation and
residual stay in the epilogue.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._added_norm import NO_ADDED, add_loaded, add_normed, added_inputs, added_rstd
from ._head_norm_store import NO_HEAD_NORM, head_half_block
from ._l2_prefetch import prefetch_lines
from ._launch import ASSUMED_SM_COUNT, sm_count, weight_alignment
from ._matvec import rows_epilogue
from ._norm_handoff import parts_block
from ._norm_weight import is_one_value, norm_weight_at
from ._rotary_store import NO_ROTARY
from ._split_workspace import plan_split
from .rms_norm import launch_rms_norm

DOT_ROWS = 16  # the tile's rows: an mma operand needs at least 16
# 16-bit split-K plans deal K's steps out evenly unless their config says "EVEN_SPLIT": False
# (measured in bf16 only: fp32's keep the equal cut). A module setting, so that
# research/time_generator.py can build a Generator without it.
DEAL_EVENLY = True
# A launch whose slices of K each take one BLOCK_K step may compile its K loop out
# (ONE_STEP): a loop never run still holds its registers, 171 a thread against 64 for
# 2048^2's whole-slice tile (sm_90, Triton 3.6). Not by default: alone it was 0.4-8.5%
# slower on 5 shapes at 8 and 16 rows, and 1-5% in stacks of d = 1024 and 2048 at 8-16 rows;
# in tg.Generator's batch-8 step it made TinyLlama 1.7% faster and a 1024-wide model 2%
# slower (H200, notes/kernels.md, session 96). So a model's step chooses it per projection
# (the config's "ONE_STEP", decode_plan.set_one_step); this module setting turns it on for
# every launch, for research.
COMPILE_ONE_STEP = False
# Weight tiles past its first that a program of a split plan asks L2 for before PDL's wait
# (the kernel's L2_TILES; a config's "L2_TILES" overrides it): its pipelined loop starts only
# after the wait. One won on every split plan timed, alone (1-4%: bf16 2048 x 5632 at 16 rows
# 8.59 -> 8.23 us, fp32 2048^2 at 8 rows 8.27 -> 7.94) and in stacks (fp32 d = 2048 at 8
# rows 151.6 -> 142.8 us a token); two to sixteen lost more the more they asked, and unsplit
# plans, whose programs stream 32-64 tiles, moved under 1% either way (H200, session 104).
L2_AHEAD_TILES = 1
# The largest |x * g| a row takes to an fp16 mma when the norm runs in the loop: far below
# 65504, so rounding cannot reach it, far above the normalised values a norm yields.
FP16_ROW_LIMIT = tl.constexpr(16384.0)
# The K step of the loop that redoes an fp16 program's products after an overflow: a narrow
# tile, so that rarely taken loop needs fewer registers than the main one.
REDO_K = tl.constexpr(32)


@triton.jit
def _dot_rows_step(acc, sum_sq, w, x_ptrs, norm_w_ptr, offs_m, offs_k, M, k0, k_stop,
                   DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr, W_LHS: tl.constexpr,
                   NORM_IN_LOOP: tl.constexpr, NORM_SCALAR: tl.constexpr = False):
    """Fold weight tile w (BLOCK_N, BLOCK_K), columns k0 + offs_k (those below k_stop), into
    acc (BLOCK_M, BLOCK_N), or into acc (BLOCK_N, BLOCK_M) with the weight as the mma's
    left operand (W_LHS). NORM_IN_LOOP: x * g goes to the mma, and the rows' sums of x^2
    over these columns into sum_sq (BLOCK_M,); NORM_SCALAR: g is one value
    (_norm_weight.py)."""
    k_mask = offs_k < k_stop - k0
    x = tl.load(x_ptrs + k0, mask=(offs_m < M)[:, None] & k_mask[None, :], other=0.0)
    if NORM_IN_LOOP:
        x = x.to(tl.float32)
        sum_sq += tl.sum(x * x, axis=1)
        g = norm_weight_at(norm_w_ptr, k0 + offs_k, k_mask, NORM_SCALAR)
        x = x * g[None, :]
    if NORM_IN_LOOP and w.dtype == tl.float16:
        # x * g, unnormalised, may pass fp16's 65504 (rows near its top, |g| > 1): a row
        # whose largest |x * g| passes FP16_ROW_LIMIT goes to the mma scaled down to it,
        # and its products are scaled back in fp32.
        row_max = tl.max(tl.abs(x), axis=1)
        scale = tl.where(row_max > FP16_ROW_LIMIT, FP16_ROW_LIMIT / row_max, 1.0)
        x = (x * scale[:, None]).to(w.dtype)
        if W_LHS:
            acc += tl.dot(w, tl.trans(x)) / scale[None, :]
        else:
            acc += tl.dot(x, tl.trans(w)) / scale[:, None]
    else:
        # x may be fp32 (a residual stream kept in fp32): the mma takes the weights' dtype.
        x = x.to(w.dtype)
        if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
            x = x.to(tl.float32)
            w = w.to(tl.float32)
        if W_LHS:
            acc = tl.dot(w, tl.trans(x), acc, input_precision=DOT_PRECISION)
        else:
            acc = tl.dot(x, tl.trans(w), acc, input_precision=DOT_PRECISION)
    return acc, sum_sq


@triton.jit
def _norm_rows_kernel(y_ptr, stride_ym, x_ptr, stride_xm, norm_w_ptr, added, K, eps,
                      PDL: tl.constexpr, BLOCK_K: tl.constexpr,
                      NORM_SCALAR: tl.constexpr = False, ADD_NORMED: tl.constexpr = False):
    """y_m = x_m / sqrt(mean_k x_mk^2 + eps) * g in y's dtype, one program a row: the input
    of the tensor-core kernel where a norm prologue is asked for. Scaling x inside that
    kernel's K loop keeps Triton from pipelining x's loads into the mma (a norm prologue
    there made a 2048 x 2048 bf16 linear 1.7x slower in a chain on H100); this kernel costs
    a launch, which PDL overlaps with the previous one. NORM_SCALAR: g is one value
    (_norm_weight.py). ADD_NORMED: x_m is first the stream x_m + rms_norm(h_m) * w of
    `added`, which the program writes (_added_norm.py)."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # x is final
        tl.extra.cuda.gdc_launch_dependents()  # the projection may start streaming weights
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xm
    y_row = y_ptr + row * stride_ym
    offs_k = tl.arange(0, BLOCK_K)
    if BLOCK_K >= K:  # the row in registers: one read of x (and of h)
        k_mask = offs_k < K
        x = tl.load(x_row + offs_k, mask=k_mask, other=0.0).to(tl.float32)
        # with x, before the sum's cross-warp barrier, which a load after it cannot pass
        g = norm_weight_at(norm_w_ptr, offs_k, k_mask, NORM_SCALAR)
        if ADD_NORMED:  # h and its weight with x, so one round trip to L2; h's norm from h
            h, h_weight = added_inputs(added, row, offs_k, k_mask)
            rstd_h = tl.rsqrt(tl.sum(h * h) / K + eps)
            x = add_loaded(x, h, h_weight, added, row, offs_k, k_mask, rstd_h, True)
        rstd = tl.rsqrt(tl.sum(x * x) / K + eps)
        tl.store(y_row + offs_k, (x * rstd * g).to(y_ptr.dtype.element_ty), mask=k_mask)
    else:
        if ADD_NORMED:
            rstd_h = tl.sum(added_rstd(added, row + tl.arange(0, 1), row + 1, K, eps, 1,
                                        BLOCK_K))
        sum_sq = tl.zeros([BLOCK_K], tl.float32)
        for k0 in range(0, K, BLOCK_K):
            x = tl.load(x_row + k0 + offs_k, mask=offs_k < K - k0, other=0.0).to(tl.float32)
            if ADD_NORMED:  # written here, made again below (this program's own writes)
                x = add_normed(x, added, row, k0 + offs_k, offs_k < K - k0, rstd_h, True)
            sum_sq += x * x
        rstd = tl.rsqrt(tl.sum(sum_sq) / K + eps)
        for k0 in range(0, K, BLOCK_K):
            k_mask = offs_k < K - k0
            x = tl.load(x_row + k0 + offs_k, mask=k_mask, other=0.0).to(tl.float32)
            if ADD_NORMED:
                x = add_normed(x, added, row, k0 + offs_k, k_mask, rstd_h, False)
            g = norm_weight_at(norm_w_ptr, k0 + offs_k, k_mask, NORM_SCALAR)
            tl.store(y_row + k0 + offs_k, (x * rstd * g).to(y_ptr.dtype.element_ty),
                     mask=k_mask)


# _norm_rows_kernel holds a row of up to NORM_ROW_MAX columns in registers (32 values a
# thread up to 16384 columns, 64 past): one read of x. Rows were read twice in steps of 4096
# columns, a serial round trip to L2 a step (notes/kernels.md, session 47).
NORM_ROW_MAX = 32768
NORM_VALUES_PER_THREAD = 32


def norm_rows_config(K: int) -> tuple[int, int]:
    """(BLOCK_K, num_warps) of _norm_rows_kernel for rows of K columns."""
    block_k = min(NORM_ROW_MAX, triton.next_power_of_2(K))
    return block_k, max(4, min(16, block_k // (32 * NORM_VALUES_PER_THREAD)))


# Where the norm runs in the K loop, programs an SM at most.
NORM_IN_LOOP_PROGRAMS_PER_SM = 2


def norm_in_loop(config: dict, N: int, K: int, sms: int | None) -> bool:
    """Whether a norm prologue runs in the tensor-core kernel's K loop (x * g to the mma,
    rstd_m in the epilogue) rather than as _norm_rows_kernel before it: where each program
    reads its slice of K in one step, so no load of x is left to pipeline, and programs
    number at most two an SM (the whole-slice tiles of decode_plan). There it saves the
    norm kernel's link in the chain. On pipelined tiles scaling x on its way to the mma
    costs more than that kernel, and one-step tiles of more programs lose either to the
    pipelined plan with the kernel or to the kernel on their own tile (bf16 on H100 at 2-16
    rows, us, norm kernel before -> in the loop: 2048^2 whole slices 6.5-7.6 -> 5.0-5.5,
    256 x 2048 3.9-4.1 -> 2.6-2.8; pipelined 4096^2 15.4-16.0 -> 16.4-17.1, 14336 x 4096
    42.3-43.7 -> 50.3-50.6; one step, 512 programs, 4096^2 17.6-19.3 -> 16.4-18.1, 2048
    programs, 8192^2 57.9-67.1 -> 62.7-72.2; notes/kernels.md, session 48). fp16 rows are
    scaled into range on their way to the mma (FP16_ROW_LIMIT)."""
    programs = triton.cdiv(N, config["BLOCK_N"]) * config.get("SPLIT_K", 1)
    return (one_step_a_slice(K, config)
            and programs <= NORM_IN_LOOP_PROGRAMS_PER_SM * (sms or ASSUMED_SM_COUNT))


def one_step_a_slice(K: int, config: dict) -> bool:
    """Whether the plan `config` cuts K into as many slices as BLOCK_K steps (or more), so
    that each program reads its slice in one step: a whole-slice tile."""
    return config.get("SPLIT_K", 1) >= triton.cdiv(K, config["BLOCK_K"])


@triton.jit
def _hand_over_norm(y, y_ptr, g, x_next_ptr, stride_xnm, parts_ptr, pid_n,
                    offs_m, offs_n, M, N, BLOCK_M: tl.constexpr):
    """The next projection's norm prologue, from this program's tile y of the result h (the
    values stored, before rounding) and g, the next norm's weights at these columns:
    x_next = h * g, and the rows' sums of h^2 over these columns, summed by the next kernel.
    Both from h as stored (rounded to y's dtype), the values an RMSNorm of the stored result
    would read."""
    y_mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    h = tl.where(y_mask, y.to(y_ptr.dtype.element_ty).to(tl.float32), 0.0)
    tl.store(x_next_ptr + offs_m[:, None] * stride_xnm + offs_n[None, :],
             (h * g[None, :]).to(x_next_ptr.dtype.element_ty), mask=y_mask)
    tl.store(parts_ptr + pid_n * BLOCK_M + offs_m, tl.sum(h * h, axis=1))


@triton.jit
def _slice_into_l2(w_ptr, offs_n, n_mask, stride_wn, k_first, k_stop, loaded_ptr,
                   TILES: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """prefetch.global.L2 of the 128-byte lines of TILES weight tiles (BLOCK_N, BLOCK_K)
    from column k_first on, those below k_stop; a line outside asks again for loaded_ptr's,
    a weight the program has already loaded."""
    LINE: tl.constexpr = 1024 // w_ptr.dtype.element_ty.primitive_bitwidth  # values a line
    ROW_LINES: tl.constexpr = (BLOCK_K + LINE - 1) // LINE
    cols = (k_first + tl.arange(0, TILES)[:, None, None] * BLOCK_K
            + tl.arange(0, ROW_LINES)[None, None, :] * LINE)
    inside = n_mask[None, :, None] & (cols < k_stop)
    rows = w_ptr + offs_n[None, :, None].to(tl.int64) * stride_wn
    prefetch_lines(tl.where(inside, rows + cols, loaded_ptr))


@triton.jit
def _dot_rows_kernel(y_ptr, stride_ym, x_ptr, stride_xm, h_ptr, stride_hm, w_ptr, stride_wn,
                     norm_w_ptr, bias_ptr, res_ptr, stride_rm, rotary, head_norm,
                     partial_ptr, count_ptr,
                     norm_parts_ptr, n_norm_parts, eps,
                     next_norm_w_ptr, x_next_ptr, stride_xnm, next_parts_ptr,
                     M, N, K, K_SPLIT,
                     HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                     ACTIVATION: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                     DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                     SPLIT_K: tl.constexpr, NORM_PARTS: tl.constexpr, HAND_OVER: tl.constexpr,
                     NORM_IN_LOOP: tl.constexpr, REDO_OVERFLOW: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     W_LHS: tl.constexpr = False, ALIGN: tl.constexpr = 1,
                     EVEN_SPLIT: tl.constexpr = True, ONE_STEP: tl.constexpr = False,
                     L2_TILES: tl.constexpr = 0, NORM_SCALAR: tl.constexpr = False,
                     NEXT_NORM_SCALAR: tl.constexpr = False, HEAD_HALF: tl.constexpr = 0):
    """y_mn = act(rstd_m sum_k x_mk W_nk + b_n) + r_mn for M <= BLOCK_M rows and BLOCK_N
    outputs a program, rstd_m = 1 where no norm is asked for. A norm prologue comes from
    _norm_rows_kernel, launched just before (x is then normalised, rstd_m = 1), or is
    handed over by the kernel that wrote h (NORM_PARTS > 0: x is h * g already, and
    rstd_m = 1 / sqrt(sum of the n_norm_parts partial sums of h_m^2 / K + eps); with
    REDO_OVERFLOW, fp16, a program whose products are not finite, h * g having passed
    65504, takes them again from h_ptr's h and norm_w_ptr's g as the loop norm does), or runs
    in the K loop (NORM_IN_LOOP: x * g, norm_w_ptr's g, goes to the mma and the rows' sums
    of x^2 are taken beside it; a split's programs leave theirs beside their partials).
    fp32 weights multiply at DOT_PRECISION: "tf32x3" (three tf32 products, about fp32's
    accuracy, still far below the weight stream's time at 16 rows) or "ieee".

    HAND_OVER: this kernel's result y is the next projection's h. Program n also stores
    y * g_next (its columns, in x_next) and the rows' sums of y^2 over its columns
    (next_parts, one BLOCK_M vector a column block), so the next projection needs no norm
    kernel: see _norm_handoff.py.

    W_LHS: the mma computes acc^T = W x^T, the weight tile on the left (64 or more of its
    rows fill a Hopper wgmma, which reads the tiles the K loop pipelines straight from shared
    memory: they never pass through registers); acc is turned back before the epilogue.

    SPLIT_K > 1: program (n, s) sums one slice of K only, so a narrow layer still gives
    every SM programs of a wide tile (fewer re-reads of x a weight byte). EVEN_SPLIT: K's
    BLOCK_K steps are dealt out evenly, the longer slices first, slice s taking steps
    [ceil(s * steps / SPLIT_K), ceil((s + 1) * steps / SPLIT_K)); else slice s is columns
    [s * K_SPLIT, (s + 1) * K_SPLIT), the last shorter (decode_plan.equal_split_plan).
    Each stores its partial acc in the workspace (_split_workspace.py) and counts itself
    in; the last of the SPLIT_K to arrive sums the partials in split order and finishes
    the block.

    ONE_STEP: every slice is one BLOCK_K step, and the K loop is left out (the config's
    "ONE_STEP", COMPILE_ONE_STEP).

    NORM_SCALAR, NEXT_NORM_SCALAR: g, g_next is one value (_norm_weight.py).

    HEAD_HALF > 0 (activation "rotary"): q and k heads RMS-normalised before their rotation,
    the last column block of a head to be finished doing it (`head_norm`,
    _head_norm_store.py).

    ALIGN: K, K_SPLIT and stride_wn arrive divided by it (_launch.weight_alignment).

    PREFETCH_WEIGHT (programmatic dependent launch): the first weight tile (and g_next) is
    loaded before griddepcontrol.wait, while the previous kernel in the stream finishes;
    everything else after it. The next kernel is released only after the wait, so at most
    one kernel ahead of this one is still running when it prefetches (the launcher checks
    that kernel does not write W or g_next). L2_TILES > 0: the slice's next L2_TILES
    tiles are also asked of L2 before the wait, so the loop's loads after it find them
    there. The handed-over partial sums are loaded right after the wait and summed only in
    the epilogue, so their round trip overlaps the loop.
    """
    K = K * ALIGN
    K_SPLIT = K_SPLIT * ALIGN
    stride_wn = stride_wn * ALIGN
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    if EVEN_SPLIT:
        steps = tl.cdiv(K, BLOCK_K)
        k_start = tl.cdiv(pid_k * steps, SPLIT_K) * BLOCK_K
        k_stop = tl.minimum(K, tl.cdiv((pid_k + 1) * steps, SPLIT_K) * BLOCK_K)
    else:
        k_start = pid_k * K_SPLIT
        k_stop = tl.minimum(K, k_start + K_SPLIT)
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :]

    if W_LHS:
        acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    else:
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    w = tl.load(w_ptrs + k_start, mask=n_mask[:, None] & (offs_k < k_stop - k_start)[None, :],
                other=0.0)
    next_g = tl.zeros([BLOCK_N], tl.float32)
    if HAND_OVER:  # a weight too: read before the wait, off the epilogue's chain
        next_g = norm_weight_at(next_norm_w_ptr, offs_n, n_mask, NEXT_NORM_SCALAR)
    if PREFETCH_WEIGHT:
        if L2_TILES > 0:
            _slice_into_l2(w_ptr, offs_n, n_mask, stride_wn, k_start + BLOCK_K, k_stop,
                           w_ptr + pid_n.to(tl.int64) * BLOCK_N * stride_wn + k_start,
                           L2_TILES, BLOCK_N, BLOCK_K)
        tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start its prefetch
    if NORM_PARTS > 0:  # loaded now and summed at the end: in flight while weights stream
        offs_p = tl.arange(0, NORM_PARTS)
        parts = tl.load(norm_parts_ptr + offs_p[:, None] * BLOCK_M + offs_m[None, :],
                        mask=(offs_p < n_norm_parts)[:, None] & (offs_m < M)[None, :],
                        other=0.0)
    sum_sq = tl.zeros([BLOCK_M], tl.float32)
    acc, sum_sq = _dot_rows_step(acc, sum_sq, w, x_ptrs, norm_w_ptr, offs_m, offs_k, M,
                                 k_start, k_stop, DOT_PRECISION, UPCAST_DOT, W_LHS,
                                 NORM_IN_LOOP, NORM_SCALAR)
    if not ONE_STEP:  # a loop never run still holds its registers (COMPILE_ONE_STEP)
        for k0 in range(k_start + BLOCK_K, k_stop, BLOCK_K):
            w = tl.load(w_ptrs + k0, mask=n_mask[:, None] & (offs_k < k_stop - k0)[None, :],
                        other=0.0)
            acc, sum_sq = _dot_rows_step(acc, sum_sq, w, x_ptrs, norm_w_ptr, offs_m, offs_k,
                                         M, k0, k_stop, DOT_PRECISION, UPCAST_DOT, W_LHS,
                                         NORM_IN_LOOP, NORM_SCALAR)
    if REDO_OVERFLOW:
        # NaN fails the comparison as inf does; finite products cost only this count.
        not_finite = tl.sum(tl.sum(tl.where(tl.abs(acc) < float("inf"), 0, 1), axis=1), axis=0)
        if not_finite > 0:  # in REDO_K steps, so this rare loop sets no register count
            acc = tl.zeros_like(acc)
            offs_r = tl.arange(0, REDO_K)
            h_ptrs = h_ptr + offs_m[:, None] * stride_hm + offs_r[None, :]
            w_redo = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_r[None, :]
            for k0 in range(k_start, k_stop, REDO_K):
                w_part = tl.load(w_redo + k0,
                                 mask=n_mask[:, None] & (offs_r < k_stop - k0)[None, :], other=0.0)
                acc, sum_sq = _dot_rows_step(acc, sum_sq, w_part, h_ptrs, norm_w_ptr, offs_m,
                                             offs_r, M, k0, k_stop, DOT_PRECISION, UPCAST_DOT,
                                             W_LHS, True, NORM_SCALAR)
    if W_LHS:
        acc = tl.trans(acc)

    if NORM_PARTS > 0:
        sum_sq = tl.sum(parts, axis=0)
    if SPLIT_K > 1:
        # partials (column blocks, SPLIT_K, BLOCK_M, BLOCK_N): program (n, s) writes its
        # tile of slice s, contiguous; with NORM_IN_LOOP its rows' sums of x^2 over slice s
        # follow them, a BLOCK_M vector a program: (column blocks, SPLIT_K, BLOCK_M).
        block_tiles = partial_ptr + pid_n.to(tl.int64) * SPLIT_K * BLOCK_M * BLOCK_N
        tile = offs_m[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tile_mask = (offs_m < M)[:, None] & n_mask[None, :]
        sums_ptr = (partial_ptr + tl.cdiv(N, BLOCK_N) * SPLIT_K * BLOCK_M * BLOCK_N
                    + pid_n * SPLIT_K * BLOCK_M + offs_m)
        tl.store(block_tiles + pid_k * BLOCK_M * BLOCK_N + tile, acc, mask=tile_mask)
        if NORM_IN_LOOP:
            tl.store(sums_ptr + pid_k * BLOCK_M, sum_sq)
        tl.debug_barrier()  # every thread's partials are out before the count says so
        arrived = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel")
        if arrived == SPLIT_K - 1:
            acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
            if NORM_IN_LOOP:
                sum_sq = tl.zeros([BLOCK_M], tl.float32)
            for s in range(SPLIT_K):  # split order, whatever the arrival order
                acc += tl.load(block_tiles + s * BLOCK_M * BLOCK_N + tile, mask=tile_mask,
                               other=0.0, cache_modifier=".cg")
                if NORM_IN_LOOP:
                    sum_sq += tl.load(sums_ptr + s * BLOCK_M, cache_modifier=".cg")
            tl.store(count_ptr + pid_n, 0)  # zero for the next launch on this stream
            y = rows_epilogue(acc, sum_sq, y_ptr, stride_ym, bias_ptr, res_ptr, stride_rm,
                              rotary, head_norm, pid_n, offs_m, offs_n, M, N, K, eps,
                              NORM_PARTS > 0 or NORM_IN_LOOP, HAS_BIAS, HAS_RESIDUAL,
                              ACTIVATION, BLOCK_M, BLOCK_N, HEAD_HALF)
            if HAND_OVER:
                _hand_over_norm(y, y_ptr, next_g, x_next_ptr, stride_xnm, next_parts_ptr,
                                pid_n, offs_m, offs_n, M, N, BLOCK_M)
    else:
        y = rows_epilogue(acc, sum_sq, y_ptr, stride_ym, bias_ptr, res_ptr, stride_rm, rotary,
                          head_norm, pid_n, offs_m, offs_n, M, N, K, eps,
                          NORM_PARTS > 0 or NORM_IN_LOOP, HAS_BIAS, HAS_RESIDUAL, ACTIVATION,
                          BLOCK_M, BLOCK_N, HEAD_HALF)
        if HAND_OVER:
            _hand_over_norm(y, y_ptr, next_g, x_next_ptr, stride_xnm, next_parts_ptr,
                            pid_n, offs_m, offs_n, M, N, BLOCK_M)


def l2_ahead_tiles(asked: int | None, K: int, block_k: int, split: int, pdl: bool) -> int:
    """The weight tiles past its first a program asks L2 for before PDL's wait: `asked` (a
    config's "L2_TILES") where given, else L2_AHEAD_TILES where K is split into slices of
    two tiles or more, else none (unsplit plans moved under 1% either way, session 104)."""
    if asked is not None:
        return asked
    return L2_AHEAD_TILES if pdl and split > 1 and triton.cdiv(
        triton.cdiv(K, block_k), split) > 1 else 0


def launch_dot_rows(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                    norm_weight, eps: float, bias, activation: str, residual,
                    config: dict, pdl: bool, rotary: tuple = NO_ROTARY,
                    handed: tuple | None = None, hand_over: tuple | None = None,
                    added: tuple = NO_ADDED, head_norm: tuple = NO_HEAD_NORM):
    """out = linear(x) for 1 to DOT_ROWS rows of x (M, K), x and out with unit column
    stride; config: BLOCK_N, BLOCK_K, num_warps, num_stages, optionally SPLIT_K (default 1),
    W_LHS (default False), L2_TILES (default L2_AHEAD_TILES where split, under PDL) and for
    fp32 weights DOT_PRECISION (default "tf32x3"); rotary as in launch_matvec.
    handed: (x_next, parts), the norm of x by norm_weight handed over by the kernel that
    wrote x (_norm_handoff.py): the mma reads x_next = x * norm_weight, parts' sums give the
    rows' rstd, and in fp16, where x_next may have overflowed, x and norm_weight are read
    again by a program whose products are not finite;
    hand_over: (g, x_next, parts) to hand the next projection's norm over (_norm_handoff.py),
    parts of shape (column blocks of this launch, DOT_ROWS).
    added: x is first the stream x + rms_norm(h) * w (_added_norm.py), made by the norm's
    kernel before this one (a kernel of its own where there is no norm); not with handed.
    head_norm (with rotary; head_norm_args): q and k heads normalised in the epilogue,
    column blocks dividing head_dim."""
    M, K = x.shape
    N = weight.shape[0]
    if not 1 <= M <= DOT_ROWS:
        raise ValueError(f"the tensor-core decode kernel takes 1 to {DOT_ROWS} rows, got {M}")
    if head_norm and (activation != "rotary" or rotary[-1] % config["BLOCK_N"]):
        raise ValueError(f"head norms run in a rotary epilogue with column blocks dividing "
                         f"head_dim, not {config}")
    if added and handed is not None:
        raise ValueError("a norm handed over with x is not the norm of the stream added to it")
    config = dict(config)
    in_loop = config.pop("NORM_IN_LOOP", None)
    if norm_weight is None or handed is not None or added:
        in_loop = False
    elif in_loop is None:
        in_loop = norm_in_loop(config, N, K, sm_count(x.device))
    if added and norm_weight is None:   # the stream alone, as tg.rms_norm makes it
        h, h_stride, w, sum_out, sum_stride = added
        launch_rms_norm(h, w, eps, x, sum_out)
        x = sum_out
    elif norm_weight is not None and handed is None and not in_loop:
        x_normed = torch.empty((M, K), dtype=weight.dtype, device=x.device)
        block_k, warps = norm_rows_config(K)
        _norm_rows_kernel[(M,)](x_normed, x_normed.stride(0), x, x.stride(0), norm_weight,
                                added, K, eps, PDL=pdl, BLOCK_K=block_k,
                                NORM_SCALAR=is_one_value(norm_weight),
                                ADD_NORMED=bool(added), num_warps=warps,
                                **({"launch_pdl": True} if pdl else {}))
        x, norm_weight = x_normed, None
    precision = config.pop("DOT_PRECISION", "tf32x3")
    even = config.pop("EVEN_SPLIT", DEAL_EVENLY and weight.element_size() <= 2)
    n_blocks = triton.cdiv(N, config["BLOCK_N"])
    # with the norm in the loop, each split's rows' sums of x^2 follow the partials
    split, k_split, partials, counters = plan_split(
        x.device, K, config["BLOCK_K"], config.pop("SPLIT_K", 1),
        DOT_ROWS * n_blocks * (config["BLOCK_N"] + (1 if in_loop else 0)), n_blocks,
        placeholder=out, even=even)
    next_norm_weight, x_next, next_parts = hand_over if hand_over is not None else (out,) * 3
    if hand_over is not None and next_parts.shape != (n_blocks, DOT_ROWS):
        raise ValueError(f"the handed-over partial sums need shape ({n_blocks}, {DOT_ROWS}), "
                         f"got {tuple(next_parts.shape)}")
    x_mma, norm_parts = handed if handed is not None else (x, None)
    # the K loop compiled out where asked for and every slice is one BLOCK_K step
    one_step = config.pop("ONE_STEP", COMPILE_ONE_STEP) and split >= triton.cdiv(
        K, config["BLOCK_K"])
    l2_tiles = l2_ahead_tiles(config.pop("L2_TILES", None), K, config["BLOCK_K"], split, pdl)
    align = weight_alignment(weight.element_size(), K, k_split, weight.stride(0))
    return _dot_rows_kernel[(n_blocks, split)](
        out, out.stride(0), x_mma, x_mma.stride(0), x, x.stride(0), weight,
        weight.stride(0) // align, norm_weight,
        bias, residual, residual.stride(0) if residual is not None else 0, rotary, head_norm,
        partials,
        counters, norm_parts if norm_parts is not None else out,
        norm_parts.shape[0] if norm_parts is not None else 0, eps,
        next_norm_weight, x_next, x_next.stride(0), next_parts,
        M, N, K // align, k_split // align, HAS_BIAS=bias is not None,
        HAS_RESIDUAL=residual is not None, ACTIVATION=activation, PREFETCH_WEIGHT=pdl,
        DOT_PRECISION=precision if weight.dtype == torch.float32 else "tf32",
        UPCAST_DOT=INTERPRET and weight.dtype == torch.bfloat16, SPLIT_K=split,
        NORM_PARTS=parts_block(norm_parts.shape[0]) if norm_parts is not None else 0,
        HAND_OVER=hand_over is not None, NORM_IN_LOOP=in_loop,
        REDO_OVERFLOW=handed is not None and weight.dtype == torch.float16,
        BLOCK_M=DOT_ROWS, ALIGN=align, EVEN_SPLIT=even, ONE_STEP=one_step, L2_TILES=l2_tiles,
        NORM_SCALAR=is_one_value(norm_weight),
        NEXT_NORM_SCALAR=hand_over is not None and is_one_value(next_norm_weight),
        HEAD_HALF=head_half_block(rotary[-1]) if head_norm else 0, **config,
        **({"launch_pdl": True} if pdl else {}))
