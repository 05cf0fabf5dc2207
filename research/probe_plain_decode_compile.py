"""Which attention the plain-autotune peer should use: Llama.plain_decode's step under
torch.compile(mode="max-autotune") with gpt-fast's inductor settings, with one of three
attentions over the whole cache (results/2026-11-23-session24/plain-decode-attentions.txt).

    PYTHONPATH=src python3 research/probe_plain_decode_compile.py sdpa-repeat|sdpa-group|math

    sdpa-repeat  gpt-fast's: kv heads repeated for the q heads, SDPA of one query token
    sdpa-group   the q heads of a kv head as its query rows (cuDNN took 32 us a layer)
    math         scores, masked softmax and the product written out

This copy writes the cache through per-layer views (cache.k[index][...] = k), as the first
plain_decode did; inductor then copies the whole cache back every step, which
Llama.plain_decode now avoids with one index_put on the whole cache.
"""
import sys, time, collections
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from tilegraph.models.hf_presets import hf_config
from tilegraph.models.llama import Llama, LlamaConfig, _rms_norm, _swiglu

attention = sys.argv[1]
name = sys.argv[2] if len(sys.argv) > 2 else "tinyllama"
torch._inductor.config.coordinate_descent_tuning = True
torch._inductor.config.triton.unique_kernel_names = True
torch._inductor.config.fx_graph_cache = True
config = LlamaConfig.from_hf(hf_config(name))
model = Llama(config, dtype=torch.bfloat16, device="cuda")
cache = model.new_cache(1, 2048)
for t in (cache.k, cache.v, cache.cos, cache.sin):
    torch._dynamo.mark_static_address(t)


def decode(tokens, positions, cache):
    self, c = model, model.config
    local = self.local
    rows, group = tokens.shape[0], local.n_heads // local.n_kv_heads
    slots = cache.slots[:rows]
    cos, sin = cache.cos[positions], cache.sin[positions]
    visible = torch.arange(cache.max_seq, device=tokens.device) <= positions[:, None]
    x = F.embedding(tokens, self.embed)
    for index, layer in enumerate(self.layers):
        qkv = F.linear(_rms_norm(x, layer.attn_norm, c.norm_eps), layer.wqkv, layer.bqkv)
        q, k, v = self._split_heads(qkv, cos, sin)
        k_layer, v_layer = cache.k[index], cache.v[index]
        k_layer[slots, :, positions] = k
        v_layer[slots, :, positions] = v
        keys, values = k_layer[:rows], v_layer[:rows]
        if attention == "sdpa-repeat":   # gpt-fast
            keys = keys.repeat_interleave(group, dim=1)
            values = values.repeat_interleave(group, dim=1)
            attn = F.scaled_dot_product_attention(q[:, :, None], keys, values,
                                                  attn_mask=visible[:, None, None, :])
        elif attention == "sdpa-group":
            attn = F.scaled_dot_product_attention(
                q.view(rows, local.n_kv_heads, group, c.head_dim), keys, values,
                attn_mask=visible[:, None, None, :])
        else:  # math
            qg = q.view(rows, local.n_kv_heads, group, c.head_dim).float()
            scores = qg @ keys.float().transpose(-1, -2) * c.head_dim ** -0.5
            scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
            attn = (scores.softmax(-1) @ values.float()).to(q.dtype)
        attn = attn.reshape(rows, local.q_dim)
        x = x + F.linear(attn, layer.wo, layer.bo)
        gate_up = F.linear(_rms_norm(x, layer.mlp_norm, c.norm_eps), layer.w_gate_up,
                           layer.b_gate_up)
        x = x + F.linear(_swiglu(gate_up), layer.w_down, layer.b_down)
    return F.linear(_rms_norm(x, self.norm, c.norm_eps), self.lm_head)


tokens = torch.randint(0, config.vocab_size, (1,), device="cuda")
positions = torch.full((1,), 200, device="cuda")
with torch.no_grad():
    ref = model.plain_decode(tokens, positions, cache).float()
    step = torch.compile(decode, mode="max-autotune", fullgraph=True)
    t0 = time.perf_counter()
    for _ in range(4):
        out = step(tokens, positions, cache)
    torch.cuda.synchronize()
    print(attention, name, "compile+4 steps", round(time.perf_counter() - t0, 1), "s",
          "rel err vs eager plain", ((out.float() - ref).norm() / ref.norm()).item(), flush=True)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(20):
        step(tokens, positions, cache)
    torch.cuda.synchronize()
    s.record()
    for _ in range(100):
        step(tokens, positions, cache)
    e.record(); torch.cuda.synchronize()
    print(attention, name, "ms/step", s.elapsed_time(e) / 100, flush=True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step(tokens, positions, cache); torch.cuda.synchronize()
per = collections.defaultdict(list)
for ev in prof.events():
    if ev.device_type == torch.autograd.DeviceType.CUDA:
        per[ev.name[:80]].append(ev.device_time)
tot = sum(sum(v) for v in per.values())
print(attention, "kernels", sum(len(v) for v in per.values()), "kernel time us", round(tot, 1))
for n, v in sorted(per.items(), key=lambda kv: -sum(kv[1]))[:8]:
    print(f"  {sum(v):8.1f} us {len(v):4d} x  {n}")
