"""How public kernel functions reach their launchers.

Each op is a torch.library custom op that writes into `out` and returns nothing, so
torch.compile(fullgraph=True) traces it as one opaque node. Eager calls skip the custom-op
dispatcher and launch directly: its Python overhead would be paid on every call of a
launch-bound workload.
"""

from collections.abc import Callable

import torch


def custom_op(name: str, launch: Callable[..., None],
              mutates: tuple[str, ...] = ("out",)) -> Callable[..., None]:
    """Register `launch` (type-annotated, its last argument `out`; `mutates` names every
    argument it writes) as torch.ops.tilegraph.<name> with a fake implementation, and return
    the function the public op calls to run it."""
    op = torch.library.custom_op(f"tilegraph::{name}", launch, mutates_args=set(mutates))
    op.register_fake(lambda *args: None)

    def run(*args) -> None:
        if torch.compiler.is_compiling():
            op(*args)
        else:
            launch(*args)
    return run
