"""State a captured function keeps outside its inputs and outputs, watched over its warm-up.

tg.capture runs fn `warmup` times before recording it (a runner twice more, to check its
rows), so a function that advances state it holds elsewhere (a cache's write counter,
running statistics, a step count) is advanced that many extra times. StateWatch finds such
state: it fingerprints every tensor Python holds right after the first warm-up call and
again after the last. A tensor that changed in between changes on every call. A buffer the
function only overwrites (an `out=` buffer, a cache written at positions the inputs give)
holds the same values after each call and is not reported.

restore_state=True instead snapshots each tensor that existed before the first call and that
the first call writes (through a PyTorch op that declares the write: in-place ops, `out=`,
batch norm's running statistics; or through a tilegraph kernel), just before the write, and
copies the snapshots back after the capture: the function's state is then what it was before
warm-up. Writes neither can see (a raw Triton launch) are found by the fingerprints and
reported as not restored.
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import types
import warnings
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from .._runtime import ops_through_dispatcher
from ..errors import SideEffectWarning
from ..kernels._split_workspace import is_split_workspace
from ._errors import user_location

# A float tensor counts as changed when its sum or its sum of squares moved by more than
# this fraction of its scale: a kernel that adds in a different order (atomics) moves its
# output by far less; a step of running statistics, of a counter or of an optimizer, by far
# more. Integer and boolean tensors compare exactly.
_FLOAT_CHANGE = 1e-4


def storage_key(t: torch.Tensor) -> tuple:
    return (t.device.type, t.device.index, t.untyped_storage().data_ptr())


_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _watchable(t) -> bool:
    """Plain dense tensors with memory (no meta, fake, sparse or wrapper subclasses)."""
    # type(), not isinstance(): some objects gc finds warn when asked for their __class__.
    return (type(t) in _PLAIN_TENSORS and t.layout == torch.strided and not t.is_nested
            and t.device.type != "meta" and t.untyped_storage().nbytes() > 0
            and not t.is_complex() and not t.is_quantized)


def _held_tensors() -> dict[tuple, list[torch.Tensor]]:
    """Every tensor object Python holds now, grouped by the memory it lives in."""
    held: dict[tuple, list[torch.Tensor]] = {}
    for obj in gc.get_objects():
        try:
            if _watchable(obj):
                held.setdefault(storage_key(obj), []).append(obj)
        except RuntimeError:  # memory that may not be read: a stale torch.compile graph output
            continue
    return held


def _whole_storage(t: torch.Tensor) -> torch.Tensor:
    """A 1-D view of all of t's memory in t's dtype: a write through any view of it shows."""
    return t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)


def _fingerprint(t: torch.Tensor) -> torch.Tensor:
    """(sum, sum of squares) of t's memory in float64, on t's device, with no host sync.
    Reductions with a float64 accumulator read the memory once and allocate nothing big
    (vector_norm takes floating tensors only: integers get their largest value instead)."""
    flat = _whole_storage(t)
    total = flat.sum(dtype=torch.float64)
    if not flat.is_floating_point():  # integers and booleans: (sum, largest value)
        return torch.stack((total, flat.max().to(torch.float64)))
    return torch.stack((total, torch.linalg.vector_norm(flat, dtype=torch.float64).square()))


def _differs(before: list[float], after: list[float], elements: int, exact: bool) -> bool:
    (total, squares), (total_now, squares_now) = before, after
    if exact or any(v != v for v in (*before, *after)):  # integers; NaN (poisoned buffers)
        return repr(before) != repr(after)
    scale = max(squares, squares_now)
    # |sum| <= sqrt(n * sum of squares): the same relative bound on both.
    return (abs(squares_now - squares) > _FLOAT_CHANGE * scale
            or abs(total_now - total) > _FLOAT_CHANGE * (elements * scale) ** 0.5)


def _on_host(fingerprints: list[torch.Tensor]) -> list[list[float]]:
    """Fingerprints read back with one copy per device."""
    values: list = [None] * len(fingerprints)
    by_device: dict[torch.device, list[int]] = {}
    for index, f in enumerate(fingerprints):
        by_device.setdefault(f.device, []).append(index)
    for indices in by_device.values():
        for index, pair in zip(indices, torch.stack([fingerprints[i] for i in indices])
                               .tolist(), strict=True):
            values[index] = pair
    return values


def _fingerprint_or_none(t: torch.Tensor) -> torch.Tensor | None:
    try:
        return _fingerprint(t)
    except (RuntimeError, TypeError, NotImplementedError):  # a dtype with no float64 sum
        return None


def _held_as(t: torch.Tensor) -> str:
    """Where the program keeps t ('KVCache.length', 'BatchNorm1d.running_mean'), for
    messages; 'a tensor' when no attribute or global holds it."""
    for referrer in gc.get_referrers(t):
        if isinstance(referrer, dict):
            key = next((k for k, v in referrer.items() if v is t), None)
            owner = _owner_of(referrer) if isinstance(key, str) else None
            if owner is not None:
                return f"{owner}.{key}"
        elif not isinstance(referrer, (list, tuple, types.FrameType)):
            # Objects whose attributes Python keeps inline refer to t themselves.
            attributes = getattr(referrer, "__dict__", {})
            key = next((k for k, v in attributes.items() if v is t), None)
            if key is not None:
                return f"{_name_of(referrer)}.{key}"
    return "a tensor"


def _owner_of(namespace: dict) -> str | None:
    """The name of the object (or module) whose attributes `namespace` is, or of the module
    whose parameters or buffers it is."""
    for owner in gc.get_referrers(namespace):
        if getattr(owner, "__dict__", None) is namespace:
            return _name_of(owner)
        if isinstance(owner, dict) and any(owner.get(slot) is namespace
                                           for slot in ("_buffers", "_parameters")):
            module = next((m for m in gc.get_referrers(owner)
                           if getattr(m, "__dict__", None) is owner), None)
            return _name_of(module)
    return None


def _name_of(owner) -> str:
    if owner is None:
        return "?"
    return owner.__name__ if isinstance(owner, types.ModuleType) else type(owner).__name__


def _described(t: torch.Tensor) -> str:
    dtype = str(t.dtype).removeprefix("torch.")
    return f"{_held_as(t)} ({tuple(t.shape)} {dtype} on {t.device})"


# Batch norm's ops (native_batch_norm, cudnn_batch_norm, ...) update these in training
# without marking them written in their schemas.
_UNDECLARED_WRITES = ("running_mean", "running_var")


class _SnapshotBeforeWrite(TorchDispatchMode):
    """Copy each watched tensor's memory just before the first op that writes it."""

    def __init__(self, watch: StateWatch):
        super().__init__()
        self.watch = watch

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for index, argument in enumerate(func._schema.arguments):
            declared = argument.alias_info is not None and argument.alias_info.is_write
            if not (declared or argument.name in _UNDECLARED_WRITES):
                continue
            value = (kwargs.get(argument.name) if argument.name in kwargs
                     else args[index] if index < len(args) else None)
            for t in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(t, torch.Tensor):
                    self.watch._before_write(t)
        return func(*args, **kwargs)


@dataclass
class StateWatch:
    """One watch over every call a capture (or a runner, for all its sizes) makes of fn.

    restore: True restores what the first call wrote; None reports state that changed on
    every call (SideEffectWarning); False does neither. A tensor some handler claims is put
    back by someone else (the parameters and optimizer state of a training step) or is
    scratch that means nothing between calls (split-K workspaces).
    """
    owner: str
    restore: bool | None
    handlers: list[Callable[[torch.Tensor], bool]] = field(default_factory=list)
    _excluded: set = field(default_factory=set)
    _before: set | None = None
    _snapshots: dict = field(default_factory=dict)
    _settled: dict | None = None
    _calls: int = 0

    @property
    def active(self) -> bool:
        return self.restore is not False

    def exclude(self, tree) -> None:
        """Inputs and outputs are the graph's own: never reported, never restored."""
        leaves, _ = tree_flatten(tree)
        self._excluded.update(storage_key(t) for t in leaves
                              if isinstance(t, torch.Tensor) and _watchable(t))

    @contextlib.contextmanager
    def call(self, args: tuple) -> Iterator[None]:
        """Around each call of fn: the first one snapshots before writes when restoring."""
        self.exclude(args)
        self._calls += 1
        if not (self.restore and self._before is None):
            yield
            return
        self._before = set(_held_tensors())
        with _SnapshotBeforeWrite(self), ops_through_dispatcher():
            yield

    def handled(self, t: torch.Tensor) -> bool:
        return any(claims(t) for claims in self.handlers)

    def _before_write(self, t: torch.Tensor) -> None:
        if not _watchable(t):
            return
        key = storage_key(t)
        if key in self._snapshots or key in self._excluded or key not in self._before:
            return
        if self.handled(t):
            self._excluded.add(key)  # someone else puts it back: ask once
            return
        self._snapshots[key] = (t, t.untyped_storage().clone())

    def settle(self) -> None:
        """Fingerprint what Python holds now, after a first call on the inputs the capture
        keeps: later calls on the same inputs must leave these tensors as they are."""
        if not self.active or self._settled is not None:
            return
        self._settled = {}
        with torch.no_grad():
            for key, tensors in _held_tensors().items():
                if key in self._excluded:
                    continue
                largest = max(tensors, key=lambda t: t.untyped_storage().nbytes())
                fingerprint = _fingerprint_or_none(largest)
                if fingerprint is not None:
                    self._settled[key] = ([weakref.ref(t) for t in tensors], fingerprint,
                                          _whole_storage(largest).numel(),
                                          not largest.is_floating_point())

    def finish(self, report: bool = True) -> None:
        """After the capture (or its failure): put snapshots back, then report what moved."""
        if not self.active:
            return
        restored = set()
        with torch.no_grad():
            for key, (tensor, saved) in self._snapshots.items():
                if key not in self._excluded and not self.handled(tensor):
                    tensor.untyped_storage().copy_(saved)
                    restored.add(key)
        self._snapshots.clear()
        moved = self._moved(skip=restored) if report else []
        if not moved:
            return
        if self.restore:
            advice = ("restore_state=True restores what PyTorch ops and tilegraph's kernels "
                      "write; these were written another way (a raw kernel launch?): reset "
                      "them after building the graph")
        else:
            advice = ("Pass restore_state=True to have them restored after the capture, "
                      "restore_state=False if advancing them is intended, or reset them "
                      "after building the graph")
        filename, lineno, _ = user_location()
        warnings.warn_explicit(
            f"{self.owner}: the warm-up calls advanced state the function keeps outside its "
            f"inputs and outputs (it changed on every call, {self._calls} calls in all "
            f"before the capture): {'; '.join(_described(t) for t in moved)}. "
            f"{advice}.", SideEffectWarning, filename, lineno)

    def _moved(self, skip: set) -> list[torch.Tensor]:
        if not self._settled:
            return []
        kept, befores, afters = [], [], []
        with torch.no_grad():
            for key, (refs, before, elements, exact) in self._settled.items():
                if key in skip or key in self._excluded:
                    continue
                alive = next((t for t in (r() for r in refs) if t is not None), None)
                if alive is None or self.handled(alive):
                    continue
                after = _fingerprint_or_none(alive)
                if after is not None:
                    kept.append((alive, elements, exact))
                    befores.append(before)
                    afters.append(after)
        self._settled = None
        return [t for (t, elements, exact), before, after in zip(
                    kept, _on_host(befores), _on_host(afters), strict=True)
                if _differs(before, after, elements, exact)]


_active: contextvars.ContextVar[StateWatch | None] = contextvars.ContextVar(
    "tilegraph_state_watch", default=None)


@contextlib.contextmanager
def watching_state(owner: str, restore: bool | None) -> Iterator[StateWatch]:
    """The watch of the capture or runner being built, finished when the block ends: a new
    one, or the enclosing runner's (which the runner finishes once all its sizes are built).
    A block that fails puts snapshots back and reports nothing."""
    if restore not in (None, True, False):
        raise TypeError(f"restore_state must be True, False or None, got {restore!r}")
    enclosing = _active.get()
    if enclosing is not None:
        yield enclosing
        return
    watch = StateWatch(owner, restore, handlers=[is_split_workspace])
    token = _active.set(watch)
    try:
        yield watch
    except BaseException:
        watch.finish(report=False)
        raise
    finally:
        _active.reset(token)
    watch.finish()
