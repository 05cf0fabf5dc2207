"""CUDA graphs: capture once, replay with one launch, safely."""

from .capture import Graph, capture, scope
from .runner import GraphRunner

__all__ = ["Graph", "GraphRunner", "capture", "scope"]
