"""The mixture of experts' kernels for a batch of rows, one program an expert's block:
each expert a step's rows take is read once, whatever the number of rows taking it.

kernels/experts.py's pair kernels run a program a (row, choice): rows choosing the same
expert each stream it (Mixtral's 8 experts at 8 rows read 16 where at most 8 are taken).
Here one program routes every row first (the same choices and ties as the pair kernel's)
and lists the experts taken. Gate/up runs a program a (taken expert, block of its inner
columns), the grid's later programs, past the experts taken, returning at once: it
multiplies its weight tile against all the rows at once on the tensor cores (rows padded
to 16, an mma's least), writing each taking row's act(gate) * up where the pair kernel
would. Down runs a program a block of output columns: it walks the experts some row takes,
reading each one's rows of the block once against the taking rows' hidden rows, and sums
them weighted with the residual in fp32 (no atomics; the sum in expert order, where the
pair kernel's is in choice order); where its blocks are few for the SMs, each is split
along the inner width into parts summed in order by a kernel of their own.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._activation import glu

# The most rows these kernels take (their register tiles hold them all); 16 at least, an
# mma's rows.
MAX_ROWS = 64
_NONE: tl.constexpr = tl.constexpr(2 ** 31 - 1)   # past every expert


@triton.jit
def _routes(scores_ptr, choice_bias_ptr, routed_scale, row, rows, n_experts, stacked,
            TOP_K: tl.constexpr, SHARED: tl.constexpr, SHARED_SCORED: tl.constexpr,
            E_BLOCK: tl.constexpr, RENORMALIZED: tl.constexpr, SIGMOID: tl.constexpr,
            HAS_CHOICE_BIAS: tl.constexpr):
    """(slot, weight), each (rows `row`, E_BLOCK experts): the expert's place among the
    row's choices (below TOP_K the routed ones best first, as experts._chosen_expert
    chooses and orders them; a shared part n_experts + j at TOP_K + j, every row's) and
    its weight (as the pair kernel's, a shared part's by SHARED_SCORED); slot -1 where the
    row does not take the expert, or is past `rows`."""
    stride = n_experts + (1 if SHARED_SCORED else 0)
    experts = tl.arange(0, E_BLOCK)
    routed = (experts < n_experts)[None, :]
    scores = tl.load(scores_ptr + row[:, None] * stride + experts[None, :],
                     mask=(row < rows)[:, None] & routed, other=0.0)
    scores = tl.where(routed, scores.to(tl.float32), float("-inf"))
    if SIGMOID:
        probabilities = 1.0 / (1.0 + tl.exp(-scores))
        keys = probabilities
        if HAS_CHOICE_BIAS:
            keys += tl.load(choice_bias_ptr + experts, mask=experts < n_experts,
                            other=0.0)[None, :]
        keys = tl.where(routed, keys, float("-inf"))
        total = tl.full(row.shape, 1.0, tl.float32)
    else:
        probabilities = tl.exp(scores - tl.max(scores, 1)[:, None])
        keys = scores
        total = tl.sum(probabilities, 1)
    left = keys
    chosen_total = tl.zeros(row.shape, dtype=tl.float32)
    slot = tl.full(scores.shape, -1, tl.int32)
    for choice in tl.static_range(TOP_K):
        best = tl.max(left, 1)
        index = tl.min(tl.where(left == best[:, None], experts[None, :], E_BLOCK), 1)
        hit = experts[None, :] == index[:, None]
        chosen_total += tl.sum(tl.where(hit, probabilities, 0.0), 1)
        slot = tl.where(hit, choice, slot)
        left = tl.where(hit, float("-inf"), left)
    if RENORMALIZED:
        total = chosen_total
    weight = probabilities / total[:, None] * routed_scale
    if SHARED > 0:
        share = tl.full(row.shape, 1.0, tl.float32)
        if SHARED_SCORED:
            share = 1.0 / (1.0 + tl.exp(-tl.load(scores_ptr + row * stride + n_experts,
                                                 mask=row < rows, other=0.0).to(tl.float32)))
        part = ((experts >= n_experts) & (experts < stacked))[None, :]
        slot = tl.where(part, TOP_K + experts[None, :] - n_experts, slot)
        weight = tl.where(part, share[:, None], weight)
    return tl.where((row < rows)[:, None], slot, -1), weight


@triton.jit
def route_kernel(experts_ptr, weights_ptr, taken_ptr, row_slots_ptr, scores_ptr,
                 choice_bias_ptr, routed_scale, rows, n_experts, stacked,
                 TOP_K: tl.constexpr, SHARED: tl.constexpr, SHARED_SCORED: tl.constexpr,
                 E_BLOCK: tl.constexpr, ROWS_BLOCK: tl.constexpr, CHUNK: tl.constexpr,
                 RENORMALIZED: tl.constexpr, SIGMOID: tl.constexpr,
                 HAS_CHOICE_BIAS: tl.constexpr, PDL: tl.constexpr):
    """A step's routes, once for all the programs after, in one program (CHUNK rows at a
    time): each row's experts and weights at [row, slot], as the pair kernel stores them;
    row_slots[expert, row], the slot at which the row takes the expert or -1, for each of
    the `stacked` experts; and taken: how many experts some row takes, then those
    experts in order."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # the scores are final
        tl.extra.cuda.gdc_launch_dependents()
    experts = tl.arange(0, E_BLOCK)
    taken = tl.zeros((E_BLOCK,), dtype=tl.int32)
    for first in range(0, rows, CHUNK):
        row = first + tl.arange(0, CHUNK)
        slot, weight = _routes(scores_ptr, choice_bias_ptr, routed_scale, row, rows,
                               n_experts, stacked, TOP_K, SHARED, SHARED_SCORED, E_BLOCK,
                               RENORMALIZED, SIGMOID, HAS_CHOICE_BIAS)
        chosen = slot >= 0
        pair = row[:, None] * (TOP_K + SHARED) + slot
        tl.store(experts_ptr + pair, experts[None, :] + 0 * row[:, None], mask=chosen)
        tl.store(weights_ptr + pair, weight, mask=chosen)
        tl.store(row_slots_ptr + experts[None, :] * ROWS_BLOCK + row[:, None], slot,
                 mask=(row < rows)[:, None] & (experts < stacked)[None, :])
        taken = tl.maximum(taken, tl.max(chosen.to(tl.int32), 0))
    tl.store(taken_ptr, tl.sum(taken, 0))
    tl.store(taken_ptr + tl.cumsum(taken, 0), experts, mask=taken > 0)


@triton.jit
def _dot(x, w, acc, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """acc + x (R, K) @ w (N, K)^T on the tensor cores, x in w's dtype."""
    x = x.to(w.dtype)
    if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
        x = x.to(tl.float32)
        w = w.to(tl.float32)
    return tl.dot(x, tl.trans(w), acc, input_precision=DOT_PRECISION)


@triton.jit
def gate_up_by_expert_kernel(hidden_ptr, taken_ptr, row_slots_ptr, x_ptr, w_ptr, bias_ptr,
                             rows, dim, ffn, eps, HAS_BIAS: tl.constexpr, SLOTS: tl.constexpr,
                             ROWS_BLOCK: tl.constexpr, ACTIVATION: tl.constexpr,
                             DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                             BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """hidden[row SLOTS + slot, block] = act(gate) * up of the `program_id(1)`-th expert
    taken's rows of the block against rms_norm(x[row]) (plus their biases where HAS_BIAS),
    for each row taking it at `slot` (route_kernel's taken and row_slots)."""
    block, place = tl.program_id(0), tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()               # the routes (and x) are final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start; it waits for us
    if place < tl.load(taken_ptr):   # the place-th expert some row takes: read its block once
        expert = tl.load(taken_ptr + 1 + place)
        row = tl.arange(0, ROWS_BLOCK)
        slot = tl.load(row_slots_ptr + expert * ROWS_BLOCK + row, mask=row < rows, other=-1)
        pair = row * SLOTS + slot
        taken = slot >= 0
        # 2 BLOCK_N rows of the expert's interleaved gate|up: BLOCK_N (gate, up) pairs
        w_rows = block * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
        expert_w = w_ptr + expert.to(tl.int64) * 2 * ffn * dim
        acc = tl.zeros((ROWS_BLOCK, 2 * BLOCK_N), dtype=tl.float32)
        squares = tl.zeros((ROWS_BLOCK,), dtype=tl.float32)
        for start in range(0, dim, BLOCK_K):
            cols = start + tl.arange(0, BLOCK_K)
            x = tl.load(x_ptr + row[:, None] * dim + cols[None, :],
                        mask=(row < rows)[:, None] & (cols < dim)[None, :], other=0.0)
            w = tl.load(expert_w + w_rows[:, None] * dim + cols[None, :],
                        mask=(w_rows < 2 * ffn)[:, None] & (cols < dim)[None, :], other=0.0)
            squares += tl.sum(x.to(tl.float32) * x.to(tl.float32), 1)
            acc = _dot(x, w, acc, DOT_PRECISION, UPCAST_DOT)
        # W (x / rms(x)) = (W x) / rms(x): the norm applied once, after the sums
        inv_rms = 1.0 / tl.sqrt(squares / dim + eps)
        outputs = acc * inv_rms[:, None]
        if HAS_BIAS:
            outputs += tl.load(bias_ptr + expert.to(tl.int64) * 2 * ffn + w_rows,
                               mask=w_rows < 2 * ffn, other=0.0).to(tl.float32)[None, :]
        gate, up = tl.split(tl.reshape(outputs, (ROWS_BLOCK, BLOCK_N, 2)))
        out_cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
        tl.store(hidden_ptr + pair.to(tl.int64)[:, None] * ffn + out_cols[None, :],
                 glu(gate, up, ACTIVATION).to(hidden_ptr.dtype.element_ty),
                 mask=taken[:, None] & (out_cols < ffn)[None, :])


@triton.jit
def down_by_expert_kernel(out_ptr, partial_ptr, hidden_ptr, weights_ptr, experts_ptr, w_ptr,
                          bias_ptr, residual_ptr, rows, dim, ffn, part_width,
                          SPLIT: tl.constexpr, SLOTS: tl.constexpr,
                          SLOTS_BLOCK: tl.constexpr, ROWS_BLOCK: tl.constexpr,
                          HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                          DOT_PRECISION: tl.constexpr,
                          UPCAST_DOT: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """out[:, block] = residual + sum over the experts the rows take of each taking row's
    weight * (the expert's down rows of the block against that row's hidden row, plus
    their biases where HAS_BIAS). With SPLIT parts, program (block, part) sums over
    `part_width` of the inner columns from part * part_width only, into partial[part]
    (fp32, the residual left to sum_parts_kernel; part 0 adds the biases)."""
    block, part = tl.program_id(0), tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()               # hidden, the experts and weights are final
        tl.extra.cuda.gdc_launch_dependents()
    row, slots = tl.arange(0, ROWS_BLOCK), tl.arange(0, SLOTS_BLOCK)
    choices = (row < rows)[:, None] & (slots < SLOTS)[None, :]
    table = tl.load(experts_ptr + row[:, None] * SLOTS + slots[None, :], mask=choices,
                    other=-1)
    weights = tl.load(weights_ptr + row[:, None] * SLOTS + slots[None, :], mask=choices,
                      other=0.0)
    out_cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
    first, end = part * part_width, tl.minimum(part * part_width + part_width, ffn)
    total = tl.zeros((ROWS_BLOCK, BLOCK_N), dtype=tl.float32)
    # the experts some row takes, in order: the least in the table past the last
    expert = tl.min(tl.where(table >= 0, table, _NONE))
    while expert < _NONE:
        mine = table == expert   # a row takes an expert once at most
        slot = tl.max(tl.where(mine, slots[None, :], -1), 1)
        taken = slot >= 0
        hidden_rows = hidden_ptr + (row * SLOTS + slot).to(tl.int64)[:, None] * ffn
        expert_w = (w_ptr + tl.cast(expert, tl.int64) * dim * ffn
                    + out_cols.to(tl.int64)[:, None] * ffn)
        acc = tl.zeros((ROWS_BLOCK, BLOCK_N), dtype=tl.float32)
        for start in range(first, end, BLOCK_K):
            cols = start + tl.arange(0, BLOCK_K)
            h = tl.load(hidden_rows + cols[None, :],
                        mask=taken[:, None] & (cols < end)[None, :], other=0.0)
            w = tl.load(expert_w + cols[None, :],
                        mask=(out_cols < dim)[:, None] & (cols < end)[None, :], other=0.0)
            acc = _dot(h, w, acc, DOT_PRECISION, UPCAST_DOT)
        if HAS_BIAS:
            if part == 0:   # (the biases once, whatever the parts)
                acc += tl.load(bias_ptr + tl.cast(expert, tl.int64) * dim + out_cols,
                               mask=out_cols < dim, other=0.0).to(tl.float32)[None, :]
        total += tl.sum(tl.where(mine, weights, 0.0), 1)[:, None] * acc
        expert = tl.min(tl.where(table > expert, table, _NONE))
    outputs = (row < rows)[:, None] & (out_cols < dim)[None, :]
    at = row.to(tl.int64)[:, None] * dim + out_cols[None, :]
    if SPLIT > 1:
        tl.store(partial_ptr + part.to(tl.int64) * rows * dim + at, total, mask=outputs)
    else:
        if HAS_RESIDUAL:
            total += tl.load(residual_ptr + at, mask=outputs, other=0.0).to(tl.float32)
        tl.store(out_ptr + at, total.to(out_ptr.dtype.element_ty), mask=outputs)


@triton.jit
def sum_parts_kernel(out_ptr, partial_ptr, residual_ptr, size, SPLIT: tl.constexpr,
                     HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """out = residual + partial[0] + ... + partial[SPLIT - 1], in that order (fp32), over
    `size` elements."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # the parts are final
        tl.extra.cuda.gdc_launch_dependents()
    at = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    if HAS_RESIDUAL:
        total += tl.load(residual_ptr + at, mask=at < size, other=0.0).to(tl.float32)
    for part in tl.static_range(SPLIT):
        total += tl.load(partial_ptr + part * size + at, mask=at < size, other=0.0)
    tl.store(out_ptr + at, total.to(out_ptr.dtype.element_ty), mask=at < size)
