"""Does a tg.GraphRunner whose smaller size's warm-up tuned a kernel replay its larger sizes
slower, and does capturing every size again (session 46) take that back? Eight fused
layers (tg.linear with its norm and residual, 2048 x 2048 bf16, 64 MB of weights) in a
runner of sizes (24, 48): rows past 16 take the tiled product, which tunes once per row
bucket, so the 24-row warm-up searches after the 48-row graph was captured. Prints us a
replay of the 48-row graph (median of 5 rounds of 300 replays) and the runner's captures.

    PYTHONPATH=<tree>/src TILEGRAPH_CACHE_DIR=<dir> python3 research/probe_runner_recapture.py
"""

import statistics

import torch

import tilegraph as tg
from tilegraph.graph import runner as runner_module
from tilegraph.testing import randn

D, LAYERS, DTYPE = 2048, 8, torch.bfloat16


def main() -> None:
    torch.manual_seed(0)
    weights = [randn(D, D, dtype=DTYPE, device="cuda", scale=D**-0.5) for _ in range(LAYERS)]
    norms = [randn(D, dtype=DTYPE, device="cuda") for _ in range(LAYERS)]

    def layers(x):
        for w, g in zip(weights, norms, strict=True):
            x = tg.linear(x, w, norm_weight=g, residual=x)
        return x

    captures = []
    capture = runner_module.capture

    def counted(fn, *views, **kwargs):
        captures.append(views[0].shape[0])
        return capture(fn, *views, **kwargs)
    runner_module.capture = counted
    runner = tg.GraphRunner(layers, randn(48, D, dtype=DTYPE, device="cuda"), sizes=(24, 48))
    graph = runner._graphs[48]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rounds = []
    for _ in range(6):
        start.record()
        for _ in range(300):
            graph.replay()
        end.record()
        end.synchronize()
        rounds.append(start.elapsed_time(end) / 300 * 1e3)
    print(f"captures {captures}: us a 48-row replay {statistics.median(rounds[1:]):.2f} "
          f"(rounds {[round(r, 2) for r in rounds[1:]]})", flush=True)


if __name__ == "__main__":
    main()
