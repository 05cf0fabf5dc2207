"""The seed's decode layer, h + (rms_norm(h) * g) @ Wq.T @ Wo.T, as a stack of LAYERS layers at
batch 1 (the one-kernel path pays off only from layer to layer): PyTorch ops, tg.decode_stack
(one or two kernels a layer), compile."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import tilegraph as tg
from tilegraph.kernels.decode_layer import decode_layer_ref
from tilegraph.testing import randn

from ..suite import Case, KernelBench, compiled

LAYERS = 4


def decode_layers_formula(h, g, wq, wo, eps: float = 1e-6):
    for layer in range(g.shape[0]):
        x = F.rms_norm(h, (h.shape[-1],), g[layer], eps)
        h = h + F.linear(F.linear(x, wq[layer]), wo[layer])
    return h


def decode_layers_tilegraph(h, g, wq, wo, eps: float = 1e-6):
    return tg.decode_stack(h, g, wq, wo, eps)


def _reference(h, g, wq, wo):
    h = h.double()
    for layer in range(g.shape[0]):
        h = decode_layer_ref(h, g[layer].double(), wq[layer].double(), wo[layer].double())
    return h


def _decode_layer(d: int, dtype: torch.dtype, device: str) -> Case:
    h = randn(1, d, dtype=dtype, device=device)
    g = randn(LAYERS, d, dtype=dtype, device=device, scale=0.1) + 1
    wq = randn(LAYERS, d, d, dtype=dtype, device=device, scale=d**-0.5)
    wo = randn(LAYERS, d, d, dtype=dtype, device=device, scale=d**-0.5)
    return Case(f"{LAYERS} layers, 1x{d}", {
        "torch formula": decode_layers_formula,
        "tilegraph": decode_layers_tilegraph,
        "torch.compile": compiled(decode_layers_formula),
    }, _reference, (h, g, wq, wo), "torch formula",
        bytes=LAYERS * (2 * d * d + d) * h.element_size(), flops=LAYERS * 4 * d * d,
        graph=True, rotate=(1, 2, 3))  # every layer's weights rotated past L2


BENCHES = [KernelBench("decode_layer", f"d of {LAYERS} decode layers, batch 1", torch.bfloat16,
                       (512, 2048, 4096), (96,), _decode_layer)]
