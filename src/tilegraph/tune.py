"""`tilegraph tune`: time tg.linear's decode plans for given shapes on this GPU and keep the
fastest, so later processes run it (kernels/decode_plan.py reads the cache); and the same
for tg.decode_attention's launch shapes (tune_attention, which tg.Generator runs for its
batch sizes).

Each candidate is checked against a float64 reference, then timed the way a decode step
runs it: many calls captured in one CUDA graph, cycling through copies of the weight that
together span three times the L2 cache, programmatic dependent launch as tg.linear would
use it. cuBLAS (F.linear) is timed beside them; where it is faster than every candidate,
plain projections of that shape dispatch to it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import triton

from ._runtime import INTERPRET, is_capturing
from .errors import CaptureError
from .kernels import decode_attention as attention
from .kernels import decode_plan
from .kernels._dot_rows import one_step_a_slice
from .kernels._launch import compiling_only, sm_count
from .kernels._pdl import use_pdl
from .kernels.autotune import (
    Tuner,
    compile_side_by_side,
    copies_spanning_l2,
    rotating,
    timing_enabled,
)
from .kernels.linear import linear_ref
from .testing import TOLERANCES, randn, rel_error


def tune_shape(rows: int, n: int, k: int, dtype: torch.dtype,
               progress: Callable[[str], None] | None = None) -> dict:
    """Time every candidate plan of one shape; record and return the winner with the times
    ({"plan", "us", "cublas_us", "candidates": {plan: us}})."""
    from .bench.timing import measure

    if is_capturing():
        raise CaptureError("tilegraph tune times kernels; it cannot run while a CUDA graph is "
                           "being captured")
    if INTERPRET or not torch.cuda.is_available():
        raise RuntimeError("tilegraph tune times kernels on a CUDA GPU; there is none here")
    size = torch.finfo(dtype).bits // 8
    copies = max(2, copies_spanning_l2(n * k * size))
    weights = [randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5) for _ in range(copies)]
    x = randn(rows, k, dtype=dtype, device="cuda")
    out = torch.empty(rows, n, dtype=dtype, device="cuda")
    ref = linear_ref(x.double(), weights[0].double())
    pdl = use_pdl(x.device, ())
    times = {}
    plans = decode_plan.candidates(rows, n, k, dtype, sm_count(x.device))
    for i, plan in enumerate(plans):
        if progress is not None:
            progress(f"tune {n}x{k} {rows} rows {str(dtype).removeprefix('torch.')}: "
                     f"candidate {i + 1}/{len(plans)}")
        launch = lambda w, plan=plan: decode_plan.launch(  # noqa: E731
            plan, x, w, out, None, 0.0, None, "none", None, pdl)
        try:
            out.fill_(float("nan"))
            launch(weights[0])
            if not rel_error(out, ref) <= TOLERANCES[dtype]:
                continue  # never pick a plan that is wrong here
            stats = measure(rotating(launch, weights), warmup_ms=2, rep_ms=10, graph=True)
        except triton.runtime.errors.OutOfResources:
            continue  # more shared memory or registers than this GPU has
        times[i] = stats.median * 1e3
    cublas = measure(rotating(lambda w: torch.matmul(x, w.T, out=out), weights),
                     warmup_ms=2, rep_ms=10, graph=True).median * 1e3
    best = min(times, key=times.get)  # index of the fastest correct plan
    chosen = plans[best] if times[best] <= cublas else decode_plan.Plan(
        "cublas", {"fused": plans[best].as_dict()})
    decode_plan.record(rows, n, k, dtype, chosen)
    return {"rows": rows, "n": n, "k": k, "dtype": str(dtype).removeprefix("torch."),
            "plan": chosen.as_dict(), "us": min(times[best], cublas), "cublas_us": cublas,
            "rule_us": times.get(0),
            "candidates": {repr(plans[i].as_dict()): t for i, t in times.items()}}


def tune(shapes: Sequence[tuple[int, int]], rows: Sequence[int], dtypes: Sequence[torch.dtype],
         progress: Callable[[str], None] | None = None) -> list[dict]:
    """tune_shape for every (N, K) in `shapes`, row count and dtype."""
    return [tune_shape(m, n, k, dtype, progress)
            for dtype in dtypes for n, k in shapes for m in rows]


def tune_attention_once(batch: int, n_heads: int, n_kv_heads: int, head_dim: int,
                        max_seq: int, dtype: torch.dtype) -> None:
    """tune_attention for a shape no earlier process or call has tuned, where timing is
    enabled (a CUDA GPU, TILEGRAPH_AUTOTUNE not 0); otherwise nothing."""
    key = attention.attention_key(batch, n_kv_heads, n_heads // n_kv_heads, head_dim, max_seq,
                                  dtype)
    if timing_enabled() and attention.tuned.lookup(key) is None:
        tune_attention(batch, n_heads, n_kv_heads, head_dim, max_seq, dtype)


def tune_attention(batch: int, n_heads: int, n_kv_heads: int, head_dim: int, max_seq: int,
                   dtype: torch.dtype) -> dict:
    """Time tg.decode_attention's candidate launch shapes for one shape and record the
    fastest ({"config", "us", "candidates": {config: us}}). Every sequence is at the full
    max_seq, where the launch shape matters most (at short contexts the candidates differ
    by a few percent); the caches are copied to span three L2 caches when smaller, so each
    call reads its cache from memory as a decode step does. Each candidate's result is
    checked against the default rule's (itself tested against float64)."""
    from .bench.timing import measure

    if is_capturing():
        raise CaptureError("tilegraph tunes decode attention by timing it; it cannot run "
                           "while a CUDA graph is being captured")
    if INTERPRET or not torch.cuda.is_available():
        raise RuntimeError("tuning times kernels on a CUDA GPU; there is none here")
    if min(batch, n_heads, n_kv_heads, head_dim, max_seq) < 1 or n_heads % n_kv_heads:
        raise ValueError(f"need positive sizes and q heads a multiple of kv heads, got batch "
                         f"{batch}, {n_heads} / {n_kv_heads} heads, head_dim {head_dim}, "
                         f"max_seq {max_seq}")
    group = n_heads // n_kv_heads
    shape = (batch, n_kv_heads, max_seq, head_dim)
    cache_bytes = 2 * batch * n_kv_heads * max_seq * head_dim * (torch.finfo(dtype).bits // 8)
    # made on the GPU: a cache can be a gigabyte
    caches = [(torch.randn(shape, dtype=dtype, device="cuda"),
               torch.randn(shape, dtype=dtype, device="cuda"))
              for _ in range(copies_spanning_l2(cache_bytes))]
    q = randn(batch, n_heads, head_dim, dtype=dtype, device="cuda")
    lengths = torch.full((batch,), max_seq, device="cuda")
    out = torch.empty_like(q)
    scale = head_dim ** -0.5
    candidates = attention.attention_candidates(batch, n_kv_heads, group, head_dim, max_seq,
                                                sm_count(q.device),
                                                **attention.device_facts(dtype, q.device))

    def launch(cache, config):
        attention.launch_decode_attention(q, *cache, lengths, scale, out, config)

    launch(caches[0], candidates[0])
    reference = out.clone()
    times = {}
    for i, config in enumerate(candidates):
        try:
            out.fill_(float("nan"))
            launch(caches[0], config)
            if not rel_error(out, reference) <= TOLERANCES[dtype]:
                continue  # never pick a launch shape that is wrong here
            stats = measure(rotating(lambda cache, c=config: launch(cache, c), caches),
                            warmup_ms=2, rep_ms=10, graph=True)
        except triton.runtime.errors.OutOfResources:
            continue
        times[i] = stats.median * 1e3
    best = min(times, key=times.get)
    key = attention.attention_key(batch, n_kv_heads, group, head_dim, max_seq, dtype)
    attention.tuned.record(key, candidates[best])
    in_kernel = [i for i in times if not candidates[i].get("MERGE_APART")]
    if in_kernel:  # what a decode layer runs instead of a launch that merges apart
        attention.tuned.record(attention.layer_key(key),
                               candidates[min(in_kernel, key=times.get)])
    return {"config": candidates[best], "us": times[best],
            "candidates": {repr(candidates[i]): t for i, t in times.items()}}


# Whole decode steps whose attention launch was chosen in the step (tune_attention_in_step_once),
# by step key: the launch chosen, which later processes record again for the attention key.
attention_in_step = Tuner("decode-attention-in-step", [{}])


def tune_attention_in_step_once(batch: int, n_heads: int, n_kv_heads: int, head_dim: int,
                                max_seq: int, dtype: torch.dtype, step: tuple,
                                capture_step: Callable[[], object], positions: torch.Tensor,
                                tolerance: float, shortest: int = 0,
                                whole_seq: int | None = None,
                                reference: Callable[[], torch.Tensor] | None = None
                                ) -> dict | None:
    """tg.decode_attention's launch for one shape, chosen by timing the caller's whole step:
    the launch timed alone (tune_attention) and step_candidates' variants of the rule. Alone,
    attention does not show what it costs beside the kernels that run with it under PDL: the
    best launch of the same shape differs from model to model (notes/models.md, session 43).

    `step` names the caller's step (the model's shape: a step key with the attention key);
    `shortest`, the shortest position it replays at (a context band's first: tg.Generator
    replays another graph below it), from which on it is timed; `whole_seq`, where the step
    runs over a window of max_seq positions of a longer cache (a context band), that cache's
    length: the launches its step tries (shaped for its length; the first, its step's choice
    where made) are tried instead; `reference`, the step computed another way (the check of
    time_step_candidates). Only the candidates that give the reference's result alone
    (right_attention_launches) are tried. Each candidate is recorded for the attention key (so
    launches read it) and timed in the step as time_step_candidates does. The fastest stays
    recorded for the attention key and under the step key (with the band's first position),
    so a later process only records it again. Returns {"config", "ms", "candidates":
    {config: ms}} when it timed, None where it did not: a step chosen before, or no timing
    here (CPU, TILEGRAPH_AUTOTUNE=0)."""
    group = n_heads // n_kv_heads
    key = attention.attention_key(batch, n_kv_heads, group, head_dim, max_seq, dtype)
    step_key = (*key, *step, *((f"from {shortest}",) if shortest else ()))
    chosen = attention_in_step.lookup(step_key)
    if chosen is not None:
        if attention.tuned.lookup(key) != chosen:
            attention.tuned.record(key, chosen)  # another step of this shape chose since
        return None
    if not timing_enabled():
        return None
    if is_capturing():
        raise CaptureError("tilegraph chooses decode attention's launch by timing a step; it "
                           "cannot run while a CUDA graph is being captured")
    device = attention.device_facts(dtype, positions.device)
    # A window of a longer cache (a context band) tries the launches shaped for the whole
    # cache, its step's choice first: they fit the window's lengths, and so the band departs
    # from that choice only where another launch is faster at its lengths.
    shaped_for = whole_seq if whole_seq is not None and whole_seq > max_seq else max_seq
    shaped_key = attention.attention_key(batch, n_kv_heads, group, head_dim, shaped_for, dtype)
    sms = sm_count(positions.device)
    first = attention.layer_launch(shaped_key) or attention.attention_config(
        batch, n_kv_heads, group, head_dim, shaped_for, sms, **device)
    candidates = attention.step_candidates(batch, n_kv_heads, group, head_dim, shaped_for,
                                           sms, first, longest=max_seq, **device)
    candidates = right_attention_launches(candidates, batch, n_heads, n_kv_heads, head_dim,
                                          max_seq, dtype, positions.device)
    if not candidates:
        return None   # none gives the reference's result here: the rule's, failing in the open
    # Also timed where one program reads the longest sequence of the unsplit path, for each
    # tile length among the candidates: a launch chosen on positions 255 and 2047 lost 3.6%
    # there in a Qwen2-0.5B step (notes/models.md, session 56).
    one_run_ends = sorted({attention.ONE_RUN_TILES * c["BLOCK_T"] - 1 for c in candidates})
    times = time_step_candidates(len(candidates),
                                 lambda i: attention.tuned.record(key, candidates[i]),
                                 capture_step, positions, max_seq, tolerance, one_run_ends,
                                 shortest, reference)
    if not times:  # not even the launch timed alone captured: leave it to fail in the open
        attention.tuned.record(key, first)
        return None
    best = min(times, key=times.get)
    attention.tuned.record(key, candidates[best])
    attention_in_step.record(step_key, candidates[best])
    return {"config": candidates[best], "ms": times[best],
            "candidates": {repr(candidates[i]): t for i, t in times.items()}}


def right_attention_launches(candidates: list[dict], batch: int, n_heads: int,
                             n_kv_heads: int, head_dim: int, max_seq: int, dtype: torch.dtype,
                             device: torch.device) -> list[dict]:
    """The candidate launches that give decode_attention_ref's result (within TOLERANCES) on
    random inputs of the shape, at lengths where a position read wrongly shows: 1 and 2, one
    past each tile, the longest one run and one past it, one past two of the shortest runs,
    max_seq (the sequences of a batch at lengths apart). A step's logits cannot vouch for a
    launch: one that left out each sequence's newest of 41 positions moved a tiny model's
    logits by 1.7e-2, inside even the step check's tolerance of 2e-2 (notes/models.md,
    session 72). Each is launched as in a decode step (in_step: where it preloads, its first
    tiles read before the wait), the kernel the step then runs, and all are compiled side by
    side first.
    Those that fail or do not compile here are left out, in order."""
    q = randn(batch, n_heads, head_dim, dtype=dtype, device=device)
    # made where they are used: a cache can be a gigabyte
    k, v = (torch.randn(batch, n_kv_heads, max_seq, head_dim, dtype=dtype, device=device)
            for _ in range(2))
    telling = {1, 2, max_seq}
    for config in candidates:   # one past a tile, the longest one run, one past two runs
        tile = config["BLOCK_T"]
        one_run = config.get("ONE_RUN_TILES", attention.ONE_RUN_TILES) * tile
        telling |= {tile + 1, one_run, one_run + 1,
                    2 * config.get("RUN_TILES", 1) * tile + 1}
    apart = torch.arange(batch, device=device) * 37   # each sequence its own length
    slots = torch.arange(batch, device=device)
    cases = []
    for length in sorted(n for n in telling if n <= max_seq):
        lengths = (length - apart).clamp(1, max_seq)
        cases.append((lengths, attention.decode_attention_ref(q, k, v, lengths)))

    def launch(config, lengths, out, compile_only=False):
        # the step's newest rows: each sequence's last position
        attention.launch_decode_attention(q, k, v, lengths, head_dim ** -0.5, out, config,
                                          in_step=(slots, lengths - 1),
                                          compile_only=compile_only)
    scratch = torch.empty_like(q)
    compile_side_by_side(lambda config: launch(config, cases[0][0], scratch, compile_only=True),
                         candidates)
    right = []
    for config in candidates:
        try:
            for lengths, expected in cases:
                out = torch.full_like(q, float("nan"))
                launch(config, lengths, out)
                if not rel_error(out, expected) <= TOLERANCES[dtype]:
                    break
            else:
                right.append(config)
        except triton.runtime.errors.OutOfResources:
            continue
    return right


# Batch-1 decode steps whose one-row projections' rows a program were chosen in the step
# (tune_gemv_rows_in_step_once), by step key: {"rows": {name: BLOCK_N}} (absent: the plan's).
# (Renamed with SMALL_LAUNCH, so that steps chosen among fewer variants are timed again.)
gemv_rows_in_step = Tuner("linear-gemv-launch-in-step", [{}])
# A variant is taken only where its step is this much faster than with the plans' own rows,
# in two rounds of timing: with one round and no margin the tuner took a variant that made
# TinyLlama's decode 1.1% slower (H200, notes/models.md, session 57), while those it took on
# three other shapes made theirs 2.5-3.2% faster.
ROWS_MARGIN = 0.01


def tune_gemv_rows_in_step_once(step: tuple, projections: dict[str, tuple[int, int, bool]],
                                dtype: torch.dtype, capture_step: Callable[[], object],
                                positions: torch.Tensor, max_seq: int, tolerance: float,
                                reference: Callable[[], torch.Tensor] | None = None,
                                run_step: Callable[[], object] | None = None
                                ) -> dict | None:
    """How many weight rows a program each one-row GEMV projection of a batch-1 decode step
    reads (or, at 14-20 MiB and in short rows, how it is launched), chosen by timing the
    caller's whole step: its plan's own or decode_plan.step_variants' (half or twice, the
    other launch, small tiles), one projection at a time, then the fastest and every
    projection's faster variant together, timed again. Beside the kernels that overlap it
    under PDL a projection's best tile depends on the model, not on its own shape
    (notes/models.md, session 57).

    `step` names the caller's step (its model's shape), `projections` its candidates by name:
    (N, K, pairs), pairs where the epilogue works on pairs of columns (SwiGLU, rotary);
    `reference`, the step computed another way, and `run_step`, the step run eagerly (the
    check and the compiles of time_step_candidates).
    Those whose plan is not the one-row GEMV are left as they are. The fastest stays
    recorded per shape and under the step key, so a later process only records it again.
    Returns {"rows", "ms", "candidates": {name: ms}} when it timed, None where it did not."""
    projections = _one_name_a_shape(projections)

    def apply(rows: dict) -> None:
        for name, (n, k, _) in projections.items():
            decode_plan.set_step_rows(n, k, dtype, rows.get(name))

    chosen = gemv_rows_in_step.lookup(step)
    if chosen is not None:
        apply(chosen["rows"])
        return None
    if not timing_enabled():
        return None
    if is_capturing():
        raise CaptureError("tilegraph chooses the projections' tiles by timing a step; it "
                           "cannot run while a CUDA graph is being captured")
    apply({})  # the plans' own rows, which the variants halve and double
    singles = [{}]
    for name, (n, k, pairs) in projections.items():
        own = decode_plan.plan(1, n, k, dtype, positions.device)
        if own.kind == "gemv":
            singles += [{name: rows} for rows in decode_plan.step_variants(
                n, k, dtype, own.config, pairs)]

    def timed(candidates: list[dict]) -> dict[int, float]:
        return time_step_candidates(len(candidates), lambda i: apply(candidates[i]),
                                    capture_step, positions, max_seq, tolerance,
                                    reference=reference, run_step=run_step)

    times = timed(singles) if len(singles) > 1 else {}
    apply({})
    if 0 not in times:  # nothing to choose, or the plans' own step did not capture
        return None
    named = {repr(singles[i]): ms for i, ms in times.items()}
    faster = {}  # each projection's fastest variant among those that beat its own rows
    for i in sorted(times, key=times.get):
        if i and times[i] < times[0] * (1 - ROWS_MARGIN):
            [(name, rows)] = singles[i].items()
            faster.setdefault(name, rows)
    best, ms = {}, times[0]
    if faster:
        # The fastest variant, and all of them at once, timed again beside the plans' own
        # rows: kept only where they still win by the margin.
        finals = [{}, singles[min(times, key=times.get)]] + ([faster] if len(faster) > 1
                                                             else [])
        again = timed(finals)
        named.update({f"again {finals[i]!r}": t for i, t in again.items()})
        winner = min(again, key=again.get) if 0 in again else 0
        if winner and again[winner] < again[0] * (1 - ROWS_MARGIN):
            best, ms = finals[winner], again[winner]
    apply(best)
    gemv_rows_in_step.record(step, {"rows": best})
    return {"rows": best, "ms": ms, "candidates": named}


def _one_name_a_shape(projections: dict[str, tuple[int, int, bool]]
                      ) -> dict[str, tuple[int, int, bool]]:
    """Projections of one shape under the first one's name: rows a program are recorded per
    shape, so they share them, in pairs if any of them works on pairs."""
    merged: dict[str, tuple[int, int, bool]] = {}
    for name, (n, k, pairs) in projections.items():
        first = next((m for m, (n2, k2, _) in merged.items() if (n2, k2) == (n, k)), name)
        merged[first] = (n, k, pairs or (first in merged and merged[first][2]))
    return merged


# Batch-1 decode steps whose one-row projections' release points were chosen in the step
# (tune_release_in_step_once), by step key: {"late": names of the projections released late}.
release_in_step = Tuner("linear-release-in-step", [{}])


def tune_release_in_step_once(step: tuple, projections: dict[str, tuple[int, int]],
                              dtype: torch.dtype, capture_step: Callable[[], object],
                              positions: torch.Tensor, max_seq: int, tolerance: float,
                              reference: Callable[[], torch.Tensor] | None = None,
                              run_step: Callable[[], object] | None = None
                              ) -> dict | None:
    """Which one-row projections of a batch-1 decode step release the next kernel once their
    x has arrived instead of right after their wait (decode_plan.set_late_release), chosen
    by timing the caller's whole step. Released late, the output projection after attention
    made a Qwen2-0.5B step 1.5% and a Llama-3.2-3B-shaped one 2.4% faster and a
    Qwen2-1.5B-shaped one 1.7% slower; gate/up released late, Llama-3.2-3B 2.7% faster and
    Qwen2-0.5B 6.6% slower (H100, notes/models.md, session 45): no rule of shape says which.

    `step` names the caller's step (its model's shape), `projections` its candidates by name
    (N, K), `reference` and `run_step` as time_step_candidates'; those whose
    plan is not the one-row GEMV are left as they are. Tried: none late, each alone, all
    (time_step_candidates). The fastest stays recorded per shape and under the step key, so
    a later process only records it again. Returns {"late", "ms", "candidates": {names:
    ms}} when it timed, None where it did not."""
    device = positions.device
    shapes = {name: nk for name, nk in projections.items()
              if decode_plan.plan(1, *nk, dtype, device).kind == "gemv"}
    return _names_in_step_once(release_in_step, step, "late", shapes,
                               lambda n, k, late: decode_plan.set_late_release(n, k, dtype, late),
                               "where projections release the next kernel", capture_step,
                               positions, max_seq, tolerance, reference, run_step)


# Batch-1 decode steps whose output projection's prefetch of gate/up's first weights into L2
# was chosen in the step of a context band (tune_l2_ahead_in_step_once), by step key and band:
# {"bytes": how many}.
l2_ahead_in_step = Tuner("linear-l2-ahead-in-step", [{}])
# The amounts tried (capped at gate/up's size). At batch 1 on an H200, in the Generator's
# band steps, 2-4 MiB won every band of Qwen2-0.5B and TinyLlama by 0.5-1.7% (a Generator's
# tokens 1.0-1.3% faster) and three of four of a 1024-wide shape's; 8 MiB lost 1-5% in every
# band of those and of Llama-3.2-1B, 16 MiB up to 10% (notes/models.md, session 92).
L2_AHEAD_BYTES = (0, 2**20, 2 * 2**20, 4 * 2**20)
# A prefetch is kept only where its step is this much faster than none, over two rounds of
# timing: its gains are 1-3%, a step's noise a few tenths of that.
L2_AHEAD_MARGIN = 0.005


def tune_l2_ahead_in_step_once(step: tuple, projection: tuple[int, int], ahead_bytes: int,
                               dtype: torch.dtype, apply: Callable[[int], None],
                               capture_step: Callable[[], object], positions: torch.Tensor,
                               max_seq: int, tolerance: float, shortest: int = 0,
                               reference: Callable[[], torch.Tensor] | None = None,
                               run_step: Callable[[], object] | None = None) -> int:
    """How many of the first `ahead_bytes` bytes of gate/up's weights the one-row output
    projection (`projection`, (N, K)) of a batch-1 step over a context band's window
    prefetches into L2 before its wait, beside attention (tg.linear's l2_ahead), chosen
    among L2_AHEAD_BYTES by timing the caller's step twice over the band's positions
    (`max_seq` its longest, `shortest` its first) and kept only where it beats none by
    L2_AHEAD_MARGIN: how long attention leaves memory idle depends on the model and its
    context. `apply(nbytes)` sets the amount the caller's step captures with; the choice is
    applied and returned (0 for none; nothing is timed where the output projection is not
    the one-row GEMV, or where nothing may be timed). `step` names the caller's step (its
    model's shape); the choice is recorded under it and the band, so a later process only
    applies it again. `reference` and `run_step` as time_step_candidates'."""
    key = (*step, max_seq, f"from {shortest}")
    chosen = l2_ahead_in_step.lookup(key)
    if chosen is not None:
        apply(chosen["bytes"])
        return chosen["bytes"]
    apply(0)
    if (not timing_enabled()
            or decode_plan.plan(1, *projection, dtype, positions.device).kind != "gemv"):
        return 0
    if is_capturing():
        raise CaptureError("tilegraph chooses what an output projection prefetches into L2 by "
                           "timing a step; it cannot run while a CUDA graph is being captured")
    sizes = sorted({min(nbytes, ahead_bytes) for nbytes in L2_AHEAD_BYTES})
    rounds = [time_step_candidates(len(sizes), lambda i: apply(sizes[i]), capture_step,
                                   positions, max_seq, tolerance, shortest=shortest,
                                   reference=reference, run_step=run_step) for _ in range(2)]
    times = {i: sum(timed[i] for timed in rounds) for i in rounds[0]
             if all(i in timed for timed in rounds)}
    best = min(times, key=times.get) if times else 0
    if 0 in times and times[best] > (1 - L2_AHEAD_MARGIN) * times[0]:
        best = 0
    apply(sizes[best])
    if times:
        l2_ahead_in_step.record(key, {"bytes": sizes[best]})
    return sizes[best]


def _names_in_step_once(store: Tuner, step: tuple, key: str,
                        shapes: dict[str, tuple[int, int]],
                        set_shape: Callable[[int, int, bool], None], choosing: str,
                        capture_step: Callable[[], object], positions: torch.Tensor,
                        max_seq: int, tolerance: float,
                        reference: Callable[[], torch.Tensor] | None = None,
                        run_step: Callable[[], object] | None = None,
                        margin: float = 0.0, progress: Callable[[str], None] | None = None,
                        timing: str = "") -> dict | None:
    """Which of the projections `shapes` (name: (N, K)) to give a variant (none, each alone,
    all), chosen by timing the caller's step (time_step_candidates) and recorded under `step`
    as {key: names}; set_shape(N, K, on) gives each shape the variant or not, and a step
    recorded before is set again, timing nothing. With a margin the fastest is timed again
    beside none and kept only where it is still that much faster (as ROWS_MARGIN).
    `progress`, where given, hears `timing` before a step is timed. Returns {key, "ms",
    "candidates": {names: ms}} when it timed, None where it did not."""
    def apply(names: Sequence[str]) -> None:
        for name, (n, k) in shapes.items():
            set_shape(n, k, name in names)

    chosen = store.lookup(step)
    if chosen is not None:
        apply(chosen[key])
        return None
    names = list(shapes)
    if not names or not timing_enabled():
        return None
    if progress is not None:
        progress(timing)
    if is_capturing():
        raise CaptureError(f"tilegraph chooses {choosing} by timing a step; it cannot run "
                           "while a CUDA graph is being captured")
    candidates = list(dict.fromkeys([(), *((name,) for name in names), tuple(names)]))
    times = time_step_candidates(len(candidates), lambda i: apply(candidates[i]),
                                 capture_step, positions, max_seq, tolerance,
                                 reference=reference, run_step=run_step)
    best = min(times, key=times.get) if times else 0
    named = {", ".join(candidates[i]) or "none": t for i, t in times.items()}
    if margin and best and 0 in times:
        kept = times[best] < times[0] * (1 - margin)
        if kept:
            pair = (0, best)
            again = time_step_candidates(2, lambda i: apply(candidates[pair[i]]),
                                         capture_step, positions, max_seq, tolerance,
                                         reference=reference, run_step=run_step)
            named.update({f"again {', '.join(candidates[pair[i]]) or 'none'}": t
                          for i, t in again.items()})
            kept = 0 in again and 1 in again and again[1] < again[0] * (1 - margin)
        if not kept:
            best = 0
    apply(candidates[best])
    if not times:
        return None
    store.record(step, {key: list(candidates[best])})
    return {key: list(candidates[best]), "ms": times[best], "candidates": named}


def _offered(projections: dict[str, tuple[int, int]], offer: Callable[[int, int], bool]
             ) -> dict[str, tuple[int, int]]:
    """The projections whose (N, K) `offer` takes, those of one shape under the first one's
    name: a step's choice is recorded per shape."""
    shapes: dict[str, tuple[int, int]] = {}
    for name, nk in projections.items():
        if nk not in shapes.values() and offer(*nk):
            shapes[name] = nk
    return shapes


# Decode steps whose projections' `tilegraph tune` plans were timed against the rule's in the
# step (tune_tuned_plans_in_step_once), by step key: {"rule": names that run the rule's}.
tuned_plans_in_step = Tuner("linear-tuned-plans-in-step", [{}])


def tune_tuned_plans_in_step_once(step: tuple, rows: int,
                                  projections: dict[str, tuple[int, int]], dtype: torch.dtype,
                                  capture_step: Callable[[], object], positions: torch.Tensor,
                                  max_seq: int, tolerance: float,
                                  progress: Callable[[str], None] | None = None,
                                  reference: Callable[[], torch.Tensor] | None = None
                                  ) -> dict | None:
    """Whether each projection of a decode step of `rows` rows whose `tilegraph tune` plan
    differs from the rule's runs the tuned plan or the rule's, chosen by timing the caller's
    whole step: a plan timed alone over rotated weights can lose beside the kernels that
    overlap it under PDL (decode_plan.set_step_rule). Nothing is timed for a step none of
    whose shapes were tuned, the default.

    `step` names the caller's step (its model's shape and rows), `projections` its
    projections by name (N, K), `reference` the step computed another way
    (time_step_candidates). Tried: the tuned plans, each given the rule's alone, all
    given it (time_step_candidates); projections of one shape go under the first one's
    name. The fastest stays recorded per shape and under the step key, so a later process
    only records it again; `progress` hears when the step is timed. Returns {"rule", "ms",
    "candidates": {names: ms}} when it timed, None where it did not."""
    shapes = _offered(projections, lambda n, k: decode_plan.tuned_differs(
        rows, n, k, dtype, positions.device))
    return _names_in_step_once(
        tuned_plans_in_step, step, "rule", shapes,
        lambda n, k, rule: decode_plan.set_step_rule(rows, n, k, dtype, rule),
        "between tuned and default projection plans", capture_step, positions, max_seq,
        tolerance, reference, progress=progress,
        timing=f"checking the tuned plans of {', '.join(shapes)} in the batch-{rows} step")


# Decode steps whose whole-slice tensor-core tiles were timed with their K loop compiled out
# (tune_one_step_in_step_once), by step key: {"one_step": names that leave it out}.
one_step_in_step = Tuner("linear-one-step-in-step", [{}])


def tune_one_step_in_step_once(step: tuple, rows: int,
                               projections: dict[str, tuple[int, int]], dtype: torch.dtype,
                               capture_step: Callable[[], object], positions: torch.Tensor,
                               max_seq: int, tolerance: float,
                               progress: Callable[[str], None] | None = None,
                               reference: Callable[[], torch.Tensor] | None = None
                               ) -> dict | None:
    """Whether each projection of a decode step of `rows` rows whose plan is a whole-slice
    tensor-core tile (every program reads its slice of K in one step) compiles its K loop
    out, chosen by timing the caller's whole step: the loop it never runs holds registers
    (_dot_rows.COMPILE_ONE_STEP), and whether freeing them pays depends on the kernels
    around the projection, not on its shape (notes/kernels.md, session 96).

    Arguments as tune_tuned_plans_in_step_once's (`projections` by name: (N, K)). Tried:
    none, each alone, all; the fastest is timed again beside none and kept only where it
    is ROWS_MARGIN faster both times. Recorded per shape and rows (decode_plan.set_one_step)
    and under the step key, so a later process times nothing. Returns {"one_step", "ms",
    "candidates": {names: ms}} when it timed, None where it did not."""
    def whole_slices(n: int, k: int) -> bool:
        chosen = decode_plan.plan(rows, n, k, dtype, positions.device, fused=True)
        return chosen.kind == "dot" and one_step_a_slice(k, chosen.config)
    shapes = _offered(projections, whole_slices)
    return _names_in_step_once(
        one_step_in_step, step, "one_step", shapes,
        lambda n, k, out: decode_plan.set_one_step(rows, n, k, dtype, out),
        "where tensor-core tiles leave their K loop out", capture_step, positions, max_seq,
        tolerance, reference, margin=ROWS_MARGIN, progress=progress,
        timing=f"timing the K loop of {', '.join(shapes)} left out in the batch-{rows} step")


# How far from the first candidate's output another candidate's may be, in multiples of the
# first's distance from the step computed another way (time_step_candidates' `reference`):
# two steps each within rounding of the true result are within twice it of each other. On a
# random-weight TinyLlama in bf16 every attention launch was 3.4-3.7e-2 from the plain step,
# and launches of other tile lengths 2.4e-2 from each other, beyond MODEL_TOLERANCES' 2e-2,
# so the tuner never tried them (H200, notes/models.md, session 71). A first candidate more
# than MAX_ROUNDING tolerances from the reference is not off by rounding: the check keeps to
# the tolerance then.
ROUNDING_MARGIN = 2.0
MAX_ROUNDING = 5.0


def time_step_candidates(count: int, apply: Callable[[int], None],
                         capture_step: Callable[[], object], positions: torch.Tensor,
                         max_seq: int, tolerance: float, also_at: Sequence[int] = (),
                         shortest: int = 0,
                         reference: Callable[[], torch.Tensor] | None = None,
                         run_step: Callable[[], object] | None = None
                         ) -> dict[int, float]:
    """ms a step with each of `count` candidates, by index: `apply(i)` sets candidate i up,
    `capture_step()` captures the caller's step anew (a Graph), whose replays are timed with
    `positions`, its static positions, at a short position, at those in `also_at` and at
    max_seq - 1 (each at least `shortest`), and the sum kept. Left out: a candidate that
    does not compile (more shared memory than this GPU has) and one whose output departs
    from the first's by more than `tolerance` (relative): never pick a candidate that
    changes the step's result. `reference()`, where given, computes the step's output
    another way (the plain PyTorch step, at the static inputs and the state the first
    candidate's replays left): the check then allows the rounding it shows, ROUNDING_MARGIN
    times the first's distance from it (where that is at most MAX_ROUNDING tolerances).
    `run_step()`, where given, runs the caller's step eagerly: once a candidate, first, its
    projections compiled but not run (_launch.compiling_only), all side by side, so that no
    candidate's projection kernels compile one after another inside the captures."""
    from .bench.timing import measure

    if run_step is not None:
        def compile_candidate(i: int) -> None:
            apply(i)
            with compiling_only():
                run_step()
        compile_side_by_side(compile_candidate, list(range(count)))
    times, first, allowed = {}, None, tolerance
    for i in range(count):
        apply(i)
        try:
            graph = capture_step()
        except triton.runtime.errors.OutOfResources:
            continue
        ms = 0.0
        timed_at = (255, *also_at, max_seq - 1)
        for position in dict.fromkeys(min(max(p, shortest), max_seq - 1) for p in timed_at):
            positions.fill_(position)
            ms += measure(graph.replay, warmup_ms=5, rep_ms=20, flush_l2=False).median
        output = graph.outputs.clone()
        del graph
        if first is None:
            first = output
            rounding = _distance(output, reference)
            if rounding <= MAX_ROUNDING * tolerance:
                allowed = max(tolerance, ROUNDING_MARGIN * rounding)
        elif not rel_error(output, first) <= allowed:
            continue
        times[i] = ms
    return times


def _distance(output: torch.Tensor, reference: Callable[[], torch.Tensor] | None) -> float:
    """rel_error of a step's output from `reference()`; inf where there is none, or where it
    does not fit in memory (a plain step repeats every kv head of its cache for its q heads)."""
    if reference is None:
        return math.inf
    try:
        return rel_error(output, reference())
    except torch.OutOfMemoryError:
        return math.inf
