"""_matvec_kernel (fp32 rows, and 16-bit rows at 2-4 where the CUDA-core kernel runs them:
Gemma 3 1B's q|k|v at two rows) and the one-row and several-row split tiles, compiled for
sm_90 by Triton 3.6 without a GPU, with an added norm (Gemma's post norms, _added_norm.py)
and without: registers and spills (cuobjdump), and in the PTX the global loads between
griddepcontrol.wait and the first bar.sync against those after it. Session 120 loads the
first step's x, h and h's weight before h's norm, and takes that norm from the loaded row
where the first step or tile holds it whole (ADD_ROW_LOADED). Run with the tree to compile
first on PYTHONPATH (as session 119's added_loads_sm90.py):

    S36=/tmp/v36/lib/python3.11/site-packages
    PATH=$S36/triton/backends/nvidia/bin:$PATH TRITON_INTERPRET=0 \\
      PYTHONPATH=$S36:src:.venv/lib/python3.11/site-packages /tmp/v36/bin/python THIS_FILE
"""
import importlib.util
import pathlib

from tilegraph.kernels._matvec import _gemv_kernel, _gemv_rows_kernel, _matvec_kernel

spec = importlib.util.spec_from_file_location(
    "s119", pathlib.Path(__file__).parent.parent / "2026-12-06-session119/added_loads_sm90.py")
# session 119's compile_sm90 and report, without running its own list
source = spec.loader.get_source("s119").split("\none_row = dict(")[0]
helpers = {}
exec(compile(source, "added_loads_sm90.py", "exec"), helpers)
compile_sm90, report = helpers["compile_sm90"], helpers["report"]


def has_param(kernel, name):
    return any(p.name == name for p in kernel.params)


def with_dtype(dtype):
    """Compile the kernels' pointers (and added's) as `dtype` from here on."""
    helpers["TYPES"].update({name: f"*{dtype}" for name in
                             ("y_ptr", "x_ptr", "w_ptr", "norm_w_ptr", "bias_ptr", "res_ptr")})
    helpers["ADDED"] = (f"*{dtype}", "i32", f"*{dtype}", f"*{dtype}", "i32")


base = dict(HAS_NORM=True, HAS_BIAS=False, HAS_RESIDUAL=False, PREFETCH_WEIGHT=True,
            ACTIVATION="geglu_tanh")
# (dtype, rows, BLOCK_N, BLOCK_K, GATHER_ROWS): the rule's configs of Gemma's projections
# (Gemma 3 270M's and 1B's, Gemma 2 2B's: K 640-2304) that take _matvec_kernel
MATVEC = [("bf16", 2, 8, 2048, True), ("bf16", 2, 8, 1024, True), ("bf16", 4, 8, 1024, False),
          ("fp32", 1, 8, 1024, False), ("fp32", 1, 4, 2048, False),
          ("fp32", 2, 8, 2048, True), ("fp32", 4, 8, 2048, False),
          ("fp32", 4, 8, 1024, False), ("fp32", 8, 4, 1024, True)]
for dtype, rows, block_n, block_k, gather in MATVEC:
    with_dtype(dtype)
    for added, loaded in ((False, False), (True, False), (True, True)):
        consts = dict(base, ADD_NORMED=added, BLOCK_M=rows, BLOCK_N=block_n, BLOCK_K=block_k,
                      ROW_LOOP=rows > 1, GATHER_ROWS=gather)
        if added and has_param(_matvec_kernel, "ADD_ROW_LOADED"):
            consts["ADD_ROW_LOADED"] = loaded
        tag = f"row loaded {loaded}" if added else "no added norm"
        report(f"matvec {dtype} {rows} rows {block_n}x{block_k} {tag}",
               compile_sm90(_matvec_kernel, consts, 4))
with_dtype("bf16")
for loaded in (False, True):
    consts = dict(base, ADD_NORMED=True, BLOCK_N=4, SPLIT=16, CHUNK=128, ADD_BLOCK_K=2048)
    if has_param(_gemv_kernel, "ADD_ROW_LOADED"):
        consts["ADD_ROW_LOADED"] = loaded
    report(f"gemv 1 row 4x16x128 row loaded {loaded}", compile_sm90(_gemv_kernel, consts, 4))
    consts["BLOCK_M"] = 2
    report(f"gemv 2 rows 4x16x128 row loaded {loaded}",
           compile_sm90(_gemv_rows_kernel, consts, 4))
