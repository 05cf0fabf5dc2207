"""The start of a decode step in one kernel: each row's token embedding (plus its position's
embedding, where the model learned a table of them: GPT-2's, OPT's), and the length its
attention reads (its position + 1).

    decode_inputs(tokens, positions, table, hidden_out=x, lengths_out=lengths)
    decode_inputs(tokens, positions, table, hidden_out=x, lengths_out=lengths,
                  position_table=wpe)

In PyTorch this is two kernels (the embedding gather, positions + 1) that never release the
next kernel early; here one, launched with programmatic dependent launch, which releases the
first layer's projection at once so that it streams its weights while the rows are copied.
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

BLOCK_COLUMNS = 1024  # embedding values a program copies: 8 a thread of 4 warps


@triton.jit
def _decode_inputs_kernel(hidden_ptr, stride_hm, table_ptr, stride_tv, tokens_ptr,
                          positions_ptr, lengths_ptr, vocab, dim, position_table_ptr,
                          stride_pv, position_rows, PDL: tl.constexpr, BLOCK: tl.constexpr,
                          POSITIONS: tl.constexpr):
    """Program (r, c): hidden[r, c-th block] = table[tokens[r], c-th block] (+ position_table
    [positions[r], c-th block] with POSITIONS), NaN where tokens[r] is outside [0, vocab)
    or the position outside the position table (a wrong id shows in every logit rather
    than reading another row); program (r, 0) also writes lengths[r] = positions[r] + 1."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # tokens and positions are final
        tl.extra.cuda.gdc_launch_dependents()  # the first projection may stream its weights
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    # the row's id in every lane: a scalar mask & a block is refused by the interpreter
    token = tl.load(tokens_ptr + row + tl.zeros([BLOCK], tl.int32)).to(tl.int64)
    offs = block * BLOCK + tl.arange(0, BLOCK)
    values = embedding_row(table_ptr, stride_tv, token, vocab, offs, dim)
    if POSITIONS:
        position = tl.load(positions_ptr + row + tl.zeros([BLOCK], tl.int32)).to(tl.int64)
        values += embedding_row(position_table_ptr, stride_pv, position, position_rows,
                                offs, dim)
    tl.store(hidden_ptr + row * stride_hm + offs, values.to(hidden_ptr.dtype.element_ty),
             mask=offs < dim)
    if block == 0:
        tl.store(lengths_ptr + row, tl.load(positions_ptr + row) + 1)


@triton.jit
def embedding_row(table_ptr, stride_tv, index, rows, offs, dim):
    """table[index, offs] (index the same in every lane), NaN where index is outside
    [0, rows): one wrong id or position never reads another row. In fp32 where two rows
    are summed: one rounding of the sum, as PyTorch's add of two rows rounds it."""
    known = (index >= 0) & (index < rows)
    return tl.load(table_ptr + tl.where(known, index, 0) * stride_tv + offs,
                   mask=(offs < dim) & known, other=float("nan")).to(tl.float32)


def _launch_decode_inputs(tokens: torch.Tensor, positions: torch.Tensor, table: torch.Tensor,
                          hidden_out: torch.Tensor, lengths_out: torch.Tensor,
                          position_table: torch.Tensor | None) -> None:
    rows, dim = hidden_out.shape
    block = min(BLOCK_COLUMNS, triton.next_power_of_2(dim))
    pdl = PDL_ENABLED and supports_pdl(table.device)
    positioned = position_table if position_table is not None else table   # a placeholder
    _decode_inputs_kernel[(rows, triton.cdiv(dim, block))](
        hidden_out, hidden_out.stride(0), table, table.stride(0), tokens, positions,
        lengths_out, table.shape[0], dim, positioned, positioned.stride(0),
        positioned.shape[0], PDL=pdl, BLOCK=block, POSITIONS=position_table is not None,
        num_warps=4, **({"launch_pdl": True} if pdl else {}))
    launched(table.device, pdl, (hidden_out, lengths_out))


_run_decode_inputs = custom_op("decode_inputs", _launch_decode_inputs,
                               mutates=("hidden_out", "lengths_out"))


def decode_inputs(tokens: torch.Tensor, positions: torch.Tensor, table: torch.Tensor, *,
                  hidden_out: torch.Tensor, lengths_out: torch.Tensor,
                  position_table: torch.Tensor | None = None) -> None:
    """For each row r: hidden_out[r] = table[tokens[r]] (NaN where the id is outside the
    table: ids are read on the device, unchecked), plus position_table[positions[r]] where
    one is given (NaN past its rows), lengths_out[r] = positions[r] + 1. tokens, positions,
    lengths_out: contiguous int32 or int64 (rows,), lengths_out in positions' dtype; table
    (vocab, dim), position_table (positions, dim) and hidden_out (rows, dim) in table's
    dtype, all with a unit column stride; all on one device."""
    check_table(table)
    rows = tokens.shape[0] if isinstance(tokens, torch.Tensor) and tokens.ndim == 1 else -1
    for name, t in (("tokens", tokens), ("positions", positions),
                    ("lengths_out", lengths_out)):
        if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int32, torch.int64) \
                or t.shape != (rows,) or t.device != table.device or not t.is_contiguous():
            raise ValueError(f"{name} must be a contiguous int32 or int64 tensor of shape "
                             f"(rows,) on {table.device}, as tokens is")
    if lengths_out.dtype != positions.dtype:
        raise ValueError(f"lengths_out has dtype {lengths_out.dtype}, positions "
                         f"{positions.dtype}: give them one")
    check_hidden_out(hidden_out, table, rows)
    check_position_table(position_table, table)
    if rows:
        _run_decode_inputs(tokens, positions, table, hidden_out, lengths_out, position_table)


def check_table(table: torch.Tensor) -> None:
    """Raise unless `table` is a non-empty (vocab, dim) tensor with a unit column stride."""
    check_tensor("table", table)
    if table.ndim != 2 or table.stride(1) != 1 or 0 in table.shape:
        raise ValueError(f"table must be a non-empty (vocab, dim) tensor with a unit column "
                         f"stride, got shape {tuple(table.shape)}")


def check_hidden_out(hidden_out: torch.Tensor, table: torch.Tensor, rows: int) -> None:
    """Raise unless `hidden_out` can take `rows` rows of `table`."""
    if (not isinstance(hidden_out, torch.Tensor) or hidden_out.dtype != table.dtype
            or hidden_out.shape != (rows, table.shape[1]) or hidden_out.device != table.device
            or hidden_out.stride(1) != 1):
        raise ValueError(f"hidden_out must be a ({rows}, {table.shape[1]}) {table.dtype} "
                         f"tensor with a unit column stride on {table.device}")


def check_position_table(position_table: torch.Tensor | None, table: torch.Tensor) -> None:
    """Raise unless `position_table` is None or a table of `table`'s width, dtype and
    device."""
    if position_table is None:
        return
    check_table(position_table)
    if (position_table.dtype != table.dtype or position_table.shape[1] != table.shape[1]
            or position_table.device != table.device):
        raise ValueError(f"position_table must be a (positions, {table.shape[1]}) "
                         f"{table.dtype} tensor on {table.device}, as table is; got "
                         f"{tuple(position_table.shape)} {position_table.dtype} on "
                         f"{position_table.device}")


def decode_inputs_ref(tokens, positions, table, *, hidden_out, lengths_out,
                      position_table=None) -> None:
    """The same in PyTorch (ids and positions outside their tables give NaN rows)."""
    hidden_out.copy_(_rows_or_nan(table, tokens))
    if position_table is not None:
        hidden_out.add_(_rows_or_nan(position_table, positions))
    lengths_out.copy_(positions + 1)


def _rows_or_nan(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    known = (index >= 0) & (index < table.shape[0])
    rows = table[torch.where(known, index, 0)]
    rows[~known] = float("nan")
    return rows
