"""`tilegraph check`: every kernel against its float64 reference on this machine's device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import kernels as K
from .testing import TOLERANCES, poisoned, randn, rel_error

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@dataclass
class CheckResult:
    kernel: str
    dtype: torch.dtype
    shape: str
    error: float

    @property
    def passed(self) -> bool:
        return self.error <= TOLERANCES[self.dtype]


def _cases(large: bool) -> list[tuple[str, str, Callable]]:
    """(kernel, shape label, fn(dtype, device) -> (out, ref)) with awkward, non-power-of-2 sizes."""
    rows, cols = (1823, 781) if large else (7, 781)
    m, n, k = (1031, 1023, 1011) if large else (37, 29, 65)

    def add(dt, dev):
        a, b = randn(rows, cols, dtype=dt, device=dev), randn(rows, cols, dtype=dt, device=dev)
        return K.add(a, b, out=poisoned(a.shape, dt, dev)), K.add_ref(a.double(), b.double())

    def gelu(approximate):
        def run(dt, dev):
            x = randn(rows, cols, dtype=dt, device=dev, scale=3.0)
            out = K.gelu(x, approximate=approximate, out=poisoned(x.shape, dt, dev))
            return out, K.gelu_ref(x.double(), approximate)
        return run

    def softmax(dt, dev):
        x = randn(rows, cols, dtype=dt, device=dev, scale=3.0)
        return K.softmax(x, out=poisoned(x.shape, dt, dev)), K.softmax_ref(x.double())

    def rms_norm(dt, dev):
        x, w = randn(rows, cols, dtype=dt, device=dev), randn(cols, dtype=dt, device=dev)
        out = K.rms_norm(x, w, out=poisoned(x.shape, dt, dev))
        return out, K.rms_norm_ref(x.double(), w.double())

    def linear(n_rows):
        def run(dt, dev):
            x = randn(n_rows, k, dtype=dt, device=dev)
            w = randn(n, k, dtype=dt, device=dev, scale=k**-0.5)
            g, b = randn(k, dtype=dt, device=dev), randn(n, dtype=dt, device=dev)
            r = randn(n_rows, n, dtype=dt, device=dev)
            kw = dict(norm_weight=g, activation="gelu_tanh", residual=r)
            out = K.linear(x, w, b, **kw, out=poisoned((n_rows, n), dt, dev))
            ref = K.linear_ref(x.double(), w.double(), b.double(),
                               **{key: v.double() if torch.is_tensor(v) else v
                                  for key, v in kw.items()})
            return out, ref
        return run

    def matmul(dt, dev):
        a = randn(m, k, dtype=dt, device=dev)
        b = randn(k, n, dtype=dt, device=dev, scale=k**-0.5)
        out = K.matmul(a, b, activation="gelu", out=poisoned((m, n), dt, dev))
        return out, K.matmul_ref(a.double(), b.double(), activation="gelu")

    return [
        ("add", f"{rows}x{cols}", add),
        ("gelu tanh", f"{rows}x{cols}", gelu("tanh")),
        ("gelu erf", f"{rows}x{cols}", gelu("none")),
        ("softmax", f"{rows}x{cols}", softmax),
        ("rms_norm", f"{rows}x{cols}", rms_norm),
        ("linear matvec", f"3x{k} @ {n}x{k}", linear(3)),
        ("linear tiled", f"{m}x{k} @ {n}x{k}", linear(m)),
        ("matmul+gelu", f"{m}x{k} @ {k}x{n}", matmul),
    ]


def run_checks(device: str | None = None, seed: int = 0,
               progress: Callable[[str], None] | None = None) -> list[CheckResult]:
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    results = []
    for name, shape, fn in _cases(large=device == "cuda"):
        for dtype in DTYPES:
            if progress:
                progress(f"{name} {str(dtype).removeprefix('torch.')}")
            out, ref = fn(dtype, device)
            results.append(CheckResult(name, dtype, shape, rel_error(out, ref)))
    return results
