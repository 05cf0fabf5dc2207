"""tilegraph: fused Triton kernels captured into CUDA graphs, and honest measurement.

    import tilegraph as tg
    y = tg.linear(x, w, norm_weight=g, residual=x)   # RMSNorm + projection + residual, 1 kernel
"""

from . import _runtime  # noqa: F401  (first: picks the Triton interpreter on CPU machines)
from .errors import CaptureError, CollectiveError, SideEffectWarning, StaleOutputError
from .generate import Generator
from .graph import Graph, GraphRunner, TrainStep, capture, scope
from .kernels.add import add
from .kernels.decode_attention import decode_attention
from .kernels.decode_layer import decode_layer
from .kernels.decode_stack import decode_stack
from .kernels.gelu import gelu
from .kernels.linear import interleave_gate_up, linear
from .kernels.linear_qkv import interleave_rotary_pairs, linear_qkv
from .kernels.matmul import matmul
from .kernels.rms_norm import rms_norm
from .kernels.rotary import rotary_qkv
from .kernels.softmax import softmax

__version__ = "0.1.0"

__all__ = ["CaptureError", "CollectiveError", "Generator", "Graph", "GraphRunner",
           "SideEffectWarning", "StaleOutputError", "TrainStep",
           "__version__", "add", "capture", "decode_attention", "decode_layer",
           "decode_stack", "gelu",
           "interleave_gate_up", "interleave_rotary_pairs", "linear", "linear_qkv", "matmul",
           "rms_norm", "rotary_qkv", "scope", "softmax"]
