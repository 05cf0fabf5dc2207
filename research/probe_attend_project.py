"""Attention inside the output projection, for one short sequence: a kernel fewer a layer.

    PYTHONPATH=src python3 research/probe_attend_project.py --model qwen2-0.5b --context 256

At batch 1 a layer's attention block is three dependent kernels (q|k|v, attention, output
projection), each paying a kernel boundary and its own round trips. Here program (n block,
kv head) of one kernel computes the attention of that kv head's q heads over the whole
sequence (keys and values from L2: every n block recomputes it, so this is for short
contexts), multiplies it with its (BLOCK_N, group x head_dim) slice of W_o, and the kv heads'
partial sums meet in the split-K workspace, where the last to arrive adds them in kv-head
order with the residual. W_o's tile, the length and the residual are read before
griddepcontrol.wait (the kernel just before, q|k|v, writes none of them).

Checks the kernel against tg.decode_attention + tg.linear on one layer, then times the model's
decode step (random weights, one graph, 300 replays) with the library's three kernels and with
this one, at the given position. Prints ms a step.
"""

from __future__ import annotations

import argparse
import functools
import math

import torch
import triton
import triton.language as tl

import tilegraph as tg
from tilegraph.kernels._launch import supports_pdl
from tilegraph.kernels._pdl import launched, use_pdl
from tilegraph.kernels._split_workspace import split_workspace
from tilegraph.kernels.decode_attention import _attend_run, _prefetch_tile
from tilegraph.kernels.decode_inputs import decode_inputs
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


@triton.jit
def _attend_project_kernel(y_ptr, q_ptr, stride_qh, k_ptr, v_ptr, stride_ch, stride_cp, lengths_ptr,
                           w_ptr, stride_wn, res_ptr, partial_ptr, count_ptr,
                           N, qk_scale, max_seq,
                           N_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
                           HEAD_DIM: tl.constexpr, PDL: tl.constexpr,
                           BLOCK_N: tl.constexpr, BLOCK_G: tl.constexpr,
                           GROUP_P2: tl.constexpr, BLOCK_T: tl.constexpr,
                           BLOCK_D: tl.constexpr, ROW_LINES: tl.constexpr,
                           LINE_ELEMENTS: tl.constexpr):
    """y_n = r_n + sum_h sum_{g, d} W[n, (h G + g) D + d] o_{hG+g, d}, o = attention of
    sequence 0 (one row) over its first lengths[0] positions; program (n block, h)."""
    pid_n = tl.program_id(0)
    kv_head = tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_g = tl.arange(0, GROUP_P2)
    offs_d = tl.arange(0, BLOCK_D)
    n_mask = offs_n < N
    columns = (kv_head * GROUP + offs_g)[None, :, None] * HEAD_DIM + offs_d[None, None, :]
    w_mask = (n_mask[:, None, None] & (offs_g < GROUP)[None, :, None]
              & (offs_d < HEAD_DIM)[None, None, :])
    w = tl.load(w_ptr + offs_n[:, None, None].to(tl.int64) * stride_wn + columns, mask=w_mask,
                other=0.0)                                              # (BN, GP, BD)
    length = tl.minimum(tl.maximum(tl.load(lengths_ptr).to(tl.int32), 0), max_seq)
    residual = tl.load(res_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
    kv_base = kv_head * stride_ch
    if PDL:
        _prefetch_tile(k_ptr + kv_base, stride_cp, 0, length, HEAD_DIM, BLOCK_T, ROW_LINES,
                       LINE_ELEMENTS)
        _prefetch_tile(v_ptr + kv_base, stride_cp, 0, length, HEAD_DIM, BLOCK_T, ROW_LINES,
                       LINE_ELEMENTS)
        tl.extra.cuda.gdc_wait()               # q and this layer's cache writes are final
        tl.extra.cuda.gdc_launch_dependents()
    rows = tl.arange(0, BLOCK_G)
    d_mask = offs_d < HEAD_DIM
    q = tl.load(q_ptr + (kv_head * GROUP + rows)[:, None] * stride_qh + offs_d[None, :],
                mask=(rows < GROUP)[:, None] & d_mask[None, :], other=0.0)
    kv_offsets = kv_base + tl.arange(0, BLOCK_T)[:, None] * stride_cp + offs_d[None, :]
    m, denom, acc = _attend_run(q, k_ptr + kv_offsets, v_ptr + kv_offsets, d_mask, stride_cp,
                                0, length, qk_scale, BLOCK_G, BLOCK_T, BLOCK_D,
                                HEAD_DIM == BLOCK_D, "tf32", False)
    o = tl.where((rows < GROUP)[:, None] & (denom[:, None] > 0), acc / denom[:, None], 0.0)
    # rounded as the attention output the projection would read; the mma tile's padding
    # rows (all zero now) folded away
    o = o.to(q.dtype).to(tl.float32)
    o = tl.sum(tl.reshape(o, (BLOCK_G // GROUP_P2, GROUP_P2, BLOCK_D)), axis=0)
    part = tl.sum(tl.sum(w.to(tl.float32) * o[None, :, :], axis=2), axis=1)   # (BN,)
    tl.store(partial_ptr + kv_head * N + offs_n, part, mask=n_mask)
    tl.debug_barrier()  # every thread's partials are out before the count says so
    arrived = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel")
    if arrived == N_KV_HEADS - 1:
        total = tl.zeros([BLOCK_N], tl.float32)
        for h in range(N_KV_HEADS):   # kv-head order, whatever the arrival order
            total += tl.load(partial_ptr + h * N + offs_n, mask=n_mask, other=0.0,
                             cache_modifier=".cg")
        tl.store(count_ptr + pid_n, 0)
        tl.store(y_ptr + offs_n, (total + residual).to(y_ptr.dtype.element_ty), mask=n_mask)


def attend_project(q, k_layer, v_layer, lengths, wo, residual, out, block_n=32,
                   block_t=128, num_warps=4):
    """out (1, N) = residual + attention(q) @ wo.T for one sequence (slot 0)."""
    _, n_heads, head_dim = q.shape
    n_kv_heads, max_seq = k_layer.shape[1], k_layer.shape[2]
    group = n_heads // n_kv_heads
    group_p2 = triton.next_power_of_2(group)
    block_d = max(16, triton.next_power_of_2(head_dim))
    n = wo.shape[0]
    n_blocks = triton.cdiv(n, block_n)
    partials, counters = split_workspace(q.device, n_kv_heads * n, n_blocks)
    pdl = supports_pdl(q.device) and use_pdl(q.device, (wo, lengths, residual))
    line_elements = 128 // q.element_size()
    _attend_project_kernel[(n_blocks, n_kv_heads)](
        out, q, q.stride(1), k_layer, v_layer, k_layer.stride(1), k_layer.stride(2), lengths, wo,
        wo.stride(0), residual, partials, counters, n, head_dim ** -0.5 * math.log2(math.e),
        max_seq, N_KV_HEADS=n_kv_heads, GROUP=group, HEAD_DIM=head_dim, PDL=pdl,
        BLOCK_N=block_n, BLOCK_G=max(16, group_p2), GROUP_P2=group_p2, BLOCK_T=block_t,
        BLOCK_D=block_d, ROW_LINES=triton.next_power_of_2(triton.cdiv(head_dim, line_elements)),
        LINE_ELEMENTS=line_elements, num_warps=num_warps, num_stages=3,
        **({"launch_pdl": True} if pdl else {}))
    launched(q.device, pdl, (out, partials, counters))
    return out


def fused_decode(block_n, num_warps):
    """Llama.decode (tp=1) with attention and the output projection in one kernel."""
    @torch.no_grad()
    def decode(self, tokens, positions, cache):
        c = self.config
        x = torch.empty((1, c.dim), dtype=self.dtype, device=self.device)
        lengths = torch.empty_like(positions)
        decode_inputs(tokens, positions, self.embed, hidden_out=x, lengths_out=lengths)
        for index, layer in enumerate(self.layers):
            k_layer, v_layer = cache.k[index], cache.v[index]
            q = tg.linear_qkv(x, layer.wqkv, layer.bqkv, norm_weight=layer.attn_norm,
                              norm_eps=c.norm_eps, cos=cache.cos, sin=cache.sin,
                              positions=positions, slots=cache.slots[:1], k_cache=k_layer,
                              v_cache=v_layer, n_heads=self.local.n_heads)
            x = attend_project(q, k_layer, v_layer, lengths, layer.wo, x, torch.empty_like(x),
                               block_n, num_warps=num_warps)
            hidden = tg.linear(x, layer.w_gate_up, layer.b_gate_up, norm_weight=layer.mlp_norm,
                               norm_eps=c.norm_eps, activation="swiglu")
            x = tg.linear(hidden, layer.w_down, layer.b_down, residual=x)
        return self._lm_head(x)
    return decode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2-0.5b")
    parser.add_argument("--context", type=int, default=256)
    args = parser.parse_args()
    config = LlamaConfig.from_hf(hf_config(args.model))
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(1, 2048)
    cache.k.normal_()
    cache.v.normal_()

    # one layer, eagerly: the kernel against tg.decode_attention + tg.linear
    layer = model.layers[0]
    q = torch.randn(1, config.n_heads, config.head_dim, dtype=torch.bfloat16, device="cuda")
    x = torch.randn(1, config.dim, dtype=torch.bfloat16, device="cuda")
    lengths = torch.tensor([args.context], device="cuda")
    attn = tg.decode_attention(q, cache.k[0], cache.v[0], lengths).view(1, -1)
    ref = tg.linear(attn, layer.wo, residual=x)
    for block_n in (16, 32, 64):
        out = torch.full_like(x, float("nan"))
        attend_project(q, cache.k[0], cache.v[0], lengths, layer.wo, x, out, block_n)
        error = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        print(f"BLOCK_N {block_n}: relative error against the library's kernels {error:.2e}")

    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.full((1,), args.context - 1, device="cuda")

    def step_ms(decode) -> tuple[float, torch.Tensor]:
        graph = tg.capture(functools.partial(decode, model), tokens, positions, cache,
                           restore_state=False)
        logits = graph.replay().clone()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        for _ in range(3):
            start.record()
            for _ in range(300):
                graph.replay()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop) / 300)
        return min(times), logits

    base, base_logits = step_ms(Llama.decode)
    print(f"{args.model} b1 position {args.context - 1}: library step {base:.4f} ms")
    for block_n, warps in ((16, 4), (32, 4), (32, 8), (64, 8)):
        ms, logits = step_ms(fused_decode(block_n, warps))
        error = ((logits.float() - base_logits.float()).norm()
                 / base_logits.float().norm()).item()
        print(f"attention in the output projection, BLOCK_N {block_n}, {warps} warps: "
              f"{ms:.4f} ms ({base / ms:.3f}x), logits' relative difference {error:.2e}")
    print(f"library step again: {step_ms(Llama.decode)[0]:.4f} ms")


if __name__ == "__main__":
    main()
