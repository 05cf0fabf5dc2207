"""How public kernel functions reach their launchers.

Each op is a torch.library custom op that writes into `out` and returns nothing, so
torch.compile(fullgraph=True) traces it as one opaque node. Eager calls skip the custom-op
dispatcher and launch directly: its Python overhead would be paid on every call of a
launch-bound workload. Where a dispatch mode must see them (tg.capture's restore_state, a
CPU tg.scope), _runtime.ops_through_dispatcher() sends them through it.

Where an input requires grad, ops take their differentiable path instead: a functional
custom op (new outputs, nothing mutated: torch.library attaches autograd formulas only to
those) whose backward is built from more functional ops, so that autograd, torch.compile and
graph capture all see the same opaque nodes.
"""

from collections.abc import Callable
from typing import Any

import torch

from .._runtime import through_dispatcher


def custom_op(name: str, launch: Callable[..., None],
              mutates: tuple[str, ...] = ("out",)) -> Callable[..., None]:
    """Register `launch` (type-annotated, its last argument `out`; `mutates` names every
    argument it writes) as torch.ops.tilegraph.<name> with a fake implementation, and return
    the function the public op calls to run it."""
    op = torch.library.custom_op(f"tilegraph::{name}", launch, mutates_args=set(mutates))
    op.register_fake(lambda *args: None)
    def run(*args) -> None:
        if torch.compiler.is_compiling() or through_dispatcher():
            op(*args)
        else:
            launch(*args)
    return run


def functional_op(name: str, compute: Callable[..., Any],
                  fake: Callable[..., Any]) -> torch.library.CustomOpDef:
    """Register `compute` (type-annotated, returning new tensors) as torch.ops.tilegraph.<name>;
    `fake` allocates outputs of the same shapes for tracing. Attach autograd with
    .register_autograd(backward, setup_context=...)."""
    op = torch.library.custom_op(f"tilegraph::{name}", compute, mutates_args=())
    op.register_fake(fake)
    return op
