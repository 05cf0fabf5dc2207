"""Each op's bench cases, one module per op (mirroring kernels/ and tests/), and the registry
`tilegraph bench` runs: KERNELS[name] -> KernelBench."""

from ..suite import KernelBench
from . import decode_layer, gelu, linear, matmul, rms_norm, softmax

KERNELS: dict[str, KernelBench] = {bench.name: bench for module in (
    gelu, softmax, rms_norm, linear, matmul, decode_layer) for bench in module.BENCHES}

__all__ = ["KERNELS"]
