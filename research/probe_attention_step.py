"""Attention's launch shape forced into a whole Llama decode step at a short context: what
the one-run path (a sequence of a few tiles read by one program a kv head) costs the step
with fewer or more warps, loads in flight and tile lengths.

    PYTHONPATH=src python3 research/probe_attention_step.py --model qwen2-0.5b --context 256
    ... --preload   # each run's first tile read before the wait, 2 or 3 stages deep
    ... --whole     # a short run read before the wait: one tile of twice the positions or two
    ... --context 160,256,384 --sweep   # each preload at several positions (one capture each)
                                        # (one tile, two, four: session 73)
    ... --context 160,256,320,384,768 --sweep --lanes   # positions in lanes (session 73;
                # needs research/attention_lanes.diff applied: slower everywhere, session 74)
    ... --context 160,320,384,1024,1800,2048 --sweep --runs   # two tiles preloaded in runs
                                                              # of two tiles past one run
    ... --context 160,320,1024,1800,2048 --sweep --blocks   # session 75: the runs of two
        # tiles with the q heads in more or fewer blocks, runs of one tile capped
    ... --context 160,320,1024 --sweep --new-rows   # session 81: the projection's new rows
        # read apart (needs research/attention_new_rows_apart.diff: slower nearly everywhere)

Each variant is recorded in tg.decode_attention's tuned store for the step's shape (as the
Generator's tuning would), the step is captured again and 300 replays timed; the rule's
config runs between variants, so drift shows. Prints ms a step.
"""

from __future__ import annotations

import argparse

import torch

import tilegraph as tg
from tilegraph.kernels import decode_attention as attention
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2-0.5b")
    parser.add_argument("--context", default="256", help="cached positions; a comma list "
                        "with --sweep")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--max-seq", type=int, default=2048)
    parser.add_argument("--quick", action="store_true", help="the 8-warp variants only")
    parser.add_argument("--preload", action="store_true", help="the first tile preloaded")
    parser.add_argument("--whole", action="store_true",
                        help="session 70: a short run preloaded as one tile of twice the "
                             "positions or as two tiles")
    parser.add_argument("--long-tile", action="store_true",
                        help="session 70: the preloaded tile of twice the positions, one run "
                             "of at most 1 or 2 of them")
    parser.add_argument("--lanes", action="store_true",
                        help="with --sweep, session 73's lead instead: each tile's positions in "
                             "lanes of their own softmax state, one a warp")
    parser.add_argument("--runs", action="store_true",
                        help="with --sweep, session 74's: two tiles' positions preloaded in "
                             "each run of two tiles, in 2 or 8 runs past one run")
    parser.add_argument("--blocks", action="store_true",
                        help="with --sweep, session 75's: the step candidates' runs of two "
                             "tiles with q heads in 1-8 blocks a kv head (at most the group), "
                             "and runs of "
                             "one tile capped, each built by attention_config")
    parser.add_argument("--new-rows", action="store_true",
                        help="with --sweep, session 81's: the projection's new rows read apart "
                             "after the wait, the preloaded tiles untouched")
    parser.add_argument("--sweep", action="store_true",
                        help="session 71: one tile or two tiles' positions preloaded, over 4 "
                             "or 8 warps, each captured once and timed at every --context")
    args = parser.parse_args()
    contexts = [int(c) for c in args.context.split(",")]
    args.context = contexts[0]
    config = LlamaConfig.from_hf(hf_config(args.model))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(args.batch, args.max_seq)
    tokens = torch.zeros(args.batch, dtype=torch.int64, device="cuda")
    positions = torch.full((args.batch,), args.context - 1, device="cuda")
    group = config.n_heads // config.n_kv_heads
    key = attention.attention_key(args.batch, config.n_kv_heads, group, config.head_dim,
                                  args.max_seq, torch.bfloat16)
    rule = attention.attention_config(args.batch, config.n_kv_heads, group, config.head_dim,
                                      args.max_seq, torch.cuda.get_device_properties(0)
                                      .multi_processor_count)

    def step_ms(changes: dict, at: list[int] | None = None) -> float | list[float]:
        attention.tuned.record(key, {**rule, **changes})
        graph = tg.capture(model.decode, tokens, positions, cache, restore_state=False)
        if at is not None:  # the same graph timed at each context
            return [replayed_ms(graph, context) for context in at]
        return replayed_ms(graph, args.context)

    def replayed_ms(graph, context: int) -> float:
        positions.fill_(context - 1)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(3):
            start.record()
            for _ in range(300):
                graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 300)
        return min(times)

    one_tile = ("preload, 2 stages", {"PRELOAD": True, "num_stages": 2})
    two_tiles = ("preload 2 tiles, 2 stages, 8 warps",
                 {"PRELOAD": True, "PRELOAD_TILES": 2, "num_stages": 2, "num_warps": 8})
    lanes = [("rule", {}), ("rule, a lane a warp", {"LANES": rule["num_warps"]}), one_tile,
             ("preload, 2 stages, 4 lanes", {"PRELOAD": True, "num_stages": 2, "LANES": 4}),
             two_tiles,
             ("preload 2 tiles, 2 stages, 8 warps, 8 lanes",
              {"PRELOAD": True, "PRELOAD_TILES": 2, "num_stages": 2, "num_warps": 8,
               "LANES": 8}),
             ("preload 4 tiles, 2 stages, 8 warps, 8 lanes",
              {"PRELOAD": True, "PRELOAD_TILES": 4, "num_stages": 2, "num_warps": 8,
               "LANES": 8}),
             ("rule", {})]

    def runs_of(splits: int, one_run: int, changes: dict) -> dict:
        # past one run of `one_run` tiles, `splits` runs of cdiv(tiles, splits) tiles each
        block = 1 << (splits - 1).bit_length()   # a power of two
        return {**changes, "ONE_RUN_TILES": one_run, "SPLITS": splits, "BLOCK_SPLITS": block,
                "MERGE_RUNS": min(block, rule["MERGE_RUNS"])}
    # session 74: past two tiles, runs of two tiles, each read before the wait in one round
    # (3 tiles: [0, 256) and the rest, merged), instead of one run's second round after it
    runs = [("rule", {}), one_tile, two_tiles,
            ("preload 2 tiles, 8 warps, 2 runs past 2 tiles",
             runs_of(2, 2, two_tiles[1])),
            ("preload 2 tiles, 8 warps, 8 runs past 2 tiles",
             runs_of(8, 2, two_tiles[1])),
            ("preload 2 tiles, 8 warps, 4 runs past 2 tiles",
             runs_of(4, 2, two_tiles[1])),
            ("preload, 2 stages, 3 runs past 1 tile", runs_of(3, 1, one_tile[1])),
            ("rule", {})]
    def built(**variant) -> dict:  # attention_config's launch, as a step candidate is
        return attention.attention_config(
            args.batch, config.n_kv_heads, group, config.head_dim, args.max_seq,
            torch.cuda.get_device_properties(0).multi_processor_count, **variant,
            **attention.device_facts(torch.bfloat16, torch.device("cuda")))
    two_runs = {"preload": 2, "stages": 2, "warps": 8, "run_tiles": 2}
    blocks = [("rule", {}),
              ("runs of 2 tiles, longest 384", built(**two_runs, longest=384)),
              ("runs of 2 tiles", built(**two_runs))]
    blocks += [(f"runs of 2 tiles, {n} head blocks", built(**two_runs, head_blocks=n))
               for n in (1, 2, 4, 8) if n <= group and n != rule["HEAD_BLOCKS"]]
    blocks += [("preload, runs of 1 tile, longest 384",
                runs_of(min(rule["SPLITS"], -(-384 // rule["BLOCK_T"])), 1, one_tile[1])),
               ("rule", {})]
    # session 81: the rows the q|k|v projection writes read apart after the wait (1), the
    # preloaded tiles left as they were loaded; (2) the same with the values read transposed.
    # Needs research/attention_new_rows_apart.diff applied (slower nearly everywhere, session 81).
    new_rows = [(f"{name}, new rows {n}", {**changes, "NEW_ROWS": n})
                for name, changes in (("runs of 2 tiles, longest 384",
                                       built(**two_runs, longest=384)),
                                      ("preload 2 tiles", two_tiles[1]), one_tile)
                for n in (0, 1, 2)] + [("rule", {})]
    if args.sweep:
        print(f"{args.model} b{args.batch} rule {rule}; ms a step at contexts {contexts}")
        chosen = (blocks if args.blocks else lanes if args.lanes else runs if args.runs
                  else new_rows if args.new_rows else None)
        for name, changes in chosen or [
                ("rule", {}), one_tile, two_tiles,
                ("preload 4 tiles, 2 stages, 8 warps",
                 {"PRELOAD": True, "PRELOAD_TILES": 4, "num_stages": 2, "num_warps": 8}),
                # session 73: two tiles' positions in a wgmma tile of 64 q rows (the softmax
                # reduced within a warp, fewer barriers a round), over 4 or 8 warps
                ("preload 2 tiles, 64 q rows, 4 warps",
                 {"PRELOAD": True, "PRELOAD_TILES": 2, "num_stages": 2, "BLOCK_G": 64}),
                ("preload 2 tiles, 64 q rows, 8 warps",
                 {"PRELOAD": True, "PRELOAD_TILES": 2, "num_stages": 2, "num_warps": 8,
                  "BLOCK_G": 64}),
                ("preload, 64 q rows, 4 warps",
                 {"PRELOAD": True, "num_stages": 2, "BLOCK_G": 64}),
                ("rule", {})]:
            print(f"  {name:36s} " + " ".join(f"{ms:.4f}" for ms in step_ms(changes, contexts)),
                  flush=True)
        return
    tiles = -(-args.context // rule["BLOCK_T"])
    print(f"{args.model} b{args.batch} position {args.context - 1} ({tiles} tiles of "
          f"{rule['BLOCK_T']}); rule {rule}")
    print(f"  {'rule':34s} {step_ms({}):.4f} ms")
    half = rule["BLOCK_T"] // 2
    quick = [("8 warps", {"num_warps": 8}),
             ("8 warps, one split", {"num_warps": 8, "SPLITS": 1, "BLOCK_SPLITS": 1})]
    preload = [("2 stages", {"num_stages": 2}),
               ("preload, 2 stages", {"PRELOAD": True, "num_stages": 2}),
               ("preload, 2 stages, runs of a tile",
                {"PRELOAD": True, "num_stages": 2, "ONE_RUN_TILES": 1})]
    # session 70: a short run read before the wait, in one tile of twice the positions or
    # two tiles' positions preloaded as one, so that no tile's round trip is left after it;
    # 8 warps keep their registers under the cap (4 warps spill)
    whole = [("preload, 2 stages", {"PRELOAD": True, "num_stages": 2}),
             (f"preload, tiles of {2 * rule['BLOCK_T']}, 2 stages, 8 warps",
              {"PRELOAD": True, "num_stages": 2, "BLOCK_T": 2 * rule["BLOCK_T"],
               "num_warps": 8}),
             ("preload 2 tiles, 2 stages, 8 warps",
              {"PRELOAD": True, "PRELOAD_TILES": 2, "num_stages": 2, "num_warps": 8})]
    # the preloaded tile of twice the positions read by one program only up to 1 or 2 such
    # tiles, so that longer caches split into more runs (3 tiles in one run lost at 767)
    long_tile = [(f"preload, tiles of {2 * rule['BLOCK_T']}, 8 warps, one run <= {n}",
                  {"PRELOAD": True, "num_stages": 2, "BLOCK_T": 2 * rule["BLOCK_T"],
                   "num_warps": 8, "ONE_RUN_TILES": n}) for n in (1, 2)]
    variants = long_tile if args.long_tile else whole if args.whole else preload if args.preload else quick if args.quick else [
                ("1 warp", {"num_warps": 1}), ("2 warps", {"num_warps": 2}),
                ("8 warps", {"num_warps": 8}), ("2 stages", {"num_stages": 2}),
                ("4 stages", {"num_stages": 4}),
                (f"tiles of {half}, one run", {"BLOCK_T": half, "ONE_RUN_TILES": 2 * tiles}),
                (f"tiles of {half}, one run, 2 warps",
                 {"BLOCK_T": half, "ONE_RUN_TILES": 2 * tiles, "num_warps": 2})]
    for name, changes in variants:
        ms = step_ms(changes)
        print(f"  {name:34s} {ms:.4f} ms   (rule again {step_ms({}):.4f})", flush=True)


if __name__ == "__main__":
    main()
