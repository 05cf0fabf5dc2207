"""tg.linear_qkv against a float64 reference: RMSNorm, the q|k|v projection, rotary embedding
of q and k, and the k, v cache writes, in every decode kernel and the prefill path."""

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels import decode_plan
from tilegraph.kernels._rotary_store import rotary_args
from tilegraph.kernels.decode_plan import Plan
from tilegraph.kernels.linear_qkv import deinterleave_rotary_pairs, linear_qkv_ref
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.testing import assert_close, poisoned, randn

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _case(rows, heads, kv_heads, head_dim, k, dtype, device, *, bias=True, max_seq=37,
          max_batch=None):
    max_batch = max_batch or rows + 2
    n = (heads + 2 * kv_heads) * head_dim
    x = randn(rows, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    b = randn(n, dtype=dtype, device=device) if bias else None
    g = (1 + randn(k, scale=0.1)).to(dtype=dtype, device=device)
    angles = torch.rand(max_seq, head_dim // 2, dtype=torch.float64) * 6.3
    cos, sin = angles.cos().float().to(device), angles.sin().float().to(device)
    positions = torch.randint(0, max_seq, (rows,), device=device)
    slots = torch.randperm(max_batch, device=device)[:rows]
    # Made on the device: the GPU tests' caches hold up to 75M values.
    k_cache = torch.randn(max_batch, kv_heads, max_seq, head_dim, device=device).to(dtype)
    v_cache = torch.randn(max_batch, kv_heads, max_seq, head_dim, device=device).to(dtype)
    cache = dict(cos=cos, sin=sin, positions=positions, slots=slots, k_cache=k_cache,
                 v_cache=v_cache, n_heads=heads)
    return x, w, b, g, cache


def _reference(x, w, b, g, cache, **head_norms):
    """q and the new keys and values (rows, kv_heads, head_dim) from the float64 reference,
    and the caches as they were."""
    k_ref, v_ref = cache["k_cache"].double(), cache["v_cache"].double()
    head_norms = {name: t.double() if isinstance(t, torch.Tensor) else t
                  for name, t in head_norms.items()}
    q = linear_qkv_ref(x.double(), w.double(), b.double() if b is not None else None,
                       norm_weight=g.double(), **dict(cache, k_cache=k_ref, v_cache=v_ref),
                       **head_norms)
    written = cache["slots"], slice(None), cache["positions"]
    return q, k_ref[written], v_ref[written], cache["k_cache"].clone(), cache["v_cache"].clone()


def _check(q, cache, expected, dtype, what=""):
    """q and the written keys and values within tolerance; every other cache entry as it was
    (compared on the device: the caches of the GPU tests are large)."""
    q_ref, k_new, v_new, k_old, v_old = expected
    written = cache["slots"], slice(None), cache["positions"]
    assert_close(q, q_ref, dtype, what=f"q {what}")
    for name, new, old in (("k", k_new, k_old), ("v", v_new, v_old)):
        written_cache = cache[f"{name}_cache"]
        assert_close(written_cache[written], new, dtype, what=f"new {name} {what}")
        old[written] = written_cache[written]
        assert torch.equal(written_cache, old), f"{name} cache changed beyond the new tokens"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim, k", [
    (1, 4, 2, 64, 96),     # one row: the GEMV (16-bit) or CUDA-core kernel
    (3, 7, 1, 24, 40),     # GQA 7, head_dim not a power of two
    (8, 8, 8, 16, 33),     # no GQA, 8 rows: the tensor-core kernel
    (19, 2, 1, 32, 48),    # past 16 rows: the tiled GEMM, then tg.rotary_qkv
])
def test_matches_float64_reference(rows, heads, kv_heads, head_dim, k, dtype, device):
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    expected = _reference(x, w, b, g, cache)
    out = poisoned((rows, heads, head_dim), dtype, device)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=out, **cache)
    assert q.data_ptr() == out.data_ptr()
    _check(q, cache, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("head_norms", [False, True], ids=["rotated", "head-normed"])
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim, k", [
    (1, 4, 2, 64, 96), (3, 7, 1, 24, 40), (8, 8, 8, 16, 33), (19, 2, 1, 32, 48)])
def test_a_normed_output_added_before_the_projection(rows, heads, kv_heads, head_dim, k,
                                                     head_norms, dtype, device):
    """add_normed=(h, w) as in tg.linear: the projection of s = x + rms_norm(h) * w (by the
    decode kernels up to 16 rows, by tg.rms_norm's kernel before the GEMM of more), s in
    sum_out; with Qwen3's head norms too."""
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    h = randn(rows, k, dtype=dtype, device=device, scale=3.0)
    post = randn(k, dtype=dtype, device=device)
    norms = _head_norms(head_dim, dtype, device) if head_norms else {}
    written = poisoned((rows, k), dtype, device)
    before = dict(cache, k_cache=cache["k_cache"].clone(), v_cache=cache["v_cache"].clone())
    q = tg.linear_qkv(x, w, b, norm_weight=g, add_normed=(h, post), sum_out=written,
                      **norms, **cache)
    assert_close(written, rms_norm_ref(h, post, residual=x).double(), dtype, what="stream")
    # against the stream written (rounded to bf16 by truncation in the interpreter)
    _check(q, cache, _reference(written, w, b, g, before, **norms), dtype)


def test_add_normed_inputs_are_checked(device):
    x, w, b, g, cache = _case(2, 4, 2, 16, 24, torch.float32, device)
    h = randn(2, 24, device=device)
    with pytest.raises(ValueError, match="sum_out is written only with add_normed"):
        tg.linear_qkv(x, w, b, sum_out=torch.empty_like(x), **cache)
    with pytest.raises(ValueError, match="add_normed needs sum_out"):
        tg.linear_qkv(x, w, b, add_normed=(h, g), **cache)
    with pytest.raises(ValueError, match="sum_out overlaps add_normed's h"):
        tg.linear_qkv(x, w, b, add_normed=(h, g), sum_out=h, **cache)


def _head_norms(head_dim, dtype, device):
    return {name: (1 + randn(head_dim, scale=0.3)).to(dtype=dtype, device=device)
            for name in ("q_norm_weight", "k_norm_weight")}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim, k", [
    (1, 4, 2, 64, 96),     # one row
    (3, 7, 1, 24, 40),     # GQA 7, head_dim not a power of two
    (5, 3, 3, 10, 33),     # no GQA, a head of 10
    (19, 2, 1, 32, 48),    # past 16 rows: the tiled GEMM
])
def test_head_norms_match_float64_reference(rows, heads, kv_heads, head_dim, k, dtype,
                                            device):
    """Qwen3's RMSNorm of every q and k head before its rotation: q and the cache writes
    against the float64 reference; heads scaled far apart, so that a norm over the wrong
    values (another head's, or the pairs misread) shows."""
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    n = (heads + 2 * kv_heads) * head_dim
    head_scale = torch.logspace(-1, 1, n // head_dim).repeat_interleave(head_dim)
    w = (w.float() * head_scale[:, None].to(device)).to(dtype)
    norms = _head_norms(head_dim, dtype, device)
    expected = _reference(x, w, b, g, cache, **norms)
    out = poisoned((rows, heads, head_dim), dtype, device)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=out, **cache, **norms)
    assert q.data_ptr() == out.data_ptr()
    _check(q, cache, expected, dtype)
    # with unit weights every q head leaves the norm at RMS 1, which the rotation keeps
    ones = {name: torch.ones_like(t) for name, t in norms.items()}
    rms = tg.linear_qkv(x, w, b, norm_weight=g, **cache, **ones).float().pow(2).mean(-1)
    torch.testing.assert_close(rms, torch.ones_like(rms), rtol=2e-2, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3, 19])
def test_norms_over_all_heads_match_float64_reference(rows, dtype, device):
    """OLMo 2's norms, each over all of q or all of k: the projection, then the rotary
    kernel, whatever the rows (a head's column blocks cannot see the others')."""
    heads, kv_heads, head_dim, k = 6, 2, 16, 40
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    n = (heads + 2 * kv_heads) * head_dim
    head_scale = torch.logspace(-1, 1, n // head_dim).repeat_interleave(head_dim)
    w = (w.float() * head_scale[:, None].to(device)).to(dtype)
    norms = {name: (1 + randn(width, scale=0.3)).to(dtype=dtype, device=device)
             for name, width in (("q_norm_weight", heads * head_dim),
                                 ("k_norm_weight", kv_heads * head_dim))}
    expected = _reference(x, w, b, g, cache, **norms)
    out = poisoned((rows, heads, head_dim), dtype, device)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=out, **cache, **norms)
    assert q.data_ptr() == out.data_ptr()
    _check(q, cache, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3, 19])
def test_head_norms_after_rotary_match_float64_reference(rows, dtype, device):
    """Hunyuan's order, each q and k head rotated and then normalised: the projection, then
    the rotary kernel, whatever the rows."""
    heads, kv_heads, head_dim, k = 4, 2, 16, 40
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    norms = _head_norms(head_dim, dtype, device)
    expected = _reference(x, w, b, g, cache, norm_after_rotary=True, **norms)
    before = _reference(x, w, b, g, cache, **norms)
    assert not torch.allclose(expected[0], before[0], rtol=1e-2, atol=1e-2)   # order shows
    out = poisoned((rows, heads, head_dim), dtype, device)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=out, norm_after_rotary=True, **cache,
                      **norms)
    _check(q, cache, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3, 19])
def test_head_norm_biases_match_float64_reference(rows, dtype, device):
    """A bias after each head's norm weight (Persimmon's head LayerNorms, whose heads
    loading centres, so that RMSNorm is their LayerNorm): the projection, then the rotary
    kernel, whatever the rows; biases far from zero, so that one left out shows."""
    heads, kv_heads, head_dim, k = 4, 4, 16, 40
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    norms = {**_head_norms(head_dim, dtype, device),
             **{name: (randn(head_dim) + shift).to(dtype=dtype, device=device)
                for name, shift in (("q_norm_bias", 2.0), ("k_norm_bias", -3.0))}}
    expected = _reference(x, w, b, g, cache, **norms)
    unbiased = _reference(x, w, b, g, cache, **{name: t for name, t in norms.items()
                                                 if name.endswith("weight")})
    assert not torch.allclose(expected[0], unbiased[0], rtol=0.1, atol=0.1)
    out = poisoned((rows, heads, head_dim), dtype, device)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=out, **cache, **norms)
    _check(q, cache, expected, dtype)


def test_head_norms_come_in_pairs_of_head_dim(device):
    x, w, b, g, cache = _case(2, 4, 2, 8, 12, torch.float32, device)
    norms = _head_norms(8, torch.float32, device)
    with pytest.raises(ValueError, match="give both or neither"):
        tg.linear_qkv(x, w, **cache, q_norm_weight=norms["q_norm_weight"])
    with pytest.raises(ValueError, match="k_norm_weight has shape"):
        tg.linear_qkv(x, w, **cache, **dict(norms, k_norm_weight=torch.ones(12,
                                                                            device=device)))
    with pytest.raises(TypeError, match="q_norm_weight has dtype"):
        tg.linear_qkv(x, w, **cache, **dict(norms, q_norm_weight=norms["q_norm_weight"]
                                            .double()))


# One-row GEMV launches whose column blocks lie inside a head of 16: several blocks a head
# (the last to arrive normalises it) or one, a tile and a tail, the persistent launch's flat
# tiles (with and without a tail)
HEAD_NORM_PLANS = [
    Plan("gemv", {"BLOCK_N": 4, "SPLIT": 4, "CHUNK": 16, "num_warps": 1, "num_stages": 1}),
    Plan("gemv", {"BLOCK_N": 16, "SPLIT": 2, "CHUNK": 32, "num_warps": 2, "num_stages": 1}),
    Plan("gemv", {"BLOCK_N": 8, "SPLIT": 4, "CHUNK": 32, "TAIL": 1, "num_warps": 1,
                  "num_stages": 1}),
    Plan("gemv", {"BLOCK_N": 2, "SPLIT": 8, "CHUNK": 32, "num_warps": 1, "num_stages": 1,
                  "PROGRAMS_PER_SM": 1}),
    Plan("gemv", {"BLOCK_N": 8, "SPLIT": 4, "CHUNK": 32, "TAIL": 1, "num_warps": 1,
                  "num_stages": 1, "PROGRAMS_PER_SM": 1}),
]


# Several-row launches (and the CUDA-core row kernel at one row) whose column blocks lie
# inside a head of 32: the row kernel unrolled over rows or not; the tensor-core kernel
# unsplit, split (the last split program of a block finishing it, then counting it at its
# head) and with the weight on the mma's left, a block a head
SEVERAL_ROW_HEAD_NORM_PLANS = [
    (1, Plan("matvec", {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
                        "ROW_LOOP": False})),
    (3, Plan("matvec", {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
                        "ROW_LOOP": True, "GATHER_ROWS": True})),
    (2, Plan("dot", {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2})),
    (5, Plan("dot", {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1,
                     "SPLIT_K": 3})),
    (16, Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
                      "W_LHS": True, "SPLIT_K": 2})),
]


def _head_norms_case(dtype, device, head_dim=16, heads=6, kv_heads=2, k=150, rows=1):
    """A case with head norms, heads scaled far apart (a norm over the wrong values
    shows)."""
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, device)
    head_scale = torch.logspace(-1, 1, heads + 2 * kv_heads).repeat_interleave(head_dim)
    w = (w.float() * head_scale[:, None].to(device)).to(dtype)
    return x, w, b, g, cache, _head_norms(head_dim, dtype, device)


def _forbid_the_head_norm_kernel(monkeypatch):
    from tilegraph.kernels import linear_qkv as module

    def refuse(*args, **kwargs):
        raise AssertionError("tg.rotary_qkv's kernel ran: the heads were not normalised in "
                             "the projection's epilogue")
    monkeypatch.setattr(module, "HEAD_NORM_IN_EPILOGUE", True)
    monkeypatch.setattr(module, "launch_rotary_qkv", refuse)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("plan", HEAD_NORM_PLANS, ids=str)
def test_head_norms_in_the_one_row_gemv_epilogue(plan, dtype, device, monkeypatch):
    """One row whose plan is a GEMV with column blocks dividing head_dim: one kernel, the
    last block of each q or k head to finish normalising it before its rotation."""
    x, w, b, g, cache, norms = _head_norms_case(dtype, device)
    expected = _reference(x, w, b, g, cache, **norms)
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: plan)
    _forbid_the_head_norm_kernel(monkeypatch)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=poisoned((1, 6, 16), dtype, device),
                      **cache, **norms)
    _check(q, cache, expected, dtype, what=str(plan))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, plan", SEVERAL_ROW_HEAD_NORM_PLANS, ids=str)
def test_head_norms_in_the_several_row_epilogue(rows, plan, dtype, device, monkeypatch):
    """Rows through the CUDA-core row kernel or the tensor-core kernel with column blocks
    dividing head_dim: one kernel, every row's heads normalised by the last block of each
    head to finish, at each row's own position and slot."""
    x, w, b, g, cache, norms = _head_norms_case(dtype, device, head_dim=32, heads=5,
                                                kv_heads=1, k=150, rows=rows)
    expected = _reference(x, w, b, g, cache, **norms)
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: plan)
    _forbid_the_head_norm_kernel(monkeypatch)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=poisoned((rows, 5, 32), dtype, device),
                      **cache, **norms)
    _check(q, cache, expected, dtype, what=str(plan))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows, plan", [
    (1, HEAD_NORM_PLANS[0]), (1, HEAD_NORM_PLANS[3]), *SEVERAL_ROW_HEAD_NORM_PLANS[2:4],
    (19, None)], ids=str)
def test_a_norm_weight_a_head(rows, plan, dtype, device, monkeypatch):
    """q_norm_weight (heads, head_dim) and k_norm_weight (kv_heads, head_dim), a weight a
    head (StableLM's and Cohere's per-head norms): in the epilogue of the one-row GEMV (a
    persistent launch too) and of the tensor-core kernel (split-K too), and past 16 rows in
    the second kernel; the second kv head's weight is not the first's."""
    heads, kv_heads, head_dim = 6, 2, 32
    x, w, b, g, cache, _ = _head_norms_case(dtype, device, head_dim=head_dim, heads=heads,
                                            kv_heads=kv_heads, rows=rows)
    norms = {name: (1 + randn(count, head_dim, scale=0.3)).to(dtype=dtype, device=device)
             for name, count in (("q_norm_weight", heads), ("k_norm_weight", kv_heads))}
    expected = _reference(x, w, b, g, cache, **norms)
    if plan is not None:
        monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: plan)
        _forbid_the_head_norm_kernel(monkeypatch)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=poisoned((rows, heads, head_dim), dtype,
                                                           device), **cache, **norms)
    _check(q, cache, expected, dtype, what=str(plan))


@pytest.mark.parametrize("head_dim", [24, 10])
def test_head_norms_of_heads_not_a_power_of_two(head_dim, device, monkeypatch):
    """head_dim 24 in blocks of 8 (half a head, 12, rounded up to 16 lanes) in the epilogue;
    10, which no block of a power of two divides but 2, in blocks of 2."""
    dtype = torch.bfloat16
    x, w, b, g, cache, norms = _head_norms_case(dtype, device, head_dim=head_dim, heads=3,
                                                kv_heads=1, k=40)
    expected = _reference(x, w, b, g, cache, **norms)
    block_n = 8 if head_dim == 24 else 2
    plan = Plan("gemv", {"BLOCK_N": block_n, "SPLIT": 2, "CHUNK": 32, "num_warps": 1,
                         "num_stages": 1})
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: plan)
    _forbid_the_head_norm_kernel(monkeypatch)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=poisoned((1, 3, head_dim), dtype, device),
                      **cache, **norms)
    _check(q, cache, expected, dtype, what=str(plan))


@pytest.mark.parametrize("rows, plan, switched_on", [
    (1, Plan("gemv", {"BLOCK_N": 32, "SPLIT": 2, "CHUNK": 32, "num_warps": 2,
                      "num_stages": 1}), True),
    (3, Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1,
                     "SPLIT_K": 2}), True),
    (2, Plan("gemv", {"BLOCK_N": 4, "SPLIT": 4, "CHUNK": 16, "num_warps": 1,
                      "num_stages": 1}), True),
    (1, HEAD_NORM_PLANS[0], False),
    (4, SEVERAL_ROW_HEAD_NORM_PLANS[3][1], False),
], ids=["blocks of two heads", "dot blocks of two heads", "several-row gemv",
        "switched off", "dot switched off"])
def test_head_norms_apart_where_the_epilogue_cannot(rows, plan, switched_on, device,
                                                     monkeypatch):
    """A block wider than a head, a kernel without the head-norm epilogue (the several-row
    GEMV, its rows' sums apart), or the epilogue switched off: the projection, then
    tg.rotary_qkv's kernel, as past 16 rows."""
    from tilegraph.kernels import linear_qkv as module

    dtype = torch.bfloat16
    x, w, b, g, cache, norms = _head_norms_case(dtype, device, rows=rows)
    expected = _reference(x, w, b, g, cache, **norms)
    monkeypatch.setattr(module, "HEAD_NORM_IN_EPILOGUE", switched_on)
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: plan)
    ran = []
    apart = module.launch_rotary_qkv
    monkeypatch.setattr(module, "launch_rotary_qkv", lambda *a: ran.append(1) or apart(*a))
    q = tg.linear_qkv(x, w, b, norm_weight=g, **cache, **norms)
    _check(q, cache, expected, dtype, what=str(plan))
    assert ran, "the heads were normalised in an epilogue that cannot hold them"


def test_gemma3_layer_input_one_kernel(device, monkeypatch):
    """Gemma 3's q|k|v at one row: the stream's normed add in the prologue and the head norms
    in the epilogue of the one kernel."""
    dtype = torch.bfloat16
    x, w, b, g, cache, norms = _head_norms_case(dtype, device)
    h = randn(1, x.shape[1], dtype=dtype, device=device, scale=3.0)
    post = randn(x.shape[1], dtype=dtype, device=device)
    before = dict(cache, k_cache=cache["k_cache"].clone(), v_cache=cache["v_cache"].clone())
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: HEAD_NORM_PLANS[0])
    _forbid_the_head_norm_kernel(monkeypatch)
    written = poisoned(x.shape, dtype, device)
    q = tg.linear_qkv(x, w, b, norm_weight=g, add_normed=(h, post), sum_out=written,
                      **norms, **cache)
    assert_close(written, rms_norm_ref(h, post, residual=x).double(), dtype, what="stream")
    _check(q, cache, _reference(written, w, b, g, before, **norms), dtype)


def test_head_norms_only_where_a_launch_holds_them(device):
    """Launches refuse head norms their column blocks or rows cannot hold, and outside the
    rotary epilogue."""
    x, w, b, g, cache, norms = _head_norms_case(torch.bfloat16, device, rows=2)
    from tilegraph.kernels._head_norm_store import head_norm_args

    head_norm = head_norm_args(torch.zeros(8, dtype=torch.int32, device=device),
                               *norms.values(), 1e-6)
    q = torch.empty(2, 96, dtype=x.dtype, device=device)
    args = (x, w, q, g, 1e-6, b, "rotary", None, False, rotary_args(**cache))
    for plan in (Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}),
                 Plan("gemv", {"BLOCK_N": 4, "SPLIT": 2, "CHUNK": 32, "num_warps": 1,
                               "num_stages": 1}),
                 Plan("cublas", {})):
        with pytest.raises(ValueError, match="normalises no heads"):
            decode_plan.launch(plan, *args, head_norm=head_norm)
    with pytest.raises(ValueError, match="normalises no heads in the epilogue of 'none'"):
        decode_plan.launch(SEVERAL_ROW_HEAD_NORM_PLANS[2][1], x, w, q, g, 1e-6, b, "none",
                           None, False, head_norm=head_norm)
    from tilegraph.kernels._dot_rows import launch_dot_rows
    from tilegraph.kernels._matvec import launch_matvec

    with pytest.raises(ValueError, match="column blocks dividing head_dim"):
        launch_dot_rows(x, w, q, g, 1e-6, b, "rotary", None, {"BLOCK_N": 32, "BLOCK_K": 32,
                                                              "num_warps": 4},
                        False, rotary_args(**cache), head_norm=head_norm)
    with pytest.raises(ValueError, match="not in the several-row GEMV"):
        launch_matvec(x, w, q, g, 1e-6, b, "rotary", None, {"BLOCK_N": 4, "SPLIT": 2,
                                                            "CHUNK": 32, "num_warps": 1},
                      False, rotary_args(**cache), head_norm=head_norm)


@pytest.mark.parametrize("plan", [
    Plan("gemv", {"BLOCK_N": 2, "SPLIT": 2, "CHUNK": 32, "num_warps": 1, "num_stages": 1}),
    Plan("gemv", {"BLOCK_N": 4, "SPLIT": 4, "CHUNK": 16, "num_warps": 1, "num_stages": 1}),
    Plan("gemv", {"BLOCK_N": 2, "SPLIT": 8, "CHUNK": 32, "num_warps": 1, "num_stages": 1,
                  "PROGRAMS_PER_SM": 1}),   # persistent: whole rows in one flat tile
    Plan("gemv", {"BLOCK_N": 2, "SPLIT": 4, "CHUNK": 32, "TAIL": 1, "num_warps": 1,
                  "num_stages": 1, "PROGRAMS_PER_SM": 1}),   # persistent: a head and a tail
    Plan("gemv", {"BLOCK_N": 2, "SPLIT": 16, "CHUNK": 16, "num_warps": 1, "num_stages": 1,
                  "PROGRAMS_PER_SM": 1}),   # persistent on 3 rows
    Plan("matvec", {"BLOCK_N": 4, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
                    "ROW_LOOP": True}),
    Plan("matvec", {"BLOCK_N": 8, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
                    "ROW_LOOP": False}),
    Plan("dot", {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}),
    Plan("dot", {"BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "SPLIT_K": 3}),
    Plan("dot", {"BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "SPLIT_K": 3,
                 "W_LHS": True}),
])
def test_every_decode_kernel(plan, device):
    """Tiles narrower and wider than a head, a split over K, the weight on the mma's left, a
    persistent GEMV on one row (whole rows in one tile, or a head and a tail) and on three;
    a norm prologue and a bias."""
    rows = 1 if plan.kind == "gemv" else 5
    rows = 3 if plan.config.get("CHUNK") == 16 else rows  # the GEMV's tile on 3 rows
    dtype = torch.bfloat16
    x, w, b, g, cache = _case(rows, 6, 2, 16, 150, dtype, device)
    expected = _reference(x, w, b, g, cache)
    q = poisoned((rows, 6, 16), dtype, device)
    decode_plan.launch(plan, x, w, q.view(rows, -1), g, 1e-6, b, "rotary", None, False,
                       rotary_args(**{k: v for k, v in cache.items()}))
    _check(q, cache, expected, dtype, what=str(plan))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_takes_a_norm_handed_over(dtype, device, monkeypatch):
    """x written by tg.linear told the norm weight (a decoder's residual stream): q|k|v reads
    x * g and the rows' sums of x^2 left with it, and no norm kernel runs. Even rows of 3e4
    with g = 4 put x * g past fp16's 65504: the programs that meet its inf redo their
    products from x and g."""
    from tilegraph.kernels import _dot_rows
    from tilegraph.kernels import _norm_handoff as norm_handoff

    rows, k = 6, 130
    residual, w, b, _, cache = _case(rows, 4, 2, 16, k, dtype, device)
    assert decode_plan.plan(rows, w.shape[0], k, dtype, torch.device(device),
                            fused=True).kind == "dot"
    large = (torch.arange(rows, device=device) % 2 == 0)[:, None]
    residual = torch.where(large, (residual.float().sign() * 3e4).to(dtype), residual)
    q_in = randn(rows, 40, dtype=dtype, device=device)
    wo = randn(k, 40, dtype=dtype, device=device, scale=40**-0.5)
    g = torch.full((k,), 4.0, dtype=dtype, device=device)
    x = tg.linear(q_in, wo, residual=residual, next_norm_weight=g)
    assert norm_handoff.take(x, g) is not None
    expected = _reference(x, w, b, g, cache)
    monkeypatch.setattr(_dot_rows, "_norm_rows_kernel", None)  # not subscriptable: fails
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=poisoned((rows, 4, 16), dtype, device),
                      **cache)
    _check(q, cache, expected, dtype)


def test_interleaving_permutes_columns_only(device):
    w = randn(3 * 8, 5, device=device)
    x = randn(2, 5, device=device)
    interleaved = tg.interleave_rotary_pairs(w, 8)
    assert torch.equal(interleaved[1], w[4]) and torch.equal(interleaved[2], w[1])
    assert torch.equal(deinterleave_rotary_pairs(x @ interleaved.T, 8), x @ w.T)
    bias = torch.arange(16.0)
    assert torch.equal(deinterleave_rotary_pairs(tg.interleave_rotary_pairs(bias, 8), 8), bias)
    with pytest.raises(ValueError, match="whole heads of an even head_dim"):
        tg.interleave_rotary_pairs(w, 7)


def test_position_zero_is_the_plain_projection(device):
    x, w, b, g, cache = _case(2, 2, 1, 16, 24, torch.float32, device, bias=False)
    cache["cos"][0], cache["sin"][0] = 1.0, 0.0
    cache["positions"].zero_()
    q = tg.linear_qkv(x, w, norm_weight=g, **cache)
    plain = deinterleave_rotary_pairs(tg.linear(x, w, norm_weight=g), 16).view(2, 4, 16)
    torch.testing.assert_close(q, plain[:, :2])
    slots = cache["slots"]
    torch.testing.assert_close(cache["k_cache"][slots, :, 0], plain[:, 2:3])
    torch.testing.assert_close(cache["v_cache"][slots, :, 0], plain[:, 3:])


def test_bad_inputs_are_named(device):
    x, w, b, g, cache = _case(2, 4, 2, 8, 12, torch.float32, device)
    with pytest.raises(ValueError, match=r"weight must be \(64, 12\)"):
        tg.linear_qkv(x, w[:-8], **cache)
    with pytest.raises(ValueError, match="x must be"):
        tg.linear_qkv(x[None], w, **cache)
    with pytest.raises(ValueError, match="n_heads must be a positive int"):
        tg.linear_qkv(x, w, **dict(cache, n_heads=True))
    with pytest.raises(ValueError, match="slots must be"):
        tg.linear_qkv(x, w, **dict(cache, slots=cache["slots"][:1]))
    with pytest.raises(ValueError, match="head_dim 7 must be even"):
        odd = torch.zeros(4, 2, 5, 7, device=device)
        tg.linear_qkv(x, w, **dict(cache, k_cache=odd, v_cache=odd.clone()))
    with pytest.raises(ValueError, match="k_cache and v_cache overlap"):
        tg.linear_qkv(x, w, **dict(cache, v_cache=cache["k_cache"]))
    with pytest.raises(ValueError, match="out overlaps k_cache"):
        tg.linear_qkv(x, w, **cache, out=cache["k_cache"].view(-1)[:64].view(2, 4, 8))
    with pytest.raises(TypeError, match="bias has dtype"):
        tg.linear_qkv(x, w, b.double(), **cache)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("heads, kv_heads, head_dim, k, bias", [
    (32, 4, 64, 2048, False),    # TinyLlama
    (14, 2, 64, 896, True),      # Qwen2-0.5B
    (32, 8, 128, 4096, False),   # Llama-3-8B
    (40, 8, 128, 5120, True),    # Qwen2.5-14B: 70 MiB, one row in a head and a tail tile
])
@pytest.mark.parametrize("rows", [1, 2, 5, 16])
def test_real_shapes_gpu(rows, heads, kv_heads, head_dim, k, bias, dtype):
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, "cuda", bias=bias,
                              max_seq=4099, max_batch=17)
    expected = _reference(x, w, b, g, cache)
    q = tg.linear_qkv(x, w, b, norm_weight=g, out=poisoned((rows, heads, head_dim), dtype,
                                                             "cuda"), **cache)
    _check(q, cache, expected, dtype, what=f"{rows} rows")


@pytest.mark.gpu
def test_graph_replays_follow_positions_and_slots():
    """One capture, replayed as the positions move: each replay writes where they say."""
    dtype = torch.bfloat16
    x, w, b, g, cache = _case(3, 8, 2, 64, 512, dtype, "cuda", max_seq=300)
    graph = tg.capture(lambda: tg.linear_qkv(x, w, b, norm_weight=g, **cache))
    for step in range(5):
        cache["positions"].copy_(torch.randint(0, 300, (3,)))
        cache["slots"].copy_(torch.randperm(5)[:3])
        x.copy_(randn(3, 512, dtype=dtype))
        expected = _reference(x, w, b, g, cache)
        q = graph.replay()
        _check(q, cache, expected, dtype, what=f"replay {step}")


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [1, 2, 5, 8, 16])
@pytest.mark.parametrize("heads, kv_heads, head_dim, k", [
    (16, 8, 128, 1024),    # Qwen3-0.6B
    (4, 1, 256, 1152),     # Gemma 3 1B
])
def test_head_norms_in_the_epilogue_over_graph_replays_gpu(rows, heads, kv_heads, head_dim,
                                                           k, monkeypatch):
    """Rows through the rule's plan with the head norms in its epilogue where it takes them
    (every one of these but Qwen3's two rows, the several-row GEMV), captured once and
    replayed as the positions, slots and x move: every replay equals the reference (the
    heads' arrival counters are back at zero for each)."""
    dtype = torch.bfloat16
    x, w, b, g, cache = _case(rows, heads, kv_heads, head_dim, k, dtype, "cuda", max_seq=300)
    norms = _head_norms(head_dim, dtype, "cuda")
    rule = decode_plan.rule(rows, w.shape[0], k, dtype, torch.cuda.get_device_properties(0)
                            .multi_processor_count)
    if decode_plan.takes_head_norm(rule, rows, head_dim):
        _forbid_the_head_norm_kernel(monkeypatch)
    else:
        assert rule.kind == "gemv" and rows > 1, rule
    monkeypatch.setattr(decode_plan, "plan", lambda *args, **kwargs: rule)
    graph = tg.capture(lambda: tg.linear_qkv(x, w, b, norm_weight=g, **cache, **norms))
    for step in range(5):
        cache["positions"].copy_(torch.randint(0, 300, (rows,)))
        cache["slots"].copy_(torch.randperm(rows + 2)[:rows])
        x.copy_(randn(rows, k, dtype=dtype))
        expected = _reference(x, w, b, g, cache, **norms)
        q = graph.replay()
        _check(q, cache, expected, dtype, what=f"replay {step}")


def test_compile_fullgraph_keeps_the_cache_writes(device):
    x, w, b, g, cache = _case(2, 4, 2, 8, 20, torch.float32, device)
    expected = _reference(x, w, b, g, cache)

    def step(x, k_cache, v_cache):
        return tg.linear_qkv(x, w, b, norm_weight=g, **dict(cache, k_cache=k_cache,
                                                            v_cache=v_cache))

    compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
    q = compiled(x, cache["k_cache"], cache["v_cache"])
    _check(q, cache, expected, torch.float32, what="compiled")
