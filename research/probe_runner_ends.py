"""What a decode stack's token costs besides its graph: the input copy before the replay and
the output copy after it, as the stack grid runs them (issue 17's % of the floor counts them).

    PYTHONPATH=src python3 research/probe_runner_ends.py --d 2048 1024 --dtype bf16

Per stack (spanning three L2 caches, as in `bench stack-grid`), us a token, medians of
graph-replayed loops of TOKENS tokens:
    replay       the stack's graph replayed, nothing else
    memcpy-in    PyTorch's copy_ (cudaMemcpyAsync) of the token into the static input, replay
    kernel-in    the same copy as a one-program Triton kernel, replay
    in-graph     the copy captured inside the graph (from a fixed staging buffer), replay
    set-src      that graph, its copy node pointed at the token before each replay
                 (cudaGraphExecMemcpyNodeSetParams1D through ctypes)
    runner       tg.GraphRunner (its input copy a node of its graph)
    copy-out     the runner, then its output copied out by copy_ after the replay
    grid         the stack grid's loop (runner(x, out=...): the copy out a node too)
    hand-grid    the same loop around the hand-captured PyTorch graph
"""

from __future__ import annotations

import argparse
import ctypes

import torch
import triton
import triton.language as tl

import tilegraph as tg
from tilegraph.bench import ceilings, measure
from tilegraph.demo import build_variant, floor_ms
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import TOKENS, layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@triton.jit
def _copy_kernel(dst_ptr, src_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def kernel_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    n = dst.numel()
    _copy_kernel[(triton.cdiv(n, 4096),)](dst, src, n, BLOCK=4096, num_warps=4)


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime PyTorch loaded (found in this process's memory map)."""
    torch.cuda.init()
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcudart.so" in line}
    if not paths:
        raise RuntimeError("no libcudart in this process")
    return ctypes.CDLL(sorted(paths)[0])


CUDA_GRAPH_NODE_TYPE_MEMCPY = 1
CUDA_MEMCPY_DEVICE_TO_DEVICE = 3


class CopyNode:
    """The one memcpy node of a graph captured with keep_graph=True, re-pointed per call."""

    def __init__(self, graph: torch.cuda.CUDAGraph):
        self.rt = _cudart()
        handle = ctypes.c_void_p(graph.raw_cuda_graph())
        count = ctypes.c_size_t(0)
        assert self.rt.cudaGraphGetNodes(handle, None, ctypes.byref(count)) == 0
        nodes = (ctypes.c_void_p * count.value)()
        assert self.rt.cudaGraphGetNodes(handle, nodes, ctypes.byref(count)) == 0
        copies = []
        for node in nodes:
            kind = ctypes.c_int(-1)
            assert self.rt.cudaGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)) == 0
            if kind.value == CUDA_GRAPH_NODE_TYPE_MEMCPY:
                copies.append(node)
        assert len(copies) == 1, f"{len(copies)} memcpy nodes"
        self.node = ctypes.c_void_p(copies[0])
        self.exec = ctypes.c_void_p(graph.raw_cuda_graph_exec())

    def point(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        status = self.rt.cudaGraphExecMemcpyNodeSetParams1D(
            self.exec, self.node, ctypes.c_void_p(dst.data_ptr()),
            ctypes.c_void_p(src.data_ptr()), ctypes.c_size_t(src.numel() * src.element_size()),
            CUDA_MEMCPY_DEVICE_TO_DEVICE)
        assert status == 0, f"cudaGraphExecMemcpyNodeSetParams1D: {status}"


def copy_in_graph(stack: LayerStack, static: torch.Tensor, staging: torch.Tensor):
    """(graph, its output): static <- staging, then the stack, captured together."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            static.copy_(staging)
            stack.fused_forward(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(graph):
        static.copy_(staging)
        out = stack.fused_forward(static)
    graph.instantiate()
    return graph, out


def per_token(fn, tokens: int) -> float:
    return measure(fn, warmup_ms=20, rep_ms=200, flush_l2=False).median / tokens * 1e3


def time_point(stack: LayerStack, batch: int, label: str, rounds: int,
               copy_gbps: float) -> None:
    inputs = stack.token_inputs(TOKENS, batch)
    outputs = torch.empty_like(inputs)
    static = inputs[0].clone()
    graph = tg.capture(stack.fused_forward, static)
    tilegraph = build_variant("tilegraph", stack, inputs[0])
    hand = build_variant("torch-graph", stack, inputs[0])
    runner = tilegraph.step
    staging, in_static = inputs[1].clone(), inputs[0].clone()
    in_graph, in_out = copy_in_graph(stack, in_static, staging)
    node = CopyNode(in_graph)
    for t in range(TOKENS):  # the re-pointed graph computes each token's output
        node.point(in_static, inputs[t])
        in_graph.replay()
        expected = runner(inputs[t]).double()
        error = ((in_out.double() - expected).norm() / expected.norm()).item()
        assert error < 1e-2, f"set-src token {t}: relative error {error:.2e}"

    def replay():
        for _ in range(TOKENS):
            graph.replay()

    def memcpy_in():
        for t in range(TOKENS):
            static.copy_(inputs[t])
            graph.replay()

    def kernel_in():
        for t in range(TOKENS):
            kernel_copy(static, inputs[t])
            graph.replay()

    def graph_copy():
        for _ in range(TOKENS):
            in_graph.replay()

    def set_src():
        for t in range(TOKENS):
            node.point(in_static, inputs[t])
            in_graph.replay()

    def through_runner():
        for t in range(TOKENS):
            runner(inputs[t])

    def copy_out():
        for t in range(TOKENS):
            outputs[t].copy_(runner(inputs[t]))

    def grid():  # demo.decode's loop; a tree before runner(x, out=...) copies out after
        into = getattr(tilegraph, "step_into", None)
        if into is None:
            return copy_out()
        for t in range(TOKENS):
            into(inputs[t], outputs[t])

    def hand_grid():
        for t in range(TOKENS):
            outputs[t].copy_(hand.step(inputs[t]))

    variants = {"replay": replay, "memcpy-in": memcpy_in, "kernel-in": kernel_in,
                "in-graph": graph_copy, "set-src": set_src, "runner": through_runner,
                "copy-out": copy_out, "grid": grid, "hand-grid": hand_grid}
    floor = floor_ms(stack.config.with_(batch=batch), copy_gbps) * 1e3
    for r in range(rounds):
        times = {k: per_token(fn, TOKENS) for k, fn in variants.items()}
        shown = "  ".join(f"{k} {v:.2f}" for k, v in times.items())
        print(f"{label} layers={stack.config.layers} b{batch} round {r}: {shown}  (floor "
              f"{floor:.1f}, grid {100 * floor / times['grid']:.1f}%)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--d", type=int, nargs="+", default=[2048])
    parser.add_argument("--batch", type=int, nargs="+", default=[1])
    parser.add_argument("--dtype", choices=DTYPES, nargs="+", default=["bf16"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s")
    for name in args.dtype:
        dtype = DTYPES[name]
        for d in args.d:
            config = LayerStackConfig(d=d, layers=layers_for(d, dtype), dtype=dtype,
                                      tokens=TOKENS)
            stack = LayerStack(config, device="cuda")
            for batch in args.batch:
                time_point(stack, batch, f"{name} d={d}", args.rounds, copy_gbps)
            del stack
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
