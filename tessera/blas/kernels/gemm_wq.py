"""Weight-only quantized GEMM: Y = X · dequant(Q), 16-bit activations, 4- or 8-bit weights.

Q holds unsigned codes of a (K, N) weight, group-wise along K (``group`` rows share a scale and a
zero point per column): w[k, n] = (code[k, n] − zero[k // group, n]) · scale[k // group, n]. 8-bit
codes are one byte each, (K, N); 4-bit codes are two per byte, (K / 2, N), interleaved in runs of
32 rows (``quantized.pack_nibbles``): byte 4q + 2h + t of a run holds rows 16t + 2q + h (low
nibble) and 16t + 2q + h + 8 (high), the order Hopper's warpgroup MMA wants from one 32-bit word
(``gemm_wq_ws``); these kernels split the activations to match (:func:`_nibble_partners`). A
symmetric quantization has no zero tensor: its zero point is 2^(bits − 1). Codes become floats
by exponent tricks (code | 0x4B000000 read as fp32 is 2^23 + code; 0x4300 | nibble read as bf16
is 128 + nibble; 0x6400 | code read as fp16 is 1024 + code — all exact), cheaper than an
integer-to-float conversion; all paths accumulate in fp32. The kernels take codes in either
storage order (strides); ``quantize_weight`` stores 8-bit codes row-major (``gemv_wq`` needs that)
and 4-bit codes column-major (``gemm_wq`` loads its operand 16 bytes at a time then). Three
families, chosen by M:

- ``gemv_wq`` (8-bit decode, one row): CUDA cores, memory-bound. Codes are read as int32 words
  of four columns, one code row per load; within a group each column sums x·(code − zero) exactly
  and the group's scale multiplies the sum once, so a weight costs about three instructions (a
  byte permute, a subtraction, an FMA) and is never rounded to 16 bits. A step's codes are one
  (rows, words) tile, the next steps' tiles in flight through shared memory (Triton's software
  pipelining). K is split across programs; ``sum_slices`` adds the slices in a fixed order
  (deterministic).
- ``gemm_wq`` (small and medium M, and 4-bit decode): tensor cores on transposed tiles,
  Yᵀ = Qᵀ · Xᵀ, so the weight is the MMA's first operand, taken from registers, and M is the MMA's
  N (down to 8). 4-bit codes (and 8-bit ones with fp16 activations) enter as exact integers
  code − z0 and each group's fp32 sum is scaled once; 8-bit codes with bf16 activations are
  dequantized in fp32 and rounded to bf16, as ``dequantize_weight`` rounds them.
- ``gemm_wq_dequant`` (prefill, large M): dequantize the whole weight once into a 16-bit scratch
  (K · N · 2 bytes) and run the float GEMM (selected by its own logic files); the dequantization
  costs a few percent of a large GEMM, while in-loop dequantization slows the tensor cores.

With SPLIT_K > 1 the K range is cut into slices written to an fp32 workspace and added in a
fixed order (deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.device import torch_dtype
from tessera._core.launch import (
    PDL_AT_EXIT,
    PDL_EARLY,
    PDL_OFF,
    Launcher,
    cdiv,
    next_power_of_2,
    nvidia_target,
    pdl_mode,
    scratch,
)
from tessera._core.pdl import dependent_launch, dependents_may_launch
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
    # 8-bit codes with bf16 activations: enter the MMA as exact integers code − 128 (made in fp32)
    # instead of fp32-dequantized weights rounded to bf16 (offline sm_90: 15 % fewer instructions
    # at 16×128×128, no bf16 tile through shared memory); other codes and activations always exact
    exact_bytes: bool = False
    # the exact path's MMAs on two 8-row halves of BLOCK_M = 16: Triton then takes the per-warp
    # mma.sync, not Hopper's warpgroup MMA (W4A16 M = 16 at 16×128×128, K split 4: 23.8 → 20.1 µs,
    # wq-tc-w4-h200-46ae292.json); the rounded path (8-bit codes, bf16, not exact_bytes) ignores it
    warp_mma: bool = False
    # 8-bit codes read as int32 words of four columns (row-major codes, N a multiple of 4), each
    # byte plane (the columns 4w + j) its own MMA on exact integers code − 128 (see _plane_tile);
    # other codes ignore it. W8A16 M = 16: 16×128×128 K/4 on 4 warps 26.3 µs against 27.4 for the
    # rounded tile (1.24–1.26× torch; tune-planes-h200-0749f3e); the tuner adds it for 8-bit codes
    byte_planes: bool = False
    # with byte_planes: each step's scales and zero points loaded a step ahead, off the step's
    # critical path (W8A16 M = 16: 24.7 against 26.2 µs, wq-early-h200-ceac80c.json)
    early_scales: bool = False

    kernel = "gemm_wq"

    def short(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} k/{self.split_k} "
                f"g{self.group_m} w{self.num_warps} s{self.num_stages}{' exact' if self.exact_bytes else ''}"
                f"{' warp-mma' if self.warp_mma else ''}{' planes' if self.byte_planes else ''}"
                f"{' early-scales' if self.byte_planes and self.early_scales else ''}")


@dataclass(frozen=True)
class WqGemvConfig:
    """Launch parameters of :func:`_gemv_wq_kernel` (decode: one program per activation row, so
    each row reads the weight again, from L2 when the rows are few). BLOCK_N = 512 · num_warps
    gives each thread 16 bytes of each code row, whole columns of the step's tile, so its sums
    stay in registers; 256 columns on one warp split a row over two lanes (one shuffle a sum);
    tiles whose rows fall to different warps add through shared memory (2.7× slower measured).
    ``unit_codes``: each code is taken as 1 + code·2^-15 (one byte permute) and multiplied as it
    is, the group's Σx and zero point subtracted once per group and column, two instructions a
    weight instead of three (see :func:`_gemv_wq_kernel`); for 8-bit codes and bf16 activations
    only, whose products it keeps exact (others launch without it)."""

    block_n: int
    block_k: int
    split_k: int = 1
    num_warps: int = 4
    num_stages: int = 3  # steps of codes in flight through shared memory (software pipelining)
    unit_codes: bool = False

    kernel = "gemv_wq"

    def short(self) -> str:
        return (f"{self.kernel} {self.block_n}x{self.block_k} k/{self.split_k} w{self.num_warps} "
                f"s{self.num_stages}{' unit' if self.unit_codes else ''}")


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
def code_minus(codes, zero):
    """code − zero in fp32, exact: integer codes (any width, below 2^23) and fp32 zero points
    (integers) that broadcast against them. 0x4B000000 is 2^23 in fp32: OR-ing a code into its
    mantissa gives 2^23 + code, exactly, cheaper than an integer-to-float conversion."""
    biased = (codes.to(tl.int32) | 0x4B000000).to(tl.float32, bitcast=True)
    return biased - (8388608.0 + zero)


@triton.jit
def dequant(codes, zero, scale, dtype: tl.constexpr):
    """(code − zero) · scale rounded to ``dtype``, in fp32 as dequantize_weight computes it; codes
    are integers (any width), zero and scale fp32 tensors that broadcast against them."""
    return (code_minus(codes, zero) * scale).to(dtype)


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


def _nibble_asm(shift: int, pattern: int) -> str:
    """PTX for pattern | ((byte >> shift) & 0xF) of four bytes as four 16-bit floats (two pairs):
    a byte permute spreads bytes 0, 1 (2, 3) to halves 0 and 2 of a word, one LOP3 masks the
    nibbles and sets the exponent bits (an immediate 0x…F000F mask: a nibble above bit 3 is
    shifted down first)."""
    mask, bits = "0x000F000F", f"0x{pattern:04X}{pattern:04X}"
    source = "$2" if shift == 0 else "s"
    shifted = "" if shift == 0 else f"shr.u32 s, $2, {shift}; "
    return ("{ .reg .b32 s, t0, t1; " + shifted + f"prmt.b32 t0, {source}, {source}, 0x0100; "
            f"prmt.b32 t1, {source}, {source}, 0x0302; lop3.b32 $0, t0, {mask}, {bits}, 0xEA; "
            f"lop3.b32 $1, t1, {mask}, {bits}, 0xEA; }}")


# 16-bit floats exactly B + nibble (or B + byte in fp16): the bit patterns of 128 (bf16) and 1024
# (fp16) have zeros where the code goes
_BF16_128, _FP16_1024 = tl.constexpr(0x4300), tl.constexpr(0x6400)
_ASM_LOW_BF16 = tl.constexpr(_nibble_asm(0, 0x4300))
_ASM_HIGH_BF16 = tl.constexpr(_nibble_asm(4, 0x4300))
_ASM_LOW_FP16 = tl.constexpr(_nibble_asm(0, 0x6400))
_ASM_HIGH_FP16 = tl.constexpr(_nibble_asm(4, 0x6400))
# fp16 1024 + byte: bytes 0, 1 (2, 3) under 0x64 exponent bytes, one permute per pair
_ASM_BYTE_FP16 = tl.constexpr("{ .reg .b32 e; mov.b32 e, 0x64646464; prmt.b32 $0, $2, e, 0x4140; "
                              "prmt.b32 $1, $2, e, 0x4342; }")


@triton.jit
def _asm_16(codes, asm: tl.constexpr, BF16: tl.constexpr):
    """``asm`` on four uint8 codes at a time, giving four bf16 (or fp16) values; the result dtype
    is spelled out (a dtype passed as a constexpr stays wrapped in Triton 3.6)."""
    if BF16:
        out = tl.inline_asm_elementwise(asm, "=r,=r,r", [codes], dtype=tl.bfloat16, is_pure=True, pack=4)
    else:
        out = tl.inline_asm_elementwise(asm, "=r,=r,r", [codes], dtype=tl.float16, is_pure=True, pack=4)
    return out


@triton.jit
def biased_codes(codes, PART: tl.constexpr, dtype: tl.constexpr, PRMT: tl.constexpr):
    """uint8 ``codes`` as exact 16-bit floats: PART 0 the low nibble (+128 in bf16, +1024 in fp16),
    1 the high nibble (same bias), 2 the whole byte + 1024 (fp16 only). With ``PRMT`` inline PTX,
    pure and unary so that Triton moves the operand's layout change to the uint8 codes (before the
    arithmetic: no 16-bit round trip through shared memory); else integer masks (the interpreter,
    AMD)."""
    if PRMT:
        if dtype == tl.bfloat16:
            if PART == 0:
                out = _asm_16(codes, _ASM_LOW_BF16, True)
            else:
                out = _asm_16(codes, _ASM_HIGH_BF16, True)
        elif PART == 0:
            out = _asm_16(codes, _ASM_LOW_FP16, False)
        elif PART == 1:
            out = _asm_16(codes, _ASM_HIGH_FP16, False)
        else:
            out = _asm_16(codes, _ASM_BYTE_FP16, False)
    else:
        wide = codes.to(tl.int32)
        if PART == 0:
            bits = (wide & 0xF) | (_BF16_128 if dtype == tl.bfloat16 else _FP16_1024)
        elif PART == 1:
            bits = (wide >> 4) | (_BF16_128 if dtype == tl.bfloat16 else _FP16_1024)
        else:
            bits = wide | _FP16_1024
        out = bits.to(tl.int16).to(dtype, bitcast=True)
    return out


@triton.jit
def _weights(codes, PART: tl.constexpr, OFFSET: tl.constexpr, dtype: tl.constexpr, PRMT: tl.constexpr,
             UPCAST: tl.constexpr):
    """biased_codes(codes, PART) − OFFSET: exact small integers, in ``dtype`` by one packed
    subtraction per pair, or in fp32 for the interpreter (its 16-bit arithmetic is wrong)."""
    biased = biased_codes(codes, PART, dtype, PRMT)
    if UPCAST:
        return biased.to(tl.float32) - OFFSET
    return biased - OFFSET


@triton.jit
def _byte_weights_bf16(codes, OFFSET: tl.constexpr, UPCAST: tl.constexpr):
    """uint8 ``codes`` as exact bf16 integers code − OFFSET (|code − OFFSET| ≤ 256 has at most 8
    significant bits): :func:`code_minus` in fp32, packed to bf16 two at a time; fp32 for the
    interpreter (UPCAST). Plain operations, not a byte-permute asm: offline for sm_90 (triton 3.9)
    the asm took 250 PRMTs per step at 16×128×128 where the compiler's own byte extraction took
    26, 1248 against 1152 instructions (the rounded path: 1352)."""
    exact = code_minus(codes, OFFSET)
    if UPCAST:
        return exact
    return exact.to(tl.bfloat16)


@triton.jit
def _mma(w, x, acc, UPCAST: tl.constexpr):
    """acc + w · x on tensor cores, fp32 accumulation (fp32 operands in the interpreter, whose
    16-bit dot is wrong; exact for these products)."""
    if UPCAST:
        return tl.dot(w.to(tl.float32), x.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(w, x, acc)


@triton.jit
def _nibble_partners(xt, BLOCK_K: tl.constexpr, BLOCK_M: tl.constexpr):
    """The (BLOCK_K, BLOCK_M) activation rows of whole 32-row runs as two (BLOCK_K / 2, BLOCK_M)
    tiles in code-byte order: the low nibbles' rows (16t + 2q + h for byte 4q + 2h + t of a run)
    and the high nibbles' (the same + 8)."""
    runs = tl.reshape(xt, (BLOCK_K // 32, 2, 2, 4, 2, BLOCK_M))  # (run, t, high, q, h, M)
    runs = tl.permute(runs, (0, 3, 4, 1, 5, 2))  # (run, q, h, t, M, high)
    return tl.split(tl.reshape(runs, (BLOCK_K // 2, BLOCK_M, 2)))


@triton.jit
def _step_activations(x_ptr, k0, rm, mask_m, stride_xk, stride_xm, BITS: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr):
    """The activations of the step at K row ``k0`` as (K, M) tiles: 4-bit codes, the low and the
    high nibbles' partners (:func:`_nibble_partners`); 8-bit, all rows (twice)."""
    columns = x_ptr + rm[None, :] * stride_xm
    if BITS == 4:  # one contiguous (K, M) load, split as the nibbles interleave
        rk = k0 + tl.arange(0, BLOCK_K)
        xt = tl.load(columns + rk[:, None] * stride_xk, mask=mask_m[None, :], other=0.0)
        xa, xb = _nibble_partners(xt, BLOCK_K, BLOCK_M)
    else:
        rk = k0 + tl.arange(0, BLOCK_K)
        xa = tl.load(columns + rk[:, None] * stride_xk, mask=mask_m[None, :], other=0.0)
        xb = xa
    return xa, xb


@triton.jit
def _step_weights(q_ptr, k0, rn, mask_n, stride_qk, stride_qn, BITS: tl.constexpr, dtype: tl.constexpr,
                  BIAS: tl.constexpr, Z0: tl.constexpr, PRMT: tl.constexpr, UPCAST: tl.constexpr,
                  BLOCK_K: tl.constexpr):
    """The step's weights as exact integers code − z0, (BLOCK_N, ·) tiles: 4-bit codes, the low
    nibbles and the high ones (in code-byte order); 8-bit, all rows (twice)."""
    if BITS == 4:  # a column's bytes of the step, each two K rows (see the module docstring)
        rb = tl.multiple_of(k0 // 2, 16) + tl.arange(0, BLOCK_K // 2)  # k0 is a multiple of 32
        codes = tl.load(q_ptr + rn[:, None] * stride_qn + rb[None, :] * stride_qk, mask=mask_n[:, None],
                        other=0)
        wa = _weights(codes, 0, BIAS + Z0, dtype, PRMT, UPCAST)
        wb = _weights(codes, 1, BIAS + Z0, dtype, PRMT, UPCAST)
    else:
        rk = k0 + tl.arange(0, BLOCK_K)
        codes = tl.load(q_ptr + rn[:, None] * stride_qn + rk[None, :] * stride_qk, mask=mask_n[:, None],
                        other=0)
        if dtype == tl.bfloat16:
            wa = _byte_weights_bf16(codes, Z0, UPCAST)
        else:
            wa = _weights(codes, 2, BIAS + Z0, dtype, PRMT, UPCAST)
        wb = wa
    return wa, wb


@triton.jit
def _scaled_step(wa, wb, xa, xb, scale, zero, acc, BITS: tl.constexpr, HAS_ZERO: tl.constexpr,
                 UPCAST: tl.constexpr, Z0: tl.constexpr):
    """acc + scale · Σ_step x·(code − zero) for one step (one group): the MMAs on exact integers,
    the zero point's correction −(zero − z0)·Σx, the group's scale once per column."""
    g = tl.zeros(acc.shape, dtype=tl.float32)
    g = _mma(wa, xa, g, UPCAST)
    if BITS == 4:
        g = _mma(wb, xb, g, UPCAST)
    if HAS_ZERO:  # Σ x·(code − zero) = Σ x·(code − z0) − (zero − z0)·Σ x
        x_sum = tl.sum(xa.to(tl.float32), 0)
        if BITS == 4:
            x_sum += tl.sum(xb.to(tl.float32), 0)
        g -= (zero - Z0)[:, None] * x_sum[None, :]
    return acc + scale[:, None] * g


@triton.jit
def _exact_tile(x_ptr, q_ptr, s_ptr, z_ptr, rm, mask_m, rm1, mask_m1, rn, mask_n, k_lo, k_hi, stride_xm,
                stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, BITS: tl.constexpr,
                GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, UPCAST: tl.constexpr, PRMT: tl.constexpr,
                HALVES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The fp32 (BLOCK_N, BLOCK_M) tile of Yᵀ over K rows k_lo … k_hi for the activation rows
    ``rm`` (and with HALVES = 2 the tile of the rows ``rm1``, as a second result), the
    codes entering the MMA as exact integers (4-bit codes by bit operations; 8-bit ones too with
    fp16 activations, and through fp32 with bf16 ones). Two halves of 8 rows make Triton take the
    per-warp MMA (mma.sync) where one 16-row tile takes Hopper's warpgroup MMA, whose operand from
    registers measured slower at decode sizes."""
    dtype: tl.constexpr = x_ptr.dtype.element_ty
    BIAS: tl.constexpr = 128.0 if dtype == tl.bfloat16 else 1024.0
    Z0: tl.constexpr = 2.0 ** (BITS - 1)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    # the activations, scales and zero points of a step are loaded one step ahead (the codes are
    # pipelined through shared memory by Triton; these small loads would otherwise wait each step)
    xa, xb = _step_activations(x_ptr, k_lo, rm, mask_m, stride_xk, stride_xm, BITS, BLOCK_M, BLOCK_K)
    xa1, xb1 = xa, xb
    if HALVES == 2:
        xa1, xb1 = _step_activations(x_ptr, k_lo, rm1, mask_m1, stride_xk, stride_xm, BITS, BLOCK_M, BLOCK_K)
    scale, zero = _group_params(s_ptr, z_ptr, k_lo // GROUP, rn, mask_n, stride_sg, stride_sn, BITS,
                                HAS_ZERO)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # K and every slice are multiples of BLOCK_K, BLOCK_K | GROUP
        k_next = tl.minimum(k0 + BLOCK_K, k_hi - BLOCK_K)  # the last step reloads itself, unused
        xa_next, xb_next = _step_activations(x_ptr, k_next, rm, mask_m, stride_xk, stride_xm, BITS, BLOCK_M,
                                             BLOCK_K)
        xa1_next, xb1_next = xa_next, xb_next
        if HALVES == 2:
            xa1_next, xb1_next = _step_activations(x_ptr, k_next, rm1, mask_m1, stride_xk, stride_xm, BITS,
                                                   BLOCK_M, BLOCK_K)
        scale_next, zero_next = _group_params(s_ptr, z_ptr, k_next // GROUP, rn, mask_n, stride_sg, stride_sn,
                                              BITS, HAS_ZERO)
        wa, wb = _step_weights(q_ptr, k0, rn, mask_n, stride_qk, stride_qn, BITS, dtype, BIAS, Z0, PRMT,
                               UPCAST, BLOCK_K)
        acc = _scaled_step(wa, wb, xa, xb, scale, zero, acc, BITS, HAS_ZERO, UPCAST, Z0)
        if HALVES == 2:
            acc1 = _scaled_step(wa, wb, xa1, xb1, scale, zero, acc1, BITS, HAS_ZERO, UPCAST, Z0)
        xa, xb, xa1, xb1 = xa_next, xb_next, xa1_next, xb1_next
        scale, zero = scale_next, zero_next
    return acc, acc1


@triton.jit
def _rounded_tile(x_ptr, q_ptr, s_ptr, z_ptr, rm, rn, mask_m, mask_n, k_lo, k_hi, stride_xm, stride_xk,
                  stride_qk, stride_qn, stride_sg, stride_sn, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr,
                  UPCAST: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The same tile for 8-bit codes with bf16 activations: each weight dequantized in fp32 and
    rounded to bf16 (as dequantize_weight rounds it), one MMA per step."""
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # K and every slice are multiples of BLOCK_K
        rk = k0 + tl.arange(0, BLOCK_K)
        xt = tl.load(x_ptr + rk[:, None] * stride_xk + rm[None, :] * stride_xm, mask=mask_m[None, :],
                     other=0.0)
        codes = tl.load(q_ptr + rn[:, None] * stride_qn + rk[None, :] * stride_qk, mask=mask_n[:, None],
                        other=0)
        scale, zero = _group_params(s_ptr, z_ptr, k0 // GROUP, rn, mask_n, stride_sg, stride_sn, 8,
                                    HAS_ZERO)
        acc = _mma(dequant(codes, zero[:, None], scale[:, None], xt.dtype), xt, acc, UPCAST)
    return acc


def _plane_asm(j: int) -> str:
    """PTX: byte j of a word under the exponent byte of 2^23 (selector nibbles j, 4, 4, 7)."""
    return f"{{ .reg .b32 m; mov.b32 m, 0x4B000000; prmt.b32 $0, $1, m, 0x744{j}; }}"


_ASM_PLANE_0, _ASM_PLANE_1 = tl.constexpr(_plane_asm(0)), tl.constexpr(_plane_asm(1))
_ASM_PLANE_2, _ASM_PLANE_3 = tl.constexpr(_plane_asm(2)), tl.constexpr(_plane_asm(3))


@triton.jit
def _byte_plane(words, J: tl.constexpr, PRMT: tl.constexpr):
    """Byte J of each int32 word as fp32 2^23 + byte (exact): one byte permute (NVIDIA), else a
    shift and a mask. One plane at a time keeps fewer fp32 tiles live than :func:`_biased_bytes`
    (offline, the byte-plane tile took 157 registers with all four at once, 111 so)."""
    if PRMT:
        if J == 0:
            asm: tl.constexpr = _ASM_PLANE_0
        elif J == 1:
            asm: tl.constexpr = _ASM_PLANE_1
        elif J == 2:
            asm: tl.constexpr = _ASM_PLANE_2
        else:
            asm: tl.constexpr = _ASM_PLANE_3
        biased = tl.inline_asm_elementwise(asm, "=r,r", [words], dtype=tl.int32, is_pure=True, pack=1)
    else:
        biased = ((words >> (8 * J)) & 0xFF) | 0x4B000000
    return biased.to(tl.float32, bitcast=True)


@triton.jit
def _plane_step(words, J: tl.constexpr, xt, x_sum, scale, zero, acc, HAS_ZERO: tl.constexpr,
                UPCAST: tl.constexpr, PRMT: tl.constexpr):
    """acc (rows, words) + scale · Σ_step x·(code − zero) for byte plane J of the step's (K rows,
    words) tile, x (rows, K) with its row sums ``x_sum`` (used with HAS_ZERO); ``zero`` is 2^23 +
    zero per word. code − 128 is exact in either 16-bit dtype (at most 8 significant bits); the
    plane is the MMA's second operand as loaded."""
    w = _byte_plane(words, J, PRMT) - 8388736.0  # 2^23 + 128
    if not UPCAST:
        w = w.to(xt.dtype)
    g = _mma(xt, w, tl.zeros(acc.shape, dtype=tl.float32), UPCAST)
    if HAS_ZERO:  # Σ x·(code − zero) = Σ x·(code − 128) − (zero − 128)·Σ x
        g -= x_sum[:, None] * (zero - 8388736.0)[None, :]
    return acc + g * scale[None, :]


@triton.jit
def _plane_tile(x_ptr, q_ptr, s_ptr, z_ptr, rm, mask_m, rm1, mask_m1, wn, mask_w, k_lo, k_hi, stride_xm,
                stride_xk, stride_qk, stride_sg, stride_sn, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr,
                UPCAST: tl.constexpr, PRMT: tl.constexpr, HALVES: tl.constexpr, EARLY_SCALES: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_K: tl.constexpr):
    """8-bit codes (row-major) read as int32 words ``wn`` (four columns each, a (BLOCK_K,
    BLOCK_W) tile a step: 16-byte loads along the stored rows, no byte-wise reads) and split into
    their four byte planes by byte permutes; plane j is the columns 4w + j, its own MMA
    (x · plane, M the MMA's first dimension) on exact integers, its own (BLOCK_M, BLOCK_W)
    accumulator. With HALVES = 2 the rows ``rm1`` too, in four more accumulators. With
    EARLY_SCALES each step's scales and zero points are loaded a step ahead (as
    :func:`_exact_tile` does): loaded in their step, ptxas issues them behind the step's first
    MMAs and their first use waits on memory. Returns the eight (the second four unused with
    one half)."""
    a0 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    a1 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    a2 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    a3 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    b0 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    b1 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    b2 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    b3 = tl.zeros((BLOCK_M, BLOCK_W), dtype=tl.float32)
    if EARLY_SCALES:  # the first step's scales and zero points before the loop
        s0, z0, s1, z1, s2, z2, s3, z3 = _word_group_params(s_ptr, z_ptr, k_lo // GROUP, wn, mask_w,
                                                            stride_sg, stride_sn, 8, HAS_ZERO)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # each step lies in one group (BLOCK_K divides GROUP)
        rk = k0 + tl.arange(0, BLOCK_K)
        words = tl.load(q_ptr + rk[:, None] * stride_qk + wn[None, :], mask=mask_w[None, :], other=0)
        xt = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk, mask=mask_m[:, None],
                     other=0.0)
        if EARLY_SCALES:  # the next step's, issued a step ahead (the last step reloads its own, unused)
            k_next = tl.minimum(k0 + BLOCK_K, k_hi - BLOCK_K)
            t0, y0, t1, y1, t2, y2, t3, y3 = _word_group_params(s_ptr, z_ptr, k_next // GROUP, wn, mask_w,
                                                                stride_sg, stride_sn, 8, HAS_ZERO)
        else:
            s0, z0, s1, z1, s2, z2, s3, z3 = _word_group_params(s_ptr, z_ptr, k0 // GROUP, wn, mask_w,
                                                                stride_sg, stride_sn, 8, HAS_ZERO)
        x_sum = tl.sum(xt.to(tl.float32), 1)  # once a step for the four planes (read with HAS_ZERO)
        a0 = _plane_step(words, 0, xt, x_sum, s0, z0, a0, HAS_ZERO, UPCAST, PRMT)
        a1 = _plane_step(words, 1, xt, x_sum, s1, z1, a1, HAS_ZERO, UPCAST, PRMT)
        a2 = _plane_step(words, 2, xt, x_sum, s2, z2, a2, HAS_ZERO, UPCAST, PRMT)
        a3 = _plane_step(words, 3, xt, x_sum, s3, z3, a3, HAS_ZERO, UPCAST, PRMT)
        if HALVES == 2:
            xt1 = tl.load(x_ptr + rm1[:, None] * stride_xm + rk[None, :] * stride_xk, mask=mask_m1[:, None],
                          other=0.0)
            x_sum1 = tl.sum(xt1.to(tl.float32), 1)
            b0 = _plane_step(words, 0, xt1, x_sum1, s0, z0, b0, HAS_ZERO, UPCAST, PRMT)
            b1 = _plane_step(words, 1, xt1, x_sum1, s1, z1, b1, HAS_ZERO, UPCAST, PRMT)
            b2 = _plane_step(words, 2, xt1, x_sum1, s2, z2, b2, HAS_ZERO, UPCAST, PRMT)
            b3 = _plane_step(words, 3, xt1, x_sum1, s3, z3, b3, HAS_ZERO, UPCAST, PRMT)
        if EARLY_SCALES:
            s0, z0, s1, z1, s2, z2, s3, z3 = t0, y0, t1, y1, t2, y2, t3, y3
    return a0, a1, a2, a3, b0, b1, b2, b3


@triton.jit
def _store_planes(y_ptr, p0, p1, p2, p3, wn, mask_w, rm, mask_m, stride_yn, stride_ym):
    """Plane j's (BLOCK_M, BLOCK_W) tile to the columns 4·wn + j of y (whose pointer has the
    slice's offset)."""
    out = y_ptr + rm[:, None] * stride_ym + 4 * wn[None, :] * stride_yn
    mask = mask_m[:, None] & mask_w[None, :]
    dtype = y_ptr.dtype.element_ty
    tl.store(out, p0.to(dtype), mask=mask)
    tl.store(out + stride_yn, p1.to(dtype), mask=mask)
    tl.store(out + 2 * stride_yn, p2.to(dtype), mask=mask)
    tl.store(out + 3 * stride_yn, p3.to(dtype), mask=mask)


@triton.jit
def _gemm_wq_kernel(
    x_ptr, q_ptr, s_ptr, z_ptr, y_ptr,
    M, N, K, k_per_split,
    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, stride_ys, stride_ym, stride_yn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, UPCAST: tl.constexpr,
    PRMT: tl.constexpr, EXACT_BYTES: tl.constexpr, WARP_MMA: tl.constexpr, BYTE_PLANES: tl.constexpr,
    EARLY_SCALES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    PDL: tl.constexpr,
):
    """Computes the transposed tile: Yᵀ = Qᵀ · Xᵀ, the weight the MMA's first operand (taken from
    registers), the activations the second, so a decode-sized M is the MMA's N (down to 8).

    4-bit codes (and 8-bit ones with fp16 activations) enter the MMA as exact small integers
    code − z0 (z0 = 2^(bits−1), the symmetric zero point): a code becomes a 16-bit float B + code
    by bit operations (B = 128 in bf16, 1024 in fp16) and one packed subtraction removes B + z0 —
    about two instructions per weight, exact, never rounded. Each step lies in one quantization
    group: its fp32 sum is scaled once per column (and an asymmetric zero point corrected by
    (zero − z0)·Σx); 4-bit codes split K into even rows (low nibbles) and odd rows (high nibbles),
    two MMAs over the activations' even and odd rows. 8-bit codes with bf16 activations are
    dequantized in fp32 and rounded to bf16, or with EXACT_BYTES enter exact as well, made in
    fp32 (see EXACT). With BYTE_PLANES (8-bit codes given as int32 words, ``q_ptr``'s column
    stride 1 word) see :func:`_plane_tile`."""
    dependent_launch(PDL)
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)
    # bytes with bf16 activations: a byte is not one exact bf16 by bit operations (8 significant
    # bits, 7 stored); as two nibbles (two MMAs) it measured slower at M = 16 than dequantizing in
    # fp32 and rounding each weight to bf16, as dequantize_weight rounds it (wq-tc-h200-3c35b83.json).
    # EXACT_BYTES makes code − 128 in fp32 and packs it to bf16 (exact: at most 8 significant bits)
    EXACT: tl.constexpr = BITS == 4 or x_ptr.dtype.element_ty == tl.float16 or EXACT_BYTES

    PLANES: tl.constexpr = BYTE_PLANES and BITS == 8
    HALVES: tl.constexpr = 2 if WARP_MMA and (EXACT or PLANES) else 1
    ROWS: tl.constexpr = BLOCK_M // HALVES  # activation rows per MMA
    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, ROWS)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = rm < M
    rm1 = rm + ROWS  # the second half's rows (HALVES = 2)
    mask_m1 = rm1 < M
    mask_n = rn < N
    k_lo = split * k_per_split
    k_hi = tl.minimum(k_lo + k_per_split, K)
    y_split = y_ptr + split.to(tl.int64) * stride_ys
    if PLANES:
        wn = pid_n.to(tl.int64) * (BLOCK_N // 4) + tl.arange(0, BLOCK_N // 4)
        mask_w = wn < N // 4  # N is a multiple of 4
        a0, a1, a2, a3, b0, b1, b2, b3 = _plane_tile(
            x_ptr, q_ptr, s_ptr, z_ptr, rm, mask_m, rm1, mask_m1, wn, mask_w, k_lo, k_hi, stride_xm,
            stride_xk, stride_qk, stride_sg, stride_sn, GROUP, HAS_ZERO, UPCAST, PRMT, HALVES, EARLY_SCALES,
            ROWS, BLOCK_N // 4, BLOCK_K)
        # the slice sum launches while the programs store their tiles, not as they exit (W8A16
        # M = 16 24.7–24.8 → 23.9 µs, W4A16 M = 1 14.28 → 14.12–14.18, two alternating pairs of
        # processes, wq-late-h200-684e454/)
        dependents_may_launch(PDL)
        _store_planes(y_split, a0, a1, a2, a3, wn, mask_w, rm, mask_m, stride_yn, stride_ym)
        if HALVES == 2:
            _store_planes(y_split, b0, b1, b2, b3, wn, mask_w, rm1, mask_m1, stride_yn, stride_ym)
    else:
        y_ptrs = y_split + rn[:, None] * stride_yn + rm[None, :] * stride_ym
        if EXACT:
            acc, acc1 = _exact_tile(x_ptr, q_ptr, s_ptr, z_ptr, rm, mask_m, rm1, mask_m1, rn,
                                    mask_n, k_lo, k_hi, stride_xm, stride_xk, stride_qk, stride_qn, stride_sg,
                                    stride_sn, BITS, GROUP, HAS_ZERO, UPCAST, PRMT, HALVES, ROWS, BLOCK_N,
                                    BLOCK_K)
            dependents_may_launch(PDL)
            if HALVES == 2:
                tl.store(y_ptrs + ROWS * stride_ym, acc1.to(y_ptr.dtype.element_ty),
                         mask=mask_n[:, None] & mask_m1[None, :])
        else:
            acc = _rounded_tile(x_ptr, q_ptr, s_ptr, z_ptr, rm, rn, mask_m, mask_n, k_lo, k_hi, stride_xm,
                                stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, GROUP, HAS_ZERO,
                                UPCAST, BLOCK_M, BLOCK_N, BLOCK_K)
            dependents_may_launch(PDL)
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask_n[:, None] & mask_m[None, :])


def _four_bytes_asm(base: int, selectors: tuple[int, int, int, int]) -> str:
    """PTX: byte j of word $4 permuted with ``base``'s bytes by ``selectors[j]`` into output j,
    in one asm so that ``base`` stays in one register and each selector is an immediate."""
    permutes = " ".join(f"prmt.b32 ${j}, $4, m, 0x{s:04X};" for j, s in enumerate(selectors))
    return f"{{ .reg .b32 m; mov.b32 m, 0x{base:08X}; {permutes} }}"


# selector nibbles (byte j, 0x00, 0x00, 0x4B): 2^23 + byte j; (0x00, byte j, 0x80, 0x3F): 1 + byte j·2^-15
_ASM_BIASED_BYTES = tl.constexpr(_four_bytes_asm(0x4B000000, (0x7440, 0x7441, 0x7442, 0x7443)))
_ASM_UNIT_BYTES = tl.constexpr(_four_bytes_asm(0x3F800000, (0x7604, 0x7614, 0x7624, 0x7634)))


@triton.jit
def _permuted_bytes(word, asm: tl.constexpr):
    """The four fp32 values ``asm`` (:func:`_four_bytes_asm`) makes of each int32 ``word``."""
    b0, b1, b2, b3 = tl.inline_asm_elementwise(asm, "=r,=r,=r,=r,r", [word],
                                               dtype=(tl.int32, tl.int32, tl.int32, tl.int32),
                                               is_pure=True, pack=1)
    return (b0.to(tl.float32, bitcast=True), b1.to(tl.float32, bitcast=True),
            b2.to(tl.float32, bitcast=True), b3.to(tl.float32, bitcast=True))


@triton.jit
def _biased_bytes(word, PRMT: tl.constexpr):
    """The four bytes of each int32 ``word``, lowest first, as fp32 2^23 + byte (exact): with
    ``PRMT`` one byte-permute instruction each (NVIDIA); else :func:`_byte_plane`'s shifts and
    masks."""
    if PRMT:
        return _permuted_bytes(word, _ASM_BIASED_BYTES)
    return (_byte_plane(word, 0, False), _byte_plane(word, 1, False), _byte_plane(word, 2, False),
            _byte_plane(word, 3, False))


@triton.jit
def _unit_bytes(word, PRMT: tl.constexpr):
    """The four bytes of each int32 ``word``, lowest first, as fp32 1 + byte·2^-15 (exact: the
    byte in the mantissa's second byte under 1.0's bits): with ``PRMT`` one byte permute each."""
    if PRMT:
        return _permuted_bytes(word, _ASM_UNIT_BYTES)
    b0 = ((word & 0xFF) << 8) | 0x3F800000
    b1 = (word & 0xFF00) | 0x3F800000
    b2 = ((word >> 8) & 0xFF00) | 0x3F800000
    b3 = ((word >> 16) & 0xFF00) | 0x3F800000
    return (b0.to(tl.float32, bitcast=True), b1.to(tl.float32, bitcast=True),
            b2.to(tl.float32, bitcast=True), b3.to(tl.float32, bitcast=True))


@triton.jit
def _word_group_params(s_ptr, z_ptr, g, wn, mask_w, stride_sg, stride_sn, BITS: tl.constexpr,
                       HAS_ZERO: tl.constexpr):
    """Scale and 2^23 + zero point of group row ``g`` for the byte-j columns 4·wn + j, j = 0 … 3."""
    s0, z0 = _group_params(s_ptr, z_ptr, g, 4 * wn, mask_w, stride_sg, stride_sn, BITS, HAS_ZERO)
    s1, z1 = _group_params(s_ptr, z_ptr, g, 4 * wn + 1, mask_w, stride_sg, stride_sn, BITS, HAS_ZERO)
    s2, z2 = _group_params(s_ptr, z_ptr, g, 4 * wn + 2, mask_w, stride_sg, stride_sn, BITS, HAS_ZERO)
    s3, z3 = _group_params(s_ptr, z_ptr, g, 4 * wn + 3, mask_w, stride_sg, stride_sn, BITS, HAS_ZERO)
    return (s0, z0 + 8388608.0, s1, z1 + 8388608.0, s2, z2 + 8388608.0, s3, z3 + 8388608.0)


@triton.jit
def _gemv_step(q_ptr, x_row, k0, wn, mask_w, z0, z1, z2, z3, stride_qk, stride_xk, BITS: tl.constexpr,
               PRMT: tl.constexpr, UNIT: tl.constexpr, BLOCK_K: tl.constexpr):
    """Σ x·(code − zero_j) over the BLOCK_K rows of the step at ``k0``, for the byte-j columns of
    each word (z_j = 2^23 + zero_j, so 2^23 + code − z_j is exact), and Σ x. With ``UNIT``
    (8-bit codes) the sums are Σ x·(1 + code·2^-15) instead, zero points left to the caller. The
    codes are one (code rows, words) tile, whose columns a thread holds whole for the shapes
    ``WqGemvConfig`` describes."""
    if BITS == 8:
        rk = k0 + tl.arange(0, BLOCK_K)
        words = tl.load(q_ptr + rk[:, None] * stride_qk + wn[None, :], mask=mask_w[None, :], other=0)
        x = tl.load(x_row + rk * stride_xk).to(tl.float32)[:, None]
        if UNIT:
            c0, c1, c2, c3 = _unit_bytes(words, PRMT)
            t0, t1, t2, t3 = tl.sum(x * c0, 0), tl.sum(x * c1, 0), tl.sum(x * c2, 0), tl.sum(x * c3, 0)
        else:
            c0, c1, c2, c3 = _biased_bytes(words, PRMT)
            t0 = tl.sum(x * (c0 - z0[None, :]), 0)
            t1 = tl.sum(x * (c1 - z1[None, :]), 0)
            t2 = tl.sum(x * (c2 - z2[None, :]), 0)
            t3 = tl.sum(x * (c3 - z3[None, :]), 0)
        x_sum = tl.sum(x)
    else:  # a column's bytes of the step, each two K rows (see the module docstring)
        tl.static_assert(BLOCK_K % 32 == 0, "4-bit codes interleave in runs of 32 rows")
        rb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
        words = tl.load(q_ptr + rb[:, None] * stride_qk + wn[None, :], mask=mask_w[None, :], other=0)
        xt = tl.load(x_row + (k0 + tl.arange(0, BLOCK_K)) * stride_xk).to(tl.float32)
        x_lo, x_hi = _nibble_partners(xt[:, None], BLOCK_K, 1)
        tl.static_assert(not UNIT, "unit codes are for 8-bit codes only (see _gemv_wq_kernel)")
        l0, l1, l2, l3 = _biased_bytes(words & 0x0F0F0F0F, PRMT)
        h0, h1, h2, h3 = _biased_bytes((words >> 4) & 0x0F0F0F0F, PRMT)
        t0 = tl.sum(x_lo * (l0 - z0[None, :]) + x_hi * (h0 - z0[None, :]), 0)
        t1 = tl.sum(x_lo * (l1 - z1[None, :]) + x_hi * (h1 - z1[None, :]), 0)
        t2 = tl.sum(x_lo * (l2 - z2[None, :]) + x_hi * (h2 - z2[None, :]), 0)
        t3 = tl.sum(x_lo * (l3 - z3[None, :]) + x_hi * (h3 - z3[None, :]), 0)
        x_sum = tl.sum(xt)
    return t0, t1, t2, t3, x_sum


@triton.jit
def _gemv_wq_kernel(
    x_ptr, q_ptr, s_ptr, z_ptr, y_ptr,
    M, N, K, k_per_split,
    stride_xm, stride_xk, stride_qk, stride_sg, stride_sn, stride_ys, stride_ym, stride_yn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, PRMT: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, NUM_STAGES: tl.constexpr, UNIT: tl.constexpr,
    PDL: tl.constexpr,
):
    """Decode on CUDA cores, memory-bound: about three instructions per weight, the codes of the
    next NUM_STAGES − 1 steps in flight through shared memory (Triton's software pipelining of the
    step loop; the launch's ``num_stages`` alone does not reach this inner loop).

    One activation row per program (grid axis 2). The codes are read as int32 words, four
    adjacent columns each (column 4w + j in byte j), a (BLOCK_K code rows, words) tile a step;
    x is a short vector every thread holds whole. Within a quantization group each column sums
    x·(code − zero) exactly — 2^23 + code from a byte permute, minus 2^23 + zero — and the group's
    scale multiplies that sum once. No weight is rounded to 16 bits (the result is the exact
    dequantized weight's, at least as accurate as ``dequantize_weight``'s). A K slice may start
    or end inside a group (slices are multiples of BLOCK_K).

    ``UNIT`` (8-bit codes, bf16 x) drops the subtraction: each column sums x·(1 + code·2^-15) —
    exact products, 8 significant bits times 16 — and the group's part is 2^15·(sum − Σx) −
    zero·Σx. The sum stays near Σx, so each addition rounds by up to 2^-9·|partial Σx| in code
    units: no longer exact, but a simulation of 2048-deep columns put the error at ≤ 1e-5 of
    Σ|x·w|, 20× below that of weights rounded to bf16. With fp16 x the products would round
    (11 + 16 bits) by 2^-9·|x| each, and 4-bit codes leave the same rounding on a signal 16×
    smaller: neither launches it."""
    dependent_launch(PDL)
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    row = tl.program_id(2).to(tl.int64)
    wn = pid_n.to(tl.int64) * (BLOCK_N // 4) + tl.arange(0, BLOCK_N // 4)  # words of this tile
    mask_w = wn < N // 4  # N is a multiple of 4
    x_row = x_ptr + row * stride_xm
    k_lo = split * k_per_split  # k_per_split is a multiple of BLOCK_K, which divides GROUP
    k_hi = tl.minimum(k_lo + k_per_split, K)
    acc0 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
    acc1 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
    for g in range(k_lo // GROUP, tl.cdiv(k_hi, GROUP)):  # the groups this slice touches
        s0, z0, s1, z1, s2, z2, s3, z3 = _word_group_params(s_ptr, z_ptr, g, wn, mask_w, stride_sg, stride_sn,
                                                            BITS, HAS_ZERO)
        p0 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
        p1 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
        p2 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
        p3 = tl.zeros((BLOCK_N // 4,), dtype=tl.float32)
        px = 0.0
        for k0 in tl.range(tl.maximum(g * GROUP, k_lo), tl.minimum(g * GROUP + GROUP, k_hi), BLOCK_K,
                           num_stages=NUM_STAGES):
            t0, t1, t2, t3, tx = _gemv_step(q_ptr, x_row, k0, wn, mask_w, z0, z1, z2, z3, stride_qk,
                                            stride_xk, BITS, PRMT, UNIT, BLOCK_K)
            p0 += t0
            p1 += t1
            p2 += t2
            p3 += t3
            px += tx
        if UNIT:  # 2^15·(Σ x·(1 + code·2^-15) − Σx) − zero·Σx, zero = z − 2^23
            p0 = (p0 - px) * 32768.0 - (z0 - 8388608.0) * px
            p1 = (p1 - px) * 32768.0 - (z1 - 8388608.0) * px
            p2 = (p2 - px) * 32768.0 - (z2 - 8388608.0) * px
            p3 = (p3 - px) * 32768.0 - (z3 - 8388608.0) * px
        acc0 = tl.fma(p0, s0, acc0)  # the group's scale, once per column
        acc1 = tl.fma(p1, s1, acc1)
        acc2 = tl.fma(p2, s2, acc2)
        acc3 = tl.fma(p3, s3, acc3)
    out = y_ptr + split.to(tl.int64) * stride_ys + row * stride_ym + 4 * wn * stride_yn
    dtype = y_ptr.dtype.element_ty
    tl.store(out, acc0.to(dtype), mask=mask_w)
    tl.store(out + stride_yn, acc1.to(dtype), mask=mask_w)
    tl.store(out + 2 * stride_yn, acc2.to(dtype), mask=mask_w)
    tl.store(out + 3 * stride_yn, acc3.to(dtype), mask=mask_w)


@triton.jit
def _sum_slices_kernel(ws_ptr, y_ptr, N, SIZE, stride_ym, stride_yn, SPLIT: tl.constexpr,
                       SPLIT_P2: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
    """y (M, N) ← Σ_s ws[s] for ws (SPLIT, M·N) fp32 (see ``add_slices``)."""
    dependent_launch(PDL)
    add_slices(ws_ptr, y_ptr, N, SIZE, stride_ym, stride_yn, SPLIT, SPLIT_P2, BLOCK)


@triton.jit
def add_slices(ws_ptr, y_ptr, N, SIZE, stride_ym, stride_yn, SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr,
               BLOCK: tl.constexpr):
    """This program's BLOCK elements of y ← Σ_s ws[s]: one (SPLIT, BLOCK) load, every slice in
    flight at once, summed by a fixed tree (deterministic)."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    s = tl.arange(0, SPLIT_P2)
    ok = i < SIZE
    parts = tl.load(ws_ptr + s[:, None].to(tl.int64) * SIZE + i[None, :],
                    mask=(s < SPLIT)[:, None] & ok[None, :], other=0.0)
    total = tl.sum(parts, axis=0)
    tl.store(y_ptr + (i // N) * stride_ym + (i % N) * stride_yn, total.to(y_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _dequantize_kernel(
    q_ptr, s_ptr, z_ptr, w_ptr,
    N, ROWS,
    stride_qk, stride_qn, stride_sg, stride_sn, stride_wk, stride_wn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, BLOCK_R: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PDL: tl.constexpr,
):
    """w (K, N) ← dequant(Q) for a (BLOCK_R code rows, BLOCK_N) tile."""
    dependent_launch(PDL)
    rr = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rr < ROWS)[:, None] & (rn < N)[None, :]
    codes = tl.load(q_ptr + rr[:, None] * stride_qk + rn[None, :] * stride_qn, mask=mask, other=0)
    if BITS == 4:  # byte 4q + 2h + t of a 32-row run: rows 16t + 2q + h (low nibble) and + 8 (high)
        byte = rr % 16
        k = rr // 16 * 32 + byte % 2 * 16 + byte // 4 * 2 + byte // 2 % 2
    else:
        k = rr  # the K row each code row holds
    scale, zero = _group_params(s_ptr, z_ptr, (k // GROUP)[:, None], rn[None, :], mask, stride_sg, stride_sn,
                                BITS, HAS_ZERO)
    w_ptrs = w_ptr + k[:, None] * stride_wk + rn[None, :] * stride_wn
    if BITS == 8:
        tl.store(w_ptrs, dequant(codes, zero, scale, w_ptr.dtype.element_ty), mask=mask)
    else:  # a group holds whole runs: rows k and k + 8 share one
        tl.store(w_ptrs, dequant(codes & 0xF, zero, scale, w_ptr.dtype.element_ty), mask=mask)
        tl.store(w_ptrs + 8 * stride_wk, dequant(codes >> 4, zero, scale, w_ptr.dtype.element_ty), mask=mask)


_launch = Launcher(_gemm_wq_kernel)
_launch_gemv = Launcher(_gemv_wq_kernel)
_launch_dequantize = Launcher(_dequantize_kernel)
_launch_sum_slices = Launcher(_sum_slices_kernel)
SUM_ELEMENTS = 4096  # slices × columns one program of _sum_slices_kernel adds (32 per thread)


def code_words(qweight: torch.Tensor) -> torch.Tensor | None:
    """The codes (rows, N) as int32 words of four adjacent columns, as ``gemv_wq`` reads them, or
    None when they cannot be viewed so (N not a multiple of 4, columns not contiguous, rows not
    4-byte aligned)."""
    rows, n = qweight.shape
    if n % 4 or (n > 1 and qweight.stride(1) != 1) or qweight.stride(0) % 4 or qweight.data_ptr() % 4:
        return None
    return torch.as_strided(qweight, (rows, n), (qweight.stride(0), 1)).view(torch.int32)


def reads_words(config: object, bits: int) -> bool:
    """Whether a launch of ``config`` reads the codes as int32 words when :func:`code_words` can
    view them: the decode family always, the tensor-core family for 8-bit byte planes, no other."""
    return isinstance(config, WqGemvConfig) or (isinstance(config, WqConfig) and config.byte_planes
                                                and bits == 8)


def launch_gemm_wq(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor,
                   zeros: torch.Tensor | None, y: torch.Tensor, k: int, bits: int, group: int, *,
                   upcast: bool, config: WqConfig | WqGemvConfig, words: torch.Tensor | None = None) -> None:
    """y (M, N) ← x (M, K) · dequant(qweight) with a fused family (``gemm_wq``, or ``gemv_wq`` when
    :func:`code_words` can view the codes — ``words``, if the caller has them already;
    ``config.block_k`` is capped at ``group``). A K split writes (split, M, N) fp32 partials to a
    kept scratch buffer (``launch.scratch``), which a second launch sums into y."""
    m, n = y.shape
    block_k = min(config.block_k, group)
    if bits == 4:  # steps of whole runs of interleaved nibbles (32 rows; a group holds whole runs)
        block_k = max(block_k, 32)
    k_per_split = cdiv(cdiv(k, config.split_k), block_k) * block_k
    split = cdiv(k, k_per_split)
    if split == 1:
        target, ys = y, (0, *y.stride())
    else:
        target, ys = scratch("wq slices", split * m * n, torch.float32, y.device, False), (m * n, n, 1)
    quantization = dict(BITS=bits, GROUP=group, HAS_ZERO=zeros is not None)
    zeros = scales if zeros is None else zeros  # HAS_ZERO=False: never read
    # programmatic dependent launch, the slice sum in the same mode, same-call A/B in CUDA graphs
    # (docs/architecture.md): gemv_wq early (W8A16 M = 1 1.45 → 1.50× torch; at exit 1.47×),
    # gemm_wq at exit (W4A16 M = 16 1.30 → 1.35×, M = 1 1.99 → 2.02×, W8A16 M = 16 1.19 → 1.21×;
    # early lost 2–10 % on W8A16 M = 16)
    pdl = pdl_mode(y, PDL_EARLY if isinstance(config, WqGemvConfig) else PDL_AT_EXIT)
    if isinstance(config, WqGemvConfig):
        words = words if words is not None else code_words(qweight)
        if words is None:
            raise ValueError("gemv_wq needs codes viewable as int32 words (see code_words)")
        _launch_gemv((cdiv(n, config.block_n), split, m),
                     (x, words, scales, zeros, target, m, n, k, k_per_split, *x.stride(),
                      words.stride(0), *scales.stride(), *ys),
                     quantization | dict(PRMT=nvidia_target(y), BLOCK_N=config.block_n, BLOCK_K=block_k,
                                         NUM_STAGES=config.num_stages,
                                         UNIT=config.unit_codes and bits == 8 and x.dtype == torch.bfloat16,
                                         PDL=pdl),
                     config.num_warps, config.num_stages)
    else:
        q, q_strides, planes = qweight, qweight.stride(), False
        if reads_words(config, bits):  # codes that cannot be viewed as words stay byte-wise
            words = words if words is not None else code_words(qweight)
            if words is not None:
                q, q_strides, planes = words, (words.stride(0), 1), True
        _launch((cdiv(m, config.block_m) * cdiv(n, config.block_n), split),
                (x, q, scales, zeros, target, m, n, k, k_per_split, *x.stride(), *q_strides,
                 *scales.stride(), *ys),
                quantization | dict(UPCAST=upcast, PRMT=nvidia_target(y), EXACT_BYTES=config.exact_bytes,
                                    WARP_MMA=config.warp_mma, BYTE_PLANES=planes,
                                    EARLY_SCALES=planes and config.early_scales, BLOCK_M=config.block_m,
                                    BLOCK_N=config.block_n, BLOCK_K=block_k, GROUP_M=config.group_m, PDL=pdl),
                config.num_warps,
                config.num_stages)
    if split > 1:
        sum_slices(target, split, y, pdl=pdl)


def sum_slices(ws: torch.Tensor, split: int, y: torch.Tensor, *, pdl: int = PDL_OFF) -> None:
    """y (M, N) ← Σ_s ws[s] for the (split, M, N) fp32 partial products that ``ws`` holds
    contiguously from its first element, in a fixed order; ``pdl``: the launch's programmatic
    dependent launch mode (from :func:`pdl_mode`)."""
    m, n = y.shape
    split_p2 = next_power_of_2(split)
    block = max(32, SUM_ELEMENTS // split_p2)
    _launch_sum_slices((cdiv(m * n, block),), (ws, y, n, m * n, *y.stride()),
                       dict(SPLIT=split, SPLIT_P2=split_p2, BLOCK=block, PDL=pdl), 4, 1)


def launch_dequantize(qweight: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                      w: torch.Tensor, bits: int, group: int, config: WqDequantConfig) -> None:
    """w (K, N) ← dequant(qweight), each weight rounded to w's dtype."""
    rows, n = qweight.shape
    _launch_dequantize((cdiv(rows, config.block_rows), cdiv(n, config.block_n)),
                       (qweight, scales, scales if zeros is None else zeros, w, n, rows, *qweight.stride(),
                        *scales.stride(), *w.stride()),
                       dict(BITS=bits, GROUP=group, HAS_ZERO=zeros is not None, BLOCK_R=config.block_rows,
                            BLOCK_N=config.block_n, PDL=pdl_mode(w, PDL_OFF)),
                       config.num_warps, 1)


REPRESENTATIVE = (256, 1024, 1024)  # (M, N, K): aligned, every tile size divides it


def representative_launch(op: str, config: WqAnyConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm_wq`` makes with ``config`` for aligned N and K of ``dtype``
    (``int4_bf16`` …) with symmetric group-128 weights, M = 1 (decode: a constant to Triton) and,
    for the tile family, M aligned and not (token counts) (run under
    ``tessera._core.launch.capture()``); for ``gemm_wq_dequant`` the dequantization only (the
    float GEMM after it has its own jobs)."""
    code, activation = dtype.split("_")
    bits, act = int(code[3:]), torch_dtype(activation)
    aligned, n, k = REPRESENTATIVE
    # the codes as quantize_weight stores them (4-bit column-major, 8-bit row-major: which stride
    # is 1 is part of the launch key); gemv_wq reads row-major codes only
    rows = k * bits // 8
    q = (torch.empty(n, rows, dtype=torch.uint8).t() if bits == 4 and not isinstance(config, WqGemvConfig)
         else torch.empty(rows, n, dtype=torch.uint8))
    s = torch.empty(k // 128, n, dtype=act)
    if isinstance(config, WqDequantConfig):
        launch_dequantize(q, s, None, torch.empty(k, n, dtype=act), bits, 128, config)
        return
    for m in (1,) if isinstance(config, WqGemvConfig) else (aligned, aligned - 24, 1):
        launch_gemm_wq(torch.empty(m, k, dtype=act), q, s, None, torch.empty(m, n, dtype=act), k, bits, 128,
                       upcast=False, config=config)
