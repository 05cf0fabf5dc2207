"""What a kernel boundary costs in a chain of dependent one-row projections, and whether
counting the previous kernel's programs in (an atomic counter) or tagging each value (LL)
beats griddepcontrol.wait.

Each link is y = W x over its own weight (rotated past L2 by the chain's length), x being
the previous link's y, the way a decode step chains its projections. Modes:
  plain      no programmatic dependent launch
  pdl        tilegraph's today: first weight tile before griddepcontrol.wait, the next kernel
             released after the wait
  pdl-early  the next kernel released at once (before the wait), then the wait
  count      released at once; no wait: spin until the previous kernel's programs have all
             counted in (each program, after its stores, adds one with release semantics)
  ll         no wait: each activation a 32-bit word, a bf16 value in its high half and the
             step's tag in its low half (NCCL's LL protocol, one word for value and flag,
             so no fence and no counter); a program polls its x until every word carries
             this step's tag, then releases the next kernel. It waits for the values it
             reads, not for the previous grid to finish. The tag is a device counter a
             one-program kernel before the chain advances (it also tags the chain's input).
  ll-early   the same, the next kernel released at once (before the poll)
  linear...  tg.linear itself (bare, with a norm prologue, with a residual epilogue)

    PYTHONPATH=src python3 research/probe_chain_signal.py [--links 64] [--modes pdl,ll]

Prints microseconds a link and the floor (weight bytes / copy bandwidth) for chains of
square layers and of alternating up/down projections (an MLP's shapes).
"""

from __future__ import annotations

import argparse

import torch
import triton
import triton.language as tl
from probe_resident_share import captured  # research/ is the script's own folder

import tilegraph as tg
from tilegraph.bench.roofline import ceilings

MODES = ("plain", "pdl", "pdl-early", "count", "ll", "ll-early")
# The same chains through tg.linear (its defaults: PDL on, the rule's kernel and tile), bare
# and with the parts a decode step fuses.
LINEAR_MODES = ("linear", "linear+norm", "linear+residual")


@triton.jit
def _link_kernel(y_ptr, x_ptr, w_ptr, counts_ptr, N, K, prev_programs,
                 MODE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_mask = offs_n < N
    w_ptrs = w_ptr + offs_n[:, None].to(tl.int64) * K + offs_k[None, :]
    w = tl.load(w_ptrs, mask=n_mask[:, None] & (offs_k < K)[None, :], other=0.0)
    if MODE == 1:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    if MODE == 2:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    if MODE == 3:
        tl.extra.cuda.gdc_launch_dependents()
        seen = tl.atomic_add(counts_ptr, 0, sem="acquire", scope="gpu")
        while seen < prev_programs:
            seen = tl.atomic_add(counts_ptr, 0, sem="acquire", scope="gpu")
    LL: tl.constexpr = MODE == 4 or MODE == 5
    if MODE == 5:
        tl.extra.cuda.gdc_launch_dependents()
    if LL:
        tag = tl.load(counts_ptr, volatile=True) & 0xFFFF
    acc = tl.zeros([BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if k0 > 0:
            w = tl.load(w_ptrs + k0, mask=n_mask[:, None] & (offs_k < K - k0)[None, :],
                        other=0.0)
        if LL:
            x = _ll_read(x_ptr + k0 + offs_k, offs_k < K - k0, tag)
            if MODE == 4 and k0 == 0:
                tl.extra.cuda.gdc_launch_dependents()
        else:
            x = tl.load(x_ptr + k0 + offs_k, mask=offs_k < K - k0, other=0.0,
                        cache_modifier=".cg").to(tl.float32)
        acc += tl.sum(w.to(tl.float32) * x[None, :], axis=1)
    if LL:
        # the bf16 value's bits are the high half of its fp32 bits; the tag the low half
        bits = acc.to(tl.bfloat16).to(tl.float32).to(tl.int32, bitcast=True)
        tl.store(y_ptr + offs_n, (bits & -65536) | tag, mask=n_mask)
    else:
        tl.store(y_ptr + offs_n, acc.to(y_ptr.dtype.element_ty), mask=n_mask)
    if MODE == 3:
        tl.debug_barrier()  # every thread's stores are out before the count says so
        tl.atomic_add(counts_ptr + 1, 1, sem="release", scope="gpu")


@triton.jit
def _ll_read(ptrs, mask, tag):
    """The fp32 values of LL words at ptrs, once every word under mask carries tag."""
    words = tl.load(ptrs, mask=mask, other=0, volatile=True)
    while tl.min(tl.where(mask & ((words & 0xFFFF) != tag), 0, 1)) == 0:
        words = tl.load(ptrs, mask=mask, other=0, volatile=True)
    return (words & -65536).to(tl.float32, bitcast=True)


@triton.jit
def _ll_start_kernel(tag_ptr, x_ptr, K, BLOCK: tl.constexpr):
    """The step's tag advanced (one program), the chain's input words retagged with it."""
    tag = (tl.load(tag_ptr) + 1) & 0xFFFF
    tl.store(tag_ptr, tag)
    for k0 in range(0, K, BLOCK):
        offs = k0 + tl.arange(0, BLOCK)
        words = tl.load(x_ptr + offs, mask=offs < K)
        tl.store(x_ptr + offs, (words & -65536) | tag, mask=offs < K)


def ll_words(values: torch.Tensor) -> torch.Tensor:
    """bf16 values as LL words (tag 0)."""
    bits = values.to(torch.bfloat16).float().view(torch.int32)
    return bits & -65536


def ll_values(words: torch.Tensor) -> torch.Tensor:
    return (words & -65536).view(torch.float32)


def tile(N: int, K: int) -> tuple[int, int]:
    """64 weight values a thread of 4 warps, rows of up to 4096 columns (as gemv_config)."""
    block_k = min(4096, triton.next_power_of_2(K))
    return max(1, min(16, 8192 // block_k)), block_k


def chain(shapes, links, mode, dtype=torch.bfloat16):
    """A captured chain of `links` projections cycling through `shapes`; returns us a link."""
    copies = max(2, -(-150 * 2**20 // sum(n * k * 2 for n, k in shapes)))
    layers = [shapes[i % len(shapes)] for i in range(links)]
    weights = [torch.randn(n, k, device="cuda", dtype=dtype) * k**-0.5
               for _ in range(copies) for n, k in shapes]
    width = max(max(n, k) for n, k in shapes)
    acts = [torch.randn(width, device="cuda", dtype=dtype) for _ in range(links + 1)]
    ll = mode.startswith("ll")
    if ll:
        acts = [ll_words(a) for a in acts]
    counts = torch.zeros(links + 1, device="cuda", dtype=torch.int32)
    grids = [triton.cdiv(n, tile(n, k)[0]) for n, k in layers]
    start = torch.zeros_like(counts)
    start[0] = 1 << 30  # the first link waits for nothing

    norm = torch.rand(width, device="cuda", dtype=dtype) + 0.5

    def step():
        if ll:  # counts[0] is the tag; no link may start before it advances
            _ll_start_kernel[(1,)](counts, acts[0], layers[0][1], BLOCK=1024)
        else:
            counts.copy_(start)
        for i, (n, k) in enumerate(layers):
            if mode in LINEAR_MODES:
                w = weights[i % len(weights)]
                x, y = acts[i][None, :k], acts[i + 1][None, :n]
                tg.linear(x, w, out=y, norm_weight=norm[:k] if mode == "linear+norm" else None,
                          residual=x if mode == "linear+residual" else None)
                continue
            block_n, block_k = tile(n, k)
            _link_kernel[(grids[i],)](
                acts[i + 1], acts[i], weights[i % len(weights)],
                counts if ll else counts[i:], n, k,
                grids[i - 1] if i else 0, MODE=MODES.index(mode), BLOCK_N=block_n,
                BLOCK_K=block_k, num_warps=4, num_stages=1,
                **({"launch_pdl": True} if mode != "plain" and not (ll and i == 0)
                   else {}))

    def result():
        return ll_values(acts[-1]) if ll else acts[-1].float()

    step()
    torch.cuda.synchronize()
    expected = result().clone()
    graph = captured(step)
    for _ in range(20):
        graph.replay()
    torch.cuda.synchronize()
    if not torch.allclose(result(), expected, rtol=1e-2, atol=1e-2):
        raise RuntimeError(f"{mode}: the chain's result differs from its eager run")
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        begin.record()
        for _ in range(50):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) * 1e3 / 50 / links)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--links", type=int, default=64)
    parser.add_argument("--modes", default=",".join(MODES + LINEAR_MODES))
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    cases = {"896 square": [(896, 896)], "2048 square": [(2048, 2048)],
             "4096 square": [(4096, 4096)],
             "mlp 2048/5632": [(5632, 2048), (2048, 5632)],
             "mlp 896/4864": [(4864, 896), (896, 4864)]}
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s, {args.links} links")
    modes = args.modes.split(",")
    print(f"{'chain':16s} {'floor':>7s} " + " ".join(f"{m:>9s}" for m in modes))
    for name, shapes in cases.items():
        floor = sum(n * k * 2 for n, k in shapes) / len(shapes) / copy_gbps * 1e-3
        row = [chain(shapes, args.links, mode) for mode in modes
               if mode != "linear+residual" or all(n == k for n, k in shapes)]
        print(f"{name:16s} {floor:7.2f} " + " ".join(f"{t:9.2f}" for t in row))


if __name__ == "__main__":
    main()
