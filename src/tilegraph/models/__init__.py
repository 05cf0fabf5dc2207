"""Models built from tilegraph's public API: the decode layer stack and the Llama family."""

from .layerstack import PRESETS, DecodeLayer, LayerStack, LayerStackConfig
from .llama import KVCache, Llama
from .llama_config import LlamaConfig

__all__ = ["PRESETS", "DecodeLayer", "KVCache", "LayerStack", "LayerStackConfig", "Llama",
           "LlamaConfig"]
