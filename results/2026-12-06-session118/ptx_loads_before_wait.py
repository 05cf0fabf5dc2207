"""Count the global loads the several-row GEMV (added norm on) issues before and after
griddepcontrol.wait in its sm_90 PTX (Triton 3.6; run as compile_sm90.py is run). Before
session 118's fix (3e953b5): split tile 96 / 288, persistent 96 / 176; after: 64 / 320 and
64 / 208 (the 64 before are the weight tile's; the 32 moved are the norm of h)."""
import sys
sys.argv = ["x"]
exec(open("results/2026-12-06-session118/compile_sm90.py").read().split("base = dict(")[0])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
def ptx(kernel, constants, tuples, num_warps):
    constants = {**{p.name: p.default for p in kernel.params if p.is_constexpr and p.has_default}, **constants}
    sig, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in constants: sig[name] = "constexpr"
        elif name in ("rotary", "head_norm", "added"): sig[name] = tuples.get(name, ())
        else: sig[name] = TYPES.get(name, "*bf16" if name.endswith("_ptr") else ("fp32" if name == "eps" else "i32"))
    return triton.compile(ASTSource(kernel, sig, constants, attrs), target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps, "num_stages": 1}).asm["ptx"]
for persistent in (False, True):
    consts = dict(HAS_NORM=True, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True, ACTIVATION="geglu_tanh", BLOCK_M=2, BLOCK_N=4, SPLIT=16, CHUNK=128, PERSISTENT=persistent, ADD_NORMED=True, ADD_BLOCK_K=2048)
    p = ptx(_gemv_rows_kernel, consts, {"added": ADDED}, 4)
    before = p.split("griddepcontrol.wait")[0]
    print("persistent" if persistent else "split", "loads before the wait:", before.count("ld.global"), "after:", p.split("griddepcontrol.wait")[1].count("ld.global"))
