"""What tg.capture watches for while it warms a function up: the parts of a training step.

A function that calls .backward() and steps an optimizer is captured as PyTorch's whole-
network capture recipe says, with what users get wrong handled here:
- gradients are set to None before the capture, so that backward allocates them from the
  graph's pool and every replay writes fresh ones (never adds to the warm-up's);
- an optimizer that cannot be captured (capturable=False on a CUDA model) is a CaptureError
  at the first warm-up step, before anything is recorded;
- warm-up must not train: the parameters an optimizer steps and its state are restored after
  the capture to their values from before the first warm-up call. State the optimizer
  created during warm-up (Adam's moments and step count, SGD's momentum) is zeroed: the
  values a fresh optimizer's first step starts from in torch.optim.
"""

from __future__ import annotations

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.overrides import TorchFunctionMode

from ..errors import CaptureError
from ._state import storage_key


def _leaves_reached(root: torch.Tensor) -> list[torch.Tensor]:
    """The leaf tensors whose gradient a backward from `root` accumulates."""
    seen, leaves = set(), []
    stack = [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)  # AccumulateGrad nodes hold their leaf
        if isinstance(variable, torch.Tensor):
            leaves.append(variable)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return leaves


class _SeeBackward(TorchFunctionMode):
    def __init__(self, watch: TrainingWatch):
        super().__init__()
        self.watch = watch

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if not (func is torch.Tensor.backward and isinstance(args[0], torch.Tensor)):
            return func(*args, **(kwargs or {}))
        self.watch.saw_backward(args[0])
        result = func(*args, **(kwargs or {}))
        self.watch.note_gradients()
        return result


class TrainingWatch:
    """Context for the warm-up calls; afterwards `trains` says whether a backward ran, and
    release_gradients() / restore() prepare the capture and undo the warm-up's training."""

    def __init__(self, fn_name: str, on_cuda: bool):
        self.fn_name = fn_name
        self.on_cuda = on_cuda
        self.trains = False
        self._grad_leaves: dict[int, torch.Tensor] = {}
        self._optimizers: list[torch.optim.Optimizer] = []
        self._param_snapshots: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self._state_snapshots: dict[int, dict] = {}
        self._handled: set[tuple] = set()

    def __enter__(self) -> TrainingWatch:
        self._mode = _SeeBackward(self)
        self._mode.__enter__()
        self._hooks = (register_optimizer_step_pre_hook(self._before_step),
                       register_optimizer_step_post_hook(self._after_step))
        return self

    def __exit__(self, *exc) -> None:
        for hook in self._hooks:
            hook.remove()
        self._mode.__exit__(*exc)

    def handles(self, t: torch.Tensor) -> bool:
        """Whether restore() or release_gradients() puts t back: a parameter an optimizer
        steps, the optimizer's state, a gradient."""
        return storage_key(t) in self._handled

    def saw_backward(self, root: torch.Tensor) -> None:
        self.trains = True
        for leaf in _leaves_reached(root):
            self._grad_leaves.setdefault(id(leaf), leaf)
        self.note_gradients()  # gradients the backward will add into

    def note_gradients(self) -> None:
        self._handled.update(storage_key(leaf.grad) for leaf in self._grad_leaves.values()
                             if leaf.grad is not None)

    def _before_step(self, optimizer, args, kwargs) -> None:
        if any(o is optimizer for o in self._optimizers):
            return
        self._check_capturable(optimizer)
        self._optimizers.append(optimizer)
        for group in optimizer.param_groups:
            for p in group["params"]:
                self._handled.add(storage_key(p))
                self._param_snapshots.setdefault(id(p), (p, p.detach().clone()))
                state = optimizer.state.get(p, {})
                self._state_snapshots.setdefault(id(p), {
                    key: value.clone() if isinstance(value, torch.Tensor) else value
                    for key, value in state.items()})

    def _after_step(self, optimizer, args, kwargs) -> None:
        """Note the state the step created (Adam's moments on its first step)."""
        for state in optimizer.state.values():
            self._handled.update(storage_key(value) for value in state.values()
                                 if isinstance(value, torch.Tensor))

    def _check_capturable(self, optimizer) -> None:
        if not self.on_cuda:
            return
        for group in optimizer.param_groups:
            if group.get("capturable") is False:
                raise CaptureError(
                    f"capturing {self.fn_name}: {type(optimizer).__name__} was created with "
                    "capturable=False, so its step cannot be recorded in a CUDA graph (it "
                    "reads its step count on the host). Create it with capturable=True, "
                    f"e.g. torch.optim.{type(optimizer).__name__}(params, ..., "
                    "capturable=True), or use tg.TrainStep")

    def release_gradients(self) -> None:
        """Set every gradient a warm-up backward produced to None: the captured backward
        then allocates them from the graph's pool and each replay overwrites them."""
        self.note_gradients()
        for leaf in self._grad_leaves.values():
            leaf.grad = None
        for optimizer in self._optimizers:
            optimizer.zero_grad(set_to_none=True)

    def restore(self) -> None:
        """Undo the warm-up's optimizer steps (in place: the graph holds these tensors)."""
        with torch.no_grad():
            for p, before in self._param_snapshots.values():
                p.copy_(before)
            for optimizer in self._optimizers:
                for p, state in optimizer.state.items():
                    before = self._state_snapshots.get(id(p), {})
                    for key, value in state.items():
                        if key in before and isinstance(value, torch.Tensor):
                            value.copy_(before[key])
                        elif key in before:
                            state[key] = before[key]
                        elif isinstance(value, torch.Tensor):
                            value.zero_()
