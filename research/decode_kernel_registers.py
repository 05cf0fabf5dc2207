"""Registers and shared memory of the decode kernels for sm_90, compiled here without a GPU
(how many programs fit an SM: the next kernel's programs need room to start early).

    TRITON_INTERPRET=0 PYTHONPATH=src python3 research/decode_kernel_registers.py

Needs cuobjdump on PATH (triton/backends/nvidia/bin). Integer arguments and pointers are
marked divisible by 16, as a real launch specialises them: without that mark Triton cannot
prove the weight rows aligned, loads them 2 bytes at a time, and does not pipeline the K loop
through shared memory, and the counts say nothing of the kernels that run (233 registers
instead of 96 for a 2048 x 2048 bf16 tile). The counts are this machine's Triton's: Triton
3.9's ptxas gave 138-140 registers where the GPU machine's 3.6 compiled the same tensor-core
handoff variants to 128 (results/2026-11-24-session33/).
"""

import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilegraph.kernels._dot_rows import _dot_rows_kernel
from tilegraph.kernels._matvec import _gemv_kernel, gemv_config
from tilegraph.kernels.decode_plan import dot_config

FP32_POINTERS = {"partial_ptr", "norm_parts_ptr", "next_parts_ptr"}


def resources(kernel, constants: dict, num_warps: int, num_stages: int) -> str:
    constants = {"rotary": (), **constants}
    signature = {}
    for name in kernel.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            signature[name] = ("*fp32" if name in FP32_POINTERS
                               else "*i32" if name == "count_ptr" else "*bf16")
        else:
            signature[name] = "fp32" if name == "eps" else "i32"
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(kernel.arg_names)
               if name not in constants and name not in ("eps", "M")}
    compiled = triton.compile(ASTSource(kernel, signature, constants, aligned),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run(["cuobjdump", "--dump-resource-usage", cubin.name],
                               capture_output=True, text=True, check=True).stdout
    line = next(line for line in usage.splitlines() if "REG:" in line)
    registers = line.split("REG:")[1].split()[0]
    spilled = line.split("STACK:")[1].split()[0]
    return f"{registers:>3} registers, {spilled} stack bytes, {compiled.metadata.shared} smem"


DOT_PARTS = {"HAS_BIAS": False, "ACTIVATION": "none", "PREFETCH_WEIGHT": True,
             "DOT_PRECISION": "tf32", "UPCAST_DOT": False, "BLOCK_M": 16}
for d in (1024, 2048, 4096):
    config = dot_config(d, d, 2, 132)
    tile = {k: v for k, v in config.items() if k.isupper()}
    tile.setdefault("SPLIT_K", 1)
    n_parts = triton.next_power_of_2(triton.cdiv(d, config["BLOCK_N"]))
    for role, parts in (("residual, no handoff", {"HAS_RESIDUAL": True, "NORM_PARTS": 0,
                                                  "HAND_OVER": False}),
                        ("residual, hands over", {"HAS_RESIDUAL": True, "NORM_PARTS": 0,
                                                  "HAND_OVER": True}),
                        ("takes a handoff", {"HAS_RESIDUAL": False, "NORM_PARTS": n_parts,
                                             "HAND_OVER": False})):
        usage = resources(_dot_rows_kernel, {**DOT_PARTS, **tile, **parts},
                          config["num_warps"], config["num_stages"])
        print(f"tensor cores {d} x {d} bf16 {tile}, {role}: {usage}")

GEMV_PARTS = {"HAS_BIAS": False, "ACTIVATION": "none", "PREFETCH_WEIGHT": True}
for n, k in ((2048, 2048), (4096, 4096), (2048, 5632), (11264, 2048)):
    config = gemv_config(n, k)
    tile = {key: v for key, v in config.items() if key.isupper()}
    for role, parts in (("norm prologue", {"HAS_NORM": True, "HAS_RESIDUAL": False}),
                        ("residual", {"HAS_NORM": False, "HAS_RESIDUAL": True})):
        usage = resources(_gemv_kernel, {**GEMV_PARTS, **tile, **parts}, config["num_warps"], 1)
        print(f"one row {n} x {k} bf16 {tile}, {role}: {usage}")
