"""Where a one-row projection releases the next kernel, set per projection in whole Llama
decode steps: right after its griddepcontrol.wait (the rule), or once its x has arrived
(decode_plan.set_late_release, the GEMV's RELEASE_AFTER_INPUTS), so that the next kernel's
weight stream does not delay that load. Session 44 moved the release of every one-row
projection at once: the output projection got 1.9 us faster in Qwen2-0.5B's layer, the
rest slower; this asks what moving it for one projection does. tg.Generator now chooses
in its own step (tune.tune_release_in_step_once); this shows every variant.

    PYTHONPATH=src:research python3 research/probe_release_point.py qwen2-0.5b,tinyllama,llama3.2-1b

Random weights, bf16, batch 1, position 255 of a 512-position cache; each variant captures
model.decode again and times 5 x 100 replays (median round); the rule runs first and last,
so drift shows.
"""

import sys

import torch
from probe_weight_left import step_ms
from time_steps import OFF_LIST

from tilegraph.kernels import decode_plan
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

DTYPE = torch.bfloat16
VARIANTS = [("rule", ()), ("output late", ("output",)), ("down late", ("down",)),
            ("gate/up late", ("gate/up",)), ("output+down late", ("output", "down")),
            ("output+gate/up late", ("output", "gate/up")), ("rule again", ())]


def main() -> None:
    for name in sys.argv[1].split(","):
        base, overrides = OFF_LIST.get(name, (name, {}))
        c = LlamaConfig.from_hf(hf_config(base, **overrides))
        torch.manual_seed(0)
        model = Llama(c, dtype=DTYPE, device="cuda")
        cache = model.new_cache(1, 512)
        tokens = torch.randint(0, c.vocab_size, (1,), device="cuda")
        positions = torch.full((1,), 255, device="cuda")
        shapes = {"output": (c.dim, c.n_heads * c.head_dim), "down": (c.dim, c.ffn_dim),
                  "gate/up": (2 * c.ffn_dim, c.dim)}
        line = []
        for label, late in VARIANTS:
            for what, (n, k) in shapes.items():
                decode_plan.set_late_release(n, k, DTYPE, what in late)
            line.append(f"{label} {step_ms(model, tokens, positions, cache):.4f}")
        print(f"{name} b1@255: " + " | ".join(line), flush=True)
        del model, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
