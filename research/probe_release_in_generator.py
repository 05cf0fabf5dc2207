"""Where tg.Generator's batch-1 step releases the next kernel from its one-row output and
gate/up projections (tune.tune_release_in_step_once), against the release right after the
wait for both and the output projection alone released late, in one process: tokens as
Generator.generate decodes them (256 after a 128-token prompt) and the bare step at
position 255.

    PYTHONPATH=src:research python3 research/probe_release_in_generator.py qwen2-0.5b,tinyllama

Random weights, bf16, max_seq 2048. The first Generator chooses (its timings printed); then
three rounds of each variant, a Generator built anew for each (the choice itself no longer
re-timed), medians printed.
"""

import statistics
import sys

import torch
from probe_weight_left import step_ms
from time_steps import OFF_LIST

import tilegraph as tg
from tilegraph import generate
from tilegraph.kernels import decode_plan
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig

DTYPE = torch.bfloat16


def main() -> None:
    choose = generate.tune_release_in_step_once
    for name in sys.argv[1].split(","):
        base, overrides = OFF_LIST.get(name, (name, {}))
        c = LlamaConfig.from_hf(hf_config(base, **overrides))
        torch.manual_seed(0)
        model = Llama(c, dtype=DTYPE, device="cuda")
        timed = []
        generate.tune_release_in_step_once = (
            lambda *a, timed=timed, **k: timed.append(choose(*a, **k)))
        tg.Generator(model, max_batch=1, max_seq=2048, sizes=(1,))
        print(f"{name}: chosen in the step {timed[0]}", flush=True)
        generate.tune_release_in_step_once = lambda *a, **k: None  # the variants set below
        layer = model.layers[0]
        shapes = {"output": tuple(layer.wo.shape), "gate/up": tuple(layer.w_gate_up.shape)}
        late = timed[0]["late"] if timed[0] else []
        prompt = torch.randint(0, c.vocab_size, (1, 128)).tolist()
        tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
        positions = torch.full((1,), 255, device="cuda")
        results = {}
        for _ in range(3):
            for label, names in (("chosen", late), ("none", []), ("output", ["output"])):
                for what, shape in shapes.items():
                    decode_plan.set_late_release(*shape, DTYPE, what in names)
                gen = tg.Generator(model, max_batch=1, max_seq=2048, sizes=(1,))
                per_token = []
                for _ in range(2):
                    gen.generate(prompt, 256)
                    per_token.append(gen.stats.decode_ms_per_token)
                step = step_ms(model, tokens, positions, gen.cache)
                results.setdefault(label, []).append((min(per_token), step))
                del gen
        print(f"{name}: " + " | ".join(
            f"{label} generate {statistics.median(r[0] for r in runs):.4f} "
            f"step@255 {statistics.median(r[1] for r in runs):.4f}"
            for label, runs in results.items()), flush=True)
        generate.tune_release_in_step_once = choose
        del model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
