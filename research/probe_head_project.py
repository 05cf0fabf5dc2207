"""Attention and the output projection in one kernel, a program a q head, W_o's columns of
that head held in registers from before the wait.

    PYTHONPATH=src python3 research/probe_head_project.py --model qwen2-0.5b \
        --positions 255,383,1023
    TRITON_INTERPRET=1 PYTHONPATH=src python3 research/probe_head_project.py --check-only

At batch 1 a narrow model's attention block is three dependent kernels (q|k|v, attention over
two kv heads' programs, the output projection), 10.8 us a layer for 1.2 us of weights in
Qwen2-0.5B (notes/models.md, session 43). Session 31 put attention inside the output
projection with programs (n block, kv head), each recomputing its kv head's attention for a
tile of W_o: slower. Here program h computes one q head's attention alone (the keys and values
of its kv head from L2, CUDA-core dot products: one query row needs no tensor cores), multiplies
it into W_o[:, h D:(h+1) D], which it loaded before griddepcontrol.wait (the weight does not
depend on the kernel before), and leaves that partial h_next in the split-K workspace; the
last head to arrive adds the partials in head order with the residual. So the attention's
chain after the wait is one program's, and the output projection's weights stream while q|k|v
runs.

Checks the kernel against tg.decode_attention + tg.linear on one layer (interpreter on CPU,
or the GPU), then times the model's decode step (random weights, one graph, 3 x 300 replays)
with the library's kernels and with this one at each position. Prints ms a step.
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
from tilegraph.kernels.decode_attention import _prefetch_tile
from tilegraph.kernels.decode_inputs import decode_inputs
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig


@triton.jit
def _head_project_kernel(y_ptr, q_ptr, stride_qh, k_ptr, v_ptr, stride_ch, stride_cp,
                         lengths_ptr, w_ptr, stride_wn, res_ptr, partial_ptr, count_ptr,
                         N, qk_scale, max_seq,
                         N_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                         PDL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
                         BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                         PREFETCH_TILES: tl.constexpr, ROW_LINES: tl.constexpr,
                         LINE_ELEMENTS: tl.constexpr):
    """y_n = r_n + sum_h sum_d W[n, h D + d] o_{h, d}, o_h = softmax(q_h K^T * scale) V over
    sequence 0's first lengths[0] positions (one row); program h."""
    head = tl.program_id(0)
    kv_head = head // GROUP
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_t = tl.arange(0, BLOCK_T)
    n_mask = offs_n < N
    d_mask = offs_d < HEAD_DIM
    w = tl.load(w_ptr + offs_n[:, None].to(tl.int64) * stride_wn + head * HEAD_DIM
                + offs_d[None, :], mask=n_mask[:, None] & d_mask[None, :], other=0.0)
    length = tl.minimum(tl.maximum(tl.load(lengths_ptr).to(tl.int32), 0), max_seq)
    kv_base = kv_head * stride_ch
    if PDL:
        for tile in tl.static_range(PREFETCH_TILES):
            _prefetch_tile(k_ptr + kv_base, stride_cp, tile * BLOCK_T, length, HEAD_DIM,
                           BLOCK_T, ROW_LINES, LINE_ELEMENTS)
            _prefetch_tile(v_ptr + kv_base, stride_cp, tile * BLOCK_T, length, HEAD_DIM,
                           BLOCK_T, ROW_LINES, LINE_ELEMENTS)
        tl.extra.cuda.gdc_wait()               # q and this layer's cache writes are final
        tl.extra.cuda.gdc_launch_dependents()
    q = tl.load(q_ptr + head * stride_qh + offs_d, mask=d_mask, other=0.0).to(tl.float32)
    kv_ptrs = kv_base + offs_t[:, None] * stride_cp + offs_d[None, :]
    m = tl.max(tl.full([BLOCK_T], float("-inf"), tl.float32), axis=0)
    denom = tl.sum(tl.zeros([BLOCK_T], tl.float32), axis=0)
    acc = tl.zeros([BLOCK_D], tl.float32)
    for t0 in range(0, length, BLOCK_T):
        t_mask = (t0 + offs_t) < length
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_ptr + kv_ptrs + t0 * stride_cp, mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + kv_ptrs + t0 * stride_cp, mask=kv_mask, other=0.0)
        scores = tl.sum(k.to(tl.float32) * q[None, :], axis=1) * qk_scale       # (BT,)
        scores = tl.where(t_mask, scores, float("-inf"))
        m_new = tl.maximum(m, tl.max(scores, axis=0))
        alpha = tl.exp2(m - m_new)
        # rounded to the cache's dtype, as the library's tensor-core attention rounds them
        p = tl.exp2(scores - m_new).to(v.dtype).to(tl.float32)
        denom = denom * alpha + tl.sum(tl.exp2(scores - m_new), axis=0)
        acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), axis=0)
        m = m_new
    o = tl.where(denom > 0, acc / denom, 0.0)
    o = o.to(q_ptr.dtype.element_ty).to(tl.float32)   # the attention output the GEMV reads
    part = tl.sum(w.to(tl.float32) * o[None, :], axis=1)                         # (BN,)
    tl.store(partial_ptr + head * N + offs_n, part, mask=n_mask)
    tl.debug_barrier()  # every thread's partials are out before the count says so
    arrived = tl.atomic_add(count_ptr, 1, sem="acq_rel")
    if arrived == N_HEADS - 1:
        heads = tl.arange(0, BLOCK_H)
        parts = tl.load(partial_ptr + heads[:, None] * N + offs_n[None, :],
                        mask=(heads < N_HEADS)[:, None] & n_mask[None, :], other=0.0,
                        cache_modifier=".cg")                                    # (BH, BN)
        residual = tl.load(res_ptr + offs_n, mask=n_mask, other=0.0).to(tl.float32)
        total = tl.sum(parts, axis=0) + residual
        tl.store(count_ptr, 0)  # zero for the next launch on this stream
        tl.store(y_ptr + offs_n, total.to(y_ptr.dtype.element_ty), mask=n_mask)


def head_project(q, k_layer, v_layer, lengths, wo, residual, out, num_warps=8, block_t=64,
                 prefetch_tiles=2):
    """out (1, N) = residual + attention(q) @ wo.T for one sequence (slot 0)."""
    _, n_heads, head_dim = q.shape
    n_kv_heads, max_seq = k_layer.shape[1], k_layer.shape[2]
    n = wo.shape[0]
    partials, counters = split_workspace(q.device, n_heads * n, 1)
    pdl = supports_pdl(q.device) and use_pdl(q.device, (wo, lengths, residual))
    line_elements = 128 // q.element_size()
    compiled = _head_project_kernel[(n_heads,)](
        out, q, q.stride(1), k_layer, v_layer, k_layer.stride(1), k_layer.stride(2), lengths,
        wo, wo.stride(0), residual, partials, counters, n,
        head_dim ** -0.5 * math.log2(math.e), max_seq, N_HEADS=n_heads,
        GROUP=n_heads // n_kv_heads, HEAD_DIM=head_dim, PDL=pdl,
        BLOCK_N=triton.next_power_of_2(n), BLOCK_H=triton.next_power_of_2(n_heads),
        BLOCK_T=block_t, BLOCK_D=max(16, triton.next_power_of_2(head_dim)),
        PREFETCH_TILES=prefetch_tiles,
        ROW_LINES=triton.next_power_of_2(triton.cdiv(head_dim, line_elements)),
        LINE_ELEMENTS=line_elements, num_warps=num_warps, num_stages=2,
        **({"launch_pdl": True} if pdl else {}))
    launched(q.device, pdl, (out, partials, counters))
    if q.is_cuda:
        SPILLS[(num_warps, block_t)] = (compiled.n_regs, compiled.n_spills)
    return out


SPILLS: dict[tuple[int, int], tuple[int, int]] = {}  # (warps, tile) -> (registers, spills)


def fused_decode(**launch):
    """Llama.decode (tp=1, batch 1) with attention and the output projection in one kernel."""
    @torch.no_grad()
    def decode(self, tokens, positions, cache):
        c = self.config
        x = torch.empty((1, c.dim), dtype=self.dtype, device=self.device)
        lengths = torch.empty_like(positions)
        decode_inputs(tokens, positions, self.embed, hidden_out=x, lengths_out=lengths)
        attn_norms = [layer.attn_norm for layer in self.layers[1:]] + [self.norm]
        for index, layer in enumerate(self.layers):
            k_layer, v_layer = cache.k[index], cache.v[index]
            q = tg.linear_qkv(x, layer.wqkv, layer.bqkv, norm_weight=layer.attn_norm,
                              norm_eps=c.norm_eps, cos=cache.cos, sin=cache.sin,
                              positions=positions, slots=cache.slots[:1], k_cache=k_layer,
                              v_cache=v_layer, n_heads=self.local.n_heads)
            x = head_project(q, k_layer, v_layer, lengths, layer.wo, x, torch.empty_like(x),
                             **launch)
            hidden = tg.linear(x, layer.w_gate_up, layer.b_gate_up, norm_weight=layer.mlp_norm,
                               norm_eps=c.norm_eps, activation="swiglu")
            x = tg.linear(hidden, layer.w_down, layer.b_down, residual=x,
                          next_norm_weight=attn_norms[index])
        return self._lm_head(x)
    return decode


def check(config: LlamaConfig, device: str, contexts) -> None:
    """The kernel against tg.decode_attention + tg.linear on layer 0, poisoned output."""
    model = Llama(config, dtype=torch.bfloat16, device=device)
    cache = model.new_cache(1, max(contexts))
    cache.k.normal_()
    cache.v.normal_()
    layer = model.layers[0]
    for context in contexts:
        q = torch.randn(1, config.n_heads, config.head_dim, dtype=torch.bfloat16, device=device)
        x = torch.randn(1, config.dim, dtype=torch.bfloat16, device=device)
        lengths = torch.tensor([context], device=device)
        attn = tg.decode_attention(q, cache.k[0], cache.v[0], lengths).view(1, -1)
        ref = tg.linear(attn, layer.wo, residual=x).double()
        out = torch.full_like(x, float("nan"))
        head_project(q, cache.k[0], cache.v[0], lengths, layer.wo, x, out)
        error = ((out.double() - ref).abs().max() / ref.abs().max()).item()
        print(f"context {context}: relative error against the library's kernels {error:.2e}",
              flush=True)
        assert error < 2e-2, error


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="qwen2-0.5b")
    parser.add_argument("--positions", default="255,383,1023")
    parser.add_argument("--check-only", action="store_true",
                        help="a small model through the interpreter, no timing")
    args = parser.parse_args()
    if args.check_only:
        tiny = LlamaConfig(vocab_size=64, dim=96, n_layers=1, n_heads=6, n_kv_heads=2,
                           ffn_dim=128)
        check(tiny, "cpu", (1, 37, 130))
        return
    config = LlamaConfig.from_hf(hf_config(args.model))
    positions_list = [int(p) for p in args.positions.split(",")]
    check(config, "cuda", [p + 1 for p in positions_list])
    model = Llama(config, dtype=torch.bfloat16, device="cuda")
    cache = model.new_cache(1, 2048)
    cache.k.normal_()
    cache.v.normal_()
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    variants = {"library": Llama.decode}
    for warps, block_t in ((8, 64), (8, 128), (4, 64)):
        variants[f"head-project w{warps} T{block_t}"] = fused_decode(num_warps=warps,
                                                                     block_t=block_t)
    for position in positions_list:
        positions = torch.full((1,), position, device="cuda")
        graphs, base_logits = {}, None
        for label, decode in variants.items():
            graphs[label] = tg.capture(functools.partial(decode, model), tokens, positions,
                                       cache, restore_state=False)
            logits = graphs[label].replay().float()
            if base_logits is None:
                base_logits = logits.clone()
            error = ((logits - base_logits).norm() / base_logits.norm()).item()
            print(f"  {label:24s} logits' relative difference {error:.2e}", flush=True)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for rnd in range(2):
            for label, graph in graphs.items():
                times = []
                for _ in range(3):
                    start.record()
                    for _ in range(300):
                        graph.replay()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop) / 300)
                print(f"{args.model} b1 @{position} {label:24s} {min(times):.4f} ms "
                      f"(round {rnd})", flush=True)
        print(f"registers, spills by (warps, tile): {SPILLS}", flush=True)
        del graphs


if __name__ == "__main__":
    main()
