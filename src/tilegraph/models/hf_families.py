"""How a Hugging Face config becomes LlamaConfig's fields (LlamaConfig.from_hf): the
families tilegraph runs, their own spellings, defaults and parts, and what it refuses.

Supported, with rotary scaling "llama3", "linear" (as DeepSeek-Coder's checkpoints scale
positions) or "yarn" (Qwen's long-context setting): Llama 2 and 3.x, Mistral, Ministral and
Phi-3 (q|k|v and gate|up stored fused; LongRoPE and partial rotary embeddings too), Qwen2
(bias on q, k and v), Qwen3 (an RMSNorm on every q and k head), SmolLM3 (every fourth layer
without rotary embeddings), Granite 3 (scalars on the embeddings, attention scores, layer
outputs and logits, folded into the weights; Granite SWA's attention sinks, sliding layers
and rotary base a layer too), EXAONE 3, InternLM3 and IQuest-Coder (Llama
under other names), Gemma (gated GELU, norms scaling by 1 + weight, scaled embeddings; Gemma
2 and 3: a norm after attention and after the MLP as well as before; Gemma 2's attention
scores and logits softcapped (VaultGemma: Gemma 2 without the norms after), Gemma 3's local
layers rotating by their own base), OLMo 2 and 3 (norms after attention and the MLP only, q
and k each normalised as a whole; OLMo 3's sliding layers), Hunyuan's dense models (q and k
heads normalised after their rotation; NTK-alpha rotary scaling), Ministral 3 (Mistral's
layer, q scaled by Llama 4's attention temperature past the pretrained context), Arcee
(Llama's layer, an ungated MLP of squared ReLU), NanoChat (that MLP, weightless norms, one
of them on the embeddings, q and k heads normalised after a rotation the other way, capped
logits), HyperCLOVA X (Granite's scalars, the logits' a multiplier, and norms after
attention and the MLP), StarCoder2, StableLM, Nemotron, Jais 2 and OLMo (LayerNorms, biased
or not, turned into RMSNorms by centring the residual stream at load; StarCoder2's,
Nemotron's and Jais 2's ungated MLPs; StableLM's and Nemotron's partial rotary embeddings;
StableLM 2 12B's LayerNorm of each q and k head, a weight a head, as Command R+'s), Phi-1.5
and Phi-2, Cohere (Command R, Aya), Cohere 2 (Command R7B), GPT-NeoX (Pythia) and Falcon
(LayerNorms too; attention and the MLP side by side on the layer's input: parallel_residual;
Phi's LM head bias, Cohere's logit scale, Cohere 2's rotary embeddings only in its sliding
layers, GPT-NeoX's q|k|v stored head by head, Falcon's kv head by kv head; CodeGen, GPT-J's
layer with its q|v|k stored in 4 shards), GPT-2, the first GPT, OPT, GPT-BigCode and GPT-Neo
(positions from a learned table added to the token embeddings; LayerNorms, biased ungated
MLPs; GPT-BigCode's one kv head; GPT-Neo's unscaled scores and local layers), BLOOM (ALiBi's
bias on the attention scores for rotary embeddings, a LayerNorm on the embeddings folded
into the table), MPT (ALiBi; LayerNorms and projections without biases), Falcon-RW (Falcon's
layer with ALiBi, its bias rounded to bf16 as transformers rounds it), Apertus and Apertus
1.5's decoder (Qwen 3's head norms, an ungated MLP of xIELU with scalars a layer; Apertus
1.5's LM head pruned to the first output_vocab_size ids), Persimmon (LayerNorms of each q
and k head with a bias), Emu3's decoder (Llama's), the mixtures of experts of Mixtral
(Mistral's attention), Qwen 2 MoE (Qwen2's; a shared expert), Qwen 3 MoE (Qwen 3's), OLMoE
(q and k normalised as OLMo 2's, norms before attention and the MLP) and Granite MoE
(Granite's scalars; its shared and SWA variants with a shared MLP taken whole, the second
with Granite SWA's attention), GPT-OSS (biased router and experts, a clamped SwiGLU,
attention sinks, every other layer sliding), the families SUPPORTED_TYPES names
besides, and the language models of the multimodal checkpoints
_LANGUAGE_MODELS names (on text); sliding windows in the layers each family's config names.
Anything else raises a ValueError that names the field, so a model is never run with a part
silently ignored.
"""

from __future__ import annotations

import math

import torch

from ..kernels._activation import SWIGLU_OSS_ALPHA, SWIGLU_OSS_LIMIT

SUPPORTED_TYPES = ("llama", "mistral", "ministral", "phi3", "qwen2", "qwen3", "smollm3",
                   "granite", "exaone", "internlm3", "ernie4_5", "glm", "glm4", "helium",
                   "seed_oss", "cwm", "exaone4", "olmo2", "olmo3", "hunyuan_v1_dense",
                   "ministral3", "arcee", "nanochat", "hyperclovax", "gemma", "gemma2",
                   "vaultgemma", "gemma3_text", "starcoder2", "stablelm", "nemotron", "olmo",
                   "phi", "cohere", "cohere2", "gpt_neox", "gptj", "falcon", "gpt2",
                   "gpt_bigcode", "opt", "gpt_neo", "codegen", "bloom", "mpt", "biogpt",
                   "xglm", "jais2", "iquestcoder", "openai-gpt", "granite_swa", "apertus",
                   "persimmon", "emu3_text_model", "mixtral", "qwen3_moe", "olmoe",
                   "qwen2_moe", "granitemoe", "granitemoeshared", "granitemoe_swa",
                   "gpt_oss", "minimax_m2", "solar_open", "hunyuan_v1_moe")
GEMMA_TYPES = ("gemma", "gemma2", "vaultgemma", "gemma3_text")
# Granite SWA's attention (sinks, sliding layers, a rotary base a layer), dense or with experts
_GRANITE_SWA_TYPES = ("granite_swa", "granitemoe_swa")
# Granite MoE, with a shared MLP where shared_intermediate_size is set (its shared and SWA
# variants)
_GRANITE_MOE_TYPES = ("granitemoe", "granitemoeshared", "granitemoe_swa")
# Hunyuan's attention (head norms after the rotation, NTK-alpha rotary bases), dense or with
# experts
_HUNYUAN_TYPES = ("hunyuan_v1_dense", "hunyuan_v1_moe")
# Gemma 2's attention: scores softcapped, scaled by query_pre_attn_scalar, alternate layers
# sliding (VaultGemma's too, whose layers have no norms after attention and the MLP)
_GEMMA2_ATTENTION = ("gemma2", "vaultgemma")
# Families whose rotary embeddings turn a head's neighbouring dims (2i, 2i + 1) together
# (GPT-J's pairing; transformers' GLM, ERNIE 4.5, Helium and Cohere), where Llama turns
# (i, i + d / 2)
INTERLEAVED_ROTARY_TYPES = ("glm", "glm4", "ernie4_5", "helium", "cohere", "cohere2", "gptj",
                            "codegen")
# Families whose rotary embeddings may turn only a head's leading dims
# (partial_rotary_factor; GPT-J's rotary_dim counts them): Phi-3 (Phi-4-mini's
# checkpoints), GLM, StableLM, Nemotron, Phi, GPT-NeoX, Persimmon
PARTIAL_ROTARY_TYPES = ("phi3", "glm", "glm4", "stablelm", "nemotron", "phi", "gpt_neox",
                        "persimmon", "minimax_m2")
# Families that position tokens by a learned table of position embeddings added to the
# token embeddings, not by rotary embeddings (GPT-2, StarCoder's GPT-BigCode, OPT, GPT-Neo,
# BioGPT, XGLM, the first GPT)
LEARNED_POSITION_TYPES = ("gpt2", "gpt_bigcode", "opt", "gpt_neo", "biogpt", "xglm",
                          "openai-gpt")
# ... of them, those whose table is sinusoidal, not stored: loading makes it (XGLM's)
SINUSOIDAL_POSITION_TYPES = ("xglm",)
# ... and the rows their checkpoints' tables keep before position 0 (OPT's and BioGPT's
# offset)
_POSITION_ROWS_BEFORE = {"opt": 2, "biogpt": 2}
# Families whose norms are LayerNorms (the mean subtracted; OLMo's without weights), and
# those of them whose LayerNorms add a bias
LAYER_NORM_TYPES = ("starcoder2", "stablelm", "nemotron", "olmo", "phi", "cohere", "cohere2",
                    "gpt_neox", "gptj", "codegen", "falcon", "bloom", "mpt", "jais2",
                    "persimmon", *LEARNED_POSITION_TYPES)
# (MPT's LayerNorms have no bias)
_NORM_BIAS_TYPES = ("starcoder2", "stablelm", "nemotron", "phi", "gpt_neox", "gptj", "codegen",
                    "falcon", "bloom", "jais2", "persimmon", *LEARNED_POSITION_TYPES)
# Families whose layers run attention and the MLP side by side on one norm of their input
# (StableLM's where use_parallel_residual says so; GPT-NeoX's, a norm each, by default;
# Falcon's by parallel_attn and num_ln_in_parallel_attn: _falcon_fields)
_ONE_NORM_PARALLEL_TYPES = ("phi", "cohere", "cohere2", "gptj", "codegen")
# Multimodal checkpoints whose language model tilegraph runs (on text): their type -> the
# type of the text_config they hold where it names none
_LANGUAGE_MODELS = {"gemma3": "gemma3_text", "mistral3": "mistral", "llava": "llama",
                    "llava_next": "llama", "llava_onevision": "qwen2", "internvl": "qwen2",
                    "idefics3": "llama", "smolvlm": "llama", "qwen2_vl": "qwen2_vl_text",
                    "qwen2_5_vl": "qwen2_5_vl_text", "qwen3_vl": "qwen3_vl_text",
                    "exaone4_5": "exaone4", "aya_vision": "cohere2", "got_ocr2": "qwen2",
                    "vipllava": "llama", "video_llava": "llama", "llava_next_video": "llama",
                    "fuyu": "persimmon", "apertus1p5": "apertus1p5_text",
                    "emu3": "emu3_text_model"}
# Decoders of multimodal checkpoints that are a family tilegraph runs under another name:
# Qwen2-VL's and Qwen2.5-VL's are Qwen2's layer, whose multimodal rotary embedding (mrope)
# turns a text token's three position sections by one position: plain rotary embeddings
# (Qwen3-VL's, Qwen3's layer, interleaves the sections: the same on text);
# EXAONE 4.5's first releases named its EXAONE 4 decoder its own way; Apertus 1.5's is
# Apertus's, its LM head maybe pruned to the text tokens (output_vocab_size)
_SAME_DECODERS = {"qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2",
                  "qwen3_vl_text": "qwen3", "exaone4_5_text": "exaone4",
                  "apertus1p5_text": "apertus"}
# Families whose config.json spells some of Llama's fields their own way (transformers'
# attribute_map): their name -> Llama's.
_FIELD_ALIASES = {
    "exaone": {"num_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps",
               "activation_function": "hidden_act"},
    "internlm3": {"qkv_bias": "attention_bias", "bias": "mlp_bias"},
    "starcoder2": {"norm_epsilon": "rms_norm_eps"},
    "stablelm": {"layer_norm_eps": "rms_norm_eps", "use_qkv_bias": "attention_bias"},
    "nemotron": {"norm_eps": "rms_norm_eps"},
    **{name: {"layer_norm_eps": "rms_norm_eps"}
       for name in ("phi", "cohere", "cohere2", "jais2", "persimmon")},
    "gpt_neox": {"layer_norm_eps": "rms_norm_eps", "rotary_pct": "partial_rotary_factor",
                 "rotary_emb_base": "rope_theta"},
    # (GPT-J's and CodeGen's rotary_dim, a count of dims, read apart)
    **{name: {"n_embd": "hidden_size", "n_inner": "intermediate_size",
              "n_head": "num_attention_heads", "n_layer": "num_hidden_layers",
              "n_positions": "max_position_embeddings", "layer_norm_epsilon": "rms_norm_eps",
              "activation_function": "hidden_act"}
       for name in ("gptj", "codegen", "gpt2", "gpt_bigcode")},
    # (the first GPT's afn: _openai_gpt_activation)
    "openai-gpt": {"n_embd": "hidden_size", "n_head": "num_attention_heads",
                   "n_layer": "num_hidden_layers", "n_positions": "max_position_embeddings",
                   "layer_norm_epsilon": "rms_norm_eps"},
    "opt": {"ffn_dim": "intermediate_size", "activation_function": "hidden_act"},
    # (BLOOM's oldest configs say n_embed)
    "bloom": {"n_embed": "hidden_size", "n_head": "num_attention_heads",
              "n_layer": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps"},
    "mpt": {"d_model": "hidden_size", "n_heads": "num_attention_heads",
            "n_layers": "num_hidden_layers", "layer_norm_epsilon": "rms_norm_eps",
            "max_seq_len": "max_position_embeddings"},
    "xglm": {"d_model": "hidden_size", "ffn_dim": "intermediate_size",
             "num_layers": "num_hidden_layers", "attention_heads": "num_attention_heads",
             "activation_function": "hidden_act"},
    "gpt_neo": {"num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
                "layer_norm_epsilon": "rms_norm_eps", "activation_function": "hidden_act",
                "window_size": "sliding_window"},
    # (num_kv_heads, which multi_query may override, read apart)
    "falcon": {"n_embed": "hidden_size", "layer_norm_epsilon": "rms_norm_eps",
               "ffn_hidden_size": "intermediate_size", "activation": "hidden_act"},
}
# Families whose attention transformers never windows, whatever sliding_window says
_NEVER_WINDOWED = ("llama", "granite", "exaone", "internlm3", "ernie4_5", "glm", "glm4",
                   "helium", "seed_oss", "olmo2", *_HUNYUAN_TYPES, "arcee", "nanochat",
                   "hyperclovax", "gemma", "stablelm", "nemotron", "olmo", "phi", "cohere",
                   "gpt_neox", "gptj", "codegen", "falcon", "gpt2", "gpt_bigcode", "opt",
                   "bloom", "mpt", "biogpt", "xglm", "jais2", "iquestcoder", "openai-gpt",
                   "apertus", "persimmon", "emu3_text_model", "olmoe", "granitemoe",
                   "granitemoeshared")
# The families whose attention scores or logits may be softcapped
_SOFTCAPPED = {"attn_logit_softcapping": GEMMA_TYPES,
               "final_logit_softcapping": (*GEMMA_TYPES, "nanochat")}
# Norms after attention and the MLP and none before (EXAONE 4, OLMo 2 and 3)
_POST_NORMS_ONLY = ("exaone4", "olmo2", "olmo3")
# What the config classes of some families set where a config.json may leave a field out
_CLASS_DEFAULTS = {"glm": {"partial_rotary_factor": 0.5, "attention_bias": True},
                   "glm4": {"partial_rotary_factor": 0.5, "attention_bias": True},
                   "ernie4_5": {"rope_theta": 500000.0, "tie_word_embeddings": True},
                   "helium": {"rope_theta": 100000.0},
                   "seed_oss": {"attention_bias": True},
                   "cwm": {"sliding_window": 8192,
                           "rope_parameters": {"rope_type": "llama3", "rope_theta": 1e6,
                                               "factor": 16.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 4.0,
                                               "original_max_position_embeddings": 8192}},
                   "exaone4": {"sliding_window": 4096, "sliding_window_pattern": 4},
                   "ministral3": {"head_dim": 128},
                   # (OLMo's LayerNorms take 1e-5 whatever its config says: _fields_from_hf)
                   "starcoder2": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                                  "use_bias": True},
                   "stablelm": {"rms_norm_eps": 1e-5, "partial_rotary_factor": 0.25},
                   "nemotron": {"rms_norm_eps": 1e-5, "partial_rotary_factor": 0.5},
                   "jais2": {"rms_norm_eps": 1e-5, "hidden_act": "relu2",
                             "attention_bias": True, "mlp_bias": True},
                   "iquestcoder": {"rms_norm_eps": 1e-5, "head_dim": 128},
                   "emu3_text_model": {"rms_norm_eps": 1e-5, "num_key_value_heads": 8,
                                       "rope_theta": 1e6},
                   "apertus": {"rms_norm_eps": 1e-5, "hidden_act": "xielu"},
                   "persimmon": {"rms_norm_eps": 1e-5, "hidden_act": "relu2",
                                 "partial_rotary_factor": 0.5, "qk_layernorm": True},
                   "granite_swa": {"rms_norm_eps": 1e-5, "sliding_window": 128,
                                   "tie_word_embeddings": True},
                   "granitemoe_swa": {"sliding_window": 128},
                   "minimax_m2": {"rope_theta": 5e6, "head_dim": 128},
                   "solar_open": {"rms_norm_eps": 1e-5, "rope_theta": 1e6, "head_dim": 128,
                                  "norm_topk_prob": True, "n_shared_experts": 1},
                   "gpt_oss": {"rms_norm_eps": 1e-5, "sliding_window": 128, "head_dim": 64,
                               "attention_bias": True},
                   "phi": {"rms_norm_eps": 1e-5, "partial_rotary_factor": 0.5,
                           "hidden_act": "gelu_new"},
                   "cohere": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True},
                   "cohere2": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                               "sliding_window": 4096},
                   "gpt_neox": {"rms_norm_eps": 1e-5, "partial_rotary_factor": 0.25,
                                "hidden_act": "gelu", "attention_bias": True,
                                "use_parallel_residual": True},
                   "gptj": {"rms_norm_eps": 1e-5, "hidden_act": "gelu_new", "rotary_dim": 64,
                            "tie_word_embeddings": False},
                   "codegen": {"rms_norm_eps": 1e-5, "hidden_act": "gelu_new",
                               "rotary_dim": 64, "tie_word_embeddings": False,
                               "max_position_embeddings": 2048},
                   "falcon": {"rms_norm_eps": 1e-5, "hidden_act": "gelu",
                              "tie_word_embeddings": True, "max_position_embeddings": 2048,
                              "multi_query": True, "parallel_attn": True},
                   "gpt2": {"rms_norm_eps": 1e-5, "hidden_act": "gelu_new",
                            "tie_word_embeddings": True, "max_position_embeddings": 1024,
                            "vocab_size": 50257},
                   "gpt_bigcode": {"rms_norm_eps": 1e-5, "hidden_act": "gelu_pytorch_tanh",
                                   "tie_word_embeddings": True,
                                   "max_position_embeddings": 1024, "vocab_size": 50257,
                                   "multi_query": True},
                   "openai-gpt": {"rms_norm_eps": 1e-5, "afn": "gelu",
                                  "tie_word_embeddings": True,
                                  "max_position_embeddings": 512, "vocab_size": 40478},
                   "opt": {"rms_norm_eps": 1e-5, "hidden_act": "relu",
                           "tie_word_embeddings": True, "max_position_embeddings": 2048,
                           "vocab_size": 50272, "enable_bias": True},
                   "gpt_neo": {"rms_norm_eps": 1e-5, "hidden_act": "gelu_new",
                               "tie_word_embeddings": True, "max_position_embeddings": 2048,
                               "vocab_size": 50257, "sliding_window": 256,
                               "attention_types": [[["global", "local"], 12]]},
                   # (BLOOM's MLP is 4 times as wide as the model, its GELU the tanh
                   # approximation, whatever its config says; it trained on 2048 positions)
                   "bloom": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                             "max_position_embeddings": 2048},
                   "mpt": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                           "max_position_embeddings": 2048},
                   # (BioGPT's LayerNorms take 1e-5 whatever its layer_norm_eps says)
                   "biogpt": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                              "hidden_act": "gelu", "max_position_embeddings": 1024,
                              "vocab_size": 42384, "scale_embedding": True},
                   "xglm": {"rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                            "hidden_act": "gelu", "max_position_embeddings": 2048,
                            "vocab_size": 256008, "scale_embedding": True}}
# The rotary settings of a family's config class where a config.json names none (neither
# rope_parameters nor rope_scaling)
_CLASS_ROPE = {"gpt_oss": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                           "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                           "original_max_position_embeddings": 4096},
               "ministral3": {"rope_type": "yarn", "rope_theta": 1e6, "factor": 16.0,
                              "original_max_position_embeddings": 16384, "beta_fast": 32.0,
                              "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                              "llama_4_scaling_beta": 0.1},
              "apertus": {"rope_type": "llama3", "rope_theta": 12e6, "factor": 8.0,
                          "original_max_position_embeddings": 8192, "low_freq_factor": 1.0,
                          "high_freq_factor": 4.0}}
SUPPORTED_ROPE = ("default", "llama3", "linear", "yarn", "longrope")
# hidden_act (Gemma: hidden_activation) -> the gated activation of tg.linear the MLP runs
_MLP_ACTIVATIONS = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu",
                    "gelu_pytorch_tanh": "geglu_tanh", "gelu_new": "geglu_tanh"}
# ... of the families whose MLP has no gate (Arcee: up, act, down)
# (gelu_fast: SantaCoder's, the tanh approximation written out another way)
_UNGATED_MLP_ACTIVATIONS = {"relu2": "relu2", "relu": "relu", "gelu": "gelu",
                            "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
                            "gelu_fast": "gelu_tanh"}
_UNGATED_MLP_TYPES = ("arcee", "nanochat", "starcoder2", "nemotron", "phi", "gpt_neox",
                      "gptj", "codegen", "falcon", "bloom", "mpt", "jais2", "apertus",
                      "persimmon", *LEARNED_POSITION_TYPES)
# The fields a decoder's config class fills where a multimodal config.json's text_config
# leaves them out (LLaVA 1.5's names only what Vicuna changes from LlamaConfig's)
_DECODER_DEFAULTS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "max_position_embeddings", "rms_norm_eps",
                     "hidden_act")


def _decoder_defaults(model_type: str) -> dict:
    """transformers' defaults of _DECODER_DEFAULTS for a decoder's config class, as it
    builds a multimodal model's decoder; none where transformers is not installed or has
    no such class."""
    try:
        from transformers import AutoConfig

        defaults = AutoConfig.for_model(model_type).to_dict()
    except (ImportError, ValueError):
        return {}
    return {key: defaults[key] for key in _DECODER_DEFAULTS if defaults.get(key) is not None}


def _unsupported(name: str, value, what: str) -> ValueError:
    return ValueError(f"{name}={value!r} is not supported: {what}")


def _rope_fields(values: dict) -> dict:
    """rope_theta and Llama 3 scaling, from transformers 5 (`rope_parameters`) or 4
    (`rope_theta` + `rope_scaling`) spellings."""
    params = values.get("rope_parameters") or {}
    scaling = values.get("rope_scaling") or {}
    if params and not isinstance(params, dict):
        raise _unsupported("rope_parameters", params, "expected one dict of rope settings")
    merged = {**scaling, **params}
    rope_type = merged.get("rope_type", merged.get("type", "default")) or "default"
    if rope_type == "mrope":   # Qwen2-VL's, on text: plain (_SAME_DECODERS)
        rope_type = "default"
    theta = merged.get("rope_theta", values.get("rope_theta", 10000.0))
    if (rope_type == "dynamic" and merged.get("alpha")
            and values.get("model_type") in _HUNYUAN_TYPES):
        # Hunyuan's NTK-alpha scaling (labelled "dynamic"): a fixed alpha stretches the base,
        # theta alpha^(d / (d - 2)), whatever the sequence's length
        head_dim = (values.get("head_dim")
                    or values["hidden_size"] // values["num_attention_heads"])
        rope_type, theta = "default", theta * merged["alpha"] ** (head_dim / (head_dim - 2))
    if rope_type not in SUPPORTED_ROPE:
        raise _unsupported("rope_scaling.rope_type", rope_type,
                           f"tilegraph implements {', '.join(SUPPORTED_ROPE)}")
    llama3, linear, yarn, longrope, attention_factor = None, 1.0, None, None, 1.0
    if rope_type == "yarn":
        yarn, attention_factor = _yarn_fields(merged, values)
    elif rope_type == "longrope":
        longrope, attention_factor = _longrope_fields(merged, values)
    elif rope_type == "llama3":
        llama3 = {key: float(merged[key]) for key in
                  ("factor", "low_freq_factor", "high_freq_factor",
                   "original_max_position_embeddings")}
    elif rope_type == "linear":
        linear = float(merged["factor"])
        if not linear > 0:
            raise _unsupported("rope_scaling.factor", merged["factor"], "a positive number")
    return {"rope_theta": float(theta), "rope_llama3": llama3, "rope_linear_factor": linear,
            "rope_yarn": yarn, "rope_longrope": longrope,
            "rope_attention_factor": attention_factor, "rotary_dim": _rotary_dim(merged, values)}


def _rotary_dim(rope: dict, values: dict) -> int:
    """The dims of a head rotary embeddings turn: head_dim times partial_rotary_factor,
    where transformers' model honours it (Phi-3's; Llama's, Qwen's and Mistral's rotate whole
    heads); 0 for all of them."""
    if values.get("model_type") == "gptj":   # a count of dims (null: all of them)
        return values.get("rotary_dim") or 0
    if values.get("model_type") == "codegen":   # (null: tables as wide as the model's width)
        if not values.get("rotary_dim"):
            raise _unsupported("rotary_dim", values.get("rotary_dim"), "CodeGen's rotary "
                               "embeddings need a count of dims")
        return values["rotary_dim"]
    partial = rope.get("partial_rotary_factor", values.get("partial_rotary_factor", 1.0))
    if values.get("model_type") == "minimax_m2" and values.get("rotary_dim"):
        return values["rotary_dim"]   # (its released configs count the dims, as GPT-J's)
    if partial in (None, 1, 1.0):
        return 0
    if values.get("model_type") not in PARTIAL_ROTARY_TYPES:
        raise _unsupported("partial_rotary_factor", partial, "rotary embeddings must cover "
                           "the whole head but in Phi-3's and GLM's")
    head_dim = values.get("head_dim") or values["hidden_size"] // values["num_attention_heads"]
    return int(head_dim * partial)


def _context_growth(rope: dict, values: dict, what: str) -> tuple[int, float]:
    """The pretrained context and the factor a scaling grows it by: given, or
    max_position_embeddings over the pretrained context, as transformers reads them."""
    original = rope.get("original_max_position_embeddings") or values.get(
        "original_max_position_embeddings")
    if not original:
        raise _unsupported("rope_scaling.original_max_position_embeddings", original,
                           f"{what} needs the pretrained context length")
    factor = rope.get("factor") or values["max_position_embeddings"] / original
    if not factor > 0:
        raise _unsupported("rope_scaling.factor", factor, "a positive number")
    return int(original), float(factor)


def _longrope_fields(rope: dict, values: dict) -> tuple[dict, float]:
    """LongRoPE's factors and its attention factor: given, or sqrt(1 + ln(factor) /
    ln(original context)), factor the context's growth (max_position_embeddings over the
    original where not given)."""
    original, factor = _context_growth(rope, values, "LongRoPE")
    attention_factor = rope.get("attention_factor")
    if attention_factor is None:
        attention_factor = (1.0 if factor <= 1 else
                            math.sqrt(1 + math.log(factor) / math.log(original)))
    longrope = {"short_factor": tuple(map(float, rope["short_factor"])),
                "long_factor": tuple(map(float, rope["long_factor"])),
                "original_max_position_embeddings": int(original)}
    return longrope, float(attention_factor)


def _yarn_fields(rope: dict, values: dict) -> tuple[dict, float]:
    """YaRN's settings with transformers' defaults, and its attention factor: given, or
    0.1 ln(factor) + 1 (with mscale and mscale_all_dim, the ratio of two such terms)."""
    original, factor = _context_growth(rope, values, "YaRN")

    def mscale(scale: float = 1.0) -> float:
        return 1.0 if factor <= 1 else 0.1 * scale * math.log(factor) + 1.0

    attention_factor = rope.get("attention_factor")
    if attention_factor is None:
        attention_factor = (mscale(rope["mscale"]) / mscale(rope["mscale_all_dim"])
                            if rope.get("mscale") and rope.get("mscale_all_dim") else mscale())
    yarn = {"factor": float(factor), "beta_fast": float(rope.get("beta_fast") or 32),
            "beta_slow": float(rope.get("beta_slow") or 1),
            "original_max_position_embeddings": float(original),
            "truncate": bool(rope.get("truncate", True))}
    return yarn, float(attention_factor)


def fields_from_hf(values: dict) -> dict:
    quantized = values.get("quantization_config")   # (a multimodal one's at the top too)
    if quantized:   # its weights packed or scaled, which every kernel would read as plain
        method = quantized.get("quant_method", "?") if isinstance(quantized, dict) else "?"
        raise _unsupported("quantization_config", f"{method} ...", "tilegraph runs 16- and "
                           "32-bit weights: load an unquantized checkpoint of the model")
    model_type = values.get("model_type", "llama")
    wrapper = model_type if model_type in _LANGUAGE_MODELS else None
    if wrapper:   # the decoder's own config (transformers 4 kept Qwen2-VL's at the top)
        text = values.get("text_config") or {key: value for key, value in values.items()
                                             if key not in ("model_type", "vision_config")}
        text = {**_decoder_defaults(text.get("model_type") or _LANGUAGE_MODELS[wrapper]),
                **text}
        # tied where either config says so (LLaVA's config class takes the text config's
        # tie) or neither says (Gemma 3's default); a head the checkpoint stores apart
        # unties it at load (hf_weights._tied_as_stored)
        ties = [part["tie_word_embeddings"] for part in (values, text)
                if part.get("tie_word_embeddings") is not None]
        values = {**text, "model_type": text.get("model_type") or _LANGUAGE_MODELS[wrapper],
                  "tie_word_embeddings": any(ties) if ties else True}
        model_type = values["model_type"]
    if model_type in _SAME_DECODERS:
        model_type = _SAME_DECODERS[model_type]
        values = {**values, "model_type": model_type}
    if model_type not in SUPPORTED_TYPES:
        raise _unsupported("model_type" if wrapper is None else
                           f"the language model of a {wrapper} checkpoint, model_type",
                           model_type, f"tilegraph runs {', '.join(SUPPORTED_TYPES)} models "
                           f"and the language models of {', '.join(_LANGUAGE_MODELS)} "
                           "checkpoints")
    aliases = _FIELD_ALIASES.get(model_type, {})
    values = {**_CLASS_DEFAULTS.get(model_type, {}),
              **{ours: values[theirs] for theirs, ours in aliases.items() if theirs in values},
              **values}
    if model_type == "openai-gpt":
        values = {**values, "hidden_act": _openai_gpt_activation(values["afn"])}
    if model_type in ("gptj", "codegen", "falcon", "gpt2", "gpt_bigcode", "gpt_neo",
                      "openai-gpt"):
        # an MLP width of null: four times the model's
        values = {**values, "intermediate_size": (values.get("intermediate_size")
                                                  or 4 * values["hidden_size"])}
    if model_type == "falcon":
        values = {**values, **_falcon_fields(values)}
    if model_type == "bloom":
        values = {**values, **_bloom_fields(values)}
    if model_type == "mpt":
        values = {**values, **_mpt_fields(values)}
    alibi = _alibi_fields(values, model_type)
    if model_type == "gpt_bigcode":   # one kv head where multi_query, else one a q head
        values = {**values, "num_key_value_heads": (1 if values["multi_query"]
                                                    else values["num_attention_heads"])}
    learned = (_learned_position_fields(values, model_type)
               if model_type in LEARNED_POSITION_TYPES else {})
    # (OPT 350M's LayerNorms after the adds: real ones, no other norm; loading centres nothing)
    norms_after = learned.get("norm_after_add", False)
    if model_type in _CLASS_ROPE and not (values.get("rope_parameters")
                                          or values.get("rope_scaling")):
        values["rope_parameters"] = _CLASS_ROPE[model_type]
    experts = _expert_fields(values, model_type)
    if model_type in ("qwen2_moe", "qwen3_moe", "solar_open"):   # (not dense layers' width)
        values = {**values, "intermediate_size": values["moe_intermediate_size"]}
    activation = values.get("hidden_activation") or values.get("hidden_act") or "silu"
    if model_type == "gemma" and activation == "gelu":
        # Gemma 1's legacy value: Google's models run the tanh approximation (transformers
        # 5.25 reads it so; 5.17 ran the exact GELU)
        activation = "gelu_pytorch_tanh"
    activations = (_UNGATED_MLP_ACTIVATIONS if model_type in _UNGATED_MLP_TYPES else
                   _MLP_ACTIVATIONS)
    if model_type == "apertus":   # (xIELU: its scalars a layer, which only Apertus loads)
        activations = {**activations, "xielu": "xielu"}
    if activation not in activations:
        raise _unsupported("hidden_act", activation, f"{model_type}'s MLP takes "
                           f"{', '.join(activations)}")
    gemma = model_type in GEMMA_TYPES
    for name, capped in _SOFTCAPPED.items():
        if values.get(name) is not None and model_type not in capped:
            raise _unsupported(name, values[name], f"{model_type} models are not softcapped")
    if values.get("use_bidirectional_attention"):
        raise _unsupported("use_bidirectional_attention", True, "attention is causal")
    if values.get("pretraining_tp", 1) not in (None, 1):
        raise _unsupported("pretraining_tp", values["pretraining_tp"], "use 1")
    # Gemma 2's and 3's default (Gemma 1 never slides)
    window = values.get("sliding_window", 4096 if gemma and model_type != "gemma" else None)
    sliding = _sliding_layers(values, model_type) if window is not None else None
    # EXAONE 4 and Cohere 2 rotate only their sliding layers where they have a window, even
    # if none slides
    rotating = sliding if model_type in ("exaone4", "cohere2") else None
    if model_type in _NEVER_WINDOWED or (sliding is not None and not any(sliding)):
        window = sliding = None
    if values.get("clip_qkv") is not None:
        raise _unsupported("clip_qkv", values["clip_qkv"], "q, k and v are not clipped")
    if model_type == "minimax_m2":   # (its released configs' use_qk_norm: its class norms
        # all of q and all of k whatever the field says)
        values = {key: value for key, value in values.items() if key != "use_qk_norm"}
    # StableLM's and Cohere's LayerNorms of each q and k head, a weight a head; Persimmon's,
    # one weight and bias for all heads
    for name, families in (("qk_layernorm", ("stablelm", "persimmon")),
                           ("use_qk_norm", ("cohere",))):
        if values.get(name) and model_type not in families:
            raise _unsupported(name, values[name], f"{model_type} models have no such norms")
    head_layer_norms = bool(values.get("qk_layernorm") or values.get("use_qk_norm"))
    per_head_norms = head_layer_norms and model_type != "persimmon"
    if model_type in ("llama", "qwen3", "qwen3_moe", "smollm3", "granite", "granite_swa",
                      *_GRANITE_MOE_TYPES, "exaone", "internlm3",
                      "arcee", "hyperclovax", "nemotron", "cohere", "cohere2", "jais2",
                      "iquestcoder", "apertus", "emu3_text_model", *GEMMA_TYPES):
        qkv_bias = o_bias = bool(values.get("attention_bias", False))
        mlp_bias = bool(values.get("mlp_bias", False))
    elif model_type in ("ernie4_5", "starcoder2"):   # one flag for every projection
        qkv_bias = o_bias = mlp_bias = bool(values.get("use_bias", False))
    elif model_type == "phi":   # every projection, the LM head too
        qkv_bias = o_bias = mlp_bias = True
    elif model_type in ("gptj", "codegen"):   # the MLP's and the LM head's only
        qkv_bias, o_bias, mlp_bias = False, False, True
    elif model_type == "gpt_neox":   # q|k|v and o by attention_bias, the MLP always
        qkv_bias = o_bias = bool(values.get("attention_bias", True))
        mlp_bias = True
    elif model_type == "qwen2_moe":   # q, k and v (older configs: always)
        qkv_bias, o_bias, mlp_bias = bool(values.get("qkv_bias", True)), False, False
    elif model_type in ("glm", "glm4"):   # q, k and v, never o or the MLP
        qkv_bias, o_bias, mlp_bias = bool(values["attention_bias"]), False, False
    elif model_type in ("olmo", "olmo2", "olmo3", "olmoe", *_HUNYUAN_TYPES,
                        "nanochat"):   # q|k|v, o
        qkv_bias = o_bias = bool(values.get("attention_bias", False))
        mlp_bias = False
    elif model_type in ("helium", "seed_oss"):   # o's bias apart (Helium: never)
        qkv_bias = bool(values.get("attention_bias", False))
        o_bias = bool(values.get("attention_out_bias", False))
        mlp_bias = bool(values.get("mlp_bias", False))
    elif model_type == "falcon":   # every projection or none
        qkv_bias = o_bias = mlp_bias = bool(values.get("bias", False))
    elif model_type in ("gpt2", "gpt_bigcode", "bloom", "biogpt", "xglm", "openai-gpt",
                        "persimmon"):   # every one
        qkv_bias = o_bias = mlp_bias = True
    elif model_type == "opt":   # every projection or none
        qkv_bias = o_bias = mlp_bias = bool(values["enable_bias"])
    elif model_type == "gpt_neo":   # o's and the MLP's
        qkv_bias, o_bias, mlp_bias = False, True, True
    elif model_type == "gpt_oss":   # q|k|v and o by attention_bias; the router and experts
        qkv_bias = o_bias = bool(values.get("attention_bias", True))
        mlp_bias = True
    elif model_type == "solar_open":   # q, k and v by attention_bias, never o
        qkv_bias, o_bias, mlp_bias = bool(values.get("attention_bias", False)), False, False
    elif model_type == "stablelm":   # q, k and v only (use_qkv_bias)
        qkv_bias, o_bias, mlp_bias = bool(values.get("attention_bias", False)), False, False
    else:
        qkv_bias, o_bias, mlp_bias = model_type == "qwen2", False, False
    heads = values["num_attention_heads"]
    return dict(
        vocab_size=values["vocab_size"], dim=values["hidden_size"],
        n_layers=values["num_hidden_layers"], n_heads=heads,
        n_kv_heads=values.get("num_key_value_heads") or heads,
        ffn_dim=values["intermediate_size"], head_dim=values.get("head_dim") or 0,
        norm_eps=1e-5 if model_type == "olmo" else float(values.get("rms_norm_eps", 1e-6)),
        # Gemma's config classes tie by default (a config.json may leave the key out)
        tie_embeddings=bool(values.get("tie_word_embeddings", gemma)),
        qkv_bias=qkv_bias, o_bias=o_bias, mlp_bias=mlp_bias,
        layer_norm=model_type in LAYER_NORM_TYPES and not norms_after,
        norm_bias=model_type in _NORM_BIAS_TYPES and not norms_after,
        parallel_residual=(model_type in _ONE_NORM_PARALLEL_TYPES
                           or bool(values.get("use_parallel_residual"))),
        one_norm_before=(model_type in _ONE_NORM_PARALLEL_TYPES
                         or model_type in ("stablelm", "falcon")
                         and bool(values.get("use_parallel_residual"))
                         and not values.get("two_norms_parallel")),
        lm_head_bias=model_type in ("phi", "gptj", "codegen"),
        # Nemotron's LayerNorms scale by 1 + weight; OLMo's by nothing
        **({"norm_plus_one": True} if model_type == "nemotron" else {}),
        **({"weightless_norms": True} if model_type == "olmo" else {}),
        qk_norm=head_layer_norms or model_type in ("qwen3", "qwen3_moe", "exaone4", "olmo2",
                                                 "olmo3", "olmoe", *_HUNYUAN_TYPES,
                                                 "nanochat", "gemma3_text", "apertus",
                                                 "minimax_m2"),
        qk_norm_per_head=per_head_norms,
        output_vocab_size=(values.get("output_vocab_size") or 0
                           if model_type == "apertus" else 0),
        qk_norm_bias=head_layer_norms and model_type == "persimmon",
        qk_norm_whole=model_type in ("olmo2", "olmo3", "olmoe", "minimax_m2"),
        qk_norm_after_rotary=model_type in (*_HUNYUAN_TYPES, "nanochat"),
        # (GPT-OSS's experts: a SwiGLU of its own, whatever hidden_act says)
        mlp_activation="swiglu_oss" if model_type == "gpt_oss" else activations[activation],
        max_position_embeddings=values.get("max_position_embeddings", 4096),
        sliding_window=window, sliding_layers=sliding, model_type=model_type,
        rotary_interleaved=model_type in INTERLEAVED_ROTARY_TYPES,
        # GLM-4-0414's norms after attention and the MLP (Gemma 2's and 3's: _gemma_fields);
        # EXAONE 4's and OLMo's, with none before
        **({"post_norms": True} if model_type in ("glm4", *_POST_NORMS_ONLY) else {}),
        # HyperCLOVA X's "peri-layer" norms, after each output as well as before
        **({"post_norms": bool(values.get("use_post_norm", True))}
           if model_type == "hyperclovax" else {}),
        **({"pre_norms": False} if model_type in _POST_NORMS_ONLY or norms_after else {}),
        **(_gemma_fields(values, model_type) if gemma else
           _layer_type_rope(values, 500_000.0, values.get("rope_theta", 500_000.0))
           if model_type == "olmo3" else
           _layer_theta_rope(values, sliding) if model_type in _GRANITE_SWA_TYPES else
           _rope_fields(values)),
        # SmolLM3's layers without rotary embeddings, EXAONE 4's global ones; none rotates
        # where a learned table positions the tokens
        rope_layers=((False,) * values["num_hidden_layers"] if learned or alibi else
                     _rope_layers(values) if model_type == "smollm3" else
                     _theta_layers(values) if model_type in _GRANITE_SWA_TYPES else
                     rotating if rotating is not None and not all(rotating) else None),
        **learned,
        **alibi,
        # BioGPT's and XGLM's embeddings times sqrt(hidden size), where scale_embedding is on
        **({"embedding_multiplier": math.sqrt(values["hidden_size"])}
           if model_type in ("biogpt", "xglm") and values["scale_embedding"] else {}),
        # Cohere's logits multiplied by logit_scale
        **({"logits_scaling": 1.0 / _positive(values, "logit_scale", 0.0625)}
           if model_type in ("cohere", "cohere2") else {}),
        **(_granite_scalars(values, model_type)
           if model_type in ("granite", "granite_swa", *_GRANITE_MOE_TYPES, "hyperclovax")
           else {}),
        # Granite SWA's attention sinks, a logit a head in each layer's softmax
        **({"attention_sinks": True} if model_type in (*_GRANITE_SWA_TYPES, "gpt_oss")
           else {}),
        **(_attention_temperature(values) if model_type == "ministral3" else {}),
        **(_nanochat_fields(values) if model_type == "nanochat" else {}),
        **experts)


# Mixtures of experts. Each layer's MLP is one (Qwen 2 and 3 MoE's configs may name dense
# layers, refused); Mixtral renormalises the chosen experts' weights, the others where
# norm_topk_prob says so (Granite MoE's softmax of the k best scores is that renormalised);
# Qwen 2 MoE adds a shared expert, weighted by a score of its own, Granite MoE's shared and
# SWA variants a shared MLP taken whole where shared_intermediate_size is set; GPT-OSS
# biases its router and experts (a softmax of the k best scores, which is the renormalised
# softmax) and gates them by a SwiGLU of its own. MiniMax-M2 weights each expert by the
# sigmoid of its score, chosen with a bias an expert, renormalised; Solar Open routes so
# too (DeepSeek V3's routing with one group of experts), its weights times
# routed_scaling_factor, beside a shared expert taken whole. Hunyuan's MoE renormalises its
# softmax's k best beside a shared MLP of the experts' width taken whole (the same
# intermediate_size: transformers reads no other, nor a count of shared experts). Their
# count is
# num_local_experts, num_experts or n_routed_experts (transformers' versions map one to
# another, each its own way).
_SIGMOID_ROUTED_TYPES = ("minimax_m2", "solar_open")
_EXPERT_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "olmoe", *_GRANITE_MOE_TYPES, "gpt_oss",
                 *_SIGMOID_ROUTED_TYPES, "hunyuan_v1_moe")


def _expert_fields(values: dict, model_type: str) -> dict:
    """A mixture of experts' fields (none for a dense family, whose config may still carry
    an MoE sibling's: Hunyuan's dense configs do, which its class never reads)."""
    if model_type not in _EXPERT_TYPES:
        for name in ("num_local_experts", "num_experts", "n_routed_experts"):
            if values.get(name) and model_type != "hunyuan_v1_dense":
                raise _unsupported(name, values[name], f"{model_type}'s mixture of experts "
                                   f"is not implemented (those of {', '.join(_EXPERT_TYPES)} "
                                   "are)")
        return {}
    shared = 0
    if model_type == "qwen2_moe":   # the shared expert, in experts' widths
        width, expert = values["shared_expert_intermediate_size"], values["moe_intermediate_size"]
        if not width or width % expert:
            raise _unsupported("shared_expert_intermediate_size", width, "a multiple of "
                               f"moe_intermediate_size ({expert}), held as that many experts")
        shared = width // expert
    elif model_type == "solar_open":   # n_shared_experts of the experts' width
        shared = values.get("n_shared_experts") or 0
    elif model_type == "hunyuan_v1_moe":
        shared = 1
        values = {**values, **{name: _one_for_every_layer(values, name)
                               for name in ("num_experts", "moe_topk")}}
    elif values.get("shared_intermediate_size"):   # Granite's shared MLP
        width, expert = values["shared_intermediate_size"], values["intermediate_size"]
        if width % expert:
            raise _unsupported("shared_intermediate_size", width, "a multiple of "
                               f"intermediate_size ({expert}), held as that many experts")
        shared = width // expert
    if model_type == "gpt_oss":   # its SwiGLU's constants, the kernels' (_activation.py)
        for name, value in (("swiglu_alpha", SWIGLU_OSS_ALPHA), ("swiglu_limit", SWIGLU_OSS_LIMIT)):
            if values.get(name, value) != value:
                raise _unsupported(name, values[name], f"GPT-OSS's {value}")
    if model_type in ("qwen2_moe", "qwen3_moe"):
        if values.get("mlp_only_layers"):
            raise _unsupported("mlp_only_layers", values["mlp_only_layers"],
                               "every layer's MLP is a mixture of experts")
        if values.get("decoder_sparse_step", 1) != 1:
            raise _unsupported("decoder_sparse_step", values["decoder_sparse_step"], "use 1")
    sigmoid = model_type in _SIGMOID_ROUTED_TYPES
    if model_type == "solar_open":
        groups, kept = values.get("n_group") or 1, values.get("topk_group") or 1
        if groups > 1 and kept < groups:
            raise _unsupported("topk_group", kept, f"all {groups} groups (n_group): routing "
                               "within the best groups is not implemented")
    return {"n_experts": (values.get("num_local_experts") or values.get("num_experts")
                          or values["n_routed_experts"]),
            "experts_per_token": values.get("num_experts_per_tok") or values["moe_topk"],
            "router_renormalized": (model_type in ("mixtral", *_GRANITE_MOE_TYPES, "gpt_oss",
                                                   "minimax_m2", "hunyuan_v1_moe")
                                    or bool(values.get("norm_topk_prob", False))),
            "shared_experts": shared, "shared_expert_scored": model_type == "qwen2_moe",
            "router_bias": model_type == "gpt_oss",
            "router_scoring": "sigmoid" if sigmoid else "softmax",
            "router_choice_bias": sigmoid,
            "router_scale": float(values.get("routed_scaling_factor") or 1.0)
            if model_type == "solar_open" else 1.0}


def _one_for_every_layer(values: dict, name: str) -> int:
    """A field Hunyuan's MoE configs may give a layer at a time (a list), as one value:
    refused where the layers differ."""
    value = values[name]
    if isinstance(value, list):
        if len(set(value)) != 1:
            raise _unsupported(name, value, "the same for every layer")
        value = value[0]
    return value


def _openai_gpt_activation(afn: str) -> str:
    """The first GPT's afn as transformers' hidden_act: its "gelu" is the tanh approximation
    (gelu_new); its silu ungated, which tilegraph's MLP kernels do not run, is refused."""
    names = {"gelu": "gelu_new", "relu": "relu"}
    if afn not in names:
        raise _unsupported("afn", afn, f"the first GPT's MLP runs {', '.join(names)} here")
    return names[afn]


def _falcon_fields(values: dict) -> dict:
    """Falcon's fields as Llama's: its kv heads (one where multi_query, without the new
    decoder architecture), its layers side by side where parallel_attn says so, on one norm
    (Falcon 7B's, Falcon 2's) or a norm each (the new architecture's default: Falcon 40B's
    and 180B's). The new architecture's layers one after the other are refused, which
    transformers' Falcon cannot build either. (ALiBi, Falcon-RW's: _alibi_fields.)"""
    new = bool(values.get("new_decoder_architecture"))
    parallel = bool(values["parallel_attn"])
    if new and not parallel:
        raise _unsupported("parallel_attn", False, "Falcon's new decoder architecture runs "
                           "attention and the MLP side by side")
    heads = values["num_attention_heads"]
    kv_heads = (values.get("num_kv_heads") or heads) if new or not values["multi_query"] else 1
    return {"num_key_value_heads": kv_heads, "use_parallel_residual": parallel,
            "two_norms_parallel": new and (values.get("num_ln_in_parallel_attn") or 2) == 2}


def _bloom_fields(values: dict) -> dict:
    """BLOOM's fields as Llama's (its ALiBi and norm of the embeddings: _alibi_fields): an
    MLP 4 times as wide as the model under the tanh approximation of GELU (fixed by its
    modelling code, whatever a config says). The residual taken after the norm
    (apply_residual_connection_post_layernorm) is refused; pretraining_tp, which with
    slow_but_exact only splits the output projection's sum into slices, is dropped."""
    if values.get("apply_residual_connection_post_layernorm"):
        raise _unsupported("apply_residual_connection_post_layernorm", True, "BLOOM's "
                           "residual of the normed stream is not implemented")
    return {"intermediate_size": 4 * values["hidden_size"], "hidden_act": "gelu_pytorch_tanh",
            "pretraining_tp": 1}


# The parts of MPT's attention transformers' MPT does not build, refused by name where a
# config turns them on (attn_config's fields)
_MPT_REFUSED = {"clip_qkv": "q, k and v are not clipped",
                "qk_ln": "MPT's q and k LayerNorms are not implemented",
                "prefix_lm": "attention is causal",
                "attn_uses_sequence_id": "a sequence's tokens attend to the whole sequence"}


def _mpt_fields(values: dict) -> dict:
    """MPT's fields as Llama's: an MLP expansion_ratio times as wide as the model under the
    exact GELU, no bias anywhere (its LayerNorms' neither). What its attn_config turns on
    that transformers' MPT leaves out is refused, as are MPT without ALiBi (transformers adds
    it anyway), its biases (no_bias false: transformers builds none) and a logit_scale
    (which transformers ignores); the learned position table a config may name
    (learned_pos_emb) is never built."""
    attention = values.get("attn_config") or {}
    for name, why in _MPT_REFUSED.items():
        if attention.get(name):
            raise _unsupported(f"attn_config.{name}", attention[name], why)
    if attention.get("alibi") is False:
        raise _unsupported("attn_config.alibi", False, "MPT without ALiBi is not implemented")
    if attention.get("alibi_bias_max", 8) != 8:   # (MPT's own code reads it; transformers not)
        raise _unsupported("attn_config.alibi_bias_max", attention["alibi_bias_max"],
                           "transformers' MPT takes ALiBi's slopes for 8")
    if not values.get("no_bias", True):
        raise _unsupported("no_bias", False, "MPT's biases are not implemented (transformers' "
                           "MPT has none)")
    if values.get("logit_scale") is not None:
        raise _unsupported("logit_scale", values["logit_scale"], "MPT's logits are not "
                           "scaled (transformers ignores the field)")
    return {"intermediate_size": int(values.get("expansion_ratio", 4) * values["hidden_size"]),
            "hidden_act": "gelu"}


def _alibi_fields(values: dict, model_type: str) -> dict:
    """ALiBi's slopes of the families it positions (BLOOM, MPT, Falcon where alibi says
    so), with BLOOM's norm of the embeddings, MPT's softmax_scale where given (else 1 /
    sqrt(head_dim)), Falcon's rounding (its slopes made in fp32 and rounded to bfloat16, as
    transformers makes them); none elsewhere."""
    heads = values["num_attention_heads"]
    if model_type == "falcon" and values.get("alibi"):
        rounded = torch.tensor(alibi_slopes(heads), dtype=torch.float32).bfloat16().float()
        return {"alibi_slopes": tuple(rounded.tolist()), "alibi_rounded": True}
    if model_type == "bloom":
        return {"alibi_slopes": alibi_slopes(heads), "embedding_layer_norm": True}
    if model_type != "mpt":
        return {}
    attention = values.get("attn_config") or {}
    scale = attention.get("softmax_scale")
    return {"alibi_slopes": alibi_slopes(heads),
            **({"attention_multiplier": float(scale)} if scale is not None else {})}


def _learned_position_fields(values: dict, model_type: str) -> dict:
    """GPT-2's, GPT-BigCode's, OPT's and GPT-Neo's positions, a learned table of
    max_position_embeddings rows (no layer rotates); attention scores left unscaled where
    scale_attn_weights says so (GPT-Neo never scales them); OPT 350M's norms after each
    residual add (norm_after_add) and its narrower table (head_projection). What
    transformers builds beside a decoder of one MLP is refused by name."""
    # (the first GPT's norms come after the adds, as OPT 350M's)
    norms_before = model_type != "openai-gpt" and values.get("do_layer_norm_before", True)
    refused = {"add_cross_attention": (True, "tilegraph runs decoders without "
                                             "cross-attention"),
               "scale_attn_by_inverse_layer_idx": (True, "attention scores are scaled alike "
                                                         "in every layer"),
               # (where the norms come after the adds, OPT has no final norm anyway)
               "_remove_final_layer_norm": (True if norms_before else None,
                                            "OPT without its final norm is not implemented"),
               "layer_norm_elementwise_affine": (False, "OPT's LayerNorms without weights "
                                                        "are not implemented")}
    for name, (value, why) in refused.items():
        if name in values and bool(values[name]) == value:
            raise _unsupported(name, values[name], why)
    fields = {"learned_positions": int(values["max_position_embeddings"])}
    if not norms_before:
        fields["norm_after_add"] = True
    projected = values.get("word_embed_proj_dim")
    if model_type == "opt" and projected not in (None, values["hidden_size"]):
        fields["head_projection"] = int(projected)
    if not values.get("scale_attn_weights", model_type != "gpt_neo"):   # (GPT-Neo's never)
        fields["attention_multiplier"] = 1.0
    return fields


def position_rows_before(model_type: str) -> int:
    """The rows a family's position table keeps before position 0's (OPT's 2)."""
    return _POSITION_ROWS_BEFORE.get(model_type, 0)


def _nanochat_fields(values: dict) -> dict:
    """NanoChat's rotation the other way, its norm of the embeddings and its logits'
    softcap (the config class's 15 where a config.json leaves it out). Its embeddings, which
    the norm before the first layer changes, cannot serve as the LM head too."""
    if values.get("tie_word_embeddings"):
        raise _unsupported("tie_word_embeddings", True, "NanoChat's input embeddings are "
                           "normalised, so its LM head must be a table of its own")
    return {"rotary_negated": True, "embedding_norm": True, "weightless_norms": True,
            "logits_softcap": values.get("final_logit_softcapping", 15.0)}


def _attention_temperature(values: dict) -> dict:
    """Ministral 3's q scaling: llama_4_scaling_beta, and the pretrained context it starts
    past, from its rotary settings (transformers 5's rope_parameters or 4's rope_scaling)."""
    rope = {**(values.get("rope_scaling") or {}), **(values.get("rope_parameters") or {})}
    beta = rope.get("llama_4_scaling_beta")
    if beta is None:   # transformers' Ministral 3 reads it unconditionally
        raise _unsupported("rope_parameters.llama_4_scaling_beta", beta,
                           "Ministral 3 scales q by it")
    return {"q_scale_beta": float(beta),
            "q_scale_length": int(rope["original_max_position_embeddings"])}


def _gemma_fields(values: dict, model_type: str) -> dict:
    """Gemma's norms and scalars (the embeddings times sqrt(hidden size); Gemma 2's and 3's
    norms after attention and the MLP, attention scores times query_pre_attn_scalar^-1/2,
    the logits' softcap; Gemma 2's attention scores' too: transformers' Gemma 3 does not cap
    them) and rotary embeddings: Gemma 1's and 2's as Llama's, Gemma 3's a kind of layer each
    (_layer_type_rope)."""
    rope = (_layer_type_rope(values, 1_000_000.0, values.get("rope_local_base_freq", 10_000.0))
            if model_type == "gemma3_text" else _rope_fields(values))
    later = model_type != "gemma"   # Gemma 2 and 3
    return {**rope, "post_norms": later and model_type != "vaultgemma", "norm_plus_one": True,
            "embedding_multiplier": float(values["hidden_size"]) ** 0.5,
            "attention_multiplier": (float(values.get("query_pre_attn_scalar", 256)) ** -0.5
                                     if later else None),
            # (Gemma2Config's defaults where a config.json leaves them out)
            "attn_softcap": (values.get("attn_logit_softcapping", 50.0)
                             if model_type in _GEMMA2_ATTENTION else None),
            "logits_softcap": values.get("final_logit_softcapping",
                                         30.0 if model_type in _GEMMA2_ATTENTION else None)}


def _layer_type_rope(values: dict, theta: float, local_theta: float) -> dict:
    """Rotary embeddings a kind of layer each (Gemma 3's, OLMo 3's): the global layers' from
    rope_parameters' "full_attention", or transformers 4's rope_theta (default `theta`) and
    rope_scaling; the local (sliding) layers' plain ones, their base from
    "sliding_attention", or `local_theta` (the config's own field for it in transformers
    4)."""
    params = values.get("rope_parameters") or {}
    if "full_attention" in params:
        full, local = params["full_attention"] or {}, params.get("sliding_attention") or {}
    else:
        full = {**(values.get("rope_scaling") or {}),
                "rope_theta": values.get("rope_theta", theta)}
        local = {"rope_theta": local_theta}
    local_type = local.get("rope_type", local.get("type", "default"))
    if local_type != "default":
        raise _unsupported("rope_parameters.sliding_attention.rope_type", local_type,
                           "the local layers rotate by plain rotary embeddings")
    rope = _rope_fields({**values, "rope_parameters": {"rope_theta": theta, **full},
                         "rope_scaling": None})
    return {**rope, "rope_local_theta": float(local.get("rope_theta", local_theta))}


def _layer_thetas(values: dict) -> list[float] | None:
    """Granite SWA's rotary base a layer (layer_rope_theta), None where not given."""
    thetas = values.get("layer_rope_theta")
    if thetas and len(thetas) != values["num_hidden_layers"]:
        raise _unsupported("layer_rope_theta", thetas, "one base a layer")
    return list(map(float, thetas)) if thetas else None


def _theta_layers(values: dict) -> tuple[bool, ...] | None:
    """Granite SWA's layers that rotate: those whose layer_rope_theta is not 0 (None: all)."""
    thetas = _layer_thetas(values)
    return None if not thetas or all(thetas) else tuple(bool(theta) for theta in thetas)


def _layer_theta_rope(values: dict, sliding: tuple[bool, ...] | None) -> dict:
    """Granite SWA's rotary embeddings, a base a layer (layer_rope_theta; 0: none, as
    _theta_layers says): one base for the full layers, and another for the sliding ones
    where they differ (rope_local_theta, plain rotary embeddings then); other mixes are
    refused by name."""
    thetas = _layer_thetas(values)
    if not thetas:
        return _rope_fields(values)
    slides = sliding or (False,) * len(thetas)
    full = {t for t, s in zip(thetas, slides, strict=True) if t and not s}
    local = {t for t, s in zip(thetas, slides, strict=True) if t and s}
    if len(full) > 1 or len(local) > 1:
        raise _unsupported("layer_rope_theta", thetas, "one base for the full layers and one "
                           "for the sliding ones")
    params = {**(values.get("rope_scaling") or {}), **(values.get("rope_parameters") or {})}
    base = next(iter(full or local), params.get("rope_theta", 10000.0))
    rope = _rope_fields({**values, "rope_parameters": {**params, "rope_theta": base},
                         "rope_scaling": None})
    if not local or local == {base}:
        return rope
    if params.get("rope_type", params.get("type", "default")) not in ("default", None):
        raise _unsupported("layer_rope_theta", thetas, "sliding layers of their own base "
                           "rotate by plain rotary embeddings")
    return {**rope, "rope_local_theta": local.pop()}


def _rope_layers(values: dict) -> tuple[bool, ...] | None:
    """SmolLM3's no_rope_layers (1: the layer rotates, despite the name), or the
    no_rope_layer_interval it is built from; None where every layer rotates."""
    layers = values.get("no_rope_layers")
    if layers is None:
        interval = values.get("no_rope_layer_interval", 4)
        layers = [(i + 1) % interval != 0 for i in range(values["num_hidden_layers"])]
    return None if all(layers) else tuple(bool(x) for x in layers)


def _gpt_neo_layers(values: dict) -> list[str]:
    """GPT-Neo's kind of attention ("global" or "local": sliding) a layer, from its config's
    attention_types, runs of a pattern ([[["global", "local"], 12]]: 24 layers alternating)."""
    kinds = [kind for pattern, repeats in values["attention_types"]
             for _ in range(repeats) for kind in pattern]
    if len(kinds) != values["num_hidden_layers"] or not set(kinds) <= {"global", "local"}:
        raise _unsupported("attention_types", values["attention_types"], "a global or local "
                           f"kind for each of the {values['num_hidden_layers']} layers")
    return kinds


def _positive(values: dict, name: str, default: float) -> float:
    """values[name] (default where absent) as a positive float, else a ValueError naming it."""
    value = values.get(name, default)
    if not (isinstance(value, (int, float)) and 0 < value < math.inf):
        raise _unsupported(name, value, "a positive number")
    return float(value)


def _granite_scalars(values: dict, model_type: str) -> dict:
    """Granite's scalars; HyperCLOVA X's multiply the logits by logits_scaling where
    Granite's divide, and leave the attention scale at 1 / sqrt(head_dim) where unset."""
    logits = _positive(values, "logits_scaling", 1.0)
    granite = model_type != "hyperclovax"
    attention = values.get("attention_multiplier", 1.0 if granite else None)
    return {"embedding_multiplier": float(values.get("embedding_multiplier", 1.0)),
            "attention_multiplier": None if attention is None else float(attention),
            "residual_multiplier": float(values.get("residual_multiplier", 1.0)),
            "logits_scaling": logits if granite else 1.0 / logits}


def _sliding_layers(values: dict, model_type: str) -> tuple[bool, ...] | None:
    """Which layers a config's sliding window applies to, None for all (Mistral, Phi-3,
    StarCoder2, Mixtral): none of Qwen2/3's or SmolLM3's without use_sliding_window
    (transformers drops the window then); else the layers its layer_types (transformers 5)
    name, or without them, as transformers builds them: Qwen2/3's from max_window_layers
    on, SmolLM3's without rotary embeddings, every Ministral and Qwen 3 MoE layer, Gemma's,
    EXAONE 4's and Cohere 2's but every sliding_window_pattern-th (EXAONE 4's may spell it
    as "LLLG"), CWM's but every fourth from the first, OLMo 3's but every fourth."""
    if model_type in ("mistral", "ministral3", "phi3", "starcoder2", "mixtral"):
        return None
    layers = values["num_hidden_layers"]
    if (model_type not in ("ministral", "cwm", "exaone4", "olmo3", "cohere2", "gpt_neo",
                           *_GRANITE_SWA_TYPES, "gpt_oss", *GEMMA_TYPES)
            and not values.get("use_sliding_window", False)):
        return (False,) * layers
    layer_types = values.get("layer_types")
    if layer_types:
        return tuple(kind == "sliding_attention" for kind in layer_types)
    if model_type in ("ministral", "qwen3_moe"):
        return None
    if model_type in GEMMA_TYPES:   # every sliding_window_pattern-th layer global (Gemma 2: 2)
        pattern = values.get("sliding_window_pattern",
                             2 if model_type in _GEMMA2_ATTENTION else 6)
        return tuple((i + 1) % pattern != 0 for i in range(layers))
    if model_type in ("exaone4", "cohere2"):
        pattern = values.get("sliding_window_pattern") or 4
        if isinstance(pattern, str):
            return tuple(pattern[i % len(pattern)] == "L" for i in range(layers))
        return tuple((i + 1) % pattern != 0 for i in range(layers))
    if model_type == "smollm3":
        return tuple(not rotates for rotates in (_rope_layers(values) or (True,) * layers))
    if model_type in ("cwm", *_GRANITE_SWA_TYPES):
        return tuple(i % 4 != 0 for i in range(layers))
    if model_type == "gpt_neo":
        return tuple(kind == "local" for kind in _gpt_neo_layers(values))
    if model_type == "olmo3":
        return tuple((i + 1) % 4 != 0 for i in range(layers))
    if model_type == "gpt_oss":   # every other layer, from the first
        return tuple(i % 2 == 0 for i in range(layers))
    return tuple(i >= values.get("max_window_layers", 28) for i in range(layers))


def alibi_slopes(n_heads: int) -> tuple[float, ...]:
    """ALiBi's slopes (Press et al. 2022), one a head, as BLOOM and MPT build them (MPT from
    the series for the next power of two, its even-numbered slopes then its odd: the same
    values): for p the largest power of two up to n_heads, 2^(-8 i / p) for i = 1..p, then
    the heads past p take every other slope of the series for 2p heads, 2^(-4 i / p) for
    i = 1, 3, 5, ..."""
    p = 2 ** int(math.log2(n_heads))
    exponents = [-8 * i / p for i in range(1, p + 1)]
    exponents += [-4 * i / p for i in range(1, 2 * (n_heads - p), 2)]
    return tuple(2.0 ** e for e in exponents)
