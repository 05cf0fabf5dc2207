"""Tensor parallelism over torch.distributed: NCCL between GPUs, gloo between CPU processes.

    tp = tilegraph.dist.init()                         # under torchrun: one GPU per rank
    model = Llama.from_hf(path, dtype=torch.bfloat16, tp=tp)   # each rank reads its shard
    gen = tg.Generator(model, ...)                     # every rank runs the same calls

A rank holds 1/N of every layer (column-parallel q|k|v and gate|up, row-parallel output and
down projections, its rows of the LM head) and the whole embedding table; two all-reduces a
layer and one all-gather of the logits a step, captured inside the decode graphs.
"""

from .group import TensorParallel, init
from .sharding import local_config, split_of, vocab_shard

__all__ = ["TensorParallel", "init", "local_config", "split_of", "vocab_shard"]
