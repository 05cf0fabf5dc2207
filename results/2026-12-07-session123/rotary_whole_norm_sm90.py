"""tg.rotary_qkv's kernel with q and k each normalised as a whole (OLMo 2's norms, session
123) and with head norms after the rotation (Hunyuan's) compiled for sm_90 by Triton 3.6
without a GPU, beside the per-head norm before it (Qwen3's) and no norm: that it compiles,
its registers and spills. Run as session 119's
added_loads_sm90.py is:

    S36=/tmp/v36/lib/python3.11/site-packages
    PATH=$S36/triton/backends/nvidia/bin:$PATH TRITON_INTERPRET=0 \\
      PYTHONPATH=$S36:src:.venv/lib/python3.11/site-packages /tmp/v36/bin/python THIS_FILE
"""
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilegraph.kernels.rotary import _rotary_qkv_kernel

TYPES = {"cos_ptr": "*fp32", "sin_ptr": "*fp32", "positions_ptr": "*i64",
         "slots_ptr": "*i64", "eps": "fp32"}


def compile_sm90(constants, num_warps):
    sig, attrs = {}, {}
    for i, name in enumerate(_rotary_qkv_kernel.arg_names):
        if name in constants:
            sig[name] = "constexpr"
            continue
        sig[name] = TYPES.get(name, "*bf16" if name.endswith("_ptr") else "i32")
        if name != "eps":
            attrs[(i,)] = [["tt.divisibility", 16]]
    return triton.compile(ASTSource(_rotary_qkv_kernel, sig, constants, attrs),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": 1})


def resources(compiled) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        usage = subprocess.run(["cuobjdump", "--dump-resource-usage", f.name],
                               capture_output=True, text=True).stdout
    line = next(u for u in usage.splitlines() if "REG:" in u)
    registers, stack = (re.search(field + r":(\d+)", line).group(1) for field in ("REG", "STACK"))
    return f"registers {registers:>3s}  stack {stack:>3s}"


# OLMo 2 1B's and 7B's heads, OLMo 2 32B's (40 q heads, 8 kv), a GQA shape of 64 dims
for head_dim, heads, kv_heads in ((128, 16, 16), (128, 32, 32), (128, 40, 8), (64, 32, 8)):
    for norm, q_whole, k_whole, after in ((False, 0, 0, False), (True, 0, 0, False),
                                          (True, 0, 0, True), (True, 1, 1, False),
                                          (True, 1, 0, False)):
        q_tile = triton.next_power_of_2(heads) * q_whole
        k_tile = triton.next_power_of_2(kv_heads) * k_whole
        warps = min(8, max(1, max(q_tile, k_tile) * head_dim // 1024))   # as launched
        consts = dict(N_HEADS=heads, N_KV_HEADS=kv_heads, HEAD_DIM=head_dim, HEAD_NORM=norm,
                      Q_NORM_HEADS=q_tile, K_NORM_HEADS=k_tile,
                      NORM_AFTER_ROTARY=after, INTERLEAVED=True,
                      PDL=True, BLOCK_HALF=triton.next_power_of_2(head_dim // 2))
        name = (f"head_dim {head_dim}, {heads}/{kv_heads} heads, norm {norm}"
                f"{' after rotary' if after else ''}, whole q {q_whole} k {k_whole}, "
                f"{warps} warps")
        print(f"{name:75s} {resources(compile_sm90(consts, warps))}", flush=True)
