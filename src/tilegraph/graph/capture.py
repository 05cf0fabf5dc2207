"""tg.capture and tg.scope: record GPU work once, replay it with one launch.

Rules (../shared/DESIGN.md): warm up before capture, so Triton JIT, autotuning and library
handles happen outside it; capture on a side stream in thread-local error mode; a replay
overwrites the previous outputs. On machines without CUDA a Graph replays by re-running its
function (a scope's: the ops it recorded), with one warning, so the same code runs everywhere.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from .._runtime import ops_through_dispatcher, side_stream, tilegraph_capture
from ..errors import CaptureError
from ._errors import as_capture_error, callable_name, user_frame
from ._state import StateWatch, watching_state
from ._training import TrainingWatch

_warned_cpu = False


def _warn_cpu_once() -> None:
    global _warned_cpu
    if not _warned_cpu:
        _warned_cpu = True
        warnings.warn("no CUDA device: tilegraph graphs replay by re-running their function; "
                      "CUDA graphs (and their speed) need a GPU", RuntimeWarning, stacklevel=3)


def _uses_cuda(args) -> bool:
    leaves, _ = tree_flatten(args)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if tensors:
        return any(t.is_cuda for t in tensors)
    return torch.cuda.is_available()


class Graph:
    """A captured function. `replay()` relaunches it and returns the same `outputs` pytree."""

    def __init__(self, fn: Callable | None, inputs: tuple, outputs: Any,
                 cuda_graph: torch.cuda.CUDAGraph | None, capture_seconds: float,
                 memory_bytes: int, pool=None, before_rerun: Callable[[], None] | None = None):
        self._fn = fn
        self._before_rerun = before_rerun
        self.inputs = inputs
        self.outputs = outputs
        self._cuda_graph = cuda_graph
        self.capture_seconds = capture_seconds
        self.memory_bytes = memory_bytes
        self.pool = pool
        self.replays = 0

    @property
    def is_cuda_graph(self) -> bool:
        return self._cuda_graph is not None

    def raw_handles(self) -> tuple[int, int] | None:
        """(cudaGraph_t, cudaGraphExec_t) of a graph captured keeping its nodes, else None."""
        try:
            return (self._cuda_graph.raw_cuda_graph(), self._cuda_graph.raw_cuda_graph_exec())
        except (AttributeError, RuntimeError):  # no CUDA graph, or its nodes were not kept
            return None

    def replay(self) -> Any:
        if self._cuda_graph is not None:
            self._cuda_graph.replay()
        else:
            # CPU: run again and write into the same output tensors, as a replay would.
            if self._before_rerun is not None:
                self._before_rerun()
            fresh = self._fn(*self.inputs)
            tree_map(lambda old, new: old.copy_(new) if isinstance(old, torch.Tensor) else old,
                     self.outputs, fresh)
        self.replays += 1
        return self.outputs


def _check_no_autograd(outputs, fn) -> None:
    """A graph replays kernels, not autograd's bookkeeping: outputs that record history would
    fail at .backward() after a replay (in-place version errors) far from the cause."""
    leaves, _ = tree_flatten(outputs)
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None:
            raise CaptureError(
                f"{callable_name(fn)} records autograd history (an output of "
                f"shape {tuple(leaf.shape)} has grad_fn {type(leaf.grad_fn).__name__}); a "
                "captured graph cannot replay it. Capture inference under "
                "torch.inference_mode() or torch.no_grad(), or give parameters "
                "requires_grad=False. A training step is captured whole when the function "
                "itself calls .backward() (see tg.TrainStep)")


def _training_outputs(outputs, watch: TrainingWatch, fn):
    """Outputs of a function that ran backward (a training step) leave autograd: its graph
    is spent, and a replay rewrites the same tensors. Other outputs must not record history."""
    if not watch.trains:
        _check_no_autograd(outputs, fn)
        return outputs
    return tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, outputs)


def warm_up_without_host_syncs(fn: Callable, args: tuple):
    """Run fn once with CUDA's sync debug mode set to error, so that a host sync (.item(),
    .cpu(), `if tensor:`) raises here, before capture begins. A sync inside a capture leaves
    the process broken (the CUDA RNG stays in capture state); found here, it does not."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        return fn(*args)
    except RuntimeError as error:
        if "synchroniz" not in str(error):
            raise
        raise CaptureError(
            f"capturing {callable_name(fn)}: the host waits for the GPU at "
            f"{user_frame(error.__traceback__)}\n  CUDA sync check said: "
            f"{str(error).strip().splitlines()[0]}\n  A graph replays GPU work only: keep "
            "values on the device (torch.where instead of `if`), and move host reads "
            "(.item(), .cpu(), printing) out of the captured function.") from error
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def _reserved_before_capture() -> int:
    """Reserved bytes as torch.cuda.graph will leave them on entry (it empties the cache
    first): the baseline from which a capture's pool memory is counted. Garbage is collected
    only where torch.cuda.graph collects it too (torch.compiler.config.force_cudagraph_gc,
    off by default since PyTorch found it too slow): in a process that had imported
    transformers, 35 collections took 8.6 s of a Generator's build (H200, notes/graphs.md)."""
    torch.cuda.synchronize()
    config = getattr(torch.compiler, "config", None)
    if getattr(config, "force_cudagraph_gc", False):
        gc.collect()
    torch.cuda.empty_cache()
    return torch.cuda.memory_reserved()


@contextlib.contextmanager
def _collector_paused():
    """Python's automatic garbage collection off while a graph is recorded. A collection
    there can run a finalizer that makes a call CUDA forbids during capture (freeing an
    event, a graph, memory outside the pool), which invalidates the capture; garbage is not
    collected up front either (_reserved_before_capture), so it waits until after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def capture(fn: Callable, *args, warmup: int = 2, pool=None,
            restore_state: bool | None = None) -> Graph:
    """Warm `fn(*args)` up `warmup` times on a side stream, then capture one call of it.

    `args` become the graph's static inputs: copy new values into them before `replay()`.
    `pool` (torch.cuda.graph_pool_handle() or another graph's .pool) shares memory between
    graphs that never replay at the same time.
    restore_state: state fn keeps outside its inputs and outputs (a counter, a cache, running
    statistics) is advanced by every warm-up call. None (default) warns (SideEffectWarning)
    naming each tensor that changed on every warm-up call; True puts back, after the
    capture, every tensor the first call wrote, as it was before warm-up; False does neither.
    """
    return capture_keeping_nodes(fn, *args, warmup=warmup, pool=pool,
                                 restore_state=restore_state, keep_nodes=False)


def capture_keeping_nodes(fn: Callable, *args, warmup: int = 2, pool=None,
                          restore_state: bool | None = None, keep_nodes: bool = True) -> Graph:
    """tg.capture, keeping the CUDA graph's nodes (where PyTorch can) so that its
    instantiation can be updated between replays: Graph.raw_handles()."""
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1 (Triton compiles and tunes on the first call), "
                         f"got {warmup}")
    name = callable_name(fn)
    with watching_state(f"tg.capture({name})", restore_state) as state:
        if _uses_cuda(args):
            return _capture_on_cuda(fn, args, warmup, pool, name, state, keep_nodes)
        return _rerun_on_cpu(fn, args, warmup, name, state)


def _new_cuda_graph(keep_nodes: bool) -> torch.cuda.CUDAGraph:
    if keep_nodes:
        try:  # PyTorch 2.8 on
            return torch.cuda.CUDAGraph(keep_graph=True)
        except TypeError:
            pass
    return torch.cuda.CUDAGraph()


def _first_call(fn: Callable, args: tuple, name: str, state: StateWatch, on_cuda: bool):
    """fn(*args) once, watched for a training step and for the state it changes, whose
    fingerprints are taken after it: (its outputs, the training watch)."""
    with TrainingWatch(name, on_cuda=on_cuda) as watch, state.call(args):
        outputs = fn(*args)
    state.handlers.append(watch.handles)
    state.exclude(outputs)
    state.settle()
    return outputs, watch


def _rerun_on_cpu(fn: Callable, args: tuple, warmup: int, name: str,
                  state: StateWatch) -> Graph:
    _warn_cpu_once()
    start = time.perf_counter()
    outputs, watch = _first_call(fn, args, name, state, on_cuda=False)
    for _ in range(warmup - 1):
        with state.call(args):
            outputs = fn(*args)
        state.exclude(outputs)
    outputs = _training_outputs(outputs, watch, fn)
    watch.restore()
    rerun = watch.release_gradients if watch.trains else None
    return Graph(fn, args, outputs, None, time.perf_counter() - start, 0, before_rerun=rerun)


def _capture_on_cuda(fn: Callable, args: tuple, warmup: int, pool, name: str,
                     state: StateWatch, keep_nodes: bool) -> Graph:
    stream = side_stream()
    stream.wait_stream(torch.cuda.current_stream())
    start = time.perf_counter()
    with torch.cuda.stream(stream):
        # The first call compiles and tunes (which may wait for the GPU); a second one,
        # where there is one, must not. Only the first is watched for training (the
        # watch's torch-function mode would make a torch.compile'd fn compile differently
        # from the unwatched call captured last).
        outputs, watch = _first_call(fn, args, name, state, on_cuda=True)
        for _ in range(warmup - 1):
            with state.call(args):
                outputs = warm_up_without_host_syncs(fn, args)
            state.exclude(outputs)
    torch.cuda.current_stream().wait_stream(stream)
    _training_outputs(outputs, watch, fn)
    watch.release_gradients()
    del outputs  # the warm-up's results: their memory goes back before the capture
    reserved = _reserved_before_capture()
    cuda_graph = _new_cuda_graph(keep_nodes)
    pool = pool if pool is not None else torch.cuda.graph_pool_handle()
    caller_stream = torch.cuda.current_stream()
    try:
        with (_collector_paused(),
              torch.cuda.graph(cuda_graph, pool=pool, stream=stream,
                               capture_error_mode="thread_local"),
              tilegraph_capture()):
            outputs = fn(*args)
    except Exception as error:
        _recover_from_failed_capture(caller_stream, stream)
        watch.restore()  # a failed capture must not leave the model trained by warm-up
        raise as_capture_error(error, f"capturing {name}") from error
    if keep_nodes:
        cuda_graph.instantiate()  # a kept graph is instantiated here, not at capture's end
    torch.cuda.synchronize()
    memory = torch.cuda.memory_reserved() - reserved
    watch.restore()  # recording ran nothing: only the warm-up calls trained
    state.exclude(outputs)
    return Graph(fn, args, _training_outputs(outputs, watch, fn), cuda_graph,
                 time.perf_counter() - start, memory, pool)


def _recover_from_failed_capture(caller_stream, capture_stream) -> None:
    """Undo what a capture that failed at capture_end leaves behind. It skips restoring the
    caller's stream, and the epilogue that takes the CUDA RNG out of capture mode: every
    later random op would raise "Offset increment outside graph capture encountered
    unexpectedly". Recording a one-op graph runs that prologue-epilogue pair again, on the
    same generator state (replacing the state would split the random streams of earlier
    graphs from later eager draws)."""
    torch.cuda.set_stream(caller_stream)
    try:
        reset = torch.cuda.CUDAGraph()
        with torch.cuda.graph(reset, stream=capture_stream, capture_error_mode="thread_local"):
            torch.ones(1, device="cuda").mul_(2)  # (an empty graph warns)
    except RuntimeError:
        pass  # the device itself is broken (a sticky error): the capture's error says why
    finally:
        torch.cuda.set_stream(caller_stream)


def _inside_triton_interpreter() -> bool:
    """On CPU machines Triton's interpreter copies kernel arguments to host tensors of its
    own; those are not the user's allocations (and no CUDA graph is recorded there)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_INTERPRETER_FILE):
            return True
        frame = frame.f_back
    return False


_INTERPRETER_FILE = os.path.join("triton", "runtime", "interpreter.py")


class _RefuseAllocation(TorchDispatchMode):
    """Raise on any op that returns a fresh tensor: inside a scope, memory allocated during
    capture belongs to the graph and would be silently reused by later replays. On CPU,
    also record the ops (PyTorch's and tilegraph's, which the scope sends through the
    dispatcher) so that the scope's graph replays them."""

    def __init__(self, record: bool):
        super().__init__()
        self.recorded: list | None = [] if record else None
        self.unrecorded_kernel = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        allocates = any(ret.alias_info is None and str(ret.type).startswith("Tensor")
                        for ret in func._schema.returns)
        inside_interpreter = ((allocates or self.recorded is not None)
                              and _inside_triton_interpreter())
        if allocates and not inside_interpreter:
            raise CaptureError(
                f"{func} allocates a new tensor inside tg.scope(), at "
                f"{user_frame()}; allocate buffers before the scope and write into "
                "them (out=..., in-place ops, .copy_()), or use tg.capture(fn), which "
                "owns its outputs")
        result = func(*args, **kwargs)
        if self.recorded is not None:
            if inside_interpreter:  # a Triton kernel launched by hand: not replayable here
                self.unrecorded_kernel = True
            else:
                self.recorded.append((func, args, kwargs))
        return result


def _replaying(recorded: list, unrecorded_kernel: bool) -> Callable[[], None]:
    """What a CPU scope's graph runs on replay: the recorded ops, on the same tensors."""
    def replay() -> None:
        if unrecorded_kernel:
            raise RuntimeError(
                "this scope launched a Triton kernel directly, which a CPU scope cannot "
                "record (it replays PyTorch ops and tilegraph's ops); use tg.capture(fn) "
                "for code that must also replay on CPU")
        for func, args, kwargs in recorded:
            func(*args, **kwargs)
    return replay


class scope:
    """Imperative capture: `with tg.scope() as s: ...` records the block; `s.graph` replays it.

    For code that writes into buffers it already owns: any op that allocates a tensor inside
    the block raises CaptureError. Run the block once before the scope (warm-up), so Triton
    compiles and tunes outside the capture. Without CUDA the block runs once while its
    PyTorch and tilegraph ops are recorded, and a replay runs those ops again on the same
    tensors (Python between them runs once, as a CUDA graph freezes it).
    """

    def __init__(self, pool=None):
        self.pool = pool
        self.graph: Graph | None = None

    def __enter__(self) -> scope:
        self._cuda_graph = None
        if torch.cuda.is_available():
            self._caller_stream = torch.cuda.current_stream()
            self._stream = side_stream()
            self._stream.wait_stream(torch.cuda.current_stream())
            self._reserved = _reserved_before_capture()
            self._cuda_graph = torch.cuda.CUDAGraph()
            self.pool = self.pool if self.pool is not None else torch.cuda.graph_pool_handle()
            self._capturing = torch.cuda.graph(self._cuda_graph, pool=self.pool,
                                               stream=self._stream,
                                               capture_error_mode="thread_local")
            self._paused = _collector_paused()
            self._paused.__enter__()
            try:
                self._capturing.__enter__()
            except BaseException:
                self._paused.__exit__(None, None, None)
                raise
        else:
            _warn_cpu_once()
        self._marked = tilegraph_capture()
        self._marked.__enter__()
        self._start = time.perf_counter()
        recording = self._cuda_graph is None
        # tilegraph's ops reach the refusal below as custom ops: what a launcher allocates
        # for itself (a norm's rows before the tensor-core kernel, a decode layer's q) is
        # scratch the graph keeps, not a tensor the caller would find overwritten
        self._routed = ops_through_dispatcher()
        self._routed.__enter__()
        self._no_alloc = _RefuseAllocation(record=recording)
        self._no_alloc.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._no_alloc.__exit__(exc_type, exc, tb)
        self._routed.__exit__(exc_type, exc, tb)
        self._marked.__exit__(exc_type, exc, tb)
        end_error = None
        if self._cuda_graph is not None:
            try:
                self._capturing.__exit__(exc_type, exc, tb)
            except Exception as error:  # capture_end fails after an illegal operation
                end_error = error
                _recover_from_failed_capture(self._caller_stream, self._stream)
            finally:
                self._paused.__exit__(None, None, None)
        error = exc if exc is not None else end_error
        if error is not None:
            converted = as_capture_error(error, "recording tg.scope()")
            if converted is not error:
                raise converted from error
            if exc is None:
                raise error
            return False
        memory = 0
        if self._cuda_graph is not None:
            torch.cuda.synchronize()
            memory = torch.cuda.memory_reserved() - self._reserved
        rerun = (None if self._cuda_graph is not None else
                 _replaying(self._no_alloc.recorded, self._no_alloc.unrecorded_kernel))
        self.graph = Graph(rerun, (), None, self._cuda_graph, time.perf_counter() - self._start,
                           memory, self.pool)
        return False
