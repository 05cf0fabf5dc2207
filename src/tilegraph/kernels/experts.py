"""A mixture of experts' MLP for a decode step's few rows: two kernels that read only the
experts each row takes.

    scores = router(rms_norm(x))                                  (tg.linear, before these)
    e_1..e_k, p_1..p_k = the k best experts of softmax(scores)    (renormalised, or not;
                         or of sigmoid(scores), chosen with a bias an expert; scaled)
    out = residual + sum_j p_j down_{e_j}(act(gate_{e_j}(n)) * up_{e_j}(n)),  n = rms_norm(x)

expert_gate_up runs one program a (row, chosen expert, block of the expert's inner
columns): it picks the row's experts from its router scores itself (so no kernel of its
own routes them), reads the chosen expert's interleaved gate|up rows (tg.linear's gated
layout, a (n_experts, 2 ffn, dim) stack) against the row, normalised by the RMS it sums in
the same pass (the norm's weight is folded into the weights), and writes act(gate) * up
for each (row, expert) and, once a row, the experts and their weights (a shared expert,
Qwen 2 MoE's, runs as parts of ffn each that every row takes, weighted by the sigmoid of a
router score of its own). expert_down sums each row's k experts' down projections,
weighted, and the residual, in fp32, one program a block of output columns a row: no
atomics, the same sum every replay.

Each (row, expert) pair streams its expert's weights, so rows taking the same expert read
it again, from L2 where they read it side by side (a block's pairs run next to each
other): a step of one row reads its k experts, the least it can, and steps whose rows share
their experts enough run _experts_by_expert.py's kernels instead, which read each expert
the rows take once (BY_EXPERT_SHARING). Many rows (a prefill) take the dense path of
models/experts.py. All the kernels wait for
the kernel before them at once: nothing they read is known before it ends (which experts
the scores choose), so PDL only hides their launch.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._activation import EXPERT_GLU_ACTIVATIONS, glu
from ._experts_by_expert import (
    MAX_ROWS,
    down_by_expert_kernel,
    gate_up_by_expert_kernel,
    route_kernel,
    sum_parts_kernel,
)
from ._launch import sm_count, supports_pdl
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import launched

# The most experts a row may take: the routing loop is unrolled this far at most.
MAX_EXPERTS_PER_TOKEN = 16
_ASSUMED_SMS = 132   # (an H100's, for block choices where kernels run interpreted)


@triton.jit
def _chosen_expert(scores_ptr, choice_bias_ptr, routed_scale, row, slot, n_experts,
                   TOP_K: tl.constexpr, SHARED: tl.constexpr, SHARED_SCORED: tl.constexpr,
                   E_BLOCK: tl.constexpr, RENORMALIZED: tl.constexpr, SIGMOID: tl.constexpr,
                   HAS_CHOICE_BIAS: tl.constexpr):
    """(expert, weight) of choice `slot` of row `row`: below TOP_K, the slot-th best (0: the
    best) of its n_experts router scores in fp32, ties to the lower expert, weighted by its
    probability (a softmax over the experts, or each score's sigmoid where SIGMOID, then
    chosen by probability plus a bias an expert where HAS_CHOICE_BIAS), renormalised over
    the TOP_K chosen where RENORMALIZED, times routed_scale; from TOP_K on, the shared
    expert's parts n_experts.. (SHARED: how many), weighted by sigmoid of the row's score
    after the routed ones where SHARED_SCORED (the rows of scores hold it), else by 1."""
    stride = n_experts + (1 if SHARED_SCORED else 0)
    experts = tl.arange(0, E_BLOCK)
    scores = tl.load(scores_ptr + row * stride + experts, mask=experts < n_experts,
                     other=float("-inf")).to(tl.float32)
    if SIGMOID:
        probabilities = 1.0 / (1.0 + tl.exp(-scores))
        keys = probabilities
        if HAS_CHOICE_BIAS:
            keys += tl.load(choice_bias_ptr + experts, mask=experts < n_experts, other=0.0)
        keys = tl.where(experts < n_experts, keys, float("-inf"))
        total = 1.0
    else:
        top = tl.max(scores, 0)
        keys = scores
        total = tl.sum(tl.exp(scores - top), 0)
    left = keys
    chosen_total = 0.0
    expert = 0
    expert_probability = 0.0
    for choice in tl.static_range(TOP_K):
        best = tl.max(left, 0)
        index = tl.min(tl.where(left == best, experts, E_BLOCK), 0)
        if SIGMOID:   # (chosen by its key: its probability read from the row)
            probability = tl.sum(tl.where(experts == index, probabilities, 0.0), 0)
        else:
            probability = tl.exp(best - top)
        chosen_total += probability
        expert = tl.where(choice == slot, index, expert)
        expert_probability = tl.where(choice == slot, probability, expert_probability)
        left = tl.where(experts == index, float("-inf"), left)
    if RENORMALIZED:
        total = chosen_total
    weight = expert_probability / total * routed_scale
    if SHARED > 0:
        share = 1.0
        if SHARED_SCORED:
            share = 1.0 / (1.0 + tl.exp(-tl.load(scores_ptr + row * stride + n_experts)
                                        .to(tl.float32)))
        expert = tl.where(slot < TOP_K, expert, n_experts + slot - TOP_K)
        weight = tl.where(slot < TOP_K, weight, share)
    return expert, weight


@triton.jit
def _expert_gate_up_kernel(hidden_ptr, weights_ptr, experts_ptr, x_ptr, scores_ptr,
                           choice_bias_ptr, routed_scale, w_ptr, bias_ptr, dim, ffn,
                           n_experts, eps,
                           HAS_BIAS: tl.constexpr, TOP_K: tl.constexpr,
                           SHARED: tl.constexpr, SHARED_SCORED: tl.constexpr,
                           E_BLOCK: tl.constexpr, RENORMALIZED: tl.constexpr,
                           SIGMOID: tl.constexpr, HAS_CHOICE_BIAS: tl.constexpr,
                           ACTIVATION: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """hidden[row slots + slot, block] = act(gate) * up of the chosen expert's rows of the
    block against rms_norm(x[row]), plus their biases where HAS_BIAS (slots: TOP_K +
    SHARED); the program of block 0 stores the choice's expert and weight."""
    pair, block = tl.program_id(0), tl.program_id(1)
    row, slot = pair // (TOP_K + SHARED), pair % (TOP_K + SHARED)
    if PDL:
        tl.extra.cuda.gdc_wait()               # the scores (and x) are final
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may start; it waits for us
    expert, weight = _chosen_expert(scores_ptr, choice_bias_ptr, routed_scale, row, slot,
                                    n_experts, TOP_K, SHARED, SHARED_SCORED, E_BLOCK,
                                    RENORMALIZED, SIGMOID, HAS_CHOICE_BIAS)
    if block == 0:
        tl.store(weights_ptr + pair, weight)
        tl.store(experts_ptr + pair, expert)
    # 2 BLOCK_N rows of the expert's interleaved gate|up: BLOCK_N (gate, up) pairs
    rows = block * 2 * BLOCK_N + tl.arange(0, 2 * BLOCK_N)
    expert_w = w_ptr + expert.to(tl.int64) * 2 * ffn * dim
    x_row = x_ptr + row.to(tl.int64) * dim
    acc = tl.zeros((2 * BLOCK_N, BLOCK_K), dtype=tl.float32)
    squares = tl.zeros((BLOCK_K,), dtype=tl.float32)
    for start in range(0, dim, BLOCK_K):
        cols = start + tl.arange(0, BLOCK_K)
        x = tl.load(x_row + cols, mask=cols < dim, other=0.0).to(tl.float32)
        w = tl.load(expert_w + rows[:, None] * dim + cols[None, :],
                    mask=(rows[:, None] < 2 * ffn) & (cols[None, :] < dim), other=0.0)
        acc += w.to(tl.float32) * x[None, :]
        squares += x * x
    # W (x / rms(x)) = (W x) / rms(x): the norm applied once, after the sums
    inv_rms = 1.0 / tl.sqrt(tl.sum(squares, 0) / dim + eps)
    outputs = tl.sum(acc, 1) * inv_rms
    if HAS_BIAS:
        outputs += tl.load(bias_ptr + expert.to(tl.int64) * 2 * ffn + rows,
                           mask=rows < 2 * ffn, other=0.0).to(tl.float32)
    gate, up = tl.split(tl.reshape(outputs, (BLOCK_N, 2)))
    out_cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(hidden_ptr + pair.to(tl.int64) * ffn + out_cols,
             glu(gate, up, ACTIVATION).to(hidden_ptr.dtype.element_ty), mask=out_cols < ffn)


@triton.jit
def _expert_down_kernel(out_ptr, hidden_ptr, weights_ptr, experts_ptr, w_ptr, bias_ptr,
                        residual_ptr, dim, ffn, SLOTS: tl.constexpr, HAS_BIAS: tl.constexpr,
                        HAS_RESIDUAL: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, PDL: tl.constexpr):
    """out[row, block] = residual + sum over the row's SLOTS choices of weight * (the
    expert's down rows of the block against its hidden row, plus their biases where
    HAS_BIAS)."""
    row, block = tl.program_id(0), tl.program_id(1)
    if PDL:
        tl.extra.cuda.gdc_wait()               # hidden, the experts and weights are final
        tl.extra.cuda.gdc_launch_dependents()
    out_cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
    total = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for slot in tl.static_range(SLOTS):
        pair = row * SLOTS + slot
        expert = tl.load(experts_ptr + pair)
        expert_w = w_ptr + expert.to(tl.int64) * dim * ffn
        hidden_row = hidden_ptr + pair.to(tl.int64) * ffn
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        for start in range(0, ffn, BLOCK_K):
            cols = start + tl.arange(0, BLOCK_K)
            h = tl.load(hidden_row + cols, mask=cols < ffn, other=0.0).to(tl.float32)
            w = tl.load(expert_w + out_cols[:, None] * ffn + cols[None, :],
                        mask=(out_cols[:, None] < dim) & (cols[None, :] < ffn), other=0.0)
            acc += w.to(tl.float32) * h[None, :]
        outputs = tl.sum(acc, 1)
        if HAS_BIAS:
            outputs += tl.load(bias_ptr + expert.to(tl.int64) * dim + out_cols,
                               mask=out_cols < dim, other=0.0).to(tl.float32)
        total += tl.load(weights_ptr + pair) * outputs
    if HAS_RESIDUAL:
        total += tl.load(residual_ptr + row.to(tl.int64) * dim + out_cols,
                         mask=out_cols < dim, other=0.0).to(tl.float32)
    tl.store(out_ptr + row.to(tl.int64) * dim + out_cols, total.to(out_ptr.dtype.element_ty),
             mask=out_cols < dim)


# Small tiles, many programs: at one row on an H100 (bf16, graph replays over weights
# rotated past L2, research/probe_experts.py --blocks, session 132), gate/up programs of 8
# output columns (16 weight rows) by 128 and down programs of 4 by 512 read the chosen
# experts at 69.7% of copy bandwidth for OLMoE's shape (64 x 1024-wide experts of 2048),
# 60.6% for Qwen3-30B-A3B's (128 x 768) and 95.8% for Mixtral's (8 x 14336 of 4096), the
# best of seven shapes on all three; a rule of the widest tile that keeps two programs an
# SM (16-32 columns, tiles of 4096 weights) read 62.3%, 50.1% and 81.6%.
_TILE_WEIGHTS = 2048
_WIDEST = {2: 8, 1: 4}   # weight rows an output column reads (gate|up's 2, down's 1) -> it


def _block_shape(outputs: int, rows_an_output: int, inputs: int, programs_a_block: int,
                 element_size: int, device: torch.device) -> tuple[int, int]:
    """(BLOCK_N, BLOCK_K): BLOCK_N _WIDEST's, halved (to 4) while that leaves fewer than
    two programs an SM; BLOCK_K what makes a tile of _TILE_WEIGHTS weights, at least 256
    bytes of a weight row and at most the row."""
    sms = sm_count(device) or _ASSUMED_SMS
    block_n = _WIDEST[rows_an_output]
    while block_n > 4 and triton.cdiv(outputs, block_n) * programs_a_block < 2 * sms:
        block_n //= 2
    block_k = max(256 // element_size, _TILE_WEIGHTS // (block_n * rows_an_output))
    return block_n, min(block_k, max(triton.next_power_of_2(inputs), 256 // element_size))


# Steps of more rows (a prefill's) take models/experts.py's dense loop over the experts.
KERNEL_ROWS = MAX_ROWS
# A step runs _experts_by_expert.py's kernels, which read each expert the rows take once,
# where its rows are expected to take each expert they take this many times or more (the
# pair kernels read an expert once a row taking it, but a block's pairs side by side, so a
# row taking an expert already read finds much of it in L2). One layer, bf16 on an H100
# (research/probe_experts.py --layouts, session 135, the rows routed once a step), time
# by expert against pairs: under twice (OLMoE's 64 experts, 8 a row, at 2-8 rows, 1.1-1.5
# times; Qwen3-30B-A3B's 128, 8 a row, at 2-16, 1.0-1.6; Mixtral's 8, 2 a row, at 2-4,
# 1.1-1.5) the pairs took 0.86-1.0 of by expert's time (the two equal for Mixtral at 4
# rows and Qwen3 at 2); at 2.2 times and more by expert took 0.82-0.94 of the pairs'
# (OLMoE at 16 rows 312 to 345 us, Qwen3 at 32 518 to 554, Mixtral at 8 857 to 1047),
# and 0.31-0.69 further out (OLMoE at 32 rows, Mixtral at 16 and 32).
BY_EXPERT_SHARING = 2.0
# (BLOCK_N, BLOCK_K) of the by-expert kernels, gate/up's ((gate, up) pairs) and down's,
# for tiles of up to 16 rows and of more: the best of six shapes on those three at 1-16
# rows and at 32 (the same runs), gate/up's 1.1-2x faster than the 16 x 128 first tried.
# Down's at up to 16 rows, once the rows were routed once a step and down split: 32 x 128
# against session 133's 16 x 512 took 0.92-0.995 of the time at every point of session
# 135's probe (OLMoE, Qwen3-30B-A3B, Mixtral at 2-16 rows; OLMoE at 16 rows 286 to 312 us).
_BY_EXPERT_BLOCKS = {(2, False): (32, 64), (1, False): (32, 128),
                     (2, True): (64, 64), (1, True): (16, 256)}


# The route kernel's rows at a time: tiles of this many (row, expert) scores at most.
_ROUTE_TILE = 4096


def _by_expert_blocks(rows_an_output: int, inputs: int, rows: int) -> tuple[int, int]:
    """(BLOCK_N, BLOCK_K) of a by-expert kernel (gate/up's: rows_an_output 2) at `rows`
    rows: _BY_EXPERT_BLOCKS', BLOCK_K at most the row."""
    block_n, block_k = _BY_EXPERT_BLOCKS[rows_an_output, _rows_block(rows) > 16]
    return block_n, min(block_k, max(triton.next_power_of_2(inputs), 16))


# The by-expert down's programs: its blocks of output columns split along the inner width
# into parts of their own until there are this many programs an SM (each walks every
# expert taken, one after the other: few programs leave the memory system idle), its parts
# summed by sum_parts_kernel (in order: the same sums every replay). Where the rule runs
# by expert (session 135's probe, H100), 4 against 0 (unsplit), 2 and 8: OLMoE at 16 rows
# 312 us (350, 325, 412), Qwen3-30B-A3B at 32 519 (542, 517, 538); Mixtral at 8 rows
# 845-857 us whatever the split (down blocks 16 wide then).
_DOWN_PROGRAMS_AN_SM = 4
_SUM_BLOCK = 1024


def _down_split(blocks: int, ffn: int, block_k: int, device: torch.device
                ) -> tuple[int, int, int]:
    """(parts, inner columns a part, BLOCK_K) of the by-expert down over `blocks` blocks
    of output columns: parts up to _DOWN_PROGRAMS_AN_SM programs an SM, each of whole
    BLOCK_K tiles (BLOCK_K no wider than a part, 16 at least)."""
    sms = sm_count(device) or _ASSUMED_SMS
    parts = max(1, min(_DOWN_PROGRAMS_AN_SM * sms // blocks, triton.cdiv(ffn, 16)))
    block_k = min(block_k, max(16, triton.next_power_of_2(triton.cdiv(ffn, parts))))
    width = triton.cdiv(triton.cdiv(ffn, parts), block_k) * block_k
    return triton.cdiv(ffn, width), width, block_k


def _by_expert(rows: int, n_experts: int, k: int, shared: int) -> bool:
    """Whether a step of `rows` rows, each taking k of n_experts and `shared` parts of a
    shared expert, runs the by-expert kernels: pairs over the distinct experts expected
    (rows taking theirs at random, as LlamaConfig.expert_bytes counts) of
    BY_EXPERT_SHARING or more, and rows the kernels' tiles hold."""
    distinct = n_experts * (1 - (1 - k / n_experts) ** rows) + shared
    return rows <= MAX_ROWS and rows * (k + shared) >= BY_EXPERT_SHARING * distinct


def _rows_block(rows: int) -> int:
    """The by-expert kernels' rows tile: the rows, padded to a power of two of 16 or more
    (an mma's least)."""
    return max(16, triton.next_power_of_2(rows))


def _dot_precision(weight: torch.Tensor) -> str:
    """The by-expert kernels' mma precision: fp32 weights at about fp32's accuracy."""
    return "tf32x3" if weight.dtype == torch.float32 else "tf32"


def _fits(bias: torch.Tensor | None, shape: tuple[int, ...]) -> bool:
    """Whether an optional bias is absent or contiguous of `shape`."""
    return bias is None or (bias.shape == shape and bias.is_contiguous())


def _pdl(device: torch.device, programs: int) -> bool:
    """PDL for a grid of one wave (as kernels/xielu.py's: the next kernel's programs,
    started early, would otherwise hold SMs this grid's later waves need)."""
    return PDL_ENABLED and supports_pdl(device) and programs <= (sm_count(device) or 0)


def expert_gate_up(x: torch.Tensor, scores: torch.Tensor, w_gate_up: torch.Tensor,
                   experts_per_token: int, renormalized: bool, activation: str, eps: float,
                   shared: int = 0, bias: torch.Tensor | None = None,
                   scoring: str = "softmax", choice_bias: torch.Tensor | None = None,
                   routed_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's experts chosen from its router scores (rows, n_experts), and their
    act(gate) * up of rms_norm(x) (x (rows, dim) contiguous, the norm's weight folded into
    w_gate_up (n_experts, 2 ffn, dim), gate|up rows interleaved). With `shared` parts of a
    shared expert (split along its inner width into experts of ffn each), w_gate_up's last
    `shared` experts are those parts, which every row takes: weighted by sigmoid of a score
    after the routed ones where scores has one (rows, n_experts + 1: Qwen 2 MoE's), else
    whole (Granite MoE's shared MLP). `bias` (n_experts, 2 ffn), interleaved as the rows:
    each expert's gate|up biases (GPT-OSS's). The routed experts' probabilities are the
    softmax of the scores, or each score's sigmoid where `scoring` is "sigmoid", the
    experts then chosen by probability plus `choice_bias` (n_experts,) fp32 where given
    (MiniMax-M2's and DeepSeek V3's correction of each expert's load: it chooses, it does not
    weight); the routed experts' weights times `routed_scale` (DeepSeek V3's
    routed_scaling_factor).
    Returns (hidden (rows slots, ffn) in x's dtype, weights (rows, slots) fp32, experts
    (rows, slots) int32), slots = k + shared. For the model's own tensors: shapes checked,
    no autograd."""
    rows, dim = x.shape
    stacked, two_ffn, _ = w_gate_up.shape
    n_experts = stacked - shared
    k, ffn, slots = experts_per_token, two_ffn // 2, experts_per_token + shared
    if activation not in EXPERT_GLU_ACTIVATIONS:
        raise ValueError(f"the experts' activation must be one of {EXPERT_GLU_ACTIVATIONS}, "
                         f"got {activation!r}")
    if not 1 <= k <= min(n_experts, MAX_EXPERTS_PER_TOKEN):
        raise ValueError(f"experts_per_token must be in 1.."
                         f"{min(n_experts, MAX_EXPERTS_PER_TOKEN)}, got {k}")
    if scoring not in ("softmax", "sigmoid"):
        raise ValueError(f"scoring must be 'softmax' or 'sigmoid', got {scoring!r}")
    if choice_bias is not None and (
            scoring != "sigmoid" or choice_bias.shape != (n_experts,)
            or choice_bias.dtype != torch.float32 or choice_bias.device != x.device
            or not choice_bias.is_contiguous()):
        raise ValueError(f"choice_bias must be a contiguous fp32 ({n_experts},) on "
                         f"{x.device}, with sigmoid scoring; got {choice_bias.dtype} "
                         f"{tuple(choice_bias.shape)} on {choice_bias.device}, {scoring}")
    scored = shared > 0 and scores.shape[-1] == n_experts + 1
    if (scores.shape != (rows, n_experts + scored) or w_gate_up.shape[2] != dim
            or two_ffn % 2 or not _fits(bias, (stacked, two_ffn))
            or not (x.is_contiguous() and scores.is_contiguous()
                    and w_gate_up.is_contiguous())):
        raise ValueError(f"expert_gate_up: x {tuple(x.shape)}, scores {tuple(scores.shape)}, "
                         f"w_gate_up {tuple(w_gate_up.shape)} (all contiguous) do not fit")
    hidden = torch.empty((rows * slots, ffn), dtype=x.dtype, device=x.device)
    weights = torch.empty((rows, slots), dtype=torch.float32, device=x.device)
    experts = torch.empty((rows, slots), dtype=torch.int32, device=x.device)
    if not rows:
        return hidden, weights, experts
    routing = dict(TOP_K=k, SHARED=shared, SHARED_SCORED=scored, RENORMALIZED=renormalized,
                   SIGMOID=scoring == "sigmoid", HAS_CHOICE_BIAS=choice_bias is not None,
                   choice_bias_ptr=choice_bias if choice_bias is not None else scores,
                   routed_scale=float(routed_scale))
    bias_args = dict(bias_ptr=bias if bias is not None else w_gate_up,
                     HAS_BIAS=bias is not None)
    if _by_expert(rows, n_experts, k, shared):
        # the rows routed once, by a kernel of their own, for every expert's programs;
        # the gate/up programs run on the experts taken only, packed at the grid's start
        rows_block, e_block = _rows_block(rows), triton.next_power_of_2(stacked)
        taken = torch.empty(1 + stacked, dtype=torch.int32, device=x.device)
        row_slots = torch.empty((stacked, rows_block), dtype=torch.int32, device=x.device)
        pdl = _pdl(x.device, 1)
        route_kernel[(1,)](
            experts, weights, taken, row_slots, scores, rows=rows, n_experts=n_experts,
            stacked=stacked, E_BLOCK=e_block, ROWS_BLOCK=rows_block,
            CHUNK=min(rows_block, max(1, _ROUTE_TILE // e_block)), PDL=pdl, num_warps=4,
            **routing, **({"launch_pdl": True} if pdl else {}))
        launched(x.device, pdl, (weights, experts, taken, row_slots))
        block_n, block_k = _by_expert_blocks(2, dim, rows)
        grid = (triton.cdiv(ffn, block_n), min(stacked, rows * slots))
        pdl = _pdl(x.device, grid[0] * grid[1])
        gate_up_by_expert_kernel[grid](
            hidden, taken, row_slots, x, w_gate_up, rows=rows, dim=dim, ffn=ffn, eps=eps,
            SLOTS=slots, ROWS_BLOCK=rows_block, ACTIVATION=activation,
            DOT_PRECISION=_dot_precision(w_gate_up),
            UPCAST_DOT=INTERPRET and x.dtype == torch.bfloat16, BLOCK_N=block_n,
            BLOCK_K=block_k, PDL=pdl, num_warps=4, **bias_args,
            **({"launch_pdl": True} if pdl else {}))
    else:
        block_n, block_k = _block_shape(ffn, 2, dim, rows * slots, x.element_size(), x.device)
        grid = (rows * slots, triton.cdiv(ffn, block_n))
        pdl = _pdl(x.device, grid[0] * grid[1])
        _expert_gate_up_kernel[grid](
            hidden, weights, experts, x, scores, w_ptr=w_gate_up, dim=dim, ffn=ffn,
            n_experts=n_experts, eps=eps, E_BLOCK=triton.next_power_of_2(n_experts),
            ACTIVATION=activation, BLOCK_N=block_n, BLOCK_K=block_k, PDL=pdl,
            num_warps=4, **routing, **bias_args,
            **({"launch_pdl": True} if pdl else {}))
    launched(x.device, pdl, (hidden, weights, experts))
    return hidden, weights, experts


def expert_down(hidden: torch.Tensor, weights: torch.Tensor, experts: torch.Tensor,
                w_down: torch.Tensor, residual: torch.Tensor | None = None,
                out: torch.Tensor | None = None, shared: int = 0,
                bias: torch.Tensor | None = None) -> torch.Tensor:
    """residual + sum_j weights[:, j] * (w_down[experts[:, j]] @ hidden's row of choice j
    + bias[experts[:, j]] where `bias` (n_experts, dim) is given), (rows, dim) in hidden's
    dtype, into `out` (contiguous) or a new tensor: expert_gate_up's outputs through the
    experts' down projections (n_experts (and `shared` parts, as expert_gate_up's), dim,
    ffn)."""
    rows, k = weights.shape
    _, dim, ffn = w_down.shape
    if (hidden.shape != (rows * k, ffn) or experts.shape != (rows, k)
            or not 0 <= shared < min(k, w_down.shape[0]) or not w_down.is_contiguous()
            or not _fits(bias, w_down.shape[:2])
            or (residual is not None and (residual.shape != (rows, dim)
                                          or not residual.is_contiguous()))):
        raise ValueError(f"expert_down: hidden {tuple(hidden.shape)}, weights "
                         f"{tuple(weights.shape)}, w_down {tuple(w_down.shape)} do not fit")
    if out is None:
        out = torch.empty((rows, dim), dtype=hidden.dtype, device=hidden.device)
    if not rows:
        return out
    common = dict(residual_ptr=residual if residual is not None else out,
                  HAS_RESIDUAL=residual is not None,
                  bias_ptr=bias if bias is not None else w_down, HAS_BIAS=bias is not None)
    if _by_expert(rows, w_down.shape[0] - shared, k - shared, shared):
        block_n, block_k = _by_expert_blocks(1, ffn, rows)
        split, part_width, block_k = _down_split(triton.cdiv(dim, block_n), ffn, block_k,
                                                 hidden.device)
        partial = (torch.empty((split, rows, dim), dtype=torch.float32, device=out.device)
                   if split > 1 else out)
        grid = (triton.cdiv(dim, block_n), split)
        pdl = _pdl(hidden.device, grid[0] * grid[1])
        down_by_expert_kernel[grid](
            out, partial, hidden, weights, experts, w_down, rows=rows, dim=dim, ffn=ffn,
            part_width=part_width, SPLIT=split, SLOTS=k,
            SLOTS_BLOCK=triton.next_power_of_2(k), ROWS_BLOCK=_rows_block(rows),
            DOT_PRECISION=_dot_precision(w_down),
            UPCAST_DOT=INTERPRET and hidden.dtype == torch.bfloat16, BLOCK_N=block_n,
            BLOCK_K=block_k, PDL=pdl, num_warps=4, **common,
            **({"launch_pdl": True} if pdl else {}))
        if split > 1:
            launched(hidden.device, pdl, (partial,))
            grid = (triton.cdiv(rows * dim, _SUM_BLOCK),)
            pdl = _pdl(hidden.device, grid[0])
            sum_parts_kernel[grid](out, partial, common["residual_ptr"], rows * dim,
                                   SPLIT=split, HAS_RESIDUAL=residual is not None,
                                   BLOCK=_SUM_BLOCK, PDL=pdl, num_warps=4,
                                   **({"launch_pdl": True} if pdl else {}))
    else:
        block_n, block_k = _block_shape(dim, 1, ffn, rows, hidden.element_size(),
                                        hidden.device)
        grid = (rows, triton.cdiv(dim, block_n))
        pdl = _pdl(hidden.device, grid[0] * grid[1])
        _expert_down_kernel[grid](
            out, hidden, weights, experts, w_down, dim=dim, ffn=ffn, SLOTS=k,
            BLOCK_N=block_n, BLOCK_K=block_k, PDL=pdl, num_warps=4, **common,
            **({"launch_pdl": True} if pdl else {}))
    launched(hidden.device, pdl, (out,))
    return out
