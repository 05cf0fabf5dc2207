"""Hugging Face weights into tilegraph's Llama: from a transformers model object or a local
checkpoint directory (config.json + *.safetensors, or PyTorch's pytorch_model*.bin; sharded
or not). Nothing is downloaded. Under tensor parallelism each rank reads only its slice of
each tensor from the files (safetensors' get_slice; a .bin shard mapped into memory), never
the whole checkpoint.

Most checkpoints keep q, k, v and gate, up as separate matrices (Phi-3 stacks each group in
one, read here as its parts); the model fuses them once here (the way gpt-fast converts a
checkpoint), so a decode step runs one projection for each group: q|k|v stacked with each
head's halves interleaved (tg.linear_qkv's layout), gate and up rows interleaved (the layout
of tg.linear's "swiglu").
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

import tilegraph as tg

from ..dist.group import TensorParallel
from ..dist.sharding import ffn_share, split_of, vocab_shard
from .hf_families import GEMMA_TYPES, SINUSOIDAL_POSITION_TYPES, position_rows_before
from .llama_config import LlamaConfig

# (dimension, start, stop) of a tensor to read, or None for all of it
Split = tuple[int, int, int] | None
Reader = Callable[[Split], torch.Tensor]

# Buffers some checkpoints carry that the model recomputes (older GPT-NeoX and GPT-J
# checkpoints: their causal masks, under attention.bias / attn.bias and masked_bias;
# CodeGen's under attn.causal_mask).
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq", ".self_attn.bias", ".self_attn.masked_bias",
                     ".self_attn.causal_mask",
                     # (a sinusoidal table, which older XGLM checkpoints stored: made anew)
                     ".embed_positions.weights")
# The image side of a multimodal checkpoint: tilegraph decodes text.
_IGNORED_PREFIXES = tuple(f"{model}{part}" for model in ("model.", "")
                          for part in ("vision_tower.", "multi_modal_projector.",
                                       "image_newline", "vision_model.", "connector.",
                                       "visual.", "image_tower.", "video_tower.",
                                       "vision_embed_tokens.", "vision_tokenizer.",
                                       "audio_tokenizer.", "vqmodel."))


def _sliced(tensor_or_slice, split: Split):
    """tensor[..., start:stop, ...] along split's dimension (a safetensors slice too), or
    the whole tensor (a tensor's: `[:]` would refuse a scalar's, xIELU's)."""
    if split is None:
        return tensor_or_slice[...]
    dim, start, stop = split
    return tensor_or_slice[start:stop] if dim == 0 else tensor_or_slice[:, start:stop]


def weight_files(path: Path) -> list[Path]:
    """A checkpoint directory's weight files: its safetensors shards (those its index names,
    where it has one), else PyTorch's pytorch_model*.bin the same way; none where it has
    neither."""
    for index_name, pattern in (("model.safetensors.index.json", "*.safetensors"),
                                ("pytorch_model.bin.index.json", "pytorch_model*.bin")):
        index = path / index_name
        if index.is_file():
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            return [path / name for name in shards]
        files = sorted(path.glob(pattern))
        if files:
            return files
    return []


def _tensors_from_directory(path: Path) -> Iterator[tuple[str, Reader, tuple[int, ...]]]:
    files = weight_files(path)
    if not files:
        raise FileNotFoundError(f"no weights in {path}: tilegraph reads *.safetensors or "
                                "pytorch_model*.bin")
    for file in files:
        if file.suffix == ".bin":
            yield from _tensors_from_pickle(file)
            continue
        try:
            from safetensors import safe_open
        except ImportError as error:
            raise ImportError("loading a safetensors checkpoint needs safetensors: "
                              "pip install 'tilegraph[hf]'") from error
        with safe_open(str(file), framework="pt", device="cpu") as shard:
            for name in shard.keys():  # noqa: SIM118 (safe_open is not a dict)
                yield name, functools.partial(_shard_tensor, shard, name), tuple(
                    shard.get_slice(name).get_shape())


def _shard_tensor(shard, name: str, split: Split) -> torch.Tensor:
    """Tensor `name` of a safetensors shard, whole or split's slice of it."""
    return shard.get_tensor(name) if split is None else _sliced(shard.get_slice(name), split)


def _tensors_from_pickle(file: Path) -> Iterator[tuple[str, Reader, tuple[int, ...]]]:
    """A pytorch_model*.bin shard's tensors, mapped from the file where torch.save wrote it
    in its zip format (so a rank's slice copies only its rows), else read whole; tensors
    only (weights_only: no code in the file runs)."""
    try:
        state = torch.load(file, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:   # the legacy format cannot be mapped
        state = torch.load(file, map_location="cpu", weights_only=True)
    for name, tensor in state.items():
        yield name, lambda split, t=tensor: _sliced(t, split), tuple(tensor.shape)


def _source(model_or_path) -> tuple[LlamaConfig, Iterator[tuple[str, Reader, tuple[int, ...]]],
                                   torch.dtype, torch.device]:
    """Config, (name, reader of a slice, shape) of each tensor, and the checkpoint's own
    dtype and device."""
    if isinstance(model_or_path, (str, Path)):
        path = Path(model_or_path)
        if not path.is_dir():
            raise FileNotFoundError(f"{path} is not a checkpoint directory (config.json and "
                                    "*.safetensors or pytorch_model*.bin)")
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"no config.json in {path}")
        config_values = json.loads((path / "config.json").read_text())
        stored = config_values.get("dtype") or config_values.get("torch_dtype") or "float32"
        dtype = getattr(torch, str(stored), None)
        dtype = dtype if isinstance(dtype, torch.dtype) else torch.float32
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return (LlamaConfig.from_hf(config_values), _tensors_from_directory(path), dtype,
                device)
    if hasattr(model_or_path, "config") and hasattr(model_or_path, "state_dict"):
        state = model_or_path.state_dict()
        first = next(iter(state.values()))
        readers = ((name, lambda split, t=tensor: _sliced(t, split), tuple(tensor.shape))
                   for name, tensor in state.items())
        return LlamaConfig.from_hf(model_or_path.config), readers, first.dtype, first.device
    raise TypeError(f"from_hf takes a transformers model or a checkpoint directory, got "
                    f"{type(model_or_path).__name__}")


# Gemma's four norms a layer: the one before the MLP is Llama's post_attention_layernorm, its
# own post_attention_layernorm normalises the attention output (renamed first, to free the
# name).
_GEMMA_NORMS = [(r"\.post_attention_layernorm\.", ".post_attn_norm."),
                (r"\.pre_feedforward_layernorm\.", ".post_attention_layernorm."),
                (r"\.post_feedforward_layernorm\.", ".post_mlp_norm.")]
# EXAONE 4's and OLMo's norms after attention and the MLP (none before)
_POST_NORMS = [(r"\.post_attention_layernorm\.", ".post_attn_norm."),
               (r"\.post_feedforward_layernorm\.", ".post_mlp_norm.")]
# A multimodal checkpoint's language model under its prefix: as transformers 5 names it in
# memory (language_model: Gemma 3, Mistral 3, the LLaVAs, InternVL, Qwen2-VL, Qwen2.5-VL;
# text_model: Idefics3, SmolVLM) and as it (and transformers 4) saves a language_model
# (transformers 4 saved Qwen2-VL's decoder as model.*, Llama's names)
_LANGUAGE_MODEL_PREFIXES = [(r"^model\.(language|text)_model\.", "model."),
                            (r"^language_model\.model\.", "model."),
                            (r"^language_model\.lm_head\.", "lm_head.")]
# GPT-J's names, CodeGen's too (but for its q|v|k)
_GPTJ_NAMES = [(r"^transformer\.", "model."), (r"^model\.wte\.", "model.embed_tokens."),
               (r"^model\.h\.", "model.layers."), (r"^model\.ln_f\.", "model.norm."),
               (r"\.ln_1\.", ".input_layernorm."), (r"\.attn\.", ".self_attn."),
               (r"\.self_attn\.out_proj\.", ".self_attn.o_proj."),
               (r"\.mlp\.fc_in\.", ".mlp.up_proj."), (r"\.mlp\.fc_out\.", ".mlp.down_proj.")]
# CodeGen's fused projection, stored in the 4 shards it was trained over, each [q; v; k] of
# a quarter of the heads
_STACKED_BY_SHARD = "self_attn.qkv_in_shards"
_SHARDS, _SHARD_ORDER = 4, ("q_proj", "v_proj", "k_proj")
# GPT-2's names, GPT-BigCode's and GPT-Neo's too (but for their attention's)
_GPT2_NAMES = [(r"^(transformer\.)?wte\.", "model.embed_tokens."),
               (r"^(transformer\.)?wpe\.", "model.embed_positions."),
               (r"^(transformer\.)?h\.", "model.layers."),
               (r"^(transformer\.)?ln_f\.", "model.norm."),
               (r"\.ln_1\.", ".input_layernorm."), (r"\.ln_2\.", ".post_attention_layernorm."),
               (r"\.attn\.", ".self_attn."), (r"\.self_attn\.c_proj\.", ".self_attn.o_proj."),
               (r"\.mlp\.c_fc\.", ".mlp.up_proj."), (r"\.mlp\.c_proj\.", ".mlp.down_proj.")]
# Families whose checkpoints name Llama's tensors their own way: (pattern, Llama's name),
# applied in order (as transformers converts them when it loads one).
_HUNYUAN_HEAD_NORMS = [(r"\.self_attn\.query_layernorm\.", ".self_attn.q_norm."),
                       (r"\.self_attn\.key_layernorm\.", ".self_attn.k_norm.")]
_RENAMES = {"exaone": [(r"^transformer\.wte\.", "model.embed_tokens."),
                       (r"^transformer\.h\.", "model.layers."),
                       (r"^transformer\.ln_f\.", "model.norm."),
                       (r"\.attn\.attention\.", ".self_attn."),
                       (r"\.self_attn\.out_proj\.", ".self_attn.o_proj."),
                       (r"\.ln_1\.", ".input_layernorm."),
                       (r"\.ln_2\.", ".post_attention_layernorm."),
                       (r"\.mlp\.c_fc_0\.", ".mlp.gate_proj."),
                       (r"\.mlp\.c_fc_1\.", ".mlp.up_proj."),
                       (r"\.mlp\.c_proj\.", ".mlp.down_proj.")],
            "gemma2": _GEMMA_NORMS,
            # VaultGemma: Gemma 2's norm before the MLP, none after
            "vaultgemma": [(r"\.pre_feedforward_layernorm\.", ".post_attention_layernorm.")],
            # GLM-4-0414: its post_attention_layernorm is Llama's (before the MLP)
            "glm4": [(r"\.post_self_attn_layernorm\.", ".post_attn_norm."),
                     (r"\.post_mlp_layernorm\.", ".post_mlp_norm.")],
            "exaone4": _POST_NORMS,
            "olmo2": _POST_NORMS,
            "olmo3": _POST_NORMS,
            "hunyuan_v1_dense": _HUNYUAN_HEAD_NORMS,
            # (Hunyuan's MoE: its router's linear inside the gate)
            "hunyuan_v1_moe": [*_HUNYUAN_HEAD_NORMS, (r"\.mlp\.gate\.wg\.", ".mlp.gate.")],
            # HyperCLOVA X's norms after attention and the MLP
            "hyperclovax": [(r"\.post_norm1\.", ".post_attn_norm."),
                            (r"\.post_norm2\.", ".post_mlp_norm.")],
            # NanoChat's and StarCoder2's ungated MLPs
            "nanochat": [(r"\.mlp\.fc1\.", ".mlp.up_proj."),
                         (r"\.mlp\.fc2\.", ".mlp.down_proj.")],
            "starcoder2": [(r"\.mlp\.c_fc\.", ".mlp.up_proj."),
                           (r"\.mlp\.c_proj\.", ".mlp.down_proj.")],
            "gpt_neox": [(r"^gpt_neox\.", "model."), (r"^embed_out\.", "lm_head."),
                         (r"^model\.embed_in\.", "model.embed_tokens."),
                         (r"^model\.final_layer_norm\.", "model.norm."),
                         (r"\.attention\.", ".self_attn."),
                         (r"\.self_attn\.dense\.", ".self_attn.o_proj."),
                         (r"\.mlp\.dense_h_to_4h\.", ".mlp.up_proj."),
                         (r"\.mlp\.dense_4h_to_h\.", ".mlp.down_proj.")],
            "gptj": _GPTJ_NAMES,
            # (CodeGen's qkv_proj: _unstacked_by_shard)
            "codegen": [*_GPTJ_NAMES, (r"\.self_attn\.qkv_proj\.", f".{_STACKED_BY_SHARD}.")],
            # (Falcon's query_key_value: _unstacked_by_head)
            "falcon": [(r"^transformer\.", "model."),
                       (r"^model\.word_embeddings\.", "model.embed_tokens."),
                       (r"^model\.h\.", "model.layers."), (r"^model\.ln_f\.", "model.norm."),
                       (r"\.ln_attn\.", ".input_layernorm."),
                       (r"\.ln_mlp\.", ".post_attention_layernorm."),
                       (r"\.self_attention\.", ".self_attn."),
                       (r"\.self_attn\.dense\.", ".self_attn.o_proj."),
                       (r"\.mlp\.dense_h_to_4h\.", ".mlp.up_proj."),
                       (r"\.mlp\.dense_4h_to_h\.", ".mlp.down_proj.")],
            # (GPT-2's checkpoints name its modules with or without the transformer.
            # prefix; its c_attn stacks q, k and v, GPT-BigCode's kv head by kv head)
            "gpt2": [*_GPT2_NAMES, (r"\.self_attn\.c_attn\.", ".self_attn.qkv_proj.")],
            # (the first GPT's: GPT-2's modules, its tables named apart; the norms after
            # the adds named as GPT-2's before them, which loading places after)
            "openai-gpt": [(r"^(transformer\.)?tokens_embed\.", "model.embed_tokens."),
                           (r"^(transformer\.)?positions_embed\.", "model.embed_positions."),
                           *_GPT2_NAMES, (r"\.self_attn\.c_attn\.", ".self_attn.qkv_proj.")],
            "gpt_bigcode": [*_GPT2_NAMES,
                            (r"\.self_attn\.c_attn\.", ".self_attn.query_key_value.")],
            "gpt_neo": [*_GPT2_NAMES, (r"\.self_attn\.attention\.", ".self_attn."),
                        (r"\.self_attn\.out_proj\.", ".self_attn.o_proj.")],
            "opt": [(r"^(model\.)?decoder\.", "model."),
                    (r"^model\.final_layer_norm\.", "model.norm."),
                    (r"\.self_attn_layer_norm\.", ".input_layernorm."),
                    (r"\.final_layer_norm\.", ".post_attention_layernorm."),
                    (r"\.self_attn\.out_proj\.", ".self_attn.o_proj."),
                    (r"\.fc1\.", ".mlp.up_proj."), (r"\.fc2\.", ".mlp.down_proj.")],
            "biogpt": [(r"^biogpt\.", "model."), (r"^output_projection\.", "lm_head."),
                       (r"^model\.layer_norm\.", "model.norm."),
                       (r"\.self_attn_layer_norm\.", ".input_layernorm."),
                       (r"\.final_layer_norm\.", ".post_attention_layernorm."),
                       (r"\.self_attn\.out_proj\.", ".self_attn.o_proj."),
                       (r"\.fc1\.", ".mlp.up_proj."), (r"\.fc2\.", ".mlp.down_proj.")],
            "xglm": [(r"^model\.layer_norm\.", "model.norm."),
                     (r"\.self_attn_layer_norm\.", ".input_layernorm."),
                     (r"\.final_layer_norm\.", ".post_attention_layernorm."),
                     (r"\.self_attn\.out_proj\.", ".self_attn.o_proj."),
                     (r"\.fc1\.", ".mlp.up_proj."), (r"\.fc2\.", ".mlp.down_proj.")],
            # (BLOOM's checkpoints name its modules with or without the transformer. prefix;
            # its query_key_value stacks q, k and v head by head: _unstacked_by_head)
            "bloom": [(r"^(transformer\.)?word_embeddings\.", "model.embed_tokens."),
                      (r"^(transformer\.)?word_embeddings_layernorm\.", "model.embed_norm."),
                      (r"^(transformer\.)?h\.", "model.layers."),
                      (r"^(transformer\.)?ln_f\.", "model.norm."),
                      (r"\.self_attention\.", ".self_attn."),
                      (r"\.self_attn\.dense\.", ".self_attn.o_proj."),
                      (r"\.mlp\.dense_h_to_4h\.", ".mlp.up_proj."),
                      (r"\.mlp\.dense_4h_to_h\.", ".mlp.down_proj.")],
            # (MPT's Wqkv stacks q, k and v: _STACKED)
            "mpt": [(r"^transformer\.", "model."), (r"^model\.wte\.", "model.embed_tokens."),
                    (r"^model\.blocks\.", "model.layers."), (r"^model\.norm_f\.", "model.norm."),
                    (r"\.norm_1\.", ".input_layernorm."),
                    (r"\.norm_2\.", ".post_attention_layernorm."),
                    (r"\.attn\.Wqkv\.", ".self_attn.qkv_proj."),
                    (r"\.attn\.out_proj\.", ".self_attn.o_proj."), (r"\.ffn\.", ".mlp.")],
            "phi": [(r"\.self_attn\.dense\.", ".self_attn.o_proj."),
                    (r"\.mlp\.fc1\.", ".mlp.up_proj."), (r"\.mlp\.fc2\.", ".mlp.down_proj."),
                    (r"^model\.final_layernorm\.", "model.norm.")],
            "gemma3_text": _GEMMA_NORMS,
            # (Persimmon's query_key_value stacks q, k and v head by head: _unstacked_by_head)
            "persimmon": [(r"^model\.final_layernorm\.", "model.norm."),
                          (r"\.self_attn\.dense\.", ".self_attn.o_proj."),
                          (r"\.self_attn\.([qk])_layernorm\.", r".self_attn.\1_norm."),
                          (r"\.mlp\.dense_h_to_4h\.", ".mlp.up_proj."),
                          (r"\.mlp\.dense_4h_to_h\.", ".mlp.down_proj.")],
            # (Granite MoE's experts and router as its checkpoints and transformers 5 name them)
            **dict.fromkeys(("granitemoe", "granitemoeshared", "granitemoe_swa"), [
                (r"\.block_sparse_moe\.", ".mlp."),
                (r"\.mlp\.input_linear\.weight$", ".mlp.experts.gate_up_proj"),
                (r"\.mlp\.output_linear\.weight$", ".mlp.experts.down_proj"),
                (r"\.mlp\.router\.(layer\.)?weight$", ".mlp.gate.weight")]),
            # (GPT-OSS's router and its experts' stacks, stored transposed: (n_experts, dim,
            # 2 ffn) with gate and up columns interleaved, and (n_experts, ffn, dim))
            "gpt_oss": [(r"\.mlp\.router\.", ".mlp.gate."),
                        (r"\.mlp\.experts\.(gate_up|down)_proj$", r".mlp.experts.\1_proj_t")],
            # (Mixtral's original names: its experts' w1, w3 and w2; MiniMax-M2's too)
            **dict.fromkeys(("mixtral", "minimax_m2"), [
                (r"\.block_sparse_moe\.", ".mlp."),
                (r"\.experts\.(\d+)\.w1\.", r".experts.\1.gate_proj."),
                (r"\.experts\.(\d+)\.w3\.", r".experts.\1.up_proj."),
                (r"\.experts\.(\d+)\.w2\.", r".experts.\1.down_proj.")]),
            "apertus": [(r"\.attention_layernorm\.", ".input_layernorm."),
                        (r"\.feedforward_layernorm\.", ".post_attention_layernorm.")]}


def _renamed(tensors: Iterator[tuple[str, Reader, tuple[int, ...]]], model_type: str
             ) -> Iterator[tuple[str, Reader, tuple[int, ...]]]:
    """Each tensor under Llama's name for it (names already Llama's pass unchanged)."""
    renames = _LANGUAGE_MODEL_PREFIXES + _RENAMES.get(model_type, [])
    for name, read, shape in tensors:
        for pattern, replacement in renames:
            name = re.sub(pattern, replacement, name)
        yield name, read, shape


# GPT-2's projections (the first GPT's too) are Conv1D modules, whose weights are stored (in,
# out): the transpose of a Linear's
_CONV1D_WEIGHTS = re.compile(
    r"\.(self_attn\.(qkv_proj|o_proj)|mlp\.(up_proj|down_proj))\.weight$")


def _as_linear(tensors: Iterator[tuple[str, Reader, tuple[int, ...]]], config: LlamaConfig
               ) -> Iterator[tuple[str, Reader, tuple[int, ...]]]:
    """Each renamed tensor as a Linear's: GPT-2's Conv1D weights transposed (a rank's rows
    of one read as the columns of the stored tensor), a position table without the rows it
    keeps before position 0 (OPT's two)."""
    before = position_rows_before(config.model_type)
    for name, read, shape in tensors:
        if config.model_type in ("gpt2", "openai-gpt") and _CONV1D_WEIGHTS.search(name):
            yield name, functools.partial(_transposed, read), shape[::-1]
        elif name == "model.embed_positions.weight" and before:
            yield (name, functools.partial(_rows_of, read, before, shape[0] - before),
                   (shape[0] - before, *shape[1:]))
        else:
            yield name, read, shape


def _transposed(read: Reader, split: Split) -> torch.Tensor:
    """`split` of the transpose of what `read` reads."""
    stored = None if split is None else (1 - split[0], *split[1:])
    return read(stored).T.contiguous()


# Checkpoint matrices that stack several of the usual ones by rows (Phi-3):
# module -> the modules they stack, each with what sets its number of rows.
_STACKED = {"self_attn.qkv_proj": (("self_attn.q_proj", "q"), ("self_attn.k_proj", "kv"),
                                   ("self_attn.v_proj", "kv")),
            "mlp.gate_up_proj": (("mlp.gate_proj", "ffn"), ("mlp.up_proj", "ffn"))}


# ... and kv head by kv head: [q heads of g; k_g; v_g] for each kv head g (Falcon's
# query_key_value; GPT-NeoX's, with as many kv heads as q heads: [q_h; k_h; v_h])
_STACKED_BY_HEAD = "self_attn.query_key_value"


# ... and the other way: a norm a head, each its own tensor (StableLM's per-head LayerNorms,
# which Cohere stores as one (heads, head_dim) tensor)
_NORM_OF_ONE_HEAD = re.compile(r"^(.*)\.self_attn\.([qk])_layernorm\.norms\.(\d+)\.weight$")


def _unstacked(tensors: Iterator[tuple[str, Reader, tuple[int, ...]]], config: LlamaConfig
               ) -> Iterator[tuple[str, Reader]]:
    """(name, reader) of every checkpoint tensor, each stacked matrix as its parts under
    their usual names, each part a reader of its own rows, so the rest of loading (and a
    rank's slice) sees separate matrices; the norms of single heads as one (heads,
    head_dim) tensor of each layer's q (k) heads."""
    rows = {"q": config.q_dim, "kv": config.kv_dim, "ffn": config.ffn_dim}
    # (read as they come, a head_dim each: a reader lasts only while its file is open)
    head_norms: dict[str, dict[int, torch.Tensor]] = {}
    for name, read, shape in tensors:
        one_head = _NORM_OF_ONE_HEAD.match(name)
        if one_head:
            prefix, part, head = one_head.groups()
            head_norms.setdefault(f"{prefix}.self_attn.{part}_norm.weight", {})[int(head)] = \
                read(None)
            continue
        module, _, kind = name.rpartition(".")
        if module.endswith("." + _STACKED_BY_HEAD):
            yield from _unstacked_by_head(name, read, shape, config)
            continue
        if module.endswith("." + _STACKED_BY_SHARD):
            yield from _unstacked_by_shard(name, read, shape, config)
            continue
        suffix = next((suffix for suffix in _STACKED if module.endswith("." + suffix)), None)
        if suffix is None:
            yield name, read
            continue
        parts = _STACKED[suffix]
        total = sum(rows[unit] for _, unit in parts)
        if shape[0] != total:
            raise ValueError(f"{name}: {shape[0]} rows, but the config's "
                             f"{' + '.join(part.split('.')[-1] for part, _ in parts)} "
                             f"have {total}")
        prefix, start = module[:len(module) - len(suffix)], 0
        for part, unit in parts:
            yield f"{prefix}{part}.{kind}", functools.partial(_rows_of, read, start,
                                                              rows[unit])
            start += rows[unit]
    for name, heads in head_norms.items():
        if sorted(heads) != list(range(len(heads))):
            raise ValueError(f"{name}: the checkpoint's norms of single heads are heads "
                             f"{sorted(heads)}, not 0..{len(heads) - 1}")
        stacked = torch.stack([heads[h] for h in range(len(heads))])
        yield name, functools.partial(_sliced, stacked)


def _unstacked_by_head(name: str, read: Reader, shape: tuple[int, ...], config: LlamaConfig
                       ) -> Iterator[tuple[str, Reader]]:
    """A matrix (or bias) stacking q, k and v kv head by kv head, as q_proj, k_proj and
    v_proj."""
    if shape[0] != config.q_dim + 2 * config.kv_dim:
        raise ValueError(f"{name}: {shape[0]} rows, but q, k and v stacked kv head by kv head "
                         f"take ({config.n_heads} + 2 x {config.n_kv_heads}) heads x "
                         f"{config.head_dim}")
    module, _, kind = name.rpartition(".")
    prefix = module[:-len(_STACKED_BY_HEAD)]
    for part in ("q_proj", "k_proj", "v_proj"):
        yield (f"{prefix}self_attn.{part}.{kind}",
               functools.partial(_head_rows_of, read, part, config))


def _head_rows_of(read: Reader, part: str, config: LlamaConfig, split: Split) -> torch.Tensor:
    """The heads of `part` ("q_proj", "k_proj" or "v_proj") in `split`'s rows of it (all of
    them where None), read a head's block at a time from a matrix stacking each kv head's
    group of q heads, then its k and v head."""
    group, head_dim = config.n_heads // config.n_kv_heads, config.head_dim
    heads = config.n_heads if part == "q_proj" else config.n_kv_heads
    first, stop = (0, heads * head_dim) if split is None else split[1:]
    if split is not None and split[0] != 0:
        raise ValueError("a stacked checkpoint matrix is split by rows only")

    def block(head: int) -> int:   # the head's block of head_dim rows in the stack
        if part == "q_proj":
            return head // group * (group + 2) + head % group
        return head * (group + 2) + group + (part == "v_proj")

    blocks = [read((0, block(head) * head_dim, (block(head) + 1) * head_dim))
              for head in range(first // head_dim, stop // head_dim)]
    return torch.cat(blocks)


def _unstacked_by_shard(name: str, read: Reader, shape: tuple[int, ...], config: LlamaConfig
                        ) -> Iterator[tuple[str, Reader]]:
    """CodeGen's qkv_proj weight, stacked in _SHARDS shards of [q; v; k] rows (a quarter of
    each), as q_proj, k_proj and v_proj."""
    if shape[0] != 3 * config.q_dim or config.n_kv_heads != config.n_heads \
            or config.q_dim % _SHARDS:
        raise ValueError(f"{name}: {shape[0]} rows, but CodeGen's q, v and k take 3 x "
                         f"{config.q_dim}, in {_SHARDS} shards")
    module, _, kind = name.rpartition(".")
    prefix = module[:-len(_STACKED_BY_SHARD)]
    for part in ("q_proj", "k_proj", "v_proj"):
        yield (f"{prefix}self_attn.{part}.{kind}",
               functools.partial(_shard_rows_of, read, _SHARD_ORDER.index(part),
                                 config.q_dim // _SHARDS))


def _shard_rows_of(read: Reader, part: int, local: int, split: Split) -> torch.Tensor:
    """`split`'s rows (all of them where None) of the part-th of each shard's [q; v; k]
    blocks of `local` rows, read a shard's block (or the piece of it in split) at a time."""
    first, stop = (0, _SHARDS * local) if split is None else split[1:]
    if split is not None and split[0] != 0:
        raise ValueError("a stacked checkpoint matrix is split by rows only")
    pieces = []
    for shard in range(first // local, -(-stop // local)):
        begin, end = max(first, shard * local), min(stop, (shard + 1) * local)
        base = shard * 3 * local + part * local - shard * local
        pieces.append(read((0, base + begin, base + end)))
    return torch.cat(pieces)


def _rows_of(read: Reader, start: int, count: int, split: Split) -> torch.Tensor:
    """Rows start..start+count of what `read` reads, then `split` of those (a rank's
    slice of a column-parallel part: rows too)."""
    if split is None:
        return read((0, start, start + count))
    dim, first, stop = split
    if dim != 0:
        raise ValueError("a stacked checkpoint matrix is split by rows only")
    return read((0, start + first, start + stop))


def _our_name(name: str) -> tuple[str, str] | None:
    """HF key -> (our parameter, part), where part names the slice of a fused weight."""
    name = name.removeprefix("model.")
    if name == "embed_tokens.weight":
        return "embed", ""
    if name == "embed_positions.weight":   # a learned position table (GPT-2's wpe)
        return "positions", ""
    if name == "norm.weight":
        return "norm", ""
    if name in ("embed_norm.weight", "embed_norm.bias"):   # BLOOM's, folded into the table
        return "embed_norm" + ("_bias" if name.endswith("bias") else ""), ""
    if name == "norm.bias":   # a LayerNorm's (LlamaConfig.norm_bias)
        return "norm_bias", ""
    if name == "lm_head.weight":
        return "lm_head", ""
    if name == "lm_head.bias":   # Phi's
        return "head_bias", ""
    if name == "project_in.weight":   # OPT 350M's, folded into the table
        return "embed_projection", ""
    if name == "project_out.weight":
        return "head_projection", ""
    parts = name.split(".")
    if len(parts) < 4 or parts[0] != "layers":
        return None
    prefix = f"layers.{parts[1]}."
    module, kind = ".".join(parts[2:-1]), parts[-1]
    fused = {"self_attn.q_proj": ("qkv", "q"), "self_attn.k_proj": ("qkv", "k"),
             "self_attn.v_proj": ("qkv", "v"), "mlp.gate_proj": ("gate_up", "gate"),
             "mlp.up_proj": ("gate_up", "up")}
    if module in fused:
        target, part = fused[module]
        letter = "w" if kind == "weight" else "b"
        return f"{prefix}{letter}{'_' if target == 'gate_up' else ''}{target}", part
    plain = {("self_attn.o_proj", "weight"): "wo", ("self_attn.o_proj", "bias"): "bo",
             ("mlp.down_proj", "weight"): "w_down", ("mlp.down_proj", "bias"): "b_down",
             ("self_attn.q_norm", "weight"): "q_norm", ("self_attn.k_norm", "weight"): "k_norm",
             ("self_attn.q_norm", "bias"): "q_norm_bias",
             ("self_attn.k_norm", "bias"): "k_norm_bias",
             ("self_attn", "sinks"): "sinks",
             ("input_layernorm", "weight"): "attn_norm",
             ("post_attention_layernorm", "weight"): "mlp_norm",
             ("input_layernorm", "bias"): "attn_norm_bias",
             ("post_attention_layernorm", "bias"): "mlp_norm_bias",
             ("post_attn_norm", "weight"): "post_attn_norm",
             ("post_mlp_norm", "weight"): "post_mlp_norm"}
    if module == "mlp.act_fn" and kind in _XIELU_SCALARS:   # Apertus's xIELU
        return prefix + "xielu", kind
    expert = _EXPERT_NAME.match(module)
    if expert is not None and kind == "weight":   # a mixture's expert j: parts "gate.j" ...
        projection, j = expert["projection"], expert["expert"]
        return prefix + ("w_down" if projection == "down" else "w_gate_up"), f"{projection}.{j}"
    experts = {("mlp.gate", "weight"): ("w_router", ""),
               ("mlp.gate", "bias"): ("b_router", ""),
               # the bias that chooses the experts (MiniMax-M2's on the block)
               ("mlp", "e_score_correction_bias"): ("b_choice", ""),
               ("mlp.gate", "e_score_correction_bias"): ("b_choice", ""),
               # GPT-OSS's stacks, transposed (_RENAMES), and its experts' biases
               ("mlp.experts", "gate_up_proj_t"): ("w_gate_up", "stacked^T"),
               ("mlp.experts", "down_proj_t"): ("w_down", "stacked^T"),
               ("mlp.experts", "gate_up_proj_bias"): ("b_gate_up", ""),
               ("mlp.experts", "down_proj_bias"): ("b_down", ""),
               # transformers 5's stacks: each expert's gate rows, then its up rows
               ("mlp.experts", "gate_up_proj"): ("w_gate_up", "stacked"),
               ("mlp.experts", "down_proj"): ("w_down", "stacked"),
               # Qwen 2 MoE's shared expert and its score (the router's row after the rest)
               ("mlp.shared_expert.gate_proj", "weight"): ("w_gate_up", "shared gate"),
               ("mlp.shared_expert.up_proj", "weight"): ("w_gate_up", "shared up"),
               ("mlp.shared_expert.down_proj", "weight"): ("w_down", "shared down"),
               ("mlp.shared_expert_gate", "weight"): ("w_router", "shared"),
               # Hunyuan's MoE's shared MLP, taken whole
               ("mlp.shared_mlp.gate_proj", "weight"): ("w_gate_up", "shared gate"),
               ("mlp.shared_mlp.up_proj", "weight"): ("w_gate_up", "shared up"),
               ("mlp.shared_mlp.down_proj", "weight"): ("w_down", "shared down"),
               # Solar Open's (DeepSeek V3's) shared experts, taken whole
               ("mlp.shared_experts.gate_proj", "weight"): ("w_gate_up", "shared gate"),
               ("mlp.shared_experts.up_proj", "weight"): ("w_gate_up", "shared up"),
               ("mlp.shared_experts.down_proj", "weight"): ("w_down", "shared down"),
               # Granite MoE's shared MLP: its gate rows, then its up rows, in one tensor
               ("shared_mlp.input_linear", "weight"): ("w_gate_up", "shared gate|up"),
               ("shared_mlp.output_linear", "weight"): ("w_down", "shared down")}
    if (module, kind) in experts:
        target, part = experts[module, kind]
        return prefix + target, part
    return (prefix + plain[module, kind], "") if (module, kind) in plain else None


_EXPERT_NAME = re.compile(r"^mlp\.experts\.(?P<expert>\d+)\.(?P<projection>gate|up|down)_proj$")


def _stacked_experts(name: str, parts: dict[str, torch.Tensor], config: LlamaConfig,
                     tp: TensorParallel) -> torch.Tensor:
    """A mixture's gate|up (n_experts, 2 ffn, dim), each expert's rows interleaved as
    tg.linear's gated layout, or its down projections (n_experts, dim, ffn): from
    transformers 5's stack or from one tensor an expert; a shared expert's parts after them
    (its inner width cut into experts' widths). Under tensor parallelism, the rank's share
    of each expert's inner size (one tensor an expert comes split already: split_of)."""

    def share(tensor: torch.Tensor, dim: int) -> torch.Tensor:
        return ffn_share(tensor, dim, config, tp.rank, tp.size)

    gate_up = name.endswith(".w_gate_up")
    kinds = ("gate", "up") if gate_up else ("down",)
    if "shared gate|up" in parts:
        parts["shared gate"], parts["shared up"] = parts.pop("shared gate|up").chunk(2)
    shared = {kind: parts.pop(f"shared {kind}") for kind in kinds if f"shared {kind}" in parts}
    if len(shared) != len(kinds) * bool(config.shared_experts):
        raise ValueError(f"{name}: the checkpoint's shared expert is {sorted(shared)}; the "
                         f"config's has {config.shared_experts} parts")
    if "stacked^T" in parts:   # (GPT-OSS's: gate|up interleaved already; no tp)
        routed = parts["stacked^T"].transpose(1, 2).contiguous()
    elif "stacked" in parts:
        routed = (_interleaved(*(share(half, 1) for half in parts["stacked"].chunk(2, dim=1)))
                  if gate_up else share(parts["stacked"], 2))
    else:
        wanted = [f"{kind}.{j}" for kind in kinds for j in range(config.n_experts)]
        if sorted(parts) != sorted(wanted):
            absent = [part for part in wanted if part not in parts]
            raise ValueError(f"{name}: the checkpoint's experts are not {config.n_experts} "
                             f"(lacks {absent[:4]}, or has more)")
        stacks = [torch.stack([parts[f"{kind}.{j}"] for j in range(config.n_experts)])
                  for kind in kinds]
        routed = _interleaved(*stacks) if gate_up else stacks[0]
    if not shared:
        return routed
    cut = config.shared_experts, config.ffn_dim
    pieces = (_interleaved(share(shared["gate"].unflatten(0, cut), 1),
                           share(shared["up"].unflatten(0, cut), 1)) if gate_up
              else share(shared["down"].unflatten(1, cut), 2).transpose(0, 1))
    return torch.cat([routed, pieces])


def _interleaved(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """Experts' gate (E, ffn, dim) and up rows as their gate|up stack, each expert's rows
    interleaved (gate_0, up_0, gate_1, ...)."""
    return torch.stack([gate, up], dim=2).flatten(1, 2)


# xIELU's scalars as a checkpoint stores them, and the values transformers gives beta and eps
# where it stores none
_XIELU_SCALARS = ("alpha_p", "alpha_n", "beta", "eps")
_XIELU_DEFAULTS = {"beta": 0.5, "eps": -1e-6}


def _xielu_scalars(parts: dict[str, torch.Tensor], name: str) -> torch.Tensor:
    """A layer's xIELU scalars as kernels/xielu.py applies them (alpha_p, alpha_n, beta,
    eps), from the checkpoint's: alpha_p stored through softplus's inverse, alpha_n less beta
    too; computed in the model's dtype, the checkpoint's scalars' here, as transformers
    computes them."""
    if "alpha_p" not in parts or "alpha_n" not in parts:
        raise ValueError(f"checkpoint lacks xIELU's alpha_p or alpha_n for {name}")
    like = parts["alpha_p"]
    alpha_p, alpha_n, beta, eps = (parts[key].reshape(()) if key in parts
                                   else like.new_tensor(_XIELU_DEFAULTS[key])
                                   for key in _XIELU_SCALARS)
    softplus = torch.nn.functional.softplus
    return torch.stack((softplus(alpha_p), beta + softplus(alpha_n), beta, eps))


@torch.no_grad()
def _fold_scalars(model, config: LlamaConfig) -> None:
    """Granite's and Gemma's scalars into the weights that produce what they scale:
    attention scores' (for the 1/sqrt(head_dim) every attention path applies) into q, the
    layers' outputs' into their last projections, the embeddings' into the table, the
    logits' (and, where the LM head is the scaled table, the embeddings' undone) into the
    final norm."""
    q_scale = 1.0
    if config.attention_multiplier is not None:
        q_scale = config.attention_scale * config.head_dim ** 0.5
    for layer in model.layers:
        layer.fold_scales(q_scale, config.residual_multiplier)
    embedding = _embedding_multiplier(config, model.dtype)
    if embedding != 1.0:
        model.embed.mul_(embedding)
    if (divisor := _logits_divisor(config, model.dtype)) != 1.0:
        model.norm.div_(divisor)
    if model.head_bias is not None and config.logits_scaling != 1.0:
        model.head_bias.div_(config.logits_scaling)   # the checkpoint's (Phi's), if any


def _embedding_multiplier(config: LlamaConfig, dtype: torch.dtype) -> float:
    """What the embeddings are multiplied by (Gemma's sqrt(hidden size) in the model's
    dtype, as transformers rounds it)."""
    if config.model_type in GEMMA_TYPES:
        return torch.tensor(config.embedding_multiplier, dtype=dtype).item()
    return config.embedding_multiplier


def _logits_divisor(config: LlamaConfig, dtype: torch.dtype) -> float:
    """What the LM head's output is divided by once the scalars are folded: the logits'
    scaling, and where the head is the table the embeddings' multiplier scaled, that too."""
    tied = _embedding_multiplier(config, dtype) if config.tie_embeddings else 1.0
    return config.logits_scaling * tied


@torch.no_grad()
def _center_stream(model, config: LlamaConfig, final_bias: torch.Tensor | None) -> None:
    """A model of LayerNorms (LlamaConfig.layer_norm) made one of RMSNorms: every part of
    the residual stream (each token's embedding, what the output and down projections
    add) centred to mean zero, which each LayerNorm would subtract anyway, so RMSNorm is
    the LayerNorm; the final norm's bias becomes the LM head's (as the layers' norms'
    became their projections', LlamaLayer.fold_norm_biases). After the scalars are folded
    and the head has copied a tied table."""
    if final_bias is not None:
        bias = model.lm_head.float() @ final_bias.float() / _logits_divisor(config, model.dtype)
        model.head_bias.copy_(model.head_bias.float() + bias)
    if not config.layer_norm:
        return
    for table in (model.embed, model.positions):   # (the positions' rows add to a token's)
        if table is not None:
            rows = table.float()
            table.copy_(rows - rows.mean(-1, keepdim=True))
    local = model.local
    for layer in model.layers:
        layer.center_outputs()
        if config.qk_norm:   # the head norms are LayerNorms too
            layer.center_heads(local.q_dim, local.kv_dim, local.head_dim)


def rotary_order(head_dim: int, rotary_dim: int, interleaved: bool = False) -> torch.Tensor:
    """Where each dim of a head comes from (new -> old) so that rotary embeddings turn pairs
    (i, i + head_dim / 2), as every kernel pairs them: the pairs that transformers turns
    first, (i, i + rotary_dim / 2), or (2i, 2i + 1) where `interleaved` (GLM's, ERNIE
    4.5's, Helium's), pair i by the i-th frequency either way; then the dims past
    rotary_dim (partial rotary embeddings), paired the same way and turned by nothing
    (Llama._rope_table). q and k reordered alike leave q . k as it was."""
    turned = torch.arange(rotary_dim)
    pairs = turned.view(-1, 2).T if interleaved else turned.view(2, -1)   # (2, rotary_dim / 2)
    unturned = torch.arange(rotary_dim, head_dim).view(2, -1)   # two halves of those dims
    return torch.cat((pairs[0], unturned[0], pairs[1], unturned[1]))   # half a head each


_ORDER = {"q": 0, "k": 1, "v": 2, "gate": 0, "up": 1}


def _tied_as_stored(config: LlamaConfig, model_or_path) -> LlamaConfig:
    """config, its LM head untied where the checkpoint stores one that differs from the
    embedding though the config ties them (transformers 5.25's Mistral 3 config ties by
    default, Mistral Small's checkpoints store a head of their own): transformers then keeps
    both, so tilegraph reads the head. A first pass over the tensor names; the two tensors
    are read only where the head is stored."""
    if not config.tie_embeddings:
        return config
    names = {"lm_head.weight", "model.embed_tokens.weight"}
    stored = [name for name, _, _ in _renamed(_source(model_or_path)[1], config.model_type)
              if name in names]
    if "lm_head.weight" not in stored:
        return config
    values = {name: read(None) for name, read, _ in
              _renamed(_source(model_or_path)[1], config.model_type) if name in names}
    if torch.equal(values["lm_head.weight"], values.get("model.embed_tokens.weight",
                                                        values["lm_head.weight"])):
        return config
    return dataclasses.replace(config, tie_embeddings=False)


def sinusoidal_positions(rows: int, dim: int) -> torch.Tensor:
    """XGLM's (fairseq's) fixed position table from position 0, fp32 (rows, dim), dim even:
    for position p, sin((p + 2) f_i) then cos((p + 2) f_i) over the frequencies
    f_i = 10000^(-i / (dim / 2 - 1)) (its table keeps two rows before position 0), computed
    as transformers computes them."""
    half = dim // 2
    frequencies = torch.exp(torch.arange(half, dtype=torch.float32)
                            * -(math.log(10000) / (half - 1)))
    angles = torch.arange(2, rows + 2, dtype=torch.float32)[:, None] * frequencies[None, :]
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)


def _fold_embedding_projection(pieces: dict[str, dict[str, torch.Tensor]],
                               config: LlamaConfig, tp: TensorParallel) -> None:
    """A table narrower than the stream (OPT 350M's, head_projection wide) and its
    projection up (project_in) as one table of the stream's width, each row projected once
    in fp32; a tied LM head (this rank's rows) keeps the table as stored."""
    table = pieces.pop("embed")[""]
    up = pieces.pop("embed_projection")[""]
    if table.shape[1:] != (config.head_projection,) or up.shape != (config.dim,
                                                                   config.head_projection):
        raise ValueError(f"embed_tokens {tuple(table.shape)} and project_in "
                         f"{tuple(up.shape)} do not match the config's word_embed_proj_dim "
                         f"{config.head_projection} and hidden size {config.dim}")
    pieces["embed"] = {"": (table.float() @ up.float().T).to(table.dtype)}
    if config.tie_embeddings:
        start, stop, _ = vocab_shard(config.vocab_size, tp.rank, tp.size)
        pieces["lm_head"] = {"": table[start:stop]}


def load_llama(cls, model_or_path, dtype: torch.dtype | None, device,
               tp: TensorParallel | None = None):
    tp = tp or TensorParallel()
    config, tensors, stored_dtype, stored_device = _source(model_or_path)
    config = _tied_as_stored(config, model_or_path)
    dtype = dtype or stored_dtype
    device = torch.device(device) if device is not None else stored_device
    model = cls(config, dtype=dtype, device=device, tp=tp)
    params = dict(model.named_parameters(remove_duplicate=False))
    # each layer's norm weights, folded into its projections once those are loaded
    norm_names = [f"layers.{i}.{norm}" for i in range(config.n_layers)
                  for norm in ("attn_norm", "mlp_norm") if config.pre_norms]
    # their biases and the final norm's (LayerNorm's), folded into the projections' biases
    bias_names = ([*(f"{name}_bias" for name in norm_names), "norm_bias"] if config.norm_bias
                  else [])
    # (and the embeddings' LayerNorm, BLOOM's, folded into the table)
    bias_names += ["embed_norm", "embed_norm_bias"] if config.embedding_layer_norm else []
    # (the projection up from a narrower table, OPT 350M's, folded into it too)
    folded = ["embed_projection"] if config.head_projection else []
    pieces: dict[str, dict[str, torch.Tensor]] = {}
    unexpected = []
    for name, read in _unstacked(_as_linear(_renamed(tensors, config.model_type), config),
                                 config):
        if name.endswith(_IGNORED_SUFFIXES) or name.startswith(_IGNORED_PREFIXES):
            continue
        mapped = _our_name(name)
        if mapped is not None and config.norm_after_add:   # the norms come after the adds
            mapped = (re.sub(r"\.(attn|mlp)_norm", r".\1_sum_norm", mapped[0]), mapped[1])
        if mapped is None or (mapped[0] not in params
                              and mapped[0] not in (*norm_names, *bias_names, *folded)):
            unexpected.append(name)
            continue
        target, part = mapped
        if target == "lm_head" and config.tie_embeddings:
            continue   # the embedding's rows serve
        split = split_of(target, part, config, tp.rank, tp.size)
        value = read(split)
        if config.norm_plus_one and (target == "norm" or target.endswith("_norm")):
            value = value.float() + 1.0   # Gemma's and Nemotron's norms scale by 1 + weight
        # (in the dtype of its place: the model's, the experts' choice bias's fp32)
        kept = params[target].dtype if target in params else dtype
        pieces.setdefault(target, {})[part] = value.to(device=device, dtype=kept)
    if config.model_type in SINUSOIDAL_POSITION_TYPES:   # (no checkpoint stores it)
        table = sinusoidal_positions(config.learned_positions, config.dim)
        pieces["positions"] = {"": table.to(device=device, dtype=dtype)}
    if config.weightless_norms:   # NanoChat's and OLMo's norms scale by nothing
        for name in (*norm_names, *(n for n in params if n == "norm" or n.endswith("_norm"))):
            ones = torch.ones(params[name].shape if name in params else config.dim)
            pieces.setdefault(name, {"": ones.to(device=device, dtype=dtype)})
    # the biases only a norm's bias gives: zero before it is folded in
    for name, given in (("bqkv", config.qkv_bias), ("b_gate_up", config.mlp_bias)):
        for i in range(config.n_layers if config.norm_bias and not given else 0):
            zeros = torch.zeros(params[f"layers.{i}.{name}"].shape, device=device, dtype=dtype)
            pieces[f"layers.{i}.{name}"] = {"": zeros}
    for i in range(config.n_layers if config.one_norm_before else 0):
        for kind in ("", "_bias"):   # one norm before attention and the MLP: both
            if f"layers.{i}.attn_norm{kind}" in pieces:
                pieces.setdefault(f"layers.{i}.mlp_norm{kind}",
                                  pieces[f"layers.{i}.attn_norm{kind}"])
    if unexpected:
        raise ValueError(f"checkpoint tensors tilegraph's Llama has no place for: "
                         f"{unexpected[:8]}{' ...' if len(unexpected) > 8 else ''}")
    if not config.tie_embeddings and "lm_head" not in pieces and "embed" in pieces:
        raise ValueError("the checkpoint has no lm_head.weight but its config does not tie "
                         "embeddings (tie_word_embeddings=false)")
    missing = [name for name in [*params, *norm_names, *bias_names, *folded]
               if name not in pieces
               and not (name == "lm_head" and config.tie_embeddings)
               # (made from the final norm's where the checkpoint has none: _center_stream)
               and not (name == "head_bias" and not config.lm_head_bias)]
    if missing:
        raise ValueError(f"checkpoint lacks weights for: {missing[:8]}"
                         f"{' ...' if len(missing) > 8 else ''}")
    norms = {name: pieces.pop(name)[""] for name in (*norm_names, *bias_names)}
    for name in [name for name in pieces if name.endswith(".xielu")]:
        pieces[name] = {"": _xielu_scalars(pieces[name], name)}
    if config.head_projection:
        _fold_embedding_projection(pieces, config, tp)
    for name, value in norms.items():
        if value.shape != (config.dim,):
            raise ValueError(f"{name}: checkpoint shape {tuple(value.shape)} does not match "
                             f"the config's ({config.dim},)")
    order = (rotary_order(config.head_dim, config.rotary_dim, config.rotary_interleaved)
             if config.rotary_dim < config.head_dim or config.rotary_interleaved else None)
    for name, parts in pieces.items():
        if order is not None and name.endswith(("q_norm", "k_norm", "q_norm_bias",
                                                "k_norm_bias")):
            # head norm weights (a head's, a weight a head's, or all heads' in a row) in
            # the order the kernels hold each head's dims
            parts[""] = parts[""].unflatten(-1, (-1, config.head_dim))[..., order].flatten(-2)
        for part in ("q", "k") if order is not None else ():
            if part in parts:   # each head's dims in rotary_order (weights and biases alike)
                heads = parts[part].unflatten(0, (-1, config.head_dim))
                parts[part] = heads[:, order].flatten(0, 1)
        for part in ("q", "k") if config.rotary_negated else ():
            if part in parts:   # each head's second half negated: turned back (q . k kept)
                heads = parts[part].unflatten(0, (-1, 2, config.head_dim // 2))
                sign = heads.new_tensor([1.0, -1.0]).view(2, *[1] * (heads.ndim - 2))
                parts[part] = (heads * sign).flatten(0, 2)
        ordered = [parts[p] for p in sorted(parts, key=lambda p: _ORDER.get(p, 0))]
        if config.moe and name.endswith((".w_gate_up", ".w_down")):
            value = _stacked_experts(name, parts, config, tp)
        elif name.endswith(".w_router"):   # (the shared expert's score last)
            value = torch.cat([parts[""], *([parts["shared"]] if "shared" in parts else [])])
        elif len(ordered) == 1:
            value = ordered[0]
        elif "gate" in parts and "up" in parts and parts["gate"].shape == parts["up"].shape:
            value = tg.interleave_gate_up(parts["gate"], parts["up"])  # tg.linear's "swiglu"
        else:
            value = torch.cat(ordered, dim=0)
            if "q" in parts and value.shape[0] % config.head_dim == 0:
                value = tg.interleave_rotary_pairs(value, config.head_dim)  # tg.linear_qkv's
        target = params[name]
        if name in ("lm_head", "head_bias") and value.shape[0] < target.shape[0]:
            target = target[:value.shape[0]]   # the last rank's block, padded past the vocab
        if value.shape != target.shape:
            raise ValueError(f"{name}: checkpoint shape {tuple(value.shape)} does not match "
                             f"the config's {tuple(target.shape)}")
        target.data.copy_(value)
    for i, layer in enumerate(model.layers if config.norm_bias else ()):
        layer.fold_norm_biases(norms[f"layers.{i}.attn_norm_bias"],
                               norms[f"layers.{i}.mlp_norm_bias"])
    for i, layer in enumerate(model.layers if config.pre_norms else ()):
        layer.fold_norms(norms[f"layers.{i}.attn_norm"], norms[f"layers.{i}.mlp_norm"])
    if config.embedding_norm:   # every row normalised once, as each token's would be
        rows = model.embed.float()
        normed = rows * torch.rsqrt(rows.pow(2).mean(-1, keepdim=True) + config.norm_eps)
        model.embed.data.copy_(normed.to(model.embed.dtype))
    _fold_scalars(model, config)
    model.tie_lm_head()
    if config.embedding_layer_norm:   # the LM head has the table as it was
        weight, bias = norms["embed_norm"].float(), norms["embed_norm_bias"].float()
        normed = torch.nn.functional.layer_norm(model.embed.float(), (config.dim,), weight,
                                                bias, config.norm_eps)
        model.embed.data.copy_(normed.to(model.embed.dtype))
    _center_stream(model, config, norms.get("norm_bias"))
    return model.eval()
