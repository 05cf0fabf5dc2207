"""The kernels that add a normed output to the stream in their prologue (Gemma's post norms,
_added_norm.py), compiled for sm_90 by Triton 3.6 without a GPU: registers and spills
(cuobjdump), and in the PTX the global loads between griddepcontrol.wait and the first
bar.sync (a cross-warp sum's barrier, which no load after it passes) against those after
it. Session 119 loads h and its weight at the program's columns beside added_rstd's pass,
so the prologue's round trips to L2 after the wait go from two to one. Run as session 118's
compile_sm90.py is run, with the tree to compile first on PYTHONPATH:

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

from tilegraph.kernels._dot_rows import _norm_rows_kernel
from tilegraph.kernels._matvec import _gemv_kernel, _gemv_rows_kernel

ADDED = ("*bf16", "i32", "*bf16", "*bf16", "i32")
TYPES = {"partial_ptr": "*fp32", "count_ptr": "*i32"}


def compile_sm90(kernel, constants, num_warps):
    constants = {**{p.name: p.default for p in kernel.params
                    if p.is_constexpr and p.has_default}, **constants}
    sig, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in constants:
            sig[name] = "constexpr"
        elif name in ("rotary", "head_norm"):
            sig[name] = ()
        elif name == "added":
            sig[name] = ADDED
            for j, t in enumerate(ADDED):
                attrs[(i, j)] = [["tt.divisibility", 16]]
        else:
            sig[name] = TYPES.get(name, "*bf16" if name.endswith("_ptr")
                                  else ("fp32" if name == "eps" else "i32"))
            if name not in ("eps", "M"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    return triton.compile(ASTSource(kernel, sig, constants, attrs),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": 1})


def report(name, compiled):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        usage = subprocess.run(["cuobjdump", "--dump-resource-usage", f.name],
                               capture_output=True, text=True).stdout
    line = next(u for u in usage.splitlines() if "REG:" in u)
    regs = re.search(r"REG:(\d+)", line).group(1)
    stack = re.search(r"STACK:(\d+)", line).group(1)
    ptx = compiled.asm["ptx"]
    after_wait = ptx.split("griddepcontrol.wait")[-1]
    first_round, _, rest = after_wait.partition("bar.sync")
    print(f"{name:44s} registers {regs:>3s}  stack {stack:>3s}  loads after the wait: "
          f"{first_round.count('ld.global'):3d} before its first barrier, "
          f"{rest.count('ld.global'):3d} after", flush=True)


one_row = dict(HAS_NORM=True, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True,
               ACTIVATION="geglu_tanh", ADD_NORMED=True, ADD_BLOCK_K=2048, CHUNK=128)
for bn, split, tail, persistent in [(8, 8, 0, False), (4, 8, 1, False), (8, 8, 0, True),
                                    (8, 8, 1, True)]:
    consts = dict(one_row, BLOCK_N=bn, SPLIT=split, TAIL=tail, PERSISTENT=persistent)
    report(f"gemv 1 row {bn}x{split}x128 tail {tail} {'persistent' if persistent else ''}",
           compile_sm90(_gemv_kernel, consts, 4))
for rows in (2, 4):
    for persistent in (False, True):
        consts = dict(one_row, BLOCK_M=rows, BLOCK_N=4, SPLIT=16, PERSISTENT=persistent)
        report(f"gemv {rows} rows 4x16x128 {'persistent' if persistent else ''}",
               compile_sm90(_gemv_rows_kernel, consts, 4))
for k, warps in [(1152, 4), (2304, 4)]:
    block_k = triton.next_power_of_2(k)
    consts = dict(PDL=True, BLOCK_K=block_k, ADD_NORMED=True)
    report(f"norm rows, rows of {k}", compile_sm90(_norm_rows_kernel, consts, warps))
