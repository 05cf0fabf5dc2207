"""tg.Generator's batch-1 step with its one-row projections launched in named ways, in one
process: what tune.tune_gemv_rows_in_step_once's timing (positions 255 + max_seq - 1) says of
each, and the tokens Generator.generate decodes with each (256 after a 128-token prompt).

    PYTHONPATH=src:research python3 research/probe_band_in_step.py qwen2-0.5b \
        "-" "gate/up=other" "down=1" "gate/up=other,down=1"
    PYTHONPATH=src:research python3 research/probe_band_in_step.py qwen2-0.5b @128,255,383,2047 \
        "-" "down=1"

Each variant after the model's name: "-" for the plans' own, else projection=rows (or
"other": decode_plan.OTHER_LAUNCH) pairs. Random weights, bf16, max_seq 2048. The first
Generator tunes as usual (its choice printed), then the step-rows tuner is held off and
every variant gets a Generator of its own, in three rounds; medians printed. Given
positions (@...), each variant's step is instead timed at each of them alone (the tuner sums
255 and max_seq - 1), with no generate().
"""

import statistics
import sys

import torch
from time_steps import OFF_LIST

import tilegraph as tg
from tilegraph import generate, tune
from tilegraph.bench.timing import measure
from tilegraph.kernels import decode_plan
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

DTYPE = torch.bfloat16
MAX_SEQ = 2048


def parse(variant: str) -> dict:
    if variant == "-":
        return {}
    rows = {}
    for item in variant.split(","):
        name, value = item.split("=")
        rows[name] = decode_plan.OTHER_LAUNCH if value == "other" else int(value)
    return rows


def step_at_positions(model, variants: list[str], at: list[int], apply) -> None:
    """Three rounds of each variant's step (a graph captured anew), timed at each position
    as tune.time_step_candidates times one (bench.measure of replays, L2 not flushed);
    medians."""
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.zeros_like(tokens)
    cache = model.new_cache(1, MAX_SEQ)
    results = {}
    for _ in range(3):
        for variant in variants:
            apply(parse(variant))
            graph = tg.capture(model.decode, tokens, positions, cache, restore_state=False)
            for position in at:
                positions.fill_(position)
                ms = measure(graph.replay, warmup_ms=5, rep_ms=20, flush_l2=False).median
                results.setdefault((variant, position), []).append(ms)
            del graph
    for variant in variants:
        print(f"  {variant:28s} " + " | ".join(
            f"@{p} {statistics.median(results[variant, p]) * 1e3:.2f} us" for p in at),
            flush=True)


def main() -> None:
    name, variants = sys.argv[1], sys.argv[2:]
    at = []
    if variants[0].startswith("@"):
        at, variants = [int(p) for p in variants[0][1:].split(",")], variants[1:]
    base, overrides = OFF_LIST.get(name, (name, {}))
    c = LlamaConfig.from_hf(hf_config(base, **overrides))
    torch.manual_seed(0)
    model = Llama(c, dtype=DTYPE, device="cuda")
    choose = generate.tune_gemv_rows_in_step_once
    chosen = []
    generate.tune_gemv_rows_in_step_once = (
        lambda *a, **k: chosen.append(choose(*a, **k)))
    tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
    print(f"{name}: the tuner's choice {chosen[0]}", flush=True)
    generate.tune_gemv_rows_in_step_once = lambda *a, **k: None
    layer = model.layers[0]
    shapes = {"q|k|v": tuple(layer.wqkv.shape), "output": tuple(layer.wo.shape),
              "gate/up": tuple(layer.w_gate_up.shape), "down": tuple(layer.w_down.shape)}
    for what, (n, k) in shapes.items():
        own = decode_plan.plan(1, n, k, DTYPE, torch.device("cuda"))
        print(f"  {what} {n}x{k}: {own.kind} {own.config}", flush=True)

    def apply(rows: dict) -> None:
        for what, (n, k) in shapes.items():
            decode_plan.set_step_rows(n, k, DTYPE, rows.get(what))

    if at:
        step_at_positions(model, variants, at, apply)
        return
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.zeros_like(tokens)
    prompt = torch.randint(0, c.vocab_size, (1, 128)).tolist()
    results = {}
    for _ in range(3):
        cache = model.new_cache(1, MAX_SEQ)
        step = tune.time_step_candidates(
            len(variants), lambda i: apply(parse(variants[i])),
            lambda cache=cache: tg.capture(model.decode, tokens, positions, cache,
                                           restore_state=False),
            positions, MAX_SEQ, tolerance=1.0)
        for i, variant in enumerate(variants):
            apply(parse(variant))
            gen = tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
            per_token = []
            for _ in range(2):
                gen.generate(prompt, 256)
                per_token.append(gen.stats.decode_ms_per_token)
            results.setdefault(variant, []).append((min(per_token), step.get(i, float("nan"))))
            del gen
    for variant, runs in results.items():
        print(f"{name} {variant:28s} generate {statistics.median(r[0] for r in runs):.4f} ms "
              f"(rounds {' '.join(f'{r[0]:.4f}' for r in runs)}) | step timing "
              f"{statistics.median(r[1] for r in runs):.4f} "
              f"({' '.join(f'{r[1]:.4f}' for r in runs)})", flush=True)


if __name__ == "__main__":
    main()
