"""Where the 8-row whole-slice tile's time goes: each program's %globaltimer at its phases,
in a captured chain of dependent projections (PDL on), beside tg.linear's time a link.

    PYTHONPATH=src:research python3 research/probe_rows_timeline.py [--rows 8]
        [--shape 2048x2048] [--links 48]

Why: at 8 rows a 2048^2 bf16 projection takes 4.2 us (47% of copy) where one row takes 3.1;
session 109 found that neither taking the split-K round trips out (research/
probe_rows_in_program.py) nor storing the first tile to shared memory after the wait
(research/w_after_the_wait.diff) helps. This asks the clock instead. The kernel is the
rule's tile for 2048^2 at 8 rows reduced to its chain (decode_plan.rule: BLOCK_N 64 on the
wgmma's left, BLOCK_K 256, K in 8 slices of one step, 4 warps; no norm, no residual): the
weight tile loaded before griddepcontrol.wait, x after it, one mma, the partial stored and
counted in (acq_rel), the last of a column block's slices summing the partials. Stamps:
  start   the program's first instruction
  waited  past griddepcontrol.wait (its weight tile in shared memory: the stores wait for it)
  mma     x loaded and the mma's result summed (the stamp reads it)
  counted the partial stored and the arrival counted (the stamp reads the count)
  done    the last slice: the partials summed and the result stored
Printed, over the chain's middle links (medians; the clock ticks in 32 ns or coarser, so
differences of medians over 256 programs a link): a link's period (from one link's median
`waited` to the next one's), each phase, how long after a link's last `done` its successor's
first program passes the wait (the boundary), and how long before that its programs started.
"""

import argparse
import statistics

import torch
import triton
import triton.language as tl

import tilegraph as tg
from tilegraph.bench.timing import measure

STAMPS = ("start", "waited", "mma", "counted", "done")


@triton.jit
def _ns(anchor):
    """%globaltimer, after `anchor` is known (any 32-bit integer the stamp must follow)."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [anchor],
                                     dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _timed_rows_kernel(y_ptr, x_ptr, w_ptr, partial_ptr, count_ptr, stamp_ptr, M, N, K,
                       SPLIT_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    t_start = _ns(pid_n)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, 16)
    offs_k = pid_k * BLOCK_K + tl.arange(0, BLOCK_K)
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * K + offs_k[None, :],
                mask=(offs_n < N)[:, None] & (offs_k < K)[None, :], other=0.0)
    tl.extra.cuda.gdc_wait()
    tl.extra.cuda.gdc_launch_dependents()
    t_waited = _ns(pid_k)
    x = tl.load(x_ptr + offs_m[:, None] * K + offs_k[None, :],
                mask=(offs_m < M)[:, None] & (offs_k < K)[None, :], other=0.0)
    acc = tl.dot(w, tl.trans(x))  # (BLOCK_N, 16)
    t_mma = _ns((tl.sum(tl.sum(acc, axis=1), axis=0) != 0.5).to(tl.int32))
    tile = tl.arange(0, BLOCK_N)[:, None] * 16 + offs_m[None, :]
    tl.store(partial_ptr + (pid_k * tl.num_programs(0) + pid_n) * BLOCK_N * 16 + tile, acc)
    arrived = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel")
    t_counted = _ns(arrived)
    stamps = stamp_ptr + (pid_k * tl.num_programs(0) + pid_n) * 5
    t_done = t_counted * 0
    if arrived == SPLIT_K - 1:
        total = tl.zeros([BLOCK_N, 16], tl.float32)
        for s in range(SPLIT_K):
            total += tl.load(partial_ptr + (s * tl.num_programs(0) + pid_n) * BLOCK_N * 16
                             + tile, cache_modifier=".cg")
        y = tl.trans(total)
        tl.store(y_ptr + offs_m[:, None] * N + offs_n[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])
        tl.store(count_ptr + pid_n, 0)
        t_done = _ns((tl.sum(tl.sum(total, axis=1), axis=0) != 0.5).to(tl.int32))
    tl.store(stamps + 0, t_start)
    tl.store(stamps + 1, t_waited)
    tl.store(stamps + 2, t_mma)
    tl.store(stamps + 3, t_counted)
    tl.store(stamps + 4, t_done)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--shape", default="2048x2048")
    parser.add_argument("--links", type=int, default=48)
    args = parser.parse_args()
    n, k = map(int, args.shape.split("x"))
    assert n == k, "a chain of dependent links: square projections"
    block_n, block_k = 64, 256
    split = triton.cdiv(k, block_k)
    grid = (triton.cdiv(n, block_n), split)
    programs = grid[0] * grid[1]
    copies = max(2, -(-150 * 2**20 // (n * k * 2)))
    weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
               for _ in range(copies)]
    acts = [torch.randn(args.rows, k, device="cuda", dtype=torch.bfloat16)
            for _ in range(args.links + 1)]
    partials = torch.empty(split * grid[0] * block_n * 16, device="cuda")
    counts = torch.zeros(args.links, grid[0], dtype=torch.int32, device="cuda")
    stamps = torch.zeros(args.links, programs, len(STAMPS), dtype=torch.int64, device="cuda")

    def timed_chain():
        for i in range(args.links):
            _timed_rows_kernel[grid](acts[i + 1], acts[i], weights[i % copies], partials,
                                     counts[i], stamps[i], args.rows, n, k, SPLIT_K=split,
                                     BLOCK_N=block_n, BLOCK_K=block_k, num_warps=4,
                                     num_stages=1, launch_pdl=True)

    def library_chain():
        for i in range(args.links):
            tg.linear(acts[i], weights[i % copies], out=acts[i + 1])

    ref = acts[0].double() @ weights[0].double().T
    timed_chain()
    torch.cuda.synchronize()
    err = ((acts[1].double() - ref).norm() / ref.norm()).item()
    print(f"{n}x{k} bf16 at {args.rows} rows, {programs} programs a link; first link's "
          f"relative error {err:.2e}")
    for name, chain in (("probe", timed_chain), ("tg.linear", library_chain)):
        us = measure(chain, warmup_ms=5, rep_ms=20, graph=True).median * 1e3 / args.links
        print(f"  {name}: {us:.2f} us a link (graph replays of the chain)")
    # the stamps the probe's last replay left: a chain captured whole, as the timing ran it
    s = stamps.cpu().double() / 1e3  # us
    middle = range(args.links // 4, 3 * args.links // 4)
    med = {name: [statistics.median(s[i, :, j].tolist()) for i in range(args.links)]
           for j, name in enumerate(STAMPS[:4])}
    period = statistics.median(med["waited"][i + 1] - med["waited"][i] for i in middle)
    phase = {f"{a} -> {b}": statistics.median(med[b][i] - med[a][i] for i in middle)
             for a, b in zip(STAMPS[:3], STAMPS[1:4], strict=True)}
    last = [(s[i, :, 4][s[i, :, 4] > 0]) for i in range(args.links)]
    finish = statistics.median(
        (last[i].median() - med["counted"][i]).item() for i in middle)
    boundary = statistics.median(
        (s[i + 1, :, 1].min() - last[i].max()).item() for i in middle)
    early = statistics.median(
        (s[i + 1, :, 1].min() - s[i + 1, :, 0].min()).item() for i in middle)
    start_spread = statistics.median((s[i, :, 0].max() - s[i, :, 0].min()).item() for i in middle)
    print(f"  a link's period {period:.2f} us; phases (median over programs): "
          + ", ".join(f"{k} {v:.2f}" for k, v in phase.items())
          + f", counted -> done (last slices) {finish:.2f}")
    print(f"  the next link's first program passes its wait {boundary:.2f} us after this "
          f"link's last done; it started {early:.2f} us before that; a link's programs start "
          f"over {start_spread:.2f} us")


if __name__ == "__main__":
    main()
