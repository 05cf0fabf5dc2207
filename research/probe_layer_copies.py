"""Is the one-kernel decode layer's atomic reduction what its stacks wait for? Every program
adds a whole partial h_next (d floats) into one fp32 accumulator, so each 128-byte line of it
takes (d / BLOCK_Q) x 8 vector atomics, one after another. Here program p adds into copy
p % G of G accumulators instead, and the next layer reads h as the sum of the G copies.

    PYTHONPATH=src python3 research/probe_layer_copies.py bf16 1024,1536,2048 [--rounds 2]
        [--no-barrier] [--bulk]

A research copy of the layer kernel (one row, Wq and Wo row-major, d a compile-time
constant), chained as LayerStack.fused_forward chains the library's (each layer zeroes the
next one's copies after its wait, programmatic dependent launch), the last accumulator's
copies summed and cast back by one small kernel. Timed as CUDA graph replays against the
library's LayerStack.fused_forward captured the same way, alternating; every variant is
checked against the float64 reference first. Give each run its own TILEGRAPH_CACHE_DIR.
With --bulk, where d is a multiple of 256, each 16-row variant also runs with its adds as
one TMA bulk reduction a program (GPU only: the interpreter has no descriptor reductions).
`wo-after` variants read only Wq before the wait (session 53).
Results: results/2026-11-27-session51/ and -session52/.
"""

import argparse

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import tilegraph as tg
from tilegraph.bench import ceilings
from tilegraph.models import LayerStack, LayerStackConfig
from tilegraph.stack_grid import layers_for

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# (rows of Wq a program, warps, copies of the accumulator, Wo loaded after the wait)
VARIANTS = [(16, 8, 1, False), (16, 8, 2, False), (16, 8, 4, False), (8, 4, 2, False),
            (16, 8, 2, True), (16, 8, 4, True), (16, 4, 2, True), (32, 16, 2, True)]
MAX_TILE_BYTES = 128 * 1024  # a program's two weight tiles in registers
BARRIER_VARIANTS = [(16, 8), (16, 4), (32, 16)]
BULK_COLS: tl.constexpr = tl.constexpr(256)  # a TMA box holds at most 256 elements a dimension
SM_COUNT = 132  # the barrier needs every program resident: one wave (H100 SXM)


@triton.jit
def _layer_copies_kernel(acc_ptr, acc_desc, zero_ptr, h_ptr, norm_w_ptr, wq_ptr, wo_ptr, eps,
                         D: tl.constexpr, COPY_STRIDE: tl.constexpr, H_COPIES: tl.constexpr,
                         COPIES: tl.constexpr, ZERO_NEXT: tl.constexpr, BULK: tl.constexpr,
                         BLOCK_Q: tl.constexpr, BLOCK_D: tl.constexpr, PDL: tl.constexpr,
                         WO_AFTER: tl.constexpr = False):
    """acc[p % COPIES] += [p == 0] h + Wo[:, rows(p)] q_rows(p), h = sum of H_COPIES copies.
    WO_AFTER: only Wq is read before the wait, Wo once q is known (its load made to depend
    on q), so a program holds one tile at a time and a second program fits an SM: the next
    layer's, streaming its Wq under PDL while this one reads its Wo.
    BULK: the add is one TMA bulk reduction of the whole vector (acc_desc views each copy as
    rows of 256 floats) instead of d / 4 vector atomics."""
    pid = tl.program_id(0)
    offs_q = pid * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = offs_q < D
    d_mask = offs_d < D
    tile_mask = q_mask[:, None] & d_mask[None, :]
    rows = offs_q[:, None].to(tl.int64)
    wq = tl.load(wq_ptr + rows * D + offs_d[None, :], mask=tile_mask, other=0.0)
    wo_ptrs = wo_ptr + rows + offs_d[None, :].to(tl.int64) * D
    if not WO_AFTER:
        wo = tl.load(wo_ptrs, mask=tile_mask, other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    g = tl.load(norm_w_ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    h = tl.zeros([BLOCK_D], tl.float32)
    for c in tl.static_range(H_COPIES):
        h += tl.load(h_ptr + c * COPY_STRIDE + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h) / D + eps)
    q = tl.sum(wq.to(tl.float32) * (h * g)[None, :], axis=1) * rstd
    if WO_AFTER:  # q == q holds unless q is NaN: the load waits for q, so wq is dead by then
        q_known = tl.sum(q) == tl.sum(q)
        wo = tl.load(wo_ptrs, mask=tile_mask & q_known, other=0.0)
    part = tl.sum(wo.to(tl.float32) * q[:, None], axis=0)
    part += tl.where(pid == 0, h, 0.0)
    if BULK:
        acc_desc.atomic_add([pid % COPIES, 0, 0],
                            tl.reshape(part, [1, BLOCK_D // BULK_COLS, BULK_COLS]))
    else:
        tl.atomic_add(acc_ptr + (pid % COPIES) * COPY_STRIDE + offs_d, part, mask=d_mask,
                      sem="relaxed")
    if ZERO_NEXT:
        for c in tl.static_range(COPIES):
            tl.store(zero_ptr + c * COPY_STRIDE + offs_q, tl.zeros([BLOCK_Q], tl.float32),
                     mask=q_mask)


@triton.jit
def _sum_copies_kernel(out_ptr, acc_ptr, D: tl.constexpr, COPY_STRIDE: tl.constexpr,
                       COPIES: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < D
    if PDL:
        tl.extra.cuda.gdc_wait()
    total = tl.zeros([BLOCK], tl.float32)
    for c in tl.static_range(COPIES):
        total += tl.load(acc_ptr + c * COPY_STRIDE + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _layer_barrier_kernel(out_ptr, q_ptr, count_ptr, h_ptr, norm_w_ptr, wq_ptr, wo_ptr, eps,
                          D: tl.constexpr, PROGRAMS: tl.constexpr, BLOCK_Q: tl.constexpr,
                          BLOCK_D: tl.constexpr, PDL: tl.constexpr):
    """No atomics on h: program p computes q_rows(p), the programs meet at a counter (all of
    them are resident: one wave), then each reads all of q and writes its rows of h_next =
    h + Wo q with plain stores (both tiles are rows: Wq's and Wo's rows(p))."""
    pid = tl.program_id(0)
    offs_q = pid * BLOCK_Q + tl.arange(0, BLOCK_Q)
    offs_d = tl.arange(0, BLOCK_D)
    q_mask = offs_q < D
    d_mask = offs_d < D
    tile_mask = q_mask[:, None] & d_mask[None, :]
    rows = offs_q[:, None].to(tl.int64)
    wq = tl.load(wq_ptr + rows * D + offs_d[None, :], mask=tile_mask, other=0.0)
    wo = tl.load(wo_ptr + rows * D + offs_d[None, :], mask=tile_mask, other=0.0)
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    g = tl.load(norm_w_ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    h = tl.load(h_ptr + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    h_rows = tl.load(h_ptr + offs_q, mask=q_mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(h * h) / D + eps)
    q = tl.sum(wq.to(tl.float32) * (h * g)[None, :], axis=1) * rstd
    tl.store(q_ptr + offs_q, q, mask=q_mask)
    tl.debug_barrier()  # every thread's q is out before the count says so
    tl.atomic_add(count_ptr, 1, sem="release")
    while tl.load(count_ptr, volatile=True) < PROGRAMS:
        pass
    tl.atomic_add(count_ptr, 0, sem="acquire")
    q_all = tl.load(q_ptr + offs_d, mask=d_mask, other=0.0, cache_modifier=".cg")
    h_next = h_rows + tl.sum(wo.to(tl.float32) * q_all[None, :], axis=1)
    tl.store(out_ptr + offs_q, h_next.to(out_ptr.dtype.element_ty), mask=q_mask)


def barrier_forward(stack: LayerStack, block_q: int, warps: int, stream_dtype):
    """The stack with the barrier kernel; h carried in stream_dtype, cast back at the end."""
    d, layers = stack.config.d, stack.layers
    on_gpu = torch.device(layers[0].wq.device).type == "cuda"
    pdl = {"PDL": True, "launch_pdl": True} if on_gpu else {"PDL": False}
    programs = triton.cdiv(d, block_q)

    def forward(h):
        counts = torch.zeros(len(layers), dtype=torch.int32, device=h.device)
        q = torch.empty((len(layers), d), dtype=torch.float32, device=h.device)
        x = h
        for i, layer in enumerate(layers):
            out = torch.empty(h.shape, dtype=stream_dtype, device=h.device)
            _layer_barrier_kernel[(programs,)](
                out, q[i], counts[i:], x, layer.norm_weight, layer.wq, layer.wo, layer.eps,
                D=d, PROGRAMS=programs, BLOCK_Q=block_q, BLOCK_D=triton.next_power_of_2(d),
                num_warps=warps, num_stages=1, **pdl)
            x = out
        if x.dtype == h.dtype:
            return x
        out = torch.empty_like(h)
        _sum_copies_kernel[(triton.cdiv(d, 1024),)](out, x, D=d, COPY_STRIDE=0, COPIES=1,
                                                    BLOCK=1024, num_warps=4, **pdl)
        return out
    return forward


def copies_forward(stack: LayerStack, block_q: int, warps: int, copies: int, bulk=False,
                   wo_after=False):
    """A function of h (1, d) running the stack with G-copy accumulators, and its buffers."""
    d = stack.config.d
    # each copy starts on a 128-byte line; a bulk reduction's copy is whole 256-float rows
    stride = triton.cdiv(d, 256) * 256 if bulk else triton.cdiv(d, 32) * 32
    block_d = triton.next_power_of_2(d)
    layers = stack.layers
    on_gpu = torch.device(layers[0].wq.device).type == "cuda"
    pdl = {"PDL": True, "launch_pdl": True} if on_gpu else {"PDL": False}

    def forward(h):
        accs = [torch.empty((copies, stride), dtype=torch.float32, device=h.device)
                for _ in layers]
        accs[0].zero_()
        x, x_copies = h, 1
        grid = (triton.cdiv(d, block_q),)
        for i, layer in enumerate(layers):
            last = i == len(layers) - 1
            desc = None
            if bulk:
                rows = stride // 256
                desc = TensorDescriptor.from_tensor(accs[i].view(copies, rows, 256),
                                                    [1, max(block_d // 256, 1), 256])
            _layer_copies_kernel[grid](
                accs[i], desc, accs[i] if last else accs[i + 1], x, layer.norm_weight,
                layer.wq, layer.wo, layer.eps, D=d, COPY_STRIDE=stride, H_COPIES=x_copies,
                COPIES=copies, ZERO_NEXT=not last, BULK=bulk, BLOCK_Q=block_q,
                BLOCK_D=block_d, num_warps=warps, num_stages=1, WO_AFTER=wo_after, **pdl)
            x, x_copies = accs[i], copies
        out = torch.empty_like(h)
        _sum_copies_kernel[(triton.cdiv(d, 1024),)](out, x, D=d, COPY_STRIDE=stride,
                                                    COPIES=copies, BLOCK=1024, num_warps=4,
                                                    **pdl)
        return out
    return forward


def replay_us(graph, replays: int = 200) -> float:
    for _ in range(20):
        graph.replay()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / replays * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dtype", choices=DTYPES)
    parser.add_argument("widths")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-barrier", action="store_true", help="skip the barrier variants")
    parser.add_argument("--bulk", action="store_true", help="also the TMA bulk reductions")
    args = parser.parse_args()
    copy_gbps = ceilings()["copy_gbps"]
    print(f"{torch.cuda.get_device_name()}, copy {copy_gbps:.0f} GB/s", flush=True)
    dtype = DTYPES[args.dtype]
    for d in (int(w) for w in args.widths.split(",")):
        layers = layers_for(d, dtype)
        stack = LayerStack(LayerStackConfig(d=d, layers=layers, dtype=dtype), device="cuda")
        floor_us = stack.config.weight_bytes / (copy_gbps * 1e3)
        h = stack.token_inputs(1, 1)[0]
        expected = stack.reference(h)
        print(f"d={d} {args.dtype} b1, {layers} layers, floor {floor_us:.1f} us", flush=True)
        graphs = {"library": tg.capture(stack.fused_forward, h)}
        for bq, warps, copies, wo_after in VARIANTS:
            tile_bytes = 2 * bq * triton.next_power_of_2(d) * stack.layers[0].wq.element_size()
            limit = MAX_TILE_BYTES * (2 if wo_after else 1)
            if tile_bytes > limit or triton.cdiv(d, bq) < copies:
                continue
            graphs[f"BQ {bq:2d} w{warps} copies {copies}{' wo-after' if wo_after else ''}"] = \
                tg.capture(copies_forward(stack, bq, warps, copies, wo_after=wo_after), h)
            if bq == 16 and d % 256 == 0 and not wo_after and args.bulk:
                graphs[f"BQ {bq:2d} w{warps} copies {copies} bulk"] = tg.capture(
                    copies_forward(stack, bq, warps, copies, bulk=True), h)
        for bq, warps in [] if args.no_barrier else BARRIER_VARIANTS:
            tile_bytes = 2 * bq * triton.next_power_of_2(d) * stack.layers[0].wq.element_size()
            if tile_bytes > MAX_TILE_BYTES or triton.cdiv(d, bq) > SM_COUNT:
                continue
            for stream in (torch.float32, dtype):
                graphs[f"barrier BQ {bq:2d} w{warps} {str(stream)[6:]}"] = tg.capture(
                    barrier_forward(stack, bq, warps, stream), h)
        for label, graph in graphs.items():
            y = graph.replay().double()
            error = ((y - expected).abs().max() / expected.abs().max()).item()
            print(f"  {label:26s} error {error:.1e}", flush=True)
        for r in range(args.rounds):
            for label, graph in graphs.items():
                t = replay_us(graph)
                print(f"  {label:26s} {t:7.1f} us {100 * floor_us / t:5.1f}%  (round {r})",
                      flush=True)
        del graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
