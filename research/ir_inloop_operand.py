"""Where the 3xTF32 product's operands come from in the compiled kernel: Hopper's
warp-group dot reads its left operand from registers or shared memory, its right one from
shared memory. Compiles kernels/_gemm_tf32x3.py for sm_90 (no GPU needed) with both operands
split first and with B split in the loop, and prints the dots of the Triton GPU IR.

    TRITON_INTERPRET=0 PYTHONPATH=src python3 research/ir_inloop_operand.py
"""
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilegraph.kernels._gemm_tf32x3 import _gemm_tf32x3_kernel as kernel

POINTERS = {"c_ptr", "a_hi_ptr", "a_lo_ptr", "b_hi_ptr", "b_lo_ptr", "bias_ptr", "res_ptr",
            "preact_ptr", "partial_ptr"}
for in_loop in ("none", "b"):
    constants = {"HAS_BIAS": False, "HAS_RESIDUAL": False, "STORE_PREACT": False,
                 "ACTIVATION": "none", "IN_LOOP": in_loop, "SPLIT_K": 1, "BLOCK_M": 128,
                 "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}
    signature = {name: "constexpr" if name in constants else "*fp32" if name in POINTERS
                 else "*i32" if name == "count_ptr" else "i32" for name in kernel.arg_names}
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constants),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_stages": 4})
    print(f"IN_LOOP={in_loop}:")
    for line in compiled.asm["ttgir"].splitlines():
        if "warp_group_dot " in line:
            left, right = line.rsplit("} : ", 1)[1].split(" * ", 1)
            print("   ", left[:60], "*", right[:40])
