"""Whether a one-row projection whose programs each hold their whole share of rows, loaded
before griddepcontrol.wait, and that releases the next kernel at its start, hides the kernel
boundary of a chain of dependent projections.

Session 65 read the loss of a persistent kernel before a small one as the next kernel finding
no room to become resident early (notes/kernels.md, session 65). Here each link runs one or two
programs an SM, small enough that the next link's programs fit beside them: program p takes
rows [p R, (p + 1) R) of W in tiles of BLOCK_N whole rows, reads AHEAD tiles before the wait,
and (EARLY) calls griddepcontrol.launch_dependents first, so the next link is resident and
streams its own first tiles while this one waits for x. Where a share fits in AHEAD tiles,
every weight byte of a link is in flight before its wait.

    PYTHONPATH=src python3 research/probe_resident_share.py [--links 64] [--cases ...]

Prints us a link per case for tg.linear (the library's defaults, PDL on) and for each
(programs an SM, tile bytes, AHEAD, EARLY, warps), with the floor (weight bytes / copy).
"""

from __future__ import annotations

import argparse
import itertools

import torch
import triton
import triton.language as tl

import tilegraph as tg
from tilegraph.bench.roofline import ceilings


@triton.jit
def _share_kernel(y_ptr, x_ptr, w_ptr, N, K, rows_per_program,
                  EARLY: tl.constexpr, AHEAD: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    if EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    first = tl.program_id(0) * rows_per_program
    end = tl.minimum(first + rows_per_program, N)
    offs_k = tl.arange(0, BLOCK_K)
    k_mask = offs_k < K
    rows0 = first + tl.arange(0, BLOCK_N)
    w0 = tl.load(w_ptr + rows0[:, None].to(tl.int64) * K + offs_k[None, :],
                 mask=(rows0 < end)[:, None] & k_mask[None, :], other=0.0)
    if AHEAD == 2:
        rows1 = rows0 + BLOCK_N
        w1 = tl.load(w_ptr + rows1[:, None].to(tl.int64) * K + offs_k[None, :],
                     mask=(rows1 < end)[:, None] & k_mask[None, :], other=0.0)
    tl.extra.cuda.gdc_wait()
    if not EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(x_ptr + offs_k, mask=k_mask, other=0.0).to(tl.float32)
    acc = tl.sum(w0.to(tl.float32) * x[None, :], axis=1)
    tl.store(y_ptr + rows0, acc.to(y_ptr.dtype.element_ty), mask=rows0 < end)
    if AHEAD == 2:
        acc = tl.sum(w1.to(tl.float32) * x[None, :], axis=1)
        tl.store(y_ptr + rows1, acc.to(y_ptr.dtype.element_ty), mask=rows1 < end)
    for r0 in range(first + AHEAD * BLOCK_N, end, BLOCK_N):
        rows = r0 + tl.arange(0, BLOCK_N)
        w = tl.load(w_ptr + rows[:, None].to(tl.int64) * K + offs_k[None, :],
                    mask=(rows < end)[:, None] & k_mask[None, :], other=0.0)
        acc = tl.sum(w.to(tl.float32) * x[None, :], axis=1)
        tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=rows < end)


def share_launch(n, k, sms, per_sm, tile_bytes, ahead, early, warps):
    """The grid and kernel arguments of one link of n x k: contiguous shares of rows."""
    block_k = triton.next_power_of_2(k)
    programs = min(per_sm * sms, n)
    rows = triton.cdiv(n, programs)
    programs = triton.cdiv(n, rows)
    block_n = max(1, min(triton.next_power_of_2(rows), tile_bytes // (2 * block_k)))
    block_n = 1 << (block_n.bit_length() - 1)  # a power of two no larger
    return (programs,), dict(rows_per_program=rows, EARLY=early, AHEAD=ahead,
                             BLOCK_N=block_n, BLOCK_K=block_k, num_warps=warps,
                             num_stages=1, launch_pdl=True)


def captured(step) -> torch.cuda.CUDAGraph:
    """step() run once more on a side stream, then captured, as PyTorch's recipe does: on
    torch.cuda.graph's own stream, where no split-K workspace was made, so split plans run
    unsplit there (session 111; capture-spare-workspace.diff gives such captures a spare)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph


def chain(shapes, links, launch_of, dtype=torch.bfloat16):
    """A captured chain of `links` projections cycling through `shapes`, weights rotated past
    L2; launch_of(n, k) gives a link's launch (grid, _share_kernel's keywords), a callable
    run(y, x, w), or None for tg.linear. Returns us a link."""
    copies = max(2, -(-150 * 2**20 // sum(n * k * 2 for n, k in shapes)))
    layers = [shapes[i % len(shapes)] for i in range(links)]
    weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
               for _ in range(copies) for n, k in shapes]
    width = max(max(n, k) for n, k in shapes)
    acts = [torch.randn(width, device="cuda", dtype=dtype) for _ in range(links + 1)]
    launches = [launch_of(n, k) for n, k in layers]

    def step():
        for i, (n, k) in enumerate(layers):
            w = weights[i % len(weights)]
            if launches[i] is None:
                tg.linear(acts[i][None, :k], w, out=acts[i + 1][None, :n])
            elif callable(launches[i]):
                launches[i](acts[i + 1][:n], acts[i][:k], w)
            else:
                grid, kwargs = launches[i]
                _share_kernel[grid](acts[i + 1], acts[i], w, n, k, **kwargs)

    step()
    torch.cuda.synchronize()
    expected = torch.stack([a.float() for a in acts])
    # each link against float64 on the inputs the chain gave it
    for i, (n, k) in enumerate(layers[:len(shapes)]):
        ref = weights[i % len(weights)].double() @ acts[i][:k].double()
        err = (acts[i + 1][:n].double() - ref).abs().max() / ref.abs().max()
        if err > 2e-2:
            raise RuntimeError(f"link {i} ({n}x{k}): relative error {err:.2e}")
    graph = captured(step)
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    got = torch.stack([a.float() for a in acts])
    if not torch.equal(got, expected):
        raise RuntimeError("the graph's replay differs from the eager chain")
    return replayed_us(graph, links)


def replayed_us(graph: torch.cuda.CUDAGraph, calls: int) -> float:
    """Median us a call over 5 timings of 50 replays of a graph that makes `calls` calls."""
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        begin.record()
        for _ in range(50):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / 50 / calls)
    return sorted(times)[len(times) // 2]


CASES = {"896sq": [(896, 896)], "2048sq": [(2048, 2048)], "2816sq": [(2816, 2816)],
         "4096sq": [(4096, 4096)], "mlp2048": [(5632, 2048), (2048, 5632)],
         "mlp896": [(4864, 896), (896, 4864)], "qkv-o-896": [(1152, 896), (896, 896)]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--links", type=int, default=64)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--per-sm", default="1,2")
    parser.add_argument("--tiles", default="32768,65536")
    parser.add_argument("--warps", default="8")
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}, {sms} SMs, copy {copy_gbps:.0f} GB/s, "
          f"{args.links} links, triton {triton.__version__}, torch {torch.__version__}")
    variants = list(itertools.product([int(v) for v in args.per_sm.split(",")],
                                      [int(v) for v in args.tiles.split(",")], (1, 2),
                                      (False, True), [int(v) for v in args.warps.split(",")]))
    for name in args.cases.split(","):
        shapes = CASES[name]
        floor = sum(n * k * 2 for n, k in shapes) / len(shapes) / copy_gbps * 1e-3
        base = chain(shapes, args.links, lambda n, k: None)
        print(f"\n{name}: floor {floor:.2f} us a link; tg.linear {base:.2f} "
              f"({floor / base:.1%} of floor)", flush=True)
        results = []
        for per_sm, tile_bytes, ahead, early, warps in variants:
            def launch_of(n, k, v=(per_sm, tile_bytes, ahead, early, warps)):
                return share_launch(n, k, sms, *v)
            try:
                t = chain(shapes, args.links, launch_of)
            except Exception as error:  # out of resources: say so, go on
                print(f"  per_sm {per_sm} tile {tile_bytes // 1024}K ahead {ahead} early "
                      f"{int(early)} warps {warps}: {type(error).__name__} "
                      f"{str(error)[:80]}")
                continue
            results.append((t, per_sm, tile_bytes, ahead, early, warps))
            print(f"  per_sm {per_sm} tile {tile_bytes // 1024:3d}K ahead {ahead} early "
                  f"{int(early)} warps {warps:2d}: {t:6.2f} us ({floor / t:6.1%} of floor, "
                  f"{base / t:.3f}x tg.linear)", flush=True)
        if results:
            t, *v = min(results)
            print(f"  best {t:.2f} us {floor / t:.1%} of floor, {base / t:.3f}x tg.linear: {v}")


if __name__ == "__main__":
    main()
