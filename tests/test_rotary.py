"""tg.rotary_qkv against its PyTorch reference: rotated q, and k, v written into the cache."""

import pytest
import torch

import tilegraph as tg
from tilegraph.kernels.rotary import rotary_qkv_ref
from tilegraph.testing import assert_close, poisoned


def _case(rows, heads, kv_heads, head_dim, dtype, device, max_seq=19, max_batch=5):
    qkv = torch.randn(rows, (heads + 2 * kv_heads) * head_dim).to(dtype=dtype, device=device)
    angles = torch.rand(max_seq, head_dim // 2, dtype=torch.float64) * 6.3
    cos, sin = angles.cos().float().to(device), angles.sin().float().to(device)
    positions = torch.randint(0, max_seq, (rows,), device=device)
    slots = torch.randperm(max_batch, device=device)[:rows]
    cache = torch.randn(max_batch, kv_heads, max_seq, head_dim).to(dtype=dtype, device=device)
    return qkv, cos, sin, positions, slots, cache


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim", [(1, 4, 2, 64), (3, 6, 3, 24),
                                                             (5, 2, 2, 10)])
def test_matches_reference(rows, heads, kv_heads, head_dim, dtype, device):
    qkv, cos, sin, positions, slots, cache = _case(rows, heads, kv_heads, head_dim, dtype,
                                                   device)
    k, v = cache.clone(), cache.clone() + 1
    k_ref, v_ref = k.clone(), v.clone()
    out = poisoned((rows, heads, head_dim), dtype, device)
    q = tg.rotary_qkv(qkv, cos, sin, positions, slots, k, v, n_heads=heads, out=out)
    q_ref = rotary_qkv_ref(qkv, cos, sin, positions, slots, k_ref, v_ref, n_heads=heads)
    assert q.data_ptr() == out.data_ptr()
    assert_close(q, q_ref, what="q")
    assert_close(k, k_ref, what="k cache")
    assert torch.equal(v, v_ref), "v is copied, not computed"


def _assert_normed_matches_reference(case, heads, dtype, device, norms, **options):
    """tg.rotary_qkv with these norm weights (and options) into poisoned q and the caches,
    against the float64 reference (which rounds nowhere); v copied as it was. Returns q."""
    qkv, cos, sin, positions, slots, cache = case
    k, v = cache.clone(), cache.clone() + 1
    k_ref, v_ref = k.double(), v.double()
    out = poisoned((qkv.shape[0], heads, cache.shape[3]), dtype, device)
    q = tg.rotary_qkv(qkv, cos, sin, positions, slots, k, v, n_heads=heads, norm_eps=1e-5,
                      out=out, **norms, **options)
    q_ref = rotary_qkv_ref(qkv.double(), cos.double(), sin.double(), positions, slots, k_ref,
                           v_ref, n_heads=heads, norm_eps=1e-5, **options,
                           **{name: t.double() for name, t in norms.items()})
    assert_close(q, q_ref, dtype, what="q")
    assert_close(k, k_ref, dtype, what="k cache")
    assert torch.equal(v.double(), v_ref), "v is copied, not computed"
    return q_ref


def _heads_apart(case, heads, kv_heads, head_dim):
    """case with its heads scaled far apart: a norm over another head's values shows."""
    qkv, *rest = case
    scale = torch.logspace(-1, 1, heads + 2 * kv_heads).repeat_interleave(head_dim)
    return (qkv * scale.to(dtype=qkv.dtype, device=qkv.device), *rest)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim", [(1, 4, 2, 64), (3, 7, 1, 24)])
def test_head_norms_match_reference(rows, heads, kv_heads, head_dim, dtype, device):
    """q_norm_weight / k_norm_weight: each q and k head RMS-normalised and scaled before the
    rotation (Qwen3), rounded where Hugging Face rounds; v as it was."""
    case = _heads_apart(_case(rows, heads, kv_heads, head_dim, dtype, device), heads,
                        kv_heads, head_dim)
    norms = {name: (1 + torch.randn(head_dim) * 0.3).to(dtype=dtype, device=device)
             for name in ("q_norm_weight", "k_norm_weight")}
    _assert_normed_matches_reference(case, heads, dtype, device, norms)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim, whole", [
    (1, 4, 2, 64, "qk"), (3, 7, 1, 24, "q"), (2, 3, 3, 10, "k"), (4, 1, 1, 16, "qk")])
def test_norms_over_all_heads_match_reference(rows, heads, kv_heads, head_dim, whole, dtype,
                                              device):
    """A q or k norm weight as wide as all of its heads (OLMo 2's): q (k) RMS-normalised as
    a whole, each head scaled by its slice of the weight; the other one by heads where it
    is a head wide. Heads far apart, so a norm over one head's values alone shows."""
    case = _heads_apart(_case(rows, heads, kv_heads, head_dim, dtype, device), heads,
                        kv_heads, head_dim)
    widths = {"q_norm_weight": heads * head_dim if "q" in whole else head_dim,
              "k_norm_weight": kv_heads * head_dim if "k" in whole else head_dim}
    norms = {name: (1 + torch.randn(width) * 0.3).to(dtype=dtype, device=device)
             for name, width in widths.items()}
    _assert_normed_matches_reference(case, heads, dtype, device, norms)
    # unit weights: q's values together at RMS 1 (the rotation keeps it), not each head's
    ones = {name: torch.ones_like(t) for name, t in norms.items()}
    q = tg.rotary_qkv(*case[:5], case[5].clone(), case[5].clone(), n_heads=heads, **ones)
    rms = q.float().pow(2).mean(-1)
    rms = rms.mean(-1) if "q" in whole else rms
    torch.testing.assert_close(rms, torch.ones_like(rms), rtol=2e-2, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim", [(1, 4, 2, 64), (3, 7, 1, 24)])
def test_a_norm_weight_a_head_matches_reference(rows, heads, kv_heads, head_dim, dtype,
                                                device):
    """q_norm_weight (heads, head_dim), k_norm_weight (kv_heads, head_dim): each head
    normalised alone and scaled by its own weight (StableLM's and Cohere's per-head norms),
    which the reference tells apart from every head scaled by the first one's."""
    case = _heads_apart(_case(rows, heads, kv_heads, head_dim, dtype, device), heads,
                        kv_heads, head_dim)
    norms = {name: (1 + torch.randn(count, head_dim) * 0.3).to(dtype=dtype, device=device)
             for name, count in (("q_norm_weight", heads), ("k_norm_weight", kv_heads))}
    q_ref = _assert_normed_matches_reference(case, heads, dtype, device, norms)
    qkv, cos, sin, positions, slots, cache = case
    first = rotary_qkv_ref(qkv.double(), cos.double(), sin.double(), positions, slots,
                           cache.double(), cache.double(), n_heads=heads, norm_eps=1e-5,
                           **{name: t[0].double() for name, t in norms.items()})
    assert heads == 1 or not torch.allclose(q_ref, first, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_head_norms_after_rotary_match_reference(dtype, device):
    """norm_after_rotary: each q and k head rotated (rounded), then normalised and scaled
    (Hunyuan's order), which the per-dim weights tell apart from the other order."""
    case = _case(3, 6, 2, 32, dtype, device)
    norms = {name: (1 + torch.randn(32) * 0.3).to(dtype=dtype, device=device)
             for name in ("q_norm_weight", "k_norm_weight")}
    q_ref = _assert_normed_matches_reference(case, 6, dtype, device, norms,
                                             norm_after_rotary=True)
    qkv, cos, sin, positions, slots, cache = case
    other_order = rotary_qkv_ref(qkv.double(), cos.double(), sin.double(), positions, slots,
                                 cache.double(), cache.double(), n_heads=6, norm_eps=1e-5,
                                 **{name: t.double() for name, t in norms.items()})
    assert not torch.allclose(q_ref, other_order, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("rows, heads, kv_heads, head_dim, per_head", [
    (1, 4, 2, 64, False), (3, 7, 1, 24, False), (2, 4, 2, 16, True)])
def test_head_norm_biases_match_reference(rows, heads, kv_heads, head_dim, per_head, dtype,
                                          device):
    """q_norm_bias / k_norm_bias: added after each head's norm weight (Persimmon's head
    LayerNorms, one weight and bias for all heads; or a weight and bias a head), before the
    rotation; far from zero, so that a bias left out, or added to the other one's heads,
    shows."""
    case = _heads_apart(_case(rows, heads, kv_heads, head_dim, dtype, device), heads,
                        kv_heads, head_dim)
    shapes = {"q": (heads, head_dim) if per_head else (head_dim,),
              "k": (kv_heads, head_dim) if per_head else (head_dim,)}
    norms = {}
    for part, shape in shapes.items():
        norms[f"{part}_norm_weight"] = (1 + torch.randn(shape) * 0.3).to(dtype=dtype,
                                                                          device=device)
        norms[f"{part}_norm_bias"] = (torch.randn(shape) + (2.0 if part == "q" else -3.0)).to(
            dtype=dtype, device=device)
    q_ref = _assert_normed_matches_reference(case, heads, dtype, device, norms)
    qkv, cos, sin, positions, slots, cache = case
    unbiased = rotary_qkv_ref(qkv.double(), cos.double(), sin.double(), positions, slots,
                              cache.double(), cache.double(), n_heads=heads, norm_eps=1e-5,
                              **{name: t.double() for name, t in norms.items()
                                 if name.endswith("weight")})
    assert not torch.allclose(q_ref, unbiased, rtol=0.1, atol=0.1)


def test_head_norm_biases_go_with_their_weights(device):
    qkv, cos, sin, positions, slots, cache = _case(2, 4, 2, 8, torch.float32, device)
    args = (qkv, cos, sin, positions, slots, cache, cache.clone())
    ones = torch.ones(8, device=device)
    with pytest.raises(ValueError, match="give those too"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_bias=ones, k_norm_bias=ones)
    with pytest.raises(ValueError, match="q_norm_bias and k_norm_bias go together"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_weight=ones, k_norm_weight=ones,
                      q_norm_bias=ones)
    with pytest.raises(ValueError, match=r"k_norm_bias has shape \(2, 8\); it must be its "
                                         r"weight's, \(8,\)"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_weight=ones, k_norm_weight=ones,
                      q_norm_bias=ones, k_norm_bias=torch.ones(2, 8, device=device))
    with pytest.raises(TypeError, match="q_norm_bias has dtype torch.float16"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_weight=ones, k_norm_weight=ones,
                      q_norm_bias=ones.half(), k_norm_bias=ones)


def test_norm_weights_of_other_widths_are_refused(device):
    qkv, cos, sin, positions, slots, cache = _case(2, 4, 2, 8, torch.float32, device)
    args = (qkv, cos, sin, positions, slots, cache, cache.clone())
    with pytest.raises(ValueError, match=r"expected \(8,\) for a norm a head, \(32,\)"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_weight=torch.ones(16, device=device),
                      k_norm_weight=torch.ones(8, device=device))
    with pytest.raises(ValueError, match=r"k_norm_weight has shape \(32,\)"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_weight=torch.ones(32, device=device),
                      k_norm_weight=torch.ones(32, device=device))
    with pytest.raises(ValueError, match="both a weight a head"):
        tg.rotary_qkv(*args, n_heads=4, q_norm_weight=torch.ones(4, 8, device=device),
                      k_norm_weight=torch.ones(8, device=device))


def test_rotation_keeps_norms_and_position_zero_is_identity(device):
    qkv, cos, sin, _, slots, cache = _case(2, 2, 1, 16, torch.float32, device)
    cos[0], sin[0] = 1.0, 0.0
    positions = torch.tensor([0, 7], device=device)
    q = tg.rotary_qkv(qkv, cos, sin, positions, slots, cache, cache.clone(), n_heads=2)
    heads = qkv.view(2, 4, 16)[:, :2]
    assert torch.equal(q[0], heads[0])
    torch.testing.assert_close(q.norm(dim=-1), heads.norm(dim=-1))


def test_bad_inputs_are_named(device):
    qkv, cos, sin, positions, slots, cache = _case(2, 4, 2, 8, torch.float32, device)
    args = (cos, sin, positions, slots, cache, cache.clone())
    with pytest.raises(ValueError, match="qkv must be"):
        tg.rotary_qkv(qkv[:, :-8], *args, n_heads=4)
    with pytest.raises(ValueError, match="cos must be fp32"):
        tg.rotary_qkv(qkv, cos.double(), *args[1:], n_heads=4)
    with pytest.raises(ValueError, match="positions must be"):
        tg.rotary_qkv(qkv, cos, sin, positions[:1], slots, cache, cache.clone(), n_heads=4)
    with pytest.raises(ValueError, match="one shape"):
        tg.rotary_qkv(qkv, cos, sin, positions, slots, cache, cache[:1].clone(), n_heads=4)
