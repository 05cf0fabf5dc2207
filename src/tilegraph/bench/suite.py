"""The kernel suite behind `tilegraph bench`: each tilegraph kernel beside the approaches a user
would otherwise pick, at several sizes, all checked against a float64 reference first.

A kernel's *size* is one integer, its meaning given in KERNELS[name].size_means. Bytes count the
ideal traffic (each input read once, each output written once); flops count multiply-adds x 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .. import kernels as K
from .._runtime import INTERPRET
from ..cuda import ExtensionUnavailable, gelu_extension, missing_build_tools
from ..testing import randn
from .compare import Unavailable

ROWS_GPU, ROWS_CPU = 8192, 7  # rows of the softmax / rms_norm inputs (8192: PERF.md sizes)


@dataclass
class Case:
    """One kernel at one size and dtype: what bench.compare() needs."""
    shape: str
    variants: dict
    reference: Callable
    args: tuple
    baseline: str
    bytes: int | None = None
    flops: int | None = None
    graph: bool = False  # time graph replays over inputs rotated past L2 (see above _gelu)
    rotate: tuple[int, ...] | None = None  # which args those are (None: all)
    yardsticks: dict = field(default_factory=dict)  # timed beside, not checked


@dataclass(frozen=True)
class KernelBench:
    name: str
    size_means: str
    dtype: torch.dtype
    gpu_sizes: tuple[int, ...]
    cpu_sizes: tuple[int, ...]
    build: Callable[[int, torch.dtype, str], Case]
    throughput: str = "gbps"  # what its plot shows: "gbps" or "tflops"

    def default_sizes(self) -> tuple[int, ...]:
        return self.cpu_sizes if INTERPRET else self.gpu_sizes


def _element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _compiled(fn: Callable) -> Callable | Unavailable:
    if INTERPRET:
        return Unavailable("CPU machine: this suite compares GPU code")
    torch.compiler.reset()  # each case compiles afresh; no recompile limit across sizes
    return torch.compile(fn, dynamic=False)


def _cuda_gelu() -> Callable | Unavailable:
    reason = missing_build_tools()
    if reason is not None:
        return Unavailable(reason)

    def run(x):
        try:
            return gelu_extension().gelu_tanh_cuda(x)
        except ExtensionUnavailable as e:  # tools present but unusable: say so, do not crash
            raise RuntimeError(f"CUDA C++ build unavailable: {e}") from e
    return run


def gelu_tanh_formula(x):
    """GELU as a user writes it in PyTorch: six kernels, each a round trip to memory."""
    return 0.5 * x * (1.0 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))


def softmax_formula(x):
    """Softmax in four PyTorch ops (max, exp, sum, divide), as first written by hand."""
    shifted = x - x.max(dim=-1, keepdim=True).values
    numerator = torch.exp(shifted)
    return numerator / numerator.sum(dim=-1, keepdim=True)


def rms_norm_formula(x, w, eps: float = 1e-6):
    x32 = x.float()
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


def norm_linear_formula(x, w, g, eps: float = 1e-6):
    """The decode projection unfused: y = x + rms_norm(x) * g @ W.T."""
    return F.linear(F.rms_norm(x, (x.shape[-1],), g, eps), w) + x


def _plain_pass(x: torch.Tensor) -> dict:
    """The yardstick of a memory-bound case: the same bytes read and written by the simplest
    elementwise kernel, x.neg() into another buffer. Not copy_(): captured in a graph that is
    a memcpy node, which moved 512 MiB at 81% of the copy ceiling on an H100 where kernels
    moved it at 100%."""
    y = torch.empty_like(x)
    return {"plain pass (same bytes)": lambda x, *rest: torch.neg(x, out=y)}


# Memory-bound cases (graph=True below) are timed as graph replays cycling through input
# copies spanning 3x L2 (QuACK's method), not as single calls after an L2 flush. The copy
# ceiling is a copy of 1 GiB timed back to back; timed one call after an L2 flush (a 2x L2
# buffer zeroed), a copy of the 128 MiB of RMSNorm 8192x4096 bf16 reads 89% of that ceiling,
# and a kernel that matches the copy 89% too: the event and launch around one call and the
# flush's dirty lines, which the timed call must write back, cost ~5 us of a 47 us kernel.
# Replayed from a graph over rotated copies, the same copy reads 96% (H100,
# benchmarks/explore_rows.py flush).


def _gelu(n: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(n, dtype=dtype, device=device, scale=3.0)
    out = torch.empty_like(x)
    return Case(f"{n}", {
        "torch formula": gelu_tanh_formula,
        "F.gelu": lambda x: F.gelu(x, approximate="tanh"),
        "CUDA C++": _cuda_gelu(),
        "tilegraph": lambda x: K.gelu(x, out=out),
        "torch.compile": _compiled(gelu_tanh_formula),
    }, lambda x: K.gelu_ref(x.double()), (x,), "F.gelu", bytes=2 * n * _element_size(dtype),
        yardsticks=_plain_pass(x), graph=True)


def _rows(device: str) -> int:
    return ROWS_GPU if device == "cuda" else ROWS_CPU


def _softmax(n: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(_rows(device), n, dtype=dtype, device=device, scale=3.0)
    out = torch.empty_like(x)
    return Case(f"{x.shape[0]}x{n}", {
        "torch formula": softmax_formula,
        "torch.softmax": lambda x: torch.softmax(x, -1),
        "tilegraph": lambda x: K.softmax(x, out=out),
        "torch.compile": _compiled(softmax_formula),
    }, lambda x: K.softmax_ref(x.double()), (x,), "torch.softmax",
        bytes=2 * x.numel() * x.element_size(), yardsticks=_plain_pass(x), graph=True)


def _rms_norm(n: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(_rows(device), n, dtype=dtype, device=device)
    w = randn(n, dtype=dtype, device=device)
    out = torch.empty_like(x)
    return Case(f"{x.shape[0]}x{n}", {
        "torch formula": rms_norm_formula,
        "F.rms_norm": lambda x, w: F.rms_norm(x, (n,), w, 1e-6),
        "tilegraph": lambda x, w: K.rms_norm(x, w, out=out),
        "torch.compile": _compiled(rms_norm_formula),
    }, lambda x, w: K.rms_norm_ref(x.double(), w.double()), (x, w), "F.rms_norm",
        bytes=(2 * x.numel() + n) * x.element_size(), yardsticks=_plain_pass(x),
        rotate=(0,), graph=True)  # w stays in L2, as it does across a real batch


def _linear(d: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(1, d, dtype=dtype, device=device)
    w = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    out = torch.empty_like(x)
    return Case(f"1x{d} @ {d}x{d}", {
        "F.linear": F.linear,
        "tilegraph": lambda x, w: K.linear(x, w, out=out),
        "tilegraph + PDL": lambda x, w: K.linear(x, w, out=out, prefetch_weight=True),
        "torch.compile": _compiled(F.linear),
    }, lambda x, w: K.linear_ref(x.double(), w.double()), (x, w), "F.linear",
        bytes=(d * d + 2 * d) * x.element_size(), flops=2 * d * d, graph=True,
        rotate=(1,))  # weights rotated past L2; x is in L2, written by the previous layer


def _norm_linear(d: int, dtype: torch.dtype, device: str) -> Case:
    x = randn(1, d, dtype=dtype, device=device)
    w = randn(d, d, dtype=dtype, device=device, scale=d**-0.5)
    g = randn(d, dtype=dtype, device=device)
    out = torch.empty_like(x)
    return Case(f"1x{d} @ {d}x{d}", {
        "torch formula": norm_linear_formula,
        "tilegraph fused": lambda x, w, g: K.linear(x, w, norm_weight=g, residual=x, out=out),
        "tilegraph fused + PDL": lambda x, w, g: K.linear(
            x, w, norm_weight=g, residual=x, out=out, prefetch_weight=True),
        "torch.compile": _compiled(norm_linear_formula),
    }, lambda x, w, g: K.linear_ref(x.double(), w.double(), norm_weight=g.double(),
                                    residual=x.double()),
        (x, w, g), "torch formula", bytes=(d * d + 4 * d) * x.element_size(), flops=2 * d * d,
        graph=True, rotate=(1, 2))  # a layer's weights rotated past L2, as in _linear


def _matmul(n: int, dtype: torch.dtype, device: str) -> Case:
    a = randn(n, n, dtype=dtype, device=device)
    b = randn(n, n, dtype=dtype, device=device, scale=n**-0.5)
    out = torch.empty_like(a)
    return Case(f"{n}x{n}x{n}", {
        "torch.matmul": torch.matmul,
        "tilegraph": lambda a, b: K.matmul(a, b, out=out),
        "torch.compile": _compiled(torch.matmul),
    }, lambda a, b: K.matmul_ref(a.double(), b.double()), (a, b), "torch.matmul",
        bytes=3 * n * n * a.element_size(), flops=2 * n**3)


def matmul_gelu_formula(a, b):
    return F.gelu(a @ b, approximate="tanh")


def _matmul_gelu(n: int, dtype: torch.dtype, device: str) -> Case:
    case = _matmul(n, dtype, device)
    out = torch.empty(n, n, dtype=dtype, device=device)
    case.variants = {
        "torch.matmul + F.gelu": matmul_gelu_formula,
        "tilegraph fused": lambda a, b: K.matmul(a, b, activation="gelu_tanh", out=out),
        "torch.compile": _compiled(matmul_gelu_formula),
    }
    case.reference = lambda a, b: K.matmul_ref(a.double(), b.double(), activation="gelu_tanh")
    case.baseline = "torch.matmul + F.gelu"
    return case


KERNELS: dict[str, KernelBench] = {k.name: k for k in (
    KernelBench("gelu", "elements", torch.float32, (2**16, 2**20, 2**24, 2**26), (1000, 4099),
                _gelu),
    KernelBench("softmax", f"columns ({ROWS_GPU} rows; {ROWS_CPU} on CPU)", torch.float32,
                (1024, 4096, 16384), (100, 781), _softmax),
    KernelBench("rms_norm", f"columns ({ROWS_GPU} rows; {ROWS_CPU} on CPU)", torch.bfloat16,
                (1024, 4096, 16384), (100, 781), _rms_norm),
    KernelBench("linear", "d of a batch-1 projection 1xd @ dxd", torch.bfloat16,
                (512, 2048, 4096), (96, 260), _linear),
    KernelBench("norm_linear", "d of x + rms_norm(x) @ W.T, batch 1", torch.bfloat16,
                (512, 2048, 4096), (96, 260), _norm_linear),
    KernelBench("matmul", "n of an n x n x n product", torch.bfloat16, (1024, 4096, 8192),
                (64, 100), _matmul, throughput="tflops"),
    KernelBench("matmul_gelu", "n of gelu(a @ b), n x n x n", torch.bfloat16, (4096,), (64,),
                _matmul_gelu, throughput="tflops"),
)}


def parse_size(text: str) -> int:
    """'4096', '64K', '16M' -> int (K = 1024, M = 1024^2)."""
    text = text.strip()
    scale = {"k": 2**10, "m": 2**20, "g": 2**30}.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"size {text!r} is not a positive integer (suffixes K and M allowed)")
    return int(digits) * scale


def select_variants(case: Case, wanted: list[str] | None) -> dict:
    """The case's variants, only those named in `wanted` (case-insensitive) when given."""
    return _named(case.variants, wanted)


def _named(fns: dict, wanted: list[str] | None) -> dict:
    if not wanted:
        return fns
    keep = {w.lower() for w in wanted}
    return {name: fn for name, fn in fns.items() if name.lower() in keep}


def run_kernel(bench: KernelBench, sizes: tuple[int, ...], dtype: torch.dtype,
               variants: list[str] | None = None, device: str | None = None,
               ceilings: dict | None = None,
               progress: Callable[[str], None] | None = None) -> list[dict]:
    """compare() at every size; one flat row per variant and size (kernel, size, shape, dtype
    first). Sizes with no selected variant are left out."""
    from .compare import compare

    device = device or ("cpu" if INTERPRET else "cuda")
    short = {"warmup_ms": 2, "rep_ms": 10} if INTERPRET else {}  # interpreter: seconds/call
    rows = []
    for size in sizes:
        case = bench.build(size, dtype, device)
        chosen = select_variants(case, variants)
        if not chosen:
            continue
        baseline = case.baseline if case.baseline in chosen else None
        result = compare(chosen, case.reference, case.args, bytes=case.bytes, flops=case.flops,
                         baseline=baseline, graph=case.graph, rotate=case.rotate,
                         ceilings=ceilings, yardsticks=_named(case.yardsticks, variants),
                         progress=(lambda v, s=size: progress(f"{bench.name} {s}: {v}"))
                         if progress else None, **short)
        for row in result.rows():
            rows.append({"kernel": bench.name, "size": size, "shape": case.shape,
                         "dtype": str(dtype).removeprefix("torch."), "baseline": result.baseline,
                         **row})
    return rows
