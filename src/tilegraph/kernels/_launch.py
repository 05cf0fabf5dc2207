"""Launch-shape choices shared by launchers, so block sizes are decided in one place."""

import functools

import torch
import triton

from .._runtime import INTERPRET

# Rows up to this many elements are normalised in one register tile; longer rows loop.
MAX_ROW_TILE = 16384


def elementwise_shape(n_elements: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps): 16 elements a thread, i.e. four 16-byte fp32 vectors."""
    block = min(4096, max(128, triton.next_power_of_2(n_elements)))
    return block, max(1, min(8, block // 512))


def row_shape(n_rows: int, n_cols: int, element_size: int) -> tuple[int, int, int, bool]:
    """(BLOCK_M, BLOCK_N, num_warps, single_pass) for a row-wise reduction kernel.

    Short rows are packed several to a program so that each program moves ~16 KB (a 4096-wide
    fp32 row, which streams at copy speed on H100; one 8 KB bf16 row a program reached only
    84% of it); long rows loop over column chunks.
    """
    block_n = triton.next_power_of_2(n_cols)
    single_pass = block_n <= MAX_ROW_TILE
    if not single_pass:
        block_n = 4096
    rows_for_16kb = max(1, 16384 // (block_n * element_size))
    block_m = min(rows_for_16kb, triton.next_power_of_2(n_rows))
    elements = block_m * block_n
    num_warps = 16 if elements >= 16384 else 8 if elements >= 4096 else 4
    return block_m, block_n, num_warps, single_pass


def grid_1d(n: int, block: int) -> tuple[int]:
    return (triton.cdiv(n, block),)


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def is_hopper_or_newer(device: torch.device) -> bool:
    """A CUDA device of compute capability 9.0 or more, run compiled (not interpreted)."""
    return (not INTERPRET and device.type == "cuda"
            and _capability(device.index or 0) >= (9, 0))


def supports_pdl(device: torch.device) -> bool:
    """Programmatic dependent launch (griddepcontrol): Hopper on."""
    return is_hopper_or_newer(device)


def sm_count(device: torch.device) -> int | None:
    """Streaming multiprocessors of a CUDA device; None where kernels run interpreted."""
    if INTERPRET or device.type != "cuda":
        return None
    return _sm_count(device.index or 0)


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count
