"""Input validation shared by every kernel launcher: clear errors naming the argument."""

from __future__ import annotations

import torch

from .._runtime import INTERPRET

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_tensor(name: str, t, *, dtypes=FLOAT_DTYPES, min_ndim: int = 0,
                 differentiable: bool = False) -> None:
    """A tensor of a supported dtype, on a device the kernels can reach; one that requires
    grad only where the op is `differentiable`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        names = ", ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise TypeError(f"{name} has dtype {t.dtype}; supported dtypes are {names}")
    if t.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s), got shape "
                         f"{tuple(t.shape)}")
    if t.device.type == "meta":
        raise ValueError(f"{name} is a meta tensor (shape and dtype, no data); tilegraph "
                         "kernels need a tensor with memory")
    if not differentiable:
        check_no_grad(name, t)
    if not INTERPRET and t.device.type != "cuda":
        raise ValueError(f"{name} is on {t.device}; tilegraph kernels need CUDA tensors "
                         "(set TRITON_INTERPRET=1 before importing tilegraph to run on CPU)")


def check_no_grad(name: str, t: torch.Tensor) -> None:
    """Refuse what autograd would need a gradient for, in ops without a backward: returning
    a result detached from the graph would fail far away, at .backward()."""
    if t.requires_grad and torch.is_grad_enabled():
        raise ValueError(f"{name} requires grad, but this tilegraph op has no backward "
                         "(it is an inference kernel); call it under torch.no_grad() or "
                         f"torch.inference_mode(), or pass {name}.detach()")


def wants_grad(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd must record this call: grad mode on and an input requiring grad."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def check_no_out_for_grad(out) -> None:
    """out= writes into a caller's buffer behind autograd's back; with inputs that require
    grad the result must be a new tensor autograd can record."""
    if out is not None:
        raise ValueError("out= cannot be used when an input requires grad (autograd records "
                         "a new result tensor); drop out=, or run under torch.no_grad() "
                         "if no gradient is wanted")


def check_like(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    """Same dtype and device as the main input."""
    if t.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but {ref_name} has {ref.dtype}; "
                        "they must match")
    if t.device != ref.device:
        raise ValueError(f"{name} is on {t.device} but {ref_name} is on {ref.device}; "
                         "they must be on the same device")


def check_shape(name: str, t: torch.Tensor, shape: tuple[int, ...]) -> None:
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(t.shape)}, expected {tuple(shape)}")


def check_eps(eps) -> float:
    """An RMSNorm epsilon: a non-negative number (bools are refused, though they are ints)."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"eps must be a non-negative number, got {eps!r}")
    return float(eps)


def byte_range(t: torch.Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    span = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride(), strict=True))
    return start, start + (span + 1) * t.element_size()


def check_no_overlap(out: torch.Tensor, name: str, t: torch.Tensor | None, *,
                     allow_identical: bool = False, out_name: str = "out") -> None:
    """Refuse an `out` (an output called `out_name`) that shares memory with an input the
    kernel still has to read.

    Element-wise kernels may write in place (`allow_identical`): each element is read before
    the same program writes it. A shifted overlap would read already-written values.
    """
    if t is None or torch.compiler.is_compiling():
        return  # traced (fake) tensors have no addresses to compare
    if allow_identical and out.data_ptr() == t.data_ptr() and out.shape == t.shape \
            and out.stride() == t.stride():
        return
    if memory_overlaps(out, t):
        raise ValueError(f"{out_name} overlaps {name} in memory; this kernel cannot work in "
                         f"place, pass a separate {out_name} tensor")


def memory_overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors' spans of memory intersect (False under torch.compile, whose
    traced tensors have no addresses to compare)."""
    if a.numel() == 0 or b.numel() == 0 or torch.compiler.is_compiling():
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False  # separate allocations: the common case, decided cheaply
    (a0, a1), (b0, b1) = byte_range(a), byte_range(b)
    return a0 < b1 and b0 < a1


def prepare_out(out, shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Allocate the result, or check that the caller's `out` can take it."""
    if out is None:
        return torch.empty(shape, dtype=dtype, device=device)
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor or None, got {type(out).__name__}")
    check_shape("out", out, shape)
    check_no_grad("out", out)
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}, expected {dtype}")
    if out.device != torch.device(device):
        raise ValueError(f"out is on {out.device}, expected {device}")
    if not out.is_contiguous():
        raise ValueError("out must be contiguous: kernels write it as dense rows")
    if not torch.compiler.is_compiling():
        # A kernel writes out behind autograd's back: move its version counter (and its
        # views' and base's) as a PyTorch op would, so what was recorded against the old
        # contents (a saved tensor, a handed-over norm: _norm_handoff.py) no longer matches.
        torch.autograd.graph.increment_version(out)
    return out


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """View as (rows, last dim) with unit stride along the last dim; copies only if it must."""
    rows = t.reshape(-1, t.shape[-1]) if t.ndim != 2 else t
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    return rows
