"""Split-K GEMM for problems with little M·N and long K (decode-style skinny matrices).

The K dimension is cut into SPLIT_K slices; each program computes one output tile over one slice and
writes its partial sum to a workspace (batch, SPLIT_K, M, N); a second kernel adds the slices in a
fixed order and applies the epilogue (alpha, beta·C, output dtype). No atomics: results are
bit-reproducible run to run, whatever the scheduling.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.device import precision_of
from tessera._core.launch import PDL_EARLY, PDL_OFF, Launcher, cdiv, pdl_mode, scratch
from tessera._core.pdl import dependent_launch
from tessera.blas.kernels.copy import representative_operand_copies
from tessera.blas.kernels.gemm_tile import (
    REPRESENTATIVE_ROWS,
    _batched_strides,
    epilogue,
    launched_in_batch_slices,
    representative_operands,
)


@dataclass(frozen=True)
class SplitKConfig:
    """Launch parameters of the split-K family (the tuner forks over these)."""

    block_m: int
    block_n: int
    block_k: int
    split_k: int
    num_warps: int = 4
    num_stages: int = 3

    kernel = "gemm_splitk"

    def short(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} k/{self.split_k} "
                f"w{self.num_warps} s{self.num_stages}")


@triton.jit
def _gemm_splitk_partial_kernel(
    a_ptr, b_ptr, ws_ptr,
    M, N, K, k_per_split,
    stride_ab, stride_am, stride_ak,
    stride_bb, stride_bk, stride_bn,
    ACC_FP64: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch(PDL)
    pid = tl.program_id(0)
    split = tl.program_id(1)
    batch = tl.program_id(2).to(tl.int64)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_pid_n
    pid_n = pid % num_pid_n
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    rk = tl.arange(0, BLOCK_K)
    k_start = split * k_per_split
    k_end = tl.minimum(K, k_start + k_per_split)
    a_ptrs = a_ptr + batch * stride_ab + rm[:, None] * stride_am + (k_start + rk)[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + (k_start + rk)[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if ACC_FP64 else tl.float32)
    for k in range(k_start, k_end, BLOCK_K):
        k_ok = (k + rk) < k_end
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=k_ok[:, None] & (rn[None, :] < N), other=0.0)
        if UPCAST:  # the interpreter's bf16 dot is wrong; fp32 is exact for bf16 products
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=acc.dtype)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    ws = ws_ptr + ((batch * SPLIT_K + split) * M + rm[:, None]) * N + rn[None, :]
    tl.store(ws, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _gemm_splitk_reduce_kernel(
    ws_ptr, c_ptr, d_ptr,
    M, N,
    stride_cb, stride_cm, stride_cn,
    stride_db, stride_dm, stride_dn,
    alpha: tl.float64, beta: tl.float64,
    HAS_C: tl.constexpr, SCALE_ALPHA: tl.constexpr, ACC_FP64: tl.constexpr,
    SPLIT_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch(PDL)
    batch = tl.program_id(1).to(tl.int64)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m = tl.program_id(0) // num_pid_n
    pid_n = tl.program_id(0) % num_pid_n
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if ACC_FP64 else tl.float32)
    for s in tl.static_range(SPLIT_K):  # a fixed order: bit-reproducible sums
        acc += tl.load(ws_ptr + ((batch * SPLIT_K + s) * M + rm[:, None]) * N + rn[None, :], mask=mask,
                       other=0.0)
    epilogue(acc, c_ptr + batch * stride_cb, d_ptr + batch * stride_db, rm, rn, rm < M, rn < N, stride_cm,
             stride_cn, stride_dm, stride_dn, alpha, beta, HAS_C, SCALE_ALPHA)


_partial = Launcher(_gemm_splitk_partial_kernel)
_reduce = Launcher(_gemm_splitk_reduce_kernel)
REDUCE_BLOCK = 64
# Both split-K launches with PDL early for at most 16 rows, else off. CUDA graphs, ratio to cuBLAS,
# two rounds each (pdl-modes-h200-46b2b7d/, -a2b4f89/): bf16 16×4096×14336 0.973–0.988 off,
# 1.025–1.027 early, 1.009–1.029 at exit; 1×4096×14336 0.982–0.990 → 1.027 early; 4×4096×4096
# 1.001–1.006 → 1.119; but 64×8192×8192 (64×64 tiles) 0.847–0.851 → 0.792–0.796
SPLITK_PDL, SPLITK_PDL_MAX_ROWS = PDL_EARLY, 16


def launch_gemm_splitk(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor, batch: int,
    alpha: float, beta: float, *, precision: str, upcast: bool, config: SplitKConfig,
) -> None:
    """Same operand conventions as :func:`~tessera.blas.kernels.gemm_tile.launch_gemm_tile`."""
    if launched_in_batch_slices(launch_gemm_splitk, a, b, c, d, batch, alpha, beta,
                                precision=precision, upcast=upcast, config=config):
        return
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    fp64 = a.dtype == torch.float64
    k_per_split = cdiv(cdiv(k, config.split_k), config.block_k) * config.block_k
    workspace = scratch("split-K partials", batch * config.split_k * m * n,
                        torch.float64 if fp64 else torch.float32, a.device, False)  # (batch, split, M, N)
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    pdl = pdl_mode(d, SPLITK_PDL if m <= SPLITK_PDL_MAX_ROWS else PDL_OFF)
    _partial(
        (tiles, config.split_k, batch),
        (a, b, workspace, m, n, k, k_per_split, *_batched_strides(a), *_batched_strides(b)),
        dict(ACC_FP64=fp64, UPCAST=upcast, INPUT_PRECISION=precision,
             SPLIT_K=config.split_k, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
             BLOCK_K=config.block_k, PDL=pdl),
        config.num_warps, config.num_stages,
    )
    reduce_partials(workspace, (batch, config.split_k, m, n), d, c, alpha, beta, pdl=pdl)


def reduce_partials(workspace: torch.Tensor, shape: tuple[int, int, int, int], d: torch.Tensor,
                    c: torch.Tensor | None = None, alpha: float = 1.0, beta: float = 0.0, *,
                    pdl: int) -> None:
    """d ← alpha · Σ_s workspace[:, s] + beta · c, the slices added in order s = 0, 1, …;
    ``workspace`` holds the (batch, split, M, N) partials of ``shape`` contiguously from its
    first element (it may be longer: a kept scratch buffer); ``pdl``: the launch's programmatic
    dependent launch mode (from ``pdl_mode``)."""
    batch, split, m, n = shape
    c_arg = c if c is not None else d
    _reduce(
        (cdiv(m, REDUCE_BLOCK) * cdiv(n, REDUCE_BLOCK), batch),
        (workspace, c_arg, d, m, n, *_batched_strides(c_arg), *_batched_strides(d), float(alpha),
         float(beta)),
        dict(HAS_C=c is not None, SCALE_ALPHA=alpha != 1.0, ACC_FP64=workspace.dtype == torch.float64,
             SPLIT_K=split, BLOCK_M=REDUCE_BLOCK, BLOCK_N=REDUCE_BLOCK, PDL=pdl),
        4, 1,
    )


def representative_launch(op: str, config: SplitKConfig, dtype: str, num_sms: int) -> None:
    """Both launches ``gemm`` makes for 2-D problems with no C and alpha 1, N and K aligned, M
    each of ``REPRESENTATIVE_ROWS``, B row-major and column-major (x @ W.t()) (run under
    ``tessera._core.launch.capture()``)."""
    for m, b_col_major in itertools.product(REPRESENTATIVE_ROWS, (False, True)):
        a, b, d = representative_operands(dtype, m, b_col_major=b_col_major)
        launch_gemm_splitk(a, b, None, d, 1, 1.0, 0.0, precision=precision_of(dtype),
                           upcast=False, config=config)
    representative_operand_copies(dtype)  # last: callers index the GEMM launches
