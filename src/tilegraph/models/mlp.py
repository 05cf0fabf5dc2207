"""A small MLP-heavy model for training benchmarks: layers of
    x = x + W2 gelu(W1 rms_norm(x) * g + b1) + b2          (gelu: the tanh form)

`MLPStack(d, layers, fused=True)` runs each layer as two tg.linear calls (the norm in the
first one's prologue, GELU in its epilogue, the residual in the second one's epilogue);
fused=False runs the same parameters through plain PyTorch ops, the reference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tilegraph as tg


class MLPLayer(nn.Module):
    def __init__(self, d: int, hidden: int, fused: bool, eps: float = 1e-6):
        super().__init__()
        self.fused, self.eps = fused, eps
        self.norm_weight = nn.Parameter(torch.ones(d))
        self.w1 = nn.Parameter(torch.randn(hidden, d) * d**-0.5)
        self.b1 = nn.Parameter(torch.zeros(hidden))
        self.w2 = nn.Parameter(torch.randn(d, hidden) * hidden**-0.5)
        self.b2 = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fused:
            h = tg.linear(x, self.w1, self.b1, norm_weight=self.norm_weight, norm_eps=self.eps,
                          activation="gelu_tanh")
            return tg.linear(h, self.w2, self.b2, residual=x)
        h = F.rms_norm(x, (x.shape[-1],), self.norm_weight, self.eps)
        h = F.gelu(F.linear(h, self.w1, self.b1), approximate="tanh")
        return x + F.linear(h, self.w2, self.b2)


class MLPStack(nn.Module):
    """`layers` MLPLayers of width d (hidden 4 d by default)."""

    def __init__(self, d: int = 1024, layers: int = 8, hidden: int | None = None,
                 fused: bool = True):
        super().__init__()
        self.layers = nn.ModuleList(MLPLayer(d, hidden or 4 * d, fused) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x
