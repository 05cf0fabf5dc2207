"""A one-shot all-reduce in Triton over symmetric memory, launched with programmatic
dependent launch, for the few-KB all-reduces of a tensor-parallel decode step.

Each rank's projection writes its partial result into its own symmetric buffer; program p of
every rank then signals every peer that its block p is ready (a flag in the peer's memory),
waits for every peer's flag, reads block p of every rank's buffer over NVLink (plain loads
of peer memory, no multimem operations) and sums them in fp32, in rank order, so every rank
gets the same bits. Against torch's own one-shot kernel it lets the next kernel start right
away: the next projection streams its weights while this one waits for its peers.

Flags: (site, program, sender) int32 slots in each rank's symmetric flag array. A sender
sets its slot on each peer from 0 to 1 (spinning while the peer has not yet taken the
previous round's 1), the receiver takes it back to 0. Buffers of a site are rewritten only
two all-reduces later, after every peer entered the one in between, so no peer still reads
them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..kernels._launch import supports_pdl
from ..kernels._pdl import ENABLED as PDL_ENABLED
from ..kernels._pdl import launched
from .group import TensorParallel

BLOCK = 1024   # elements a program sums: 8 a thread of 4 warps


@triton.jit
def _global_ns(anchor):
    """The GPU's nanosecond clock (%globaltimer), the same on every SM; `anchor` is any
    scalar, only there to give the inline assembly an operand."""
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [anchor],
                                     dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _still_waiting(failed_ptr, deadline, anchor):
    """False once any program gave up (*failed_ptr set) or this one's deadline passed, which
    sets *failed_ptr."""
    if _global_ns(anchor) > deadline:
        tl.atomic_xchg(failed_ptr, 1)
    return tl.load(failed_ptr, volatile=True) == 0


@triton.jit
def _one_shot_all_reduce_kernel(out_ptr, buffer_addrs_ptr, flag_addrs_ptr, failed_ptr, numel,
                                timeout_ns, RANK: tl.constexpr, WORLD: tl.constexpr,
                                WORLD_P2: tl.constexpr, PDL: tl.constexpr,
                                BLOCK: tl.constexpr):
    """out[i] = sum_r buffer_r[i] over ranks r = 0..WORLD-1, i in this program's block.

    A peer that never comes (a rank stopped) would keep this kernel, and every launch queued
    behind it, waiting for ever, and the host too wherever it synchronizes the context (seen
    blocked in a kernel's first launch, 2 H200s, session 39). So a program gives up after
    timeout_ns and sets *failed_ptr, which every later call sees at its first exchange and
    then reads no peer: the GPU drains, and the host finds the flag after the steps' event
    (generate.py)."""
    pid = tl.program_id(0)
    if PDL:
        tl.extra.cuda.gdc_wait()               # this rank's partial result is written
        tl.extra.cuda.gdc_launch_dependents()  # the next kernel may stream its weights
    deadline = _global_ns(pid) + timeout_ns
    # *failed_ptr is first read beside the first exchange, not on its own before it
    ok = tl.full((), 1, tl.int1)
    lanes = tl.arange(0, WORLD_P2)
    peers = tl.minimum(lanes, WORLD - 1)       # lanes past WORLD repeat the last rank
    # signal: my slot (pid, RANK) on every peer, 0 -> 1 (2 never matches: lanes done or
    # padding leave the flag alone)
    peer_flags = tl.load(flag_addrs_ptr + peers).to(tl.pointer_type(tl.int32))
    pending = lanes < WORLD
    while tl.max(pending.to(tl.int32), axis=0) > 0:
        old = tl.atomic_cas(peer_flags + pid * WORLD + RANK, tl.where(pending, 0, 2),
                            tl.full([WORLD_P2], 1, tl.int32), sem="release", scope="sys")
        ok = _still_waiting(failed_ptr, deadline, pid)
        pending = pending & (old != 0) & ok
    # wait: every peer's slot (pid, peer) here, 1 -> 0
    my_flags = tl.load(flag_addrs_ptr + RANK).to(tl.pointer_type(tl.int32))
    pending = (lanes < WORLD) & ok
    while tl.max(pending.to(tl.int32), axis=0) > 0:
        old = tl.atomic_cas(my_flags + pid * WORLD + peers, tl.where(pending, 1, 2),
                            tl.zeros([WORLD_P2], tl.int32), sem="acquire", scope="sys")
        ok = _still_waiting(failed_ptr, deadline, pid)
        pending = pending & (old != 1) & ok
    tl.debug_barrier()   # every thread reads after the flags were seen
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < numel) & ok                 # given up: no peer memory is read
    total = tl.zeros([BLOCK], tl.float32)
    for rank in tl.static_range(WORLD):
        buffer = tl.load(buffer_addrs_ptr + rank).to(tl.pointer_type(out_ptr.dtype.element_ty))
        total += tl.load(buffer + offs, mask=mask, other=0.0, volatile=True).to(tl.float32)
    tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=offs < numel)


def _peer_addresses(handle, tensor: torch.Tensor, world: int) -> list[int]:
    """Each rank's address of `tensor`'s symmetric allocation (this rank's included)."""
    ptrs = getattr(handle, "buffer_ptrs", None)
    if ptrs is None:
        ptrs = [handle.get_buffer(r, tuple(tensor.shape), tensor.dtype).data_ptr()
                for r in range(world)]
    offset = tensor.storage_offset() * tensor.element_size()
    return [int(p) + offset for p in ptrs]


class OneShotAllReduce:
    """`sites` symmetric buffers of `shape` and their flags on every rank (see the module).

        x = tg.linear(..., out=reduce.buffer(site)[:rows])
        y = reduce(x, site)        # a new tensor: the sum over the ranks
    """

    def __init__(self, tp: TensorParallel, group_name: str, shape: tuple[int, int],
                 dtype: torch.dtype, sites: int = 2):
        import torch.distributed._symmetric_memory as symm_mem

        self.tp = tp
        device = torch.device("cuda", torch.cuda.current_device())
        programs = triton.cdiv(shape[0] * shape[1], BLOCK)
        self._buffers, self._buffer_addrs = [], []
        for _ in range(sites):
            buffer = symm_mem.empty(shape, dtype=dtype, device=device).zero_()
            handle = symm_mem.rendezvous(buffer, group_name)
            self._buffers.append(buffer)
            self._buffer_addrs.append(torch.tensor(_peer_addresses(handle, buffer, tp.size),
                                                   dtype=torch.int64, device=device))
        self._flags = symm_mem.empty((sites, programs * tp.size), dtype=torch.int32,
                                     device=device).zero_()
        handle = symm_mem.rendezvous(self._flags, group_name)
        self._flag_addrs = [
            torch.tensor(_peer_addresses(handle, self._flags[site], tp.size),
                         dtype=torch.int64, device=device) for site in range(sites)]
        # set by a call that gave up waiting for a peer (tp.timeout): read by the host
        self.failed = torch.zeros(1, dtype=torch.int32, device=device)
        torch.cuda.synchronize()
        tp.barrier("the one-shot all-reduce's setup")   # every rank's flags are zero

    def buffer(self, site: int) -> torch.Tensor:
        return self._buffers[site]

    def __call__(self, partial: torch.Tensor, site: int) -> torch.Tensor:
        """partial: rows 0.. of buffer(site) (what this rank wrote there)."""
        buffer = self._buffers[site]
        if partial.data_ptr() != buffer.data_ptr() or not partial.is_contiguous():
            raise ValueError("the one-shot all-reduce reads its own symmetric buffer: write "
                             "the partial result into reduce.buffer(site)[:rows]")
        out = torch.empty_like(partial)
        pdl = PDL_ENABLED and supports_pdl(partial.device)
        _one_shot_all_reduce_kernel[(triton.cdiv(partial.numel(), BLOCK),)](
            out, self._buffer_addrs[site], self._flag_addrs[site], self.failed,
            partial.numel(), int(self.tp.timeout * 1e9), RANK=self.tp.rank, WORLD=self.tp.size,
            WORLD_P2=max(2, triton.next_power_of_2(self.tp.size)), PDL=pdl, BLOCK=BLOCK,
            num_warps=4, **({"launch_pdl": True} if pdl else {}))
        launched(partial.device, pdl, (out,))
        return out
