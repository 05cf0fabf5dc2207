"""Is the row-loop matvec (tg.linear's CUDA-core kernel at 2-16 rows) faster when Triton does
not know its weight rows are aligned? Session 41 found 16-byte loads slower than element loads
there at K = 1000-1400; this times the rule's plan on shapes whose K is a multiple of 16, as
compiled (K and the row stride specialised as multiples of 16) and with those two arguments
left unspecialised (a second JIT of the same function, do_not_specialize), so that the
weight tile loads an element at a time. Graph replays over weights rotated past L2, PDL on.

    PYTHONPATH=src python3 research/probe_rowloop_alignment.py [--rows 2,3,4,8]
        [--shapes 1024x1024,2048x2048] [--dtype bf16,fp32]
"""

import argparse
import functools

import torch
import triton

from tilegraph.bench.timing import measure
from tilegraph.kernels import _matvec
from tilegraph.kernels.autotune import copies_spanning_l2, rotating
from tilegraph.kernels.linear import linear_ref
from tilegraph.testing import TOLERANCES, randn, rel_error

SHAPES = ((1024, 1024), (1536, 1536), (896, 896), (2048, 2048), (1152, 896), (3072, 1024),
          (1024, 3072))
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
UNALIGNED = triton.jit(_matvec._matvec_kernel.fn, do_not_specialize=["K", "stride_wn"])


def launch(kernel, x, out, config, w):
    M, K = x.shape
    N = w.shape[0]
    kernel[(triton.cdiv(N, config["BLOCK_N"]),)](
        out, out.stride(0), x, x.stride(0), w, w.stride(0), None, None, None, 0, _matvec.NO_ROTARY,
        M, N, K, 0.0, HAS_NORM=False, HAS_BIAS=False, HAS_RESIDUAL=False, ACTIVATION="none",
        PREFETCH_WEIGHT=True, BLOCK_M=triton.next_power_of_2(M), **config, launch_pdl=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", default="2,3,4,8")
    parser.add_argument("--shapes")
    parser.add_argument("--dtype", default="bf16,fp32")
    args = parser.parse_args()
    shapes = (tuple(tuple(int(v) for v in s.split("x")) for s in args.shapes.split(","))
              if args.shapes else SHAPES)
    print(torch.cuda.get_device_name(), "| us: as compiled, K unspecialised, ratio", flush=True)
    for name in args.dtype.split(","):
        dtype = DTYPES[name]
        for n, k in shapes:
            weights = [randn(n, k, dtype=dtype, device="cuda", scale=k**-0.5)
                       for _ in range(max(2, copies_spanning_l2(n * k * dtype.itemsize)))]
            for rows in (int(r) for r in args.rows.split(",")):
                config = _matvec.matvec_config(rows, n, k, dtype.itemsize)
                if not config.get("ROW_LOOP"):
                    continue
                x = randn(rows, k, dtype=dtype, device="cuda")
                out = torch.empty(rows, n, dtype=dtype, device="cuda")
                times = []
                for kernel in (_matvec._matvec_kernel, UNALIGNED):
                    out.fill_(float("nan"))
                    launch(kernel, x, out, config, weights[0])
                    error = rel_error(out, linear_ref(x.double(), weights[0].double()))
                    assert error <= TOLERANCES[dtype], f"{n}x{k} {rows} rows: error {error}"
                    call = rotating(functools.partial(launch, kernel, x, out, config), weights)
                    times.append(measure(call, warmup_ms=3, rep_ms=20, graph=True).median * 1e3)
                print(f"{name} {n:>5} x {k:<5} {rows:>2} rows  {times[0]:6.2f}  {times[1]:6.2f}  "
                      f"{times[0] / times[1]:.3f}", flush=True)
            del weights


if __name__ == "__main__":
    main()
