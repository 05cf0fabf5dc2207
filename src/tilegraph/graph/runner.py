"""GraphRunner: one CUDA graph per batch size over static buffers, called like the function.

Each call copies the inputs into static buffers sized for the largest size, pads up to the
next captured size, replays that size's graph and returns the outputs sliced back to the
caller's size (or copies them into the caller's `out`). Padded rows are zeroed and sliced
off, so they never reach the caller (for functions that treat rows independently, as a
decode step does). All sizes share one memory pool and are captured largest first. On a GPU
the input copies and the copies out are nodes of the graph itself, pointed at each call's
tensors (graph/_copy_nodes.py): a copy launched between two replays would delay the second
one's start.
"""

from __future__ import annotations

import bisect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from ..errors import StaleOutputError
from ..kernels._checks import byte_range
from ..kernels.autotune import searches_run
from ._copy_nodes import CopyNodes, cuda_runtime
from ._errors import callable_name
from ._state import StateWatch, watching_state
from .capture import Graph, capture, capture_keeping_nodes


class _GuardedOutput(torch.Tensor):
    """A view of a graph output that refuses to be read once a later replay overwrote it."""

    @staticmethod
    def __new__(cls, data: torch.Tensor, graph: Graph):
        guarded = torch.Tensor._make_subclass(cls, data, False)
        guarded._graph = graph
        guarded._replay = graph.replays
        return guarded

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for value in (*args, *kwargs.values()):
            if isinstance(value, _GuardedOutput) and value._graph.replays != value._replay:
                raise StaleOutputError(
                    f"this output of replay {value._replay} was overwritten by replay "
                    f"{value._graph.replays} of the same graph; clone it before calling the "
                    "runner again (or create the runner with clone_outputs=True)")
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


@dataclass
class _GraphCopies:
    """A size's copy nodes (graph/_copy_nodes.py): per input, the caller's rows into the
    static input (`inputs`); per output leaf contiguous along dim 0, its rows out to a
    tensor of the caller's (`outputs`; `output_nodes` maps each flattened output leaf to its
    node, or None)."""
    inputs: CopyNodes
    outputs: CopyNodes
    output_nodes: list[int | None]


@dataclass
class _SizedCall:
    """What a call with a given number of rows does: copy the inputs into `destinations`
    (the static buffers' first rows), zero `padding` (the rows up to the graph's size),
    replay `graph`, return `outputs` (its outputs sliced back to those rows) or copy them
    into the caller's; by the graph's `copies` where it has them."""
    graph: Graph
    destinations: list[torch.Tensor]
    padding: list[torch.Tensor]
    outputs: Any
    copies: _GraphCopies | None
    spans: list[tuple[int, int]]  # each destination's first and past-last byte address
    output_leaves: list  # `outputs` flattened, and its structure (what an `out` must have)
    output_spec: Any


def _ranks_capture_together() -> bool:
    """Whether other processes may capture alongside this one (torch.distributed with more
    than one rank): a graph holding collectives must be captured by every rank at once, and
    one rank may read a tuning choice from disk where another times it."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _node_numbers(pairs: list) -> list[int | None]:
    """Per entry, its number among the entries that are not None (else None)."""
    numbers, count = [], 0
    for pair in pairs:
        numbers.append(count if pair is not None else None)
        count += pair is not None
    return numbers


def _out_leaves(out, sources: list, expected) -> list:
    """out's leaves, checked against the output leaves `sources` (structure `expected`) they
    receive: the same structure, and a tensor of the same shape, dtype and device for every
    tensor output, not overlapping it."""
    targets, spec = tree_flatten(out)
    if spec != expected:
        raise ValueError(f"out must have the structure of the outputs ({expected}), got {spec}")
    for i, (target, source) in enumerate(zip(targets, sources, strict=True)):
        if not isinstance(source, torch.Tensor):
            continue
        where = "out" if len(sources) == 1 else f"out leaf {i}"
        if not isinstance(target, torch.Tensor):
            raise TypeError(f"{where} must be a torch.Tensor, got {type(target).__name__}")
        if target.shape != source.shape or target.dtype != source.dtype:
            raise ValueError(f"{where} has shape {tuple(target.shape)} and dtype "
                             f"{target.dtype}; the output has {tuple(source.shape)} and "
                             f"{source.dtype}")
        if target.device != source.device:
            raise ValueError(f"{where} is on {target.device}, the output on {source.device}")
        if target.data_ptr() != source.data_ptr() and source.numel():
            (t_start, t_end), (s_start, s_end) = byte_range(target), byte_range(source)
            if t_start < s_end and s_start < t_end:
                raise ValueError(f"{where} overlaps the runner's static output without being "
                                 "it")
    return targets


def _batched(outputs, dim: int, size: int) -> list[torch.Tensor]:
    """The output tensors that have `size` rows along `dim`: the ones a runner slices."""
    leaves, _ = tree_flatten(outputs)
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.ndim > dim
            and t.shape[dim] == size]


class GraphRunner:
    """fn captured once per size in `sizes` along dimension `dim` of every input.

    runner = tg.GraphRunner(step, (x_example,), sizes=(1, 2, 4, 8))
    y = runner(x)            # x.shape[dim] <= 8: pad, replay, slice
    runner.stats()           # per size: capture seconds, graph memory bytes, replays

    By default a call returns views of the graph's static outputs (the same views at every
    call with as many rows), which the next replay of that size overwrites.
    runner(x, out=y) copies them into y (a tensor, or a structure like the outputs) and
    returns y; clone_outputs=True returns new copies that later calls cannot overwrite (on a
    GPU both copies are the graph's own last nodes); check_stale=True returns views that
    raise StaleOutputError if read after the next replay of their size.
    fallback="eager" runs fn directly for inputs no graph fits (too many rows, none);
    "error" raises ValueError instead. restore_state is tg.capture's, over every call the
    runner makes while it is built (the row check's two and each size's warm-up).
    """

    def __init__(self, fn: Callable, example_inputs, sizes: Sequence[int] = (1, 2, 4, 8),
                 dim: int = 0, clone_outputs: bool = False, check_stale: bool = False,
                 fallback: str = "error", warmup: int = 2,
                 restore_state: bool | None = None):
        examples = (tuple(example_inputs) if isinstance(example_inputs, (tuple, list))
                    else (example_inputs,))
        if not examples or not all(isinstance(t, torch.Tensor) for t in examples):
            raise TypeError("example_inputs must be a tensor or a non-empty tuple of tensors")
        if isinstance(sizes, int) or not sizes or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
            raise ValueError(f"sizes must be positive integers, got {sizes!r}")
        if fallback not in ("error", "eager"):
            raise ValueError(f"fallback must be 'error' or 'eager', got {fallback!r}")
        if clone_outputs and check_stale:
            raise ValueError("clone_outputs=True already makes outputs safe to keep; "
                             "check_stale applies to uncloned outputs only")
        for i, t in enumerate(examples):
            if not -t.ndim <= dim < t.ndim:
                raise ValueError(f"dim={dim} is out of range for example input {i} of shape "
                                 f"{tuple(t.shape)}")
        self.fn = fn
        self.dim = dim % examples[0].ndim
        self.sizes = sorted(set(sizes))
        self.clone_outputs = clone_outputs
        self.check_stale = check_stale
        self.fallback = fallback
        self._examples = [(t.dtype, t.device, t.shape) for t in examples]
        self._buffers = [self._static_buffer(t) for t in examples]
        self.pool = torch.cuda.graph_pool_handle() if examples[0].is_cuda else None
        # Where the graphs copy their inputs themselves: what their copy nodes copy at
        # capture (the examples), each call then points them at its own tensors.
        self._runtime = cuda_runtime() if self.pool is not None and self.dim == 0 else None
        self._staging = ([buf.clone() for buf in self._buffers] if self._runtime is not None
                         else None)
        self._graphs: dict[int, Graph] = {}
        self._copies: dict[int, _GraphCopies | None] = {}
        # Prepared calls by the inputs' (shape, dtype, device): a call like an earlier one
        # skips the checks (1.8 -> 0.7 us of Python for one input, measured on CPU).
        self._calls: dict[tuple, _SizedCall] = {}
        self._last_call: _SizedCall | None = None
        self.eager_calls = 0
        with watching_state(f"tg.GraphRunner({callable_name(fn)})", restore_state) as state:
            self._check_rows_independent(state)
            searches = searches_run()
            self._capture_sizes(warmup)
            if searches_run() != searches and not _ranks_capture_together():
                # A size's warm-up tuned a kernel (its first call at that row count): graphs
                # captured before a tuner's search replay slower for the rest of the
                # process (notes/graphs.md). Every choice is recorded now: capture again.
                self._graphs.clear()
                self._copies.clear()
                self.pool = torch.cuda.graph_pool_handle() if self.pool is not None else None
                self._capture_sizes(warmup)

    def _capture_sizes(self, warmup: int) -> None:
        for size in reversed(self.sizes):  # largest first: smaller graphs reuse its pool
            views = [buf.narrow(self.dim, 0, size) for buf in self._buffers]
            self._copies[size] = None
            if self._staging is not None:
                graph, self._copies[size] = self._capture_with_copies(views, size, warmup)
                if graph is not None:
                    self._graphs[size] = graph
                    continue
            self._graphs[size] = capture(self.fn, *views, warmup=warmup, pool=self.pool)

    def _capture_with_copies(self, views: list[torch.Tensor], size: int, warmup: int):
        """(graph, its copy nodes): fn between copies captured as memcpy nodes: before it,
        each staging buffer into its static input; after it, each output leaf contiguous
        along dim 0 into a scratch tensor. (None, None) where the nodes could not be
        found."""
        staged = [buf.narrow(self.dim, 0, size) for buf in self._staging]
        count, fn = len(views), self.fn
        copied_out: list[tuple[torch.Tensor, torch.Tensor] | None] = []

        def copy_then_call(*args):  # (staged..., views...): the views stay graph inputs
            for view, source in zip(args[count:], args[:count], strict=True):
                view.copy_(source)
            outputs = fn(*args[count:])
            copied_out.clear()  # the warm-up calls ran this too: keep the captured call's
            for leaf in tree_flatten(outputs)[0]:
                scratch = None
                if (isinstance(leaf, torch.Tensor) and leaf.ndim > 0 and leaf.numel()
                        and leaf.shape[0] == size and leaf.is_contiguous()):
                    scratch = torch.empty_like(leaf)
                    scratch.copy_(leaf)
                copied_out.append((leaf, scratch) if scratch is not None else None)
            return outputs

        copy_then_call.__name__ = callable_name(fn)
        graph = capture_keeping_nodes(copy_then_call, *staged, *views, warmup=warmup,
                                      pool=self.pool)
        handles = graph.raw_handles()
        try:
            if handles is None:
                raise LookupError("PyTorch kept no graph nodes")
            out_pairs = [pair for pair in copied_out if pair is not None]
            copies = _GraphCopies(
                CopyNodes(self._runtime, *handles, staged, views),
                CopyNodes(self._runtime, *handles, [leaf for leaf, _ in out_pairs],
                          [scratch for _, scratch in out_pairs]),
                _node_numbers(copied_out))
        except (LookupError, RuntimeError):  # capture again, copying between replays
            return None, None
        copies.outputs.off()  # until a call aims them: the scratch went back to the pool
        return graph, copies

    def _check_rows_independent(self, state: StateWatch) -> None:
        """Refuse a function whose output rows depend on other rows (softmax or a sum over
        dim, batch statistics): padded rows would leak into every result. Two eager calls
        on the largest size, the second with its last row changed; the other rows of every
        batched output must not move (beyond the last bits of a run-to-run variation). Both
        calls take copies of the inputs: a step may write its next inputs over them."""
        size = self.sizes[-1]
        if size < 2:
            return
        inputs = [buf.narrow(self.dim, 0, size) for buf in self._buffers]
        with torch.no_grad():
            copies = [t.clone() for t in inputs]
            with state.call(copies):  # the runner's first call: restore_state snapshots here
                first = [t.clone() for t in _batched(self.fn(*copies), self.dim, size)]
            changed = [t.clone() for t in inputs]
            for t in changed:
                last = t.narrow(self.dim, size - 1, 1)
                if t.dtype == torch.bool:
                    last.logical_not_()
                elif t.is_floating_point():
                    last.mul_(-2).add_(1)
                else:
                    last.add_(1)
            with state.call(changed):
                second = _batched(self.fn(*changed), self.dim, size)
        for i, (a, b) in enumerate(zip(first, second, strict=True)):
            a, b = (t.narrow(self.dim, 0, size - 1).double() for t in (a, b))
            moved = (a - b).abs().max().item()
            if moved > 1e-3 * max(a.abs().max().item(), 1e-30):
                raise ValueError(
                    f"fn mixes rows along dim {self.dim}: changing row {size - 1} of the "
                    f"inputs changed other rows of output {i} (by up to {moved:.3g}). A "
                    "runner pads inputs with zero rows, which would leak into every result; "
                    "capture such a function with tg.capture at a fixed size instead")

    def _static_buffer(self, example: torch.Tensor) -> torch.Tensor:
        shape = list(example.shape)
        shape[self.dim] = self.sizes[-1]
        buffer = torch.zeros(shape, dtype=example.dtype, device=example.device)
        rows = min(example.shape[self.dim], self.sizes[-1])
        buffer.narrow(self.dim, 0, rows).copy_(example.narrow(self.dim, 0, rows))
        return buffer

    def _rows(self, inputs: tuple) -> int:
        """The size of dim along every input, after checking them against the examples."""
        if len(inputs) != len(self._examples):
            raise ValueError(f"expected {len(self._examples)} input(s), got {len(inputs)}")
        rows = None
        dim = self.dim
        for i, (x, (dtype, device, shape)) in enumerate(zip(inputs, self._examples,
                                                            strict=True)):
            if not isinstance(x, torch.Tensor):
                raise TypeError(f"input {i} must be a torch.Tensor, got {type(x).__name__}")
            if x.dtype != dtype:
                raise TypeError(f"input {i} has dtype {x.dtype}, the runner was built for "
                                f"{dtype}")
            if x.device != device:
                raise ValueError(f"input {i} is on {x.device}, the runner was built on {device}")
            x_shape = x.shape
            if (len(x_shape) != len(shape) or x_shape[:dim] != shape[:dim]
                    or x_shape[dim + 1:] != shape[dim + 1:]):
                shown = [("N" if d == dim else n) for d, n in enumerate(shape)]
                raise ValueError(f"input {i} has shape {tuple(x_shape)}, expected "
                                 f"({', '.join(map(str, shown))}) with N along dim {dim}")
            if rows is not None and x_shape[dim] != rows:
                raise ValueError(f"inputs disagree on the size of dim {dim}: "
                                 f"{rows} and {x_shape[dim]}")
            rows = x_shape[dim]
        return rows

    def __call__(self, *inputs, out=None):
        try:
            signature = tuple([(x.shape, x.dtype, x.device) for x in inputs])
        except AttributeError:  # not a tensor: _rows says which input
            signature = None
        call = self._calls.get(signature)
        if call is None:
            rows = self._rows(inputs)
            if rows == 0 or rows > self.sizes[-1]:
                return self._without_graph(inputs, rows, out)
            call = self._calls[signature] = self._prepare(rows)
        if not self._aim_copies(call, inputs):
            if call.copies is not None:
                call.copies.inputs.off()
            for destination, x in zip(call.destinations, inputs, strict=True):
                destination.copy_(x)
        for padding in call.padding:
            padding.zero_()
        self._last_call = call
        return self._replay(call, out)

    @staticmethod
    def _aim_copies(call: _SizedCall, inputs: tuple) -> bool:
        """Point the graph's input nodes at the inputs; False where it has none, or where an
        input is not contiguous or overlaps its static buffer without being it (copy_ then
        copies, or names the overlap)."""
        if call.copies is None:
            return False
        copies = []
        for (d_start, d_end), x in zip(call.spans, inputs, strict=True):
            if not x.is_contiguous():
                return False
            start, size = x.data_ptr(), x.numel() * x.element_size()
            if start == d_start or not size:
                copies.append(None)  # the static input itself, or empty: nothing to copy
            elif start < d_end and d_start < start + size:
                return False
            else:
                copies.append((d_start, start, size))
        call.copies.inputs.aim(copies)
        return True

    def again(self):
        """Replay the last call's graph on what its static inputs hold now, with no copies
        in: for a step that writes its next inputs over its own inputs (a decode step
        moving its tokens and positions on), called in a loop. Returns that call's outputs
        (copies of them under clone_outputs=True)."""
        if self._last_call is None:
            raise RuntimeError("again() replays the last call's graph: call the runner first")
        if self._last_call.copies is not None:
            self._last_call.copies.inputs.off()
        return self._replay(self._last_call)

    def _replay(self, call: _SizedCall, out=None):
        targets = None
        if out is None and self.clone_outputs:
            out = tree_map(lambda t: torch.empty_like(t) if isinstance(t, torch.Tensor) else t,
                           call.outputs)
            targets = tree_flatten(out)[0]
        elif out is not None:
            targets = _out_leaves(out, call.output_leaves, call.output_spec)
        copy_after = self._aim_output_copies(call, targets)
        call.graph.replay()
        for target, source in copy_after:
            target.copy_(source)
        if out is not None:
            return out
        if self.check_stale:
            return tree_map(lambda t: _GuardedOutput(t, call.graph)
                            if isinstance(t, torch.Tensor) else t, call.outputs)
        return call.outputs

    @staticmethod
    def _aim_output_copies(call: _SizedCall, targets: list | None) -> list:
        """Point the graph's output nodes at `targets` (the caller's tensors per flattened
        output leaf; None: copy nothing out). Returns the (target, output) pairs that no
        node copies, for copy_ after the replay."""
        if targets is None:
            if call.copies is not None:
                call.copies.outputs.off()
            return []
        sources = call.output_leaves
        nodes = call.copies.output_nodes if call.copies is not None else [None] * len(sources)
        aimed = [None] * (len(nodes) - nodes.count(None))
        copy_after = []
        for source, target, node in zip(sources, targets, nodes, strict=True):
            if not isinstance(source, torch.Tensor):
                continue
            start = target.data_ptr()
            if start == source.data_ptr() or not source.numel():
                continue  # the static output itself, or empty: nothing to copy
            if node is not None and target.is_contiguous():
                aimed[node] = (start, source.data_ptr(), source.numel() * source.element_size())
            else:
                copy_after.append((target, source))
        if call.copies is not None:
            call.copies.outputs.aim(aimed)
        return copy_after

    def _without_graph(self, inputs: tuple, rows: int, out=None):
        if self.fallback == "eager":
            self.eager_calls += 1
            self._last_call = None  # again() has no graph to replay for this call
            outputs = self.fn(*inputs)
            if out is None:
                return outputs
            sources, spec = tree_flatten(outputs)
            for target, source in zip(_out_leaves(out, sources, spec), sources, strict=True):
                if isinstance(source, torch.Tensor):
                    target.copy_(source)
            return out
        raise ValueError(f"{rows} rows along dim {self.dim}: the runner has graphs for "
                         f"{self.sizes} (create it with fallback='eager' to run such inputs "
                         "without a graph)")

    def _prepare(self, rows: int) -> _SizedCall:
        """Everything a call with `rows` rows touches, made once: a call is then the copies
        and a replay, with no new views (15.6 -> 8.8 us of Python a call, measured on CPU)."""
        size = self.sizes[bisect.bisect_left(self.sizes, rows)]
        graph = self._graphs[size]
        padding = [buf.narrow(self.dim, rows, size - rows) for buf in self._buffers
                   if rows < size]
        destinations = [buf.narrow(self.dim, 0, rows) for buf in self._buffers]
        spans = [byte_range(t) for t in destinations]
        outputs = tree_map(lambda t: self._sliced(t, size, rows), graph.outputs)
        return _SizedCall(graph, destinations, padding, outputs, self._copies[size], spans,
                          *tree_flatten(outputs))

    def _sliced(self, value, size: int, rows: int):
        if not isinstance(value, torch.Tensor):
            return value
        if value.ndim > self.dim and value.shape[self.dim] == size:
            return value.narrow(self.dim, 0, rows)
        warnings.warn(f"an output of shape {tuple(value.shape)} is not batched along dim "
                      f"{self.dim}; it is returned whole", RuntimeWarning, stacklevel=4)
        return value

    def stats(self) -> dict[int, dict]:
        """Per captured size: capture seconds, graph memory bytes, replay count, and whether
        the graph copies its inputs itself (copies_in_graph; else they are copied before
        each replay)."""
        return {size: {"capture_seconds": g.capture_seconds, "memory_bytes": g.memory_bytes,
                       "replays": g.replays,
                       "copies_in_graph": self._copies.get(size) is not None}
                for size, g in sorted(self._graphs.items())}
