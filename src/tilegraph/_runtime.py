"""Where kernels run: compiled for CUDA when a device exists, else Triton's interpreter on CPU.

Imported first by the package: TRITON_INTERPRET must be set before any @triton.jit function
is defined, since triton.jit reads it at decoration time.
"""

import os
import warnings

import torch

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
if INTERPRET:
    # numpy warns about overflow and NaN in lanes that the kernels mask off anyway
    # (exp of a padded -inf, say); on a GPU those lanes are silent.
    warnings.filterwarnings("ignore", category=RuntimeWarning,
                            module=r"triton\.runtime\.interpreter")


def is_capturing() -> bool:
    """True while the current CUDA stream is being captured into a graph."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def device_name() -> str:
    """The GPU's name, or a label for the interpreter (used to key caches and results)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return "cpu-interpreter"
