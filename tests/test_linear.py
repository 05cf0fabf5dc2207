import itertools

import pytest
import torch
import triton
from hypothesis import given, settings
from hypothesis import strategies as st

import tilegraph as tg
import tilegraph.kernels._matvec as matvec_module
from _launches import record_launches
from _shapes import DTYPES
from tilegraph.kernels import _dot_rows, decode_plan
from tilegraph.kernels._activation import GLU_ACTIVATIONS
from tilegraph.kernels._launch import (
    ASSUMED_SM_COUNT,
    _resident,
    resident_programs,
    sm_count,
    supports_pdl,
)
from tilegraph.kernels.decode_plan import Plan
from tilegraph.kernels.linear import interleave_gate_up, linear_ref
from tilegraph.kernels.rms_norm import rms_norm_ref
from tilegraph.testing import assert_close, poisoned, randn

PARTS = [  # (bias, norm, activation, residual): every part optional
    (False, False, None, False), (True, False, None, False), (False, True, None, True),
    (True, True, "gelu", True), (False, False, "relu", False), (True, True, "gelu_tanh", False),
    (True, True, "relu2", True),
]


def _make(lead, n, k, dtype, device, bias, norm, residual):
    x = randn(*lead, k, dtype=dtype, device=device)
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    b = randn(n, dtype=dtype, device=device) if bias else None
    g = randn(k, dtype=dtype, device=device) if norm else None
    r = randn(*lead, n, dtype=dtype, device=device) if residual else None
    return x, w, b, g, r


def _check(lead, n, k, dtype, device, bias, norm, activation, residual):
    x, w, b, g, r = _make(lead, n, k, dtype, device, bias, norm, residual)
    out = tg.linear(x, w, b, norm_weight=g, activation=activation, residual=r,
                    out=poisoned((*lead, n), dtype, device))
    d = lambda t: None if t is None else t.double()  # noqa: E731
    ref = linear_ref(d(x), d(w), d(b), norm_weight=d(g), activation=activation, residual=d(r))
    assert_close(out, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("parts", PARTS)
@pytest.mark.parametrize("lead", [(1,), (3,), (2, 4), (9,), (2, 8)])  # decode path: <= 16 rows
def test_matvec_path(lead, parts, dtype, device):
    _check(lead, 29, 781, dtype, device, *parts)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("parts", PARTS)
@pytest.mark.parametrize("lead", [(17,), (3, 13)])           # tiled path: > 16 rows
def test_tiled_path(lead, parts, dtype, device):
    _check(lead, 23, 70, dtype, device, *parts)


def test_residual_may_be_out(device):
    x, w, _, g, r = _make((2,), 16, 32, torch.float32, device, False, True, True)
    expected = linear_ref(x.double(), w.double(), norm_weight=g.double(), residual=r.double())
    assert tg.linear(x, w, norm_weight=g, residual=r, out=r) is r
    assert_close(r, expected, torch.float32)


def test_strided_inputs(device):
    x = randn(40, 3, device=device).t()            # (3, 40), rows not contiguous
    w = randn(40, 24, device=device).t()           # (24, 40), transposed weight
    assert_close(tg.linear(x, w), linear_ref(x.double(), w.double()), torch.float32)


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(w_shape=(8, 5)), ValueError, "x has 6 features but weight expects 5"),
    (dict(w_shape=(8,)), ValueError, "weight must be 2-D"),
    (dict(bias=(7,)), ValueError, r"bias has shape \(7,\), expected \(8,\)"),
    (dict(norm_weight=(8,)), ValueError, r"norm_weight has shape \(8,\), expected \(6,\)"),
    (dict(residual=(3, 6)), ValueError, r"residual has shape \(3, 6\), expected \(3, 8\)"),
    (dict(activation="tanh"), ValueError, "activation must be None or one of"),
    (dict(w_dtype=torch.float16), TypeError, "weight has dtype torch.float16 but x has"),
    (dict(norm_eps=-1e-6), ValueError, "eps must be a non-negative number"),
])
def test_bad_input(device, kwargs, error, match):
    x = torch.ones(3, 6, device=device)
    w = torch.ones(kwargs.pop("w_shape", (8, 6)), dtype=kwargs.pop("w_dtype", torch.float32),
                   device=device)
    for name in ("bias", "norm_weight", "residual"):
        if name in kwargs:
            kwargs[name] = torch.ones(kwargs[name], device=device)
    bias = kwargs.pop("bias", None)
    with pytest.raises(error, match=match):
        tg.linear(x, w, bias, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 3, 8, 17])
@pytest.mark.parametrize("activation", [None, "geglu_tanh"])
def test_a_normed_output_added_to_the_stream_before_the_projection(rows, activation, dtype,
                                                                  device):
    """add_normed=(h, w): the projection of s = x + rms_norm(h) * w (rounded as tg.rms_norm
    rounds it), s written to sum_out; by the decode kernels up to 16 rows, by tg.rms_norm's
    kernel before the GEMM of more; the handoff of the next norm beside it."""
    x = randn(rows, 300, dtype=dtype, device=device)
    h = randn(rows, 300, dtype=dtype, device=device, scale=4.0)
    # norm weights about 1, as models' are
    post, g = ((1 + randn(300, scale=0.2)).to(dtype=dtype, device=device) for _ in range(2))
    w = randn(140, 300, dtype=dtype, device=device, scale=300**-0.5)
    stream = rms_norm_ref(h, post, 1e-5, residual=x)
    written = poisoned((rows, 300), dtype, device)
    n_out = 70 if activation else 140
    out = tg.linear(x, w, norm_weight=g, norm_eps=1e-5, activation=activation,
                    add_normed=(h, post), sum_out=written,
                    out=poisoned((rows, n_out), dtype, device))
    assert_close(written, stream.double(), dtype, what="the stream")
    # against the stream written (the interpreter rounds bf16 by truncation, the reference
    # to nearest: their streams differ by an ulp here and there)
    assert_close(out, linear_ref(written.double(), w.double(), norm_weight=g.double(),
                                 norm_eps=1e-5, activation=activation), dtype)
    handed = tg.linear(x, w, norm_weight=g, norm_eps=1e-5, add_normed=(h, post),
                       sum_out=written, next_norm_weight=randn(140, dtype=dtype, device=device))
    assert_close(handed, linear_ref(stream.double(), w.double(), norm_weight=g.double(),
                                    norm_eps=1e-5), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("rows, split_tile", [(1, False), (2, False), (2, True), (3, False),
                                              (8, False)])
def test_normed_adds_chained_in_a_graph_equal_eager_over_replays(rows, split_tile,
                                                                  monkeypatch):
    """Gemma's order in bf16 (the output projection; gate/up adding its normed output to the
    stream; down; the next projection adding that), captured with PDL between the kernels
    and replayed 50 times with fresh inputs: equal to the same calls run eagerly, bit for
    bit, and to the float64 reference rounded where the kernels round. At two rows gate/up
    runs the several-row GEMV, persistent by the rule or its split tile (split_tile), whose
    norm of h must wait for the kernel that wrote h."""
    bf16, d, f = torch.bfloat16, 1152, 3072
    if split_tile:
        rule = decode_plan.plan
        split = Plan("gemv", {"BLOCK_N": 4, "SPLIT": 8, "CHUNK": 128,
                              "num_warps": 4, "num_stages": 1})
        monkeypatch.setattr(decode_plan, "plan", lambda rows_, n, *args, **kwargs:
                            split if n == 2 * f else rule(rows_, n, *args, **kwargs))
    w_o = randn(d, d, dtype=bf16, device="cuda", scale=d**-0.5)
    w_up = randn(2 * f, d, dtype=bf16, device="cuda", scale=d**-0.5)
    w_down = randn(d, f, dtype=bf16, device="cuda", scale=f**-0.5)
    post1, post2, g = ((1 + randn(d, scale=0.2)).to(bf16).cuda() for _ in range(3))

    def chain(x, a):
        s1, s2 = torch.empty_like(x), torch.empty_like(x)
        hidden = tg.linear(x, w_up, norm_weight=g, activation="geglu_tanh",
                           add_normed=(tg.linear(a, w_o), post1), sum_out=s1)
        y = tg.linear(s1, w_o, norm_weight=g, add_normed=(tg.linear(hidden, w_down), post2),
                      sum_out=s2)
        return y, s2

    def reference(x, a):
        def rounded(t):
            return t.to(bf16)
        s1 = rms_norm_ref(rounded(linear_ref(a.double(), w_o.double())), post1, residual=x)
        hidden = rounded(linear_ref(s1.double(), w_up.double(), norm_weight=g.double(),
                                    activation="geglu_tanh"))
        s2 = rms_norm_ref(rounded(linear_ref(hidden.double(), w_down.double())), post2,
                          residual=s1)
        return linear_ref(s2.double(), w_o.double(), norm_weight=g.double()), s2

    graph = tg.capture(chain, randn(rows, d, dtype=bf16, device="cuda"),
                       randn(rows, d, dtype=bf16, device="cuda"))
    for _ in range(50):
        inputs = [randn(rows, d, dtype=bf16, device="cuda") for _ in range(2)]
        for static, fresh in zip(graph.inputs, inputs, strict=True):
            static.copy_(fresh)
        replayed = graph.replay()
        eager = chain(*inputs)
        for got, want, expected in zip(replayed, eager, reference(*inputs), strict=True):
            assert torch.equal(got, want)
            assert_close(got, expected.double(), bf16)


@pytest.mark.parametrize("change, error, match", [
    ("no sum_out", ValueError, "add_normed needs sum_out"),
    ("sum_out alone", ValueError, "sum_out is written only with add_normed"),
    ("not a pair", TypeError, r"add_normed must be a pair \(h, w\)"),
    ("h's shape", ValueError, r"add_normed's h has shape \(3, 5\), expected \(3, 6\)"),
    ("w's dtype", TypeError, "add_normed's w has dtype torch.float16"),
    ("sum_out is x", ValueError, "sum_out overlaps x in memory"),
    ("sum_out is h", ValueError, "sum_out overlaps add_normed's h in memory"),
    ("sum_out's shape", ValueError, r"sum_out has shape \(6,\), expected \(3, 6\)"),
    ("sum_out's dtype", TypeError, "sum_out has dtype torch.float16 but x has"),
    ("grad", ValueError, "autograd cannot follow"),
])
def test_bad_add_normed(change, error, match, device):
    x, h = torch.ones(3, 6, device=device), torch.ones(3, 6, device=device)
    w, post = torch.ones(8, 6, device=device), torch.ones(6, device=device)
    kwargs = dict(add_normed=(h, post), sum_out=torch.empty(3, 6, device=device))
    if change == "no sum_out":
        kwargs.pop("sum_out")
    elif change == "sum_out alone":
        kwargs.pop("add_normed")
    elif change == "not a pair":
        kwargs["add_normed"] = (h,)
    elif change == "h's shape":
        kwargs["add_normed"] = (torch.ones(3, 5, device=device), post)
    elif change == "w's dtype":
        kwargs["add_normed"] = (h, post.half())
    elif change == "sum_out is x":
        kwargs["sum_out"] = x
    elif change == "sum_out is h":
        kwargs["sum_out"] = h[:, :]
    elif change == "sum_out's shape":
        kwargs["sum_out"] = torch.empty(6, device=device)
    elif change == "sum_out's dtype":
        kwargs["sum_out"] = torch.empty(3, 6, dtype=torch.float16, device=device)
    elif change == "grad":
        w.requires_grad_(True)
    with pytest.raises(error, match=match):
        tg.linear(x, w, **kwargs)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_an_l2_prefetch_of_later_weights_changes_no_result(dtype, device):
    """A one-row call given l2_ahead (a few bytes, bytes not a whole number of L2 lines, more
    than the weight itself, none) computes what it computes without; so does a call of two
    rows, which ignores it. The tensor must be contiguous and on x's device."""
    x, w, b, _, r = _make((1,), 300, 200, dtype, device, True, False, True)
    assert decode_plan.plan(1, 300, 200, dtype, torch.device(device)).kind == "gemv"
    later = randn(1000, 300, dtype=dtype, device=device)
    expected = tg.linear(x, w, b, residual=r)
    for ahead in (later[:1], later.view(-1)[:1001], later, later[:0]):
        out = poisoned((1, 300), dtype, device)
        assert torch.equal(tg.linear(x, w, b, residual=r, out=out, l2_ahead=ahead), expected)
    x2, r2 = randn(2, 200, dtype=dtype, device=device), randn(2, 300, dtype=dtype, device=device)
    assert torch.equal(tg.linear(x2, w, b, residual=r2, l2_ahead=later),
                       tg.linear(x2, w, b, residual=r2))
    for bad in (later.t(), later[:, :7], "weights"):
        with pytest.raises(ValueError, match="l2_ahead must be a contiguous tensor"):
            tg.linear(x, w, l2_ahead=bad)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", ["split", "small persistent"])
@pytest.mark.parametrize("ahead_elements", [1, 1001, 3 * 2**20 + 5])
def test_an_l2_prefetch_is_asked_of_l2_by_the_one_row_gemv(ahead_elements, tile):
    """The one-row GEMV launched a program a row block and persistent, given l2_ahead,
    compiles the prefetch (prefetch.global.L2 in its PTX; none without) and gives the very
    values it gives without, over rows of 896 columns with a norm and SwiGLU."""
    n, k, dtype = 2 * 2437, 896, torch.bfloat16
    config = (matvec_module.split_gemv_config(n, k) if tile == "split"
              else matvec_module.small_persistent_gemv_config(n, k))
    x, w, b, g, _ = _make((1,), n, k, dtype, "cuda", True, True, False)
    later = randn(ahead_elements, dtype=dtype, device="cuda")
    outs = []
    for ahead in (None, later):
        out = poisoned((1, n // 2), dtype, "cuda")
        compiled = matvec_module.launch_matvec(x, w, out, g, 1e-6, b, "swiglu", None, config,
                                               True, l2_ahead=ahead)
        assert ("prefetch.global.L2" in compiled.asm["ptx"]) == (ahead is not None), tile
        outs.append(out)
    assert_close(outs[0], linear_ref(x.double(), w.double(), b.double(),
                                     norm_weight=g.double(), activation="swiglu"), dtype)
    assert torch.equal(outs[0], outs[1])


def test_refuses_out_aliasing_x_and_handles_empty(device):
    x = randn(4, 4, device=device)
    with pytest.raises(ValueError, match="out overlaps x"):
        tg.linear(x, randn(4, 4, device=device), out=x)
    assert tg.linear(torch.empty(0, 4, device=device), x).shape == (0, 4)
    with pytest.raises(ValueError, match="0 input features"):
        tg.linear(torch.empty(2, 0, device=device), torch.empty(3, 0, device=device))


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 20), n=st.integers(1, 40), k=st.integers(1, 90),
       dtype=st.sampled_from(DTYPES), parts=st.sampled_from(PARTS))
def test_any_shape(rows, n, k, dtype, parts):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    _check((rows,), n, k, dtype, device, *parts)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 5, 8, 16, 100, 1031])
def test_decode_shapes_gpu(rows, dtype):
    _check((rows,), 2048, 2048, dtype, "cuda", False, True, None, True)
    _check((rows,), 1023, 781, dtype, "cuda", True, True, "gelu", True)


@pytest.mark.parametrize("row_max", [64, None])  # the row read in steps / held at once
def test_norm_kernel_before_the_tensor_cores(row_max, device, monkeypatch):
    import tilegraph.kernels._dot_rows as dot_rows

    if row_max is not None:
        monkeypatch.setattr(dot_rows, "NORM_ROW_MAX", row_max)
    x, w, b, g, r = _make((3,), 37, 150, torch.bfloat16, device, False, True, True)
    out = poisoned((3, 37), torch.bfloat16, device)
    plan = Plan("dot", {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2})
    decode_plan.launch(plan, x, w, out, g, 1e-6, None, "none", r, False)
    d = lambda t: t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), norm_weight=d(g), residual=d(r)), torch.bfloat16)


@pytest.mark.parametrize("tile", [
    {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2},  # several steps, one slice
    {"BLOCK_N": 16, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1, "SPLIT_K": 3},  # a step each
    {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "SPLIT_K": 2, "W_LHS": True},
])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [2, 16])
def test_norm_in_the_tensor_core_loop(tile, dtype, rows, device):
    x, w, b, g, r = _make((rows,), 37, 150, dtype, device, True, True, True)
    out = poisoned((rows, 37), dtype, device)
    plan = Plan("dot", {**tile, "NORM_IN_LOOP": True})
    decode_plan.launch(plan, x, w, out, g, 1e-6, b, "none", r, False)
    d = lambda t: t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), d(b), norm_weight=d(g), residual=d(r)), dtype)


def test_norm_runs_in_the_loop_where_a_program_reads_its_slice_at_once():
    from tilegraph.kernels._dot_rows import norm_in_loop

    whole = {"BLOCK_N": 32, "BLOCK_K": 512, "SPLIT_K": 4}
    assert norm_in_loop(whole, 2048, 2048, 132)               # 256 programs, one step
    assert not norm_in_loop(whole, 4096, 2048, 132)           # 512 programs
    assert norm_in_loop(whole, 4096, 2048, 264)
    assert norm_in_loop({"BLOCK_N": 64, "BLOCK_K": 256}, 300, 200, None)
    assert not norm_in_loop({**whole, "BLOCK_K": 128}, 2048, 2048, 132)  # four steps
    assert not norm_in_loop({"BLOCK_N": 64, "BLOCK_K": 256}, 300, 2048, None)


def test_split_k_deals_steps_evenly_or_cuts_slices_of_equal_width():
    from tilegraph.kernels._split_workspace import plan_split

    cpu = torch.device("cpu")
    placeholder = torch.empty(1)
    # 9 steps of 32 columns (the last of 14) in 4 slices: 2-2-2-3 steps dealt out, or slices
    # of 3 steps, the fourth dropped; 3 slices of 16 steps: 5-5-6, or 6-6-4
    assert plan_split(cpu, 270, 32, 4, 10, 2, placeholder, even=True)[:2] == (4, 32)
    assert plan_split(cpu, 270, 32, 4, 10, 2, placeholder)[:2] == (3, 96)
    assert plan_split(cpu, 2048, 128, 3, 10, 2, placeholder, even=True)[:2] == (3, 128)
    assert plan_split(cpu, 2048, 128, 3, 10, 2, placeholder)[:2] == (3, 768)
    assert plan_split(cpu, 100, 128, 3, 10, 2, placeholder, even=True)[:2] == (1, 100)


@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("split", [3, 4, 9])
@pytest.mark.parametrize("w_lhs", [False, True])
def test_split_k_of_uneven_steps(even, split, w_lhs, device):
    """K of 9 steps (the last partial) in slices whose steps differ, dealt out evenly or of
    equal width, with a residual: every column summed once."""
    x, w, b, _, r = _make((5,), 40, 270, torch.bfloat16, device, True, False, True)
    out = poisoned((5, 40), torch.bfloat16, device)
    plan = Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2,
                        "SPLIT_K": split, "W_LHS": w_lhs, "EVEN_SPLIT": even})
    decode_plan.launch(plan, x, w, out, None, 0.0, b, "none", r, False)
    d = lambda t: t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), d(b), residual=d(r)), torch.bfloat16)


@pytest.mark.parametrize("asked", ["plan", "setting"])
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("even", [True, False])
@pytest.mark.parametrize("split", [1, 4, 9, 12])
def test_one_step_slices_compile_the_k_loop_out(split, even, norm, asked, device,
                                                monkeypatch):
    """Asked by the plan's config (ONE_STEP, as a step's choice) or by COMPILE_ONE_STEP, K of
    9 steps in 1, 4, 9 or 12 slices: the launch leaves the K loop out exactly where every
    slice is one step (9 and 12 slices, 12 taken as 9), and every column is summed once
    either way, with the norm in the loop too."""
    monkeypatch.setattr(_dot_rows, "COMPILE_ONE_STEP", asked == "setting")
    launched = record_launches(monkeypatch, _dot_rows, "_dot_rows_kernel", "ONE_STEP")
    x, w, _, g, r = _make((5,), 40, 270, torch.bfloat16, device, False, norm, True)
    out = poisoned((5, 40), torch.bfloat16, device)
    config = {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 1,
              "SPLIT_K": split, "W_LHS": True, "EVEN_SPLIT": even, "NORM_IN_LOOP": norm}
    plan = Plan("dot", {**config, "ONE_STEP": True} if asked == "plan" else config)
    assert _dot_rows.one_step_a_slice(270, config) == (split >= 9)
    decode_plan.launch(plan, x, w, out, g, 1e-6, None, "none", r, False)
    assert launched == [split >= 9]
    d = lambda t: None if t is None else t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), norm_weight=d(g), norm_eps=1e-6, residual=d(r)),
                 torch.bfloat16)


@pytest.mark.parametrize("rows", [1, 3])
@pytest.mark.parametrize("k", [200, 256, 300])
def test_rows_that_fit_one_tile_compile_the_k_loop_out(k, rows, device, monkeypatch):
    """With COMPILE_ONE_TILE, the GEMV's split tile of 2 x 128 columns leaves its K loop out
    exactly where the row fits it (200 and 256 columns, not 300), at one row and at several,
    and every column is summed once either way, with a norm and a residual."""
    monkeypatch.setattr(matvec_module, "COMPILE_ONE_TILE", True)
    launched = []
    launch = matvec_module.launch

    def spy(kernel, grid, *args, **kwargs):
        launched.append(kwargs.get("ONE_TILE", False))
        return launch(kernel, grid, *args, **kwargs)

    monkeypatch.setattr(matvec_module, "launch", spy)
    x, w, _, g, r = _make((rows,), 40, k, torch.bfloat16, device, False, True, True)
    out = poisoned((rows, 40), torch.bfloat16, device)
    config = {"BLOCK_N": 4, "SPLIT": 2, "CHUNK": 128, "num_warps": 4, "num_stages": 1}
    matvec_module.launch_matvec(x, w, out, g, 1e-6, None, "none", r, config, False)
    assert launched == [k <= 256]
    d = lambda t: None if t is None else t.double()  # noqa: E731
    assert_close(out, linear_ref(d(x), d(w), norm_weight=d(g), norm_eps=1e-6, residual=d(r)),
                 torch.bfloat16)


def _large_fp16_rows(rows, device):
    """x (rows, 130), its even rows of +-3e4, and g of 4: x * g is past fp16's 65504 there,
    x / rms(x) * g is 4; odd rows are random, so a scale meant for a large row that leaks
    into its neighbours shows."""
    x, w, _, _, _ = _make((rows,), 40, 130, torch.float16, device, False, False, False)
    large = (x.float().sign() * 3e4).to(torch.float16)
    x = torch.where((torch.arange(rows, device=device) % 2 == 0)[:, None], large, x)
    g = torch.full((130,), 4.0, dtype=torch.float16, device=device)
    return x, w, g, linear_ref(x.double(), w.double(), norm_weight=g.double())


@pytest.mark.parametrize("rows", [4, 40])  # the tensor-core decode kernel; the GEMM
def test_fp16_norm_of_large_rows_does_not_overflow(rows, device):
    """x * g unnormalised in fp16 is inf; normalised first, x / rms(x) * g, it is about g."""
    x, w, g, expected = _large_fp16_rows(rows, device)
    out = tg.linear(x, w, norm_weight=g, out=poisoned((rows, 40), torch.float16, device))
    assert_close(out, expected, torch.float16)


@pytest.mark.parametrize("tile", [
    {"BLOCK_N": 16, "BLOCK_K": 256, "num_warps": 4, "num_stages": 1},  # one step: the rule's
    {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "NORM_IN_LOOP": True},
    {"BLOCK_N": 32, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1, "SPLIT_K": 3,
     "W_LHS": True, "NORM_IN_LOOP": True},
])
def test_fp16_norm_of_large_rows_does_not_overflow_in_the_tensor_core_loop(tile, device):
    """The same with the norm in the tensor-core kernel's loop, where x * g goes to the mma:
    the rows scaled into fp16's range there and back after, in one step, several, a split."""
    x, w, g, expected = _large_fp16_rows(5, device)
    out = poisoned((5, 40), torch.float16, device)
    decode_plan.launch(Plan("dot", tile), x, w, out, g, 1e-6, None, "none", None, False)
    assert_close(out, expected, torch.float16)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [2, 8, 16])
@pytest.mark.parametrize("k", [5000, 14336, 40000])  # one read of the row; past NORM_ROW_MAX
def test_long_rows_with_a_norm_gpu(k, rows, dtype):
    _check((rows,), 300, k, dtype, "cuda", False, True, None, True)


@pytest.mark.parametrize("element_size", [2, 4])
@pytest.mark.parametrize("rows, k", [(1, 7), (1, 5000), (1, 96), (3, 781), (8, 3000)])
def test_matvec_rule_keeps_tiles_bounded(rows, k, element_size):
    c = matvec_module.matvec_config(rows, 64, k, element_size)
    assert 1 <= c["num_warps"] <= 16
    if "SPLIT" in c:  # the one-row kernel: a row split in chunks
        assert rows == 1
        block_k = (c["SPLIT"] + c.get("TAIL", 0)) * c["CHUNK"]
        assert c["BLOCK_N"] * block_k <= 128 * 32 * c["num_warps"]      # no spills
        assert k <= block_k or "TAIL" not in c                           # a tail ends the row
        assert 16 <= block_k <= max(16, triton.next_power_of_2(k))      # no tile wider than K
        return
    rows_at_once = 1 if c["ROW_LOOP"] else triton.next_power_of_2(rows)
    assert rows_at_once * c["BLOCK_N"] * c["BLOCK_K"] <= 128 * 32 * c["num_warps"]  # no spills
    assert 16 <= c["BLOCK_K"] <= max(16, triton.next_power_of_2(k))  # no tile wider than K
    if rows == 1:
        assert c["BLOCK_N"] * c["BLOCK_K"] * element_size <= 32 * 1024


def test_matvec_rule_gathers_the_rows_sums_except_at_three_or_four_rows():
    """Where gathering each step's sums won on the H200 (2 and 5-8 rows) and where it split
    gains and losses (3-4 rows, which keep the row-by-row turn; notes/kernels.md, 105)."""
    for element_size in (2, 4):
        gathered = {rows: matvec_module.matvec_config(rows, 1000, 1000, element_size)
                    ["GATHER_ROWS"] for rows in range(2, 17)}
        assert gathered == {rows: rows not in (3, 4) for rows in range(2, 17)}


def test_matvec_rule_picks_the_swept_batch_1_shapes():
    """The fastest shapes of rotated-weight and whole-stack sweeps on H100
    (notes/kernels.md, notes/decode.md)."""
    rule = matvec_module.matvec_config
    shape = lambda c: (c["BLOCK_N"], c["BLOCK_K"], c["num_warps"])  # noqa: E731
    split = lambda c: (c["BLOCK_N"], c["SPLIT"], c["CHUNK"], c["num_warps"])  # noqa: E731
    assert shape(rule(1, 2048, 2048, 4)) == (4, 2048, 4)      # fp32 d=2048
    assert split(rule(1, 2048, 2048, 2)) == (8, 16, 128, 4)   # bf16 d=2048: narrow, long rows
    assert split(rule(1, 2560, 2048, 2)) == (8, 16, 128, 4)   # 10 MiB: a program a row block
    # from 20 MiB up persistent: whole rows (padded to a power of two, or past 4096 columns a
    # head and a tail tile) in 32 KB over 8 warps, as many programs an SM as fit
    persistent = lambda c: (*split(c), c.get("TAIL", 0), c.get("PROGRAMS_PER_SM"))  # noqa: E731
    fit = matvec_module.FIT
    assert persistent(rule(1, 11264, 2048, 2)) == (8, 16, 128, 8, 0, fit)  # a wide gate/up
    assert persistent(rule(1, 2048, 5632, 2)) == (2, 32, 128, 8, 16, fit)  # 4096 + 2048
    assert persistent(rule(1, 4096, 5120, 2)) == (2, 32, 128, 8, 8, fit)   # 4096 + 1024
    assert persistent(rule(1, 3072, 4096, 2)) == (4, 32, 128, 8, 0, fit)
    assert persistent(rule(1, 9216, 3072, 2)) == (4, 32, 128, 8, 0, fit)   # padded to 4096
    assert persistent(rule(1, 2048, 7168, 2)) == (2, 64, 128, 8, 0, fit)   # no shorter pair
    assert persistent(rule(1, 28672, 4096, 2)) == (4, 32, 128, 8, 0, fit)  # 4096 columns
    assert persistent(rule(1, 3240, 3240, 2)) == (4, 32, 128, 8, 0, fit)   # 20.02 MiB
    assert persistent(rule(1, 3236, 3236, 2))[-1] is None               # 19.97 MiB
    assert "PROGRAMS_PER_SM" not in rule(1, 1024, 12288, 2)           # past 8192 columns
    assert shape(rule(1, 512, 512, 4)) == (8, 512, 2)         # fp32 d=512
    assert shape(rule(4, 1024, 1024, 4)) == (8, 1024, 4)      # fp32 at 2-4 rows: 8 a program
    assert shape(rule(5, 1024, 1024, 4)) == (4, 1024, 4)      # fp32 at 5-8 rows: 4
    assert shape(rule(8, 1024, 1024, 2)) == (8, 1024, 4)      # 16-bit: 8


GEMV_TILES = [  # (BLOCK_N, SPLIT, CHUNK, num_warps): rows past N, chunks past K, a K loop
    (4, 16, 128, 4), (1, 1, 16, 1), (16, 4, 32, 2), (2, 8, 64, 4), (8, 2, 256, 8)]


def _check_gemv(config: dict, k: int, dtype, device) -> None:
    """The one-row kernel with `config` at 37 outputs and k inputs, every part at once, with
    and without the PDL prefetch where the GPU has it (the interpreter has none: once there)."""
    x, w, b, g, r = _make((1,), 37, k, dtype, device, True, True, True)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation="gelu", residual=r.double())
    for prefetch_weight in (False, True) if supports_pdl(x.device) else (False,):
        out = poisoned((1, 37), dtype, device)
        matvec_module.launch_matvec(x, w, out, g, 1e-6, b, "gelu", r, config, prefetch_weight)
        assert_close(out, ref, dtype, what=f"{config} k={k}")


@pytest.mark.parametrize("tile", GEMV_TILES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemv_tiles_with_every_part(tile, dtype, device):
    """The one-row kernel at awkward sizes (37 outputs, 301 or 2100 inputs: a partial last
    row block, a partial chunk, a second pass over K) with every part at once. Tiles of
    fewer than 256 columns loop over 301 already (2100 took the interpreter a minute)."""
    block_n, split, chunk, warps = tile
    config = {"BLOCK_N": block_n, "SPLIT": split, "CHUNK": chunk, "num_warps": warps,
              "num_stages": 1}
    for k in (301, 2100) if split * chunk >= 256 else (301,):
        _check_gemv(config, k, dtype, device)
    w = randn(37, 301, device=device)
    with pytest.raises(ValueError, match="the GEMV takes 1 to 4 rows, not 5"):
        matvec_module.launch_matvec(randn(5, 301, device=device), w.float(),
                                    torch.empty(5, 37, device=device), None, 1e-6, None,
                                    "none", None, config, False)


def test_gemv_rows_that_fill_a_tile_poorly_take_a_tail():
    """Head and tail chunk counts: powers of two, fewer chunks than the one tile."""
    two = matvec_module.split_row_in_two
    assert [two(c, 32) for c in (16, 18, 20, 22, 24, 28, 32, 33, 38, 40, 41, 44, 64)] == \
        [(32, 0), (16, 4), (16, 4), (16, 8), (16, 8), (32, 0), (32, 0),
         (32, 4), (32, 8), (32, 8), (32, 0), (32, 0), (32, 0)]  # past a tile: tails of <= 8
    assert [two(c, 16) for c in (12, 15, 3)] == [(16, 0)] * 3  # heads under 16 chunks: one tile
    gemv = matvec_module.split_gemv_config  # a program a row block (gemv_config's under 20 MiB)
    assert (gemv(2560, 2560)["SPLIT"], gemv(2560, 2560)["TAIL"]) == (16, 4)
    assert "TAIL" not in gemv(2048, 2048) and "TAIL" not in gemv(2048, 5632)
    # past one tile: the tile and a tail, fewer rows a program for the values a thread
    assert (gemv(896, 4864)["SPLIT"], gemv(896, 4864)["TAIL"], gemv(896, 4864)["BLOCK_N"]) == \
        (32, 8, 2)
    assert gemv(2560, 2560)["BLOCK_N"] == gemv(4096, 14336)["BLOCK_N"]  # the same rows a program
    # warps for the columns the two tiles read: 4 rows x 2560 columns at 128 values a thread
    # is 2.5 warps, rounded down to 2 (more values a thread, never fewer)
    assert [gemv(n, k)["num_warps"] for n, k in ((2560, 2560), (3072, 3072), (2048, 2048))] == \
        [2, 2, 4]
    # narrow layers whose rows fill one whole tile: two rows over 8 warps (not past the tile,
    # not wide layers)
    assert [(gemv(n, k)["BLOCK_N"], gemv(n, k)["num_warps"]) for n, k in
            ((4096, 4096), (2048, 3600), (4096, 14336), (6144, 4096))] == \
        [(2, 8), (2, 8), (4, 4), (2, 4)]


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
@pytest.mark.parametrize("activation", ["gelu", "swiglu"])
def test_persistent_gemv_takes_every_row_block(activation, rows, device):
    """Programs that stay resident (PROGRAMS_PER_SM), on one row (_gemv_kernel) and on 2-4
    (_gemv_rows_kernel, 3 rows padded to 4): each takes several row blocks (more blocks than
    a program an SM: 300 outputs in blocks of 2), the first read before the wait where the
    GPU has PDL, whole rows of 301 columns in a tile of 512, every part at once, x and the
    residual strided; at one row also a head and a tail tile (256 + 128 columns); a config
    that does not hold whole rows is refused."""
    dtype = torch.bfloat16
    n, k = 300, 301
    x, w, b, g, r = _make((rows,), n, k, dtype, device, True, True, True)
    x = torch.cat([x, x], dim=1)[:, :k]  # rows 2k apart
    width = n // 2 if activation == "swiglu" else n
    r = torch.cat([r, r], dim=1)[:, :width]
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation=activation, residual=r.double())
    config = {"BLOCK_N": 2, "SPLIT": 4, "CHUNK": 128, "num_warps": 2, "num_stages": 1,
              "PROGRAMS_PER_SM": 1}
    sms = sm_count(x.device) or ASSUMED_SM_COUNT
    assert triton.cdiv(n, config["BLOCK_N"]) > sms  # some program takes a second block
    tiles = [config, {**config, "SPLIT": 2, "TAIL": 1}] if rows == 1 else [config]
    for tile, prefetch_weight in itertools.product(
            tiles, (False, True) if supports_pdl(x.device) else (False,)):
        out = poisoned(tuple(ref.shape), dtype, device)
        matvec_module.launch_matvec(x, w, out, g, 1e-6, b, activation, r, tile,
                                    prefetch_weight)
        assert_close(out, ref, dtype, what=f"{tile} {activation} {rows} rows")
    with pytest.raises(ValueError, match="do not cover K = 301"):
        matvec_module.launch_matvec(x, w, torch.empty(rows, n, device=device, dtype=dtype),
                                    None, 1e-6, None, "none", None, {**config, "SPLIT": 2},
                                    False)


def test_resident_programs_counts_registers_threads_and_shared_memory():
    """Programs an SM holds: registers rounded up to 8 a thread out of 64K, threads out of
    the SM's, shared memory (plus the 1 KB reserved a program) out of the SM's; at least 1."""
    fit = lambda regs, warps, shared=0: resident_programs(  # noqa: E731
        regs, warps, shared, threads_per_sm=2048, shared_per_sm=233472)
    assert fit(77, 8) == 3      # 80 x 256 threads: 20480 of 65536
    assert fit(80, 8) == 3 and fit(81, 8) == 2    # 88 a thread: 3 x 22528 > 65536
    assert fit(98, 8) == 2
    assert fit(58, 8) == 4
    assert fit(16, 8) == 8      # threads: 2048 / 256
    assert fit(40, 4, shared=100 * 1024) == 2      # shared memory
    assert fit(255, 16) == 1    # more than one SM's registers: still one


@pytest.mark.gpu
@pytest.mark.parametrize("k", [2048, 4096, 5632, 8192])   # 5632: a head and a tail tile
@pytest.mark.parametrize("part", ["norm", "residual", "swiglu"])
def test_persistent_gemv_fills_each_sm_with_as_many_programs_as_fit(part, k):
    """The rule's persistent config (FIT) on 32 MiB of bf16 weights, PDL on: the launch takes
    as many programs an SM as the kernel it ran holds (by its registers, threads and shared
    memory; at most MAX_PROGRAMS_PER_SM), its registers capped only where that spilled
    nothing; and equals the reference."""
    dtype, n = torch.bfloat16, 16 * 2**20 // k
    config = matvec_module.gemv_config(n, k)
    assert config["PROGRAMS_PER_SM"] == matvec_module.FIT
    x, w, _, g, r = _make((1,), n, k, dtype, "cuda", False, True, True)
    g = g if part == "norm" else None
    r = r[:, :n // 2] if part == "swiglu" else r if part == "residual" else None
    activation = "swiglu" if part == "swiglu" else "none"
    ref = linear_ref(x.double(), w.double(), norm_weight=None if g is None else g.double(),
                     activation=None if part != "swiglu" else "swiglu",
                     residual=None if r is None else r.double())
    out = poisoned(tuple(ref.shape), dtype, "cuda")
    _resident.clear()
    compiled = matvec_module.launch_matvec(x, w, out, g, 1e-6, None, activation, r, config,
                                           True)
    assert_close(out, ref, dtype, what=part)
    props = torch.cuda.get_device_properties(x.device)
    holds = lambda c: min(matvec_module.MAX_PROGRAMS_PER_SM, resident_programs(  # noqa: E731
        c.n_regs, config["num_warps"], c.metadata.shared,
        props.max_threads_per_multi_processor, props.shared_memory_per_multiprocessor))
    [(programs, options)] = _resident.values()
    assert programs == holds(compiled)
    assert set(options) <= {"maxnreg"}
    if options:  # capped to make room for one more program: nothing spilled
        assert compiled.n_spills == 0 and compiled.n_regs <= options["maxnreg"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", [2048, 4096])
def test_two_row_gemv_narrows_where_no_norm_scales_x(k, dtype):
    """The two-row rule's persistent tile (NARROW: x kept 16-bit, x and the tile widened for
    each row's products) over 10-20 MiB, PDL on: with no norm it launches as many programs an
    SM as its kernel holds, registers uncapped, at most NARROW_MAX_PROGRAMS_PER_SM, and gives
    the very values of the same tile without NARROW (the same products, summed in the same
    order) for the residual, bias, SwiGLU and plain calls; with a norm, or x in fp32, NARROW
    is not applied (both launches agree)."""
    n = 5 * 2**20 // k + 6   # 10-20 MiB and a last, partly masked, row block
    config = matvec_module.two_row_gemv_config(n, k)
    assert config is not None and config.get("NARROW")
    plain = {key: v for key, v in config.items() if key != "NARROW"}
    x, w, b, g, r = _make((2,), n, k, dtype, "cuda", True, True, True)
    cases = {"residual": dict(residual=r), "bias and SwiGLU": dict(bias=b, activation="swiglu"),
             "plain": {}, "norm": dict(norm_weight=g), "fp32 x": dict(x=x.float())}
    for what, parts in cases.items():
        rows = parts.pop("x", x)
        activation = parts.pop("activation", "none")
        width = n // 2 if activation == "swiglu" else n
        args = (parts.get("norm_weight"), 1e-6, parts.get("bias"), activation,
                parts.get("residual"))
        ref = linear_ref(rows.double(), w.double(),
                         None if args[2] is None else args[2].double(),
                         norm_weight=None if args[0] is None else args[0].double(),
                         activation=None if activation == "none" else activation,
                         residual=None if args[4] is None else args[4].double())
        outs = []
        for tile in (config, plain):
            _resident.clear()
            out = poisoned((2, width), dtype, "cuda")
            compiled = matvec_module.launch_matvec(rows, w, out, *args, tile, True)
            outs.append(out)
            narrowed = what not in ("norm", "fp32 x") and tile is config
            if narrowed:
                props = torch.cuda.get_device_properties(0)
                [(programs, options)] = _resident.values()
                assert options == {} and compiled.n_spills == 0
                assert programs == min(matvec_module.NARROW_MAX_PROGRAMS_PER_SM,
                                       resident_programs(
                    compiled.n_regs, config["num_warps"], compiled.metadata.shared,
                    props.max_threads_per_multi_processor,
                    props.shared_memory_per_multiprocessor))
        assert_close(outs[0], ref, dtype, what=f"{what}, NARROW")
        assert torch.equal(outs[0], outs[1]), what


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", [1536, 2048, 4096])
def test_one_row_swiglu_widens_rows_of_2048_columns(k, dtype):
    """One row's persistent tile on a SwiGLU projection with its norm and bias, PDL on:
    widened where used (WIDEN, _widened's inline PTX in the kernel) by default where the tile
    covers WIDEN_ROW_COLUMNS, with the very values of the tile not widened (the same products
    in the same order); rows of other widths are not widened unless asked."""
    # text only _widened's inline asm puts in the PTX (ptxas may cap the registers of the
    # tile not widened to as few, so they do not tell)
    marker = "0xFFFF0000" if dtype == torch.bfloat16 else "lo, hi"
    n = 6 * 2**20 // k * 2   # 24 MiB of bf16: persistent
    config = matvec_module.gemv_config(n, k)
    assert "PROGRAMS_PER_SM" in config
    x, w, b, g, _ = _make((1,), n, k, dtype, "cuda", True, True, False)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation="swiglu")
    outs, widened = [], []
    for tile in (config, {**config, "WIDEN": False}, {**config, "WIDEN": True}):
        out = poisoned((1, n // 2), dtype, "cuda")
        compiled = matvec_module.launch_matvec(x, w, out, g, 1e-6, b, "swiglu", None, tile,
                                               True)
        assert_close(out, ref, dtype, what=f"{tile}")
        outs.append(out)
        widened.append(marker in compiled.asm["ptx"])
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    by_default = triton.next_power_of_2(k) == matvec_module.WIDEN_ROW_COLUMNS
    assert widened == [by_default, False, True]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", [500, 896, 2048])
@pytest.mark.parametrize("part", ["norm and SwiGLU", "residual"])
def test_small_persistent_gemv_holds_up_to_eight_programs_an_sm(part, k, dtype):
    """small_persistent_gemv_config (16 KB tiles over 4 warps, widened) over 18 MiB of short
    rows, PDL on: the launch takes as many programs an SM as its kernel holds, at most
    SMALL_MAX_PROGRAMS_PER_SM, registers capped only where nothing spilled, and gives the
    very values of the same tile not widened."""
    n = 9 * 2**19 // k * 2 + 6   # a last row block partly masked
    config = matvec_module.small_persistent_gemv_config(n, k)
    assert config["WIDEN"] and config["num_warps"] == matvec_module.SMALL_WARPS
    x, w, b, g, r = _make((1,), n, k, dtype, "cuda", True, True, True)
    swiglu = part == "norm and SwiGLU"
    args = (g, 1e-6, b, "swiglu", None) if swiglu else (None, 1e-6, None, "none", r)
    ref = linear_ref(x.double(), w.double(), b.double() if swiglu else None,
                     norm_weight=g.double() if swiglu else None,
                     activation="swiglu" if swiglu else None,
                     residual=None if swiglu else r.double())
    outs = []
    for tile in (config, {**config, "WIDEN": False}):
        _resident.clear()
        out = poisoned(tuple(ref.shape), dtype, "cuda")
        compiled = matvec_module.launch_matvec(x, w, out, *args, tile, True)
        assert_close(out, ref, dtype, what=f"{part} {tile}")
        outs.append(out)
        if tile is config:
            props = torch.cuda.get_device_properties(0)
            [(programs, options)] = _resident.values()
            assert programs == min(matvec_module.SMALL_MAX_PROGRAMS_PER_SM, resident_programs(
                compiled.n_regs, config["num_warps"], compiled.metadata.shared,
                props.max_threads_per_multi_processor, props.shared_memory_per_multiprocessor))
            assert set(options) <= {"maxnreg"}
            if options:
                assert compiled.n_spills == 0
    assert torch.equal(outs[0], outs[1]), part


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemv_tail_tile_with_every_part(dtype, device):
    """A head of 2 chunks and a tail of 1 or 2 (the tail's chunks partly or wholly past K),
    at 37 outputs, with every part; a K the two tiles do not cover is refused."""
    for tail, k in ((1, 150), (1, 192), (2, 200)):
        config = {"BLOCK_N": 4, "SPLIT": 2, "CHUNK": 64, "TAIL": tail, "num_warps": 2,
                  "num_stages": 1}
        _check_gemv(config, k, dtype, device)
    x, w = randn(1, 257, device=device), randn(37, 257, device=device)
    with pytest.raises(ValueError, match="does not cover K = 257"):
        matvec_module.launch_matvec(x, w, torch.empty(1, 37, device=device), None, 1e-6, None,
                                    "none", None, config, False)


# ways of applying a weight tile to several rows: one broadcast product; one row at a time,
# each row's sums turned to the accumulator's layout on their own, or gathered and turned once
ROW_MODES = {"broadcast": {"ROW_LOOP": False},
             "row by row": {"ROW_LOOP": True, "GATHER_ROWS": False},
             "gathered": {"ROW_LOOP": True, "GATHER_ROWS": True}}


@pytest.mark.parametrize("mode", list(ROW_MODES))
@pytest.mark.parametrize("rows", [1, 2, 3, 8])
def test_matvec_row_loop_and_broadcast_agree(rows, mode, device):
    """Every way of applying a weight tile to the rows, on awkward sizes with every part."""
    n, k = 37, 301
    x, w, b, g, r = _make((rows,), n, k, torch.float32, device, True, True, True)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation="gelu", residual=r.double())
    config = {"BLOCK_N": 8, "BLOCK_K": 128, "num_warps": 4, "num_stages": 1,
              **ROW_MODES[mode]}
    out = poisoned((rows, n), torch.float32, device)
    matvec_module.launch_matvec(x, w, out, g, 1e-6, b, "gelu", r, config, False)
    assert_close(out, ref, what=str(config))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("prefetch_weight", [False, True])
def test_matvec_block_shapes_and_prefetch(dtype, prefetch_weight):
    """Every block shape the kernel may be given computes the same, PDL launch or not."""
    rows, n, k = 3, 1000, 1500
    x, w, b, g, r = _make((rows,), n, k, dtype, "cuda", True, True, True)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation="gelu", residual=r.double())
    for block_n, block_k, mode in itertools.product((4, 16), (128, 1024), ROW_MODES.values()):
        config = {"BLOCK_N": block_n, "BLOCK_K": block_k, "num_warps": 4, "num_stages": 1,
                  **mode}
        out = poisoned((rows, n), dtype, "cuda")
        matvec_module.launch_matvec(x, w, out, g, 1e-6, b, "gelu", r, config,
                                    prefetch_weight and supports_pdl(x.device))
        assert_close(out, ref, dtype, what=str(config))
    out = tg.linear(x, w, b, norm_weight=g, activation="gelu", residual=r,
                    prefetch_weight=prefetch_weight)
    assert_close(out, ref, dtype)


def _glu_case(rows, ffn, k, dtype, device, activation="swiglu"):
    x, _, b, g, r = _make((rows,), 2 * ffn, k, dtype, device, True, True, False)
    w = interleave_gate_up(randn(ffn, k, scale=k**-0.5), randn(ffn, k, scale=k**-0.5))
    w = w.to(device=device, dtype=dtype)
    r = randn(rows, ffn, dtype=dtype, device=device)
    ref = linear_ref(x.double(), w.double(), b.double(), norm_weight=g.double(),
                     activation=activation, residual=r.double())
    return x, w, b, g, r, ref


# torch's own functions, apart from activation_ref (the reference the other tests use)
GATES = {"swiglu": torch.nn.functional.silu, "geglu": torch.nn.functional.gelu,
         "geglu_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}


@pytest.mark.parametrize("activation", GLU_ACTIVATIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 3, 9, 17])  # gemv/matvec, dot, dot, tiled GEMM
def test_glu_halves_the_width(rows, dtype, activation, device):
    x, w, b, g, r, ref = _glu_case(rows, 38, 75, dtype, device, activation)
    out = tg.linear(x, w, b, norm_weight=g, activation=activation, residual=r,
                    out=poisoned((rows, 38), dtype, device))
    assert_close(out, ref, dtype)
    gate, up = (x.double() @ w.double().T).unflatten(-1, (-1, 2)).unbind(-1)
    plain = tg.linear(x, w, activation=activation)
    assert_close(plain, GATES[activation](gate) * up, dtype, what="no other parts")


@pytest.mark.parametrize("plan", [
    Plan("gemv", {"BLOCK_N": 2, "SPLIT": 2, "CHUNK": 32, "num_warps": 1, "num_stages": 1}),
    Plan("matvec", {"BLOCK_N": 4, "BLOCK_K": 64, "num_warps": 4, "num_stages": 1,
                    "ROW_LOOP": True}),
    Plan("dot", {"BLOCK_N": 16, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2}),
    Plan("dot", {"BLOCK_N": 32, "BLOCK_K": 32, "num_warps": 4, "num_stages": 2, "SPLIT_K": 3}),
])
@pytest.mark.parametrize("activation", GLU_ACTIVATIONS)
def test_glu_in_every_decode_kernel(plan, activation, device):
    rows = 1 if plan.kind == "gemv" else 3
    x, w, b, g, r, ref = _glu_case(rows, 37, 150, torch.bfloat16, device, activation)
    out = poisoned((rows, 37), torch.bfloat16, device)
    decode_plan.launch(plan, x, w, out, g, 1e-6, b, activation, r, False)
    assert_close(out, ref, torch.bfloat16, what=str(plan))


GEMV_TILE = {"BLOCK_N": 2, "SPLIT": 2, "CHUNK": 32, "num_warps": 1, "num_stages": 1}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [2, 3, 4])
@pytest.mark.parametrize("part", ["plain", "norm and bias", "residual", "swiglu", "geglu_tanh"])
def test_gemv_split_tile_on_several_rows(part, rows, dtype, device):
    """_gemv_rows_kernel: the one-row GEMV's tile applied to 2-4 rows (3 padded to 4), K of
    150 over two passes of 64 columns and a masked rest, N not a multiple of the tile, x
    and the residual rows strided apart."""
    gated = part in GLU_ACTIVATIONS
    n, k = (38 if gated else 37), 150
    x = randn(rows, k + 9, dtype=dtype, device=device)[:, :k]       # row stride 159
    w = randn(n, k, dtype=dtype, device=device, scale=k**-0.5)
    g = randn(k, dtype=dtype, device=device) if part == "norm and bias" or gated else None
    b = randn(n, dtype=dtype, device=device) if part == "norm and bias" else None
    width = n // 2 if gated else n
    r = (randn(rows, width + 5, dtype=dtype, device=device)[:, :width]
         if part == "residual" or gated else None)
    activation = part if gated else "none"
    out = poisoned((rows, width), dtype, device)
    decode_plan.launch(Plan("gemv", GEMV_TILE), x, w, out, g, 1e-6, b, activation, r, False)
    double = lambda t: None if t is None else t.double()  # noqa: E731
    ref = linear_ref(x.double(), w.double(), double(b), norm_weight=double(g),
                     activation=None if activation == "none" else activation,
                     residual=double(r))
    assert_close(out, ref, dtype, what=f"{part}, {rows} rows")


def test_gemv_on_several_rows_takes_no_tail(device):
    x, w = randn(2, 64, device=device), randn(8, 64, device=device)
    with pytest.raises(ValueError, match="several-row GEMV takes neither TAIL"):
        decode_plan.launch(Plan("gemv", {**GEMV_TILE, "TAIL": 1}), x, w,
                           torch.empty(2, 8, device=device), None, 1e-6, None, "none", None,
                           False)


def test_swiglu_needs_pairs(device):
    x = torch.ones(2, 6, device=device)
    with pytest.raises(ValueError, match="an even count; got 7"):
        tg.linear(x, torch.ones(7, 6, device=device), activation="swiglu")
    with pytest.raises(ValueError, match=r"residual has shape \(2, 8\), expected \(2, 4\)"):
        tg.linear(x, torch.ones(8, 6, device=device), activation="swiglu",
                  residual=torch.ones(2, 8, device=device))
    with pytest.raises(ValueError, match="activation must be None or one of"):
        tg.matmul(x, torch.ones(6, 8, device=device), activation="swiglu")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 2, 4, 8, 16, 129])
@pytest.mark.parametrize("activation", ["swiglu", "geglu_tanh"])
def test_glu_real_shapes_gpu(activation, rows, dtype):
    # 8960 x 1536 (Qwen2-1.5B's): 280 weight-left blocks, the two-stage tile at 3-16 rows;
    # 6912 x 1152 (Gemma 3 1B's)
    for ffn, k in ((5632, 2048), (4864, 896), (1000, 1531), (8960, 1536), (6912, 1152)):
        x, w, b, g, r, ref = _glu_case(rows, ffn, k, dtype, "cuda")
        out = tg.linear(x, w, None, norm_weight=g, activation=activation,
                        out=poisoned((rows, ffn), dtype, "cuda"))
        ref = linear_ref(x.double(), w.double(), norm_weight=g.double(), activation=activation)
        assert_close(out, ref, dtype, what=f"{ffn}x{k}")
