"""Milliseconds a token of tg.Generator on named Llama-family shapes, its decode steps tuned
as a user's first Generator tunes them: one line a model, for timing two trees against each
other in one call.

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/time_generator.py new \
        qwen2-0.5b,llama3.2-3b [PROMPT [MAX_SEQ [BATCH [VARIANTS]]]]

Random weights, bf16, batch 1 (or the fifth argument's, one prompt a sequence), a prompt of
128 tokens (or the third argument's) and 256 new ones (greedy) in a cache of 2048 positions
(or the fourth argument's): the milliseconds of a decode step (all sequences), the median of
three generate() calls after one to warm up; after the time, the build's seconds, the one-row
projections' rows a program the step chose (where the tree chooses them) and the attention
launch chosen for each context band. Shapes: tilegraph's named ones and time_steps.OFF_LIST's.
Give each run its own TILEGRAPH_CACHE_DIR, so each tree tunes for itself; or, where only
kernels changed, one for all runs of a model and batch, so the first run tunes and the others
replay its choices (the tuners' own spread is then out of the comparison; run the first tree
again last to see the drift; session 120). VARIANTS, a comma list, each timed in turn in the
same process (later ones reuse the choices the first made):
"bands" (the default, tg.Generator as it is), "one-band" (every length replayed from one
band's graphs) and "strict-check" (bands, the step tuner checking each candidate against the
first by MODEL_TOLERANCES alone, as before session 72; attention's choices, alone and in the
step, made anew, and the next variant's made anew again) and "no-alone" (bands, attention's
launch not timed alone first: each batch size's longest band starts its step candidates from
the rule; the same as "bands" since session 77, when tg.Generator stopped timing it alone) and
"decode-start" (bands, each greedy step starting with Llama.decode's decode_inputs kernel,
as before session 82, rather than from the embeddings the step before wrote) and "no-l2"
(bands, the output projection prefetching none of gate/up's weights into L2, as before
session 92: Generator._tune_l2_ahead not run) and "equal-split" (bands, every split-K plan
cutting K into slices of equal width, as before session 93: _dot_rows.DEAL_EVENLY off) and
"one-step" (bands, the tensor-core kernel's K loop compiled out where every slice is one
step: _dot_rows.COMPILE_ONE_STEP on) and "one-tile" (bands, the GEMV split tile's K loop
compiled out where the row fits one tile: _matvec.COMPILE_ONE_TILE on) and "preloaded-runs"
(bands, attention's run loop compiled out where every run fits its preloaded tiles:
decode_attention.COMPILE_PRELOADED_RUNS on) and "loops-out" (all three) and "loop-kept"
(bands, every whole-slice tile keeping its K loop where the step tuner chose to leave it out,
as before session 96: decode_plan.runs_one_step read as False) and "norm-no-pdl" (bands,
tg.rms_norm launched without programmatic dependent launch, as before session 116: Gemma's
norms after attention and the MLP) and "norms-apart" (bands, Gemma's normed outputs added to
the stream by tg.rms_norm's kernel, not in the next projection's prologue: as before session
116's llama.ADD_NORMED_IN_PROLOGUE) and "head-norms-apart" (bands, Qwen3's and Gemma 3's
head norms in tg.rotary_qkv's kernel after the one-row q|k|v projection, as before session
117's linear_qkv.HEAD_NORM_IN_EPILOGUE) and "sum-norms-torch" (bands, OPT 350M's norms after
the residual adds by PyTorch's LayerNorm, not kernels/layer_norm.py's: session 129's
llama.SUM_NORM_KERNEL off).
Each part of the build is printed as it starts, with the seconds since the start.
"""

import ast
import statistics
import sys
import time

import torch
from time_steps import OFF_LIST

import tilegraph as tg
from tilegraph import generate, tune
from tilegraph.kernels import _dot_rows, _matvec, decode_plan, linear_qkv, rms_norm
from tilegraph.kernels import decode_attention as attention
from tilegraph.kernels.greedy import greedy_step
from tilegraph.models import llama
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

ATTENTION_KEYS = ("HEAD_BLOCKS", "SPLITS", "BLOCK_T", "BLOCK_G", "MERGE_RUNS", "PRELOAD",
                  "PRELOAD_TILES", "num_stages", "num_warps", "RUN_TILES")


def report_attention_choices() -> None:
    """Print each in-step attention choice's timed candidates (ms summed over the positions
    timed), as the Generator makes it, and the launch timed alone (us at max_seq)."""
    alone = tune.tune_attention

    def reported_alone(*args, **kwargs):
        result = alone(*args, **kwargs)
        picked = tuple(result["config"].get(k) for k in ATTENTION_KEYS)
        print(f"  attention alone, batch {args[0]}, max_seq {args[4]}: {picked} "
              f"{result['us']:.2f} us of {len(result['candidates'])} timed", flush=True)
        return result
    tune.tune_attention = reported_alone
    choose = generate.tune_attention_in_step_once

    def reported(*args, **kwargs):
        result = choose(*args, **kwargs)
        if result is not None:
            shown = {tuple(ast.literal_eval(config).get(k) for k in ATTENTION_KEYS): round(ms, 4)
                     for config, ms in result["candidates"].items()}
            print(f"  attention in the step, max_seq {args[4]}: {shown}", flush=True)
        return result
    generate.tune_attention_in_step_once = reported
    time_candidates = tune.time_step_candidates

    def counted(count, *args, **kwargs):   # how many passed the check
        times = time_candidates(count, *args, **kwargs)
        print(f"  step timed with {len(times)} of {count} candidates: "
              f"{ {i: round(ms, 4) for i, ms in times.items()} }", flush=True)
        return times
    tune.time_step_candidates = counted


def report_projection_choices() -> None:
    """Print the batch-1 step's projection candidates, ms summed over the positions timed
    (session 90: was a small-tile launch close where it was not taken?)."""
    choose = generate.tune_gemv_rows_in_step_once

    def reported(*args, **kwargs):
        result = choose(*args, **kwargs)
        if result is not None:
            shown = {name: round(ms, 4) for name, ms in result["candidates"].items()}
            print(f"  projections in the step: {shown}", flush=True)
        return result
    generate.tune_gemv_rows_in_step_once = reported


def forget_step_choices() -> None:
    """The choices tg.Generator makes (attention's launch alone and the in-step ones) made so
    far in this process, forgotten (the disk's as well): the next Generator makes them anew."""
    for store in (attention.tuned, tune.attention_in_step, tune.gemv_rows_in_step,
                  tune.release_in_step, tune.tuned_plans_in_step, tune.l2_ahead_in_step,
                  tune.one_step_in_step):
        store._memo, store._disk_loaded = {}, True


def decode_start_step(self, tokens, positions, hidden, lengths, cache):
    """Generator._greedy_step as before session 82: the step embeds its own tokens."""
    logits = self.model.decode(tokens, positions, cache)
    greedy_step(logits, positions, self.cache.slots[:tokens.shape[0]], self._history,
                tokens_out=tokens, positions_out=positions)
    return tokens, positions, logits


def main() -> None:
    report_attention_choices()
    report_projection_choices()
    tag, names = sys.argv[1], sys.argv[2]
    prompt_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 128
    max_seq = int(sys.argv[4]) if len(sys.argv) > 4 else 2048
    batch = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    variants = sys.argv[6].split(",") if len(sys.argv) > 6 else ["bands"]
    for name, variant in ((n, v) for n in names.split(",") for v in variants):
        base, overrides = OFF_LIST.get(name, (name, {}))
        c = LlamaConfig.from_hf(hf_config(base, **overrides))
        torch.manual_seed(0)
        model = Llama(c, dtype=torch.bfloat16, device="cuda")
        strict = variant == "strict-check"
        if strict:   # a first candidate's distance from the plain step allows no more
            forget_step_choices()
            tune.MAX_ROUNDING = 0.0
        bands = getattr(generate, "context_bands", None)
        if variant == "one-band" and bands is not None:  # every length in one band's graphs
            generate.context_bands = lambda max_seq, head_dim: (max_seq,)
        tune_alone = generate.tune_attention_once
        if variant == "no-alone":
            generate.tune_attention_once = lambda *args: None
        tune_l2_ahead = getattr(generate.Generator, "_tune_l2_ahead", None)
        if variant == "no-l2":
            generate.Generator._tune_l2_ahead = lambda self, *args: None
        _dot_rows.DEAL_EVENLY = variant != "equal-split"
        _dot_rows.COMPILE_ONE_STEP = variant in ("one-step", "loops-out")
        _matvec.COMPILE_ONE_TILE = variant in ("one-tile", "loops-out")
        attention.COMPILE_PRELOADED_RUNS = variant in ("preloaded-runs", "loops-out")
        norm_pdl = getattr(rms_norm, "PDL_ENABLED", None)  # trees before session 116: none
        if variant == "norm-no-pdl" and norm_pdl is not None:
            rms_norm.PDL_ENABLED = False
        in_prologue = getattr(llama, "ADD_NORMED_IN_PROLOGUE", None)  # before s116: none
        if variant == "norms-apart" and in_prologue is not None:
            llama.ADD_NORMED_IN_PROLOGUE = False
        head_norms = getattr(linear_qkv, "HEAD_NORM_IN_EPILOGUE", None)  # before s117: none
        if variant == "head-norms-apart" and head_norms is not None:
            linear_qkv.HEAD_NORM_IN_EPILOGUE = False
        sum_norm_kernel = getattr(llama, "SUM_NORM_KERNEL", None)  # before s129: none
        if variant == "sum-norms-torch" and sum_norm_kernel is not None:
            llama.SUM_NORM_KERNEL = False
        runs_one_step = getattr(decode_plan, "runs_one_step", None)  # trees before s96: none
        if variant == "loop-kept" and runs_one_step is not None:
            decode_plan.runs_one_step = lambda *args: False
        greedy = generate.Generator._greedy_step
        if variant == "decode-start":
            generate.Generator._greedy_step = decode_start_step
        start = time.perf_counter()
        generator = tg.Generator(
            model, max_batch=batch, max_seq=max_seq, sizes=(batch,),
            progress=lambda what, t0=start: print(f"  {time.perf_counter() - t0:6.1f} s: "
                                                  f"{what}", flush=True))
        build = time.perf_counter() - start
        generate.tune_attention_once = tune_alone
        if tune_l2_ahead is not None:
            generate.Generator._tune_l2_ahead = tune_l2_ahead
        if bands is not None:
            generate.context_bands = bands
        prompts = torch.randint(0, c.vocab_size, (batch, prompt_tokens)).tolist()
        times = []
        for _ in range(4):
            generator.generate(prompts, 256)
            times.append(generator.stats.decode_ms_per_token)
        generate.Generator._greedy_step = greedy
        if runs_one_step is not None:
            decode_plan.runs_one_step = runs_one_step
        _dot_rows.DEAL_EVENLY = True
        _dot_rows.COMPILE_ONE_STEP = False
        _matvec.COMPILE_ONE_TILE = False
        attention.COMPILE_PRELOADED_RUNS = False
        if norm_pdl is not None:
            rms_norm.PDL_ENABLED = norm_pdl
        if in_prologue is not None:
            llama.ADD_NORMED_IN_PROLOGUE = in_prologue
        if head_norms is not None:
            linear_qkv.HEAD_NORM_IN_EPILOGUE = head_norms
        if sum_norm_kernel is not None:
            llama.SUM_NORM_KERNEL = sum_norm_kernel
        store = getattr(tune, "gemv_rows_in_step", None)  # trees before session 57: none
        step = (c.n_heads, c.n_kv_heads, c.head_dim, max_seq, str(model.dtype), c.dim,
                c.ffn_dim, c.n_layers, c.vocab_size)
        chosen = store.lookup(step) if store is not None else "-"
        launches = {band: attention.tuned.lookup(attention.attention_key(
            batch, c.n_kv_heads, c.n_heads // c.n_kv_heads, c.head_dim, band,
            model.dtype)) or {} for band in getattr(generator, "bands", (max_seq,))}
        plans_store = getattr(tune, "tuned_plans_in_step", None)  # trees before session 67
        rule = plans_store.lookup((batch, *step)) if plans_store else "-"
        one_step_store = getattr(tune, "one_step_in_step", None)
        loop_out = one_step_store.lookup((batch, *step)) if one_step_store else "-"
        shown = {band: {k: cfg.get(k) for k in ATTENTION_KEYS} for band, cfg in launches.items()}
        print(f"{tag} {variant} {name} b{batch} {statistics.median(times[1:]):.4f} ms a token "
              f"(build {build:.1f} s; rows chosen {chosen}; tuned plans checked in the step "
              f"{rule}; K loop left out {loop_out}; attention by band {shown}; L2 prefetch by band "
              f"{getattr(model, 'l2_ahead_bytes', '-')})", flush=True)
        if strict:   # after the report of what it chose
            forget_step_choices()
            tune.MAX_ROUNDING = 5.0
        del generator, model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
