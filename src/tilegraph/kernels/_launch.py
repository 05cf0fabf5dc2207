"""Launch-shape choices shared by launchers, so block sizes are decided in one place."""

import functools

import torch
import triton

from .._runtime import INTERPRET

# Rows up to this many elements are normalised in one register tile; longer rows loop.
MAX_ROW_TILE = 16384


def elementwise_shape(n_elements: int, element_size: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps): one 16-byte vector a thread, up to 16 warps a program.

    Small programs with one vector a thread streamed best on H100 (GELU 64M fp32: 2048
    elements x 16 warps 181.3 us, 1024 x 8 181.8, the earlier 16 elements a thread x 8 warps
    183.6; bf16 at 8 elements a thread within 0.3% of the best; benchmarks/explore_rows.py).
    """
    vector = max(1, 16 // element_size)
    block = min(512 * vector, max(32 * vector, triton.next_power_of_2(n_elements)))
    return block, max(1, block // (32 * vector))


def row_config(n_rows: int, n_cols: int, element_size: int) -> dict:
    """Launch config of a row-wise reduction kernel (softmax, RMSNorm): BLOCK_M rows of
    BLOCK_N columns a program, SINGLE_PASS, num_warps.

    Short rows are packed several to a program so that each program moves ~16 KB (a 4096-wide
    fp32 row, which streams at copy speed on H100; one 8 KB bf16 row a program reached only
    84% of it); rows longer than MAX_ROW_TILE loop over column chunks, reading x twice.
    """
    block_n = triton.next_power_of_2(n_cols)
    single_pass = block_n <= MAX_ROW_TILE
    if not single_pass:
        block_n = 4096
    rows_for_16kb = max(1, 16384 // (block_n * element_size))
    block_m = min(rows_for_16kb, triton.next_power_of_2(n_rows))
    elements = block_m * block_n
    num_warps = 16 if elements >= 16384 else 8 if elements >= 4096 else 4
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "SINGLE_PASS": single_pass,
            "num_warps": num_warps}


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
