"""A layer's mixture of experts (LlamaConfig.n_experts): the router, the plain PyTorch
path (the reference, prefill's) and the decode step's kernels (kernels/experts.py).

The router scores the normed row against each expert, softmax in fp32 picks the k best,
and the row's MLP output is their outputs weighted by their probabilities (renormalised
over the k where the model does so), as transformers' Mixtral, Qwen 2 and 3 MoE, OLMoE,
Granite MoE and GPT-OSS blocks compute it (GPT-OSS's router and experts with biases).
MiniMax-M2's takes each score's sigmoid as its expert's probability and chooses by the
probability plus a bias an expert (Solar Open's, as DeepSeek V3's with one group, scales
the routed experts' weights too). Ties go to the lower expert. A shared expert, which
every row takes, weighted by the sigmoid of a score of its own (the router's last row:
Qwen 2 MoE's) or whole (Granite MoE's shared MLP), is held as LlamaConfig.shared_experts
more experts of ffn_dim each: its inner width split, whose outputs sum to its own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilegraph as tg

from ..kernels.experts import KERNEL_ROWS, expert_down, expert_gate_up


def route(scores: torch.Tensor, config, choice_bias: torch.Tensor | None = None
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights (..., slots) fp32, experts (..., slots)) of router scores (..., n_experts,
    then the shared expert's where the model has one): the k best (by probability plus
    choice_bias (n_experts,) where given), then the shared expert's parts."""
    routed = scores[..., :config.n_experts].float()
    if config.router_scoring == "sigmoid":
        probabilities = torch.sigmoid(routed)
        keys = probabilities if choice_bias is None else probabilities + choice_bias.float()
        experts = keys.topk(config.experts_per_token, dim=-1).indices
        weights = probabilities.gather(-1, experts)
    else:
        weights, experts = torch.softmax(routed, dim=-1).topk(config.experts_per_token, dim=-1)
    if config.router_renormalized:
        weights = weights / weights.sum(-1, keepdim=True)
    weights = weights * config.router_scale
    if config.shared_experts:
        parts = torch.arange(config.n_experts, config.n_experts + config.shared_experts,
                             device=scores.device).expand(*experts.shape[:-1], -1)
        shares = (torch.sigmoid(scores[..., config.n_experts:].float()).expand_as(parts)
                  if config.shared_expert_scored else torch.ones_like(parts, dtype=torch.float))
        weights, experts = torch.cat([weights, shares], -1), torch.cat([experts, parts], -1)
    return weights, experts


def mixture(normed: torch.Tensor, layer, config, gated) -> torch.Tensor:
    """The mixture's output for normed rows (..., dim) in plain PyTorch: `gated(gate_up)`
    applies the activation to an expert's interleaved gate|up outputs. Few rows gather
    their experts' weights (what a step must read); many run every expert on every row and
    weight the outputs (zero for the experts a row did not take): no host sync either way,
    so a graph can hold it."""
    rows = normed.reshape(-1, normed.shape[-1])
    weights, experts = route(F.linear(rows, layer.w_router, layer.b_router), config,
                             layer.b_choice)
    stacked = layer.w_gate_up.shape[0]
    b_gate_up, b_down = layer.b_gate_up, layer.b_down   # (GPT-OSS's experts' biases)
    if experts.numel() <= stacked:
        gate_up = torch.einsum("rkod,rd->rko", layer.w_gate_up[experts], rows)
        hidden = gated(gate_up if b_gate_up is None else gate_up + b_gate_up[experts])
        outputs = torch.einsum("rkdf,rkf->rkd", layer.w_down[experts], hidden)
        outputs = outputs if b_down is None else outputs + b_down[experts]
        out = (outputs.float() * weights[..., None]).sum(1)
    else:
        dense = torch.zeros(rows.shape[0], stacked, device=rows.device)
        dense.scatter_(1, experts, weights)
        out = torch.zeros(rows.shape, dtype=torch.float32, device=rows.device)
        for expert in range(stacked):
            hidden = gated(F.linear(rows, layer.w_gate_up[expert],
                                    None if b_gate_up is None else b_gate_up[expert]))
            out += dense[:, expert, None] * F.linear(
                hidden, layer.w_down[expert], None if b_down is None else b_down[expert]).float()
    return out.to(normed.dtype).view(normed.shape)


def fused_mixture(x: torch.Tensor, layer, config, gated, residual: torch.Tensor | None,
                  out: torch.Tensor | None = None) -> torch.Tensor:
    """residual + the mixture's output of rms_norm(x) (the norm's weight folded into the
    router and the experts; under tensor parallelism this rank's share of the experts'
    width, its partial sum) for a decode step's rows x (rows, dim), into `out` or a new
    tensor: the router by tg.linear, the experts by kernels/experts.py's two kernels;
    steps of more rows (a prefill's) by `mixture`."""
    if x.shape[0] > KERNEL_ROWS:
        normed = tg.rms_norm(x, layer.mlp_norm, config.norm_eps)
        result = mixture(normed, layer, config, gated)
        result = result if residual is None else residual + result
        return result if out is None else out.copy_(result)
    scores = tg.linear(x, layer.w_router, layer.b_router, norm_weight=layer.mlp_norm,
                       norm_eps=config.norm_eps)
    hidden, weights, experts = expert_gate_up(x, scores, layer.w_gate_up,
                                              config.experts_per_token,
                                              config.router_renormalized,
                                              config.mlp_activation, config.norm_eps,
                                              config.shared_experts, layer.b_gate_up,
                                              config.router_scoring, layer.b_choice,
                                              config.router_scale)
    return expert_down(hidden, weights, experts, layer.w_down, residual=residual, out=out,
                       shared=config.shared_experts, bias=layer.b_down)
