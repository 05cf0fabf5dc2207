"""tg.decode_stack: the whole stack in one persistent kernel (one launch per phase on CPU)."""

import math

import pytest
import torch

import tilegraph as tg
from tilegraph.demo import stack_tolerance
from tilegraph.kernels import decode_stack_ref
from tilegraph.kernels.decode_stack import decode_stack_config
from tilegraph.testing import poisoned, randn, rel_error


def _stack(layers, d, nq, dtype, device):
    g = randn(layers, d, dtype=dtype, device=device, scale=0.1) + 1
    wq = randn(layers, nq, d, dtype=dtype, device=device, scale=d**-0.5)
    wo = randn(layers, d, nq, dtype=dtype, device=device, scale=nq**-0.5)
    return g, wq, wo


def _check(lead, layers, d, nq, dtype, device, workspace=None):
    g, wq, wo = _stack(layers, d, nq, dtype, device)
    x = randn(*lead, d, dtype=dtype, device=device)
    out = tg.decode_stack(x, g, wq, wo, workspace=workspace,
                          out=poisoned((*lead, d), dtype, device))
    ref = decode_stack_ref(x.double(), g.double(), wq.double(), wo.double())
    err = rel_error(out, ref)
    assert err <= stack_tolerance(dtype, layers), (lead, layers, d, nq, dtype, err)
    return out


@pytest.mark.parametrize("lead, layers, d, nq, dtype", [
    ((1,), 3, 96, 96, torch.float32),        # the tiny preset's shape
    ((3,), 2, 100, 72, torch.float32),       # NQ < D, odd sizes, rows padded to 4
    ((2, 2), 2, 40, 130, torch.bfloat16),    # NQ > D, leading dims
    ((7,), 1, 33, 33, torch.float16),
    ((8,), 2, 64, 64, torch.float32),        # the most rows it takes
])
def test_matches_float64_reference(device, lead, layers, d, nq, dtype):
    _check(lead, layers, d, nq, dtype, device)


def test_equals_two_linears_per_layer(device):
    g, wq, wo = _stack(2, 48, 48, torch.float32, device)
    x = randn(2, 48, device=device)
    h = x
    for layer in range(2):
        q = tg.linear(h, wq[layer], norm_weight=g[layer])
        h = tg.linear(q, wo[layer], residual=h)
    assert rel_error(tg.decode_stack(x, g, wq, wo), h.double()) < 1e-6


def test_non_contiguous_x_rows(device):
    g, wq, wo = _stack(1, 32, 32, torch.float32, device)
    x = randn(3, 64, device=device)[:, ::2]
    ref = decode_stack_ref(x.double(), g.double(), wq.double(), wo.double())
    assert rel_error(tg.decode_stack(x, g, wq, wo), ref) < 1e-5


def test_empty_batch_returns_empty(device):
    g, wq, wo = _stack(1, 16, 16, torch.float32, device)
    assert tg.decode_stack(torch.empty(0, 16, device=device), g, wq, wo).shape == (0, 16)


def test_bad_input_is_refused(device):
    g, wq, wo = _stack(2, 16, 24, torch.float32, device)
    x = randn(1, 16, device=device)
    with pytest.raises(ValueError, match="wq has shape"):
        tg.decode_stack(x, g, wq[:, :, :8].contiguous(), wo)
    with pytest.raises(ValueError, match="wo has shape"):
        tg.decode_stack(x, g, wq, wo[:, :8].contiguous())
    with pytest.raises(ValueError, match="norm_weight must be 2-D"):
        tg.decode_stack(x, g[0], wq, wo)
    with pytest.raises(TypeError, match="dtype"):
        tg.decode_stack(x, g, wq.half(), wo)
    with pytest.raises(ValueError, match="contiguous"):
        tg.decode_stack(x, g, wq.transpose(1, 2).contiguous().transpose(1, 2), wo)
    with pytest.raises(ValueError, match="at most 8 rows"):
        tg.decode_stack(randn(9, 16, device=device), g, wq, wo)
    with pytest.raises(ValueError, match="no work"):
        tg.decode_stack(x, g[:0], wq[:0], wo[:0])
    with pytest.raises(ValueError, match="workspace"):
        tg.decode_stack(x, g, wq, wo, workspace=torch.zeros(1, device=device))
    with pytest.raises(ValueError, match="overlaps"):
        tg.decode_stack(x, g, wq, wo, out=wq[0, :1, :16])


def test_config_owns_every_row_with_at_most_one_tile_per_sm():
    for d, nq, sms in ((2048, 2048, 132), (512, 512, 132), (4096, 4096, 132), (96, 96, 8),
                       (781, 1000, 114), (8192, 8192, 132)):
        config = decode_stack_config(d, nq, 2, sms)
        assert config.programs <= sms
        assert config.programs * config.block_n >= max(d, nq)
        assert config.block_k >= 16 and config.num_warps in (4, 8, 16)
        assert config.chunks * config.block_k >= max(d, nq)
        # a chunk held in registers stays at 64 bytes a thread or fewer
        assert config.block_n * config.block_k * 2 <= 64 * 32 * config.num_warps
    seed = decode_stack_config(2048, 2048, 4, 132)
    assert (seed.programs, seed.block_n, seed.block_k, seed.chunks) == (128, 16, 512, 4)
    assert decode_stack_config(2048, 2048, 2, 132).chunks == 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 2, 5, 8])
def test_seed_shaped_stack_on_gpu(dtype, rows):
    workspace = tg.decode_stack_workspace("cuda")
    _check((rows,), 3, 2048, 2048, dtype, "cuda", workspace)
    assert workspace.item() == 0  # the last program out resets the barrier for the next launch


@pytest.mark.gpu
@pytest.mark.parametrize("d, nq", [(781, 1000), (4096, 1024), (512, 512), (8192, 256)])
def test_awkward_and_large_shapes_on_gpu(d, nq):
    _check((3,), 2, d, nq, torch.bfloat16, "cuda")


@pytest.mark.gpu
def test_many_replays_of_a_captured_launch_stay_correct():
    g, wq, wo = _stack(4, 1024, 1024, torch.float32, "cuda")
    workspace = tg.decode_stack_workspace("cuda")
    x = randn(2, 1024, device="cuda")
    out = torch.empty_like(x)
    graph = tg.capture(lambda: tg.decode_stack(x, g, wq, wo, workspace=workspace, out=out))
    for step in range(50):
        x.copy_(randn(2, 1024, device="cuda"))
        out.fill_(math.nan)
        graph.replay()
        if step % 10 == 0 or step == 49:
            ref = decode_stack_ref(x.double(), g.double(), wq.double(), wo.double())
            assert rel_error(out, ref) <= stack_tolerance(torch.float32, 4), step
    assert workspace.item() == 0


@pytest.mark.gpu
def test_under_torch_compile_fullgraph():
    g, wq, wo = _stack(2, 256, 256, torch.bfloat16, "cuda")
    x = randn(1, 256, dtype=torch.bfloat16, device="cuda")
    compiled = torch.compile(lambda x: tg.decode_stack(x, g, wq, wo) * 2, fullgraph=True)
    assert rel_error(compiled(x), 2 * decode_stack_ref(x.double(), g.double(), wq.double(),
                                                      wo.double())) <= 2e-2
