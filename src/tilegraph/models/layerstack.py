"""The decode stack: layers of h = h + (rms_norm(h) * w) @ Wq.T @ Wo.T, run token after token.

    stack = LayerStack(PRESETS["seed"], device="cuda")
    y = stack(h)                 # PyTorch ops (eager, or captured by hand)
    y = stack.fused_forward(h)   # one or two tilegraph kernels per layer
    y = stack.persistent_forward(h)  # one persistent tilegraph kernel for the whole stack
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

from .. import kernels as K
from ..kernels import _launch, decode_layer


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
        # Parameters that alias the given tensors (views into the stack's weights).
        self.norm_weight = nn.Parameter(norm_weight, requires_grad=False)
        self.wq = nn.Parameter(wq, requires_grad=False)
        self.wo = nn.Parameter(wo, requires_grad=False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = F.rms_norm(h, (h.shape[-1],), self.norm_weight, self.eps)
        return h + F.linear(F.linear(x, self.wq), self.wo)

    def fused_forward(self, h: torch.Tensor, prefetch_weight: bool = True) -> torch.Tensor:
        # Two kernels: the norm in the first one's prologue, the residual in the second's
        # epilogue. Weights never change while kernels run, so each may start streaming its
        # weight before the previous kernel has finished (programmatic dependent launch).
        q = K.linear(h, self.wq, norm_weight=self.norm_weight, norm_eps=self.eps,
                     prefetch_weight=prefetch_weight)
        return K.linear(q, self.wo, residual=h, prefetch_weight=prefetch_weight)

    def reference(self, h: torch.Tensor) -> torch.Tensor:
        h = h.double()
        x = K.rms_norm_ref(h, self.norm_weight.double(), self.eps)
        return h + (x @ self.wq.double().T) @ self.wo.double().T


@dataclass(frozen=True)
class StackedWeights:
    """Every layer's weights in one tensor each, as the one-kernel stack reads them."""
    norm_weight: torch.Tensor  # (layers, d)
    wq: torch.Tensor           # (layers, d, d)
    wo: torch.Tensor           # (layers, d, d)

    @classmethod
    def random(cls, config: LayerStackConfig, device) -> StackedWeights:
        generator = torch.Generator().manual_seed(config.seed)
        shape, d = (config.layers, config.d), config.d

        def param(*shape, mean=0.0, std=1.0):
            values = torch.randn(shape, generator=generator, dtype=torch.float32) * std + mean
            return values.to(device=device, dtype=config.dtype)

        # Unit-variance projections (std d^-1/2) keep each layer's update about as large as
        # rms_norm(h), so |h| grows like sqrt(layers) and stays finite in every dtype.
        return cls(param(*shape, mean=1.0, std=0.1), param(*shape, d, std=d**-0.5),
                   param(*shape, d, std=d**-0.5))

    def first(self, n_layers: int) -> StackedWeights:
        return StackedWeights(self.norm_weight[:n_layers], self.wq[:n_layers],
                              self.wo[:n_layers])


class LayerStack(nn.Module):
    """`config.layers` DecodeLayers with random weights (reproducible from config.seed).

    The layers' parameters are views into one stacked tensor per weight kind (`weights`),
    so the stack runs either layer by layer or as one persistent kernel with no copies.
    """

    def __init__(self, config: LayerStackConfig, device: str | torch.device = "cpu",
                 weights: StackedWeights | None = None):
        super().__init__()
        self.config = config
        self.weights = weights or StackedWeights.random(config, device)
        if self.weights.wq.shape != (config.layers, config.d, config.d):
            raise ValueError(f"weights.wq has shape {tuple(self.weights.wq.shape)}, expected "
                             f"{(config.layers, config.d, config.d)} for this config")
        self.workspace = K.decode_stack_workspace(self.weights.wq.device)
        self.layers = nn.ModuleList(
            DecodeLayer(g, wq, wo, config.eps)
            for g, wq, wo in zip(self.weights.norm_weight, self.weights.wq, self.weights.wo,
                                 strict=True))

    def first(self, n_layers: int) -> LayerStack:
        """The stack of its first n layers, sharing their weights (for layer-count sweeps)."""
        if not 1 <= n_layers <= len(self.layers):
            raise ValueError(f"n_layers must be in 1..{len(self.layers)}, got {n_layers}")
        return LayerStack(self.config.with_(layers=n_layers),
                          weights=self.weights.first(n_layers))

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

    def fused_forward(self, h: torch.Tensor, prefetch_weight: bool = True,
                      kernels_per_layer: int | None = None) -> torch.Tensor:
        """The stack in tilegraph kernels: one a layer (kernels/decode_layer.py) where that
        was measured faster, else two (DecodeLayer.fused_forward); kernels_per_layer=1 or 2
        chooses. One kernel a layer carries h between layers in fp32 and sums each layer's
        parts with atomic adds, in an order that varies from run to run: results may differ
        in the last bits between runs (two kernels a layer are bit-reproducible).
        """
        self._check(h)
        if kernels_per_layer not in (None, 1, 2):
            raise ValueError(f"kernels_per_layer must be 1, 2 or None (choose by the "
                             f"measured rule), got {kernels_per_layer!r}")
        rows = h.reshape(-1, self.config.d)
        config = decode_layer.decode_layer_config(rows.shape[0], self.config.d,
                                                  h.element_size())
        if kernels_per_layer is None:
            one_kernel = decode_layer.one_kernel_is_faster(
                config, rows.shape[0], self.config.d, h.element_size(),
                _launch.sm_count(h.device))
        else:
            one_kernel = kernels_per_layer == 1 and rows.shape[0] > 0
            if one_kernel and rows.shape[0] > decode_layer.MAX_ROWS:
                raise ValueError(f"one kernel a layer takes at most {decode_layer.MAX_ROWS} "
                                 f"rows of h, got {rows.shape[0]}")
        if not one_kernel:
            for layer in self.layers:
                h = layer.fused_forward(h, prefetch_weight)
            return h
        return self._one_kernel_layers(rows, config, prefetch_weight).view(h.shape)

    def _one_kernel_layers(self, h: torch.Tensor, config: dict,
                           prefetch_weight: bool) -> torch.Tensor:
        # Layer i accumulates into acc[i % 3], reads acc[(i - 1) % 3] and zeroes
        # acc[(i + 1) % 3] for layer i + 1: the buffer layer i - 1 read, free once layer i
        # has passed its wait for layer i - 1. Only layer 0's buffer needs zeroing here.
        acc = torch.zeros((3, *h.shape), dtype=torch.float32, device=h.device)
        x = h
        for i, layer in enumerate(self.layers):
            decode_layer.launch_decode_layer(acc[i % 3], acc[(i + 1) % 3], x,
                                             layer.norm_weight, layer.wq, layer.wo,
                                             self.config.eps, config, prefetch_weight)
            x = acc[i % 3]
        return x.to(h.dtype)

    def persistent_forward(self, h: torch.Tensor) -> torch.Tensor:
        """The whole stack as one persistent kernel (tg.decode_stack), up to 8 rows of h."""
        self._check(h)
        w = self.weights
        if any(p.data_ptr() != stacked[i].data_ptr()
               for i, layer in enumerate(self.layers)
               for p, stacked in ((layer.norm_weight, w.norm_weight), (layer.wq, w.wq),
                                  (layer.wo, w.wo))):
            raise RuntimeError("the layers' weights no longer alias the stacked weights (moved "
                               "or replaced after construction); build the LayerStack on its "
                               "device with the weights it should use")
        return K.decode_stack(h, w.norm_weight, w.wq, w.wo, self.config.eps,
                              workspace=self.workspace)

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
