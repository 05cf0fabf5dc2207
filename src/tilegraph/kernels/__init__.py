"""Triton kernels, one module per op: kernel, launcher, custom-op registration, reference."""

from .add import add, add_ref
from .decode_stack import decode_stack, decode_stack_ref, decode_stack_workspace
from .gelu import gelu, gelu_ref
from .linear import linear, linear_ref
from .matmul import matmul, matmul_ref
from .rms_norm import rms_norm, rms_norm_ref
from .softmax import softmax, softmax_ref

__all__ = ["add", "add_ref", "decode_stack", "decode_stack_ref", "decode_stack_workspace",
           "gelu", "gelu_ref", "linear", "linear_ref", "matmul", "matmul_ref",
           "rms_norm", "rms_norm_ref", "softmax", "softmax_ref"]
