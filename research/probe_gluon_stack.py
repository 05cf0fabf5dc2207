"""Whether a persistent one-row decode stack whose weights stream into shared memory by TMA,
many tiles ahead of the arithmetic and across the grid barriers, beats tg.decode_stack.

Session 67 (research/probe_stack_persistent.py, Triton's `tl`) ran one program an SM through
every layer, meeting the others at a grid barrier between projections, and lost: a program's
loads of the next phase could only be issued after this phase's arithmetic, so the weights
stopped streaming at every barrier (its `nosync` variant, no barrier at all, read at 49% of
the floor at d = 2048). Session 69 (research/probe_bulk_gemv.py, CUDA) landed a link's
weights in shared memory before its PDL wait and found the work after the wait, not the
weights, to be what a link costs. Gluon (Triton 3.6's `triton.experimental.gluon`) gives what
`tl` lacks: TMA copies into a ring of shared-memory slots, each completed on an mbarrier. Here
program p owns rows [p R, (p + 1) R) of every projection; the weights of the whole stack are
one sequence of [R, BK] tiles per program, RING of them in flight at any time (at d = 2048
about three projections ahead), a slot refilled as soon as its tile has been read. So the
DRAM stream does not stop at a barrier, and what a projection adds after its barrier is the
input vector's round trip from L2 (staged in shared memory once) and the products over
tiles already landed.

Per layer: q = rstd * W_q (g * h) (the norm's sum of squares over all of h, by every
program), barrier, h += W_o q, barrier. h is carried in fp32.

    PYTHONPATH=src:research python3 research/probe_gluon_stack.py [--widths 2048,4096]
        [--layers 8] [--dtype bf16] [--calls 10] [--variants ring,nosync]

Prints per width us a token for tg.decode_stack and each variant (a graph of --calls
chained calls), % of the floor, and the error against float64
(probe_stack_persistent.compare_with_library). Needs Hopper (TMA) and Triton's Gluon.
Written in session 83 against Triton 3.6's Gluon names (read on the device that session)
and compiled for sm_90 on the CPU machine with a later Triton; not yet run on a GPU.
"""

from __future__ import annotations

import argparse

import torch
import triton
from probe_stack_persistent import compare_with_library
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

# Names that later Gluon releases changed (the device has Triton 3.6, the CPU machine a later
# one, which compiles this for sm_90 as a check): a block of the CTA's threads meeting, and a
# TMA load into shared memory.
_cta_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared

BK = 256                       # weight columns a tile: 512 bytes of a 16-bit row
SHARED_BUDGET = 200 * 1024     # bytes of the ring and the staged input vector a program


@gluon.jit
def _issue(w_desc, ring, bars, t, T, row0, D: gl.constexpr, KT: gl.constexpr,
           BLOCK_K: gl.constexpr, RING: gl.constexpr):
    """TMA copy of this program's tile t (projection t // KT, columns (t % KT) * BLOCK_K) into
    its ring slot, completion counted on that slot's mbarrier; nothing past the last tile."""
    if t < T:
        slot = t % RING
        bar = bars.index(slot)
        mbarrier.expect(bar, w_desc.block_type.nbytes)
        _tma_load(w_desc, [(t // KT) * D + row0, (t % KT) * BLOCK_K], bar, ring.index(slot))


@gluon.jit
def _arrive(sync_ptr):
    _cta_barrier()  # every thread's stores of this phase issued before the release
    gl.atomic_add(sync_ptr, 1, sem="release", scope="gpu")


@gluon.jit
def _wait(sync_ptr, target, SYNC: gl.constexpr):
    """Until the counter reaches target: polls by acquiring atomics (so the loads after them
    see every program's stores; an acquire whose result went unused was compiled away), then
    the block meets. SYNC=False: no wait (wrong results; the streaming alone, for timing)."""
    if SYNC:
        seen = gl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu")
        while seen < target:
            seen = gl.atomic_add(sync_ptr, 0, sem="acquire", scope="gpu")
    _cta_barrier()


@gluon.jit
def _stage(x_smem, src_ptr, g_ptr, NORM: gl.constexpr, D: gl.constexpr,
           vec_layout: gl.constexpr):
    """The input vector (D values) from global memory (L2: every program wrote a part) into
    shared memory, times g where NORM; returns its sum of squares."""
    offsets = gl.arange(0, D, layout=vec_layout)
    x = gl.load(src_ptr + offsets, cache_modifier=".cg").to(gl.float32)
    squares = gl.sum(x * x, axis=0)
    if NORM:
        x = x * gl.load(g_ptr + offsets).to(gl.float32)
    _cta_barrier()  # the last projection's reads of x_smem are done
    x_smem.store(x)
    _cta_barrier()
    return squares


@gluon.jit
def _project(w_desc, ring, bars, x_smem, t0, T, row0, D: gl.constexpr, R: gl.constexpr,
             KT: gl.constexpr, BLOCK_K: gl.constexpr, RING: gl.constexpr,
             tile_layout: gl.constexpr):
    """sum_k W[r, k] x_k for the program's R rows of projection t0 // KT, over its KT tiles
    (already in flight); each slot, once read, refilled with the tile RING further on."""
    acc = gl.full([R, BLOCK_K], 0.0, gl.float32, tile_layout)
    for c in gl.static_range(KT):
        t = t0 + c
        slot = t % RING
        mbarrier.wait(bars.index(slot), (t // RING) & 1)
        w = ring.index(slot).load(tile_layout)
        x = x_smem.slice(c * BLOCK_K, BLOCK_K).load(gl.SliceLayout(0, tile_layout))
        acc += w.to(gl.float32) * gl.expand_dims(x, 0)
        _cta_barrier()  # every warp has read the slot before the TMA overwrites it
        _issue(w_desc, ring, bars, t + RING, T, row0, D, KT, BLOCK_K, RING)
    return gl.sum(acc, axis=1)  # one reduction across threads, after the tiles


@gluon.jit
def _gluon_stack_kernel(w_desc, out_ptr, h_ptr, stream_ptr, q_ptr, g_ptr, sync_ptr, L,
                        programs, eps, D: gl.constexpr, R: gl.constexpr,
                        BLOCK_K: gl.constexpr, RING: gl.constexpr, SYNC: gl.constexpr):
    """out = the stack of L layers h <- h + W_o[l] (rstd * W_q[l] (g[l] * h)) at one row; the
    weights one (2 L D, D) tensor behind w_desc (W_q[0], W_o[0], W_q[1], ...), tiles [R,
    BLOCK_K]; stream and q fp32 scratch of D; sync two int32 zeros (a barrier count, an exit
    count), zero again when the kernel ends. One program an SM, all resident at once."""
    KT: gl.constexpr = D // BLOCK_K
    WARPS: gl.constexpr = gl.num_warps()
    tile_layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [WARPS, 1], [1, 0])
    vec_layout: gl.constexpr = gl.BlockedLayout([4], [32], [WARPS], [0])
    pid = gl.program_id(0)
    row0 = pid * R
    T = 2 * L * KT
    ring = gl.allocate_shared_memory(w_desc.dtype, [RING, R, BLOCK_K], w_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    x_smem = gl.allocate_shared_memory(gl.float32, [D], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    for i in gl.static_range(RING):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(RING):  # the ring's first tiles: weights need no activations
        _issue(w_desc, ring, bars, i, T, row0, D, KT, BLOCK_K, RING)
    rows = row0 + gl.arange(0, R, layout=gl.SliceLayout(1, tile_layout))
    phase = 0
    for layer in range(L):
        if layer == 0:
            squares = _stage(x_smem, h_ptr, g_ptr, True, D, vec_layout)
        else:
            _wait(sync_ptr, phase * programs, SYNC)
            squares = _stage(x_smem, stream_ptr, g_ptr + layer * D, True, D, vec_layout)
        acc = _project(w_desc, ring, bars, x_smem, 2 * layer * KT, T, row0, D, R, KT,
                       BLOCK_K, RING, tile_layout)
        gl.store(q_ptr + rows, acc * gl.rsqrt(squares / D + eps))
        _arrive(sync_ptr)
        phase += 1
        _wait(sync_ptr, phase * programs, SYNC)
        _stage(x_smem, q_ptr, g_ptr, False, D, vec_layout)
        acc = _project(w_desc, ring, bars, x_smem, (2 * layer + 1) * KT, T, row0, D, R, KT,
                       BLOCK_K, RING, tile_layout)
        if layer == 0:
            h = gl.load(h_ptr + rows).to(gl.float32) + acc
        else:
            h = gl.load(stream_ptr + rows, cache_modifier=".cg") + acc
        if layer == L - 1:
            gl.store(out_ptr + rows, h.to(out_ptr.dtype.element_ty))
        else:
            gl.store(stream_ptr + rows, h)
            _arrive(sync_ptr)
            phase += 1
    for i in gl.static_range(RING):
        mbarrier.invalidate(bars.index(i))
    # The last program out sets the counters back to zero for the next launch: every other
    # program has passed its last wait by then.
    _cta_barrier()
    if gl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu") == programs - 1:
        gl.store(sync_ptr, 0)
        gl.store(sync_ptr + 1, 0)


def launch_shape(d: int, sms: int, element_size: int = 2) -> dict:
    """Rows a program (a power of two, whole rows of d per program) and the ring's slots."""
    rows = triton.next_power_of_2(triton.cdiv(d, sms))
    if d % rows or d % BK:
        raise ValueError(f"d = {d}: needs {rows}-row blocks and {BK}-column tiles to divide it")
    slot = rows * BK * element_size
    return {"R": rows, "programs": d // rows, "RING": (SHARED_BUDGET - 4 * d) // slot}


class GluonStack:
    def __init__(self, norms, wqs, wos, eps, sync=True, warps=4, ring=None):
        self.g = torch.stack(list(norms)).contiguous()
        # W_q[0], W_o[0], W_q[1], ...: each program's tiles one sequence in memory order
        self.w = torch.stack([w for pair in zip(wqs, wos, strict=True) for w in pair])
        L2, d, _ = self.w.shape
        self.w = self.w.reshape(L2 * d, d).contiguous()
        self.layers, self.d, self.eps, self.sync_on, self.warps = L2 // 2, d, eps, sync, warps
        dev = self.w.device
        self.stream = torch.empty(d, dtype=torch.float32, device=dev)
        self.q = torch.empty(d, dtype=torch.float32, device=dev)
        self.sync = torch.zeros(2, dtype=torch.int32, device=dev)
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.shape = launch_shape(d, sms, self.w.element_size())
        if ring is not None:
            self.shape["RING"] = ring
        # no swizzle: a warp reads one 512-byte row of a tile, conflict-free
        layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
        self.desc = TensorDescriptor(self.w, list(self.w.shape), list(self.w.stride()),
                                     [self.shape["R"], BK], layout)

    def __call__(self, h: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        s = self.shape
        _gluon_stack_kernel[(s["programs"],)](
            self.desc, out, h, self.stream, self.q, self.g, self.sync, self.layers,
            s["programs"], self.eps, D=self.d, R=s["R"], BLOCK_K=BK, RING=s["RING"],
            SYNC=self.sync_on, num_warps=self.warps)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", default="2048,4096")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16"))
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--variants", default="ring,nosync,ring-w8,ring-half")
    args = parser.parse_args()
    variants = {"ring": {}, "nosync": {"sync": False}, "ring-w8": {"warps": 8},
                "ring-half": {"ring": "half"}}

    def make_step(name, norms, wqs, wos, d):
        options = dict(variants[name])
        if options.get("ring") == "half":
            sms = torch.cuda.get_device_properties(0).multi_processor_count
            options["ring"] = launch_shape(d, sms)["RING"] // 2
        return GluonStack(norms, wqs, wos, 1e-6, **options)

    compare_with_library(args, args.variants.split(","), "gluon", make_step)

if __name__ == "__main__":
    main()
