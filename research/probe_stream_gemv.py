"""A one-row GEMV whose programs stay resident and stream row blocks through shared memory
(Triton's software pipeline: cp.async, STAGES tiles deep), against tg.linear's one-row rule and
cuBLAS, timed as graph replays over weights rotated past L2, PDL on.

    PYTHONPATH=src:research python3 research/probe_stream_gemv.py [--only NAME]

Why: on an H200 the rule's one-row projections of 8-46 MB read at 63-78% of copy, about 3 us
a kernel above their floor whatever their size past 20 MB (session 61): a short-lived program
loads its tile, then reduces, stores and exits with nothing in flight, and the last wave
leaves SMs idle. Here each of sms x PROGRAMS programs takes every G-th block of BLOCK_N rows,
its first tile read into registers before griddepcontrol.wait, the rest STAGES deep in shared
memory (STAGES 1: each tile loaded into registers after the last one's fold), x (the whole
row, K <= 8192) in registers once.

Found (H200, results/2026-11-28-session61/ files 4-5): the shared-memory pipeline lost to one
stage; programs that stay resident, 2-4 an SM, with flat tiles of 16-32 KB, took 2048 x 5632
8.50 -> 7.00 us and 4096^2 10.27 -> 8.69 (77 -> 91% of copy) but lost 4% on 2048^2. That
became the persistent launch of _gemv_kernel (kernels/_matvec.py, persistent_gemv_config).
"""

import argparse
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from sweep_dot_rows import L2_SPAN, rotated

import tilegraph as tg
from tilegraph.bench.roofline import ceilings
from tilegraph.bench.timing import measure
from tilegraph.kernels.linear import linear_ref


@triton.jit
def _stream_gemv_kernel(y_ptr, x_ptr, w_ptr, stride_wn, N, K,
                        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, STAGES: tl.constexpr,
                        PREFETCH_WEIGHT: tl.constexpr):
    """y_n = sum_k W_nk x_k; program p takes row blocks p, p + G, p + 2G, ..."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    rows = tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    k_mask = offs_k < K
    offs_n = pid * BLOCK_N + rows
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
                mask=(offs_n < N)[:, None] & k_mask[None, :], other=0.0)
    if PREFETCH_WEIGHT:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(x_ptr + offs_k, mask=k_mask, other=0.0).to(tl.float32)
    y = tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    tl.store(y_ptr + offs_n, y.to(y_ptr.dtype.element_ty), mask=offs_n < N)
    n_blocks = tl.cdiv(N, BLOCK_N)
    for block in tl.range(pid + programs, n_blocks, programs, num_stages=STAGES):
        offs_n = block * BLOCK_N + rows
        w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
                    mask=(offs_n < N)[:, None] & k_mask[None, :], other=0.0)
        y = tl.sum(w.to(tl.float32) * x[None, :], axis=1)
        tl.store(y_ptr + offs_n, y.to(y_ptr.dtype.element_ty), mask=offs_n < N)


def stream_gemv(x, w, out, block_n, stages, programs_per_sm, warps, sms):
    n, k = w.shape
    block_k = triton.next_power_of_2(k)
    grid = (min(triton.cdiv(n, block_n), sms * programs_per_sm),)
    _stream_gemv_kernel[grid](out, x, w, w.stride(0), n, k, BLOCK_N=block_n, BLOCK_K=block_k,
                              STAGES=stages, PREFETCH_WEIGHT=True, num_warps=warps,
                              num_stages=stages, launch_pdl=True)


SHAPES = (("tinyllama qkv", 2560, 2048), ("tinyllama o", 2048, 2048),
          ("tinyllama gate/up", 11264, 2048), ("tinyllama down", 2048, 5632),
          ("4096^2", 4096, 4096), ("tinyllama head", 32000, 2048),
          ("qwen2-0.5b gate/up", 9728, 896), ("llama3.2-1b down", 2048, 8192))


def variants(k):
    """(BLOCK_N, STAGES, programs an SM, warps): tiles of 16-64 KB read 64-256 bytes a thread,
    1-3 deep (1: no shared memory, each tile loaded after the last one's fold), 1-4 programs an
    SM within 200 KB of shared memory."""
    block_k = triton.next_power_of_2(k)
    for tile_kb, warps in ((16, 4), (16, 8), (32, 4), (32, 8), (32, 16), (64, 8), (64, 16)):
        block_n = tile_kb * 1024 // (2 * block_k)
        if block_n < 1:
            continue
        for stages in (1, 2, 3):
            for per_sm in (1, 2, 3, 4):
                if per_sm * (stages - 1) * tile_kb > 200:
                    continue
                yield block_n, stages, per_sm, warps


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    dtype = torch.bfloat16
    copy_gbps = ceilings()["copy_gbps"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    start = time.time()
    for name, n, k in SHAPES:
        if args.only and args.only not in name:
            continue
        copies = max(2, -(-L2_SPAN // (n * k * 2)))
        weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
                   for _ in range(copies)]
        x = torch.randn(1, k, device="cuda", dtype=dtype)
        out = torch.empty(1, n, device="cuda", dtype=dtype)
        ref = linear_ref(x.double(), weights[0].double())
        floor_us = (n * k + k + n) * 2 / copy_gbps * 1e-3
        results = {}
        fns = {"cublas": lambda w, x=x: F.linear(x, w),
               "rule": lambda w, x=x, out=out: tg.linear(x, w, out=out)}
        for v in variants(k):
            fns[v] = (lambda w, v=v, x=x, out=out: stream_gemv(x, w, out, *v, sms))
        for label, fn in fns.items():
            try:
                out.fill_(float("nan"))
                fn(weights[0])
                if label != "cublas":
                    err = ((out.double() - ref).norm() / ref.norm()).item()
                    if not err < 2e-2:
                        print(f"  {label}: error {err:.3g}")
                        continue
                s = measure(rotated(fn, weights), warmup_ms=3, rep_ms=10, graph=True)
                results[label] = s.median * 1e3
            except Exception as e:  # out of resources and the like
                print(f"  {label}: {repr(e)[:120]}")
        print(f"[{time.time() - start:4.0f}s] {name} {n}x{k}: floor {floor_us:.2f} us, cublas "
              f"{results.get('cublas', float('nan')):.2f}, rule {results['rule']:.2f} "
              f"({100 * floor_us / results['rule']:.0f}%)", flush=True)
        ranked = sorted((t, v) for v, t in results.items() if isinstance(v, tuple))
        for t, v in ranked[:8]:
            print(f"    BN {v[0]:2d} stages {v[1]} x{v[2]} w{v[3]}: {t:6.2f} us "
                  f"({100 * floor_us / t:3.0f}%)", flush=True)
        del weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
