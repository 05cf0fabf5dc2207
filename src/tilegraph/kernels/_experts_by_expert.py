"""The mixture of experts' two kernels for a batch of rows, one program an expert's block:
each expert a step's rows take is read once, whatever the number of rows taking it.

kernels/experts.py's pair kernels run a program a (row, choice): rows choosing the same
expert each stream it (Mixtral's 8 experts at 8 rows read 16 where at most 8 are taken).
Here gate/up runs a program an (expert, block of its inner columns): it routes every row
itself (the same softmax and ties as the pair kernel's), returns at once where no row takes
the expert, and else multiplies its weight tile against all the rows at once on the tensor
cores (rows padded to 16, an mma's least), writing each taking row's act(gate) * up where
the pair kernel would. Down runs a program a block of output columns: it walks every
expert some row takes, reading that expert's rows of the block once against the taking
rows' hidden rows, and sums them weighted with the residual in fp32 (no atomics; the sum
in expert order, where the pair kernel's is in choice order).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ._activation import glu

# The most rows these kernels take (their register tiles hold them all); 16 at least, an
# mma's rows.
MAX_ROWS = 64


@triton.jit
def _slot_of_expert(scores_ptr, rows, expert, n_experts, TOP_K: tl.constexpr,
                    SHARED: tl.constexpr, SHARED_SCORED: tl.constexpr, E_BLOCK: tl.constexpr,
                    ROWS_BLOCK: tl.constexpr, RENORMALIZED: tl.constexpr):
    """(slot, weight) of `expert` for each row (ROWS_BLOCK,): the expert's place among the
    row's choices (below TOP_K the routed ones best first, as experts._chosen_expert
    orders them; a shared part n_experts + j at TOP_K + j, every row's) and its weight (a
    shared part's as the pair kernel's: SHARED_SCORED); slot -1 where the row does not
    take it, or is past `rows`."""
    stride = n_experts + (1 if SHARED_SCORED else 0)
    row = tl.arange(0, ROWS_BLOCK)
    experts = tl.arange(0, E_BLOCK)
    scores = tl.load(scores_ptr + row[:, None] * stride + experts[None, :],
                     mask=(row < rows)[:, None] & (experts < n_experts)[None, :], other=0.0)
    scores = tl.where((experts < n_experts)[None, :], scores.to(tl.float32), float("-inf"))
    top = tl.max(scores, 1)
    total = tl.sum(tl.exp(scores - top[:, None]), 1)
    left = scores
    chosen_total = tl.zeros((ROWS_BLOCK,), dtype=tl.float32)
    slot = tl.full((ROWS_BLOCK,), -1, tl.int32)
    expert_score = top
    for choice in tl.static_range(TOP_K):
        best = tl.max(left, 1)
        index = tl.min(tl.where(left == best[:, None], experts[None, :], E_BLOCK), 1)
        chosen_total += tl.exp(best - top)
        slot = tl.where(index == expert, choice, slot)
        expert_score = tl.where(index == expert, best, expert_score)
        left = tl.where(experts[None, :] == index[:, None], float("-inf"), left)
    if RENORMALIZED:
        total = chosen_total
    weight = tl.exp(expert_score - top) / total
    if SHARED > 0:
        share = tl.full((ROWS_BLOCK,), 1.0, tl.float32)
        if SHARED_SCORED:
            share = 1.0 / (1.0 + tl.exp(-tl.load(scores_ptr + row * stride + n_experts,
                                                 mask=row < rows, other=0.0).to(tl.float32)))
        slot = tl.where(expert >= n_experts, TOP_K + expert - n_experts, slot)
        weight = tl.where(expert >= n_experts, share, weight)
    return tl.where(row < rows, slot, -1), weight


@triton.jit
def _dot(x, w, acc, DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """acc + x (R, K) @ w (N, K)^T on the tensor cores, x in w's dtype."""
    x = x.to(w.dtype)
    if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
        x = x.to(tl.float32)
        w = w.to(tl.float32)
    return tl.dot(x, tl.trans(w), acc, input_precision=DOT_PRECISION)


@triton.jit
def gate_up_by_expert_kernel(hidden_ptr, weights_ptr, experts_ptr, x_ptr, scores_ptr, w_ptr,
                             bias_ptr, rows, dim, ffn, n_experts, eps, HAS_BIAS: tl.constexpr,
                             TOP_K: tl.constexpr,
                             SHARED: tl.constexpr, SHARED_SCORED: tl.constexpr,
                             E_BLOCK: tl.constexpr, ROWS_BLOCK: tl.constexpr,
                             RENORMALIZED: tl.constexpr,
                             ACTIVATION: tl.constexpr, DOT_PRECISION: tl.constexpr,
                             UPCAST_DOT: tl.constexpr, BLOCK_N: tl.constexpr,
                             BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """hidden[row slots + slot, block] = act(gate) * up of expert `program_id(1)`'s rows of
    the block against rms_norm(x[row]) (plus their biases where HAS_BIAS), for each row
    taking it at `slot`; the programs of block 0 store the expert and weight of each such
    choice."""
    block, expert = tl.program_id(0), tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()               # the scores (and x) are final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start; it waits for us
    slot, weight = _slot_of_expert(scores_ptr, rows, expert, n_experts, TOP_K, SHARED,
                                   SHARED_SCORED, E_BLOCK, ROWS_BLOCK, RENORMALIZED)
    if tl.max(slot, 0) >= 0:   # some row takes this expert: read its block once
        row = tl.arange(0, ROWS_BLOCK)
        pair = row * (TOP_K + SHARED) + slot
        taken = slot >= 0
        if block == 0:
            tl.store(weights_ptr + pair, weight, mask=taken)
            tl.store(experts_ptr + pair, expert + row * 0, mask=taken)
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
def down_by_expert_kernel(out_ptr, hidden_ptr, weights_ptr, experts_ptr, w_ptr, bias_ptr,
                          residual_ptr, rows, stacked, dim, ffn, SLOTS: tl.constexpr,
                          SLOTS_BLOCK: tl.constexpr, ROWS_BLOCK: tl.constexpr,
                          HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                          DOT_PRECISION: tl.constexpr,
                          UPCAST_DOT: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """out[:, block] = residual + sum over the experts the rows take of each taking row's
    weight * (the expert's down rows of the block against that row's hidden row, plus
    their biases where HAS_BIAS)."""
    block = tl.program_id(0)
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
    total = tl.zeros((ROWS_BLOCK, BLOCK_N), dtype=tl.float32)
    for expert in range(0, stacked):
        mine = table == expert   # a row takes an expert once at most
        slot = tl.max(tl.where(mine, slots[None, :], -1), 1)
        if tl.max(slot, 0) >= 0:
            taken = slot >= 0
            hidden_rows = hidden_ptr + (row * SLOTS + slot).to(tl.int64)[:, None] * ffn
            expert_w = (w_ptr + tl.cast(expert, tl.int64) * dim * ffn
                        + out_cols.to(tl.int64)[:, None] * ffn)
            acc = tl.zeros((ROWS_BLOCK, BLOCK_N), dtype=tl.float32)
            for start in range(0, ffn, BLOCK_K):
                cols = start + tl.arange(0, BLOCK_K)
                h = tl.load(hidden_rows + cols[None, :],
                            mask=taken[:, None] & (cols < ffn)[None, :], other=0.0)
                w = tl.load(expert_w + cols[None, :],
                            mask=(out_cols < dim)[:, None] & (cols < ffn)[None, :], other=0.0)
                acc = _dot(h, w, acc, DOT_PRECISION, UPCAST_DOT)
            if HAS_BIAS:
                acc += tl.load(bias_ptr + tl.cast(expert, tl.int64) * dim + out_cols,
                               mask=out_cols < dim, other=0.0).to(tl.float32)[None, :]
            total += tl.sum(tl.where(mine, weights, 0.0), 1)[:, None] * acc
    outputs = (row < rows)[:, None] & (out_cols < dim)[None, :]
    if HAS_RESIDUAL:
        total += tl.load(residual_ptr + row.to(tl.int64)[:, None] * dim + out_cols[None, :],
                         mask=outputs, other=0.0).to(tl.float32)
    tl.store(out_ptr + row.to(tl.int64)[:, None] * dim + out_cols[None, :],
             total.to(out_ptr.dtype.element_ty), mask=outputs)
