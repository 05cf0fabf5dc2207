"""The kernels that add a normed output to the stream in their prologue (_added_norm.py),
compiled for sm_90 by Triton 3.6 without a GPU where the projection then reads the sum as it
is (no RMSNorm prologue: EXAONE 4's layers, HAS_NORM False): that they compile, their
registers and spills, against the same kernels with the norm (Gemma's). Session 119's
helpers, run as its added_loads_sm90.py is:

    S36=/tmp/v36/lib/python3.11/site-packages
    PATH=$S36/triton/backends/nvidia/bin:$PATH TRITON_INTERPRET=0 \\
      PYTHONPATH=$S36:src:.venv/lib/python3.11/site-packages /tmp/v36/bin/python THIS_FILE
"""
import importlib.util
import pathlib

from tilegraph.kernels._dot_rows import _norm_rows_kernel
from tilegraph.kernels._matvec import _gemv_kernel, _gemv_rows_kernel, _matvec_kernel

spec = importlib.util.spec_from_file_location(
    "s119", pathlib.Path(__file__).parent.parent / "2026-12-06-session119/added_loads_sm90.py")
source = spec.loader.get_source("s119").split("\none_row = dict(")[0]
helpers = {}
exec(compile(source, "added_loads_sm90.py", "exec"), helpers)
compile_sm90, report = helpers["compile_sm90"], helpers["report"]


def has_param(kernel, name):
    return any(p.name == name for p in kernel.params)


for norm in (True, False):
    base = dict(HAS_NORM=norm, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True,
                ACTIVATION="swiglu", ADD_NORMED=True)
    tag = "with norm" if norm else "without norm"
    for rows, block_n, block_k, gather in ((2, 8, 2048, True), (4, 8, 1024, False)):
        consts = dict(base, BLOCK_M=rows, BLOCK_N=block_n, BLOCK_K=block_k, ROW_LOOP=True,
                      GATHER_ROWS=gather)
        for loaded in ((False, True) if has_param(_matvec_kernel, "ADD_ROW_LOADED") else
                       (None,)):
            if loaded is not None:
                consts["ADD_ROW_LOADED"] = loaded
            report(f"matvec bf16 {rows} rows {block_n}x{block_k} loaded {loaded} {tag}",
                   compile_sm90(_matvec_kernel, consts, 4))
    for loaded in (False, True):
        consts = dict(base, BLOCK_N=4, SPLIT=16, CHUNK=128, ADD_BLOCK_K=2048)
        if has_param(_gemv_kernel, "ADD_ROW_LOADED"):
            consts["ADD_ROW_LOADED"] = loaded
        report(f"gemv 1 row 4x16x128 loaded {loaded} {tag}",
               compile_sm90(_gemv_kernel, consts, 4))
        consts["BLOCK_M"] = 2
        report(f"gemv 2 rows 4x16x128 loaded {loaded} {tag}",
               compile_sm90(_gemv_rows_kernel, consts, 4))
