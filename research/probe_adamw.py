"""How far torch's fused AdamW is from the copy floor on the training benchmark's parameters,
and what tilegraph's multi-tensor kernel (kernels/adam.py) reaches on the same tensors at
several block sizes, with and without 16-byte vector accesses. All timed as graph replays.

    PYTHONPATH=src python3 research/probe_adamw.py --dtype bf16
"""

import argparse
import math

import torch

from tilegraph.kernels.adam import NUM_WARPS, MultiTensorAdam, _adam_kernel, block_size
from tilegraph.models.mlp import MLPStack


def graph_time_us(fn, reps=20) -> float:
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(reps):
                fn()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(0)
    model = MLPStack(1024, 8, fused=False).to("cuda", dtype)
    params = list(model.parameters())
    for p in params:
        p.grad = torch.randn_like(p)
    lr = torch.tensor(1e-3, device="cuda")
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, fused=True, capturable=True)
    opt.step()  # states exist
    n_params = sum(p.numel() for p in params)
    nbytes = n_params * p.element_size() * 7  # read p, g, m, v; write p, m, v
    copy = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    copy2 = torch.empty_like(copy)
    copy_us = graph_time_us(lambda: copy2.copy_(copy))
    torch_us = graph_time_us(lambda: opt.step())
    print(f"{n_params / 1e6:.1f} M params {args.dtype}, {nbytes / 1e6:.0f} MB moved a step")
    print(f"copy of the same bytes: {copy_us:.1f} us ({nbytes / copy_us / 1e3:.0f} GB/s)")
    print(f"torch fused AdamW: {torch_us:.1f} us ({nbytes / torch_us / 1e3:.0f} GB/s)")

    stepper = MultiTensorAdam(opt)
    (launch,) = stepper._plan()
    for block, warps, vector in ((1024, 4, 1), (512, 4, 1), (256, 2, 8), (512, 2, 8),
                                 (512, 4, 8), (1024, 2, 8), (1024, 4, 8), (1024, 8, 8),
                                 (2048, 8, 8), (2048, 16, 8), (4096, 16, 8)):
        if args.dtype == "fp32":
            vector = min(vector, 4)
        pairs = [(i, s) for i, p in enumerate(params) for s in range(0, p.numel(), block)]
        blocks = torch.tensor(pairs, dtype=torch.int64, device="cuda")

        def kernel_step():
            torch._foreach_add_(launch["steps"], 1)
            _adam_kernel[(len(pairs),)](launch["base"], launch["step_base"], launch["table"],
                                        blocks, lr, 0.9, 0.999, 0.1, 0.001, math.log2(0.9),
                                        math.log2(0.999), 1e-8, 0.01, DECOUPLED=True,
                                        VECTOR=vector, BLOCK=block, num_warps=warps)
        us = graph_time_us(kernel_step)
        print(f"kernel BLOCK {block} warps {warps} vector {vector}: {us:.1f} us "
              f"({nbytes / us / 1e3:.0f} GB/s)")
    us = graph_time_us(stepper.step)
    print(f"MultiTensorAdam.step (BLOCK {block_size(dtype)}, {NUM_WARPS} warps): {us:.1f} us "
          f"({nbytes / us / 1e3:.0f} GB/s)")

    # same math: from identical states, one step each
    states = [opt.state[p] for p in params]
    steps = [s["step"] for s in states]
    clone = [p.detach().clone() for p in params]
    m0 = [s["exp_avg"].clone() for s in states]
    v0 = [s["exp_avg_sq"].clone() for s in states]
    s0 = [s.clone() for s in steps]
    opt.step()
    expected = [p.detach().clone() for p in params]
    for p, c, s, m, v, st in zip(params, clone, states, m0, v0, s0):
        p.data.copy_(c)
        s["exp_avg"].copy_(m)
        s["exp_avg_sq"].copy_(v)
        s["step"].copy_(st)
    stepper.step()
    worst = max(((p - e).abs().max() / e.abs().max()).item() for p, e in zip(params, expected))
    same = sum(torch.equal(p, e) for p, e in zip(params, expected))
    print(f"one step vs torch: worst relative difference {worst:.2e}, {same}/{len(params)} "
          "tensors bit-equal")


if __name__ == "__main__":
    main()
