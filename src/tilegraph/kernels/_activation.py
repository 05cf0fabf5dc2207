"""Activations shared by kernel bodies and epilogues (fp32 in, fp32 out).

ACTIVATIONS names what `activation=` accepts across ops; "none" means identity, "relu2"
the squared ReLU (Arcee's MLP, ungated).
GLU_ACTIVATIONS halve the width and only tg.linear takes them: each reads the projection's
columns as interleaved pairs (gate_i, up_i) and gives act(gate_i) * up_i, act silu for
"swiglu" (Llama's MLP), gelu for "geglu" and its tanh approximation for "geglu_tanh"
(Gemma's).
"""

import torch
import triton
import triton.language as tl

ACTIVATIONS = ("none", "relu", "gelu", "gelu_tanh", "relu2")
GLU_ACTIVATIONS = ("swiglu", "geglu", "geglu_tanh")
# A mixture's experts (kernels/experts.py) take GPT-OSS's SwiGLU besides: (up + 1) * gate *
# sigmoid(1.702 gate), gate clamped to at most 7 and up to [-7, 7] first.
EXPERT_GLU_ACTIVATIONS = (*GLU_ACTIVATIONS, "swiglu_oss")
SWIGLU_OSS_ALPHA, SWIGLU_OSS_LIMIT = 1.702, 7.0

# Globals read inside @triton.jit must be constexpr.
_SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
_INV_SQRT_2 = tl.constexpr(0.7071067811865476)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)
_OSS_ALPHA = tl.constexpr(SWIGLU_OSS_ALPHA)
_OSS_LIMIT = tl.constexpr(SWIGLU_OSS_LIMIT)


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
    elif ACTIVATION == "relu2":
        x = tl.maximum(x, 0.0)
        x = x * x
    elif ACTIVATION == "gelu":
        x = gelu_erf(x)
    elif ACTIVATION == "gelu_tanh":
        x = gelu_tanh(x)
    return x


@triton.jit
def activation_derivative(z, ACTIVATION: tl.constexpr):
    """d act(z) / dz in fp32, for the backward passes (ACTIVATION other than "none")."""
    if ACTIVATION == "relu":
        d = tl.where(z > 0.0, 1.0, 0.0)  # 0 at z == 0, as torch's relu backward
    elif ACTIVATION == "relu2":
        d = 2.0 * tl.maximum(z, 0.0)
    elif ACTIVATION == "gelu":
        # Phi(z) + z phi(z): the normal CDF and density
        d = 0.5 * (1.0 + tl.math.erf(z * _INV_SQRT_2)) + z * _INV_SQRT_2PI * tl.exp(-0.5 * z * z)
    else:
        # z s(z) with s = sigmoid(2u), u = sqrt(2/pi) (z + 0.044715 z^3): s + z s' where
        # s' = 2 s (1 - s) du/dz. s underflows to 0 for very negative z, and s (1 - s) to 0 at
        # both ends, so the product never forms inf * 0.
        inner = _SQRT_2_OVER_PI * (z + 0.044715 * z * z * z)
        s = 1.0 / (1.0 + tl.exp(-2.0 * inner))
        d = s + z * 2.0 * s * (1.0 - s) * _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * z * z)
    return d


@triton.constexpr_function
def is_glu(activation) -> bool:
    """Whether an ACTIVATION pairs columns (a GLU_ACTIVATIONS one): usable in kernels."""
    return activation in GLU_ACTIVATIONS


@triton.jit
def glu_pairs(acc, cols, ROWS: tl.constexpr, COLS: tl.constexpr, ACTIVATION: tl.constexpr):
    """Columns (2i, 2i + 1) of acc (ROWS, COLS) hold (gate_i, up_i): returns
    act(gate) * up (ROWS, COLS // 2) and its output columns cols[2i] // 2 (COLS // 2,).
    Pairs sit side by side so that any tile of an even width holds whole pairs."""
    gate, up = tl.split(tl.reshape(acc, (ROWS, COLS // 2, 2)))
    out_cols, _ = tl.split(tl.reshape(cols, (COLS // 2, 2)))
    return glu(gate, up, ACTIVATION), out_cols // 2


@triton.jit
def glu(gate, up, ACTIVATION: tl.constexpr):
    """act(gate) * up for a GLU ACTIVATION (an EXPERT_GLU_ACTIVATIONS one); silu(gate) =
    gate * sigmoid(gate)."""
    if ACTIVATION == "swiglu_oss":
        gate = tl.minimum(gate, _OSS_LIMIT)
        up = tl.minimum(tl.maximum(up, -_OSS_LIMIT), _OSS_LIMIT) + 1.0
        gated = gate / (1.0 + tl.exp(-(gate * _OSS_ALPHA)))
    elif ACTIVATION == "swiglu":
        gated = gate / (1.0 + tl.exp(-gate))
    elif ACTIVATION == "geglu":
        gated = gelu_erf(gate)
    else:
        gated = gelu_tanh(gate)
    return gated * up


@triton.jit
def glu_grads(dy, gate, up, ACTIVATION: tl.constexpr):
    """(d gate, d up) of y = act(g) u: dg = dy u act'(g), du = dy act(g); for silu,
    act'(g) = s (1 + g (1 - s)) with s = sigmoid(g)."""
    if ACTIVATION == "swiglu":
        s = 1.0 / (1.0 + tl.exp(-gate))
        d_gate, d_up = dy * up * s * (1.0 + gate * (1.0 - s)), dy * gate * s
    elif ACTIVATION == "geglu":
        d_gate, d_up = dy * up * activation_derivative(gate, "gelu"), dy * gelu_erf(gate)
    else:
        d_gate, d_up = dy * up * activation_derivative(gate, "gelu_tanh"), dy * gelu_tanh(gate)
    return d_gate, d_up


def activation_code(activation, glu: bool = False) -> str:
    """Validate a user's activation= and map None to "none"; glu: the op takes
    GLU_ACTIVATIONS too."""
    if activation is None:
        return "none"
    allowed = ACTIVATIONS + (GLU_ACTIVATIONS if glu else ())
    if activation not in allowed:
        raise ValueError(f"activation must be None or one of {allowed[1:]}, got {activation!r}")
    return activation


def activation_ref(y: torch.Tensor, activation: str | None) -> torch.Tensor:
    """The same activations in PyTorch, for references."""
    if activation == "relu":
        return torch.relu(y)
    if activation == "relu2":
        return torch.relu(y).square()
    if activation == "gelu":
        return torch.nn.functional.gelu(y)
    if activation == "gelu_tanh":
        return torch.nn.functional.gelu(y, approximate="tanh")
    if activation in EXPERT_GLU_ACTIVATIONS:
        gate, up = y.unflatten(-1, (-1, 2)).unbind(-1)
        if activation == "swiglu_oss":
            return swiglu_oss_ref(gate, up)
        if activation == "swiglu":
            return torch.nn.functional.silu(gate) * up
        return activation_ref(gate, "gelu" if activation == "geglu" else "gelu_tanh") * up
    return y


def swiglu_oss_ref(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """GPT-OSS's SwiGLU in PyTorch, in the inputs' dtype, as transformers computes it."""
    gate = gate.clamp(max=SWIGLU_OSS_LIMIT)
    up = up.clamp(-SWIGLU_OSS_LIMIT, SWIGLU_OSS_LIMIT)
    return (up + 1) * (gate * torch.sigmoid(gate * SWIGLU_OSS_ALPHA))
