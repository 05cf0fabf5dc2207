"""Models built from tilegraph's public API: the decode layer stack and its presets."""

from .layerstack import PRESETS, DecodeLayer, LayerStack, LayerStackConfig

__all__ = ["PRESETS", "DecodeLayer", "LayerStack", "LayerStackConfig"]
