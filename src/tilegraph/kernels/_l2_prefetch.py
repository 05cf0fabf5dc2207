"""prefetch.global.L2 from Triton: lines a kernel asks L2 for before it reads them (before
PDL's wait, mostly, while the kernel ahead of it still runs)."""

import triton
import triton.language as tl


@triton.jit
def prefetch_lines(ptrs):
    """Ask L2 for the 128-byte line of every address in `ptrs`: a hint, no value comes back
    and nothing is written. Every address must be one the kernel may read."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; mov.u32 $0, 0;", "=r,l", [ptrs],
                              dtype=tl.int32, is_pure=False, pack=1)
