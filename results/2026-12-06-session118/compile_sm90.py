"""Compile the decode kernels that session 118's head norms in the several-row epilogues
touch, for sm_90 without a GPU, and print their registers (cuobjdump on PATH), each with the
head norms and without. Run with the GPU machine's Triton (3.6) in a venv of its own beside
the project's:

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
from tilegraph.kernels._dot_rows import _dot_rows_kernel

ROTARY = ("*bf16", "*bf16", "i32", "i32", "i32", "*fp32", "*fp32", "i32", "*i64", "*i64",
          "i32", "i32", "i32")
HEAD = ("*i32", "*bf16", "*bf16", "fp32")
TYPES = {"partial_ptr": "*fp32", "count_ptr": "*i32", "norm_parts_ptr": "*fp32",
         "next_parts_ptr": "*fp32"}
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
            sig[name] = TYPES.get(name, "*bf16" if name.endswith("_ptr")
                                  else ("fp32" if name == "eps" else "i32"))
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

base = dict(HAS_NORM=True, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True,
            ACTIVATION="rotary")
tuples = {"rotary": ROTARY}
for head in (False, True):
    t = {**tuples, **({"head_norm": HEAD} if head else {})}
    half = 64 if head else 0
    for bn, split, persistent in [(8, 8, False), (4, 16, False), (8, 8, True)]:
        consts = dict(base, BLOCK_N=bn, SPLIT=split, CHUNK=128, PERSISTENT=persistent,
                      TAIL=0, HEAD_HALF=half)
        print("gemv", bn, split, "persistent" if persistent else "-", "head" if head else "-",
              build(_gemv_kernel, consts, t, 4), flush=True)
    for bm, bn, bk, loop in [(1, 8, 1024, False), (2, 8, 2048, True), (8, 4, 1024, True)]:
        consts = dict(base, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ROW_LOOP=loop,
                      GATHER_ROWS=loop, HEAD_HALF=half)
        print("matvec", bm, bn, bk, "head" if head else "-",
              build(_matvec_kernel, consts, t, 4), flush=True)
    for split, w_lhs, in_loop in [(4, True, True), (5, True, False), (1, True, False),
                                  (4, False, False)]:
        consts = dict(HAS_BIAS=False, HAS_RESIDUAL=False, ACTIVATION="rotary",
                      PREFETCH_WEIGHT=True, DOT_PRECISION="tf32", UPCAST_DOT=False,
                      SPLIT_K=split, NORM_PARTS=0, HAND_OVER=False, NORM_IN_LOOP=in_loop,
                      REDO_OVERFLOW=False, BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, W_LHS=w_lhs,
                      HEAD_HALF=half)
        print("dot split", split, "w_lhs" if w_lhs else "-", "in-loop" if in_loop else "-",
              "head" if head else "-", build(_dot_rows_kernel, consts, t, 4), flush=True)

# the several-row GEMV with session 116's added norm, its norm of h now after PDL's wait
for persistent in (False, True):
    consts = dict(HAS_NORM=True, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True,
                  ACTIVATION="geglu_tanh", BLOCK_M=2, BLOCK_N=4, SPLIT=16, CHUNK=128,
                  PERSISTENT=persistent, ADD_NORMED=True, ADD_BLOCK_K=2048)
    print("gemv rows added", "persistent" if persistent else "-",
          build(_gemv_rows_kernel, consts, {"added": ADDED}, 4), flush=True)
