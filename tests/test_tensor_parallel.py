"""Tensor-parallel Llama (tilegraph.dist): 2 and 3 processes over gloo on CPU (NCCL on GPUs)
give TP=1's logits and tokens; shards load from checkpoint files; bad splits and failed
ranks are clear errors, never hangs."""

import time

import pytest
import torch

from _ranks import run_ranks
from tilegraph import dist as tgd
from tilegraph.errors import CollectiveError
from tilegraph.models.llama import Llama
from tilegraph.models.llama_config import LlamaConfig
from tilegraph.testing import rel_error

pytest.importorskip("transformers")

# Twelve q heads over six kv heads, so that 2 and 3 ranks both split them (with grouped
# queries left on each); a vocabulary (67) that 2 and 3 do not divide, so the last rank's
# LM head block is padded.
SHAPE = ("tiny-llama3", dict(num_attention_heads=12, num_key_value_heads=6, hidden_size=96))


def _models(tp, source=None):
    """(TP=1 model, the tensor-parallel one) with the same weights, from `source` (a
    checkpoint directory) or the test's random transformers model."""
    from tilegraph.models.hf_presets import random_hf_model

    name, overrides = SHAPE
    hf = source or random_hf_model(name, scale=4.0, **overrides)
    return Llama.from_hf(hf), Llama.from_hf(hf, tp=tp)


def _compare_with_tp1(source=None) -> dict:
    """On each rank: the three decode paths' logits and the Generator's greedy tokens,
    against TP=1 in the same process."""
    import tilegraph as tg

    tp = tgd.init(timeout=120)
    reference, model = _models(tp, source)
    ids = torch.randint(0, 67, (2, 5), generator=torch.Generator().manual_seed(1))
    errors = {"forward": rel_error(model(ids), reference(ids))}
    caches = reference.new_cache(2, 16), model.new_cache(2, 16)
    before = reference.prefill(ids, caches[0])
    errors["prefill"] = rel_error(model.prefill(ids, caches[1]), before)
    tokens, positions = before.argmax(-1), torch.full((2,), 5)
    errors["decode"] = rel_error(model.decode(tokens, positions, caches[1]),
                                 reference.decode(tokens, positions, caches[0]))
    prompts = [[3, 1, 4, 1], [5, 9, 2, 6]]
    generated = [tg.Generator(m, max_batch=2, max_seq=16, sizes=(1, 2)).generate(prompts, 6)
                 for m in (reference, model)]
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters()
              if name.startswith("layers.0.") or name == "lm_head"}
    return {"errors": errors, "tokens": generated, "shapes": shapes}


def _check_ranks(results, size):
    config = LlamaConfig.from_hf(_hf_config())
    for rank, result in enumerate(results):
        for path, error in result["errors"].items():
            assert error < 1e-5, f"rank {rank}, {path}: relative error {error:.2e}"
        tp1, tp = result["tokens"]
        assert tp == tp1, f"rank {rank}: tokens {tp} differ from TP=1's {tp1}"
        shapes = result["shapes"]
        local_q = config.q_dim // size
        assert shapes["layers.0.wo"] == (config.dim, local_q)
        assert shapes["layers.0.wqkv"] == (local_q + 2 * config.kv_dim // size, config.dim)
        assert shapes["layers.0.w_down"] == (config.dim, config.ffn_dim // size)
        assert shapes["lm_head"] == (-(-config.vocab_size // size), config.dim)


def _hf_config():
    from tilegraph.models.hf_presets import hf_config

    name, overrides = SHAPE
    return hf_config(name, **overrides)


@pytest.mark.parametrize("size", [2, 3])
def test_tp_logits_and_tokens_equal_tp1(size):
    _check_ranks(run_ranks(size, _compare_with_tp1), size)


def test_tp_loads_only_its_shard_from_a_checkpoint(tmp_path):
    from tilegraph.models.hf_presets import random_hf_model

    name, overrides = SHAPE
    random_hf_model(name, scale=4.0, **overrides).save_pretrained(tmp_path)
    assert list(tmp_path.glob("*.safetensors"))
    _check_ranks(run_ranks(2, _compare_with_tp1, tmp_path), 2)


def _fail_on_rank_1() -> str:
    """Rank 1 stops before decoding; rank 0 must get a CollectiveError, not hang."""
    import tilegraph as tg

    tp = tgd.init(timeout=20)
    _, model = _models(tp)
    generator = tg.Generator(model, max_batch=1, max_seq=16, sizes=(1,))
    tp.barrier("the start of decoding")
    if tp.rank == 1:
        raise SystemExit(3)
    start = time.monotonic()
    try:
        generator.generate([[1, 2, 3]], 8)
    except CollectiveError as error:
        return f"{time.monotonic() - start:.1f} s: {error}"
    return "no error"


def test_a_rank_that_stops_is_a_collective_error_on_the_others():
    results = run_ranks(2, _fail_on_rank_1, allow_errors=True, timeout=180)
    message = results[0]
    assert "rank 0 of 2" in message and "failed" in message, message
    assert float(message.split(" s:")[0]) < 20, message   # within the timeout, not a hang
    assert results[1][0] == "error" and "SystemExit" in results[1][1]


@pytest.mark.parametrize("changed, name, value", [
    (dict(n_heads=6, n_kv_heads=2), "num_attention_heads", 6),
    (dict(n_kv_heads=2), "num_key_value_heads", 2), (dict(ffn_dim=50), "intermediate_size", 50)])
def test_heads_and_mlp_must_divide_by_tp(changed, name, value):
    values = dict(vocab_size=67, dim=48, n_layers=1, n_heads=8, n_kv_heads=4, ffn_dim=64,
                  head_dim=8)
    config = LlamaConfig(**{**values, **changed})
    with pytest.raises(ValueError, match=f"{name} \\({value}\\) does not divide by tp=4"):
        tgd.local_config(config, 4)


def test_tp_without_a_process_group_says_how_to_start_one():
    with pytest.raises(RuntimeError, match="torchrun --nproc-per-node 2"):
        tgd.TensorParallel.resolve(2)
    with pytest.raises(ValueError, match="positive int"):
        tgd.TensorParallel.resolve(0)
    assert tgd.TensorParallel.resolve(1).size == 1


def test_vocab_shards_cover_the_vocabulary_once():
    for vocab, size in ((67, 2), (67, 3), (128256, 4), (5, 8)):
        shards = [tgd.vocab_shard(vocab, r, size) for r in range(size)]
        rows = [start for s in shards for start in range(s[0], s[1])]
        assert rows == list(range(vocab))
        assert all(stop - start <= block for start, stop, block in shards)


def test_split_of_names_each_ranks_slice():
    config = LlamaConfig(vocab_size=67, dim=48, n_layers=1, n_heads=6, n_kv_heads=3,
                         ffn_dim=48, head_dim=8)
    assert tgd.split_of("layers.0.wqkv", "q", config, 1, 3) == (0, 16, 32)
    assert tgd.split_of("layers.0.wqkv", "k", config, 2, 3) == (0, 16, 24)
    assert tgd.split_of("layers.0.wo", "", config, 1, 3) == (1, 16, 32)
    assert tgd.split_of("layers.0.w_down", "", config, 2, 3) == (1, 32, 48)
    assert tgd.split_of("layers.0.w_gate_up", "up", config, 0, 3) == (0, 0, 16)
    assert tgd.split_of("lm_head", "", config, 2, 3) == (0, 46, 67)
    for whole in ("embed", "norm", "layers.0.attn_norm", "layers.0.bo", "layers.0.b_down"):
        assert tgd.split_of(whole, "", config, 1, 3) is None
    assert tgd.split_of("layers.0.wo", "", config, 0, 1) is None
