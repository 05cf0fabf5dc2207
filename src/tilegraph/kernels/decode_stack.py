"""A whole decode stack in one persistent kernel: for layer l = 0 .. L-1

    q = rms_norm(h) * g_l @ Wq_l.T          (phase A: Wq_l is (NQ, D))
    h = h + q @ Wo_l.T                      (phase B: Wo_l is (D, NQ))

Batch-1 decode is a stream of weight bytes: each phase is a matrix-vector product whose
inputs (one small vector per row of h) are produced by the phase before. Run as two kernels
per layer, every kernel pays a ramp-up and a tail (~2 us on H100) in which the memory system
idles. Here one program per SM stays resident for the whole stack, owns the same rows of every
weight matrix, and between phases waits at a grid-wide barrier instead of ending. Weights do
not depend on the activations, so each program always has its next weight chunk in flight
(the next phase's first chunk while it waits, computes and signals): the weight stream does
not stop while the small activation vector crosses the barrier.

The barrier needs every program resident at once: the launch is cooperative, which the
driver refuses (rather than deadlocks) when the grid does not fit. Triton's interpreter runs
programs one after another, where no program may wait for another: there each phase is its
own launch, the kernel boundary standing in for the barrier (same code, no waiting).

Status (H100, notes/decode.md): correct and graph-safe, but slower than the layers path of
LayerStack.fused_forward (d=2048 fp32 0.326 against 0.274 ms/token with two tg.linear kernels
a layer; bf16 0.195 against 0.170 and d=512 0.087 against 0.053 with one decode_layer kernel
a layer): one chunk in flight per SM is not enough to reach the floor, Triton 3.6 holds
in-flight weights only in registers, and each barrier is a latency chain (replacing it with
tagged exchange words was slower still).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from .._runtime import INTERPRET
from ._checks import check_like, check_no_overlap, check_shape, check_tensor, prepare_out
from ._ops import dispatch
from .linear import _matvec_step
from .rms_norm import check_eps, rms_norm_ref

# Rows of h decoded together; more rows belong to a tensor-core GEMM, as in tg.linear.
MAX_ROWS = 8
# Bytes of weight a thread holds per chunk: two chunks are live at a time (the one being used
# and the next one in flight). 64 was the fastest on H100 at d=2048 (bf16 195.6 us/token
# against 202.4 at 128, which also spills; benchmarks/explore_decode_stack.py).
CHUNK_BYTES_PER_THREAD = 64


@triton.jit
def _grid_arrive(sync_ptr):
    """Count this program in at the barrier, without waiting for the atomic's reply: its
    result unused, Triton issues it from one thread and the other warps run on (a used
    result would hold the whole program for a round trip to L2 on every phase)."""
    tl.debug_barrier()  # every warp's stores are issued before the release below
    tl.atomic_add(sync_ptr, 1, sem="release", scope="gpu")


@triton.jit
def _grid_wait(sync_ptr, target):
    """Spin until `target` arrivals are counted.

    The poll is relaxed, not acquire: an acquire at GPU scope invalidates the SM's L1, which
    waits for the weight loads this program has in flight, so the barrier could not overlap
    the weight stream. What the other programs wrote is read with .cg loads instead, from L2
    (where their release put it before counting in), and only after the poll has seen their
    count: the loads are issued behind the branch on it.
    """
    while tl.atomic_add(sync_ptr, 0, sem="relaxed", scope="gpu") < target:
        pass


@triton.jit
def _load_chunk(w_ptr, n_rows, n_cols, row0, k0, BLOCK_N: tl.constexpr,
                BLOCK_K: tl.constexpr):
    """Rows [row0, +BLOCK_N) x columns [k0, +BLOCK_K) of a contiguous (n_rows, n_cols)
    matrix, zeros outside it. Read once per token: L2 may drop the lines first."""
    offs_n = row0 + tl.arange(0, BLOCK_N)
    offs_k = k0 + tl.arange(0, BLOCK_K)
    mask = (offs_n < n_rows)[:, None] & (offs_k < n_cols)[None, :]
    return tl.load(w_ptr + offs_n[:, None].to(tl.int64) * n_cols + offs_k[None, :], mask=mask,
                   other=0.0, eviction_policy="evict_first")


@triton.jit
def _decode_phase(w_next, dst_ptr, src_ptr, stride_src, res_ptr, stride_res, w_ptr,
                  norm_w_ptr, next_w_ptr, next_n, next_k, sync_ptr, wait_target,
                  M, N, K, eps,
                  HAS_NORM: tl.constexpr, HAS_RESIDUAL: tl.constexpr, SYNC: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  CHUNKS: tl.constexpr):
    """dst[m, n] = (rstd_m if HAS_NORM) * sum_k src[m, k] (g_k) W[n, k] (+ res[m, n]) for this
    program's BLOCK_N rows n of the contiguous (N, K) matrix W, in CHUNKS chunks of K.

    w_next holds this phase's first chunk, already in flight. Every chunk's successor is
    requested before the chunk is used, and the last one's successor is the next phase's
    first chunk (next_w_ptr, (next_n, next_k)), which is returned still in flight: the
    weight stream runs on through the wait, the compute tail and the barrier.
    """
    row0 = tl.program_id(0) * BLOCK_N
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = row0 + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    sum_sq = tl.zeros([BLOCK_M], tl.float32)
    for c in tl.static_range(CHUNKS):
        w = w_next
        if c + 1 < CHUNKS:
            w_next = _load_chunk(w_ptr, N, K, row0, (c + 1) * BLOCK_K, BLOCK_N, BLOCK_K)
        else:
            w_next = _load_chunk(next_w_ptr, next_n, next_k, row0, 0, BLOCK_N, BLOCK_K)
        if c == 0 and SYNC:
            _grid_wait(sync_ptr, wait_target)  # src is final from here on
        acc, sum_sq = _matvec_step(acc, sum_sq, src_ptr, stride_src, w, norm_w_ptr, offs_m,
                                   offs_k, M, c * BLOCK_K, K, HAS_NORM, BLOCK_M, True, ".cg")
    if HAS_NORM:
        acc = acc * tl.rsqrt(sum_sq / K + eps)[:, None]
    y_mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + offs_m[:, None] * stride_res + offs_n[None, :], mask=y_mask,
                      other=0.0, cache_modifier=".cg")
        acc += res.to(tl.float32)
    tl.store(dst_ptr + offs_m[:, None] * N + offs_n[None, :],
             acc.to(dst_ptr.dtype.element_ty), mask=y_mask)
    return w_next


@triton.jit
def _decode_stack_kernel(out_ptr, x_ptr, stride_xm, q_ptr, norm_w_ptr, wq_ptr, wo_ptr, sync_ptr,
                         M, D, NQ, first_layer, last_layer, eps,
                         RUN_A: tl.constexpr, RUN_B: tl.constexpr, SYNC: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         CHUNKS: tl.constexpr):
    """Layers [first_layer, last_layer) of the stack; h is read from x at layer 0 and lives
    in out after that. With SYNC, phase p waits for p x n_programs arrivals; after the last
    phase every program counts itself out once more, and the last one out (everyone is then
    past every wait) resets the counter for the next launch."""
    n_programs = tl.num_programs(0)
    row0 = tl.program_id(0) * BLOCK_N
    first64 = tl.cast(first_layer, tl.int64)  # L x D x NQ may pass 2^31 elements
    if RUN_A:
        w_next = _load_chunk(wq_ptr + first64 * NQ * D, NQ, D, row0, 0, BLOCK_N, BLOCK_K)
    else:
        w_next = _load_chunk(wo_ptr + first64 * D * NQ, D, NQ, row0, 0, BLOCK_N, BLOCK_K)
    phase = 0
    for layer in range(first_layer, last_layer):
        layer64 = tl.cast(layer, tl.int64)
        wq_layer = wq_ptr + layer64 * NQ * D
        wo_layer = wo_ptr + layer64 * D * NQ
        if layer == 0:
            h_ptr = x_ptr
            stride_h = stride_xm
        else:
            h_ptr = out_ptr
            stride_h = D
        if RUN_A:  # q = rms_norm(h) * g @ Wq.T; next: this layer's Wo
            w_next = _decode_phase(w_next, q_ptr, h_ptr, stride_h, q_ptr, 0, wq_layer,
                                   norm_w_ptr + layer64 * D, wo_layer, D, NQ, sync_ptr,
                                   phase * n_programs, M, NQ, D, eps, True, False, SYNC,
                                   BLOCK_M, BLOCK_N, BLOCK_K, CHUNKS)
            if SYNC:
                _grid_arrive(sync_ptr)
            phase += 1
        if RUN_B:  # h = h + q @ Wo.T; next: the next layer's Wq (none after the last)
            next_n = tl.where(layer + 1 < last_layer, NQ, 0)
            w_next = _decode_phase(w_next, out_ptr, q_ptr, NQ, h_ptr, stride_h, wo_layer,
                                   norm_w_ptr, wq_layer + NQ * D, next_n, D, sync_ptr,
                                   phase * n_programs, M, D, NQ, eps, False, True, SYNC,
                                   BLOCK_M, BLOCK_N, BLOCK_K, CHUNKS)
            if SYNC:
                _grid_arrive(sync_ptr)
            phase += 1
    if SYNC:
        if tl.atomic_add(sync_ptr, 1) == (phase + 1) * n_programs - 1:
            tl.atomic_xchg(sync_ptr, 0)


@dataclass(frozen=True)
class DecodeStackConfig:
    programs: int   # one per SM at most: all must be resident for the barrier
    block_n: int    # rows of each weight matrix a program owns
    block_k: int    # weight columns a chunk holds
    chunks: int     # chunks covering the longest row
    num_warps: int


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def decode_stack_config(d: int, nq: int, element_size: int, sm_count: int) -> DecodeStackConfig:
    """Every program owns one row tile of every matrix: block_n rows, so that the largest
    matrix has at most `sm_count` tiles (d=2048 on 132 SMs: 16 rows, 128 programs, 3% idle).
    The tile streams in chunks of CHUNK_BYTES_PER_THREAD a thread (d=2048: two chunks in bf16,
    four in fp32), the next always in flight while one is used."""
    n_max = max(d, nq)
    block_n = triton.next_power_of_2(triton.cdiv(n_max, sm_count))
    k_max = triton.next_power_of_2(n_max)
    num_warps = max(4, min(16, block_n * k_max // (32 * 32)))
    chunk_elements = CHUNK_BYTES_PER_THREAD // element_size * 32 * num_warps
    block_k = min(k_max, max(16, chunk_elements // block_n))
    return DecodeStackConfig(triton.cdiv(n_max, block_n), block_n, block_k,
                             triton.cdiv(n_max, block_k), num_warps)


def _launch_decode_stack(x: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                         wo: torch.Tensor, eps: float, workspace: torch.Tensor,
                         out: torch.Tensor, config: DecodeStackConfig | None = None) -> None:
    m, d = x.shape
    layers, nq, _ = wq.shape
    if config is None:
        sm_count = 8 if INTERPRET else _sm_count(x.device.index or 0)
        config = decode_stack_config(d, nq, x.element_size(), sm_count)
    q = torch.empty((m, nq), dtype=x.dtype, device=x.device)
    common = dict(BLOCK_M=triton.next_power_of_2(m), BLOCK_N=config.block_n,
                  BLOCK_K=config.block_k, CHUNKS=config.chunks, num_warps=config.num_warps,
                  num_stages=1)
    args = (out, x, x.stride(0), q, norm_weight, wq, wo, workspace, m, d, nq)
    grid = (config.programs,)
    if INTERPRET:
        # One launch per phase: the interpreter runs programs in turn, none may wait.
        for layer in range(layers):
            for run_a in (True, False):
                _decode_stack_kernel[grid](*args, layer, layer + 1, eps, RUN_A=run_a,
                                           RUN_B=not run_a, SYNC=False, **common)
        return
    _decode_stack_kernel[grid](*args, 0, layers, eps, RUN_A=True, RUN_B=True, SYNC=True,
                               launch_cooperative_grid=True, **common)


@torch.library.custom_op("tilegraph::decode_stack", mutates_args={"workspace", "out"})
def _decode_stack_op(x: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                     wo: torch.Tensor, eps: float, workspace: torch.Tensor,
                     out: torch.Tensor) -> None:
    _launch_decode_stack(x, norm_weight, wq, wo, eps, workspace, out)


@_decode_stack_op.register_fake
def _(x, norm_weight, wq, wo, eps, workspace, out):
    return None


def decode_stack_workspace(device: str | torch.device) -> torch.Tensor:
    """The barrier counter for decode_stack: zeros, and zero again after every launch."""
    return torch.zeros(1, dtype=torch.int32, device=device)


def decode_stack(x: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                 wo: torch.Tensor, eps: float = 1e-6, *, workspace: torch.Tensor | None = None,
                 out: torch.Tensor | None = None) -> torch.Tensor:
    """Every layer of h = h + (rms_norm(h) * norm_weight[l]) @ wq[l].T @ wo[l].T, one launch.

    x (..., D) with at most 8 rows; norm_weight (L, D); wq (L, NQ, D); wo (L, D, NQ); all of
    x's dtype and device, the weights contiguous. Returns (..., D).

    workspace: the barrier counter from decode_stack_workspace(device). Pass one to keep it
    out of the launch (a captured graph then holds the kernel alone); without it a zeroed
    counter is allocated per call. One workspace must not serve two launches that run at the
    same time (on two streams).
    """
    check_tensor("x", x, min_ndim=1)
    d = x.shape[-1]
    for name, t, ndim in (("norm_weight", norm_weight, 2), ("wq", wq, 3), ("wo", wo, 3)):
        check_tensor(name, t)
        check_like(name, t, "x", x)
        if t.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D (one entry per layer), got shape "
                             f"{tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous: each program streams whole rows of "
                             "it (call .contiguous() once, outside the decode loop)")
    layers, nq = wq.shape[0], wq.shape[1]
    check_shape("norm_weight", norm_weight, (layers, d))
    check_shape("wq", wq, (layers, nq, d))
    check_shape("wo", wo, (layers, d, nq))
    if layers == 0 or d == 0 or nq == 0:
        raise ValueError(f"the stack has no work: {layers} layers, D={d}, NQ={nq}")
    rows = x.reshape(-1, d)
    if rows.shape[0] > MAX_ROWS:
        raise ValueError(f"decode_stack takes at most {MAX_ROWS} rows of h, got "
                         f"{rows.shape[0]}; run larger batches layer by layer with tg.linear")
    if rows.stride(-1) != 1:
        rows = rows.contiguous()
    eps = check_eps(eps)
    out = prepare_out(out, x.shape, x.dtype, x.device)
    for name, t in (("x", x), ("norm_weight", norm_weight), ("wq", wq), ("wo", wo)):
        check_no_overlap(out, name, t)
    if workspace is None:
        workspace = decode_stack_workspace(x.device)
    elif (not isinstance(workspace, torch.Tensor) or workspace.dtype != torch.int32
          or workspace.numel() != 1 or workspace.device != x.device):
        raise ValueError("workspace must be decode_stack_workspace(x.device): one int32 zero "
                         "on x's device")
    if rows.shape[0]:
        dispatch(_decode_stack_op, _launch_decode_stack, rows, norm_weight, wq, wo, eps,
                 workspace, out.view(-1, d))
    return out


def decode_stack_ref(x: torch.Tensor, norm_weight: torch.Tensor, wq: torch.Tensor,
                     wo: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """The stack layer by layer in float64 (for float64 input) or fp32, cast back."""
    compute = torch.float64 if x.dtype == torch.float64 else torch.float32
    h = x.to(compute)
    for g, w_q, w_o in zip(norm_weight, wq, wo, strict=True):
        q = rms_norm_ref(h, g.to(compute), eps) @ w_q.to(compute).T
        h = h + q @ w_o.to(compute).T
    return h.to(x.dtype)
