"""Models built from tilegraph kernels: the decode layer stack and its presets."""

from .layerstack import PRESETS, DecodeLayer, LayerStack, LayerStackConfig, StackedWeights

__all__ = ["PRESETS", "DecodeLayer", "LayerStack", "LayerStackConfig", "StackedWeights"]
