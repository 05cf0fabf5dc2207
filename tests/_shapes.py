"""Awkward sizes shared by the kernel tests: not powers of two, so every mask is exercised."""

import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
ROW_SHAPES = [(1, 1), (1, 7), (7, 781), (3, 5, 129), (2, 1823)]
