"""Which kind of GEMM candidate wins, and by how much, for the fused products of training.

    PYTHONPATH=src TILEGRAPH_CACHE_DIR=$(mktemp -d) python3 research/sweep_gemm_kinds.py

For MLP layers of several widths and token counts it runs tg.linear's differentiable
forward (norm + bias + gelu_tanh with the pre-activation stored; bias + residual), which
tunes the GEMM afresh, and prints the best time of each kind of candidate the tuner timed
(pointer tiles, persistent TMA, cuBLAS + element-wise epilogue) beside plain torch.mm on
the same operands. Behind the rule in kernels/matmul.py that all three compete.
"""

from __future__ import annotations

import argparse

import torch

import tilegraph as tg
from tilegraph.bench import measure
from tilegraph.kernels import matmul as matmul_module


def kind(config: dict) -> str:
    return "tma" if config.get("TMA") else "cublas" if config.get("CUBLAS") else "pointer"


def best_by_kind(timings: list[tuple[dict, float]]) -> dict[str, float]:
    best: dict[str, float] = {}
    for config, ms in timings:
        best[kind(config)] = min(best.get(kind(config), float("inf")), ms)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="bf16,fp32")
    parser.add_argument("--shapes", default="1024x512,1024x4096,768x1000,1536x2048",
                        help="d x tokens, comma-separated")
    args = parser.parse_args()
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'dtype':6} {'d':>5} {'tokens':>6} {'product':34} {'pointer':>9} {'tma':>9} "
          f"{'cublas':>9} {'torch.mm':>9}   (us)")
    for dtype_name in args.dtypes.split(","):
        dtype = dtypes[dtype_name]
        for shape in args.shapes.split(","):
            d, tokens = (int(v) for v in shape.split("x"))
            x = torch.randn(tokens, d, device="cuda", dtype=dtype, requires_grad=True)
            w1 = torch.randn(4 * d, d, device="cuda", dtype=dtype) * d**-0.5
            w2 = torch.randn(d, 4 * d, device="cuda", dtype=dtype) * (4 * d) ** -0.5
            b1, b2 = torch.zeros(4 * d, device="cuda", dtype=dtype), torch.zeros(d, device="cuda",
                                                                                  dtype=dtype)
            g = torch.ones(d, device="cuda", dtype=dtype)
            h = torch.randn(tokens, 4 * d, device="cuda", dtype=dtype, requires_grad=True)
            cases = [  # (name, x, weight, tg.linear's other arguments)
                ("norm+bias+gelu_tanh+preact", x, w1,
                 dict(bias=b1, norm_weight=g, activation="gelu_tanh")),
                ("bias+residual", h, w2, dict(bias=b2, residual=x)),
            ]
            for name, a, w, kwargs in cases:
                before = set(matmul_module._tuner.timings)
                tg.linear(a, w, **kwargs)
                new = [k for k in matmul_module._tuner.timings if k not in before]
                best = best_by_kind(matmul_module._tuner.timings[new[-1]]) if new else {}
                plain = measure(lambda a=a, w=w: torch.mm(a.detach(), w.t()), graph=True).median
                cells = " ".join(f"{best.get(k, float('nan')) * 1e3:9.1f}"
                                 for k in ("pointer", "tma", "cublas"))
                print(f"{dtype_name:6} {d:5} {tokens:6} {name:34} {cells} {plain * 1e3:9.1f}")


if __name__ == "__main__":
    main()
