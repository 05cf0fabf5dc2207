"""tilegraph: fused Triton kernels captured into CUDA graphs, and honest measurement.

    import tilegraph as tg
    y = tg.linear(x, w, norm_weight=g, residual=x)   # RMSNorm + projection + residual, 1 kernel
"""

from . import _runtime  # noqa: F401  (first: picks the Triton interpreter on CPU machines)
from .errors import CaptureError, StaleOutputError
from .graph import Graph, GraphRunner, capture, scope
from .kernels import (
    add,
    decode_stack,
    decode_stack_workspace,
    gelu,
    linear,
    matmul,
    rms_norm,
    softmax,
)

__version__ = "0.1.0"

__all__ = ["CaptureError", "Graph", "GraphRunner", "StaleOutputError", "__version__", "add",
           "capture", "decode_stack", "decode_stack_workspace", "gelu", "linear", "matmul",
           "rms_norm", "scope", "softmax"]
