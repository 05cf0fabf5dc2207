"""How public kernel functions reach their launchers.

Each op is also a torch.library custom op (mutating `out`), so torch.compile(fullgraph=True)
traces it as one opaque node. Eager calls skip the custom-op dispatcher and launch directly:
its Python overhead would be paid on every call of a launch-bound workload.
"""

import torch


def dispatch(op, launch, *args) -> None:
    if torch.compiler.is_compiling():
        op(*args)
    else:
        launch(*args)
