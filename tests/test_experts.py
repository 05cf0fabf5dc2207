"""A mixture of experts' decode kernels (kernels/experts.py) and its plain path
(models/experts.py), against float64; the MoE families' configs. (The families against
transformers: test_llama's and test_generate's family tests.)"""

import pytest
import torch

import tilegraph as tg
from _replays import assert_replays_equal_eager
from _shapes import DTYPES
from tilegraph.dist import local_config
from tilegraph.dist.group import TensorParallel
from tilegraph.kernels import experts as experts_kernels
from tilegraph.kernels.experts import MAX_ROWS, expert_down, expert_gate_up
from tilegraph.models import Llama, LlamaConfig
from tilegraph.models.hf_presets import hf_config, random_hf_model
from tilegraph.testing import assert_close, poisoned, randn

EPS = 1e-5
# The kernels' two layouts: a program a (row, choice) for every step, or a program an
# expert's block for every step (experts_kernels.BY_EXPERT_SHARING, the times a step's rows
# are expected to take each expert from which it takes the second), its routes in one tile
# or a few rows at a time (experts_kernels._ROUTE_TILE, the (row, expert) scores a tile).
LAYOUTS = {"pairs": (float("inf"), None), "by expert": (0.0, None),
           "by expert, routes in chunks": (0.0, 32)}


@pytest.fixture(params=list(LAYOUTS))
def layout(request, monkeypatch):
    sharing, route_tile = LAYOUTS[request.param]
    monkeypatch.setattr(experts_kernels, "BY_EXPERT_SHARING", sharing)
    if route_tile is not None:
        monkeypatch.setattr(experts_kernels, "_ROUTE_TILE", route_tile)
    return request.param


def _experts(n_experts, dim, ffn, dtype, device):
    """(router (E, dim), gate|up (E, 2 ffn, dim) interleaved, down (E, dim, ffn))."""
    return (randn(n_experts, dim, dtype=dtype, device=device, scale=3 * dim ** -0.5),
            randn(n_experts, 2 * ffn, dim, dtype=dtype, device=device, scale=dim ** -0.5),
            randn(n_experts, dim, ffn, dtype=dtype, device=device, scale=ffn ** -0.5))


def _reference_routes(scores, k, renormalized, shared=0, n_experts=None):
    """(weights, experts) in float64, ties to the lower expert (a stable descending sort);
    a shared expert's parts after them, weighted by the sigmoid of the score after the
    n_experts routed ones where scores has one, else by 1."""
    n_experts = n_experts or scores.shape[1] - (shared > 0)
    probs = torch.softmax(scores[:, :n_experts].double(), dim=-1)
    experts = probs.argsort(dim=-1, descending=True, stable=True)[:, :k]
    weights = probs.gather(1, experts)
    if renormalized:
        weights = weights / weights.sum(-1, keepdim=True)
    if shared:
        parts = torch.arange(n_experts, n_experts + shared, device=scores.device)
        experts = torch.cat([experts, parts.expand(len(scores), -1)], 1)
        share = (torch.sigmoid(scores[:, n_experts:].double())
                 if scores.shape[1] > n_experts else scores.new_ones(len(scores), 1).double())
        weights = torch.cat([weights, share.expand(-1, shared)], 1)
    return weights, experts


def _sigmoid_routes(scores, k, renormalized, choice_bias, scale, shared=0):
    """MiniMax-M2's and Solar Open's (weights, experts) in float64: each expert's score's
    sigmoid, the k best of it plus choice_bias (ties to the lower expert), renormalised
    where asked, times scale; a shared expert's parts after them, weighted by 1."""
    probs = torch.sigmoid(scores.double())
    keys = probs + choice_bias.double()
    experts = keys.argsort(dim=-1, descending=True, stable=True)[:, :k]
    weights = probs.gather(1, experts)
    if renormalized:
        weights = weights / weights.sum(-1, keepdim=True)
    weights = weights * scale
    parts = torch.arange(scores.shape[1], scores.shape[1] + shared, device=scores.device)
    return (torch.cat([weights, weights.new_ones(len(scores), shared)], 1),
            torch.cat([experts, parts.expand(len(scores), -1)], 1))


def _glu(gate_up, activation):
    gate, up = gate_up.unflatten(-1, (-1, 2)).unbind(-1)
    if activation == "swiglu_oss":   # GPT-OSS's: clamped, sigmoid(1.702 gate), up + 1
        gate, up = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
        return gate * torch.sigmoid(1.702 * gate) * (up + 1)
    if activation == "swiglu":
        return torch.nn.functional.silu(gate) * up
    return torch.nn.functional.gelu(gate, approximate="tanh") * up


def _reference(x, scores, w_gate_up, w_down, k, renormalized, activation, residual,
               shared=0, biases=(None, None), routes=None):
    """The mixture in float64 on the kernels' inputs (the scores as given, or the routes
    (weights, experts) given); `biases`, the experts' gate|up and down biases where
    given."""
    x = x.double()
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    weights, experts = routes or _reference_routes(scores, k, renormalized, shared,
                                                   w_gate_up.shape[0] - shared)
    b_gate_up, b_down = (b.double() if b is not None else torch.zeros(len(w_gate_up), n,
                                                                      dtype=torch.float64,
                                                                      device=x.device)
                         for b, n in zip(biases, (w_gate_up.shape[1], w_down.shape[1]),
                                         strict=True))
    out = residual.double().clone()
    for row in range(x.shape[0]):
        for j in range(k + shared):
            e = experts[row, j]
            hidden = _glu(w_gate_up[e].double() @ normed[row] + b_gate_up[e], activation)
            out[row] += weights[row, j] * (w_down[e].double() @ hidden + b_down[e])
    return out, weights, experts


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "rows, n_experts, k, shared, scored, dim, ffn, renormalized, activation", [
        (1, 8, 2, 0, False, 40, 24, True, "swiglu"),
        (3, 5, 1, 0, False, 33, 20, True, "swiglu"),
        (2, 64, 8, 0, False, 64, 12, False, "swiglu"),
        (5, 7, 3, 0, False, 100, 70, False, "geglu_tanh"),
        (2, 6, 2, 3, True, 40, 24, False, "swiglu"),
        (4, 5, 2, 2, False, 24, 40, True, "swiglu"),
        (19, 12, 3, 0, False, 40, 24, True, "swiglu"),
    ])
def test_kernels_match_float64(rows, n_experts, k, shared, scored, dim, ffn, renormalized,
                               activation, dtype, device, layout):
    """The two kernels at awkward sizes (dims no block divides, 5 to 64 experts, 1 to 8 a
    row, 1 to 19 rows, so experts taken by several rows; a shared expert of three parts
    weighted by a score of its own, one of two taken whole), in either layout, into a
    poisoned output: the routes each row takes, their weights, and the output with its
    residual against float64."""
    router, w_gate_up, w_down = _experts(n_experts + shared, dim, ffn, dtype, device)
    router = router[:n_experts + scored]   # (the shared expert's score last)
    x = randn(rows, dim, dtype=dtype, device=device, scale=2.0)
    residual = randn(rows, dim, dtype=dtype, device=device)
    scores = (x.double() @ router.double().T).to(dtype)
    hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, k, renormalized,
                                              activation, EPS, shared)
    out = expert_down(hidden, weights, experts, w_down, residual=residual,
                      out=poisoned((rows, dim), dtype, device), shared=shared)
    expected, ref_weights, ref_experts = _reference(x, scores, w_gate_up, w_down, k,
                                                    renormalized, activation, residual,
                                                    shared)
    assert torch.equal(experts.long().cpu(), ref_experts.cpu())
    torch.testing.assert_close(weights.double().cpu(), ref_weights.cpu(), rtol=1e-5, atol=1e-6)
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows, n_experts, k, shared, renormalized, scale", [
    (1, 6, 3, 0, True, 1.0), (4, 7, 3, 2, True, 2.5), (19, 9, 2, 0, False, 1.0)])
def test_sigmoid_routing_matches_float64(rows, n_experts, k, shared, renormalized, scale,
                                         dtype, device, layout):
    """MiniMax-M2's and Solar Open's routes (each expert's sigmoid, the experts chosen by
    it plus a bias an expert wide enough to reorder them, renormalised or not, scaled; a
    shared expert of two parts besides): the experts, their weights and the output against
    float64, in either layout."""
    dim, ffn = 40, 24
    router, w_gate_up, w_down = _experts(n_experts + shared, dim, ffn, dtype, device)
    x = randn(rows, dim, dtype=dtype, device=device, scale=2.0)
    residual = randn(rows, dim, dtype=dtype, device=device)
    scores = (x.double() @ router[:n_experts].double().T).to(dtype)
    choice_bias = randn(n_experts, dtype=torch.float32, device=device, scale=0.3)
    hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, k, renormalized, "swiglu",
                                              EPS, shared, scoring="sigmoid",
                                              choice_bias=choice_bias, routed_scale=scale)
    out = expert_down(hidden, weights, experts, w_down, residual=residual,
                      out=poisoned((rows, dim), dtype, device), shared=shared)
    routes = _sigmoid_routes(scores, k, renormalized, choice_bias, scale, shared)
    expected, ref_weights, ref_experts = _reference(x, scores, w_gate_up, w_down, k,
                                                    renormalized, "swiglu", residual, shared,
                                                    routes=routes)
    unbiased = _sigmoid_routes(scores, k, renormalized, torch.zeros_like(choice_bias), scale)
    assert not torch.equal(unbiased[1][:, :k].cpu(), ref_experts[:, :k].cpu())   # (it chose)
    assert torch.equal(experts.long().cpu(), ref_experts.cpu())
    torch.testing.assert_close(weights.double().cpu(), ref_weights.cpu(), rtol=1e-5, atol=1e-6)
    assert_close(out, expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [1, 5])
def test_biases_and_gpt_oss_swiglu_match_float64(rows, dtype, device, layout):
    """GPT-OSS's experts: gate|up and down biases, and its SwiGLU, whose clamps the wide
    gate|up rows here reach (|gate|, |up| past 7 for some rows)."""
    n_experts, k, dim, ffn = 6, 2, 48, 40
    router, w_gate_up, w_down = _experts(n_experts, dim, ffn, dtype, device)
    w_gate_up = (w_gate_up.float() * 12).to(dtype)
    b_gate_up = randn(n_experts, 2 * ffn, dtype=dtype, device=device)
    b_down = randn(n_experts, dim, dtype=dtype, device=device)
    x = randn(rows, dim, dtype=dtype, device=device, scale=2.0)
    residual = randn(rows, dim, dtype=dtype, device=device)
    scores = (x.double() @ router.double().T).to(dtype)
    hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, k, True, "swiglu_oss",
                                              EPS, bias=b_gate_up)
    out = expert_down(hidden, weights, experts, w_down, residual=residual,
                      out=poisoned((rows, dim), dtype, device), bias=b_down)
    expected, *_ = _reference(x, scores, w_gate_up, w_down, k, True, "swiglu_oss", residual,
                              biases=(b_gate_up, b_down))
    gate_up = w_gate_up.double() @ (x.double() * torch.rsqrt(
        x.double().pow(2).mean(-1, keepdim=True) + EPS)).T
    assert (gate_up.abs() > 7).any()   # (the clamps are reached)
    assert_close(out, expected, dtype)
    with pytest.raises(ValueError, match="do not fit"):
        expert_down(hidden, weights, experts, w_down, bias=b_down[:, :-1])


def test_ties_go_to_the_lower_expert_and_weights_without_renormalising(device, layout):
    """Scores tied at the k-th place: the lower expert wins it. Without renormalising, a
    weight is the expert's share of the softmax over every expert."""
    dim, ffn = 16, 8
    router, w_gate_up, w_down = _experts(6, dim, ffn, torch.float32, device)
    x = randn(2, dim, device=device)
    scores = torch.tensor([[0.5, 2.0, 1.0, 2.0, 1.0, -3.0], [1.0, 1.0, 1.0, 0.0, 1.0, 3.0]],
                          device=device)
    _, weights, experts = expert_gate_up(x, scores, w_gate_up, 3, False, "swiglu", EPS)
    assert experts.tolist() == [[1, 3, 2], [5, 0, 1]]
    probs = torch.softmax(scores.double(), -1)
    torch.testing.assert_close(weights.double().cpu(),
                               torch.stack([probs[0, [1, 3, 2]], probs[1, [5, 0, 1]]]).cpu(),
                               rtol=1e-6, atol=0)


def test_without_residual_and_with_no_rows(device, layout):
    router, w_gate_up, w_down = _experts(4, 24, 16, torch.float32, device)
    x = randn(2, 24, device=device)
    scores = x @ router.T
    hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, 2, True, "swiglu", EPS)
    expected, *_ = _reference(x, scores, w_gate_up, w_down, 2, True, "swiglu",
                              torch.zeros_like(x))
    assert_close(expert_down(hidden, weights, experts, w_down), expected, torch.float32)
    empty = torch.empty(0, 24, device=device)
    hidden, weights, experts = expert_gate_up(empty, empty @ router.T, w_gate_up, 2, True,
                                              "swiglu", EPS)
    assert expert_down(hidden, weights, experts, w_down).shape == (0, 24)


def test_bad_arguments_are_refused(device):
    router, w_gate_up, w_down = _experts(4, 24, 16, torch.float32, device)
    x = randn(2, 24, device=device)
    scores = x @ router.T
    with pytest.raises(ValueError, match="experts_per_token"):
        expert_gate_up(x, scores, w_gate_up, 5, True, "swiglu", EPS)
    with pytest.raises(ValueError, match="activation"):
        expert_gate_up(x, scores, w_gate_up, 2, True, "gelu", EPS)
    with pytest.raises(ValueError, match="do not fit"):
        expert_gate_up(x, scores[:, :3].contiguous(), w_gate_up, 2, True, "swiglu", EPS)
    with pytest.raises(ValueError, match="scoring"):
        expert_gate_up(x, scores, w_gate_up, 2, True, "swiglu", EPS, scoring="softplus")
    bias = torch.zeros(4, device=device)
    for scoring, wrong in (("softmax", bias), ("sigmoid", bias.double()),
                           ("sigmoid", bias[:3])):
        with pytest.raises(ValueError, match="choice_bias"):
            expert_gate_up(x, scores, w_gate_up, 2, True, "swiglu", EPS, scoring=scoring,
                           choice_bias=wrong)
    with pytest.raises(ValueError, match="do not fit"):
        expert_gate_up(randn(2, 48, device=device)[:, ::2], scores, w_gate_up, 2, True,
                       "swiglu", EPS)
    hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, 2, True, "swiglu", EPS)
    with pytest.raises(ValueError, match="do not fit"):
        expert_down(hidden[:3], weights, experts, w_down)
    with pytest.raises(ValueError, match="do not fit"):
        expert_down(hidden, weights, experts, w_down, residual=x[:1])
    with pytest.raises(ValueError, match="do not fit"):
        expert_down(hidden, weights, experts, w_down, shared=2)


def test_a_step_reads_experts_by_expert_where_its_rows_share_them():
    """One row never shares an expert; rows expected to take each expert they take twice
    or more go by expert (8 rows of Mixtral's 8 experts, 2 a row), fewer in pairs (8 rows
    of OLMoE's 64, 8 a row; 2 of Mixtral's), and more rows than the tiles hold in pairs."""
    by_expert = experts_kernels._by_expert
    assert not any(by_expert(1, n, k, 0) for n, k in ((8, 2), (64, 8), (4, 4)))
    assert by_expert(8, 8, 2, 0) and by_expert(16, 64, 8, 0)
    assert not by_expert(8, 64, 8, 0) and not by_expert(2, 8, 2, 0)
    assert not by_expert(MAX_ROWS + 1, 8, 2, 0)


def test_moe_configs():
    """Each family's fields: the experts' count under either name transformers gives it,
    their width (Qwen 2 and 3 MoE's own field), renormalising (Mixtral always, the others
    by norm_topk_prob; Granite MoE's softmax of the best scores), Qwen 2 MoE's shared
    expert in experts' widths and Granite's shared MLP, OLMoE's whole-q and whole-k norms,
    MiniMax-M2's and Solar Open's sigmoid routes, Hunyuan's per-layer counts; and the
    refusals."""
    mixtral = LlamaConfig.from_hf(hf_config("tiny-mixtral"))
    assert (mixtral.n_experts, mixtral.experts_per_token, mixtral.ffn_dim) == (5, 2, 24)
    assert mixtral.router_renormalized and mixtral.moe and not mixtral.qk_norm
    qwen = LlamaConfig.from_hf(hf_config("tiny-qwen3-moe"))
    assert (qwen.n_experts, qwen.experts_per_token, qwen.ffn_dim) == (8, 3, 40)
    assert qwen.router_renormalized and qwen.qk_norm and not qwen.qk_norm_whole
    qwen2 = LlamaConfig.from_hf(hf_config("tiny-qwen2-moe"))
    assert (qwen2.n_experts, qwen2.shared_experts, qwen2.ffn_dim) == (6, 3, 16)
    assert qwen2.qkv_bias and not qwen2.router_renormalized
    with pytest.raises(ValueError, match="shared_expert_intermediate_size"):
        LlamaConfig.from_hf(hf_config("tiny-qwen2-moe", shared_expert_intermediate_size=40))
    olmoe = LlamaConfig.from_hf(hf_config("tiny-olmoe"))
    assert (olmoe.n_experts, olmoe.experts_per_token) == (6, 4)
    assert not olmoe.router_renormalized and olmoe.qk_norm_whole
    granite = LlamaConfig.from_hf(hf_config("tiny-granitemoe"))
    assert (granite.n_experts, granite.experts_per_token) == (5, 3)
    assert granite.router_renormalized and granite.residual_multiplier == 0.5
    # Granite's shared MLP, taken whole: no score of its own among the router's
    shared = LlamaConfig.from_hf(hf_config("tiny-granitemoe-shared"))
    assert (shared.shared_experts, shared.shared_expert_scored, shared.router_rows) == (2, False, 5)
    assert (qwen2.shared_expert_scored, qwen2.router_rows) == (True, 7)
    with pytest.raises(ValueError, match="shared_intermediate_size"):
        LlamaConfig.from_hf(hf_config("tiny-granitemoe-shared", shared_intermediate_size=36))
    # GPT-OSS's router and experts' biases, its SwiGLU (with its constants only), and no
    # tensor parallelism for the biased experts yet
    oss = LlamaConfig.from_hf(hf_config("tiny-gpt-oss"))
    assert oss.router_bias and oss.mlp_bias and oss.mlp_activation == "swiglu_oss"
    assert oss.attention_sinks and oss.sliding_layers == (True, False)
    assert oss.expert_size == 3 * 32 * 24 + 2 * 24 + 32
    with pytest.raises(ValueError, match="swiglu_limit"):
        LlamaConfig.from_hf(hf_config("tiny-gpt-oss", swiglu_limit=10.0))
    with pytest.raises(ValueError, match="biases"):
        local_config(oss, 2)
    with pytest.raises(ValueError, match="swiglu_oss"):
        LlamaConfig(vocab_size=8, dim=8, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=8,
                    mlp_activation="swiglu_oss")
    # MiniMax-M2's sigmoid routes chosen with a bias, its whole-q and whole-k norms (so no
    # tensor parallelism) and half-rotated heads, as its released configs spell them too
    # (use_qk_norm, rotary_dim); Solar Open's scaled routes beside its shared expert
    minimax = LlamaConfig.from_hf(hf_config("tiny-minimax-m2"))
    assert (minimax.router_scoring, minimax.router_choice_bias, minimax.router_scale) == (
        "sigmoid", True, 1.0)
    assert minimax.router_renormalized and minimax.qk_norm_whole and minimax.rotary_dim == 8
    released = {**hf_config("tiny-minimax-m2").to_dict(), "use_qk_norm": True,
                "rotary_dim": 8, "rope_parameters": {"rope_theta": 5e6, "rope_type": "default"}}
    assert LlamaConfig.from_hf(released) == minimax
    with pytest.raises(ValueError, match="span every head"):
        local_config(minimax, 2)
    solar = LlamaConfig.from_hf(hf_config("tiny-solar-open"))
    assert (solar.n_experts, solar.experts_per_token, solar.ffn_dim) == (7, 3, 16)
    assert (solar.shared_experts, solar.shared_expert_scored, solar.router_rows) == (2, False, 7)
    assert (solar.router_scoring, solar.router_choice_bias, solar.router_scale) == (
        "sigmoid", True, 2.5)
    assert solar.qkv_bias and not solar.o_bias and solar.router_renormalized
    with pytest.raises(ValueError, match="topk_group"):
        LlamaConfig.from_hf(hf_config("tiny-solar-open", n_group=7, topk_group=1))
    assert LlamaConfig.from_hf(hf_config("tiny-solar-open", n_group=7, topk_group=7)) == solar
    # Hunyuan's MoE: its top-k a layer at a time (one value for all, else refused), a
    # shared MLP of the experts' width taken whole
    hunyuan = LlamaConfig.from_hf(hf_config("tiny-hunyuan-moe"))
    assert (hunyuan.n_experts, hunyuan.experts_per_token, hunyuan.ffn_dim) == (7, 3, 16)
    assert (hunyuan.shared_experts, hunyuan.shared_expert_scored) == (1, False)
    assert hunyuan.router_renormalized and hunyuan.qk_norm_after_rotary
    with pytest.raises(ValueError, match="moe_topk"):
        LlamaConfig.from_hf(hf_config("tiny-hunyuan-moe", moe_topk=[3, 2]))
    with pytest.raises(ValueError, match="router_choice_bias"):
        LlamaConfig(vocab_size=8, dim=8, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=8,
                    n_experts=4, experts_per_token=2, router_choice_bias=True)
    with pytest.raises(ValueError, match="router_scoring"):
        LlamaConfig(vocab_size=8, dim=8, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=8,
                    n_experts=4, experts_per_token=2, router_scoring="softplus")
    values = hf_config("tiny-olmoe").to_dict()
    values["num_local_experts"] = values.pop("num_experts")
    assert LlamaConfig.from_hf(values).n_experts == 6
    # one row reads its k experts (and the LM head, a row of the table); a batch the experts
    # its rows are expected to take
    idle = olmoe.n_layers * (6 - 4) * olmoe.expert_size
    assert olmoe.decode_bytes(2) == 2 * (olmoe.parameter_count() - idle - 67 * 32 + 32)
    assert olmoe.expert_bytes(2, 1) == 0
    assert 0 < olmoe.expert_bytes(2, 4) < 2 * olmoe.n_layers * 2 * olmoe.expert_size
    for change, field in (({"mlp_only_layers": [1]}, "mlp_only_layers"),
                          ({"decoder_sparse_step": 2}, "decoder_sparse_step")):
        with pytest.raises(ValueError, match=field):
            LlamaConfig.from_hf({**hf_config("tiny-qwen3-moe").to_dict(), **change})
    with pytest.raises(ValueError, match="num_local_experts"):
        LlamaConfig.from_hf({**hf_config("tiny-llama3").to_dict(), "num_local_experts": 4})
    with pytest.raises(ValueError, match="experts_per_token"):
        LlamaConfig.from_hf({**hf_config("tiny-mixtral").to_dict(), "num_experts_per_tok": 6})
    for ungated_or_layer_norm in ({"mlp_activation": "relu2"}, {"layer_norm": True}):
        with pytest.raises(ValueError, match="gated MLPs"):
            LlamaConfig(vocab_size=8, dim=8, n_layers=1, n_heads=2, n_kv_heads=2, ffn_dim=8,
                        n_experts=4, experts_per_token=2, **ungated_or_layer_norm)


def test_the_choice_bias_stays_fp32_through_conversions():
    """MiniMax-M2's bias an expert, which chooses among sigmoids that differ past bf16's
    precision, loads into fp32 in a bf16 model and stays so, unrounded, through
    .to(float16); the rest converts."""
    hf = random_hf_model("tiny-minimax-m2")
    stored = hf.model.layers[0].mlp.e_score_correction_bias.detach().clone()
    stored += 1e-4   # (a step neither bf16 nor fp16 holds beside values near 0.25)
    hf.model.layers[0].mlp.e_score_correction_bias.copy_(stored)
    model = Llama.from_hf(hf, dtype=torch.bfloat16)
    assert model.layers[0].b_choice.dtype == torch.float32
    assert torch.equal(model.layers[0].b_choice, stored)
    model = model.to(torch.float16)
    assert model.layers[0].wqkv.dtype == torch.float16
    assert torch.equal(model.layers[0].b_choice, stored)


@pytest.mark.parametrize("name", ["tiny-qwen2-moe", "tiny-mixtral", "tiny-solar-open"])
def test_a_rank_reads_one_share_from_stacked_and_separate_experts(name, tmp_path):
    """Under tensor parallelism a rank holds its share of every expert's width (the shared
    expert's parts too): read from transformers 5's stacked experts (cut after reading) and
    from a checkpoint's one tensor an expert (split as read), the same tensors. (Each
    share's logits against TP=1: test_tensor_parallel's families.)"""
    hf = random_hf_model(name)
    hf.save_pretrained(tmp_path)
    for rank in range(2):
        tp = TensorParallel(rank, 2)
        stacked = Llama.from_hf(hf, dtype=torch.float32, tp=tp).state_dict()
        separate = Llama.from_hf(tmp_path, dtype=torch.float32, device="cpu",
                                 tp=tp).state_dict()
        width = (hf.config.intermediate_size if name == "tiny-mixtral"
                 else hf.config.moe_intermediate_size)
        assert stacked["layers.0.w_down"].shape[2] == width // 2
        for key, value in stacked.items():
            assert torch.equal(value, separate[key]), f"rank {rank}: {key}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows, shared", [(1, 0), (8, 0), (3, 2), (24, 0)])
def test_router_and_experts_in_a_graph_equal_eager_over_replays(rows, shared, dtype):
    """A layer's mixture as the decode step runs it (tg.linear's router with the norm in its
    prologue, then the two kernels, each launched with PDL where the GPU has it): 50
    replays with fresh inputs equal the same calls run eagerly, bit for bit, and float64
    within tolerance (with a shared expert of two parts too)."""
    dim, ffn, n_experts, k = 512, 352, 16, 4
    router, w_gate_up, w_down = _experts(n_experts + shared, dim, ffn, dtype, "cuda")
    router = router[:n_experts + (shared > 0)]
    ones = torch.ones(dim, dtype=dtype, device="cuda")

    def chain(x):
        scores = tg.linear(x, router, norm_weight=ones, norm_eps=EPS)
        hidden, weights, experts = expert_gate_up(x, scores, w_gate_up, k, True, "swiglu",
                                                  EPS, shared)
        return expert_down(hidden, weights, experts, w_down, residual=x, shared=shared)

    def reference(x):   # (on the router's own scores: a near tie may go either way)
        scores = tg.linear(x, router, norm_weight=ones, norm_eps=EPS)
        return _reference(x, scores, w_gate_up, w_down, k, True, "swiglu", x, shared)[0]

    assert_replays_equal_eager(chain, reference, (rows, dim), dtype)
