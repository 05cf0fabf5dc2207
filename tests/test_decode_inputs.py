"""The start of a decode step (kernels/decode_inputs.py) against PyTorch's gather and add."""

import pytest
import torch

from tilegraph.kernels.decode_inputs import decode_inputs, decode_inputs_ref
from tilegraph.testing import assert_one_rounding, randn


def _outputs(rows, dim, dtype, device, index_dtype=torch.int64):
    hidden = torch.full((rows, dim), float("nan"), dtype=dtype, device=device)   # poisoned
    return hidden, torch.full((rows,), -7, dtype=index_dtype, device=device)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, vocab, dim", [(1, 37, 24), (3, 1000, 1025), (5, 67, 2048),
                                              (16, 301, 3000)])
def test_rows_of_the_table_and_lengths(rows, vocab, dim, dtype, device):
    table = randn(vocab, dim, dtype=dtype, device=device)
    tokens = torch.randint(0, vocab, (rows,), device=device)
    tokens[-1] = vocab - 1
    positions = torch.randint(0, 500, (rows,), device=device)
    hidden, lengths = _outputs(rows, dim, dtype, device)
    decode_inputs(tokens, positions, table, hidden_out=hidden, lengths_out=lengths)
    assert torch.equal(hidden, table[tokens])
    assert torch.equal(lengths, positions + 1)


def test_int32_ids_a_strided_table_and_ids_outside_it(device):
    table = randn(50, 80, device=device)[:, :64]      # rows 80 apart
    tokens = torch.tensor([3, -1, 50, 49], dtype=torch.int32, device=device)
    positions = torch.tensor([0, 5, 9, 2], dtype=torch.int32, device=device)
    hidden, lengths = _outputs(4, 64, torch.float32, device, torch.int32)
    decode_inputs(tokens, positions, table, hidden_out=hidden, lengths_out=lengths)
    ref_hidden, ref_lengths = _outputs(4, 64, torch.float32, device, torch.int32)
    decode_inputs_ref(tokens, positions, table, hidden_out=ref_hidden, lengths_out=ref_lengths)
    assert torch.equal(hidden[[0, 3]], table[[3, 49]])
    assert hidden[[1, 2]].isnan().all(), "an id outside the table gives a NaN row"
    assert torch.equal(hidden.nan_to_num(), ref_hidden.nan_to_num())
    assert lengths.tolist() == ref_lengths.tolist() == [1, 6, 10, 3]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, dim", [(1, 24), (3, 1025), (6, 2500)])
def test_learned_positions_added(rows, dim, dtype, device):
    """GPT-2's and OPT's inputs: the token's row plus the position's row, rounded once as
    PyTorch's add rounds it; a position past the position table gives a NaN row."""
    table, position_table = randn(97, dim, dtype=dtype, device=device), \
        randn(61, dim, dtype=dtype, device=device)
    tokens = torch.randint(0, 97, (rows,), device=device)
    positions = torch.randint(0, 61, (rows,), device=device)
    positions[-1] = 61 if rows > 1 else 60
    hidden, lengths = _outputs(rows, dim, dtype, device)
    decode_inputs(tokens, positions, table, hidden_out=hidden, lengths_out=lengths,
                  position_table=position_table)
    ref_hidden, ref_lengths = _outputs(rows, dim, dtype, device)
    decode_inputs_ref(tokens, positions, table, hidden_out=ref_hidden,
                      lengths_out=ref_lengths, position_table=position_table)
    known = positions < 61
    assert hidden[~known].isnan().all() and ref_hidden[~known].isnan().all()
    assert_one_rounding(hidden[known], (table[tokens] + position_table[positions.clamp(
        max=60)])[known])
    assert_one_rounding(hidden[known], ref_hidden[known])
    assert torch.equal(lengths, positions + 1)


def test_one_row_column_of_a_matrix(device):
    """A (1,) column of a (1, n) matrix is contiguous with a stride of n: one row's ids
    taken so (Generator.score at batch 1) are read as they are."""
    table = randn(40, 16, device=device)
    ids = torch.tensor([[5, 7, 9]], device=device)
    tokens, positions = ids[:, 1], ids[:, 2]
    assert tokens.stride(0) == 3 and tokens.is_contiguous()
    hidden, lengths = _outputs(1, 16, torch.float32, device)
    decode_inputs(tokens, positions, table, hidden_out=hidden, lengths_out=lengths)
    assert torch.equal(hidden, table[[7]]) and lengths.tolist() == [10]


def test_bad_arguments_are_named(device):
    table = randn(10, 8, device=device)
    tokens = torch.zeros(2, dtype=torch.int64, device=device)
    hidden, lengths = _outputs(2, 8, torch.float32, device)
    with pytest.raises(ValueError, match="positions must be a contiguous"):
        decode_inputs(tokens, tokens[:1], table, hidden_out=hidden, lengths_out=lengths)
    with pytest.raises(ValueError, match="tokens must be"):
        decode_inputs(tokens.float(), tokens, table, hidden_out=hidden, lengths_out=lengths)
    with pytest.raises(ValueError, match=r"hidden_out must be a \(2, 8\)"):
        decode_inputs(tokens, tokens, table, hidden_out=hidden[:, :4], lengths_out=lengths)
    with pytest.raises(ValueError, match="lengths_out has dtype"):
        decode_inputs(tokens, tokens, table, hidden_out=hidden,
                      lengths_out=lengths.to(torch.int32))
    with pytest.raises(ValueError, match="table must be"):
        decode_inputs(tokens, tokens, table.t(), hidden_out=hidden, lengths_out=lengths)
    with pytest.raises(ValueError, match=r"position_table must be a \(positions, 8\)"):
        decode_inputs(tokens, tokens, table, hidden_out=hidden, lengths_out=lengths,
                      position_table=table.half())
    with pytest.raises(ValueError, match=r"position_table must be a \(positions, 8\)"):
        decode_inputs(tokens, tokens, table, hidden_out=hidden, lengths_out=lengths,
                      position_table=table[:, :4])


@pytest.mark.gpu
def test_replayed_in_a_graph_with_fresh_ids(device):
    import tilegraph as tg

    table = randn(32000, 2048, dtype=torch.bfloat16, device=device)
    tokens = torch.zeros(8, dtype=torch.int64, device=device)
    positions = torch.zeros(8, dtype=torch.int64, device=device)
    hidden, lengths = _outputs(8, 2048, torch.bfloat16, device)
    graph = tg.capture(lambda: decode_inputs(tokens, positions, table, hidden_out=hidden,
                                             lengths_out=lengths))
    for _ in range(20):
        tokens.copy_(torch.randint(0, 32000, (8,), device=device))
        positions.copy_(torch.randint(0, 4096, (8,), device=device))
        graph.replay()
        assert torch.equal(hidden, table[tokens]) and torch.equal(lengths, positions + 1)
