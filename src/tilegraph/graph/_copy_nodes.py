"""A graph's copies as nodes of the graph, pointed at each call's tensors.

A GraphRunner call copies the caller's inputs into the graph's static buffers, zeroes the
padded rows and, where the caller keeps its outputs, copies them out. Launched between
replays, each such copy delays the next graph's start: a one-row bf16 decode stack of d=2048
took 4.4 us a token more than its bare replays with the input copied before the replay;
captured as the graph's first node it took 1.6 us more, and re-pointed at each call's
tensor 2.0-2.3 us (H100; a one-program Triton copy before the replay cost what
cudaMemcpyAsync did; notes/graphs.md, session 54).
Re-pointing goes through the CUDA runtime's graph-update calls, which PyTorch does not wrap:
`cudaGraphExecMemcpyNodeSetParams1D` changes only the launches that follow it, so it is
safe while earlier replays still run. Where the runtime or those calls cannot be found, the
runner copies before the replay as it did.
"""

from __future__ import annotations

import ctypes
import functools

import torch

_MEMCPY_NODE = 1         # cudaGraphNodeTypeMemcpy
_DEVICE_TO_DEVICE = 3    # cudaMemcpyDeviceToDevice


class _Pos(ctypes.Structure):
    _fields_ = [("x", ctypes.c_size_t), ("y", ctypes.c_size_t), ("z", ctypes.c_size_t)]


class _PitchedPtr(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("pitch", ctypes.c_size_t),
                ("xsize", ctypes.c_size_t), ("ysize", ctypes.c_size_t)]


class _Memcpy3DParms(ctypes.Structure):  # cudaMemcpy3DParms
    _fields_ = [("srcArray", ctypes.c_void_p), ("srcPos", _Pos), ("srcPtr", _PitchedPtr),
                ("dstArray", ctypes.c_void_p), ("dstPos", _Pos), ("dstPtr", _PitchedPtr),
                ("extent", _Pos), ("kind", ctypes.c_int)]


@functools.cache
def cuda_runtime() -> ctypes.CDLL | None:
    """The CUDA runtime library this process loaded for PyTorch, or None (not Linux, not
    found, or without the graph-update calls)."""
    if not torch.cuda.is_available():
        return None
    torch.cuda.init()
    try:
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps if "libcudart.so" in line})
        runtime = ctypes.CDLL(paths[0]) if paths else None
    except OSError:
        return None
    needed = ("cudaGraphGetNodes", "cudaGraphNodeGetType", "cudaGraphMemcpyNodeGetParams",
              "cudaGraphExecMemcpyNodeSetParams1D", "cudaGraphNodeSetEnabled")
    if runtime is None or not all(hasattr(runtime, name) for name in needed):
        return None
    return runtime


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with cudaError {status}")


def _memcpy_nodes(runtime: ctypes.CDLL, graph_handle: int) -> dict[tuple[int, int], int]:
    """(source, destination) address of every memcpy node of a graph -> the node."""
    graph = ctypes.c_void_p(graph_handle)
    count = ctypes.c_size_t(0)
    _check(runtime.cudaGraphGetNodes(graph, None, ctypes.byref(count)), "cudaGraphGetNodes")
    nodes = (ctypes.c_void_p * count.value)()
    _check(runtime.cudaGraphGetNodes(graph, nodes, ctypes.byref(count)), "cudaGraphGetNodes")
    found = {}
    for node in nodes:
        kind = ctypes.c_int(-1)
        _check(runtime.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)),
               "cudaGraphNodeGetType")
        if kind.value != _MEMCPY_NODE:
            continue
        params = _Memcpy3DParms()
        _check(runtime.cudaGraphMemcpyNodeGetParams(ctypes.c_void_p(node),
                                                     ctypes.byref(params)),
               "cudaGraphMemcpyNodeGetParams")
        source = (params.srcPtr.ptr or 0) + params.srcPos.x
        destination = (params.dstPtr.ptr or 0) + params.dstPos.x
        found[(source, destination)] = node
    return found


class CopyNodes:
    """Memcpy nodes of a captured graph, one per (source, destination) pair copied at
    capture, found by those addresses; aim() points them at a call's tensors."""

    def __init__(self, runtime: ctypes.CDLL, graph_handle: int, exec_handle: int,
                 sources: list[torch.Tensor], destinations: list[torch.Tensor]):
        nodes = _memcpy_nodes(runtime, graph_handle)
        keys = [(s.data_ptr(), d.data_ptr()) for s, d in zip(sources, destinations,
                                                               strict=True)]
        missing = [k for k in keys if k not in nodes]
        if missing:
            raise LookupError(f"{len(missing)} of the graph's copies are not memcpy nodes")
        self._set_params = runtime.cudaGraphExecMemcpyNodeSetParams1D
        self._set_params.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_size_t, ctypes.c_int]
        self._set_enabled = runtime.cudaGraphNodeSetEnabled
        self._set_enabled.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
        self._exec = exec_handle
        self._nodes = [nodes[k] for k in keys]
        # What each node copies now, (destination, source, bytes): the driver is asked
        # again only when that changes (a caller feeding one buffer in asks once).
        self._aimed = [(d.data_ptr(), s.data_ptr(), s.numel() * s.element_size())
                       for s, d in zip(sources, destinations, strict=True)]
        self._enabled = [True] * len(keys)

    def aim(self, copies) -> None:
        """copies: per node, (destination address, source address, bytes) for the next
        replays to copy, or None to copy nothing there."""
        for i, copy in enumerate(copies):
            if copy is not None and copy != self._aimed[i]:
                _check(self._set_params(self._exec, self._nodes[i], *copy, _DEVICE_TO_DEVICE),
                       "cudaGraphExecMemcpyNodeSetParams1D")
                self._aimed[i] = copy
            self._enable(i, copy is not None)

    def off(self) -> None:
        """The next replays copy nothing here."""
        for i in range(len(self._nodes)):
            self._enable(i, False)

    def _enable(self, i: int, enabled: bool) -> None:
        if self._enabled[i] != enabled:
            _check(self._set_enabled(self._exec, self._nodes[i], int(enabled)),
                   "cudaGraphNodeSetEnabled")
            self._enabled[i] = enabled
