"""Does the process that tunes decode slower than a later one that only reads the choices?
One mode a process: a Qwen2-0.5B-shaped model (random weights, bf16), something done
first, then a tg.Generator (batch 1, max_seq 2048) and three generate() calls of 256
tokens after a 128-token prompt, ms a token printed (and nvidia-smi's clocks, temperature
and power after each).

    PYTHONPATH=src:research TILEGRAPH_CACHE_DIR=<dir> python3 research/probe_tuning_process.py MODE

Modes (run each as its own process; a fresh <dir> makes the Generator tune):
  plain             nothing first (cold with a fresh <dir>, warm with a filled one)
  compile-variants  every kernel variant the tuning launches, run once eagerly
  captures          six captures of the step, dropped
  heat              12 s of 8192^3 bf16 matmuls; heat-idle: then 15 s idle
  attention-alone   tune.tune_attention for the step's attention shape
  release-in-step   the step's release points timed again (its choice dropped)
  attention-in-step attention's launch timed again in the step (its choice dropped)
  both-in-step      both of the above (the choices alone kept)
  attention-in-step-first / -tile / -rows  attention's in-step choice timed over the
                    launch it has alone only, or with only the 256-position tile or only
                    the 64-row q tile beside it
  retime-KERNEL[+KERNEL]  the choices of those tuners dropped (e.g. gemm-cold, the prefill's
                    tiles; linear-decode-plain, plain projections against cuBLAS), so they
                    are timed again; retime-every: every tuner's. With GEMM_KEEP=tiles,
                    cublas or tma, the prefill's tiles are timed against only that kind
                    (beside the first candidate); a mode ending in -regen builds the
                    Generator again after the first generate()
  After the Generator is built, before generate():
  big-graph-global  autotune's timing of 10 ms of one-element adds (a graph of ~2000
                    nodes, captured in global error mode); big-graph-thread: the same
                    captured in thread_local mode; big-graph-tg[-N]: 2000 (N) adds in a
                    tg.capture
  sync-debug        CUDA's sync debug mode set to error and back around one add
  gen-twice         a second Generator built after the first; each timed in turn
  copies            ~150 MB of copies of a 1 MB weight made, dropped and the cache emptied
  collect           gc.collect() after the Generator is built; gc-off: and gc disabled
  empty-cache       torch.cuda.empty_cache() after it, then a second Generator

Found (session 46, notes/graphs.md): graphs captured before a tuner's search replay slower,
and the prefill's first products search. Since then tg.Generator captures its graphs again
after a search, so the retime modes show the penalty only on an older tree (002074c).
"""

import gc
import os
import subprocess
import sys
import time

import torch

import tilegraph as tg
from tilegraph import generate, tune
from tilegraph._runtime import side_stream
from tilegraph.graph import capture
from tilegraph.kernels import autotune, decode_plan, matmul
from tilegraph.kernels import decode_attention as attention
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

DTYPE = torch.bfloat16
MAX_SEQ = 2048


def gpu_state() -> str:
    query = "clocks.sm,clocks.mem,temperature.gpu,power.draw,clocks_throttle_reasons.active"
    return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.strip()


def before_generator(mode: str, model: Llama, c: LlamaConfig) -> None:
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.zeros_like(tokens)
    group = c.n_heads // c.n_kv_heads
    if mode == "compile-variants":
        cache = model.new_cache(1, MAX_SEQ)
        layer = model.layers[0]
        for late in (True, False):
            for shape in (tuple(layer.wo.shape), tuple(layer.w_gate_up.shape)):
                decode_plan.set_late_release(*shape, DTYPE, late)
            model.decode(tokens, positions, cache)
        key = attention.attention_key(1, c.n_kv_heads, group, c.head_dim, MAX_SEQ, DTYPE)
        saved = attention.tuned.lookup(key)
        for config in attention.step_candidates(1, c.n_kv_heads, group, c.head_dim, MAX_SEQ,
                                                132, saved):
            attention.tuned.record(key, config)
            model.decode(tokens, positions, cache)
        attention.tuned.record(key, saved)  # the Generator records the step's choices again
    elif mode == "captures":
        cache = model.new_cache(1, MAX_SEQ)
        for _ in range(6):
            graph = capture(model.decode, tokens, positions, cache, restore_state=False)
            graph.replay()
            del graph
    elif mode.startswith("heat"):
        a = torch.randn(8192, 8192, device="cuda", dtype=DTYPE)
        start = time.time()
        while time.time() - start < 12:
            for _ in range(20):
                a @ a
            torch.cuda.synchronize()
        print(f"  after heat: {gpu_state()}", flush=True)
        if mode == "heat-idle":
            time.sleep(15)
            print(f"  after idle: {gpu_state()}", flush=True)
    elif mode == "attention-alone":
        timed = tune.tune_attention(1, c.n_heads, c.n_kv_heads, c.head_dim, MAX_SEQ, DTYPE)
        print(f"  attention alone: {timed['us']:.2f} us", flush=True)
    if mode.startswith("retime-"):
        names = mode.removeprefix("retime-").removesuffix("-regen").split("+")
        for store in autotune._TUNERS:
            if names == ["every"] or store.kernel in names:
                store._load_disk()
                print(f"  dropped {len(store._memo)} choices of {store.kernel}", flush=True)
                store._memo.clear()
    keep = os.environ.get("GEMM_KEEP")
    if keep:
        pick = matmul._tuner.pick

        def kind(config: dict) -> str:
            return "cublas" if config.get("CUBLAS") else "tma" if config.get("TMA") else "tiles"

        def pick_some(key, run, candidates, pick=pick):
            kept = [c for i, c in enumerate(candidates) if i == 0 or kind(c) == keep]
            print(f"  {key}: {len(kept)} of {len(candidates)} candidates", flush=True)
            return pick(key, run, kept)
        matmul._tuner.pick = pick_some
    parts = {"release-in-step": ("release",), "attention-in-step": ("attention",),
             "both-in-step": ("release", "attention")}
    if mode.startswith("attention-in-step-"):
        parts[mode] = ("attention",)
        keep = {"first": 1, "tile": 2, "rows": 2}[mode.removeprefix("attention-in-step-")]
        variant = {"first": None, "tile": "BLOCK_T", "rows": "BLOCK_G"}[
            mode.removeprefix("attention-in-step-")]
        candidates = attention.step_candidates

        def some_candidates(*args, candidates=candidates):
            every = candidates(*args)
            kept = [every[0]] + [c for c in every[1:]
                                 if variant and c[variant] != every[0][variant]]
            print(f"  candidates: {kept[:keep]}", flush=True)
            return kept[:keep]
        attention.step_candidates = some_candidates
    for part in parts.get(mode, ()):  # its stored choice dropped: the Generator times it again
        store = getattr(tune, f"{part}_in_step")
        store._load_disk()
        store._memo.clear()
        name = f"tune_{part}_in_step_once"
        choose = getattr(generate, name)
        setattr(generate, name, lambda *a, choose=choose, part=part, **k: print(
            f"  {part} in step: {choose(*a, **k)}", flush=True))


def after_generator(mode: str) -> None:
    mode = mode.removesuffix("-regen")
    x = torch.zeros(1, device="cuda")
    if mode == "big-graph-global":
        print(f"  add: {autotune._graph_replay_ms(lambda: x.add_(1), 10) * 1e3:.2f} us",
              flush=True)
    elif mode == "big-graph-thread":
        stream = side_stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            x.add_(1)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
                for _ in range(2000):
                    x.add_(1)
            for _ in range(10):
                graph.replay()
        torch.cuda.synchronize()
    elif mode.startswith("big-graph-tg"):
        nodes = int(mode.removeprefix("big-graph-tg").lstrip("-") or 2000)
        graph = capture(lambda: [x.add_(1) for _ in range(nodes)][-1], restore_state=False)
        for _ in range(10):
            graph.replay()
        torch.cuda.synchronize()
    elif mode == "sync-debug":
        torch.cuda.set_sync_debug_mode("error")
        x.add_(1)
        torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()
    elif mode == "copies":
        weight = torch.randn(1024, 512, device="cuda", dtype=DTYPE)
        copies = autotune.RotatedCopies((weight,))
        copies()
        copies.release()
        torch.cuda.empty_cache()


def main() -> None:
    mode = sys.argv[1]
    c = LlamaConfig.from_hf(hf_config("qwen2-0.5b"))
    torch.manual_seed(0)
    model = Llama(c, dtype=DTYPE, device="cuda")
    prompt = torch.randint(0, c.vocab_size, (1, 128)).tolist()
    before_generator(mode, model, c)
    gen = tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
    if mode in ("collect", "gc-off"):
        gc.collect()
        if mode == "gc-off":
            gc.disable()
    if mode == "empty-cache":
        torch.cuda.empty_cache()
        gen = None
        gen = tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
    after_generator(mode)
    if mode == "gen-twice":
        later = tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
        for name, g in (("first", gen), ("later", later), ("first", gen), ("later", later)):
            g.generate(prompt, 256)
            print(f"  {name} Generator: {g.stats.decode_ms_per_token:.4f} ms a token", flush=True)
    per_token = []
    for call in range(3):
        if call == 1 and mode.endswith("-regen"):
            gen = tg.Generator(model, max_batch=1, max_seq=MAX_SEQ, sizes=(1,))
        gen.generate(prompt, 256)
        per_token.append(gen.stats.decode_ms_per_token)
        print(f"  generated: {gpu_state()}", flush=True)
    print(f"{mode}: ms a token {min(per_token):.4f} all "
          f"{[round(ms, 4) for ms in per_token]} build {gen.build_seconds}", flush=True)
    print(f"  prefill tiles: {matmul._tuner.results()}", flush=True)


if __name__ == "__main__":
    main()
