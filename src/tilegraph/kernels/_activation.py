"""Activations shared by kernel bodies and epilogues (fp32 in, fp32 out).

ACTIVATIONS names what `activation=` accepts across ops; "none" means identity.
"""

import torch
import triton
import triton.language as tl

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh")

# Globals read inside @triton.jit must be constexpr.
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_INV_SQRT_2 = tl.constexpr(0.7071067811865476)


@triton.jit
def gelu_tanh(x):
    """0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3) (Hendrycks & Gimpel 2016).

    Written as x * sigmoid(2u) = x / (1 + exp(-2u)), the same function: 1 + tanh(u) would
    cancel to 0 in fp32 for x below about -5, and exp needs no libdevice in the interpreter.
    """
    inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    return x / (1.0 + tl.exp(-2.0 * inner))


@triton.jit
def gelu_erf(x):
    """0.5 x (1 + erf(x / sqrt(2)))."""
    return 0.5 * x * (1.0 + tl.math.erf(x * _INV_SQRT_2))


@triton.jit
def apply_activation(x, ACTIVATION: tl.constexpr):
    if ACTIVATION == "relu":
        x = tl.maximum(x, 0.0)
    elif ACTIVATION == "gelu":
        x = gelu_erf(x)
    elif ACTIVATION == "gelu_tanh":
        x = gelu_tanh(x)
    return x


def activation_code(activation) -> str:
    """Validate a user's activation= and map None to "none"."""
    if activation is None:
        return "none"
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be None or one of {ACTIVATIONS[1:]}, got {activation!r}")
    return activation


def activation_ref(y: torch.Tensor, activation: str | None) -> torch.Tensor:
    """The same activations in PyTorch, for references."""
    if activation == "relu":
        return torch.relu(y)
    if activation == "gelu":
        return torch.nn.functional.gelu(y)
    if activation == "gelu_tanh":
        return torch.nn.functional.gelu(y, approximate="tanh")
    return y
