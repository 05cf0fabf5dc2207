"""`tilegraph check`: every kernel against its float64 reference on this machine's device."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

import tilegraph as tg

from .kernels.add import add_ref
from .kernels.decode_layer import decode_layer_ref
from .kernels.decode_stack import decode_stack_ref
from .kernels.gelu import gelu_ref
from .kernels.linear import linear_ref
from .kernels.matmul import matmul_ref
from .kernels.rms_norm import rms_norm_ref
from .kernels.softmax import softmax_ref
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
        return tg.add(a, b, out=poisoned(a.shape, dt, dev)), add_ref(a.double(), b.double())

    def gelu(approximate):
        def run(dt, dev):
            x = randn(rows, cols, dtype=dt, device=dev, scale=3.0)
            out = tg.gelu(x, approximate=approximate, out=poisoned(x.shape, dt, dev))
            return out, gelu_ref(x.double(), approximate)
        return run

    def softmax(dt, dev):
        x = randn(rows, cols, dtype=dt, device=dev, scale=3.0)
        return tg.softmax(x, out=poisoned(x.shape, dt, dev)), softmax_ref(x.double())

    def rms_norm(dt, dev):
        x, w = randn(rows, cols, dtype=dt, device=dev), randn(cols, dtype=dt, device=dev)
        out = tg.rms_norm(x, w, out=poisoned(x.shape, dt, dev))
        return out, rms_norm_ref(x.double(), w.double())

    def linear(n_rows):
        def run(dt, dev):
            x = randn(n_rows, k, dtype=dt, device=dev)
            w = randn(n, k, dtype=dt, device=dev, scale=k**-0.5)
            g, b = randn(k, dtype=dt, device=dev), randn(n, dtype=dt, device=dev)
            r = randn(n_rows, n, dtype=dt, device=dev)
            kw = dict(norm_weight=g, activation="gelu_tanh", residual=r)
            out = tg.linear(x, w, b, **kw, out=poisoned((n_rows, n), dt, dev))
            ref = linear_ref(x.double(), w.double(), b.double(),
                               **{key: v.double() if torch.is_tensor(v) else v
                                  for key, v in kw.items()})
            return out, ref
        return run

    def matmul(dt, dev):
        a = randn(m, k, dtype=dt, device=dev)
        b = randn(k, n, dtype=dt, device=dev, scale=k**-0.5)
        out = tg.matmul(a, b, activation="gelu", out=poisoned((m, n), dt, dev))
        return out, matmul_ref(a.double(), b.double(), activation="gelu")

    def decode_layer(h_dtype):
        """A square layer of 3 rows: h in the weights' dtype (two kernels), or in fp32 (one
        kernel where the rule takes it, the accumulator written in place)."""
        def run(dt, dev):
            d = cols
            h = randn(3, d, dtype=h_dtype or dt, device=dev)
            g = randn(d, dtype=dt, device=dev, scale=0.1) + 1
            wq, wo = (randn(d, d, dtype=dt, device=dev, scale=d**-0.5) for _ in range(2))
            out = tg.decode_layer(h, g, wq, wo, out=poisoned(h.shape, h.dtype, dev))
            ref = decode_layer_ref(h.double(), g.double(), wq.double(), wo.double())
            return out, ref
        return run

    def decode_stack(dt, dev):
        """Three square layers at one row: one kernel a layer, h carried in fp32 copies."""
        d = cols
        h = randn(1, d, dtype=dt, device=dev)
        g = [randn(d, dtype=dt, device=dev, scale=0.1) + 1 for _ in range(3)]
        wq, wo = ([randn(d, d, dtype=dt, device=dev, scale=d**-0.5) for _ in range(3)]
                  for _ in range(2))
        out = tg.decode_stack(h, g, wq, wo, out=poisoned(h.shape, h.dtype, dev))
        return out, decode_stack_ref(h.double(), *[[t.double() for t in ts] for ts in (g, wq, wo)])

    return [
        ("add", f"{rows}x{cols}", add),
        ("gelu tanh", f"{rows}x{cols}", gelu("tanh")),
        ("gelu erf", f"{rows}x{cols}", gelu("none")),
        ("softmax", f"{rows}x{cols}", softmax),
        ("rms_norm", f"{rows}x{cols}", rms_norm),
        ("linear matvec", f"3x{k} @ {n}x{k}", linear(3)),
        ("linear tiled", f"{m}x{k} @ {n}x{k}", linear(m)),
        ("matmul+gelu", f"{m}x{k} @ {k}x{n}", matmul),
        ("decode_layer", f"3x{cols}, {cols}^2 weights", decode_layer(None)),
        ("decode_layer fp32 h", f"3x{cols}, {cols}^2 weights", decode_layer(torch.float32)),
        ("decode_stack", f"1x{cols}, 3 layers of {cols}^2", decode_stack),
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
