"""The bias-gradient pass of a linear's backward (kernels/_activation_grad.py): dz = dy *
act'(z) and dz summed over rows. The default plan (bias_grad_plan; before session 23 always
row slices with fp32 partial sums added up by a second kernel) against one slice per column
block that writes the gradient directly, over block shapes, at the training benchmark's
shapes and others. Graph replays, inputs warm in L2 (as in a training step, where the
previous kernel just wrote dy).

    PYTHONPATH=src python3 research/probe_bias_grad.py
"""

import itertools

import torch

from tilegraph import bench
from tilegraph.kernels._activation_grad import BiasGradPlan, bias_grad_plan, launch_bias_grad
from tilegraph.kernels._launch import sm_count

SHAPES = [  # (M, N, activation)
    (512, 4096, "gelu"), (512, 1024, "none"), (1000, 3072, "gelu"), (1000, 768, "none"),
    (256, 6144, "gelu"), (384, 5120, "gelu"), (2048, 4096, "gelu"), (2048, 1024, "none"),
    (4096, 4096, "gelu"), (4096, 1024, "none"), (512, 2816, "swiglu"), (128, 4096, "gelu"),
]


def single_pass_plans(M: int, N: int) -> list[BiasGradPlan]:
    plans = []
    for block_n, block_m in itertools.product((8, 16, 32, 64), (64, 128, 256)):
        if block_m <= max(16, triton_pow2(M)):
            plans.append(BiasGradPlan(1, M, block_m, block_n, 4 if block_m * block_n <= 4096
                                      else 8))
    return plans


def triton_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def main() -> None:
    sms = sm_count(torch.device("cuda"))
    print(torch.cuda.get_device_name(), "SMs", sms)
    for dtype in (torch.bfloat16, torch.float32):
        for M, N, activation in SHAPES:
            dy = torch.randn(M, N, device="cuda", dtype=dtype)
            width = 2 * N if activation == "swiglu" else N
            z = torch.randn(M, width, device="cuda", dtype=dtype) if activation != "none" else None
            dz = torch.empty_like(z) if z is not None else None
            reference = None
            results = []
            default = bias_grad_plan(M, N, dy.element_size(), activation, sms)
            for plan in [default] + single_pass_plans(M, N):
                def call(plan=plan, dy=dy, z=z, dz=dz, activation=activation):
                    return launch_bias_grad(dy, z, dz, activation, plan)
                out = call().float()
                if reference is None:
                    reference = out
                else:
                    err = ((out - reference).abs().max() / reference.abs().max()).item()
                    assert err < 2e-2, (plan, err)
                stats = bench.measure(call, flush_l2=False, graph=True, warmup_ms=10, rep_ms=20)
                us = stats.median * 1e3
                results.append((us, plan))
            slices_us = results[0][0]
            best = sorted(results[1:], key=lambda r: r[0])[:4]
            print(f"{str(dtype)[6:]:8} M={M:5} N={N:5} {activation:6} default {slices_us:6.2f} us"
                  f" ({default}) | single best: " + ", ".join(
                      f"{us:.2f} (n{p.block_n} m{p.block_m} w{p.num_warps})" for us, p in best),
                  flush=True)


if __name__ == "__main__":
    main()
