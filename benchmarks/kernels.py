"""Kernel benchmark: every tilegraph kernel against its peers, measured in one run.

    PYTHONPATH=src python3 benchmarks/kernels.py --out out/bench [--quick]

Each variant is checked against the float64 reference before it is timed. Throughput counts
ideal bytes (each input read once, each output written once) and is quoted against the copy
bandwidth measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph import kernels as K
from tilegraph.bench import ceilings, measure
from tilegraph.bench.environment import environment
from tilegraph.testing import TOLERANCES, rel_error


def _compiled(fn):
    return torch.compile(fn, dynamic=False)


def run_case(name, variants, reference, dtype, nbytes=None, flops=None, graph=False,
             rows=None, copy_gbps=None):
    """Check each variant, then time it; append one row per variant."""
    ref = reference()
    for label, fn in variants.items():
        try:
            err = rel_error(fn(), ref)
        except Exception as e:  # a variant that cannot run is reported, not fatal
            rows.append({"case": name, "variant": label, "error": f"{type(e).__name__}: {e}"})
            print(f"  {name:28s} {label:22s} skipped: {type(e).__name__}: {e}", flush=True)
            continue
        ok = err <= TOLERANCES[dtype]
        row = {"case": name, "variant": label, "rel_error": err, "correct": ok}
        if ok:
            stats = measure(fn, graph=graph)
            row["ms"] = stats.median
            row["p20_ms"], row["p80_ms"] = stats.p20, stats.p80
            if nbytes:
                row["gbps"] = nbytes / stats.median * 1e-6
                row["pct_copy"] = 100 * row["gbps"] / copy_gbps
            if flops:
                row["tflops"] = flops / stats.median * 1e-9
        rows.append(row)
        extra = (f"{row.get('gbps', 0):8.0f} GB/s ({row.get('pct_copy', 0):5.1f}% copy)"
                 if nbytes else f"{row.get('tflops', 0):7.1f} TFLOP/s" if flops else "")
        print(f"  {name:28s} {label:22s} err {err:.1e} {'ok ' if ok else 'FAIL'} "
              f"{row.get('ms', math.nan) * 1e3:9.2f} us {extra}", flush=True)


def bench_elementwise(rows, copy_gbps, quick):
    n = (16 if quick else 64) * 2**20
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    manual = lambda x: 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))  # noqa: E731
    compiled = _compiled(manual)
    run_case(f"gelu tanh {n // 2**20}M fp32", {
        "torch manual formula": lambda: manual(x),
        "F.gelu": lambda: F.gelu(x, approximate="tanh"),
        "torch.compile": lambda: compiled(x),
        "tilegraph": lambda: tg.gelu(x, out=out),
    }, lambda: K.gelu_ref(x.double()), torch.float32, nbytes=2 * n * 4, rows=rows,
        copy_gbps=copy_gbps)
    small = torch.randn(4096, device="cuda")
    small_out = torch.empty_like(small)
    run_case("gelu tanh 4K fp32 (launch)", {
        "F.gelu": lambda: F.gelu(small, approximate="tanh"),
        "tilegraph": lambda: tg.gelu(small, out=small_out),
    }, lambda: K.gelu_ref(small.double()), torch.float32, rows=rows, copy_gbps=copy_gbps)


def bench_rows(rows, copy_gbps, quick):
    m = 2048 if quick else 8192
    x = torch.randn(m, 4096, device="cuda")
    out = torch.empty_like(x)
    compiled = _compiled(lambda x: torch.softmax(x, -1))
    run_case(f"softmax {m}x4096 fp32", {
        "torch.softmax": lambda: torch.softmax(x, -1),
        "torch.compile": lambda: compiled(x),
        "tilegraph": lambda: tg.softmax(x, out=out),
    }, lambda: K.softmax_ref(x.double()), torch.float32, nbytes=2 * x.numel() * 4, rows=rows,
        copy_gbps=copy_gbps)
    xb = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    outb = torch.empty_like(xb)
    compiled_norm = _compiled(lambda x, w: F.rms_norm(x, (4096,), w, 1e-6))
    run_case(f"rms_norm {m}x4096 bf16", {
        "F.rms_norm": lambda: F.rms_norm(xb, (4096,), w, 1e-6),
        "torch.compile": lambda: compiled_norm(xb, w),
        "tilegraph": lambda: tg.rms_norm(xb, w, out=outb),
    }, lambda: K.rms_norm_ref(xb.double(), w.double()), torch.bfloat16,
        nbytes=2 * xb.numel() * 2, rows=rows, copy_gbps=copy_gbps)


def bench_matmul(rows, copy_gbps, quick):
    sizes = (4096,) if quick else (4096, 8192)
    for dtype in (torch.float16, torch.bfloat16):
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype) * n**-0.5
            out = torch.empty_like(a)
            label = str(dtype).removeprefix("torch.")
            run_case(f"matmul {n}^3 {label}", {
                "torch.matmul (cuBLAS)": lambda a=a, b=b: a @ b,
                "tilegraph": lambda a=a, b=b, out=out: tg.matmul(a, b, out=out),
            }, lambda a=a, b=b: K.matmul_ref(a.double(), b.double()), dtype, flops=2 * n**3,
                rows=rows, copy_gbps=copy_gbps)
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16) * n**-0.5
    out = torch.empty_like(a)
    run_case(f"matmul+gelu {n}^3 bf16", {
        "torch.matmul + F.gelu": lambda: F.gelu(a @ b),
        "tilegraph fused": lambda: tg.matmul(a, b, activation="gelu", out=out),
    }, lambda: K.matmul_ref(a.double(), b.double(), activation="gelu"), torch.bfloat16,
        flops=2 * n**3, rows=rows, copy_gbps=copy_gbps)


def _bench_linear(dtype, d, rows, copy_gbps):
    """One batch-1 projection d x d with weights rotated past L2 (3x its size), as in a
    layer stack where every layer reads new weights."""
    weight_bytes = d * d * torch.tensor([], dtype=dtype).element_size()
    n_sets = max(2, math.ceil(3 * torch.cuda.get_device_properties(0).L2_cache_size
                              / weight_bytes))
    weights = [torch.randn(d, d, device="cuda", dtype=dtype) * d**-0.5 for _ in range(n_sets)]
    norm_w = torch.randn(d, device="cuda", dtype=dtype)
    x = torch.randn(1, d, device="cuda", dtype=dtype)
    out = torch.empty_like(x)

    def rotating(call):
        state = {"i": 0}

        def fn():
            w = weights[state["i"] % n_sets]
            state["i"] += 1
            return call(w)
        return fn

    label = str(dtype).removeprefix("torch.")
    run_case(f"linear 1x{d} @ {d}x{d} {label}", {
        "F.linear": rotating(lambda w: F.linear(x, w)),
        "tilegraph": rotating(lambda w: tg.linear(x, w, out=out)),
        "tilegraph + PDL prefetch": rotating(
            lambda w: tg.linear(x, w, out=out, prefetch_weight=True)),
    }, lambda: K.linear_ref(x.double(), weights[0].double()), dtype, nbytes=weight_bytes,
        graph=True, rows=rows, copy_gbps=copy_gbps)
    run_case(f"norm+linear+residual {d} {label}", {
        "torch unfused": rotating(
            lambda w: F.linear(F.rms_norm(x, (d,), norm_w, 1e-6), w) + x),
        "tilegraph fused": rotating(
            lambda w: tg.linear(x, w, norm_weight=norm_w, residual=x, out=out)),
        "tilegraph fused + PDL": rotating(
            lambda w: tg.linear(x, w, norm_weight=norm_w, residual=x, out=out,
                                prefetch_weight=True)),
    }, lambda: K.linear_ref(x.double(), weights[0].double(), norm_weight=norm_w.double(),
                            residual=x.double()),
        dtype, nbytes=weight_bytes, graph=True, rows=rows, copy_gbps=copy_gbps)


def bench_decode_linear(rows, copy_gbps, quick):
    for dtype in (torch.float32, torch.bfloat16):
        _bench_linear(dtype, 2048, rows, copy_gbps)


BENCHES = {"elementwise": bench_elementwise, "rows": bench_rows, "matmul": bench_matmul,
           "linear": bench_decode_linear}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", metavar="GROUP",
                        help=f"groups to run: {', '.join(BENCHES)} (default: all)")
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(BENCHES))
    if unknown:
        parser.error(f"unknown group(s) {unknown}; choose from {list(BENCHES)}")
    if not torch.cuda.is_available():
        print("This benchmark needs a CUDA GPU; `tilegraph check` verifies kernels on CPU.")
        return 2
    env = environment()
    ceil = ceilings(refresh=True)
    print(f"{env['device']}  torch {env['torch']}  triton {env['triton']}  git {env['git']}")
    print(f"measured copy bandwidth {ceil['copy_gbps']:.0f} GB/s, "
          f"bf16 matmul {ceil['matmul_tflops_bfloat16']:.0f} TFLOP/s", flush=True)
    rows: list[dict] = []
    for name in args.only or BENCHES:
        BENCHES[name](rows, ceil["copy_gbps"], args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "kernels.json"
    tuned = {"gemm": sys.modules["tilegraph.kernels.matmul"]._tuner.results()}
    path.write_text(json.dumps({"environment": env, "ceilings": ceil, "results": rows,
                                "tuned_configs": tuned}, indent=1))
    print(f"saved {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
