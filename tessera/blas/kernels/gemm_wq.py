"""Weight-only quantized GEMM: Y = X · dequant(Q), 16-bit activations, 4- or 8-bit weights.

Q holds unsigned codes of a (K, N) weight, group-wise along K (``group`` rows share a scale and a
zero point per column): w[k, n] = (code[k, n] − zero[k // group, n]) · scale[k // group, n]. 8-bit
codes are one byte each, (K, N); 4-bit codes are two per byte, (K / 2, N): the low nibble holds row
2i, the high nibble row 2i + 1. A symmetric quantization has no zero tensor: its zero point is
2^(bits − 1). Each program dequantizes its (BLOCK_K, BLOCK_N) weight tile in registers (BLOCK_K
divides the group, so one scale row per tile) and feeds the tensor cores in the activation dtype.
With SPLIT_K > 1 the K range is cut into slices written to an fp32 workspace and added in a fixed
order by the split-K family's reduction (deterministic), for decode-sized M.
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


@triton.jit
def _gemm_wq_kernel(
    x_ptr, q_ptr, s_ptr, z_ptr, y_ptr,
    M, N, K, k_per_split,
    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, stride_ys, stride_ym, stride_yn,
    BITS: tl.constexpr, GROUP: tl.constexpr, HAS_ZERO: tl.constexpr, UPCAST: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    split = tl.program_id(1)

    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m = rm < M
    mask_n = rn < N
    k_lo = split * k_per_split
    k_hi = tl.minimum(k_lo + k_per_split, K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):  # K and every slice are multiples of BLOCK_K
        rk = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk, mask=mask_m[:, None],
                    other=0.0)
        if BITS == 8:
            codes = tl.load(q_ptr + rk[:, None] * stride_qk + rn[None, :] * stride_qn, mask=mask_n[None, :],
                            other=0)
        else:  # two codes per byte along K: unpack the (BLOCK_K / 2, BLOCK_N) bytes into rows 2i, 2i + 1
            rb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
            packed = tl.load(q_ptr + rb[:, None] * stride_qk + rn[None, :] * stride_qn, mask=mask_n[None, :],
                             other=0)
            codes = tl.reshape(tl.permute(tl.join(packed & 0xF, packed >> 4), (0, 2, 1)), (BLOCK_K, BLOCK_N))
        g = k0 // GROUP
        scale = tl.load(s_ptr + g * stride_sg + rn * stride_sn, mask=mask_n, other=0).to(tl.float32)
        if HAS_ZERO:
            zero = tl.load(z_ptr + g * stride_sg + rn * stride_sn, mask=mask_n, other=0).to(tl.float32)
        else:
            zero = tl.full((BLOCK_N,), 2 ** (BITS - 1), tl.float32)
        w = ((codes.to(tl.float32) - zero[None, :]) * scale[None, :]).to(x.dtype)  # dequantize_weight's
        if UPCAST:  # the interpreter's 16-bit dot is wrong: fp32 there (exact for 16-bit products)
            acc = tl.dot(x.to(tl.float32), w.to(tl.float32), acc, input_precision="ieee")
        else:
            acc = tl.dot(x, w, acc)
    y_ptrs = y_ptr + split.to(tl.int64) * stride_ys + rm[:, None] * stride_ym + rn[None, :] * stride_yn
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask_m[:, None] & mask_n[None, :])


_launch = Launcher(_gemm_wq_kernel)


def launch_gemm_wq(x: torch.Tensor, qweight: torch.Tensor, scales: torch.Tensor,
                   zeros: torch.Tensor | None, y: torch.Tensor, k: int, bits: int, group: int, *,
                   upcast: bool, config: WqConfig) -> None:
    """y (M, N) ← x (M, K) · dequant(qweight); ``config.block_k`` must divide ``group``."""
    m, n = y.shape
    split = config.split_k
    k_per_split = cdiv(cdiv(k, split), config.block_k) * config.block_k
    split = cdiv(k, k_per_split)
    target = y if split == 1 else torch.empty((split, m, n), dtype=torch.float32, device=y.device)
    ys = (0, *y.stride()) if split == 1 else target.stride()
    grid = (cdiv(m, config.block_m) * cdiv(n, config.block_n), split)
    _launch(grid,
            (x, qweight, scales, scales if zeros is None else zeros, target, m, n, k, k_per_split,
             *x.stride(), *qweight.stride(), *scales.stride(), *ys),
            dict(BITS=bits, GROUP=group, HAS_ZERO=zeros is not None, UPCAST=upcast, BLOCK_M=config.block_m,
                 BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m),
            config.num_warps, config.num_stages)
    if split > 1:
        reduce_partials(target.unsqueeze(0), y)


REPRESENTATIVE = (256, 1024, 1024)  # (M, N, K): aligned, every tile size divides it


def representative_launch(op: str, config: WqConfig, dtype: str, num_sms: int) -> None:
    """The launch ``gemm_wq`` makes for an aligned problem of ``dtype`` (``int4_bf16`` …) with
    symmetric group-128 weights (run under ``tessera._core.launch.capture()``)."""
    code, activation = dtype.split("_")
    bits, act = int(code[3:]), {"bf16": torch.bfloat16, "fp16": torch.float16}[activation]
    m, n, k = REPRESENTATIVE
    x = torch.empty(m, k, dtype=act)
    q = torch.empty(k * bits // 8, n, dtype=torch.uint8)
    s = torch.empty(k // 128, n, dtype=act)
    launch_gemm_wq(x, q, s, None, torch.empty(m, n, dtype=act), k, bits, 128, upcast=False, config=config)
