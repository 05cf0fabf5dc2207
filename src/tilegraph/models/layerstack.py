"""The decode stack: layers of h = h + (rms_norm(h) * w) @ Wq.T @ Wo.T, run token after token.

    stack = LayerStack(PRESETS["seed"], device="cuda")
    y = stack(h)                 # PyTorch ops (eager, or captured by hand)
    y = stack.fused_forward(h)   # tg.decode_stack: one or two kernels a layer
    y = stack.reference(h)       # float64, for checking either

Batch-1 decode reads every weight once per token and does two flops per weight element: the
time is bound by memory bandwidth (weight bytes / copy rate is the floor) and, in PyTorch,
by the launch cost of its four or five small kernels per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

import tilegraph as tg
from tilegraph.kernels.decode_layer import decode_layer_ref


@dataclass(frozen=True)
class LayerStackConfig:
    d: int = 2048             # model width
    layers: int = 22
    dtype: torch.dtype = torch.float32
    batch: int = 1            # sequences decoded together
    tokens: int = 512         # tokens per decode run
    eps: float = 1e-6         # RMSNorm epsilon
    seed: int = 0             # for the random weights

    def __post_init__(self):
        for name in ("d", "layers", "batch", "tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"LayerStackConfig.{name} must be a positive int, got {value!r}")
        if self.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise TypeError(f"LayerStackConfig.dtype must be float32, float16 or bfloat16, "
                            f"got {self.dtype}")

    def with_(self, **changes) -> LayerStackConfig:
        return replace(self, **changes)

    @property
    def weight_bytes(self) -> int:
        """Bytes a token must read: two d x d projections and a norm weight per layer."""
        element = torch.empty((), dtype=self.dtype).element_size()
        return self.layers * (2 * self.d * self.d + self.d) * element


PRESETS: dict[str, LayerStackConfig] = {
    "seed": LayerStackConfig(d=2048, layers=22, dtype=torch.float32),
    "seed-bf16": LayerStackConfig(d=2048, layers=22, dtype=torch.bfloat16),
    "small": LayerStackConfig(d=512, layers=22, dtype=torch.float32),
    "tiny": LayerStackConfig(d=96, layers=3, dtype=torch.float32, tokens=6),  # CPU machines
}


class DecodeLayer(nn.Module):
    """h + (rms_norm(h) * norm_weight) @ wq.T @ wo.T"""

    def __init__(self, norm_weight: torch.Tensor, wq: torch.Tensor, wo: torch.Tensor,
                 eps: float):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(norm_weight, requires_grad=False)
        self.wq = nn.Parameter(wq, requires_grad=False)
        self.wo = nn.Parameter(wo, requires_grad=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = F.rms_norm(h, (h.shape[-1],), self.norm_weight, self.eps)
        return h + F.linear(F.linear(x, self.wq), self.wo)

    def reference(self, h: torch.Tensor) -> torch.Tensor:
        return decode_layer_ref(h.double(), self.norm_weight, self.wq, self.wo, self.eps)


def _random_layers(config: LayerStackConfig, device) -> list[DecodeLayer]:
    generator = torch.Generator().manual_seed(config.seed)
    shape, d = (config.layers, config.d), config.d

    def param(*shape, mean=0.0, std=1.0):
        values = torch.randn(shape, generator=generator, dtype=torch.float32) * std + mean
        return values.to(device=device, dtype=config.dtype)

    # Unit-variance projections (std d^-1/2) keep each layer's update about as large as
    # rms_norm(h), so |h| grows like sqrt(layers) and stays finite in every dtype.
    norm_weights = param(*shape, mean=1.0, std=0.1)
    wqs, wos = param(*shape, d, std=d**-0.5), param(*shape, d, std=d**-0.5)
    return [DecodeLayer(g, wq, wo, config.eps)
            for g, wq, wo in zip(norm_weights, wqs, wos, strict=True)]


class LayerStack(nn.Module):
    """`config.layers` DecodeLayers with random weights (reproducible from config.seed)."""

    def __init__(self, config: LayerStackConfig, device: str | torch.device = "cpu",
                 layers: list[DecodeLayer] | None = None):
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(layers if layers is not None
                                    else _random_layers(config, device))
        if len(self.layers) != config.layers:
            raise ValueError(f"{len(self.layers)} layers given for a config of "
                             f"{config.layers}")

    def first(self, n_layers: int) -> LayerStack:
        """The stack of its first n layers, sharing their weights (for layer-count sweeps)."""
        if not 1 <= n_layers <= len(self.layers):
            raise ValueError(f"n_layers must be in 1..{len(self.layers)}, got {n_layers}")
        return LayerStack(self.config.with_(layers=n_layers), layers=self.layers[:n_layers])

    def _check(self, h: torch.Tensor) -> None:
        weight = self.layers[0].wq
        if h.shape[-1] != self.config.d:
            raise ValueError(f"h must have {self.config.d} features, got shape "
                             f"{tuple(h.shape)}")
        if h.dtype != weight.dtype or h.device != weight.device:
            raise TypeError(f"h must be {weight.dtype} on {weight.device}, got {h.dtype} on "
                            f"{h.device}")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        self._check(h)
        for layer in self.layers:
            h = layer(h)
        return h

    def fused_forward(self, h: torch.Tensor) -> torch.Tensor:
        """The stack in tilegraph kernels (tg.decode_stack): one kernel a layer where its
        rule says so, h carried between them in fp32 (the sums vary in the last bits from
        run to run), else two kernels a layer in the weights' dtype (bit-reproducible; under
        torch.use_deterministic_algorithms(True) always)."""
        self._check(h)
        return tg.decode_stack(h, [layer.norm_weight for layer in self.layers],
                               [layer.wq for layer in self.layers],
                               [layer.wo for layer in self.layers], self.config.eps)

    def reference(self, h: torch.Tensor) -> torch.Tensor:
        """float64 result of forward(h)."""
        for layer in self.layers:
            h = layer.reference(h)
        return h

    def token_inputs(self, tokens: int, batch: int, seed: int = 1) -> torch.Tensor:
        """Random hidden states for each token, (tokens, batch, d) in the stack's dtype."""
        generator = torch.Generator().manual_seed(seed)
        weight = self.layers[0].wq
        h = torch.randn((tokens, batch, self.config.d), generator=generator)
        return h.to(device=weight.device, dtype=weight.dtype)
