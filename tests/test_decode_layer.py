"""kernels/decode_layer.py: one decode layer in one kernel, and the rule that chooses it."""

import pytest
import torch

from tilegraph.kernels import rms_norm_ref
from tilegraph.kernels.decode_layer import (
    MAX_ROWS,
    decode_layer_config,
    launch_decode_layer,
    one_kernel_is_faster,
)
from tilegraph.testing import poisoned, randn, rel_error


def _layer_ref(h, g, wq, wo, eps=1e-6):
    h, g, wq, wo = (t.double() for t in (h, g, wq, wo))
    return h + (rms_norm_ref(h, g, eps) @ wq.T) @ wo.T


@pytest.mark.parametrize("rows, d, dtype, block_q", [
    (1, 96, torch.float32, None),     # the tiny preset's width, the rule's shape
    (3, 100, torch.float32, None),    # rows padded to 4, a part-filled last program
    (8, 33, torch.float32, 4),        # the most rows it takes, many small programs
    (1, 300, torch.bfloat16, None),
    (2, 130, torch.float16, 2),
])
def test_one_layer_matches_float64_reference(device, rows, d, dtype, block_q):
    g = randn(d, dtype=dtype, device=device, scale=0.1) + 1
    wq = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    wo = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    h = randn(rows, d, dtype=dtype, device=device)
    config = decode_layer_config(rows, d, h.element_size())
    if block_q is not None:
        config = {**config, "BLOCK_Q": block_q}
    acc = torch.zeros(rows, d, dtype=torch.float32, device=device)
    zero = poisoned((rows, d), torch.float32, device)
    launch_decode_layer(acc, zero, h, g, wq, wo, 1e-6, config)
    # Inputs of any dtype are exact in fp32 and everything is computed in fp32, so every
    # dtype is held to the fp32 bound.
    assert rel_error(acc, _layer_ref(h, g, wq, wo)) < 1e-5
    assert torch.equal(zero, torch.zeros_like(zero))


def test_every_input_may_be_a_strided_view(device):
    d = 40
    g = randn(d, device=device) + 1
    wq, wo = randn(d, d, device=device, scale=0.2), randn(d, d, device=device, scale=0.2)
    h = randn(1, d, device=device)
    ref = _layer_ref(h, g, wq, wo)
    strided = (randn(1, 2 * d, device=device)[:, ::2].copy_(h),     # every other element
               randn(2 * d, device=device)[::2].copy_(g),
               wq.t().contiguous().t(),                              # column-major
               wo.t().contiguous().t())                              # Wo's columns contiguous
    for args in ((h, g, wq, wo), strided):
        acc = torch.zeros(1, d, device=device)
        launch_decode_layer(acc, torch.empty_like(acc), *args, 1e-6,
                            decode_layer_config(1, d, 4))
        assert rel_error(acc, ref) < 1e-5


def _choice(rows, d, element_size, sm_count=132):
    config = decode_layer_config(rows, d, element_size)
    return one_kernel_is_faster(config, rows, d, element_size, sm_count), config


def test_rule_chooses_one_kernel_where_it_was_measured_faster():
    faster, config = _choice(1, 2048, 2)  # seed-bf16, batch 1
    assert faster and (config["BLOCK_Q"], config["num_warps"]) == (16, 8)
    for rows in (1, 2, 4, 8):  # small (d=512 fp32), every batch
        assert _choice(rows, 512, 4)[0], rows
    assert (_choice(8, 512, 4)[1]["BLOCK_Q"], _choice(8, 512, 4)[1]["num_warps"]) == (8, 2)
    assert not _choice(1, 2048, 4)[0]           # seed fp32: two waves of programs
    assert not _choice(2, 2048, 2)[0]           # bf16 rows applied one by one spill
    assert not _choice(1, 2048, 2, sm_count=100)[0]  # 128 programs, 100 SMs
    assert not _choice(MAX_ROWS + 1, 512, 4)[0]
    assert not _choice(1, 4096, 2)[0]


def test_every_tile_stays_within_its_register_budget():
    for rows in range(1, MAX_ROWS + 1):
        for d in (1, 17, 96, 512, 2048, 4096):
            for element_size in (2, 4):
                faster, config = _choice(rows, d, element_size, sm_count=None)
                tile_bytes = 2 * config["BLOCK_Q"] * config["BLOCK_D"] * element_size
                assert 1 <= config["num_warps"] <= 16
                assert config["BLOCK_D"] >= d
                if faster:
                    assert tile_bytes <= 128 * 1024
                    assert tile_bytes // (32 * config["num_warps"]) <= 512
