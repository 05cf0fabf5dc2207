
import math

import pytest
import torch
import triton
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
import tilegraph.kernels.matmul as matmul_module
from _shapes import DTYPES
from tilegraph.kernels import autotune
from tilegraph.kernels._activation import GLU_ACTIVATIONS
from tilegraph.kernels._gemm_tf32x3 import split_rows
from tilegraph.kernels.linear import linear_ref
from tilegraph.kernels.matmul import matmul_ref
from tilegraph.testing import (
    assert_close,
    assert_grad_close,
    max_token_error,
    poisoned,
    randn,
)


def _check(m, n, k, dtype, device, activation=None, lead=()):
    a = randn(*lead, m, k, dtype=dtype, device=device)
    b = randn(k, n, dtype=dtype, device=device, scale=k**-0.5)
    out = tg.matmul(a, b, activation=activation, out=poisoned((*lead, m, n), dtype, device))
    assert_close(out, matmul_ref(a.double(), b.double(), activation=activation), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "gelu_tanh", "relu2"])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (37, 29, 65), (130, 70, 200)])
def test_matches_reference(mnk, activation, dtype, device):
    _check(*mnk, dtype, device, activation)


def test_leading_dims_and_strided_operands(device):
    _check(5, 12, 33, torch.float32, device, lead=(2, 3))
    a = randn(33, 20, device=device).t()      # (20, 33) column-major
    b = randn(17, 33, device=device).t()      # (33, 17) column-major
    assert_close(tg.matmul(a, b), matmul_ref(a.double(), b.double()), torch.float32)


def test_bad_input_and_empty(device):
    a = randn(4, 5, device=device)
    with pytest.raises(ValueError, match="a has 5 columns but b has 6 rows"):
        tg.matmul(a, randn(6, 3, device=device))
    with pytest.raises(ValueError, match="b must be 2-D"):
        tg.matmul(a, randn(2, 5, 3, device=device))
    with pytest.raises(ValueError, match="activation must be None or one of"):
        tg.matmul(a, randn(5, 3, device=device), activation="silu")
    with pytest.raises(ValueError, match="out overlaps a"):
        tg.matmul(a, randn(5, 5, device=device), out=a)
    assert tg.matmul(torch.empty(0, 5, device=device), randn(5, 3, device=device)).shape == (0, 3)
    zeros = tg.matmul(torch.empty(4, 0, device=device), torch.empty(0, 3, device=device))
    assert torch.equal(zeros, torch.zeros(4, 3, device=device))


@settings(max_examples=20, deadline=None)
@given(m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 70),
       dtype=st.sampled_from(DTYPES))
def test_any_shape(m, n, k, dtype):
    _check(m, n, k, dtype, "cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mnk", [(4096, 4096, 4096), (1031, 1023, 1011), (16, 5000, 3000)])
def test_large_gpu(mnk, dtype):
    _check(*mnk, dtype, "cuda", activation="gelu")


def _offered(monkeypatch, call) -> list[dict]:
    """The candidates the GEMM tuner is offered for the product `call` runs (the last one)."""
    seen = []

    def spy(key, run, candidates=None, **_):
        seen.append(list(candidates))
        return candidates[0]
    with monkeypatch.context() as patch:
        patch.setattr(matmul_module._tuner, "pick", spy)
        call()
    return seen[-1]


def _force(monkeypatch, config) -> None:
    monkeypatch.setattr(matmul_module._tuner, "pick", lambda key, run, candidates=None, **_: config)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_every_candidate_is_correct(dtype, monkeypatch):
    """Whatever the tuner picks must be right: force each candidate config in turn."""
    m, n, k = 300, 520, 333
    configs = _offered(monkeypatch, lambda: _check(m, n, k, dtype, "cuda", activation="relu"))
    assert matmul_module._CUBLAS in configs
    for config in configs:
        _force(monkeypatch, config)
        _check(m, n, k, dtype, "cuda", activation="relu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_an_untimed_product_runs_cublas_with_its_pass(dtype, monkeypatch):
    """Untimed (TILEGRAPH_AUTOTUNE=0) a product takes its first candidate: on CUDA, cuBLAS
    with the element-wise pass, the norm and residual still applied."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "0")
    monkeypatch.setattr(matmul_module._tuner, "_memo", {})
    monkeypatch.setattr(matmul_module._tuner, "_disk_loaded", True)
    rows, n, k = 45, 264, 136
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    g = randn(k, dtype=dtype, device="cuda")
    r = randn(rows, n, dtype=dtype, device="cuda")
    forward = lambda: tg.linear(x, w, norm_weight=g, residual=r,  # noqa: E731
                                out=poisoned((rows, n), dtype, "cuda"))
    assert _offered(monkeypatch, forward)[0] == matmul_module._CUBLAS
    calls = []
    cublas_fused = matmul_module.cublas_fused

    def spy(*args, **kwargs):
        calls.append(kwargs)
        cublas_fused(*args, **kwargs)
    monkeypatch.setattr(matmul_module, "cublas_fused", spy)
    out = forward()
    assert len(calls) == 1 and calls[0]["residual"] is r
    d = lambda t: t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), norm_weight=d(g), residual=d(r)), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("norm", [False, True])
def test_a_search_compiles_its_candidates_side_by_side_before_it_runs_them(norm, monkeypatch):
    """With timing on, the GEMM tuner's search first compiles every candidate's Triton
    kernel (pointer and TMA tiles) in threads without launching it; its timed runs then
    compile no tile more, and the pick computes right."""
    monkeypatch.setenv("TILEGRAPH_AUTOTUNE", "1")
    tuner = matmul_module._tuner
    monkeypatch.setattr(tuner, "_memo", {})
    monkeypatch.setattr(tuner, "_disk_loaded", True)
    monkeypatch.setattr(tuner, "_save_disk", lambda: None)
    index = torch.cuda.current_device()
    kernels = (matmul_module._gemm_kernel, matmul_module._gemm_tma_kernel)

    def compiled() -> int:
        return sum(len(k.device_caches[index][0]) for k in kernels if index in k.device_caches)

    seen = {}
    ahead = autotune.compile_side_by_side

    def spy(compile_only, configs):
        ahead(compile_only, configs)
        seen.update(configs=list(configs), compiled=compiled())
    monkeypatch.setattr(autotune, "compile_side_by_side", spy)
    dtype, rows, n, k = torch.bfloat16, 77, 264, 136
    x = randn(rows, k, dtype=dtype, device="cuda")
    w = randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
    g = randn(k, dtype=dtype, device="cuda") if norm else None
    r = randn(rows, n, dtype=dtype, device="cuda")
    out = tg.linear(x, w, norm_weight=g, residual=r, out=poisoned((rows, n), dtype, "cuda"))
    d = lambda t: None if t is None else t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), norm_weight=d(g), residual=d(r)), dtype)
    kinds = {("tma" if c.get("TMA") else "cublas" if c.get("CUBLAS") else "pointer")
             for c in seen["configs"]}
    assert kinds == {"pointer", "cublas"} | ({"tma"} if matmul_module._tma_ready(x) else set())
    assert compiled() == seen["compiled"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_every_tma_candidate_is_correct(dtype, device, monkeypatch):
    """The persistent TMA kernel, forced config by config: tiles past the edges (300 x 136
    outputs), a K that is not a multiple of BLOCK_K, more tiles than programs."""
    if not matmul_module._tma_ready(randn(8, 8, dtype=dtype, device=device)):
        pytest.skip("this GPU has no TMA (Hopper on)")
    m, n, k = 300, 136, 200
    check = lambda: _check(m, n, k, dtype, device, activation="gelu_tanh")  # noqa: E731
    configs = [c for c in _offered(monkeypatch, check) if c.get("TMA")]
    assert configs
    for config in configs:
        _force(monkeypatch, config)
        check()


def test_fp32_offers_3xtf32_only_where_torch_asks_for_exact_fp32(device, monkeypatch):
    a, b = randn(40, 72, device=device), randn(72, 48, device=device)
    exact = _offered(monkeypatch, lambda: tg.matmul(a, b))
    assert any(c.get("DOT_PRECISION") == "tf32x3" for c in exact)
    assert any(c.get("SPLIT_TF32") for c in exact)
    assert not any(c.get("DOT_PRECISION") or c.get("SPLIT_TF32") for c in _offered(
        monkeypatch, lambda: tg.matmul(a.bfloat16(), b.bfloat16())))  # bf16: nothing to split
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # (monkeypatch cannot set this one)
    try:
        fast = _offered(monkeypatch, lambda: tg.matmul(a, b))  # one tf32 product then
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before
    assert not any(c.get("DOT_PRECISION") or c.get("SPLIT_TF32") for c in fast)


def test_tf32_split_is_exact_and_keeps_extremes(device):
    """hi + lo == x exactly, hi has tf32's 10 mantissa bits, |lo| <= 2^-11 |x| (rounded to
    nearest); values that would round up past fp32's largest are truncated instead (lo
    finite), infinities keep lo = 0, subnormals below tf32's step stay whole in lo."""
    x = torch.cat([randn(300, device=device) * 1e3, torch.tensor(
        [3.4028235e38, -3.4e38, math.inf, -math.inf, 1e-45, 0.0, -0.0], device=device)])
    hi, lo = split_rows(x[None, :])
    assert torch.equal(hi + lo, x[None, :])
    assert not (hi.view(torch.int32) & 0x1FFF).any()
    assert (lo[0, :300].abs() <= 2.0 ** -11 * x[:300].abs()).all()
    assert torch.isfinite(hi[0, 300:302]).all() and (lo[0, 302:304] == 0).all()
    nan_hi, nan_lo = split_rows(torch.full((1, 1), math.nan, device=device))
    assert nan_hi.isnan().all() and nan_lo.isnan().all()


@pytest.mark.parametrize("split, in_loop", [(2, "none"), (3, "none"), (5, "none"), (1, "a"),
                                            (3, "a"), (1, "b"), (3, "b")])
def test_split_k_is_correct_and_reproducible(split, in_loop, device, monkeypatch):
    """3xTF32 split over K, forced: tiles past both edges, K in uneven splits (200 = 7 steps
    of 32; 5 splits round to 4 of 2 steps), a fused epilogue; the last of a tile's programs
    adds the partials in split order, so two calls give the same bits, and the second is
    right too (counters left at zero). An operand split in the loop is read through its
    strides: a transposed view here."""
    m, n, k = 150, 136, 200
    config = {**matmul_module._config(128, 64, 32, 4, 4), "SPLIT_TF32": True, "SPLIT_K": split,
              "IN_LOOP": in_loop}
    _force(monkeypatch, config)
    a = randn(k, m, device=device).t() if in_loop == "a" else randn(m, k, device=device)
    b = randn(n, k, device=device, scale=k**-0.5).t() if in_loop == "b" else \
        randn(k, n, device=device, scale=k**-0.5)
    ref = matmul_ref(a.double(), b.double(), activation="gelu")
    first, second = (tg.matmul(a, b, activation="gelu", out=poisoned((m, n), torch.float32,
                                                                     device)) for _ in range(2))
    assert_close(first, ref, torch.float32)
    assert torch.equal(first, second)


def test_split_k_is_offered_only_where_tiles_leave_sms_idle():
    fitting = matmul_module._fitting_configs
    splits = lambda m, n, k: {c.get("SPLIT_K", 1) for c in fitting(  # noqa: E731
        m, n, k, torch.float32, False, "ieee", 132)}
    assert splits(512, 1024, 4096) == {1, 2, 3, 4}   # 32 tiles of 128 x 128
    assert splits(512, 1024, 64) == {1, 2}           # two K steps: at most two splits
    assert splits(4096, 4096, 4096) == {1}           # 1024 tiles
    assert all(c.get("SPLIT_K", 1) == 1 for c in fitting(512, 1024, 4096, torch.bfloat16,
                                                         False, "tf32", 132))


@pytest.mark.parametrize("rows", [1, 3, 16, 17, 24, 25, 383, 384, 385, 512, 513, 1000, 4097])
def test_row_buckets_are_powers_of_two_or_one_and_a_half_of_one(rows):
    bucket = matmul_module.m_bucket(rows)
    assert rows <= bucket
    if rows <= 16:
        assert bucket == triton.next_power_of_2(rows)
    else:
        assert bucket < 1.5 * rows and bucket in (triton.next_power_of_2(bucket),
                                                  triton.next_power_of_2(bucket) * 3 // 4)


def test_384_and_512_rows_are_tuned_apart(monkeypatch, device):
    """Their tile counts differ, and so may their best split over K (session 26 measured
    512 tokens 6% slower on 384's choice); 400 rows share 512's."""
    keys = []

    def spy(key, run, candidates=None, **_):
        keys.append(key)
        return candidates[0]
    monkeypatch.setattr(matmul_module._tuner, "pick", spy)
    for rows in (384, 400, 512):
        tg.matmul(randn(rows, 16, device=device), randn(16, 16, device=device))
    assert keys[0] != keys[1] == keys[2]


@pytest.mark.gpu
def test_3xtf32_is_as_accurate_as_cublas_exact_fp32(monkeypatch):
    """Per-row error against float64 over a long sum with rows and columns of magnitudes
    spread over six decades: 3xTF32, in the loop or over operands split first, keeps fp32's
    accuracy (within 4x of cuBLAS's SGEMM; it was below it in research/probe_split_tf32.py)."""
    rows, k, n = 256, 4096, 192
    spread = lambda *shape: 10 ** (6 * torch.rand(*shape) - 3)  # noqa: E731
    a = (randn(rows, k) * spread(rows, 1) * spread(1, k)).cuda()
    b = randn(k, n, scale=k ** -0.5).cuda()
    ref = a.double() @ b.double()
    cublas = max_token_error(a @ b, ref)
    configs = [c for c in _offered(monkeypatch, lambda: tg.matmul(a, b))
               if c.get("DOT_PRECISION") == "tf32x3" or c.get("SPLIT_TF32")]
    assert configs
    for config in configs:
        _force(monkeypatch, config)
        error = max_token_error(tg.matmul(a, b, out=poisoned((rows, n), torch.float32, "cuda")),
                                ref)
        assert error <= 4 * max(cublas, 1e-7), (config, error, cublas)


FUSED = [  # (bias, norm, activation, residual) of tg.linear's many-row path
    (True, True, "gelu_tanh", True), (False, True, None, True), (True, False, "relu", False),
    (False, False, "swiglu", True), (True, True, "geglu_tanh", False),
]


@pytest.mark.parametrize("fused", FUSED)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_every_way_of_a_fused_product_is_correct(fused, dtype, device, monkeypatch):
    """tg.linear's many-row path through each kind of candidate, forced: the pointer kernel,
    the TMA kernel (weight read transposed, norm as a pass of its own, epilogue through
    pointers) and cuBLAS plus the element-wise epilogue; forward and, with the pre-activation
    stored, backward."""
    bias, norm, activation, residual = fused
    rows, n, k = 70, 48, 40
    x = randn(rows, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    b = randn(n, dtype=dtype, device=device) if bias else None
    g = randn(k, dtype=dtype, device=device) if norm else None
    r = randn(rows, n // 2 if activation in GLU_ACTIVATIONS else n, dtype=dtype, device=device) \
        if residual else None
    d = lambda t: None if t is None else t.double()  # noqa: E731
    ref = linear_ref(d(x), d(w), d(b), norm_weight=d(g), activation=activation, residual=d(r))
    forward = lambda: tg.linear(x, w, b, norm_weight=g, activation=activation,  # noqa: E731
                                residual=r, out=poisoned(ref.shape, dtype, device))
    kinds = {"pointer": None, "tma": None, "split tf32": None, "split tf32, split K": None,
             "split tf32, a in the loop": None, "split tf32, b in the loop": None,
             "cublas": matmul_module._CUBLAS,
             "cublas, bias in the pass": matmul_module._CUBLAS_BIAS_IN_PASS if bias else None}
    for config in _offered(monkeypatch, forward):
        kind = ("tma" if config.get("TMA") else "cublas" if config.get("CUBLAS")
                else f"split tf32, {config['IN_LOOP']} in the loop" if config.get("IN_LOOP")
                else "split tf32, split K" if config.get("SPLIT_K")
                else "split tf32" if config.get("SPLIT_TF32") else "pointer")
        kinds[kind] = kinds[kind] or config
    tma_expected = activation not in GLU_ACTIVATIONS and matmul_module._tma_ready(x)
    assert (kinds["tma"] is not None) == tma_expected
    assert (kinds["split tf32"] is not None) == (dtype == torch.float32)
    assert (kinds["split tf32, split K"] is not None) == (dtype == torch.float32)
    for side in "ab":
        assert (kinds[f"split tf32, {side} in the loop"] is not None) == (dtype == torch.float32)
    for kind, config in kinds.items():
        if config is None:
            continue
        _force(monkeypatch, config)
        assert_close(forward(), ref, dtype, what=kind)
        x_grad = x.detach().requires_grad_()
        y = tg.linear(x_grad, w, b, norm_weight=g, activation=activation, residual=r)
        assert_close(y.detach(), ref, dtype, what=f"{kind}, differentiable path")
        dy = randn(*y.shape, dtype=dtype, device=device)
        y.backward(dy)
        x_ref = d(x).requires_grad_()
        linear_ref(x_ref, d(w), d(b), norm_weight=d(g), activation=activation,
                   residual=d(r)).backward(d(dy))
        assert_grad_close(x_grad.grad, x_ref.grad, dtype, what=f"{kind}, dx")


def test_tma_only_for_aligned_row_major_16bit(device):
    ready = matmul_module._tma_ready
    bf16 = randn(16, 24, dtype=torch.bfloat16, device=device)
    expected = ready(bf16)  # False only on a CUDA GPU older than Hopper
    assert ready(randn(16, 24, device=device)) is False                        # fp32
    assert ready(bf16.t()) is False                                            # column-major
    assert ready(randn(16, 21, dtype=torch.bfloat16, device=device)) is False  # 42-byte rows
    assert ready(bf16[:, 1:9]) is False                                        # base not aligned
    assert ready(bf16[:, 8:16]) is expected
