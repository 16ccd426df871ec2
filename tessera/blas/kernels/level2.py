"""BLAS level 2 kernels: a matrix by its element strides, vectors as in ``level1`` (start, increment).

``_gemv_kernel`` computes rows of op(A)·x for a (BLOCK_M × BLOCK_N) tile walk along the columns; a
transposed A is the same kernel with the strides swapped. With ``SPLIT`` > 1 the columns are divided
among programs that write partial rows, and ``_gemv_finish_kernel`` adds them in a fixed order
(deterministic). ``_symv_kernel`` reads each tile of the stored triangle once and uses it twice
(A_IJ·x_J and A_IJᵀ·x_I), walking down block columns; ``_symv_finish_kernel`` adds the parts in
a fixed order. ``_ger``
updates a tile of A; ``_trsv_kernel`` solves a triangular system in one launch, block by block,
programs handing solved blocks on through flags.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.convert import convert
from tessera._core.device import torch_dtype
from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import (
    PDL_AT_EXIT,
    PDL_EARLY,
    PDL_OFF,
    Launcher,
    cdiv,
    constant,
    next_power_of_2,
    pdl_mode,
    scratch,
)
from tessera._core.pdl import dependent_launch, dependents_may_launch, release_fence
from tessera.blas.kernels.level1 import StridedVector, _arg, _wide, batch_entry, batch_grid, vector_parts


@dataclass(frozen=True)
class GemvConfig:
    """Launch parameters of :func:`_gemv_kernel` (the tuner forks over these): a (BLOCK_M rows ×
    BLOCK_N columns) tile walking along the columns; columns are split among programs until about
    ``per_sm`` programs per multiprocessor exist (long rows, few rows)."""

    block_m: int
    block_n: int
    num_warps: int = 4
    per_sm: int = 4

    kernel = "gemv"

    def short(self) -> str:
        return f"{self.kernel} {self.block_m}x{self.block_n} w{self.num_warps} {self.per_sm}/SM"


@dataclass(frozen=True)
class GemvGemmConfig:
    """gemv as a GEMM with one row: y = op(A)·x is the GEMM yᵀ = xᵀ·op(A)ᵀ (M = 1, one launch),
    whose tile the GEMM's own selection (logic files) picks. Taken where x and y are contiguous
    and share A's dtype (``level2.gemv``); elsewhere the gemv kernel runs its heuristic tile. On
    the H200 with op(A)'s columns contiguous the shipped bf16 logic takes it from 4096×14336 up
    (8192²: 1.01–1.02× torch.mv, blas-l12-h200-b25f922*.json; the gemv kernel 0.91–0.93×)."""

    kernel = "gemv_gemm"

    def short(self) -> str:
        return "gemv as a GEMM (M = 1)"


@dataclass(frozen=True)
class GerConfig:
    """Launch parameters of :func:`_ger_kernel`: a (block_m × block_n) tile of A per program."""

    block_m: int = 32
    block_n: int = 64
    num_warps: int = 4

    kernel = "ger"

    def short(self) -> str:
        return f"{self.kernel} {self.block_m}x{self.block_n} w{self.num_warps}"


@dataclass(frozen=True)
class SymvConfig:
    """Launch parameters of :func:`_symv_kernel`: square tiles of edge ``tile``, ``per_program``
    stored tiles of a block column per program; ``longest_first`` launches the programs with
    the most tiles first (each block column's short remainder last), so the grid's tail is
    short programs rather than full ones of the last block columns. ``num_stages`` 0 prefetches
    the next tile into registers; 2 or more let Triton's software pipelining keep
    ``num_stages − 1`` tiles in flight through shared memory (asynchronous copies).
    ``overlap_finish``: the finish launch starts while the walk runs (programmatic dependent
    launch early, where the GPU has it) and each of its programs waits for its row block's count
    of finished walk programs instead of for the whole walk (:func:`_symv_finish_kernel`)."""

    tile: int = 64
    per_program: int = 8
    num_warps: int = 4
    longest_first: bool = False
    num_stages: int = 0
    finish_rows: int = 0  # rows a program of the finish launch adds up (0: ``tile``; divides it)
    overlap_finish: bool = False

    kernel = "symv"

    def __post_init__(self) -> None:
        if self.finish_rows < 0 or (self.finish_rows and self.tile % self.finish_rows):
            raise InvalidArgumentError(
                f"symv finish_rows must divide the tile {self.tile} or be 0, the tile (actual: "
                f"{self.finish_rows}): a program of the finish launch adds rows of one row block")

    def short(self) -> str:
        return (f"{self.kernel} tile {self.tile} x{self.per_program} w{self.num_warps}"
                f"{f' s{self.num_stages}' if self.num_stages else ''}"
                f"{' longest-first' if self.longest_first else ''}"
                f"{f' finish {self.finish_rows}' if self.finish_rows else ''}"
                f"{' overlapped' if self.overlap_finish else ''}")


@dataclass(frozen=True)
class TrsvConfig:
    """Launch parameters of :func:`_trsv_kernel`: ``block`` rows solved per program (the inverted
    diagonal blocks' size: it also sets the rounding, of order cond(diagonal block)·u per block)."""

    block: int = 64
    num_warps: int = 8

    kernel = "trsv"

    def short(self) -> str:
        return f"{self.kernel} block {self.block} w{self.num_warps}"


@triton.jit
def gemv_row_sums(a_ptr, x_ptr, rows, row_ok, N, sam, san, x_start, incx, cols_per_split,
                  FP64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Σ_j A[i, j] x[j] for ``rows`` over this program's share of the columns (grid axis 1 picks
    which run of ``cols_per_split``), accumulated element-wise and summed along rows once."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float64 if FP64 else tl.float32)
    lo = tl.program_id(1).to(tl.int64) * cols_per_split
    hi = tl.minimum(lo + cols_per_split, N)
    for j0 in range(lo, hi, BLOCK_N):
        cols = j0 + tl.arange(0, BLOCK_N)
        col_ok = cols < hi
        a = tl.load(a_ptr + rows[:, None] * sam + cols[None, :] * san, mask=row_ok[:, None] & col_ok[None, :],
                    other=0)
        xv = tl.load(x_ptr + x_start + cols * incx, mask=col_ok, other=0)
        acc += _wide(a, FP64) * _wide(xv, FP64)[None, :]
    return tl.sum(acc, 1)


@triton.jit
def _gemv_kernel(a_ptr, x_ptr, y_ptr, ws_ptr, M, N, sam, san, x_start, incx, y_start, incy,
                 a_batch, x_batch, y_batch, alpha: tl.float64, beta: tl.float64, cols_per_split,
                 SPLIT: tl.constexpr, BETA_ZERO: tl.constexpr, FP64: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr):
    """y[i] = α Σ_j A[i, j] x[j] + β y[i] for this program's rows (SPLIT = 1), or the partial sum over
    its share of the columns into ws[entry, split, i]; batch entry b reads A, x and y ``b·…_batch``
    elements on."""
    dependent_launch(PDL)
    pid_s = tl.program_id(1)
    b, row_block = batch_entry(tl.cdiv(M, BLOCK_M))
    a_ptr += b * a_batch
    x_start += b * x_batch
    y_start += b * y_batch
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    total = gemv_row_sums(a_ptr, x_ptr, rows, row_ok, N, sam, san, x_start, incx, cols_per_split, FP64,
                          BLOCK_M, BLOCK_N)
    if SPLIT == 1:
        _gemv_epilogue(y_ptr, rows, row_ok, total, y_start, incy, alpha, beta, BETA_ZERO, FP64)
    else:
        tl.store(ws_ptr + (b * SPLIT + pid_s) * M + rows, total, mask=row_ok)


@triton.jit
def _gemv_epilogue(y_ptr, rows, row_ok, total, y_start, incy, alpha, beta, BETA_ZERO: tl.constexpr,
                   FP64: tl.constexpr):
    yi = y_start + rows * incy
    out = _arg(alpha, FP64) * total
    if not BETA_ZERO:  # β = 0: y is not read (BLAS: NaN in y does not propagate)
        out += _arg(beta, FP64) * _wide(tl.load(y_ptr + yi, mask=row_ok, other=0), FP64)
    tl.store(y_ptr + yi, convert(out, y_ptr.dtype.element_ty), mask=row_ok)


@triton.jit
def _gemv_finish_kernel(ws_ptr, y_ptr, M, y_start, incy, y_batch, alpha: tl.float64, beta: tl.float64,
                        SPLIT: tl.constexpr, BETA_ZERO: tl.constexpr, FP64: tl.constexpr,
                        BLOCK: tl.constexpr, SPLIT_P2: tl.constexpr, PDL: tl.constexpr):
    """y for BLOCK rows of a batch entry: their SPLIT partial sums loaded at once (SPLIT_P2 ≥
    SPLIT, a power of two) and added by a fixed reduction tree, so the result does not depend on
    timing."""
    dependent_launch(PDL)
    b, row_block = batch_entry(tl.cdiv(M, BLOCK))
    ws_ptr += b * SPLIT * M
    y_start += b * y_batch
    rows = row_block * BLOCK + tl.arange(0, BLOCK)
    row_ok = rows < M
    split = tl.arange(0, SPLIT_P2)
    parts = tl.load(ws_ptr + split.to(tl.int64)[:, None] * M + rows[None, :],
                    mask=(split < SPLIT)[:, None] & row_ok[None, :], other=0)
    _gemv_epilogue(y_ptr, rows, row_ok, tl.sum(parts, 0), y_start, incy, alpha, beta, BETA_ZERO, FP64)


@triton.jit
def _symv_use_tile(ws_row_ptr, mirrored, wide, x_cols, x_rows, rows, bj, n, FP64: tl.constexpr):
    """A tile above the diagonal used twice: its row sums A_IJ·x_J stored to ws_row[J, its rows]
    (``evict_last``: the finish reads them back), its A_IJᵀ·x_I part added to ``mirrored``."""
    tl.store(ws_row_ptr + bj.to(tl.int64) * n + rows, tl.sum(wide * x_cols[None, :], 1),
             eviction_policy="evict_last")
    return mirrored + wide * _wide(x_rows, FP64)[:, None]


@triton.jit
def _symv_prefetched(a_ptr, x_ptr, ws_row_ptr, mirrored, x_cols, cols, col_ok, r, bj, i_first, i_end, n, sam,
                     san, x_start, incx, FP64: tl.constexpr, BS: tl.constexpr):
    """``_symv_kernel``'s tiles above the diagonal, the next tile's loads issued before this
    one's arithmetic (a register prefetch); returns ``mirrored`` with their Aᵀ·x parts added.
    A's tiles, each read once, are loaded ``evict_first`` and the row sums stored ``evict_last``:
    the stream of A (64 MiB at 8192² bf16, more than the H200's L2) then no longer pushes x and
    the partials the finish reads out of L2 — main launch 21.8 → 19.1 µs, the call 24.2 → 21.4
    (8192² bf16, two alternating processes each, symv-evict-h200-cd43be6/)."""
    rows_end = i_end.to(tl.int64) * BS
    rows = i_first.to(tl.int64) * BS + r
    tile = tl.load(a_ptr + rows[:, None] * sam + cols[None, :] * san,
                   mask=(rows < rows_end)[:, None] & col_ok[None, :], other=0, eviction_policy="evict_first")
    x_rows = tl.load(x_ptr + x_start + rows * incx, mask=rows < rows_end, other=0)
    for _ in range(i_first, i_end):
        next_rows = rows + BS
        next_tile = tl.load(a_ptr + next_rows[:, None] * sam + cols[None, :] * san,
                            mask=(next_rows < rows_end)[:, None] & col_ok[None, :], other=0,
                            eviction_policy="evict_first")
        next_x = tl.load(x_ptr + x_start + next_rows * incx, mask=next_rows < rows_end, other=0)
        mirrored = _symv_use_tile(ws_row_ptr, mirrored, _wide(tile, FP64), x_cols, x_rows, rows, bj, n, FP64)
        rows, tile, x_rows = next_rows, next_tile, next_x
    return mirrored


@triton.jit
def _symv_pipelined(a_ptr, x_ptr, ws_row_ptr, mirrored, x_cols, cols, col_ok, r, bj, i_first, i_end, n, sam,
                    san, x_start, incx, FP64: tl.constexpr, BS: tl.constexpr, STAGES: tl.constexpr):
    """:func:`_symv_prefetched`'s work with the tiles in flight through shared memory (Triton's
    pipelining, STAGES − 1 ahead). x's 2-byte elements cannot take the asynchronous copies the
    tiles take: the next tile's are loaded a step ahead into registers instead of stalling
    every step. The asynchronous copies carry no eviction policy (offline SASS: LDGSTS.BYPASS),
    so since the hints of :func:`_symv_prefetched` this form is the slower one at 16384 too."""
    rows_end = i_end.to(tl.int64) * BS
    x_next = tl.load(x_ptr + x_start + (i_first * BS + r).to(tl.int64) * incx,
                     mask=(i_first * BS + r) < rows_end, other=0)
    for i in tl.range(i_first, i_end, num_stages=STAGES):  # rows < bj·BS ≤ n: no row mask
        rows = (i * BS + r).to(tl.int64)  # i·BS < n: no int32 overflow
        x_rows = x_next
        x_next = tl.load(x_ptr + x_start + (rows + BS) * incx, mask=rows + BS < rows_end, other=0)
        wide = _wide(tl.load(a_ptr + rows[:, None] * sam + cols[None, :] * san, mask=col_ok[None, :],
                             other=0, eviction_policy="evict_first"), FP64)
        mirrored = _symv_use_tile(ws_row_ptr, mirrored, wide, x_cols, x_rows, rows, bj, n, FP64)
    return mirrored


@triton.jit
def _symv_kernel(a_ptr, x_ptr, plan_ptr, order_ptr, ws_row_ptr, ws_col_ptr, count_ptr, n, sam, san, x_start,
                 incx, a_batch, x_batch, programs,
                 FP64: tl.constexpr, BS: tl.constexpr, STAGES: tl.constexpr, PDL: tl.constexpr):
    """Tiles (I0, J) … (I1 − 1, J) of the upper triangle's block column J (plan row = J, I0, I1,
    the row this program takes from ``order``; a lower triangle comes with its strides swapped),
    each read once and used twice: A_IJ·x_J, a per-tile row sum, to ws_row[J, I's rows];
    A_IJᵀ·x_I, the mirrored part, accumulated element-wise over the program's tiles and summed
    once into ws_col[plan row]. Walking down a block column keeps the per-tile reduction along a
    tile's rows (within a warp when the columns are contiguous) and the cross-warp one out of the
    loop. The diagonal tile (the column's last) is read through a triangle mask, the tiles above
    it through a column mask only (16-byte loads). The stored triangle's other side is never
    read; :func:`_symv_finish_kernel` adds the parts. Batch entry b (the plan's ``programs``
    programs each) reads A and x ``b·…_batch`` elements on and has parts of its own. With
    ``count_ptr`` (not None: the overlapped finish), a program ends by counting itself in for
    each row block it left parts of (its tiles' and its block column's): behind one release
    fence where PDL may run the finish beside it; without PDL the finish starts after this grid
    has finished, which orders everything already."""
    dependent_launch(PDL)
    b, launched = batch_entry(programs)
    a_ptr += b * a_batch
    x_start += b * x_batch
    ws_row_ptr += b * tl.cdiv(n, BS) * n
    ws_col_ptr += b * programs * BS
    row = tl.load(order_ptr + launched)
    bj = tl.load(plan_ptr + 3 * row)
    i_first = tl.load(plan_ptr + 3 * row + 1)
    i_last = tl.load(plan_ptr + 3 * row + 2)
    r = tl.arange(0, BS)
    cols = bj.to(tl.int64) * BS + r
    col_ok = cols < n
    x_cols = _wide(tl.load(x_ptr + x_start + cols * incx, mask=col_ok, other=0), FP64)
    mirrored = tl.zeros((BS, BS), tl.float64 if FP64 else tl.float32)
    i_end = tl.minimum(i_last, bj)  # the tiles above the diagonal: whole row blocks
    if STAGES > 0:
        mirrored = _symv_pipelined(a_ptr, x_ptr, ws_row_ptr, mirrored, x_cols, cols, col_ok, r, bj, i_first,
                                   i_end, n, sam, san, x_start, incx, FP64, BS, STAGES)
    else:
        mirrored = _symv_prefetched(a_ptr, x_ptr, ws_row_ptr, mirrored, x_cols, cols, col_ok, r, bj, i_first,
                                    i_end, n, sam, san, x_start, incx, FP64, BS)
    # the finish launches once every program has walked its tiles, while the last ones finish
    # theirs (8192² bf16: 21.3 / 21.4 → 21.1–21.2 µs over three processes, symv-late-h200-7171676/)
    dependents_may_launch(PDL)
    if i_last > bj:  # the diagonal tile: its rows are this block's columns
        diagonal = _wide(tl.load(a_ptr + cols[:, None] * sam + cols[None, :] * san,
                                 mask=col_ok[:, None] & col_ok[None, :] & (r[:, None] <= r[None, :]),
                                 other=0), FP64)  # the stored triangle only
        tl.store(ws_row_ptr + bj.to(tl.int64) * n + cols, tl.sum(diagonal * x_cols[None, :], 1), mask=col_ok)
        mirrored += tl.where(r[:, None] < r[None, :], diagonal, 0.0) * x_cols[:, None]
    tl.store(ws_col_ptr + row.to(tl.int64) * BS + r, tl.sum(mirrored, 0))
    if count_ptr is not None:
        tl.debug_barrier()  # every thread's stores before the counts
        if PDL != 0:  # the finish may run beside this grid: one release fence for all the counts
            release_fence()  # (a release on each count would fence each)
        counts = count_ptr + b * 2 * tl.cdiv(n, BS)  # [entry, (parts in, readers), row block]
        for i in range(i_first, i_last):  # the row sums of tiles (i, bj)
            tl.atomic_add(counts + i, 1, sem="relaxed")
        tl.atomic_add(counts + bj, 1, sem="relaxed")  # the mirrored sums: row block bj


@triton.jit
def _symv_row_parts(ws_row_ptr, j0, rows, row_ok, n, blocks, RIGHT: tl.constexpr, CACHE: tl.constexpr):
    """The row sums that block columns j0 … j0 + RIGHT − 1 (those < blocks) left for ``rows``."""
    right = j0 + tl.arange(0, RIGHT)
    return tl.load(ws_row_ptr + right.to(tl.int64)[:, None] * n + rows[None, :],
                   mask=(right < blocks)[:, None] & row_ok[None, :], other=0, cache_modifier=CACHE)


@triton.jit
def _symv_col_parts(ws_col_ptr, p0, last, r, BS: tl.constexpr, COLUMN: tl.constexpr, CACHE: tl.constexpr):
    """The mirrored sums that programs p0 … p0 + COLUMN − 1 (those < last) left for places r."""
    programs = p0 + tl.arange(0, COLUMN)
    return tl.load(ws_col_ptr + programs.to(tl.int64)[:, None] * BS + r[None, :],
                   mask=(programs < last)[:, None], other=0, cache_modifier=CACHE)


@triton.jit
def _symv_finish_kernel(ws_row_ptr, ws_col_ptr, count_ptr, y_ptr, n, blocks, per_program, y_start, incy,
                        y_batch, programs, alpha: tl.float64, beta: tl.float64, BETA_ZERO: tl.constexpr,
                        FP64: tl.constexpr, BS: tl.constexpr, ROWS: tl.constexpr, COLUMN: tl.constexpr,
                        RIGHT: tl.constexpr, PDL: tl.constexpr):
    """y for ROWS rows of row block I (ROWS divides BS): the row sums of tiles (I, J ≥ I) (RIGHT
    block columns per load) and the mirrored sums of block column I's programs (COLUMN of them
    per load), added by fixed reduction trees in a fixed order (deterministic). The programs of
    block column I follow those of columns J < I, ⌈(J + 1) / per_program⌉ each
    (:func:`_symv_programs`), so their first index is computed, not loaded: the first load of
    each kind leaves at once, in one round trip to memory (the finish is on symv's critical
    path, after the main launch). Batch entry b's programs follow entry b − 1's.

    Overlapped (``count_ptr`` not None; the main launch lets this one start early): instead of
    waiting for the whole main launch first, a program waits until row block I's count reaches
    its walk programs' number — (blocks − I) programs left row sums for it, ⌈(I + 1) / per
    program⌉ mirrored sums — then reads the parts past L1 (other programs on this multiprocessor
    may have cached their lines before they were written); the row block's last program to pass
    zeroes its counts for the next call; and it waits for the main launch at its end, so that
    the launch after this one never overlaps the main launch."""
    if count_ptr is None:
        dependent_launch(PDL)
    b, row_program = batch_entry(tl.cdiv(n, ROWS))
    ws_row_ptr += b * blocks * n
    ws_col_ptr += b * programs * BS
    y_start += b * y_batch
    row0 = row_program * ROWS
    bi = row0 // BS
    r = row0 % BS + tl.arange(0, ROWS)  # the rows' places in their row block
    rows = bi.to(tl.int64) * BS + r
    row_ok = rows < n
    q, rem = bi // per_program, bi % per_program
    first = per_program * q * (q + 1) // 2 + rem * (q + 1)  # Σ_{J<I} ⌈(J + 1) / per_program⌉
    last = first + q + 1
    CACHE: tl.constexpr = "" if count_ptr is None else ".cg"
    if count_ptr is not None:
        counts = count_ptr + b * 2 * blocks
        expected = (blocks - bi) + (q + 1)
        seen = tl.atomic_add(counts + bi, 0, sem="acquire")
        while seen < expected:
            seen = tl.atomic_add(counts + bi, 0, sem="acquire")
        readers = tl.atomic_add(counts + blocks + bi, 1, sem="relaxed")
        if readers == tl.cdiv(tl.minimum(BS, n - bi * BS), ROWS) - 1:  # the row block's last reader
            tl.atomic_xchg(counts + bi, 0, sem="relaxed")
            tl.atomic_xchg(counts + blocks + bi, 0, sem="relaxed")
    # both kinds in flight at once
    row_parts = _symv_row_parts(ws_row_ptr, bi, rows, row_ok, n, blocks, RIGHT, CACHE)
    col_parts = _symv_col_parts(ws_col_ptr, first, last, r, BS, COLUMN, CACHE)
    total = tl.sum(row_parts, 0) + tl.sum(col_parts, 0)
    for j0 in range(bi + RIGHT, blocks, RIGHT):  # more block columns than one load takes
        total += tl.sum(_symv_row_parts(ws_row_ptr, j0, rows, row_ok, n, blocks, RIGHT, CACHE), 0)
    for p0 in range(first + COLUMN, last, COLUMN):
        total += tl.sum(_symv_col_parts(ws_col_ptr, p0, last, r, BS, COLUMN, CACHE), 0)
    _gemv_epilogue(y_ptr, rows, row_ok, total, y_start, incy, alpha, beta, BETA_ZERO, FP64)
    if count_ptr is not None:
        dependent_launch(PDL)


@triton.jit
def _ger_kernel(a_ptr, x_ptr, y_ptr, M, N, sam, san, x_start, incx, y_start, incy, a_batch, x_batch, y_batch,
                alpha: tl.float64, FP64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A[i, j] += α x[i] y[j] on one tile (of batch entry b: A, x, y ``b·…_batch`` elements on)."""
    b, row_block = batch_entry(tl.cdiv(M, BLOCK_M))
    a_ptr += b * a_batch
    x_start += b * x_batch
    y_start += b * y_batch
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = (rows < M)[:, None] & (cols < N)[None, :]
    xv = _wide(tl.load(x_ptr + x_start + rows * incx, mask=rows < M, other=0), FP64)
    yv = _wide(tl.load(y_ptr + y_start + cols * incy, mask=cols < N, other=0), FP64)
    pointers = a_ptr + rows[:, None] * sam + cols[None, :] * san
    a = tl.load(pointers, mask=ok, other=0)
    update = _arg(alpha, FP64)[:, None] * xv[:, None] * yv[None, :]
    tl.store(pointers, convert(_wide(a, FP64) + update, a.dtype), mask=ok)


@triton.jit
def _triangular_inverse(t, LOWER: tl.constexpr, BS: tl.constexpr, FP64: tl.constexpr):
    """T⁻¹ for a BS × BS triangular tile whose other triangle is zero: substitution on all columns
    of the identity at once (forward for lower, backward for upper), in registers."""
    r = tl.arange(0, BS)
    inv = tl.zeros((BS, BS), tl.float64 if FP64 else tl.float32)
    for step in range(BS):
        i = step if LOWER else BS - 1 - step
        row = tl.sum(tl.where(r[:, None] == i, t, 0.0), 0)  # T[i, :]
        done = tl.sum(row[:, None] * inv, 0)  # Σₖ T[i, k]·T⁻¹[k, :] over the rows solved so far
        pivot = tl.sum(tl.where(r == i, row, 0.0), 0)
        inv = tl.where(r[:, None] == i, ((r == i).to(inv.dtype) - done)[None, :] / pivot, inv)
    return inv


@triton.jit
def _trsv_kernel(a_ptr, x_ptr, flags_ptr, n, sam, san, x_start, incx, a_batch, x_batch, LOWER: tl.constexpr,
                 UNIT: tl.constexpr, FP64: tl.constexpr, BS: tl.constexpr):
    """Solve op(A)·x = b in place, one program per BS-row block, all in one launch.

    A program takes a ticket (``flags[nblocks]``) that fixes its block in solve order, so every
    block it waits for belongs to a program that started earlier (no deadlock whatever order the
    GPU starts programs in). It inverts its diagonal block while earlier blocks are being solved,
    then for each earlier block loads its tile of op(A), waits for that block's flag and subtracts
    the product with the solved x; last x_b = T⁻¹·(b − Σ), stored, then its flag set (release).
    The critical path per block is a wait, a 64-element load and two small products. A batch's
    entries follow one another along the grid, each with its own flags and ticket, so a program
    waits only for earlier-started programs of its own entry."""
    r = tl.arange(0, BS)
    nblocks = tl.cdiv(n, BS)
    b, _ = batch_entry(nblocks)
    a_ptr += b * a_batch
    x_start += b * x_batch
    flags_ptr += b * (nblocks + 1)
    order = tl.atomic_add(flags_ptr + nblocks, 1)
    block = order if LOWER else nblocks - 1 - order
    rows = block.to(tl.int64) * BS + r  # 64-bit: rows·stride passes 2³¹ from n ≈ 46341
    ok = rows < n
    in_triangle = (r[:, None] >= r[None, :]) if LOWER else (r[:, None] <= r[None, :])
    if UNIT:
        in_triangle = in_triangle & (r[:, None] != r[None, :])
    t = _wide(tl.load(a_ptr + rows[:, None] * sam + rows[None, :] * san,
                      mask=ok[:, None] & ok[None, :] & in_triangle, other=0), FP64)
    identity = r[:, None] == r[None, :]
    if UNIT:
        t = tl.where(identity, 1.0, t)
    else:
        t = tl.where(identity & ~ok[:, None], 1.0, t)  # rows past n: an identity block
    inv = _triangular_inverse(t, LOWER, BS, FP64)
    acc = tl.zeros((BS,), tl.float64 if FP64 else tl.float32)
    for step in range(0, order):  # the blocks solved before this one, oldest first
        earlier = step if LOWER else nblocks - 1 - step
        cols = earlier * BS + r.to(tl.int64)
        col_ok = cols < n
        tile = _wide(tl.load(a_ptr + rows[:, None] * sam + cols[None, :] * san,
                             mask=ok[:, None] & col_ok[None, :], other=0), FP64)
        ready = tl.atomic_add(flags_ptr + earlier, 0, sem="acquire")
        while ready == 0:
            ready = tl.atomic_add(flags_ptr + earlier, 0, sem="acquire")
        solved = _wide(tl.load(x_ptr + x_start + cols * incx, mask=col_ok, other=0, cache_modifier=".cg"),
                       FP64)
        acc += tl.sum(tile * solved[None, :], 1)
    xi = x_start + rows * incx
    rhs = _wide(tl.load(x_ptr + xi, mask=ok, other=0), FP64) - acc
    x = tl.sum(inv * rhs[None, :], 1)
    tl.store(x_ptr + xi, convert(x, x_ptr.dtype.element_ty), mask=ok)
    tl.debug_barrier()  # every thread's stores before the flag
    tl.atomic_xchg(flags_ptr + block, 1, sem="release")


gemv_launch = Launcher(_gemv_kernel)
gemv_finish_launch = Launcher(_gemv_finish_kernel)
ger_launch = Launcher(_ger_kernel)
symv_launch = Launcher(_symv_kernel)
symv_finish_launch = Launcher(_symv_finish_kernel)
trsv_launch = Launcher(_trsv_kernel)


def launch_gemv(a: torch.Tensor, sam: int, san: int, m: int, n: int, x: StridedVector, y: StridedVector,
                alpha: float, beta: float, *, fp64: bool, config: GemvConfig, num_sms: int,
                max_split: int = 64, batch: int = 1, a_batch: int = 0) -> None:
    """y ← α op(A)·x + β y for op(A) of m × n elements at a + i·sam + j·san, vectors as (tensor,
    first element, increment[, batch step]), ``batch`` entries (A ``a_batch`` elements apart):
    columns split among programs until about ``config.per_sm`` programs per multiprocessor exist
    (long rows, few rows), the parts added in a fixed order."""
    row_programs = cdiv(m, config.block_m)
    entries = row_programs * batch
    split = max(1, min(cdiv(config.per_sm * num_sms, entries), cdiv(n, 4 * config.block_n), max_split))
    per_split = cdiv(cdiv(n, split), config.block_n) * config.block_n
    split = cdiv(n, per_split)
    ws = scratch("gemv partials", batch * split * m if split > 1 else 1,
                 torch.float64 if fp64 else torch.float32, a.device, False)
    (xd, xs, xi, xb), (yd, ys, yi, yb) = vector_parts(x), vector_parts(y)
    beta_zero = beta == 0.0
    pdl = pdl_mode(ws, PDL_OFF)  # not yet measured with programmatic dependent launch
    gemv_launch((batch_grid(batch, row_programs), split),
                (a, xd, yd, ws, m, n, sam, san, xs, xi, ys, yi, a_batch, xb, yb, alpha, beta, per_split),
                {"SPLIT": split, "BETA_ZERO": beta_zero, "FP64": fp64, "BLOCK_M": config.block_m,
                 "BLOCK_N": config.block_n, "PDL": pdl}, config.num_warps, 3)
    if split > 1:  # one load of [SPLIT, ≤ 128 rows] partials per program: many short programs
        parts = next_power_of_2(split)
        block = max(16, min(128, 8192 // parts))
        gemv_finish_launch((batch_grid(batch, cdiv(m, block)),), (ws, yd, m, ys, yi, yb, alpha, beta),
                           {"SPLIT": split, "BETA_ZERO": beta_zero, "FP64": fp64, "BLOCK": block,
                            "SPLIT_P2": parts, "PDL": pdl}, 4, 3)


def launch_ger(a: torch.Tensor, x: StridedVector, y: StridedVector, alpha: float, *, fp64: bool,
               config: GerConfig) -> None:
    """A ← α x yᵀ + A for a 2-D A, or for each matrix of a 3-D one (any strides), vectors as
    (tensor, first element, increment[, batch step])."""
    m, n = a.shape[-2:]
    batch = a.shape[0] if a.dim() == 3 else 1
    a_batch = a.stride(0) if a.dim() == 3 else 0
    (xd, xs, xi, xb), (yd, ys, yi, yb) = vector_parts(x), vector_parts(y)
    ger_launch((batch_grid(batch, cdiv(m, config.block_m)), cdiv(n, config.block_n)),
               (a, xd, yd, m, n, a.stride(-2), a.stride(-1), xs, xi, ys, yi, a_batch, xb, yb, alpha),
               {"FP64": fp64, "BLOCK_M": config.block_m, "BLOCK_N": config.block_n}, config.num_warps, 3)


def _symv_programs(blocks: int, per_program: int) -> list[tuple[int, int, int]]:
    """(J, I0, I1) per program: the stored tiles (I0 … I1 − 1, J), block column by block column
    (tiles I ≤ J; the diagonal one in the column's last program)."""
    return [(j, i0, min(i0 + per_program, j + 1))
            for j in range(blocks) for i0 in range(0, j + 1, per_program)]


@functools.lru_cache(maxsize=64)
def _symv_plan(blocks: int, per_program: int, device: torch.device) -> torch.Tensor:
    """plan[3p : 3p + 3] = (J, I0, I1) of program p (:func:`_symv_programs`)."""
    return constant(torch.tensor(_symv_programs(blocks, per_program), dtype=torch.int32,
                                 device=device).reshape(-1))


@functools.lru_cache(maxsize=64)
def _symv_order(blocks: int, per_program: int, longest_first: bool, device: torch.device) -> torch.Tensor:
    """The plan rows in launch order: as planned, or (``longest_first``) by tile count, most
    first, block column order among equals."""
    programs = _symv_programs(blocks, per_program)
    rows = list(range(len(programs)))
    if longest_first:
        rows.sort(key=lambda p: programs[p][1] - programs[p][2])
    return constant(torch.tensor(rows, dtype=torch.int32, device=device))


# Both symv launches with PDL at exit: the finish launches as the main kernel's programs exit
# (8192² bf16 on the H200, graph-timed, two rounds: off 30.5 / 30.6 µs, at exit 29.6 / 29.6, early
# 32.1 / 32.2; pdl-symv-h200-5e30bb4/), since 2cda45c as they leave their tile walk
# (``dependents_may_launch``). Early measured again then: 22.9 against 21.3 µs at exit.
SYMV_PDL = PDL_AT_EXIT


def launch_symv(a: torch.Tensor, sam: int, san: int, n: int, x: StridedVector, y: StridedVector, alpha: float,
                beta: float, *, fp64: bool, config: SymvConfig, batch: int = 1, a_batch: int = 0) -> None:
    """y ← α A·x + β y for symmetric A whose upper triangle is at a + i·sam + j·san (i ≤ j), for
    ``batch`` entries (A ``a_batch`` elements apart, vectors as (tensor, first, increment[, batch
    step]))."""
    tile = config.tile
    blocks = cdiv(n, tile)
    plan = _symv_plan(blocks, config.per_program, a.device)
    order = _symv_order(blocks, config.per_program, config.longest_first, a.device)
    programs = plan.numel() // 3
    wide = torch.float64 if fp64 else torch.float32
    # kept per stream (launch.scratch), so that a repeat call replays these launches (blas.repeat)
    ws_row = scratch("symv rows", batch * blocks * n, wide, a.device, False)  # [entry, J, rows I ≤ J]
    ws_col = scratch("symv columns", batch * programs * tile, wide, a.device, False)
    (xd, xs, xi, xb), (yd, ys, yi, yb) = vector_parts(x), vector_parts(y)
    # overlapped: counts left zeroed by each call's finish, which starts once every walk program has
    counts = (scratch("symv counts", batch * 2 * blocks, torch.int32, a.device, True)
              if config.overlap_finish else None)
    pdl = pdl_mode(ws_row, SYMV_PDL)
    main_pdl = pdl_mode(ws_row, PDL_EARLY) if config.overlap_finish else pdl
    symv_launch((batch_grid(batch, programs),),
                (a, xd, plan, order, ws_row, ws_col, counts, n, sam, san, xs, xi, a_batch, xb, programs),
                {"FP64": fp64, "BS": tile, "STAGES": config.num_stages, "PDL": main_pdl}, config.num_warps, 3)
    finish = symv_finish_constexprs(config, blocks, beta == 0.0, fp64, pdl)
    symv_finish_launch((batch_grid(batch, cdiv(n, finish["ROWS"])),),
                       (ws_row, ws_col, counts, yd, n, blocks, config.per_program, ys, yi, yb, programs,
                        alpha, beta), finish, 4, 3)


def symv_finish_constexprs(config: SymvConfig, blocks: int, beta_zero: bool, fp64: bool,
                           pdl: int) -> dict[str, object]:
    """``_symv_finish_kernel``'s constexprs (its grid: ⌈n / ROWS⌉ programs): it loads at most
    8192 partials at a time, so most programs take one load of each kind; ``pdl``: its PDL mode
    (``pdl_mode``)."""
    rows = config.finish_rows or config.tile
    per_load = max(2, 8192 // rows)
    column = next_power_of_2(cdiv(blocks, config.per_program))  # ≥ the programs of a block column
    return {"BETA_ZERO": beta_zero, "FP64": fp64, "BS": config.tile, "ROWS": rows,
            "COLUMN": max(2, min(column, per_load)), "RIGHT": max(2, min(next_power_of_2(blocks), per_load)),
            "PDL": pdl}


def launch_trsv(a: torch.Tensor, sam: int, san: int, n: int, x: StridedVector, *, lower: bool,
                unit_diagonal: bool, fp64: bool, config: TrsvConfig, batch: int = 1,
                a_batch: int = 0) -> None:
    """Solve the triangular system in place (``lower`` after any transpose folded into the strides)
    for ``batch`` entries (A ``a_batch`` elements apart; x as (tensor, first, increment[, batch step]))."""
    blocks = cdiv(n, config.block)
    flags = torch.zeros(batch, blocks + 1, dtype=torch.int32, device=a.device)  # per block, then the ticket
    xd, xs, xi, xb = vector_parts(x)
    trsv_launch((batch_grid(batch, blocks),), (a, xd, flags, n, sam, san, xs, xi, a_batch, xb),
                {"LOWER": lower, "UNIT": unit_diagonal, "FP64": fp64, "BS": config.block},
                config.num_warps, 1)


REPRESENTATIVE_GEMV = 8192  # rows and columns of the matrix a pack precompiles level 2 for


def representative_launch(op: str, config: GemvConfig | GemvGemmConfig | GerConfig | SymvConfig | TrsvConfig,
                          dtype: str, num_sms: int) -> None:
    """The launches ``op`` makes with ``config`` for a contiguous 8192² matrix, unit increments,
    α = 1, β = 0 (symv also β ≠ 0; trsv upper and lower, unit diagonal or not) — gemv with dtype
    ``…_t`` on op(A)'s columns contiguous (run under ``tessera._core.launch.capture()``). A gemv
    taken as a GEMM makes no launch of its own: the GEMM's binaries come with the GEMM logic's
    solutions, whose representative launches include one-row problems."""
    if isinstance(config, GemvGemmConfig):
        return
    size = REPRESENTATIVE_GEMV
    elem = torch_dtype(dtype.removesuffix("_t"))
    fp64 = elem == torch.float64
    a = torch.empty(size, size, dtype=elem)
    x, y = torch.empty(size, dtype=elem), torch.empty(size, dtype=elem)
    if isinstance(config, GemvConfig):
        sam, san = (1, size) if dtype.endswith("_t") else (size, 1)
        launch_gemv(a, sam, san, size, size, (x, 0, 1), (y, 0, 1), 1.0, 0.0, fp64=fp64, config=config,
                    num_sms=num_sms)
    elif isinstance(config, GerConfig):
        launch_ger(a, (x, 0, 1), (y, 0, 1), 1.5, fp64=fp64, config=config)
    elif isinstance(config, SymvConfig):
        for beta in (0.0, 1.0):
            launch_symv(a, size, 1, size, (x, 0, 1), (y, 0, 1), 1.0, beta, fp64=fp64, config=config)
    else:
        for lower in (False, True):
            for unit in (False, True):
                launch_trsv(a, size, 1, size, (x, 0, 1), lower=lower, unit_diagonal=unit, fp64=fp64,
                            config=config)
