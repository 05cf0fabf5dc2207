"""The split-operand 3xTF32 product alone (kernels/_gemm_tf32x3.py, split passes left out):
does the row pitch of the split operands (C exact, padded to 32 elements, padded past a
power of two) or splitting K between programs move it, at the training step's shapes and a
few off the list?

    PYTHONPATH=src python3 research/probe_split_pitch.py
"""
import torch

from tilegraph.kernels._gemm_tf32x3 import launch_split_product, split_pitch, split_rows
from tilegraph.kernels.autotune import _graph_replay_ms
from tilegraph.kernels.matmul import _config
from tilegraph.testing import randn

# (M, N, K): a forward and a dx product at 512 tokens, a dW at 1000 tokens, off-list shapes
SHAPES = [(512, 1024, 4096), (512, 4096, 1024), (1024, 4096, 512), (3072, 768, 1000),
          (1000, 768, 3072), (384, 1280, 5120), (777, 1536, 2345)]
CONFIGS = [{**_config(128, 128, 32, 8, 3), "SPLIT_K": s} for s in (1, 2, 4)] + [
    {**_config(128, 64, 32, 4, 4), "SPLIT_K": s} for s in (1, 2, 4)] + [
    {**_config(64, 64, 32, 4, 4), "SPLIT_K": 1}]


def pitches(k: int) -> dict[str, int]:
    padded = split_pitch(k)
    return {"exact": k, "pad32": padded, "pad32+32": padded + 32}


print(f"{'M x N x K':>20} {'config':>22} " + " ".join(f"{p:>10}" for p in pitches(1)))
for m, n, k in SHAPES:
    a = randn(m, k, device="cuda")
    b = randn(k, n, device="cuda", scale=k ** -0.5)
    ref = a.double() @ b.double()
    for config in CONFIGS:
        times = []
        for pitch in pitches(k).values():
            a_hi, a_lo = split_rows(a, pitch)
            b_hi, b_lo = split_rows(b.t(), pitch)
            out = torch.empty(m, n, device="cuda")
            run = lambda: launch_split_product(a_hi, a_lo, b_hi, b_lo, out, config)  # noqa: E731
            run()
            error = ((out.double() - ref).norm() / ref.norm()).item()
            assert error < 1e-6, (m, n, k, config, pitch, error)
            times.append(_graph_replay_ms(run, rep_ms=20) * 1e3)  # split-K really split
        name = f"{config['BLOCK_M']}x{config['BLOCK_N']} split {config['SPLIT_K']}"
        print(f"{m:>6} x {n:>5} x {k:>5} {name:>22} " + " ".join(f"{t:10.1f}" for t in times),
              flush=True)
    print()
