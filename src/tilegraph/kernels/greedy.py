"""The end of a greedy decode step in one kernel: each row's argmax over the vocabulary,
written as the row's next token, into its token history, and its position moved on.

    greedy_step(logits, positions, slots, history, tokens_out=tokens, positions_out=positions)
    greedy_step(..., next_inputs=(table, hidden, lengths))   # and what decode_inputs writes
    greedy_step(..., next_inputs=(table, hidden, lengths), position_table=wpe)

In PyTorch this is four kernels (argmax, the history write, two position updates); here one,
launched with programmatic dependent launch after the LM head. tokens_out and positions_out
may be the step's own inputs, so a captured decode step feeds itself (GraphRunner.again).
With next_inputs it also writes the next step's embeddings and lengths, so that step starts
at its first projection rather than with a kernel of its own: 4-5 us off a TinyLlama or
Llama-3.2-1B token at batch 1, nothing measurable on the other shapes timed (H200, notes/
models.md, session 82).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._checks import check_tensor
from ._launch import supports_pdl
from ._ops import custom_op
from ._pdl import ENABLED as PDL_ENABLED
from ._pdl import launched
from ._split_workspace import split_workspace
from .decode_inputs import (
    check_hidden_out,
    check_position_table,
    check_table,
    decode_inputs_ref,
    embedding_row,
)

BLOCK_VOCAB = 2048  # logits a program reads per step of its loop: 16 a thread of 4 warps
MAX_CHUNKS = 128    # a row's vocabulary is split into at most this many programs' chunks


def chunk_size(vocab: int) -> int:
    """Logits one program scans. One program scanning a whole row waits on its loads one
    step at a time: 151,936 logits (Qwen2) took it about 35 us a token. Chunks of at least
    BLOCK_VOCAB, at most MAX_CHUNKS of them a row, put every chunk's load in flight at once;
    the last program of a row to finish picks among the chunks' maxima. Up to 262,144 logits
    a chunk is one block: 64 chunks gave Qwen2's two blocks a program, one load after the
    other (a greedy step 3.40 -> 2.86 us with 128 at batch 1, H200; no change at 8 rows or
    other vocabularies; research/probe_greedy_chunks.py)."""
    return max(BLOCK_VOCAB, triton.next_power_of_2(triton.cdiv(vocab, MAX_CHUNKS)))


@triton.jit
def _greedy_step_kernel(logits_ptr, stride_lr, positions_ptr, slots_ptr, history_ptr,
                        stride_hs, tokens_out_ptr, positions_out_ptr, partial_ptr, count_ptr,
                        vocab, max_seq, table_ptr, stride_tv, hidden_ptr, stride_hm,
                        lengths_ptr, table_rows, dim, position_table_ptr, stride_pv,
                        position_rows, PDL: tl.constexpr, BLOCK: tl.constexpr,
                        CHUNK: tl.constexpr, CHUNKS_P2: tl.constexpr,
                        NEXT_INPUTS: tl.constexpr, BLOCK_DIM: tl.constexpr,
                        POSITIONS: tl.constexpr):
    """Program (r, c): the maximum of logits[r] over chunk c and where it is first (a NaN
    counts as +inf, so a row with one picks it, as torch.argmax does). With one chunk a row
    it finishes the row itself; else it leaves both in partial_ptr, and the last of the
    row's programs to arrive (counted in count_ptr[r], set back to zero after) finishes it:
    t = the first chunk maximum equal to the greatest; tokens_out[r] = t; p = positions[r] +
    1; history[slots[r], p] = t where p < max_seq; positions_out[r] = p; with NEXT_INPUTS
    also hidden[r] = table[t] (NaN where t >= table_rows; plus position_table[p] with
    POSITIONS, NaN past its rows) and lengths[r] = p + 1."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # the logits are final
        tl.extra.cuda.gdc_launch_dependents()
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    chunks = tl.num_programs(1)
    offs = tl.arange(0, BLOCK)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    best_at = tl.zeros([BLOCK], tl.int32)
    for v0 in range(chunk * CHUNK, tl.minimum(chunk * CHUNK + CHUNK, vocab), BLOCK):
        x = tl.load(logits_ptr + row * stride_lr + v0 + offs, mask=offs < vocab - v0,
                    other=float("-inf")).to(tl.float32)
        x = tl.where(x != x, float("inf"), x)
        better = x > best                        # strict: each lane keeps its first maximum
        best = tl.where(better, x, best)
        best_at = tl.where(better, v0 + offs, best_at)
    top = tl.max(best, axis=0)
    token = tl.min(tl.where(best == top, best_at, vocab), axis=0)   # the first of equals
    if CHUNKS_P2 == 1:
        _finish_row(token, row, positions_ptr, slots_ptr, history_ptr, stride_hs,
                    tokens_out_ptr, positions_out_ptr, max_seq, table_ptr, stride_tv,
                    hidden_ptr, stride_hm, lengths_ptr, table_rows, dim, position_table_ptr,
                    stride_pv, position_rows, NEXT_INPUTS, BLOCK_DIM, POSITIONS)
    else:
        # the row's partials: maxima (CHUNKS_P2,), then their places (exact in fp32: the
        # launcher keeps vocab below 2^24)
        partials = partial_ptr + row * 2 * CHUNKS_P2
        tl.store(partials + chunk, top)
        tl.store(partials + CHUNKS_P2 + chunk, token.to(tl.float32))
        tl.debug_barrier()  # every thread's partials are out before the count says so
        arrived = tl.atomic_add(count_ptr + row, 1, sem="acq_rel")
        if arrived == chunks - 1:
            offs_c = tl.arange(0, CHUNKS_P2)
            used = offs_c < chunks
            maxima = tl.load(partials + offs_c, mask=used, other=float("-inf"),
                             cache_modifier=".cg")
            places = tl.load(partials + CHUNKS_P2 + offs_c, mask=used, other=0.0,
                             cache_modifier=".cg").to(tl.int32)
            top = tl.max(maxima, axis=0)
            token = tl.min(tl.where(maxima == top, places, vocab), axis=0)
            _finish_row(token, row, positions_ptr, slots_ptr, history_ptr, stride_hs,
                        tokens_out_ptr, positions_out_ptr, max_seq, table_ptr, stride_tv,
                        hidden_ptr, stride_hm, lengths_ptr, table_rows, dim,
                        position_table_ptr, stride_pv, position_rows, NEXT_INPUTS,
                        BLOCK_DIM, POSITIONS)
            tl.store(count_ptr + row, 0)  # zero for the next launch on this stream


@triton.jit
def _finish_row(token, row, positions_ptr, slots_ptr, history_ptr, stride_hs, tokens_out_ptr,
                positions_out_ptr, max_seq, table_ptr, stride_tv, hidden_ptr, stride_hm,
                lengths_ptr, table_rows, dim, position_table_ptr, stride_pv, position_rows,
                NEXT_INPUTS: tl.constexpr, BLOCK_DIM: tl.constexpr, POSITIONS: tl.constexpr):
    position = tl.load(positions_ptr + row) + 1
    slot = tl.load(slots_ptr + row).to(tl.int64)
    tl.store(tokens_out_ptr + row, token.to(tokens_out_ptr.dtype.element_ty))
    tl.store(history_ptr + slot * stride_hs + position,
             token.to(history_ptr.dtype.element_ty), mask=position < max_seq)
    tl.store(positions_out_ptr + row, position)
    if NEXT_INPUTS:
        # as decode_inputs writes them: a token past the table (a padded vocabulary's
        # column) gives a NaN row rather than another row
        offs = tl.arange(0, BLOCK_DIM)
        # the token in every lane: a scalar mask & a block is refused by the interpreter
        lanes = token.to(tl.int64) + tl.zeros([BLOCK_DIM], tl.int64)
        places = position.to(tl.int64) + tl.zeros([BLOCK_DIM], tl.int64)
        for d0 in range(0, dim, BLOCK_DIM):
            values = embedding_row(table_ptr + d0, stride_tv, lanes, table_rows, offs,
                                   dim - d0)
            if POSITIONS:
                values += embedding_row(position_table_ptr + d0, stride_pv, places,
                                        position_rows, offs, dim - d0)
            tl.store(hidden_ptr + row * stride_hm + d0 + offs, values, mask=offs < dim - d0)
        tl.store(lengths_ptr + row, position + 1)


def _launch(logits: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
            history: torch.Tensor, tokens_out: torch.Tensor, positions_out: torch.Tensor,
            next_inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
            position_table: torch.Tensor | None = None) -> None:
    rows, vocab = logits.shape
    chunk = chunk_size(vocab)
    chunks = triton.cdiv(vocab, chunk)
    partials = counters = tokens_out  # placeholders, never touched with one chunk a row
    if chunks > 1:
        chunks_p2 = triton.next_power_of_2(chunks)
        workspace = split_workspace(logits.device, rows * 2 * chunks_p2, rows)
        if workspace is None or vocab >= 2 ** 24:   # a capture found none: one program a row
            chunk, chunks = triton.next_power_of_2(vocab), 1
        else:
            partials, counters = workspace
    # without next inputs, placeholders that are never touched
    table, hidden, lengths = next_inputs or (logits, logits, tokens_out)
    dim = hidden.shape[1] if next_inputs else 1
    positioned = position_table if position_table is not None else table   # a placeholder
    pdl = PDL_ENABLED and supports_pdl(logits.device)
    _greedy_step_kernel[(rows, chunks)](
        logits, logits.stride(0), positions, slots, history, history.stride(0), tokens_out,
        positions_out, partials, counters, vocab, history.shape[1], table, table.stride(0),
        hidden, hidden.stride(0), lengths, table.shape[0], dim, positioned,
        positioned.stride(0), positioned.shape[0], PDL=pdl,
        BLOCK=min(BLOCK_VOCAB, chunk), CHUNK=chunk,
        CHUNKS_P2=triton.next_power_of_2(chunks), NEXT_INPUTS=next_inputs is not None,
        BLOCK_DIM=min(BLOCK_VOCAB, triton.next_power_of_2(dim)),
        POSITIONS=position_table is not None, num_warps=4,
        **({"launch_pdl": True} if pdl else {}))
    written = (history, tokens_out, positions_out, partials, counters)
    launched(logits.device, pdl, written + ((hidden, lengths) if next_inputs else ()))


def _launch_greedy_step(logits: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
                        history: torch.Tensor, tokens_out: torch.Tensor,
                        positions_out: torch.Tensor) -> None:
    _launch(logits, positions, slots, history, tokens_out, positions_out, None)


def _launch_greedy_step_and_inputs(logits: torch.Tensor, positions: torch.Tensor,
                                   slots: torch.Tensor, history: torch.Tensor,
                                   tokens_out: torch.Tensor, positions_out: torch.Tensor,
                                   table: torch.Tensor, hidden_out: torch.Tensor,
                                   lengths_out: torch.Tensor,
                                   position_table: torch.Tensor | None) -> None:
    _launch(logits, positions, slots, history, tokens_out, positions_out,
            (table, hidden_out, lengths_out), position_table)


_run_greedy_step = custom_op("greedy_step", _launch_greedy_step,
                             mutates=("history", "tokens_out", "positions_out"))
_run_greedy_step_and_inputs = custom_op(
    "greedy_step_and_inputs", _launch_greedy_step_and_inputs,
    mutates=("history", "tokens_out", "positions_out", "hidden_out", "lengths_out"))


def greedy_step(logits: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor,
                history: torch.Tensor, *, tokens_out: torch.Tensor,
                positions_out: torch.Tensor,
                next_inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
                position_table: torch.Tensor | None = None) -> None:
    """For each row r of logits (rows, vocab): tokens_out[r] = argmax; positions_out[r] =
    positions[r] + 1; history[slots[r], positions[r] + 1] = the token (skipped past
    history's last column). positions, slots, tokens_out, positions_out: contiguous int64
    (rows,); history: int64 (slots, max_seq) with unit column stride; all on logits' device.
    Slots are read on the device, unchecked: they must be below history's row count.

    next_inputs=(table, hidden_out, lengths_out): also what decode_inputs writes for the new
    tokens at the new positions, hidden_out[r] = table[token] (NaN past the table's rows)
    and lengths_out[r] = positions[r] + 2; table (vocab', dim) and hidden_out (rows, dim)
    in one dtype with unit column strides, lengths_out contiguous int64 (rows,).
    position_table (positions, dim), with next_inputs only: hidden_out[r] also adds its row
    positions[r] + 1 (NaN past its rows), as decode_inputs adds it."""
    check_tensor("logits", logits)
    if logits.ndim != 2 or logits.stride(1) != 1 or logits.shape[1] == 0:
        raise ValueError(f"logits must be (rows, vocab) with vocab > 0 and a unit column "
                         f"stride, got shape {tuple(logits.shape)}")
    rows = logits.shape[0]
    _check_rows(logits, rows, positions=positions, slots=slots, tokens_out=tokens_out,
                positions_out=positions_out)
    if not isinstance(history, torch.Tensor) or history.dtype != torch.int64 or \
            history.ndim != 2 or history.stride(1) != 1 or history.device != logits.device:
        raise ValueError(f"history must be an int64 (slots, max_seq) tensor with a unit "
                         f"column stride on {logits.device}")
    if next_inputs is not None:
        _check_next_inputs(logits, rows, *next_inputs)
        check_position_table(position_table, next_inputs[0])
    elif position_table is not None:
        raise ValueError("position_table is added to the next inputs: give next_inputs too")
    if not rows:
        return
    if next_inputs is None:
        _run_greedy_step(logits, positions, slots, history, tokens_out, positions_out)
    else:
        _run_greedy_step_and_inputs(logits, positions, slots, history, tokens_out,
                                    positions_out, *next_inputs, position_table)


def _check_rows(logits: torch.Tensor, rows: int, **named: torch.Tensor) -> None:
    for name, t in named.items():
        if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.shape != (rows,) \
                or t.device != logits.device or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous int64 tensor of shape ({rows},) "
                             f"on {logits.device}")


def _check_next_inputs(logits: torch.Tensor, rows: int, table: torch.Tensor,
                       hidden_out: torch.Tensor, lengths_out: torch.Tensor) -> None:
    check_table(table)
    if table.device != logits.device:
        raise ValueError(f"table is on {table.device}, logits on {logits.device}")
    check_hidden_out(hidden_out, table, rows)
    _check_rows(logits, rows, lengths_out=lengths_out)


def greedy_step_ref(logits, positions, slots, history, *, tokens_out, positions_out,
                    next_inputs=None, position_table=None) -> None:
    """The same in PyTorch."""
    tokens = logits.argmax(dim=-1)
    following = positions + 1
    keep = following < history.shape[1]
    history[slots[keep], following[keep]] = tokens[keep]
    if next_inputs is not None:
        table, hidden_out, lengths_out = next_inputs
        decode_inputs_ref(tokens, following, table, hidden_out=hidden_out,
                          lengths_out=lengths_out, position_table=position_table)
    tokens_out.copy_(tokens)
    positions_out.copy_(following)
