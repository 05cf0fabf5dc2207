"""How many chunks a row greedy_step should split a vocabulary into: us a call of a chain of
greedy steps (with next_inputs, as tg.Generator's) captured in one graph, for
greedy.MAX_CHUNKS 64 (the library's until session 82) and 128 (since), at the vocabularies
of TinyLlama (32000), Llama 3 (128256) and Qwen2 (151936), batch 1 and 8.

    PYTHONPATH=src python3 research/probe_greedy_chunks.py

At 151936 logits and 64 chunks a program loops over two blocks of BLOCK_VOCAB, one load
after the other; 128 chunks give every program one (session 82: 3.40 -> 2.86 us at batch
1). Each chain's tokens are checked against torch.argmax.
"""

from __future__ import annotations

import torch

import tilegraph as tg
from tilegraph.kernels import greedy

CALLS = 50
REPLAYS = 20


def chain_us(logits: torch.Tensor, table: torch.Tensor) -> float:
    rows = logits.shape[0]
    device = logits.device
    positions = torch.zeros(rows, dtype=torch.int64, device=device)
    slots = torch.arange(rows, device=device)
    history = torch.zeros(rows, CALLS + 8, dtype=torch.int64, device=device)
    tokens = torch.empty(rows, dtype=torch.int64, device=device)
    hidden = torch.empty(rows, table.shape[1], dtype=table.dtype, device=device)
    lengths = torch.empty(rows, dtype=torch.int64, device=device)

    def calls():
        for _ in range(CALLS):
            greedy.greedy_step(logits, positions, slots, history, tokens_out=tokens,
                               positions_out=positions, next_inputs=(table, hidden, lengths))

    calls()   # compiles, and makes the split workspace outside the capture
    assert torch.equal(tokens, logits.argmax(-1)), "tokens differ from torch.argmax"
    assert torch.equal(hidden, table[tokens])
    graph = tg.capture(calls, restore_state=False)   # the positions move on: reset below
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    best = float("inf")
    for _ in range(3):
        positions.zero_()
        graph.replay()
        torch.cuda.synchronize()
        start.record()
        for _ in range(REPLAYS):
            positions.zero_()
            graph.replay()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / (REPLAYS * CALLS))
    return best


def main() -> None:
    torch.manual_seed(0)
    table_cache: dict[int, torch.Tensor] = {}
    library = greedy.MAX_CHUNKS
    print(f"{torch.cuda.get_device_name()}: us a greedy step (with next_inputs), a chain of "
          f"{CALLS} in one graph, best of 3 x {REPLAYS} replays")
    for vocab in (32000, 128256, 151936):
        table = table_cache.setdefault(vocab, torch.randn(vocab, 2048, dtype=torch.bfloat16,
                                                          device="cuda"))
        for rows in (1, 8):
            logits = torch.randn(rows, vocab, dtype=torch.bfloat16, device="cuda")
            shown = []
            for max_chunks in (64, 128):
                greedy.MAX_CHUNKS = max_chunks
                chunks = -(-vocab // greedy.chunk_size(vocab))
                shown.append(f"{max_chunks} -> {chunks} chunks {chain_us(logits, table):6.2f}")
            greedy.MAX_CHUNKS = library
            print(f"vocab {vocab:6d} rows {rows}: " + " | ".join(shown), flush=True)


if __name__ == "__main__":
    main()
