"""Exact-fp32 products from tf32 tensor-core products over operands split in memory first:
a = a_hi + a_lo with a_hi rounded to tf32 and a_lo the fp32 remainder, written K-major by a
pass of their own, then three tf32 dots (lo*hi + hi*lo + hi*hi) straight from shared memory.
Triton's own tf32x3 splits inside the loop and ran at ~54 TFLOP/s on H100 (cuBLAS SGEMM ~50,
research/probe_fp32_gemm.py): does splitting first let the dots run at tf32 speed?

    PYTHONPATH=src python3 research/probe_split_tf32.py
"""
import torch
import triton
import triton.language as tl

from tilegraph.testing import max_token_error, randn


@triton.jit
def split_kernel(x_ptr, hi_ptr, lo_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    bits = x.to(tl.uint32, bitcast=True)
    hi = ((bits + 0x1000) & 0xFFFFE000).to(tl.float32, bitcast=True)  # tf32, ties away
    hi = tl.where(hi == hi + hi, (bits & 0xFFFFE000).to(tl.float32, bitcast=True), hi)
    lo = x - hi
    tl.store(hi_ptr + offs, hi, mask=mask)
    tl.store(lo_ptr + offs, lo, mask=mask)


@triton.jit
def gemm_kernel(c_ptr, a_hi, a_lo, b_hi, b_lo, M, N, K, PASSES: tl.constexpr,
                PROMOTE: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr):
    """C = A @ B.T with A (M, K) and B (N, K) as hi/lo pairs, all row-major."""
    pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first = (pid // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first, GROUP_M)
    pid_m = first + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_off = offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    b_off = offs_n[:, None].to(tl.int64) * K + offs_k[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        mask = offs_k[None, :] < K - k0
        ah = tl.load(a_hi + a_off + k0, mask=mask, other=0.0)
        bh = tl.load(b_hi + b_off + k0, mask=mask, other=0.0)
        if PASSES == 1:
            acc = tl.dot(ah, tl.trans(bh), acc, input_precision="tf32")
        else:
            al = tl.load(a_lo + a_off + k0, mask=mask, other=0.0)
            bl = tl.load(b_lo + b_off + k0, mask=mask, other=0.0)
            if PROMOTE:  # this tile's sum on the tensor cores, added to acc in fp32 here
                part = tl.dot(al, tl.trans(bh), input_precision="tf32")
                part = tl.dot(ah, tl.trans(bl), part, input_precision="tf32")
                acc += tl.dot(ah, tl.trans(bh), part, input_precision="tf32")
            else:
                acc = tl.dot(al, tl.trans(bh), acc, input_precision="tf32")
                acc = tl.dot(ah, tl.trans(bl), acc, input_precision="tf32")
                acc = tl.dot(ah, tl.trans(bh), acc, input_precision="tf32")
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None].to(tl.int64) * N + cn[None, :], acc,
             mask=(cm < M)[:, None] & (cn < N)[None, :])


def split(x):
    hi, lo = torch.empty_like(x), torch.empty_like(x)
    split_kernel[(triton.cdiv(x.numel(), 1024),)](x, hi, lo, x.numel(), BLOCK=1024)
    return hi, lo


CONFIGS = [(128, 128, 32, 8, 3), (128, 128, 32, 8, 4), (128, 256, 32, 8, 3),
           (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 128, 16, 8, 4), (64, 64, 32, 4, 4),
           (128, 128, 64, 8, 2)]
SHAPES = [(512, 4096, 1024), (512, 1024, 4096), (4096, 1024, 512), (4096, 4096, 1024),
          (1024, 1024, 8192), (777, 1536, 2345), (3000, 5000, 384)]

print(f"{'M x N x K':>20} {'variant':>24} {'us':>8} {'TFLOP/s':>8} {'row err':>9}")
for m, n, k in SHAPES:
    a = randn(m, k, device="cuda")
    b = randn(n, k, device="cuda", scale=k ** -0.5)   # a weight as stored: C = a @ b.T
    ref = a.double() @ b.double().T
    flop = 2 * m * n * k

    def show(name, fn, out):
        us = triton.testing.do_bench_cudagraph(fn, rep=50, return_mode="median") * 1e3
        fn()
        print(f"{m:>6} x {n:>5} x {k:>5} {name:>24} {us:8.1f} {flop / us / 1e6:8.1f} "
              f"{max_token_error(out, ref):9.2e}", flush=True)
        return us

    c = torch.empty(m, n, device="cuda")
    show("cublas sgemm", lambda: torch.mm(a, b.T, out=c), c)
    ah, al = split(a)
    bh, bl = split(b)
    show("split a and b", lambda: (split(a), split(b)), c)
    for passes, promote in ((3, True), (3, False), (1, False)):
        best = None
        for bm, bn, bk, warps, stages in CONFIGS:
            grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

            def run(bm=bm, bn=bn, bk=bk, warps=warps, stages=stages, grid=grid):
                gemm_kernel[grid](c, ah, al, bh, bl, m, n, k, PASSES=passes,
                                  PROMOTE=promote, BLOCK_M=bm,
                                  BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps,
                                  num_stages=stages)
            try:
                run()
            except triton.runtime.errors.OutOfResources:
                continue
            us = triton.testing.do_bench_cudagraph(run, rep=30, return_mode="median") * 1e3
            if best is None or us < best[0]:
                best = (us, run, (bm, bn, bk, warps, stages))
        show(f"{passes}{'p' if promote else ''} tf32 {best[2]}", best[1], c)
    print(flush=True)
