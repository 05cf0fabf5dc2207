"""The Llama family (Llama 2/3.x, Mistral, Ministral, Phi-3, Qwen2, Qwen3, SmolLM3, Granite 3,
Gemma 1-3) in plain PyTorch, with a decode path on tilegraph's kernels.

    model = Llama.from_hf("path/to/checkpoint", dtype=torch.bfloat16, device="cuda")
    logits = model(input_ids)                    # (B, T, vocab): plain PyTorch, the reference
    cache = model.new_cache(max_batch=8, max_seq=2048)
    logits = model.prefill(prompt_ids, cache)    # (B, vocab) of the last prompt token
    logits = model.decode(tokens, positions, cache)   # one token per row, graph-safe
    logits = model.plain_decode(tokens, positions, cache)   # the same in plain PyTorch ops

Weights are fused at load time (q|k|v with each head's halves interleaved, and gate|up with
their rows interleaved), and each layer's two RMSNorm weights are folded into the projection
after them (rms_norm(x) * g @ W.T = rms_norm(x) @ (W * g).T: wqkv and w_gate_up hold W * g,
rounded once to the model's dtype, and the norms keep ones, as one value expanded, which the
decode kernels read once). A LayerNorm (StarCoder2's, StableLM's, Nemotron's, OLMo's, Phi's,
Cohere's, GPT-NeoX's) is that RMSNorm once loading has centred everything the residual stream
is made of (its mean is then zero: LlamaConfig.layer_norm), with its bias folded into the bias
after it. The fast path runs a layer in five kernels: tg.linear_qkv (RMSNorm in the prologue of
the QKV projection, rotary embedding of q and k and both cache writes in its epilogue),
tg.decode_attention over each sequence's own length, the output projection with the residual
add in its epilogue, the gate/up projection with RMSNorm in its prologue and SiLU(gate) * up in
its epilogue, and the down projection with the residual add. A decode step has fixed shapes:
one captured graph serves every position. Gemma gates by GELU instead, and normalises the
attention and MLP outputs before their residual adds: there the two residual projections write
their outputs alone and tg.rms_norm(residual=) adds them. A parallel layer (Phi's, Cohere's,
GPT-NeoX's) runs gate/up on the layer's input rather than on the stream after attention.
A mixture of experts (Mixtral's, Qwen 2 and 3 MoE's, OLMoE's, Granite MoE's, GPT-OSS's:
models/experts.py) takes the MLP's place: its router by tg.linear, then two kernels that
read only the experts each row takes.

Tensor parallel (tp=N under torchrun, tilegraph.dist): each rank holds its heads and its
share of the MLP, and the output and down projections' partial results are summed by one
all-reduce each (rank 0 adds the residual in their epilogues); the logits are gathered, so
every rank returns what one process would.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import tilegraph as tg

from ..dist.allreduce import LayerAllReduce
from ..dist.group import TensorParallel
from ..dist.sharding import local_config, vocab_shard
from ..kernels._activation import GLU_ACTIVATIONS, activation_ref
from ..kernels.decode_attention import decode_attention_in_layer
from ..kernels.decode_inputs import decode_inputs
from ..kernels.layer_norm import layer_norm_rows
from ..kernels.xielu import xielu_ref, xielu_rows
from .experts import fused_mixture, mixture
from .llama_config import LlamaConfig, rope_frequencies


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Hugging Face's order of operations: normalise in fp32, cast back, then scale."""
    x32 = x.float()
    normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


def _pre_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """What a projection after a layer's norm reads: x normalised, or x itself where the
    layer has no norm before it (EXAONE 4's, weight None)."""
    return x if weight is None else _rms_norm(x, weight, eps)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding in the half-split layout of Hugging Face checkpoints: pairs are
    (x_i, x_{i + d/2}). x (..., heads, head_dim); cos, sin (..., head_dim / 2) in fp32."""
    first, second = x.float().chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # broadcast over heads
    rotated = torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)
    return rotated.to(x.dtype)


def _parameter(*shape, dtype, device, fill: float | None = None) -> nn.Parameter:
    data = torch.empty(shape, dtype=dtype, device=device)
    if fill is None:
        nn.init.normal_(data, std=0.02)
    else:
        data.fill_(fill)
    return nn.Parameter(data, requires_grad=False)


def _folded_norm(dim: int, *, dtype, device) -> torch.Tensor:
    """The weight a norm keeps once folded into the projection after it: ones, one value
    expanded to dim (read once by the decode kernels, kernels/_norm_weight.py)."""
    return torch.ones((), dtype=dtype, device=device).expand(dim)


class LlamaLayer(nn.Module):
    """One decoder layer's weights, fused: wqkv = [Wq; Wk; Wv] with the rows of every head
    in tg.interleave_rotary_pairs order (tg.linear_qkv's layout); w_gate_up interleaves the
    rows of Wgate and Wup (gate_0, up_0, gate_1, ...), the layout of tg.linear's gated
    activations.
    The norms' weights are folded into them (fold_norms): attn_norm and mlp_norm are ones,
    one value expanded to the width (buffers, not in the state dict), or None where the
    layer has no norms before attention and the MLP (EXAONE 4). Qwen3's norms of each
    q and k head, q_norm and k_norm (head_dim,), stay as they are: a head's values are
    normalised before they are scaled (OLMo 2's, of all of q and all of k: (q_dim,) and
    (kv_dim,); StableLM's and Cohere's, a weight a head: (n_heads, head_dim) and
    (n_kv_heads, head_dim)); so do Gemma's norms of the attention and MLP outputs,
    post_attn_norm and post_mlp_norm (dim,)."""

    def __init__(self, config: LlamaConfig, dtype: torch.dtype, device):
        super().__init__()
        c, kw = config, {"dtype": dtype, "device": device}
        qkv = c.q_dim + 2 * c.kv_dim
        self.register_buffer("attn_norm", _folded_norm(c.dim, **kw) if c.pre_norms else None,
                             persistent=False)
        self.wqkv = _parameter(qkv, c.dim, **kw)
        # (a LayerNorm's bias folds into the biases after it: hf_weights)
        self.bqkv = _parameter(qkv, fill=0.0, **kw) if c.qkv_bias or c.norm_bias else None
        q_shape, k_shape = ((c.q_dim,), (c.kv_dim,)) if c.qk_norm_whole else (
            ((c.n_heads, c.head_dim), (c.n_kv_heads, c.head_dim)) if c.qk_norm_per_head
            else ((c.head_dim,),) * 2)
        self.q_norm = _parameter(*q_shape, fill=1.0, **kw) if c.qk_norm else None
        self.k_norm = _parameter(*k_shape, fill=1.0, **kw) if c.qk_norm else None
        self.q_norm_bias = _parameter(*q_shape, fill=0.0, **kw) if c.qk_norm_bias else None
        self.k_norm_bias = _parameter(*k_shape, fill=0.0, **kw) if c.qk_norm_bias else None
        self.wo = _parameter(c.dim, c.q_dim, **kw)
        self.bo = _parameter(c.dim, fill=0.0, **kw) if c.o_bias else None
        self.register_buffer("mlp_norm", _folded_norm(c.dim, **kw) if c.pre_norms else None,
                             persistent=False)
        up_rows = c.ffn_dim * (2 if c.mlp_gated else 1)   # gate|up, or up alone (Arcee)
        # a mixture's experts stacked: (n_experts, 2 ffn_dim, dim) and (n_experts, dim,
        # ffn_dim) (their biases, where mlp_bias, (n_experts, 2 ffn_dim) and (n_experts,
        # dim)), and its router's scores of them (n_experts, dim); a shared expert's parts
        # after them, and its score after theirs where scored (models/experts.py)
        experts = (c.n_experts + c.shared_experts,) if c.moe else ()
        self.w_router = _parameter(c.router_rows, c.dim, **kw) if c.moe else None
        self.b_router = _parameter(c.router_rows, fill=0.0, **kw) if c.router_bias else None
        # the bias an expert that chooses the experts (router_choice_bias), fp32 whatever the
        # model's dtype: its values differ past bf16's precision (_apply keeps it so)
        self.b_choice = (_parameter(c.n_experts, fill=0.0, dtype=torch.float32, device=device)
                         if c.router_choice_bias else None)
        self.w_gate_up = _parameter(*experts, up_rows, c.dim, **kw)
        self.b_gate_up = (_parameter(*experts, up_rows, fill=0.0, **kw)
                          if c.mlp_bias or c.norm_bias else None)
        self.w_down = _parameter(*experts, c.dim, c.ffn_dim, **kw)
        self.b_down = _parameter(*experts, c.dim, fill=0.0, **kw) if c.mlp_bias else None
        # xIELU's scalars as it applies them (alpha_p, alpha_n, beta, eps: kernels/xielu.py),
        # from the checkpoint's by hf_weights
        self.xielu = (_parameter(4, fill=0.0, **kw) if c.mlp_activation == "xielu"
                      else None)
        # each q head's attention sink (LlamaConfig.attention_sinks), a logit of the scores
        self.sinks = _parameter(c.n_heads, fill=0.0, **kw) if c.attention_sinks else None
        self.post_attn_norm = _parameter(c.dim, fill=1.0, **kw) if c.post_norms else None
        self.post_mlp_norm = _parameter(c.dim, fill=1.0, **kw) if c.post_norms else None
        # LayerNorms of the stream after each residual add (LlamaConfig.norm_after_add)
        after = c.norm_after_add
        self.attn_sum_norm = _parameter(c.dim, fill=1.0, **kw) if after else None
        self.attn_sum_norm_bias = _parameter(c.dim, fill=0.0, **kw) if after else None
        self.mlp_sum_norm = _parameter(c.dim, fill=1.0, **kw) if after else None
        self.mlp_sum_norm_bias = _parameter(c.dim, fill=0.0, **kw) if after else None

    def _apply(self, fn, recurse: bool = True):
        """As nn.Module's (.to(), .cuda(), .half() ...), the norms again ones expanded from one
        value: a conversion writes every element out; the experts' choice bias moved, never
        rounded."""
        choice_bias = None if self.b_choice is None else self.b_choice.data
        super()._apply(fn, recurse)
        if choice_bias is not None:
            self.b_choice.data = choice_bias.to(self.b_choice.device)
        if self.attn_norm is not None:
            kw = {"dtype": self.wqkv.dtype, "device": self.wqkv.device}
            self.attn_norm = _folded_norm(self.attn_norm.shape[0], **kw)
            self.mlp_norm = _folded_norm(self.mlp_norm.shape[0], **kw)
        return self

    @torch.no_grad()
    def fold_norms(self, attn_norm: torch.Tensor, mlp_norm: torch.Tensor) -> None:
        """Fold a checkpoint's norm weights (dim,) into the projections that read the
        normalised rows: wqkv's and w_gate_up's columns times them, rounded once."""
        self.wqkv.mul_(attn_norm.to(self.wqkv.dtype))
        self.w_gate_up.mul_(mlp_norm.to(self.w_gate_up.dtype))
        if self.w_router is not None:
            self.w_router.mul_(mlp_norm.to(self.w_router.dtype))

    @torch.no_grad()
    def fold_norm_biases(self, attn_bias: torch.Tensor, mlp_bias: torch.Tensor) -> None:
        """Fold the biases (dim,) of the norms before attention and the MLP (LayerNorm's)
        into the biases of the projections after them: W (n + b) = W n + W b. Before
        fold_norms, which scales W's columns."""
        for weight, bias, added in ((self.wqkv, self.bqkv, attn_bias),
                                    (self.w_gate_up, self.b_gate_up, mlp_bias)):
            bias.copy_(bias.float() + weight.float() @ added.float())

    @torch.no_grad()
    def center_heads(self, q_dim: int, k_dim: int, head_dim: int) -> None:
        """Subtract from each q and k head's rows of wqkv (and bqkv) their mean over the
        head: each head's values then have mean zero, so the RMSNorm of a head is its
        LayerNorm (the head norms of a layer_norm model). A head's rows are
        contiguous in wqkv (its dims reordered within the head only)."""
        for tensor in (self.wqkv, self.bqkv):
            if tensor is not None:
                heads = tensor[:q_dim + k_dim].float().unflatten(0, (-1, head_dim))
                tensor[:q_dim + k_dim] = (heads - heads.mean(1, keepdim=True)).flatten(0, 1)

    @torch.no_grad()
    def center_outputs(self) -> None:
        """Subtract from the output and down projections' columns (and their biases) their
        mean over the residual's width: what they add to the residual stream then has mean
        zero (LlamaConfig.layer_norm)."""
        for tensor in (self.wo, self.bo, self.w_down, self.b_down):
            if tensor is not None:
                tensor.copy_(tensor.float() - tensor.float().mean(0, keepdim=True))

    @torch.no_grad()
    def fold_scales(self, q_scale: float, residual: float) -> None:
        """Fold a checkpoint's scalars (Granite's) into the weights whose output they scale:
        q times q_scale (by its head norm where it has one, which comes after the
        projection), the output and down projections and their biases times residual (by
        the norms after them where the layer has them: HyperCLOVA X's, which scales the
        normed outputs)."""
        q_dim = self.wo.shape[1]
        q_parts = ([self.q_norm, self.q_norm_bias] if self.q_norm is not None else
                   [self.wqkv[:q_dim], *([self.bqkv[:q_dim]] if self.bqkv is not None else [])])
        outputs = ([self.post_attn_norm, self.post_mlp_norm] if self.post_attn_norm is not None
                   else [self.wo, self.bo, self.w_down, self.b_down])
        for scale, tensors in ((q_scale, q_parts), (residual, outputs)):
            if scale != 1.0:
                for tensor in tensors:
                    if tensor is not None:
                        tensor.mul_(scale)


@dataclass
class KVCache:
    """What decoding keeps between steps, allocated once: keys and values for `max_batch`
    sequences of up to `max_seq` positions, (layers, max_batch, kv_heads, max_seq, head_dim)
    each, and the rotary tables (max_seq, head_dim / 2) for every position the cache holds.
    Sequence b of a batch lives in slot b."""
    k: torch.Tensor
    v: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor
    slots: torch.Tensor      # arange(max_batch): row -> slot, for the cache writes
    # cos = 1 and sin = 0 at every position: the tables of the layers that do not rotate q
    # and k (SmolLM3's), so their fused projection runs unchanged; None if every layer does
    identity: tuple[torch.Tensor, torch.Tensor] | None = None
    # LongRoPE's long factors at every position (cos and sin hold the short ones below the
    # pretrained context): a prefill past that context rotates all its tokens by them
    long: tuple[torch.Tensor, torch.Tensor] | None = None
    # The sliding layers' own tables where they rotate by another base (Gemma 3's local
    # layers: LlamaConfig.rope_local_theta)
    local: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def max_batch(self) -> int:
        return self.k.shape[1]

    @property
    def max_seq(self) -> int:
        return self.k.shape[3]

    def window(self, max_seq: int) -> KVCache:
        """The first `max_seq` positions of every slot, as a cache of views: what is written
        through it lands here. A step captured over it attends to at most max_seq positions,
        so its attention launch is chosen for those lengths (tg.Generator's context bands)."""
        if not 1 <= max_seq <= self.max_seq:
            raise ValueError(f"a window of {max_seq} positions does not fit a cache of "
                             f"{self.max_seq}")
        identity, long, local = (None if pair is None else tuple(t[:max_seq] for t in pair)
                                 for pair in (self.identity, self.long, self.local))
        return KVCache(self.k[..., :max_seq, :], self.v[..., :max_seq, :], self.cos[:max_seq],
                       self.sin[:max_seq], self.slots, identity, long, local)

    def tables(self, config: LlamaConfig, layer: int,
               rotation: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) for layer `layer` of `config`'s model: the identity's where it does
        not rotate q and k, the local tables where it rotates by its own base, else
        `rotation`'s where given, else the cache's own."""
        if not config.rotates(layer) and self.identity is not None:
            return self.identity
        if config.rotates_locally(layer) and self.local is not None:
            return self.local
        return rotation or (self.cos, self.sin)


class Llama(nn.Module):
    """A Llama-family decoder (see the module docstring). Parameters never require grad.

    tp: tensor parallelism (tilegraph.dist): an int N under torchrun, or a TensorParallel.
    Each rank then holds `local` (config with its share of the heads and the MLP), the LM
    head's rows `vocab_rows`, and the whole embedding table; every call runs on every rank
    and returns the whole result there."""

    def __init__(self, config: LlamaConfig, dtype: torch.dtype = torch.float32, device=None,
                 *, tp: TensorParallel | int | None = None):
        super().__init__()
        self.config = config
        self.tp = TensorParallel.resolve(tp)
        self.local = local_config(config, self.tp.size, self.tp.rank)
        kw = {"dtype": dtype, "device": device}
        self.embed = _parameter(config.vocab_size, config.dim, **kw)
        # a learned position table (GPT-2's, OPT's), each row added to a token's embedding
        self.positions = (_parameter(config.learned_positions, config.dim, **kw)
                          if config.learned_positions else None)
        self.layers = nn.ModuleList(LlamaLayer(self.local, dtype, device)
                                    for _ in range(config.n_layers))
        # ALiBi's slopes of this rank's q heads, fp32 whatever the weights' dtype (_apply)
        self.register_buffer("alibi_slopes", self._local_slopes(self.embed.device),
                             persistent=False)
        # the final norm; none where each layer ends in one (norm_after_add)
        self.norm = None if config.norm_after_add else _parameter(config.dim, fill=1.0, **kw)
        # OPT 350M's projection down to its narrower LM head (LlamaConfig.head_projection)
        self.head_projection = (_parameter(config.head_projection, config.dim, **kw)
                                if config.head_projection else None)
        start, stop, rows = vocab_shard(config.head_rows, self.tp.rank, self.tp.size)
        self.vocab_rows = (start, stop)
        # a centred, normed or projected table (layer_norm, embedding_layer_norm,
        # head_projection) cannot serve as the LM head too
        if (config.tie_embeddings and self.tp.size == 1 and not config.layer_norm
                and not config.embedding_layer_norm and not config.head_projection):
            self.lm_head = self.embed
        else:   # a rank's rows, zero past the vocabulary (tied: copied from the embedding)
            self.lm_head = _parameter(rows, config.head_width, fill=0.0, **kw)
            if not config.tie_embeddings or config.head_projection:
                nn.init.normal_(self.lm_head.data[:stop - start], std=0.02)
            self.tie_lm_head()
        # the LM head's bias (Phi's) and what a LayerNorm's bias before it adds to the logits
        # (LlamaConfig.norm_bias)
        self.head_bias = (_parameter(rows, fill=0.0, **kw)
                          if config.norm_bias or config.lm_head_bias else None)
        # the row-parallel projections' all-reduces (NCCL or one-shot, timed here)
        self.all_reduce = LayerAllReduce(self.tp, config.dim, dtype, self.embed.device)
        # How many of gate/up's first weight bytes a batch-1 step's output projection
        # prefetches into L2 beside attention, by the length of the cache (window) the step
        # runs over: tg.Generator chooses them per context band by timing (none by default).
        self.l2_ahead_bytes: dict[int, int] = {}

    def _local_slopes(self, device: torch.device) -> torch.Tensor | None:
        """ALiBi's slopes of this rank's q heads, or None without ALiBi."""
        slopes = self.local.alibi_slopes
        return None if slopes is None else torch.tensor(slopes, dtype=torch.float32, device=device)

    def _apply(self, fn, recurse: bool = True):
        """As nn.Module's, ALiBi's slopes then made again in fp32 on the new device: a
        conversion to 16 bits would round them."""
        super()._apply(fn, recurse)
        if self.alibi_slopes is not None:
            self.alibi_slopes = self._local_slopes(self.alibi_slopes.device)
        return self

    def tie_lm_head(self) -> None:
        """Copy this rank's rows of a tied embedding into its LM head shard (after loading
        weights, before the table is centred (LlamaConfig.layer_norm); a no-op where they
        are one tensor, or where the table is projected up: loading gives the head the
        checkpoint's table)."""
        if (self.config.tie_embeddings and self.lm_head is not self.embed
                and not self.config.head_projection):
            start, stop = self.vocab_rows
            with torch.no_grad():
                self.lm_head[:stop - start].copy_(self.embed[start:stop])

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.dtype

    @property
    def device(self) -> torch.device:
        return self.embed.device

    @classmethod
    def from_hf(cls, model_or_path, dtype: torch.dtype | None = None, device=None, *,
                tp: TensorParallel | int | None = None) -> Llama:
        """Weights from a transformers model object or a local checkpoint directory
        (config.json and *.safetensors or pytorch_model*.bin, sharded or not); nothing is
        downloaded. With tp, each rank reads only its shard of every tensor from the
        checkpoint files."""
        from .hf_weights import load_llama
        return load_llama(cls, model_or_path, dtype, device, TensorParallel.resolve(tp))

    # -- the reference: plain PyTorch over whole sequences, no cache --------------------------

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab) for input_ids (B, T), causal, positions 0..T-1."""
        c, local = self.config, self.local
        batch, length = _check_ids(input_ids, self.device, c.vocab_size)
        if c.learned_positions and length > c.learned_positions:
            raise ValueError(f"{length} tokens pass the {c.learned_positions} positions the "
                             "model learned embeddings for")
        # LongRoPE: a sequence past the pretrained context rotated by the long factors alone
        tables = self._rope_table(length, long=self._past_original(length))
        local_tables = (self._rope_table(length, local=True)
                        if c.rope_local_theta is not None else None)
        q_scales = self._q_scales(torch.arange(length, device=self.device))
        x = self._embedded(input_ids, torch.arange(length, device=self.device))
        for index, layer in enumerate(self.layers):
            qkv = F.linear(_pre_norm(x, layer.attn_norm, c.norm_eps), layer.wqkv, layer.bqkv)
            q, k, v = self._split_heads(qkv, index, *(local_tables if c.rotates_locally(index)
                                                      else tables))   # (B, T, heads, head_dim)
            q = q if q_scales is None else q * q_scales
            attn = _causal_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                     c.window(index), c.attn_softcap, self.alibi_slopes,
                                     c.alibi_rounded, layer.sinks)   # (B, heads, T, D)
            attn = attn.transpose(1, 2).reshape(batch, length, local.q_dim)
            layer_input = x
            x = self._add_output(x, F.linear(attn, layer.wo, self._once(layer.bo)), 0, index)
            mlp_output = self._plain_mlp(layer_input if c.parallel_residual else x, layer)
            x = self._add_output(x, mlp_output, 1, index)
        logits = self._plain_head(x)
        return self._gather_vocab(logits.view(batch * length, -1)).view(batch, length, -1)

    def _embedded(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The embeddings of `tokens` (...,) at `positions` (broadcast against them): their
        rows of the table, plus their positions' rows where the model learned a table of
        those (added in the model's dtype, as transformers adds them)."""
        x = F.embedding(tokens, self.embed)
        return x if self.positions is None else x + F.embedding(positions, self.positions)

    def _once(self, bias: torch.Tensor | None) -> torch.Tensor | None:
        """A row-parallel projection's bias (or residual), added by rank 0 alone: the
        all-reduce after it sums every rank's partial product."""
        return bias if self.tp.rank == 0 else None

    def _add_output(self, x: torch.Tensor, output: torch.Tensor, site: int, layer: int
                    ) -> torch.Tensor:
        """x plus a row-parallel projection's output (site as _reduce's): summed over the
        ranks, then normalised first where the layer norms it (Gemma's post norms)."""
        output = self._reduce(output, site, layer)
        norm = (self.layers[layer].post_attn_norm, self.layers[layer].post_mlp_norm)[site]
        x = x + (output if norm is None else _post_norm(output, norm, self.config.norm_eps))
        return self._sum_normed(x, site, layer)

    def _sum_normed(self, x: torch.Tensor, site: int, index: int, fused: bool = False
                    ) -> torch.Tensor:
        """The stream x after a residual add (site as _reduce's), LayerNorm-ed where the
        layer norms it there (LlamaConfig.norm_after_add): a kernel of its own, tilegraph's
        on the fused path (chained to the projections by PDL), else PyTorch's."""
        layer = self.layers[index]
        norm, bias = ((layer.mlp_sum_norm, layer.mlp_sum_norm_bias) if site else
                      (layer.attn_sum_norm, layer.attn_sum_norm_bias))
        if norm is None:
            return x
        if fused and SUM_NORM_KERNEL:
            return layer_norm_rows(x, norm, bias, self.config.norm_eps)
        return F.layer_norm(x, (x.shape[-1],), norm, bias, self.config.norm_eps)

    def _reduce(self, x: torch.Tensor, site: int, layer: int) -> torch.Tensor:
        """The sum over the ranks of a row-parallel projection's partial result x (site 0:
        the attention output's, 1: the MLP output's)."""
        what = ("attention output", "MLP output")[site]
        return self.all_reduce(x, site, f"the all-reduce of layer {layer}'s {what}")

    def _gather_vocab(self, logits: torch.Tensor) -> torch.Tensor:
        """(rows, this rank's LM head rows) -> (rows, head_rows): every rank's logits, capped
        by cap tanh(logits / cap) in their dtype where the model caps them (Gemma 2)."""
        logits = self.tp.all_gather_columns(logits, self.config.head_rows,
                                            "the all-gather of the logits")
        if (cap := self.config.logits_softcap) is not None:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def _rope_table(self, length: int, long: bool | None = None, local: bool = False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin (length, head_dim / 2) fp32, both times YaRN's or LongRoPE's attention
        factor where the model has one (so q . k is scaled by its square, as transformers
        scales it). LongRoPE's frequencies: the long ones (long), the short ones (not long),
        or by position (None): short below the pretrained context, long from it, as
        transformers rotates a token decoded at that position. With partial rotary
        embeddings the pairs past rotary_dim / 2 turn by nothing: cos 1, sin 0 (the load
        puts a head's unturned dims there, hf_weights.rotary_order). local: the tables of
        the layers that rotate by rope_local_theta, plain and unscaled."""
        config = self.config
        positions = torch.arange(length, dtype=torch.float64)[:, None]
        if local:
            angles = positions * rope_frequencies(config, local=True)
            return angles.cos().float().to(self.device), angles.sin().float().to(self.device)
        angles = positions * rope_frequencies(config, long=bool(long))
        if config.rope_longrope is not None and long is None:
            past = positions >= config.rope_longrope["original_max_position_embeddings"]
            angles = torch.where(past, positions * rope_frequencies(config, long=True), angles)
        factor = config.rope_attention_factor
        unturned = (config.head_dim - config.rotary_dim) // 2
        cos, sin = (F.pad(table * factor, (0, unturned), value=fill)
                    for table, fill in ((angles.cos(), 1.0), (angles.sin(), 0.0)))
        return cos.float().to(self.device), sin.float().to(self.device)

    def _past_original(self, length: int) -> bool:
        """Whether `length` tokens pass LongRoPE's pretrained context (False without it)."""
        rope = self.config.rope_longrope
        return rope is not None and length > rope["original_max_position_embeddings"]

    def _split_heads(self, qkv: torch.Tensor, index: int, cos: torch.Tensor,
                     sin: torch.Tensor):
        """Layer `index`'s (..., q_dim + 2 kv_dim) of interleaved heads -> q, k (each head
        normalised first where the model norms them) with rotary embeddings applied where
        the layer rotates, and v, each (..., heads, head_dim); cos and sin broadcast against
        the leading dims."""
        layer = self.layers[index]
        c = self.local
        qkv = _deinterleave_heads(qkv, c.head_dim)
        q, k, v = qkv.split((c.q_dim, c.kv_dim, c.kv_dim), dim=-1)
        lead = qkv.shape[:-1]
        q = q.reshape(*lead, c.n_heads, c.head_dim)
        k = k.reshape(*lead, c.n_kv_heads, c.head_dim)
        if layer.q_norm is not None and not c.qk_norm_after_rotary:
            q, k = self._head_norms(q, k, layer)
        if self.config.rotates(index):
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if layer.q_norm is not None and c.qk_norm_after_rotary:   # Hunyuan's order
            q, k = self._head_norms(q, k, layer)
        return q, k, v.reshape(*lead, c.n_kv_heads, c.head_dim)

    def _q_scales(self, positions: torch.Tensor, max_seq: int | None = None
                  ) -> torch.Tensor | None:
        """What q is multiplied by at `positions` (a tensor (..., 1, 1) in the model's
        dtype, as transformers rounds it), or None where the model has no attention
        temperature, or no position below max_seq reaches it."""
        c = self.config
        if c.q_scale_beta == 0 or (max_seq is not None and max_seq <= c.q_scale_length):
            return None
        return c.q_scales(positions).to(self.dtype)[..., None, None]

    def _head_norms(self, q: torch.Tensor, k: torch.Tensor, layer: LlamaLayer):
        """q and k (..., heads, head_dim) RMS-normalised by the layer's q_norm and k_norm:
        each head, or each as one vector (OLMo 2's); plus q_norm_bias and k_norm_bias where
        the layer has them (Persimmon's)."""
        c = self.local
        if c.qk_norm_whole:
            q = _rms_norm(q.flatten(-2), layer.q_norm, c.norm_eps).view(q.shape)
            k = _rms_norm(k.flatten(-2), layer.k_norm, c.norm_eps).view(k.shape)
        else:
            q, k = _rms_norm(q, layer.q_norm, c.norm_eps), _rms_norm(k, layer.k_norm, c.norm_eps)
        if layer.q_norm_bias is not None:
            q = q + layer.q_norm_bias.view(-1, c.head_dim)   # (1 or heads, head_dim)
            k = k + layer.k_norm_bias.view(-1, c.head_dim)
        return q, k

    # -- the fast path: tilegraph kernels, a static cache ----------------------------------------

    def new_cache(self, max_batch: int, max_seq: int) -> KVCache:
        """A cache of this rank's kv heads."""
        c = self.config
        for name, value in (("max_batch", max_batch), ("max_seq", max_seq)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if c.learned_positions and max_seq > c.learned_positions:
            raise ValueError(f"max_seq={max_seq} passes the {c.learned_positions} positions "
                             f"the model learned embeddings for: give max_seq <= "
                             f"{c.learned_positions}")
        shape = (c.n_layers, max_batch, self.local.n_kv_heads, max_seq, c.head_dim)
        k = torch.zeros(shape, dtype=self.dtype, device=self.device)
        cos, sin = self._rope_table(max_seq)
        identity = long = local = None
        if not all(map(c.rotates, range(c.n_layers))):
            identity = torch.ones_like(cos), torch.zeros_like(sin)
        if c.rope_longrope is not None:
            long = self._rope_table(max_seq, long=True)
        if c.rope_local_theta is not None:
            local = self._rope_table(max_seq, local=True)
        return KVCache(k, torch.zeros_like(k), cos, sin,
                       torch.arange(max_batch, device=self.device), identity, long, local)

    @torch.no_grad()
    def prefill(self, input_ids: torch.Tensor, cache: KVCache, first_slot: int = 0,
                lengths: Sequence[int] | None = None) -> torch.Tensor:
        """Run prompts (B, T) through the model eagerly, writing their keys and values into
        cache slots first_slot .. first_slot + B - 1 at positions 0..T-1. Returns the logits
        (B, vocab) of each prompt's last token: token T - 1, or lengths[b] - 1 where prompts
        of different lengths are padded at their ends to T. Causal attention keeps padding
        out of the prompt's own rows; its keys and values land at positions past the prompt,
        which the sequence's decode writes before it reads them."""
        batch, length = _check_ids(input_ids, self.device, self.config.vocab_size)
        if first_slot < 0 or first_slot + batch > cache.max_batch:
            raise ValueError(f"slots {first_slot}..{first_slot + batch - 1} are outside the "
                             f"cache's {cache.max_batch}")
        if length > cache.max_seq:
            raise ValueError(f"a prompt of {length} tokens does not fit a cache of "
                             f"{cache.max_seq} positions")
        if lengths is not None and (len(lengths) != batch or not all(
                isinstance(n, int) and 1 <= n <= length for n in lengths)):
            raise ValueError(f"lengths must be {batch} ints in 1..{length} (the prompts' "
                             f"tokens before their padding), got {list(lengths)!r}")
        device = input_ids.device
        slots = torch.arange(first_slot, first_slot + batch, device=device)
        ends = torch.tensor([n - 1 for n in lengths] if lengths is not None
                            else [length - 1] * batch, device=device)
        return self.prefill_rows(input_ids, cache, slots, ends)

    @torch.no_grad()
    def prefill_rows(self, input_ids: torch.Tensor, cache: KVCache, slots: torch.Tensor,
                     ends: torch.Tensor) -> torch.Tensor:
        """prefill's work on inputs it does not check, with no host sync (a graph can hold
        it): prompts (B, T) into cache slots `slots` (B,), the logits (B, vocab) of each
        prompt's token ends[b]."""
        c, local = self.config, self.local
        batch, length = input_ids.shape
        device = input_ids.device
        # Row r of the flattened prompts: sequence r // T at position r % T.
        positions = torch.arange(length, device=device).repeat(batch)
        x = self._embedded(input_ids.reshape(-1), positions)
        rows_slots = slots.repeat_interleave(length)

        def attend(q, k_layer, v_layer, window, sinks):  # q (B T, heads, head_dim); k, v cached
            keys, values = (t[:, :, :length].index_select(0, slots) for t in (k_layer, v_layer))
            attn = _causal_attention(
                q.view(batch, length, local.n_heads, c.head_dim).transpose(1, 2), keys,
                values, window, c.attn_softcap, self.alibi_slopes, c.alibi_rounded, sinks)
            return attn.transpose(1, 2).reshape(batch * length, local.q_dim)

        rotation = None
        if cache.long is not None:
            # LongRoPE: prompts whose longest passes the pretrained context are rotated by the
            # long factors alone, as transformers' forward over them rotates them (chosen on
            # the device, so a graph holds it)
            past = ends.max() >= c.rope_longrope["original_max_position_embeddings"]
            rotation = tuple(torch.where(past, long, table) for long, table
                             in zip(cache.long, (cache.cos, cache.sin), strict=True))
        x, pending = self._fused_layers(x, cache, positions, rows_slots, attend, rotation)
        if pending is not None:   # added here: only the rows below reach the LM head
            x = self._fused_add(x, *pending)
        last = x.view(batch, length, c.dim)[torch.arange(batch, device=device), ends]
        return self._lm_head(last)

    def _lm_head(self, x: torch.Tensor,
                 pending: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Final norm and LM head (rows, dim) -> logits (rows, vocab); `pending` (the last
        layer's normed output, _fused_layers) added to x in its prologue."""
        _, added = self._pending_sum(x, pending)
        if self.head_projection is not None:   # (down to the head's width, normed first)
            x = tg.linear(x, self.head_projection, norm_weight=self.norm,
                          norm_eps=self.config.norm_eps, **added)
            logits = tg.linear(x, self.lm_head, self.head_bias)
        else:
            logits = tg.linear(x, self.lm_head, self.head_bias, norm_weight=self.norm,
                               norm_eps=self.config.norm_eps, **added)
        return self._gather_vocab(logits)

    @torch.no_grad()
    def decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache
               ) -> torch.Tensor:
        """One token per sequence: tokens (S,) at positions (S,) of cache slots 0..S-1.
        Writes their keys and values into the cache and returns logits (S, vocab). No host
        sync and fixed shapes: safe to capture, one graph for every position. Token ids are
        read on the device, unchecked: one outside the vocabulary gives NaN logits."""
        rows = tokens.shape[0]
        positions = positions.contiguous()
        x = torch.empty((rows, self.config.dim), dtype=self.dtype, device=self.device)
        lengths = torch.empty_like(positions)  # each sequence attends to 0..its position
        decode_inputs(tokens.contiguous(), positions, self.embed, hidden_out=x,
                      lengths_out=lengths, position_table=self.positions)
        return self.decode_embedded(x, positions, lengths, cache)

    @torch.no_grad()
    def decode_embedded(self, x: torch.Tensor, positions: torch.Tensor, lengths: torch.Tensor,
                        cache: KVCache) -> torch.Tensor:
        """decode() from what its first kernel writes (kernels/decode_inputs.py): the rows'
        embeddings x (S, dim) and lengths (S,), positions + 1. For steps whose inputs the
        step before wrote (Generator's greedy steps: greedy_step's next_inputs), which then
        start at the first projection. x and lengths are read, never written."""
        rows = x.shape[0]

        def attend(q, k_layer, v_layer, window, sinks):  # q (S, heads, head_dim); k, v cached
            attended = decode_attention_in_layer(q, k_layer, v_layer, lengths, window,
                                                 self.config.attn_softcap, self.alibi_slopes,
                                                 self.config.alibi_rounded, sinks)
            return attended.view(rows, -1)

        x, pending = self._fused_layers(x, cache, positions.contiguous(), cache.slots[:rows],
                                        attend)
        return self._lm_head(x, pending)

    @torch.no_grad()
    def plain_decode(self, tokens: torch.Tensor, positions: torch.Tensor, cache: KVCache
                     ) -> torch.Tensor:
        """decode() in plain PyTorch ops over the same cache, written the way gpt-fast writes
        its step (index_put into the cache, the kv heads repeated for the q heads, attention
        over every cached position under a mask): what torch.compile gets from clean model
        code, the `plain-autotune` peer of `tilegraph demo --model`. Same arguments, writes
        and result as decode()."""
        c, local = self.config, self.local
        rows, group = tokens.shape[0], local.n_heads // local.n_kv_heads
        slots = cache.slots[:rows]
        # each table at the rows' positions, once: (S, head_dim / 2)
        tables = (cache.cos[positions], cache.sin[positions])
        local_tables = (tuple(t[positions] for t in cache.local) if cache.local is not None
                        else None)
        cached = torch.arange(cache.max_seq, device=tokens.device)
        visible = cached <= positions[:, None]   # (S, max_seq)
        q_scales = self._q_scales(positions)
        x = self._embedded(tokens, positions)
        for index, layer in enumerate(self.layers):
            qkv = F.linear(_pre_norm(x, layer.attn_norm, c.norm_eps), layer.wqkv, layer.bqkv)
            q, k, v = self._split_heads(qkv, index, *(local_tables if c.rotates_locally(index)
                                                      else tables))   # (S, heads, head_dim)
            q = q if q_scales is None else q * q_scales
            # one index_put on the whole cache: through a view of it (cache.k[index]),
            # torch.compile copied the whole cache back after every step
            at = (torch.full_like(slots, index), slots, slice(None), positions)
            cache.k[at], cache.v[at] = k, v
            keys, values = (t[index, :rows].repeat_interleave(group, dim=1)
                            for t in (cache.k, cache.v))   # (S, heads, max_seq, head_dim)
            mask = visible
            if (window := c.window(index)) is not None:
                mask = visible & (cached > positions[:, None] - window)
            attn = _attention(q[:, :, None], keys, values, mask[:, None, None, :],
                              c.attn_softcap, None if self.alibi_slopes is None else
                              _alibi_bias(self.alibi_slopes, cached[None, None, :],
                                          positions[:, None, None],
                                          c.head_dim ** -0.5 if c.alibi_rounded else None),
                              layer.sinks)
            attn = attn.reshape(rows, local.q_dim)
            layer_input = x
            x = self._add_output(x, F.linear(attn, layer.wo, self._once(layer.bo)), 0, index)
            mlp_output = self._plain_mlp(layer_input if c.parallel_residual else x, layer)
            x = self._add_output(x, mlp_output, 1, index)
        return self._gather_vocab(self._plain_head(x))

    def _plain_mlp(self, x: torch.Tensor, layer: LlamaLayer) -> torch.Tensor:
        """The MLP's output (this rank's part of it) for the stream x, in plain PyTorch."""
        c = self.config
        normed = _pre_norm(x, layer.mlp_norm, c.norm_eps)
        gated = functools.partial(_gated, activation=c.mlp_activation, xielu=layer.xielu)
        if c.moe:
            return mixture(normed, layer, c, gated)
        return F.linear(gated(F.linear(normed, layer.w_gate_up, layer.b_gate_up)),
                        layer.w_down, self._once(layer.b_down))

    def _plain_head(self, x: torch.Tensor) -> torch.Tensor:
        """The final norm (where the model has one), the projection down to a narrower head
        (where it has one) and this rank's LM head, in plain PyTorch."""
        x = _pre_norm(x, self.norm, self.config.norm_eps)
        if self.head_projection is not None:
            x = F.linear(x, self.head_projection)
        return F.linear(x, self.lm_head, self.head_bias)

    def _fused_layers(self, x: torch.Tensor, cache: KVCache, positions: torch.Tensor,
                      slots: torch.Tensor, attend,
                      rotation: tuple[torch.Tensor, torch.Tensor] | None = None
                      ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """x (rows, dim) through every layer: tg.linear_qkv (which writes the layer's keys
        and values at each row's slot and position; rotated by the cache's tables, or
        `rotation`'s), `attend` and three tg.linear calls. Under
        tensor parallelism rank 0 adds the residual and bias in the row-parallel projections'
        epilogues, and one all-reduce sums the ranks' partial results. Where the layer norms
        those results (Gemma's post norms) the next projection adds the normed output to the
        stream in its prologue (tg.linear's add_normed). Returns the stream and what is
        still to be added to it that way: (the last output, its norm) or None."""
        c, rows = self.config, x.shape[0]
        # The norm after each residual projection, which its kernel hands over (on the
        # tensor-core path); a rank's partial sum before the all-reduce cannot, nor an
        # output normalised before its add, nor a sum LayerNorm-ed after it (norm_after_add).
        hand_over = self.tp.size == 1 and not c.post_norms and not c.norm_after_add
        # (a parallel layer's MLP reads its input, not the stream after attention)
        hand_mlp_norm_over = hand_over and not c.parallel_residual
        attn_norms = [layer.attn_norm for layer in self.layers[1:]] + [self.norm]
        # Ministral 3's q scales: a multiply a layer, where the cache reaches past the
        # pretrained context (below it every scale is 1)
        q_scales = self._q_scales(positions, cache.max_seq)
        pending = None
        for index, layer in enumerate(self.layers):
            k_layer, v_layer = cache.k[index], cache.v[index]
            cos, sin = cache.tables(c, index, rotation)
            stream, added = self._pending_sum(x, pending)
            q = tg.linear_qkv(x, layer.wqkv, layer.bqkv, norm_weight=layer.attn_norm,
                              norm_eps=c.norm_eps, cos=cos, sin=sin,
                              positions=positions, slots=slots, k_cache=k_layer,
                              v_cache=v_layer, n_heads=self.local.n_heads,
                              q_norm_weight=layer.q_norm, k_norm_weight=layer.k_norm,
                              q_norm_bias=layer.q_norm_bias, k_norm_bias=layer.k_norm_bias,
                              norm_after_rotary=c.qk_norm_after_rotary, **added)
            q = q if q_scales is None else q * q_scales
            x = layer_input = stream
            attended = attend(q, k_layer, v_layer, c.window(index), layer.sinks)
            output = tg.linear(attended, layer.wo, self._once(layer.bo),
                               residual=self._once(x) if not c.post_norms else None,
                               out=self.all_reduce.output(0, rows),
                               next_norm_weight=layer.mlp_norm if hand_mlp_norm_over else None,
                               l2_ahead=self._gate_up_ahead(layer, cache, rows))
            x, pending = self._stream_after(x, self._reduce(output, 0, index),
                                            layer.post_attn_norm)
            x = self._sum_normed(x, 0, index, fused=True)
            if c.moe:   # (no post norms or norms after the adds)
                gated = functools.partial(_gated, activation=c.mlp_activation, xielu=None)
                output = fused_mixture(x, layer, c, gated, residual=self._once(x),
                                       out=self.all_reduce.output(1, rows))
                x = self._reduce(output, 1, index)
                continue
            stream, added = self._pending_sum(x, pending)
            hidden = tg.linear(layer_input if c.parallel_residual else x, layer.w_gate_up,
                               layer.b_gate_up, norm_weight=layer.mlp_norm,
                               norm_eps=c.norm_eps, activation=c.up_activation, **added)
            if layer.xielu is not None:
                hidden = xielu_rows(hidden, layer.xielu, out=hidden)
            x = stream
            output = tg.linear(hidden, layer.w_down, self._once(layer.b_down),
                               residual=self._once(x) if not c.post_norms else None,
                               out=self.all_reduce.output(1, rows),
                               next_norm_weight=attn_norms[index] if hand_over else None)
            x, pending = self._stream_after(x, self._reduce(output, 1, index),
                                            layer.post_mlp_norm)
            x = self._sum_normed(x, 1, index, fused=True)
        return x, pending

    def _stream_after(self, x: torch.Tensor, output: torch.Tensor, norm: torch.Tensor | None
                      ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """The residual stream after a projection's (reduced) output, and what is left to
        add to it: the output itself where the projection added x in its epilogue, else x
        and (output, norm), for the next projection to add normed (_pending_sum)."""
        if norm is None:
            return output, None
        if not ADD_NORMED_IN_PROLOGUE:
            return self._fused_add(x, output, norm), None
        return x, (output, norm)

    @staticmethod
    def _pending_sum(x: torch.Tensor, pending: tuple[torch.Tensor, torch.Tensor] | None
                     ) -> tuple[torch.Tensor, dict]:
        """(the stream after the next projection, that projection's extra arguments): where
        an output is pending, a new buffer for x + rms_norm(output) * norm, which the
        projection fills (add_normed, sum_out); else x, nothing."""
        if pending is None:
            return x, {}
        stream = torch.empty_like(x)
        return stream, {"add_normed": pending, "sum_out": stream}

    def _fused_add(self, x: torch.Tensor, output: torch.Tensor, norm: torch.Tensor
                   ) -> torch.Tensor:
        """x + rms_norm(output) * norm as a kernel of its own."""
        return tg.rms_norm(output, norm, self.config.norm_eps, residual=x)

    def _gate_up_ahead(self, layer: LlamaLayer, cache: KVCache, rows: int
                       ) -> torch.Tensor | None:
        """The first bytes of `layer`'s gate/up weights that a one-row output projection
        prefetches into L2 while attention runs beside it (tg.linear's l2_ahead): as many as
        l2_ahead_bytes holds for the cache's length; None where it holds none."""
        nbytes = self.l2_ahead_bytes.get(cache.max_seq, 0) if rows == 1 else 0
        if not nbytes or not layer.w_gate_up.is_contiguous() or layer.w_router is not None:
            return None   # a strided gate/up's first bytes in memory are not its first rows
        weights = layer.w_gate_up.view(-1)
        return weights[:nbytes // weights.element_size()]


# Gemma's normed outputs added to the stream in the next projection's prologue (tg.linear's
# add_normed) rather than by a kernel of their own; a module setting, so that
# research/time_generator.py can time a Generator without it.
ADD_NORMED_IN_PROLOGUE = True
# OPT 350M's LayerNorms after the residual adds by tilegraph's kernel on the fused path
# (kernels/layer_norm.py), not PyTorch's; a module setting, for research/time_generator.py.
SUM_NORM_KERNEL = True


def _causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      window: int | None, softcap: float | None = None,
                      slopes: torch.Tensor | None = None, rounded: bool = False,
                      sinks: torch.Tensor | None = None) -> torch.Tensor:
    """Attention of q (B, heads, T, head_dim) over k, v (B, kv_heads, T, head_dim) at
    positions 0..T-1, each query attending to itself and the positions before it, only the
    last `window` of them where a window is given (scores softcapped, ALiBi's bias of
    `slopes` added, in Falcon's form where `rounded`, sinks: _attention, _alibi_bias)."""
    length = q.shape[2]
    if (softcap is None and slopes is None and sinks is None
            and (window is None or window >= length)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                              enable_gqa=q.shape[1] != k.shape[1])
    positions = torch.arange(length, device=q.device)
    apart = positions[None, :] - positions[:, None]   # key - query
    band = (apart <= 0) & (apart > -(window or length))
    return _attention(q, k, v, band, softcap, None if slopes is None else _alibi_bias(
        slopes, positions[None, :], positions[:, None], q.shape[-1] ** -0.5 if rounded else None),
        sinks)


def _alibi_bias(slopes: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor,
                rounded_scale: float | None = None) -> torch.Tensor:
    """ALiBi's bias (..., heads, Tq, Tk), fp32, keys at positions `keys` (..., 1 or Tq, Tk)
    and queries at `queries` (..., Tq, 1): each head's slope (heads,) times the key's
    position less its query's; with rounded_scale (Falcon's form, LlamaConfig.alibi_rounded)
    times the key's position alone, rounded to bf16 as transformers rounds it, then times
    rounded_scale (the scores' scale, applied after the bias in Falcon)."""
    if rounded_scale is not None:   # (exact in fp32 below 2^16 positions: rounded once)
        return (slopes[:, None, None] * keys.unsqueeze(-3).float()).bfloat16().float() \
            * rounded_scale
    return slopes[:, None, None] * (keys - queries).unsqueeze(-3).float()


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
               softcap: float | None, bias: torch.Tensor | None = None,
               sinks: torch.Tensor | None = None) -> torch.Tensor:
    """SDPA of q (B, heads, Tq, D) over k, v (B, kv_heads, Tk, D) where the boolean mask
    (broadcast to (B, heads, Tq, Tk)) is True. With a softcap the scores s become softcap
    tanh(s / softcap) first, and a bias (ALiBi's, broadcast as the mask) is added to them in
    fp32, which SDPA cannot do (its bias takes q's dtype); sinks (heads,): a logit each
    head's softmax weighs beside the scores, with no value: written out, in fp32, the
    probabilities rounded to q's dtype as transformers' eager attention rounds them."""
    grouped = q.shape[1] != k.shape[1]
    if softcap is None and bias is None and sinks is None:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=grouped)
    group = q.shape[1] // k.shape[1]
    k, v = (t.repeat_interleave(group, dim=1) for t in (k, v))
    scores = q.float() @ k.float().transpose(-1, -2) * q.shape[-1] ** -0.5
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~mask, float("-inf"))
    if sinks is not None:   # one more column, each head's sink, dropped after the softmax
        sink = sinks.float()[:, None, None].expand(*scores.shape[:-1], 1)
        return torch.softmax(torch.cat([scores, sink], -1), dim=-1)[..., :-1].to(q.dtype) @ v
    return torch.softmax(scores, dim=-1).to(q.dtype) @ v


def _deinterleave_heads(qkv: torch.Tensor, head_dim: int) -> torch.Tensor:
    """Columns of every head from tg.interleave_rotary_pairs order (x_0, x_{d/2}, x_1, ...)
    back to (x_0, x_1, ..., x_{d-1})."""
    return qkv.unflatten(-1, (-1, head_dim // 2, 2)).transpose(-1, -2).flatten(-3)


def _gated(gate_up: torch.Tensor, activation: str, xielu: torch.Tensor | None
           ) -> torch.Tensor:
    """act(gate) * up of interleaved (gate, up) columns (act as tg.linear's gated
    `activation` names it), rounded in between as transformers' MLP rounds them; or, for an
    ungated MLP (Arcee's "relu2"), act(up) of its up columns (xIELU's by the layer's
    scalars, `xielu`)."""
    if activation == "xielu":
        return xielu_ref(gate_up, xielu)
    if activation not in GLU_ACTIVATIONS:   # (GPT-OSS's experts' SwiGLU too)
        return activation_ref(gate_up, activation)
    gate, up = gate_up.unflatten(-1, (-1, 2)).unbind(-1)
    if activation == "swiglu":
        return F.silu(gate) * up
    return F.gelu(gate, approximate="tanh" if activation == "geglu_tanh" else "none") * up


def _post_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Gemma's order of operations: normalise and scale in fp32, then cast back."""
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
            ).to(x.dtype)


def _check_ids(input_ids, device: torch.device, vocab_size: int) -> tuple[int, int]:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.int64,
                                                                          torch.int32):
        raise TypeError("input_ids must be an int64 or int32 tensor of token ids (B, T)")
    if input_ids.ndim != 2 or 0 in input_ids.shape:
        raise ValueError(f"input_ids must be (batch, tokens) with both > 0, got shape "
                         f"{tuple(input_ids.shape)}")
    if input_ids.device != device:
        raise ValueError(f"input_ids are on {input_ids.device}, the model on {device}")
    low, high = input_ids.min().item(), input_ids.max().item()
    if low < 0 or high >= vocab_size:
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got {low}..{high}")
    return input_ids.shape

