"""The all-reduce a tensor-parallel layer pays, the way the decode graphs pay it: many calls
on one static tensor captured in a CUDA graph, replayed, timed with CUDA events.

    all_reduce_us(tp, (batch, dim), torch.bfloat16)
    # {"nccl": 8.1, "symm_mem_one_shot": 5.2 or "unavailable: ...", "bytes": 8192}

Two implementations: NCCL's all-reduce (what the model runs), and torch's symmetric-memory
one-shot all-reduce (each rank reads every peer's buffer over NVLink and sums; no multimem
operations), where torch has it and the GPUs can map each other's memory.
"""

from __future__ import annotations

import torch

from ..dist.allreduce import graph_us, symmetric_buffers
from ..dist.group import TensorParallel

CALLS = 64      # all-reduces in the graph (two a layer for 32 layers)
REPLAYS = 20


def _one_shot(tp: TensorParallel, shape, dtype):
    """A step of symm_mem's one-shot all-reduce of a symmetric buffer, or why it cannot
    run here."""
    made = symmetric_buffers(tp, shape, dtype, count=1)
    if isinstance(made, str):
        return made
    (buffer,), name = made
    out = torch.empty_like(buffer)
    return lambda: torch.ops.symm_mem.one_shot_all_reduce_out(buffer, "sum", name, out)


def all_reduce_us(tp: TensorParallel, shape: tuple[int, ...], dtype: torch.dtype,
                  calls: int = CALLS, replays: int = REPLAYS) -> dict:
    """us per all-reduce of a tensor of `shape` (a layer's output: (batch, dim)) on every
    rank, NCCL and symmetric memory's one-shot; {} on CPU or at size 1. Every rank calls."""
    if tp.size == 1 or not torch.cuda.is_available():
        return {}
    # zeros: neither implementation's time depends on the values, and sums of zeros stay
    # finite over thousands of calls
    x = torch.zeros(shape, dtype=dtype, device=torch.cuda.current_device())
    result = {"bytes": x.numel() * x.element_size(),
              "nccl": graph_us(lambda: tp.all_reduce_(x, "the all-reduce timing"), calls,
                                replays)}
    one_shot = _one_shot(tp, shape, dtype)
    result["symm_mem_one_shot"] = (one_shot if isinstance(one_shot, str)
                                   else graph_us(one_shot, calls, replays))
    return result
