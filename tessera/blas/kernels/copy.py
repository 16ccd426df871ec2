"""Tiled strided copy between two views of the same shape (a transpose when layouts differ).

``Tensor.contiguous()`` on a transposed view walks one side with a large stride; here each
program loads a tile coalesced along the source's unit stride and stores it coalesced along the
destination's, Triton staging the tile through shared memory. Used to give tf32 tensor cores the
K-major operands they need.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tessera._core.launch import PDL_AT_EXIT, Launcher, cdiv, pdl_mode
from tessera._core.pdl import dependent_launch


@triton.jit
def tile_offsets(BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's matrix of a batch and its tile's rows and columns (int64), on a grid of
    (row tiles, column tiles, batch): the 2-D tile kernels' prologue (this copy, ``split``)."""
    pid_r = tl.program_id(0)
    pid_c = tl.program_id(1)
    batch = tl.program_id(2).to(tl.int64)
    rr = (pid_r * BLOCK_R + tl.arange(0, BLOCK_R)).to(tl.int64)
    cc = (pid_c * BLOCK_C + tl.arange(0, BLOCK_C)).to(tl.int64)
    return batch, rr, cc


@triton.jit
def _copy_2d_kernel(
    src_ptr, dst_ptr, R, C,
    stride_sb, stride_sr, stride_sc,
    stride_db, stride_dr, stride_dc,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch(PDL)
    batch, rr, cc = tile_offsets(BLOCK_R, BLOCK_C)
    mask = (rr[:, None] < R) & (cc[None, :] < C)
    tile = tl.load(src_ptr + batch * stride_sb + rr[:, None] * stride_sr + cc[None, :] * stride_sc,
                   mask=mask)
    tl.store(dst_ptr + batch * stride_db + rr[:, None] * stride_dr + cc[None, :] * stride_dc, tile,
             mask=mask)


_launch = Launcher(_copy_2d_kernel)


def copy_into(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    """Copy ``src`` into ``dst`` (same 2-D or 3-D shape and dtype, any strides); returns ``dst``.
    A 2-D pair is launched as it is (batch stride 0), so a repeat ``gemm`` call can replay the
    launch on its own operand (``launch.Replay`` maps only operands, not views made of them)."""
    if src.numel() == 0:
        return dst
    block = 64
    # PDL at exit: tf32 1024³ (this copy of B, then the GEMM) 1.00 → 1.08× cuBLAS in graphs,
    # 0.77× early (the GEMM's programs then sit beside the copy's)
    constexprs = dict(BLOCK_R=block, BLOCK_C=block, PDL=pdl_mode(dst, PDL_AT_EXIT))
    rows, cols = src.shape[-2:]
    if src.dim() == 2:
        _launch((cdiv(rows, block), cdiv(cols, block), 1), (src, dst, rows, cols, 0, *src.stride(), 0,
                                                           *dst.stride()), constexprs, 4, 2)
        return dst
    batch = src.shape[0]
    for start in range(0, batch, 65535):  # the grid's third axis is limited
        s, d = (src, dst) if batch <= 65535 else (src[start:start + 65535], dst[start:start + 65535])
        _launch((cdiv(rows, block), cdiv(cols, block), s.shape[0]),
                (s, d, rows, cols, *s.stride(), *d.stride()), constexprs, 4, 2)
    return dst


def column_major_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of 2-D or 3-D ``t`` whose matrices are stored column by column (``stride(-2) == 1``)."""
    transposed = torch.empty((*t.shape[:-2], t.shape[-1], t.shape[-2]), dtype=t.dtype, device=t.device)
    return copy_into(t, transposed.transpose(-1, -2))


def row_major_copy(t: torch.Tensor) -> torch.Tensor:
    """A copy of 2-D or 3-D ``t`` whose matrices are stored row by row (``stride(-1) == 1``)."""
    return copy_into(t, torch.empty(t.shape, dtype=t.dtype, device=t.device))


def representative_operand_copies(dtype: str) -> None:
    """The copies ``gemm`` makes of its operands before the GEMMs of ``dtype``, which every GEMM
    family's ``representative_launch`` adds, so that a pack holds them too (run under
    ``launch.capture()`` inside ``launch.building_for``): for bf16, the bf16 pieces of float32
    operands that the bf16-product precisions multiply and their promoted a₀·b₀ GEMM
    (``emulated.representative_launches``); for tf32 and tf32x3 on Hopper, the K-major copies — B
    row-major to column-major, op(A) column-major to row-major; 2-D with each size a multiple of
    16 or only of 8, and batched."""
    from tessera._core.device import TF32_KEYS, offline_device
    from tessera._core.launch import build_arch
    from tessera.blas import emulated, space  # import this module: top-level imports would be circular

    if dtype == "bf16":
        emulated.representative_launches()
    if dtype not in TF32_KEYS or not space.tf32_wants_k_major(offline_device(build_arch())):
        return
    for rows, cols in ((1024, 1024), (1000, 1024), (1024, 1000), (1000, 1000)):
        column_major_copy(torch.empty(rows, cols))  # B (K × N)
        row_major_copy(torch.empty(cols, rows).t())  # op(A) (M × K) of a column-major A
    column_major_copy(torch.empty(2, 1024, 1024))
    row_major_copy(torch.empty(2, 1024, 1024).transpose(-1, -2))
