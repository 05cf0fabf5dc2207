"""Adding up fp32 partial sums (kernels/_partials.py, after RMSNorm's backward and the
bias-gradient pass's row slices): column block and partial rows a step, against the shapes
the backward kernels leave (P partial rows of N columns). Graph replays, partials warm in L2
(the kernel before just wrote them).

    PYTHONPATH=src python3 research/probe_sum_partials.py
"""

import itertools

import torch

from tilegraph import bench
from tilegraph.kernels._partials import sum_partials

SHAPES = [(512, 1024), (528, 1024), (528, 4096), (1000, 768), (256, 2048), (33, 4096),
          (128, 4096), (528, 8192), (64, 11008), (16, 512)]


def main() -> None:
    print(torch.cuda.get_device_name())
    for P, N in SHAPES:
        partial = torch.randn(P, N, device="cuda")
        expected = partial.double().sum(0)
        results = []
        for block_n, block_p in itertools.product((4, 8, 16, 32, 64), (16, 32, 64, 128)):
            def call(block_n=block_n, block_p=block_p, partial=partial):
                return sum_partials(partial, torch.bfloat16, block_n=block_n, block_p=block_p)
            error = ((call().double() - expected).abs().max() / expected.abs().max()).item()
            assert error < 1e-2, (P, N, block_n, block_p, error)
            us = bench.measure(call, flush_l2=False, graph=True, warmup_ms=10,
                               rep_ms=20).median * 1e3
            results.append((us, block_n, block_p))
        default = next(r for r in results if r[1] == min(64, 1 << (N - 1).bit_length())
                       and r[2] == 64)
        best = sorted(results)[:5]
        print(f"P={P:5} N={N:5}: 64x64 {default[0]:.2f} us | best " +
              ", ".join(f"{us:.2f} (n{bn} p{bp})" for us, bn, bp in best), flush=True)


if __name__ == "__main__":
    main()
