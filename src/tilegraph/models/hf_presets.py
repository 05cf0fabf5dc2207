"""Named Llama-family shapes as Hugging Face configs, for demos, benchmarks and tests:
random weights of a real model's shape, built without a download.

    hf = random_hf_model("tinyllama", dtype=torch.bfloat16, device="cuda")
    model = Llama.from_hf(hf)

The real shapes come from each model's published config.json; the tiny ones keep every
feature of their family (grouped-query heads, biases, tied embeddings, Llama 3 rope scaling,
Qwen3's head norms and head_dim apart from the width, Phi-3's stacked matrices and sliding
window, SmolLM3's layers without rotary embeddings, Granite's scalars, GLM's, ERNIE 4.5's
and Helium's rotary embeddings over neighbouring dims, Gemma's gated GELU and norms after
attention and the MLP, Gemma 2's softcaps, Gemma 3's local layers, the LayerNorms of
StarCoder2, StableLM, Nemotron and OLMo, the parallel layers of Phi, Cohere, GPT-NeoX,
CodeGen and Falcon, the learned position tables of GPT-2, OPT, GPT-BigCode and GPT-Neo) at
a size the Triton interpreter runs in seconds.
"""

from __future__ import annotations

import importlib

import torch

_LLAMA3_ROPE = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}

SHAPES: dict[str, dict] = {
    "tinyllama": dict(model_type="llama", vocab_size=32000, hidden_size=2048,
                      intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                      num_key_value_heads=4, rms_norm_eps=1e-5, rope_theta=10000.0,
                      max_position_embeddings=2048),
    "llama3.2-1b": dict(model_type="llama", vocab_size=128256, hidden_size=2048,
                        intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                        num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=500000.0,
                        rope_scaling=_LLAMA3_ROPE, tie_word_embeddings=True,
                        max_position_embeddings=131072),
    "llama3-8b": dict(model_type="llama", vocab_size=128256, hidden_size=4096,
                      intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=500000.0,
                      max_position_embeddings=8192),
    "qwen2-0.5b": dict(model_type="qwen2", vocab_size=151936, hidden_size=896,
                       intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                       num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=1000000.0,
                       tie_word_embeddings=True, max_position_embeddings=32768,
                       use_sliding_window=False),
    # head_dim 128 with 16 heads over a width of 1024: q is twice as wide as the residual
    "qwen3-0.6b": dict(model_type="qwen3", vocab_size=151936, hidden_size=1024,
                       intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, head_dim=128, rms_norm_eps=1e-6,
                       rope_theta=1000000.0, tie_word_embeddings=True,
                       max_position_embeddings=40960, use_sliding_window=False),
    "mistral-7b": dict(model_type="mistral", vocab_size=32768, hidden_size=4096,
                       intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, rms_norm_eps=1e-5, rope_theta=1000000.0,
                       max_position_embeddings=32768, sliding_window=None),
    # q|k|v and gate|up each one matrix in the checkpoint; head_dim 96, 32 kv heads
    "phi3-mini": dict(model_type="phi3", vocab_size=32064, hidden_size=3072,
                      intermediate_size=8192, num_hidden_layers=32, num_attention_heads=32,
                      num_key_value_heads=32, rms_norm_eps=1e-5, rope_theta=10000.0,
                      max_position_embeddings=4096, original_max_position_embeddings=4096,
                      sliding_window=2047, tie_word_embeddings=False),
    # five sliding layers of 512 positions to a global one; one kv head of 256; gated GELU
    "gemma3-1b": dict(model_type="gemma3_text", vocab_size=262144, hidden_size=1152,
                      intermediate_size=6912, num_hidden_layers=26, num_attention_heads=4,
                      num_key_value_heads=1, head_dim=256, rms_norm_eps=1e-6,
                      rope_theta=1000000.0, rope_local_base_freq=10000.0, sliding_window=512,
                      sliding_window_pattern=6, query_pre_attn_scalar=256,
                      hidden_activation="gelu_pytorch_tanh", max_position_embeddings=32768,
                      tie_word_embeddings=True),
    # every other layer sliding over 4096; attention scores capped at 50, logits at 30
    "gemma2-2b": dict(model_type="gemma2", vocab_size=256000, hidden_size=2304,
                      intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
                      num_key_value_heads=4, head_dim=256, rms_norm_eps=1e-6,
                      rope_theta=10000.0, sliding_window=4096, query_pre_attn_scalar=256,
                      attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                      hidden_activation="gelu_pytorch_tanh", max_position_embeddings=8192,
                      tie_word_embeddings=True),
    # ERNIE 4.5's dense 0.3B (baidu/ERNIE-4.5-0.3B-PT, as transformers' Ernie4_5Config
    # defaults give it): rotary embeddings over neighbouring dims (2i, 2i + 1) of a head
    "ernie4.5-0.3b": dict(model_type="ernie4_5", vocab_size=103424, hidden_size=1024,
                          intermediate_size=3072, num_hidden_layers=18, num_attention_heads=16,
                          num_key_value_heads=2, head_dim=128, rms_norm_eps=1e-5,
                          rope_theta=500000.0, tie_word_embeddings=True,
                          max_position_embeddings=131072, use_bias=False),
    # GLM-4 in transformers' Llama layout (THUDM's -hf checkpoints), glm-4-9b-chat's shape as
    # transformers' GlmConfig defaults give it: q, k, v biases, half of each head turned by
    # rotary embeddings over neighbouring dims, gate|up one matrix
    "glm-4-9b": dict(model_type="glm", vocab_size=151552, hidden_size=4096,
                     intermediate_size=13696, num_hidden_layers=40, num_attention_heads=32,
                     num_key_value_heads=2, head_dim=128, rms_norm_eps=1.5625e-07,
                     rope_theta=10000.0, partial_rotary_factor=0.5, attention_bias=True,
                     tie_word_embeddings=False, max_position_embeddings=131072,
                     pad_token_id=151329, eos_token_id=[151329, 151336, 151338]),
    # Falcon 7B (tiiuae/falcon-7b): 71 q heads of 64 on one kv head (multi_query), attention
    # and an ungated GELU MLP side by side on one LayerNorm, no biases, a tied table
    "falcon-7b": dict(model_type="falcon", vocab_size=65024, hidden_size=4544,
                      num_hidden_layers=32, num_attention_heads=71, multi_query=True,
                      parallel_attn=True, new_decoder_architecture=False, bias=False,
                      alibi=False, layer_norm_epsilon=1e-5, max_position_embeddings=2048,
                      bos_token_id=11, eos_token_id=11),
    # Falcon-RW 1B (tiiuae/falcon-rw-1b): Falcon's ALiBi checkpoints, rounded as transformers
    # rounds the bias; a LayerNorm before attention, then one before the MLP, biases
    # everywhere, q|k|v stored head by head, a tied table
    "falcon-rw-1b": dict(model_type="falcon", vocab_size=50304, hidden_size=2048,
                         num_hidden_layers=24, num_attention_heads=32, multi_query=False,
                         parallel_attn=False, new_decoder_architecture=False, bias=True,
                         alibi=True, layer_norm_epsilon=1e-5, max_position_embeddings=2048,
                         bos_token_id=1, eos_token_id=2),
    # Jais 2 8B (inceptionai/Jais-2-8B-Chat) as transformers' Jais2Config describes it: 26
    # heads of 128, LayerNorms, an ungated squared-ReLU MLP, biases everywhere
    "jais2-8b": dict(model_type="jais2", vocab_size=150272, hidden_size=3328,
                     intermediate_size=26624, num_hidden_layers=32, num_attention_heads=26,
                     layer_norm_eps=1e-5, hidden_act="relu2", attention_bias=True,
                     mlp_bias=True, max_position_embeddings=8192, bos_token_id=0,
                     eos_token_id=150024),
    # Apertus 8B (swiss-ai/Apertus-8B-2509): Llama's attention with Qwen 3's head norms, an
    # ungated MLP whose xIELU has scalars of each layer's own
    "apertus-8b": dict(model_type="apertus", vocab_size=131072, hidden_size=4096,
                       intermediate_size=21504, num_hidden_layers=32, num_attention_heads=32,
                       num_key_value_heads=8, rms_norm_eps=1e-5, hidden_act="xielu",
                       max_position_embeddings=65536,
                       rope_parameters={"rope_type": "llama3", "rope_theta": 12e6,
                                        "factor": 8.0, "low_freq_factor": 1.0,
                                        "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 8192},
                       bos_token_id=1, eos_token_id=2, pad_token_id=3),
    # Persimmon 8B (adept/persimmon-8b-base): LayerNorms, of each q and k head too (one
    # weight and bias for all heads), half of each head rotated, an ungated squared-ReLU
    # MLP, biases everywhere, q|k|v stored head by head
    "persimmon-8b": dict(model_type="persimmon", vocab_size=262144, hidden_size=4096,
                         intermediate_size=16384, num_hidden_layers=36,
                         num_attention_heads=64, hidden_act="relu2", layer_norm_eps=1e-5,
                         max_position_embeddings=16384, qk_layernorm=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 25000.0,
                                          "partial_rotary_factor": 0.5},
                         bos_token_id=1, eos_token_id=2),
    # Mixtures of experts. OLMoE 1B-7B (allenai/OLMoE-1B-7B-0924): 64 experts, 8 a token,
    # their weights as the softmax gave them; q and k normalised as OLMo 2's
    "olmoe-1b-7b": dict(model_type="olmoe", vocab_size=50304, hidden_size=2048,
                        intermediate_size=1024, num_hidden_layers=16, num_attention_heads=16,
                        num_key_value_heads=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                        num_experts=64, num_experts_per_tok=8, norm_topk_prob=False,
                        max_position_embeddings=4096, pad_token_id=1, eos_token_id=50279),
    # Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B): 128 experts of 768, 8 a token, renormalised
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048,
                          intermediate_size=6144, moe_intermediate_size=768,
                          num_hidden_layers=48, num_attention_heads=32,
                          num_key_value_heads=4, head_dim=128, rms_norm_eps=1e-6,
                          rope_theta=1000000.0, num_experts=128, num_experts_per_tok=8,
                          norm_topk_prob=True, max_position_embeddings=40960,
                          use_sliding_window=False, tie_word_embeddings=False,
                          bos_token_id=151643, eos_token_id=151645),
    # Qwen1.5-MoE-A2.7B (Qwen/Qwen1.5-MoE-A2.7B): 60 experts of 1408, 4 a token, and a shared
    # expert four times as wide
    "qwen1.5-moe-a2.7b": dict(model_type="qwen2_moe", vocab_size=151936, hidden_size=2048,
                              intermediate_size=5632, moe_intermediate_size=1408,
                              shared_expert_intermediate_size=5632, num_hidden_layers=24,
                              num_attention_heads=16, num_key_value_heads=16,
                              rms_norm_eps=1e-6, rope_theta=1000000.0, num_experts=60,
                              num_experts_per_tok=4, norm_topk_prob=False,
                              max_position_embeddings=8192, use_sliding_window=False,
                              tie_word_embeddings=False, bos_token_id=151643,
                              eos_token_id=151643),
    # GPT-OSS 20B (openai/gpt-oss-20b, dequantized: its checkpoints hold the experts in
    # MXFP4): 32 experts of 2880 with biases, 4 a token, attention sinks, every other layer
    # sliding over 128 positions, YaRN
    "gpt-oss-20b": dict(model_type="gpt_oss", vocab_size=201088, hidden_size=2880,
                        intermediate_size=2880, num_hidden_layers=24, num_attention_heads=64,
                        num_key_value_heads=8, head_dim=64, num_local_experts=32,
                        num_experts_per_tok=4, sliding_window=128, rms_norm_eps=1e-5,
                        max_position_embeddings=131072, eos_token_id=200002,
                        pad_token_id=199999),
    # Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1): 8 experts, 2 a token (93 GB in bf16: more
    # than one 80 GB GPU holds)
    "mixtral-8x7b": dict(model_type="mixtral", vocab_size=32000, hidden_size=4096,
                         intermediate_size=14336, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, rms_norm_eps=1e-5,
                         rope_theta=1000000.0, num_local_experts=8, num_experts_per_tok=2,
                         max_position_embeddings=32768, sliding_window=None,
                         bos_token_id=1, eos_token_id=2),
    # CodeGen 350M (mono): GPT-J's layer, q|v|k stored in 4 shards
    "codegen-350m": dict(model_type="codegen", vocab_size=51200, n_embd=1024, n_layer=20,
                         n_head=16, rotary_dim=32, n_positions=2048, n_ctx=2048,
                         activation_function="gelu_new", layer_norm_epsilon=1e-5,
                         bos_token_id=1, eos_token_id=50256),
    # Learned position embeddings: GPT-2 (124M), OPT 1.3B, StarCoderBase 1B (GPT-BigCode,
    # one kv head), GPT-Neo 1.3B (every other layer attending to its last 256 positions)
    "gpt2": dict(model_type="gpt2", vocab_size=50257, n_embd=768, n_layer=12, n_head=12,
                 n_positions=1024, activation_function="gelu_new", layer_norm_epsilon=1e-5,
                 bos_token_id=50256, eos_token_id=50256),
    # The first GPT (openai-community/openai-gpt): GPT-2's modules, LayerNorms after the
    # residual adds, 512 positions
    "openai-gpt": dict(model_type="openai-gpt", vocab_size=40478, n_embd=768, n_layer=12,
                       n_head=12, n_positions=512, afn="gelu", layer_norm_epsilon=1e-5),
    "opt-1.3b": dict(model_type="opt", vocab_size=50272, hidden_size=2048, ffn_dim=8192,
                     num_hidden_layers=24, num_attention_heads=32, max_position_embeddings=2048,
                     activation_function="relu", do_layer_norm_before=True,
                     word_embed_proj_dim=2048, bos_token_id=2, eos_token_id=2, pad_token_id=1),
    # OPT 350M: its norms after each residual add, its table 512 wide, projected to 1024
    "opt-350m": dict(model_type="opt", vocab_size=50272, hidden_size=1024, ffn_dim=4096,
                     num_hidden_layers=24, num_attention_heads=16, max_position_embeddings=2048,
                     activation_function="relu", do_layer_norm_before=False,
                     word_embed_proj_dim=512, bos_token_id=2, eos_token_id=2, pad_token_id=1),
    # BioGPT (347M): OPT's layer, GELU, its embeddings times sqrt(1024)
    "biogpt": dict(model_type="biogpt", vocab_size=42384, hidden_size=1024,
                   intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
                   max_position_embeddings=1024, hidden_act="gelu", scale_embedding=True,
                   bos_token_id=0, eos_token_id=2, pad_token_id=1),
    # XGLM 564M: BioGPT's layer, a sinusoidal position table, a 256008-row table
    "xglm-564m": dict(model_type="xglm", vocab_size=256008, d_model=1024, ffn_dim=4096,
                      num_layers=24, attention_heads=16, max_position_embeddings=2048,
                      activation_function="gelu", scale_embedding=True, bos_token_id=0,
                      eos_token_id=2, pad_token_id=1),
    "starcoderbase-1b": dict(model_type="gpt_bigcode", vocab_size=49152, n_embd=2048,
                             n_inner=8192, n_layer=24, n_head=16, n_positions=8192,
                             multi_query=True, activation_function="gelu_pytorch_tanh",
                             layer_norm_epsilon=1e-5, bos_token_id=0, eos_token_id=0),
    "gpt-neo-1.3b": dict(model_type="gpt_neo", vocab_size=50257, hidden_size=2048,
                         num_layers=24, num_heads=16, max_position_embeddings=2048,
                         attention_types=[[["global", "local"], 12]], window_size=256,
                         activation_function="gelu_new", bos_token_id=50256,
                         eos_token_id=50256),
    # BLOOM 560M and 1B7: ALiBi's position bias, a LayerNorm on the embeddings, q|k|v stored
    # head by head, biased projections, an ungated tanh-GELU MLP 4 times as wide
    "bloom-560m": dict(model_type="bloom", vocab_size=250880, hidden_size=1024, n_layer=24,
                       n_head=16, layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
                       pad_token_id=3),
    "bloom-1b7": dict(model_type="bloom", vocab_size=250880, hidden_size=2048, n_layer=24,
                      n_head=16, layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
                      pad_token_id=3),
    # MPT 7B: ALiBi, LayerNorms without biases, no biased projection, q|k|v
    # stacked, an ungated exact-GELU MLP 4 times as wide
    "mpt-7b": dict(model_type="mpt", vocab_size=50432, d_model=4096, n_layers=32, n_heads=32,
                   expansion_ratio=4, max_seq_len=2048, no_bias=True, layer_norm_epsilon=1e-5,
                   attn_config={"alibi": True, "alibi_bias_max": 8}, bos_token_id=0,
                   eos_token_id=0),
    # CPU sizes: every feature of the family, small enough for the interpreter.
    "tiny-llama3": dict(model_type="llama", vocab_size=67, hidden_size=32,
                        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=500000.0,
                        rope_scaling={**_LLAMA3_ROPE, "factor": 8.0,
                                      "original_max_position_embeddings": 16},
                        attention_bias=True, max_position_embeddings=256),
    "tiny-qwen2": dict(model_type="qwen2", vocab_size=67, hidden_size=32,
                       intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=1, rms_norm_eps=1e-6, rope_theta=1000000.0,
                       tie_word_embeddings=True, max_position_embeddings=256,
                       use_sliding_window=False),
    "tiny-qwen3": dict(model_type="qwen3", vocab_size=67, hidden_size=32,
                       intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-6,
                       rope_theta=1000000.0, tie_word_embeddings=True,
                       max_position_embeddings=256, use_sliding_window=False),
    # Mixtures of experts: Mixtral's (weights renormalised), Qwen 3 MoE's (its experts'
    # width its own field; renormalised here) and OLMoE's (as the softmax gave them)
    "tiny-mixtral": dict(model_type="mixtral", vocab_size=67, hidden_size=32,
                         intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-5,
                         num_local_experts=5, num_experts_per_tok=2,
                         max_position_embeddings=256, sliding_window=None),
    "tiny-qwen3-moe": dict(model_type="qwen3_moe", vocab_size=67, hidden_size=32,
                           intermediate_size=48, moe_intermediate_size=40,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=12, rms_norm_eps=1e-6, rope_theta=1000000.0,
                           num_experts=8, num_experts_per_tok=3, norm_topk_prob=True,
                           max_position_embeddings=256, use_sliding_window=False),
    # Qwen 2 MoE: a shared expert three experts wide (q, k and v biased)
    "tiny-qwen2-moe": dict(model_type="qwen2_moe", vocab_size=67, hidden_size=32,
                           intermediate_size=48, moe_intermediate_size=16,
                           shared_expert_intermediate_size=48, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6,
                           num_experts=6, num_experts_per_tok=2, norm_topk_prob=False,
                           max_position_embeddings=256, use_sliding_window=False),
    # Granite MoE: Granite's scalars (folded into the weights: the experts' down projections
    # times the residual multiplier)
    "tiny-granitemoe": dict(model_type="granitemoe", vocab_size=67, hidden_size=32,
                            intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, rms_norm_eps=1e-6, num_local_experts=5,
                            num_experts_per_tok=3, embedding_multiplier=3.0,
                            attention_multiplier=0.2, residual_multiplier=0.5,
                            logits_scaling=2.0, tie_word_embeddings=True,
                            max_position_embeddings=256),
    # Granite MoE's shared MLP (two experts' widths), taken whole by every row
    "tiny-granitemoe-shared": dict(model_type="granitemoeshared", vocab_size=67,
                                   hidden_size=32, intermediate_size=24,
                                   shared_intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2,
                                   rms_norm_eps=1e-6, num_local_experts=5,
                                   num_experts_per_tok=2, embedding_multiplier=3.0,
                                   attention_multiplier=0.2, residual_multiplier=0.5,
                                   logits_scaling=2.0, max_position_embeddings=256),
    # Granite MoE SWA: tiny-granite-swa's attention (sinks, a full layer then three sliding,
    # a rotary base a layer, the last none) over experts and a shared MLP
    "tiny-granitemoe-swa": dict(model_type="granitemoe_swa", vocab_size=67, hidden_size=32,
                                intermediate_size=16, shared_intermediate_size=16,
                                num_hidden_layers=4, num_attention_heads=4,
                                num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0,
                                layer_rope_theta=[10000.0, 500.0, 500.0, 0], sliding_window=7,
                                num_local_experts=6, num_experts_per_tok=3,
                                max_position_embeddings=256, embedding_multiplier=12.0,
                                attention_multiplier=0.0625, residual_multiplier=0.22,
                                logits_scaling=8.0, bos_token_id=1, eos_token_id=2),
    # GPT-OSS: q|k|v and o biased, sinks, a sliding layer (a window the tests pass) then a
    # full one, YaRN past a pretrained context of 16, the router's and experts' biases and
    # its clamped SwiGLU
    "tiny-gpt-oss": dict(model_type="gpt_oss", vocab_size=67, hidden_size=32,
                         intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, num_local_experts=6,
                         num_experts_per_tok=2, sliding_window=7, rms_norm_eps=1e-5,
                         max_position_embeddings=64,
                         rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                          "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                                          "truncate": False,
                                          "original_max_position_embeddings": 16}),
    # MiniMax-M2: norms of all of q and all of k, half of each head rotated, experts weighted
    # by their scores' sigmoids, chosen with a bias each. (Its released configs' rotary_dim,
    # which transformers 5.17 ignores and rotates whole heads, and 5.25 reads: the factor
    # here, which both read.)
    "tiny-minimax-m2": dict(model_type="minimax_m2", vocab_size=67, hidden_size=32,
                            intermediate_size=24, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=16, num_local_experts=6,
                            num_experts_per_tok=3, rms_norm_eps=1e-6,
                            rope_parameters={"rope_type": "default", "rope_theta": 5e6,
                                             "partial_rotary_factor": 0.5},
                            max_position_embeddings=256, bos_token_id=1, eos_token_id=2),
    # Solar Open: DeepSeek V3's routing with one group (sigmoid, a bias that chooses, the
    # weights renormalised and scaled), a shared expert two experts wide, q, k and v biased
    "tiny-solar-open": dict(model_type="solar_open", vocab_size=67, hidden_size=32,
                            moe_intermediate_size=16, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=12,
                            n_routed_experts=7, num_experts_per_tok=3, n_shared_experts=2,
                            routed_scaling_factor=2.5, norm_topk_prob=True,
                            attention_bias=True, rms_norm_eps=1e-5,
                            max_position_embeddings=256),
    # Hunyuan's MoE: its dense sibling's attention (head norms after the rotation, an NTK
    # alpha) with experts, their count a token given a layer at a time, and a shared MLP
    # taken whole
    "tiny-hunyuan-moe": dict(model_type="hunyuan_v1_moe", vocab_size=67, hidden_size=32,
                             intermediate_size=16, num_hidden_layers=2, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                             attention_bias=True, num_experts=7, moe_topk=[3, 3],
                             rope_parameters={"rope_type": "dynamic", "alpha": 1000.0,
                                              "factor": 1.0, "rope_theta": 10000.0},
                             max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                             bos_token_id=1),
    "tiny-olmoe": dict(model_type="olmoe", vocab_size=67, hidden_size=32, intermediate_size=16,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       rms_norm_eps=1e-5, num_experts=6, num_experts_per_tok=4,
                       norm_topk_prob=False, max_position_embeddings=256, eos_token_id=2,
                       pad_token_id=0, bos_token_id=1),
    "tiny-mistral": dict(model_type="mistral", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=2, head_dim=24, rms_norm_eps=1e-5,
                         max_position_embeddings=256, sliding_window=None),
    # a window the 64-position tests reach exactly
    "tiny-phi3": dict(model_type="phi3", vocab_size=67, hidden_size=32,
                      intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, head_dim=12, rms_norm_eps=1e-5,
                      max_position_embeddings=256, sliding_window=64,
                      tie_word_embeddings=False, eos_token_id=2, pad_token_id=None),
    # Granite 3's scalars (embeddings, attention scores, layer outputs, logits), tied
    "tiny-granite": dict(model_type="granite", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000000.0,
                         tie_word_embeddings=True, max_position_embeddings=256,
                         embedding_multiplier=12.0, attention_multiplier=0.0625,
                         residual_multiplier=0.22, logits_scaling=8.0),
    # Granite SWA: Granite's scalars, attention sinks, a full layer then three sliding ones
    # (a window the tests pass), the full one rotating by its own base, the last by none
    "tiny-granite-swa": dict(model_type="granite_swa", vocab_size=67, hidden_size=32,
                             intermediate_size=48, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                             rope_theta=10000.0, layer_rope_theta=[10000.0, 500.0, 500.0, 0],
                             sliding_window=7, tie_word_embeddings=True,
                             max_position_embeddings=256, embedding_multiplier=12.0,
                             attention_multiplier=0.0625, residual_multiplier=0.22,
                             logits_scaling=8.0, bos_token_id=1, eos_token_id=2),
    # the second layer without rotary embeddings (SmolLM3-3B: every fourth)
    "tiny-smollm3": dict(model_type="smollm3", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=5000000.0,
                         tie_word_embeddings=True, max_position_embeddings=256,
                         no_rope_layer_interval=2, eos_token_id=2, pad_token_id=None,
                         bos_token_id=None),
    # Llama under other names: EXAONE's config fields and checkpoint tensors, InternLM3's
    # bias flags
    "tiny-exaone": dict(model_type="exaone", vocab_size=67, hidden_size=32,
                        intermediate_size=48, num_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, layer_norm_epsilon=1e-5,
                        max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                        bos_token_id=1),
    "tiny-internlm3": dict(model_type="internlm3", vocab_size=67, hidden_size=32,
                           intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=8, qkv_bias=True, bias=True,
                           max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                           bos_token_id=1),
    # ERNIE 4.5: a bias on every projection; GLM: q, k, v biases, the first 8 of each head's
    # 16 dims turned, pairs of neighbours both
    "tiny-ernie4_5": dict(model_type="ernie4_5", vocab_size=67, hidden_size=32,
                          intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                          rope_theta=10000.0, use_bias=True, max_position_embeddings=256,
                          eos_token_id=2, pad_token_id=0, bos_token_id=1),
    "tiny-glm": dict(model_type="glm", vocab_size=67, hidden_size=32, intermediate_size=48,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                     partial_rotary_factor=0.5, attention_bias=True,
                     max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                     bos_token_id=1),
    # GLM-4-0414: GLM's layer with a norm after attention and after the MLP
    "tiny-glm4": dict(model_type="glm4", vocab_size=67, hidden_size=32, intermediate_size=48,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      head_dim=16, rms_norm_eps=1e-5, rope_theta=10000.0,
                      partial_rotary_factor=0.5, attention_bias=True,
                      max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                      bos_token_id=1),
    # Helium: Llama's layer, q, k, v biases (never o's), rotary pairs of neighbours
    "tiny-helium": dict(model_type="helium", vocab_size=67, hidden_size=32,
                        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
                        rope_theta=10000.0, attention_bias=True, mlp_bias=True,
                        max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                        bos_token_id=1),
    # Seed-OSS: Llama's layer, a bias flag each for q|k|v, o and the MLP
    "tiny-seed_oss": dict(model_type="seed_oss", vocab_size=67, hidden_size=32,
                          intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-6,
                          rope_theta=10000.0, attention_bias=True, attention_out_bias=True,
                          mlp_bias=True, max_position_embeddings=256, eos_token_id=2,
                          pad_token_id=0, bos_token_id=1),
    # CWM: Llama 3's layer and rope scaling, three sliding layers to a full one (a window the
    # 64-position tests pass)
    "tiny-cwm": dict(model_type="cwm", vocab_size=67, hidden_size=32, intermediate_size=48,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=8, rms_norm_eps=1e-5, sliding_window=24,
                     rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                                      "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 16},
                     max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                     bos_token_id=1),
    # EXAONE 4: norms after attention and the MLP only, q and k head norms; a sliding layer,
    # rotated, and a global one without rotary embeddings (the checkpoints' three sliding
    # layers to a global one: test_llama reads that pattern), a window the tests pass
    "tiny-exaone4": dict(model_type="exaone4", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                         sliding_window=24, sliding_window_pattern=2, rope_theta=1000000.0,
                         max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                         bos_token_id=1),
    # OLMo 2: norms after attention and the MLP only, q and k each normalised as a whole
    "tiny-olmo2": dict(model_type="olmo2", vocab_size=67, hidden_size=32,
                       intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, rms_norm_eps=1e-6, rope_theta=500000.0,
                       max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                       bos_token_id=1),
    # OLMo 3: OLMo 2's layer, a sliding layer (a window the tests pass) beside a full one
    # (its configs: three to one), YaRN on the full layer only
    "tiny-olmo3": dict(model_type="olmo3", vocab_size=67, hidden_size=32,
                       intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, rms_norm_eps=1e-6, sliding_window=24,
                       layer_types=["sliding_attention", "full_attention"],
                       rope_parameters={
                           "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0,
                                              "factor": 16.0,
                                              "original_max_position_embeddings": 16},
                           "sliding_attention": {"rope_type": "default",
                                                 "rope_theta": 500000.0}},
                       max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                       bos_token_id=1),
    # Hunyuan's dense models: q and k heads normalised after their rotation, NTK-alpha
    # rotary scaling (labelled "dynamic"), q|k|v and o biases
    "tiny-hunyuan": dict(model_type="hunyuan_v1_dense", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                         attention_bias=True,
                         rope_parameters={"rope_type": "dynamic", "alpha": 1000.0,
                                          "factor": 1.0, "rope_theta": 10000.0},
                         max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                         bos_token_id=1),
    # Ministral 3: Mistral's layer, YaRN, q scaled past a pretrained context of 16
    # positions (Llama 4's attention temperature, a beta large enough to show)
    "tiny-ministral3": dict(model_type="ministral3", vocab_size=67, hidden_size=32,
                            intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                            rope_parameters={"rope_type": "yarn", "rope_theta": 1e6,
                                             "factor": 16.0,
                                             "original_max_position_embeddings": 16,
                                             "beta_fast": 32.0, "beta_slow": 1.0,
                                             "mscale": 1.0, "mscale_all_dim": 1.0,
                                             "llama_4_scaling_beta": 0.5},
                            max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                            bos_token_id=1),
    # Arcee (AFM): Llama's layer with an ungated MLP, relu(up)^2; YaRN
    "tiny-arcee": dict(model_type="arcee", vocab_size=67, hidden_size=32,
                       intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                       hidden_act="relu2", mlp_bias=True,
                       rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                        "factor": 4.0, "original_max_position_embeddings": 64},
                       max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                       bos_token_id=1),
    # NanoChat: Arcee's ungated MLP, weightless norms (one on the embeddings), q and k head
    # norms after a rotation the other way, softcapped logits (a cap tiny logits reach)
    "tiny-nanochat": dict(model_type="nanochat", vocab_size=67, hidden_size=32,
                          intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, rms_norm_eps=1e-6,
                          final_logit_softcapping=4.0, attention_bias=True,
                          max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                          bos_token_id=1),
    # HyperCLOVA X: Granite's scalars (the logits multiplied), norms after attention and
    # the MLP besides those before
    "tiny-hyperclovax": dict(model_type="hyperclovax", vocab_size=67, hidden_size=32,
                             intermediate_size=48, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
                             embedding_multiplier=3.0, residual_multiplier=0.4,
                             logits_scaling=0.5, attention_multiplier=0.2,
                             max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                             bos_token_id=1),
    # StarCoder2: LayerNorms with biases, biases on every projection, an ungated MLP of
    # tanh GELU, a window every layer slides (one the tests pass), a tied table
    "tiny-starcoder2": dict(model_type="starcoder2", vocab_size=67, hidden_size=32,
                            intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, norm_epsilon=1e-5, use_bias=True,
                            hidden_act="gelu_pytorch_tanh", sliding_window=24,
                            tie_word_embeddings=True, max_position_embeddings=256,
                            eos_token_id=2, pad_token_id=0, bos_token_id=1),
    # StableLM 2: LayerNorms with biases, q|k|v biased, a quarter of each head rotated
    "tiny-stablelm": dict(model_type="stablelm", vocab_size=67, hidden_size=32,
                          intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                          num_key_value_heads=1, layer_norm_eps=1e-5, use_qkv_bias=True,
                          partial_rotary_factor=0.25, max_position_embeddings=256,
                          eos_token_id=2, pad_token_id=0, bos_token_id=1),
    # Nemotron: LayerNorms scaling by 1 + weight, an ungated MLP of squared ReLU, half of
    # each head rotated, attention biased
    "tiny-nemotron": dict(model_type="nemotron", vocab_size=67, hidden_size=32,
                          intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=8, norm_eps=1e-5,
                          hidden_act="relu2", attention_bias=True, partial_rotary_factor=0.5,
                          max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                          bos_token_id=1),
    # Jais 2: Llama's layer with biased LayerNorms, an ungated MLP of squared ReLU, biases
    # on every projection
    "tiny-jais2": dict(model_type="jais2", vocab_size=67, hidden_size=32, intermediate_size=48,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       layer_norm_eps=1e-5, hidden_act="relu2", attention_bias=True,
                       mlp_bias=True, max_position_embeddings=256, eos_token_id=2,
                       pad_token_id=0, bos_token_id=1),
    # Apertus: Qwen 3's head norms, xIELU's MLP, Llama 3's rotary scaling (here from 64)
    "tiny-apertus": dict(model_type="apertus", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=8, rms_norm_eps=1e-5,
                         hidden_act="xielu",
                         rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0,
                                          "factor": 4.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64},
                         max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                         bos_token_id=1),
    # Emu3's decoder (Emu3ForCausalLM): Llama's layer under its own name
    "tiny-emu3": dict(model_type="emu3_text_model", vocab_size=67, hidden_size=32,
                      intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, rms_norm_eps=1e-5,
                      rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                      max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                      bos_token_id=1),
    # Persimmon: biased head LayerNorms shared by the heads, half of each head rotated
    "tiny-persimmon": dict(model_type="persimmon", vocab_size=67, hidden_size=32,
                           intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                           hidden_act="relu2", layer_norm_eps=1e-5, qk_layernorm=True,
                           rope_parameters={"rope_type": "default", "rope_theta": 25000.0,
                                            "partial_rotary_factor": 0.5},
                           max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                           bos_token_id=1),
    # OLMo (the first): LayerNorms without weights or biases, a tied table
    "tiny-olmo": dict(model_type="olmo", vocab_size=67, hidden_size=32, intermediate_size=48,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      tie_word_embeddings=True, max_position_embeddings=256, eos_token_id=2,
                      pad_token_id=0, bos_token_id=1),
    # Phi-2: attention and the MLP side by side on one LayerNorm (biased), biases on every
    # projection and the LM head, an ungated tanh-GELU MLP, 40% of each head rotated
    "tiny-phi": dict(model_type="phi", vocab_size=67, hidden_size=40, intermediate_size=48,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     layer_norm_eps=1e-5, partial_rotary_factor=0.4, hidden_act="gelu_new",
                     max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                     bos_token_id=1),
    # GPT-J: side by side on one LayerNorm, rotary_dim (here 4) of each head's dims turned by
    # neighbours, biases on the MLP and the LM head only
    "tiny-gptj": dict(model_type="gptj", vocab_size=67, n_embd=32, n_inner=48, n_layer=2,
                      n_head=4, rotary_dim=4, layer_norm_epsilon=1e-5,
                      activation_function="gelu_new", n_positions=256, eos_token_id=2,
                      pad_token_id=0, bos_token_id=1),
    # Cohere (Command R): side by side on one LayerNorm without bias, heads turned by
    # neighbouring dims, the logits scaled, a tied table
    "tiny-cohere": dict(model_type="cohere", vocab_size=67, hidden_size=32,
                        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, layer_norm_eps=1e-5, logit_scale=0.5,
                        max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                        bos_token_id=1),
    # Cohere 2 (Command R7B): Cohere's layer, a sliding layer (rotating, a window the tests
    # pass) beside a global one without rotary embeddings
    "tiny-cohere2": dict(model_type="cohere2", vocab_size=67, hidden_size=32,
                         intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, layer_norm_eps=1e-5, logit_scale=0.5,
                         sliding_window=24, layer_types=["sliding_attention", "full_attention"],
                         max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                         bos_token_id=1),
    # GPT-NeoX (Pythia): side by side on a LayerNorm each, q|k|v stored head by head, an
    # ungated GELU MLP, half of each head rotated
    "tiny-gpt_neox": dict(model_type="gpt_neox", vocab_size=67, hidden_size=32,
                          intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                          layer_norm_eps=1e-5, rotary_pct=0.5, use_parallel_residual=True,
                          max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                          bos_token_id=1),
    # Falcon's new decoder architecture (Falcon 40B's and 180B's): q|k|v stored kv head by
    # kv head, attention and an ungated GELU MLP side by side on a LayerNorm each
    "tiny-falcon": dict(model_type="falcon", vocab_size=67, hidden_size=32,
                        ffn_hidden_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_kv_heads=2, new_decoder_architecture=True, parallel_attn=True,
                        bias=False, layer_norm_epsilon=1e-5, max_position_embeddings=256,
                        eos_token_id=2, pad_token_id=0, bos_token_id=1),
    # Falcon 7B's layer: one kv head (multi_query), one LayerNorm before attention and the MLP
    # side by side; here with every projection's bias (Falcon's bias)
    "tiny-falcon-mq": dict(model_type="falcon", vocab_size=67, hidden_size=32,
                           num_hidden_layers=2, num_attention_heads=4, multi_query=True,
                           new_decoder_architecture=False, parallel_attn=True, bias=True,
                           layer_norm_epsilon=1e-5, max_position_embeddings=256,
                           eos_token_id=2, pad_token_id=0, bos_token_id=1),
    # Falcon-RW: ALiBi rounded to bf16; 18 heads, so that the slopes are no powers of two
    # (the series for 16 heads, then two of 32's) and their products with positions round
    "tiny-falcon-rw": dict(model_type="falcon", vocab_size=67, hidden_size=72,
                           num_hidden_layers=2, num_attention_heads=18, multi_query=False,
                           new_decoder_architecture=False, parallel_attn=False, bias=True,
                           alibi=True, layer_norm_epsilon=1e-5, max_position_embeddings=256,
                           eos_token_id=2, pad_token_id=0, bos_token_id=1),
    # CodeGen: GPT-J's layer, its fused q|v|k stored in 4 shards (of 2 heads each here)
    "tiny-codegen": dict(model_type="codegen", vocab_size=67, n_embd=64, n_inner=48,
                         n_layer=2, n_head=8, rotary_dim=4, n_positions=256, n_ctx=256,
                         activation_function="gelu_new", layer_norm_epsilon=1e-5,
                         bos_token_id=1, eos_token_id=2),
    # GPT-2: a learned position table, LayerNorms (biased), Conv1D projections (weights
    # stored transposed) with biases, an ungated tanh-GELU MLP, a tied table
    "tiny-gpt2": dict(model_type="gpt2", vocab_size=67, n_embd=32, n_inner=48, n_layer=2,
                      n_head=4, n_positions=256, activation_function="gelu_new",
                      layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2),
    # The first GPT: GPT-2's Conv1D modules, its norms after the adds (OPT 350M's order)
    "tiny-openai-gpt": dict(model_type="openai-gpt", vocab_size=67, n_embd=32, n_layer=2,
                            n_head=4, n_positions=256, afn="gelu", layer_norm_epsilon=1e-5),
    # OPT: GPT-2's layer as Linear modules, a ReLU MLP, its position table two rows longer
    "tiny-opt": dict(model_type="opt", vocab_size=67, hidden_size=32, ffn_dim=48,
                     num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256,
                     word_embed_proj_dim=32, activation_function="relu", bos_token_id=1,
                     eos_token_id=2, pad_token_id=0),
    # ... OPT 350M's: LayerNorms after the residual adds, a table half the stream's width
    "tiny-opt-350m": dict(model_type="opt", vocab_size=67, hidden_size=32, ffn_dim=48,
                          num_hidden_layers=2, num_attention_heads=4,
                          max_position_embeddings=256, word_embed_proj_dim=16,
                          do_layer_norm_before=False, activation_function="relu",
                          bos_token_id=1, eos_token_id=2, pad_token_id=0),
    # BioGPT: OPT's layer with GELU, its embeddings scaled by sqrt(48)
    "tiny-biogpt": dict(model_type="biogpt", vocab_size=67, hidden_size=48, intermediate_size=40,
                        num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256,
                        hidden_act="gelu", scale_embedding=True, bos_token_id=1,
                        eos_token_id=2, pad_token_id=0),
    # XGLM: BioGPT's layer with a sinusoidal position table
    "tiny-xglm": dict(model_type="xglm", vocab_size=67, d_model=40, ffn_dim=48, num_layers=2,
                      attention_heads=4, max_position_embeddings=256,
                      activation_function="gelu", scale_embedding=True, bos_token_id=1,
                      eos_token_id=2, pad_token_id=0),
    # GPT-BigCode (StarCoder, SantaCoder): GPT-2's layer with one kv head (multi_query)
    "tiny-gpt_bigcode": dict(model_type="gpt_bigcode", vocab_size=67, n_embd=32, n_inner=48,
                             n_layer=2, n_head=4, n_positions=256, multi_query=True,
                             activation_function="gelu_pytorch_tanh", layer_norm_epsilon=1e-5,
                             bos_token_id=1, eos_token_id=2),
    # GPT-Neo: GPT-2's layer but q, k and v unbiased, scores unscaled, a global layer beside a
    # local one (its last window_size positions: a window the tests pass)
    "tiny-gpt_neo": dict(model_type="gpt_neo", vocab_size=67, hidden_size=32, num_layers=2,
                         num_heads=4, intermediate_size=48, max_position_embeddings=256,
                         attention_types=[[["global", "local"], 1]], window_size=7,
                         activation_function="gelu_new", bos_token_id=1, eos_token_id=2),
    # BLOOM: 5 heads, so that the slopes past the largest power of two (4) are ALiBi's
    # interleaved ones
    "tiny-bloom": dict(model_type="bloom", vocab_size=67, hidden_size=40, n_layer=2, n_head=5,
                       layer_norm_epsilon=1e-5, bos_token_id=1, eos_token_id=2,
                       pad_token_id=0),
    # MPT: 5 heads (slopes past the largest power of two), softmax_scale given
    "tiny-mpt": dict(model_type="mpt", vocab_size=67, d_model=40, n_layers=2, n_heads=5,
                     expansion_ratio=4, max_seq_len=256, no_bias=True,
                     layer_norm_epsilon=1e-5,
                     attn_config={"alibi": True, "alibi_bias_max": 8, "softmax_scale": 0.3},
                     bos_token_id=1, eos_token_id=2, pad_token_id=0),
    # a sliding layer beside a full one, the window past what the tests reach
    "tiny-ministral": dict(model_type="ministral", vocab_size=67, hidden_size=32,
                           intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=1, head_dim=8, rms_norm_eps=1e-5,
                           max_position_embeddings=256, sliding_window=96,
                           layer_types=["sliding_attention", "full_attention"]),
    # a local layer (its own base, a window the tests pass) beside a global one (linear
    # scaling); q wider than the residual, scores scaled by query_pre_attn_scalar's root
    "tiny-gemma3": dict(model_type="gemma3_text", vocab_size=67, hidden_size=32,
                        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                        rope_theta=1000000.0, rope_local_base_freq=10000.0,
                        rope_scaling={"rope_type": "linear", "factor": 2.0},
                        sliding_window=24, query_pre_attn_scalar=12,
                        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=256,
                        layer_types=["sliding_attention", "full_attention"], eos_token_id=2,
                        pad_token_id=0, bos_token_id=1),
    # Gemma 1: Llama's layout, gated GELU, 1 + weight norms, scaled embeddings; one kv head.
    # The tanh GELU named outright: transformers 5.17 runs the configs' legacy "gelu" as the
    # exact GELU (1.3e-4 off tilegraph's logits), 5.25 as tanh (the config test reads it)
    "tiny-gemma": dict(model_type="gemma", vocab_size=67, hidden_size=32, intermediate_size=48,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                       head_dim=16, rms_norm_eps=1e-6, rope_theta=10000.0,
                       hidden_act="gelu_pytorch_tanh",
                       max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                       bos_token_id=1),
    # VaultGemma: Gemma 2 without norms after attention and the MLP (caps tiny scores and
    # logits reach, a window the tests pass)
    "tiny-vaultgemma": dict(model_type="vaultgemma", vocab_size=67, hidden_size=32,
                            intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                            sliding_window=24, query_pre_attn_scalar=12,
                            attn_logit_softcapping=3.0, final_logit_softcapping=4.0,
                            max_position_embeddings=256, eos_token_id=2, pad_token_id=0,
                            bos_token_id=1),
    # caps low enough that tiny random weights' scores and logits reach them
    "tiny-gemma2": dict(model_type="gemma2", vocab_size=67, hidden_size=32,
                        intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
                        rope_theta=10000.0, sliding_window=24, query_pre_attn_scalar=12,
                        attn_logit_softcapping=3.0, final_logit_softcapping=4.0,
                        hidden_activation="gelu_pytorch_tanh", max_position_embeddings=256,
                        eos_token_id=2, pad_token_id=0, bos_token_id=1),
}
# Apertus 1.5's decoder: tiny Apertus's, its LM head pruned to the first 40 ids (the table
# keeps all 67)
SHAPES["tiny-apertus1p5"] = {**SHAPES["tiny-apertus"], "model_type": "apertus1p5_text",
                             "output_vocab_size": 40}


def hf_config(name: str, **overrides):
    """The transformers config of a named shape (fields in `overrides` replaced)."""
    from transformers import AutoConfig

    if name not in SHAPES:
        raise ValueError(f"unknown model shape {name!r}; known: {', '.join(SHAPES)}")
    values = {**SHAPES[name], **overrides}
    return AutoConfig.for_model(values.pop("model_type"), **values)


def hf_auto_class(config):
    """transformers' auto class that builds config's model with its LM head: the causal LM's,
    else the image-text-to-text one's (Mistral 3 and LLaVA, whose image side no causal-LM
    class holds); for a decoder's config that no auto class maps (Emu3's, whose causal LM
    transformers registers under the multimodal model's type), its causal LM's class, built
    and loaded as the auto classes are."""
    from transformers import (
        MODEL_FOR_CAUSAL_LM_MAPPING,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING,
        AutoModelForCausalLM,
        AutoModelForImageTextToText,
    )

    if type(config) in MODEL_FOR_CAUSAL_LM_MAPPING:
        return AutoModelForCausalLM
    if type(config) not in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING:
        # (the modeling module beside the config's: transformers.models.X.modeling_X)
        try:
            modeling = importlib.import_module(
                type(config).__module__.replace(".configuration_", ".modeling_"))
        except ImportError:
            return AutoModelForImageTextToText
        for name in dir(modeling):
            model_class = getattr(modeling, name)
            if name.endswith("ForCausalLM") and getattr(model_class, "config_class",
                                                        None) is type(config):
                return _ModelClass(model_class)
    return AutoModelForImageTextToText


class _ModelClass:
    """A transformers model class with the auto classes' from_config."""

    def __init__(self, model_class):
        self.model_class = model_class

    def from_config(self, config, **kwargs):
        return self.model_class._from_config(config, **kwargs)

    def from_pretrained(self, path, **kwargs):
        return self.model_class.from_pretrained(path, **kwargs)


def random_hf_model(name, dtype: torch.dtype = torch.float32, device="cpu",
                    seed: int = 0, scale: float = 1.0, **overrides):
    """A transformers causal LM of a named shape (or of a transformers config given instead
    of the name) with random weights, built on `device`. scale > 1 widens the weights past
    transformers' init (std 0.02), so a tiny model's logits differ enough between tokens
    for greedy decoding to be a sharp test."""
    if isinstance(name, str):
        config = hf_config(name, **overrides)
    elif overrides:
        raise ValueError("overrides change a named shape's config, not a config given")
    else:
        config = name
    torch.manual_seed(seed)
    # SDPA cannot softcap scores: transformers runs Gemma 2 eagerly by default, but not every
    # version does (5.17 took SDPA and left the cap out)
    eager = ({"attn_implementation": "eager"}
             if getattr(config, "attn_logit_softcapping", None) is not None else {})
    with torch.device(device):
        model = hf_auto_class(config).from_config(config, dtype=dtype, **eager)
    # transformers starts biases at 0 and norm weights at 1, which would hide a bias or a
    # norm weight applied wrongly: give them random values too.
    with torch.no_grad():
        for name, param in model.named_parameters():
            # (Cohere's head norms are 2-d; a mixture's experts stacked, 3-d)
            if param.ndim in (2, 3) and not name.endswith("norm.weight"):
                param.mul_(scale)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.02 * scale)
            else:
                param.add_(torch.randn_like(param), alpha=0.1)
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):   # (chooses experts: a buffer)
                buffer.normal_(0.0, 0.25)
    return model.eval()
