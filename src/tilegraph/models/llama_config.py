"""LlamaConfig: the shape of a Llama-family model, read from a Hugging Face config.

    config = LlamaConfig.from_hf(hf_model.config)        # or a config.json dict, or a path

What tilegraph's Llama, its kernels, tensor parallelism and loading read. from_hf reads a
transformers config through hf_families, which names the families supported and refuses
anything else by the field, so a model is never run with a part silently ignored.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..kernels._activation import ACTIVATIONS
from ..kernels._activation import EXPERT_GLU_ACTIVATIONS as _GATED
from ..kernels.experts import MAX_EXPERTS_PER_TOKEN
from .hf_families import SINUSOIDAL_POSITION_TYPES, fields_from_hf, position_rows_before

# What LlamaConfig.mlp_activation may be: a gated activation (GPT-OSS's SwiGLU, experts'
# only) or an ungated one (xIELU, with its scalars a layer, applied by a kernel of its own
# after the up projection)
_MLP_KINDS = _GATED + tuple(a for a in ACTIVATIONS if a != "none") + ("xielu",)


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    dim: int                    # hidden size
    n_layers: int
    n_heads: int
    n_kv_heads: int             # fewer than n_heads: grouped-query attention
    ffn_dim: int                # the MLP's inner size
    head_dim: int = 0           # 0: dim // n_heads
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    # Llama 3's frequency scaling: {"factor", "low_freq_factor", "high_freq_factor",
    # "original_max_position_embeddings"}; None for plain rotary embeddings.
    rope_llama3: dict | None = None
    # Linear scaling ("linear"): positions divided by this factor, so every frequency is.
    rope_linear_factor: float = 1.0
    # YaRN ("yarn"): {"factor", "beta_fast", "beta_slow", "original_max_position_embeddings",
    # "truncate"}: frequencies blended between interpolated and kept by wavelength; and the
    # factor cos and sin are scaled by (YaRN's attention temperature; 1 elsewhere).
    rope_yarn: dict | None = None
    # LongRoPE ("longrope", Phi-3's 128k checkpoints): {"short_factor", "long_factor" (one
    # divisor a frequency each), "original_max_position_embeddings"}: the short factors below
    # the pretrained context, the long ones past it (see rope_frequencies).
    rope_longrope: dict | None = None
    rope_attention_factor: float = 1.0
    # The leading dims of a head that rotary embeddings turn (Phi-4-mini: 96 of 128, its
    # partial_rotary_factor); 0: all of them.
    rotary_dim: int = 0
    # The checkpoint's rotary embeddings turn the pairs (2i, 2i + 1) of those dims (GLM,
    # ERNIE 4.5), not (i, i + rotary_dim / 2). The modules never read it: loading (from_hf)
    # reorders each q and k head's dims into the pairs every kernel turns.
    rotary_interleaved: bool = False
    # The checkpoint turns each pair the other way, by -angle (NanoChat): loading negates the
    # second half of every q and k head, which turns it back and leaves q . k as it was. The
    # modules never read it either.
    rotary_negated: bool = False
    # The embeddings RMS-normalised (weightless) before the first layer (NanoChat): loading
    # folds the norm into the table, whose rows it then holds normalised.
    embedding_norm: bool = False
    # Norms that scale by nothing (NanoChat's, OLMo's): the checkpoint holds no weights for
    # them; loading gives the modules ones.
    weightless_norms: bool = False
    # The checkpoint's norms are LayerNorms, which subtract each row's mean first
    # (LAYER_NORM_TYPES). The modules never read it: loading centres everything the
    # residual stream is made of (the embedding table's rows, the output and down
    # projections' columns and biases), so the stream's mean is zero and the RMSNorm every
    # path applies is that LayerNorm. The LM head then keeps a copy of a tied table.
    layer_norm: bool = False
    # The norms before attention and the MLP, and the final one, add a bias (LayerNorm's):
    # loading folds each into the biases of the projection after it (W (n w + b) = (W w) n +
    # W b), of the LM head too (head_bias), which those projections then have.
    norm_bias: bool = False
    # Attention and the MLP side by side, both on the layer's input: x + attn(n1(x)) +
    # mlp(n2(x)) (Phi, Cohere, GPT-NeoX, StableLM's parallel layers)
    parallel_residual: bool = False
    # ... n1 and n2 one norm (Phi's, Cohere's, StableLM's): the checkpoint holds one a
    # layer, which loading gives to both attn_norm and mlp_norm
    one_norm_before: bool = False
    # The LM head adds a bias of the checkpoint's (Phi's)
    lm_head_bias: bool = False
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False       # RMSNorm of each q and k head before rotary embedding (Qwen3)
    # ... of all of q and all of k instead, each as one vector (OLMo 2): q_norm and k_norm
    # (n_heads * head_dim,) and (n_kv_heads * head_dim,)
    qk_norm_whole: bool = False
    # ... after rotary embedding instead of before (Hunyuan's dense models)
    qk_norm_after_rotary: bool = False
    # ... each head scaled by a weight of its own: q_norm (n_heads, head_dim), k_norm
    # (n_kv_heads, head_dim) (StableLM's qk_layernorm, Cohere's use_qk_norm). Where the
    # model's norms are LayerNorms (layer_norm), its head norms are too: loading centres
    # each q and k head's rows of wqkv and bqkv, so their RMSNorm is that LayerNorm.
    qk_norm_per_head: bool = False
    # ... plus a bias after the weight (q_norm_bias, k_norm_bias, shaped as the weights:
    # Persimmon's LayerNorm of each head, one weight and bias for all heads)
    qk_norm_bias: bool = False
    # The MLP's activation, as tg.linear names it: gated, "swiglu" (silu(gate) * up),
    # "geglu" or "geglu_tanh" (gelu(gate) * up, exact or its tanh approximation: Gemma's);
    # or ungated, act(up) with no gate projection ("relu2", relu(up)^2: Arcee's; "xielu",
    # Apertus's xIELU, whose scalars each layer holds: LlamaLayer.xielu).
    mlp_activation: str = "swiglu"
    # Gemma 3's "sandwich": the attention and MLP outputs each RMS-normalised (weights
    # post_attn_norm, post_mlp_norm) before their residual add, besides the norms before.
    post_norms: bool = False
    # The norms before attention and the MLP; False: their inputs are the residual stream
    # itself (EXAONE 4, which normalises only the outputs: post_norms).
    pre_norms: bool = True
    # The original Transformer's order (OPT 350M's, do_layer_norm_before false): the stream
    # LayerNorm-ed (a weight and a bias) after each residual add, x = LN(x + attn(x)), then
    # LN(x + mlp(x)), and no norm before attention, the MLP or the LM head (pre_norms off).
    norm_after_add: bool = False
    # OPT 350M's narrower embeddings: the token table and the LM head head_projection wide,
    # the stream projected up to dim after the table (project_in, which loading folds into
    # the table) and down before the head (project_out, Llama.head_projection); 0: none.
    head_projection: int = 0
    # The LM head's rows where it is pruned to the vocabulary's first ids (Apertus 1.5's
    # text-only head: logits for ids 0..output_vocab_size - 1, the table keeping every id);
    # 0: vocab_size.
    output_vocab_size: int = 0
    # Gemma's norms scale by 1 + weight: loading (from_hf) adds the one to every norm weight.
    norm_plus_one: bool = False
    # The base that layers with a sliding window rotate by (plain rotary embeddings, Gemma 3's
    # local layers); None: they rotate as the others do.
    rope_local_theta: float | None = None
    # Gemma 2's softcaps: attention scores s become cap tanh(s / cap) before the softmax
    # (attn_softcap), the logits likewise (logits_softcap); None: uncapped.
    attn_softcap: float | None = None
    logits_softcap: float | None = None
    max_position_embeddings: int = 4096
    # A query attends to the last sliding_window positions (itself included) in the layers
    # sliding_layers names (None: every layer); None: the whole context everywhere.
    sliding_window: int | None = None
    sliding_layers: tuple[bool, ...] | None = None
    model_type: str = "llama"
    # Which layers rotate q and k (SmolLM3 leaves every fourth out); None: every layer.
    rope_layers: tuple[bool, ...] | None = None
    # The rows of a learned table of position embeddings, one added to each token's
    # embedding (GPT-2's, OPT's; no layer then rotates q and k), which bounds the positions
    # a cache may hold; 0: none.
    learned_positions: int = 0
    # ALiBi's position bias (BLOOM's, MPT's), one slope a q head: no layer rotates q and k;
    # head h's attention scores gain alibi_slopes[h] times each key's position (to the
    # softmax the same as its distance back from the query); None: no bias.
    alibi_slopes: tuple[float, ...] | None = None
    # Falcon's form of that bias (its ALiBi checkpoints, Falcon-RW): slope times the key's
    # position from 0, rounded to bfloat16 whatever the model's dtype, added to the scores
    # before their scale (tg.decode_attention's alibi_rounded), as transformers computes it.
    alibi_rounded: bool = False
    # Attention sinks (Granite SWA's, GPT-OSS's): each layer's q heads a logit of their own
    # in the softmax's denominator, with no value (tg.decode_attention's sinks).
    attention_sinks: bool = False
    # The embeddings LayerNorm-ed before the first layer (BLOOM's word_embeddings_layernorm,
    # a weight and a bias): loading folds the norm into the table, whose rows it then holds
    # normalised; the LM head keeps the table as it was.
    embedding_layer_norm: bool = False
    # Granite's scalars: embeddings times embedding_multiplier, attention scores times
    # attention_multiplier (None: 1 / sqrt(head_dim)), each layer's attention and MLP outputs
    # times residual_multiplier before the residual add, logits divided by logits_scaling.
    # The modules never read them: loading (from_hf) folds them into the weights.
    embedding_multiplier: float = 1.0
    attention_multiplier: float | None = None
    residual_multiplier: float = 1.0
    logits_scaling: float = 1.0
    # Llama 4's attention temperature (Ministral 3): q at position p times
    # 1 + q_scale_beta ln(1 + floor(p / q_scale_length)), 1 below q_scale_length (the
    # pretrained context); beta 0: none
    q_scale_beta: float = 0.0
    q_scale_length: int = 1
    # A mixture of experts in place of every layer's MLP (Mixtral's, Qwen 2 and 3 MoE's,
    # OLMoE's, Granite MoE's): n_experts gated MLPs of ffn_dim each; a router (n_experts,
    # dim) scores them on the normed row, softmax in fp32, and the row takes the
    # experts_per_token best, weighted by their probabilities (renormalised to sum to one
    # where router_renormalized, else as the softmax over all experts gave them). 0: a
    # dense MLP.
    n_experts: int = 0
    experts_per_token: int = 0
    router_renormalized: bool = True
    # A shared expert besides (Qwen 2 MoE's, Granite MoE's shared MLP), which every row
    # takes: its inner width in experts' widths (ffn_dim), held as that many more experts
    # whose outputs sum to its own; 0: none. Weighted by the sigmoid of a score of its own
    # (the router's last row) where shared_expert_scored (Qwen 2 MoE's), else whole.
    shared_experts: int = 0
    shared_expert_scored: bool = True
    # A bias a router score (GPT-OSS's); the experts' biases are mlp_bias's (each expert's
    # gate|up and down biases)
    router_bias: bool = False
    # The experts' probabilities: "softmax" (above), or "sigmoid" (MiniMax-M2's): each
    # expert's the sigmoid of its score alone, the experts chosen by probability plus a bias
    # an expert where router_choice_bias (a correction of the experts' load, held in fp32:
    # it chooses, it does not weight)
    router_scoring: str = "softmax"
    router_choice_bias: bool = False
    # The routed experts' weights times this (DeepSeek V3's routed_scaling_factor; a shared
    # expert's not)
    router_scale: float = 1.0

    def __post_init__(self):
        if self.head_dim == 0:
            if self.dim % self.n_heads:
                raise ValueError(f"hidden size {self.dim} does not divide into {self.n_heads} "
                                 "heads; give head_dim")
            object.__setattr__(self, "head_dim", self.dim // self.n_heads)
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn_dim",
                     "head_dim", "q_scale_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"LlamaConfig.{name} must be a positive int, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"num_attention_heads ({self.n_heads}) must be a multiple of "
                             f"num_key_value_heads ({self.n_kv_heads})")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for rotary embeddings, got {self.head_dim}")
        for name in ("qk_norm_whole", "qk_norm_after_rotary", "qk_norm_per_head",
                     "qk_norm_bias"):
            if getattr(self, name) and not self.qk_norm:
                raise ValueError(f"LlamaConfig.{name} says how q and k are normalised: it "
                                 "needs qk_norm")
        if self.qk_norm_whole and self.qk_norm_per_head:
            raise ValueError("LlamaConfig.qk_norm_whole and qk_norm_per_head exclude each "
                             "other: one norm over all heads, or one a head")
        if self.one_norm_before and not self.parallel_residual:
            raise ValueError("LlamaConfig.one_norm_before needs parallel_residual: the MLP "
                             "must read what attention reads")
        if self.parallel_residual and (self.post_norms or not self.pre_norms):
            raise ValueError("LlamaConfig.parallel_residual needs the norm before attention "
                             "and the MLP (pre_norms) and none after them (post_norms)")
        if self.norm_after_add and (self.pre_norms or self.post_norms or self.layer_norm
                                    or self.norm_bias or self.parallel_residual
                                    or self.weightless_norms):
            raise ValueError("LlamaConfig.norm_after_add puts a LayerNorm of its own after "
                             "each residual add: no other norms (pre_norms off, no "
                             "post_norms, layer_norm or norm_bias), one after the other "
                             "(no parallel_residual), with weights")
        if not isinstance(self.head_projection, int) or self.head_projection < 0:
            raise ValueError(f"LlamaConfig.head_projection must be an int >= 0, got "
                             f"{self.head_projection!r}")
        if (not isinstance(self.output_vocab_size, int)
                or not 0 <= self.output_vocab_size <= self.vocab_size):
            raise ValueError(f"LlamaConfig.output_vocab_size must be an int in [0, vocab_size "
                             f"{self.vocab_size}], got {self.output_vocab_size!r}")
        if self.output_vocab_size and self.tie_embeddings:
            raise ValueError("LlamaConfig.output_vocab_size prunes the LM head, which then "
                             "cannot be the token table: tie_embeddings must be off")
        if self.layer_norm and (self.post_norms or not self.pre_norms):
            raise ValueError("LlamaConfig.layer_norm needs the residual stream read only "
                             "through the norms before attention and the MLP: no post_norms, "
                             "pre_norms on")
        if (self.n_experts or self.experts_per_token or self.shared_experts or self.router_bias
                or self.router_scoring != "softmax" or self.router_choice_bias
                or self.router_scale != 1.0):
            self._check_experts()
        if self.mlp_activation not in _MLP_KINDS:
            raise ValueError(f"LlamaConfig.mlp_activation must be one of {_MLP_KINDS}, got "
                             f"{self.mlp_activation!r}")
        if self.mlp_activation == "swiglu_oss" and not self.n_experts:
            raise ValueError("LlamaConfig.mlp_activation 'swiglu_oss' (GPT-OSS's) is a "
                             "mixture of experts' only (n_experts)")
        for name in ("rope_layers", "sliding_layers"):
            layers = getattr(self, name)
            if layers is not None:
                object.__setattr__(self, name, tuple(map(bool, layers)))
                if len(layers) != self.n_layers:
                    raise ValueError(f"{name} names {len(layers)} layers; the model has "
                                     f"{self.n_layers}")
        if not isinstance(self.learned_positions, int) or self.learned_positions < 0:
            raise ValueError(f"LlamaConfig.learned_positions must be an int >= 0, got "
                             f"{self.learned_positions!r}")
        if self.alibi_slopes is not None:
            object.__setattr__(self, "alibi_slopes", tuple(map(float, self.alibi_slopes)))
            if len(self.alibi_slopes) != self.n_heads or not all(
                    map(math.isfinite, self.alibi_slopes)):
                raise ValueError(f"LlamaConfig.alibi_slopes must be {self.n_heads} finite "
                                 f"numbers, one a q head, got {len(self.alibi_slopes)}")
        if self.alibi_rounded and self.alibi_slopes is None:
            raise ValueError("LlamaConfig.alibi_rounded rounds ALiBi's bias: it needs "
                             "alibi_slopes")
        for name in ("learned_positions", "alibi_slopes"):
            if getattr(self, name) and any(map(self.rotates, range(self.n_layers))):
                raise ValueError(f"LlamaConfig.{name} positions the tokens: no layer may "
                                 "rotate q and k too (rope_layers all False)")
        if self.rotary_dim == 0:
            object.__setattr__(self, "rotary_dim", self.head_dim)
        if not (isinstance(self.rotary_dim, int) and 2 <= self.rotary_dim <= self.head_dim
                and self.rotary_dim % 2 == 0):
            raise ValueError(f"rotary_dim must be an even int in 2..head_dim ({self.head_dim}), "
                             f"got {self.rotary_dim!r}")
        if self.rope_longrope is not None:
            for name in ("short_factor", "long_factor"):
                if len(self.rope_longrope[name]) != self.rotary_dim // 2:
                    raise ValueError(f"LongRoPE's {name} has {len(self.rope_longrope[name])} "
                                     f"values; {self.rotary_dim} rotated dims have "
                                     f"{self.rotary_dim // 2} frequencies")
        window = self.sliding_window
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)
                                   or window < 1):
            raise ValueError(f"LlamaConfig.sliding_window must be a positive int or None, got "
                             f"{window!r}")
        for name in ("embedding_multiplier", "attention_multiplier", "residual_multiplier",
                     "logits_scaling", "attn_softcap", "logits_softcap"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and
                                          0 < value < math.inf):
                raise ValueError(f"LlamaConfig.{name} must be a positive number, got "
                                 f"{value!r}")

    def _check_experts(self) -> None:
        if not (isinstance(self.n_experts, int) and isinstance(self.experts_per_token, int)
                and 1 <= self.experts_per_token <= self.n_experts):
            raise ValueError(f"LlamaConfig.experts_per_token must be an int in 1..n_experts "
                             f"({self.n_experts!r}), got {self.experts_per_token!r}")
        if not isinstance(self.shared_experts, int) or self.shared_experts < 0:
            raise ValueError(f"LlamaConfig.shared_experts must be an int >= 0, got "
                             f"{self.shared_experts!r}")
        if self.router_scoring not in ("softmax", "sigmoid"):
            raise ValueError(f"LlamaConfig.router_scoring must be 'softmax' or 'sigmoid', got "
                             f"{self.router_scoring!r}")
        if not (isinstance(self.router_scale, (int, float)) and 0 < self.router_scale < math.inf):
            raise ValueError(f"LlamaConfig.router_scale must be a positive number, got "
                             f"{self.router_scale!r}")
        if self.router_choice_bias and self.router_scoring != "sigmoid":
            raise ValueError("LlamaConfig.router_choice_bias: a bias that chooses the experts "
                             "is implemented with sigmoid scoring only")
        if self.experts_per_token > MAX_EXPERTS_PER_TOKEN:
            raise ValueError(f"LlamaConfig.experts_per_token is at most {MAX_EXPERTS_PER_TOKEN}"
                             f" (a row's experts are chosen in the kernel), got "
                             f"{self.experts_per_token}")
        if (not self.mlp_gated or self.norm_bias or self.layer_norm
                or self.parallel_residual or self.post_norms or not self.pre_norms):
            raise ValueError("LlamaConfig.n_experts: the experts are gated MLPs after an "
                             "RMSNorm before them (pre_norms; no layer_norm, norm_bias, "
                             "post_norms or parallel_residual)")

    @property
    def moe(self) -> bool:
        """Whether each layer's MLP is a mixture of experts."""
        return self.n_experts > 0

    @property
    def router_rows(self) -> int:
        """The router's scores a row: one an expert, and the shared expert's where scored;
        0 without a mixture."""
        return self.n_experts + (self.shared_experts > 0 and self.shared_expert_scored)

    @property
    def mlp_gated(self) -> bool:
        """Whether the MLP multiplies an activated gate projection by an up projection."""
        return self.mlp_activation in _GATED

    @property
    def up_activation(self) -> str:
        """The activation in the up (or gate/up) projection's epilogue: mlp_activation, but
        for xIELU, which a kernel of its own applies after it."""
        return "none" if self.mlp_activation == "xielu" else self.mlp_activation

    def rotates(self, layer: int) -> bool:
        """Whether layer `layer` applies rotary embeddings to q and k."""
        return self.rope_layers is None or self.rope_layers[layer]

    def rotates_locally(self, layer: int) -> bool:
        """Whether layer `layer` rotates by rope_local_theta (a sliding layer where it is
        set) rather than the model's own rotary embedding."""
        return self.rope_local_theta is not None and self.window(layer) is not None

    def q_scales(self, positions: torch.Tensor) -> torch.Tensor:
        """The attention temperature q is multiplied by at each of `positions` (fp32)."""
        steps = torch.floor(positions.float() / self.q_scale_length)
        return 1 + self.q_scale_beta * torch.log1p(steps)

    def window(self, layer: int) -> int | None:
        """How many of the latest positions layer `layer` attends to; None: all of them."""
        if self.sliding_layers is not None and not self.sliding_layers[layer]:
            return None
        return self.sliding_window

    @property
    def attention_scale(self) -> float:
        """What attention scores are multiplied by."""
        if self.attention_multiplier is None:
            return self.head_dim ** -0.5
        return float(self.attention_multiplier)

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    def parameter_count(self) -> int:
        """The checkpoint's parameters (a tied table counted once; not the biases loading
        makes of a LayerNorm's)."""
        before = 1 if self.one_norm_before else 2   # norms before attention and the MLP
        norms = (before * self.dim * self.pre_norms + 2 * self.dim * self.post_norms
                 + (self.q_dim + self.kv_dim if self.qk_norm_whole or self.qk_norm_per_head
                    else 2 * self.head_dim) * self.qk_norm * (1 + self.qk_norm_bias))
        per_layer = (self.dim * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.dim
                     + (2 + self.mlp_gated) * self.dim * self.ffn_dim
                     * max(self.n_experts + self.shared_experts, 1)
                     + self.router_rows * (self.dim + self.router_bias)
                     + (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + self.dim * self.o_bias
                     + ((1 + self.mlp_gated) * self.ffn_dim + self.dim) * self.mlp_bias
                     * max(self.n_experts + self.shared_experts, 1)
                     + norms * (not self.weightless_norms)
                     + before * self.dim * self.norm_bias)
        # (a LayerNorm's weight and bias after each residual add instead; a sink a q head;
        # xIELU's alpha_p and alpha_n, whose beta and eps are buffers)
        per_layer += (4 * self.dim * self.norm_after_add + self.n_heads * self.attention_sinks
                      + 2 * (self.mlp_activation == "xielu"))
        final_norm = (self.dim * ((not self.weightless_norms) + self.norm_bias)
                      * (not self.norm_after_add))
        head_bias = self.head_rows * self.lm_head_bias
        positions = self._stored_position_rows * self.dim
        embedding_norm = 2 * self.dim * self.embedding_layer_norm   # a weight and a bias
        return (self.n_layers * per_layer + self._embedding_parameters() + final_norm
                + head_bias + positions + embedding_norm)

    @property
    def _stored_position_rows(self) -> int:
        """The rows of the checkpoint's position table (none where it is sinusoidal)."""
        if not self.learned_positions or self.model_type in SINUSOIDAL_POSITION_TYPES:
            return 0
        return self.learned_positions + position_rows_before(self.model_type)

    @property
    def head_rows(self) -> int:
        """The LM head's rows: the logits a token gets."""
        return self.output_vocab_size or self.vocab_size

    @property
    def head_width(self) -> int:
        """The width of the LM head's rows (and of the checkpoint's token table)."""
        return self.head_projection or self.dim

    def _embedding_parameters(self) -> int:
        """The token table's parameters and the LM head's (once where tied), with the
        projections up from and down to a narrower table (head_projection)."""
        tables = (self.vocab_size + (0 if self.tie_embeddings else self.head_rows)
                  ) * self.head_width
        return tables + 2 * self.head_projection * self.dim

    def decode_bytes(self, element_size: int) -> int:
        """Weight bytes one decode step reads: every layer and the LM head in full, one row of
        the embedding table (and of the position table, where the model has one; per token:
        batch rows share the weights); not the embeddings' norm, folded into the table. Of a
        mixture of experts, the experts one row takes (a batch's rows take more:
        expert_bytes)."""
        # (a narrower head's projection down to it too; not the projection up from the
        # table, folded into it)
        head = self.head_rows * self.head_width + self.head_projection * self.dim
        # (all of a stored table but the row read)
        positions = (self._stored_position_rows - bool(self.learned_positions)) * self.dim
        embedding_norm = 2 * self.dim * self.embedding_layer_norm
        idle = self.n_layers * (self.n_experts - self.experts_per_token) * self.expert_size
        return (self.parameter_count() - self._embedding_parameters() - positions
                - embedding_norm - idle + head + self.dim) * element_size

    @property
    def expert_size(self) -> int:
        """The parameters of one expert of a mixture (gate, up and down, and their biases
        where mlp_bias; a shared expert holds shared_experts times as many, every row reads
        them); 0 without one."""
        return (3 * self.dim * self.ffn_dim + (2 * self.ffn_dim + self.dim) * self.mlp_bias
                if self.moe else 0)

    def expert_bytes(self, element_size: int, rows: int) -> float:
        """Expert bytes a decode step of `rows` rows reads beyond decode_bytes' (one row's
        experts), where each row takes its experts at random: the expected number of
        experts a layer's rows take, E (1 - (1 - k / E)^rows), less the k of one row."""
        if not self.moe:
            return 0.0
        taken = self.n_experts * (1 - (1 - self.experts_per_token / self.n_experts) ** rows)
        return (self.n_layers * (taken - self.experts_per_token) * self.expert_size
                * element_size)

    def kv_bytes(self, element_size: int, context: float) -> float:
        """Key and value bytes one sequence's decode step reads at `context` cached
        positions: every layer's, each only its window's where it slides."""
        attended = sum(context if (window := self.window(layer)) is None
                       else min(context, window) for layer in range(self.n_layers))
        return 2 * self.kv_dim * element_size * attended

    @classmethod
    def from_hf(cls, config: Any) -> LlamaConfig:
        """From a transformers config object, a config.json dict, or a checkpoint directory
        (or its config.json path)."""
        if isinstance(config, (str, Path)):
            path = Path(config)
            path = path / "config.json" if path.is_dir() else path
            if not path.is_file():
                raise FileNotFoundError(f"no config.json at {path}")
            config = json.loads(path.read_text())
        values = dict(config) if isinstance(config, dict) else config.to_dict()
        return cls(**fields_from_hf(values))


def rope_frequencies(config: LlamaConfig, long: bool = False, local: bool = False
                     ) -> torch.Tensor:
    """Inverse frequencies theta^(-2i/d) of the rotary embedding (d its rotary_dim), divided
    by the linear scaling's factor, or with Llama 3's scaling: long wavelengths (beyond
    original context / low_freq_factor) divided by `factor`, short ones (below original
    context / high_freq_factor) kept, a linear blend in between; YaRN's blend; or
    LongRoPE's, each divided by its short factor, or (long) its long one. local: the plain
    frequencies of base rope_local_theta (the layers that rotate by it)."""
    dims = config.rotary_dim   # the rotated dims' frequencies, rotary_dim / 2 of them
    exponents = torch.arange(0, dims, 2, dtype=torch.float64) / dims
    if local:
        return config.rope_local_theta ** -exponents
    inv_freq = config.rope_theta ** -exponents / config.rope_linear_factor
    if config.rope_longrope is not None:
        factors = config.rope_longrope["long_factor" if long else "short_factor"]
        return inv_freq / torch.tensor(factors, dtype=torch.float64)
    if config.rope_yarn is not None:
        return _yarn_frequencies(inv_freq, config.rope_yarn, dims, config.rope_theta)
    scaling = config.rope_llama3
    if scaling is None:
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    context = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    blend = ((context / wavelength - low) / (high - low)).clamp(0, 1)
    scaled = (1 - blend) * inv_freq / factor + blend * inv_freq
    return scaled


def _yarn_frequencies(inv_freq: torch.Tensor, yarn: dict, head_dim: int,
                      theta: float) -> torch.Tensor:
    """YaRN's blend (as transformers computes it): the pairs that turn fewer than beta_slow
    times over the pretrained context are interpolated (divided by the factor), those that
    turn more than beta_fast times kept, a linear ramp over the pair index between."""
    def pair_turning(turns: float) -> float:   # the pair index that turns `turns` times
        context = yarn["original_max_position_embeddings"]
        return head_dim * math.log(context / (turns * 2 * math.pi)) / (2 * math.log(theta))

    low, high = pair_turning(yarn["beta_fast"]), pair_turning(yarn["beta_slow"])
    if yarn["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001   # transformers' guard against a zero-width ramp
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    return inv_freq / yarn["factor"] * ramp + inv_freq * (1 - ramp)
