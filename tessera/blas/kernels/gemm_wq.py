"""Weight-only quantized GEMM: Y = X · dequant(Q), 16-bit activations, 4- or 8-bit weights.

Q holds unsigned codes of a (K, N) weight, group-wise along K (``group`` rows share a scale and a
zero point per column): w[k, n] = (code[k, n] − zero[k // group, n]) · scale[k // group, n]. 8-bit
codes are one byte each, (K, N); 4-bit codes are two per byte, (K / 2, N): the low nibble holds row
2i, the high nibble row 2i + 1. A symmetric quantization has no zero tensor: its zero point is
2^(bits − 1). Every path rounds each dequantized weight to the activation dtype (as
``dequantize_weight`` does) and accumulates in fp32. Three families, chosen by M:

- ``gemv_wq`` (decode, M ≤ a few rows): CUDA cores, one program per activation row and (BLOCK_N,
  K slice). Each keeps a (code rows, BLOCK_N) register accumulator in the layout the codes are
  loaded in (no per-step reduction or layout change: FMAs only); 4-bit codes meet the even and
  odd activation columns, so nothing is interleaved.
- ``gemm_wq`` (small and medium M): tensor cores on transposed tiles, Yᵀ = dequant(Q)ᵀ · Xᵀ, so the
  dequantized weight is the MMA's first operand, which Hopper's wgmma takes from registers, and M
  is the MMA's N (down to 8).
- ``gemm_wq_dequant`` (prefill, large M): dequantize the whole weight once into a 16-bit scratch
  (K · N · 2 bytes) and run the float GEMM (selected by its own logic files); the dequantization
  costs a few percent of a large GEMM, while in-loop dequantization slows the tensor cores.

Codes become floats by the exponent trick (code | 0x4B000000 read as fp32 is 2^23 + code, exact),
cheaper than an integer-to-float conversion. With SPLIT_K > 1 the K range is cut into slices
written to an fp32 workspace and added in a fixed order by the split-K family's reduction
(deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.launch import Launcher, cdiv
from tessera.blas.kernels.gemm_splitk import reduce_partials
from tessera.blas.kernels.gemm_tile import grouped_tile


@dataclass(frozen=True)
class WqConfig:
    """Launch parameters of :func:`_gemm_wq_kernel` (the tuner forks over these)."""

    block_m: int
    block_n: int
    block_k: int
    split_k: int = 1
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    kernel = "gemm_wq"

    def short(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} k/{self.split_k} "
                f"g{self.group_m} w{self.num_warps} s{self.num_stages}")


@dataclass(frozen=True)
class WqGemvConfig:
    """Launch parameters of :func:`_gemv_wq_kernel` (decode: one program per activation row, so
    each row reads the weight again, from L2 when the rows are few)."""

    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4

    kernel = "gemv_wq"

    def short(self) -> str:
        return f"{self.kernel} {self.block_n}x{self.block_k} k/{self.split_k} w{self.num_warps}"


@dataclass(frozen=True)
class WqDequantConfig:
    """Launch parameters of :func:`_dequantize_kernel`; the GEMM after it selects its own."""

    block_rows: int = 32
    block_n: int = 128
    num_warps: int = 4

    kernel = "gemm_wq_dequant"

    def short(self) -> str:
        return f"{self.kernel} {self.block_rows}x{self.block_n} w{self.num_warps}"


WqAnyConfig = WqConfig | WqGemvConfig | WqDequantConfig


@triton.jit
def dequant(codes, zero, scale, dtype: tl.constexpr):
    """(code − zero) · scale rounded to ``dtype``, in fp32 as dequantize_weight computes it; codes
    are integers (any width), zero and scale fp32 tensors that broadcast against them."""
    # 0x4B000000 is 2^23 in fp32: OR-ing a code into its mantissa gives 2^23 + code, exactly
    biased = (codes.to(tl.int32) | 0x4B000000).to(tl.float32, bitcast=True)
    return ((biased - (8388608.0 + zero)) * scale).to(dtype)


@triton.jit
def _group_params(s_ptr, z_ptr, g, rn, mask_n, stride_sg, stride_sn, BITS: tl.constexpr,
                  HAS_ZERO: tl.constexpr):
    """The fp32 scale and zero point of group row ``g`` for columns ``rn``."""
    scale = tl.load(s_ptr + g * stride_sg + rn * stride_sn, mask=mask_n, other=0).to(tl.float32)
    if HAS_ZERO:
        zero = tl.load(z_ptr + g * stride_sg + rn * stride_sn, mask=mask_n, other=0).to(tl.float32)
    else:
        zero = tl.full(rn.shape, 2 ** (BITS - 1), tl.float32)
    return scale, zero


@triton.jit
def _gemm_wq_kernel(
    x_ptr, q_ptr, s_ptr, z_ptr, y_ptr,
    M, N, K, k_per_split,
    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, stride_ys, stride_ym, stride_yn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """Computes the transposed tile: Yᵀ = dequant(Q)ᵀ · Xᵀ, so the dequantized weight is the MMA's
    first operand, which tensor cores (Hopper's wgmma) take from registers; the activations are
    the second, staged through shared memory; and a decode-sized M is the MMA's N (down to 8)."""
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)

    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = rm < M
    mask_n = rn < N
    k_lo = split * k_per_split
    k_hi = tl.minimum(k_lo + k_per_split, K)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # K and every slice are multiples of BLOCK_K
        rk = k0 + tl.arange(0, BLOCK_K)
        xt = tl.load(x_ptr + rk[:, None] * stride_xk + rm[None, :] * stride_xm, mask=mask_m[None, :],
                     other=0.0)
        if BITS == 8:
            codes = tl.load(q_ptr + rn[:, None] * stride_qn + rk[None, :] * stride_qk, mask=mask_n[:, None],
                            other=0)
        else:  # two codes per byte along K: byte i of a column holds rows 2i (low) and 2i + 1 (high)
            rb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
            packed = tl.load(q_ptr + rn[:, None] * stride_qn + rb[None, :] * stride_qk, mask=mask_n[:, None],
                             other=0)
            codes = tl.reshape(tl.join(packed & 0xF, packed >> 4), (BLOCK_N, BLOCK_K))
        scale, zero = _group_params(s_ptr, z_ptr, k0 // GROUP, rn, mask_n, stride_sg, stride_sn, BITS,
                                    HAS_ZERO)
        wt = dequant(codes, zero[:, None], scale[:, None], xt.dtype)
        if UPCAST:  # the interpreter's 16-bit dot is wrong: fp32 there (exact for 16-bit products)
            acc = tl.dot(wt.to(tl.float32), xt.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(wt, xt, acc)
    y_ptrs = y_ptr + split.to(tl.int64) * stride_ys + rn[:, None] * stride_yn + rm[None, :] * stride_ym
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask_n[:, None] & mask_m[None, :])


@triton.jit
def _gemv_wq_kernel(
    x_ptr, q_ptr, s_ptr, z_ptr, y_ptr,
    M, N, K, k_per_split,
    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, stride_ys, stride_ym, stride_yn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Decode, one activation row per program (grid axis 2): FMAs into a (code rows, BLOCK_N)
    accumulator laid out as the code tile is loaded, summed over K once at the end."""
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    row = tl.program_id(2).to(tl.int64)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = rn < N
    rows: tl.constexpr = BLOCK_K // 2 if BITS == 4 else BLOCK_K  # code rows per step
    ri = tl.arange(0, rows)
    x_row = x_ptr + row * stride_xm
    k_lo = split * k_per_split
    k_hi = tl.minimum(k_lo + k_per_split, K)
    acc = tl.zeros((rows, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # K and every slice are multiples of BLOCK_K
        scale, zero = _group_params(s_ptr, z_ptr, k0 // GROUP, rn, mask_n, stride_sg, stride_sn, BITS,
                                    HAS_ZERO)
        r0 = k0 // 2 if BITS == 4 else k0
        codes = tl.load(q_ptr + (r0 + ri)[:, None] * stride_qk + rn[None, :] * stride_qn,
                        mask=mask_n[None, :], other=0)
        if BITS == 8:
            x = tl.load(x_row + (k0 + ri) * stride_xk).to(tl.float32)
            w = dequant(codes, zero[None, :], scale[None, :], x_ptr.dtype.element_ty)
            acc += x[:, None] * w.to(tl.float32)
        else:  # code row i holds K rows 2i (low nibble) and 2i + 1: they meet x's even and odd columns
            x_even = tl.load(x_row + (k0 + 2 * ri) * stride_xk).to(tl.float32)
            x_odd = tl.load(x_row + (k0 + 2 * ri + 1) * stride_xk).to(tl.float32)
            w_even = dequant(codes & 0xF, zero[None, :], scale[None, :], x_ptr.dtype.element_ty)
            w_odd = dequant(codes >> 4, zero[None, :], scale[None, :], x_ptr.dtype.element_ty)
            acc += x_even[:, None] * w_even.to(tl.float32) + x_odd[:, None] * w_odd.to(tl.float32)
    y = tl.sum(acc, axis=0)
    tl.store(y_ptr + split.to(tl.int64) * stride_ys + row * stride_ym + rn * stride_yn,
             y.to(y_ptr.dtype.element_ty), mask=mask_n)


@triton.jit
def _dequantize_kernel(
    q_ptr, s_ptr, z_ptr, w_ptr,
    N, ROWS,
    stride_qk, stride_qn, stride_sg, stride_sn, stride_wk, stride_wn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """w (K, N) ← dequant(Q) for a (BLOCK_R code rows, BLOCK_N) tile."""
    rr = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rr < ROWS)[:, None] & (rn < N)[None, :]
    codes = tl.load(q_ptr + rr[:, None] * stride_qk + rn[None, :] * stride_qn, mask=mask, other=0)
    k = 2 * rr if BITS == 4 else rr  # the first K row each code row holds
    scale, zero = _group_params(s_ptr, z_ptr, (k // GROUP)[:, None], rn[None, :], mask, stride_sg, stride_sn,
                                BITS, HAS_ZERO)
    w_ptrs = w_ptr + k[:, None] * stride_wk + rn[None, :] * stride_wn
    if BITS == 8:
        tl.store(w_ptrs, dequant(codes, zero, scale, w_ptr.dtype.element_ty), mask=mask)
    else:  # a group holds an even number of rows: 2i and 2i + 1 share one
        tl.store(w_ptrs, dequant(codes & 0xF, zero, scale, w_ptr.dtype.element_ty), mask=mask)
        tl.store(w_ptrs + stride_wk, dequant(codes >> 4, zero, scale, w_ptr.dtype.element_ty), mask=mask)


_launch = Launcher(_gemm_wq_kernel)
_launch_gemv = Launcher(_gemv_wq_kernel)
_launch_dequantize = Launcher(_dequantize_kernel)


def launch_gemm_wq(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor,
                   zeros: torch.Tensor | None, y: torch.Tensor, k: int, bits: int, group: int, *,
                   upcast: bool, config: WqConfig | WqGemvConfig) -> None:
    """y (M, N) ← x (M, K) · dequant(qweight) with a fused family (``gemm_wq`` or ``gemv_wq``;
    ``config.block_k`` is capped at ``group``)."""
    m, n = y.shape
    block_k = min(config.block_k, group)
    k_per_split = cdiv(cdiv(k, config.split_k), block_k) * block_k
    split = cdiv(k, k_per_split)
    target = y if split == 1 else torch.empty((split, m, n), dtype=torch.float32, device=y.device)
    ys = (0, *y.stride()) if split == 1 else target.stride()
    args = (x, qweight, scales, scales if zeros is None else zeros, target, m, n, k, k_per_split,
            *x.stride(), *qweight.stride(), *scales.stride(), *ys)
    quantization = dict(BITS=bits, GROUP=group, HAS_ZERO=zeros is not None)
    if isinstance(config, WqGemvConfig):
        _launch_gemv((cdiv(n, config.block_n), split, m), args,
                     quantization | dict(BLOCK_N=config.block_n, BLOCK_K=block_k), config.num_warps, 1)
    else:
        _launch((cdiv(m, config.block_m) * cdiv(n, config.block_n), split), args,
                quantization | dict(UPCAST=upcast, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                                    BLOCK_K=block_k, GROUP_M=config.group_m), config.num_warps,
                config.num_stages)
    if split > 1:
        reduce_partials(target.unsqueeze(0), y)


def launch_dequantize(qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                      w: torch.Tensor, bits: int, group: int, config: WqDequantConfig) -> None:
    """w (K, N) ← dequant(qweight), each weight rounded to w's dtype."""
    rows, n = qweight.shape
    _launch_dequantize((cdiv(rows, config.block_rows), cdiv(n, config.block_n)),
                       (qweight, scales, scales if zeros is None else zeros, w, n, rows, *qweight.stride(),
                        *scales.stride(), *w.stride()),
                       dict(BITS=bits, GROUP=group, HAS_ZERO=zeros is not None, BLOCK_R=config.block_rows,
                            BLOCK_N=config.block_n),
                       config.num_warps, 1)


REPRESENTATIVE = (256, 1024, 1024)  # (M, N, K): aligned, every tile size divides it


def representative_launch(op: str, config: WqAnyConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm_wq`` makes with ``config`` for an aligned problem of ``dtype``
    (``int4_bf16`` …) with symmetric group-128 weights (run under ``tessera._core.launch.capture()``);
    for ``gemm_wq_dequant`` the dequantization only (the float GEMM after it has its own jobs)."""
    code, activation = dtype.split("_")
    bits, act = int(code[3:]), {"bf16": torch.bfloat16, "fp16": torch.float16}[activation]
    m, n, k = REPRESENTATIVE
    m = 1 if isinstance(config, WqGemvConfig) else m
    q = torch.empty(k * bits // 8, n, dtype=torch.uint8)
    s = torch.empty(k // 128, n, dtype=act)
    if isinstance(config, WqDequantConfig):
        launch_dequantize(q, s, None, torch.empty(k, n, dtype=act), bits, 128, config)
        return
    x = torch.empty(m, k, dtype=act)
    launch_gemm_wq(x, q, s, None, torch.empty(m, n, dtype=act), k, bits, 128, upcast=False, config=config)
