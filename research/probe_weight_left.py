"""The weight-left tile (decode_plan.weight_left_config) against the x-left tile it replaced,
on lone projections and inside whole Llama decode steps.

    PYTHONPATH=src python3 research/probe_weight_left.py projections 2,8,16 16384:2048,2048:8192
    PYTHONPATH=src python3 research/probe_weight_left.py steps llama3.2-1b:2,tinyllama:8

projections: for each N:K and row count, bf16, cuBLAS and tg.linear with each tile forced
through the tuned-plan store ("rule", "x-left" = the 16-bit pipelined tile of dot_config
before session 36, and weight-left tiles of other K widths, depths and splits), timed as
graph replays over weights rotated past L2 (bench.compare). Prints us a call.
steps: ms a decode step of each model (random weights, bf16, position 255) with the rule's
plans, then with the x-left tile forced on all / each of its q|k|v, gate/up, down and LM head
projections (where the rule takes the tensor cores), then the rule again (drift).
Results: results/2026-11-25-session36/.
"""

import sys

import torch
import torch.nn.functional as F
import triton

import tilegraph as tg
from tilegraph.bench.compare import compare
from tilegraph.kernels import decode_plan as dp
from tilegraph.kernels.linear import linear_ref
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig
from tilegraph.testing import randn

DTYPE = torch.bfloat16
SMS = 132  # an H100's


def x_left_tile(N: int, K: int) -> dict:
    """dot_config's 16-bit pipelined tile at 4a827a5: x on the mma's left, 256-column steps."""
    block_n = (32 if N < 1024 else 64) if K >= 2 * N else (64 if N >= 3072 else 32)
    split = min(dp.MAX_SPLIT_K, triton.cdiv(K, 256), 2 * SMS // triton.cdiv(N, block_n))
    config = {"BLOCK_N": block_n, "BLOCK_K": 256, "num_warps": 4, "num_stages": 3}
    return {**config, "SPLIT_K": split} if split >= 2 else config


def weight_left(N: int, K: int, block_k: int, stages: int, split_times: int = 1) -> dict:
    config = {**dp.weight_left_config(N, K, SMS), "BLOCK_K": block_k, "num_stages": stages}
    split = config.pop("SPLIT_K", 1) * split_times
    return {**config, "SPLIT_K": split} if split > 1 else config


def force(rows: int, N: int, K: int, plan: dict) -> None:
    """Make tg.linear take `plan` (a Plan.as_dict()) for this shape, in memory only."""
    dp._tuned._memo[repr(dp.tuned_key(rows, N, K, DTYPE))] = plan


def forced_linear(rows: int, n: int, k: int, plan: dict, out: torch.Tensor):
    def call(x, w):
        force(rows, n, k, plan)  # at capture: the graph keeps the kernel it launched
        return tg.linear(x, w, out=out)
    return call


def projection(n: int, k: int, rows: int) -> str:
    rule = dp.rule(rows, n, k, DTYPE, SMS)
    dot = lambda config: {"kind": "dot", **config}  # noqa: E731
    plans = {"rule": rule.as_dict(), "x-left": dot(x_left_tile(n, k)),
             "L128s3": dot(weight_left(n, k, 128, 3)), "L128s4": dot(weight_left(n, k, 128, 4)),
             "L256s3": dot(weight_left(n, k, 256, 3)), "L64s4": dot(weight_left(n, k, 64, 4)),
             "L128s3 split x2": dot(weight_left(n, k, 128, 3, 2))}
    x = randn(rows, k, dtype=DTYPE, device="cuda")
    w = randn(n, k, dtype=DTYPE, device="cuda", scale=k**-0.5)
    out = torch.empty(rows, n, dtype=DTYPE, device="cuda")
    variants = {"cublas": F.linear,
                **{name: forced_linear(rows, n, k, plan, out) for name, plan in plans.items()}}
    result = compare(variants, lambda x, w: linear_ref(x.double(), w.double()), (x, w),
                     bytes=(n * k + rows * k + rows * n) * 2, baseline="cublas", graph=True,
                     rotate=(1,), warmup_ms=10, rep_ms=40)
    line = [f"{n}x{k} r{rows} rule={rule.kind}{'L' if rule.config.get('W_LHS') else ''}"]
    for name in variants:
        r = result[name]
        line.append(f"{name} {r.stats.median * 1e3:.2f}" if r.stats else f"{name} {r.status}")
    return " | ".join(line)


def step_ms(model, tokens, positions, cache) -> float:
    graph = tg.capture(model.decode, tokens, positions, cache)
    for _ in range(20):
        graph.replay()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(100):
            graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 100)
    return sorted(times)[2]


def model_steps(name: str, batch: int) -> str:
    c = LlamaConfig.from_hf(hf_config(name))
    torch.manual_seed(0)
    model = Llama(c, dtype=DTYPE, device="cuda")
    cache = model.new_cache(batch, 512)
    tokens = torch.randint(0, c.vocab_size, (batch,), device="cuda")
    positions = torch.full((batch,), 255, device="cuda")
    qkv = (c.n_heads + 2 * c.n_kv_heads) * c.head_dim
    shapes = {"qkv": (qkv, c.dim), "gate/up": (2 * c.ffn_dim, c.dim), "down": (c.dim, c.ffn_dim),
              "head": (c.vocab_size, c.dim)}
    line = []
    for on in [(), tuple(shapes), *((label,) for label in shapes), ()]:
        dp._tuned._memo.clear()
        for label in on:
            n, k = shapes[label]
            if dp.rule(batch, n, k, DTYPE, SMS).kind == "dot":
                force(batch, n, k, {"kind": "dot", **x_left_tile(n, k)})
        line.append(f"x-left on {'+'.join(on) or 'none'} "
                    f"{step_ms(model, tokens, positions, cache):.4f}")
    return f"{name} b{batch}: " + " | ".join(line)


def main() -> None:
    dp._tuned._disk_loaded = True  # research only: plans forced in memory, none read from disk
    what, first = sys.argv[1], sys.argv[2]
    if what == "projections":
        for n, k in (map(int, shape.split(":")) for shape in sys.argv[3].split(",")):
            for rows in map(int, first.split(",")):
                print(projection(n, k, rows), flush=True)
    else:
        for name, batch in (item.split(":") for item in first.split(",")):
            print(model_steps(name, int(batch)), flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
