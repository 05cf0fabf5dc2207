"""Which part of each Llama weight a rank holds (Megatron-style tensor parallelism).

Column-parallel (split along the output rows): q|k|v by heads, gate|up by the SwiGLU inner
size (each expert's of a mixture too, whose router every rank holds whole, so that every
rank picks the same experts), the LM head (and its bias) by vocabulary rows. Row-parallel (split along the input
columns): the output projection by heads, the down projection by the inner size; their
partial products are summed by one all-reduce each. Norms, the embedding table and the
row-parallel biases (added once, by rank 0) are whole on every rank. Where there are fewer
kv heads than ranks (Falcon 7B's one, Qwen2-7B's four over eight GPUs), each rank holds
the one kv head its q heads attend to, which the ranks of its group all hold.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # an annotation only: models import this module
    from ..models.llama_config import LlamaConfig

# (our parameter suffix, part of a fused weight) -> (dimension split, what sets its size)
_SPLITS = {
    ("wqkv", "q"): (0, "q"), ("wqkv", "k"): (0, "kv"), ("wqkv", "v"): (0, "kv"),
    ("bqkv", "q"): (0, "q"), ("bqkv", "k"): (0, "kv"), ("bqkv", "v"): (0, "kv"),
    ("w_gate_up", "gate"): (0, "ffn"), ("w_gate_up", "up"): (0, "ffn"),
    ("b_gate_up", "gate"): (0, "ffn"), ("b_gate_up", "up"): (0, "ffn"),
    ("wo", ""): (1, "q"), ("w_down", ""): (1, "ffn"),
    # a mixture's expert j, one tensor an expert ("gate.j" ...): split as the dense MLP
    ("w_gate_up", "gate.j"): (0, "ffn"), ("w_gate_up", "up.j"): (0, "ffn"),
    ("w_down", "down.j"): (1, "ffn"),
}


def local_config(config: LlamaConfig, size: int, rank: int = 0) -> LlamaConfig:
    """The shapes one of `size` ranks holds: its q heads, kv heads and SwiGLU columns (and
    rank `rank`'s block of the q heads' ALiBi slopes)."""
    if size == 1:
        return config
    if config.qk_norm_whole:
        raise ValueError(f"{config.model_type}'s q and k norms span every head, which tp="
                         f"{size} splits between ranks: run it on one GPU")
    if config.moe and config.mlp_bias:
        raise ValueError(f"{config.model_type}'s experts' biases are not split between ranks "
                         f"yet (tp={size}): run it on one GPU")
    for name, value in (("num_attention_heads", config.n_heads),
                        ("intermediate_size", config.ffn_dim)):
        if value % size:
            raise ValueError(f"{name} ({value}) does not divide by tp={size}: each rank "
                             "must hold whole heads and an equal share of the MLP")
    if config.n_kv_heads % size and size % config.n_kv_heads:
        raise ValueError(f"num_key_value_heads ({config.n_kv_heads}) neither divides by tp="
                         f"{size} nor divides it: each rank must hold whole kv heads, or one "
                         "that a whole number of ranks share")
    heads = config.n_heads // size
    slopes = config.alibi_slopes
    return dataclasses.replace(config, n_heads=heads,
                               n_kv_heads=max(config.n_kv_heads // size, 1),
                               ffn_dim=config.ffn_dim // size, head_dim=config.head_dim,
                               alibi_slopes=slopes and slopes[rank * heads:(rank + 1) * heads])


def vocab_shard(vocab_size: int, rank: int, size: int) -> tuple[int, int, int]:
    """(first row, end row, rows a rank holds) of the LM head: equal blocks of
    ceil(vocab / size) rows, the last cut at the vocabulary (padded with zero rows)."""
    block = -(-vocab_size // size)
    start = min(rank * block, vocab_size)
    return start, min(start + block, vocab_size), block


def split_of(name: str, part: str, config: LlamaConfig, rank: int, size: int
             ) -> tuple[int, int, int] | None:
    """(dimension, start, stop) of checkpoint tensor `part` of our parameter `name` that
    rank `rank` holds, or None for the whole tensor (and for tensors whose share is no one
    range: a mixture's stacked experts, read whole and cut by ffn_share)."""
    if size == 1:
        return None
    if name in ("lm_head", "head_bias"):
        start, stop, _ = vocab_shard(config.head_rows, rank, size)
        return 0, start, stop
    key = (name.rsplit(".", 1)[-1], re.sub(r"\.\d+$", ".j", part))
    per_row = 1   # the elements of q (kv, ffn) a row of the tensor holds
    if key[0] in ("q_norm", "k_norm", "q_norm_bias", "k_norm_bias") and \
            config.qk_norm_per_head:
        # a weight (bias) a head (heads, head_dim): the rank's heads' rows
        dim, unit, per_row = 0, "q" if key[0].startswith("q") else "kv", config.head_dim
    elif key == ("sinks", ""):   # a logit a q head: the rank's heads'
        dim, unit, per_row = 0, "q", config.head_dim
    elif key in _SPLITS:
        dim, unit = _SPLITS[key]
    else:
        return None
    if unit == "kv" and config.n_kv_heads < size:   # the kv head of the rank's q heads
        start = rank * config.n_kv_heads // size * config.head_dim
        stop = start + config.head_dim
    else:
        share = {"q": config.q_dim, "kv": config.kv_dim, "ffn": config.ffn_dim}[unit] // size
        start, stop = rank * share, (rank + 1) * share
    return dim, start // per_row, stop // per_row


def ffn_share(tensor, dim: int, config: LlamaConfig, rank: int, size: int):
    """Rank `rank`'s share of `tensor`'s dimension `dim`, one MLP's inner size
    (config.ffn_dim) long: a mixture's experts stacked, whose shares split_of cannot
    give as one range."""
    share = config.ffn_dim // size
    return tensor.narrow(dim, rank * share, share)
