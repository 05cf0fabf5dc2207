"""Compile the decode kernels that session 116's added norm and session 117's head norms
touch, for sm_90 without a GPU, and print their registers (cuobjdump on PATH). Run with the
GPU machine's Triton (3.6) in a venv of its own beside the project's:

    python3 -m venv /tmp/v36 && /tmp/v36/bin/pip install --no-deps triton==3.6.0
    S36=/tmp/v36/lib/python3.11/site-packages
    PATH=$S36/triton/backends/nvidia/bin:$PATH TRITON_INTERPRET=0 \
      PYTHONPATH=$S36:src:.venv/lib/python3.11/site-packages /tmp/v36/bin/python THIS_FILE
"""
import itertools, subprocess, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from tilegraph.kernels._matvec import _gemv_kernel, _gemv_rows_kernel, _matvec_kernel
from tilegraph.kernels._dot_rows import _norm_rows_kernel

ROTARY = ("*bf16", "*bf16", "i32", "i32", "i32", "*fp32", "*fp32", "i32", "*i64", "*i64",
          "i32", "i32", "i32")
HEAD = ("*fp32", "*i32", "*bf16", "*bf16", "fp32")
ADDED = ("*bf16", "i32", "*bf16", "*bf16", "i32")

def build(kernel, constants, tuples, num_warps):
    constants = {**{p.name: p.default for p in kernel.params
                    if p.is_constexpr and p.has_default}, **constants}
    sig, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in constants:
            sig[name] = "constexpr"
        elif name in ("rotary", "head_norm", "added"):
            sig[name] = tuples.get(name, ())
            for j, t in enumerate(sig[name]):
                if t != "fp32":
                    attrs[(i, j)] = [["tt.divisibility", 16]]
        else:
            sig[name] = "*bf16" if name.endswith("_ptr") else ("fp32" if name == "eps" else "i32")
            if name != "eps" and name != "M":
                attrs[(i,)] = [["tt.divisibility", 16]]
    c = triton.compile(ASTSource(kernel, sig, constants, attrs),
                       target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": num_warps, "num_stages": 1})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(c.asm["cubin"]); f.flush()
        out = subprocess.run(["cuobjdump", "--dump-resource-usage", f.name],
                             capture_output=True, text=True).stdout
    return next(l for l in out.splitlines() if "REG:" in l).split("CONSTANT")[0].strip()

base = dict(HAS_NORM=True, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True)
for (bn, split, chunk, warps, persistent, tail), head, added in itertools.product(
        [(8, 8, 128, 4, False, 0), (4, 16, 128, 4, False, 0), (8, 8, 128, 4, True, 0),
         (8, 8, 128, 4, False, 2), (8, 8, 128, 4, True, 2)], [False, True], [False, True]):
    consts = dict(base, ACTIVATION="rotary", BLOCK_N=bn, SPLIT=split, CHUNK=chunk,
                  PERSISTENT=persistent, TAIL=tail, HEAD_HALF=64 if head else 0,
                  ADD_NORMED=added, ADD_BLOCK_K=2048)
    tuples = {"rotary": ROTARY, **({"head_norm": HEAD} if head else {}),
              **({"added": ADDED} if added else {})}
    print("gemv", bn, split, chunk, tail, "persistent" if persistent else "-",
          "head" if head else "-", "added" if added else "-",
          build(_gemv_kernel, consts, tuples, warps), flush=True)
for added, act in itertools.product([False, True], ["none", "rotary"]):
    tuples = {**({"rotary": ROTARY} if act == "rotary" else {}), **({"added": ADDED} if added else {})}
    consts = dict(base, ACTIVATION=act, BLOCK_M=4, BLOCK_N=8, SPLIT=8, CHUNK=128,
                  ADD_NORMED=added, ADD_BLOCK_K=2048)
    print("gemv rows", act, added, build(_gemv_rows_kernel, consts, tuples, 4), flush=True)
    consts = dict(base, ACTIVATION=act, BLOCK_M=8, BLOCK_N=8, BLOCK_K=512, ROW_LOOP=False,
                  ADD_NORMED=added)
    print("matvec", act, added, build(_matvec_kernel, consts, tuples, 4), flush=True)
    consts = dict(PDL=True, BLOCK_K=1024, ADD_NORMED=added)
    print("norm rows", added, build(_norm_rows_kernel, consts, {"added": ADDED} if added else {}, 4), flush=True)

from tilegraph.kernels.rotary import _rotary_qkv_kernel  # noqa: E402

for head_norm in (False, True):
    consts = dict(N_HEADS=16, N_KV_HEADS=8, HEAD_DIM=128, HEAD_NORM=head_norm,
                  INTERLEAVED=True, PDL=True, BLOCK_HALF=64)
    print("rotary_qkv head norm" if head_norm else "rotary_qkv",
          build(_rotary_qkv_kernel, consts, {}, 1), flush=True)
