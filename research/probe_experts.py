"""A mixture of experts' decode-step MLP (models/experts.py's fused path: tg.linear's router,
then kernels/experts.py's two kernels) against the plain path's gather of the chosen
experts, timed as the decode grid times a projection (graph replays over weights rotated
past L2, PDL on), with the share of copy bandwidth on the bytes the rows' distinct experts
and the router hold.

    PYTHONPATH=src python3 research/probe_experts.py [--rows 1,4,8] [--shapes olmoe,...]
        [--blocks]

--blocks times the pair kernels' block shapes of BLOCKS besides the rule's
(experts._block_shape replaced while a variant is captured). --layouts times each step in
both layouts (the pair kernels, the by-expert kernels of _experts_by_expert.py, and gate/up
by expert with the pair kernels' down), the by-expert kernels' shapes of BY_EXPERT_BLOCKS and
their down's split into programs of DOWN_PROGRAMS_AN_SM.
"""

import argparse
import contextlib
import types

import torch

import tilegraph as tg
from tilegraph.bench.compare import compare
from tilegraph.bench.roofline import ceilings
from tilegraph.kernels import experts as experts_module
from tilegraph.kernels.experts import expert_down, expert_gate_up
from tilegraph.models.experts import mixture
from tilegraph.models.llama import _gated
from tilegraph.testing import randn

# name -> (dim, ffn, experts, a token's, renormalised): OLMoE 1B-7B, Qwen3-30B-A3B, Mixtral
SHAPES = {"olmoe": (2048, 1024, 64, 8, False), "qwen3-30b-a3b": (2048, 768, 128, 8, True),
          "mixtral": (4096, 14336, 8, 2, True)}
EPS = 1e-6
# (gate/up's BLOCK_N, BLOCK_K, down's BLOCK_N, BLOCK_K)
BLOCKS = ((8, 256, 4, 1024), (32, 64, 8, 512), (16, 256, 16, 256), (4, 512, 8, 256),
          (16, 128, 2, 1024), (8, 128, 4, 512))
# the by-expert down's programs an SM tried (0: one a block of output columns, unsplit)
DOWN_PROGRAMS_AN_SM = (0, 2, 8)
BY_EXPERT_BLOCKS = ((64, 32, 16, 256), (64, 64, 16, 256), (32, 128, 16, 256),
                    (32, 64, 32, 128), (32, 64, 16, 512))


@contextlib.contextmanager
def block_shapes(gate_up: tuple[int, int], down: tuple[int, int]):
    """experts._block_shape giving these shapes (gate/up's: two rows a program's output)."""
    rule = experts_module._block_shape

    def chosen(outputs, rows_an_output, *args):
        return gate_up if rows_an_output == 2 else down
    experts_module._block_shape = chosen
    try:
        yield
    finally:
        experts_module._block_shape = rule


@contextlib.contextmanager
def layout(by_expert: bool, blocks: tuple[int, int] | None = None,
           down_programs: int | None = None):
    """The kernels launched in the meantime by expert or in pairs, the by-expert ones'
    (BLOCK_N, BLOCK_K) `blocks` and the by-expert down's programs an SM (its split) where
    given."""
    saved = (experts_module._by_expert, experts_module._by_expert_blocks,
             getattr(experts_module, "_DOWN_PROGRAMS_AN_SM", None))
    experts_module._by_expert = lambda *step: by_expert
    if blocks is not None:
        experts_module._by_expert_blocks = lambda *shape: blocks
    if down_programs is not None:
        experts_module._DOWN_PROGRAMS_AN_SM = down_programs
    try:
        yield
    finally:
        experts_module._by_expert, experts_module._by_expert_blocks = saved[:2]
        if saved[2] is not None:   # (a tree before the split has none to restore)
            experts_module._DOWN_PROGRAMS_AN_SM = saved[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="1,4,8")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--blocks", action="store_true")
    parser.add_argument("--layouts", action="store_true")
    args = parser.parse_args()
    limits = ceilings()
    print(f"{torch.cuda.get_device_name()}, copy {limits.get('copy_gbps', 0):.0f} GB/s")
    for name in args.shapes.split(","):
        probe_shape(name, [int(r) for r in args.rows.split(",")], limits, args.blocks,
                    args.layouts)


def probe_shape(name: str, row_counts: list[int], limits: dict, blocks: bool,
                layouts: bool) -> None:
    dtype, device = torch.bfloat16, "cuda"
    dim, ffn, n_experts, k, renormalized = SHAPES[name]
    router = randn(n_experts, dim, dtype=dtype, device=device, scale=3 * dim ** -0.5)
    w_gate_up = randn(n_experts, 2 * ffn, dim, dtype=dtype, device=device,
                      scale=dim ** -0.5)
    w_down = randn(n_experts, dim, ffn, dtype=dtype, device=device, scale=ffn ** -0.5)
    ones = torch.ones(dim, dtype=dtype, device=device)
    config = types.SimpleNamespace(experts_per_token=k, n_experts=n_experts,
                                   router_renormalized=renormalized, shared_experts=0,
                                   router_scoring="softmax", router_scale=1.0)

    def fused(x, router, w_gate_up, w_down):
        scores = tg.linear(x, router, norm_weight=ones, norm_eps=EPS)
        hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, k, renormalized,
                                                  "swiglu", EPS)
        return expert_down(hidden, weights, experts, w_down, residual=x)

    def laid_out(gate_up: tuple, down: tuple):
        """fused, its gate/up and down kernels in the layouts (by_expert, blocks) given."""
        def run(x, router, w_gate_up, w_down):
            scores = tg.linear(x, router, norm_weight=ones, norm_eps=EPS)
            with layout(*gate_up):
                hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, k,
                                                          renormalized, "swiglu", EPS)
            with layout(*down):
                return expert_down(hidden, weights, experts, w_down, residual=x)
        return run

    def plain(x, router, w_gate_up, w_down):
        layer = types.SimpleNamespace(w_router=router, w_gate_up=w_gate_up,
                                      w_down=w_down, b_router=None, b_gate_up=None,
                                      b_down=None, b_choice=None)
        normed = torch.nn.functional.rms_norm(x, (dim,), eps=EPS)
        return x + mixture(normed, layer, config,
                           lambda gate_up: _gated(gate_up, "swiglu", None))

    for rows in row_counts:
        x = randn(rows, dim, dtype=dtype, device=device)
        scores = tg.linear(x, router, norm_weight=ones, norm_eps=EPS)
        taken = expert_gate_up(x, scores, w_gate_up, k, renormalized, "swiglu", EPS)[2]
        distinct = taken.unique().numel()
        nbytes = (distinct * 3 * dim * ffn + n_experts * dim) * 2
        variants = {"tilegraph": fused, "plain gather": plain}
        for shape in BLOCKS if blocks else ():
            def patched(*args, shape=shape):
                with block_shapes(shape[:2], shape[2:]):
                    return fused(*args)
            variants["blocks {}x{} {}x{}".format(*shape)] = patched
        if layouts:
            variants["pairs"] = laid_out((False, None), (False, None))
            variants["gate/up by expert, down pairs"] = laid_out((True, None), (False, None))
            variants["by expert"] = laid_out((True, None), (True, None))
            for shape in BY_EXPERT_BLOCKS:
                variants["by expert {}x{} {}x{}".format(*shape)] = laid_out(
                    (True, shape[:2]), (True, shape[2:]))
            if hasattr(experts_module, "_DOWN_PROGRAMS_AN_SM"):
                for programs in DOWN_PROGRAMS_AN_SM:
                    variants[f"by expert, down {programs} an SM"] = laid_out(
                        (True, None), (True, None, programs))
        result = compare(variants, plain,
                         (x, router, w_gate_up, w_down), bytes=nbytes, graph=True,
                         rotate=(1, 2, 3), ceilings=limits)
        for r in result.results:
            us = r.stats.median * 1e3 if r.stats is not None else float("nan")
            print(f"{name:14s} rows {rows:2d} experts {distinct:3d}/{rows * k:3d} "
                  f"{r.name:36s} {r.status:6s} {us:9.1f} us  "
                  f"{r.pct_ceiling or 0:5.1f}% of copy  err {r.rel_error or 0:.2g}")


if __name__ == "__main__":
    main()
