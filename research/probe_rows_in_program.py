"""2-16 rows on the tensor cores with K split inside the program, not across programs.

    PYTHONPATH=src:research python3 research/probe_rows_in_program.py [--rows 2,8,16]
        [--dtype bfloat16] [--shapes 2048x2048,...] [--top 6]

Why: at 8 rows a 2048^2 bf16 projection reads at 48% of copy and whole d = 2048 stacks at
43% of the floor (sessions 104-106), where one row reads at 64%. The rule's tile there is a
whole-slice split: program (n, s) loads its (64, 256) tile before PDL's wait, then after it
loads x, multiplies, stores its partial, counts itself in, and the last of the 8 slices reads
the others' partials back and finishes: three round trips through memory after the wait,
where the one-row GEMV has one (x).

Here program n takes BLOCK_N weight rows and all of K: the tile is loaded before the wait as
(PARTS, BLOCK_N, PART_K), x after it as (PARTS, 16, PART_K), and one batched mma
(mma.sync, a warp a part) gives (PARTS, BLOCK_N, 16) partial products, summed over the
parts through shared memory inside the program. No workspace, no arrival count, no second
read. Rows of K past one tile of PARTS x PART_K loop over the rest after the wait.

Found (H200, results/2026-12-04-session109/ call 1; sm_90 compile: BLOCK_N 16, 8 parts of
256, 8 warps, 95 registers, 96 KB of shared memory, W's shared-memory stores before the
wait): slower than the rule from 2 MiB of weights up, at every row count (bf16 2048^2 at 2 /
8 / 16 rows 3.19 / 4.18 / 4.72 -> 4.79 / 4.93 / 5.10 us; 4096^2 at 8 rows 10.10 -> 12.27;
fp32 1024^2 at 8 rows 3.07 -> 4.11), faster only on 0.8-1M weights at 4-16 rows (1152 x
896 at 8 rows 2.40 -> 2.07, 1024^2 2.37 -> 1.98). The split's round trips are not what the
8-row tile waits for. Not built.
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

ROWS = 16  # an mma operand needs at least 16


@triton.jit
def _rows_in_program_kernel(y_ptr, stride_ym, x_ptr, stride_xm, w_ptr, stride_wn, M, N, K,
                            BLOCK_N: tl.constexpr, PARTS: tl.constexpr, PART_K: tl.constexpr,
                            W_LHS: tl.constexpr, PRECISION: tl.constexpr, PDL: tl.constexpr,
                            LOOP: tl.constexpr = True):
    """y_mn = sum_k x_mk W_nk for M <= 16 rows, BLOCK_N outputs a program."""
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, 16)
    parts = tl.arange(0, PARTS)[:, None, None] * PART_K
    offs_k = tl.arange(0, PART_K)[None, None, :]
    n_mask = (offs_n < N)[None, :, None]
    m_mask = (offs_m < M)[None, :, None]
    w_ptrs = w_ptr + offs_n[None, :, None].to(tl.int64) * stride_wn + parts + offs_k
    x_ptrs = x_ptr + offs_m[None, :, None] * stride_xm + parts + offs_k
    w = tl.load(w_ptrs, mask=n_mask & (parts + offs_k < K), other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    x = tl.load(x_ptrs, mask=m_mask & (parts + offs_k < K), other=0.0).to(w.dtype)
    if W_LHS:
        acc = tl.dot(w, tl.trans(x, (0, 2, 1)), input_precision=PRECISION)  # (P, BN, 16)
    else:
        acc = tl.dot(x, tl.trans(w, (0, 2, 1)), input_precision=PRECISION)  # (P, 16, BN)
    for k0 in range(PARTS * PART_K, K if LOOP else 0, PARTS * PART_K):  # LOOP: compiled in
        k_mask = k0 + parts + offs_k < K
        w = tl.load(w_ptrs + k0, mask=n_mask & k_mask, other=0.0)
        x = tl.load(x_ptrs + k0, mask=m_mask & k_mask, other=0.0).to(w.dtype)
        if W_LHS:
            acc = tl.dot(w, tl.trans(x, (0, 2, 1)), acc, input_precision=PRECISION)
        else:
            acc = tl.dot(x, tl.trans(w, (0, 2, 1)), acc, input_precision=PRECISION)
    y = tl.sum(acc, axis=0)
    if W_LHS:
        y = tl.trans(y)
    tl.store(y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :],
             y.to(y_ptr.dtype.element_ty), mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])


def rows_in_program(x, w, out, block_n, parts, part_k, w_lhs, warps, pdl=True):
    n, k = w.shape
    precision = "tf32x3" if w.dtype == torch.float32 else "tf32"
    _rows_in_program_kernel[(triton.cdiv(n, block_n),)](
        out, out.stride(0), x, x.stride(0), w, w.stride(0), x.shape[0], n, k,
        BLOCK_N=block_n, PARTS=parts, PART_K=part_k, W_LHS=w_lhs, PRECISION=precision,
        PDL=pdl, LOOP=k > parts * part_k, num_warps=warps, num_stages=1, launch_pdl=pdl)


def variants(n, k, size, sms):
    """(BLOCK_N, PARTS, PART_K, W_LHS, warps): a tile of up to 64 KB of weights read in one
    step where the row fits, parts of 64-512 columns, a warp a part up to 8 warps."""
    for block_n in (16, 32, 64):
        for part_k in (64, 128, 256, 512):
            for parts in (4, 8, 16):
                tile_k = parts * part_k
                if tile_k > max(64, triton.next_power_of_2(k)):
                    continue
                if block_n * tile_k * size > 64 * 1024 or block_n * tile_k * size < 8 * 1024:
                    continue
                if triton.cdiv(n, block_n) < sms // 4:
                    continue
                for w_lhs in (True, False):
                    yield block_n, parts, part_k, w_lhs, min(8, parts)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="2,8,16")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--shapes", default="2048x2048,1024x1024,5632x2048,2048x5632,4096x4096,"
                                            "2560x2048,1152x896,896x4864,3072x3072")
    parser.add_argument("--top", type=int, default=6)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    size = torch.finfo(dtype).bits // 8
    copy_gbps = ceilings()["copy_gbps"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    start = time.time()
    for shape in args.shapes.split(","):
        n, k = map(int, shape.split("x"))
        copies = max(2, -(-L2_SPAN // (n * k * size)))
        weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
                   for _ in range(copies)]
        for rows in map(int, args.rows.split(",")):
            x = torch.randn(rows, k, device="cuda", dtype=dtype)
            out = torch.empty(rows, n, device="cuda", dtype=dtype)
            ref = x.double() @ weights[0].double().T
            floor_us = n * k * size / copy_gbps * 1e-3
            fns = {"cublas": lambda w, x=x: F.linear(x, w),
                   "rule": lambda w, x=x, out=out: tg.linear(x, w, out=out)}
            for v in variants(n, k, size, sms):
                fns[v] = (lambda w, v=v, x=x, out=out: rows_in_program(x, w, out, *v))
            results = {}
            for label, fn in fns.items():
                try:
                    out.fill_(float("nan"))
                    got = fn(weights[0])
                    got = out if label != "cublas" else got
                    err = ((got.double() - ref).norm() / ref.norm()).item()
                    if not err < (1e-5 if dtype == torch.float32 else 1e-2):
                        print(f"  {label}: error {err:.3g}", flush=True)
                        continue
                    s = measure(rotated(fn, weights), warmup_ms=3, rep_ms=10, graph=True)
                    results[label] = s.median * 1e3
                except Exception as e:  # out of resources and the like
                    print(f"  {label}: {repr(e)[:160]}", flush=True)
            ranked = sorted((t, v) for v, t in results.items() if isinstance(v, tuple))
            best = ranked[0][0] if ranked else float("nan")
            print(f"[{time.time() - start:4.0f}s] {dtype} {n}x{k} rows {rows}: floor "
                  f"{floor_us:.2f} us, cublas {results.get('cublas', float('nan')):.2f}, rule "
                  f"{results['rule']:.2f} ({100 * floor_us / results['rule']:.0f}%), "
                  f"best here {best:.2f} ({100 * floor_us / best:.0f}%)", flush=True)
            for t, v in ranked[:args.top]:
                side = "W_LHS" if v[3] else "x-left"
                print(f"    BN {v[0]:2d} parts {v[1]:2d} x {v[2]:3d} {side} w{v[4]}: {t:6.2f} us "
                      f"({100 * floor_us / t:3.0f}%)", flush=True)
        del weights
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
