"""Few-row linear kernels on the CUDA cores: the matrix-vector paths of tg.linear.

_gemv_kernel takes one row of 16-bit weights (its split tile needs few registers, so many
programs fit an SM), _gemv_rows_kernel the same tile on 2-4 rows; _matvec_kernel takes fp32
weights, or several rows applied to each weight tile one at a time. All stream every weight
byte once and re-read x from L2.
Which of these (or the tensor-core kernel of _dot_rows.py) runs a shape is decode_plan's
choice.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._activation import GLU_ACTIVATIONS, apply_activation, glu_pairs, is_glu
from ._added_norm import (
    NO_ADDED,
    add_loaded,
    add_normed,
    added_inputs,
    added_rstd,
    rstd_block_k,
)
from ._head_norm_store import NO_HEAD_NORM, head_half_block, head_normed_store
from ._l2_prefetch import prefetch_lines
from ._launch import ASSUMED_SM_COUNT, launch, resident_launch, sm_count, weight_alignment
from ._norm_weight import is_one_value, norm_weight_at
from ._rotary_store import NO_ROTARY, rotary_inputs, rotary_store


@triton.jit
def _matvec_inputs(x_ptr, stride_xm, norm_w_ptr, added, offs_m, offs_k, M, k0, K,
                   HAS_NORM: tl.constexpr, BLOCK_M: tl.constexpr, NORM_SCALAR: tl.constexpr,
                   ADD_NORMED: tl.constexpr):
    """A step's loads at columns k0 + offs_k: the x rows in fp32 ((BK,) at one row, (BM, BK)
    else), the norm weights (ones without a norm) and, ADD_NORMED, h and its weight
    (added_inputs; x where none). All are issued before the step's reductions, whose
    barriers a load after them cannot pass (_gemv_inputs)."""
    k_mask = offs_k < K - k0
    g = offs_k  # unused without a norm
    if HAS_NORM:
        g = norm_weight_at(norm_w_ptr, k0 + offs_k, k_mask, NORM_SCALAR)
    # (the addresses as written here: other forms of the same sums took the fp32 8-row loop
    # 168 -> 210 registers a thread, sm_90, Triton 3.6; session 120)
    if BLOCK_M == 1:  # one vector in the weight tile's own layout: no 2-D detour
        x = tl.load(x_ptr + k0 + offs_k, mask=k_mask, other=0.0).to(tl.float32)   # (BK,)
        h, h_weight = x, x
        if ADD_NORMED:
            h, h_weight = added_inputs(added, 0, k0 + offs_k, k_mask)
    else:
        # All rows in one load: loaded row by row, each load would wait behind the previous
        # row's reduction (a round trip to L2 per row).
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + k0 + offs_k[None, :],
                    mask=(offs_m < M)[:, None] & k_mask[None, :], other=0.0)
        x = x.to(tl.float32)                                                  # (BM, BK)
        h, h_weight = x, x
        if ADD_NORMED:
            h, h_weight = added_inputs(added, offs_m[:, None], k0 + offs_k[None, :],
                                       (offs_m < M)[:, None] & k_mask[None, :])
    return x, g, h, h_weight


@triton.jit
def _matvec_fold(acc, sum_sq, w, x, g, h, h_weight, added, rstd_h, write, offs_m, offs_k, M,
                 k0, K, HAS_NORM: tl.constexpr, BLOCK_M: tl.constexpr,
                 ROW_LOOP: tl.constexpr, GATHER_ROWS: tl.constexpr,
                 ADD_NORMED: tl.constexpr):
    """Fold one (BLOCK_N, BLOCK_K) weight tile and its step's inputs (_matvec_inputs) into
    the (BLOCK_M, BLOCK_N) accumulator.

    One row (BLOCK_M == 1) is applied as a vector in the tile's own layout: a 2-D x tile and
    the broadcast product cost layout shuffles through shared memory (notes/decode.md). For
    more rows, ROW_LOOP applies the tile to one x row at a time, so the weight tile can stay
    as large as at batch 1 whatever BLOCK_M is; otherwise one (BM, BN, BK) broadcast product
    does all rows, whose size limits the weight tile to 1 / BM of that. GATHER_ROWS (with
    ROW_LOOP): the rows' (BN,) sums are gathered as one (BN, BM) tile in the layout the sums
    over K leave them in, and turned to the accumulator's layout once a step; else each row's
    sum is turned on its own (shared memory and barriers each). ADD_NORMED: x is made the
    stream s = x + rms_norm(h) * w of `added` (rstd_h each row's 1 / rms of h), which the
    program stores where `write` (_added_norm.py).
    """
    k_mask = offs_k < K - k0
    if BLOCK_M == 1:
        if ADD_NORMED:
            x = add_loaded(x, h, h_weight, added, 0, k0 + offs_k, k_mask, rstd_h, write)
        if HAS_NORM:
            sum_sq += tl.sum(x * x)
            x = x * g
        acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)[None, :]
    else:
        if ADD_NORMED:
            x = add_loaded(x, h, h_weight, added, offs_m[:, None], k0 + offs_k[None, :],
                           (offs_m < M)[:, None] & k_mask[None, :], rstd_h[:, None], write)
        if HAS_NORM:
            sum_sq += tl.sum(x * x, axis=1)
            x = x * g[None, :]
        if ROW_LOOP:
            if GATHER_ROWS:
                step = tl.zeros([w.shape[0], BLOCK_M], tl.float32)            # (BN, BM)
            for m in tl.static_range(BLOCK_M):
                x_m = tl.sum(tl.where(offs_m[:, None] == m, x, 0.0), axis=0)  # (BK,)
                part = tl.sum(w.to(tl.float32) * x_m[None, :], axis=1)        # (BN,)
                if GATHER_ROWS:
                    step += tl.where(offs_m[None, :] == m, part[:, None], 0.0)
                else:
                    acc += tl.where(offs_m[:, None] == m, part[None, :], 0.0)
            if GATHER_ROWS:
                acc += tl.trans(step)
        else:
            acc += tl.sum(x[:, None, :] * w.to(tl.float32)[None, :, :], axis=2)  # (BM, BN)
    return acc, sum_sq


@triton.jit
def rows_epilogue(acc, sum_sq, y_ptr, stride_ym, bias_ptr, res_ptr, stride_rm, rotary,
                  head_norm, block, offs_m, offs_n, M, N, K, eps, HAS_NORM: tl.constexpr,
                  HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                  ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  HEAD_HALF: tl.constexpr = 0):
    """Finish and store a (BLOCK_M, BLOCK_N) accumulator of the few-row kernels, column
    block `block`: the RMSNorm scale rstd_m (it factors out of the sum over k), bias,
    activation, residual. A GLU halves it: the output has N // 2 columns. "rotary" hands it
    to rotary_store (q to y, k and v to the caches named by the `rotary` tuple; no
    residual), or with HEAD_HALF > 0 to head_normed_store (q and k heads normalised first,
    `head_norm`, _head_norm_store.py). Returns the values stored, in fp32 before their
    rounding to y's dtype (the accumulator for "rotary")."""
    if HAS_NORM:
        acc = acc * tl.rsqrt(sum_sq / K + eps)[:, None]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    if ACTIVATION == "rotary":
        position, slot, c, s = rotary_inputs(offs_m, offs_n, M, rotary, BLOCK_M, BLOCK_N)
        if HEAD_HALF > 0:   # c and s unused: the heads are rotated once normalised
            head_normed_store(acc, block, offs_m, offs_n, M, N, y_ptr, stride_ym, rotary,
                              head_norm, position, slot, BLOCK_M, BLOCK_N, HEAD_HALF)
        else:
            rotary_store(acc, offs_m, offs_n, M, N, y_ptr, stride_ym, rotary, position, slot,
                         c, s, BLOCK_M, BLOCK_N)
    else:
        acc = _store_rows(acc, y_ptr, stride_ym, res_ptr, stride_rm, offs_m, offs_n, M, N,
                          HAS_RESIDUAL, ACTIVATION, BLOCK_M, BLOCK_N)
    return acc


@triton.jit
def _store_rows(acc, y_ptr, stride_ym, res_ptr, stride_rm, offs_m, offs_n, M, N,
                HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """rows_epilogue's activation, residual and store into y's rows; returns what it stored."""
    if is_glu(ACTIVATION):
        acc, offs_n = glu_pairs(acc, offs_n, BLOCK_M, BLOCK_N, ACTIVATION)
        N = N // 2
    else:
        acc = apply_activation(acc, ACTIVATION)
    y_mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :], mask=y_mask,
                      other=0.0)
        acc += res.to(tl.float32)
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :],
             acc.to(y_ptr.dtype.element_ty), mask=y_mask)
    return acc


@triton.jit
def _matvec_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, stride_wn,
                   norm_w_ptr, bias_ptr, res_ptr, stride_rm, rotary, added, head_norm,
                   M, N, K, eps,
                   HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                   ACTIVATION: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   ROW_LOOP: tl.constexpr, GATHER_ROWS: tl.constexpr = False,
                   ALIGN: tl.constexpr = 1, NORM_SCALAR: tl.constexpr = False,
                   ADD_NORMED: tl.constexpr = False, ADD_ROW_LOADED: tl.constexpr = False,
                   HEAD_HALF: tl.constexpr = 0):
    """y_mn = act(rstd_m * sum_k x_mk g_k W_nk + b_n) + r_mn for BLOCK_N outputs a program,
    with rstd_m = 1 / sqrt(mean_k x_mk^2 + eps) gathered in the same pass over K.

    Each program streams its BLOCK_N rows of W exactly once and applies them to every x row;
    x is tiny and re-read from L2 by every program.

    PREFETCH_WEIGHT (launched with programmatic dependent launch, Hopper+): the first W tile
    is loaded before griddepcontrol.wait, i.e. while the previous kernel in the stream is
    still finishing; x, norm weights, bias and residual are read only after the wait. The
    next kernel is released after the wait, so only the one kernel before this one can
    still be running during the prefetch (_pdl.py checks that it does not write W).

    ALIGN: K and stride_wn arrive divided by it (_launch.weight_alignment; not under
    ROW_LOOP, launch_matvec says why). NORM_SCALAR: the norm weight is one value
    (_norm_weight.py). ADD_NORMED: each x row is first the stream x + rms_norm(h) * w of
    `added`, which program 0 writes (_added_norm.py); ADD_ROW_LOADED (with it, K <= BLOCK_K):
    h's rows are loaded whole with x and their norms taken from them. HEAD_HALF > 0
    (activation "rotary"): q and k heads RMS-normalised before their rotation (`head_norm`,
    _head_norm_store.py).
    """
    K = K * ALIGN
    stride_wn = stride_wn * ALIGN
    pid_n = tl.program_id(0)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :]

    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    sum_sq = tl.zeros([BLOCK_M], tl.float32)
    w_first = tl.load(w_ptrs, mask=n_mask[:, None] & (offs_k < K)[None, :], other=0.0)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
        tl.extra.cuda.gdc_launch_dependents()  # only now may the next kernel prefetch
    write = pid_n == 0
    rstd_h = 1.0
    if ADD_NORMED and not ADD_ROW_LOADED:
        rstd_h = added_rstd(added, offs_m, M, K, eps, BLOCK_M, BLOCK_K)
    x, g, h, h_weight = _matvec_inputs(x_ptr, stride_xm, norm_w_ptr, added, offs_m, offs_k,
                                       M, 0, K, HAS_NORM, BLOCK_M, NORM_SCALAR, ADD_NORMED)
    if ADD_ROW_LOADED:
        # h's whole rows loaded with x and their norms taken from them: one round trip to
        # L2 after the wait, where a pass over h first makes two (its sum's barrier holds
        # back every load after it)
        if BLOCK_M == 1:
            rstd_h = tl.rsqrt(tl.sum(h * h) / K + eps)
        else:
            rstd_h = tl.rsqrt(tl.sum(h * h, axis=1) / K + eps)
    acc, sum_sq = _matvec_fold(acc, sum_sq, w_first, x, g, h, h_weight, added, rstd_h, write,
                               offs_m, offs_k, M, 0, K, HAS_NORM, BLOCK_M, ROW_LOOP,
                               GATHER_ROWS, ADD_NORMED)
    for k0 in range(BLOCK_K, K, BLOCK_K):
        w = tl.load(w_ptrs + k0, mask=n_mask[:, None] & (offs_k < K - k0)[None, :], other=0.0)
        x, g, h, h_weight = _matvec_inputs(x_ptr, stride_xm, norm_w_ptr, added, offs_m,
                                           offs_k, M, k0, K, HAS_NORM, BLOCK_M, NORM_SCALAR,
                                           ADD_NORMED)
        acc, sum_sq = _matvec_fold(acc, sum_sq, w, x, g, h, h_weight, added, rstd_h, write,
                                   offs_m, offs_k, M, k0, K, HAS_NORM, BLOCK_M, ROW_LOOP,
                                   GATHER_ROWS, ADD_NORMED)

    rows_epilogue(acc, sum_sq, y_ptr, stride_ym, bias_ptr, res_ptr, stride_rm, rotary,
                  head_norm, pid_n, offs_m, offs_n, M, N, K, eps, HAS_NORM, HAS_BIAS,
                  HAS_RESIDUAL, ACTIVATION, BLOCK_M, BLOCK_N, HEAD_HALF)


@triton.jit
def _gemv_inputs(x_ptr, norm_w_ptr, cols, k0, K, HAS_NORM: tl.constexpr,
                 NORM_SCALAR: tl.constexpr = False):
    """x and the norm weights (ones without a norm; NORM_SCALAR: its one value,
    _norm_weight.py) at columns k0 + cols, in fp32. Loaded before any reduction of the tile:
    a cross-warp sum ends in a barrier that no load after it may pass, so a load placed
    after one would cost a second round trip. The norm weights are read after the wait
    although they are constant: read with the weight tile before it, their registers cost
    more (fewer programs an SM) than the load saves (notes/kernels.md)."""
    k_mask = cols < K - k0
    x = tl.load(x_ptr + k0 + cols, mask=k_mask, other=0.0).to(tl.float32)   # (1, S, C)
    g = tl.full(cols.shape, 1.0, tl.float32)
    if HAS_NORM:
        # k0 + cols added before the pointer: as norm_w_ptr + k0 + cols, Qwen2-0.5B's split
        # tile took 91 registers a thread, this way 80 (sm_90, Triton 3.6; session 108)
        g = norm_weight_at(norm_w_ptr, k0 + cols, k_mask, NORM_SCALAR)
    return x, g


@triton.jit
def _gemv_fold(acc, sum_sq, w, x, g, HAS_NORM: tl.constexpr):
    """Fold one (BLOCK_N, SPLIT, CHUNK) weight tile w and its inputs into acc (BLOCK_N,)."""
    if HAS_NORM:
        sum_sq += tl.sum(x * x)
        x = x * g
    acc += tl.sum(tl.sum(w.to(tl.float32) * x, axis=2), axis=1)
    return acc, sum_sq


@triton.jit
def _loaded_rstd(h, h_tail, K, eps, TAIL: tl.constexpr):
    """1 / rms of one row of h loaded whole: h in the first tile and, where TAIL > 0, the
    rest in h_tail (h again where none)."""
    sum_sq = tl.sum(h * h)
    if TAIL > 0:
        sum_sq += tl.sum(h_tail * h_tail)
    return tl.rsqrt(sum_sq / K + eps)


@triton.jit
def _gemv_tiles(w_ptr, stride_wn, block, N, K, cols, BLOCK_N: tl.constexpr,
                SPLIT: tl.constexpr, CHUNK: tl.constexpr, TAIL: tl.constexpr):
    """Row block `block`'s first weight tile (BLOCK_N, SPLIT, CHUNK) and, where TAIL > 0, the
    tail tile (BLOCK_N, TAIL, CHUNK) beside it (the first tile where none)."""
    offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = w_ptr + offs_n[:, None, None].to(tl.int64) * stride_wn
    w_mask = (offs_n < N)[:, None, None]
    w = tl.load(rows + cols, mask=w_mask & (cols < K), other=0.0)
    w_tail = w
    if TAIL > 0:
        tail_cols = SPLIT * CHUNK + (tl.arange(0, TAIL)[None, :, None] * CHUNK
                                     + tl.arange(0, CHUNK)[None, None, :])   # (1, T, C)
        w_tail = tl.load(rows + tail_cols, mask=w_mask & (tail_cols < K), other=0.0)
    return w, w_tail


@triton.jit
def _gemv_block(w, w_tail, block, y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr,
                res_ptr, rotary, added, head_norm, N, K, eps, cols,
                HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                ACTIVATION: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr,
                CHUNK: tl.constexpr, TAIL: tl.constexpr, RELEASE_AFTER_INPUTS: tl.constexpr,
                ONE_TILE: tl.constexpr = False, NORM_SCALAR: tl.constexpr = False,
                ADD_NORMED: tl.constexpr = False, ADD_BLOCK_K: tl.constexpr = 1024,
                ADD_ROW_LOADED: tl.constexpr = False, HEAD_HALF: tl.constexpr = 0):
    """Row block `block` of _gemv_kernel from its tiles already loaded (_gemv_tiles): the rest
    of its row (none where ONE_TILE: the row fits the first tile), the reduction, the
    epilogue and the store. ADD_NORMED: x is the stream of `added` (_added_norm.py), which
    block 0 writes (ADD_ROW_LOADED as in _gemv_kernel). HEAD_HALF > 0: head norms in the
    rotary epilogue (_head_norm_store.py)."""
    offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    acc = tl.zeros([BLOCK_N], tl.float32)
    sum_sq = 0.0
    write = block == 0
    # Every load before the first reduction's barrier, which a load after it cannot pass
    # (_gemv_inputs): x, the norm weights, the epilogue's inputs and, with an added norm, h
    # and its weight at these columns, in flight beside added_rstd's pass over h.
    x, g = _gemv_inputs(x_ptr, norm_w_ptr, cols, 0, K, HAS_NORM, NORM_SCALAR)
    bias, residual, position, slot, c, s = _gemv_epilogue_inputs(
        offs_n, bias_ptr, res_ptr, rotary, N, HAS_BIAS, HAS_RESIDUAL, ACTIVATION, BLOCK_N)
    tail_cols = cols
    x_tail, g_tail = x, g
    if TAIL > 0:
        tail_cols = SPLIT * CHUNK + (tl.arange(0, TAIL)[None, :, None] * CHUNK
                                     + tl.arange(0, CHUNK)[None, None, :])   # (1, T, C)
        x_tail, g_tail = _gemv_inputs(x_ptr, norm_w_ptr, tail_cols, 0, K, HAS_NORM,
                                      NORM_SCALAR)
    if ADD_NORMED:  # h's norm before the sum below, which needs it from the first column on
        h, h_weight = added_inputs(added, 0, cols, cols < K)
        h_tail, h_weight_tail = h, h_weight
        if TAIL > 0:
            h_tail, h_weight_tail = added_inputs(added, 0, tail_cols, tail_cols < K)
        if ADD_ROW_LOADED:
            rstd_h = _loaded_rstd(h, h_tail, K, eps, TAIL)
        else:
            rstd_h = tl.sum(added_rstd(added, tl.arange(0, 1), 1, K, eps, 1, ADD_BLOCK_K))
        x = add_loaded(x, h, h_weight, added, 0, cols, cols < K, rstd_h, write)
        if TAIL > 0:
            x_tail = add_loaded(x_tail, h_tail, h_weight_tail, added, 0, tail_cols,
                                tail_cols < K, rstd_h, write)
    acc, sum_sq = _gemv_fold(acc, sum_sq, w, x, g, HAS_NORM)
    if TAIL > 0:
        acc, sum_sq = _gemv_fold(acc, sum_sq, w_tail, x_tail, g_tail, HAS_NORM)
    if RELEASE_AFTER_INPUTS:  # x has arrived: the next kernel can no longer delay it
        tl.extra.cuda.gdc_launch_dependents()
    if TAIL == 0 and not ONE_TILE:  # a loop never run still holds its registers
        w_ptrs = w_ptr + offs_n[:, None, None].to(tl.int64) * stride_wn + cols  # (BN, S, C)
        for k0 in range(SPLIT * CHUNK, K, SPLIT * CHUNK):
            w = tl.load(w_ptrs + k0, mask=n_mask[:, None, None] & (cols < K - k0), other=0.0)
            x, g = _gemv_inputs(x_ptr, norm_w_ptr, cols, k0, K, HAS_NORM, NORM_SCALAR)
            if ADD_NORMED:
                x = add_normed(x, added, 0, k0 + cols, cols < K - k0, rstd_h, write)
            acc, sum_sq = _gemv_fold(acc, sum_sq, w, x, g, HAS_NORM)

    if HAS_NORM:
        acc = acc * tl.rsqrt(sum_sq / K + eps)
    _gemv_finish(acc, block, offs_n, y_ptr, res_ptr, rotary, head_norm, N, bias, residual,
                 position, slot, c, s, HAS_RESIDUAL, ACTIVATION, BLOCK_N, HEAD_HALF)


@triton.jit
def _gemv_epilogue_inputs(offs_n, bias_ptr, res_ptr, rotary, N, HAS_BIAS: tl.constexpr,
                          HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
                          BLOCK_N: tl.constexpr):
    """(bias, residual, position, slot, c, s) of outputs offs_n, for _gemv_finish: zeros where
    the projection has none. Under SwiGLU the residual's columns are only known after the
    pairing (_gemv_finish reads it then); the rotary inputs as rotary_inputs reads them."""
    n_mask = offs_n < N
    bias = tl.zeros([BLOCK_N], tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    residual = tl.zeros([BLOCK_N], tl.float32)
    if HAS_RESIDUAL:
        if not is_glu(ACTIVATION):
            residual = tl.load(res_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    position, slot, c, s = bias, bias, bias, bias   # none without rotary
    if ACTIVATION == "rotary":
        position, slot, c, s = rotary_inputs(tl.arange(0, 1), offs_n, 1, rotary, 1, BLOCK_N)
    return bias, residual, position, slot, c, s


@triton.jit
def _gemv_finish(acc, block, offs_n, y_ptr, res_ptr, rotary, head_norm, N, bias, residual,
                 position, slot, c, s, HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
                 BLOCK_N: tl.constexpr, HEAD_HALF: tl.constexpr = 0):
    """The bias, the activation (rotary: the rotated store into q and the caches, with head
    norms where HEAD_HALF > 0) and the residual on outputs offs_n (row block `block`) of a
    GEMV, and the store."""
    n_mask = offs_n < N
    acc += bias
    if ACTIVATION == "rotary" and HEAD_HALF > 0:
        head_normed_store(tl.reshape(acc, (1, BLOCK_N)), block, tl.arange(0, 1), offs_n, 1, N,
                          y_ptr, 0, rotary, head_norm, position, slot, 1, BLOCK_N, HEAD_HALF)
    elif ACTIVATION == "rotary":
        rotary_store(tl.reshape(acc, (1, BLOCK_N)), tl.arange(0, 1), offs_n, 1, N, y_ptr, 0,
                     rotary, position, slot, c, s, 1, BLOCK_N)
    elif is_glu(ACTIVATION):
        pairs, offs_n = glu_pairs(tl.reshape(acc, (1, BLOCK_N)), offs_n, 1, BLOCK_N, ACTIVATION)
        acc = tl.reshape(pairs, (BLOCK_N // 2,))
        n_mask = offs_n < N // 2
    else:
        acc = apply_activation(acc, ACTIVATION)
    if ACTIVATION != "rotary":
        if HAS_RESIDUAL:
            if is_glu(ACTIVATION):
                residual = tl.load(res_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
            acc += residual
        tl.store(y_ptr + offs_n, acc.to(y_ptr.dtype.element_ty), mask=n_mask)


@triton.jit
def _gemv_flat_tile(w_ptr, stride_wn, block, N, K, offs_k, BLOCK_N: tl.constexpr):
    """Row block `block`'s whole rows, (BLOCK_N, len(offs_k)), for a persistent _gemv_kernel."""
    offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    return tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
                   mask=(offs_n < N)[:, None] & (offs_k < K)[None, :], other=0.0)


@triton.jit
def _gemv_flat_tiles(w_ptr, stride_wn, block, N, K, offs_k, offs_t, BLOCK_N: tl.constexpr,
                     TAIL: tl.constexpr):
    """Row block `block`'s whole rows for a persistent _gemv_kernel: the head (BLOCK_N,
    len(offs_k)) and, where TAIL > 0, the tail (BLOCK_N, len(offs_t)) beside it (the head
    again where none)."""
    w = _gemv_flat_tile(w_ptr, stride_wn, block, N, K, offs_k, BLOCK_N)
    w_tail = w
    if TAIL > 0:
        w_tail = _gemv_flat_tile(w_ptr, stride_wn, block, N, K, offs_t, BLOCK_N)
    return w, w_tail


@triton.jit
def _gemv_resident_block(w, w_tail, block, x, x_tail, rstd, y_ptr, bias_ptr, res_ptr, rotary,
                         head_norm, N, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                         ACTIVATION: tl.constexpr, BLOCK_N: tl.constexpr, TAIL: tl.constexpr,
                         WIDEN: tl.constexpr = False, HEAD_HALF: tl.constexpr = 0):
    """Row block `block` of a persistent _gemv_kernel: its whole rows in the tiles w (and
    w_tail where TAIL > 0), x (x_tail) already scaled by the norm weights, rstd the norm's
    (1 without one)."""
    offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    bias, residual, position, slot, c, s = _gemv_epilogue_inputs(
        offs_n, bias_ptr, res_ptr, rotary, N, HAS_BIAS, HAS_RESIDUAL, ACTIVATION, BLOCK_N)
    acc = tl.sum(_in_fp32(w, WIDEN) * x[None, :], axis=1)
    if TAIL > 0:
        acc += tl.sum(_in_fp32(w_tail, WIDEN) * x_tail[None, :], axis=1)
    acc = acc * rstd
    _gemv_finish(acc, block, offs_n, y_ptr, res_ptr, rotary, head_norm, N, bias, residual,
                 position, slot, c, s, HAS_RESIDUAL, ACTIVATION, BLOCK_N, HEAD_HALF)


@triton.jit
def _gemv_kernel(y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr, res_ptr, rotary,
                 added, head_norm, N, K, eps, ahead_ptr, ahead_lines,
                 HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                 ACTIVATION: tl.constexpr, PREFETCH_WEIGHT: tl.constexpr,
                 BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, CHUNK: tl.constexpr,
                 TAIL: tl.constexpr = 0, ALIGN: tl.constexpr = 1,
                 RELEASE_AFTER_INPUTS: tl.constexpr = False,
                 PERSISTENT: tl.constexpr = False, WIDEN: tl.constexpr = False,
                 AHEAD: tl.constexpr = 0, AHEAD_LINE: tl.constexpr = 64,
                 ONE_TILE: tl.constexpr = False, NORM_SCALAR: tl.constexpr = False,
                 ADD_NORMED: tl.constexpr = False, ADD_BLOCK_K: tl.constexpr = 1024,
                 ADD_ROW_LOADED: tl.constexpr = False, HEAD_HALF: tl.constexpr = 0):
    """One row: y_n = act(rstd * sum_k x_k g_k W_nk + b_n) + r_n, BLOCK_N outputs a block,
    rstd = 1 / sqrt(mean_k x_k^2 + eps) gathered in the same pass over K.

    The weight tile is (BLOCK_N, SPLIT, CHUNK), SPLIT chunks of one row side by side, which
    Triton lays out with the warps across the chunks and each thread holding a few 16-byte
    vectors of every row: the tile costs little more than its own registers, so small
    programs fit many to an SM and the next kernel's programs find room to start streaming
    early (notes/kernels.md). PREFETCH_WEIGHT as in _matvec_kernel: the first weight tile is
    read before griddepcontrol.wait. ALIGN as in _matvec_kernel.

    TAIL > 0: a second tile of TAIL chunks follows the first, also read before the wait, and
    the two cover the whole row (K <= (SPLIT + TAIL) * CHUNK): a row of 2560 columns is 16 +
    4 chunks instead of a 32-chunk tile three eighths masked, whose idle lanes hold registers
    and keep fewer bytes in flight (split_gemv_config).

    RELEASE_AFTER_INPUTS: the next kernel is released once x has arrived (after the first
    fold) rather than right after the wait, so that its weight stream does not delay this
    kernel's loads of x. Which is faster depends on the step around the kernel more than on
    its shape (notes/models.md, session 45): decode_plan.set_late_release records it.

    PERSISTENT: a program takes row blocks p, p + G, p + 2G, ... of a grid of G programs
    (launched at a few an SM), whole rows in one flat (BLOCK_N, SPLIT * CHUNK) tile (K <=
    (SPLIT + TAIL) * CHUNK; one reduction a block, two with a flat tail tile beside it), the
    first block's read before the wait, x and the norm's rstd once: programs that stay
    resident do not stop streaming to exit and relaunch, and no last wave leaves SMs idle
    (persistent_gemv_config). WIDEN (persistent only): each tile widened to fp32 where its
    products are taken (_widened), so no fp32 copy of it is held (64 registers where 96-100
    were, sm_90, 2048-4096 columns).

    ONE_TILE (split tile only): the row fits the first tile, and the loop over the rest of
    K is left out (COMPILE_ONE_TILE).

    NORM_SCALAR: the norm weight is one value, read once (_norm_weight.py).

    ADD_NORMED: x is first the stream x + rms_norm(h) * w of `added` (Gemma's norm after a
    residual projection), which block 0 writes (_added_norm.py). h's norm comes from its
    row as loaded with x where the tiles hold it whole (persistent, or the split tile with
    ADD_ROW_LOADED: K <= (SPLIT + TAIL) * CHUNK), else from a pass over h in steps of
    ADD_BLOCK_K columns.

    HEAD_HALF > 0 (activation "rotary"): q and k heads RMS-normalised before their rotation,
    the last block of a head to finish doing it (`head_norm`, _head_norm_store.py).

    AHEAD > 0: before its wait each program also asks L2 for AHEAD lines (of AHEAD_LINE
    elements) of the first ahead_lines lines at ahead_ptr, weights of a kernel after this one:
    an output projection runs beside attention, which reads little memory, and what it
    prefetches of gate/up's weights then arrives from L2 (launch_matvec's l2_ahead).
    """
    K = K * ALIGN
    stride_wn = stride_wn * ALIGN
    block = tl.program_id(0)
    if PERSISTENT:  # whole rows (launch_matvec checks): flat tiles of SPLIT (+ TAIL) chunks
        offs_k = tl.arange(0, SPLIT * CHUNK)
        offs_t = offs_k
        if TAIL > 0:
            offs_t = SPLIT * CHUNK + tl.arange(0, TAIL * CHUNK)
        w, w_tail = _gemv_flat_tiles(w_ptr, stride_wn, block, N, K, offs_k, offs_t, BLOCK_N,
                                     TAIL)
    else:
        cols = tl.arange(0, SPLIT)[None, :, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
        w, w_tail = _gemv_tiles(w_ptr, stride_wn, block, N, K, cols, BLOCK_N, SPLIT, CHUNK,
                                TAIL)
    if AHEAD > 0:  # lines of a later kernel's weights into L2 while memory idles
        lines = tl.minimum(block * AHEAD + tl.arange(0, AHEAD), ahead_lines - 1)
        prefetch_lines(ahead_ptr + lines.to(tl.int64) * AHEAD_LINE)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
        if not RELEASE_AFTER_INPUTS:
            tl.extra.cuda.gdc_launch_dependents()  # only now may the next kernel prefetch
    if PERSISTENT:  # x and the norm's rstd once a program
        # both loaded before the norm's sum of squares, whose barrier a load cannot pass
        x, g = _gemv_inputs(x_ptr, norm_w_ptr, offs_k, 0, K, HAS_NORM, NORM_SCALAR)
        x_tail, g_tail = x, g
        if TAIL > 0:
            x_tail, g_tail = _gemv_inputs(x_ptr, norm_w_ptr, offs_t, 0, K, HAS_NORM,
                                          NORM_SCALAR)
        if ADD_NORMED:  # h's whole row with x, before the sums: its norm from it
            h, h_weight = added_inputs(added, 0, offs_k, offs_k < K)
            h_tail, h_weight_tail = h, h_weight
            if TAIL > 0:
                h_tail, h_weight_tail = added_inputs(added, 0, offs_t, offs_t < K)
            rstd_h = _loaded_rstd(h, h_tail, K, eps, TAIL)
            x = add_loaded(x, h, h_weight, added, 0, offs_k, offs_k < K, rstd_h, block == 0)
            if TAIL > 0:
                x_tail = add_loaded(x_tail, h_tail, h_weight_tail, added, 0, offs_t,
                                    offs_t < K, rstd_h, block == 0)
        rstd = 1.0
        if HAS_NORM:
            sum_sq = tl.sum(x * x)
            if TAIL > 0:
                sum_sq += tl.sum(x_tail * x_tail)
            rstd = tl.rsqrt(sum_sq / K + eps)
            x = x * g
            x_tail = x_tail * g_tail
        if PREFETCH_WEIGHT and RELEASE_AFTER_INPUTS:
            tl.extra.cuda.gdc_launch_dependents()
        _gemv_resident_block(w, w_tail, block, x, x_tail, rstd, y_ptr, bias_ptr, res_ptr,
                             rotary, head_norm, N, HAS_BIAS, HAS_RESIDUAL, ACTIVATION,
                             BLOCK_N, TAIL, WIDEN, HEAD_HALF)
        programs = tl.num_programs(0)
        for later in range(block + programs, tl.cdiv(N, BLOCK_N), programs):
            w, w_tail = _gemv_flat_tiles(w_ptr, stride_wn, later, N, K, offs_k, offs_t,
                                         BLOCK_N, TAIL)
            _gemv_resident_block(w, w_tail, later, x, x_tail, rstd, y_ptr, bias_ptr, res_ptr,
                                 rotary, head_norm, N, HAS_BIAS, HAS_RESIDUAL, ACTIVATION,
                                 BLOCK_N, TAIL, WIDEN, HEAD_HALF)
    else:
        _gemv_block(w, w_tail, block, y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr,
                    res_ptr, rotary, added, head_norm, N, K, eps, cols, HAS_NORM, HAS_BIAS,
                    HAS_RESIDUAL, ACTIVATION, BLOCK_N, SPLIT, CHUNK, TAIL,
                    PREFETCH_WEIGHT and RELEASE_AFTER_INPUTS, ONE_TILE, NORM_SCALAR,
                    ADD_NORMED, ADD_BLOCK_K, ADD_ROW_LOADED, HEAD_HALF)


@triton.jit
def _gemv_row_x(x_ptr, cols, k0, K, rows_left):
    """One x row of the several-row GEMV at columns k0 + cols, in fp32; zeros for a row
    past M (rows_left = M - row <= 0: then no column is below rows_left * K)."""
    return tl.load(x_ptr + k0 + cols, mask=(cols < K - k0) & (cols < rows_left * K),
                   other=0.0).to(tl.float32)


@triton.jit
def _gemv_rows_inputs(x_ptr, stride_xm, norm_w_ptr, cols, k0, K, M, HAS_NORM: tl.constexpr,
                      BLOCK_M: tl.constexpr, NORM_SCALAR: tl.constexpr = False):
    """Every row's x (x2 and x3 repeat x1 at two rows, unused) and the norm weights at
    columns k0 + cols, all loaded before any reduction (_gemv_inputs says why)."""
    x0, g = _gemv_inputs(x_ptr, norm_w_ptr, cols, k0, K, HAS_NORM, NORM_SCALAR)
    x1 = _gemv_row_x(x_ptr + stride_xm, cols, k0, K, M - 1)
    x2, x3 = x1, x1
    if BLOCK_M > 2:
        x2 = _gemv_row_x(x_ptr + 2 * stride_xm, cols, k0, K, M - 2)
        x3 = _gemv_row_x(x_ptr + 3 * stride_xm, cols, k0, K, M - 3)
    return x0, x1, x2, x3, g


@triton.jit
def _gemv_rows_added_inputs(added, cols, k0, K, M, BLOCK_M: tl.constexpr):
    """(h of rows 0-3, w) of `added` at columns k0 + cols (added_inputs; h2 and h3 repeat h1
    at two rows, unused), for _gemv_rows_added: loaded with the rows' x, before any
    reduction."""
    k_mask = cols < K - k0
    h0, w = added_inputs(added, 0, k0 + cols, k_mask)
    h1, _ = added_inputs(added, 1, k0 + cols, tl.where(M > 1, k_mask, False))
    h2, h3 = h1, h1
    if BLOCK_M > 2:
        h2, _ = added_inputs(added, 2, k0 + cols, tl.where(M > 2, k_mask, False))
        h3, _ = added_inputs(added, 3, k0 + cols, tl.where(M > 3, k_mask, False))
    return h0, h1, h2, h3, w


@triton.jit
def _gemv_rows_added(x0, x1, x2, x3, hs, added, cols, k0, K, M, rstds, write,
                     BLOCK_M: tl.constexpr):
    """_gemv_rows_inputs' rows made the stream x + rms_norm(h) * w of `added`
    (_added_norm.py) from hs, _gemv_rows_added_inputs' loads; rstds the rows' 1 / rms of h
    (four values, as the rows); stored where `write`."""
    h0, h1, h2, h3, w = hs
    rstd0, rstd1, rstd2, rstd3 = rstds
    k_mask = cols < K - k0
    x0 = add_loaded(x0, h0, w, added, 0, k0 + cols, k_mask, rstd0, write)
    x1 = add_loaded(x1, h1, w, added, 1, k0 + cols, tl.where(M > 1, k_mask, False), rstd1,
                    write)
    if BLOCK_M > 2:
        x2 = add_loaded(x2, h2, w, added, 2, k0 + cols, tl.where(M > 2, k_mask, False),
                        rstd2, write)
        x3 = add_loaded(x3, h3, w, added, 3, k0 + cols, tl.where(M > 3, k_mask, False),
                        rstd3, write)
    return x0, x1, x2, x3


@triton.jit
def _gemv_rows_rstds(added, M, K, eps, BLOCK_M: tl.constexpr, ADD_BLOCK_K: tl.constexpr):
    """The rows' 1 / rms of h (added_rstd's pass over h), as four values."""
    rstd_h = added_rstd(added, tl.arange(0, BLOCK_M), M, K, eps, BLOCK_M, ADD_BLOCK_K)
    rows = tl.arange(0, BLOCK_M)
    return (tl.sum(tl.where(rows == 0, rstd_h, 0.0)), tl.sum(tl.where(rows == 1, rstd_h, 0.0)),
            tl.sum(tl.where(rows == 2, rstd_h, 0.0)), tl.sum(tl.where(rows == 3, rstd_h, 0.0)))


@triton.jit
def _gemv_rows_loaded_rstds(hs, K, eps):
    """The rows' 1 / rms of h from _gemv_rows_added_inputs' loads where they are whole rows."""
    return (tl.rsqrt(tl.sum(hs[0] * hs[0]) / K + eps), tl.rsqrt(tl.sum(hs[1] * hs[1]) / K + eps),
            tl.rsqrt(tl.sum(hs[2] * hs[2]) / K + eps), tl.rsqrt(tl.sum(hs[3] * hs[3]) / K + eps))


@triton.jit
def _gemv_rows_fold(acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3, w, x0, x1, x2, x3, g,
                    HAS_NORM: tl.constexpr, BLOCK_M: tl.constexpr):
    """_gemv_fold for each of 2 or 4 rows (BLOCK_M) over the same weight tile w."""
    acc0, ss0 = _gemv_fold(acc0, ss0, w, x0, g, HAS_NORM)
    acc1, ss1 = _gemv_fold(acc1, ss1, w, x1, g, HAS_NORM)
    if BLOCK_M > 2:
        acc2, ss2 = _gemv_fold(acc2, ss2, w, x2, g, HAS_NORM)
        acc3, ss3 = _gemv_fold(acc3, ss3, w, x3, g, HAS_NORM)
    return acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3


@triton.jit
def _gemv_rows_epilogue_inputs(offs_m, offs_n, bias_ptr, res_ptr, stride_rm, rotary, M, N,
                               HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                               ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr,
                               BLOCK_N: tl.constexpr):
    """(bias, residual, position, slot, c, s) of rows offs_m and outputs offs_n of the
    several-row GEMV, for _gemv_rows_finish: _gemv_epilogue_inputs for 2-4 rows."""
    n_mask = offs_n < N
    bias = tl.zeros([BLOCK_N], tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    residual = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if HAS_RESIDUAL:
        if not is_glu(ACTIVATION):
            residual = tl.load(res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :],
                               mask=(offs_m < M)[:, None] & n_mask[None, :],
                               other=0.0).to(tl.float32)
    position, slot, c, s = bias, bias, bias, bias   # none without rotary
    if ACTIVATION == "rotary":
        position, slot, c, s = rotary_inputs(offs_m, offs_n, M, rotary, BLOCK_M, BLOCK_N)
    return bias, residual, position, slot, c, s


@triton.jit
def _gemv_rows_finish(acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3, offs_m, offs_n, y_ptr,
                      stride_ym, res_ptr, stride_rm, rotary, M, N, K, eps, bias, residual,
                      position, slot, c, s, HAS_NORM: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                      ACTIVATION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The several-row GEMV's rows (acc2, acc3 unused at BLOCK_M 2) gathered into one
    (BLOCK_M, BLOCK_N) tile; each row's norm scale from its sum of squares, the bias, the
    activation (rotary: the rotated store into q and the caches) and the residual; the
    store."""
    rows = offs_m[:, None]
    acc = tl.where(rows == 0, acc0[None, :], tl.where(rows == 1, acc1[None, :], 0.0))
    sum_sq = tl.where(offs_m == 0, ss0, tl.where(offs_m == 1, ss1, 0.0))
    if BLOCK_M > 2:
        acc = tl.where(rows == 2, acc2[None, :], tl.where(rows == 3, acc3[None, :], acc))
        sum_sq = tl.where(offs_m == 2, ss2, tl.where(offs_m == 3, ss3, sum_sq))
    if HAS_NORM:
        acc = acc * tl.rsqrt(sum_sq / K + eps)[:, None]
    acc += bias[None, :]
    if ACTIVATION == "rotary":
        rotary_store(acc, offs_m, offs_n, M, N, y_ptr, stride_ym, rotary, position, slot, c,
                     s, BLOCK_M, BLOCK_N)
    else:
        y_mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        if is_glu(ACTIVATION):  # the residual's columns are known only now
            acc, offs_n = glu_pairs(acc, offs_n, BLOCK_M, BLOCK_N, ACTIVATION)
            y_mask = (offs_m < M)[:, None] & (offs_n < N // 2)[None, :]
            if HAS_RESIDUAL:
                acc += tl.load(res_ptr + offs_m[:, None] * stride_rm + offs_n[None, :],
                               mask=y_mask, other=0.0).to(tl.float32)
        else:
            acc = apply_activation(acc, ACTIVATION)
            if HAS_RESIDUAL:
                acc += residual
        tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :],
                 acc.to(y_ptr.dtype.element_ty), mask=y_mask)


@triton.jit
def _widened(x):
    """16-bit x in fp32, converted where it is used by instructions the compiler may neither
    move out of a loop nor share between uses (non-pure inline asm): a value held across a
    persistent program's blocks, or a tile used for several rows, then holds no fp32 copy
    (two values a register instead of one). Not for the interpreter, which runs no PTX."""
    if x.dtype == tl.bfloat16:  # a bf16 is the top half of its fp32
        wide = tl.inline_asm_elementwise(
            "shl.b32 $0, $2, 16;\n\tand.b32 $1, $2, 0xFFFF0000;", "=r,=r,r", [x],
            dtype=tl.float32, is_pure=False, pack=2)
    else:
        tl.static_assert(x.dtype == tl.float16, "_widened takes bf16 or fp16")
        wide = tl.inline_asm_elementwise(
            "{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, $2;\n\tcvt.f32.f16 $0, lo;"
            "\n\tcvt.f32.f16 $1, hi;\n\t}", "=r,=r,r", [x], dtype=tl.float32,
            is_pure=False, pack=2)
    return wide


@triton.jit
def _in_fp32(x, WIDEN: tl.constexpr):
    """x in fp32: widened where used (_widened) where WIDEN, else converted as the compiler
    sees fit (a no-op on fp32)."""
    if WIDEN:
        return _widened(x)
    return x.to(tl.float32)


@triton.jit
def _row_products(w, x, NARROW: tl.constexpr):
    """sum_k w_nk x_k over a flat tile w (BLOCK_N, K) and one row x (K,), in fp32; NARROW: w
    and x 16-bit, widened here (_widened), so each row's call converts them again."""
    return tl.sum(_in_fp32(w, NARROW) * _in_fp32(x, NARROW)[None, :], axis=1)


@triton.jit
def _gemv_rows_resident_block(w, block, x0, x1, x2, x3, ss0, ss1, ss2, ss3, y_ptr,
                              stride_ym, bias_ptr, res_ptr, stride_rm, rotary, M, N, K, eps,
                              HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr,
                              HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              NARROW: tl.constexpr):
    """Row block `block` of a persistent _gemv_rows_kernel: its whole rows in the flat tile
    w, each x row already scaled by the norm weights, ss0-ss3 the rows' sums of squares.
    NARROW: the x rows are 16-bit, and they and the tile are widened to fp32 for each row's
    products, so no fp32 copy of either is held across the block (_widened)."""
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    bias, residual, position, slot, c, s = _gemv_rows_epilogue_inputs(
        offs_m, offs_n, bias_ptr, res_ptr, stride_rm, rotary, M, N, HAS_BIAS, HAS_RESIDUAL,
        ACTIVATION, BLOCK_M, BLOCK_N)
    acc0 = _row_products(w, x0, NARROW)
    acc1 = _row_products(w, x1, NARROW)
    acc2, acc3 = acc1, acc1
    if BLOCK_M > 2:
        acc2 = _row_products(w, x2, NARROW)
        acc3 = _row_products(w, x3, NARROW)
    _gemv_rows_finish(acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3, offs_m, offs_n, y_ptr,
                      stride_ym, res_ptr, stride_rm, rotary, M, N, K, eps, bias, residual,
                      position, slot, c, s, HAS_NORM, HAS_RESIDUAL, ACTIVATION, BLOCK_M,
                      BLOCK_N)


@triton.jit
def _gemv_rows_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, stride_wn, norm_w_ptr,
                      bias_ptr, res_ptr, stride_rm, rotary, added, M, N, K, eps,
                      HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr,
                      HAS_RESIDUAL: tl.constexpr, ACTIVATION: tl.constexpr,
                      PREFETCH_WEIGHT: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, CHUNK: tl.constexpr,
                      ALIGN: tl.constexpr = 1, PERSISTENT: tl.constexpr = False,
                      NARROW: tl.constexpr = False, ONE_TILE: tl.constexpr = False,
                      NORM_SCALAR: tl.constexpr = False, ADD_NORMED: tl.constexpr = False,
                      ADD_BLOCK_K: tl.constexpr = 1024, ADD_ROW_LOADED: tl.constexpr = False):
    """_gemv_kernel's split tile applied to 2-4 rows (BLOCK_M 2 or 4, rows past M masked):
    y_mn = act(rstd_m * sum_k x_mk g_k W_nk + b_n) + r_mn.

    Each row is folded into the tile as one vector in the tile's own layout, as the one-row
    kernel folds its x: no layout shuffles, and on tiles of 64 weight values a thread about
    half the registers of _matvec_kernel's row loop (notes/kernels.md, session 53). Rows are
    separate variables, not a (BLOCK_M, ...) tile: extracting a row from one would move it
    through shared memory. Every row's x and the epilogue's inputs are loaded before the
    first reduction (_gemv_inputs says why).

    PERSISTENT as in _gemv_kernel: programs that stay resident take row blocks p, p + G,
    ..., whole rows in one flat tile (K <= SPLIT * CHUNK), every x row and its sum of
    squares read once a program.

    ADD_NORMED and ADD_ROW_LOADED as in _gemv_kernel, for each row (not with NARROW: x is
    then scaled).
    """
    K = K * ALIGN
    stride_wn = stride_wn * ALIGN
    block = tl.program_id(0)
    if PERSISTENT:  # whole rows (launch_matvec checks), one flat tile of SPLIT * CHUNK columns
        offs_k = tl.arange(0, SPLIT * CHUNK)
        w = _gemv_flat_tile(w_ptr, stride_wn, block, N, K, offs_k, BLOCK_N)
        if PREFETCH_WEIGHT:
            tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
            tl.extra.cuda.gdc_launch_dependents()  # only now may the next kernel prefetch
        x0, x1, x2, x3, g = _gemv_rows_inputs(x_ptr, stride_xm, norm_w_ptr, offs_k, 0, K, M,
                                              HAS_NORM, BLOCK_M, NORM_SCALAR)
        if ADD_NORMED:  # h is final only now; its whole rows with x, their norms from them
            hs = _gemv_rows_added_inputs(added, offs_k, 0, K, M, BLOCK_M)
            rstds = _gemv_rows_loaded_rstds(hs, K, eps)
            x0, x1, x2, x3 = _gemv_rows_added(x0, x1, x2, x3, hs, added, offs_k, 0, K, M,
                                              rstds, block == 0, BLOCK_M)
        ss0, ss1, ss2, ss3 = 0.0, 0.0, 0.0, 0.0
        if HAS_NORM:
            ss0, ss1 = tl.sum(x0 * x0), tl.sum(x1 * x1)
            x0, x1 = x0 * g, x1 * g
            if BLOCK_M > 2:
                ss2, ss3 = tl.sum(x2 * x2), tl.sum(x3 * x3)
                x2, x3 = x2 * g, x3 * g
        if NARROW:  # exact: x is of the weights' 16-bit dtype and no norm scaled it
            x0, x1 = x0.to(w.dtype), x1.to(w.dtype)
            x2, x3 = x2.to(w.dtype), x3.to(w.dtype)
        _gemv_rows_resident_block(w, block, x0, x1, x2, x3, ss0, ss1, ss2, ss3, y_ptr,
                                  stride_ym, bias_ptr, res_ptr, stride_rm, rotary, M, N, K,
                                  eps, HAS_NORM, HAS_BIAS, HAS_RESIDUAL, ACTIVATION, BLOCK_M,
                                  BLOCK_N, NARROW)
        programs = tl.num_programs(0)
        for later in range(block + programs, tl.cdiv(N, BLOCK_N), programs):
            w = _gemv_flat_tile(w_ptr, stride_wn, later, N, K, offs_k, BLOCK_N)
            _gemv_rows_resident_block(w, later, x0, x1, x2, x3, ss0, ss1, ss2, ss3, y_ptr,
                                      stride_ym, bias_ptr, res_ptr, stride_rm, rotary, M, N,
                                      K, eps, HAS_NORM, HAS_BIAS, HAS_RESIDUAL, ACTIVATION,
                                      BLOCK_M, BLOCK_N, NARROW)
    else:
        offs_m = tl.arange(0, BLOCK_M)
        offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, SPLIT)[None, :, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
        w_ptrs = w_ptr + offs_n[:, None, None].to(tl.int64) * stride_wn + cols  # (BN, S, C)
        w_mask = (offs_n < N)[:, None, None]
        w = tl.load(w_ptrs, mask=w_mask & (cols < K), other=0.0)
        if PREFETCH_WEIGHT:
            tl.extra.cuda.gdc_wait()               # x and the epilogue inputs are now final
            tl.extra.cuda.gdc_launch_dependents()  # only now may the next kernel prefetch
        # Every load before the first reduction's barrier (_gemv_inputs says why): the rows'
        # x, the epilogue's inputs and, with an added norm, h beside added_rstd's pass.
        x0, x1, x2, x3, g = _gemv_rows_inputs(x_ptr, stride_xm, norm_w_ptr, cols, 0, K, M,
                                              HAS_NORM, BLOCK_M, NORM_SCALAR)
        bias, residual, position, slot, c, s = _gemv_rows_epilogue_inputs(
            offs_m, offs_n, bias_ptr, res_ptr, stride_rm, rotary, M, N, HAS_BIAS,
            HAS_RESIDUAL, ACTIVATION, BLOCK_M, BLOCK_N)
        if ADD_NORMED:  # the rows' norms of h before the sums below, which need them
            hs = _gemv_rows_added_inputs(added, cols, 0, K, M, BLOCK_M)
            if ADD_ROW_LOADED:
                rstds = _gemv_rows_loaded_rstds(hs, K, eps)
            else:
                rstds = _gemv_rows_rstds(added, M, K, eps, BLOCK_M, ADD_BLOCK_K)
            x0, x1, x2, x3 = _gemv_rows_added(x0, x1, x2, x3, hs, added, cols, 0, K, M,
                                              rstds, block == 0, BLOCK_M)
        acc0 = tl.zeros([BLOCK_N], tl.float32)
        acc1, acc2, acc3 = acc0, acc0, acc0
        ss0, ss1, ss2, ss3 = 0.0, 0.0, 0.0, 0.0
        acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3 = _gemv_rows_fold(
            acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3, w, x0, x1, x2, x3, g, HAS_NORM,
            BLOCK_M)
        if not ONE_TILE:  # a loop never run still holds its registers
            for k0 in range(SPLIT * CHUNK, K, SPLIT * CHUNK):
                w = tl.load(w_ptrs + k0, mask=w_mask & (cols < K - k0), other=0.0)
                x0, x1, x2, x3, g = _gemv_rows_inputs(x_ptr, stride_xm, norm_w_ptr, cols, k0,
                                                      K, M, HAS_NORM, BLOCK_M, NORM_SCALAR)
                if ADD_NORMED:
                    x0, x1, x2, x3 = _gemv_rows_added(
                        x0, x1, x2, x3, _gemv_rows_added_inputs(added, cols, k0, K, M, BLOCK_M),
                        added, cols, k0, K, M, rstds, block == 0, BLOCK_M)
                acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3 = _gemv_rows_fold(
                    acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3, w, x0, x1, x2, x3, g,
                    HAS_NORM, BLOCK_M)
        _gemv_rows_finish(acc0, acc1, acc2, acc3, ss0, ss1, ss2, ss3, offs_m, offs_n, y_ptr,
                          stride_ym, res_ptr, stride_rm, rotary, M, N, K, eps, bias, residual,
                          position, slot, c, s, HAS_NORM, HAS_RESIDUAL, ACTIVATION, BLOCK_M,
                          BLOCK_N)


# Batch 1, 16-bit weights: programs of GEMV_WARPS warps, rows split in chunks of GEMV_CHUNK
# columns, tiles of at most GEMV_MAX_BLOCK_K columns (see split_gemv_config).
GEMV_WARPS = 4
GEMV_CHUNK = 128
GEMV_MAX_BLOCK_K = 4096
# Where a row fits the split tile's first tile, the launch may leave the tile's K loop out
# (ONE_TILE): a loop never run still holds its registers, 127-128 a thread against 86-96
# for 2048 x 2048's tile (sm_90, Triton 3.6), 4 programs an SM against 5. Off: alone it was
# 0.97-1.04x, and in tg.Generator's batch-1 steps it made Qwen2-0.5B 6% slower and TinyLlama
# 1.5% (H200, notes/kernels.md, session 96). A module setting, so that
# research/time_generator.py can build a Generator with it.
COMPILE_ONE_TILE = False
# _matvec_kernel loads h's rows (an added norm's) whole with x where one step holds them, up
# to this many rows. Against a pass over h before x that holds more registers a thread
# (sm_90, Triton 3.6, bf16; session 120): at 2 rows 235 -> 248 (2048-column steps) and 142
# -> 155 (1024), as many programs an SM; at 4 rows 168 -> 214, 3 programs an SM -> 2.
ROW_LOADED_MAX_ROWS = 2
# _gemv_rows_kernel holds each row's x and accumulator in variables of its own: up to four.
GEMV_MAX_ROWS = 4
# What one prefetch.global.L2 asks for (an L2 line): l2_ahead's bytes are prefetched in these.
L2_LINE_BYTES = 128
# The two-tile row pays a second reduction: it won with heads of 16 chunks and tails of 4-8
# (2304, 2560, 3000, 3072 columns: 60-75% -> 73-86% of copy, 2304's tail half masked) and
# lost with a tail of 2 (2304: 60 -> 48%) or a head of 8 (1536: 60 -> 58%, 17920 x 1536:
# 95 -> 91%) (H100, one-row projections over rotated weights, notes/kernels.md, session 42).
MIN_HEAD_CHUNKS = 16
MIN_TAIL_CHUNKS = 4
# Narrow layers whose rows fill one whole GEMV_MAX_BLOCK_K tile: two rows a program over 8
# warps, 32 weight values a thread (split_gemv_config).
FULL_TILE_WARPS = 8
# Batch 1, fp32 weights: a _matvec_kernel tile of at most 32 KB, 64 elements a thread.
MATVEC_TILE_BYTES = 32 * 1024
MATVEC_ELEMENTS_PER_THREAD = 64


# One-row weights of at least PERSISTENT_MIN_BYTES (16-bit, K <= PERSISTENT_MAX_K) stream
# through PERSISTENT_PROGRAMS_PER_SM programs an SM that stay resident, each taking whole rows
# in flat tiles of PERSISTENT_TILE_BYTES over PERSISTENT_WARPS warps (persistent_gemv_config).
# Over 26 projections of 8 decoders with their fused parts, weights rotated past L2, PDL on
# (research/sweep_gemv.py --persistent, H200): from 20 MiB up 1.054x faster than the split
# tile (geometric mean; 0.97x to 1.19x: TinyLlama's down projection 8.59 -> 7.23 us,
# Qwen2.5-7B's gate/up 73.4 -> 64.7); under it 0.83x to 1.01x, where a program takes only
# one or two row blocks (notes/kernels.md, session 61). Launched as many an SM as fit (FIT,
# below), lone projections of 12.5-18 MiB ran 1.07-1.20x faster persistent too, and bf16
# LayerStacks at one row whose projections are 15-18 MiB 1.09-1.15x; but in tg.Generator's
# steps persistent from 14 MiB made Qwen2-0.5B 4% slower (0.515 -> 0.536 ms a token, three
# runs) and Llama-3.2-3B's step chose the other launch for its 18 MiB output projection
# (H200, notes/kernels.md, sessions 64-65). So the rule stays at 20 MiB, and the steps time
# persistent launches of 14-20 MiB (decode_plan.step_variants).
PERSISTENT_MIN_BYTES = 20 * 2**20
PERSISTENT_MAX_K = 8192
PERSISTENT_TILE_BYTES = 32 * 1024
PERSISTENT_WARPS = 8
# PROGRAMS_PER_SM is a count, or FIT: as many as an SM holds at once (by the compiled
# kernel's registers, threads and shared memory), and one more wherever capping its
# registers to make room costs no spill (_launch.resident_launch), at most
# MAX_PROGRAMS_PER_SM. A grid of more than fit starts its last programs only as the first
# ones end, their whole share of rows after the rest: 3 programs of 8 warps an SM lost 8-18%
# to 2 where only 2 fit, and won 11-18% where 3 did (the residual epilogue at 3072-4096
# columns, 80 registers: Llama-3-8B's o projection 10.37 -> 9.20 us). Capped at 80 registers
# (3 fit), the kernels of 94-122 spilled nothing at up to 4096 columns and ran 1-11% faster
# at 3 an SM (Qwen2.5-7B's q|k|v with its norm 10.27 -> 9.25, Llama-3.2-3B's gate/up 28.75
# -> 25.53); at 8192 columns they spilled and lost 5-7%; capped at 64 (4 fit) all spilled
# and lost 1.3-1.7x (H200, weights rotated past L2, PDL on). In tg.Generator at batch 1 the
# cap took Llama-3.2-3B 2.100 -> 1.988 ms a token and Llama-3.2-1B 0.783 -> 0.770; the bf16
# LayerStack of d = 3584 got 4.6% faster and that of d = 4096 3.6% slower, which was not
# explained (notes/kernels.md, session 63).
FIT = "fit"
MAX_PROGRAMS_PER_SM = 4
PERSISTENT_PROGRAMS_PER_SM = FIT
# Rows of more than PERSISTENT_TAIL_PAST_K columns are read as a head of 4096 and a tail tile
# where the two hold fewer columns than the row padded to 8192 (persistent_gemv_config).
# Masked lanes hold registers as loaded ones do: padded, those rows took 92-113 registers
# (2 programs an SM), in two tiles 64-80 (3), and ran 1.07-1.12x faster (TinyLlama's down
# projection 7.24 -> 6.62 us, Qwen2.5-14B's q|k|v with its norm 22.45 -> 20.03, 6144^2 20.50
# -> 19.14). Under it, where 3 programs an SM fit padded rows already, the tail's second
# reduction a block cost 0-11% (Llama-3.2-3B's q|k|v, 3072 columns, 9.30 -> 10.33) (H200,
# notes/kernels.md, session 64).
PERSISTENT_TAIL_PAST_K = 4096


def gemv_config(N: int, K: int) -> dict:
    """The one-row 16-bit kernel's config for untuned shapes: persistent_gemv_config's from
    PERSISTENT_MIN_BYTES of weights up (rows of at most PERSISTENT_MAX_K columns), else
    split_gemv_config's."""
    if 2 * N * K >= PERSISTENT_MIN_BYTES and K <= PERSISTENT_MAX_K:
        return persistent_gemv_config(N, K)
    return split_gemv_config(N, K)


# Two 16-bit rows of TWO_ROW_MIN_BYTES to TWO_ROW_MAX_BYTES of weights (K <= PERSISTENT_MAX_K)
# run persistent too (two_row_gemv_config). Over 26 projections of 8 decoders with their fused
# parts, weights rotated past L2, PDL on (research/sweep_gemv.py --persistent --rows 2, H200):
# tiles of 16 KB over 4 warps, 4 programs an SM, took every projection of 8-64 MiB with rows of
# up to 4096 columns 1.02-1.65x faster than the rule before (tensor-core or row-loop kernel;
# TinyLlama's q|k|v 7.08 -> 4.29 us, Llama-3-8B's 16.35 -> 14.14), and rows of 4097-8192
# columns in the one-row tile (32 KB, 8 warps, 2 an SM) 0.98-1.34x; under 8 MiB they were
# 0.93-1.14x, and the 96-259 MiB gate/up projections of 3072-4096 columns 0.59-0.71x, where
# the tensor-core kernel already reads at 90-95% of copy (TinyLlama's 125 MiB LM head gained
# 3%; notes/kernels.md, session 62). At 4 rows the best persistent tile beat the rule on 4 of
# the 26 projections only: 3-4 rows keep the rule, persistent tiles as tuning candidates.
TWO_ROW_MIN_BYTES = 8 * 2**20
TWO_ROW_MAX_BYTES = 64 * 2**20
TWO_ROW_TILE_BYTES = 16 * 1024
TWO_ROW_WARPS = 4
TWO_ROW_PROGRAMS_PER_SM = 4
# Where no norm scales x, that tile's kernel keeps x 16-bit and widens it and the tile for
# each row's products (NARROW: 99 -> 96 registers at 2048 columns with 4 warps, so 5 programs
# an SM fit) and launches as many programs an SM as fit, up to NARROW_MAX_PROGRAMS_PER_SM,
# registers uncapped. Two bf16 rows over rotated weights, PDL on, us (H200, research/
# sweep_gemv.py --persistent --widen --rows 2, notes/kernels.md, session 88): 2048^2 3.67 ->
# 3.20, 5632 x 2048 7.62 -> 6.84, TinyLlama's output projection with its residual 3.68 ->
# 3.24, Llama-3-8B's 9.46 -> 9.26, 4096^2 9.33 -> 9.37. With a norm (x * g in fp32, which
# NARROW would round) it lost as often as it won: those keep the tile as it was.
NARROW_MAX_PROGRAMS_PER_SM = 6
# One row's persistent tile widened where used (WIDEN: 96-100 -> 64 registers a thread, so 4
# programs of 8 warps an SM) by default on SwiGLU projections (gate/up with their norm) whose
# rows the tile covers in this many columns. One bf16 row over rotated weights, us, as the
# rule launches it / widened (H200, research/sweep_gemv.py --persistent --widen --rows 1,
# notes/kernels.md, session 89): rows padded to 2048 won, TinyLlama's 12.96 / 12.45,
# Llama-3.2-1B's 17.50 / 17.12, Qwen2-1.5B's (1536 columns) 16.72 / 14.66; every other width
# lost, Qwen2-0.5B's 896 (1024) 6.16 / 6.65, Phi-2's 2560 (4096) 26.64 / 28.89, Llama-3.2-3B's
# 3072 25.03 / 26.21, Qwen2.5-7B's 3584 62.26 / 63.41, Llama-3-8B's 4096 54.14 / 55.00. In
# the decode step with it, b1 demos: TinyLlama 0.705 -> 0.701 ms a token, Llama-3.2-1B 0.750
# -> 0.739 (session 89). Other projections lost widened, in the step too (session 88).
WIDEN_ROW_COLUMNS = 2048
# A step variant for short rows (decode_plan.SMALL_LAUNCH): the persistent tile of 16 KB over
# 4 warps, widened, as many an SM as fit up to SMALL_MAX_PROGRAMS_PER_SM (8 at its 64
# registers). Alone, Qwen2-0.5B's gate/up with its norm and SwiGLU (9728 x 896) took 5.48 us
# so, against 6.16-6.72 as the rule launches it (H200, research/sweep_gemv.py --persistent
# --widen --rows 1, notes/kernels.md, session 89).
SMALL_TILE_BYTES = 16 * 1024
SMALL_WARPS = 4
SMALL_MAX_PROGRAMS_PER_SM = 8


def two_row_gemv_config(N: int, K: int, most_bytes: float = TWO_ROW_MAX_BYTES) -> dict | None:
    """The persistent config of two 16-bit rows where the rule gives them one (weights of
    TWO_ROW_MIN_BYTES up to most_bytes, by default TWO_ROW_MAX_BYTES, rows of at most
    PERSISTENT_MAX_K columns): TWO_ROW_TILE_BYTES tiles over TWO_ROW_WARPS warps,
    TWO_ROW_PROGRAMS_PER_SM an SM (NARROW where no norm applies) for rows of up to 4096
    columns, the one-row persistent config for longer rows; else None."""
    if not TWO_ROW_MIN_BYTES <= 2 * N * K < most_bytes or K > PERSISTENT_MAX_K:
        return None
    if triton.next_power_of_2(K) > 4096:
        return persistent_gemv_config(N, K, tail=False)
    return {**persistent_gemv_config(N, K, TWO_ROW_TILE_BYTES, TWO_ROW_WARPS,
                                     TWO_ROW_PROGRAMS_PER_SM, tail=False), "NARROW": True}


def persistent_gemv_config(N: int, K: int, tile_bytes: int = PERSISTENT_TILE_BYTES,
                           warps: int = PERSISTENT_WARPS,
                           programs_per_sm: int | str = PERSISTENT_PROGRAMS_PER_SM,
                           tail: bool = True) -> dict:
    """A persistent _gemv_kernel config: whole rows of K columns in flat tiles of about
    `tile_bytes` of 16-bit weights (at least 2 rows: SwiGLU and rotary epilogues work on
    pairs), `warps` warps, `programs_per_sm` programs an SM (or FIT).

    A row is padded to a power of two of chunks, or, where `tail`, the row is longer than
    PERSISTENT_TAIL_PAST_K and a head of the largest power of two below K plus a tail tile
    cover it in fewer chunks (split_row_in_two), read as the two: 5632 columns as 4096 + 2048
    instead of 8192, 5120 as 4096 + 1024. Only the one-row kernel takes a tail."""
    block_k = max(16, triton.next_power_of_2(K))
    chunk = min(GEMV_CHUNK, block_k)
    head, tail_chunks = block_k // chunk, 0
    if tail and K > PERSISTENT_TAIL_PAST_K:
        head, tail_chunks = split_row_in_two(triton.cdiv(K, chunk), head)
    covered = (head + tail_chunks) * chunk
    rows = tile_bytes // (2 * covered)
    block_n = max(2, min(16, triton.next_power_of_2(rows + 1) // 2))  # a power of two <= rows
    config = {"BLOCK_N": block_n, "SPLIT": head, "CHUNK": chunk,
              "num_warps": warps, "num_stages": 1, "PROGRAMS_PER_SM": programs_per_sm}
    return {**config, "TAIL": tail_chunks} if tail_chunks else config


def small_persistent_gemv_config(N: int, K: int) -> dict:
    """The one-row persistent config of SMALL_TILE_BYTES tiles over SMALL_WARPS warps,
    widened, as many an SM as fit up to SMALL_MAX_PROGRAMS_PER_SM."""
    return {**persistent_gemv_config(N, K, SMALL_TILE_BYTES, SMALL_WARPS, FIT),
            "WIDEN": True, "MOST_PROGRAMS_PER_SM": SMALL_MAX_PROGRAMS_PER_SM}


def split_gemv_config(N: int, K: int) -> dict:
    """Tile of the one-row kernel (_gemv_kernel) launched a program a row block: GEMV_WARPS
    warps, chunks of GEMV_CHUNK columns, rows of up to GEMV_MAX_BLOCK_K columns, at most 16
    rows; 64 weight values a thread, or 128 where the layer is narrow (N <= 4096) and its
    rows long (K >= 2048).

    From one-row projections of eight decoders' shapes with their fused parts, over weights
    rotated past L2, PDL on (research/sweep_gemv.py, H100): tiles of 4096 columns instead of
    2048 took K >= 4096 layers 1.03-1.08x faster (down projections, Llama-3-8B's q|k|v and
    o); twice the values a thread halves the programs of a narrow layer, which then fit an SM
    in one wave: 1.12-1.20x on q|k|v of 2560 and 3072 rows and 2048 x 5632 / 8192, 0.97x on
    2048 x 2048. Wide layers (gate/up, LM heads) read at 90-100% of copy either way.

    A row that fills its tile's power of two of chunks poorly takes a second, smaller tile
    instead (TAIL, the chunks past the largest power of two, rounded up to a power of two;
    split_row_in_two): 2560 columns as 16 + 4 chunks rather than 32, 3000 as 16 + 8. The
    masked chunks of a single tile cost registers and bytes in flight: one row of 2560 /
    3000 / 3072 columns read at 65 / 73 / 75% of copy in one tile, 80 / 86 / 86% in two
    (H100, notes/kernels.md, session 42). The two tiles' warps are counted from the columns
    they read, not from the tile they replace, so each thread holds the values a thread the
    rule asks for (160-192 instead of 80-96 for rows of 2304-3072 columns, 2 warps instead
    of 4): bf16 LayerStacks at one row of d = 2304-3072 1.06-1.12x faster, lone projections
    0.96-1.10x (notes/kernels.md, session 50). A row a little past one tile (4097-5120
    columns) takes the tile and a tail, with fewer rows a program.

    Narrow layers (N <= 4096) whose rows take one whole 4096-column tile (K of 3073-4096)
    take two rows a program over FULL_TILE_WARPS warps, 32 values a thread, instead of four
    rows over four: swept on whole one-row stacks (BLOCK_N 1-16 x 2-8 warps) it was the
    fastest at d = 3584 and 4096, and it took bf16 stacks 1.026-1.036x, Llama-3-8B's step
    1.021x and lone projections 1.03-1.09x faster, but 1024 x 4096 0.96x (H100,
    notes/kernels.md, session 50)."""
    block_k = max(16, min(triton.next_power_of_2(K), GEMV_MAX_BLOCK_K))
    chunk = min(GEMV_CHUNK, block_k)
    per_thread = 128 if N <= 4096 and K >= 2048 else 64
    block_n = per_thread * 32 * GEMV_WARPS // block_k
    block_n = max(1, min(16, block_n, triton.next_power_of_2(N)))
    num_warps = block_n * block_k // (32 * per_thread)
    head, tail = split_row_in_two(triton.cdiv(K, chunk), block_k // chunk)
    covered = (head + tail) * chunk
    if covered > block_k:  # past one tile: fewer rows a program, as many values a thread
        rows = block_n * block_k // covered
        block_n = max(1, triton.next_power_of_2(rows + 1) // 2)  # the power of two <= rows
        num_warps = GEMV_WARPS
    elif tail:  # warps for the columns the two tiles read, not the tile they replace
        warps = block_n * covered // (32 * per_thread)
        num_warps = max(1, triton.next_power_of_2(warps + 1) // 2)  # the power of two <= warps
    num_warps = max(1, min(GEMV_WARPS, num_warps))
    if per_thread == 128 and block_k == GEMV_MAX_BLOCK_K and K <= block_k and not tail:
        block_n, num_warps = 2, FULL_TILE_WARPS  # rows of one whole tile: see the docstring
    config = {"BLOCK_N": block_n, "SPLIT": head, "CHUNK": chunk,
              "num_warps": num_warps, "num_stages": 1}
    return {**config, "TAIL": tail} if tail else config


def split_row_in_two(chunks: int, tile_chunks: int) -> tuple[int, int]:
    """(head, tail) chunk counts, powers of two, of a row of `chunks` chunks that tiles of
    tile_chunks (a power of two) would otherwise hold: (tile_chunks, 0) unless
    - the row fits one tile, and a head of the largest power of two below it (at least
      MIN_HEAD_CHUNKS) plus a tail of at least MIN_TAIL_CHUNKS covers it in fewer chunks; or
    - the row passes one tile by at most a quarter of one: the tile and a tail of at least
      MIN_TAIL_CHUNKS cover it, both read before the wait, instead of a second pass over K
      after the first (a round trip for a sliver of the row; notes/kernels.md, session 42).
      Qwen2-0.5B's down projection, 896 x 4864, 6.05 -> 3.85 us (48 -> 76% of copy); tails
      of a half tile were slower (2048 x 5632 9.53 -> 9.68 us, 6144^2 25.7 -> 26.9)."""
    if chunks > tile_chunks:  # a tail instead of a second pass over K (a round trip)
        tail = max(MIN_TAIL_CHUNKS, triton.next_power_of_2(chunks - tile_chunks))
        return (tile_chunks, tail) if tail <= tile_chunks // 4 else (tile_chunks, 0)
    if chunks >= tile_chunks or chunks & (chunks - 1) == 0:
        return tile_chunks, 0
    head = triton.next_power_of_2(chunks) // 2
    tail = max(MIN_TAIL_CHUNKS, triton.next_power_of_2(chunks - head))
    if head < MIN_HEAD_CHUNKS or head + tail >= tile_chunks:
        return tile_chunks, 0
    return head, tail


def matvec_config(M: int, N: int, K: int, element_size: int = 4) -> dict:
    """Kernel and tile for 1 to 16 rows, chosen by rule rather than by timing:
    timing one weight (as an autotuner does) sees it hot in L2, while a layer stack streams
    every weight from memory. The rules come from sweeps over weights rotated past L2 and
    over whole decode stacks (notes/kernels.md, notes/decode.md):
    - one row, 16-bit: _gemv_kernel (gemv_config).
    - one row, fp32: _matvec_kernel with the whole row (up to 2048 columns), at most 32 KB
      and 8 rows, 64 values a thread (64 fp32 values are 64 registers of data, so the split
      tile saves less there).
    - several rows: 8 rows x up to 2048 columns over 4 warps, applied to one x row at a
      time (ROW_LOOP): one broadcast product over all rows needs a tile 1 / rows as large.
      fp32 at 5-8 rows (small weights: larger ones take the tensor cores there): 4 rows a
      program, twice the programs. Whole fp32 stacks of d = 512-1280 at 5-8 rows were
      1.01-1.26x faster, lone 256 x 2048 and 1000 x 1500 projections 1.3-1.7x (1536 x 1024
      with its norm 3-4% slower); at 4 rows the
      same tile won on small weights and lost on large ones (2048^2 0.90x, d=1280 stacks
      0.88x), so 4 rows keep 8 (H100, notes/decode.md, session 54).
      The rows' sums are gathered and turned once a step (GATHER_ROWS) except at 3-4 rows:
      fp32 stacks of d = 1024 at 8 rows 180.8 -> 159.7 us a token, lone 2-row fp32
      projections up to 8% faster (2048 x 5632 77% -> 83% of copy); at 4 rows the gain and
      the loss split (4096 x 14336 87% -> 76% of copy, d = 1024 stacks 3.5% faster, d = 768
      3.5% slower; H200, notes/kernels.md, session 105).
    """
    block_k = max(16, min(triton.next_power_of_2(K), 2048))
    if M == 1 and element_size <= 2:
        return gemv_config(N, K)
    if M == 1:
        block_n = max(1, min(8, MATVEC_TILE_BYTES // (block_k * element_size)))
        num_warps = block_n * block_k // (32 * MATVEC_ELEMENTS_PER_THREAD)
        return {"BLOCK_N": block_n, "BLOCK_K": block_k,
                "num_warps": max(1, min(16, num_warps)), "num_stages": 1, "ROW_LOOP": False}
    # ROW_LOOP still loads all rows of an x tile at once: past 8 rows, narrower tiles keep
    # that load at 64 values a thread.
    block_k = block_k if M <= 8 else min(block_k, 512)
    block_n = 4 if element_size == 4 and M >= 5 else 8
    return {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 1,
            "ROW_LOOP": True, "GATHER_ROWS": triton.next_power_of_2(M) != 4}


def launch_matvec(x, weight, out, norm_weight, eps, bias, activation, residual,
                  config: dict, pdl: bool, rotary: tuple = NO_ROTARY, l2_ahead=None,
                  added: tuple = NO_ADDED, head_norm: tuple = NO_HEAD_NORM):
    """y = linear(x) for few rows; a config with SPLIT runs _gemv_kernel (one row) or
    _gemv_rows_kernel (2-4 rows, no TAIL), one with BLOCK_K _matvec_kernel. pdl: launch with
    programmatic dependent launch, W's first tile read before the previous kernel in the
    stream has finished. rotary: the epilogue's tuple (_rotary_store.py) where activation is
    "rotary". l2_ahead (contiguous): the one-row GEMV also prefetches its bytes into L2
    before its wait; a hint, ignored by the other kernels and by the interpreter. added: x
    is first the stream x + rms_norm(h) * w (_added_norm.py). head_norm (with rotary;
    head_norm_args): q and k heads normalised in the epilogue, column blocks dividing
    head_dim; not in the several-row GEMV."""
    M, K = x.shape
    N = weight.shape[0]
    if head_norm and (("SPLIT" in config and M != 1) or activation != "rotary"
                      or rotary[-1] % config["BLOCK_N"]):
        raise ValueError(f"head norms run in a rotary epilogue with column blocks dividing "
                         f"head_dim, and not in the several-row GEMV: not {M} rows of {config}")
    parts = dict(HAS_NORM=norm_weight is not None, HAS_BIAS=bias is not None,
                 HAS_RESIDUAL=residual is not None, ACTIVATION=activation,
                 PREFETCH_WEIGHT=pdl, NORM_SCALAR=is_one_value(norm_weight),
                 ADD_NORMED=bool(added))
    if head_norm:
        parts["HEAD_HALF"] = head_half_block(rotary[-1])
    pdl_option = {"launch_pdl": True} if pdl else {}
    grid = (triton.cdiv(N, config["BLOCK_N"]),)
    # Not under ROW_LOOP: there 16-byte weight loads took 3 rows 3-33% longer than loads an
    # element at a time (1400 x 1400 fp32 3.98 -> 5.29 us); at one row fp32 6-10% less
    # (H100, notes/kernels.md, session 41).
    align = 1 if config.get("ROW_LOOP") else weight_alignment(weight.element_size(), K,
                                                               weight.stride(0))
    if "SPLIT" in config:
        if M > GEMV_MAX_ROWS:
            raise ValueError(f"the GEMV takes 1 to {GEMV_MAX_ROWS} rows, not {M}")
        covered = (config["SPLIT"] + config.get("TAIL", 0)) * config["CHUNK"]
        if config.get("TAIL") and K > covered:
            raise ValueError(f"a tile of {config['SPLIT']} + {config['TAIL']} chunks of "
                             f"{config['CHUNK']} columns does not cover K = {K}")
        config = dict(config)
        if added:  # h's norm from its row as loaded where the tiles hold it whole
            parts.update({"ADD_ROW_LOADED": True} if K <= covered
                         else {"ADD_BLOCK_K": rstd_block_k(K)})
        per_sm = config.pop("PROGRAMS_PER_SM", None)
        most_per_sm = config.pop("MOST_PROGRAMS_PER_SM", MAX_PROGRAMS_PER_SM)
        # exact only where x is of the weights' 16-bit dtype and no norm scales it; PTX
        narrow = (config.pop("NARROW", False) and M > 1 and bool(per_sm) and not added
                  and norm_weight is None and x.dtype == weight.dtype
                  and weight.element_size() == 2 and not INTERPRET)
        # the one-row persistent tile widened where used (PTX too): by default where it won,
        # SwiGLU rows of WIDEN_ROW_COLUMNS
        widen = (config.pop("WIDEN", activation in GLU_ACTIVATIONS
                                       and covered == WIDEN_ROW_COLUMNS)
                 and M == 1 and bool(per_sm) and not INTERPRET)
        prefetch = (M == 1 and not INTERPRET and l2_ahead is not None
                    and l2_ahead.numel() > 0)
        ahead_lines = (triton.cdiv(l2_ahead.numel() * l2_ahead.element_size(), L2_LINE_BYTES)
                       if prefetch else 0)
        if M == 1:
            kernel = _gemv_kernel
            args = (out, x, weight, weight.stride(0) // align, norm_weight, bias, residual,
                    rotary, added, head_norm, N, K // align, eps,
                    l2_ahead if prefetch else weight, ahead_lines)
            if widen:
                parts["WIDEN"] = True
        else:
            if config.get("TAIL") or config.get("RELEASE_AFTER_INPUTS"):
                raise ValueError("the several-row GEMV takes neither TAIL nor "
                                 "RELEASE_AFTER_INPUTS")
            kernel = _gemv_rows_kernel
            args = (out, out.stride(0), x, x.stride(0), weight, weight.stride(0) // align,
                    norm_weight, bias, residual,
                    residual.stride(0) if residual is not None else 0, rotary, added, M, N,
                    K // align, eps)
            parts["BLOCK_M"] = triton.next_power_of_2(M)
            if narrow:
                parts["NARROW"] = True
        kwargs = dict(**parts, **config, ALIGN=align, PERSISTENT=bool(per_sm),
                      **pdl_option)
        if COMPILE_ONE_TILE and not per_sm and K <= config["SPLIT"] * config["CHUNK"]:
            kwargs["ONE_TILE"] = True  # the split tile's K loop left out: the row fits a tile
        if per_sm:  # persistent: a few programs an SM take every G-th block of rows
            if K > covered:
                raise ValueError(f"a persistent GEMV takes whole rows: {config['SPLIT']} + "
                                 f"{config.get('TAIL', 0)} chunks of {config['CHUNK']} "
                                 f"columns do not cover K = {K}")
            if narrow:  # as many as its fewer registers fit, uncapped
                per_sm, _ = resident_launch(kernel, args, kwargs, x.device,
                                            NARROW_MAX_PROGRAMS_PER_SM, capped=False)
            elif per_sm == FIT:
                per_sm, options = resident_launch(kernel, args, kwargs, x.device,
                                                  most_per_sm)
                kwargs.update(options)
            sms = sm_count(x.device) or ASSUMED_SM_COUNT
            grid = (min(grid[0], per_sm * sms),)
        if prefetch:  # each program its share of the lines
            kwargs["AHEAD"] = triton.next_power_of_2(triton.cdiv(ahead_lines, grid[0]))
            kwargs["AHEAD_LINE"] = L2_LINE_BYTES // l2_ahead.element_size()
        return launch(kernel, grid, *args, **kwargs)
    if added and K <= config["BLOCK_K"] and M <= ROW_LOADED_MAX_ROWS:
        parts["ADD_ROW_LOADED"] = True
    return launch(
        _matvec_kernel, grid, out, out.stride(0), x, x.stride(0), weight,
        weight.stride(0) // align, norm_weight, bias, residual,
        residual.stride(0) if residual is not None else 0, rotary, added, head_norm, M, N,
        K // align, eps, **parts, BLOCK_M=triton.next_power_of_2(M), **config, ALIGN=align,
        **pdl_option)

