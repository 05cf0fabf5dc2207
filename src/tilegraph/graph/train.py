"""tg.TrainStep: a whole training step (forward, loss, backward, optimizer step) as one graph.

    step = tg.TrainStep(model, optimizer, loss_fn, (x, y))
    for x, y in batches:
        loss = step(x, y)          # a device tensor: no host sync per step

Built on tg.capture, which warms the step up on a side stream, releases gradients into the
graph's pool, refuses an optimizer that cannot be captured, and undoes the warm-up's steps
(_training.py). TrainStep adds what a step needs on top: Adam and AdamW stepped by one
multi-tensor kernel (kernels/adam.py), learning rates as device tensors
(a float is baked into the graph: a scheduler changing it afterwards would be silently
ignored; a tensor is read on every replay, and torch.optim's schedulers fill it in place),
a check that they stay tensors, the model's buffers (running statistics) and any other
state the step writes restored after warm-up, and a loss that later steps do not overwrite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..errors import CaptureError
from ..kernels.adam import ADAM_TYPES, MultiTensorAdam
from .capture import Graph, capture


def _device_learning_rates(optimizer: torch.optim.Optimizer, device: torch.device) -> list:
    """Replace each group's float lr by a 0-dim tensor on `device` (same value) where the
    optimizer reads a tensor lr on the device (capturable or fused ones: Adam, AdamW, ...;
    SGD's foreach path would read it back on the host); returns each group's lr."""
    rates = []
    for group in optimizer.param_groups:
        takes_tensor = group.get("capturable") or group.get("fused")
        if takes_tensor and not isinstance(group["lr"], torch.Tensor):
            group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
        rates.append(group["lr"])
    return rates


class TrainStep:
    """Capture `loss_fn(model(*inputs), target)`, its backward and `optimizer.step()` once;
    each call copies a batch into the static inputs and replays.

    example_batch: (inputs..., target), the shapes and dtypes every later batch must have.
    On CUDA an optimizer with a capturable flag must have it set (e.g. AdamW(...,
    capturable=True)); its float learning rates become device tensors, which schedulers
    (torch.optim.lr_scheduler) update between steps. Optimizers that read a float lr on the
    host (SGD) keep the captured rate: changing it afterwards is an error. Dropout draws
    fresh masks on every replay. Without CUDA the step runs eagerly (same results, no
    graph). clone_loss=False returns the graph's own loss tensor, which the next step
    overwrites.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer,
                 loss_fn: Callable[..., torch.Tensor], example_batch: Sequence[torch.Tensor],
                 *, warmup: int = 3, clone_loss: bool = True):
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer must be a torch.optim.Optimizer, got "
                            f"{type(optimizer).__name__}")
        batch = tuple(example_batch) if isinstance(example_batch, (tuple, list)) else ()
        if len(batch) < 2 or not all(isinstance(t, torch.Tensor) for t in batch):
            raise TypeError("example_batch must be a tuple of tensors (inputs..., target), "
                            "e.g. (x, y)")
        params = [p for group in optimizer.param_groups for p in group["params"]]
        if not params:
            raise ValueError("the optimizer has no parameters to train")
        device = params[0].device
        self._rates = _device_learning_rates(optimizer, device) if device.type == "cuda" else []
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.clone_loss = clone_loss
        self.inputs = tuple(t.detach().clone() for t in batch)
        # Adam and AdamW on the GPU step through tilegraph's multi-tensor kernel (the same
        # formula on the same state; torch's own step where an option needs it).
        self.stepper = (MultiTensorAdam(optimizer) if device.type == "cuda"
                        and type(optimizer) in ADAM_TYPES else optimizer)

        def train_step(*batch):
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(*batch[:-1]), batch[-1])
            if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
                raise ValueError(f"loss_fn must return a scalar tensor, got "
                                 f"{getattr(loss, 'shape', type(loss).__name__)}")
            loss.backward()
            self.stepper.step()
            return loss.detach()

        # restore_state: the warm-up's writes to the model's buffers (running statistics)
        # and any other state the step keeps are put back after the capture.
        self.graph: Graph = capture(train_step, *self.inputs, warmup=warmup,
                                    restore_state=True)

    def __call__(self, *batch: torch.Tensor) -> torch.Tensor:
        """One step on this batch (same shapes and dtypes as the example); returns the loss
        as a device tensor, computed before the step's update."""
        if len(batch) != len(self.inputs):
            raise ValueError(f"expected {len(self.inputs)} tensors (inputs..., target), "
                             f"got {len(batch)}")
        for index, (new, static) in enumerate(zip(batch, self.inputs, strict=True)):
            if not isinstance(new, torch.Tensor):
                raise TypeError(f"batch[{index}] must be a tensor, got {type(new).__name__}")
            if new.shape != static.shape or new.dtype != static.dtype:
                raise ValueError(f"batch[{index}] has shape {tuple(new.shape)} and dtype "
                                 f"{new.dtype}; this step was captured for "
                                 f"{tuple(static.shape)} {static.dtype} (make another "
                                 "TrainStep for other shapes)")
        # (no rates to check on CPU, where the step runs eagerly)
        for group, rate in zip(self.optimizer.param_groups, self._rates, strict=False):
            if isinstance(rate, torch.Tensor) and group["lr"] is not rate:
                raise CaptureError(
                    "an optimizer's lr was replaced after the step was captured; the graph "
                    "reads the original lr tensor. Change the rate in place "
                    "(group['lr'].fill_(value)) or through a torch.optim.lr_scheduler")
            if not isinstance(rate, torch.Tensor) and group["lr"] != rate:
                raise CaptureError(
                    f"an optimizer's lr changed from {rate} to {group['lr']} after the step "
                    f"was captured, but {type(self.optimizer).__name__} reads a float lr on "
                    "the host: the graph keeps the captured value. Use an optimizer that "
                    "takes a tensor lr (e.g. AdamW(..., capturable=True)) to schedule it")
        for new, static in zip(batch, self.inputs, strict=True):
            static.copy_(new, non_blocking=True)
        loss = self.graph.replay()
        return loss.clone() if self.clone_loss else loss
