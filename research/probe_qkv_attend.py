"""Attention at one row run by the q|k|v projection's last program of each kv head, so that a
layer has four kernels and attention's chain no kernel boundary before it.

    PYTHONPATH=src python3 research/probe_qkv_attend.py --check          # CPU or GPU: tokens
    PYTHONPATH=src python3 research/probe_qkv_attend.py --model tinyllama --context 130,256,384

The one-row q|k|v GEMV (tg.linear_qkv's kernel and config) launches as always; after its
block's rows are stored (q, or k and v into the cache), each program counts itself in at its
kv head (an acq_rel atomic); the last of a kv head's programs reads that head's q heads and
its cache, 0..length - 1, from L2 (every program of the head put a few of its positions there
before its wait) and writes the attention output, which the output projection reads after
its wait as before. Session 75's profile: TinyLlama's attention exposed 4.3 us a layer at
256 positions for ~0.1 us of cache, Qwen2-0.5B's 4.35. The question: how much of that is the
boundary (the attention kernel's wait, its q round trip) rather than the attention itself.

The other way (FusedAttentionLlama.spin_blocks > 0): N_KV_HEADS * spin_blocks more programs
after the GEMV's, each of a block of a kv head's q heads, read their first tile of keys and
values into registers while the GEMV runs and spin on the kv head's count.

Steps are captured with the library's layers (every step candidate of tg.Generator's tuner
in turn) and with these, at each --context; prints ms a step (300 replays, best of 3) and the
largest logit difference between each fused way and the library. Session 76: both ways 3-11%
slower than the library's preloading attention (notes/models.md).
"""

from __future__ import annotations

import argparse
import math

import torch

import tilegraph as tg  # first: sets the interpreter up on a machine without a GPU
import triton
import triton.language as tl
from tilegraph._runtime import INTERPRET
from tilegraph.kernels import decode_attention as attention
from tilegraph.kernels import decode_plan
from tilegraph.kernels._matvec import _gemv_block, _gemv_tiles, weight_alignment
from tilegraph.kernels._pdl import ENABLED as PDL_ENABLED
from tilegraph.kernels._pdl import launched
from tilegraph.kernels._launch import supports_pdl
from tilegraph.kernels._rotary_store import rotary_args
from tilegraph.kernels.decode_inputs import decode_inputs
from tilegraph.models.llama import Llama, LlamaConfig


@triton.jit
def _attend_and_store(q, k_ptr, v_ptr, kv_offsets, stride_cp, d_mask, start, length, qk_scale,
                      m, denom, acc, out_ptrs, out_mask, BLOCK_T: tl.constexpr,
                      DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """The online softmax from state (m, denom, acc) over positions [start, length), tiles
    of keys and values read .cg (rows other programs of this kernel wrote), and the result
    stored at out_ptrs."""
    offs_t = tl.arange(0, BLOCK_T)
    for t0 in range(start, length, BLOCK_T):
        t_mask = (t0 + offs_t) < length
        kv_mask = t_mask[:, None] & d_mask[None, :]
        k = tl.load(k_ptr + kv_offsets + t0 * stride_cp, mask=kv_mask, other=0.0,
                    cache_modifier=".cg")
        v = tl.load(v_ptr + kv_offsets + t0 * stride_cp, mask=kv_mask, other=0.0,
                    cache_modifier=".cg")
        m, denom, acc = attention._attend_tile(q, k, v, t_mask, m, denom, acc, qk_scale,
                                               DOT_PRECISION, UPCAST_DOT)
    result = tl.where(denom[:, None] > 0, acc / denom[:, None], 0.0)
    tl.store(out_ptrs, result.to(out_ptrs.dtype.element_ty), mask=out_mask)


@triton.jit
def _qkv_attend_kernel(y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr, rotary, N, K, eps,
                       out_ptr, lengths_ptr, slots_ptr, count_ptr, k_ptr, v_ptr, stride_cb,
                       stride_ch, stride_cp, qk_scale, max_seq,
                       HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, PDL: tl.constexpr,
                       BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, CHUNK: tl.constexpr,
                       TAIL: tl.constexpr, ALIGN: tl.constexpr,
                       RELEASE_AFTER_INPUTS: tl.constexpr,
                       N_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_DIM: tl.constexpr,
                       BLOCK_G: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                       PREFETCH_ROWS: tl.constexpr, ROW_LINES: tl.constexpr,
                       LINE_ELEMENTS: tl.constexpr, DOT_PRECISION: tl.constexpr,
                       UPCAST_DOT: tl.constexpr):
    """_gemv_kernel's one-row split launch with the rotary epilogue, then, by the last program
    of each kv head to finish: out[h] = sum_t softmax_t(q_h . k_t * scale) v_t over positions
    0..lengths[0] - 1 of slot slots[0], for that kv head's GROUP q heads."""
    K = K * ALIGN
    stride_wn = stride_wn * ALIGN
    block = tl.program_id(0)
    q_dim: tl.constexpr = N_KV_HEADS * GROUP * HEAD_DIM
    row0 = block * BLOCK_N                      # BLOCK_N divides HEAD_DIM: one head a block
    in_q = row0 < q_dim
    kv_rows = row0 - q_dim
    kv_head = tl.where(in_q, row0 // (GROUP * HEAD_DIM), (kv_rows // HEAD_DIM) % N_KV_HEADS)
    # the block's place among its kv head's (GROUP + 2) * HEAD_DIM / BLOCK_N blocks
    q_blocks: tl.constexpr = GROUP * HEAD_DIM // BLOCK_N
    head_blocks: tl.constexpr = HEAD_DIM // BLOCK_N
    rank = tl.where(in_q, (row0 % (GROUP * HEAD_DIM)) // BLOCK_N,
                    q_blocks + (kv_rows // (N_KV_HEADS * HEAD_DIM)) * head_blocks
                    + (kv_rows % HEAD_DIM) // BLOCK_N)
    cols = tl.arange(0, SPLIT)[None, :, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
    w, w_tail = _gemv_tiles(w_ptr, stride_wn, block, N, K, cols, BLOCK_N, SPLIT, CHUNK, TAIL)
    slot = tl.load(slots_ptr).to(tl.int64)
    kv_base = slot * stride_cb + kv_head * stride_ch
    if PDL:
        # A hint only (L2 is coherent): PREFETCH_ROWS of the head's cached positions into L2
        # for its last program. The length may not be final yet (the kernel before may
        # write it); it only bounds the addresses.
        length = tl.minimum(tl.maximum(tl.load(lengths_ptr).to(tl.int32), 1), max_seq)
        attention._prefetch_tile(k_ptr + kv_base, stride_cp, rank * PREFETCH_ROWS, length,
                                 HEAD_DIM, PREFETCH_ROWS, ROW_LINES, LINE_ELEMENTS)
        attention._prefetch_tile(v_ptr + kv_base, stride_cp, rank * PREFETCH_ROWS, length,
                                 HEAD_DIM, PREFETCH_ROWS, ROW_LINES, LINE_ELEMENTS)
        tl.extra.cuda.gdc_wait()
        if not RELEASE_AFTER_INPUTS:
            tl.extra.cuda.gdc_launch_dependents()
    _gemv_block(w, w_tail, block, y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr,
                y_ptr, rotary, N, K, eps, cols, HAS_NORM, HAS_BIAS, False, "rotary", BLOCK_N,
                SPLIT, CHUNK, TAIL, PDL and RELEASE_AFTER_INPUTS)
    tl.debug_barrier()  # every thread's q, k and v are out before the count says so
    arrived = tl.atomic_add(count_ptr + kv_head, 1, sem="acq_rel")
    if arrived == (GROUP + 2) * head_blocks - 1:
        tl.store(count_ptr + kv_head, 0)  # zero for the next launch on this stream
        length = tl.minimum(tl.maximum(tl.load(lengths_ptr).to(tl.int32), 0), max_seq)
        offs_g = tl.arange(0, BLOCK_G)
        offs_d = tl.arange(0, BLOCK_D)
        g_mask = offs_g < GROUP
        d_mask = offs_d < HEAD_DIM
        heads = kv_head * GROUP + offs_g
        # .cg: written by other programs of this kernel, never through this SM's L1
        q = tl.load(y_ptr + heads[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=g_mask[:, None] & d_mask[None, :], other=0.0, cache_modifier=".cg")
        if UPCAST_DOT:
            q = q.to(tl.float32)
        m = tl.full([BLOCK_G], float("-inf"), tl.float32)
        denom = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
        offs_t = tl.arange(0, BLOCK_T)
        kv_offsets = kv_base + offs_t[:, None] * stride_cp + offs_d[None, :]
        _attend_and_store(q, k_ptr, v_ptr, kv_offsets, stride_cp, d_mask, 0, length,
                          qk_scale, m, denom, acc, out_ptr + heads[:, None] * HEAD_DIM
                          + offs_d[None, :], g_mask[:, None] & d_mask[None, :], BLOCK_T,
                          DOT_PRECISION, UPCAST_DOT)


@triton.jit
def _qkv_attend_spin_kernel(y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr, rotary, N, K,
                            eps, out_ptr, lengths_ptr, slots_ptr, count_ptr, k_ptr, v_ptr,
                            stride_cb, stride_ch, stride_cp, qk_scale, max_seq,
                            HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, PDL: tl.constexpr,
                            BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, CHUNK: tl.constexpr,
                            TAIL: tl.constexpr, ALIGN: tl.constexpr,
                            RELEASE_AFTER_INPUTS: tl.constexpr,
                            N_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
                            HEAD_DIM: tl.constexpr, HEAD_BLOCKS: tl.constexpr,
                            GROUP_BLOCK: tl.constexpr, BLOCK_G: tl.constexpr,
                            BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
                            DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr):
    """The GEMV's programs as _qkv_attend_kernel's, counting in at their kv head; after them
    N_KV_HEADS * HEAD_BLOCKS attention programs, each of GROUP_BLOCK q heads of a kv head,
    which read their first BLOCK_T cached positions into registers after the wait (the
    lengths are then final) while the GEMV runs, spin until their kv head's count is full,
    then read q and the new row. Program ids order the dispatch: every GEMV program starts
    before any attention program, so none waits on a program that has no SM."""
    K = K * ALIGN
    stride_wn = stride_wn * ALIGN
    pid = tl.program_id(0)
    gemv_blocks = tl.cdiv(N, BLOCK_N)
    head_blocks: tl.constexpr = HEAD_DIM // BLOCK_N
    expected: tl.constexpr = (GROUP + 2) * head_blocks
    if pid < gemv_blocks:
        q_dim: tl.constexpr = N_KV_HEADS * GROUP * HEAD_DIM
        row0 = pid * BLOCK_N
        kv_head = tl.where(row0 < q_dim, row0 // (GROUP * HEAD_DIM),
                           ((row0 - q_dim) // HEAD_DIM) % N_KV_HEADS)
        cols = tl.arange(0, SPLIT)[None, :, None] * CHUNK + tl.arange(0, CHUNK)[None, None, :]
        w, w_tail = _gemv_tiles(w_ptr, stride_wn, pid, N, K, cols, BLOCK_N, SPLIT, CHUNK, TAIL)
        if PDL:
            tl.extra.cuda.gdc_wait()
            if not RELEASE_AFTER_INPUTS:
                tl.extra.cuda.gdc_launch_dependents()
        _gemv_block(w, w_tail, pid, y_ptr, x_ptr, w_ptr, stride_wn, norm_w_ptr, bias_ptr,
                    y_ptr, rotary, N, K, eps, cols, HAS_NORM, HAS_BIAS, False, "rotary",
                    BLOCK_N, SPLIT, CHUNK, TAIL, PDL and RELEASE_AFTER_INPUTS)
        tl.debug_barrier()  # every thread's q, k and v are out before the count says so
        tl.atomic_add(count_ptr + kv_head, 1, sem="release", scope="gpu")
    else:
        unit = pid - gemv_blocks
        kv_head = unit // HEAD_BLOCKS
        head0 = (unit % HEAD_BLOCKS) * GROUP_BLOCK
        slot = tl.load(slots_ptr).to(tl.int64)
        kv_base = slot * stride_cb + kv_head * stride_ch
        if PDL:
            tl.extra.cuda.gdc_wait()  # the lengths are final
            tl.extra.cuda.gdc_launch_dependents()
        length = tl.minimum(tl.maximum(tl.load(lengths_ptr).to(tl.int32), 0), max_seq)
        offs_t = tl.arange(0, BLOCK_T)
        offs_d = tl.arange(0, BLOCK_D)
        d_mask = offs_d < HEAD_DIM
        kv_offsets = kv_base + offs_t[:, None] * stride_cp + offs_d[None, :]
        first_mask = (offs_t < length)[:, None] & d_mask[None, :]
        k_first = tl.load(k_ptr + kv_offsets, mask=first_mask, other=0.0)
        v_first = tl.load(v_ptr + kv_offsets, mask=first_mask, other=0.0)
        seen = tl.atomic_add(count_ptr + kv_head, 0, sem="acquire", scope="gpu")
        while seen < expected:
            seen = tl.atomic_add(count_ptr + kv_head, 0, sem="acquire", scope="gpu")
        # the last of the kv head's attention programs to see the count zeroes both counts
        if tl.atomic_add(count_ptr + N_KV_HEADS + kv_head, 1, sem="relaxed") == HEAD_BLOCKS - 1:
            tl.store(count_ptr + kv_head, 0)
            tl.store(count_ptr + N_KV_HEADS + kv_head, 0)
        offs_g = tl.arange(0, BLOCK_G)
        g_mask = (offs_g < GROUP_BLOCK) & (head0 + offs_g < GROUP)
        heads = kv_head * GROUP + head0 + offs_g
        q = tl.load(y_ptr + heads[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=g_mask[:, None] & d_mask[None, :], other=0.0, cache_modifier=".cg")
        # the new row, written by the GEMV programs: read again where it is in the first tile
        new_row = (offs_t == length - 1)[:, None] & d_mask[None, :]
        k_first = tl.load(k_ptr + kv_offsets, mask=new_row, other=k_first, cache_modifier=".cg")
        v_first = tl.load(v_ptr + kv_offsets, mask=new_row, other=v_first, cache_modifier=".cg")
        if UPCAST_DOT:
            q = q.to(tl.float32)
        m = tl.full([BLOCK_G], float("-inf"), tl.float32)
        denom = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
        m, denom, acc = attention._attend_tile(q, k_first, v_first, offs_t < length, m, denom,
                                               acc, qk_scale, DOT_PRECISION, UPCAST_DOT)
        _attend_and_store(q, k_ptr, v_ptr, kv_offsets, stride_cp, d_mask, BLOCK_T, length,
                          qk_scale, m, denom, acc, out_ptr + heads[:, None] * HEAD_DIM
                          + offs_d[None, :], g_mask[:, None] & d_mask[None, :], BLOCK_T,
                          DOT_PRECISION, UPCAST_DOT)


def qkv_attend(x, weight, bias, norm_weight, eps, cache_k, cache_v, cos, sin, positions, slots,
               lengths, n_heads: int, q_out, out, counters, band: int, spin_blocks: int = 0
               ) -> torch.Tensor:
    """out (1, n_heads * head_dim) = attention of rotary(q) over the cache after the q|k|v
    projection has written this token's k and v; q_out receives q. band: the longest length
    the graph serves (sets the prefetch's share a program). spin_blocks > 0: the spinning
    attention programs instead, that many a kv head (counters: 2 a kv head)."""
    rows, K = x.shape
    N = weight.shape[0]
    _, kv_heads, max_seq, head_dim = cache_k.shape
    config = dict(decode_plan.plan(rows, N, K, weight.dtype, x.device, fused=True).config)
    if rows != 1 or config.get("PROGRAMS_PER_SM") or head_dim % config["BLOCK_N"]:
        raise ValueError(f"not a one-row split GEMV of whole heads: {config}")
    group = n_heads // kv_heads
    blocks = (group + 2) * head_dim // config["BLOCK_N"]
    pdl = PDL_ENABLED and supports_pdl(x.device)
    align = weight_alignment(weight.element_size(), K, weight.stride(0))
    line_elements = 128 // x.element_size()
    config.setdefault("TAIL", 0)
    config.setdefault("RELEASE_AFTER_INPUTS", False)
    if spin_blocks:
        group_block = triton.cdiv(group, spin_blocks)
        _qkv_attend_spin_kernel[(triton.cdiv(N, config["BLOCK_N"]) + kv_heads * spin_blocks,)](
            q_out, x, weight, weight.stride(0) // align, norm_weight, bias,
            rotary_args(cache_k, cache_v, cos, sin, positions, slots, n_heads), N, K // align,
            eps, out, lengths, slots, counters, cache_k, cache_v, cache_k.stride(0),
            cache_k.stride(1), cache_k.stride(2), math.log2(math.e) / math.sqrt(head_dim),
            max_seq, HAS_NORM=norm_weight is not None, HAS_BIAS=bias is not None, PDL=pdl,
            ALIGN=align, N_KV_HEADS=kv_heads, GROUP=group, HEAD_DIM=head_dim,
            HEAD_BLOCKS=spin_blocks, GROUP_BLOCK=group_block,
            BLOCK_G=max(16, triton.next_power_of_2(group_block)),
            BLOCK_T=128 if head_dim <= 64 else 64, BLOCK_D=triton.next_power_of_2(head_dim),
            DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
            UPCAST_DOT=INTERPRET and x.dtype == torch.bfloat16, **config,
            **({"launch_pdl": True} if pdl else {}))
        launched(x.device, pdl, (q_out, out, cache_k, cache_v, counters))
        return out
    _qkv_attend_kernel[(triton.cdiv(N, config["BLOCK_N"]),)](
        q_out, x, weight, weight.stride(0) // align, norm_weight, bias,
        rotary_args(cache_k, cache_v, cos, sin, positions, slots, n_heads), N, K // align, eps,
        out, lengths, slots, counters, cache_k, cache_v, cache_k.stride(0), cache_k.stride(1),
        cache_k.stride(2), math.log2(math.e) / math.sqrt(head_dim), max_seq,
        HAS_NORM=norm_weight is not None, HAS_BIAS=bias is not None, PDL=pdl,
        ALIGN=align, N_KV_HEADS=kv_heads, GROUP=group, HEAD_DIM=head_dim,
        BLOCK_G=max(16, triton.next_power_of_2(group)), BLOCK_T=128 if head_dim <= 64 else 64,
        BLOCK_D=triton.next_power_of_2(head_dim),
        PREFETCH_ROWS=triton.next_power_of_2(triton.cdiv(band, blocks)),
        ROW_LINES=triton.next_power_of_2(triton.cdiv(head_dim, line_elements)),
        LINE_ELEMENTS=line_elements,
        DOT_PRECISION="ieee" if x.dtype == torch.float32 else "tf32",
        UPCAST_DOT=INTERPRET and x.dtype == torch.bfloat16, **config,
        **({"launch_pdl": True} if pdl else {}))
    launched(x.device, pdl, (q_out, out, cache_k, cache_v, counters))
    return out


class FusedAttentionLlama(Llama):
    """Llama whose one-row decode runs q|k|v and attention in one kernel (qkv_attend)."""

    band = 2048
    spin_blocks = 0

    @torch.no_grad()
    def decode(self, tokens, positions, cache):
        rows = tokens.shape[0]
        c = self.config
        positions = positions.contiguous()
        x = torch.empty((rows, c.dim), dtype=self.dtype, device=self.device)
        lengths = torch.empty_like(positions)
        decode_inputs(tokens.contiguous(), positions, self.embed, hidden_out=x,
                      lengths_out=lengths)
        slots = cache.slots[:rows]
        q = torch.empty((rows, c.n_heads * c.head_dim), dtype=self.dtype, device=self.device)
        attn = torch.empty_like(q)
        counters = getattr(self, "_counters", None)
        if counters is None or counters.device != x.device:
            counters = self._counters = torch.zeros(2 * c.n_kv_heads, dtype=torch.int32,
                                                    device=x.device)
        attn_norms = [layer.attn_norm for layer in self.layers[1:]] + [self.norm]
        for index, layer in enumerate(self.layers):
            qkv_attend(x, layer.wqkv, layer.bqkv, layer.attn_norm, c.norm_eps, cache.k[index],
                       cache.v[index], cache.cos, cache.sin, positions, slots, lengths,
                       c.n_heads, q, attn, counters, self.band, self.spin_blocks)
            x = tg.linear(attn, layer.wo, layer.bo, residual=x,
                          next_norm_weight=layer.mlp_norm)
            hidden = tg.linear(x, layer.w_gate_up, layer.b_gate_up, norm_weight=layer.mlp_norm,
                               norm_eps=c.norm_eps, activation="swiglu")
            x = tg.linear(hidden, layer.w_down, layer.b_down, residual=x,
                          next_norm_weight=attn_norms[index])
        return self._lm_head(x)


def check(device: str) -> None:
    """Tokens of a small random model decoded the library's way and each fused way from one
    prompt must agree."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, dim=128, n_layers=2, n_heads=4, n_kv_heads=2,
                         ffn_dim=160, head_dim=64, qkv_bias=True)
    dtype = torch.bfloat16   # the one-row split GEMV is the 16-bit kernel
    library = Llama(config, dtype=dtype, device=device)
    with torch.no_grad():
        for p in library.parameters():
            p.normal_(0, 0.2)
    prompt = torch.randint(0, config.vocab_size, (1, 150), device=device)

    def decoded(model) -> list[torch.Tensor]:
        cache = model.new_cache(1, 256)
        token = model.prefill(prompt, cache).argmax(-1)
        got = []
        for position in range(150, 160):   # past one tile of 128 positions
            logits = model.decode(token, torch.tensor([position], device=device), cache)
            got.append(logits.float())
            token = logits.argmax(-1)
        return got

    reference = decoded(library)
    for spin_blocks in (0, 1, 2):
        fused = FusedAttentionLlama(config, dtype=dtype, device=device)
        fused.load_state_dict(library.state_dict())
        fused.spin_blocks = spin_blocks
        worst = max((a - b).abs().max().item()
                    for a, b in zip(decoded(fused), reference, strict=True))
        print(f"spin_blocks {spin_blocks}: largest logit difference over 10 steps: "
              f"{worst:.3e}")
        assert worst < 3e-2, worst


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="tinyllama")
    parser.add_argument("--context", default="130,256,384")
    parser.add_argument("--max-seq", type=int, default=2048)
    parser.add_argument("--band", type=int, default=384, help="the graph's longest length")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        check("cuda" if torch.cuda.is_available() else "cpu")
        return
    from tilegraph.models.hf_presets import hf_config
    config = LlamaConfig.from_hf(hf_config(args.model))
    library = Llama(config, dtype=torch.bfloat16, device="cuda")
    fused = FusedAttentionLlama(config, dtype=torch.bfloat16, device="cuda")
    fused.load_state_dict(library.state_dict(), strict=False)
    fused.band = args.band
    cache = library.new_cache(1, args.max_seq)
    window = cache.window(args.band)
    tokens = torch.zeros(1, dtype=torch.int64, device="cuda")
    positions = torch.zeros(1, dtype=torch.int64, device="cuda")
    contexts = [int(c) for c in args.context.split(",")]
    group = config.n_heads // config.n_kv_heads
    key = attention.attention_key(1, config.n_kv_heads, group, config.head_dim, args.band,
                                  torch.bfloat16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    facts = attention.device_facts(torch.bfloat16, torch.device("cuda"))

    def timed(graph) -> list[float]:
        result = []
        for context in contexts:
            positions.fill_(context - 1)
            start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            best = math.inf
            for _ in range(3):
                start.record()
                for _ in range(300):
                    graph.replay()
                stop.record()
                stop.synchronize()
                best = min(best, start.elapsed_time(stop) / 300)
            result.append(best)
        return result

    def logits_at(model, context: int) -> torch.Tensor:
        positions.fill_(context - 1)
        return model.decode(tokens, positions, window).float()

    print(f"{args.model} b1, band {args.band}; ms a step at contexts {contexts}", flush=True)
    rule = attention.attention_config(1, config.n_kv_heads, group, config.head_dim,
                                      args.band, sms, **facts)
    candidates = attention.step_candidates(1, config.n_kv_heads, group, config.head_dim,
                                           args.band, sms, rule, **facts)
    rows = [("library, " + ", ".join(f"{k}={v}" for k, v in sorted(c.items())
                                     if k in ("HEAD_BLOCKS", "SPLITS", "PRELOAD",
                                              "PRELOAD_TILES", "num_warps")), c)
            for c in candidates]
    spins = [(f"spinning, {n} blocks a kv head", n) for n in (1, 2, 4) if n <= group]
    for name, launch in [*rows, ("fused", 0), *spins, *rows[:1], ("fused", 0), *spins[:2]]:
        if isinstance(launch, dict):
            attention.tuned.record(key, launch)
        else:
            fused.spin_blocks = launch
        model = library if isinstance(launch, dict) else fused
        graph = tg.capture(model.decode, tokens, positions, window, restore_state=False)
        ms = timed(graph)
        print(f"  {name[:70]:70s} " + " ".join(f"{t:.4f}" for t in ms), flush=True)
    for spin_blocks in (0, *(n for _, n in spins)):
        fused.spin_blocks = spin_blocks
        differences = [(logits_at(library, c) - logits_at(fused, c)).abs().max().item()
                       for c in contexts]
        print(f"  largest logit difference library vs fused (spin_blocks {spin_blocks}): "
              + " ".join(f"{d:.3e}" for d in differences))


if __name__ == "__main__":
    main()
