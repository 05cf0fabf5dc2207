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

from ..dist.allreduce import graph_us
from ..dist.group import TensorParallel

CALLS = 64      # all-reduces in the graph (two a layer for 32 layers)
REPLAYS = 20


def _one_shot(tp: TensorParallel, shape, dtype):
    """A step of torch's one-shot all-reduce of a symmetric buffer, or why it cannot run
    here (an older torch, no peer access between the GPUs)."""
    try:
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem

        name = (tp.group or dist.group.WORLD).group_name
        buffer = symm_mem.empty(shape, dtype=dtype, device=torch.cuda.current_device())
        symm_mem.rendezvous(buffer, name)
        buffer.zero_()
        out = torch.empty_like(buffer)
        op = torch.ops.symm_mem.one_shot_all_reduce_out
        op(buffer, "sum", name, out)   # it runs
    except Exception as error:
        return f"unavailable: {type(error).__name__}: {str(error)[:160]}"
    return lambda: op(buffer, "sum", name, out)


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
