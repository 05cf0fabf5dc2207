import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
from _replays import assert_replays_equal_eager
from _shapes import DTYPES, ROW_SHAPES
from tilegraph.kernels import _pdl
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.testing import assert_close, poisoned, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES + [(3, 20000)])
def test_matches_reference(shape, dtype, device):
    x = randn(*shape, dtype=dtype, device=device)
    w = randn(shape[-1], dtype=dtype, device=device)
    out = tg.rms_norm(x, w, out=poisoned(shape, dtype, device))
    assert_close(out, rms_norm_ref(x.double(), w.double()), dtype)


def test_properties(device):
    x = randn(6, 300, device=device, scale=50.0)
    ones = torch.ones(300, device=device)
    y = tg.rms_norm(x, ones, eps=0.0)
    # Unit weight: every row comes out with root-mean-square 1, whatever its scale.
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(6, device=device), rtol=1e-5,
                               atol=0)
    assert_close(tg.rms_norm(7.0 * x, ones, eps=0.0), y.double(), torch.float32)


def test_eps_matters_for_tiny_rows(device):
    x = torch.full((2, 16), 1e-4, device=device)
    w = torch.ones(16, device=device)
    assert_close(tg.rms_norm(x, w, eps=1e-2), rms_norm_ref(x.double(), w.double(), 1e-2),
                 torch.float32)


def test_strided_input(device):
    x = randn(30, 77, device=device).t()  # rows are not contiguous
    w = randn(30, device=device)
    assert_close(tg.rms_norm(x, w), rms_norm_ref(x.double(), w.double()), torch.float32)


def test_bad_input(device):
    x = randn(3, 4, device=device)
    with pytest.raises(ValueError, match=r"weight has shape \(5,\), expected \(4,\)"):
        tg.rms_norm(x, torch.ones(5, device=device))
    with pytest.raises(TypeError, match="weight has dtype torch.float16 but x has"):
        tg.rms_norm(x, torch.ones(4, dtype=torch.float16, device=device))
    with pytest.raises(ValueError, match="eps must be a non-negative number"):
        tg.rms_norm(x, torch.ones(4, device=device), eps=-1.0)
    assert tg.rms_norm(torch.empty(0, 4, device=device), torch.ones(4, device=device)).numel() == 0


def test_out_may_be_x_but_not_overlap_it_shifted(device):
    buffer, w = randn(201, 96, device=device), randn(96, device=device)
    with pytest.raises(ValueError, match="out overlaps x"):
        tg.rms_norm(buffer[:200], w, out=buffer[1:])
    with pytest.raises(ValueError, match="out overlaps weight"):
        tg.rms_norm(buffer[:1, :96], buffer[0], out=buffer[:1])
    x = randn(5, 96, device=device)
    expected = rms_norm_ref(x.double(), w.double())
    assert tg.rms_norm(x, w, out=x) is x
    assert_close(x, expected, torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(1, 7), (5, 1152), (3, 20000)])  # one tile; two passes
def test_residual_added_to_the_norm(shape, dtype, device):
    """residual + rms_norm(x) * w in one kernel (a residual row strided apart), in place
    too; the norm rounded to the dtype before the add, as the reference rounds it."""
    x = randn(*shape, dtype=dtype, device=device)
    w = randn(shape[-1], dtype=dtype, device=device)
    residual = randn(shape[0], shape[-1] + 3, dtype=dtype, device=device, scale=3.0)
    residual = residual[:, :shape[-1]]
    out = tg.rms_norm(x, w, residual=residual, out=poisoned(shape, dtype, device))
    assert_close(out, rms_norm_ref(x.double(), w.double(), residual=residual.double()), dtype)
    assert_close(out, rms_norm_ref(x, w, residual=residual).double(), dtype,
                 what="against the norm rounded first")
    in_place = residual.clone()
    assert tg.rms_norm(x, w, residual=in_place, out=in_place) is in_place
    torch.testing.assert_close(in_place, out, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"residual has shape \(\d+, 1\), expected"):
        tg.rms_norm(x, w, residual=residual[:, :1])


def test_residual_gradients(device):
    x, w, r = (randn(*shape, device=device).requires_grad_() for shape in
               ((4, 24), (24,), (4, 24)))
    out = tg.rms_norm(x, w, residual=r)
    out.backward(torch.ones_like(out))
    assert torch.equal(r.grad, torch.ones_like(r))
    x2, w2 = x.detach().requires_grad_(), w.detach().requires_grad_()
    tg.rms_norm(x2, w2).backward(torch.ones_like(out))
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 300), dtype=st.sampled_from(DTYPES))
def test_any_shape(rows, cols, dtype):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = randn(rows, cols, dtype=dtype, device=device)
    w = randn(cols, dtype=dtype, device=device)
    out = tg.rms_norm(x, w, out=poisoned(x.shape, dtype, device))
    assert_close(out, rms_norm_ref(x.double(), w.double()), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8192, 4096), (1823, 781), (5, 65_537)])
def test_large_gpu(shape, dtype):
    x = randn(*shape, dtype=dtype, device="cuda")
    w = randn(shape[-1], dtype=dtype, device="cuda")
    out = tg.rms_norm(x, w, out=poisoned(shape, dtype, "cuda"))
    assert_close(out, rms_norm_ref(x.double(), w.double()), dtype)


@pytest.mark.gpu
def test_a_decode_norm_launches_with_pdl_and_records_its_writes():
    """A grid of one wave launches with programmatic dependent launch (Hopper on): what it
    writes is then in flight, so the next kernel may not prefetch it; a grid of more
    waves launches without, and leaves nothing in flight."""
    if not _pdl.supports_pdl(torch.device("cuda")):
        pytest.skip("programmatic dependent launch needs Hopper or newer")
    x, other = randn(4, 1152, device="cuda"), randn(4, 1152, device="cuda")
    w = randn(1152, device="cuda")
    out = tg.rms_norm(x, w, residual=other)
    assert not _pdl.use_pdl(x.device, (out,)) and _pdl.use_pdl(x.device, (other,))
    many = randn(100_000, 64, device="cuda")
    out = tg.rms_norm(many, w[:64])
    assert _pdl.use_pdl(x.device, (out,))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [1, 8])
def test_norm_between_projections_in_a_graph_equals_eager_over_replays(rows, dtype):
    """Gemma's order, projection -> norm and residual add -> normed projection, each
    kernel launched with PDL: 50 replays with fresh inputs equal the same calls run
    eagerly, bit for bit, and the float64 reference within tolerance."""
    d = 1152
    w0, w1 = (randn(d, d, dtype=dtype, device="cuda", scale=d**-0.5) for _ in range(2))
    post, g = randn(d, dtype=dtype, device="cuda"), randn(d, dtype=dtype, device="cuda")

    def chain(x):
        x = tg.rms_norm(tg.linear(x, w0), post, residual=x)
        return tg.linear(x, w1, norm_weight=g, residual=x)

    def reference(x):
        # rounded to the dtype where the kernels round: the projection's output, the sum
        h = linear_ref(x.double(), w0.double()).to(dtype)
        x = rms_norm_ref(h, post, residual=x).double()
        return linear_ref(x, w1.double(), norm_weight=g.double(), residual=x)

    assert_replays_equal_eager(chain, reference, (rows, d), dtype)


@pytest.mark.parametrize("n_cols", [1, 7, 100, 781, 1024, 2048, 4096, 8192, 16384, 20000])
@pytest.mark.parametrize("element_size", [2, 4])
def test_row_rule_covers_rows_with_whole_vectors(n_cols, element_size):
    """softmax and RMSNorm launch rule: a tile spans the row (or 4096-column chunks past
    MAX_ROW_TILE), every thread holds whole 16-byte vectors, at most 32 warps; long and short
    rows are loaded evict-last, and softmax loads every row so (notes/kernels.md, session 8)."""
    from tilegraph.kernels._launch import MAX_ROW_TILE, row_config, softmax_config

    config = row_config(8192, n_cols, element_size)
    tile_bytes = config["BLOCK_M"] * config["BLOCK_N"] * element_size
    assert config["SINGLE_PASS"] == (n_cols <= MAX_ROW_TILE)
    assert config["BLOCK_N"] >= n_cols if config["SINGLE_PASS"] else config["BLOCK_N"] == 4096
    assert config["num_warps"] in (1, 2, 4, 8, 16, 32)
    assert tile_bytes // (32 * config["num_warps"]) >= 16 or config["num_warps"] == 1
    row_bytes = config["BLOCK_N"] * element_size
    if config["SINGLE_PASS"] and (row_bytes >= 16384 or row_bytes <= 2048):
        assert config["LOAD_POLICY"] == "evict_last"
        assert tile_bytes // (32 * config["num_warps"]) in (32, 64) or config["num_warps"] == 1
    assert softmax_config(8192, n_cols, element_size)["LOAD_POLICY"] == "evict_last"
    assert row_config(3, n_cols, element_size)["BLOCK_M"] <= 4  # no more rows than exist
