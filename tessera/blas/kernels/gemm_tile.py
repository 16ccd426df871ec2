"""Portable tiled GEMM: one program per output tile, pointer loads with arbitrary strides.

Runs everywhere Triton runs (NVIDIA, AMD, the CPU interpreter) and is the family used for batched
problems, unusual layouts and dtypes the Hopper family does not take. Batch is the second grid
axis; a broadcast operand simply has batch stride 0.

    D[b] = alpha · A[b] @ B[b] + beta · C[b]     (C read only when HAS_C)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from tessera._core.convert import scalar
from tessera._core.device import precision_of, torch_dtype
from tessera._core.launch import PDL_EARLY, Launcher, cdiv, pdl_mode
from tessera._core.pdl import dependent_launch
from tessera.blas.kernels.copy import representative_operand_copies

MAX_GRID_Y = 65535


@dataclass(frozen=True)
class TileConfig:
    """Launch parameters of :func:`_gemm_tile_kernel` (the tuner forks over these)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    kernel = "gemm_tile"

    def short(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}")


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of program ``pid`` in grouped order: GROUP_M rows of tiles share B's columns
    while they are in L2."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    return first_m + (pid % pids_per_group) % group_rows, (pid % pids_per_group) // group_rows


@triton.jit
def epilogue(acc, c_ptr, d_ptr, rm, rn, mask_m, mask_n, stride_cm, stride_cn, stride_dm, stride_dn, alpha,
             beta, HAS_C: tl.constexpr, SCALE_ALPHA: tl.constexpr):
    """D[rm, rn] = alpha · acc + beta · C[rm, rn] on one tile (C read only when HAS_C), stored in
    D's dtype; shared by the tile, split-K and stream-K families (``c_ptr``/``d_ptr`` already at
    the batch's matrix). alpha and beta enter as ``convert.scalar`` of the accumulator's dtype, so
    an fp64 GEMM keeps fp64 scalars in Triton's interpreter too."""
    if SCALE_ALPHA:
        acc = acc * scalar(alpha, acc.dtype)
    mask = mask_m[:, None] & mask_n[None, :]
    if HAS_C:
        c = tl.load(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, mask=mask, other=0.0)
        acc += scalar(beta, acc.dtype) * c.to(acc.dtype)
    d_ptrs = d_ptr + rm[:, None] * stride_dm + rn[None, :] * stride_dn
    tl.store(d_ptrs, acc.to(d_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gemm_tile_kernel(
    a_ptr, b_ptr, c_ptr, d_ptr,
    M, N, K,
    stride_ab, stride_am, stride_ak,
    stride_bb, stride_bk, stride_bn,
    stride_cb, stride_cm, stride_cn,
    stride_db, stride_dm, stride_dn,
    alpha: tl.float64, beta: tl.float64,
    HAS_C: tl.constexpr, SCALE_ALPHA: tl.constexpr,
    ACC_FP64: tl.constexpr, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    INDEX_64: tl.constexpr, EVEN_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch(PDL)
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    batch = tl.program_id(1)

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    if INDEX_64:
        batch = batch.to(tl.int64)
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
    mask_m = rm < M
    mask_n = rn < N
    a_ptrs = a_ptr + batch * stride_ab + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + batch * stride_bb + rk[:, None] * stride_bk + rn[None, :] * stride_bn

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if ACC_FP64 else tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
            b = tl.load(b_ptrs, mask=mask_n[None, :], other=0.0)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=mask_m[:, None] & (rk[None, :] < k_left), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & mask_n[None, :], other=0.0)
        if UPCAST:  # the interpreter's bf16 dot is wrong; fp32 is exact for bf16 products
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=acc.dtype)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    epilogue(acc, c_ptr + batch * stride_cb, d_ptr + batch * stride_db, rm, rn, mask_m, mask_n, stride_cm,
             stride_cn, stride_dm, stride_dn, alpha, beta, HAS_C, SCALE_ALPHA)


_launch = Launcher(_gemm_tile_kernel)


def _batched_strides(t: torch.Tensor) -> tuple[int, int, int]:
    """(batch, row, col) strides of a 2-D or 3-D view; a 2-D or batch-1 operand broadcasts (0)."""
    st = t.stride()
    if t.dim() == 2:
        return (0, st[0], st[1])
    return (0 if t.shape[0] == 1 else st[0], st[1], st[2])


def _batch_part(t: torch.Tensor, part: slice) -> torch.Tensor:
    return t if t.dim() == 2 or t.shape[0] == 1 else t[part]


def launched_in_batch_slices(launch: Callable[..., None], a: torch.Tensor, b: torch.Tensor,
                             c: torch.Tensor | None, d: torch.Tensor, batch: int, *args: Any,
                             **kwargs: Any) -> bool:
    """Grid axes are limited to MAX_GRID_Y: call ``launch`` once per slice of the batch and return
    True, or return False when one launch can cover it."""
    if batch <= MAX_GRID_Y:
        return False
    for start in range(0, batch, MAX_GRID_Y):
        part = slice(start, start + MAX_GRID_Y)
        launch(_batch_part(a, part), _batch_part(b, part), None if c is None else _batch_part(c, part),
               _batch_part(d, part), min(MAX_GRID_Y, batch - start), *args, **kwargs)
    return True


def launch_gemm_tile(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor, batch: int,
    alpha: float, beta: float, *, precision: str, upcast: bool, index_64: bool,
    config: TileConfig,
) -> None:
    """Launch on views ``a`` (…,M,K), ``b`` (…,K,N), ``c``/``d`` (…,M,N), each 2-D or 3-D; an
    operand without the batch dimension (or with batch 1) is broadcast over ``batch``."""
    if launched_in_batch_slices(launch_gemm_tile, a, b, c, d, batch, alpha, beta, precision=precision,
                                upcast=upcast, index_64=index_64, config=config):
        return
    m, k = a.shape[-2], a.shape[-1]
    n = b.shape[-1]
    c_arg = c if c is not None else d
    grid = (cdiv(m, config.block_m) * cdiv(n, config.block_n), batch)
    # PDL early, same-call A/B in CUDA graphs: bf16 512 × 64³ 1.76–1.79 → 2.02× torch.bmm over
    # cold copies (at exit 1.97–1.99×), fp32 1024³ 1.08 → 1.09× (docs/architecture.md)
    _launch(
        grid,
        (a, b, c_arg, d, m, n, k, *_batched_strides(a), *_batched_strides(b), *_batched_strides(c_arg),
         *_batched_strides(d), float(alpha), float(beta)),
        dict(HAS_C=c is not None, SCALE_ALPHA=alpha != 1.0, ACC_FP64=a.dtype == torch.float64,
             UPCAST=upcast, INPUT_PRECISION=precision,
             INDEX_64=index_64, EVEN_K=k % config.block_k == 0, BLOCK_M=config.block_m,
             BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
             PDL=pdl_mode(d, PDL_EARLY)),
        config.num_warps, config.num_stages,
    )


REPRESENTATIVE_SIZE = 1024  # a multiple of 16 and of every block size: the common specialization
# the M a pack precompiles each configuration for: aligned, a token count that is not a multiple of
# 16 (Triton specializes integers on divisibility by 16), and one row (a 1 is a constant to Triton)
REPRESENTATIVE_ROWS = (REPRESENTATIVE_SIZE, REPRESENTATIVE_SIZE - 24, 1)
ODD_SIZE = REPRESENTATIVE_SIZE - 24  # N and K not multiples of 16 (vocabularies, odd layers)


def representative_operands(dtype: str, m: int = REPRESENTATIVE_SIZE, n: int = REPRESENTATIVE_SIZE,
                            k: int = REPRESENTATIVE_SIZE, b_col_major: bool = False
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CPU stand-ins (a, b, d) for the call a pack precompiles: 2-D, row-major (B column-major if
    asked), 16-byte aligned, every size a multiple of 16 and of the tile (never touched: no cost)."""
    elem = torch_dtype(dtype)
    b = torch.empty(n, k, dtype=elem).t() if b_col_major else torch.empty(k, n, dtype=elem)
    return torch.empty(m, k, dtype=elem), b, torch.empty(m, n, dtype=elem)


def representative_launch(op: str, config: TileConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes for 2-D problems with no C and alpha 1, N and K aligned, M each
    of ``REPRESENTATIVE_ROWS``, B row-major and column-major (a linear layer's x @ W.t()); then, M
    aligned, with a C operand (β ≠ 0, as addmm: a contiguous C or a bias row broadcast over it),
    with alpha ≠ 1 (any value: floats do not specialize), with N and K both not multiples of 16,
    and with N alone not (a vocabulary's LM head) (run it under ``tessera._core.launch.capture()``:
    pack builds precompile what it records). Batched problems with aligned sizes share these
    binaries (the batch is a grid axis, batch strides stay aligned)."""
    precision = precision_of(dtype)
    for m, b_col_major in itertools.product(REPRESENTATIVE_ROWS, (False, True)):
        a, b, d = representative_operands(dtype, m, b_col_major=b_col_major)
        launch_gemm_tile(a, b, None, d, 1, 1.0, 0.0, precision=precision, upcast=False, index_64=False,
                         config=config)
    a, b, d = representative_operands(dtype)
    launch_gemm_tile(a, b, torch.empty_like(d), d, 1, 1.0, 1.0, precision=precision, upcast=False,
                     index_64=False, config=config)
    launch_gemm_tile(a, b, None, d, 1, 0.5, 0.0, precision=precision, upcast=False, index_64=False,
                     config=config)
    for n, k in ((ODD_SIZE, ODD_SIZE), (ODD_SIZE, REPRESENTATIVE_SIZE)):
        a, b, d = representative_operands(dtype, REPRESENTATIVE_SIZE, n, k)
        launch_gemm_tile(a, b, None, d, 1, 1.0, 0.0, precision=precision, upcast=False, index_64=False,
                         config=config)
    representative_operand_copies(dtype)  # last: callers index the GEMM launches
