"""tg.decode_layer: h + (rms_norm(h) * g) @ Wq.T @ Wo.T in one or two kernels, its buffer
protocol between layers, and the rule that chooses one kernel."""

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels.decode_layer import (
    _launch_one_kernel,
    _uses_one_kernel,
    decode_layer_config,
    decode_layer_ref,
    one_kernel_is_faster,
)
from tilegraph.testing import TOLERANCES, assert_close, poisoned, randn, rel_error


def _weights(d, dtype, device, n=None):
    n = n or d
    g = randn(d, dtype=dtype, device=device, scale=0.1) + 1
    wq = randn(n, d, dtype=dtype, device=device, scale=d**-0.5)
    wo = randn(d, n, dtype=dtype, device=device, scale=n**-0.5)
    return g, wq, wo


def _ref(h, g, wq, wo):
    return decode_layer_ref(h.double(), g.double(), wq.double(), wo.double())


@pytest.mark.parametrize("shape, dtype, h_fp32, one_kernel", [
    ((1, 96), torch.float32, False, True),    # the tiny preset's width
    ((1, 1, 100), torch.float32, False, True),  # leading dims, a part-filled last program
    ((2, 100), torch.float32, False, True),   # two rows of a small fp32 layer: one kernel
    ((3, 100), torch.float32, False, False),  # several rows: two kernels (the matvec path)
    ((2, 4, 33), torch.float32, False, False),  # leading dims, 8 rows
    ((9, 40), torch.float32, False, False),   # past 8 rows: the tiled GEMM
    ((1, 300), torch.bfloat16, False, False),  # 16-bit h: rounded between the two kernels
    ((1, 300), torch.bfloat16, True, True),   # fp32 h, 16-bit weights
    ((5, 130), torch.float16, True, False),   # 16-bit rows one by one would spill: two
    ((11, 64), torch.bfloat16, True, False),  # fp32 h past 8 rows: rows cast for the GEMM
])
def test_matches_float64_reference(device, shape, dtype, h_fp32, one_kernel):
    g, wq, wo = _weights(shape[-1], dtype, device)
    h = randn(*shape, dtype=torch.float32 if h_fp32 else dtype, device=device)
    assert _uses_one_kernel(h, wq, wo) == one_kernel
    for out in (None, poisoned(h.shape, h.dtype, device)):
        y = tg.decode_layer(h, g, wq, wo, out=out)
        assert y.shape == h.shape and y.dtype == h.dtype
        # The weights' tolerance: the GEMM path multiplies 16-bit rows on the tensor cores.
        assert_close(y, _ref(h, g, wq, wo), dtype,
                     what=f"out={'given' if out is not None else None}")
        if one_kernel:  # weights are exact in fp32 and everything is computed in fp32
            assert rel_error(y, _ref(h, g, wq, wo)) < TOLERANCES[torch.float32]


def test_rectangular_projections_take_two_kernels(device):
    g, wq, wo = _weights(48, torch.float32, device, n=80)
    h = randn(2, 48, device=device)
    assert not _uses_one_kernel(h, wq, wo)
    assert_close(tg.decode_layer(h, g, wq, wo), _ref(h, g, wq, wo))


@pytest.mark.parametrize("rows, d, block_q", [(8, 33, 4), (2, 130, 2), (1, 96, 16)])
def test_one_kernel_at_other_block_shapes(device, rows, d, block_q):
    g, wq, wo = _weights(d, torch.float32, device)
    h = randn(rows, d, device=device)
    acc = torch.zeros(rows, d, device=device)
    zero = poisoned((rows, d), torch.float32, device)
    config = {**decode_layer_config(rows, d, 4), "BLOCK_Q": block_q}
    _launch_one_kernel(acc, zero, h, g, wq, wo, 1e-6, config)
    assert rel_error(acc, _ref(h, g, wq, wo)) < 1e-5
    assert torch.equal(zero, torch.zeros_like(zero))  # the next layer's buffer, zeroed


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("wo_columns_contiguous", [False, True])
@pytest.mark.parametrize("stride", [1000, 1004])
def test_one_kernel_where_d_is_not_a_multiple_of_16(device, dtype, wo_columns_contiguous,
                                                       stride):
    """d = 1000, Wq's rows `stride` apart, Wo in either layout: d and the weights' long
    strides reach the kernel divided by the elements in 16 bytes where all divide (fp32 at
    stride 1004 too; 16-bit there as they are)."""
    d = 1000
    g, _, _ = _weights(d, dtype, device)
    wq = randn(d, stride, dtype=dtype, device=device, scale=d**-0.5)[:, :d]
    wo = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    if wo_columns_contiguous:
        wo = wo.t().contiguous().t()
    h = randn(1, d, device=device)
    acc = torch.zeros(1, d, device=device)
    _launch_one_kernel(acc, None, h, g, wq, wo, 1e-6)
    assert rel_error(acc, _ref(h, g, wq, wo)) < TOLERANCES[torch.float32]


def test_every_input_may_be_a_strided_view(device):
    d = 40
    g, wq, wo = _weights(d, torch.float32, device)
    h = randn(1, d, device=device)
    ref = _ref(h, g, wq, wo)
    strided = (randn(1, 2 * d, device=device)[:, ::2].copy_(h),     # every other element
               randn(2 * d, device=device)[::2].copy_(g),
               wq.t().contiguous().t(),                              # column-major
               wo.t().contiguous().t())                              # Wo's columns contiguous
    for args in ((h, g, wq, wo), strided):
        assert_close(tg.decode_layer(*args), ref)


def test_a_loop_of_layers_runs_on_carried_buffers_each_used_once(device):
    d, layers = 64, 4
    weights = [_weights(d, torch.bfloat16, device) for _ in range(layers)]
    h = randn(1, d, device=device)  # fp32 h, bf16 weights: one kernel a layer
    x, expected = h, h.double()
    for g, wq, wo in weights:
        carried = getattr(x, "_tilegraph_zeroed_next", None)
        x = tg.decode_layer(x, g, wq, wo)
        expected = decode_layer_ref(expected, g.double(), wq.double(), wo.double())
        if carried is not None:  # the previous layer zeroed the buffer this one filled
            assert x.data_ptr() == carried[0].data_ptr()
    assert rel_error(x, expected) < 1e-5
    # The same input twice: the carried buffer is handed out once, then a fresh one.
    g, wq, wo = weights[0]
    first, second = tg.decode_layer(x, g, wq, wo), tg.decode_layer(x, g, wq, wo)
    assert first.data_ptr() != second.data_ptr()
    assert torch.allclose(first, second, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows", [1, 3])
def test_a_16_bit_h_starts_an_fp32_stream_in_out(device, dtype, rows):
    """out float32 for a 16-bit h: the layer reads h as it is and writes the fp32 stream (one
    kernel at one row, which also hands the next layer its zeroed accumulator; two kernels
    over fp32 h otherwise)."""
    d = 100
    g, wq, wo = _weights(d, dtype, device)
    h = randn(rows, d, dtype=dtype, device=device)
    out = poisoned(h.shape, torch.float32, device)
    y = tg.decode_layer(h, g, wq, wo, out=out)
    assert y is out and y.dtype == torch.float32
    assert_close(y, _ref(h, g, wq, wo), dtype)  # two kernels may round q to the weights' dtype
    if rows == 1:  # one kernel: everything in fp32
        assert rel_error(y, _ref(h, g, wq, wo)) < TOLERANCES[torch.float32]
    assert hasattr(out, "_tilegraph_zeroed_next") == (rows == 1)
    if rows == 1:  # the next layer accumulates into the buffer this one zeroed
        carried = out._tilegraph_zeroed_next[0]
        nxt = tg.decode_layer(y, g, wq, wo)
        assert nxt.data_ptr() == carried.data_ptr()
        assert rel_error(nxt, _ref(_ref(h, g, wq, wo), g, wq, wo)) < TOLERANCES[torch.float32]
    with pytest.raises(TypeError, match="expected"):  # no other dtype may start a stream
        tg.decode_layer(h, g, wq, wo, out=torch.empty(h.shape, dtype=torch.float64,
                                                        device=device))


def test_deterministic_mode_takes_the_bit_reproducible_path(device):
    g, wq, wo = _weights(96, torch.float32, device)
    h = randn(1, 96, device=device)
    assert _uses_one_kernel(h, wq, wo)
    torch.use_deterministic_algorithms(True)
    try:
        assert not _uses_one_kernel(h, wq, wo)
        a, b = tg.decode_layer(h, g, wq, wo), tg.decode_layer(h, g, wq, wo)
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.equal(a, b)
    assert_close(a, _ref(h, g, wq, wo))


def test_empty_input(device):
    g, wq, wo = _weights(16, torch.float32, device)
    for h in (torch.empty(0, 16, device=device), torch.empty(2, 0, 16, device=device)):
        y = tg.decode_layer(h, g, wq, wo)
        assert y.shape == h.shape


def test_bad_input_is_refused(device):
    g, wq, wo = _weights(16, torch.float32, device)
    h = randn(2, 16, device=device)
    cases = [
        ((randn(2, 15, device=device), g, wq, wo), ValueError, "wq must have shape"),
        ((h, g[:8], wq, wo), ValueError, "norm_weight has shape"),
        ((h, g, wq, wo[:, :8]), ValueError, "wo has shape"),
        ((h, g, wq.half(), wo), TypeError, "dtype"),
        ((h.half(), g.half(), wq.half(), wo.bfloat16()), TypeError, "dtype"),
        ((h.half(), g.bfloat16(), wq.bfloat16(), wo.bfloat16()), TypeError, "float32"),
        ((h.double(), g, wq, wo), TypeError, "dtype"),
        ((h, g, wq, "wo"), TypeError, "torch.Tensor"),
    ]
    for args, error, match in cases:
        with pytest.raises(error, match=match):
            tg.decode_layer(*args)
    with pytest.raises(ValueError, match="eps"):
        tg.decode_layer(h, g, wq, wo, eps=-1.0)
    with pytest.raises(ValueError, match="overlaps"):
        tg.decode_layer(h, g, wq, wo, out=wq[:2])
    with pytest.raises(ValueError, match="shape"):
        tg.decode_layer(h, g, wq, wo, out=torch.empty(3, 16, device=device))


def _choice(rows, d, element_size, sm_count=132):
    config = decode_layer_config(rows, d, element_size)
    return one_kernel_is_faster(config, rows, d, element_size, sm_count), config


def test_rule_chooses_one_kernel_where_it_was_measured_faster():
    faster, config = _choice(1, 2048, 2)  # seed-bf16, batch 1
    assert faster and (config["BLOCK_Q"], config["num_warps"]) == (16, 8)
    assert _choice(1, 512, 4)[0] and _choice(1, 1024, 4)[0]  # small (d=512 fp32), fp32 d=1024
    for rows in (2, 4, 8):  # 16-bit: the two kernels were as fast or faster from two rows on
        assert not _choice(rows, 512, 2)[0] and not _choice(rows, 2048, 2)[0], rows
    # fp32: one kernel at two rows on layers up to 6 MB (d=768), two past (d=1024) or at 3+
    assert _choice(2, 512, 4)[0] and _choice(2, 768, 4)[0]
    assert not _choice(2, 1024, 4)[0] and not _choice(3, 512, 4)[0]
    assert not _choice(1, 2048, 4)[0]           # seed fp32: two waves of programs
    assert not _choice(1, 2048, 2, sm_count=100)[0]  # 128 programs, 100 SMs
    assert not _choice(9, 512, 4)[0]
    assert not _choice(1, 4096, 2)[0]


def test_every_tile_stays_within_its_register_budget():
    for rows in range(1, 9):
        for d in (1, 17, 96, 512, 2048, 4096):
            for element_size in (2, 4):
                faster, config = _choice(rows, d, element_size, sm_count=None)
                tile_bytes = 2 * config["BLOCK_Q"] * config["BLOCK_D"] * element_size
                assert 1 <= config["num_warps"] <= 16
                assert config["BLOCK_D"] >= d
                if faster:
                    assert tile_bytes <= 128 * 1024
                    assert tile_bytes // (32 * config["num_warps"]) <= 512


def _chain(weights):
    def run(h):
        x = h.float()
        for g, wq, wo in weights:
            x = tg.decode_layer(x, g, wq, wo)
        return x.to(h.dtype)
    return run


def _chain_ref(weights, h):
    x = h.double()
    for g, wq, wo in weights:
        x = decode_layer_ref(x, g.double(), wq.double(), wo.double())
    return x


@pytest.mark.gpu
@pytest.mark.parametrize("d, dtype", [(2048, torch.bfloat16), (512, torch.float32),
                                      (2048, torch.float32), (768, torch.bfloat16)])
def test_captured_chain_replays_right_every_time(d, dtype):
    """Every replay starts from buffers that the graph zeroed itself; fresh inputs each time."""
    weights = [_weights(d, dtype, "cuda") for _ in range(3)]
    static = randn(1, d, dtype=dtype, device="cuda")
    graph = tg.capture(_chain(weights), static)
    for _ in range(4):
        static.copy_(randn(1, d, dtype=dtype, device="cuda"))
        graph.outputs.fill_(float("nan"))
        assert_close(graph.replay(), _chain_ref(weights, static), dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, d", [(torch.bfloat16, 2592), (torch.bfloat16, 2816),
                                      (torch.float16, 2816)])
def test_two_kernel_layers_of_the_chain_band_run_persistent(dtype, d, monkeypatch):
    """A one-row layer of projections in the chain band (decode_plan.in_chain_band) runs both
    as persistent GEMVs, right in a captured chain over fresh inputs."""
    from tilegraph.kernels import decode_plan
    monkeypatch.setattr(decode_plan._step_rows, "_memo", {})
    monkeypatch.setattr(decode_plan._step_rows, "_disk_loaded", True)
    plans, launch = [], decode_plan.launch
    monkeypatch.setattr(decode_plan, "launch", lambda plan, *args, **kwargs: (
        plans.append(plan), launch(plan, *args, **kwargs)))
    weights = [_weights(d, dtype, "cuda") for _ in range(2)]
    static = randn(1, d, dtype=dtype, device="cuda")

    def chain(h):  # h in the weights' dtype, as LayerStack carries it between such layers
        for g, wq, wo in weights:
            h = tg.decode_layer(h, g, wq, wo)
        return h
    graph = tg.capture(chain, static)
    assert len(plans) >= 4 and all("PROGRAMS_PER_SM" in p.config for p in plans)
    for _ in range(3):
        static.copy_(randn(1, d, dtype=dtype, device="cuda"))
        graph.outputs.fill_(float("nan"))
        assert_close(graph.replay(), _chain_ref(weights, static), dtype)


@pytest.mark.gpu
def test_buffers_never_cross_into_or_out_of_a_capture():
    d = 256
    g, wq, wo = _weights(d, torch.float32, "cuda")
    h = randn(1, d, device="cuda")
    eager = tg.decode_layer(h, g, wq, wo)  # carries a buffer zeroed eagerly
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        tg.decode_layer(h, g, wq, wo)  # warm-up
    torch.cuda.current_stream().wait_stream(stream)
    raw = torch.cuda.CUDAGraph()
    with torch.cuda.graph(raw, stream=stream):  # not tilegraph's capture: no buffer reused
        inside = tg.decode_layer(eager, g, wq, wo)
        inside_next = tg.decode_layer(inside, g, wq, wo)
    torch.cuda.synchronize()
    expected = _ref(_ref(eager, g, wq, wo).float(), g, wq, wo)
    for _ in range(3):
        raw.replay()
        assert_close(inside_next, expected)
    after = tg.decode_layer(inside_next, g, wq, wo)  # eager again: the graph's buffer stays
    raw.replay()
    assert_close(after, _ref(expected.float(), g, wq, wo))


@pytest.mark.gpu
def test_compiled_and_opcheck():
    d = 128
    g, wq, wo = _weights(d, torch.bfloat16, "cuda")
    h = randn(2, d, device="cuda")
    compiled = torch.compile(lambda h: tg.decode_layer(h, g, wq, wo) * 2, fullgraph=True)
    # the weights' tolerance: two rows of weights this small take the tensor cores, which
    # multiply h's rows rounded to the weights' dtype
    assert_close(compiled(h), 2 * _ref(h, g, wq, wo), torch.bfloat16)
