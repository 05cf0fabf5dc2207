"""Split-K partials summed inside a thread-block cluster, against the arrival counter the
library's tensor-core decode kernel uses (us, graph replays over weights rotated past L2, PDL
on, interleaved rounds; beside tg.linear's own plan and cuBLAS).

Why: at 2-16 rows the projections that L2 would hold read 42-49% of copy (2048^2, issue
17's grid), and a split's programs pay a fence, the arrival atomic and a round of partial
loads after their mma, about three L2 round trips (notes/kernels.md, session 93). A column
block's slices launched as one cluster can meet at the cluster barrier instead, and the
leader can read its peers' partials from their shared memory (distributed shared memory).

Upstream Triton 3.6 has no way to say so in `tl`: its `num_ctas` spreads one program's
tensors over a cluster's CTAs, a reduction across them asserts, and the layout conversion
that would cross them through distributed shared memory fails to lower (nvvm.mapa's result
type; compiled here with Triton 3.6 for sm_90, session 94). So the probe compiles the kernel
as one CTA a program and launches it in clusters of SPLIT programs itself (the launcher's
packed metadata says how many CTAs a cluster: `launch_in_clusters`); program p is slice p %
SPLIT of column block p // SPLIT, so a block's slices are one cluster. The cluster barrier
and the shared-memory accesses are inline PTX: each peer writes its partial at the start of
its dynamic shared memory (`global_smem`, dead by then: the mma has waited on its operands),
the leader reads them with `mapa` + `ld.shared::cluster`, and a second barrier keeps the
peers alive until it has.

Modes: "rows" (the library's way: partials to a global workspace laid out (SPLIT, 16, N), the
real rows only, fence, arrival counter, the last sums), "atomic" (the same with a contiguous
tile a program, padding rows too: 4 KB at BLOCK_N 64), "barrier" (partials to the global
workspace, the cluster barrier, the leader sums from L2), "dsmem" (the cluster barrier, the
leader sums from its peers' shared memory). One step a program: the weight-left tile of
BLOCK_N rows by K / SPLIT columns, as the rule's whole-slice tile (64 x 256, split 8, for
2048^2).

    PYTHONPATH=src python3 research/probe_cluster_split.py [--shapes 2048x2048,...]
        [--rows 4,8,16] [--split 8] [--rounds 3]
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from rounds import poisoned_error, projection_case, rounds_line, time_in_rounds

import tilegraph as tg
from tilegraph.kernels._pdl import use_pdl
from tilegraph.testing import TOLERANCES

MODES = ("rows", "atomic", "barrier", "dsmem")
ROWS_TILE = tl.constexpr(16)  # x's rows padded to the mma's width
SHAPES = "2048x2048,3072x2048,5632x2048,1024x2048,256x2048"


@triton.jit
def _cluster_sync(token):
    """Every thread of every CTA of the cluster arrives (release) and waits (acquire)."""
    return tl.inline_asm_elementwise(
        "barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;\n\tmov.u32 $0, $1;",
        "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _shared_store(bits, offsets):
    """Store 32-bit values at byte offsets from the start of this CTA's dynamic shared memory."""
    return tl.inline_asm_elementwise(
        "{\n\t.reg .u32 a;\n\tmov.u32 a, global_smem;\n\tadd.u32 a, a, $2;\n\t"
        "st.shared.b32 [a], $1;\n\tmov.u32 $0, 0;\n\t}",
        "=r,r,r", [bits, offsets], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _peer_load(offsets, rank):
    """32-bit values at byte offsets from the start of cluster CTA `rank`'s shared memory."""
    return tl.inline_asm_elementwise(
        "{\n\t.reg .u32 a, r;\n\tmov.u32 a, global_smem;\n\tadd.u32 a, a, $1;\n\t"
        "mapa.shared::cluster.u32 r, a, $2;\n\tld.shared::cluster.b32 $0, [r];\n\t}",
        "=r,r,r", [offsets, rank], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _split_kernel(y_ptr, x_ptr, w_ptr, part_ptr, count_ptr, M, N, K,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                  MODE: tl.constexpr, PDL: tl.constexpr):
    """y = x W^T for M <= 16 rows; program p: slice p % SPLIT of K, rows (p // SPLIT) *
    BLOCK_N... of W, its tile on the mma's left (acc^T = W x^T)."""
    pid = tl.program_id(0)
    block = pid // SPLIT
    split = pid % SPLIT
    offs_n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = split * BLOCK_K + tl.arange(0, BLOCK_K)
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * K + offs_k[None, :],
                mask=(offs_n < N)[:, None] & (offs_k < K)[None, :], other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    offs_m = tl.arange(0, ROWS_TILE)
    xt = tl.load(x_ptr + offs_m[None, :] * K + offs_k[:, None],
                 mask=(offs_m < M)[None, :] & (offs_k < K)[:, None], other=0.0)
    acc = tl.dot(w, xt)                                                  # (BLOCK_N, 16)
    tile = tl.arange(0, BLOCK_N)[:, None] * ROWS_TILE + offs_m[None, :]
    y_ptrs = y_ptr + offs_m[None, :] * N + offs_n[:, None]
    y_mask = (offs_m < M)[None, :] & (offs_n < N)[:, None]
    parts = part_ptr + block.to(tl.int64) * SPLIT * BLOCK_N * ROWS_TILE
    if MODE == "atomic" or MODE == "rows":
        if MODE == "rows":  # the library's workspace: (SPLIT, 16, N), the real rows only
            parts = part_ptr
            tile = offs_m[None, :] * N + offs_n[:, None]
            part_mask = y_mask
            part_size = ROWS_TILE * N
        else:  # a contiguous tile a program, padding rows too
            part_mask = tile >= 0
            part_size = BLOCK_N * ROWS_TILE
        tl.store(parts + split * part_size + tile, acc, mask=part_mask)
        tl.debug_barrier()  # every thread's partial is out before the count says so
        arrived = tl.atomic_add(count_ptr + block, 1, sem="acq_rel")
        if arrived == SPLIT - 1:
            total = tl.zeros([BLOCK_N, ROWS_TILE], tl.float32)
            for s in tl.static_range(SPLIT):
                total += tl.load(parts + s * part_size + tile, mask=part_mask, other=0.0,
                                 cache_modifier=".cg")
            tl.store(y_ptrs, total.to(y_ptr.dtype.element_ty), mask=y_mask)
            tl.store(count_ptr + block, 0)
    elif MODE == "barrier":
        if split != 0:
            tl.store(parts + split * BLOCK_N * ROWS_TILE + tile, acc)
        _cluster_sync(split)
        if split == 0:
            for s in tl.static_range(1, SPLIT):
                acc += tl.load(parts + s * BLOCK_N * ROWS_TILE + tile, cache_modifier=".cg")
            tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=y_mask)
    else:  # "dsmem"
        offsets = tile * 4
        if split != 0:
            _shared_store(acc.to(tl.int32, bitcast=True), offsets)
        _cluster_sync(split)
        if split == 0:
            for rank in tl.static_range(1, SPLIT):
                acc += _peer_load(offsets, offsets * 0 + rank).to(tl.float32, bitcast=True)
        _cluster_sync(split)  # the peers' shared memory stays until the leader has read it
        if split == 0:
            tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=y_mask)


def launch_in_clusters(kernel, programs: int, cluster: int, values: list, **options) -> None:
    """Launch `kernel` (compiled as one CTA a program) over `programs` programs in clusters of
    `cluster` consecutive ones: Triton's launcher takes the cluster size from the compiled
    kernel's packed metadata (num_warps, num_ctas, shared) and launches gridX * num_ctas CTAs."""
    compiled = kernel.warmup(*values, grid=(programs,), **options)
    warps, _, shared = compiled.packed_metadata
    stream = torch.cuda.current_stream().cuda_stream
    compiled.run(programs // cluster, 1, 1, stream, compiled.function, (warps, cluster, shared),
                 None, None, None, *values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default=SHAPES)
    parser.add_argument("--rows", default="4,8,16")
    parser.add_argument("--split", type=int, default=8)
    parser.add_argument("--block-n", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{torch.cuda.get_device_name()}, bf16; us (median of rounds, % of copy at 4254 GB/s): "
          f"{' / '.join(MODES)} / tg.linear / cuBLAS", flush=True)
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        for rows in (int(r) for r in args.rows.split(",")):
            compare(n, k, rows, args.split, args.block_n, args.rounds)


def compare(n: int, k: int, rows: int, split: int, block_n: int, rounds: int) -> None:
    dtype = torch.bfloat16
    if k % split or triton.next_power_of_2(k // split) != k // split:
        print(f"{n} x {k}: K / {split} is no power of two")
        return
    weights, x, out, ref = projection_case(n, k, rows, dtype)
    blocks = triton.cdiv(n, block_n)
    parts = torch.empty(blocks * split * block_n * ROWS_TILE.value, dtype=torch.float32,
                        device="cuda")
    counts = torch.zeros(blocks, dtype=torch.int32, device="cuda")
    pdl = use_pdl(x.device, ())
    options = {"num_warps": 4, "num_stages": 1, **({"launch_pdl": True} if pdl else {})}
    calls = {}
    for mode in MODES:
        def call(w, mode=mode):
            values = [out, x, w, parts, counts, rows, n, k, block_n, k // split, split, mode, pdl]
            if mode in ("rows", "atomic"):
                _split_kernel[(blocks * split,)](*values, **options)
            else:
                launch_in_clusters(_split_kernel, blocks * split, split, values, **options)
        calls[mode] = call
    calls["tg.linear"] = lambda w: tg.linear(x, w, out=out)
    calls["cuBLAS"] = lambda w: torch.matmul(x, w.T, out=out)
    if not all_correct(calls, weights[0], out, ref, f"{n} x {k}, {rows} rows"):
        return
    times, medians = time_in_rounds(calls, weights, rounds)
    # again after the replays: a counter left nonzero or a race would show here
    if not all_correct(calls, weights[0], out, ref, f"{n} x {k}, {rows} rows, replayed"):
        return
    print(f"{n} x {k}, {rows} rows, split {split}: "
          f"{rounds_line(times, medians, n * k * dtype.itemsize)}; atomic over rows "
          f"{medians['rows'] / medians['atomic']:.3f}x, dsmem over atomic "
          f"{medians['atomic'] / medians['dsmem']:.3f}x", flush=True)


def all_correct(calls: dict, weight: torch.Tensor, out: torch.Tensor, ref: torch.Tensor,
                where: str) -> bool:
    """Whether every call writes x W^T into a poisoned out within bf16's tolerance."""
    for name, call in calls.items():
        error = poisoned_error(call, weight, out, ref)
        if not error <= TOLERANCES[out.dtype]:
            print(f"{where}: {name} wrong (relative error {error:.2e})", flush=True)
            return False
    return True


if __name__ == "__main__":
    main()
