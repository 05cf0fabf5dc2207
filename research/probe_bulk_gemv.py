"""Whether one-row projections whose weights land in shared memory by bulk copies issued
before griddepcontrol.wait hide the kernel boundary of a chain of dependent projections.

Sessions 66-68 found each link of a one-row chain paying about 1.5 us beyond its weights
(notes/kernels.md, session 66): a share of the weights held in registers before the wait
leaves no room for the next link's program beside it, and Triton's `tl` has no way to put it
in shared memory instead. research/bulk_gemv.cu does that in CUDA C++: each program's rows
arrive in a ring of shared-memory buffers (cp.async.bulk, counted on an mbarrier) while it
waits, with few registers, so the next link (released at the start) can be resident and
stream its own weights meanwhile. Chains of 64 links, weights rotated past L2, against
tg.linear in the same process (research/probe_resident_share.py's harness).

    PYTHONPATH=src python3 research/probe_bulk_gemv.py [--links 64] [--cases 2048sq,...]

Needs nvcc and ninja (the CUDA source is built on first use for this GPU only).
"""

from __future__ import annotations

import argparse
import itertools
import os
from pathlib import Path

import torch
import triton
from probe_resident_share import CASES as SHARE_CASES
from probe_resident_share import captured, chain

from tilegraph.bench.roofline import ceilings

CASES = {**SHARE_CASES, "2560sq": [(2560, 2560)], "3072sq": [(3072, 3072)],
         "mlp2048x8192": [(8192, 2048), (2048, 8192)]}
SHARED_MEMORY = 226 * 1024


def build(threads: int):
    """The kernel compiled for `threads` threads a program."""
    from torch.utils.cpp_extension import load_inline

    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")
    source = (Path(__file__).parent / "bulk_gemv.cu").read_text()
    module = load_inline(name=f"probe_bulk_gemv_{threads}", cpp_sources=(
        "void bulk_gemv(torch::Tensor y, torch::Tensor x, torch::Tensor w, "
        "int64_t rows_per_program, int64_t chunk_rows, int64_t stages, int64_t flags, "
        "torch::Tensor trace);"), cuda_sources=source, functions=["bulk_gemv"],
        extra_cuda_cflags=["-O3", f"-DTHREADS_PER_PROGRAM={threads}",
                           f"-DMIN_PROGRAMS={768 // threads}"])  # 78 registers, no spills
    module.threads = threads
    return module


def bulk_launch(module, n, k, sms, per_sm, chunk_bytes, max_stages, early, land_first,
                trace=None):
    """run(y, x, w) for one link of n x k: rows a program for `per_sm` programs an SM, chunks
    of the most whole rows (a power of two, at most a row a warp) within chunk_bytes, at most
    max_stages of them in flight; early: the next link released at the start; land_first:
    the chunks in flight waited for before the wait; `trace`: an int64 tensor of 4 a program
    (the kernel's timestamps)."""
    rows = triton.cdiv(n, per_sm * sms)
    chunk = module.threads // 32
    while chunk > 1 and (chunk * k * 2 > chunk_bytes or chunk > rows):
        chunk //= 2
    stages = min(max_stages, triton.cdiv(rows, chunk))
    if stages * chunk * k * 2 + 16 * triton.cdiv(rows, 4) + 2 * k > SHARED_MEMORY:
        raise ValueError(f"{stages} stages of {chunk} rows of {k} exceed shared memory")
    no_trace = torch.empty(0, dtype=torch.int64, device="cuda")

    def run(y, x, w):
        module.bulk_gemv(y, x, w, rows, chunk, stages, int(early) | 2 * int(land_first),
                         no_trace if trace is None else trace)
    run.shape = (rows, chunk, stages)
    run.programs = triton.cdiv(n, rows)
    return run


def timeline(module, shapes, sms, variant, links=12, shown=range(4, 9)):
    """Per link of a captured chain (one replay, weights rotated past L2), the programs'
    start, wait, first chunk landed and end in us from link shown[0]'s first start:
    min / median / max over programs."""
    copies = max(2, -(-150 * 2**20 // sum(n * k * 2 for n, k in shapes)))
    weights = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * k**-0.5
               for _ in range(copies) for n, k in shapes]
    width = max(max(n, k) for n, k in shapes)
    acts = [torch.randn(width, device="cuda", dtype=torch.bfloat16) for _ in range(links + 1)]
    runs, traces = [], []
    for i in range(links):
        n, k = shapes[i % len(shapes)]
        probe = bulk_launch(module, n, k, sms, *variant)
        traces.append(torch.zeros(4 * probe.programs, dtype=torch.int64, device="cuda"))
        runs.append(bulk_launch(module, n, k, sms, *variant, trace=traces[-1]))

    def step():
        for i, run in enumerate(runs):
            n, k = shapes[i % len(shapes)]
            run(acts[i + 1][:n], acts[i][:k], weights[i % len(weights)])

    step()
    graph = captured(step)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    stamps = [t.view(-1, 4).double() for t in traces]
    zero = stamps[shown[0]][:, 0].min()
    print(f"  timeline (us; min/median/max over programs) {variant}")
    for i in shown:
        cols = []
        for j, name in enumerate(("start", "waited", "landed", "end")):
            v = (stamps[i][:, j] - zero) / 1e3
            cols.append(f"{name} {v.min():6.2f}/{v.median():6.2f}/{v.max():6.2f}")
        print(f"    link {i}: " + "  ".join(cols))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--links", type=int, default=64)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--per-sm", default="1,2,3")
    parser.add_argument("--chunks", default="16384,32768")
    parser.add_argument("--stages", default="2,8")
    parser.add_argument("--threads", default="128,256")
    parser.add_argument("--timeline", default="",
                        help="case:threads:per_sm:chunk:stages:early:land,... traced instead")
    args = parser.parse_args()
    modules = {int(t): build(int(t)) for t in args.threads.split(",")}
    copy_gbps = ceilings()["copy_gbps"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name()}, {sms} SMs, copy {copy_gbps:.0f} GB/s, "
          f"{args.links} links, torch {torch.__version__}")
    if args.timeline:
        for spec in args.timeline.split(","):
            name, threads, *variant = spec.split(":")
            print(f"\n{name} ({threads} threads)")
            per_sm, chunk_bytes, stages, early, land = (int(v) for v in variant)
            timeline(modules[int(threads)], CASES[name], sms,
                     (per_sm, chunk_bytes, stages, bool(early), bool(land)))
        return
    variants = list(itertools.product(modules.values(),
                                      [int(v) for v in args.per_sm.split(",")],
                                      [int(v) for v in args.chunks.split(",")],
                                      [int(v) for v in args.stages.split(",")], (True, False),
                                      (True, False)))
    for name in args.cases.split(","):
        shapes = CASES[name]
        floor = sum(n * k * 2 for n, k in shapes) / len(shapes) / copy_gbps * 1e-3
        base = chain(shapes, args.links, lambda n, k: None)
        print(f"\n{name}: floor {floor:.2f} us a link; tg.linear {base:.2f} "
              f"({floor / base:.1%} of floor)", flush=True)
        results = []
        for module, per_sm, chunk_bytes, max_stages, early, land in variants:
            label = f"threads {module.threads} per_sm {per_sm} chunk {chunk_bytes // 1024:2d}K " \
                    f"stages<={max_stages} early {int(early)} land {int(land)}"
            try:
                launches = {shape: bulk_launch(module, *shape, sms, per_sm, chunk_bytes,
                                               max_stages, early, land) for shape in shapes}
                t = chain(shapes, args.links, lambda n, k, ls=launches: ls[(n, k)])
            except (ValueError, RuntimeError) as error:
                print(f"  {label}: {type(error).__name__} {str(error)[:90]}")
                continue
            plans = " ".join(f"{r}/{c}/{s}" for r, c, s in
                             (launches[shape].shape for shape in shapes))
            results.append((t, label))
            print(f"  {label} (rows/chunk/stages {plans}): {t:6.2f} us ({floor / t:6.1%} of "
                  f"floor, {base / t:.3f}x tg.linear)", flush=True)
        if results:
            t, label = min(results)
            print(f"  best {t:.2f} us {floor / t:.1%} of floor, {base / t:.3f}x tg.linear: "
                  f"{label}")


if __name__ == "__main__":
    main()
