"""float32 operands split into three bfloat16 pieces, written where the products need them.

x = p0 + p1 + p2 exactly: p0 is x rounded to bf16 (nearest, ties to even), p1 the remainder
rounded so, p2 what is left, which then has at most 8 significant bits and is a bf16 value. A
finite x above bf16's largest value keeps its truncation as p0 (rounding it would give inf);
a non-finite x is p0 alone (p1 = p2 = 0). The rounding is done on the bits, so the GPU and
Triton's CPU interpreter (whose fp32 → bf16 conversion truncates) split alike.

The destination holds segments, one piece each: segment t of a (rows × cols) matrix is written
at ``dst + t · stride_dt``; the rows and columns between the source's extent and the padded one
(``R_PAD`` × ``C_PAD``) are written as zeros, so a GEMM may read a padded inner dimension.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from tessera._core.launch import Launcher, cdiv
from tessera.blas.kernels.copy import tile_offsets

PIECES = 3  # bf16 pieces a float32 splits into exactly (8 + 8 + 8 significant bits)


@triton.jit
def _nearest_bf16(x):
    """x rounded to the nearest bf16 value (ties to even), as float32; a finite x that would round
    to inf is truncated instead, a NaN kept."""
    bits = x.to(tl.uint32, bitcast=True)
    nearest = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).to(tl.float32, bitcast=True)
    truncated = ((bits >> 16) << 16).to(tl.float32, bitcast=True)
    overflowed = (tl.abs(nearest) == float("inf")) & (tl.abs(x) != float("inf"))
    return tl.where(x != x, x, tl.where(overflowed, truncated, nearest))


@triton.jit
def _split_kernel(
    src_ptr, dst_ptr, R, C, R_PAD, C_PAD,
    stride_sb, stride_sr, stride_sc,
    stride_db, stride_dt, stride_dr, stride_dc,
    SEGMENTS: tl.constexpr, PIECE_OF: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    batch, rr, cc = tile_offsets(BLOCK_R, BLOCK_C)
    inside = (rr[:, None] < R) & (cc[None, :] < C)
    x = tl.load(src_ptr + batch * stride_sb + rr[:, None] * stride_sr + cc[None, :] * stride_sc,
                mask=inside, other=0.0).to(tl.float32)
    p0 = _nearest_bf16(x)
    rest = tl.where(x - x == 0, x - p0, 0.0)  # exact; 0 for inf and NaN
    p1 = _nearest_bf16(rest)
    p2 = rest - p1  # exact, and at most 8 significant bits: a bf16 value
    padded = (rr[:, None] < R_PAD) & (cc[None, :] < C_PAD)
    at = dst_ptr + batch * stride_db + rr[:, None] * stride_dr + cc[None, :] * stride_dc
    for t in tl.static_range(SEGMENTS):
        if ((PIECE_OF >> (2 * t)) & 3) == 0:  # segment t's piece, known when compiling
            value = p0
        elif ((PIECE_OF >> (2 * t)) & 3) == 1:
            value = p1
        else:
            value = p2
        tl.store(at + t * stride_dt, value.to(tl.bfloat16), mask=padded)


_launch = Launcher(_split_kernel)
_BLOCK = 64
_MAX_GRID_Z = 65535


def piece_code(pieces: tuple[int, ...]) -> int:
    """The kernel's ``PIECE_OF``: segment t's piece in bits 2t and 2t + 1."""
    if any(p not in range(PIECES) for p in pieces):
        raise ValueError(f"pieces must be in 0..{PIECES - 1}, got {pieces}")
    return sum(p << (2 * t) for t, p in enumerate(pieces))


def split_into(src: torch.Tensor, dst: torch.Tensor, pieces: tuple[int, ...]) -> torch.Tensor:
    """Write float32 ``src`` (rows × cols, or batch × rows × cols; any strides) split into bf16
    pieces: ``dst`` (segments × rows' × cols', or batch × segments × rows' × cols', with rows' ≥ rows
    and cols' ≥ cols; any strides) gets piece ``pieces[t]`` of ``src`` in segment t, zeros in the
    padding. Returns ``dst``."""
    batched = src.dim() == 3
    if dst.dim() != src.dim() + 1 or dst.shape[-3] != len(pieces) or dst.dtype != torch.bfloat16:
        raise ValueError(f"dst must be bf16 of shape ({len(pieces)}, rows', cols') per matrix, got "
                         f"{tuple(dst.shape)} {dst.dtype}")
    rows, cols = src.shape[-2:]
    rows_pad, cols_pad = dst.shape[-2:]
    if rows_pad < rows or cols_pad < cols or (batched and dst.shape[0] != src.shape[0]):
        raise ValueError(f"dst {tuple(dst.shape)} does not hold src {tuple(src.shape)}")
    if dst.numel() == 0:
        return dst
    constexprs = dict(SEGMENTS=len(pieces), PIECE_OF=piece_code(pieces), BLOCK_R=_BLOCK, BLOCK_C=_BLOCK)
    grid_rc = (cdiv(rows_pad, _BLOCK), cdiv(cols_pad, _BLOCK))
    if not batched:
        _launch((*grid_rc, 1), (src, dst, rows, cols, rows_pad, cols_pad, 0, *src.stride(), 0,
                                *dst.stride()), constexprs, 4, 1)
        return dst
    for start in range(0, src.shape[0], _MAX_GRID_Z):  # the grid's third axis is limited
        s, d = src[start:start + _MAX_GRID_Z], dst[start:start + _MAX_GRID_Z]
        _launch((*grid_rc, s.shape[0]), (s, d, rows, cols, rows_pad, cols_pad, *s.stride(), *d.stride()),
                constexprs, 4, 1)
    return dst
