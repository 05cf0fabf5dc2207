"""Tiled matrix product with grouped tile order, autotuned, and optional fused prologue
(RMSNorm of A's rows) and epilogue (bias, activation, residual).

tg.matmul uses the plain product; tg.linear's many-row path uses the fused one. Several ways
compete in the tuner: tiles loaded through pointers (any strides, every prologue and
epilogue fused), a persistent kernel fed by TMA (Hopper's tensor-memory copy engine; 16-bit,
row-major A and C, B row-major or a row-major weight's transpose; every epilogue but the
gated ones), which one program an SM keeps busy across tiles, cuBLAS followed by one
element-wise pass,
and for exact fp32 three tf32 products over operands split first (_gemm_tf32x3.py). The last
three run the norm first as a row pass of its own, and so does every fp16 product: fused,
the pointer kernel multiplies A * norm_w unnormalised in A's dtype, past fp16's 65504
where A / rms(A) * norm_w is not.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .._runtime import INTERPRET
from ._activation import GLU_ACTIVATIONS, activation_code, activation_ref, apply_activation
from ._checks import (
    check_like,
    check_no_out_for_grad,
    check_no_overlap,
    check_tensor,
    prepare_out,
    wants_grad,
)
from ._cublas_epilogue import cublas_fused
from ._gemm_tf32x3 import launch_gemm_tf32x3
from ._gemm_tiles import store_tile, tile_position
from ._launch import is_hopper_or_newer, sm_count
from ._ops import custom_op
from .autotune import RotatedCopies, Tuner
from .rms_norm import rms_norm_rows


@triton.jit
def _gemm_kernel(c_ptr, stride_cm, stride_cn,
                 a_ptr, stride_am, stride_ak,
                 b_ptr, stride_bk, stride_bn,
                 norm_w_ptr, bias_ptr, res_ptr, stride_rm, stride_rn,
                 preact_ptr, stride_pm, stride_pn,
                 M, N, K, eps,
                 HAS_NORM: tl.constexpr, HAS_BIAS: tl.constexpr, HAS_RESIDUAL: tl.constexpr,
                 STORE_PREACT: tl.constexpr, ACTIVATION: tl.constexpr,
                 DOT_PRECISION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 GROUP_M: tl.constexpr):
    """C = act(rms_norm(A) * norm_w @ B + bias) + residual, fp32 accumulation.

    rms_norm(A)_mk = A_mk / sqrt(mean_k A_mk^2 + eps); the per-row scale is applied to the
    accumulator after the K loop, since it factors out of the sum over k. A GLU pairs
    columns (2j, 2j + 1) of the product: C has N // 2 columns. STORE_PREACT also writes the
    (M, N) value before the activation to preact, for the backward pass.
    """
    pid_m, pid_n = tile_position(tl.program_id(0), tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N),
                                 GROUP_M)

    row0 = pid_m * BLOCK_M
    col0 = pid_n * BLOCK_N
    # 64-bit base offsets (big matrices overflow int32); small int32 offsets inside the tile.
    a_ptr += row0.to(tl.int64) * stride_am
    b_ptr += col0.to(tl.int64) * stride_bn
    # Rows/cols past the edge wrap onto valid ones: loads need no mask, the store drops them.
    offs_am = tl.arange(0, BLOCK_M) % (M - row0)
    offs_bn = tl.arange(0, BLOCK_N) % (N - col0)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn

    if HAS_NORM:
        sum_sq = tl.zeros([BLOCK_M], tl.float32)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptrs + k0 * stride_ak, mask=offs_k[None, :] < K - k0, other=0.0)
            a = a.to(tl.float32)
            sum_sq += tl.sum(a * a, axis=1)
        rstd = tl.rsqrt(sum_sq / K + eps)

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k_mask = offs_k < K - k0
        a = tl.load(a_ptrs, mask=k_mask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_mask[:, None], other=0.0)
        if HAS_NORM:
            norm_w = tl.load(norm_w_ptr + k0 + offs_k, mask=k_mask, other=0.0).to(tl.float32)
            a = (a.to(tl.float32) * norm_w[None, :]).to(a_ptr.dtype.element_ty)
        if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=DOT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    if HAS_NORM:
        acc = acc * rstd[:, None]
    store_tile(acc, row0, col0, M, N, c_ptr, stride_cm, stride_cn, bias_ptr, res_ptr,
               stride_rm, stride_rn, preact_ptr, stride_pm, stride_pn, HAS_BIAS,
               HAS_RESIDUAL, STORE_PREACT, ACTIVATION, BLOCK_M, BLOCK_N)


@triton.jit
def _gemm_tma_kernel(c_desc, a_desc, b_desc, bias_ptr, res_ptr, stride_rm, stride_rn,
                     preact_ptr, stride_pm, stride_pn, M, N, K, num_programs,
                     B_TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr,
                     HAS_RESIDUAL: tl.constexpr, STORE_PREACT: tl.constexpr,
                     ACTIVATION: tl.constexpr, UPCAST_DOT: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     GROUP_M: tl.constexpr):
    """C = act(A @ B + bias) + residual, fp32 accumulation; persistent: program p computes
    output tiles p, p + num_programs, ... in grouped order (num_programs a runtime value:
    problems with fewer tiles than SMs do not each compile their own kernel).

    B_TRANSPOSED: b_desc describes B.T (N, K) row-major, a linear layer's weight as stored;
    its tiles feed the tensor cores as a transposed view, no copy. STORE_PREACT also writes
    A @ B + bias to preact. Bias, residual and preact go through pointers (any strides).

    One program an SM for the whole product removes the partial last wave of a one-tile-a-
    program grid (4096^2 in 128 x 256 tiles is 512 tiles, 3.9 waves on 132 SMs), and the
    flattened loop lets the compiler issue the next tile's first loads under this tile's
    epilogue. TMA reads past the matrix edge as zeros and clips stores to it: no masks.
    """
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, num_programs, flatten=True):
        pid_m, pid_n = tile_position(tile, num_pid_m, num_pid_n, GROUP_M)
        row0 = pid_m * BLOCK_M
        col0 = pid_n * BLOCK_N
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for kk in range(k_tiles):
            a = a_desc.load([row0, kk * BLOCK_K])
            if B_TRANSPOSED:
                b = b_desc.load([col0, kk * BLOCK_K]).T
            else:
                b = b_desc.load([kk * BLOCK_K, col0])
            if UPCAST_DOT:  # the interpreter mis-multiplies bf16 dots; fp32 is exact for them
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc)
        offs_m = row0 + tl.arange(0, BLOCK_M)
        offs_n = col0 + tl.arange(0, BLOCK_N)
        mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
        if HAS_BIAS:
            acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
        if STORE_PREACT:
            preact_ptrs = (preact_ptr + offs_m.to(tl.int64)[:, None] * stride_pm
                           + offs_n[None, :] * stride_pn)
            tl.store(preact_ptrs, acc.to(preact_ptr.dtype.element_ty), mask=mask)
        acc = apply_activation(acc, ACTIVATION)
        if HAS_RESIDUAL:
            res_ptrs = (res_ptr + offs_m.to(tl.int64)[:, None] * stride_rm
                        + offs_n[None, :] * stride_rn)
            acc += tl.load(res_ptrs, mask=mask, other=0.0).to(tl.float32)
        c_desc.store([row0, col0], acc.to(c_desc.dtype))


def _config(bm, bn, bk, warps, stages, group=8, tma=False):
    config = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group,
              "num_warps": warps, "num_stages": stages}
    return {**config, "TMA": True} if tma else config


# Candidates that do well on Hopper and Ampere for 16-bit inputs, from large tiles (fill the
# tensor cores at big sizes) to small ones (enough tiles for all SMs at small M or N).
_CONFIGS_16BIT = [
    _config(128, 256, 64, 8, 3), _config(256, 128, 64, 8, 3), _config(128, 256, 64, 8, 4),
    _config(256, 128, 64, 8, 4), _config(128, 128, 64, 8, 4),
    _config(128, 128, 64, 4, 4), _config(128, 128, 128, 8, 3), _config(64, 256, 64, 4, 4),
    _config(128, 64, 64, 4, 4), _config(64, 128, 64, 4, 4), _config(64, 64, 64, 4, 4),
    _config(32, 64, 64, 4, 4), _config(16, 64, 128, 4, 4), _config(16, 128, 64, 4, 4),
]
_CONFIGS_FP32 = [
    _config(128, 128, 32, 8, 3), _config(128, 64, 32, 4, 4), _config(64, 128, 32, 4, 4),
    _config(64, 64, 32, 4, 4), _config(32, 64, 32, 4, 4), _config(16, 64, 32, 4, 4),
]
# Exact fp32 on the tensor cores: each operand split into a tf32 value and its remainder,
# three tf32 products (CUTLASS's 3xTF32), inside the loop (Triton's tf32x3: about SGEMM's
# speed) or split first by a pass of their own (SPLIT_TF32: up to 1.7x SGEMM at the training
# step's products), or one operand each way (IN_LOOP). Against float64 all erred less than
# cuBLAS's SGEMM on an H100 (notes/training.md, session 25), where Triton's exact dot has no
# tensor cores. Offered only where torch's own switch asks for exact fp32 (with TF32 allowed,
# one tf32 product).
_CONFIGS_FP32_TF32X3 = [{**c, "DOT_PRECISION": "tf32x3"} for c in (
    _config(128, 128, 32, 8, 3), _config(128, 256, 32, 8, 3), _config(128, 64, 32, 4, 4),
    _config(64, 128, 32, 4, 4), _config(64, 64, 32, 4, 4), _config(16, 64, 32, 4, 4),
)] + [{**c, "SPLIT_TF32": True} for c in (  # the same, operands split first (_gemm_tf32x3.py)
    _config(128, 128, 32, 8, 3), _config(128, 64, 32, 4, 4), _config(64, 128, 32, 4, 4),
    _config(64, 64, 32, 4, 4), _config(128, 128, 32, 8, 2),
    # split over K: where the output has fewer tiles than the GPU has SMs (few tokens times
    # a narrow layer: 512 x 1024 is 32 tiles of 128 x 128), more programs, each a shorter sum
    *({**_config(128, 128, 32, 8, 3), "SPLIT_K": s} for s in (2, 3, 4)),
    *({**_config(128, 64, 32, 4, 4), "SPLIT_K": s} for s in (2, 4)),
)] + [{**c, "SPLIT_TF32": True, "IN_LOOP": side} for side in ("a", "b") for c in (
    # One operand split tile by tile in the loop, which saves its split pass (_gemm_tf32x3.py:
    # a weight's products at 256-512 tokens 20-33% faster, research/probe_inloop_split.py).
    _config(128, 128, 32, 8, 3), _config(128, 128, 32, 8, 4), _config(128, 64, 32, 4, 4),
    _config(64, 128, 32, 4, 4), _config(64, 64, 32, 4, 4),
    *({**_config(128, 128, 32, 8, 3), "SPLIT_K": s} for s in (2, 3, 4)),
    *({**_config(128, 64, 32, 4, 4), "SPLIT_K": s} for s in (2, 4)),
)]
# Persistent TMA candidates; their epilogue also stages the output tile in shared memory.
# Each takes more than half an SM's shared memory, so no SM ever runs two of the one-an-SM
# programs (two on one SM would double that SM's share of the tiles).
_CONFIGS_TMA = [
    _config(128, 256, 64, 8, 3, tma=True), _config(128, 128, 64, 8, 4, tma=True),
    # Wide tiles with a lighter pipeline: room left for a fused epilogue's layout changes
    # (128 x 256 x 64 in 3 stages needs 245 KB with bias, GELU and the pre-activation).
    _config(128, 256, 32, 8, 4, tma=True), _config(128, 256, 64, 8, 2, tma=True),
    _config(128, 128, 64, 4, 4, tma=True), _config(128, 128, 64, 8, 5, tma=True),
    _config(128, 64, 64, 4, 6, tma=True), _config(64, 128, 64, 4, 6, tma=True),
]
# cuBLAS for the product, then one element-wise pass for whatever it cannot fuse
# (_cublas_epilogue.py): wins where its main loop outruns the tiles (fp32, transposed operands).
_CUBLAS = {"CUBLAS": True}
# The same with the bias added by the pass rather than by cuBLAS's epilogue, which moves
# cuBLAS's own kernel choice (where the bias-added product need not be kept).
_CUBLAS_BIAS_IN_PASS = {"CUBLAS": True, "BIAS_IN_PASS": True}
# "-cold": timed over operands rotated past L2 (caches of the warm timing before it are
# left aside, not reused).
_tuner = Tuner("gemm-cold", _CONFIGS_16BIT + _CONFIGS_FP32 + _CONFIGS_FP32_TF32X3
               + _CONFIGS_TMA + [_CUBLAS, _CUBLAS_BIAS_IN_PASS])
_SMEM_BUDGET = 200 * 1024  # bytes; Hopper allows 227 KB per block, Ampere 163 KB
_SMEM_BUDGET_TMA = 220 * 1024  # TMA kernels run on Hopper on only


def _tma_ready(*tensors: torch.Tensor) -> bool:
    """TMA needs 16-bit row-major matrices with 16-byte aligned rows and base addresses, and
    a GPU with the copy engine (Hopper on); the interpreter emulates it on CPU tensors."""
    if tensors[0].dtype not in (torch.float16, torch.bfloat16):
        return False
    if not (INTERPRET or is_hopper_or_newer(tensors[0].device)):
        return False
    return all(t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0
               and t.data_ptr() % 16 == 0 for t in tensors)


def m_bucket(M: int) -> int:
    """The row count a product is tuned for: the next power of two or, past 16 rows, 1.5x
    one. Powers alone put 384 and 512 rows together, whose tile counts, and so whose best
    split over K, differ (notes/training.md, session 26)."""
    power = triton.next_power_of_2(M)
    return power * 3 // 4 if power > 16 and M <= power * 3 // 4 else power


def _candidates(M: int, N: int, K: int, dtype: torch.dtype, tma: bool = False,
                sms: int | None = None) -> list[dict]:
    # A fresh list each call (the launcher appends to it) over a cached filter: the launcher
    # asks on every product, tuned or not.
    return list(_fitting_configs(m_bucket(M), N, K, dtype, tma, _dot_precision(dtype), sms))


@functools.cache
def _fitting_configs(m_rows: int, N: int, K: int, dtype: torch.dtype, tma: bool,
                     precision: str, sms: int | None = None) -> tuple[dict, ...]:
    """The pool's configs whose tiles fit the shape and shared memory; split-K ones only
    where the output's tiles leave SMs idle (sms: the GPU's; None, as interpreted: always)
    and every split gets a BLOCK_K step."""
    pool = _CONFIGS_FP32 if dtype == torch.float32 else _CONFIGS_16BIT
    if dtype == torch.float32 and precision == "ieee":
        pool = pool + _CONFIGS_FP32_TF32X3
    if tma:
        pool = pool + _CONFIGS_TMA
    size = dtype.itemsize

    def fits(c):
        # hi and lo tiles of split operands; one tile of an operand split in the loop
        a_tiles = 2 if c.get("SPLIT_TF32") and c.get("IN_LOOP") != "a" else 1
        b_tiles = 2 if c.get("SPLIT_TF32") and c.get("IN_LOOP") != "b" else 1
        smem = (c["num_stages"] * (c["BLOCK_M"] * a_tiles + c["BLOCK_N"] * b_tiles)
                * c["BLOCK_K"] * size)
        if c.get("TMA"):
            smem += c["BLOCK_M"] * c["BLOCK_N"] * size
        split = c.get("SPLIT_K", 1)
        if split > 1 and (triton.cdiv(K, c["BLOCK_K"]) < split or sms is not None and (
                triton.cdiv(m_rows, c["BLOCK_M"]) * triton.cdiv(N, c["BLOCK_N"]) >= sms)):
            return False
        return (smem <= (_SMEM_BUDGET_TMA if c.get("TMA") else _SMEM_BUDGET)
                and c["BLOCK_M"] <= max(16, triton.next_power_of_2(m_rows))
                and c["BLOCK_N"] <= max(16, triton.next_power_of_2(N))
                and c["BLOCK_K"] <= max(16, triton.next_power_of_2(K)))

    kept = [c for c in pool if fits(c)]
    return tuple(kept or [min(pool, key=lambda c: c["BLOCK_M"] * c["BLOCK_N"])])


def _dot_precision(dtype: torch.dtype) -> str:
    # fp32 follows torch's own switch, so tg.matmul is as exact as torch.matmul by default.
    if dtype == torch.float32 and not torch.backends.cuda.matmul.allow_tf32:
        return "ieee"
    return "tf32"


def _fused_parts(norm_weight, bias, activation: str, residual, preact) -> str:
    """What the product fuses, e.g. "norm+bias+gelu+preact+residual" ("" for a plain one):
    part of the tuning key, since each part moves the best config (and cuBLAS alone can
    only serve a plain product)."""
    parts = [name for name, on in (("norm", norm_weight is not None), ("bias", bias is not None),
                                   (activation, activation != "none"),
                                   ("preact", preact is not None),
                                   ("residual", residual is not None)) if on]
    return "+".join(parts)


def _b_for_tma(b: torch.Tensor) -> tuple[torch.Tensor, bool] | None:
    """(the row-major matrix TMA reads for b, whether that is b.T), or None: b (K, N) is
    row-major itself, or the transposed view of a row-major (N, K) weight."""
    for operand, transposed in ((b, False), (b.t(), True)):
        if _tma_ready(operand):
            return operand, transposed
    return None


def launch_gemm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, norm_weight=None,
                eps: float = 0.0, bias=None, activation: str = "none", residual=None,
                preact=None) -> None:
    """out (M, N) = epilogue(prologue(a) (M, K) @ b (K, N)); any strides for a, b, residual;
    preact (M, N), where given, receives the value before the activation.

    Kinds of candidate compete, timed per shape, layout and fused parts: the pointer kernel
    (every part fused, the norm included), the persistent TMA kernel (16-bit, Hopper; the
    norm, where there is one, runs first as its own row pass), cuBLAS with an element-wise
    epilogue pass (_cublas_epilogue.py; the norm likewise first) and, for exact fp32,
    three tf32 products over operands split first (_gemm_tf32x3.py; the norm likewise).
    Untimed on a GPU (TILEGRAPH_AUTOTUNE=0), the product is cuBLAS with its pass.
    """
    if norm_weight is not None and a.dtype == torch.float16:  # x * g may pass 65504: see above
        a, norm_weight = rms_norm_rows(a, norm_weight, eps), None
    M, K = a.shape
    N = b.shape[1]
    dtype = a.dtype
    kernel_args = dict(
        HAS_NORM=norm_weight is not None, HAS_BIAS=bias is not None,
        HAS_RESIDUAL=residual is not None, STORE_PREACT=preact is not None,
        ACTIVATION=activation,
        DOT_PRECISION=_dot_precision(dtype), UPCAST_DOT=INTERPRET and dtype == torch.bfloat16)
    preact_strides = preact.stride() if preact is not None else (0, 0)
    # The norm pass writes a fresh row-major copy of a, which TMA can always read.
    tma = (activation not in GLU_ACTIVATIONS and _b_for_tma(b) is not None
           and _tma_ready(out, *(() if norm_weight is not None else (a,))))

    def run(config, operands, c, c_preact, warmup=False):
        """Launch `config` (warmup: compile its Triton kernel only, where it has one)."""
        a, b, norm_weight, bias, residual = operands
        if config.get("CUBLAS") or config.get("TMA") or config.get("SPLIT_TF32"):
            if warmup and not config.get("TMA"):
                return  # cuBLAS compiles nothing; the split product compiles as it runs
            if norm_weight is None:
                a_in = a
            else:  # the norm pass writes a fresh row-major copy, what TMA then reads
                a_in = torch.empty(a.shape, dtype=a.dtype, device=a.device) if warmup else \
                    rms_norm_rows(a, norm_weight, eps)
            if config.get("SPLIT_TF32"):
                launch_gemm_tf32x3(a_in, b, c, config, bias=bias, activation=activation,
                                   residual=residual, preact=c_preact)
            elif config.get("CUBLAS"):
                cublas_fused(a_in, b, c, bias=bias, activation=activation, residual=residual,
                             preact=c_preact, bias_in_pass=bool(config.get("BIAS_IN_PASS")))
            else:
                _launch_gemm_tma(a_in, _b_for_tma(b), c, config, bias=bias,
                                 activation=activation, residual=residual, preact=c_preact,
                                 warmup=warmup)
            return
        res_strides = residual.stride() if residual is not None else (0, 0)
        grid = (triton.cdiv(M, config["BLOCK_M"]) * triton.cdiv(N, config["BLOCK_N"]),)
        launcher = (functools.partial(_gemm_kernel.warmup, grid=grid) if warmup
                    else _gemm_kernel[grid])
        launcher(c, c.stride(0), c.stride(1), a, a.stride(0), a.stride(1),
                 b, b.stride(0), b.stride(1), norm_weight, bias, residual,
                 *res_strides, c_preact, *preact_strides, M, N, K, eps,
                 **{**kernel_args, **config})  # a config may set DOT_PRECISION

    operands = (a, b, norm_weight, bias, residual)
    # Operand layouts enter the key: a transposed operand changes which candidate wins.
    layout = "".join("t" if t.stride(1) != 1 else "n" for t in (a, b))
    key = (("gemm", m_bucket(M), N, K, str(dtype), layout,
            kernel_args["DOT_PRECISION"],
            _fused_parts(norm_weight, bias, activation, residual, preact))
           + (("tma",) if tma else ()))
    # Candidates write scratch outputs (out and preact stay untouched) and read copies of
    # the operands in turn, from memory as in a model's step (autotune.L2_SPAN_BYTES).
    candidates = _candidates(M, N, K, dtype, tma, sm_count(a.device))
    if not INTERPRET:  # timing the interpreter says nothing; tests force it where they want
        # cuBLAS first: the first candidate is what an untimed product takes
        # (TILEGRAPH_AUTOTUNE=0). Timed, it won 14 of 16 prefill products at 128-384 rows
        # (1.24-1.25x behind at the others); the largest tile that fits, the default before,
        # made TinyLlama's prefill graph 2.6x slower and a bf16 training step 1.7x (H200,
        # notes/models.md, session 80).
        candidates.insert(0, _CUBLAS)
        if bias is not None and preact is None:
            candidates.append(_CUBLAS_BIAS_IN_PASS)
    next_operands = RotatedCopies(operands)
    try:
        config = _tuner.pick(
            key, lambda cfg: run(cfg, next_operands(), torch.empty_like(out),
                                 None if preact is None else torch.empty_like(preact)),
            candidates,
            compile_only=lambda cfg: run(cfg, operands, out, preact, warmup=True))
    finally:
        next_operands.release()
    run(config, operands, out, preact)


def _launch_gemm_tma(a: torch.Tensor, b_tma: tuple[torch.Tensor, bool], out: torch.Tensor,
                     config: dict, *, bias=None, activation: str = "none", residual=None,
                     preact=None, warmup: bool = False) -> None:
    """Launch the persistent kernel over a (M, K) and b_tma from _b_for_tma (warmup: compile
    it only)."""
    b_matrix, transposed = b_tma
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    M, K = a.shape
    N = out.shape[1]
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    programs = min(tiles, sm_count(a.device) or 4)  # the interpreter: a few, to walk tiles
    meta = {name: value for name, value in config.items() if name != "TMA"}
    b_block = [bn, bk] if transposed else [bk, bn]
    res_strides = residual.stride() if residual is not None else (0, 0)
    preact_strides = preact.stride() if preact is not None else (0, 0)
    launcher = (functools.partial(_gemm_tma_kernel.warmup, grid=(programs,)) if warmup
                else _gemm_tma_kernel[(programs,)])
    launcher(
        TensorDescriptor.from_tensor(out, [bm, bn]), TensorDescriptor.from_tensor(a, [bm, bk]),
        TensorDescriptor.from_tensor(b_matrix, b_block), bias, residual, *res_strides,
        preact, *preact_strides, M, N, K, programs, B_TRANSPOSED=transposed,
        HAS_BIAS=bias is not None, HAS_RESIDUAL=residual is not None,
        STORE_PREACT=preact is not None, ACTIVATION=activation,
        UPCAST_DOT=INTERPRET and a.dtype == torch.bfloat16, **meta)


def _launch_matmul(a: torch.Tensor, b: torch.Tensor, activation: str, out: torch.Tensor) -> None:
    launch_gemm(a.reshape(-1, a.shape[-1]), b, out.view(-1, b.shape[1]), activation=activation)


_run_matmul = custom_op("matmul", _launch_matmul)


def matmul(a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None,
           out: torch.Tensor | None = None) -> torch.Tensor:
    """act(a @ b) for a (..., K) and b (K, N); activation None, "relu", "gelu", "gelu_tanh",
    "relu2"."""
    check_tensor("a", a, min_ndim=1, differentiable=True)
    check_tensor("b", b, differentiable=True)
    check_like("b", b, "a", a)
    if b.ndim != 2:
        raise ValueError(f"b must be 2-D (K, N), got shape {tuple(b.shape)}")
    if a.shape[-1] != b.shape[0]:
        raise ValueError(f"a has {a.shape[-1]} columns but b has {b.shape[0]} rows "
                         f"(shapes {tuple(a.shape)} and {tuple(b.shape)})")
    code = activation_code(activation)
    if wants_grad(a, b):
        check_no_out_for_grad(out)
        # Imported here: the differentiable path is built on this module's launch_gemm.
        from ._linear_autograd import linear_autograd
        return linear_autograd(a, b.t(), None, None, 0.0, code, None)[0]
    out = prepare_out(out, (*a.shape[:-1], b.shape[1]), a.dtype, a.device)
    check_no_overlap(out, "a", a)
    check_no_overlap(out, "b", b)
    if out.numel() == 0:
        return out
    if a.shape[-1] == 0:  # an empty sum, and every activation maps 0 to 0
        return out.zero_()
    _run_matmul(a, b, code, out)
    return out


def matmul_ref(a: torch.Tensor, b: torch.Tensor, *, activation: str | None = None):
    """Reference in float64 for float64 input, else fp32 (no TF32) cast back."""
    compute = torch.float64 if a.dtype == torch.float64 else torch.float32
    y = a.to(compute) @ b.to(compute)
    return activation_ref(y, activation).to(a.dtype)

