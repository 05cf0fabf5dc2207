"""tilegraph's Llama family against Hugging Face transformers on the same weights."""

import dataclasses
import json
import math

import pytest
import torch

from _hf_cache import hf_next
from _multimodal import WRAPPED, tiny_with_images
from tilegraph.models import Llama, LlamaConfig
from tilegraph.models.hf_presets import SHAPES, hf_auto_class, hf_config, random_hf_model
from tilegraph.testing import MODEL_TOLERANCES, rel_error

transformers = pytest.importorskip("transformers")

TINY = ("tiny-llama3", "tiny-qwen2", "tiny-qwen3", "tiny-mistral", "tiny-phi3",
        "tiny-granite", "tiny-granite-swa", "tiny-ministral", "tiny-smollm3", "tiny-ernie4_5",
        "tiny-glm",
        "tiny-glm4", "tiny-helium", "tiny-exaone4", "tiny-olmo2", "tiny-olmo3", "tiny-hunyuan",
        "tiny-ministral3", "tiny-arcee", "tiny-nanochat",
        "tiny-hyperclovax", "tiny-starcoder2", "tiny-stablelm", "tiny-nemotron", "tiny-jais2",
        "tiny-apertus", "tiny-apertus1p5", "tiny-persimmon", "tiny-emu3", "tiny-olmo",
        "tiny-phi", "tiny-cohere", "tiny-cohere2", "tiny-gpt_neox", "tiny-gptj", "tiny-codegen",
        "tiny-falcon", "tiny-gpt2", "tiny-opt", "tiny-opt-350m", "tiny-biogpt", "tiny-xglm",
        "tiny-openai-gpt", "tiny-gpt_bigcode",
        "tiny-gpt_neo", "tiny-bloom", "tiny-mpt", "tiny-falcon-rw", "tiny-gemma", "tiny-gemma2",
        "tiny-vaultgemma", "tiny-gemma3", "tiny-mixtral", "tiny-qwen2-moe", "tiny-qwen3-moe",
        "tiny-olmoe", "tiny-granitemoe", "tiny-granitemoe-shared", "tiny-granitemoe-swa",
        "tiny-gpt-oss", "tiny-minimax-m2", "tiny-solar-open", "tiny-hunyuan-moe")


def _load_through_directory(hf, tmp_path, device, **save):
    hf.save_pretrained(tmp_path, **save)
    return Llama.from_hf(tmp_path, dtype=torch.float32, device=device)


def _hf_logits(hf, ids):
    with torch.no_grad():
        return hf(ids).logits


def _assert_steps_close(ours, ref, tol, what):
    """Per position (dim 1 of (B, T, vocab)), relative error within tol."""
    for t in range(ref.shape[1]):
        err = rel_error(ours[:, t], ref[:, t])
        assert err <= tol, f"{what}: position {t} relative error {err:.3g} > {tol}"


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("batch", [1, 3])
def test_reference_forward_matches_hf_over_64_positions(name, batch, tmp_path, device):
    hf = random_hf_model(name, scale=5.0)
    model = _load_through_directory(hf, tmp_path, device)
    ids = torch.randint(0, hf.config.vocab_size, (batch, 64))
    with torch.no_grad():
        ours = model(ids.to(device))
    _assert_steps_close(ours, _hf_logits(hf, ids), MODEL_TOLERANCES[torch.float32], name)


@pytest.mark.parametrize("name", TINY)
def test_reference_forward_bf16(name):
    """Against fp32 transformers over all 33 positions: within bf16's tolerance, or 1.5x
    transformers' own error in bf16 (Gemma's four norms a layer and scaled embeddings round
    more often: transformers itself is 1.2-1.4% off, 2.6% at its worst position)."""
    hf = random_hf_model(name, scale=5.0)
    model = Llama.from_hf(hf, dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16
    ids = torch.randint(0, hf.config.vocab_size, (2, 33))
    with torch.no_grad():
        ours = model(ids)
    ref = _hf_logits(hf, ids)
    bound = max(MODEL_TOLERANCES[torch.bfloat16],
                1.5 * rel_error(_hf_logits(hf.to(torch.bfloat16), ids), ref))
    assert rel_error(ours, ref) <= bound, f"{name}: {rel_error(ours, ref):.3g} > {bound:.3g}"


@pytest.mark.parametrize("name", TINY)
def test_prefill_and_decode_match_hf(name, tmp_path, device):
    """The fused path (tg.linear, static cache) teacher-forced: prefill odd-length prompts,
    then one decode step per position, each step's logits against HF's full forward."""
    hf = random_hf_model(name, scale=5.0)
    model = _load_through_directory(hf, tmp_path, device)
    ids = torch.randint(0, hf.config.vocab_size, (3, 8))
    _assert_prefill_then_decode_close(model, ids.to(device), _hf_logits(hf, ids), 5, 16, name)


def _assert_prefill_then_decode_close(model, ids, ref, prompt: int, max_seq: int, what: str):
    """The fused path teacher-forced: ids' first `prompt` tokens prefilled (into a cache of
    one slot more than the batch), then one decode step a position; each step's logits
    against `ref`, HF's full forward."""
    tol, batch = MODEL_TOLERANCES[torch.float32], ids.shape[0]
    cache = model.new_cache(max_batch=batch + 1, max_seq=max_seq)
    logits = model.prefill(ids[:, :prompt], cache)
    _assert_steps_close(logits[:, None], ref[:, prompt - 1:prompt], tol, f"{what} prefill")
    positions = torch.full((batch,), prompt, device=ids.device)
    for t in range(prompt, ids.shape[1]):
        logits = model.decode(ids[:, t], positions, cache)
        _assert_steps_close(logits[:, None], ref[:, t:t + 1], tol, f"{what} decode {t}")
        positions += 1


def _assert_plain_decode_close(model, ids, ref, prompt: int, max_seq: int, what: str):
    """plain_decode (the torch.compile peer's step) teacher-forced after a prefill of
    `prompt` tokens, each step's logits against `ref`, HF's full forward."""
    batch = ids.shape[0]
    cache = model.new_cache(max_batch=batch, max_seq=max_seq)
    model.prefill(ids[:, :prompt], cache)
    positions = torch.full((batch,), prompt, device=ids.device)
    for t in range(prompt, ids.shape[1]):
        logits = model.plain_decode(ids[:, t], positions, cache)
        _assert_steps_close(logits[:, None], ref[:, t:t + 1], MODEL_TOLERANCES[torch.float32],
                            f"{what} plain decode {t}")
        positions += 1


def _assert_forward_and_steps_match_hf(hf, model, ids, prompt: int, max_seq: int, what: str):
    """The reference forward over ids (on the model's device), then the fused path's
    prefill of `prompt` tokens and its decode steps, against HF's forward."""
    ref = _hf_logits(hf, ids)
    ids = ids.to(model.device)
    with torch.no_grad():
        ours = model(ids)
    _assert_steps_close(ours, ref, MODEL_TOLERANCES[torch.float32], f"{what} forward")
    _assert_prefill_then_decode_close(model, ids, ref, prompt, max_seq, what)
    return ref


@pytest.mark.parametrize("name, rope", [
    ("tiny-llama3", {"rope_type": "linear", "factor": 4.0}),
    ("tiny-mistral", {"rope_type": "linear", "factor": 4.0}),
    ("tiny-qwen3", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}),
    ("tiny-mistral", {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8,
                      "beta_fast": 16, "beta_slow": 2, "truncate": False}),
    ("tiny-llama3", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                     "mscale": 1.0, "mscale_all_dim": 0.5}),
])
def test_rope_scaling_matches_hf(name, rope, tmp_path, device):
    """Rotary positions scaled linearly (as DeepSeek-Coder's checkpoints give it), or by
    YaRN (Qwen3's and Qwen2.5's long-context setting: frequencies blended by wavelength, cos
    and sin scaled by its attention factor, its default or from mscale and mscale_all_dim),
    over 40 positions, 2.5-5x YaRN's pretrained context: the reference forward, the fused
    prefill and decode, against HF."""
    hf = random_hf_model(name, scale=5.0, rope_scaling={"rope_theta": 10000.0, **rope})
    model = _load_through_directory(hf, tmp_path, device)
    config = model.config
    if rope["rope_type"] == "yarn":
        assert config.rope_yarn["factor"] == rope["factor"] and config.rope_attention_factor > 1
    else:
        assert config.rope_linear_factor == 4.0 and config.rope_yarn is config.rope_llama3 is None
    ids = torch.randint(0, hf.config.vocab_size, (2, 40))
    _assert_forward_and_steps_match_hf(hf, model, ids, 33, 40, name)


@pytest.mark.parametrize("name", TINY)
def test_plain_decode_matches_hf_and_writes_the_cache_like_decode(name, tmp_path, device):
    """plain_decode (the torch.compile peer's step) teacher-forced like the fused path; the
    keys and values it caches equal the fused path's."""
    hf = random_hf_model(name, scale=5.0)
    model = _load_through_directory(hf, tmp_path, device)
    ids = torch.randint(0, hf.config.vocab_size, (3, 7))
    ref = _hf_logits(hf, ids)
    ids = ids.to(device)
    plain, fused = (model.new_cache(max_batch=4, max_seq=10) for _ in range(2))
    tol = MODEL_TOLERANCES[torch.float32]
    prompt = 4
    for cache in (plain, fused):
        model.prefill(ids[:, :prompt], cache)
    positions = torch.full((3,), prompt, device=device)
    for t in range(prompt, ids.shape[1]):
        logits = model.plain_decode(ids[:, t], positions, plain)
        _assert_steps_close(logits[:, None], ref[:, t:t + 1], tol, f"{name} plain decode {t}")
        model.decode(ids[:, t], positions, fused)
        positions += 1
    for ours, theirs in ((plain.k, fused.k), (plain.v, fused.v)):
        assert rel_error(ours[:, :3, :, :ids.shape[1]], theirs[:, :3, :, :ids.shape[1]]) <= tol
        assert not ours[:, :, :, ids.shape[1]:].any() and not ours[:, 3].any()


@pytest.mark.parametrize("step", ["decode", "plain_decode"])
def test_decode_rows_at_different_positions(step, tmp_path, device):
    """Each row attends to its own prefix only: rows prefilled one at a time with prompts
    of different lengths, then decoded together at their own positions."""
    hf = random_hf_model("tiny-llama3", scale=5.0)
    model = _load_through_directory(hf, tmp_path, device)
    prompts = [torch.randint(0, 67, (n,)) for n in (3, 7)]
    cache = model.new_cache(max_batch=2, max_seq=12)
    for slot, prompt in enumerate(prompts):
        model.prefill(prompt[None].to(device), cache, first_slot=slot)
    following = torch.randint(0, 67, (2,))
    logits = getattr(model, step)(following.to(device), torch.tensor([3, 7], device=device),
                                  cache)
    for row, prompt in enumerate(prompts):
        ref = _hf_logits(hf, torch.cat([prompt, following[row:row + 1]])[None])[0, -1]
        assert rel_error(logits[row], ref) <= MODEL_TOLERANCES[torch.float32]


def test_prompts_padded_to_one_length_prefill_as_they_would_alone(device):
    """Prompts of 3, 7 and 5 tokens padded to 7 and prefilled together with their lengths:
    each row's logits are its last real token's, as HF computes them, and the cache holds at
    every real position what the prompt prefilled alone writes there; lengths that do not
    describe the batch are refused."""
    hf = random_hf_model("tiny-llama3", scale=5.0)
    model = Llama.from_hf(hf, device=device)
    prompts = [torch.randint(1, 67, (n,)) for n in (3, 7, 5)]
    ids = torch.zeros(3, 7, dtype=torch.int64)
    for row, prompt in enumerate(prompts):
        ids[row, :len(prompt)] = prompt
    together, alone = model.new_cache(3, 12), model.new_cache(3, 12)
    logits = model.prefill(ids.to(device), together, lengths=[3, 7, 5])
    for row, prompt in enumerate(prompts):
        assert rel_error(logits[row], _hf_logits(hf, prompt[None])[0, -1]) <= \
            MODEL_TOLERANCES[torch.float32]
        model.prefill(prompt[None].to(device), alone, first_slot=row)
        for ours, theirs in ((together.k, alone.k), (together.v, alone.v)):
            assert rel_error(ours[:, row, :, :len(prompt)], theirs[:, row, :, :len(prompt)]) \
                <= MODEL_TOLERANCES[torch.float32]
    for bad in ([3, 7], [0, 7, 5], [3, 8, 5], [3.0, 7, 5]):
        with pytest.raises(ValueError, match="lengths"):
            model.prefill(ids.to(device), together, lengths=bad)


def test_a_cache_window_is_the_cache_s_first_positions(device):
    """Written through a window, keys land in the cache; the window reads as the cache's
    first positions, rotary tables included; a window past the cache is refused."""
    model = Llama.from_hf(random_hf_model("tiny-llama3", scale=5.0), device=device)
    cache = model.new_cache(max_batch=2, max_seq=12)
    window = cache.window(5)
    assert window.max_seq == 5 and window.max_batch == 2
    tokens = torch.randint(0, 67, (2,), device=device)
    positions = torch.tensor([4, 2], device=device)
    logits = model.decode(tokens, positions, window)
    for t, whole in ((window.k, cache.k), (window.v, cache.v), (window.cos, cache.cos)):
        assert t.data_ptr() == whole.data_ptr() and t.stride() == whole.stride()
    for row, (slot, position) in enumerate(((0, 4), (1, 2))):   # written in the cache
        assert cache.k[:, slot, :, position].abs().sum() > 0, row
        assert cache.v[:, slot, :, position].abs().sum() > 0, row
    full = model.new_cache(max_batch=2, max_seq=12)
    assert rel_error(logits, model.decode(tokens, positions, full)) <= \
        MODEL_TOLERANCES[torch.float32]
    for bad in (0, 13):
        with pytest.raises(ValueError, match="does not fit a cache of 12"):
            cache.window(bad)


def test_sharded_checkpoint_loads_like_the_model_object(tmp_path, device):
    hf = random_hf_model("tiny-llama3", scale=5.0)
    sharded = _load_through_directory(hf, tmp_path, device, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    direct = Llama.from_hf(hf, device=device)
    for (name, a), (_, b) in zip(sharded.state_dict().items(), direct.state_dict().items(),
                                 strict=True):
        assert torch.equal(a, b), name


def test_tied_embeddings_share_one_tensor():
    model = Llama.from_hf(random_hf_model("tiny-qwen2"))
    assert model.lm_head is model.embed
    assert model.layers[0].bqkv is not None and model.layers[0].bo is None


def test_config_fields_from_each_family():
    llama3 = LlamaConfig.from_hf(hf_config("tiny-llama3"))
    assert llama3.rope_llama3["factor"] == 8.0 and llama3.qkv_bias and llama3.o_bias
    qwen = LlamaConfig.from_hf(hf_config("tiny-qwen2"))
    assert qwen.qkv_bias and not qwen.o_bias and qwen.tie_embeddings
    assert qwen.sliding_window is None   # use_sliding_window=False
    mistral = LlamaConfig.from_hf(hf_config("tiny-mistral").to_dict())
    assert mistral.head_dim == 24 and mistral.q_dim == 48 and not mistral.qkv_bias
    qwen3 = LlamaConfig.from_hf(hf_config("tiny-qwen3"))
    assert qwen3.qk_norm and not qwen3.qkv_bias and not qwen3.o_bias
    assert qwen3.q_dim == 48 != qwen3.dim and qwen3.sliding_window is None
    biased = LlamaConfig.from_hf(hf_config("tiny-qwen3", attention_bias=True))
    assert biased.qkv_bias and biased.o_bias and not biased.mlp_bias
    assert not qwen.qk_norm and not llama3.qk_norm
    phi3 = LlamaConfig.from_hf(hf_config("tiny-phi3"))
    assert phi3.sliding_window == 64 and phi3.n_kv_heads == 2 and phi3.head_dim == 12
    assert not (phi3.qkv_bias or phi3.o_bias or phi3.mlp_bias or phi3.qk_norm)


@pytest.mark.parametrize("name, published", [
    ("tinyllama", 1_100_048_384), ("qwen3-0.6b", 596_049_920), ("phi3-mini", 3_821_079_552),
    ("gemma3-1b", 999_885_952)])
def test_real_shapes_have_their_published_parameter_counts(name, published):
    """A preset's config read as tilegraph reads it counts the parameters its model card
    publishes (Phi-3-mini's 3,821,079,552: q|k|v and gate|up stacked, nothing tied; Gemma 3
    1B's as KerasHub's preset lists it, four norms a layer and two head norms)."""
    assert LlamaConfig.from_hf(hf_config(name)).parameter_count() == published


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_preset_counts_the_parameters_transformers_builds(name):
    """Each preset, read as tilegraph reads it, has as many parameters as transformers' model
    of its config (built on the meta device: no memory): the same biases, norms, stacked and
    tied matrices (ERNIE 4.5 0.3B 360,748,032, GLM-4 9B 9,399,951,360: the 0.36B and 9.4B
    their cards give)."""
    config = hf_config(name)
    with torch.device("meta"):
        hf = hf_auto_class(config).from_config(config)
    assert LlamaConfig.from_hf(config).parameter_count() == sum(p.numel()
                                                               for p in hf.parameters())


def test_sliding_layers_as_transformers_builds_them():
    """Which layers slide: those layer_types names (Qwen2/3 only with use_sliding_window,
    which transformers needs to keep the window), else Qwen's from max_window_layers on,
    SmolLM3's without rotary embeddings, every Ministral, Mistral and Phi-3 layer, CWM's
    but every fourth from the first (and its window of 8192 where a config.json gives
    none), EXAONE 4's but every sliding_window_pattern-th (an int, or a string of L and G;
    its global layers without rotary embeddings, even where none slides, and every layer
    with them where it has no window); a window no layer uses is dropped; Llama never
    slides."""
    def read(name, **change):
        config = LlamaConfig.from_hf({**hf_config(name).to_dict(), "sliding_window": 8,
                                      **change})
        return config.sliding_window, config.sliding_layers

    mixed = ["full_attention", "sliding_attention"]
    assert read("tiny-qwen3", use_sliding_window=True, layer_types=mixed) == (8, (False, True))
    assert read("tiny-qwen3", use_sliding_window=False, layer_types=mixed) == (None, None)
    assert read("tiny-qwen2", use_sliding_window=True, layer_types=None,
                max_window_layers=1) == (8, (False, True))
    assert read("tiny-ministral", layer_types=mixed) == (8, (False, True))
    assert read("tiny-ministral", layer_types=["full_attention"] * 2) == (None, None)
    assert read("tiny-ministral", layer_types=None) == (8, None)
    assert read("tiny-smollm3", use_sliding_window=True, layer_types=None) == (8, (False, True))
    assert read("tiny-mistral") == (8, None) and read("tiny-phi3") == (8, None)
    assert read("tiny-llama3") == (None, None)
    assert read("tiny-cwm", num_hidden_layers=5, layer_types=None) == (
        8, (False, True, True, True, False))
    every_fourth = (True, True, True, False, True)
    for pattern in (4, "LLLG"):
        assert read("tiny-exaone4", num_hidden_layers=5, layer_types=None,
                    sliding_window_pattern=pattern) == (8, every_fourth)
        assert LlamaConfig.from_hf({**hf_config("tiny-exaone4").to_dict(), "layer_types": None,
                                    "num_hidden_layers": 5, "sliding_window_pattern": pattern}
                                   ).rope_layers == every_fourth
    unwindowed = LlamaConfig.from_hf({**hf_config("tiny-exaone4").to_dict(),
                                      "sliding_window": None, "layer_types": None})
    assert (unwindowed.sliding_window, unwindowed.rope_layers) == (None, None)
    global_only = LlamaConfig.from_hf({**hf_config("tiny-exaone4").to_dict(),
                                       "layer_types": ["full_attention"] * 2})
    assert (global_only.sliding_window, global_only.rope_layers) == (None, (False,) * 2)
    values = {**hf_config("tiny-cwm").to_dict(), "layer_types": None}
    del values["sliding_window"]
    assert LlamaConfig.from_hf(values).sliding_window == 8192
    config = LlamaConfig.from_hf({**hf_config("tiny-ministral").to_dict(),
                                  "sliding_window": 8, "layer_types": mixed})
    assert [config.window(i) for i in range(2)] == [None, 8]
    # a step's KV bytes: the full layer at 20 positions, the sliding one at its 8
    assert config.kv_bytes(2, 20) == 2 * config.kv_dim * 2 * (20 + 8)
    assert config.kv_bytes(2, 5) == 2 * config.kv_dim * 2 * (5 + 5)


def test_smollm3_layers_without_rotary_embeddings():
    """SmolLM3's no_rope_layers (1: rotates), or every no_rope_layer_interval-th layer
    left out where the list is not given; a list of the wrong length is refused."""
    values = hf_config("tiny-smollm3", num_hidden_layers=8, no_rope_layer_interval=4).to_dict()
    config = LlamaConfig.from_hf(values)
    assert config.rope_layers == (True, True, True, False) * 2
    assert [config.rotates(i) for i in range(8)] == list(config.rope_layers)
    values["no_rope_layers"] = None
    assert LlamaConfig.from_hf(values).rope_layers == (True, True, True, False) * 2
    values["no_rope_layers"] = [1] * 8
    assert LlamaConfig.from_hf(values).rope_layers is None
    with pytest.raises(ValueError, match="rope_layers names 3 layers; the model has 8"):
        LlamaConfig.from_hf({**values, "no_rope_layers": [1, 0, 1]})
    assert LlamaConfig.from_hf(hf_config("tiny-llama3")).rotates(1)


def test_olmo_configs_as_transformers_4_and_5_write_them():
    """OLMo 2: norms after attention and the MLP only, q and k each normalised as a whole,
    one bias flag for q, k, v and o, never windowed. OLMo 3: every fourth layer full, the
    others sliding, where layer_types is left out; YaRN on the full layers only, from
    transformers 5's rope_parameters per layer type or transformers 4's rope_theta and
    rope_scaling; clip_qkv (OLMo 1's) refused."""
    olmo2 = LlamaConfig.from_hf({**hf_config("tiny-olmo2").to_dict(), "attention_bias": True,
                                 "sliding_window": 8})
    assert olmo2.qk_norm and olmo2.qk_norm_whole and olmo2.post_norms
    assert not olmo2.pre_norms and olmo2.sliding_window is None
    assert (olmo2.qkv_bias, olmo2.o_bias, olmo2.mlp_bias) == (True, True, False)
    # per layer: q|k|v, o, gate|up|down, q's and k's norms of 32 and 16, two post norms
    assert olmo2.parameter_count() == 2 * (32 * 64 + 64 + 32 * 32 + 32 + 3 * 32 * 48 + 48
                                           + 2 * 32) + 2 * 67 * 32 + 32
    new = LlamaConfig.from_hf(hf_config("tiny-olmo3", num_hidden_layers=4, layer_types=None))
    assert new.sliding_layers == (True, True, True, False) and new.sliding_window == 24
    assert new.rope_yarn["factor"] == 16.0 and new.rope_local_theta == new.rope_theta == 5e5
    assert [new.rotates_locally(i) for i in range(4)] == [True, True, True, False]
    old = {key: value for key, value in hf_config("tiny-olmo3").to_dict().items()
           if key not in ("rope_parameters", "layer_types")}
    old.update(num_hidden_layers=5, rope_theta=5e5, rope_scaling={
        "rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16})
    config = LlamaConfig.from_hf(old)
    assert config.sliding_layers == (True, True, True, False, True)
    assert dataclasses.replace(config, n_layers=4, sliding_layers=new.sliding_layers) == new
    vault = LlamaConfig.from_hf({**hf_config("tiny-vaultgemma").to_dict(), "layer_types": None,
                                 "num_hidden_layers": 3})   # Gemma 2's alternate layers
    assert vault.sliding_layers == (True, False, True) and not vault.post_norms
    with pytest.raises(ValueError, match="clip_qkv"):
        LlamaConfig.from_hf({**hf_config("tiny-olmo2").to_dict(), "clip_qkv": 8.0})


def test_hunyuan_config():
    """Hunyuan's dense models: q and k heads normalised after their rotation; "dynamic"
    rotary scaling with an alpha is NTK-alpha's fixed base, theta alpha^(d / (d - 2)), in
    transformers 5's rope_parameters or 4's rope_scaling; without an alpha (dynamic NTK,
    which changes with the sequence's length) refused; its MoE models' fields, which the
    dense class never reads, passed over."""
    config = LlamaConfig.from_hf(hf_config("tiny-hunyuan"))
    assert config.qk_norm and config.qk_norm_after_rotary and not config.qk_norm_whole
    assert (config.qkv_bias, config.o_bias, config.mlp_bias) == (True, True, False)
    assert config.rope_theta == pytest.approx(1e4 * 1000.0 ** (8 / 6))
    old = {key: value for key, value in hf_config("tiny-hunyuan").to_dict().items()
           if key != "rope_parameters"}
    old.update(rope_theta=10000.0, num_experts=1, rope_scaling={
        "type": "dynamic", "alpha": 1000.0, "factor": 1.0, "beta_fast": 32, "beta_slow": 1})
    assert LlamaConfig.from_hf(old) == config
    with pytest.raises(ValueError, match="rope_type"):
        LlamaConfig.from_hf({**old, "rope_scaling": {"type": "dynamic", "factor": 2.0}})


def test_ministral3_config():
    """Ministral 3: Mistral's layer, YaRN, and q times Llama 4's attention temperature, 1
    + beta ln(1 + floor(p / the pretrained context)): 1 below it; the config class's
    rotary settings where a config.json leaves them out; as the decoder of a Mistral 3
    checkpoint; without llama_4_scaling_beta (which transformers reads unconditionally)
    refused."""
    config = LlamaConfig.from_hf(hf_config("tiny-ministral3"))
    assert (config.q_scale_beta, config.q_scale_length) == (0.5, 16)
    scales = config.q_scales(torch.tensor([0, 15, 16, 31, 32, 48]))
    expected = [1, 1, 1 + 0.5 * math.log(2), 1 + 0.5 * math.log(2), 1 + 0.5 * math.log(3),
                1 + 0.5 * math.log(4)]
    torch.testing.assert_close(scales, torch.tensor(expected))
    bare = {key: value for key, value in hf_config("tiny-ministral3").to_dict().items()
            if key not in ("rope_parameters", "head_dim")}
    default = LlamaConfig.from_hf(bare)
    assert (default.q_scale_beta, default.q_scale_length, default.head_dim) == (0.1, 16384, 128)
    assert default.rope_yarn["factor"] == 16.0 and default.rope_theta == 1e6
    scaled = LlamaConfig.from_hf({**bare, "rope_theta": 1e5, "rope_scaling": {
        "rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 8192,
        "llama_4_scaling_beta": 0.2}})   # transformers 4's spelling: not the class's
    assert (scaled.q_scale_beta, scaled.q_scale_length, scaled.rope_theta) == (0.2, 8192, 1e5)
    wrapped = LlamaConfig.from_hf({"model_type": "mistral3",
                                   "text_config": hf_config("tiny-ministral3").to_dict()})
    assert wrapped == config
    rope = dict(hf_config("tiny-ministral3").to_dict()["rope_parameters"])
    del rope["llama_4_scaling_beta"]
    with pytest.raises(ValueError, match="llama_4_scaling_beta"):
        LlamaConfig.from_hf({**bare, "rope_parameters": rope})


def test_ministral3_q_scaled_past_its_pretrained_context_matches_hf(tmp_path, device):
    """Ministral 3's q scaling from position 16 on: the reference forward over 26 positions,
    a prefill of 18 (past 16) and decode steps to 26 on the fused path, and the plain decode
    (the torch.compile peer's step) from 12 on, against HF."""
    hf = random_hf_model("tiny-ministral3", scale=5.0)
    model = _load_through_directory(hf, tmp_path, device)
    ids = torch.randint(0, hf.config.vocab_size, (2, 26))
    ref = _assert_forward_and_steps_match_hf(hf, model, ids, 18, 32, "ministral3")
    _assert_plain_decode_close(model, ids.to(device), ref, 12, 32, "ministral3")


def test_nanochat_config():
    """NanoChat: weightless norms (the checkpoint holds none), one of them folded into the
    embedding table; q and k heads normalised after a rotation the other way (loading turns
    it back); the config class's softcap of 15 where a config.json leaves it out; a tied LM
    head, which would read the normalised table, refused."""
    config = LlamaConfig.from_hf(hf_config("tiny-nanochat"))
    assert config.embedding_norm and config.rotary_negated and config.qk_norm_after_rotary
    assert config.mlp_activation == "relu2" and not config.mlp_gated
    assert config.logits_softcap == 4.0 and (config.qkv_bias, config.o_bias) == (True, True)
    values = hf_config("tiny-nanochat").to_dict()
    del values["final_logit_softcapping"]
    assert LlamaConfig.from_hf(values).logits_softcap == 15.0
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        LlamaConfig.from_hf({**values, "tie_word_embeddings": True})


@pytest.mark.parametrize("post_norm", [True, False])
def test_hyperclovax_scalars_and_norms_after_match_hf(post_norm, tmp_path, device):
    """HyperCLOVA X: Granite's scalars, but the logits multiplied by logits_scaling (Granite
    divides), the attention scale 1 / sqrt(head_dim) unless set, and norms after attention
    and the MLP (use_post_norm) whose outputs the residual multiplier scales: it folds into
    those norms' weights, or without them into the output and down projections."""
    hf = random_hf_model("tiny-hyperclovax", scale=5.0, use_post_norm=post_norm)
    config = LlamaConfig.from_hf(hf.config)
    assert config.post_norms == post_norm and config.logits_scaling == 2.0
    model = _load_through_directory(hf, tmp_path, device)
    ids = torch.randint(0, hf.config.vocab_size, (2, 24))
    _assert_forward_and_steps_match_hf(hf, model, ids, 9, 32, f"hyperclovax {post_norm}")
    unset = {**hf_config("tiny-hyperclovax").to_dict(), "attention_multiplier": None}
    assert LlamaConfig.from_hf(unset).attention_scale == 8 ** -0.5


@pytest.mark.parametrize("name, overrides", [
    ("tiny-starcoder2", {}), ("tiny-olmo", {}), ("tiny-phi", {}), ("tiny-gptj", {}),
    ("tiny-gpt_neox", {}),
    ("tiny-gpt_neox", {"use_parallel_residual": False}), ("tiny-falcon-mq", {}),
    ("tiny-falcon-mq", {"parallel_attn": False, "multi_query": False}),
    ("tiny-stablelm", {"use_parallel_residual": True}), ("tiny-stablelm", {"qk_layernorm": True}),
    ("tiny-cohere", {"use_qk_norm": True}), ("tiny-gpt2", {"scale_attn_weights": False}),
    ("tiny-opt", {}), ("tiny-biogpt", {}), ("tiny-xglm", {}),
    ("tiny-gpt_bigcode", {"multi_query": False}), ("tiny-gpt_neo", {}), ("tiny-codegen", {})])
def test_layer_norms_match_hf_over_a_stream_whose_mean_is_far_from_zero(name, overrides,
                                                                        tmp_path, device):
    """LayerNorm families: loading centres the residual stream (the table's rows, the output
    and down projections' columns and biases), so every norm's RMSNorm is its LayerNorm,
    and folds the norms' biases into the projections after them (the LM head's too). Here
    every embedding is shifted by 0.3 (the weights' spread is 0.08), so the stream's mean
    dominates: left uncentred, the logits are off by a relative 13-15 (the family tests,
    whose streams have a small mean, catch it too, by less). StarCoder2's norms have biases
    and its table is tied, OLMo's norms have no weights; Phi's and StableLM's parallel
    layers run attention and the MLP on one norm of their input, GPT-NeoX's on a norm each
    (or one after the other, where use_parallel_residual is off), its q|k|v stored head by
    head; GPT-2's, OPT's, BioGPT's (its table scaled), XGLM's (sinusoidal, made at load),
    GPT-BigCode's and GPT-Neo's position tables, centred too (GPT-2's scores here unscaled:
    scale_attn_weights off); CodeGen's q|v|k read from its shards.
    (Nemotron, Cohere and Cohere 2 add nothing to the stream's centring: the family tests
    cover them.)"""
    hf = random_hf_model(name, scale=4.0, **overrides)
    with torch.no_grad():
        hf.get_input_embeddings().weight.add_(0.3)
    model = _load_through_directory(hf, tmp_path, device)
    assert model.config.layer_norm
    ids = torch.randint(0, hf.config.vocab_size, (2, 14))
    _assert_forward_and_steps_match_hf(hf, model, ids, 9, 16, f"{name} {overrides} off zero")


def test_layer_norm_family_configs():
    """StarCoder2's, StableLM's, Nemotron's, OLMo's, Phi's, Cohere's and GPT-NeoX's fields in
    their own spellings (GPT-NeoX's as transformers 4 wrote them too): biases, LayerNorms
    (biased; Nemotron's 1 + weight; OLMo's without weights and at 1e-5 whatever the config
    says), ungated MLPs, partial rotary embeddings (their config classes' defaults where a
    config.json leaves them out), StarCoder2's window on every layer, parallel layers
    (StableLM's where use_parallel_residual says so), Phi's LM head bias, Cohere's logit
    scale and Cohere 2's rotary embeddings in its sliding layers alone. StableLM's and
    Cohere's per-head LayerNorms (qk_layernorm, use_qk_norm) a weight a head (another
    family's such a field refused), and layer_norm or parallel_residual with norms after the
    outputs refused."""
    star = LlamaConfig.from_hf(hf_config("tiny-starcoder2"))
    assert star.layer_norm and star.norm_bias and star.tie_embeddings
    assert (star.qkv_bias, star.o_bias, star.mlp_bias) == (True, True, True)
    assert star.mlp_activation == "gelu_tanh" and not star.mlp_gated
    assert star.sliding_window == 24 and star.sliding_layers is None
    stable_values = hf_config("tiny-stablelm").to_dict()
    stable = LlamaConfig.from_hf(stable_values)
    assert stable.rotary_dim == 4 and stable.head_dim == 16 and stable.norm_bias
    assert (stable.qkv_bias, stable.o_bias, stable.mlp_bias) == (True, False, False)
    heads_normed = LlamaConfig.from_hf({**stable_values, "qk_layernorm": True})
    assert heads_normed.qk_norm and heads_normed.qk_norm_per_head
    assert heads_normed.parameter_count() == stable.parameter_count() + 2 * (
        heads_normed.q_dim + heads_normed.kv_dim)
    assert not stable.parallel_residual
    assert LlamaConfig.from_hf({**stable_values, "use_parallel_residual": True}
                               ).parallel_residual
    bare = {key: stable_values[key] for key in ("model_type", "vocab_size", "hidden_size",
                                                "intermediate_size", "num_hidden_layers",
                                                "num_attention_heads")}
    assert LlamaConfig.from_hf(bare).rotary_dim == 4 and LlamaConfig.from_hf(
        bare).norm_eps == 1e-5
    nemotron = LlamaConfig.from_hf(hf_config("tiny-nemotron"))
    assert nemotron.norm_plus_one and nemotron.norm_bias and nemotron.rotary_dim == 4
    assert nemotron.mlp_activation == "relu2" and (nemotron.qkv_bias, nemotron.o_bias,
                                                   nemotron.mlp_bias) == (True, True, False)
    # Jais 2 from a config.json that leaves its class's defaults out: biased LayerNorms, an
    # ungated squared ReLU, biases on every projection
    jais2 = LlamaConfig.from_hf({"model_type": "jais2", "vocab_size": 67, "hidden_size": 32,
                                 "intermediate_size": 48, "num_hidden_layers": 2,
                                 "num_attention_heads": 4})
    assert jais2.layer_norm and jais2.norm_bias and not jais2.norm_plus_one
    assert jais2.norm_eps == 1e-5 and jais2.mlp_activation == "relu2"
    assert (jais2.qkv_bias, jais2.o_bias, jais2.mlp_bias) == (True, True, True)
    assert jais2.rotary_dim == jais2.head_dim == 8 and not jais2.tie_embeddings
    olmo_values = {**hf_config("tiny-olmo").to_dict(), "rms_norm_eps": 1e-3}
    olmo = LlamaConfig.from_hf(olmo_values)
    assert olmo.weightless_norms and olmo.layer_norm and not olmo.norm_bias
    assert olmo.norm_eps == 1e-5
    phi = LlamaConfig.from_hf(hf_config("tiny-phi"))
    assert phi.parallel_residual and phi.lm_head_bias and phi.norm_bias and phi.rotary_dim == 4
    assert phi.mlp_activation == "gelu_tanh" and (phi.qkv_bias, phi.o_bias, phi.mlp_bias) == (
        True, True, True)
    cohere_values = hf_config("tiny-cohere").to_dict()
    cohere = LlamaConfig.from_hf(cohere_values)
    assert cohere.parallel_residual and cohere.rotary_interleaved and not cohere.norm_bias
    assert cohere.logits_scaling == 2.0 and cohere.tie_embeddings
    assert LlamaConfig.from_hf({**cohere_values, "use_qk_norm": True}).qk_norm_per_head
    with pytest.raises(ValueError, match="use_qk_norm=True is not supported: stablelm"):
        LlamaConfig.from_hf({**stable_values, "use_qk_norm": True})
    with pytest.raises(ValueError, match="exclude each other"):
        dataclasses.replace(heads_normed, qk_norm_whole=True)
    cohere2 = LlamaConfig.from_hf(hf_config("tiny-cohere2"))
    assert cohere2.sliding_layers == (True, False) and cohere2.rope_layers == (True, False)
    four = LlamaConfig.from_hf({**hf_config("tiny-cohere2").to_dict(), "layer_types": None,
                                "num_hidden_layers": 8})
    assert four.sliding_layers == (True, True, True, False) * 2 == four.rope_layers
    # GPT-NeoX's config.json as transformers 4 wrote it (Pythia's): rotary_pct and
    # rotary_emb_base; a norm each before attention and the MLP
    neox = LlamaConfig.from_hf({**{key: value for key, value in
                                   hf_config("tiny-gpt_neox").to_dict().items()
                                   if key != "rope_parameters"},
                                "rotary_pct": 0.25, "rotary_emb_base": 500.0})
    assert neox.rotary_dim == 2 and neox.rope_theta == 500.0 and neox.mlp_activation == "gelu"
    assert neox.parallel_residual and not neox.one_norm_before and neox.norm_bias
    for field in ("layer_norm", "parallel_residual"):
        with pytest.raises(ValueError, match=field):
            dataclasses.replace(stable, **{field: True}, post_norms=True)
    with pytest.raises(ValueError, match="one_norm_before"):
        dataclasses.replace(stable, one_norm_before=True)


def test_falcon_config():
    """Falcon's fields as its config class reads them: multi_query's one kv head (unless the
    new decoder architecture's num_kv_heads rules), an MLP four times the width where
    ffn_hidden_size is null, side by side on one LayerNorm (Falcon 7B, Falcon 2 11B's
    num_ln_in_parallel_attn of 1) or on a norm each (the new architecture's default) or one
    after the other (parallel_attn off), every projection biased or none (bias), a tied
    table; ALiBi's bias rounded as transformers rounds it (Falcon-RW); the new architecture
    without parallel_attn refused by name."""
    bare = {"model_type": "falcon", "vocab_size": 65024, "n_embed": 256,
            "num_attention_heads": 8, "num_hidden_layers": 2}
    seven = LlamaConfig.from_hf(bare)
    assert (seven.dim, seven.n_heads, seven.n_kv_heads, seven.ffn_dim) == (256, 8, 1, 1024)
    assert seven.parallel_residual and seven.one_norm_before and seven.tie_embeddings
    assert seven.layer_norm and seven.norm_bias and seven.mlp_activation == "gelu"
    assert (seven.qkv_bias, seven.o_bias, seven.mlp_bias) == (False, False, False)
    assert seven.norm_eps == 1e-5 and seven.max_position_embeddings == 2048
    assert seven.rotary_dim == 32 and not seven.rotary_interleaved
    new = {**bare, "new_decoder_architecture": True, "num_kv_heads": 2, "bias": True,
           "ffn_hidden_size": 640}
    forty = LlamaConfig.from_hf(new)
    assert forty.n_kv_heads == 2 and forty.ffn_dim == 640
    assert forty.parallel_residual and not forty.one_norm_before
    assert (forty.qkv_bias, forty.o_bias, forty.mlp_bias) == (True, True, True)
    eleven = LlamaConfig.from_hf({**new, "num_ln_in_parallel_attn": 1})
    assert eleven.parallel_residual and eleven.one_norm_before
    heads = LlamaConfig.from_hf({**bare, "multi_query": False, "parallel_attn": False})
    assert heads.n_kv_heads == 8 and not heads.parallel_residual
    # Falcon-RW: ALiBi's slopes as transformers makes them (fp32, rounded to bf16), the bias
    # rounded too; no layer rotates
    rw = LlamaConfig.from_hf({**bare, "alibi": True, "num_attention_heads": 32,
                              "multi_query": False})
    from transformers.models.falcon.modeling_falcon import build_alibi_tensor
    slopes = build_alibi_tensor(torch.ones(1, 2, dtype=torch.long), 32, torch.float32)[:, 0, 1]
    assert rw.alibi_rounded and rw.alibi_slopes == tuple(slopes.tolist())
    assert len(set(rw.alibi_slopes)) == 32 and not any(map(rw.rotates, range(2)))
    assert not seven.alibi_rounded and seven.alibi_slopes is None
    with pytest.raises(ValueError, match="alibi_rounded"):
        dataclasses.replace(seven, alibi_rounded=True)
    with pytest.raises(ValueError, match="parallel_attn"):
        LlamaConfig.from_hf({**new, "parallel_attn": False})
    shape = LlamaConfig.from_hf(hf_config("falcon-7b"))
    assert (shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.ffn_dim) == (71, 1, 64,
                                                                                  18176)


def test_learned_position_configs():
    """GPT-2's, GPT-BigCode's, OPT's and GPT-Neo's fields in their own spellings: a learned
    position table of n_positions (max_position_embeddings) rows and no layer rotating,
    LayerNorms, biased projections (OPT's by enable_bias; GPT-Neo's q, k and v unbiased),
    ungated MLPs four times the width where n_inner is null, GPT-BigCode's one kv head
    (multi_query), attention scores left unscaled by scale_attn_weights (GPT-Neo's always),
    GPT-Neo's local layers (attention_types) sliding over window_size positions; what
    transformers builds beside such a decoder refused by name."""
    gpt2 = LlamaConfig.from_hf({"model_type": "gpt2", "n_embd": 64, "n_head": 4,
                                "n_layer": 2, "n_inner": None})
    assert (gpt2.vocab_size, gpt2.ffn_dim, gpt2.learned_positions) == (50257, 256, 1024)
    assert not any(map(gpt2.rotates, range(2))) and gpt2.tie_embeddings
    assert gpt2.layer_norm and gpt2.norm_bias and not gpt2.parallel_residual
    assert (gpt2.qkv_bias, gpt2.o_bias, gpt2.mlp_bias) == (True, True, True)
    assert gpt2.mlp_activation == "gelu_tanh" and gpt2.attention_scale == 16 ** -0.5
    # the first GPT: its norms after the adds, its afn "gelu" the tanh approximation
    first = {"model_type": "openai-gpt", "n_embd": 64, "n_head": 4, "n_layer": 2}
    gpt = LlamaConfig.from_hf(first)
    assert (gpt.vocab_size, gpt.ffn_dim, gpt.learned_positions) == (40478, 256, 512)
    assert gpt.norm_after_add and not gpt.pre_norms and not gpt.layer_norm
    assert gpt.mlp_activation == "gelu_tanh" and gpt.tie_embeddings and gpt.norm_eps == 1e-5
    assert (gpt.qkv_bias, gpt.o_bias, gpt.mlp_bias) == (True, True, True)
    assert LlamaConfig.from_hf({**first, "afn": "relu"}).mlp_activation == "relu"
    with pytest.raises(ValueError, match="afn"):
        LlamaConfig.from_hf({**first, "afn": "silu"})
    assert LlamaConfig.from_hf(hf_config("gpt2")).parameter_count() == 124_439_808
    unscaled = LlamaConfig.from_hf({"model_type": "gpt2", "n_embd": 64, "n_head": 4,
                                    "n_layer": 2, "scale_attn_weights": False})
    assert unscaled.attention_scale == 1.0
    for field, value in (("scale_attn_by_inverse_layer_idx", True),
                         ("add_cross_attention", True)):
        with pytest.raises(ValueError, match=field):
            LlamaConfig.from_hf({"model_type": "gpt2", "n_embd": 64, "n_head": 4,
                                 "n_layer": 2, field: value})
    bigcode = LlamaConfig.from_hf(hf_config("starcoderbase-1b"))
    assert (bigcode.n_heads, bigcode.n_kv_heads, bigcode.head_dim) == (16, 1, 128)
    assert bigcode.learned_positions == 8192 and bigcode.mlp_activation == "gelu_tanh"
    heads = LlamaConfig.from_hf(hf_config("tiny-gpt_bigcode", multi_query=False))
    assert heads.n_kv_heads == heads.n_heads == 4
    neo = LlamaConfig.from_hf(hf_config("gpt-neo-1.3b"))
    assert neo.attention_scale == 1.0 and neo.sliding_window == 256
    assert neo.sliding_layers == (False, True) * 12 and neo.ffn_dim == 8192
    assert (neo.qkv_bias, neo.o_bias, neo.mlp_bias) == (False, True, True)
    assert neo.parameter_count() == 1_315_575_808
    with pytest.raises(ValueError, match="attention_types"):
        LlamaConfig.from_hf({**hf_config("tiny-gpt_neo").to_dict(),
                             "attention_types": [[["global", "local"], 2]]})
    opt = LlamaConfig.from_hf(hf_config("opt-1.3b"))
    assert (opt.dim, opt.ffn_dim, opt.learned_positions, opt.mlp_activation) == (
        2048, 8192, 2048, "relu")
    # OPT's table: 2 rows before position 0, counted among the checkpoint's parameters
    assert opt.parameter_count() == 1_315_758_080
    unbiased = LlamaConfig.from_hf(hf_config("tiny-opt", enable_bias=False))
    assert (unbiased.qkv_bias, unbiased.o_bias, unbiased.mlp_bias) == (False, False, False)
    for field, value in (("_remove_final_layer_norm", True),
                         ("layer_norm_elementwise_affine", False)):
        with pytest.raises(ValueError, match=field):
            LlamaConfig.from_hf({**hf_config("tiny-opt").to_dict(), field: value})
    # OPT 350M: transformers' count (OPTForCausalLM on the meta device: 331,196,416), its
    # 512-wide table and the projections to and from it counted; a step reads the layers,
    # the head's table, the projection down to it, one row of the table projected up and
    # one of the position table
    post = LlamaConfig.from_hf(hf_config("opt-350m"))
    assert (post.norm_after_add, post.head_projection, post.pre_norms, post.layer_norm,
            post.norm_bias) == (True, 512, False, False, False)
    assert post.parameter_count() == 331_196_416
    d, f = 1024, 4096   # q|k|v and o with biases, the MLP's two with biases, 2 LayerNorms
    layers = post.n_layers * (4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d)
    assert post.decode_bytes(2) == 2 * (layers + 50272 * 512 + 512 * d + 2 * d)
    # (its final norm is none whatever _remove_final_layer_norm says)
    values = {**hf_config("tiny-opt-350m").to_dict(), "_remove_final_layer_norm": True}
    assert LlamaConfig.from_hf(values).norm_after_add
    with pytest.raises(ValueError, match="norm_after_add"):
        dataclasses.replace(post, pre_norms=True)
    # BioGPT: OPT's table offset, its embeddings times sqrt(1024) where scale_embedding says
    # so; 346,763,264 parameters, as transformers' model on the meta device counts them
    bio = LlamaConfig.from_hf(hf_config("biogpt"))
    assert (bio.learned_positions, bio.embedding_multiplier, bio.norm_eps, bio.mlp_activation,
            bio.layer_norm, bio.norm_bias) == (1024, 32.0, 1e-5, "gelu", True, True)
    assert bio.parameter_count() == 346_763_264
    unscaled = LlamaConfig.from_hf(hf_config("biogpt", scale_embedding=False))
    assert unscaled.embedding_multiplier == 1.0
    # XGLM: BioGPT's layer, its position table sinusoidal, made at load: no parameter of
    # the checkpoint's (564,463,616, as transformers counts them), one row read a step
    xglm = LlamaConfig.from_hf(hf_config("xglm-564m"))
    assert (xglm.learned_positions, xglm.embedding_multiplier, xglm.dim) == (2048, 32.0, 1024)
    assert xglm.parameter_count() == 564_463_616
    # (every parameter, the tied table once as the head; a row of it and of the positions')
    assert xglm.decode_bytes(2) == 2 * (564_463_616 + 2 * 1024)
    with pytest.raises(ValueError, match="learned_positions"):
        dataclasses.replace(gpt2, rope_layers=None)


def test_learned_positions_bound_the_cache_and_the_prompt(device):
    """A model of learned positions holds no more positions than its table has rows: a
    cache or a forward past them is refused with the bound."""
    model = Llama.from_hf(random_hf_model("tiny-gpt2", n_positions=24), device=device)
    with pytest.raises(ValueError, match="give max_seq <= 24"):
        model.new_cache(1, 25)
    with pytest.raises(ValueError, match="25 tokens pass the 24 positions"):
        model(torch.zeros(1, 25, dtype=torch.int64, device=device))
    assert model.new_cache(1, 24).max_seq == 24


@pytest.mark.parametrize("name, prefix", [("tiny-gpt2", "transformer."), ("tiny-opt", "model."),
                                          ("tiny-bloom", "transformer.")])
def test_checkpoint_named_without_its_prefix(name, prefix, tmp_path, device):
    """GPT-2's and OPT's published checkpoints were saved from the bare model: GPT-2's wte,
    h.N..., ln_f with no transformer. prefix (and each attention's causal-mask buffer, its
    Conv1D weights stored (in, out)), OPT's decoder.* with no model. prefix; neither with an
    LM head (tied)."""
    from safetensors.torch import save_file

    hf = random_hf_model(name, scale=5.0)
    state = {key.removeprefix(prefix): tensor.contiguous()
             for key, tensor in hf.state_dict().items() if key != "lm_head.weight"}
    if name == "tiny-gpt2":
        state["h.0.attn.bias"] = torch.ones(1, 1, 256, 256).tril()
    assert not any(key.startswith(prefix) for key in state)
    save_file(state, tmp_path / "model.safetensors")
    hf.config.save_pretrained(tmp_path)
    model = Llama.from_hf(tmp_path, dtype=torch.float32, device=device)
    ids = torch.randint(0, hf.config.vocab_size, (2, 12))
    with torch.no_grad():
        ours = model(ids.to(device))
    _assert_steps_close(ours, _hf_logits(hf, ids), MODEL_TOLERANCES[torch.float32], name)


def test_alibi_configs():
    """BLOOM's and MPT's fields in their own spellings (BLOOM's oldest n_embed too): ALiBi's
    slopes, as transformers builds them for either family for 1-40 heads, no layer rotating,
    LayerNorms (BLOOM's biased, MPT's not; BLOOM's on the embeddings too), an ungated MLP 4
    times the width (BLOOM's tanh GELU, MPT's exact one, expansion_ratio wide), MPT's
    softmax_scale; what either family's modelling code leaves out refused by name."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    from tilegraph.models.hf_families import alibi_slopes

    for heads in range(1, 41):
        two = torch.ones(1, 2, dtype=torch.int64)   # a mask of two positions
        theirs = build_alibi_tensor(two, heads, torch.float32)[:, 0, 1]   # the key at 1
        torch.testing.assert_close(torch.tensor(alibi_slopes(heads)), theirs)
        theirs = -build_mpt_alibi_tensor(heads, 2)[:, 0, 0]   # a key one position back
        torch.testing.assert_close(torch.tensor(alibi_slopes(heads)), theirs)
    bloom = LlamaConfig.from_hf({"model_type": "bloom", "vocab_size": 250880, "n_embed": 64,
                                 "n_head": 4, "n_layer": 2})
    assert (bloom.dim, bloom.n_heads, bloom.ffn_dim, bloom.mlp_activation) == (
        64, 4, 256, "gelu_tanh")
    assert bloom.alibi_slopes == (0.25, 0.0625, 0.015625, 0.00390625)
    assert bloom.rope_layers == (False, False) and bloom.embedding_layer_norm
    assert bloom.layer_norm and bloom.norm_bias and bloom.tie_embeddings
    assert (bloom.qkv_bias, bloom.o_bias, bloom.mlp_bias) == (True, True, True)
    with pytest.raises(ValueError, match="apply_residual_connection_post_layernorm"):
        LlamaConfig.from_hf({**hf_config("tiny-bloom").to_dict(),
                             "apply_residual_connection_post_layernorm": True})
    mpt = LlamaConfig.from_hf(hf_config("tiny-mpt"))
    assert mpt.alibi_slopes == alibi_slopes(5) == (0.25, 0.0625, 0.015625, 0.00390625, 0.5)
    assert (mpt.dim, mpt.ffn_dim, mpt.mlp_activation, mpt.attention_scale) == (
        40, 160, "gelu", 0.3)
    assert mpt.layer_norm and not mpt.norm_bias and not mpt.embedding_layer_norm
    assert (mpt.qkv_bias, mpt.o_bias, mpt.mlp_bias) == (False, False, False)
    seven = LlamaConfig.from_hf(hf_config("mpt-7b"))
    assert seven.attention_scale == 128 ** -0.5 and seven.max_position_embeddings == 2048
    values = hf_config("tiny-mpt").to_dict()
    for field, value in (("clip_qkv", 8.0), ("qk_ln", True), ("prefix_lm", True),
                         ("attn_uses_sequence_id", True), ("alibi", False),
                         ("alibi_bias_max", 16)):
        with pytest.raises(ValueError, match=f"attn_config.{field}"):
            LlamaConfig.from_hf({**values, "attn_config": {**values["attn_config"],
                                                           field: value}})
    for field, value in (("no_bias", False), ("logit_scale", 2.0)):
        with pytest.raises(ValueError, match=field):
            LlamaConfig.from_hf({**values, field: value})
    with pytest.raises(ValueError, match="alibi_slopes must be 5"):
        dataclasses.replace(mpt, alibi_slopes=(0.5,) * 4)
    with pytest.raises(ValueError, match="alibi_slopes positions"):
        dataclasses.replace(mpt, rope_layers=None)


def test_alibi_slopes_stay_fp32_on_conversion():
    """A model's ALiBi slopes (a buffer of its q heads') stay fp32 when its weights convert
    to 16 bits: 12 heads, whose last four slopes (2^(-i/2), i odd) bf16 would round."""
    model = Llama(LlamaConfig.from_hf(hf_config("tiny-mpt", n_heads=12, d_model=48)))
    model = model.to(torch.bfloat16)
    slopes = torch.tensor(model.config.alibi_slopes)
    assert not torch.equal(slopes.bfloat16().float(), slopes)
    assert model.embed.dtype == torch.bfloat16 and model.alibi_slopes.dtype == torch.float32
    assert torch.equal(model.alibi_slopes, slopes)


def test_codegen_config():
    """CodeGen's fields as GPT-J's (its spellings, one LayerNorm before attention and the MLP
    side by side, rotary_dim of each head's dims turned by neighbours, biases on the MLP and
    the LM head); a rotary_dim of null, whose tables transformers builds as wide as the
    model, refused."""
    shape = LlamaConfig.from_hf(hf_config("codegen-350m"))
    assert (shape.dim, shape.n_heads, shape.head_dim, shape.rotary_dim) == (1024, 16, 64, 32)
    assert shape.parallel_residual and shape.one_norm_before and shape.rotary_interleaved
    assert (shape.qkv_bias, shape.o_bias, shape.mlp_bias, shape.lm_head_bias) == (
        False, False, True, True)
    assert shape.parameter_count() == 356_712_448
    with pytest.raises(ValueError, match="rotary_dim"):
        LlamaConfig.from_hf({**hf_config("tiny-codegen").to_dict(), "rotary_dim": None})


def test_gptj_config():
    """GPT-J's own spellings (n_embd, n_head, n_layer, n_positions, layer_norm_epsilon,
    activation_function): one LayerNorm before attention and the MLP side by side, rotary_dim
    of each head's dims turned by neighbours (its class's 64 where a config.json leaves it
    out, all of them where it is null), n_inner's MLP width (four times the width where
    null), biases on the MLP and the LM head alone; a rotary_dim no head can turn refused."""
    values = hf_config("tiny-gptj").to_dict()
    gptj = LlamaConfig.from_hf(values)
    assert (gptj.dim, gptj.n_heads, gptj.n_kv_heads, gptj.n_layers) == (32, 4, 4, 2)
    assert gptj.rotary_dim == 4 and gptj.rotary_interleaved and gptj.rope_theta == 10000.0
    assert gptj.parallel_residual and gptj.one_norm_before and gptj.layer_norm
    assert gptj.norm_bias and gptj.lm_head_bias and not gptj.tie_embeddings
    assert (gptj.qkv_bias, gptj.o_bias, gptj.mlp_bias) == (False, False, True)
    assert gptj.mlp_activation == "gelu_tanh" and gptj.ffn_dim == 48
    wide = {**values, "n_embd": 1024, "n_head": 8, "n_inner": None}
    del wide["rotary_dim"]
    assert (LlamaConfig.from_hf(wide).rotary_dim, LlamaConfig.from_hf(wide).ffn_dim) == (
        64, 4096)
    assert LlamaConfig.from_hf({**values, "rotary_dim": None}).rotary_dim == 8
    for rotary in (3, 12):
        with pytest.raises(ValueError, match="rotary_dim"):
            LlamaConfig.from_hf({**values, "rotary_dim": rotary})


def test_gemma3_config_as_transformers_4_and_5_write_it():
    """Gemma 3's text config: transformers 5's (rope_parameters per layer type, layer_types)
    and a config.json as transformers 4 wrote it (rope_theta, rope_local_base_freq,
    rope_scaling, sliding_window_pattern; tie_word_embeddings left out: tied) read alike;
    the logits' softcap read, the attention scores' left out as transformers' Gemma 3 leaves
    it; bidirectional attention, scaled local layers and Gemma 3n refused."""
    new = LlamaConfig.from_hf(hf_config("tiny-gemma3"))
    assert (new.rope_theta, new.rope_local_theta, new.rope_linear_factor) == (1e6, 1e4, 2.0)
    assert new.sliding_window == 24 and new.sliding_layers == (True, False)
    assert [new.rotates_locally(i) for i in range(2)] == [True, False]
    assert new.qk_norm and new.post_norms and new.norm_plus_one and new.tie_embeddings
    assert new.mlp_activation == "geglu_tanh" and new.attention_scale == 12 ** -0.5
    old = {key: value for key, value in SHAPES["gemma3-1b"].items()
           if key != "tie_word_embeddings"}
    old["rope_scaling"] = {"rope_type": "linear", "factor": 8.0}   # Gemma 3 4B's
    config = LlamaConfig.from_hf(old)
    assert (config.rope_theta, config.rope_local_theta, config.rope_linear_factor) == (
        1e6, 1e4, 8.0)
    assert config.sliding_layers == ((True,) * 5 + (False,)) * 4 + (True, True)
    assert config.tie_embeddings and config.embedding_multiplier == 1152 ** 0.5
    assert config.attention_multiplier == 256 ** -0.5 == config.head_dim ** -0.5
    assert LlamaConfig.from_hf(hf_config("gemma3-1b").to_dict()) == dataclasses.replace(
        config, rope_linear_factor=1.0)
    capped = LlamaConfig.from_hf({**old, "attn_logit_softcapping": 50.0,
                                  "final_logit_softcapping": 30.0})
    assert capped.attn_softcap is None and capped.logits_softcap == 30.0
    for change, field in (({"use_bidirectional_attention": True}, "bidirectional"),
                          ({"model_type": "gemma3n_text"}, "model_type")):
        with pytest.raises(ValueError, match=field):
            LlamaConfig.from_hf({**old, **change})
    scaled_local = hf_config("tiny-gemma3").to_dict()
    scaled_local["rope_parameters"]["sliding_attention"] = {"rope_type": "linear",
                                                            "factor": 2.0, "rope_theta": 1e4}
    with pytest.raises(ValueError, match="sliding_attention.rope_type"):
        LlamaConfig.from_hf(scaled_local)


def test_gemma2_config_softcaps_and_alternate_layers():
    """Gemma 2: attention scores and logits softcapped (Gemma2Config's 50 and 30 where a
    config.json leaves them out, none where it says null), every other layer sliding from
    the first, one rotary base; softcaps refused in other families."""
    config = LlamaConfig.from_hf(hf_config("gemma2-2b", num_hidden_layers=5))
    assert (config.attn_softcap, config.logits_softcap) == (50.0, 30.0)
    assert config.sliding_window == 4096 and config.sliding_layers == (True, False) * 2 + (True,)
    assert config.rope_local_theta is None and not config.qk_norm and config.post_norms
    assert config.mlp_activation == "geglu_tanh" and config.tie_embeddings
    raw = {key: value for key, value in SHAPES["gemma2-2b"].items()
           if not key.endswith("softcapping")}
    assert (LlamaConfig.from_hf(raw).attn_softcap, LlamaConfig.from_hf(raw).logits_softcap) == (
        50.0, 30.0)
    uncapped = LlamaConfig.from_hf({**raw, "attn_logit_softcapping": None,
                                    "final_logit_softcapping": None})
    assert uncapped.attn_softcap is uncapped.logits_softcap is None
    with pytest.raises(ValueError, match="final_logit_softcapping"):
        LlamaConfig.from_hf({**hf_config("tiny-llama3").to_dict(),
                             "final_logit_softcapping": 30.0})
    with pytest.raises(ValueError, match="attn_softcap must be a positive number"):
        LlamaConfig.from_hf({**raw, "attn_logit_softcapping": 0.0})


def test_gemma1_config_as_transformers_reads_it():
    """Gemma 1: Llama's layout with Gemma's norms and embeddings; its config's legacy
    hidden_act "gelu" means the tanh approximation (transformers 5.25 reads it so); no window,
    no post norms, scores scaled by head_dim^-1/2, no softcap."""
    raw = {**{key: value for key, value in hf_config("tiny-gemma").to_dict().items()
              if key not in ("hidden_activation", "sliding_window")}, "hidden_act": "gelu"}
    config = LlamaConfig.from_hf(raw)
    assert config.mlp_activation == "geglu_tanh" and config.norm_plus_one
    assert not config.post_norms and config.sliding_window is None
    assert config.attention_multiplier is None and config.embedding_multiplier == 32 ** 0.5
    assert config.attn_softcap is config.logits_softcap is None and config.tie_embeddings


@pytest.mark.parametrize("wrapper", list(WRAPPED))
def test_multimodal_checkpoint_runs_its_language_model(wrapper, tmp_path, device):
    """Gemma 3 4B and larger, Mistral Small 3.1, the LLaVAs (VipLLaVA, Video-LLaVA and
    LLaVA-NeXT-Video too), InternVL, Idefics3, SmolVLM, Qwen2.5-VL, Qwen3-VL, EXAONE 4.5,
    Aya Vision, GOT-OCR 2 and Fuyu (a linear map of the patches) ship a vision tower
    beside the decoder: its text_config and language model's tensors are read (as
    transformers saves them, and as it names them in memory), the image side left out; on
    text the model is transformers' (the reference forward, the fused prefill and decode
    steps)."""
    from safetensors.torch import save_file

    hf = tiny_with_images(wrapper)
    hf.save_pretrained(tmp_path / "saved")
    model = Llama.from_hf(tmp_path / "saved", dtype=torch.float32, device=device)
    assert model.config.model_type == hf_config(WRAPPED[wrapper][1]).model_type
    tied = hf.lm_head.weight is hf.get_input_embeddings().weight
    # (a LayerNorm decoder's centred table cannot serve as its head: Aya Vision's Cohere 2)
    assert (model.lm_head is model.embed) == (tied and not model.config.layer_norm)
    ids = torch.randint(0, 64, (2, 18))   # no image tokens
    _assert_forward_and_steps_match_hf(hf, model, ids, 13, 24, f"{wrapper} multimodal")
    in_memory = {name: tensor.contiguous() for name, tensor in hf.state_dict().items()
                 if name != "lm_head.weight" or not tied}
    assert any(name.startswith(("model.language_model.", "model.text_model."))
               for name in in_memory)
    assert any(name.startswith(("model.vision_", "vision_", "model.visual.",
                                "model.image_tower."))   # (Video-LLaVA's)
               for name in in_memory)
    # transformers 4's names (and 5's, saving) where the decoder is a language_model:
    # language_model.model.*, vision_tower.*
    legacy = (("model.language_model.", "language_model.model."),
              ("lm_head.", "language_model.lm_head."), ("model.", ""))
    layouts = [("in-memory", ())]
    if any(name.startswith("model.language_model.") for name in in_memory):
        layouts.append(("legacy", legacy))
    if wrapper == "qwen2_5_vl":   # transformers 4's: Llama's names beside visual.*
        layouts.append(("qwen-vl", (("model.language_model.", "model."),
                                    ("model.visual.", "visual."))))
    for layout, renames in layouts:
        tensors = {}
        for name, tensor in in_memory.items():
            for new, before in renames:
                if name.startswith(new):
                    name = before + name.removeprefix(new)
                    break
            tensors[name] = tensor
        (tmp_path / layout).mkdir()
        (tmp_path / layout / "config.json").write_text(
            (tmp_path / "saved" / "config.json").read_text())
        save_file(tensors, tmp_path / layout / "model.safetensors")
        reloaded = Llama.from_hf(tmp_path / layout, dtype=torch.float32, device=device)
        for (name, ours), theirs in zip(model.state_dict().items(),
                                        reloaded.state_dict().values(), strict=True):
            assert torch.equal(ours, theirs), (layout, name)


def test_a_multimodal_config_reads_its_decoders():
    """The text_config's fields (the decoder's config class's defaults where it leaves them
    out), tied where either config ties (LLaVA's config class takes the text config's tie)
    or neither says; a wrapper around a decoder tilegraph does not run, or a wrapper it does
    not know, is a ValueError naming what it met."""
    text = hf_config("tiny-mistral").to_dict()
    for top, inner, tied in ((None, None, True), (False, None, False), (False, True, True),
                             (True, False, True), (None, False, False)):
        values = {"model_type": "llava", "text_config": {**text, "tie_word_embeddings": inner}}
        if top is not None:
            values["tie_word_embeddings"] = top
        config = LlamaConfig.from_hf(values)
        assert config.model_type == "mistral" and config.dim == text["hidden_size"]
        assert config.tie_embeddings == tied, (top, inner)
    # LLaVA 1.5's: a text_config of what Vicuna changes from LlamaConfig's defaults, which
    # transformers fills in
    sparse = {"model_type": "llava", "text_config": {"model_type": "llama",
                                                     "vocab_size": 32064, "rms_norm_eps": 1e-5}}
    theirs = transformers.LlavaConfig(text_config=sparse["text_config"]).text_config
    vicuna = LlamaConfig.from_hf(sparse)
    assert (vicuna.vocab_size, vicuna.dim, vicuna.ffn_dim, vicuna.n_layers, vicuna.n_heads,
            vicuna.n_kv_heads, vicuna.head_dim, vicuna.norm_eps) == (
        theirs.vocab_size, theirs.hidden_size, theirs.intermediate_size,
        theirs.num_hidden_layers, theirs.num_attention_heads, theirs.num_key_value_heads,
        theirs.head_dim, theirs.rms_norm_eps)
    # transformers 4's Qwen2.5-VL config: the decoder's fields at the top, mrope's sections
    nested = {**text, "model_type": "qwen2_5_vl_text",
              "rope_scaling": {"type": "mrope", "mrope_section": [1, 1, 2]}}
    flat = {**nested, "model_type": "qwen2_5_vl", "vision_config": {"depth": 1}}
    qwen = LlamaConfig.from_hf({"model_type": "qwen2_5_vl", "text_config": nested})
    assert LlamaConfig.from_hf(flat) == qwen and qwen.model_type == "qwen2"
    assert qwen.qkv_bias and qwen.rope_llama3 is qwen.rope_yarn is None
    with pytest.raises(ValueError, match="language model of a mistral3 checkpoint, "
                                         "model_type='mistral4'"):
        LlamaConfig.from_hf({"model_type": "mistral3", "text_config": {**text,
                                                                      "model_type": "mistral4"}})
    with pytest.raises(ValueError, match="model_type='paligemma' is not supported"):
        LlamaConfig.from_hf({"model_type": "paligemma", "text_config": text})


@pytest.mark.parametrize("head", ["own", "the embedding's", "none"])
def test_a_stored_lm_head_unties_what_the_config_ties(head, tmp_path, device):
    """A config that ties the LM head to the embedding over a checkpoint that stores a
    different head: transformers keeps both (its 5.25 Mistral 3 config ties by default,
    Mistral Small's checkpoints store a head of their own), so tilegraph does; a stored
    head equal to the embedding, or none, stays tied."""
    from safetensors.torch import load_file, save_file

    hf = random_hf_model("tiny-llama3", scale=5.0)
    hf.save_pretrained(tmp_path)
    tensors = load_file(tmp_path / "model.safetensors")
    embed = tensors["model.embed_tokens.weight"]
    heads = {"own": tensors["lm_head.weight"], "the embedding's": embed.clone()}
    tensors.pop("lm_head.weight")
    if head in heads:
        tensors["lm_head.weight"] = heads[head]
    save_file(tensors, tmp_path / "model.safetensors")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    model = Llama.from_hf(tmp_path, dtype=torch.float32, device=device)
    assert (model.lm_head is model.embed) == (head != "own")
    assert torch.equal(model.lm_head.cpu(), heads.get(head, embed))
    if head != "the embedding's":   # transformers warns and keeps both where they differ
        from transformers import AutoModelForCausalLM
        theirs = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
        _assert_forward_and_steps_match_hf(theirs.eval(), model,
                                           torch.randint(0, 64, (2, 30)), 17, 32,
                                           f"{head} lm_head")


def test_granite_scalars_are_read_and_checked():
    granite = LlamaConfig.from_hf(hf_config("tiny-granite"))
    assert (granite.embedding_multiplier, granite.attention_multiplier,
            granite.residual_multiplier, granite.logits_scaling) == (12.0, 0.0625, 0.22, 8.0)
    assert granite.attention_scale == 0.0625 and granite.tie_embeddings
    llama = LlamaConfig.from_hf(hf_config("tiny-llama3"))
    assert llama.attention_multiplier is None and llama.attention_scale == 8 ** -0.5
    with pytest.raises(ValueError, match="attention_multiplier must be a positive number"):
        LlamaConfig.from_hf({**hf_config("tiny-granite").to_dict(), "attention_multiplier": 0})


@pytest.mark.parametrize("name, overrides", [
    ("tiny-qwen3", {"attention_bias": True}),
    ("tiny-granite", {"attention_bias": True, "mlp_bias": True}),
    ("tiny-seed_oss", {"attention_bias": True, "attention_out_bias": True, "mlp_bias": True})])
def test_biases_match_hf(name, overrides, tmp_path, device):
    """attention_bias gives Qwen3 and Granite a bias on q, k, v and o (Qwen2: q, k, v only;
    Seed-OSS: o's by attention_out_bias); Granite's attention multiplier is folded into q's
    bias, its residual multiplier into the output and down projections' biases: the
    reference forward and the fused path's prefill and decode steps against HF."""
    hf = random_hf_model(name, scale=5.0, **overrides)
    model = _load_through_directory(hf, tmp_path, device)
    layer = model.layers[0]
    assert layer.bqkv is not None and layer.bo is not None
    assert (layer.b_down is not None) == overrides.get("mlp_bias", False)
    ids = torch.randint(0, hf.config.vocab_size, (2, 12))
    _assert_forward_and_steps_match_hf(hf, model, ids, 7, 16, name)


@pytest.mark.parametrize("name", ["tiny-exaone", "tiny-internlm3"])
def test_llama_under_other_names_matches_hf(name, tmp_path, device):
    """EXAONE 3 (its config's num_layers, layer_norm_epsilon and activation_function; its
    checkpoints' transformer.h.N.attn.attention... tensors, which transformers writes back on
    save) and InternLM3 (qkv_bias and bias for Llama's bias flags), from a directory and from
    the model object: the reference forward and the fused steps against HF."""
    hf = random_hf_model(name, scale=5.0)
    config = json.loads(json.dumps(hf_config(name).to_dict()))
    if name == "tiny-exaone":   # as the hub's config.json spells them
        for theirs, ours in (("num_layers", "num_hidden_layers"),
                             ("layer_norm_epsilon", "rms_norm_eps")):
            config[theirs] = config.pop(ours)
    model = _load_through_directory(hf, tmp_path, device)
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert LlamaConfig.from_hf(tmp_path) == model.config
    if name == "tiny-internlm3":
        assert model.config.qkv_bias and model.config.o_bias and model.config.mlp_bias
    ids = torch.randint(0, hf.config.vocab_size, (2, 12))
    _assert_forward_and_steps_match_hf(hf, model, ids, 7, 16, name)
    from_object = Llama.from_hf(hf, device=device)
    assert all(torch.equal(a, b) for a, b in zip(from_object.state_dict().values(),
                                                  model.state_dict().values(), strict=True))


def test_granite_swa_config():
    """Granite SWA: Granite's scalars, attention sinks (a parameter a q head a layer), every
    fourth layer full from the first where layer_types is left out, a window of 128 by
    default; layer_rope_theta's zeros rotate nothing, the sliding layers' own base is a
    local one, and other mixes are refused by name."""
    bare = {"model_type": "granite_swa", "vocab_size": 67, "hidden_size": 32,
            "intermediate_size": 48, "num_hidden_layers": 8, "num_attention_heads": 4,
            "num_key_value_heads": 2}
    swa = LlamaConfig.from_hf(bare)
    assert swa.attention_sinks and swa.sliding_window == 128 and swa.rope_layers is None
    assert swa.sliding_layers == tuple(i % 4 != 0 for i in range(8))
    assert swa.attention_multiplier == 1.0 and swa.tie_embeddings
    assert swa.parameter_count() == dataclasses.replace(
        swa, attention_sinks=False).parameter_count() + 8 * 4
    full_nope = LlamaConfig.from_hf({**bare, "layer_rope_theta": [0, 5e4, 5e4, 5e4] * 2})
    assert full_nope.rope_layers == (False, True, True, True) * 2
    assert full_nope.rope_theta == 5e4 and full_nope.rope_local_theta is None
    own_base = LlamaConfig.from_hf({**bare, "layer_rope_theta": [1e6, 1e4, 1e4, 0] * 2})
    assert own_base.rope_theta == 1e6 and own_base.rope_local_theta == 1e4
    with pytest.raises(ValueError, match="layer_rope_theta"):
        LlamaConfig.from_hf({**bare, "layer_rope_theta": [1e6, 1e4, 2e4, 1e4] * 2})
    with pytest.raises(ValueError, match="layer_rope_theta"):
        LlamaConfig.from_hf({**bare, "layer_rope_theta": [1e6, 1e4, 1e4, 1e4],
                             "num_hidden_layers": 8})


def test_iquestcoder_is_llama(device):
    """IQuest-Coder's checkpoints (model_type iquestcoder) are Llama's, as transformers builds
    them: Llama's fields, its own defaults (rms_norm_eps 1e-5, head_dim 128) where a config
    leaves them out, and transformers' model matched."""
    from transformers import CONFIG_MAPPING

    llama_values = hf_config("tiny-llama3").to_dict()
    values = {**llama_values, "model_type": "iquestcoder"}
    assert LlamaConfig.from_hf(values) == dataclasses.replace(
        LlamaConfig.from_hf(llama_values), model_type="iquestcoder")
    bare = LlamaConfig.from_hf({"model_type": "iquestcoder", "vocab_size": 67,
                                "hidden_size": 512, "intermediate_size": 48,
                                "num_hidden_layers": 1, "num_attention_heads": 2})
    assert bare.norm_eps == 1e-5 and bare.head_dim == 128 and bare.n_kv_heads == 2
    if "iquestcoder" not in CONFIG_MAPPING:
        pytest.skip("this transformers has no IQuest-Coder to compare with")
    fields = {k: v for k, v in SHAPES["tiny-llama3"].items() if k != "model_type"}
    hf = random_hf_model(CONFIG_MAPPING["iquestcoder"](**fields), scale=5.0)
    model = Llama.from_hf(hf, dtype=torch.float32, device=device)
    ids = torch.randint(0, hf.config.vocab_size, (2, 12))
    _assert_forward_and_steps_match_hf(hf, model, ids, 7, 16, "iquestcoder")


def test_apertus_and_persimmon_configs():
    """Apertus: Qwen 3's head norms, xIELU's ungated MLP (no other family's config may ask
    for xIELU, whose scalars only Apertus's checkpoints hold), Llama 3's scaling at base
    12e6 where a config names none; Apertus 1.5's decoder is Apertus's, its LM head's rows
    output_vocab_size (refused past the vocabulary, or with a tied table). Persimmon: biased
    head LayerNorms shared by the heads, half of each head rotated, biases everywhere."""
    apertus = LlamaConfig.from_hf({"model_type": "apertus", "vocab_size": 67,
                                   "hidden_size": 64, "intermediate_size": 48,
                                   "num_hidden_layers": 1, "num_attention_heads": 4})
    assert apertus.mlp_activation == "xielu" and apertus.up_activation == "none"
    assert not apertus.mlp_gated and apertus.qk_norm and not apertus.qk_norm_bias
    assert apertus.rope_theta == 12e6 and apertus.rope_llama3["factor"] == 8.0
    assert apertus.norm_eps == 1e-5 and apertus.head_rows == 67
    with pytest.raises(ValueError, match="hidden_act"):
        LlamaConfig.from_hf({**hf_config("tiny-arcee").to_dict(), "hidden_act": "xielu"})
    # (config.json's values: an older transformers has no Apertus 1.5)
    pruned = LlamaConfig.from_hf(SHAPES["tiny-apertus1p5"])
    whole = LlamaConfig.from_hf(SHAPES["tiny-apertus"])
    assert pruned == dataclasses.replace(whole, output_vocab_size=40)
    assert pruned.parameter_count() == whole.parameter_count() - 27 * 32
    with pytest.raises(ValueError, match="output_vocab_size must be an int in"):
        dataclasses.replace(pruned, output_vocab_size=68)
    with pytest.raises(ValueError, match="tie_embeddings must be off"):
        dataclasses.replace(pruned, tie_embeddings=True)
    persimmon = LlamaConfig.from_hf(hf_config("tiny-persimmon"))
    assert persimmon.qk_norm and persimmon.qk_norm_bias and not persimmon.qk_norm_per_head
    assert persimmon.layer_norm and persimmon.norm_bias and persimmon.rotary_dim == 4
    assert persimmon.qkv_bias and persimmon.o_bias and persimmon.mlp_bias
    assert persimmon.mlp_activation == "relu2"
    unnormed = LlamaConfig.from_hf(hf_config("tiny-persimmon", qk_layernorm=False))
    assert not unnormed.qk_norm and not unnormed.qk_norm_bias
    with pytest.raises(ValueError, match="qk_norm_bias says how q and k are normalised"):
        dataclasses.replace(unnormed, qk_norm_bias=True)


@pytest.mark.parametrize("wrapper, decoder, prefix, media", [
    ("apertus1p5", "tiny-apertus1p5", "language_model",
     ("vision_tokenizer.quantize.embedding.weight", "audio_tokenizer.encoder.conv.weight")),
    ("emu3", "tiny-emu3", "text_model",
     ("vqmodel.quantize.embedding.weight", "vqmodel.encoder.conv_in.weight"))])
def test_a_media_tokenizing_checkpoint_runs_its_decoder(wrapper, decoder, prefix, media,
                                                        tmp_path, device):
    """Apertus 1.5 (`apertus1p5`, Apertus's decoder with its LM head pruned to the first
    output_vocab_size ids) and Emu3 (`emu3`, Llama's) turn images (and audio) into ids of
    their vocabulary by tokenizers beside the decoder, which loading leaves out. Read from
    such a checkpoint (written here: transformers' models need the tokenizers' own
    configs), the model is the one read from the decoder alone."""
    from safetensors.torch import save_file
    from transformers import CONFIG_MAPPING

    if wrapper not in CONFIG_MAPPING:
        pytest.skip(f"this transformers has no {wrapper} to compare with")
    hf = random_hf_model(decoder, scale=5.0)
    alone = Llama.from_hf(hf, dtype=torch.float32, device=device)
    tensors = {name.replace("model.", f"model.{prefix}.", 1): tensor.contiguous()
               for name, tensor in hf.state_dict().items()}
    tensors |= {f"model.{name}": torch.randn(8, 4) for name in media}
    save_file(tensors, tmp_path / "model.safetensors")
    config = {"model_type": wrapper, "text_config": hf.config.to_dict(),
              "tie_word_embeddings": False}
    (tmp_path / "config.json").write_text(json.dumps(config))
    wrapped = Llama.from_hf(tmp_path, dtype=torch.float32, device=device)
    assert wrapped.config == alone.config
    for (name, ours), theirs in zip(alone.state_dict().items(),
                                    wrapped.state_dict().values(), strict=True):
        assert torch.equal(ours, theirs), name
    ids = torch.randint(0, 67, (2, 12), device=device)
    assert wrapped(ids).shape == (2, 12, alone.config.head_rows)


def test_apertus1p5_head_is_pruned(device):
    """Apertus 1.5's decoder (`apertus1p5_text`) is read as Apertus's with an LM head of
    output_vocab_size rows (40 of 67): logits for those ids only, inputs over all."""
    from transformers import CONFIG_MAPPING

    if "apertus1p5_text" not in CONFIG_MAPPING:
        pytest.skip("this transformers has no Apertus 1.5 to compare with")
    model = Llama.from_hf(random_hf_model("tiny-apertus1p5"), dtype=torch.float32,
                          device=device)
    assert model.config.model_type == "apertus" and model.config.head_rows == 40
    assert model.lm_head.shape == (40, 32) and model.embed.shape == (67, 32)


def test_config_from_a_directory(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(hf_config("tiny-qwen2").to_dict()))
    assert LlamaConfig.from_hf(tmp_path).model_type == "qwen2"


@pytest.mark.parametrize("change, field", [
    ({"model_type": "jamba"}, "model_type"),
    ({"num_local_experts": 8}, "num_local_experts"),
    ({"rope_scaling": {"rope_type": "dynamic", "factor": 4.0}}, "rope_type"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 0.0}}, "factor"),
    ({"hidden_act": "relu"}, "hidden_act"),
    ({"model_type": "arcee", "hidden_act": "silu"}, "hidden_act"),   # ungated: no silu
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 4}}, "quantization_config='gptq"),
    ({"quantization_config": {"quant_method": "fp8"}}, "unquantized checkpoint"),
])
def test_unsupported_fields_are_named(change, field):
    values = hf_config("tiny-llama3").to_dict()
    if "rope_scaling" in change:  # transformers 5 keeps rope settings in rope_parameters
        values.pop("rope_parameters", None)
    values.update(change)
    with pytest.raises(ValueError, match=field):
        LlamaConfig.from_hf(values)


def test_quantized_checkpoints_are_refused_multimodal_ones_too():
    """A quantized checkpoint's weights are packed or scaled: refused by name, where a
    multimodal checkpoint keeps quantization_config at its top as well."""
    wrapped = {"model_type": "llava", "text_config": hf_config("tiny-llama3").to_dict(),
               "quantization_config": {"quant_method": "awq"}}
    with pytest.raises(ValueError, match="quantization_config='awq"):
        LlamaConfig.from_hf(wrapped)


@pytest.mark.parametrize("name, overrides", [
    ("tiny-mistral", {}), ("tiny-phi3", {}),
    ("tiny-ministral", {"layer_types": ["sliding_attention", "full_attention"]}),
    ("tiny-gemma2", {}), ("tiny-gemma3", {}), ("tiny-cwm", {}), ("tiny-exaone4", {}),
    ("tiny-olmo3", {}),
    ("tiny-qwen2", {"use_sliding_window": True, "max_window_layers": 1}),
])
def test_sliding_windows_past_the_cache_match_hf(name, overrides, tmp_path, device):
    """A window of 6 positions over 22 (every layer's, or the layers the config names):
    the reference forward, the fused prefill of 9 tokens (past the window) and its decode
    steps (tg.decode_attention's window), and the plain decode, against HF."""
    hf = random_hf_model(name, scale=5.0, sliding_window=6, **overrides)
    model = _load_through_directory(hf, tmp_path, device)
    assert model.config.sliding_window == 6
    ids = torch.randint(0, hf.config.vocab_size, (2, 22))
    ref = _assert_forward_and_steps_match_hf(hf, model, ids, 9, 32, name)
    unwindowed = _hf_logits(random_hf_model(name, scale=5.0, sliding_window=100,
                                            **overrides), ids)
    assert not torch.allclose(ref[:, -1], unwindowed[:, -1])   # the window matters
    _assert_plain_decode_close(model, ids.to(device), ref, 9, 32, name)


# LongRoPE as Phi-3's 128k checkpoints set it, at a pretrained context of 16 positions
# (head_dim 8: transformers' Phi-3 counts the factors by hidden_size / heads)
LONGROPE = dict(rope_scaling={"rope_type": "longrope", "rope_theta": 10000.0,
                              "short_factor": [1.0, 1.3, 2.0, 2.5],
                              "long_factor": [1.0, 4.0, 16.0, 32.0],
                              "original_max_position_embeddings": 16},
                original_max_position_embeddings=16, max_position_embeddings=256, head_dim=8)


def _hf_step_by_step(hf, ids, prompt: int) -> torch.Tensor:
    """transformers' logits (B, T - prompt, vocab) for tokens prompt.. of ids, each decoded
    after the ones before through its cache, the prompt in one forward."""
    with torch.no_grad():
        out = hf(ids[:, :prompt], use_cache=True)
        steps = []
        for t in range(prompt, ids.shape[1]):
            out = hf_next(hf, ids[:, t:t + 1], out)
            steps.append(out.logits[:, -1])
    return torch.stack(steps, dim=1)


@pytest.mark.parametrize("prompt", [9, 20])
def test_longrope_switches_factors_as_transformers_does(prompt, tmp_path, device):
    """LongRoPE: transformers rotates a forward by the short factors while its longest
    position is within the pretrained context, by the long ones past it, and sqrt(1 + ln 16 /
    ln 16) scales cos and sin. The forward over 12 and 26 tokens (short, long throughout);
    then a prefill of 9 tokens (short) or 20 (long throughout) and steps one token at a
    time to 26 (past 16), against transformers decoding through its cache (whose earlier
    keys keep the factors they were rotated by)."""
    hf = random_hf_model("tiny-phi3", scale=5.0, **LONGROPE)
    model = _load_through_directory(hf, tmp_path, device)
    assert model.config.rope_attention_factor == pytest.approx(2 ** 0.5)
    ids = torch.randint(0, hf.config.vocab_size, (2, 26))
    tol = MODEL_TOLERANCES[torch.float32]
    for length in (12, 26):
        with torch.no_grad():
            ours = model(ids[:, :length].to(device))
        _assert_steps_close(ours, _hf_logits(hf, ids[:, :length]), tol, f"forward {length}")
    ref = _hf_step_by_step(hf, ids, prompt)
    cache = model.new_cache(max_batch=2, max_seq=32)
    model.prefill(ids[:, :prompt].to(device), cache)
    positions = torch.full((2,), prompt, device=device)
    for t in range(prompt, ids.shape[1]):
        logits = model.decode(ids[:, t].to(device), positions, cache)
        _assert_steps_close(logits[:, None], ref[:, t - prompt:t - prompt + 1], tol,
                            f"decode {t}")
        positions += 1


@pytest.mark.parametrize("overrides", [
    {"partial_rotary_factor": 0.5},   # 6 of a head's 12 dims turn
    {**LONGROPE, "partial_rotary_factor": 0.5,   # Phi-4-mini's: partial and LongRoPE
     "rope_scaling": {**LONGROPE["rope_scaling"], "short_factor": [1.0, 1.5],
                      "long_factor": [2.0, 8.0], "partial_rotary_factor": 0.5}},
])
def test_partial_rotary_embeddings_match_hf(overrides, tmp_path, device):
    """Phi-3's partial_rotary_factor (Phi-4-mini turns 96 of 128 dims): each q and k head's
    dims reordered at load so the turned pairs and the unturned dims pair as the kernels
    pair them, the unturned ones by cos 1, sin 0; the reference forward over 40 positions
    and the fused prefill and decode against HF."""
    hf = random_hf_model("tiny-phi3", scale=5.0, **overrides)
    model = _load_through_directory(hf, tmp_path, device)
    assert model.config.rotary_dim == model.config.head_dim // 2
    ids = torch.randint(0, hf.config.vocab_size, (2, 40))
    _assert_forward_and_steps_match_hf(hf, model, ids, 33, 40, "partial rotary")


def test_rotary_order_pairs_the_turned_dims_then_the_rest():
    from tilegraph.models.hf_weights import rotary_order

    order = rotary_order(128, 96)   # new dim -> transformers' dim
    assert sorted(order.tolist()) == list(range(128))
    pairs = list(zip(order[:64].tolist(), order[64:].tolist(), strict=True))
    assert pairs[:48] == [(i, i + 48) for i in range(48)]        # the turned pairs
    assert pairs[48:] == [(96 + i, 112 + i) for i in range(16)]  # the unturned dims


@pytest.mark.parametrize("head_dim, rotary_dim", [(8, 8), (16, 8), (128, 64)])
def test_rotary_order_of_neighbouring_pairs_turns_them_as_transformers_does(head_dim,
                                                                            rotary_dim):
    """GLM's and ERNIE 4.5's rotary embeddings turn the neighbours (2i, 2i + 1) of a head's
    first rotary_dim dims by the i-th frequency: the same turn after reordering by
    rotary_order(..., interleaved=True), with the kernels' pairs (i, i + head_dim / 2) and
    cos 1, sin 0 past rotary_dim / 2, gives transformers' result reordered alike."""
    from tilegraph.models.hf_weights import rotary_order

    x = torch.randn(5, head_dim, dtype=torch.float64)
    angles = torch.rand(5, rotary_dim // 2, dtype=torch.float64) * 6
    cos, sin = angles.cos(), angles.sin()
    turned = x.clone()   # transformers' order: each neighbouring pair by its own angle
    even, odd = x[:, 0:rotary_dim:2], x[:, 1:rotary_dim:2]
    turned[:, 0:rotary_dim:2], turned[:, 1:rotary_dim:2] = (even * cos - odd * sin,
                                                            odd * cos + even * sin)
    order = rotary_order(head_dim, rotary_dim, interleaved=True)
    assert sorted(order.tolist()) == list(range(head_dim))
    half = head_dim // 2
    pad = (0, half - rotary_dim // 2)
    cos_k = torch.nn.functional.pad(cos, pad, value=1.0)   # unturned pairs: by nothing
    sin_k = torch.nn.functional.pad(sin, pad, value=0.0)
    first, second = x[:, order[:half]], x[:, order[half:]]
    ours = torch.cat((first * cos_k - second * sin_k, second * cos_k + first * sin_k), dim=1)
    assert torch.allclose(ours, turned[:, order], rtol=0, atol=1e-12)


def test_families_read_with_their_bias_flags_and_class_defaults():
    """ERNIE 4.5's one bias flag for every projection; GLM's q|k|v bias (GLM-4-0414's too,
    with its norms after attention and the MLP, which scale by their weights alone);
    Helium's attention_bias (never on o) and Seed-OSS's (o's by attention_out_bias, its
    rotary pairs Llama's); what their config classes set where a config.json leaves it out
    (GLM: half of each head turned, the biases; ERNIE 4.5: rope_theta 500000, tied
    embeddings; Helium: rope_theta 100000)."""
    ernie = LlamaConfig.from_hf(hf_config("tiny-ernie4_5"))
    assert ernie.rotary_interleaved and ernie.rotary_dim == ernie.head_dim == 8
    assert ernie.qkv_bias and ernie.o_bias and ernie.mlp_bias and ernie.tie_embeddings
    glm = LlamaConfig.from_hf(hf_config("tiny-glm"))
    assert glm.rotary_interleaved and glm.rotary_dim == 8 and glm.head_dim == 16
    assert glm.qkv_bias and not glm.o_bias and not glm.mlp_bias and not glm.tie_embeddings
    assert not glm.post_norms
    glm4 = LlamaConfig.from_hf(hf_config("tiny-glm4"))
    assert dataclasses.replace(glm4, post_norms=False, model_type="glm") == glm
    assert glm4.post_norms and not glm4.norm_plus_one
    helium = LlamaConfig.from_hf(hf_config("tiny-helium"))
    assert helium.rotary_interleaved and helium.rotary_dim == helium.head_dim
    assert helium.qkv_bias and not helium.o_bias and helium.mlp_bias
    seed = LlamaConfig.from_hf(hf_config("tiny-seed_oss", attention_out_bias=False))
    assert seed.qkv_bias and not seed.o_bias and seed.mlp_bias and not seed.rotary_interleaved
    for name, left_out in (("tiny-glm", ("partial_rotary_factor", "attention_bias")),
                           ("tiny-glm4", ("partial_rotary_factor", "attention_bias")),
                           ("tiny-ernie4_5", ("rope_theta", "tie_word_embeddings")),
                           ("tiny-helium", ("rope_theta",))):
        values = hf_config(name).to_dict()
        values.pop("rope_parameters", None)
        for field in left_out:
            values.pop(field, None)
        config = LlamaConfig.from_hf(values)
        if name.startswith("tiny-glm"):
            assert config.rotary_dim == 8 and config.qkv_bias
        elif name == "tiny-helium":
            assert config.rope_theta == 100000.0
        else:
            assert config.rope_theta == 500000.0 and config.tie_embeddings
    assert not LlamaConfig.from_hf(hf_config("tiny-llama3")).rotary_interleaved


def test_longrope_factors_must_cover_the_head():
    values = {**hf_config("tiny-phi3", **LONGROPE).to_dict(), "head_dim": 12}
    with pytest.raises(ValueError, match="short_factor has 4 values; 12 rotated dims have 6"):
        LlamaConfig.from_hf(values)


def test_phi3_stacked_matrices_of_the_wrong_size_are_refused(tmp_path):
    """Phi-3 stores q|k|v in one matrix: a config whose heads do not add up to its rows is
    refused by name, not read as a misaligned q, k and v."""
    random_hf_model("tiny-phi3").save_pretrained(tmp_path)
    values = json.loads((tmp_path / "config.json").read_text())
    values["num_key_value_heads"] = 4
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"qkv_proj.weight: 96 rows, .* q_proj \+ k_proj "
                                         r"\+ v_proj have 144"):
        Llama.from_hf(tmp_path)


def test_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint directory"):
        Llama.from_hf(tmp_path / "missing")
    (tmp_path / "config.json").write_text(json.dumps(hf_config("tiny-qwen2").to_dict()))
    with pytest.raises(FileNotFoundError, match="safetensors"):
        Llama.from_hf(tmp_path)
    with pytest.raises(TypeError, match="transformers model or a checkpoint"):
        Llama.from_hf(42)


@pytest.mark.parametrize("shards", [1, 3])
def test_pytorch_bin_checkpoints_load_like_safetensors(shards, tmp_path):
    """pytorch_model.bin (or shards named by pytorch_model.bin.index.json, as transformers 4
    wrote them) gives the model the safetensors checkpoint gives it; a directory of neither
    is refused naming both."""
    from safetensors.torch import load_file

    from tilegraph.model_demo import DemoModel

    hf = random_hf_model("tiny-phi3", scale=3.0)
    hf.save_pretrained(tmp_path / "st")
    expected = Llama.from_hf(tmp_path / "st").state_dict()
    state = load_file(tmp_path / "st" / "model.safetensors")
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "config.json").write_text((tmp_path / "st" / "config.json").read_text())
    names = sorted(state)
    if shards == 1:
        torch.save(state, directory / "pytorch_model.bin")
    else:
        weight_map = {}
        for i in range(shards):
            file = f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin"
            torch.save({name: state[name] for name in names[i::shards]}, directory / file)
            weight_map.update({name: file for name in names[i::shards]})
        (directory / "pytorch_model.bin.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": weight_map}))
    loaded = Llama.from_hf(directory).state_dict()
    assert loaded.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(loaded[name], tensor), name
    assert DemoModel(str(directory)).has_weights   # `tilegraph demo --model DIR` loads them
    for file in directory.glob("pytorch_model*"):
        file.unlink()
    assert not DemoModel(str(directory)).has_weights
    with pytest.raises(FileNotFoundError, match=r"\*.safetensors or pytorch_model\*.bin"):
        Llama.from_hf(directory)


def test_checkpoint_missing_a_weight_or_of_a_wrong_shape_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    hf = random_hf_model("tiny-qwen2")
    hf.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    down = state.pop("model.layers.1.mlp.down_proj.weight")
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="layers.1.w_down"):
        Llama.from_hf(tmp_path)
    state["model.layers.1.mlp.down_proj.weight"] = down
    state["model.layers.0.input_layernorm.weight"] = torch.ones(1)   # would broadcast
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"layers.0.attn_norm: checkpoint shape \(1,\)"):
        Llama.from_hf(tmp_path)
    state.pop("model.layers.0.post_attention_layernorm.weight")   # a norm, folded on load
    save_file(state, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match="layers.0.mlp_norm"):
        Llama.from_hf(tmp_path)


def test_norm_weights_are_folded_into_the_projections_after_them():
    """wqkv and w_gate_up hold the checkpoint's weights times its norm weights (columns),
    and the norms keep one value, ones, which the decode kernels read once."""
    from tilegraph.kernels._norm_weight import is_one_value

    hf = random_hf_model("tiny-llama3", scale=2.0)
    model = Llama.from_hf(hf)
    for ours, theirs in zip(model.layers, hf.model.layers, strict=True):
        assert is_one_value(ours.attn_norm) and is_one_value(ours.mlp_norm)
        assert torch.equal(ours.attn_norm, torch.ones_like(ours.attn_norm))
        g = theirs.post_attention_layernorm.weight
        assert not torch.equal(g, torch.ones_like(g))   # random_hf_model's: a real test
        gate_rows = ours.w_gate_up[0::2]   # tg.interleave_gate_up: (gate_0, up_0, ...)
        torch.testing.assert_close(gate_rows, theirs.mlp.gate_proj.weight * g, rtol=0, atol=0)
        v_rows = ours.wqkv[-theirs.self_attn.v_proj.weight.shape[0]:]
        g = theirs.input_layernorm.weight
        torch.testing.assert_close(
            v_rows.sort(dim=0).values, (theirs.self_attn.v_proj.weight * g).sort(dim=0).values,
            rtol=0, atol=0)   # each head's rows in interleave_rotary_pairs order
    assert not any("norm" in name and name != "norm" for name in model.state_dict())
    model.to(torch.bfloat16)   # a conversion writes every element: the norms are made anew
    assert is_one_value(model.layers[1].attn_norm) and is_one_value(model.layers[1].mlp_norm)
    assert model.layers[1].mlp_norm.dtype == torch.bfloat16


def test_bad_token_ids_are_refused():
    model = Llama.from_hf(random_hf_model("tiny-qwen2"))
    with pytest.raises(ValueError, match=r"\[0, 67\)"):
        model(torch.tensor([[1, 67]]))
    with pytest.raises(TypeError, match="int64"):
        model(torch.ones(1, 3))
    with pytest.raises(ValueError, match="both > 0"):
        model(torch.ones(1, 0, dtype=torch.int64))
    cache = model.new_cache(max_batch=1, max_seq=4)
    with pytest.raises(ValueError, match="does not fit"):
        model.prefill(torch.ones(1, 5, dtype=torch.int64), cache)
    with pytest.raises(ValueError, match="outside the cache"):
        model.prefill(torch.ones(2, 3, dtype=torch.int64), cache)


# -- real shapes on the GPU --------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name, dtype, batch", [("tinyllama", torch.bfloat16, 2),
                                                ("qwen2-0.5b", torch.bfloat16, 3),
                                                ("llama3.2-1b", torch.bfloat16, 3),
                                                ("qwen2-0.5b", torch.float32, 3),
                                                ("gemma3-1b", torch.bfloat16, 2),
                                                ("gemma3-1b", torch.bfloat16, 8),
                                                ("gemma2-2b", torch.bfloat16, 2),
                                                ("ernie4.5-0.3b", torch.bfloat16, 3)])
def test_real_shapes_teacher_forced_over_64_positions(name, dtype, batch):
    """Against fp32 transformers: within the dtype's tolerance, or 1.5x transformers' own
    error in that dtype at the same step (random weights make bf16 logits flat enough for
    transformers itself to be 3% off). TinyLlama at batch 2: its projections of 8-44 MiB take
    the persistent two-row GEMV. Gemma 3 1B at batch 8: the tensor-core kernel, its post-normed
    outputs added to the stream by the small norm kernel just before each projection. ERNIE
    4.5 at batch 3: heads of 128 reordered at load for its neighbouring rotary pairs."""
    hf = random_hf_model(name, dtype=dtype, device="cuda")
    model = Llama.from_hf(hf)
    ids = torch.randint(0, hf.config.vocab_size, (batch, 64), device="cuda")
    own = _hf_logits(hf, ids).float()
    ref = _hf_logits(hf.float(), ids)
    del hf
    bounds = [max(MODEL_TOLERANCES[dtype], 1.5 * rel_error(own[:, t], ref[:, t]))
              for t in range(64)]

    def check(logits, first, what):
        for t in range(logits.shape[1]):
            err = rel_error(logits[:, t].float(), ref[:, first + t])
            assert err <= bounds[first + t], f"{what} position {first + t}: {err:.3g}"

    with torch.no_grad():
        check(model(ids), 0, f"{name} reference")
    cache = model.new_cache(max_batch=batch, max_seq=128)
    prompt = 31
    check(model.prefill(ids[:, :prompt], cache)[:, None], prompt - 1, "prefill")
    positions = torch.full((batch,), prompt, device="cuda")
    for t in range(prompt, 63):
        check(model.decode(ids[:, t], positions, cache)[:, None], t, "decode")
        positions += 1


@pytest.mark.gpu
@pytest.mark.parametrize("name, overrides, batch", [("qwen2-0.5b", {}, 2),
                                                    ("gemma2-2b", {"sliding_window": 64}, 2),
                                                    ("gemma3-1b", {}, 8)])
def test_decode_graph_replays_equal_eager_decode_over_200_positions(name, overrides, batch):
    """The decode chain (kernels launched with programmatic dependent launch, split runs
    merged through per-stream counters; Gemma 2's normed outputs added to the stream in
    the projections after them, its softcaps and windows; Gemma 3's at batch 8 by the
    tensor-core kernel's norm kernel) replayed 200 times from one graph gives the same
    logits, bit for bit, as the same steps launched eagerly; both stay within tolerance
    of the plain PyTorch forward in fp32 over the whole sequence (or 1.5x the plain
    forward's own error in bf16)."""
    import tilegraph as tg

    config = LlamaConfig.from_hf(hf_config(name, num_hidden_layers=3, **overrides))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    steps, prompt = 200, 7
    ids = torch.randint(0, config.vocab_size, (batch, prompt + steps), device="cuda")
    with torch.no_grad():
        own = model(ids).float()
        twin = Llama(config, dtype=torch.float32, device="cuda")
        twin.load_state_dict(model.state_dict())
        reference = twin(ids).float()
        del twin
    eager_cache, graph_cache = model.new_cache(batch, 256), model.new_cache(batch, 256)
    model.prefill(ids[:, :prompt], eager_cache)
    model.prefill(ids[:, :prompt], graph_cache)
    tokens = ids[:, prompt].clone()
    positions = torch.full((batch,), prompt, device="cuda")
    graph = tg.capture(model.decode, tokens, positions, graph_cache)
    model.prefill(ids[:, :prompt], graph_cache)   # undo the warm-up's cache writes
    for t in range(prompt, prompt + steps):
        tokens.copy_(ids[:, t])
        positions.fill_(t)
        replayed = graph.replay().float()
        eager = model.decode(ids[:, t], torch.full((batch,), t, device="cuda"), eager_cache)
        assert torch.equal(replayed, eager.float()), f"position {t}: replay != eager"
        err = rel_error(replayed, reference[:, t])
        bound = max(MODEL_TOLERANCES[torch.bfloat16],
                    1.5 * rel_error(own[:, t], reference[:, t]))
        assert err <= bound, f"position {t}: {err:.3g} > {bound:.3g}"


@pytest.mark.parametrize("tied", [True, False])
def test_norms_after_the_adds_and_a_narrower_table_match_hf(tied, tmp_path, device):
    """OPT 350M's layers: no norm before attention or the MLP, a LayerNorm of the stream
    after each residual add (its weight and bias random here, and the stream's mean far
    from zero: nothing is centred), no final norm; its table half the stream's width,
    projected up after it (folded into tilegraph's table) and down before the LM head
    (tied to the table, or a head of its own): the reference forward, the fused prefill and
    decode, and the plain decode."""
    hf = random_hf_model("tiny-opt-350m", scale=4.0, tie_word_embeddings=tied)
    with torch.no_grad():
        hf.get_input_embeddings().weight.add_(0.3)
        for layer in hf.model.decoder.layers:
            for norm in (layer.self_attn_layer_norm, layer.final_layer_norm):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.normal_(0.0, 0.2)
    model = _load_through_directory(hf, tmp_path, device)
    assert model.norm is None and model.head_projection.shape == (16, 32)
    assert model.embed.shape == (67, 32) and model.lm_head.shape == (67, 16)
    if not tied:
        assert not torch.equal(model.lm_head.cpu(), hf.get_input_embeddings().weight)
    ids = torch.randint(0, hf.config.vocab_size, (2, 14))
    ref = _assert_forward_and_steps_match_hf(hf, model, ids, 9, 16, f"opt-350m tied={tied}")
    _assert_plain_decode_close(model, ids.to(device), ref, 9, 16, f"opt-350m tied={tied}")


def test_a_stored_sinusoidal_table_is_made_anew(tmp_path, device):
    """XGLM's sinusoidal positions are no parameter: older checkpoints stored the table
    (`embed_positions.weights`), which loading passes over, as transformers does, and makes
    from the formula: here the stored one is garbage, and the logits still match."""
    from safetensors.torch import load_file, save_file

    hf = random_hf_model("tiny-xglm", scale=5.0)
    hf.save_pretrained(tmp_path)
    path = tmp_path / "model.safetensors"
    tensors = load_file(path)
    tensors["model.embed_positions.weights"] = torch.full((258, 40), 7.0)
    save_file(tensors, path, metadata={"format": "pt"})
    model = Llama.from_hf(tmp_path, dtype=torch.float32, device=device)
    ids = torch.randint(0, hf.config.vocab_size, (2, 12))
    with torch.no_grad():
        ours = model(ids.to(device))
    _assert_steps_close(ours, _hf_logits(hf, ids), MODEL_TOLERANCES[torch.float32], "xglm")
