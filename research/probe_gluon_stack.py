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
        [--layers 8] [--dtype bf16] [--calls 10] [--variants packed-s2,packed-s2-nosync]

Prints per width us a token for tg.decode_stack and each variant (a graph of --calls
chained calls), % of the floor, and the error against float64
(probe_stack_persistent.compare_with_library). Needs Hopper (TMA) and Triton's Gluon.
Written in session 83 against Triton 3.6's Gluon names; run in session 84 on the H200
(results/2026-12-02-session84): it works, and loses to tg.decode_stack by 17-20% at d = 2048
(22 layers; 0.7-0.9 us a grid barrier however the ring is shaped), wins 2-3% at 4096.
"""

from __future__ import annotations

import torch
import triton
from probe_stack_persistent import compare_with_library, stack_arguments
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
def _issue(w_desc, ring, bars, t, T, pid, programs, D: gl.constexpr, R: gl.constexpr,
           KT: gl.constexpr, BLOCK_K: gl.constexpr, RING: gl.constexpr,
           PACKED: gl.constexpr, SUB: gl.constexpr):
    """TMA copy of this program's tile t (projection t // KT, columns (t % KT) * SUB * BLOCK_K)
    into its ring slot, completion counted on that slot's mbarrier; nothing past the last
    tile. PACKED: the weights stored tile after tile (GluonStack), a tile SUB blocks of R
    BLOCK_K-wide rows in one contiguous run; else (SUB 1) the rows of the (2 L D, D) matrix,
    R runs of BLOCK_K apart."""
    if t < T:
        slot = t % RING
        bar = bars.index(slot)
        mbarrier.expect(bar, w_desc.block_type.nbytes)
        if PACKED:
            coords = [(((t // KT) * programs + pid) * KT + t % KT) * SUB * R, 0]
        else:
            coords = [(t // KT) * D + pid * R, (t % KT) * BLOCK_K]
        _tma_load(w_desc, coords, bar, ring.index(slot))


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
def _project(w_desc, ring, full, empty, x_smem, t0, T, pid, programs, D: gl.constexpr,
             R: gl.constexpr, KT: gl.constexpr, BLOCK_K: gl.constexpr, RING: gl.constexpr,
             PACKED: gl.constexpr, SUB: gl.constexpr, WS: gl.constexpr,
             tile_layout: gl.constexpr):
    """sum_k W[r, k] x_k for the program's R rows of projection t0 // KT, over its KT tiles
    (already in flight); each slot, once read, refilled with the tile RING further on: by
    this partition (WS False) or by the producer warp, told on the slot's `empty` barrier."""
    acc = gl.full([R, BLOCK_K], 0.0, gl.float32, tile_layout)
    for c in gl.static_range(KT):
        t = t0 + c
        slot = t % RING
        mbarrier.wait(full.index(slot), (t // RING) & 1)
        for s in gl.static_range(SUB):
            w = ring.index(slot).slice(s * R, R).load(tile_layout)
            x = x_smem.slice((c * SUB + s) * BLOCK_K, BLOCK_K).load(
                gl.SliceLayout(0, tile_layout))
            acc += w.to(gl.float32) * gl.expand_dims(x, 0)
        _cta_barrier()  # every warp has read the slot before the TMA overwrites it
        if WS:
            mbarrier.arrive(empty.index(slot))
        else:
            _issue(w_desc, ring, full, t + RING, T, pid, programs, D, R, KT, BLOCK_K, RING,
                   PACKED, SUB)
    return gl.sum(acc, axis=1)  # one reduction across threads, after the tiles


@gluon.jit
def _producer(w_desc, ring, full, empty, T, pid, programs, D: gl.constexpr, R: gl.constexpr,
              KT: gl.constexpr, BLOCK_K: gl.constexpr, RING: gl.constexpr,
              PACKED: gl.constexpr, SUB: gl.constexpr):
    """The warp that keeps the ring full (WS): tile t into its slot once the layers have
    released the slot's last tile (round t // RING - 1 of its `empty` barrier)."""
    for t in range(T):
        if t >= RING:
            mbarrier.wait(empty.index(t % RING), (t // RING + 1) & 1)
        _issue(w_desc, ring, full, t, T, pid, programs, D, R, KT, BLOCK_K, RING, PACKED, SUB)


@gluon.jit
def _layers(w_desc, ring, full, empty, x_smem, out_ptr, h_ptr, stream_ptr, q_ptr, g_ptr,
            sync_ptr, L, pid, programs, eps, D: gl.constexpr, R: gl.constexpr,
            KT: gl.constexpr, BLOCK_K: gl.constexpr, RING: gl.constexpr, SYNC: gl.constexpr,
            PACKED: gl.constexpr, SUB: gl.constexpr, WS: gl.constexpr, STAGE: gl.constexpr,
            REPL: gl.constexpr):
    """The stack's arithmetic and grid barriers (all warps, or the default partition).
    STAGE=False: the input vector staged for the first projection only (wrong results; with
    SYNC=False what the ring streams with no work between projections but the products).
    REPL > 1: program p stages from copy p % REPL of the vectors (wrong results, only
    copy 0 is written; with SYNC=False whether every program reading the same lines costs)."""
    copy = (pid % REPL) * D
    WARPS: gl.constexpr = gl.num_warps()
    tile_layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [WARPS, 1], [1, 0])
    vec_layout: gl.constexpr = gl.BlockedLayout([4], [32], [WARPS], [0])
    T = 2 * L * KT
    rows = pid * R + gl.arange(0, R, layout=gl.SliceLayout(1, tile_layout))
    phase = 0
    for layer in range(L):
        if layer == 0:
            squares = _stage(x_smem, h_ptr, g_ptr, True, D, vec_layout)
        else:
            _wait(sync_ptr, phase * programs, SYNC)
            if STAGE:
                squares = _stage(x_smem, stream_ptr + copy, g_ptr + layer * D, True, D,
                                 vec_layout)
            else:
                squares = gl.to_tensor(float(D))
        acc = _project(w_desc, ring, full, empty, x_smem, 2 * layer * KT, T, pid, programs,
                       D, R, KT, BLOCK_K, RING, PACKED, SUB, WS, tile_layout)
        gl.store(q_ptr + rows, acc * gl.rsqrt(squares / D + eps))
        _arrive(sync_ptr)
        phase += 1
        _wait(sync_ptr, phase * programs, SYNC)
        if STAGE:
            _stage(x_smem, q_ptr + copy, g_ptr, False, D, vec_layout)
        acc = _project(w_desc, ring, full, empty, x_smem, (2 * layer + 1) * KT, T, pid,
                       programs, D, R, KT, BLOCK_K, RING, PACKED, SUB, WS, tile_layout)
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
    # The last program out sets the counters back to zero for the next launch: every other
    # program has passed its last wait by then.
    _cta_barrier()
    if gl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu") == programs - 1:
        gl.store(sync_ptr, 0)
        gl.store(sync_ptr + 1, 0)


@gluon.jit
def _gluon_stack_kernel(w_desc, out_ptr, h_ptr, stream_ptr, q_ptr, g_ptr, sync_ptr, L,
                        programs, eps, D: gl.constexpr, R: gl.constexpr,
                        BLOCK_K: gl.constexpr, RING: gl.constexpr, SYNC: gl.constexpr,
                        PACKED: gl.constexpr, SUB: gl.constexpr, WS: gl.constexpr,
                        STAGE: gl.constexpr, REPL: gl.constexpr):
    """out = the stack of L layers h <- h + W_o[l] (rstd * W_q[l] (g[l] * h)) at one row; the
    weights one (2 L D, D) tensor behind w_desc (W_q[0], W_o[0], W_q[1], ...), tiles [R,
    BLOCK_K]; stream and q fp32 scratch of D; sync two int32 zeros (a barrier count, an exit
    count), zero again when the kernel ends. One program an SM, all resident at once. WS: one
    more warp (a partition of its own) issues every TMA copy."""
    KT: gl.constexpr = D // (SUB * BLOCK_K)
    pid = gl.program_id(0)
    T = 2 * L * KT
    ring = gl.allocate_shared_memory(w_desc.dtype, [RING, SUB * R, BLOCK_K], w_desc.layout)
    full = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [RING, 1], mbarrier.MBarrierLayout())
    x_smem = gl.allocate_shared_memory(gl.float32, [D], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    for i in gl.static_range(RING):
        mbarrier.init(full.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    if WS:
        gl.warp_specialize(
            [(_layers, (w_desc, ring, full, empty, x_smem, out_ptr, h_ptr, stream_ptr, q_ptr,
                        g_ptr, sync_ptr, L, pid, programs, eps, D, R, KT, BLOCK_K, RING, SYNC,
                        PACKED, SUB, WS, STAGE, REPL)),
             (_producer, (w_desc, ring, full, empty, T, pid, programs, D, R, KT, BLOCK_K,
                          RING, PACKED, SUB))],
            [1], [40])
    else:
        for i in gl.static_range(RING):  # the ring's first tiles: weights need no activations
            _issue(w_desc, ring, full, i, T, pid, programs, D, R, KT, BLOCK_K, RING, PACKED,
                   SUB)
        _layers(w_desc, ring, full, empty, x_smem, out_ptr, h_ptr, stream_ptr, q_ptr, g_ptr,
                sync_ptr, L, pid, programs, eps, D, R, KT, BLOCK_K, RING, SYNC, PACKED, SUB,
                WS, STAGE, REPL)
    for i in gl.static_range(RING):
        mbarrier.invalidate(full.index(i))
        mbarrier.invalidate(empty.index(i))


def launch_shape(d: int, sms: int, element_size: int = 2, sub: int = 1) -> dict:
    """Rows a program (a power of two, whole rows of d per program) and the ring's slots."""
    rows = triton.next_power_of_2(triton.cdiv(d, sms))
    if d % rows or d % (sub * BK):
        raise ValueError(f"d = {d}: needs {rows}-row blocks and {sub * BK}-column tiles")
    slot = sub * rows * BK * element_size
    return {"R": rows, "programs": d // rows, "RING": (SHARED_BUDGET - 4 * d) // slot}


class GluonStack:
    def __init__(self, norms, wqs, wos, eps, sync=True, warps=4, ring=None, packed=False,
                 sub=1, ws=False, stage=True, copies=1):
        self.g = torch.stack(list(norms)).contiguous()
        # W_q[0], W_o[0], W_q[1], ...: each program's tiles one sequence in memory order
        w = torch.stack([w for pair in zip(wqs, wos, strict=True) for w in pair])
        L2, d, _ = w.shape
        self.layers, self.d, self.eps, self.sync_on, self.warps = L2 // 2, d, eps, sync, warps
        self.packed, self.sub, self.ws, self.stage = packed, sub, ws, stage
        self.copies = copies
        assert copies == 1 or not sync, "copies of the vectors other than the first go unwritten"
        assert packed or sub == 1, "only packed weights make a tile of several blocks"
        dev = w.device
        self.stream = torch.zeros(copies * d, dtype=torch.float32, device=dev)
        self.q = torch.zeros(copies * d, dtype=torch.float32, device=dev)
        self.sync = torch.zeros(2, dtype=torch.int32, device=dev)
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        self.shape = launch_shape(d, sms, w.element_size(), sub)
        if ring is not None:
            self.shape["RING"] = ring
        if packed:  # (projection, program, tile, block, row, column): a tile one run
            R, programs = self.shape["R"], self.shape["programs"]
            w = w.reshape(L2, programs, R, d // (sub * BK), sub, BK).permute(0, 1, 3, 4, 2, 5)
            self.w = w.contiguous().reshape(-1, BK)
        else:
            self.w = w.reshape(L2 * d, d).contiguous()
        # no swizzle: a warp reads one 512-byte row of a tile, conflict-free
        layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
        self.desc = TensorDescriptor(self.w, list(self.w.shape), list(self.w.stride()),
                                     [sub * self.shape["R"], BK], layout)

    def __call__(self, h: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        s = self.shape
        _gluon_stack_kernel[(s["programs"],)](
            self.desc, out, h, self.stream, self.q, self.g, self.sync, self.layers,
            s["programs"], self.eps, D=self.d, R=s["R"], BLOCK_K=BK, RING=s["RING"],
            SYNC=self.sync_on, PACKED=self.packed, SUB=self.sub,
            WS=self.ws, STAGE=self.stage, REPL=self.copies, num_warps=self.warps)
        return out


def main() -> None:
    args = stack_arguments(__doc__.split("\n\n")[0], "2048,4096",
                           "packed-s2-nosync,packed-s2,packed-s2-r4")

    def make_step(name, norms, wqs, wos, d):
        """A variant named by dash-joined words: packed (weights tile after tile), sN (tiles
        of N blocks), nosync (no grid barrier), nostage (no input vector staged after the
        first), wN (N warps), ws (a producer warp), rN (N ring slots), half (half the slots
        that fit), xN (program p stages from copy p % N of the vectors; with nosync), ring
        (none of these)."""
        options = {}
        for word in name.split("-"):
            if word in ("packed", "ws"):
                options[word] = True
            elif word == "nosync":
                options["sync"] = False
            elif word == "nostage":
                options["stage"] = False
            elif word == "half":
                sms = torch.cuda.get_device_properties(0).multi_processor_count
                options["ring"] = launch_shape(d, sms, sub=options.get("sub", 1))["RING"] // 2
            elif word[0] in "swrx" and word[1:].isdigit():
                option = {"s": "sub", "w": "warps", "r": "ring", "x": "copies"}[word[0]]
                options[option] = int(word[1:])
            elif word != "ring":
                raise ValueError(f"variant {name}: no word {word}")
        return GluonStack(norms, wqs, wos, 1e-6, **options)

    compare_with_library(args, args.variants.split(","), "gluon", make_step)

if __name__ == "__main__":
    main()
