"""Launch-shape choices shared by launchers, so block sizes are decided in one place; and
launch(), which compiles a kernel instead of running it under compiling_only()."""

import contextlib
import contextvars
import functools

import torch
import triton

from .._runtime import INTERPRET, capture_token, is_capturing

_compiling_only = contextvars.ContextVar("tilegraph_compiling_only", default=False)


@contextlib.contextmanager
def compiling_only():
    """Within it, launches made through launch() compile their kernel (Triton's warmup())
    without running it, as an eager call of a decode step would launch it: under
    autotune.compile_side_by_side, a step run once a variant compiles every variant's
    kernels at once, before any step is captured. Only kernels whose outputs a tuner's step
    discards should go through launch()."""
    token = _compiling_only.set(True)
    try:
        yield
    finally:
        _compiling_only.reset(token)


def is_compiling_only() -> bool:
    """Whether launches only compile here (compiling_only): nothing may be timed."""
    return _compiling_only.get()


def launch(kernel, grid: tuple, *args, **kwargs):
    """kernel[grid](*args, **kwargs), or under compiling_only() kernel.warmup of the same."""
    if _compiling_only.get():
        return kernel.warmup(*args, grid=grid, **kwargs)
    return kernel[grid](*args, **kwargs)

# Rows up to this many elements are normalised in one register tile; longer rows loop.
MAX_ROW_TILE = 16384


def elementwise_shape(n_elements: int, element_size: int) -> tuple[int, int]:
    """(BLOCK_SIZE, num_warps): one 16-byte vector a thread, up to 16 warps a program; small
    programs with one vector a thread keep the most loads in flight (notes/kernels.md)."""
    vector = max(1, 16 // element_size)
    block = min(512 * vector, max(32 * vector, triton.next_power_of_2(n_elements)))
    return block, max(1, block // (32 * vector))


def weight_alignment(element_size: int, *lengths: int) -> int:
    """ALIGN of the decode kernels: the elements in 16 bytes where some of `lengths` (K, a
    split's width, the weight's row stride) is not a multiple of 16 but all are multiples of
    it; else 1. The launcher passes those lengths divided by it and the kernel multiplies them back,
    so the compiler knows what it cannot see otherwise: Triton marks an integer argument
    aligned only when it is a multiple of 16, and without that mark on K the masks of a weight
    tile load it an element at a time (K = 1000, bf16, tensor-core tile: 320 two-byte loads a
    thread where 40 of 16 bytes do, sm_90 SASS). Measured on an H100 (notes/kernels.md,
    session 41): 3000 x 1000 bf16 at 3-12 rows 6.6 -> 3.8-4.3 us; one-row GEMVs 7-16% faster;
    a bf16 LayerStack of d = 1800 at one row 211 -> 101 us a token."""
    vector = max(1, 16 // element_size)
    if any(n % 16 for n in lengths) and all(n % vector == 0 for n in lengths):
        return vector
    return 1


# Row kernels (softmax, RMSNorm): rows of 16 KB and more go one a program with 16 elements a
# thread, loaded evict-last; rows of 2 KB and less in 4 KB tiles, also evict-last; rows in
# between in ~16 KB tiles. Swept against torch.compile at 1024-16384 columns (notes/kernels.md).
LONG_ROW_BYTES, SHORT_ROW_BYTES = 16384, 2048
SHORT_ROW_TILE_BYTES, ROW_TILE_BYTES = 4096, 16384


def row_config(n_rows: int, n_cols: int, element_size: int) -> dict:
    """Launch config of a row-wise reduction kernel (softmax, RMSNorm): BLOCK_M rows of
    BLOCK_N columns a program, SINGLE_PASS, num_warps, and LOAD_POLICY (the eviction policy
    of the one-tile path's x load).

    Rows longer than MAX_ROW_TILE loop over 4096-column chunks, reading x twice.
    """
    block_n = triton.next_power_of_2(n_cols)
    single_pass = block_n <= MAX_ROW_TILE
    if not single_pass:
        block_n = 4096
    row_bytes = block_n * element_size
    if single_pass and (row_bytes >= LONG_ROW_BYTES or row_bytes <= SHORT_ROW_BYTES):
        block_m = max(1, SHORT_ROW_TILE_BYTES // row_bytes)  # long rows: one a program
        block_m = min(block_m, triton.next_power_of_2(n_rows))
        num_warps = max(1, min(32, block_m * block_n // (32 * 16)))  # 16 elements a thread
        policy = "evict_last"
    else:
        block_m = min(max(1, ROW_TILE_BYTES // row_bytes), triton.next_power_of_2(n_rows))
        elements = block_m * block_n
        num_warps = 16 if elements >= 16384 else 8 if elements >= 4096 else 4
        policy = ""
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "SINGLE_PASS": single_pass,
            "num_warps": num_warps, "LOAD_POLICY": policy}


def softmax_config(n_rows: int, n_cols: int, element_size: int) -> dict:
    """row_config with x loaded evict-last at every length, as torch.compile's softmax loads
    it (0.2-2% faster at 1024-16384 fp32 columns, notes/kernels.md)."""
    return {**row_config(n_rows, n_cols, element_size), "LOAD_POLICY": "evict_last"}


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


def stream_key(device: torch.device) -> tuple[int, int]:
    """(device index, handle of its current stream): what kernels ordered one after another
    share."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    return index, torch.cuda.current_stream(index).cuda_stream


def stream_place(device: torch.device) -> tuple:
    """Where memory written now is next read in order: (stream handle, capturing, the
    tilegraph capture if any); on CPU, (None, False, None)."""
    if device.type != "cuda":
        return (None, False, None)
    capturing = is_capturing()
    return (torch.cuda.current_stream(device).cuda_stream, capturing,
            capture_token() if capturing else None)


ASSUMED_SM_COUNT = 132  # where there is no GPU to ask (the interpreter): an H100's


def sm_count(device: torch.device) -> int | None:
    """Streaming multiprocessors of a CUDA device; None where kernels run interpreted."""
    if INTERPRET or device.type != "cuda":
        return None
    return _sm_count(device.index or 0)


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


ASSUMED_SHARED_MEMORY = 232448  # bytes a program may use where there is no GPU: an H100's


def program_shared_memory(device: torch.device) -> int | None:
    """Shared memory a program of a CUDA device may use (the opt-in limit Triton launches
    against); None where kernels run interpreted."""
    if INTERPRET or device.type != "cuda":
        return None
    return _shared_memory(device.index or 0)


@functools.cache
def _shared_memory(index: int) -> int:
    return triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]


# An SM's register file: 64K 32-bit registers on every NVIDIA GPU from Maxwell (sm_50) to
# Blackwell, handed to a warp in blocks of 256 (8 a thread).
REGISTERS_PER_SM = 64 * 1024
REGISTER_BLOCK = 8
# Shared memory the driver reserves for each resident program on sm_80 and later.
SHARED_RESERVED_PER_PROGRAM = 1024


def resident_programs(registers: int, num_warps: int, shared: int, threads_per_sm: int,
                      shared_per_sm: int) -> int:
    """Programs of a kernel (`registers` a thread, `num_warps` warps, `shared` bytes of shared
    memory a program) that one SM holds at once: the fewest its registers, threads and shared
    memory allow, at least 1."""
    per_thread = -(-registers // REGISTER_BLOCK) * REGISTER_BLOCK
    fit = min(REGISTERS_PER_SM // (per_thread * 32 * num_warps),
              threads_per_sm // (32 * num_warps))
    if shared:
        fit = min(fit, shared_per_sm // (shared + SHARED_RESERVED_PER_PROGRAM))
    return max(1, fit)


_resident: dict = {}


def resident_launch(kernel, args: tuple, kwargs: dict, device: torch.device,
                    most: int, capped: bool = True) -> tuple[int, dict]:
    """(programs an SM, extra launch options) for a persistent grid of the Triton kernel
    `kernel` launched with `args` and `kwargs`: as many programs as an SM of `device` holds at
    once, up to `most`, and (`capped`) more while capping the kernel's registers a thread
    (ptxas's maxnreg) to make room for one more program costs no spill. (`most`, {}) where
    kernels run interpreted. A persistent grid of more programs than fit starts the last ones
    only as the first ones end, with their whole share of the work still to do
    (notes/kernels.md, session 63). Kept per kernel, device, tensor dtypes and compile-time
    arguments, which decide the registers."""
    if INTERPRET or device.type != "cuda":
        return most, {}
    # a frozenset of the compile-time arguments (ints, strings, bools): a few us less each
    # launch than their sorted reprs
    key = (kernel.fn.__name__, device.index, most, capped,
           tuple(a.dtype for a in args if isinstance(a, torch.Tensor)),
           frozenset(kwargs.items()))
    if key not in _resident:
        props = torch.cuda.get_device_properties(device)

        def compiled_fit(options: dict) -> tuple[int, int]:
            compiled = kernel.warmup(*args, grid=(1,), **kwargs, **options)
            compiled._init_handles()  # Triton reads registers and spills as it loads the module
            fit = resident_programs(compiled.n_regs, compiled.metadata.num_warps,
                                    compiled.metadata.shared,
                                    props.max_threads_per_multi_processor,
                                    props.shared_memory_per_multiprocessor)
            return fit, compiled.n_spills

        programs, options = compiled_fit({})[0], {}
        warps = kwargs.get("num_warps", 4)
        while capped and programs < most:
            cap = REGISTERS_PER_SM // ((programs + 1) * 32 * warps)
            cap -= cap % REGISTER_BLOCK
            fit, spills = compiled_fit({"maxnreg": cap})
            if spills or fit <= programs:
                break
            programs, options = fit, {"maxnreg": cap}
        _resident[key] = min(most, programs), options
    return _resident[key]
