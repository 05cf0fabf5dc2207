"""Graph replays checked against the same calls run eagerly, for the GPU tests of PDL chains."""

import torch

import tilegraph as tg
from tilegraph.testing import assert_close, randn


def assert_replays_equal_eager(chain, reference, shape: tuple, dtype: torch.dtype,
                               replays: int = 50) -> None:
    """chain(x) captured over an x of `shape` and replayed with fresh random inputs: each
    replay equal to chain(x) run eagerly, bit for bit, and to reference(x) (float64) within
    dtype's tolerance."""
    graph = tg.capture(chain, randn(*shape, dtype=dtype, device="cuda"))
    for _ in range(replays):
        x = randn(*shape, dtype=dtype, device="cuda")
        graph.inputs[0].copy_(x)
        replayed = graph.replay()
        assert torch.equal(replayed, chain(x))
        assert_close(replayed, reference(x), dtype)
