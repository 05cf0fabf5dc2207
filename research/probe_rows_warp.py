"""fp32 projections of 5-8 rows with each weight row's sum over K kept inside one warp,
against tg.linear (its rule: the CUDA-core row loop up to 2M weights a tile).

Why: fp32 stacks at 8 rows read 16-24% of the floor at d = 1024-1280, where the row loop
costs about 4.2 us a projection against 2.2 at one row. Compiled for sm_90 (Triton 3.6,
8 rows x 4 x 1024) the row loop holds 57-87 barriers after PDL's wait: its weight tile
(BLOCK_N, BLOCK_K) takes the default layout, which spreads K over the 4 warps, so every
row's sum over K crosses warps through shared memory. Here the tile is (BLOCK_N, KS, 128):
K cut into KS steps of 4 x 32 columns, the steps kept in each thread, which puts the warps
on the weight rows (Triton orders the layout's dimensions by contiguity, the step before the
row); each x row is loaded broadcast over the rows, so it takes the same layout, and a row's
sum is a thread's own adds and a warp's shuffles: 1 barrier (the final store's), 86
registers at BLOCK_N 4 over 4 warps (and 8 over 8), 145 at 8 over 4.

Chains of `--links` dependent projections y = W x (x the link before's y, `--rows` rows,
weights rotated past L2) in one CUDA graph captured by probe_resident_share.captured (on
another stream than the warm-up: split plans run unsplit there, session 111), us a link
(median of 5 timings of 50 replays); the warp-row kernel checked against float64 on each
shape first (poisoned output). Lost at 768^2 and 1024^2 (2x the row loop: x read row by
row after the wait; notes/kernels.md, session 111).

    PYTHONPATH=src python3 research/probe_rows_warp.py [--shapes 1024x1024,...]
        [--rows 8] [--links 48] [--tiles 4:4,8:4,8:8] [--peers]
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from probe_resident_share import captured, replayed_us  # research/: this folder

import tilegraph as tg
from tilegraph.bench.roofline import ceilings

STEP_COLUMNS = 128  # 4 fp32 a thread, 32 lanes: one warp spans a step


@triton.jit
def _rows_warp_kernel(y_ptr, x_ptr, w_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, KS: tl.constexpr,
                      KW: tl.constexpr, PDL: tl.constexpr):
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    cols = tl.arange(0, KS)[None, :, None] * KW + tl.arange(0, KW)[None, None, :]  # (1,KS,KW)
    w = tl.load(w_ptr + offs_n[:, None, None].to(tl.int64) * K + cols,
                mask=(offs_n < N)[:, None, None] & (cols < K), other=0.0)      # (BN, KS, KW)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    # x's row broadcast over the weight rows: loaded in w's own layout (no conversion)
    x_cols = cols + offs_n[:, None, None] * 0
    sums = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    for m in tl.static_range(BLOCK_M):
        x_m = tl.load(x_ptr + m * K + x_cols, mask=(x_cols < K) & (x_cols * 0 + m < M),
                      other=0.0)
        part = tl.sum(tl.sum(w * x_m, axis=2), axis=1)                         # (BN,)
        sums += tl.where(offs_m[None, :] == m, part[:, None], 0.0)
    acc = tl.trans(sums)                                                       # (BM, BN)
    tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], acc,
             mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])


def rows_warp(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, block_n: int, warps: int,
              pdl: bool = True) -> None:
    M, K = x.shape
    N = w.shape[0]
    ks = triton.next_power_of_2(triton.cdiv(K, STEP_COLUMNS))
    _rows_warp_kernel[(triton.cdiv(N, block_n),)](
        y, x, w, M, N, K, BLOCK_M=triton.next_power_of_2(M), BLOCK_N=block_n, KS=ks,
        KW=STEP_COLUMNS, PDL=pdl, num_warps=warps, num_stages=1,
        **({"launch_pdl": True} if pdl else {}))


def check(n: int, k: int, rows: int, block_n: int, warps: int) -> float:
    x = torch.randn(rows, k, device="cuda")
    w = torch.randn(n, k, device="cuda") * k**-0.5
    y = torch.full((rows, n), float("nan"), device="cuda")
    rows_warp(x, w, y, block_n, warps, pdl=False)
    ref = x.double() @ w.double().T
    err = ((y.double() - ref).abs().max() / ref.abs().max()).item()
    if not err < 1e-5:
        raise RuntimeError(f"{n}x{k} {rows} rows tile {block_n}:{warps}: error {err:.2e}")
    return err


def chain(n: int, k: int, rows: int, links: int, run, dtype=torch.float32) -> float:
    """us a link of `links` dependent rows x (n, k) projections (n == k) run(x, w, y),
    weights rotated past L2, captured by `captured`."""
    copies = max(2, -(-150 * 2**20 // (n * k * dtype.itemsize)))
    weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5 for _ in range(copies)]
    acts = [torch.randn(rows, k, device="cuda", dtype=dtype) for _ in range(links + 1)]

    def step():
        for i in range(links):
            run(acts[i], weights[i % copies], acts[i + 1])

    graph = captured(step)
    for _ in range(10):
        graph.replay()
    return replayed_us(graph, links)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default="768x768,1024x1024,1280x1280,1536x1536")
    parser.add_argument("--rows", default="8")
    parser.add_argument("--links", type=int, default=48)
    parser.add_argument("--tiles", default="2:4,4:4,8:4,8:8,16:8",
                        help="BLOCK_N:warps of the warp-row kernel")
    parser.add_argument("--peers", action="store_true", help="F.linear's chain too")
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    tiles = [tuple(int(v) for v in t.split(":")) for t in args.tiles.split(",")]
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s, fp32, us a link")
    for shape in args.shapes.split(","):
        n, k = (int(v) for v in shape.split("x"))
        for rows in (int(r) for r in args.rows.split(",")):
            floor = n * k * 4 / copy_gbps / 1e3
            line = [f"{n}x{k} {rows} rows (floor {floor:.2f}):"]
            runs = {"tg.linear": lambda x, w, y: tg.linear(x, w, out=y)}
            if args.peers:
                runs["F.linear"] = lambda x, w, y: torch.nn.functional.linear(x, w, out=y)
            for name, run in runs.items():
                line.append(f"{name} {chain(n, k, rows, args.links, run):.2f}")
            for block_n, warps in tiles:
                check(n, k, rows, block_n, warps)
                t = chain(n, k, rows, args.links,
                          lambda x, w, y, b=block_n, v=warps: rows_warp(x, w, y, b, v))
                line.append(f"{block_n}:{warps} {t:.2f}")
            print("  ".join(line), flush=True)


if __name__ == "__main__":
    main()
