"""Correctness helpers shared by the test-suite, `tilegraph check` and the benchmarks."""

from __future__ import annotations

import math

import torch

# Relative error ||out - ref|| / ||ref|| against a float64 reference. Rounding the output alone
# costs about 3e-4 (fp16) and 2.3e-3 (bf16); fp32 lands near 1e-7.
TOLERANCES = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}
# Whole models (logits after every layer, against Hugging Face transformers on the same weights).
MODEL_TOLERANCES = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 2e-2}


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf if out has a NaN or inf where ref does not."""
    out64, ref64 = out.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.equal(torch.isfinite(out64), torch.isfinite(ref64)):
        return math.inf
    finite = torch.isfinite(ref64)
    diff = (out64[finite] - ref64[finite]).norm().item()
    scale = ref64[finite].norm().item()
    return diff / scale if scale > 0 else diff


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None,
                 what: str = "") -> None:
    tol = TOLERANCES[dtype or out.dtype]
    err = rel_error(out, ref)
    assert err <= tol, f"{what} relative error {err:.3g} > tolerance {tol:g} for {out.dtype}"


def assert_one_rounding(out: torch.Tensor, expected: torch.Tensor) -> None:
    """out equals expected up to one rounding of a sum in out's dtype: exact on a GPU,
    where kernels round to nearest as PyTorch does; Triton's interpreter rounds some
    16-bit values toward zero instead."""
    torch.testing.assert_close(out, expected, atol=0, rtol=torch.finfo(out.dtype).eps)


def assert_grad_close(grad: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype,
                      what: str = "") -> None:
    """A gradient goes through two or three rounded intermediates (dz, the normalised rows,
    dx before the norm's backward), each a rounding of the output dtype: twice the single-op
    tolerance of TOLERANCES."""
    err = rel_error(grad, expected)
    assert err <= 2 * TOLERANCES[dtype], f"{what} relative error {err:.3g} for {dtype}"


def randn(*shape: int, dtype=torch.float32, device="cpu", scale: float = 1.0,
          generator: torch.Generator | None = None) -> torch.Tensor:
    """Random normal values (never zeros: they hide unwritten outputs), made in fp32."""
    x = torch.randn(shape, generator=generator, dtype=torch.float32, device="cpu") * scale
    return x.to(device=device, dtype=dtype)


def poisoned(shape, dtype, device) -> torch.Tensor:
    """An output buffer full of NaN: any element the kernel fails to write fails the check."""
    return torch.full(tuple(shape), math.nan, dtype=dtype, device=device)


def max_token_error(outputs: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest per-token ||out - ref|| / ||ref|| over (tokens, ...) tensors; inf where
    anything is not finite."""
    out = outputs.double().flatten(1)
    ref = expected.double().flatten(1)
    if not torch.isfinite(out).all():
        return math.inf
    return ((out - ref).norm(dim=1) / ref.norm(dim=1)).max().item()


def stack_tolerance(dtype: torch.dtype, layers: int) -> float:
    """The relative error allowed after `layers` layers. Every layer rounds h and its two
    projections to the storage dtype; independent rounding errors add like a random walk, so
    the bound grows as sqrt(layers). (PyTorch eager itself lands at 1.0e-2 after 22 bf16
    layers on the seed-bf16 preset, over the single-op bf16 tolerance.)"""
    return TOLERANCES[dtype] * math.sqrt(layers)
