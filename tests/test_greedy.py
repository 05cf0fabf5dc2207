"""The greedy end of a decode step (kernels/greedy.py) against PyTorch's argmax and writes."""

import pytest
import torch

from tilegraph.kernels import greedy
from tilegraph.kernels.greedy import greedy_step, greedy_step_ref
from tilegraph.testing import assert_one_rounding, randn


def _case(rows, vocab, dtype, device, max_seq=11):
    logits = randn(rows, vocab, dtype=dtype, device=device)
    positions = torch.randint(0, max_seq, (rows,), device=device)
    slots = torch.randperm(rows + 3, device=device)[:rows]
    history = torch.randint(0, vocab, (rows + 3, max_seq), device=device)
    return logits, positions, slots, history


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, vocab", [(1, 37), (3, 2048), (5, 4099), (2, 32000),
                                         (2, 151_936)])
def test_matches_argmax_and_writes(rows, vocab, dtype, device):
    logits, positions, slots, history = _case(rows, vocab, dtype, device)
    positions[0] = history.shape[1] - 1   # its next position is past the history: no write
    history_ref = history.clone()
    tokens_ref, positions_ref = (torch.full((rows,), -1, device=device) for _ in range(2))
    greedy_step_ref(logits, positions, slots, history_ref, tokens_out=tokens_ref,
                    positions_out=positions_ref)
    tokens, new_positions = (torch.full((rows,), -1, device=device) for _ in range(2))
    greedy_step(logits, positions, slots, history, tokens_out=tokens,
                positions_out=new_positions)
    assert torch.equal(tokens, tokens_ref)
    assert torch.equal(new_positions, positions + 1)
    assert torch.equal(history, history_ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows, vocab, dim", [(1, 37, 24), (3, 4099, 1025), (2, 32000, 2048),
                                              (5, 300, 5000)])
def test_next_inputs_are_what_decode_inputs_writes(rows, vocab, dim, dtype, device):
    """The next step's embeddings and lengths, from the finishing program of a row (of one
    chunk or of several), over dims of one block or more, in place of their old values."""
    logits, positions, slots, history = _case(rows, vocab, torch.float32, device)
    table = randn(vocab - 1, dim, dtype=dtype, device=device)  # one logit past the table
    logits[:, vocab - 1] = -100.0
    logits[-1, vocab - 1] = 100.0                  # the last row picks it: a NaN embedding
    outputs = []
    for run in (greedy_step_ref, greedy_step):
        tokens = torch.full((rows,), -1, device=device)
        new_positions = positions.clone()          # in place, as a step feeds itself
        hidden = torch.full((rows, dim), 7.0, dtype=dtype, device=device)   # poisoned
        lengths = torch.full((rows,), -7, device=device)
        written = history.clone()
        run(logits, new_positions, slots, written, tokens_out=tokens,
            positions_out=new_positions, next_inputs=(table, hidden, lengths))
        outputs.append((tokens, new_positions, hidden, lengths, written))
    (tokens_ref, positions_ref, hidden_ref, lengths_ref, history_ref), \
        (tokens, new_positions, hidden, lengths, written) = outputs
    assert torch.equal(tokens, tokens_ref) and tokens[-1] == vocab - 1
    assert torch.equal(new_positions, positions_ref) and torch.equal(written, history_ref)
    assert torch.equal(lengths, positions + 2)
    assert torch.equal(hidden[:-1], table[tokens[:-1]])
    assert hidden[-1].isnan().all() and hidden_ref[-1].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("rows, vocab, dim", [(1, 37, 24), (3, 4099, 2100)])
def test_next_inputs_add_learned_positions(rows, vocab, dim, dtype, device):
    """With a position table the next embeddings add the new position's row (GPT-2's);
    a new position past the table (a step after the last a cache holds) gives NaN."""
    logits, positions, slots, history = _case(rows, vocab, torch.float32, device)
    positions[-1] = 40                             # its next position, 41, is past the table
    table = randn(vocab, dim, dtype=dtype, device=device)
    position_table = randn(41, dim, dtype=dtype, device=device)
    outputs = []
    for run in (greedy_step_ref, greedy_step):
        tokens = torch.full((rows,), -1, device=device)
        new_positions = positions.clone()
        hidden = torch.full((rows, dim), 7.0, dtype=dtype, device=device)   # poisoned
        lengths = torch.full((rows,), -7, device=device)
        run(logits, new_positions, slots, history.clone(), tokens_out=tokens,
            positions_out=new_positions, next_inputs=(table, hidden, lengths),
            position_table=position_table)
        outputs.append((tokens, hidden, lengths))
    (tokens_ref, hidden_ref, _), (tokens, hidden, lengths) = outputs
    assert torch.equal(tokens, tokens_ref) and torch.equal(lengths, positions + 2)
    following = positions + 1
    assert_one_rounding(hidden[:-1], table[tokens[:-1]] + position_table[following[:-1]])
    assert_one_rounding(hidden[:-1], hidden_ref[:-1])
    assert hidden[-1].isnan().all() and hidden_ref[-1].isnan().all()


def test_ties_nan_and_in_place(device):
    logits = torch.zeros(3, 5000, device=device)
    logits[0, [7, 4000]] = 2.0            # a tie: the first wins
    logits[1, 3000] = float("nan")        # a NaN wins, as in torch.argmax
    logits[2] = float("-inf")             # nothing finite: token 0
    positions = torch.tensor([1, 2, 3], device=device)
    history = torch.zeros(3, 8, dtype=torch.int64, device=device)
    tokens = torch.tensor([9, 9, 9], device=device)
    greedy_step(logits, positions, torch.arange(3, device=device), history,
                tokens_out=tokens, positions_out=positions)   # in place, as a step feeds itself
    assert tokens.tolist() == [7, 3000, 0] == logits.argmax(-1).tolist()
    assert positions.tolist() == [2, 3, 4]
    assert history[0, 2] == 7 and history[1, 3] == 3000 and history.sum() == 3007


def test_maxima_in_other_chunks_and_repeated_calls(device):
    """Rows split into chunks (32000 logits: 16 programs a row) whose arrival counters are
    set back to zero by each call: the same workspace serves the next one."""
    assert greedy.chunk_size(32000) * 15 < 32000
    rows = 4
    history = torch.zeros(rows, 8, dtype=torch.int64, device=device)
    for where in ([31999, 0, 2048, 17000], [5, 30000, 2047, 2049]):
        logits = randn(rows, 32000, device=device)
        logits[torch.arange(rows), where] = 10.0
        logits[0, 12000] = 10.0                  # equal maxima in two chunks: the first wins
        tokens = torch.full((rows,), -1, device=device)
        positions = torch.zeros(rows, dtype=torch.int64, device=device)
        greedy_step(logits, positions, torch.arange(rows, device=device), history,
                    tokens_out=tokens, positions_out=positions)
        assert tokens.tolist() == logits.argmax(-1).tolist() == [min(where[0], 12000),
                                                                 *where[1:]]


def test_bad_inputs_are_named(device):
    logits, positions, slots, history = _case(2, 50, torch.float32, device)
    out = torch.empty(2, dtype=torch.int64, device=device)
    with pytest.raises(ValueError, match="positions must be a contiguous int64"):
        greedy_step(logits, positions.int(), slots, history, tokens_out=out, positions_out=out)
    with pytest.raises(ValueError, match="logits must be"):
        greedy_step(logits[:, :0], positions, slots, history, tokens_out=out,
                    positions_out=out)
    with pytest.raises(ValueError, match="history must be"):
        greedy_step(logits, positions, slots, history.t(), tokens_out=out, positions_out=out)
    table = randn(50, 8, device=device)
    hidden = torch.empty(2, 8, device=device)
    with pytest.raises(ValueError, match=r"hidden_out must be a \(2, 8\)"):
        greedy_step(logits, positions, slots, history, tokens_out=out, positions_out=out,
                    next_inputs=(table, hidden.half(), out))
    with pytest.raises(ValueError, match="lengths_out must be a contiguous int64"):
        greedy_step(logits, positions, slots, history, tokens_out=out, positions_out=out,
                    next_inputs=(table, hidden, out.int()))
    with pytest.raises(ValueError, match="table must be"):
        greedy_step(logits, positions, slots, history, tokens_out=out, positions_out=out,
                    next_inputs=(table.t(), hidden, out))
    with pytest.raises(ValueError, match="give next_inputs too"):
        greedy_step(logits, positions, slots, history, tokens_out=out, positions_out=out,
                    position_table=table)
    with pytest.raises(ValueError, match="position_table must be"):
        greedy_step(logits, positions, slots, history, tokens_out=out, positions_out=out,
                    next_inputs=(table, hidden, out), position_table=table.half())
