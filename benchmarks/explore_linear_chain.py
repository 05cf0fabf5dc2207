"""Exploration (not a deliverable): where the time of a batch-1 linear goes when many run back
to back in one CUDA graph with programmatic dependent launch (PDL), and which tile streams best.

    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py parts [d]
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py sweep [dtype d ...]   # bf16 2048
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py stack
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py regs [d]
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py sweep+stack [dtype d ...]  # short
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py timeline [d]
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py tiles BN,S,C,W[,MAXNREG] ...
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py replay [BN,S,C,W]   # for ncu
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py state
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py first
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py graphs
    PYTHONPATH=src python3 benchmarks/explore_linear_chain.py streams

Every variant is timed as graph replays of many calls (bench.measure(graph=True)), over weight
sets rotated past L2 ("hbm") and over one weight that stays in L2 ("hot").
- parts: an empty kernel that only waits for the previous one (the PDL boundary alone); a
  kernel that streams its weight rows before the wait and stores one sum after it (bytes and
  boundary, no x); the (BLOCK_N, BLOCK_K) matvec kernel; the (BLOCK_N, SPLIT, CHUNK) gemv.
- sweep: gemv tiles, fastest first, with registers a thread.
- stack: the decode presets with two tg.linear a layer, at gemv tiles.
- regs: registers a thread of the shortlisted bf16 tiles and how many of their grids fit the
  GPU at once (a kernel's PDL prefetch only streams from programs that found room).
- timeline: a copy of the bf16 gemv that stamps the global timer at each program's start,
  after its wait and at its end, run as a chain over rotated weights: when each kernel's
  programs start relative to the previous kernel's end, how many start only after it ended,
  how long the wait takes to release, and what a link costs.
- tiles: given tiles in interleaved rounds, optionally under a register cap (ptxas maxnreg).
- replay: one graph of a chain over every weight set, for ncu (DRAM bytes, L2 hit rate).
- state, first, graphs, streams: why the first timings in a process were faster (the cost of
  a graph node is a state of the process; notes/graphs.md): the same chain timed with idle
  pauses and copies between (state), measure()'s steps one by one (first, with variants by
  environment), graphs captured one at a time (graphs), graphs timed before and after work
  on new streams or other disturbances (streams).
"""

import itertools
import math
import os
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

from tilegraph.bench import ceilings, measure, timing
from tilegraph.kernels import linear_ref
from tilegraph.kernels.linear import _gemv_step
from tilegraph.testing import rel_error

linear_mod = sys.modules["tilegraph.kernels.linear"]
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32, "fp16": torch.float16}


@triton.jit
def _empty_kernel(out_ptr, PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()
    tl.store(out_ptr + tl.program_id(0), 1.0)


@triton.jit
def _read_kernel(out_ptr, w_ptr, stride_wn, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + offs_k[None, :],
                mask=(offs_k < K)[None, :], other=0.0)
    tl.extra.cuda.gdc_launch_dependents()
    tl.extra.cuda.gdc_wait()
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.sum(w.to(tl.float32), axis=1), axis=0))


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64,
                                     is_pure=False, pack=1)


@triton.jit
def _smid():
    return tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32,
                                     is_pure=True, pack=1)


@triton.jit
def _gemv_timeline_kernel(y_ptr, x_ptr, w_ptr, stride_wn, stamps_ptr, N, K,
                          EARLY_TRIGGER: tl.constexpr, BLOCK_N: tl.constexpr,
                          SPLIT: tl.constexpr, CHUNK: tl.constexpr):
    """_gemv_kernel (plain, PDL) with stamps (start, after wait, after the dot product, end,
    SM) a program."""
    start = _now()
    if EARLY_TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < N
    cols = tl.arange(0, SPLIT)[None, :, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
    w_ptrs = w_ptr + offs_n[:, None, None].to(tl.int64) * stride_wn + cols
    acc = tl.zeros([BLOCK_N], tl.float32)
    w = tl.load(w_ptrs, mask=n_mask[:, None, None] & (cols < K), other=0.0)
    if not EARLY_TRIGGER:
        tl.extra.cuda.gdc_launch_dependents()
    tl.extra.cuda.gdc_wait()
    released = _now()
    acc, _ = _gemv_step(acc, 0.0, w, x_ptr, x_ptr, cols, 0, K, False)
    tl.debug_barrier()
    computed = _now()
    tl.store(y_ptr + offs_n, acc.to(y_ptr.dtype.element_ty), mask=n_mask)
    tl.debug_barrier()
    end = _now()
    stamp = stamps_ptr + tl.program_id(0) * 5
    tl.store(stamp, start)
    tl.store(stamp + 1, released)
    tl.store(stamp + 2, end)
    tl.store(stamp + 3, _smid().to(tl.int64))
    tl.store(stamp + 4, computed)


class Problem:
    """A batch-1 linear's operands, with enough weight copies to span 3x L2."""

    def __init__(self, d: int, dtype: torch.dtype):
        self.d, self.dtype = d, dtype
        self.weight_bytes = d * d * torch.empty((), dtype=dtype).element_size()
        n_sets = max(2, math.ceil(3 * 50e6 / self.weight_bytes))
        self.weights = [torch.randn(d, d, device="cuda", dtype=dtype) * d**-0.5
                        for _ in range(n_sets)]
        self.x = torch.randn(1, d, device="cuda", dtype=dtype)
        self.g = torch.randn(d, device="cuda", dtype=dtype)
        self.out = torch.empty(1, d, device="cuda", dtype=dtype)
        self.floor_us = self.weight_bytes / ceilings()["copy_gbps"] * 1e-3

    def reference(self, norm: bool):
        x, w = self.x.double(), self.weights[0].double()
        if norm:
            return linear_ref(x, w, norm_weight=self.g.double(), residual=x)
        return linear_ref(x, w)

    def linear(self, config: dict | None, norm: bool = False, pdl: bool = True):
        """launch(weight) of tg.linear's batch-1 kernel at `config` (None: the rule)."""
        g, residual = (self.g, self.x) if norm else (None, None)
        return lambda w: linear_mod._launch_matvec(self.x, w, self.out, g, 1e-6, None, "none",
                                                   residual, pdl, config)

    def time(self, launch) -> tuple[float, float]:
        """(us over rotated weights, us with one weight hot in L2) of launch(weight)."""
        times = []
        for pool in (self.weights, self.weights[:1]):
            state = {"i": 0}

            def call(pool=pool, state=state):
                launch(pool[state["i"] % len(pool)])
                state["i"] += 1
            times.append(measure(call, graph=True, rep_ms=50).median * 1e3)
        return times[0], times[1]


def _gemv(block_n, split, chunk, warps, maxnreg=None):
    config = {"BLOCK_N": block_n, "SPLIT": split, "CHUNK": chunk, "num_warps": warps,
              "num_stages": 1}
    if maxnreg:  # a register cap for ptxas: more programs an SM, maybe spills
        config["maxnreg"] = maxnreg
    return config


# The fastest tiles of the full sweeps on H100 and H200.
SHORTLIST = {
    torch.bfloat16: [(4, 16, 128, 4), (2, 16, 128, 4), (4, 8, 256, 4), (8, 16, 128, 4),
                     (2, 32, 64, 2), (4, 16, 128, 8)],
    torch.float32: [(4, 4, 512, 2), (2, 4, 512, 2), (1, 16, 128, 2), (4, 4, 512, 4),
                    (2, 8, 256, 2), (4, 8, 256, 2)],
}


def parts(d: int = 2048, dtype=torch.bfloat16) -> None:
    p = Problem(d, dtype)
    scratch = torch.empty(8192, device="cuda")
    block_k = triton.next_power_of_2(d)
    print(f"\n{torch.cuda.get_device_name()} d={d} {dtype}: floor {p.floor_us:.2f} us", flush=True)

    def report(name, launch, check=False):
        try:
            launch(p.weights[0])
            err = f"err {rel_error(p.out, p.reference(False)):.1e}" if check else ""
            hbm, hot = p.time(launch)
        except Exception as e:  # a shape the GPU refuses: say so and go on
            print(f"  {name:40}: {type(e).__name__} {str(e)[:80]}")
            return
        print(f"  {name:40} hbm {hbm:6.2f} us ({p.floor_us / hbm:6.1%})  hot {hot:6.2f} us {err}",
              flush=True)

    for pdl in (False, True):
        report(f"empty, 256 programs, pdl={pdl}",
               lambda w, pdl=pdl: _empty_kernel[(256,)](scratch, PDL=pdl, launch_pdl=pdl))
    for bn, warps in ((8, 8), (4, 4), (2, 4)):
        report(f"read {bn} rows, {warps} warps",
               lambda w, bn=bn, nw=warps: _read_kernel[(triton.cdiv(d, bn),)](
                   scratch, w, w.stride(0), d, BLOCK_N=bn, BLOCK_K=block_k, num_warps=nw,
                   launch_pdl=True))
    old = {"BLOCK_N": 8, "BLOCK_K": min(2048, block_k), "num_warps": 8, "num_stages": 1,
           "ROW_LOOP": False}
    report("matvec 8 x 2048, 8 warps (old rule)", p.linear(old), check=True)
    report(f"gemv rule {linear_mod.matvec_config(1, d, d, dtype.itemsize)}", p.linear(None),
           check=True)


def sweep(d: int = 2048, dtype=torch.bfloat16, top: int = 12, short: bool = False) -> list[dict]:
    """gemv tiles over weights rotated past L2, fastest first; returns the best configs.
    short: only SHORTLIST's tiles."""
    p = Problem(d, dtype)
    block_k = min(2048, triton.next_power_of_2(d))
    results = []
    if short:
        candidates = [_gemv(*shape) for shape in SHORTLIST[dtype]]
    else:
        candidates = [_gemv(bn, block_k // chunk, chunk, warps)
                      for bn in (1, 2, 4, 8, 16) for chunk in (64, 128, 256, 512)
                      for warps in (2, 4, 8)
                      if chunk <= block_k and 16 <= bn * block_k // (32 * warps) <= 128]
    rule = linear_mod.matvec_config(1, d, d, dtype.itemsize)
    for config in [rule] + [c for c in candidates if c != rule]:
        try:
            kernel = p.linear(config, norm=True)(p.weights[0])
            err = rel_error(p.out, p.reference(True))
            hbm, hot = p.time(p.linear(config))
            hbm_norm, _ = p.time(p.linear(config, norm=True))
        except Exception as e:  # a shape the GPU refuses: say so and go on
            print(f"  {config}: {type(e).__name__} {str(e)[:100]}", flush=True)
            continue
        regs = getattr(kernel, "n_regs", "?")
        results.append((hbm, hot, hbm_norm, config, regs, err, config == rule))
    results.sort(key=lambda r: r[0])
    print(f"\n{torch.cuda.get_device_name()} gemv d={d} {dtype}: floor {p.floor_us:.2f} us; "
          "plain / hot L2 / with norm+residual, fastest plain first", flush=True)
    for hbm, hot, hbm_norm, config, regs, err, is_rule in results[:top] + [
            r for r in results[top:] if r[-1]]:
        shape = (f"{config['BLOCK_N']}x{config['SPLIT']}x{config['CHUNK']} "
                 f"w{config['num_warps']}")
        print(f"  {hbm:6.2f} us ({p.floor_us / hbm:5.1%})  hot {hot:5.2f}  norm {hbm_norm:5.2f}"
              f"  {shape:28} regs {regs} err {err:.1e}{'  (rule)' if is_rule else ''}",
              flush=True)
    return [r[3] for r in results[:4]]


def _programs_per_sm(regs: int, warps: int, shared: int) -> int:
    """Resident programs an SM on Hopper: 64K registers allotted per warp in units of 256,
    64 warps, 32 programs, 227 KB of shared memory."""
    per_warp = -(-regs * 32 // 256) * 256
    limits = [65536 // (per_warp * warps), 64 // warps, 32]
    if shared:
        limits.append(227 * 1024 // shared)
    return min(limits)


def regs(d: int = 2048) -> None:
    p = Problem(d, torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"\n{torch.cuda.get_device_name()} gemv d={d} bf16: {sms} SMs", flush=True)
    for shape in SHORTLIST[torch.bfloat16]:
        config = _gemv(*shape)
        for norm in (False, True):
            kernel = p.linear(config, norm=norm)(p.weights[0])
            kernel._init_handles()
            per_sm = _programs_per_sm(kernel.n_regs, config["num_warps"],
                                      kernel.metadata.shared)
            programs = triton.cdiv(d, config["BLOCK_N"])
            print(f"  {shape} norm={norm!s:5} regs {kernel.n_regs:3d} spills {kernel.n_spills}"
                  f" shared {kernel.metadata.shared:5d}: {per_sm:2d} programs an SM, grid of"
                  f" {programs}: {per_sm * sms / programs:4.2f} grids at once", flush=True)


def _timeline_stats(stamps: torch.Tensor) -> dict:
    """stamps (calls, programs, 4) of one replay -> medians over the middle calls, in us."""
    start, released, end = (stamps[..., i].double() for i in range(3))
    first_start, last_start = start.min(1).values, start.max(1).values
    first_release, last_end = released.min(1).values, end.max(1).values
    prev_end = last_end[:-1]
    keep = slice(len(prev_end) // 4, 3 * len(prev_end) // 4)  # away from the graph's ends

    def med(v):
        return float(v[keep].median()) * 1e-3
    late = (start[1:] > prev_end[:, None]).double().mean(1)  # programs starting after it
    return {"link": med(last_end[1:] - prev_end),
            "launch after prev launch": med(first_start[1:] - first_start[:-1]),
            "last start - prev end": med(last_start[1:] - prev_end),
            "wait release - prev end": med(first_release[1:] - prev_end),
            "end - release (post-wait)": med(last_end[1:] - first_release[1:]),
            "late programs %": 100 * float(late[keep].median()),
            "one program start->end": float((end - start)[1:].median()) * 1e-3}


def tiles(shapes: list[tuple[int, ...]], rounds: int = 5, d: int = 2048) -> None:
    """Given bf16 gemv tiles, timed in interleaved rounds over rotated weights (the bench's
    method); medians over rounds, with registers and resident programs an SM."""
    p = Problem(d, torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    launches = {shape: p.linear(_gemv(*shape)) for shape in shapes}
    times = {shape: [] for shape in shapes}
    for shape, launch in launches.items():
        kernel = launch(p.weights[0])
        kernel._init_handles()
        per_sm = _programs_per_sm(kernel.n_regs, shape[3], kernel.metadata.shared)
        err = rel_error(p.out, p.reference(False))
        print(f"  {shape}: regs {kernel.n_regs} spills {kernel.n_spills}, {per_sm} an SM, "
              f"{per_sm * sms / triton.cdiv(d, shape[0]):.2f} grids at once, err {err:.1e}",
              flush=True)
    hot = {shape: [] for shape in shapes}
    captured = _count_captured_calls()
    t0 = time.time()
    for r in range(rounds):
        for shape, launch in launches.items():
            hbm_us, hot_us = p.time(launch)
            times[shape].append(hbm_us)
            hot[shape].append(hot_us)
            print(f"    round {r} {shape} at {time.time() - t0:6.2f} s (unix {time.time():.1f}):"
                  f" hbm {hbm_us:.3f} us, hot {hot_us:.3f}; calls a graph {captured[-2:]}",
                  flush=True)
    print(f"\n{torch.cuda.get_device_name()} gemv d={d} bf16, {rounds} rounds, floor "
          f"{p.floor_us:.2f} us", flush=True)
    for shape in sorted(shapes, key=lambda s: statistics.median(times[s])):
        t, median = times[shape], statistics.median(times[shape])
        print(f"  {shape}: {median:6.3f} us ({p.floor_us / median:6.1%}), hot "
              f"{statistics.median(hot[shape]):5.2f}; rounds {' '.join(f'{v:.2f}' for v in t)}",
              flush=True)


def _count_captured_calls() -> list[int]:
    """From now on, the number of calls each bench.measure(graph=True) captures."""
    counts = []
    capture = timing._capture_calls

    def counting(fn, calls):
        counts.append(calls)
        return capture(fn, calls)
    timing._capture_calls = counting
    return counts


def _program_quantiles(one_call: torch.Tensor, prev_end: float) -> None:
    """Per-program spans of one call (programs, 5 stamps): quantiles 0/10/50/90/100, us."""
    start, released, end, computed = (one_call[:, i] for i in (0, 1, 2, 4))
    spans = {"start - prev end": start - prev_end, "release - prev end": released - prev_end,
             "dot product (after wait)": computed - released, "store + exit": end - computed,
             "end - prev end": end - prev_end}
    q = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=torch.float64)
    for name, span in spans.items():
        print(f"      {name:26} " + " ".join(f"{v * 1e-3:6.2f}" for v in span.quantile(q)),
              flush=True)


def timeline(d: int = 2048) -> None:
    p = Problem(d, torch.bfloat16)
    calls = 48
    print(f"\n{torch.cuda.get_device_name()} gemv d={d} bf16, chains of {calls} over rotated "
          f"weights (hot: one weight), globaltimer stamps; medians over the middle calls, us",
          flush=True)
    for shape in [(4, 16, 128, 4), (8, 16, 128, 4), (2, 16, 128, 4)]:
        for early, hot in ((False, False), (False, True), (True, False)):
            pool = p.weights[:1] if hot else p.weights
            bn, split, chunk, warps = shape
            grid = (triton.cdiv(d, bn),)
            stamps = torch.zeros(calls, grid[0], 5, dtype=torch.int64, device="cuda")

            def launch(w, i, stamps=stamps, bn=bn, split=split, chunk=chunk, warps=warps,
                       grid=grid, early=early):
                _gemv_timeline_kernel[grid](p.out, p.x, w, w.stride(0), stamps[i], d, d,
                                            EARLY_TRIGGER=early, BLOCK_N=bn, SPLIT=split,
                                            CHUNK=chunk, num_warps=warps, launch_pdl=True)
            launch(p.weights[0], 0)
            err = rel_error(p.out, p.reference(False))
            state = {"i": 0}

            def call(state=state, launch=launch, pool=pool):
                launch(pool[state["i"] % len(pool)], state["i"] % calls)
                state["i"] += 1
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                call()
            torch.cuda.synchronize()
            state["i"] = 0
            with torch.cuda.graph(graph, stream=stream):
                for _ in range(calls):
                    call()
            for _ in range(5):
                graph.replay()
            torch.cuda.synchronize()
            stats = _timeline_stats(stamps.cpu())
            timed = measure(graph.replay, graph=False, flush_l2=False, rep_ms=50).median
            where = "hot" if hot else "hbm"
            print(f"  {shape} {where} early trigger={early!s:5} err {err:.1e}: replay "
                  f"{timed * 1e3 / calls:.2f} us a call; " + ", ".join(
                      f"{k} {v:.2f}" for k, v in stats.items()), flush=True)
            sms = stamps[calls // 2, :, 3].cpu()
            print(f"      programs an SM in one call: max {int(sms.bincount().max())}, "
                  f"SMs used {int((sms.bincount() > 0).sum())}", flush=True)
            _program_quantiles(stamps[calls // 2].cpu().double(),
                               float(stamps[calls // 2 - 1, :, 2].max()))


def state(d: int = 2048) -> None:
    """Is the first timing in a process faster because of the GPU's state? The rule's tile and
    a 1 GiB copy, timed in turn with idle pauses between some of them."""
    from tilegraph.bench.roofline import _copy_gbps

    p = Problem(d, torch.bfloat16)
    launch = p.linear(None)
    launch(p.weights[0])
    t0 = time.time()
    for step in ["copy", "linear", "linear", "linear", "idle", "linear", "linear", "copy",
                 "idle", "copy", "linear", "idle", "idle", "linear", "copy", "linear"]:
        if step == "idle":
            torch.cuda.synchronize()
            time.sleep(2.0)
            print(f"  {time.time() - t0:6.2f} s: idle 2 s", flush=True)
        elif step == "copy":
            gbps = _copy_gbps()
            print(f"  {time.time() - t0:6.2f} s: copy {gbps:.0f} GB/s", flush=True)
        else:
            hbm, hot = p.time(launch)
            print(f"  {time.time() - t0:6.2f} s: linear hbm {hbm:.3f} us "
                  f"({p.floor_us / hbm:.1%} of the cached ceiling), hot {hot:.3f}", flush=True)


def first(d: int = 2048, timings: int = 4) -> None:
    """The first timing in a process reads faster: measure()'s graph path step by step, a few
    times in a row, with what each step chose (calls captured, hold before each replay) and
    every replay's time, to see which step differs the first time."""
    p = Problem(d, torch.bfloat16)
    launch = p.linear(None)
    order = itertools.cycle(p.weights)

    def call():
        launch(next(order))
    call()
    torch.cuda.synchronize()
    # Variants, by environment: torch.cuda.graph() empties the allocator's cache before each
    # capture (unmapping freed blocks); FIRST_KEEP_CACHE=1 stops that, FIRST_ONE_FLUSHER=1
    # allocates the L2 flush buffer once instead of once a timing.
    if os.environ.get("FIRST_KEEP_CACHE"):
        torch.cuda.empty_cache = lambda: None
    one_flusher = timing._L2Flusher() if os.environ.get("FIRST_ONE_FLUSHER") else None
    for n in range(timings):
        flusher = one_flusher or timing._L2Flusher()
        host_us = timing._host_us(call)
        estimate = statistics.median(timing._time_events(call, 5, flusher, 2 * host_us))
        calls = timing._repetitions(estimate, 2.0, lo=10, hi=1000)
        graph = timing._capture_calls(call, calls, stream=torch.cuda.Stream())  # as it then was
        replay_host_us = timing._host_us(graph.replay, 2)
        hold_us = min(5000.0, 2 * replay_host_us)
        for hold, flush in ((hold_us, flusher), (hold_us, None), (5000.0, flusher)):
            times = timing._time_events(graph.replay, 40, flush, hold)
            per_call = sorted(t * 1e3 / calls for t in times)
            print(f"  timing {n}: host {host_us:.0f} us a call, estimate {estimate * 1e3:.1f} us,"
                  f" {calls} calls, replay host {replay_host_us:.0f} us, hold {hold:.0f} us, "
                  f"flush {flush is not None}: per call min {per_call[0]:.3f} median "
                  f"{per_call[20]:.3f} max {per_call[-1]:.3f} us", flush=True)
        del graph


def graphs(d: int = 2048) -> None:
    """Follow-up of `first`: the first two graphs timed in a process read faster. Is that a
    state of the process that ends at the third graph's capture, or a property of the first
    graphs captured, and does it touch chains without PDL? Graphs of the same chain (PDL, and
    one without) are captured one at a time, each timed once captured, with the older ones
    timed again after every capture."""
    p = Problem(d, torch.bfloat16)
    order = itertools.cycle(p.weights)
    launches = {"pdl": p.linear(None), "no pdl": p.linear(None, pdl=False)}
    for launch in launches.values():
        launch(p.weights[0])
    torch.cuda.synchronize()
    calls = 232
    flusher = timing._L2Flusher()
    # Variants, by environment: GRAPHS_ONE_STREAM=1 captures every graph on one side stream
    # (bench.measure took a new one a capture then); GRAPHS_TOUCH_STREAMS=n first runs a small
    # op on n new streams.
    for _ in range(int(os.environ.get("GRAPHS_TOUCH_STREAMS", "0"))):
        with torch.cuda.stream(torch.cuda.Stream()):
            flusher.buffer[:1].add_(1)
    torch.cuda.synchronize()
    one_stream = torch.cuda.Stream() if os.environ.get("GRAPHS_ONE_STREAM") else None

    def capture(fn):  # a new stream a capture, as bench.measure did when this was found
        return timing._capture_calls(fn, calls, stream=one_stream or torch.cuda.Stream())
    kept = {}
    for name in ("pdl A", "no pdl A", "pdl B", "no pdl B", "pdl C"):
        launch = launches[name.rsplit(" ", 1)[0]]
        kept[name] = capture(lambda launch=launch: launch(next(order)))
        line = []
        for old, graph in kept.items():
            times = sorted(timing._time_events(graph.replay, 40, flusher, 400.0))
            line.append(f"{old} {times[20] * 1e3 / calls:.3f}")
        print(f"  after capturing {name:9}: " + ", ".join(line) + " us a call", flush=True)


def streams(d: int = 2048) -> None:
    """Follow-up of `graphs`: graph replays slow down once a process has run work on a few
    streams. The same graphs (captured on one side stream) timed before and after running a
    small op on 4 new streams (or else, STREAMS_DISTURB: see _disturb): chains of empty
    kernels and of one-element adds (the cost of a graph node alone), the rule's bf16 linear
    over rotated weights, and RMSNorm over rotated inputs."""
    from tilegraph.kernels import rms_norm

    p = Problem(d, torch.bfloat16)
    order = itertools.cycle(p.weights)
    linear = p.linear(None)
    scratch = torch.zeros(8192, device="cuda")
    rows = [torch.randn(8192, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    row_order = itertools.cycle(rows)
    gain = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    normed = torch.empty_like(rows[0])
    work = {
        "empty kernel, 132 programs": (lambda: _empty_kernel[(132,)](scratch, PDL=False), 500),
        "empty kernel, PDL": (lambda: _empty_kernel[(132,)](scratch, PDL=True,
                                                            launch_pdl=True), 500),
        "one-element add": (lambda: scratch[:1].add_(1), 500),
        "bf16 linear d=2048, PDL": (lambda: linear(next(order)), 232),
        "rms_norm 8192x4096 bf16": (lambda: rms_norm(next(row_order), gain, out=normed), 30),
    }
    side = torch.cuda.Stream()
    graphs = {}
    for name, (fn, calls) in work.items():
        with torch.cuda.stream(side):
            fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
        graphs[name] = (graph, calls)
    flusher = timing._L2Flusher()
    connections = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "unset")
    how = os.environ.get("STREAMS_DISTURB", "streams")
    for state in ("before", "after"):
        if state == "after":
            _disturb(os.environ.get("STREAMS_DISTURB", "streams"), scratch)
        for name, (graph, calls) in graphs.items():
            times = sorted(timing._time_events(graph.replay, 40, flusher, 400.0))
            print(f"  connections {connections}, {state} {how}: {name:28} "
                  f"{times[20] * 1e3 / calls:7.3f} us a call", flush=True)


def _disturb(how: str, scratch: torch.Tensor) -> None:
    """What `streams` does between its two timings: a small op on 4 new streams ("streams"),
    4 new streams that only record an event ("events"), or 4 GiB allocated, written and
    given back to the driver ("alloc")."""
    if how == "streams":
        for _ in range(4):
            with torch.cuda.stream(torch.cuda.Stream()):
                scratch[:1].add_(1)
    elif how == "events":
        for _ in range(4):
            torch.cuda.Stream().record_event()
    elif how == "alloc":
        blocks = [torch.ones(2**28, device="cuda") for _ in range(4)]
        del blocks
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    torch.cuda.synchronize()


def replay(shape: tuple[int, ...] = (4, 16, 128, 4), d: int = 2048, replays: int = 3) -> None:
    """One graph of a chain of links over every rotated weight set, replayed a few times and
    nothing else: a workload for ncu --graph-profiling graph (DRAM bytes, L2 hit rate)."""
    p = Problem(d, torch.bfloat16)
    launch = p.linear(_gemv(*shape))
    launch(p.weights[0])
    links = 10 * len(p.weights)
    order = itertools.cycle(p.weights)
    graph = timing._capture_calls(lambda: launch(next(order)), links)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()  # ncu --profile-from-start off sees only these
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"{shape}: {replays} replays of {links} links, {p.weight_bytes} weight bytes a link",
          flush=True)


def stack(configs_by_dtype: dict | None = None) -> None:
    """Decode presets with two tg.linear a layer, GPU time per token in a graph."""
    from tilegraph.models import PRESETS, LayerStack

    rule = linear_mod.matvec_config
    for preset in ("seed", "seed-bf16"):
        s = LayerStack(PRESETS[preset], device="cuda")
        x = s.token_inputs(1, 1)[0]
        ref = s.reference(x)
        configs = (configs_by_dtype or {}).get(s.config.dtype, [])
        old = {"BLOCK_N": 4 if s.config.dtype == torch.float32 else 8, "BLOCK_K": 2048,
               "num_warps": 4 if s.config.dtype == torch.float32 else 8, "num_stages": 1,
               "ROW_LOOP": False}
        print(f"{preset}: us/token, two kernels a layer", flush=True)
        for config in [None, old, *configs]:
            if config is not None:
                linear_mod.matvec_config = lambda M, N, K, e, c=config: dict(c)
            err = rel_error(s.fused_forward(x, kernels_per_layer=2), ref)
            us = measure(lambda s=s, x=x: s.fused_forward(x, kernels_per_layer=2), graph=True,
                         rep_ms=100).median * 1e3
            linear_mod.matvec_config = rule
            print(f"  {us:7.1f} us {config or 'rule'} err {err:.1e}", flush=True)
        one = measure(lambda s=s, x=x: s.fused_forward(x), graph=True, rep_ms=100).median * 1e3
        print(f"  {one:7.1f} us fused_forward's own choice of kernels a layer", flush=True)


if __name__ == "__main__":
    mode, args = (sys.argv[1:2] or ["parts"])[0], sys.argv[2:]
    if mode == "parts":
        parts(*(int(a) for a in args[:1]))
    elif mode in ("sweep", "sweep+stack"):
        found = {}
        pairs = list(zip(args[::2], args[1::2], strict=True)) or [("bf16", "2048")]
        for name, d in pairs:
            found.setdefault(DTYPES[name], []).extend(
                sweep(int(d), DTYPES[name], short=mode == "sweep+stack"))
        if mode == "sweep+stack":  # the best tiles of each dtype, on the whole stack
            stack(found)
    elif mode == "stack":
        stack()
    elif mode == "tiles":
        tiles([tuple(int(v) for v in a.split(",")) for a in args])
    elif mode == "timeline":
        timeline(*(int(a) for a in args[:1]))
    elif mode == "state":
        state()
    elif mode == "first":
        first()
    elif mode == "graphs":
        graphs()
    elif mode == "streams":
        streams()
    elif mode == "replay":
        replay(*[tuple(int(v) for v in a.split(",")) for a in args[:1]])
    elif mode == "regs":
        regs(*(int(a) for a in args[:1]))
    else:
        sys.exit(__doc__)
