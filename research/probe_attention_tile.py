"""Decode steps of whole models with attention's launch forced to other shapes: a larger
tile (a short sequence's one run in fewer iterations of the online softmax, each of which
ends in cross-warp reductions and a layout change of the probabilities), a q tile of 64
rows (wgmma: reductions within a warp, probabilities kept in registers), or short sequences
split in runs of one tile, or the runs merged by a kernel of their own (apart: the rule of
tg.decode_attention alone, a sixth kernel a layer), or not merged at all (`/none`: wrong
results, timed as a bound on what merging the runs elsewhere could save). The attention
grid times attention alone; this times it in the step, beside the kernels that run with it
under PDL.

    PYTHONPATH=src:research python3 research/probe_attention_tile.py qwen2-0.5b:1@255,tinyllama:8
    ... --only rule,split   (those VARIANTS only)
    ... --profile           (also the exposed time of each kernel by its place in a layer)

Random weights, bf16, the rule's plans (give the run a fresh TILEGRAPH_CACHE_DIR), a cache of
2048 positions; each point timed with each of VARIANTS, two rounds, ms a step
(probe_weight_left.step_ms). Names and batch@position as time_steps.py's (its OFF_LIST too).
Measured and dropped from VARIANTS (results/2026-11-26-session43/): tiles of 512 (1 stage),
10-17% slower everywhere; the run's first three tiles put in L2 before the wait rather than
its first, no change; tiles of 256 with 3 stages, no better than 2; 4 stages.
"""

import sys

import torch
from probe_weight_left import step_ms
from profile_llama_decode import replay_timeline
from time_steps import OFF_LIST

import tilegraph as tg
import tilegraph.kernels.decode_attention as attention
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

RULE = attention.attention_config
VARIANTS = {"rule": {}, "bg64": {"BLOCK_G": 64}, "bg64/t64": {"BLOCK_G": 64, "tile": 64},
            "tile256/2": {"tile": 256, "stages": 2}, "split": {"ONE_RUN_TILES": 1},
            "apart": {"merge_apart": True},
            # the short band's launches (step_candidates): two tiles preloaded as one; runs
            # of one tile, each preloaded, merged in the kernel, apart, or not at all (no_merge:
            # a bound on what a merge elsewhere, in the output projection, could save)
            "pre2": {"preload": 2, "stages": 2, "warps": 8},
            "runs1": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@"},
            "runs1/apart": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@",
                            "merge_apart": True},
            "runs1/none": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@",
                           "merge_apart": True, "no_merge": True},
            "apart/none": {"merge_apart": True, "no_merge": True},
            # runs of two tiles (the Generator's pick past 256 positions for TinyLlama,
            # session 87); the /flag variants merge by the last run from flagged words, with
            # research/attention_flagged_merge.diff applied (lost, session 87)
            "runs2": {"preload": 2, "stages": 2, "warps": 8, "run_tiles": 2, "longest": "@"},
            "runs2/flag": {"preload": 2, "stages": 2, "warps": 8, "run_tiles": 2,
                           "longest": "@", "merge_flagged": True},
            "runs1/flag": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@",
                           "merge_flagged": True},
            # the output projection released once a run has attended, not at the wait: with
            # research/attention_release_late.diff applied (lost, session 87)
            "pre2/late": {"preload": 2, "stages": 2, "warps": 8, "release_late": True},
            "runs1/late": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@",
                           "release_late": True},
            "runs2/late": {"preload": 2, "stages": 2, "warps": 8, "run_tiles": 2,
                           "longest": "@", "release_late": True},
            # the runs left for the output projection to merge (MERGE_OUT), up to
            # `out_splits` runs (attention.OUT_SPLITS): with research/merge_in_projection.diff
            # applied (lost, session 86)
            "runs1/out": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@",
                          "merge_out": True},
            "runs1/out4": {"preload": True, "stages": 2, "one_run_tiles": 1, "longest": "@",
                           "merge_out": True, "out_splits": 4},
            "runs2/out": {"preload": 2, "stages": 2, "warps": 8, "run_tiles": 2,
                          "longest": "@", "merge_out": True}}
if "--only" in sys.argv:  # --only rule,split
    VARIANTS = {k: VARIANTS[k] for k in sys.argv[sys.argv.index("--only") + 1].split(",")}
# attention_config's; the rest go to the launch
KNOBS = {"tile", "stages", "programs_per_sm", "merge_apart", "preload", "warps",
         "one_run_tiles", "longest", "run_tiles", "merge_out", "merge_flagged",
         "release_late"}
MERGE_APART_KERNEL = attention._merge_apart_kernel
OUT_SPLITS = getattr(attention, "OUT_SPLITS", None)  # merge_in_projection.diff's


class _NoKernel:
    """Stands for _merge_apart_kernel where a variant has no_merge: launches nothing."""

    def __getitem__(self, grid):
        return lambda *args, **kwargs: None

    def warmup(self, *args, **kwargs):
        return None


def patched(variant: dict, position: int):
    """attention_config with the variant's knobs ("@" for longest: the step's position + 1),
    and its launch constants added."""
    knobs = {k: (position + 1 if v == "@" else v) for k, v in variant.items() if k in KNOBS}
    extra = {k: v for k, v in variant.items()
             if k not in KNOBS and k not in ("no_merge", "out_splits")}
    if OUT_SPLITS is not None:
        attention.OUT_SPLITS = variant.get("out_splits", OUT_SPLITS)
    attention._merge_apart_kernel = (_NoKernel() if variant.get("no_merge")
                                     else MERGE_APART_KERNEL)
    return lambda *args, **kw: {**RULE(*args, **{**kw, **knobs}), **extra}


PROFILE = "--profile" in sys.argv  # also each variant's exposed time by place in a layer


def step_inputs(item: str):
    """(name, batch, position, model, cache, tokens, positions) of a point "name:batch@position"
    (time_steps.py's names, OFF_LIST's too): a random bf16 model, a cache of 2048 positions."""
    name, batch = item.split(":")
    batch, _, position = batch.partition("@")
    batch, position = int(batch), int(position or 255)
    base, overrides = OFF_LIST.get(name, (name, {}))
    c = LlamaConfig.from_hf(hf_config(base, **overrides))
    torch.manual_seed(0)
    model = Llama(c, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(batch, 2048)
    tokens = torch.randint(0, c.vocab_size, (batch,), device="cuda")
    positions = torch.full((batch,), position, device="cuda")
    return name, batch, position, model, cache, tokens, positions


def main() -> None:
    for item in sys.argv[1].split(","):
        name, batch, position, model, cache, tokens, positions = step_inputs(item)
        c = model.config
        line = []
        for _ in range(2):
            for label, variant in VARIANTS.items():
                attention.attention_config = patched(variant, position)
                try:
                    line.append(f"{label} {step_ms(model, tokens, positions, cache):.4f}")
                except Exception as error:  # noqa: BLE001 (a probe: report and go on)
                    line.append(f"{label} failed: {type(error).__name__}")
                finally:
                    attention.attention_config = RULE
                    attention._merge_apart_kernel = MERGE_APART_KERNEL
        print(f"{name} b{batch}@{position}: " + " | ".join(line), flush=True)
        if PROFILE:
            for label in VARIANTS:
                attention.attention_config = patched(VARIANTS[label], position)
                print(f"  {label}:")
                replay_timeline(tg.capture(model.decode, tokens, positions, cache), c.n_layers)
                attention.attention_config = RULE
                attention._merge_apart_kernel = MERGE_APART_KERNEL
        del model, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
