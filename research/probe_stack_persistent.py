"""Whether one persistent kernel for a whole one-row decode stack, its programs meeting at a
grid barrier between projections, beats tg.decode_stack's chain of kernels.

Every kernel boundary of the chain costs about 2 us over its weights' share of the floor on
the H200 (notes/kernels.md, session 66: the PDL chain's own latency ~1.5 us a link, and the
next kernel's programs find no room to start while this one's hold their weights). Here one
program an SM lives for the whole stack: after its part of a projection it arrives at a
counter, loads the head of its share of the *next* projection's weights into registers (they
do not depend on the activations), and only then spins until every program has arrived. Its
registers are its own, so the next projection's bytes are in flight through the barrier.

Per layer two phases: q = rstd * W_q (g * h) (each program its rows of W_q, over all of h,
the norm's sum of squares taken in the same pass), then h += W_o q (its rows of W_o). h is
carried in fp32; the result is cast to h's dtype by each program for its own rows.

    PYTHONPATH=src python3 research/probe_stack_persistent.py [--widths 2048,2560,...]
        [--layers 8] [--dtype bf16] [--calls 10]

Prints, per width, us a token for tg.decode_stack and for the persistent kernel (with and
without the head loaded before the barrier), % of the floor, and the error against float64.
"""

from __future__ import annotations

import argparse
import sys

import torch
import triton
import triton.language as tl

import tilegraph as tg
from tilegraph.bench.roofline import ceilings
from tilegraph.kernels.decode_stack import decode_stack_ref

HEAD_BYTES = 64 * 1024  # of a program's share loaded before each barrier


@triton.jit
def _arrive(sync_ptr):
    tl.debug_barrier()  # every thread's stores of this phase issued before the release
    tl.atomic_add(sync_ptr, 1, sem="release", scope="gpu")


@triton.jit
def _wait(sync_ptr, target, SYNC: tl.constexpr):
    """Wait until the counter reaches target: thread 0 spins on relaxed loads and fences
    (acquire), then the block meets at a barrier, so every thread's later loads follow every
    program's release. Returns target, for the caller to make its loads depend on. SYNC=False
    skips the wait (wrong results; the kernel's streaming alone, for timing)."""
    if SYNC:
        seen = tl.inline_asm_elementwise(
            """{
            .reg .pred not_yet, lead;
            .reg .u32 t;
            mov.u32 $0, $2;
            mov.u32 t, %tid.x;
            setp.eq.u32 lead, t, 0;
            @!lead bra DONE;
            SPIN:
            ld.relaxed.gpu.global.u32 $0, [$1];
            setp.lt.u32 not_yet, $0, $2;
            @not_yet bra SPIN;
            fence.acq_rel.gpu;
            DONE:
            }""",
            "=r,l,r", [sync_ptr, target], dtype=tl.int32, is_pure=False, pack=1)
        tl.debug_barrier()
        return seen
    else:
        return target


@triton.jit
def _head(w_ptr, stride_w, rows, row_mask, D, HEAD_K: tl.constexpr):
    cols = tl.arange(0, HEAD_K)
    return tl.load(w_ptr + rows[:, None] * stride_w + cols[None, :],
                   mask=row_mask[:, None] & (cols < D)[None, :], other=0.0)


@triton.jit
def _rows_dot(w_ptr, stride_w, x_ptr, g_ptr, head, rows, row_mask, D, ready,
              NORM: tl.constexpr, HEAD_K: tl.constexpr, BLOCK_K: tl.constexpr,
              STAGES: tl.constexpr):
    """(sum_k W[r, k] x_k g_k for the program's rows, sum_k x_k^2), the first HEAD_K columns
    from `head`; x (and g) read only once `ready` (the barrier's count) is known."""
    cols = tl.arange(0, HEAD_K)
    live = (cols < D) & (ready > 0)
    x = tl.load(x_ptr + cols, mask=live, other=0.0, cache_modifier=".cg").to(tl.float32)
    squares = tl.sum(x * x)
    if NORM:
        x = x * tl.load(g_ptr + cols, mask=live, other=0.0).to(tl.float32)
    acc = tl.sum(head.to(tl.float32) * x[None, :], axis=1)
    # Summed across threads once, after the loop: a reduction per tile costs a round of
    # shuffles and a block barrier every iteration.
    acc_tile = tl.zeros([head.shape[0], BLOCK_K], tl.float32)
    square_tile = tl.zeros([BLOCK_K], tl.float32)
    for k0 in tl.range(HEAD_K, D, BLOCK_K, num_stages=STAGES):
        k_cols = k0 + tl.arange(0, BLOCK_K)
        k_mask = k_cols < D
        w = tl.load(w_ptr + rows[:, None] * stride_w + k_cols[None, :],
                    mask=row_mask[:, None] & k_mask[None, :], other=0.0)
        x_k = tl.load(x_ptr + k_cols, mask=k_mask, other=0.0, cache_modifier=".cg")
        x_k = x_k.to(tl.float32)
        square_tile += x_k * x_k
        if NORM:
            x_k = x_k * tl.load(g_ptr + k_cols, mask=k_mask, other=0.0).to(tl.float32)
        acc_tile += w.to(tl.float32) * x_k[None, :]
    acc += tl.sum(acc_tile, axis=1)
    squares += tl.sum(square_tile)
    return acc, squares


@triton.jit
def _stack_kernel(out_ptr, h_ptr, stream_ptr, q_ptr, wq_ptr, wo_ptr, g_ptr, sync_ptr,
                  L, D, rows_per_program, programs, eps,
                  ROWS: tl.constexpr, HEAD_K: tl.constexpr, BLOCK_K: tl.constexpr,
                  STAGES: tl.constexpr, EARLY: tl.constexpr, SYNC: tl.constexpr):
    """out = the stack of L layers h <- h + W_o[l] (rstd * W_q[l] (g[l] * h)) at one row;
    W_q, W_o (L, D, D) contiguous, g (L, D); stream and q fp32 scratch of D; sync two int32
    zeros (a barrier count, an exit count), zero again when the kernel ends."""
    pid = tl.program_id(0)
    rows = pid * rows_per_program + tl.arange(0, ROWS)
    row_mask = (tl.arange(0, ROWS) < rows_per_program) & (rows < D)
    rows = rows.to(tl.int64)
    layer_size = D.to(tl.int64) * D
    head = _head(wq_ptr, D, rows, row_mask, D, HEAD_K)
    tl.extra.cuda.gdc_wait()  # h is written by the kernel before
    phase = pid * 0  # barriers passed so far
    for layer in range(L):
        wq = wq_ptr + layer * layer_size
        wo = wo_ptr + layer * layer_size
        g = g_ptr + layer * D
        # q = rstd * W_q (g * h), h the input at layer 0, else the fp32 stream
        if layer == 0:
            acc, squares = _rows_dot(wq, D, h_ptr, g, head, rows, row_mask, D, 1, True,
                                     HEAD_K, BLOCK_K, STAGES)
        else:
            ready = _wait(sync_ptr, phase * programs, SYNC)
            if not EARLY:
                head = _head(wq, D, rows, row_mask, D, HEAD_K)
            acc, squares = _rows_dot(wq, D, stream_ptr, g, head, rows, row_mask, D, ready,
                                     True, HEAD_K, BLOCK_K, STAGES)
        tl.store(q_ptr + rows, acc * tl.rsqrt(squares / D + eps), mask=row_mask)
        _arrive(sync_ptr)
        phase += 1
        if EARLY:
            head = _head(wo, D, rows, row_mask, D, HEAD_K)
        ready = _wait(sync_ptr, phase * programs, SYNC)
        if not EARLY:
            head = _head(wo, D, rows, row_mask, D, HEAD_K)
        acc, squares = _rows_dot(wo, D, q_ptr, g, head, rows, row_mask, D, ready, False,
                                 HEAD_K, BLOCK_K, STAGES)
        if layer == 0:
            h = tl.load(h_ptr + rows, mask=row_mask, other=0.0).to(tl.float32) + acc
        else:
            h = tl.load(stream_ptr + rows, mask=row_mask, other=0.0) + acc
        if layer == L - 1:
            tl.store(out_ptr + rows, h.to(out_ptr.dtype.element_ty), mask=row_mask)
        else:
            tl.store(stream_ptr + rows, h, mask=row_mask)
            _arrive(sync_ptr)
            phase += 1
            if EARLY:
                head = _head(wq + layer_size, D, rows, row_mask, D, HEAD_K)
    # The last program out sets the counters back to zero for the next launch: every other
    # program has passed its last wait by then.
    tl.debug_barrier()
    if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu") == programs - 1:
        tl.store(sync_ptr, 0)
        tl.store(sync_ptr + 1, 0)


def launch_shape(d: int, element_size: int, sms: int, head_bytes: int = HEAD_BYTES,
                 warps: int = 8) -> dict:
    rows_per_program = triton.cdiv(d, sms)
    rows = triton.next_power_of_2(rows_per_program)
    head_k = min(triton.next_power_of_2(d), max(64, head_bytes // (rows * element_size)))
    head_k = 1 << (head_k.bit_length() - 1)  # a power of two
    return {"rows_per_program": rows_per_program, "programs": triton.cdiv(d, rows_per_program),
            "ROWS": rows, "HEAD_K": head_k, "BLOCK_K": max(64, 1024 * warps // rows)}


class PersistentStack:
    def __init__(self, norms, wqs, wos, eps, early=True, warps=8, stages=3,
                 head_bytes=HEAD_BYTES, sync=True, per_sm=1):
        self.g = torch.stack(list(norms)).contiguous()
        self.wq = torch.stack(list(wqs)).contiguous()
        self.wo = torch.stack(list(wos)).contiguous()
        self.eps, self.early, self.warps, self.stages = eps, early, warps, stages
        self.sync_on = sync
        L, d, _ = self.wq.shape
        dev = self.wq.device
        self.stream = torch.empty(d, dtype=torch.float32, device=dev)
        self.q = torch.empty(d, dtype=torch.float32, device=dev)
        self.sync = torch.zeros(2, dtype=torch.int32, device=dev)
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        # every program must be resident at once (they wait for each other): per_sm of them
        # must fit an SM's registers and shared memory
        self.shape = launch_shape(d, self.wq.element_size(), sms * per_sm, head_bytes,
                                  warps)

    def __call__(self, h: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        s = self.shape
        L, d, _ = self.wq.shape
        _stack_kernel[(s["programs"],)](
            out, h, self.stream, self.q, self.wq, self.wo, self.g, self.sync,
            L, d, s["rows_per_program"], s["programs"], self.eps,
            ROWS=s["ROWS"], HEAD_K=s["HEAD_K"], BLOCK_K=s["BLOCK_K"], STAGES=self.stages,
            EARLY=self.early, SYNC=self.sync_on, num_warps=self.warps, num_stages=1,
            launch_pdl=True)
        return out


def us_a_token(step, h: torch.Tensor, calls: int, replays: int = 20) -> float:
    """A graph of `calls` chained stack calls (h -> a -> b -> a ...), replayed; us a call."""
    a, b = torch.empty_like(h), torch.empty_like(h)
    step(h, a)
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        step(h, a)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            x, y = h, a
            for _ in range(calls):
                step(x, y)
                x, y = y, (b if y is a else a)
    torch.cuda.synchronize()
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(replays):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return sorted(times)[len(times) // 2]


def stack_arguments(description: str, widths: str, variants: str) -> argparse.Namespace:
    """The command line compare_with_library reads (widths, layers, dtype, calls) and the
    variants to compare."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--widths", default=widths)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--variants", default=variants)
    return parser.parse_args()


def main() -> None:
    args = stack_arguments(__doc__.split("\n\n")[0], "2048,2560,3072,4096",
                           "early,late,early-w16,early-h32,early-h16")
    variants = {"early": dict(early=True), "late": dict(early=False),
                "early-w16": dict(early=True, warps=16), "early-w4": dict(early=True, warps=4),
                "early-s4": dict(early=True, stages=4), "early-s2": dict(early=True, stages=2),
                "early-h32": dict(early=True, head_bytes=32 * 1024),
                "early-h32-w4": dict(early=True, head_bytes=32 * 1024, warps=4),
                "early-h16": dict(early=True, head_bytes=16 * 1024),
                "early-h32-w16": dict(early=True, head_bytes=32 * 1024, warps=16),
                "early-h32-s4": dict(early=True, head_bytes=32 * 1024, stages=4),
                "nosync": dict(early=True, sync=False),
                "x2-h32-w4": dict(head_bytes=32 * 1024, warps=4, per_sm=2),
                "x2-h16-w4": dict(head_bytes=16 * 1024, warps=4, per_sm=2),
                "x2-nosync": dict(head_bytes=32 * 1024, warps=4, per_sm=2, sync=False),
                "nosync-h32": dict(early=True, head_bytes=32 * 1024, sync=False)}
    compare_with_library(args, args.variants.split(","), "persistent",
                         lambda name, norms, wqs, wos, d: PersistentStack(
                             norms, wqs, wos, 1e-6, **variants[name]))


def compare_with_library(args, chosen: list[str], label: str, make_step) -> None:
    """Per width of args.widths (args.layers layers of args.dtype, random weights seeded by
    the width): us a token of tg.decode_stack and of each variant in `chosen`
    (make_step(name, norms, wqs, wos, d), a step(h, out) with `sync_on` and its `sync`
    counters, which must be zero after each call), % of the floor, error against float64."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    copy = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}: copy {copy:.0f} GB/s; {args.layers} layers, "
          f"{args.dtype}, one row, us a token over {args.calls} chained calls a graph")
    print(f"{'d':>6} {'floor':>8} {'stack':>8} " + " ".join(f"{v:>10}" for v in chosen)
          + f"   % floor (stack, best)   max err (stack, {label})")
    for d in (int(w) for w in args.widths.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(d)
        L = args.layers
        norms = [1 + 0.1 * torch.randn(d, device="cuda", generator=gen) for _ in range(L)]
        wqs = [torch.randn(d, d, device="cuda", generator=gen) / d ** 0.5 for _ in range(L)]
        wos = [torch.randn(d, d, device="cuda", generator=gen) / d ** 0.5 for _ in range(L)]
        norms, wqs, wos = ([t.to(dtype) for t in ts] for ts in (norms, wqs, wos))
        h = torch.randn(1, d, device="cuda", generator=gen).to(dtype)
        ref = decode_stack_ref(h.double(), [t.double() for t in norms],
                               [t.double() for t in wqs], [t.double() for t in wos])
        scale = ref.abs().max().item()

        def library(x, y, norms=norms, wqs=wqs, wos=wos):
            return tg.decode_stack(x, norms, wqs, wos, out=y)

        errors = [(library(h, torch.empty_like(h)).double() - ref).abs().max().item() / scale]
        times = [us_a_token(library, h, args.calls)]
        for name in chosen:
            # where a variant that hangs (a barrier never met) or fails to compile stopped
            print(f"  d={d} {name}", file=sys.stderr, flush=True)
            step = make_step(name, norms, wqs, wos, d)
            out = torch.full_like(h, float("nan"))
            for _ in range(3):  # the counters must come back to zero each time
                step(h, out)
            torch.cuda.synchronize()
            if step.sync_on:
                errors.append((out.double() - ref).abs().max().item() / scale)
            assert step.sync.tolist() == [0, 0], step.sync.tolist()
            times.append(us_a_token(step, h, args.calls))
        floor = 2 * L * d * d * h.element_size() / (copy * 1e3)
        best = min(times[1:])
        print(f"{d:>6} {floor:8.1f} {times[0]:8.1f} "
              + " ".join(f"{t:10.1f}" for t in times[1:])
              + f"   {100 * floor / times[0]:5.1f} {100 * floor / best:5.1f}"
              + "   " + " ".join(f"{e:.1e}" for e in errors), flush=True)

if __name__ == "__main__":
    main()
