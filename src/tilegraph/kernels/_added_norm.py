"""A residual stream's norm-and-add run in the prologue of the projection that reads it.

Gemma normalises each residual projection's output before adding it to the stream (its
norms after attention and after the MLP): s = x + rms_norm(h) * w, and the next projection
reads rms_norm(s). As a kernel of its own (tg.rms_norm(h, w, residual=x)) that add costs a
launch and a round trip between two projections; here the next projection's programs each
form s from x, h and w as they read their row (h's norm from a pass over h first), rounded
as tg.rms_norm rounds it, and program 0 also writes s, the stream the later layers add to.

`added` is the kernels' tuple (h_ptr, stride_hm, w_ptr, sum_ptr, stride_sm): h (rows, K) and
w (K,) of x's dtype, s written to sum_ptr's rows; NO_ADDED where the projection has none.
"""

import torch
import triton
import triton.language as tl

NO_ADDED = ()  # the `added` argument of a projection that reads x as it is
# The widest step of added_rstd's pass over h in the one-row and several-row GEMVs (a
# 1-D vector over the program's threads, live beside the weight tile they prefetched):
# one step up to 2048 columns (rstd_block_k)
MAX_RSTD_BLOCK_K = 2048


def rstd_block_k(K: int) -> int:
    """The GEMVs' step of added_rstd over rows of K columns."""
    return min(MAX_RSTD_BLOCK_K, triton.next_power_of_2(K))


def added_args(h: torch.Tensor, w: torch.Tensor, sum_out: torch.Tensor) -> tuple:
    """The kernels' `added` tuple for rows h (rows, K), weight w (K,) and s into sum_out."""
    return (h, h.stride(0), w, sum_out, sum_out.stride(0))


@triton.jit
def added_rstd(added, offs_m, M, K, eps, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """1 / sqrt(mean_k h_mk^2 + eps) of rows offs_m of h, (BLOCK_M,) (rows past M: any), in
    steps of BLOCK_K columns: a step a round trip to L2 before the projection can start, so
    as wide as the caller can hold."""
    h_ptr, stride_hm, w_ptr, sum_ptr, stride_sm = added
    cols = tl.arange(0, BLOCK_K)
    sum_sq = tl.zeros([BLOCK_M], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        mask = (offs_m < M)[:, None] & (cols < K - k0)[None, :]
        h = tl.load(h_ptr + offs_m[:, None] * stride_hm + k0 + cols[None, :], mask=mask,
                    other=0.0).to(tl.float32)
        sum_sq += tl.sum(h * h, axis=1)
    return tl.rsqrt(sum_sq / K + eps)


@triton.jit
def added_inputs(added, rows, cols, mask):
    """h and w of `added` at rows `rows` and columns `cols` (fp32, 0 where `mask` is False),
    the values add_normed reads: loaded apart so that a kernel issues them with its other
    loads, before added_rstd's sum, whose barrier a load after it cannot pass (one round
    trip to L2 after PDL's wait rather than two)."""
    h_ptr, stride_hm, w_ptr, sum_ptr, stride_sm = added
    h = tl.load(h_ptr + rows * stride_hm + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    return h, w


@triton.jit
def add_loaded(x, h, w, added, rows, cols, mask, rstd, write):
    """add_normed from h and w already loaded by added_inputs (same arguments)."""
    h_ptr, stride_hm, w_ptr, sum_ptr, stride_sm = added
    dtype = h_ptr.dtype.element_ty
    s = (x + (h * rstd * w).to(dtype).to(tl.float32)).to(dtype)
    # tl.where, not mask & write: the interpreter cannot mask by a tensor & a scalar
    tl.store(sum_ptr + rows * stride_sm + cols, s, mask=tl.where(write, mask, False))
    return s.to(tl.float32)


@triton.jit
def add_normed(x, added, rows, cols, mask, rstd, write):
    """s = x + rms_norm(h) * w at rows `rows` (broadcast to x's shape; row indices) and
    columns `cols` of x (fp32, masked to 0 where `mask` is False), rstd each row's
    (broadcast like rows): the norm rounded to x's dtype before the add, the sum after it,
    as tg.rms_norm(h, w, residual=x) rounds them. Where `write` (a program's flag), s is
    stored to sum's rows too. Returns s in fp32."""
    h, w = added_inputs(added, rows, cols, mask)
    return add_loaded(x, h, w, added, rows, cols, mask, rstd, write)
