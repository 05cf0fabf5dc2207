"""The start of a decode step in one kernel: each row's token embedding, and the length its
attention reads (its position + 1).

    decode_inputs(tokens, positions, table, hidden_out=x, lengths_out=lengths)

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
                          positions_ptr, lengths_ptr, vocab, dim,
                          PDL: tl.constexpr, BLOCK: tl.constexpr):
    """Program (r, c): hidden[r, c-th block] = table[tokens[r], c-th block], NaN where
    tokens[r] is outside [0, vocab) (a wrong id shows in every logit rather than reading
    another row); program (r, 0) also writes lengths[r] = positions[r] + 1."""
    if PDL:
        tl.extra.cuda.gdc_wait()               # tokens and positions are final
        tl.extra.cuda.gdc_launch_dependents()  # the first projection may stream its weights
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    # the row's id in every lane: a scalar mask & a block is refused by the interpreter
    token = tl.load(tokens_ptr + row + tl.zeros([BLOCK], tl.int32)).to(tl.int64)
    known = (token >= 0) & (token < vocab)
    offs = block * BLOCK + tl.arange(0, BLOCK)
    values = tl.load(table_ptr + tl.where(known, token, 0) * stride_tv + offs,
                     mask=(offs < dim) & known, other=float("nan"))
    tl.store(hidden_ptr + row * stride_hm + offs, values, mask=offs < dim)
    if block == 0:
        tl.store(lengths_ptr + row, tl.load(positions_ptr + row) + 1)


def _launch_decode_inputs(tokens: torch.Tensor, positions: torch.Tensor, table: torch.Tensor,
                          hidden_out: torch.Tensor, lengths_out: torch.Tensor) -> None:
    rows, dim = hidden_out.shape
    block = min(BLOCK_COLUMNS, triton.next_power_of_2(dim))
    pdl = PDL_ENABLED and supports_pdl(table.device)
    _decode_inputs_kernel[(rows, triton.cdiv(dim, block))](
        hidden_out, hidden_out.stride(0), table, table.stride(0), tokens, positions,
        lengths_out, table.shape[0], dim, PDL=pdl, BLOCK=block, num_warps=4,
        **({"launch_pdl": True} if pdl else {}))
    launched(table.device, pdl, (hidden_out, lengths_out))


_run_decode_inputs = custom_op("decode_inputs", _launch_decode_inputs,
                               mutates=("hidden_out", "lengths_out"))


def decode_inputs(tokens: torch.Tensor, positions: torch.Tensor, table: torch.Tensor, *,
                  hidden_out: torch.Tensor, lengths_out: torch.Tensor) -> None:
    """For each row r: hidden_out[r] = table[tokens[r]] (NaN where the id is outside the
    table: ids are read on the device, unchecked), lengths_out[r] = positions[r] + 1.
    tokens, positions, lengths_out: contiguous int32 or int64 (rows,), lengths_out in
    positions' dtype; table (vocab, dim) and hidden_out (rows, dim) in table's dtype, both
    with a unit column stride; all on one device."""
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
    if rows:
        _run_decode_inputs(tokens, positions, table, hidden_out, lengths_out)


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


def decode_inputs_ref(tokens, positions, table, *, hidden_out, lengths_out) -> None:
    """The same in PyTorch (ids outside the table give NaN rows)."""
    known = (tokens >= 0) & (tokens < table.shape[0])
    hidden_out.copy_(table[torch.where(known, tokens, 0)])
    hidden_out[~known] = float("nan")
    lengths_out.copy_(positions + 1)
