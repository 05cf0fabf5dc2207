"""Registers and shared memory of the decode kernels for sm_90, compiled here without a GPU
(how many programs fit an SM: the next kernel's programs need room to start early).

    TRITON_INTERPRET=0 PYTHONPATH=src python3 research/decode_kernel_registers.py
    ... --dot 2048:2048:32/512/3/4   (only that tensor-core plan, every role; /L after the
                                      split puts the weight on the mma's left, W_LHS;
                                      --dtype fp16 or fp32 for their pointers;
                                      /l2=4 asks L2 for 4 more tiles before the wait)
    ... --attention [KEY=N,...]      (the attention kernel; a launch: preload=2,stages=2,warps=8)
    ... --attention preload=2,stages=2,warps=8,run_tiles=2,longest=384 --wait
                                     (its instructions before and after griddepcontrol.wait)
    ... --layer                      (the one-kernel decode layer)
    ... --dtype fp32 --row-loop 4:8:2048:G   (the CUDA-core row loop's tile, its row sums
                                      gathered with :G; registers, barriers, and how many
                                      of its K loop's loads issue at the loop's top)
    ... --models [ROWS]              (each named and off-list model's projections at 1, 4, 8
                                      and 16 rows (or ROWS, a comma list): the rule's plan,
                                      whether a K loop it never runs is compiled out there,
                                      registers kept -> out; session 95)
    ... --runs 3                     (the one-row GEMVs' residual role reading attention's
                                      runs unmerged, 3 of them, heads of 64: needs
                                      research/merge_in_projection.diff applied; session 86)

Needs cuobjdump on PATH (triton/backends/nvidia/bin). Integer arguments and pointers are
marked divisible by 16, as a real launch specialises them: without that mark Triton cannot
prove the weight rows aligned, loads them 2 bytes at a time, and does not pipeline the K loop
through shared memory, and the counts say nothing of the kernels that run (233 registers
instead of 96 for a 2048 x 2048 bf16 tile). The counts are this machine's Triton's: Triton
3.9's ptxas gave 138-140 registers where the GPU machine's 3.6 compiled the same tensor-core
handoff variants to 128 (results/2026-11-24-session33/).
"""

import argparse
import re
import subprocess
import tempfile

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from tilegraph.kernels._dot_rows import _dot_rows_kernel
from tilegraph.kernels._matvec import _gemv_kernel, _matvec_kernel, gemv_config
from tilegraph.kernels.decode_attention import _decode_attention_kernel, attention_config
from tilegraph.kernels.decode_layer import _decode_layer_kernel, decode_layer_config
from tilegraph.kernels.decode_plan import dot_config, rule

FP32_POINTERS = {"partial_ptr", "norm_parts_ptr", "next_parts_ptr", "acc_ptr", "zero_ptr"}
# else DTYPE, or fp32 (above)
POINTERS = {"count_ptr": "*i32", "lengths_ptr": "*i64", "flagged_ptr": "*i64"}
DTYPE = "bf16"  # --dtype
FP32_SCALARS = {"eps", "qk_scale"}


def compiled_for_sm90(kernel, constants: dict, num_warps: int, num_stages: int):
    if "rotary" in kernel.arg_names:  # the projections' rotary tuple: none here
        constants = {"rotary": (), **constants}
    # constexprs not given take their defaults, as a launch does (else they would be i32s)
    constants = {**{p.name: p.default for p in kernel.params
                    if p.is_constexpr and p.has_default}, **constants}
    signature = {}
    for name in kernel.arg_names:
        if name in constants:
            signature[name] = "constexpr"
        elif name.endswith("_ptr"):
            fp32 = name in FP32_POINTERS or (name == "x_ptr" and constants.get("X_RUNS"))
            signature[name] = "*fp32" if fp32 else POINTERS.get(name, f"*{DTYPE}")
        else:
            signature[name] = "fp32" if name in FP32_SCALARS else "i32"
    aligned = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(kernel.arg_names)
               if name not in constants and name not in FP32_SCALARS | {"M"}}
    return triton.compile(ASTSource(kernel, signature, constants, aligned),
                          target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": num_warps, "num_stages": num_stages})


def around_the_wait(ptx: str) -> str:
    """How many of the PTX's shared-memory, global-load, barrier and mma instructions come
    before and after griddepcontrol.wait: what a kernel does while the one before runs."""
    lines = ptx.splitlines()
    wait = next(i for i, line in enumerate(lines) if "griddepcontrol.wait" in line)
    counts = []
    for op in ("st.shared", "ld.shared", "ldmatrix", "bar.sync", "ld.global", "mma.sync"):
        before = sum(op in line for line in lines[:wait])
        counts.append(f"{op} {before}/{sum(op in line for line in lines[wait:])}")
    return "before/after the wait: " + ", ".join(counts)


def resources(kernel, constants: dict, num_warps: int, num_stages: int) -> str:
    compiled = compiled_for_sm90(kernel, constants, num_warps, num_stages)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run(["cuobjdump", "--dump-resource-usage", cubin.name],
                               capture_output=True, text=True, check=True).stdout
    line = next(line for line in usage.splitlines() if "REG:" in line)
    registers = line.split("REG:")[1].split()[0]
    spilled = line.split("STACK:")[1].split()[0]
    mma = "wgmma" if "wgmma" in compiled.asm["ptx"] else "mma.sync"
    return (f"{registers:>3} registers, {spilled} stack bytes, {compiled.metadata.shared} smem, "
            f"{mma}")


DOT_PARTS = {"HAS_BIAS": False, "ACTIVATION": "none", "PREFETCH_WEIGHT": True,
             "DOT_PRECISION": "tf32", "UPCAST_DOT": False, "BLOCK_M": 16,
             "NORM_IN_LOOP": False, "REDO_OVERFLOW": False}
DOT_ROLES = {"residual, no handoff": {"HAS_RESIDUAL": True, "HAND_OVER": False},
             "residual, hands over": {"HAS_RESIDUAL": True, "HAND_OVER": True},
             "takes a handoff": {"HAS_RESIDUAL": False, "HAND_OVER": False, "NORM_PARTS": -1},
             "norm in the loop": {"HAS_RESIDUAL": False, "HAND_OVER": False,
                                  "NORM_IN_LOOP": True}}
GEMV_PARTS = {"HAS_BIAS": False, "ACTIVATION": "none", "PREFETCH_WEIGHT": True, "TAIL": 0,
              "ALIGN": 1, "RELEASE_AFTER_INPUTS": False,
              "PERSISTENT": False}  # a config with a tail overrides TAIL


def dot_usage(n: int, k: int, config: dict) -> None:
    """Every role of the tensor-core kernel at (n, k) with `config` (dot_config's keys)."""
    tile = {key: v for key, v in config.items() if key.isupper()}
    tile.setdefault("SPLIT_K", 1)
    n_parts = triton.next_power_of_2(triton.cdiv(n, config["BLOCK_N"]))
    for role, parts in DOT_ROLES.items():
        parts = {"NORM_PARTS": 0, **parts}
        if parts["NORM_PARTS"] < 0:
            parts["NORM_PARTS"] = n_parts
            parts["REDO_OVERFLOW"] = DTYPE == "fp16"
        if DTYPE == "fp32":
            parts["DOT_PRECISION"] = "tf32x3"
        usage = resources(_dot_rows_kernel, {**DOT_PARTS, **tile, **parts},
                          config["num_warps"], config["num_stages"])
        print(f"tensor cores {n} x {k} {DTYPE} {tile}, stages {config['num_stages']}, {role}: "
              f"{usage}", flush=True)


def attention_usage(batch: int, heads: int, kv_heads: int, head_dim: int, max_seq: int,
                    wait: bool = False, **variant) -> None:
    """The attention kernel at that shape (bf16, under PDL); `variant`: attention_config's
    keywords; `wait`: instead of registers, its instructions around the wait with the
    q|k|v projection's new rows in flight (one a sequence). runs_preloaded=1 among them:
    compiled with RUNS_PRELOADED, the run loop left out."""
    runs_preloaded = bool(variant.pop("runs_preloaded", 0))
    config = attention_config(batch, kv_heads, heads // kv_heads, head_dim, max_seq, 132,
                              **variant)
    launch = {key: v for key, v in config.items() if key.isupper() and key != "PRELOAD_TILES"}
    launch["PRELOAD_T"] = config["PRELOAD_TILES"] * config["BLOCK_T"]  # as the launcher does
    launch.setdefault("RUN_TILES", 1)
    launch["RUNS_PRELOADED"] = runs_preloaded
    # MERGE_OUT: merge_in_projection.diff's
    for flag in ("MERGE_APART", "MERGE_FLAGGED", "MERGE_OUT"):
        if flag in _decode_attention_kernel.arg_names:
            launch.setdefault(flag, False)
    group = heads // kv_heads
    launch.update(N_KV_HEADS=kv_heads, GROUP=group,
                  GROUP_BLOCK=triton.cdiv(group, config["HEAD_BLOCKS"]), HEAD_DIM=head_dim,
                  PDL=True, LENGTHS_FINAL=True, N_WRITTEN=batch if wait else 0,
                  BLOCK_WRITTEN=triton.next_power_of_2(batch) if wait else 1,
                  DOT_PRECISION="tf32", UPCAST_DOT=False, LINE_ELEMENTS=64,
                  ROW_LINES=triton.next_power_of_2(triton.cdiv(head_dim, 64)))
    if wait:
        usage = around_the_wait(compiled_for_sm90(_decode_attention_kernel, launch,
                                                  config["num_warps"],
                                                  config["num_stages"]).asm["ptx"])
    else:
        usage = resources(_decode_attention_kernel, launch, config["num_warps"],
                          config["num_stages"])
    print(f"attention b{batch} {heads}/{kv_heads} heads of {head_dim}, {max_seq} positions"
          f"{' ' + str(variant) if variant else ''}: {usage}", flush=True)


def loop_loads(cubin: bytes) -> str:
    """The global loads of the kernel's K loop (the body of its backward branch, sm_90 SASS):
    how many issue before the step's first shuffle or barrier (its first reduction), and
    where the rest issue, instructions into the body. A load the scheduler moved past the
    reductions (for want of registers) waits out memory's latency in every step (session
    105)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        sass = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    code = [(int(m.group(1), 16), m.group(2)) for m in
            (re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line) for line in sass.splitlines())
            if m]
    loops = [(int(m.group(1), 16), at) for at, text in code
             if (m := re.search(r"BRA 0x([0-9a-f]+)", text)) and int(m.group(1), 16) < at]
    if not loops:
        return "no K loop"
    start, end = loops[0]
    body = [text for at, text in code if start <= at <= end]
    reduce_at = next((i for i, text in enumerate(body) if "SHFL" in text or "BAR" in text),
                     len(body))
    loads = [i for i, text in enumerate(body) if "LDG" in text]
    late = [i for i in loads if i > reduce_at]
    return (f"K loop of {len(body)} instructions, first reduction at +{reduce_at}: "
            f"{len(loads) - len(late)} loads before it, {len(late)} after"
            + (f" (+{late[0]} .. +{late[-1]})" if late else ""))


def row_loop_usage(rows_block: int, block_n: int, block_k: int, gather: bool) -> None:
    """The CUDA-core row loop (_matvec_kernel, ROW_LOOP, 4 warps) with a norm prologue and
    with a residual: registers, barriers and its K loop's loads (loop_loads)."""
    for role, parts in (("norm prologue", {"HAS_NORM": True, "HAS_RESIDUAL": False}),
                        ("residual", {"HAS_NORM": False, "HAS_RESIDUAL": True})):
        constants = {"HAS_BIAS": False, "ACTIVATION": "none", "PREFETCH_WEIGHT": True,
                     "BLOCK_M": rows_block, "BLOCK_N": block_n, "BLOCK_K": block_k,
                     "ROW_LOOP": True, "GATHER_ROWS": gather, "ALIGN": 1, **parts}
        compiled = compiled_for_sm90(_matvec_kernel, constants, 4, 1)
        print(f"row loop {DTYPE} {rows_block} rows x {block_n} x {block_k}, "
              f"{'gathered' if gather else 'turned row by row'}, {role}: "
              f"{resources(_matvec_kernel, constants, 4, 1).removesuffix(', mma.sync')}, "
              f"{compiled.asm['ptx'].count('bar.sync')} bar.sync; "
              f"{loop_loads(compiled.asm['cubin'])}", flush=True)


def layer_usage(d: int) -> None:
    """The one-kernel bf16 decode layer at width d, one row."""
    config = decode_layer_config(1, d, 2)
    launch = {key: v for key, v in config.items() if key.isupper()}
    launch.update(ZERO_NEXT=True, PREFETCH_WEIGHT=True, BLOCK_M=1)
    usage = resources(_decode_layer_kernel, launch, config["num_warps"], 1)
    print(f"one-kernel layer d={d} bf16 {launch['BLOCK_Q']} rows a program, "
          f"{config['num_warps']} warps: {usage}", flush=True)


def projections(shape: dict) -> dict:
    """(N, K) of a Llama-family layer's q|k|v, output, gate/up and down projections."""
    d, heads = shape["hidden_size"], shape["num_attention_heads"]
    head_dim = shape.get("head_dim") or d // heads
    q, kv = heads * head_dim, shape["num_key_value_heads"] * head_dim
    inter = shape["intermediate_size"]
    return {"q|k|v": (q + 2 * kv, d), "output": (d, q), "gate/up": (2 * inter, d),
            "down": (d, inter)}


def models_usage(rows_list: list[int]) -> None:
    """For each model shape's projections at each row count: the rule's plan on an H200
    (132 SMs), whether its K loop never runs (one-row split tile: the row fits the first
    tile, ONE_TILE; tensor-core kernel: every slice one step, ONE_STEP) and, where so, the
    registers with the loop kept -> compiled out (the projection's role: norm prologue on
    q|k|v and gate/up, residual on output and down)."""
    from time_steps import OFF_LIST

    from tilegraph.models.hf_presets import SHAPES
    shapes = {name: s for name, s in SHAPES.items() if not name.startswith("tiny-")}
    shapes.update({name: {**SHAPES[base], **over} for name, (base, over) in OFF_LIST.items()})
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[DTYPE]
    for model, shape in shapes.items():
        for role, (n, k) in projections(shape).items():
            norm = role in ("q|k|v", "gate/up")
            for rows in rows_list:
                plan = rule(rows, n, k, dtype, 132)
                c = plan.config
                tile = {key: v for key, v in c.items() if key.isupper()}
                line = f"{model:12} {role:8} {n:6} x {k:<6} {rows:2} rows: {plan.kind}"
                kept_out = None
                if plan.kind == "gemv" and rows == 1:
                    persistent = "PROGRAMS_PER_SM" in c
                    line += (f" {'persistent' if persistent else 'split'} tile, {c['SPLIT']} x"
                             f" {c['CHUNK']} + tail {c.get('TAIL', 0)}")
                    if not persistent and k <= c["SPLIT"] * c["CHUNK"]:
                        tile["PERSISTENT"] = False
                        parts = {**GEMV_PARTS, **tile, "HAS_NORM": norm, "HAS_RESIDUAL": not norm}
                        kept_out = [resources(_gemv_kernel, {**parts, "ONE_TILE": one},
                                              c["num_warps"], 1) for one in (False, True)]
                elif plan.kind == "dot":
                    steps = triton.cdiv(k, c["BLOCK_K"])
                    tile["SPLIT_K"] = split = min(c.get("SPLIT_K", 1), steps)
                    line += (f" {c['BLOCK_N']} x {c['BLOCK_K']}, split {split} of {steps} steps"
                             f"{', weight left' if c.get('W_LHS') else ''}")
                    if split >= steps:
                        parts = {**DOT_PARTS, **tile, "HAS_RESIDUAL": not norm,
                                 "HAND_OVER": False, "NORM_PARTS": 0}
                        kept_out = [resources(_dot_rows_kernel, {**parts, "ONE_STEP": one},
                                              c["num_warps"], c["num_stages"])
                                    for one in (False, True)]
                if kept_out:
                    kept, out = (usage.split(" registers")[0].strip() for usage in kept_out)
                    line += f"; loop never runs: {kept} -> {out} registers"
                print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dot", nargs="*", metavar="N:K:BN/BK/STAGES/SPLIT[/L]",
                        help="only these tensor-core plans (default: the rule's at d = 1024, "
                             "2048 and 4096, and the one-row GEMV's)")
    parser.add_argument("--attention", nargs="?", const="", metavar="KEY=N,...",
                        help="only the attention kernel, at Qwen2-0.5B's and TinyLlama's shapes; "
                             "with attention_config's keywords, that launch (e.g. "
                             "preload=2,stages=2,warps=8)")
    parser.add_argument("--wait", action="store_true",
                        help="with --attention: its shared-memory, load, barrier and mma "
                             "instructions before and after griddepcontrol.wait (session 81)")
    parser.add_argument("--layer", action="store_true",
                        help="only the one-kernel decode layer, bf16 d = 1024 and 2048")
    parser.add_argument("--models", nargs="?", const="1,4,8,16", metavar="ROWS",
                        help="each model shape's projections at these rows: the rule's plan "
                             "and where a K loop it never runs is compiled out")
    parser.add_argument("--row-loop", nargs="*", metavar="BM:BN:BK[:G]",
                        help="the CUDA-core row loop's tile (G: its row sums gathered): "
                             "registers, barriers and its K loop's loads")
    parser.add_argument("--runs", type=int, default=0,
                        help="the GEMVs' residual role with x as that many attention runs")
    parser.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16",
                        help="the tensor-core kernel's dtype (--dot; fp32 at tf32x3)")
    args = parser.parse_args()
    global DTYPE
    DTYPE = args.dtype
    if args.models:
        models_usage([int(rows) for rows in args.models.split(",")])
        return
    if args.row_loop:
        for item in args.row_loop:
            fields = item.split(":")
            row_loop_usage(*(int(v) for v in fields[:3]), gather="G" in fields[3:])
        return
    if args.layer:
        layer_usage(1024)
        layer_usage(2048)
        return
    if args.attention is not None:
        variant = {key: int(value) for key, value in
                   (item.split("=") for item in args.attention.split(",") if item)}
        attention_usage(1, 14, 2, 64, 2048, args.wait, **variant)
        attention_usage(1, 32, 4, 64, 2048, args.wait, **variant)
        return
    if args.dot:
        for item in args.dot:
            n, k, plan = item.split(":")
            fields = plan.split("/")
            block_n, block_k, stages, split = (int(v) for v in fields[:4])
            extra = {"W_LHS": "L" in fields[4:]}
            extra.update((f[3:] and ("L2_TILES", int(f[3:]))) for f in fields[4:]
                         if f.startswith("l2="))
            dot_usage(int(n), int(k), {"BLOCK_N": block_n, "BLOCK_K": block_k,
                                       "SPLIT_K": split, "num_warps": 4, "num_stages": stages,
                                       **extra})
        return
    for d in (1024, 2048, 4096):
        dot_usage(d, d, dot_config(d, d, 2, 132))
    for n, k in ((2048, 2048), (4096, 4096), (2048, 5632), (11264, 2048)):
        config = gemv_config(n, k)
        tile = {key: v for key, v in config.items() if key.isupper()}
        tile["PERSISTENT"] = bool(tile.pop("PROGRAMS_PER_SM", None))
        roles = (("norm prologue", {"HAS_NORM": True, "HAS_RESIDUAL": False}),
                 ("residual", {"HAS_NORM": False, "HAS_RESIDUAL": True}))
        if args.runs:
            roles = ((f"residual, {args.runs} runs", {"HAS_NORM": False, "HAS_RESIDUAL": True,
                                                      "X_RUNS": args.runs,
                                                      "X_HEADS": k // 64,
                                                      "X_HEAD_DIM": 64}),)
        for role, parts in roles:
            usage = resources(_gemv_kernel, {**GEMV_PARTS, **tile, **parts},
                              config["num_warps"], 1)
            print(f"one row {n} x {k} bf16 {tile}, {role}: {usage}")


if __name__ == "__main__":
    main()
